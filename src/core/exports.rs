//! The portable exports a store knows (table `exports`, migration 4), which `airlock serve` offers
//! at `/v1/exports/airgap/evidence/{exportId}/download` (SPEC section 10's `artifact_uri`).
//!
//! Whoever writes a portable export (`export-portable-bundle-v1.tgz`) records it with
//! [`record_export`]: its `export_id`, the `bundleId`, the file's path, its `artifact_sha256` and
//! size. [`open_export`] finds it again and checks that the file on disk is still that artifact
//! before anything is sent.

use crate::core::store::backend::{Backend, StoreTx, TxKind};
use crate::core::store::{sql, StoreError};
use sha2::{Digest, Sha256};
use std::io::{Read, Seek};
use std::path::PathBuf;

/// One recorded export.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportRecord {
    pub export_id: String,
    pub bundle_id: String,
    pub path: PathBuf,
    pub artifact_sha256: String,
    pub size_bytes: u64,
    pub created_at: String,
}

/// Why an export cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ExportLookupError {
    #[error("export ids are UUIDs; {0:?} is not one")]
    BadId(String),
    #[error("no export {0} in this store")]
    NotFound(String),
    #[error("export {id}: its file {path} cannot be read ({message}); export it again")]
    Unreadable {
        id: String,
        path: String,
        message: String,
    },
    #[error("export {id}: the file {path} is no longer the recorded artifact (sha256 {found}, recorded {recorded}); export it again")]
    Changed {
        id: String,
        path: String,
        found: String,
        recorded: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Records (or re-records) an export.
pub fn record_export(store: &dyn Backend, r: &ExportRecord) -> Result<(), StoreError> {
    let mut tx = store.begin(TxKind::Write)?;
    record_export_in(&mut *tx, r)?;
    tx.commit()
}

/// [`record_export`] inside a caller's transaction (a portable export records its download row
/// in the same transaction as its emission).
pub fn record_export_in(tx: &mut dyn StoreTx, r: &ExportRecord) -> Result<(), StoreError> {
    sql::exec(
        tx,
        "INSERT INTO exports (export_id, bundle_id, path, artifact_sha256, size_bytes, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (export_id) DO UPDATE SET path = excluded.path, created_at = excluded.created_at",
        &[
            (&r.export_id).into(),
            (&r.bundle_id).into(),
            r.path.display().to_string().into(),
            (&r.artifact_sha256).into(),
            r.size_bytes.into(),
            (&r.created_at).into(),
        ],
    )?;
    Ok(())
}

/// The recorded export `export_id`, if any.
pub fn find_export(
    store: &dyn Backend,
    export_id: &str,
) -> Result<Option<ExportRecord>, ExportLookupError> {
    // Hyphenated UUID text in either case (UUIDs are case-insensitive; exports record the
    // lowercase form); braces, URNs and the simple form are refused.
    let canonical = uuid::Uuid::parse_str(export_id)
        .map(|u| u.hyphenated().to_string())
        .ok()
        .filter(|c| c.eq_ignore_ascii_case(export_id))
        .ok_or_else(|| ExportLookupError::BadId(export_id.to_string()))?;
    let export_id = canonical.as_str();
    let mut tx = store.begin(TxKind::Read)?;
    let row = sql::query_opt(
        &mut *tx,
        "exports",
        "SELECT export_id, bundle_id, path, artifact_sha256, size_bytes, created_at FROM exports
         WHERE export_id = ?1",
        &[export_id.into()],
    )?;
    let rec = row.map(|r| -> Result<ExportRecord, StoreError> {
        Ok(ExportRecord {
            export_id: r.text(0)?,
            bundle_id: r.text(1)?,
            path: PathBuf::from(r.text(2)?),
            artifact_sha256: r.text(3)?,
            size_bytes: r.u64(4)?,
            created_at: r.text(5)?,
        })
    });
    Ok(rec.transpose()?)
}

/// Finds the export and checks its file against the recorded size and SHA-256; returns the record
/// and the opened file, ready to send.
pub fn open_export(
    store: &dyn Backend,
    export_id: &str,
) -> Result<(ExportRecord, std::fs::File), ExportLookupError> {
    let rec = find_export(store, export_id)?
        .ok_or_else(|| ExportLookupError::NotFound(export_id.to_string()))?;
    let path = crate::core::text::visible_path(&rec.path);
    let unreadable = |e: std::io::Error| ExportLookupError::Unreadable {
        id: rec.export_id.clone(),
        path: path.clone(),
        message: e.to_string(),
    };
    // A regular file only: a FIFO put at the path would block the open (and the download, and a
    // serve's shutdown) until a writer appears.
    let mut file = crate::core::file_input::open_regular(&rec.path).map_err(unreadable)?;
    let mut hasher = Sha256::new();
    let mut reader = (&file).take(rec.size_bytes + 1);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let found = hex::encode(hasher.finalize());
    if found != rec.artifact_sha256 {
        return Err(ExportLookupError::Changed {
            id: rec.export_id.clone(),
            path,
            found,
            recorded: rec.artifact_sha256.clone(),
        });
    }
    // The very file that was checked is sent (a path opened again could be another file by now).
    file.seek(std::io::SeekFrom::Start(0)).map_err(unreadable)?;
    Ok((rec, file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::Store;

    #[test]
    fn exports_are_found_checked_and_refused_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        let id = "0b7ec3b6-8f8a-5b8e-9d0c-2f1f3c1d2e4a";
        assert!(matches!(
            open_export(&store, id),
            Err(ExportLookupError::NotFound(_))
        ));
        assert!(matches!(
            open_export(&store, "../x"),
            Err(ExportLookupError::BadId(_))
        ));
        for not_hyphenated in [
            "0b7ec3b68f8a5b8e9d0c2f1f3c1d2e4a",
            "{0b7ec3b6-8f8a-5b8e-9d0c-2f1f3c1d2e4a}",
        ] {
            assert!(matches!(
                open_export(&store, not_hyphenated),
                Err(ExportLookupError::BadId(_))
            ));
        }
        let path = dir.path().join("export-portable-bundle-v1.tgz");
        std::fs::write(&path, b"artifact").unwrap();
        let rec = ExportRecord {
            export_id: id.into(),
            bundle_id: "b".into(),
            path: path.clone(),
            artifact_sha256: hex::encode(Sha256::digest(b"artifact")),
            size_bytes: 8,
            created_at: "2026-01-01T00:00:00.000Z".into(),
        };
        record_export(&store, &rec).unwrap();
        let (found, _f) = open_export(&store, id).unwrap();
        assert_eq!(found, rec);
        let (upper, _f) = open_export(&store, &id.to_uppercase()).unwrap();
        assert_eq!(upper, rec);
        std::fs::write(&path, b"artifacT").unwrap();
        assert!(matches!(
            open_export(&store, id),
            Err(ExportLookupError::Changed { .. })
        ));
    }
}
