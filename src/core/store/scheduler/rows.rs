//! Row preparation and the multi-row `INSERT`s that write `scheduler_log` and `scheduler_jobs`.

use super::hex32;
use crate::core::chain::{scheduler_chain_digest, Action, Digest32};
use crate::core::store::StoreError;
use rusqlite::Connection;
use std::ops::Range;

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
pub(super) const INSERT_BATCH: usize = 8;

/// A buffered `scheduler_log` row (and its provenance); texts live in [`Pending::text`].
pub(super) struct PendingRow {
    pub(super) seq: u64,
    pub(super) t_hlc: Range<usize>,
    pub(super) job_id: Range<usize>,
    pub(super) action: Action,
    /// chain_link, lowercase hex.
    pub(super) link: [u8; 64],
    pub(super) payload: Range<usize>,
    pub(super) provenance: Option<PendingProvenance>,
}

pub(super) struct PendingProvenance {
    pub(super) import_id: i64,
    pub(super) source_node: Range<usize>,
    pub(super) orig_link: Digest32,
    pub(super) orig_prev_link: Option<Digest32>,
    pub(super) partition_key: Option<Range<usize>>,
    pub(super) enqueued_at: Range<usize>,
}

/// Appended rows not yet written (flushed in multi-row `INSERT`s).
#[derive(Default)]
pub(super) struct Pending {
    pub(super) rows: Vec<PendingRow>,
    pub(super) text: String,
    /// chain_link of the row before the first buffered one.
    pub(super) prev_before: Option<String>,
    /// Chain link digests of `rows` (filled by [`RowPreparer`] only; `append` keeps its own).
    pub(super) digests: Vec<Digest32>,
}

/// Rows whose chain links are already computed (by a [`RowPreparer`], possibly on another
/// thread), to be written in order by [`ChainAppender::write_prepared`]. Reusable: writing empties
/// it and keeps its buffers.
#[derive(Default)]
pub struct PreparedRows {
    pub(super) pending: Pending,
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
    pub(super) next_seq: u64,
    /// The head before the first prepared row.
    pub(super) start: Option<String>,
    /// chain_link of the last prepared row.
    pub(super) prev: Option<[u8; 64]>,
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
        p.push_row(seq, t_hlc, job_id, action, link, payload, provenance);
        p.digests.push(digest);
        self.prev = Some(link);
        self.next_seq += 1;
        seq
    }
}

impl Pending {
    /// Buffers one chain row (its texts go into the shared text buffer).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_row(
        &mut self,
        seq: u64,
        t_hlc: &str,
        job_id: &str,
        action: Action,
        link: [u8; 64],
        payload: &str,
        provenance: Option<NewProvenance<'_>>,
    ) {
        let row = PendingRow {
            seq,
            t_hlc: self.push_text(t_hlc),
            job_id: self.push_text(job_id),
            action,
            link,
            payload: self.push_text(payload),
            provenance: provenance.map(|v| PendingProvenance {
                import_id: v.import_id,
                source_node: self.push_text(v.source_node),
                orig_link: *v.orig_link,
                orig_prev_link: v.orig_prev_link.copied(),
                partition_key: v.partition_key.map(|k| self.push_text(k)),
                enqueued_at: self.push_text(v.enqueued_at),
            }),
        };
        self.rows.push(row);
    }

    pub(super) fn push_text(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }
    pub(super) fn str(&self, r: &Range<usize>) -> &str {
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

pub(super) fn log_insert_sql(rows: usize) -> &'static str {
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
pub(super) const LOG_ROW_PARAMS: usize = 13;

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
