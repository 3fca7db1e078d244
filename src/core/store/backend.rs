//! The storage interface: what the engine's store rules (chain links, Merkle snapshots, verification,
//! proofs, lifecycle, merge and import, node logs, the clock) need from a store, as primitives inside
//! one transaction. Two implementations: the embedded SQLite store and PostgreSQL
//! (the `postgres` module). The rules are written once, over `dyn StoreTx`; a backend only reads and
//! writes rows.

use super::scheduler::{ChainHead, ImportRecord, Snapshot, SnapshotRow, StoredEntry};
use super::value::Val;
use super::StoreError;
use crate::core::chain::{Action, Digest32};
use crate::core::merge::JobMap;
use std::ops::Range;

/// What a transaction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// A consistent read-only view (verify, show, prove, export, plans).
    Read,
    /// A write. SQLite: `BEGIN IMMEDIATE` (one writer at a time). PostgreSQL: `READ COMMITTED`;
    /// writers of one tenant chain serialize on [`StoreTx::lock_chain`].
    Write,
}

/// A stored 32-byte digest column (`what` names it), or what is wrong with it (each backend
/// reports that as its own damage error).
pub fn digest_col(v: &[u8], what: &str) -> Result<Digest32, String> {
    <[u8; 32]>::try_from(v).map_err(|_| format!("{what} has {} bytes, not 32", v.len()))
}

/// A stored position or count column, which is never negative.
pub fn position_col(v: i64, what: &str) -> Result<u64, String> {
    u64::try_from(v).map_err(|_| format!("{what} is negative ({v})"))
}

/// An open store of either kind.
pub trait Backend {
    /// Starts a transaction; dropping it without [`StoreTx::commit`] rolls it back.
    fn begin(&self, kind: TxKind) -> Result<Box<dyn StoreTx + '_>, StoreError>;
}

/// A node log stored for a tenant: its entry count, last tHlc and chain head (base64).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLogSummary {
    pub node_id: String,
    pub entries: u64,
    pub last_hlc: String,
    pub chain_head: String,
}

/// A job of a tenant chain: the payloadHash recorded at ENQUEUE, the chain position of its ENQUEUE
/// entry, its lifecycle state (the last action) and the position of its last entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub payload_hash: Digest32,
    pub enqueue_seq: u64,
    pub state: String,
    pub last_seq: u64,
}

/// The last entry of a node log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTail {
    pub seq: u64,
    pub link: Digest32,
    pub t_hlc: String,
}

/// One node-log row (SPEC section 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub partition_key: Option<String>,
    pub payload: String,
    pub payload_hash: Digest32,
    pub prev_link: Option<Digest32>,
    pub link: Digest32,
    pub enqueued_at: String,
}

/// One stored scheduler-chain row as the rules read it (texts exactly as stored).
#[derive(Debug, Clone, Copy)]
pub struct ChainRow<'a> {
    pub seq: u64,
    pub t_hlc: &'a str,
    pub job_id: &'a str,
    pub action: &'a str,
    pub prev_chain_link: Option<&'a str>,
    pub chain_link: &'a str,
    /// The canonical payload text every digest is computed from.
    pub payload: &'a str,
    /// Whether a second stored form of the payload (PostgreSQL's `payload JSONB`) still equals the
    /// canonical text's value; always true where there is no second form.
    pub payload_agrees: bool,
}

#[derive(Debug, Clone)]
struct PageRow {
    seq: u64,
    texts: [Range<usize>; 6],
    has_prev: bool,
    payload_agrees: bool,
}

/// A page of chain rows read in one query, their texts in one buffer (reused between pages).
#[derive(Debug, Default)]
pub struct ChainPage {
    text: String,
    rows: Vec<PageRow>,
}

/// Rows per [`ChainPage`] read by the rules.
pub const PAGE_ROWS: u64 = 8192;

