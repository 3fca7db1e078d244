//! The node job log (SPEC section 4) over any store: offline enqueue and bundle export.

use crate::core::bundle::{BundleHeader, BundleWriter, EntryRef, ManifestHasher};
use crate::core::canonical::canonicalize_text;
use crate::core::chain::NodeLinker;
use crate::core::hlc::{validate_node_id, WallClock};
use crate::core::ids::job_id;
use crate::core::store::backend::{Backend, NodeRow, StoreTx, TxKind};
use crate::core::store::nodelog::{
    BundleIdentity, EnqueueError, EnqueueOutcome, ExportError, ExportSummary, HeaderSigner, NewJob,
    NodeLogSummary,
};
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::borrow::Cow;
use std::io::Write;

/// The one tenant rule (SPEC section 6), as verify and import apply it.
fn validate_tenant(tenant: &str) -> Result<(), EnqueueError> {
    crate::core::tenant::validate_tenant_id(tenant).map_err(|e| EnqueueError::Invalid {
        what: "tenant",
        message: format!("{tenant:?}: {e}"),
    })
}

/// Enqueues `jobs` for (tenant, node) in one transaction: each gets the next HLC tick, its canonical
/// payload, payloadHash, prevLink and link. Either every job is handled or nothing is written.
pub fn enqueue<W: WallClock>(
    store: &dyn Backend,
    tenant: &str,
    node: &str,
    jobs: &[NewJob],
    wall: W,
) -> Result<Vec<EnqueueOutcome>, EnqueueError> {
    validate_tenant(tenant)?;
    validate_node_id(node).map_err(|e| EnqueueError::Invalid {
        what: "node id",
        message: e.to_string(),
    })?;
    // Canonicalise everything before touching the store.
    let mut prepared = Vec::with_capacity(jobs.len());
    for job in jobs {
        let canonical =
            canonicalize_text(&job.payload_json).map_err(|source| EnqueueError::Payload {
                origin: job.origin.clone(),
                source,
            })?;
        if let Some(pk) = &job.partition_key {
            if pk.chars().any(|c| c.is_control()) {
                return Err(EnqueueError::Invalid {
                    what: "partition key",
                    message: format!("{pk:?} contains control characters"),
                });
            }
        }
        let id = job_id(&canonical, job.idempotency_key.as_deref());
        prepared.push((job, canonical, id));
    }
    let mut tx = store.begin(TxKind::Write)?;
    let tx_ref = &mut *tx;
    let mut clock = super::clock_in(tx_ref, node, wall)?;
    let tail = tx_ref.node_tail(tenant, node)?;
    // Witness the log's own last timestamp too (a store copied from elsewhere must not go backwards).
    if let Some(h) = tail
        .as_ref()
        .and_then(|t| crate::core::hlc::Hlc::parse(&t.t_hlc).ok())
    {
        clock.resume((h.physical, h.logical));
    }
    let (mut seq, mut prev) = match &tail {
        Some(t) => (t.seq + 1, Some(t.link)),
        None => (0, None),
    };
    let mut outcomes = Vec::with_capacity(prepared.len());
    for (job, canonical, id) in &prepared {
        let id_text = id.to_string();
        if let Some((existing_seq, existing_payload)) = tx_ref.node_job(tenant, node, &id_text)? {
            if existing_payload == *canonical {
                outcomes.push(EnqueueOutcome::Duplicate {
                    job_id: id_text,
                    existing_index: existing_seq,
                });
                continue;
            }
            return Err(EnqueueError::Conflict {
                origin: job.origin.clone(),
                job_id: id_text,
            });
        }
        let t = clock.tick();
        let t_text = t.to_string();
        let linked = NodeLinker::after(prev).link(id, &t_text, canonical);
        let (hash, link) = (linked.payload_hash, linked.link);
        let row = NodeRow {
            seq,
            t_hlc: t_text,
            job_id: id_text,
            partition_key: job.partition_key.clone(),
            payload: canonical.clone(),
            payload_hash: hash,
            prev_link: prev,
            link,
            enqueued_at: rfc3339_millis(t.physical),
        };
        tx_ref.insert_node_row(tenant, node, &row)?;
        outcomes.push(EnqueueOutcome::Enqueued {
            index: seq,
            job_id: row.job_id,
            t_hlc: row.t_hlc,
            payload_hash: B64.encode(hash),
            link: B64.encode(link),
        });
        prev = Some(link);
        seq += 1;
    }
    tx_ref.save_clock_state(node, clock.last())?;
    tx.commit()?;
    let jobs = outcomes
        .iter()
        .filter(|o| matches!(o, EnqueueOutcome::Enqueued { .. }))
        .count() as u64;
    crate::core::metrics::record_quietly(store, &[crate::core::metrics::Event::Enqueued { jobs }]);
    Ok(outcomes)
}

/// The node logs stored for `tenant` (optionally only `node`), sorted by node id.
pub fn node_logs(
    store: &dyn Backend,
    tenant: &str,
    node: Option<&str>,
) -> Result<Vec<NodeLogSummary>, StoreError> {
    store.begin(TxKind::Read)?.node_logs(tenant, node)
}

