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
//!
//! Layout: this file holds the SQLite schema, hex helpers and [`SchedulerError`]; `entries` (heads,
//! tenants, stored entries), `snapshots` (batch snapshots and their signed statements), `imports`
//! (the `imports` row) and `proofs` (inclusion proofs and checking them offline). These are the
//! values; the rules that read and write them over either store are [`super::rules`].

mod entries;
mod imports;
mod proofs;
mod snapshots;

pub use entries::*;
pub use imports::*;
pub use proofs::*;
pub use snapshots::*;

use super::StoreError;
use crate::core::chain::{Action, Digest32};

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

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The value of a lowercase hex digit, or 0xff.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0xffu8; 256];
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

/// Lowercase hex of a digest into `out`, by table (no allocation; chain verification runs this
/// per entry, where the `hex` crate's iterator-based encoder was a noticeable share of the time).
pub fn hex32<'a>(d: &Digest32, out: &'a mut [u8; 64]) -> &'a str {
    for (pair, &byte) in out.chunks_exact_mut(2).zip(d.iter()) {
        pair[0] = HEX_DIGITS[(byte >> 4) as usize];
        pair[1] = HEX_DIGITS[(byte & 0x0f) as usize];
    }
    // Only ASCII digits were written.
    std::str::from_utf8(out).unwrap_or_default()
}

/// Parses exactly 64 lowercase hex digits (the stored text of chain links and digests), by table;
/// uppercase, other lengths and anything else: None.
pub fn unhex32(s: &str) -> Option<Digest32> {
    let b: &[u8; 64] = s.as_bytes().try_into().ok()?;
    let mut out = [0u8; 32];
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        let (hi, lo) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 0x0f);
    }
    // Every valid value is below 16; 0xff marks a non-digit.
    (bad < 16).then_some(out)
}

/// Why a scheduler operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("tenant {0:?} has no scheduler chain (`airlock chain tenants` lists the tenants that have one); import bundles into it first")]
    NoChain(String),
    #[error("job {job_id} is not in the chain of tenant {tenant:?} (only imported or enqueued jobs are); `airlock chain show --tenant` lists the jobs it holds")]
    UnknownJob { tenant: String, job_id: String },
    #[error("job {job_id} is {state}; {action} is allowed only after {allowed}")]
    BadTransition {
        job_id: String,
        state: String,
        action: Action,
        allowed: &'static str,
    },
    #[error("job {job_id} is not in the chain of tenant {tenant:?}, so there is no inclusion proof of it; `airlock chain show --tenant {tenant}` lists the chain's jobs")]
    NothingToProve { tenant: String, job_id: String },
    #[error("{0} is not a lifecycle action; use DEQUEUE, EXECUTE, COMPLETE or FAIL (ENQUEUE happens by import)")]
    NotLifecycle(Action),
    #[error("job {job_id} is not covered by a batch snapshot yet (chain position {seq}); run `airlock chain snapshot --tenant {tenant}` first")]
    NotSnapshotted {
        tenant: String,
        job_id: String,
        seq: u64,
    },
    #[error("the stored chain is damaged at scheduler_log row tenant {tenant:?} seq {seq}: {message}; run `airlock chain verify --tenant {tenant}`")]
    Damaged {
        tenant: String,
        seq: u64,
        message: String,
    },
    #[error("the store is damaged: {detail}; nothing was written. Run `airlock chain verify --tenant {tenant}` to see where, and restore the store from a backup before appending to it")]
    TailDamaged { tenant: String, detail: String },
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

#[cfg(test)]
mod hex_tests;