impl ChainPage {
    pub fn clear(&mut self) {
        self.text.clear();
        self.rows.clear();
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// Appends a row (its texts are copied into the page).
    pub fn push(&mut self, r: ChainRow<'_>) {
        let mut put = |s: &str| {
            let start = self.text.len();
            self.text.push_str(s);
            start..self.text.len()
        };
        let texts = [
            put(r.t_hlc),
            put(r.job_id),
            put(r.action),
            put(r.prev_chain_link.unwrap_or("")),
            put(r.chain_link),
            put(r.payload),
        ];
        self.rows.push(PageRow {
            seq: r.seq,
            texts,
            has_prev: r.prev_chain_link.is_some(),
            payload_agrees: r.payload_agrees,
        });
    }
    pub fn get(&self, i: usize) -> ChainRow<'_> {
        let r = &self.rows[i];
        let t = |k: usize| &self.text[r.texts[k].clone()];
        ChainRow {
            seq: r.seq,
            t_hlc: t(0),
            job_id: t(1),
            action: t(2),
            prev_chain_link: r.has_prev.then(|| t(3)),
            chain_link: t(4),
            payload: t(5),
            payload_agrees: r.payload_agrees,
        }
    }
    pub fn last_seq(&self) -> Option<u64> {
        self.rows.last().map(|r| r.seq)
    }
}

/// Provenance of an imported entry, written with it. The entry keeps its original tHlc, so that is
/// not stored again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowProvenance<'a> {
    pub import_id: i64,
    pub source_node: &'a str,
    pub orig_link: &'a Digest32,
    pub orig_prev_link: Option<&'a Digest32>,
    pub partition_key: Option<&'a str>,
    pub enqueued_at: &'a str,
}

#[derive(Debug, Clone)]
struct BatchRow {
    seq: u64,
    texts: [Range<usize>; 3], // t_hlc, job_id, payload
    action: Action,
    link: [u8; 64],
    provenance: Option<BatchProvenance>,
}

#[derive(Debug, Clone)]
struct BatchProvenance {
    import_id: i64,
    source_node: Range<usize>,
    orig_link: Digest32,
    orig_prev_link: Option<Digest32>,
    partition_key: Option<Range<usize>>,
    enqueued_at: Range<usize>,
}

/// New chain rows with their links computed, in chain order, to be written by
/// [`StoreTx::write_rows`]; texts in one buffer. Reusable: [`RowBatch::clear`] keeps the buffers.
#[derive(Debug, Default)]
pub struct RowBatch {
    text: String,
    rows: Vec<BatchRow>,
    /// chain_link of the row before the first one (None: the first row is the genesis entry).
    prev_before: Option<String>,
    /// The rows' chain links as digests.
    digests: Vec<Digest32>,
}

/// One row of a [`RowBatch`].
#[derive(Debug, Clone, Copy)]
pub struct BatchRowRef<'a> {
    pub seq: u64,
    pub t_hlc: &'a str,
    pub job_id: &'a str,
    pub action: Action,
    pub prev_chain_link: Option<&'a str>,
    pub chain_link: &'a str,
    pub payload: &'a str,
    pub provenance: Option<RowProvenance<'a>>,
}

impl RowBatch {
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn clear(&mut self) {
        self.text.clear();
        self.rows.clear();
        self.digests.clear();
        self.prev_before = None;
    }
    /// The rows' chain links as digests, in order.
    pub fn digests(&self) -> &[Digest32] {
        &self.digests
    }
    fn put(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }
    /// Appends a row whose link is `link` (its predecessor is the previous row, or `prev` for the
    /// first row of the batch).
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        seq: u64,
        t_hlc: &str,
        job_id: &str,
        action: Action,
        prev: Option<&str>,
        link: Digest32,
        payload: &str,
        provenance: Option<RowProvenance<'_>>,
    ) {
        if self.rows.is_empty() {
            self.prev_before = prev.map(str::to_string);
        }
        let mut hex_link = [0u8; 64];
        super::scheduler::hex32(&link, &mut hex_link);
        let texts = [self.put(t_hlc), self.put(job_id), self.put(payload)];
        let provenance = provenance.map(|v| BatchProvenance {
            import_id: v.import_id,
            source_node: self.put(v.source_node),
            orig_link: *v.orig_link,
            orig_prev_link: v.orig_prev_link.copied(),
            partition_key: v.partition_key.map(|k| self.put(k)),
            enqueued_at: self.put(v.enqueued_at),
        });
        self.rows.push(BatchRow {
            seq,
            texts,
            action,
            link: hex_link,
            provenance,
        });
        self.digests.push(link);
    }
    /// Row `i`.
    pub fn get(&self, i: usize) -> BatchRowRef<'_> {
        let r = &self.rows[i];
        let t = |x: &Range<usize>| &self.text[x.clone()];
        fn link(l: &[u8; 64]) -> &str {
            std::str::from_utf8(l).unwrap_or("")
        }
        BatchRowRef {
            seq: r.seq,
            t_hlc: t(&r.texts[0]),
            job_id: t(&r.texts[1]),
            action: r.action,
            prev_chain_link: match i {
                0 => self.prev_before.as_deref(),
                _ => Some(link(&self.rows[i - 1].link)),
            },
            chain_link: link(&r.link),
            payload: t(&r.texts[2]),
            provenance: r.provenance.as_ref().map(|v| RowProvenance {
                import_id: v.import_id,
                source_node: t(&v.source_node),
                orig_link: &v.orig_link,
                orig_prev_link: v.orig_prev_link.as_ref(),
                partition_key: v.partition_key.as_ref().map(t),
                enqueued_at: t(&v.enqueued_at),
            }),
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = BatchRowRef<'_>> {
        (0..self.rows.len()).map(|i| self.get(i))
    }
}

