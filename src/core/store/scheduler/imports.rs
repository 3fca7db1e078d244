//! The `imports` table: one row per imported bundle.

use crate::core::store::StoreError;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// One row of `imports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRecord {
    pub id: i64,
    pub import_batch: String,
    pub tenant_id: String,
    pub bundle_id: String,
    pub manifest_digest: String,
    pub created_by_node_id: String,
    pub signed_by: Option<String>,
    pub signer: Option<String>,
    pub file_name: String,
    pub entries: u64,
    pub new_entries: u64,
    pub duplicates: u64,
    pub dropped: u64,
    pub forced: bool,
    pub imported_at: String,
}

/// Writes an `imports` row; returns its id.
pub fn insert_import(conn: &Connection, r: &ImportRecord) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO imports (import_batch, tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer,
                              file_name, entries, new_entries, duplicates, dropped, forced, imported_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![
        r.import_batch,
        r.tenant_id,
        r.bundle_id,
        r.manifest_digest,
        r.created_by_node_id,
        r.signed_by,
        r.signer,
        r.file_name,
        r.entries as i64,
        r.new_entries as i64,
        r.duplicates as i64,
        r.dropped as i64,
        r.forced,
        r.imported_at
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The earlier import of exactly this bundle (same id and manifest digest), if any.
pub fn find_import(
    conn: &Connection,
    tenant: &str,
    bundle_id: &str,
    manifest_digest: &str,
) -> Result<Option<ImportRecord>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT id, import_batch, tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer,
                    file_name, entries, new_entries, duplicates, dropped, forced, imported_at
             FROM imports WHERE tenant_id = ?1 AND bundle_id = ?2 AND manifest_digest = ?3
             ORDER BY (dropped = 0) DESC, id LIMIT 1",
            params![tenant, bundle_id, manifest_digest],
            |r| {
                Ok(ImportRecord {
                    id: r.get(0)?,
                    import_batch: r.get(1)?,
                    tenant_id: r.get(2)?,
                    bundle_id: r.get(3)?,
                    manifest_digest: r.get(4)?,
                    created_by_node_id: r.get(5)?,
                    signed_by: r.get(6)?,
                    signer: r.get(7)?,
                    file_name: r.get(8)?,
                    entries: r.get::<_, i64>(9)? as u64,
                    new_entries: r.get::<_, i64>(10)? as u64,
                    duplicates: r.get::<_, i64>(11)? as u64,
                    dropped: r.get::<_, i64>(12)? as u64,
                    forced: r.get(13)?,
                    imported_at: r.get(14)?,
                })
            },
        )
        .optional()?)
}
