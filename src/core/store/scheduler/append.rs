//! Appending to a tenant chain inside a transaction: [`ChainAppender`] and the batch roots it snapshots.

use super::read::chain_head;
use super::rows::{
    log_insert_sql, NewProvenance, Pending, PreparedRows, RowPreparer, INSERT_BATCH, LOG_ROW_PARAMS,
};
use super::snapshots::{Snapshot, SnapshotSigner};
use super::{hex32, SchedulerError, SNAPSHOT_PAYLOAD_TYPE};
use crate::core::chain::{scheduler_chain_digest, Action, Digest32};
use crate::core::merkle;
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;
use rusqlite::{params, Connection};
use serde::Serialize;

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
    pub(super) uncovered: Vec<Digest32>,
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
                "SELECT seq, chain_link FROM scheduler_log WHERE tenant_id = ?1 AND seq >= ?2 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![tenant, covered as i64])?;
            while let Some(r) = rows.next()? {
                let link: String = r.get(1)?;
                let d = super::unhex32(&link).ok_or_else(|| StoreError::CorruptRow {
                    table: "scheduler_log",
                    position: format!("tenant {tenant:?} seq {}", r.get::<_, i64>(0).unwrap_or(-1)),
                    detail: format!(
                        "chain_link {} is not 64 lowercase hex digits",
                        crate::core::store::quoted(&link)
                    ),
                })?;
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
        p.push_row(seq, t_hlc, job_id, action, link, payload, provenance);
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
