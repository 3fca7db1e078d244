//! The scheduler log (SPEC section 8, seed hlc-ordering): one hash chain per tenant in
//! `scheduler_log`, its head in `chain_heads`, Merkle batch snapshots in `batch_snapshot`, plus the
//! `imports` that fed it; each imported entry's provenance is kept in its own row.
//!
//! Storage choices: `scheduler_log` is a `WITHOUT ROWID` table keyed by `(tenant_id, seq)` (one
//! b-tree, no surrogate id and no second index) with the seed's columns and types; chain links are
//! lowercase hex TEXT exactly as the seed's formula produces and consumes them. An imported entry's
//! provenance is held in nullable columns of the same row (one b-tree insert per entry, no second
//! copy of the key): the `imports` row by its integer id, the source node, the node-log links as
//! 32-byte BLOBs; its original tHlc is its own `t_hlc` (an import keeps it), so it is not repeated.
//! `scheduler_jobs` (keyed by the 16-byte job id, so its b-tree stays small and compares fast) holds
//! one row per job (its payloadHash for duplicate/conflict checks and its lifecycle state) so no
//! scan of the log is ever needed to answer "is this job known". Imports write rows in multi-row
//! `INSERT`s.
//!
//! A batch snapshot covers a contiguous run of chain positions; snapshots never overlap and are taken
//! in order, automatically every `batch_size` entries and on demand for the uncovered tail. Its
//! `snapshot_hlc` is the tHlc of the last entry it covers, so every machine holding the same chain
//! computes the same snapshots.

use super::{save_clock_state, Store, StoreError};
use crate::core::chain::{
    payload_hash, scheduler_chain_digest, scheduler_chain_link, sha256, Action, Digest32,
};
use crate::core::hlc::{Hlc, WallClock};
use crate::core::merge::JobMap;
use crate::core::merkle::{self, RootBuilder};
use crate::core::time::rfc3339_millis;
use crate::core::verify::{
    ChainDiagnosis, ChainEntry, Finding, FindingKind, HeadClaim, LinkText, Prev,
};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Entries per automatic batch snapshot (seed `batchSize: 1000`).
pub const DEFAULT_BATCH_SIZE: u64 = 1000;

/// payloadType of a signed batch snapshot statement.
pub const SNAPSHOT_PAYLOAD_TYPE: &str = crate::core::trust::BATCH_SNAPSHOT_PAYLOAD_TYPE;

pub(super) const MIGRATION_2: &str = "
CREATE TABLE scheduler_log (
    tenant_id       TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    t_hlc           TEXT NOT NULL,
    job_id          TEXT NOT NULL,
    action          TEXT NOT NULL,
    prev_chain_link TEXT,
    chain_link      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    -- Provenance of an imported entry (all NULL for entries appended here): the imports row, the
    -- source node log, the original link and prevLink (32-byte BLOBs), partitionKey, enqueuedAt.
    -- The entry keeps its original tHlc, so that is t_hlc itself.
    import_id       INTEGER,
    source_node     TEXT,
    orig_link       BLOB,
    orig_prev_link  BLOB,
    partition_key   TEXT,
    enqueued_at     TEXT,
    PRIMARY KEY (tenant_id, seq)
) WITHOUT ROWID;
CREATE TABLE scheduler_jobs (
    tenant_id    TEXT NOT NULL,
    job_id       BLOB NOT NULL,
    payload_hash BLOB NOT NULL,
    enqueue_seq  INTEGER NOT NULL,
    state        TEXT NOT NULL,
    last_seq     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, job_id)
) WITHOUT ROWID;
CREATE TABLE chain_heads (
    tenant_id       TEXT PRIMARY KEY,
    head_chain_link TEXT NOT NULL,
    head_hlc        TEXT NOT NULL,
    length          INTEGER NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE TABLE batch_snapshot (
    id              INTEGER PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    snapshot_hlc    TEXT NOT NULL,
    from_chain_link TEXT NOT NULL,
    to_chain_link   TEXT NOT NULL,
    from_seq        INTEGER NOT NULL,
    entry_count     INTEGER NOT NULL,
    merkle_root     TEXT NOT NULL,
    dsse_envelope   TEXT,
    created_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX idx_batch_snapshot_tenant_seq ON batch_snapshot (tenant_id, from_seq);
CREATE TABLE imports (
    id                 INTEGER PRIMARY KEY,
    import_batch       TEXT NOT NULL,
    tenant_id          TEXT NOT NULL,
    bundle_id          TEXT NOT NULL,
    manifest_digest    TEXT NOT NULL,
    created_by_node_id TEXT NOT NULL,
    signed_by          TEXT,
    signer             TEXT,
    file_name          TEXT NOT NULL,
    entries            INTEGER NOT NULL,
    new_entries        INTEGER NOT NULL,
    duplicates         INTEGER NOT NULL,
    dropped            INTEGER NOT NULL,
    forced             INTEGER NOT NULL,
    imported_at        TEXT NOT NULL
);
CREATE INDEX idx_imports_bundle ON imports (tenant_id, bundle_id);
";

/// Lowercase hex of a digest into `out` (no allocation; chain verification runs this per entry).
pub fn hex32<'a>(d: &Digest32, out: &'a mut [u8; 64]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, x) in d.iter().enumerate() {
        out[2 * i] = DIGITS[(x >> 4) as usize];
        out[2 * i + 1] = DIGITS[(x & 15) as usize];
    }
    std::str::from_utf8(out).expect("ASCII digits")
}

/// Parses exactly 64 lowercase hex digits.
pub fn unhex32(s: &str) -> Option<Digest32> {
    const BAD: u8 = 0xff;
    const TABLE: [u8; 256] = {
        let mut t = [BAD; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    let mut bad = 0u8;
    for (i, o) in out.iter_mut().enumerate() {
        let (h, l) = (TABLE[b[2 * i] as usize], TABLE[b[2 * i + 1] as usize]);
        bad |= (h | l) & 0xf0;
        *o = (h << 4) | (l & 15);
    }
    (bad == 0).then_some(out)
}

/// Why a scheduler operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("tenant {0:?} has no scheduler chain; import bundles into it first")]
    NoChain(String),
    #[error("job {job_id} is not in the chain of tenant {tenant:?}; only imported (enqueued) jobs can move through their lifecycle")]
    UnknownJob { tenant: String, job_id: String },
    #[error("job {job_id} is {state}; {action} is allowed only after {allowed}")]
    BadTransition {
        job_id: String,
        state: String,
        action: Action,
        allowed: &'static str,
    },
    #[error("{0} is not a lifecycle action; use DEQUEUE, EXECUTE, COMPLETE or FAIL (ENQUEUE happens by import)")]
    NotLifecycle(Action),
    #[error("job {job_id} is not covered by a batch snapshot yet (chain position {seq}); run `airlock chain snapshot --tenant {tenant}` first")]
    NotSnapshotted {
        tenant: String,
        job_id: String,
        seq: u64,
    },
    #[error("the stored chain is damaged at position {seq}: {message}; run `airlock chain verify --tenant {tenant}`")]
    Damaged {
        tenant: String,
        seq: u64,
        message: String,
    },
    #[error("nothing to snapshot: every entry of tenant {0:?} is already covered by a snapshot")]
    NothingToSnapshot(String),
    #[error("signing the snapshot failed: {0}")]
    Sign(String),
    #[error("invalid {what}: {message}")]
    Invalid { what: &'static str, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for SchedulerError {
    fn from(e: rusqlite::Error) -> Self {
        SchedulerError::Store(StoreError::Sql(e))
    }
}

/// The stored head of a tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    pub tenant_id: String,
    pub head_chain_link: String,
    pub head_hlc: String,
    pub length: u64,
    pub updated_at: String,
}

/// Reads a tenant's head.
pub fn chain_head(conn: &Connection, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT head_chain_link, head_hlc, length, updated_at FROM chain_heads WHERE tenant_id = ?1",
            params![tenant],
            |r| {
                Ok(ChainHead {
                    tenant_id: tenant.to_string(),
                    head_chain_link: r.get(0)?,
                    head_hlc: r.get(1)?,
                    length: r.get::<_, i64>(2)? as u64,
                    updated_at: r.get(3)?,
                })
            },
        )
        .optional()?)
}

