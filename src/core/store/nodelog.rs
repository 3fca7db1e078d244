//! The node job log (SPEC section 4): offline enqueue and bundle export.

use super::{save_clock_state, Store, StoreError};
use crate::core::bundle::{BundleHeader, BundleWriter, EntryRef, ManifestHasher};
use crate::core::canonical::{canonicalize_text, CanonicalError};
use crate::core::chain::{Digest32, NodeLinker};
use crate::core::hlc::{validate_node_id, WallClock};
use crate::core::ids::job_id;
use crate::core::time::rfc3339_millis;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rusqlite::{params, OptionalExtension};
use std::borrow::Cow;
use std::io::Write;

/// One job to enqueue: the payload as JSON text in any formatting.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub payload_json: String,
    pub partition_key: Option<String>,
    pub idempotency_key: Option<String>,
    /// Where the payload came from, for error messages (e.g. `line 3 of jobs.jsonl`).
    pub origin: String,
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "outcome"
)]
pub enum EnqueueOutcome {
    /// Appended at `index` of the node log.
    Enqueued {
        index: u64,
        job_id: String,
        t_hlc: String,
        payload_hash: String,
        link: String,
    },
    /// The same job (same jobId, same payload) is already in the log: nothing appended.
    Duplicate { job_id: String, existing_index: u64 },
}

/// Why an enqueue was refused. Nothing is written when any job of a call is refused.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error("{origin}: {source}")]
    Payload {
        origin: String,
        #[source]
        source: CanonicalError,
    },
    #[error("{origin}: job {job_id} already exists in this log with a different payload (an idempotency key reused for another payload); nothing was enqueued")]
    Conflict { origin: String, job_id: String },
    #[error("invalid {what}: {message}")]
    Invalid { what: &'static str, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for EnqueueError {
    fn from(e: rusqlite::Error) -> Self {
        EnqueueError::Store(StoreError::Sql(e))
    }
}

fn validate_tenant(tenant: &str) -> Result<(), EnqueueError> {
    crate::core::tenant::validate_tenant_id(tenant).map_err(|e| EnqueueError::Invalid {
        what: "tenant",
        message: format!("{tenant:?}: {e}"),
    })
}

