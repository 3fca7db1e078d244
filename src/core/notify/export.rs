//! Writing a portable export (SPEC section 10) and recording its emission.
//!
//! `DIR/export-portable-bundle-v1.tgz` holds `portable-bundle-v1.tgz`, which holds `bundle.json`,
//! `checksums.txt`, and when signed `bundle.dsse.json` and `signer.pub.pem`. The same logs exported
//! again reuse the bundle identity (bundleId, createdAt, createdByNodeId) of their first portable
//! export, so the same logs give the same bytes, the same export_id, and no new emission.

use super::archive::tgz_bytes;
use super::checksums::{checksums_txt, root_hash, sha256_hex, FileDigest, CHECKSUMS_NAME};
use super::event::{ExportFacts, ExportReadyEvent, EVENT_TYPE};
use super::portable::{BUNDLE_NAME, DSSE_NAME, INNER_NAME, OUTER_NAME, SIGNER_NAME};
use super::store::{earlier_identity, record_export, EmissionOutcome, ExportRecord};
use crate::core::bundle::{BundleHeader, BUNDLE_PAYLOAD_TYPE};
use crate::core::store::backend::Backend;
use crate::core::store::nodelog::{self, BundleIdentity, ExportError, ExportSummary};
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;
use crate::core::trust::{
    bundle_statement, dsse_envelope, key_id, public_key_pem, sign_header, SigningKey,
};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What to export.
pub struct PortableRequest<'a> {
    pub tenant: &'a str,
    pub node: Option<&'a str>,
    /// This machine's node id (`createdByNodeId` of a new bundle).
    pub created_by: &'a str,
    pub sign_with: Option<&'a SigningKey>,
    /// The directory that receives `export-portable-bundle-v1.tgz`.
    pub out_dir: &'a Path,
    /// `expires_at` of the event, when retention is configured.
    pub expires_at: Option<String>,
    pub now_ms: u64,
}

/// What a portable export wrote and emitted.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortableExport {
    pub path: PathBuf,
    pub export_id: String,
    pub artifact_sha256: String,
    pub root_hash: String,
    pub checksums_txt: String,
    pub portable_size_bytes: u64,
    pub export_size_bytes: u64,
    pub bundle: ExportSummary,
    /// True when an earlier export of the same logs was reused (same bytes).
    pub reused_identity: bool,
    pub emission: EmissionOutcome,
    /// The event body (JCS).
    pub event: String,
}

/// Why a portable export failed (nothing was recorded).
#[derive(Debug, thiserror::Error)]
pub enum PortableExportError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("{path} is not a directory; -o names the directory that receives {OUTER_NAME}")]
    NotDir { path: String },
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The files of the inner archive and the archives' bytes.
pub struct PortableFiles {
    pub checksums_txt: String,
    pub root_hash: String,
    pub inner: Vec<u8>,
    pub outer: Vec<u8>,
}

/// Builds both archives from the inner files (name, bytes), `checksums.txt` excluded.
pub fn build_archives(files: &[(&str, &[u8])]) -> std::io::Result<PortableFiles> {
    let digests: Vec<FileDigest> = files.iter().map(|(n, b)| FileDigest::of(n, b)).collect();
    let text = checksums_txt(&digests);
    let lines = super::checksums::parse_checksums(&text)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut all: Vec<(&str, &[u8])> = files.to_vec();
    all.push((CHECKSUMS_NAME, text.as_bytes()));
    let inner = tgz_bytes(&all)?;
    let outer = tgz_bytes(&[(INNER_NAME, &inner)])?;
    Ok(PortableFiles {
        root_hash: root_hash(&lines),
        checksums_txt: text,
        inner,
        outer,
    })
}