/// A batch snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub id: i64,
    pub tenant_id: String,
    pub snapshot_hlc: String,
    pub from_chain_link: String,
    pub to_chain_link: String,
    /// Chain position of the first covered entry.
    pub from_seq: u64,
    pub entry_count: u64,
    pub merkle_root: String,
    /// The DSSE envelope (JSON) when signed.
    pub dsse_envelope: Option<serde_json::Value>,
    pub created_at: String,
}

impl Snapshot {
    /// The statement a signature covers: JCS of the six keys of SPEC section 8.
    pub fn statement(&self) -> String {
        snapshot_statement(
            &self.tenant_id,
            &self.snapshot_hlc,
            &self.from_chain_link,
            &self.to_chain_link,
            self.entry_count,
            &self.merkle_root,
        )
    }

    pub fn covers(&self, seq: u64) -> bool {
        seq >= self.from_seq && seq < self.from_seq + self.entry_count
    }
}

/// Checks a snapshot's DSSE envelope: its statement must be this snapshot's, its signature by a
/// trusted key. `Absent` when the snapshot is unsigned.
pub fn check_snapshot_signature(
    s: &Snapshot,
    trust: &crate::core::trust::TrustSet,
) -> crate::core::trust::SignatureCheck {
    use crate::core::trust::{DsseEnvelope, SignatureCheck};
    let Some(env) = &s.dsse_envelope else {
        return SignatureCheck::Absent;
    };
    let env: DsseEnvelope = match serde_json::from_value(env.clone()) {
        Ok(e) => e,
        Err(e) => {
            return SignatureCheck::Invalid {
                key_id: String::new(),
                reason: format!("not a DSSE envelope ({e})"),
            }
        }
    };
    let key_id = env
        .signatures
        .first()
        .map(|x| x.keyid.clone())
        .unwrap_or_default();
    if env.payload_type != SNAPSHOT_PAYLOAD_TYPE {
        return SignatureCheck::Invalid {
            key_id,
            reason: format!(
                "payloadType is {:?}, not {SNAPSHOT_PAYLOAD_TYPE}",
                env.payload_type
            ),
        };
    }
    if env.statement().ok().as_deref() != Some(s.statement().as_str()) {
        return SignatureCheck::Invalid {
            key_id,
            reason: "the signed statement is not this snapshot's".into(),
        };
    }
    env.check(trust)
}

/// JCS of `{entryCount, fromChainLink, merkleRoot, snapshotHlc, tenantId, toChainLink}`.
pub fn snapshot_statement(
    tenant: &str,
    snapshot_hlc: &str,
    from: &str,
    to: &str,
    count: u64,
    root: &str,
) -> String {
    let v = serde_json::json!({
        "tenantId": tenant,
        "snapshotHlc": snapshot_hlc,
        "fromChainLink": from,
        "toChainLink": to,
        "entryCount": count,
        "merkleRoot": root,
    });
    crate::core::canonical::canonical_text(&v).expect("plain strings and integers canonicalise")
}

/// Signs a snapshot statement: receives (payloadType, statement bytes), returns the DSSE envelope.
pub type SnapshotSigner<'a> = &'a (dyn Fn(&str, &[u8]) -> Result<serde_json::Value, String> + Sync);

fn row_snapshot(r: &rusqlite::Row<'_>) -> rusqlite::Result<Snapshot> {
    let env: Option<String> = r.get(8)?;
    Ok(Snapshot {
        id: r.get(0)?,
        tenant_id: r.get(1)?,
        snapshot_hlc: r.get(2)?,
        from_chain_link: r.get(3)?,
        to_chain_link: r.get(4)?,
        from_seq: r.get::<_, i64>(5)? as u64,
        entry_count: r.get::<_, i64>(6)? as u64,
        merkle_root: r.get(7)?,
        dsse_envelope: env.and_then(|e| serde_json::from_str(&e).ok()),
        created_at: r.get(9)?,
    })
}

const SNAPSHOT_COLUMNS: &str = "id, tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope, created_at";

/// The tenant's snapshots in chain order.
pub fn snapshots(store: &Store, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
    load_snapshots(store.conn(), tenant)
}

fn load_snapshots(conn: &Connection, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq"
    ))?;
    let rows = stmt.query_map(params![tenant], row_snapshot)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Summary of one tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSummary {
    pub tenant: String,
    pub head: String,
    pub head_hlc: String,
    pub length: u64,
    pub last_snapshot: Option<Snapshot>,
    /// Entries after the last snapshot.
    pub unsnapshotted: u64,
}

/// Every tenant with a scheduler chain, by tenant id.
pub fn tenants(store: &Store) -> Result<Vec<TenantSummary>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn.prepare(
        "SELECT tenant_id, head_chain_link, head_hlc, length FROM chain_heads ORDER BY tenant_id",
    )?;
    let heads = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)? as u64,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(heads.len());
    for (tenant, head, head_hlc, length) in heads {
        let last = conn
            .query_row(
                &format!("SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq DESC LIMIT 1"),
                params![tenant],
                row_snapshot,
            )
            .optional()?;
        let covered = last
            .as_ref()
            .map(|s| s.from_seq + s.entry_count)
            .unwrap_or(0);
        out.push(TenantSummary {
            tenant,
            head,
            head_hlc,
            length,
            unsnapshotted: length.saturating_sub(covered),
            last_snapshot: last,
        });
    }
    Ok(out)
}

/// Where an entry came from (ENQUEUE entries written by an import).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub import_id: i64,
    pub bundle_id: String,
    pub file_name: String,
    pub source_node: String,
    pub original_t_hlc: String,
    /// Base64 as in the bundle.
    pub original_link: String,
    pub original_prev_link: Option<String>,
    pub partition_key: Option<String>,
    pub enqueued_at: String,
}

/// One stored chain entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEntry {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub action: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
    pub payload: String,
    pub created_at: String,
    pub provenance: Option<Provenance>,
}