/// The storage primitives inside one transaction. Every method reads or writes rows; none decides
/// anything a SPEC rule decides.
pub trait StoreTx {
    // --- HLC state ---
    /// The largest persisted `(physical, logical)` of any clock in the store.
    fn load_clock_state(&mut self) -> Result<Option<(u64, u32)>, StoreError>;
    /// Persists a clock's last timestamp (only ever moves it forward).
    fn save_clock_state(&mut self, node: &str, last: (u64, u32)) -> Result<(), StoreError>;

    /// Refuses to append to a damaged store: SQLite's `quick_check` of the tables an append
    /// writes, PostgreSQL's amcheck `bt_index_check` of their indexes (the head entry and the last
    /// snapshot are checked by the shared rule `rules::check_tail`).
    fn check_before_append(&mut self, _tenant: &str) -> Result<(), StoreError> {
        Ok(())
    }

    // --- scheduler chain: reads ---
    /// The ids of `tenant`'s scheduler log rows that are in no chain position, at most
    /// `limit`, when the log holds more of the tenant's rows than its chain's `length`: nothing on
    /// SQLite (its log rows are the chain positions); on PostgreSQL, rows of the seed's
    /// `scheduler.scheduler_log` without an `airlock.chain_entry` (written into the seed's table
    /// directly), which no chain read sees.
    fn log_rows_outside_chain(
        &mut self,
        _tenant: &str,
        _length: u64,
        _limit: u64,
    ) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }
    fn chain_head(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError>;
    /// Serializes writers of `tenant`'s chain until this transaction ends (PostgreSQL:
    /// `SELECT ... FOR UPDATE` on its `chain_heads` row); returns the head as of then.
    fn lock_chain(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError>;
    /// Every tenant's head, by tenant id.
    fn chain_heads(&mut self) -> Result<Vec<ChainHead>, StoreError>;
    /// The tenant's `batch_snapshot` rows in chain order, each a snapshot or what is damaged in
    /// it ([`RawSnapshot::check`]): one damaged row does not hide the others.
    ///
    /// [`RawSnapshot::check`]: crate::core::store::scheduler::RawSnapshot::check
    fn snapshot_rows(&mut self, tenant: &str) -> Result<Vec<SnapshotRow>, StoreError>;
    /// The tenant's snapshots in chain order; a damaged row is an error naming it
    /// ([`StoreError::SnapshotDamaged`]).
    fn snapshots(&mut self, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
        self.snapshot_rows(tenant)?
            .into_iter()
            .map(|r| r.map_err(|d| d.into_error()))
            .collect()
    }
    /// Replaces `page` with the chain rows at positions `from..to`, at most [`PAGE_ROWS`], in order.
    fn chain_page(
        &mut self,
        tenant: &str,
        from: u64,
        to: u64,
        page: &mut ChainPage,
    ) -> Result<(), StoreError>;
    /// Entries `from..from+limit` with provenance, for displays.
    fn entries(
        &mut self,
        tenant: &str,
        from: u64,
        limit: u64,
    ) -> Result<Vec<StoredEntry>, StoreError>;
    fn job(&mut self, tenant: &str, id: &[u8; 16]) -> Result<Option<JobRow>, StoreError>;
    /// The payloadHash of each of `ids` already in the tenant's chain (of `chain_length` entries):
    /// one scan of the tenant's jobs when the chain is no longer than the ids, else a lookup per
    /// id (the same policy on both stores; each only reads its rows).
    fn known_jobs(
        &mut self,
        tenant: &str,
        chain_length: u64,
        ids: &mut dyn ExactSizeIterator<Item = &[u8; 16]>,
    ) -> Result<JobMap<Digest32>, StoreError> {
        let mut out = JobMap::default();
        if chain_length == 0 {
            return Ok(out);
        }
        if chain_length <= ids.len() as u64 {
            self.all_jobs(tenant, &mut out)?;
        } else {
            self.jobs_by_id(tenant, ids, &mut out)?;
        }
        Ok(out)
    }
    /// Adds every job of the tenant's chain to `out` (job id, payloadHash).
    fn all_jobs(&mut self, tenant: &str, out: &mut JobMap<Digest32>) -> Result<(), StoreError>;
    /// Adds the jobs among `ids` that the tenant's chain holds to `out`.
    fn jobs_by_id(
        &mut self,
        tenant: &str,
        ids: &mut dyn ExactSizeIterator<Item = &[u8; 16]>,
        out: &mut JobMap<Digest32>,
    ) -> Result<(), StoreError>;
    /// The canonical payload text at a chain position.
    fn payload_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError>;
    /// The tHlc at a chain position.
    fn t_hlc_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError>;
    /// The earlier import of exactly this bundle (same id and manifest digest), if any: an
    /// unforced one before a forced one, a complete one before a partial one, then the first.
    fn find_import(
        &mut self,
        tenant: &str,
        bundle_id: &str,
        manifest_digest: &str,
    ) -> Result<Option<ImportRecord>, StoreError>;

    // --- scheduler chain: writes ---
    fn write_rows(
        &mut self,
        tenant: &str,
        created_at: &str,
        rows: &RowBatch,
    ) -> Result<(), StoreError>;
    /// Records jobs' ENQUEUE rows `(job id, payloadHash, chain position)`.
    fn insert_jobs(
        &mut self,
        tenant: &str,
        jobs: &[([u8; 16], Digest32, u64)],
    ) -> Result<(), StoreError>;
    fn set_job_state(
        &mut self,
        tenant: &str,
        id: &[u8; 16],
        action: Action,
        seq: u64,
    ) -> Result<(), StoreError>;
    fn write_head(&mut self, head: &ChainHead) -> Result<(), StoreError>;
    /// Stores a snapshot; returns its id.
    fn insert_snapshot(&mut self, s: &Snapshot) -> Result<i64, StoreError>;
    /// Stores an `imports` row; returns its id.
    fn insert_import(&mut self, r: &ImportRecord) -> Result<i64, StoreError>;

    // --- node job logs ---
    fn node_tail(&mut self, tenant: &str, node: &str) -> Result<Option<NodeTail>, StoreError>;
    /// (seq, canonical payload) of `job_id` in the node log.
    fn node_job(
        &mut self,
        tenant: &str,
        node: &str,
        job_id: &str,
    ) -> Result<Option<(u64, String)>, StoreError>;
    fn insert_node_row(
        &mut self,
        tenant: &str,
        node: &str,
        row: &NodeRow,
    ) -> Result<(), StoreError>;
    fn node_logs(
        &mut self,
        tenant: &str,
        node: Option<&str>,
    ) -> Result<Vec<NodeLogSummary>, StoreError>;
    /// Node-log rows from `from_seq` on, at most `limit`, in order.
    fn node_rows(
        &mut self,
        tenant: &str,
        node: &str,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<NodeRow>, StoreError>;

    // --- the operations tables (audit log, metrics, exports, notification queue) ---
    /// Runs a statement of airlock's portable SQL (the portable statements of the operations tables); returns the rows changed.
    fn sql_exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError>;
    /// Runs a portable query; every row's values in column order.
    fn sql_query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError>;
    /// Serializes the writers of an operations table until this transaction ends (SQLite: the
    /// write transaction began `IMMEDIATE`, already the only writer; PostgreSQL: `LOCK TABLE`).
    fn lock_table(&mut self, table: &str) -> Result<(), StoreError>;

    /// Makes every write of this transaction durable (per the backend's settings).
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
}