/// Enqueues `jobs` for (tenant, node) in one transaction: each gets the next HLC tick, its canonical
/// payload, payloadHash, prevLink and link. Either every job is handled or nothing is written.
pub fn enqueue<W: WallClock>(
    store: &mut Store,
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
    // The write lock first, then the clock: another enqueuer cannot tick between the two.
    let tx = store.begin_write()?;
    let mut clock = crate::core::hlc::HlcClock::with_wall(node, wall).map_err(StoreError::from)?;
    if let Some(last) = crate::core::store::load_clock_state(&tx)? {
        clock.resume(last);
    }
    let last: Option<(i64, Vec<u8>)> = tx
        .query_row(
            "SELECT seq, link FROM node_log WHERE tenant_id = ?1 AND node_id = ?2 ORDER BY seq DESC LIMIT 1",
            params![tenant, node],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (mut seq, mut prev): (u64, Option<Digest32>) = match last {
        None => (0, None),
        Some((s, link)) => {
            let corrupt = |detail: String| StoreError::CorruptRow {
                table: "node_log",
                position: format!("tenant {tenant:?} node {node} seq {s}"),
                detail,
            };
            let next = u64::try_from(s)
                .ok()
                .and_then(|s| s.checked_add(1))
                .ok_or_else(|| corrupt(format!("seq {s} is out of range")))?;
            let link = Digest32::try_from(link.as_slice())
                .map_err(|_| corrupt(format!("link is {} bytes, not 32", link.len())))?;
            (next, Some(link))
        }
    };
    // Witness the log's own last timestamp too (a store copied from elsewhere must not go backwards).
    if let Some(last) = tx
        .query_row(
            "SELECT t_hlc FROM node_log WHERE tenant_id = ?1 AND node_id = ?2 ORDER BY seq DESC LIMIT 1",
            params![tenant, node],
            |r| r.get::<_, String>(0),
        )
        .optional()?
    {
        if let Ok(h) = crate::core::hlc::Hlc::parse(&last) {
            clock.resume((h.physical, h.logical));
        }
    }
    let mut outcomes = Vec::with_capacity(prepared.len());
    {
        let mut find = tx.prepare_cached(
            "SELECT seq, payload FROM node_log INDEXED BY idx_node_log_job
             WHERE tenant_id = ?1 AND node_id = ?2 AND job_id = ?3",
        )?;
        let mut insert = tx.prepare_cached(
            "INSERT INTO node_log (tenant_id, node_id, seq, t_hlc, job_id, partition_key, payload,
                                   payload_hash, prev_link, link, enqueued_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for (job, canonical, id) in &prepared {
            let id_text = id.to_string();
            let existing: Option<(i64, String)> = find
                .query_row(params![tenant, node, id_text], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            if let Some((existing_seq, existing_payload)) = existing {
                if existing_payload == *canonical {
                    outcomes.push(EnqueueOutcome::Duplicate {
                        job_id: id_text,
                        existing_index: existing_seq as u64,
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
            let enqueued_at = rfc3339_millis(t.physical);
            insert.execute(params![
                tenant,
                node,
                seq as i64,
                t_text,
                id_text,
                job.partition_key,
                canonical,
                hash.as_slice(),
                prev.as_ref().map(|p| p.as_slice()),
                link.as_slice(),
                enqueued_at,
            ])?;
            outcomes.push(EnqueueOutcome::Enqueued {
                index: seq,
                job_id: id_text,
                t_hlc: t_text,
                payload_hash: B64.encode(hash),
                link: B64.encode(link),
            });
            prev = Some(link);
            seq += 1;
        }
    }
    save_clock_state(&tx, node, clock.last())?;
    tx.commit()?;
    let jobs = outcomes
        .iter()
        .filter(|o| matches!(o, EnqueueOutcome::Enqueued { .. }));
    let jobs = jobs.count() as u64;
    crate::core::metrics::record_quietly(
        store.conn(),
        &[crate::core::metrics::Event::Enqueued { jobs }],
    );
    Ok(outcomes)
}

/// A node log stored for a tenant (defined beside the storage interface that returns it).
pub use super::backend::NodeLogSummary;

/// The node logs stored for `tenant` (optionally only `node`), sorted by node id.
pub fn node_logs(
    store: &Store,
    tenant: &str,
    node: Option<&str>,
) -> Result<Vec<NodeLogSummary>, StoreError> {
    let mut stmt = store.conn().prepare(
        "SELECT n.node_id, n.seq + 1, n.t_hlc, n.link FROM node_log n
         WHERE n.tenant_id = ?1 AND (?2 IS NULL OR n.node_id = ?2)
           AND n.seq = (SELECT MAX(seq) FROM node_log m WHERE m.tenant_id = n.tenant_id AND m.node_id = n.node_id)
         ORDER BY n.node_id",
    )?;
    let rows = stmt.query_map(params![tenant, node], |r| {
        Ok(NodeLogSummary {
            node_id: r.get(0)?,
            entries: r.get::<_, i64>(1)? as u64,
            last_hlc: r.get(2)?,
            chain_head: B64.encode(r.get::<_, Vec<u8>>(3)?),
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// What an export wrote.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSummary {
    pub bundle_id: String,
    pub tenant_id: String,
    pub created_at: String,
    pub manifest_digest: String,
    pub nodes: Vec<NodeLogSummary>,
    pub entries: u64,
    pub bytes: u64,
    pub signed_by: Option<String>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "tenant {0:?} has no node log entries{1}; enqueue jobs first or check --tenant/--node"
    )]
    Empty(String, String),
    #[error("signing failed: {0}")]
    Sign(String),
    #[error("writing the bundle failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ExportError {
    fn from(e: rusqlite::Error) -> Self {
        ExportError::Store(StoreError::Sql(e))
    }
}

/// Signs a finished header: returns (base64 signature, key id).
pub type HeaderSigner<'a> = &'a dyn Fn(&BundleHeader) -> Result<(String, String), String>;

/// Exports the tenant's node logs (or one node's) as a bundle to `out` (SPEC section 5).
/// The store is read twice: once for the manifest digest, once to write.
pub fn export<W: Write>(
    store: &Store,
    tenant: &str,
    node: Option<&str>,
    created_by: &str,
    out: W,
    signer: Option<HeaderSigner<'_>>,
) -> Result<ExportSummary, ExportError> {
    let fresh = |_: &str| {
        Ok(BundleIdentity {
            bundle_id: uuid::Uuid::new_v4().to_string(),
            created_at: rfc3339_millis(crate::core::hlc::unix_ms_now()),
            created_by: created_by.to_string(),
        })
    };
    export_as(store, tenant, node, out, signer, fresh)
}

/// The header fields of a bundle that do not derive from its logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleIdentity {
    pub bundle_id: String,
    pub created_at: String,
    pub created_by: String,
}

/// Like [`export`], with the bundle's identity chosen by `identity` from the manifest digest (a
/// portable export reuses the identity of an earlier export of the same logs, so that the same
/// logs give the same bytes).
pub fn export_as<W: Write>(
    store: &Store,
    tenant: &str,
    node: Option<&str>,
    out: W,
    signer: Option<HeaderSigner<'_>>,
    identity: impl FnOnce(&str) -> Result<BundleIdentity, ExportError>,
) -> Result<ExportSummary, ExportError> {
    let started = std::time::Instant::now();
    let logs = node_logs(store, tenant, node)?;
    if logs.is_empty() {
        return Err(ExportError::Empty(
            tenant.to_string(),
            node.map(|n| format!(" for node {n:?}")).unwrap_or_default(),
        ));
    }
    // Pass 1: digest.
    let mut hasher = ManifestHasher::new();
    for log in &logs {
        hasher.begin_well_formed_log(Some(&log.chain_head));
        for_each_entry(store, tenant, &log.node_id, |e| {
            hasher.add_entry(e);
            Ok(())
        })?;
        hasher.end_well_formed_log(None, &log.last_hlc, &log.node_id);
    }
    let manifest_digest = hasher.finish();
    let id = identity(&manifest_digest)?;
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
    let counter = CountingWriter {
        inner: out,
        bytes: 0,
    };
    let mut w = BundleWriter::new(counter, &header)?;
    for log in &logs {
        w.begin_log(&log.node_id, &log.last_hlc, &log.chain_head)?;
        for_each_entry(store, tenant, &log.node_id, |e| Ok(w.entry(e)?))?;
        w.end_log()?;
    }
    let sig = header.signature.as_deref().zip(header.signed_by.as_deref());
    let counter = w.finish(sig)?;
    let (bytes, seconds) = (counter.bytes, started.elapsed().as_secs_f64());
    crate::core::metrics::record_quietly(
        store.conn(),
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

fn for_each_entry(
    store: &Store,
    tenant: &str,
    node: &str,
    mut f: impl FnMut(&EntryRef<'_>) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    let mut stmt = store.conn().prepare_cached(
        "SELECT t_hlc, job_id, partition_key, payload, payload_hash, prev_link, link, enqueued_at
         FROM node_log WHERE tenant_id = ?1 AND node_id = ?2 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![tenant, node])?;
    while let Some(r) = rows.next()? {
        let prev: Option<Vec<u8>> = r.get(5)?;
        let e = EntryRef {
            node_id: Cow::Borrowed(node),
            t_hlc: Cow::Owned(r.get(0)?),
            job_id: Cow::Owned(r.get(1)?),
            partition_key: r.get::<_, Option<String>>(2)?.map(Cow::Owned),
            payload: Cow::Owned(r.get(3)?),
            payload_hash: Cow::Owned(B64.encode(r.get::<_, Vec<u8>>(4)?)),
            prev_link: prev.map(|p| Cow::Owned(B64.encode(p))),
            link: Cow::Owned(B64.encode(r.get::<_, Vec<u8>>(6)?)),
            enqueued_at: Cow::Owned(r.get(7)?),
        };
        f(&e)?;
    }
    Ok(())
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