/// Entries `from..from+limit` of a tenant chain, in chain order, with provenance.
pub fn chain_entries(
    store: &Store,
    tenant: &str,
    from: u64,
    limit: u64,
) -> Result<Vec<StoredEntry>, StoreError> {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    let mut stmt = store.conn().prepare_cached(
        "SELECT l.seq, l.t_hlc, l.job_id, l.action, l.prev_chain_link, l.chain_link, l.payload, l.created_at,
                l.import_id, i.bundle_id, i.file_name, l.source_node, l.t_hlc, l.orig_link, l.orig_prev_link,
                l.partition_key, l.enqueued_at
         FROM scheduler_log l
         LEFT JOIN imports i ON i.id = l.import_id
         WHERE l.tenant_id = ?1 AND l.seq >= ?2
         ORDER BY l.seq LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![tenant, from as i64, limit.min(i64::MAX as u64) as i64],
        |r| {
            let import_id: Option<i64> = r.get(8)?;
            let provenance = match import_id {
                Some(import_id) => Some(Provenance {
                    import_id,
                    bundle_id: r.get::<_, Option<String>>(9)?.unwrap_or_default(),
                    file_name: r.get::<_, Option<String>>(10)?.unwrap_or_default(),
                    source_node: r.get(11)?,
                    original_t_hlc: r.get(12)?,
                    original_link: B64.encode(r.get::<_, Vec<u8>>(13)?),
                    original_prev_link: r.get::<_, Option<Vec<u8>>>(14)?.map(|b| B64.encode(b)),
                    partition_key: r.get(15)?,
                    enqueued_at: r.get(16)?,
                }),
                None => None,
            };
            Ok(StoredEntry {
                seq: r.get::<_, i64>(0)? as u64,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                action: r.get(3)?,
                prev_chain_link: r.get(4)?,
                chain_link: r.get(5)?,
                payload: r.get(6)?,
                created_at: r.get(7)?,
                provenance,
            })
        },
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The payloadHash of each of `ids` already in the tenant's chain. Loads the whole job table when
/// that is smaller than the question.
pub fn existing_jobs<'a>(
    conn: &Connection,
    tenant: &str,
    chain_length: u64,
    ids: impl ExactSizeIterator<Item = &'a [u8; 16]>,
) -> Result<JobMap<Digest32>, StoreError> {
    let mut out = JobMap::default();
    if chain_length == 0 {
        return Ok(out);
    }
    let to_digest = |v: Vec<u8>| -> Digest32 {
        let mut d = [0u8; 32];
        if v.len() == 32 {
            d.copy_from_slice(&v);
        }
        d
    };
    if chain_length <= ids.len() as u64 {
        let mut stmt = conn.prepare_cached(
            "SELECT job_id, payload_hash FROM scheduler_jobs WHERE tenant_id = ?1",
        )?;
        let mut rows = stmt.query(params![tenant])?;
        while let Some(r) = rows.next()? {
            let id = r.get_ref(0)?.as_blob().unwrap_or(&[]);
            if let Ok(id) = <[u8; 16]>::try_from(id) {
                out.insert(id, to_digest(r.get(1)?));
            }
        }
    } else {
        let mut stmt = conn.prepare_cached(
            "SELECT payload_hash FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
        )?;
        for id in ids {
            if let Some(h) = stmt
                .query_row(params![tenant, id.as_slice()], |r| r.get::<_, Vec<u8>>(0))
                .optional()?
            {
                out.insert(*id, to_digest(h));
            }
        }
    }
    Ok(out)
}

/// Provenance of an imported entry, written with it. The entry keeps its original tHlc, so that is
/// not stored again.
pub struct NewProvenance<'a> {
    pub import_id: i64,
    pub source_node: &'a str,
    pub orig_link: &'a Digest32,
    pub orig_prev_link: Option<&'a Digest32>,
    pub partition_key: Option<&'a str>,
    pub enqueued_at: &'a str,
}

/// Rows per multi-row `INSERT` of buffered appends. Measured on the import benchmark: 8 to 16 rows
/// per statement beat both single rows and 64 or more (larger statements cost more than they save).
const INSERT_BATCH: usize = 8;

/// A buffered `scheduler_log` row (and its provenance); texts live in [`Pending::text`].
struct PendingRow {
    seq: u64,
    t_hlc: Range<usize>,
    job_id: Range<usize>,
    action: Action,
    /// chain_link, lowercase hex.
    link: [u8; 64],
    payload: Range<usize>,
    provenance: Option<PendingProvenance>,
}

struct PendingProvenance {
    import_id: i64,
    source_node: Range<usize>,
    orig_link: Digest32,
    orig_prev_link: Option<Digest32>,
    partition_key: Option<Range<usize>>,
    enqueued_at: Range<usize>,
}

/// Appended rows not yet written (flushed in multi-row `INSERT`s).
#[derive(Default)]
struct Pending {
    rows: Vec<PendingRow>,
    text: String,
    /// chain_link of the row before the first buffered one.
    prev_before: Option<String>,
    /// Chain link digests of `rows` (filled by [`RowPreparer`] only; `append` keeps its own).
    digests: Vec<Digest32>,
}

/// Rows whose chain links are already computed (by a [`RowPreparer`], possibly on another
/// thread), to be written in order by [`ChainAppender::write_prepared`]. Reusable: writing empties
/// it and keeps its buffers.
#[derive(Default)]
pub struct PreparedRows {
    pending: Pending,
}

impl PreparedRows {
    pub fn len(&self) -> usize {
        self.pending.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pending.rows.is_empty()
    }
}

/// Computes the chain links of entries to be appended after a [`ChainAppender`]'s current head,
/// and lays out their rows (pure CPU work, `Send`): an import runs it on one thread while another
/// writes the rows it prepared.
pub struct RowPreparer {
    next_seq: u64,
    /// The head before the first prepared row.
    start: Option<String>,
    /// chain_link of the last prepared row.
    prev: Option<[u8; 64]>,
}

impl RowPreparer {
    /// Adds one entry to `out`; returns its seq.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        out: &mut PreparedRows,
        t_hlc: &str,
        job_id: &str,
        action: Action,
        payload: &str,
        payload_digest_hex: &str,
        provenance: Option<NewProvenance<'_>>,
    ) -> u64 {
        let prev = match &self.prev {
            Some(l) => Some(std::str::from_utf8(l).expect("hex is ASCII")),
            None => self.start.as_deref(),
        };
        let digest = scheduler_chain_digest(t_hlc, job_id, action, prev, payload_digest_hex);
        let mut link = [0u8; 64];
        hex32(&digest, &mut link);
        let p = &mut out.pending;
        if p.rows.is_empty() {
            p.prev_before = prev.map(str::to_string);
        }
        let seq = self.next_seq;
        let row = PendingRow {
            seq,
            t_hlc: p.push_text(t_hlc),
            job_id: p.push_text(job_id),
            action,
            link,
            payload: p.push_text(payload),
            provenance: provenance.map(|v| PendingProvenance {
                import_id: v.import_id,
                source_node: p.push_text(v.source_node),
                orig_link: *v.orig_link,
                orig_prev_link: v.orig_prev_link.copied(),
                partition_key: v.partition_key.map(|k| p.push_text(k)),
                enqueued_at: p.push_text(v.enqueued_at),
            }),
        };
        p.rows.push(row);
        p.digests.push(digest);
        self.prev = Some(link);
        self.next_seq += 1;
        seq
    }
}

impl Pending {
    fn push_text(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }
    fn str(&self, r: &Range<usize>) -> &str {
        &self.text[r.clone()]
    }
}

/// `INSERT OR FAIL INTO table (columns) VALUES (...), (...)` for `rows` rows, `per_row` parameters
/// each from parameter `first` on; `row` lays out one row's placeholders from its first parameter
/// number. `OR FAIL`: a multi-row statement then needs no statement journal (a failure rolls the
/// whole transaction back anyway).
fn multi_row_insert(
    table_columns: &str,
    rows: usize,
    per_row: usize,
    first: usize,
    row: impl Fn(usize) -> String,
) -> String {
    let mut sql = String::with_capacity(table_columns.len() + rows * per_row * 6);
    sql.push_str("INSERT OR FAIL INTO ");
    sql.push_str(table_columns);
    sql.push_str(" VALUES ");
    for r in 0..rows {
        if r > 0 {
            sql.push(',');
        }
        sql.push_str(&row(first + r * per_row));
    }
    sql
}

/// The SQL of [`multi_row_insert`] for 1..=`INSERT_BATCH` rows, built once.
fn batch_sql(
    cache: &'static std::sync::OnceLock<Vec<String>>,
    max_rows: usize,
    build: impl Fn(usize) -> String,
) -> &'static [String] {
    cache.get_or_init(|| (0..=max_rows).map(&build).collect())
}

fn log_insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &batch_sql(&SQL, INSERT_BATCH, |n| {
        multi_row_insert(
            "scheduler_log (tenant_id, seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload, created_at, \
             import_id, source_node, orig_link, orig_prev_link, partition_key, enqueued_at)",
            n,
            LOG_ROW_PARAMS,
            3,
            |i| {
                let p: Vec<String> = (i..i + LOG_ROW_PARAMS).map(|k| format!("?{k}")).collect();
                format!("(?1,{},?2,{})", p[..7].join(","), p[7..].join(","))
            },
        )
    })[rows]
}

/// Parameters per `scheduler_log` row (after the shared tenant and `created_at`).
const LOG_ROW_PARAMS: usize = 13;

fn jobs_insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &batch_sql(&SQL, JOBS_BATCH, |n| {
        multi_row_insert(
            "scheduler_jobs (tenant_id, job_id, payload_hash, enqueue_seq, state, last_seq)",
            n,
            3,
            2,
            |i| format!("(?1,?{},?{},?{},'ENQUEUE',?{})", i, i + 1, i + 2, i + 2),
        )
    })[rows]
}