/// Rows read per query when exporting.
const EXPORT_PAGE: u64 = 4096;

/// Exports the tenant's node logs (or one node's) as a bundle to `out` (SPEC section 5) under a
/// fresh bundle id. One consistent view of the store is read twice: once for the manifest digest,
/// once to write.
pub fn export<W: Write>(
    store: &dyn Backend,
    tenant: &str,
    node: Option<&str>,
    created_by: &str,
    out: W,
    signer: Option<HeaderSigner<'_>>,
) -> Result<ExportSummary, ExportError> {
    let fresh = |_: &mut dyn StoreTx, _: &str| {
        Ok(BundleIdentity {
            bundle_id: uuid::Uuid::new_v4().to_string(),
            created_at: rfc3339_millis(crate::core::hlc::unix_ms_now()),
            created_by: created_by.to_string(),
        })
    };
    export_as(store, tenant, node, out, signer, fresh)
}

/// Like [`export`], with the bundle's identity chosen by `identity` from the manifest digest (a
/// portable export reuses the identity of an earlier export of the same logs, so that the same
/// logs give the same bytes).
pub fn export_as<W: Write>(
    store: &dyn Backend,
    tenant: &str,
    node: Option<&str>,
    out: W,
    signer: Option<HeaderSigner<'_>>,
    identity: impl FnOnce(&mut dyn StoreTx, &str) -> Result<BundleIdentity, ExportError>,
) -> Result<ExportSummary, ExportError> {
    let started = std::time::Instant::now();
    let mut tx = store.begin(TxKind::Read)?;
    let logs = tx.node_logs(tenant, node)?;
    if logs.is_empty() {
        return Err(ExportError::Empty(
            tenant.to_string(),
            node.map(|n| format!(" for node {n:?}")).unwrap_or_default(),
        ));
    }
    let each = |tx: &mut dyn StoreTx,
                node: &str,
                f: &mut dyn FnMut(&EntryRef<'_>) -> Result<(), ExportError>| {
        let mut from = 0;
        loop {
            let rows = tx.node_rows(tenant, node, from, EXPORT_PAGE)?;
            let Some(last) = rows.last().map(|r| r.seq) else {
                return Ok::<(), ExportError>(());
            };
            for r in &rows {
                f(&EntryRef {
                    node_id: Cow::Borrowed(node),
                    t_hlc: Cow::Borrowed(&r.t_hlc),
                    job_id: Cow::Borrowed(&r.job_id),
                    partition_key: r.partition_key.as_deref().map(Cow::Borrowed),
                    payload: Cow::Borrowed(&r.payload),
                    payload_hash: Cow::Owned(B64.encode(r.payload_hash)),
                    prev_link: r.prev_link.map(|p| Cow::Owned(B64.encode(p))),
                    link: Cow::Owned(B64.encode(r.link)),
                    enqueued_at: Cow::Borrowed(&r.enqueued_at),
                })?;
            }
            from = last + 1;
        }
    };
    // Pass 1: digest.
    let mut hasher = ManifestHasher::new();
    for log in &logs {
        hasher.begin_well_formed_log(Some(&log.chain_head));
        each(&mut *tx, &log.node_id, &mut |e| {
            hasher.add_entry(e);
            Ok(())
        })?;
        hasher.end_well_formed_log(None, &log.last_hlc, &log.node_id);
    }
    let manifest_digest = hasher.finish();
    let id = identity(&mut *tx, &manifest_digest)?;
    let mut header = BundleHeader {
        bundle_id: id.bundle_id,
        tenant_id: tenant.to_string(),
        created_at: id.created_at,
        created_by_node_id: id.created_by,
        manifest_digest,
        signature: None,
        signed_by: None,
    };
    if let Some(sign) = signer {
        let (sig, by) = sign(&header).map_err(ExportError::Sign)?;
        header.signature = Some(sig);
        header.signed_by = Some(by);
    }
    // Pass 2: write.
    let mut w = BundleWriter::new(
        CountingWriter {
            inner: out,
            bytes: 0,
        },
        &header,
    )?;
    for log in &logs {
        w.begin_log(&log.node_id, &log.last_hlc, &log.chain_head)?;
        each(&mut *tx, &log.node_id, &mut |e| Ok(w.entry(e)?))?;
        w.end_log()?;
    }
    let sig = header.signature.as_deref().zip(header.signed_by.as_deref());
    let counter = w.finish(sig)?;
    drop(tx);
    let (bytes, seconds) = (counter.bytes, started.elapsed().as_secs_f64());
    crate::core::metrics::record_quietly(
        store,
        &[crate::core::metrics::Event::Exported { bytes, seconds }],
    );
    Ok(ExportSummary {
        entries: logs.iter().map(|l| l.entries).sum(),
        bundle_id: header.bundle_id,
        tenant_id: header.tenant_id,
        created_at: header.created_at,
        manifest_digest: header.manifest_digest,
        nodes: logs,
        bytes: counter.bytes,
        signed_by: header.signed_by,
    })
}

struct CountingWriter<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