/// Exports the tenant's logs as a portable export into `req.out_dir`, then records the export and
/// its emission in one transaction.
pub fn export_portable(
    store: &dyn Backend,
    req: &PortableRequest<'_>,
) -> Result<PortableExport, PortableExportError> {
    if !req.out_dir.is_dir() {
        return Err(PortableExportError::NotDir {
            path: crate::core::text::visible_path(req.out_dir),
        });
    }
    let node_filter = req.node.unwrap_or("");
    let signed_by = req
        .sign_with
        .map(|k| key_id(&k.verifying_key()))
        .unwrap_or_default();
    let mut chosen: Option<(BundleIdentity, bool)> = None;
    let mut bundle = Vec::new();
    let signer = req
        .sign_with
        .map(|k| move |h: &BundleHeader| Ok(sign_header(k, h)));
    let sign_ref: Option<nodelog::HeaderSigner<'_>> =
        signer.as_ref().map(|f| f as nodelog::HeaderSigner<'_>);
    let summary = crate::core::store::rules::export_as(
        store,
        req.tenant,
        req.node,
        &mut bundle,
        sign_ref,
        |tx, digest| {
            let earlier = earlier_identity(tx, req.tenant, node_filter, digest, &signed_by)?;
            let id = match &earlier {
                Some((bundle_id, created_at, created_by)) => BundleIdentity {
                    bundle_id: bundle_id.clone(),
                    created_at: created_at.clone(),
                    created_by: created_by.clone(),
                },
                None => BundleIdentity {
                    bundle_id: uuid::Uuid::new_v4().to_string(),
                    created_at: rfc3339_millis(req.now_ms),
                    created_by: req.created_by.to_string(),
                },
            };
            chosen = Some((id.clone(), earlier.is_some()));
            Ok(id)
        },
    )?;
    let (identity, reused) = chosen.unwrap_or_else(|| {
        (
            BundleIdentity {
                bundle_id: summary.bundle_id.clone(),
                created_at: summary.created_at.clone(),
                created_by: req.created_by.to_string(),
            },
            false,
        )
    });
    let header = BundleHeader {
        bundle_id: summary.bundle_id.clone(),
        tenant_id: summary.tenant_id.clone(),
        created_at: summary.created_at.clone(),
        created_by_node_id: identity.created_by.clone(),
        manifest_digest: summary.manifest_digest.clone(),
        signature: None,
        signed_by: None,
    };
    let files = inner_files(&header, bundle, req.sign_with);
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let path = req.out_dir.join(OUTER_NAME);
    let shown = crate::core::text::visible_path(&path);
    let write_err = |message: String| PortableExportError::Write {
        path: shown.clone(),
        message,
    };
    let built = build_archives(&refs).map_err(|e| write_err(e.to_string()))?;
    // A name chosen here, in the folder given: a link planted there is replaced, not followed.
    crate::core::file_output::write_atomic_no_follow(&path, &built.outer)
        .map_err(|e| write_err(e.to_string()))?;
    let artifact_sha256 = sha256_hex(&built.outer);
    let event = ExportReadyEvent::new(&ExportFacts {
        bundle_id: summary.bundle_id.clone(),
        tenant_id: summary.tenant_id.clone(),
        root_hash: built.root_hash.clone(),
        artifact_sha256: artifact_sha256.clone(),
        created_at: rfc3339_millis(req.now_ms),
        expires_at: req.expires_at.clone(),
        portable_size_bytes: built.inner.len() as u64,
        export_size_bytes: built.outer.len() as u64,
    });
    let record = ExportRecord {
        export_id: event.export_id.clone(),
        artifact_sha256: artifact_sha256.clone(),
        bundle_id: summary.bundle_id.clone(),
        tenant_id: summary.tenant_id.clone(),
        node_filter: node_filter.to_string(),
        manifest_digest: summary.manifest_digest.clone(),
        signed_by,
        bundle_created_at: summary.created_at.clone(),
        bundle_created_by: identity.created_by,
        root_hash: built.root_hash.clone(),
        portable_size_bytes: event.metadata.portable_size_bytes,
        export_size_bytes: event.metadata.export_size_bytes,
        file_path: std::fs::canonicalize(&path)
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
        created_at: rfc3339_millis(req.now_ms),
    };
    let body = event.body();
    let emission = record_export(store, &record, EVENT_TYPE, &body, req.now_ms)?;
    Ok(PortableExport {
        path,
        export_id: event.export_id,
        artifact_sha256,
        root_hash: built.root_hash,
        checksums_txt: built.checksums_txt,
        portable_size_bytes: record.portable_size_bytes,
        export_size_bytes: record.export_size_bytes,
        bundle: summary,
        reused_identity: reused,
        emission,
        event: body,
    })
}

/// `bundle.json`, and when signed `bundle.dsse.json` (the DSSE envelope of the bundle's signature)
/// and `signer.pub.pem`. `header` is the bundle's unsigned header.
fn inner_files(
    header: &BundleHeader,
    bundle: Vec<u8>,
    key: Option<&SigningKey>,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut files = vec![(BUNDLE_NAME, bundle)];
    if let Some(key) = key {
        // ed25519 signatures are deterministic: this is the signature written into the bundle.
        let (sig, by) = sign_header(key, header);
        let env = dsse_envelope(BUNDLE_PAYLOAD_TYPE, &bundle_statement(header), &sig, &by);
        let mut text = serde_json::to_string_pretty(&env).unwrap_or_default();
        text.push('\n');
        files.push((DSSE_NAME, text.into_bytes()));
        files.push((
            SIGNER_NAME,
            public_key_pem(&key.verifying_key()).into_bytes(),
        ));
    }
    files
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::hlc::SystemWallClock;
    use crate::core::notify::archive::Limits;
    use crate::core::notify::portable::{open_portable, PortableError};
    use crate::core::store::nodelog::NewJob;
    use crate::core::store::rules::enqueue;
    use crate::core::store::Store;

    /// A store with two jobs for tenant `acme`.
    pub(crate) fn store_with_jobs() -> Store {
        let store = Store::open_in_memory().unwrap();
        let jobs: Vec<NewJob> = (0..2)
            .map(|i| NewJob {
                payload_json: format!("{{\"n\":{i}}}"),
                partition_key: None,
                idempotency_key: None,
                origin: format!("job {i}"),
            })
            .collect();
        enqueue(&store, "acme", "node-a", &jobs, SystemWallClock).unwrap();
        store
    }

    pub(crate) fn request<'a>(dir: &'a Path, key: Option<&'a SigningKey>) -> PortableRequest<'a> {
        PortableRequest {
            tenant: "acme",
            node: None,
            created_by: "exporter",
            sign_with: key,
            out_dir: dir,
            expires_at: None,
            now_ms: 1_767_614_400_000,
        }
    }

    #[test]
    fn same_logs_same_bytes_and_one_emission() {
        let store = store_with_jobs();
        let dir = tempfile::tempdir().unwrap();
        let first = export_portable(&store, &request(dir.path(), None)).unwrap();
        let bytes1 = std::fs::read(&first.path).unwrap();
        assert!(matches!(first.emission, EmissionOutcome::Emitted { .. }));
        assert!(!first.reused_identity);
        let mut later = request(dir.path(), None);
        later.now_ms += 60_000;
        let second = export_portable(&store, &later).unwrap();
        assert_eq!(std::fs::read(&second.path).unwrap(), bytes1);
        assert_eq!(second.export_id, first.export_id);
        assert!(second.reused_identity);
        assert!(matches!(
            second.emission,
            EmissionOutcome::AlreadyEmitted { .. }
        ));
        assert_eq!(
            crate::core::notify::store::emissions(&store).unwrap().len(),
            1
        );
        // The reader agrees with the writer on every derived value.
        let c = open_portable(&first.path, Limits::default()).unwrap();
        assert_eq!(c.artifact_sha256, first.artifact_sha256);
        assert_eq!(c.root_hash, first.root_hash);
        assert_eq!(c.export_size_bytes, bytes1.len() as u64);
        assert_eq!(c.portable_size_bytes, first.portable_size_bytes);
        assert_eq!(c.lines.len(), 1);
        // The event body is the stored one, and it names this export.
        let ev = crate::core::notify::event::ExportReadyEvent::parse(&first.event).unwrap();
        assert_eq!(ev.export_id, first.export_id);
        assert_eq!(ev.tenant_id, "acme");
        // `airlock serve` finds the artifact to download by export id, and it checks out.
        let served = crate::core::exports::find_export(&store, &first.export_id)
            .unwrap()
            .expect("the portable export is recorded for the download route");
        assert_eq!(served.artifact_sha256, first.artifact_sha256);
        assert_eq!(served.size_bytes, bytes1.len() as u64);
        assert_eq!(std::fs::read(&served.path).unwrap(), bytes1);
    }

    #[test]
    fn new_entries_make_a_new_export_and_emission() {
        let store = store_with_jobs();
        let dir = tempfile::tempdir().unwrap();
        let first = export_portable(&store, &request(dir.path(), None)).unwrap();
        let more = [NewJob {
            payload_json: "{\"n\":9}".into(),
            partition_key: None,
            idempotency_key: None,
            origin: "job 9".into(),
        }];
        enqueue(&store, "acme", "node-a", &more, SystemWallClock).unwrap();
        let second = export_portable(&store, &request(dir.path(), None)).unwrap();
        assert_ne!(second.export_id, first.export_id);
        assert!(matches!(second.emission, EmissionOutcome::Emitted { .. }));
        assert_eq!(
            crate::core::notify::store::emissions(&store).unwrap().len(),
            2
        );
    }

    #[test]
    fn signed_export_carries_envelope_and_key() {
        let store = store_with_jobs();
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let e = export_portable(&store, &request(dir.path(), Some(&key))).unwrap();
        let c = open_portable(&e.path, Limits::default()).unwrap();
        let names: Vec<&str> = c.lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, [DSSE_NAME, BUNDLE_NAME, SIGNER_NAME]);
        let env: crate::core::trust::DsseEnvelope =
            serde_json::from_slice(c.dsse.as_ref().unwrap()).unwrap();
        let mut trust = crate::core::trust::TrustSet::empty();
        trust.add_key("k", key.verifying_key(), "test");
        assert!(env.check(&trust).is_valid());
        let pem = String::from_utf8(c.signer_pem.unwrap()).unwrap();
        assert_eq!(pem, public_key_pem(&key.verifying_key()));
        // Signed again with the same key: same bytes (ed25519 is deterministic).
        let again = export_portable(&store, &request(dir.path(), Some(&key))).unwrap();
        assert_eq!(again.artifact_sha256, e.artifact_sha256);
    }

    #[test]
    fn tampered_archive_is_refused_naming_the_file() {
        let good = build_archives(&[(BUNDLE_NAME, b"{}\n"), (SIGNER_NAME, b"pem\n")]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // bundle.json replaced, checksums.txt kept: the archive is rebuilt around the old list.
        let forged_inner = crate::core::notify::archive::tgz_bytes(&[
            (BUNDLE_NAME, b"{\"x\":1}\n"),
            (SIGNER_NAME, b"pem\n"),
            (CHECKSUMS_NAME, good.checksums_txt.as_bytes()),
        ])
        .unwrap();
        let forged =
            crate::core::notify::archive::tgz_bytes(&[(INNER_NAME, &forged_inner)]).unwrap();
        let path = dir.path().join(OUTER_NAME);
        std::fs::write(&path, &forged).unwrap();
        let err = open_portable(&path, Limits::default()).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, PortableError::Tampered { .. }), "{text}");
        assert!(
            text.contains("bundle.json differs from checksums.txt"),
            "{text}"
        );
        assert!(!text.contains("signer.pub.pem differs"), "{text}");
        // A file added without being listed, and a listed file removed.
        let inner = crate::core::notify::archive::tgz_bytes(&[
            (BUNDLE_NAME, b"{}\n"),
            (DSSE_NAME, b"{}\n"),
            (CHECKSUMS_NAME, good.checksums_txt.as_bytes()),
        ])
        .unwrap();
        let outer = crate::core::notify::archive::tgz_bytes(&[(INNER_NAME, &inner)]).unwrap();
        std::fs::write(&path, &outer).unwrap();
        let text = open_portable(&path, Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("bundle.dsse.json is in the archive but not in checksums.txt"),
            "{text}"
        );
        assert!(
            text.contains("signer.pub.pem is listed in checksums.txt but missing"),
            "{text}"
        );
        // A stray file in the outer archive.
        let outer = crate::core::notify::archive::tgz_bytes(&[
            (INNER_NAME, &good.inner),
            ("run-me.sh", b"#!/bin/sh\n"),
        ])
        .unwrap();
        std::fs::write(&path, &outer).unwrap();
        let text = open_portable(&path, Limits::default())
            .unwrap_err()
            .to_string();
        assert!(text.contains("unexpected file run-me.sh"), "{text}");
        // The untouched archive opens.
        std::fs::write(&path, &good.outer).unwrap();
        assert!(open_portable(&path, Limits::default()).is_ok());
    }

    #[test]
    fn inner_expansion_is_capped() {
        let zeros = vec![b' '; 3 << 20];
        let built = build_archives(&[(BUNDLE_NAME, &zeros)]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(OUTER_NAME);
        std::fs::write(&path, &built.outer).unwrap();
        let limits = Limits {
            max_expanded_bytes: 1 << 20,
            max_entries: 16,
        };
        let err = open_portable(&path, limits).unwrap_err().to_string();
        assert!(err.contains("expands past the limit"), "{err}");
    }

    mod queue {
        use super::*;
        use crate::core::notify::signature::MAX_ATTEMPTS;
        use crate::core::notify::store::*;

        fn failed(at: u64, status: Option<u16>) -> AttemptResult {
            AttemptResult {
                sent_at: crate::core::time::rfc3339_millis(at),
                sent_at_ms: at,
                delivered: false,
                status,
                reason: Some("HTTP 503".into()),
            }
        }

        fn ids(claims: Vec<Claim>) -> Vec<i64> {
            claims.into_iter().map(|c| c.delivery_id).collect()
        }

        /// Claims delivery `id` at `t` (it must be due) and records `a` under that claim.
        fn claim_and_record(
            store: &dyn crate::core::store::backend::Backend,
            id: i64,
            a: &AttemptResult,
            t: u64,
        ) -> AfterAttempt {
            let c = claim(store, &[id], t).unwrap();
            assert_eq!(ids(c.clone()), vec![id], "claimable at {t}");
            record_attempt(store, &c[0], a, t).unwrap()
        }

        #[test]
        fn schedule_dead_letter_retry_and_interrupted_attempts() {
            let store = store_with_jobs();
            let dir = tempfile::tempdir().unwrap();
            export_portable(&store, &request(dir.path(), None)).unwrap();
            let hook = TargetKey::webhook("http://127.0.0.1:9/h");
            let hooks = std::slice::from_ref(&hook);
            assert_eq!(enroll(&store, hooks, 1000).unwrap(), 1);
            assert_eq!(enroll(&store, hooks, 1000).unwrap(), 0);
            let id = due(&store, hooks, 1000).unwrap()[0].delivery_id;
            // A crash during the first attempt: once its claim has expired, the next run records
            // it as interrupted (not counted) and sends it again.
            assert_eq!(ids(claim(&store, &[id], 1000).unwrap()), vec![id]);
            let mut c = claim(&store, &[id], 1000 + CLAIM_LEASE_MS).unwrap();
            assert_eq!(ids(c.clone()), vec![id]);
            let mut t = 2000;
            let mut afters = Vec::new();
            for i in 0..MAX_ATTEMPTS {
                if i > 0 {
                    c = claim(&store, &[id], t).unwrap();
                }
                afters.push(record_attempt(&store, &c[0], &failed(t, Some(503)), t).unwrap());
                t += 20_000;
            }
            let expected: Vec<AfterAttempt> = [1000, 2000, 4000, 8000, 16000]
                .iter()
                .enumerate()
                .map(|(i, d)| AfterAttempt::RetryAt(2000 + i as u64 * 20_000 + d))
                .chain([AfterAttempt::Dead])
                .collect();
            assert_eq!(afters, expected);
            let row = delivery_by_id(&store, id).unwrap().unwrap();
            assert_eq!(
                (row.status.as_str(), row.attempts, row.last_status),
                ("dead", 6, Some(503))
            );
            let history = attempts(&store, id).unwrap();
            assert_eq!(history.len(), 7);
            assert_eq!(history[0].outcome, "interrupted");
            assert_eq!(counts(&store).unwrap().dead_letters, 1);
            let dead = unpublished_dead(&store).unwrap();
            assert_eq!(dead.len(), 1);
            assert_eq!(dead[0].failed_attempts, 6);
            // Retry: back to pending, due now; only dead deliveries can be retried.
            retry(&store, id, t).unwrap();
            assert_eq!(due(&store, hooks, t).unwrap().len(), 1);
            assert!(matches!(
                retry(&store, id, t),
                Err(DeliveryActionError::NotDead { .. })
            ));
            assert!(matches!(
                retry(&store, 999, t),
                Err(DeliveryActionError::Unknown(999))
            ));
            let ok = AttemptResult {
                delivered: true,
                status: Some(204),
                reason: None,
                ..failed(t, None)
            };
            assert_eq!(
                claim_and_record(&store, id, &ok, t),
                AfterAttempt::Delivered
            );
            let c = counts(&store).unwrap();
            assert_eq!(c.emissions, 1);
            assert_eq!(
                c.deliveries,
                vec![("webhook".into(), "delivered".into(), 1)]
            );
            assert_eq!(
                c.dead_letters, 1,
                "dead letters count every dead-lettering, retried or not"
            );
        }

        /// A store whose one export is enrolled for one webhook at t = 1000: the store, the export's
        /// directory (kept while the test runs) and the webhook.
        fn enrolled() -> (Store, tempfile::TempDir, TargetKey) {
            let store = store_with_jobs();
            let dir = tempfile::tempdir().unwrap();
            export_portable(&store, &request(dir.path(), None)).unwrap();
            let hook = TargetKey::webhook("http://127.0.0.1:9/h");
            assert_eq!(
                enroll(&store, std::slice::from_ref(&hook), 1000).unwrap(),
                1
            );
            (store, dir, hook)
        }

        /// A claim younger than the lease belongs to a runner sending the delivery now: another
        /// runner neither sees it as due nor claims it, nor records a false `interrupted` attempt;
        /// it looks again soon, and takes over only once the claim has expired (a crash).
        #[test]
        fn a_live_claim_shuts_out_other_runners_until_it_expires() {
            let (store, _dir, hook) = enrolled();
            let hooks = std::slice::from_ref(&hook);
            let id = due(&store, hooks, 1000).unwrap()[0].delivery_id;
            let first = claim(&store, &[id], 1000).unwrap();
            assert_eq!(ids(first.clone()), vec![id]);
            // The second runner, 5 s later, while the first one waits for the receiver.
            assert!(due(&store, hooks, 6000).unwrap().is_empty());
            assert!(claim(&store, &[id], 6000).unwrap().is_empty());
            assert_eq!(
                next_due(&store, hooks, 6000).unwrap(),
                Some(6000 + CLAIM_RECHECK_MS)
            );
            assert!(
                attempts(&store, id).unwrap().is_empty(),
                "nothing interrupted"
            );
            // The first runner records its attempt: nobody sends it again.
            let ok = AttemptResult {
                delivered: true,
                status: Some(200),
                reason: None,
                ..failed(7000, None)
            };
            record_attempt(&store, &first[0], &ok, 7000).unwrap();
            assert!(claim(&store, &[id], 8000).unwrap().is_empty());
            assert_eq!(next_due(&store, hooks, 8000).unwrap(), None);
            let history = attempts(&store, id).unwrap();
            assert_eq!(history.len(), 1);
            assert_eq!(history[0].outcome, "delivered");
        }

        /// A runner whose claim expired and was taken over does not record its result: the newer
        /// claimer's outcome stands, whichever of the two finishes first.
        #[test]
        fn a_runner_whose_claim_was_taken_over_does_not_record_its_result() {
            let (store, dir, hook) = enrolled();
            let id = deliveries(&store, None).unwrap()[0].delivery_id;
            let ok = AttemptResult {
                delivered: true,
                status: Some(204),
                reason: None,
                ..failed(31_000, None)
            };
            // The stale runner finishes last: its failure does not undo the delivery.
            let stale = claim(&store, &[id], 1000).unwrap();
            let newer = claim(&store, &[id], 1000 + CLAIM_LEASE_MS).unwrap();
            assert_ne!(stale[0].token, newer[0].token);
            assert_eq!(
                record_attempt(&store, &newer[0], &ok, 31_500).unwrap(),
                AfterAttempt::Delivered
            );
            assert_eq!(
                record_attempt(&store, &stale[0], &failed(32_000, Some(503)), 32_000).unwrap(),
                AfterAttempt::Superseded
            );
            let row = delivery_by_id(&store, id).unwrap().unwrap();
            assert_eq!(
                (row.status.as_str(), row.attempts, row.last_status),
                ("delivered", 1, Some(204))
            );
            let outcomes: Vec<String> = attempts(&store, id)
                .unwrap()
                .into_iter()
                .map(|a| a.outcome)
                .collect();
            assert_eq!(outcomes, ["interrupted", "delivered"]);
            // The stale runner finishes first: it records nothing, the newer one still records.
            let store2 = store_with_jobs();
            export_portable(&store2, &request(dir.path(), None)).unwrap();
            enroll(&store2, std::slice::from_ref(&hook), 1000).unwrap();
            let id = deliveries(&store2, None).unwrap()[0].delivery_id;
            let stale = claim(&store2, &[id], 1000).unwrap();
            let newer = claim(&store2, &[id], 1000 + CLAIM_LEASE_MS).unwrap();
            assert_eq!(
                record_attempt(&store2, &stale[0], &ok, 31_200).unwrap(),
                AfterAttempt::Superseded
            );
            let row = delivery_by_id(&store2, id).unwrap().unwrap();
            assert_eq!((row.status.as_str(), row.attempts), ("pending", 0));
            assert_eq!(
                record_attempt(&store2, &newer[0], &failed(31_500, Some(503)), 31_500).unwrap(),
                AfterAttempt::RetryAt(32_500)
            );
        }

        /// Sets the recorded claim holder of delivery `id`.
        fn set_holder(store: &Store, id: i64, holder: &crate::core::notify::holder::Holder) {
            use crate::core::store::backend::{Backend, TxKind};
            let mut tx = store.begin(TxKind::Write).unwrap();
            crate::core::store::sql::exec(
                &mut *tx,
                "UPDATE notify_deliveries SET claim_holder = ?2 WHERE delivery_id = ?1",
                &[id.into(), holder.to_text().into()],
            )
            .unwrap();
            tx.commit().unwrap();
        }

        /// A claim whose holder ran on this host and is gone is taken over at once, recorded as
        /// interrupted with that reason; a live holder, or one on another host, keeps its lease.
        #[cfg(target_os = "linux")]
        #[test]
        fn a_claim_of_a_process_gone_from_this_host_is_taken_over_at_once() {
            use crate::core::notify::holder::Holder;
            let (store, _dir, hook) = enrolled();
            let hooks = std::slice::from_ref(&hook);
            let id = deliveries(&store, None).unwrap()[0].delivery_id;
            claim(&store, &[id], 1000).unwrap();
            // Held by this (live) process: shut out.
            assert!(due(&store, hooks, 2000).unwrap().is_empty());
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            let me = Holder::current();
            let elsewhere = Holder {
                boot: Some("00000000-0000-0000-0000-000000000000".into()),
                pid,
                ..me.clone()
            };
            set_holder(&store, id, &elsewhere);
            assert!(due(&store, hooks, 2000).unwrap().is_empty(), "another host");
            assert!(claim(&store, &[id], 2000).unwrap().is_empty());
            let gone = Holder { pid, ..me.clone() };
            set_holder(&store, id, &gone);
            assert_eq!(next_due(&store, hooks, 2000).unwrap(), Some(1000));
            assert_eq!(due(&store, hooks, 2000).unwrap().len(), 1);
            assert_eq!(ids(claim(&store, &[id], 2000).unwrap()), vec![id]);
            let history = attempts(&store, id).unwrap();
            assert_eq!(history.len(), 1);
            assert_eq!(history[0].outcome, "interrupted");
            let reason = history[0].reason.clone().unwrap_or_default();
            assert!(
                reason.contains(&format!("pid {pid}")) && reason.contains("is gone"),
                "{reason}"
            );
        }

        /// A claim holder that is not text (written into the store by something else) is no
        /// holder: runners go on, and that claim keeps its lease until it expires.
        #[test]
        fn a_claim_holder_that_is_not_text_keeps_its_lease_and_fails_nothing() {
            use crate::core::store::backend::{Backend, TxKind};
            let (store, _dir, hook) = enrolled();
            let hooks = std::slice::from_ref(&hook);
            let id = deliveries(&store, None).unwrap()[0].delivery_id;
            claim(&store, &[id], 1000).unwrap();
            let mut tx = store.begin(TxKind::Write).unwrap();
            crate::core::store::sql::exec(
                &mut *tx,
                "UPDATE notify_deliveries SET claim_holder = x'00ff' WHERE delivery_id = ?1",
                &[id.into()],
            )
            .unwrap();
            tx.commit().unwrap();
            assert!(due(&store, hooks, 2000).unwrap().is_empty());
            assert_eq!(next_due(&store, hooks, 2000).unwrap(), Some(3000));
            assert!(claim(&store, &[id], 2000).unwrap().is_empty());
            let later = 1000 + CLAIM_LEASE_MS;
            assert_eq!(due(&store, hooks, later).unwrap().len(), 1);
            assert_eq!(ids(claim(&store, &[id], later).unwrap()), vec![id]);
        }

        /// Each dead-lettering of a delivery is told apart by its failed attempts over the whole
        /// history (6, then 12 after a retry that failed again), so its DLQ message id differs.
        #[test]
        fn a_retried_delivery_that_dies_again_is_a_new_dead_letter() {
            let (store, _dir, _hook) = enrolled();
            let id = deliveries(&store, None).unwrap()[0].delivery_id;
            let mut t = 1000;
            let die = |t: &mut u64| {
                for _ in 0..MAX_ATTEMPTS {
                    claim_and_record(&store, id, &failed(*t, Some(503)), *t);
                    *t += 20_000;
                }
            };
            die(&mut t);
            let first = unpublished_dead(&store).unwrap();
            mark_dlq_published(&store, id).unwrap();
            retry(&store, id, t).unwrap();
            die(&mut t);
            let second = unpublished_dead(&store).unwrap();
            assert_eq!(
                (first[0].failed_attempts, second[0].failed_attempts),
                (6, 12)
            );
            assert_eq!(second[0].delivery.attempts, 6, "the DLQ message says 6");
            let msg_id = |d: &DeadLetter| {
                crate::core::notify::event::dlq_msg_id(
                    &d.delivery.export_id,
                    d.delivery.delivery_id,
                    d.failed_attempts,
                )
            };
            assert_ne!(msg_id(&first[0]), msg_id(&second[0]));
            assert!(msg_id(&first[0]).ends_with(&format!(":dlq:{id}:6")));
        }
    }
}