/// Rows per multi-row `INSERT` into `scheduler_jobs`.
const JOBS_BATCH: usize = 32;

/// Appends to one tenant chain inside the caller's transaction, then updates the head and takes
/// the batch snapshots that became due ([`ChainAppender::finish`]). Rows are buffered and written
/// in multi-row `INSERT`s; [`ChainAppender::finish`] writes the rest before reading anything back.
pub struct ChainAppender {
    tenant: String,
    next_seq: u64,
    prev: Option<String>,
    head_hlc: Option<String>,
    /// Entries not yet covered by a snapshot: (link, tHlc of the last one).
    uncovered_from: u64,
    uncovered: Vec<Digest32>,
    created_at: String,
    appended: u64,
    pending: Pending,
    /// Merkle roots computed ahead of [`ChainAppender::finish`].
    roots: Option<DueRoots>,
}

/// The Merkle roots of the snapshots [`ChainAppender::finish`] will take, computed ahead (pure CPU
/// work: another thread can do it while the caller writes other rows).
pub struct DueRoots {
    batch: usize,
    roots: Vec<Digest32>,
}

/// What a finished append changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendSummary {
    pub head_before: Option<String>,
    pub length_before: u64,
    pub head: Option<String>,
    pub head_hlc: Option<String>,
    pub length: u64,
    pub appended: u64,
    pub snapshots: Vec<Snapshot>,
}

impl ChainAppender {
    /// Starts appending to `tenant`'s chain (reads the head and the uncovered tail's links).
    pub fn begin(conn: &Connection, tenant: &str, now_ms: u64) -> Result<Self, StoreError> {
        let head = chain_head(conn, tenant)?;
        let covered: u64 = conn.query_row(
            "SELECT COALESCE(MAX(from_seq + entry_count), 0) FROM batch_snapshot WHERE tenant_id = ?1",
            params![tenant],
            |r| r.get::<_, i64>(0),
        )? as u64;
        let mut uncovered = Vec::new();
        {
            let mut stmt = conn.prepare_cached(
                "SELECT chain_link FROM scheduler_log WHERE tenant_id = ?1 AND seq >= ?2 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![tenant, covered as i64])?;
            while let Some(r) = rows.next()? {
                let link: String = r.get(0)?;
                let mut d = [0u8; 32];
                let _ = hex::decode_to_slice(&link, &mut d);
                uncovered.push(d);
            }
        }
        Ok(ChainAppender {
            tenant: tenant.to_string(),
            next_seq: head.as_ref().map(|h| h.length).unwrap_or(0),
            prev: head.as_ref().map(|h| h.head_chain_link.clone()),
            head_hlc: head.map(|h| h.head_hlc),
            uncovered_from: covered,
            uncovered,
            created_at: rfc3339_millis(now_ms),
            appended: 0,
            pending: Pending::default(),
            roots: None,
        })
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn head(&self) -> Option<&str> {
        self.prev.as_deref()
    }

    /// A [`RowPreparer`] continuing from the current head (call before appending anything else
    /// until its rows are written).
    pub fn preparer(&self) -> RowPreparer {
        RowPreparer {
            next_seq: self.next_seq,
            start: self.prev.clone(),
            prev: None,
        }
    }

    /// Writes rows from [`ChainAppender::preparer`] (in the order they were prepared) and leaves
    /// `rows` empty for reuse.
    pub fn write_prepared(
        &mut self,
        conn: &Connection,
        rows: &mut PreparedRows,
    ) -> Result<(), StoreError> {
        self.flush(conn)?;
        let Some(last) = rows.pending.rows.last() else {
            return Ok(());
        };
        debug_assert_eq!(rows.pending.rows[0].seq, self.next_seq);
        let n = rows.pending.rows.len() as u64;
        let head_hlc = self.head_hlc.get_or_insert_with(String::new);
        head_hlc.clear();
        head_hlc.push_str(rows.pending.str(&last.t_hlc));
        let prev = self.prev.get_or_insert_with(String::new);
        prev.clear();
        prev.push_str(std::str::from_utf8(&last.link).expect("hex is ASCII"));
        self.uncovered.extend_from_slice(&rows.pending.digests);
        self.next_seq += n;
        self.appended += n;
        std::mem::swap(&mut self.pending, &mut rows.pending);
        let written = self.flush(conn);
        std::mem::swap(&mut self.pending, &mut rows.pending);
        written
    }

    /// Appends one entry; returns (seq, chain link). The row is written by a later flush (at the
    /// latest by [`ChainAppender::finish`]).
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        conn: &Connection,
        t_hlc: &str,
        job_id: &str,
        action: Action,
        payload: &str,
        payload_digest_hex: &str,
        provenance: Option<NewProvenance<'_>>,
    ) -> Result<(u64, &str), StoreError> {
        if self.pending.rows.len() >= INSERT_BATCH {
            self.flush(conn)?;
        }
        let digest = scheduler_chain_digest(
            t_hlc,
            job_id,
            action,
            self.prev.as_deref(),
            payload_digest_hex,
        );
        let mut link = [0u8; 64];
        hex32(&digest, &mut link);
        let seq = self.next_seq;
        if self.pending.rows.is_empty() {
            self.pending.prev_before = self.prev.take();
        }
        let p = &mut self.pending;
        let row = PendingRow {
            seq,
            t_hlc: p.push_text(t_hlc),
            job_id: p.push_text(job_id),
            action,
            link,
            payload: p.push_text(payload),
            provenance: provenance.map(|v| PendingProvenance {
                import_id: v.import_id,
                source_node: p.push_text(v.source_node),
                orig_link: *v.orig_link,
                orig_prev_link: v.orig_prev_link.copied(),
                partition_key: v.partition_key.map(|k| p.push_text(k)),
                enqueued_at: p.push_text(v.enqueued_at),
            }),
        };
        p.rows.push(row);
        self.uncovered.push(digest);
        self.next_seq += 1;
        self.appended += 1;
        let head_hlc = self.head_hlc.get_or_insert_with(String::new);
        head_hlc.clear();
        head_hlc.push_str(t_hlc);
        let prev = self.prev.get_or_insert_with(String::new);
        prev.clear();
        prev.push_str(std::str::from_utf8(&link).expect("hex is ASCII"));
        Ok((seq, prev.as_str()))
    }

    /// Computes the Merkle roots `finish(batch_size, snapshot_rest, ..)` needs; hand them back with
    /// [`ChainAppender::use_roots`].
    pub fn due_roots(&self, batch_size: u64, snapshot_rest: bool) -> DueRoots {
        let batch = batch_size.max(1) as usize;
        let n = self.uncovered.len();
        let count = n / batch + usize::from(snapshot_rest && !n.is_multiple_of(batch));
        DueRoots {
            batch,
            roots: batch_roots(&self.uncovered, batch, count),
        }
    }

    /// Roots from [`ChainAppender::due_roots`] for [`ChainAppender::finish`] (ignored if they do not
    /// fit its batches).
    pub fn use_roots(&mut self, roots: DueRoots) {
        self.roots = Some(roots);
    }

    /// Writes the buffered rows.
    fn flush(&mut self, conn: &Connection) -> Result<(), StoreError> {
        let p = &self.pending;
        let mut done = 0;
        while done < p.rows.len() {
            let n = (p.rows.len() - done).min(INSERT_BATCH);
            let rows = &p.rows[done..done + n];
            let mut stmt = conn.prepare_cached(log_insert_sql(n))?;
            stmt.raw_bind_parameter(1, &self.tenant)?;
            stmt.raw_bind_parameter(2, &self.created_at)?;
            for (k, r) in rows.iter().enumerate() {
                let i = 3 + k * LOG_ROW_PARAMS;
                let prev: Option<&str> = match done + k {
                    0 => p.prev_before.as_deref(),
                    j => Some(std::str::from_utf8(&p.rows[j - 1].link).expect("hex is ASCII")),
                };
                stmt.raw_bind_parameter(i, r.seq as i64)?;
                stmt.raw_bind_parameter(i + 1, p.str(&r.t_hlc))?;
                stmt.raw_bind_parameter(i + 2, p.str(&r.job_id))?;
                stmt.raw_bind_parameter(i + 3, r.action.as_str())?;
                stmt.raw_bind_parameter(i + 4, prev)?;
                stmt.raw_bind_parameter(
                    i + 5,
                    std::str::from_utf8(&r.link).expect("hex is ASCII"),
                )?;
                stmt.raw_bind_parameter(i + 6, p.str(&r.payload))?;
                let v = r.provenance.as_ref();
                stmt.raw_bind_parameter(i + 7, v.map(|v| v.import_id))?;
                stmt.raw_bind_parameter(i + 8, v.map(|v| p.str(&v.source_node)))?;
                stmt.raw_bind_parameter(i + 9, v.map(|v| v.orig_link.as_slice()))?;
                stmt.raw_bind_parameter(
                    i + 10,
                    v.and_then(|v| v.orig_prev_link.as_ref().map(|l| l.as_slice())),
                )?;
                stmt.raw_bind_parameter(
                    i + 11,
                    v.and_then(|v| v.partition_key.as_ref().map(|k| p.str(k))),
                )?;
                stmt.raw_bind_parameter(i + 12, v.map(|v| p.str(&v.enqueued_at)))?;
            }
            stmt.raw_execute()?;
            done += n;
        }
        self.pending.rows.clear();
        self.pending.text.clear();
        self.pending.digests.clear();
        self.pending.prev_before = None;
        Ok(())
    }

    /// Writes the head and the snapshots now due: every full batch of `batch_size` uncovered
    /// entries, and with `snapshot_rest` also the remaining partial batch.
    pub fn finish(
        mut self,
        conn: &Connection,
        batch_size: u64,
        snapshot_rest: bool,
        signer: Option<SnapshotSigner<'_>>,
        head_before: Option<String>,
        length_before: u64,
    ) -> Result<AppendSummary, SchedulerError> {
        self.flush(conn)?;
        if self.appended > 0 {
            conn.prepare_cached(
                "INSERT INTO chain_heads (tenant_id, head_chain_link, head_hlc, length, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(tenant_id) DO UPDATE SET head_chain_link = excluded.head_chain_link,
                   head_hlc = excluded.head_hlc, length = excluded.length, updated_at = excluded.updated_at",
            )?
            .execute(params![
                self.tenant,
                self.prev,
                self.head_hlc,
                self.next_seq as i64,
                self.created_at
            ])?;
        }
        let batch = batch_size.max(1) as usize;
        let mut taken = Vec::new();
        let mut start = 0usize;
        // Links of the uncovered tail, with their tHlc texts only needed at batch ends.
        let hlcs = self.batch_end_hlcs(conn, batch, snapshot_rest)?;
        let roots = match self.roots.take() {
            Some(r) if r.batch == batch && r.roots.len() == hlcs.len() => r.roots,
            _ => batch_roots(&self.uncovered, batch, hlcs.len()),
        };
        let mut k = 0;
        while self.uncovered.len() - start >= batch
            || (snapshot_rest && start < self.uncovered.len())
        {
            let end = (start + batch).min(self.uncovered.len());
            let links = &self.uncovered[start..end];
            let root = hex::encode(roots[k]);
            let from_seq = self.uncovered_from + start as u64;
            let mut snap = Snapshot {
                id: 0,
                tenant_id: self.tenant.clone(),
                snapshot_hlc: hlcs[k].clone(),
                from_chain_link: hex::encode(links[0]),
                to_chain_link: hex::encode(links[links.len() - 1]),
                from_seq,
                entry_count: links.len() as u64,
                merkle_root: root,
                dsse_envelope: None,
                created_at: self.created_at.clone(),
            };
            if let Some(sign) = signer {
                let env = sign(SNAPSHOT_PAYLOAD_TYPE, snap.statement().as_bytes())
                    .map_err(SchedulerError::Sign)?;
                snap.dsse_envelope = Some(env);
            }
            conn.prepare_cached(
                "INSERT INTO batch_snapshot (tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                snap.tenant_id,
                snap.snapshot_hlc,
                snap.from_chain_link,
                snap.to_chain_link,
                snap.from_seq as i64,
                snap.entry_count as i64,
                snap.merkle_root,
                snap.dsse_envelope.as_ref().map(|e| e.to_string()),
                snap.created_at
            ])?;
            snap.id = conn.last_insert_rowid();
            taken.push(snap);
            start = end;
            k += 1;
        }
        Ok(AppendSummary {
            head_before,
            length_before,
            head: self.prev,
            head_hlc: self.head_hlc,
            length: self.next_seq,
            appended: self.appended,
            snapshots: taken,
        })
    }

    /// tHlc of the last entry of each batch due.
    fn batch_end_hlcs(
        &self,
        conn: &Connection,
        batch: usize,
        snapshot_rest: bool,
    ) -> Result<Vec<String>, StoreError> {
        let n = self.uncovered.len();
        let mut ends = Vec::new();
        let mut start = 0;
        while n - start >= batch || (snapshot_rest && start < n) {
            let end = (start + batch).min(n);
            ends.push(self.uncovered_from + end as u64 - 1);
            start = end;
        }
        let mut stmt = conn
            .prepare_cached("SELECT t_hlc FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2")?;
        ends.iter()
            .map(|seq| {
                Ok(stmt.query_row(params![self.tenant, *seq as i64], |r| r.get::<_, String>(0))?)
            })
            .collect()
    }
}

/// Merkle roots of the first `count` batches of `batch` links (the last may be partial), computed
/// on all cores when there are many.
fn batch_roots(links: &[Digest32], batch: usize, count: usize) -> Vec<Digest32> {
    let root_of = |k: usize| {
        let chunk = &links[k * batch..((k + 1) * batch).min(links.len())];
        merkle::root(&merkle::leaf_hashes_of_links(chunk))
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(count / 16)
        .max(1);
    if threads == 1 {
        return (0..count).map(root_of).collect();
    }
    let mut roots = vec![[0u8; 32]; count];
    let per = count.div_ceil(threads);
    std::thread::scope(|s| {
        for (t, out) in roots.chunks_mut(per).enumerate() {
            let root_of = &root_of;
            s.spawn(move || {
                for (i, r) in out.iter_mut().enumerate() {
                    *r = root_of(t * per + i);
                }
            });
        }
    });
    roots
}

/// Takes an on-demand snapshot of the tenant's uncovered tail (batches of `batch_size`, the last one
/// partial), optionally signed.
pub fn snapshot_now(
    store: &mut Store,
    tenant: &str,
    batch_size: u64,
    signer: Option<SnapshotSigner<'_>>,
) -> Result<Vec<Snapshot>, SchedulerError> {
    let tx = store
        .conn_mut()
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let head = chain_head(&tx, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let app = ChainAppender::begin(&tx, tenant, crate::core::hlc::unix_ms_now())?;
    if app.uncovered.is_empty() {
        return Err(SchedulerError::NothingToSnapshot(tenant.into()));
    }
    let summary = app.finish(
        &tx,
        batch_size,
        true,
        signer,
        Some(head.head_chain_link),
        head.length,
    )?;
    tx.commit()?;
    Ok(summary.snapshots)
}

/// A lifecycle entry appended to a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendedAction {
    pub tenant_id: String,
    pub job_id: String,
    pub action: Action,
    pub seq: u64,
    pub t_hlc: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
    pub previous_state: String,
    pub snapshots: Vec<Snapshot>,
}

/// The lifecycle: ENQUEUE -> DEQUEUE -> EXECUTE -> COMPLETE | FAIL, and FAIL -> DEQUEUE (a retry).
fn allowed_after(action: Action) -> Result<(&'static [Action], &'static str), SchedulerError> {
    match action {
        Action::Dequeue => Ok((&[Action::Enqueue, Action::Fail], "ENQUEUE or FAIL")),
        Action::Execute => Ok((&[Action::Dequeue], "DEQUEUE")),
        Action::Complete | Action::Fail => Ok((&[Action::Execute], "EXECUTE")),
        Action::Enqueue => Err(SchedulerError::NotLifecycle(action)),
    }
}

/// Appends a DEQUEUE / EXECUTE / COMPLETE / FAIL entry for a known job. Its tHlc is a tick of this
/// node's clock (persisted); its payload is the job's payload.
pub fn append_action<W: WallClock>(
    store: &mut Store,
    tenant: &str,
    job_id: &str,
    action: Action,
    node: &str,
    wall: W,
    batch_size: u64,
) -> Result<AppendedAction, SchedulerError> {
    let (allowed, allowed_text) = allowed_after(action)?;
    let job = uuid::Uuid::parse_str(job_id).map_err(|e| SchedulerError::Invalid {
        what: "job id",
        message: format!("{job_id:?} is not a UUID ({e})"),
    })?;
    let job_text = job.hyphenated().to_string();
    let mut clock = store.clock(node, wall)?;
    let tx = store
        .conn_mut()
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let head = chain_head(&tx, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let (state, last_seq): (String, i64) = tx
        .query_row(
            "SELECT state, last_seq FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
            params![tenant, job.as_bytes().as_slice()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| SchedulerError::UnknownJob {
            tenant: tenant.into(),
            job_id: job_text.clone(),
        })?;
    if !allowed.iter().any(|a| a.as_str() == state) {
        return Err(SchedulerError::BadTransition {
            job_id: job_text,
            state,
            action,
            allowed: allowed_text,
        });
    }
    let payload: String = tx.query_row(
        "SELECT payload FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2",
        params![tenant, last_seq],
        |r| r.get(0),
    )?;
    // The chain's own last HLC is witnessed so the new entry sorts after it.
    if let Ok(h) = Hlc::parse(&head.head_hlc) {
        clock.resume((h.physical, h.logical));
    }
    let t = clock.tick().to_string();
    let mut app = ChainAppender::begin(&tx, tenant, crate::core::hlc::unix_ms_now())?;
    let prev = app.head().map(str::to_string);
    let digest = hex::encode(payload_hash(&payload));
    let (seq, link) = app.append(&tx, &t, &job_text, action, &payload, &digest, None)?;
    let link = link.to_string();
    tx.execute(
        "UPDATE scheduler_jobs SET state = ?3, last_seq = ?4 WHERE tenant_id = ?1 AND job_id = ?2",
        params![
            tenant,
            job.as_bytes().as_slice(),
            action.as_str(),
            seq as i64
        ],
    )?;
    let summary = app.finish(
        &tx,
        batch_size,
        false,
        None,
        Some(head.head_chain_link),
        head.length,
    )?;
    save_clock_state(&tx, node, clock.last())?;
    tx.commit()?;
    Ok(AppendedAction {
        tenant_id: tenant.to_string(),
        job_id: job_text,
        action,
        seq,
        t_hlc: t,
        prev_chain_link: prev,
        chain_link: link,
        previous_state: state,
        snapshots: summary.snapshots,
    })
}

/// Records jobs' ENQUEUE rows `(job id, payloadHash, chain position)` (inside the import's
/// transaction), in multi-row `INSERT`s. Rows given in key order are b-tree appends.
pub fn insert_jobs(
    conn: &Connection,
    tenant: &str,
    jobs: &[([u8; 16], Digest32, u64)],
) -> Result<(), StoreError> {
    for chunk in jobs.chunks(JOBS_BATCH) {
        let mut stmt = conn.prepare_cached(jobs_insert_sql(chunk.len()))?;
        stmt.raw_bind_parameter(1, tenant)?;
        for (k, (id, hash, seq)) in chunk.iter().enumerate() {
            let i = 2 + k * 3;
            stmt.raw_bind_parameter(i, id.as_slice())?;
            stmt.raw_bind_parameter(i + 1, hash.as_slice())?;
            stmt.raw_bind_parameter(i + 2, *seq as i64)?;
        }
        stmt.raw_execute()?;
    }
    Ok(())
}

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
             FROM imports WHERE tenant_id = ?1 AND bundle_id = ?2 AND manifest_digest = ?3 ORDER BY id LIMIT 1",
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

/// The result of checking one stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotCheck {
    pub id: i64,
    pub from_seq: u64,
    pub entry_count: u64,
    pub ok: bool,
    pub expected_root: String,
    pub computed_root: String,
    pub message: Option<String>,
}

/// `chain verify`: every link, the stored head, every snapshot root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    pub tenant_id: String,
    pub ok: bool,
    pub length: u64,
    pub stored_length: Option<u64>,
    pub head: Option<String>,
    pub findings: Vec<Finding>,
    pub snapshots: Vec<SnapshotCheck>,
}

/// Recomputes every link of a tenant chain and its head (findings of SPEC section 6, positions are
/// chain positions) and every snapshot's Merkle root. `progress` counts entries checked.
///
/// The scheduler chain is in append order; HLC order is not checked across it because a later
/// import may carry earlier offline timestamps.
pub fn verify_chain(
    store: &Store,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<ChainReport, SchedulerError> {
    let conn = store.conn();
    let head = chain_head(conn, tenant)?;
    let snaps = load_snapshots(conn, tenant)?;
    let mut diag = ChainDiagnosis::new(None, None, LinkText::Hex);
    let mut findings: Vec<Finding> = Vec::new();
    let mut snap_idx = 0usize;
    let mut builder: Option<(RootBuilder, String)> = None; // (root so far, problem)
    let mut snap_checks = Vec::with_capacity(snaps.len());
    let mut stmt = conn.prepare(
        "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log
         WHERE tenant_id = ?1 ORDER BY seq",
    )?;
    let mut job_hash = conn
        .prepare("SELECT payload_hash FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2")?;
    let mut rows = stmt.query(params![tenant])?;
    let mut n: u64 = 0;
    let decode = unhex32;
    let mut digest_buf = [0u8; 64];
    let mut last_link_text = String::new();
    let mut last_link: Option<Digest32> = None;
    let schema = |i: u64, job: Option<&str>, msg: String| {
        Finding::new(
            FindingKind::SchemaInvalid,
            format!("chain entry {i}: {msg}"),
        )
        .at(None, None, Some(i))
        .job(job.map(str::to_string))
    };
    while let Some(r) = rows.next()? {
        let i = n;
        let t_hlc = r.get_ref(1)?.as_str().unwrap_or("");
        let job_id = r.get_ref(2)?.as_str().unwrap_or("");
        let action = r.get_ref(3)?.as_str().unwrap_or("");
        let prev_text = r.get_ref(4)?.as_str_or_null().unwrap_or(None);
        let link_text = r.get_ref(5)?.as_str().unwrap_or("");
        let payload = r.get_ref(6)?.as_str().unwrap_or("");
        let job = uuid::Uuid::parse_str(job_id).ok();
        if job.is_none() {
            findings.push(schema(i, None, format!("jobId {job_id:?} is not a UUID")));
        }
        if Hlc::parse(t_hlc).is_err() {
            findings.push(schema(
                i,
                Some(job_id),
                format!("tHlc {t_hlc:?} is not an HLC timestamp"),
            ));
        }
        let act = action
            .parse::<Action>()
            .ok()
            .filter(|a| a.as_str() == action);
        if act.is_none() {
            findings.push(schema(
                i,
                Some(job_id),
                format!(
                    "action {action:?} is not one of ENQUEUE, DEQUEUE, EXECUTE, COMPLETE, FAIL"
                ),
            ));
        }
        let link = decode(link_text);
        if link.is_none() {
            findings.push(schema(
                i,
                Some(job_id),
                format!("chainLink {link_text:?} is not 64 lowercase hex digits"),
            ));
        }
        let prev = match prev_text {
            None => Prev::Genesis,
            // The usual case: the previous row's link, already decoded.
            Some(p) if p == last_link_text && last_link.is_some() => {
                Prev::Link(last_link.expect("checked"))
            }
            Some(p) => match decode(p) {
                Some(d) => Prev::Link(d),
                None => {
                    findings.push(schema(
                        i,
                        Some(job_id),
                        format!("prevChainLink {p:?} is not 64 lowercase hex digits"),
                    ));
                    Prev::Unknown
                }
            },
        };
        let recomputed = match (act, &prev) {
            (Some(a), Prev::Genesis | Prev::Link(_)) => {
                let digest = hex32(&sha256(payload.as_bytes()), &mut digest_buf);
                let l = scheduler_chain_link(t_hlc, job_id, a, prev_text, digest);
                let mut d = if l == link_text { link } else { decode(&l) };
                if d != link && link.is_some() {
                    // Does the link hold with the payloadHash recorded at enqueue? Then only the payload changed.
                    let recorded: Option<Vec<u8>> = job_hash
                        .query_row(
                            params![
                                tenant,
                                job.map(|u| u.into_bytes().to_vec()).unwrap_or_default()
                            ],
                            |r| r.get(0),
                        )
                        .optional()?;
                    if let Some(h) = recorded {
                        let l2 =
                            scheduler_chain_link(t_hlc, job_id, a, prev_text, &hex::encode(&h));
                        if decode(&l2) == link {
                            findings.push(
                                Finding::new(
                                    FindingKind::PayloadModified,
                                    format!("chain entry {i}'s payload was changed after it was written: its SHA-256 no longer matches the digest its link was computed with"),
                                )
                                .at(None, None, Some(i))
                                .job(Some(job_id.to_string()))
                                .values(Some(hex::encode(&h)), Some(digest.to_string())),
                            );
                            d = link;
                        }
                    }
                }
                d
            }
            _ => None,
        };
        if let Some(f) = diag.push(
            ChainEntry {
                link,
                prev,
                recomputed,
                hlc: None,
                job_id: job.map(|u| *u.as_bytes()),
            },
            Some(t_hlc),
        ) {
            findings.push(f);
        }
        // The snapshot covering this position (snapshots are disjoint and in chain order).
        if let Some(s) = snaps.get(snap_idx) {
            if s.covers(i) {
                let (b, problem) =
                    builder.get_or_insert_with(|| (RootBuilder::default(), String::new()));
                if i == s.from_seq && link_text != s.from_chain_link && problem.is_empty() {
                    *problem = format!(
                        "fromChainLink {} is not the link of entry {i} ({link_text})",
                        s.from_chain_link
                    );
                }
                if i == s.from_seq + s.entry_count - 1
                    && link_text != s.to_chain_link
                    && problem.is_empty()
                {
                    *problem = format!(
                        "toChainLink {} is not the link of entry {i} ({link_text})",
                        s.to_chain_link
                    );
                }
                b.push(merkle::leaf_hash(&link.unwrap_or_default()));
                if i == s.from_seq + s.entry_count - 1 {
                    let (b, problem) = builder.take().expect("set above");
                    snap_checks.push(check_snapshot(s, &b, problem));
                    snap_idx += 1;
                }
            }
        }
        last_link_text.clear();
        last_link_text.push_str(link_text);
        last_link = link;
        n += 1;
        if let Some(p) = &progress {
            if n.is_multiple_of(4096) {
                p.store(n, Ordering::Relaxed);
            }
        }
    }
    if let Some(p) = &progress {
        p.store(n, Ordering::Relaxed);
    }
    // Snapshots reaching past the end of the chain.
    if let Some((b, problem)) = builder.take() {
        let s = &snaps[snap_idx];
        let problem = if problem.is_empty() {
            format!(
                "the snapshot covers entries {}..{} but the chain has only {n}",
                s.from_seq,
                s.from_seq + s.entry_count
            )
        } else {
            problem
        };
        snap_checks.push(check_snapshot(s, &b, problem));
        snap_idx += 1;
    }
    for s in snaps.iter().skip(snap_idx) {
        if snap_checks.iter().any(|c| c.id == s.id) {
            continue;
        }
        snap_checks.push(SnapshotCheck {
            id: s.id,
            from_seq: s.from_seq,
            entry_count: s.entry_count,
            ok: false,
            expected_root: s.merkle_root.clone(),
            computed_root: String::new(),
            message: Some(format!("the snapshot of entries {}..{} could not be checked: it overlaps an earlier snapshot or reaches past the end of the chain ({n} entries)", s.from_seq, s.from_seq + s.entry_count)),
        });
    }
    // The head's HLC is compared as text below (chain entries carry no HLC order here).
    let claim = head.as_ref().map(|h| HeadClaim {
        head: decode(&h.head_chain_link),
        last_hlc: None,
    });
    if head.is_some() && n == 0 {
        findings.push(
            Finding::new(
                FindingKind::TailTruncated,
                "the chain head is stored but the chain has no entries: every entry was removed",
            )
            .values(head.as_ref().map(|h| h.head_chain_link.clone()), None),
        );
    }
    findings.extend(diag.finish(claim));
    if let Some(h) = &head {
        if n > 0 && h.length != n {
            // Deleted or truncated entries already explain a wrong length.
            let already = !findings.is_empty();
            if !already {
                findings.push(
                    Finding::new(
                        FindingKind::HeadMismatch,
                        format!(
                            "the stored chain length is {} but the chain has {n} entries",
                            h.length
                        ),
                    )
                    .at(None, None, Some(n - 1))
                    .values(Some(n.to_string()), Some(h.length.to_string())),
                );
            }
        }
        if n > 0 {
            let last_hlc: Option<String> = conn
                .query_row(
                    "SELECT t_hlc FROM scheduler_log WHERE tenant_id = ?1 ORDER BY seq DESC LIMIT 1",
                    params![tenant],
                    |r| r.get(0),
                )
                .optional()?;
            let already = findings.iter().any(|f| {
                matches!(
                    f.kind,
                    FindingKind::TailTruncated | FindingKind::HeadMismatch
                )
            });
            if last_hlc.as_deref() != Some(h.head_hlc.as_str()) && !already {
                findings.push(
                    Finding::new(
                        FindingKind::HeadMismatch,
                        format!(
                            "the stored head HLC does not match the last entry ({})",
                            n - 1
                        ),
                    )
                    .at(None, None, Some(n - 1))
                    .values(last_hlc, Some(h.head_hlc.clone())),
                );
            }
        }
    } else if n > 0 {
        findings.push(
            Finding::new(
                FindingKind::TailTruncated,
                "the chain has entries but no stored head",
            )
            .at(None, None, Some(n - 1)),
        );
    }
    findings.sort_by_key(|f| (f.index.unwrap_or(u64::MAX), f.kind));
    let ok = findings.is_empty() && snap_checks.iter().all(|c| c.ok);
    Ok(ChainReport {
        tenant_id: tenant.to_string(),
        ok,
        length: n,
        stored_length: head.as_ref().map(|h| h.length),
        head: head.map(|h| h.head_chain_link),
        findings,
        snapshots: snap_checks,
    })
}

fn check_snapshot(s: &Snapshot, b: &RootBuilder, problem: String) -> SnapshotCheck {
    let computed = hex::encode(b.finish());
    let mut message = (!problem.is_empty()).then_some(problem);
    if message.is_none() {
        if let Some(env) = &s.dsse_envelope {
            let signed = serde_json::from_value::<crate::core::trust::DsseEnvelope>(env.clone())
                .ok()
                .and_then(|e| e.statement().ok());
            if signed.as_deref() != Some(s.statement().as_str()) {
                message = Some("the DSSE envelope does not sign this snapshot's statement".into());
            }
        }
    }
    if message.is_none() && computed != s.merkle_root {
        message = Some(format!(
            "the Merkle root of entries {}..{} is {computed}, not the stored {}",
            s.from_seq,
            s.from_seq + s.entry_count,
            s.merkle_root
        ));
    }
    SnapshotCheck {
        id: s.id,
        from_seq: s.from_seq,
        entry_count: s.entry_count,
        ok: message.is_none(),
        expected_root: s.merkle_root.clone(),
        computed_root: computed,
        message,
    }
}

/// The fields a chain link is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvenEntry {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub action: String,
    pub prev_chain_link: Option<String>,
    pub payload_digest: String,
    pub chain_link: String,
}

/// An RFC 9162 inclusion proof of a job's ENQUEUE chain link in the snapshot covering it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InclusionProof {
    /// Always `airlock.inclusion-proof.v1`.
    #[serde(rename = "type")]
    pub kind: String,
    pub tenant_id: String,
    pub entry: ProvenEntry,
    pub leaf_index: u64,
    pub tree_size: u64,
    /// Lowercase hex of SHA-256(0x00 || chain link bytes).
    pub leaf_hash: String,
    /// Lowercase hex hashes, leaf to root.
    pub proof: Vec<String>,
    pub merkle_root: String,
    pub snapshot: Snapshot,
}

pub const PROOF_TYPE: &str = "airlock.inclusion-proof.v1";

/// Builds the inclusion proof of `job_id`'s ENQUEUE entry.
pub fn prove(store: &Store, tenant: &str, job_id: &str) -> Result<InclusionProof, SchedulerError> {
    let conn = store.conn();
    let job = uuid::Uuid::parse_str(job_id)
        .map_err(|e| SchedulerError::Invalid {
            what: "job id",
            message: format!("{job_id:?} is not a UUID ({e})"),
        })?
        .hyphenated()
        .to_string();
    chain_head(conn, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let seq: i64 = conn
        .query_row(
            "SELECT enqueue_seq FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
            params![
                tenant,
                uuid::Uuid::parse_str(&job)
                    .map(|u| u.into_bytes().to_vec())
                    .unwrap_or_default()
            ],
            |r| r.get(0),
        )
        .optional()?
        .ok_or_else(|| SchedulerError::UnknownJob {
            tenant: tenant.into(),
            job_id: job.clone(),
        })?;
    let seq = seq as u64;
    let snap = conn
        .query_row(
            &format!("SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 AND from_seq <= ?2 ORDER BY from_seq DESC LIMIT 1"),
            params![tenant, seq as i64],
            row_snapshot,
        )
        .optional()?
        .filter(|s| s.covers(seq))
        .ok_or_else(|| SchedulerError::NotSnapshotted {
            tenant: tenant.into(),
            job_id: job.clone(),
            seq,
        })?;
    let mut stmt = conn.prepare_cached(
        "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log
         WHERE tenant_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![
        tenant,
        snap.from_seq as i64,
        (snap.from_seq + snap.entry_count) as i64
    ])?;
    let mut leaves = Vec::with_capacity(snap.entry_count as usize);
    let mut entry = None;
    while let Some(r) = rows.next()? {
        let s = r.get::<_, i64>(0)? as u64;
        let link: String = r.get(5)?;
        let mut d = [0u8; 32];
        hex::decode_to_slice(&link, &mut d).map_err(|_| SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: s,
            message: format!("chain link {link:?} is not hex"),
        })?;
        if s == seq {
            let payload: String = r.get(6)?;
            entry = Some(ProvenEntry {
                seq,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                action: r.get(3)?,
                prev_chain_link: r.get(4)?,
                payload_digest: hex::encode(payload_hash(&payload)),
                chain_link: link,
            });
        }
        leaves.push(merkle::leaf_hash(&d));
    }
    let entry = entry.ok_or_else(|| SchedulerError::Damaged {
        tenant: tenant.into(),
        seq,
        message: "the job's entry is missing".into(),
    })?;
    if leaves.len() as u64 != snap.entry_count {
        return Err(SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: snap.from_seq,
            message: format!(
                "the snapshot covers {} entries but {} are stored",
                snap.entry_count,
                leaves.len()
            ),
        });
    }
    let root = hex::encode(merkle::root(&leaves));
    if root != snap.merkle_root {
        return Err(SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: snap.from_seq,
            message: format!(
                "the snapshot's Merkle root {} does not match its entries ({root})",
                snap.merkle_root
            ),
        });
    }
    let index = (seq - snap.from_seq) as usize;
    let path = merkle::inclusion_proof(&leaves, index).expect("index inside the snapshot");
    Ok(InclusionProof {
        kind: PROOF_TYPE.into(),
        tenant_id: tenant.to_string(),
        leaf_index: index as u64,
        tree_size: snap.entry_count,
        leaf_hash: hex::encode(leaves[index]),
        proof: path.iter().map(hex::encode).collect(),
        merkle_root: snap.merkle_root.clone(),
        entry,
        snapshot: snap,
    })
}

/// Why an inclusion proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofCheckError {
    #[error("not an airlock inclusion proof (type {0:?})")]
    Type(String),
    #[error("the entry's chain link does not recompute from its fields: expected {expected}, stored {actual}")]
    Link { expected: String, actual: String },
    #[error("{0}")]
    Field(String),
    #[error("the proof does not verify: {0}")]
    Merkle(#[from] merkle::ProofError),
}

/// Checks a proof offline: the entry's link recomputes, the leaf hash is that link's, the path leads
/// to the Merkle root, and the root, size and bounds agree with the snapshot. A DSSE envelope, when
/// present, is the caller's to check against its trusted keys.
pub fn verify_proof(p: &InclusionProof) -> Result<(), ProofCheckError> {
    if p.kind != PROOF_TYPE {
        return Err(ProofCheckError::Type(p.kind.clone()));
    }
    let e = &p.entry;
    let action: Action = e.action.parse().map_err(ProofCheckError::Field)?;
    let link = scheduler_chain_link(
        &e.t_hlc,
        &e.job_id,
        action,
        e.prev_chain_link.as_deref(),
        &e.payload_digest,
    );
    if link != e.chain_link {
        return Err(ProofCheckError::Link {
            expected: link,
            actual: e.chain_link.clone(),
        });
    }
    let raw = hex::decode(&e.chain_link)
        .map_err(|_| ProofCheckError::Field("chainLink is not hex".into()))?;
    let leaf = merkle::leaf_hash(&raw);
    if hex::encode(leaf) != p.leaf_hash {
        return Err(ProofCheckError::Field(format!(
            "leafHash {} is not the leaf hash of the entry's chain link ({})",
            p.leaf_hash,
            hex::encode(leaf)
        )));
    }
    let s = &p.snapshot;
    if s.merkle_root != p.merkle_root || s.entry_count != p.tree_size || s.tenant_id != p.tenant_id
    {
        return Err(ProofCheckError::Field(
            "merkleRoot, treeSize or tenantId differ from the snapshot's".into(),
        ));
    }
    if e.seq != s.from_seq + p.leaf_index {
        return Err(ProofCheckError::Field(format!(
            "entry position {} is not the snapshot's first position {} plus leafIndex {}",
            e.seq, s.from_seq, p.leaf_index
        )));
    }
    if p.leaf_index == 0 && s.from_chain_link != e.chain_link {
        return Err(ProofCheckError::Field(
            "the first leaf's chain link is not the snapshot's fromChainLink".into(),
        ));
    }
    if p.leaf_index + 1 == p.tree_size && s.to_chain_link != e.chain_link {
        return Err(ProofCheckError::Field(
            "the last leaf's chain link is not the snapshot's toChainLink".into(),
        ));
    }
    let proof: Vec<Vec<u8>> = p
        .proof
        .iter()
        .map(|h| {
            hex::decode(h)
                .map_err(|_| ProofCheckError::Field(format!("proof element {h:?} is not hex")))
        })
        .collect::<Result<_, _>>()?;
    let root = hex::decode(&p.merkle_root)
        .map_err(|_| ProofCheckError::Field("merkleRoot is not hex".into()))?;
    merkle::verify_inclusion(p.leaf_index, p.tree_size, &leaf, &proof, &root)?;
    Ok(())
}
