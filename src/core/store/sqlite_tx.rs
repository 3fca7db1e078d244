//! [`StoreTx`] over one SQLite transaction of the embedded store (tables of migrations 1 and 2).

use super::backend::NodeLogSummary;
use super::backend::{
    digest_col, position_col, Backend, ChainPage, ChainRow, JobRow, NodeRow, NodeTail, RowBatch,
    StoreTx, TxKind,
};
use super::scheduler::{
    ChainHead, DamagedSnapshot, ImportRecord, Provenance, RawSnapshot, Snapshot, SnapshotRow,
    StoredEntry,
};
use super::sql::Val;
use super::sqlite_borrowed::BorrowedStmt;
use super::{Store, StoreError};
use crate::core::chain::{Action, Digest32};
use crate::core::merge::JobMap;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rusqlite::{params, Connection, OptionalExtension};

impl Backend for Store {
    fn begin(&self, kind: TxKind) -> Result<Box<dyn StoreTx + '_>, StoreError> {
        self.conn()
            .execute_batch(match kind {
                TxKind::Read => "BEGIN DEFERRED",
                TxKind::Write => "BEGIN IMMEDIATE",
            })
            .map_err(|e| super::busy_or_sql(e, self.path()))?;
        Ok(Box::new(SqliteTx {
            conn: self.conn(),
            path: self.path(),
            open: true,
        }))
    }
}

/// One open transaction; rolled back when dropped without [`StoreTx::commit`].
pub struct SqliteTx<'a> {
    conn: &'a Connection,
    path: &'a std::path::Path,
    open: bool,
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A damaged row of the store at `path` (its path in the message: restore or recover that file).
fn damaged(path: &std::path::Path, detail: String) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail,
    }
}

fn digest(path: &std::path::Path, v: &[u8], what: &str) -> Result<Digest32, StoreError> {
    digest_col(v, what).map_err(|d| damaged(path, d))
}

fn u64_of(path: &std::path::Path, v: i64, what: &str) -> Result<u64, StoreError> {
    position_col(v, what).map_err(|d| damaged(path, d))
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

const SNAPSHOT_COLUMNS: &str = "id, tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope, created_at";

/// One `batch_snapshot` row, checked ([`RawSnapshot::check`]). A column of another type than the
/// schema's (SQLite keeps what it is given) is damage naming that column too.
fn snapshot_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<SnapshotRow> {
    let id: i64 = r.get(0)?;
    let tenant_id: String = r.get(1)?;
    let mut bad = None;
    let mut col = |i: usize, want: &'static str| -> Option<rusqlite::types::Value> {
        use rusqlite::types::Value;
        let v: Value = r.get(i).ok()?;
        let ok = matches!(
            (&v, want),
            (Value::Integer(_), "an integer")
                | (Value::Text(_), "text")
                | (Value::Text(_) | Value::Null, "text or NULL")
        );
        if !ok && bad.is_none() {
            bad = Some((i, want, v.data_type()));
        }
        Some(v)
    };
    let text = |v: Option<rusqlite::types::Value>| match v {
        Some(rusqlite::types::Value::Text(t)) => t,
        _ => String::new(),
    };
    let int = |v: Option<rusqlite::types::Value>| match v {
        Some(rusqlite::types::Value::Integer(n)) => n,
        _ => 0,
    };
    let raw = RawSnapshot {
        snapshot_hlc: text(col(2, "text")),
        from_chain_link: text(col(3, "text")),
        to_chain_link: text(col(4, "text")),
        from_seq: int(col(5, "an integer")),
        entry_count: int(col(6, "an integer")),
        merkle_root: text(col(7, "text")),
        dsse_envelope: match col(8, "text or NULL") {
            Some(rusqlite::types::Value::Text(t)) => Some(t),
            _ => None,
        },
        created_at: text(col(9, "text")),
        id,
        tenant_id,
    };
    if let Some((i, want, found)) = bad {
        return Ok(Err(DamagedSnapshot {
            id: raw.id,
            tenant_id: raw.tenant_id,
            column: SNAPSHOT_NAMES[i],
            why: format!("holds a value of type {found}, not {want}"),
            expected: want,
            actual: found.to_string(),
            rest: None,
        }));
    }
    Ok(raw.check())
}

/// The names of [`SNAPSHOT_COLUMNS`], by index.
const SNAPSHOT_NAMES: [&str; 10] = [
    "id",
    "tenant_id",
    "snapshot_hlc",
    "from_chain_link",
    "to_chain_link",
    "from_seq",
    "entry_count",
    "merkle_root",
    "dsse_envelope",
    "created_at",
];

const IMPORT_COLUMNS: &str = "id, import_batch, tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer,
    file_name, entries, new_entries, duplicates, dropped, forced, imported_at";

fn import_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<ImportRecord> {
    let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
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
        entries: n(9)?,
        new_entries: n(10)?,
        duplicates: n(11)?,
        dropped: n(12)?,
        forced: r.get(13)?,
        imported_at: r.get(14)?,
    })
}

/// Rows per multi-row `INSERT` into `scheduler_log` (8 to 16 measured best on the import benchmark).
const INSERT_ROWS: usize = 8;
/// Parameters per `scheduler_log` row after the shared tenant and `created_at`.
const LOG_ROW_PARAMS: usize = 13;

/// `INSERT OR FAIL INTO scheduler_log ... VALUES (...), ...` for `rows` rows, built once per size.
/// `OR FAIL`: a multi-row statement then needs no statement journal (a failure rolls the whole
/// transaction back anyway).
fn log_insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &SQL.get_or_init(|| {
        (0..=INSERT_ROWS)
            .map(|n| {
                let mut sql = String::from(
                    "INSERT OR FAIL INTO scheduler_log (tenant_id, seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload, created_at, \
                     import_id, source_node, orig_link, orig_prev_link, partition_key, enqueued_at) VALUES ",
                );
                for r in 0..n {
                    let i = 3 + r * LOG_ROW_PARAMS;
                    let p: Vec<String> = (i..i + LOG_ROW_PARAMS).map(|k| format!("?{k}")).collect();
                    if r > 0 {
                        sql.push(',');
                    }
                    sql.push_str(&format!("(?1,{},?2,{})", p[..7].join(","), p[7..].join(",")));
                }
                sql
            })
            .collect()
    })[rows]
}

/// Binds one `scheduler_log` row's parameters from `i` on (see [`log_insert_sql`]), borrowing
/// every value from the batch.
fn bind_log_row<'a>(
    stmt: &mut BorrowedStmt<'a>,
    i: usize,
    r: crate::core::store::backend::BatchRowRef<'a>,
) -> rusqlite::Result<()> {
    stmt.int(i, Some(i64_of(r.seq)))?;
    stmt.text(i + 1, Some(r.t_hlc))?;
    stmt.text(i + 2, Some(r.job_id))?;
    stmt.text(i + 3, Some(r.action.as_str()))?;
    stmt.text(i + 4, r.prev_chain_link)?;
    stmt.text(i + 5, Some(r.chain_link))?;
    stmt.text(i + 6, Some(r.payload))?;
    let v = r.provenance;
    stmt.int(i + 7, v.map(|v| v.import_id))?;
    stmt.text(i + 8, v.map(|v| v.source_node))?;
    stmt.blob(i + 9, v.map(|v| v.orig_link.as_slice()))?;
    stmt.blob(
        i + 10,
        v.and_then(|v| v.orig_prev_link.map(|l| l.as_slice())),
    )?;
    stmt.text(i + 11, v.and_then(|v| v.partition_key))?;
    stmt.text(i + 12, v.map(|v| v.enqueued_at))
}

/// Rows per multi-row `INSERT` into `scheduler_jobs`.
const JOBS_ROWS: usize = 32;

fn jobs_insert_sql(rows: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &SQL.get_or_init(|| {
        (0..=JOBS_ROWS)
            .map(|n| {
                let mut sql = String::from(
                    "INSERT OR FAIL INTO scheduler_jobs (tenant_id, job_id, payload_hash, enqueue_seq, state, last_seq) VALUES ",
                );
                for r in 0..n {
                    let i = 2 + r * 3;
                    if r > 0 {
                        sql.push(',');
                    }
                    sql.push_str(&format!("(?1,?{},?{},?{},'ENQUEUE',?{})", i, i + 1, i + 2, i + 2));
                }
                sql
            })
            .collect()
    })[rows]
}

impl StoreTx for SqliteTx<'_> {
    fn check_before_append(&mut self, _tenant: &str) -> Result<(), StoreError> {
        super::sqlite_check::quick_check(self.conn, self.path)
    }

    fn load_clock_state(&mut self) -> Result<Option<(u64, u32)>, StoreError> {
        super::load_clock_state(self.conn)
    }

    fn save_clock_state(&mut self, node: &str, last: (u64, u32)) -> Result<(), StoreError> {
        super::save_clock_state(self.conn, node, last)
    }

    fn chain_head(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT head_chain_link, head_hlc, length, updated_at FROM chain_heads WHERE tenant_id = ?1",
            )?
            .query_row(params![tenant], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?, r.get(3)?))
            })
            .optional()?;
        row.map(|(head_chain_link, head_hlc, length, updated_at)| {
            Ok(ChainHead {
                tenant_id: tenant.to_string(),
                head_chain_link,
                head_hlc,
                length: u64_of(self.path, length, "chain_heads.length")?,
                updated_at,
            })
        })
        .transpose()
    }

    fn lock_chain(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
        // The write transaction began IMMEDIATE: it already is the only writer of the store.
        self.chain_head(tenant)
    }

    fn chain_heads(&mut self) -> Result<Vec<ChainHead>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT tenant_id, head_chain_link, head_hlc, length, updated_at FROM chain_heads ORDER BY tenant_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get::<_, i64>(3)?,
                r.get(4)?,
            ))
        })?;
        rows.map(|row| {
            let (tenant_id, head_chain_link, head_hlc, length, updated_at) = row?;
            Ok(ChainHead {
                tenant_id,
                head_chain_link,
                head_hlc,
                length: u64_of(self.path, length, "chain_heads.length")?,
                updated_at,
            })
        })
        .collect()
    }

    fn snapshot_rows(&mut self, tenant: &str) -> Result<Vec<SnapshotRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq"
        ))?;
        let rows = stmt.query_map(params![tenant], snapshot_of)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn chain_page(
        &mut self,
        tenant: &str,
        from: u64,
        to: u64,
        page: &mut ChainPage,
    ) -> Result<(), StoreError> {
        page.clear();
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log
             WHERE tenant_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq LIMIT ?4",
        )?;
        let mut rows = stmt.query(params![
            tenant,
            i64_of(from),
            i64_of(to),
            i64_of(super::backend::PAGE_ROWS)
        ])?;
        while let Some(r) = rows.next()? {
            let text = |i: usize| {
                r.get_ref(i)
                    .ok()
                    .and_then(|v| v.as_str().ok())
                    .unwrap_or("")
            };
            page.push(ChainRow {
                seq: u64_of(self.path, r.get(0)?, "scheduler_log.seq")?,
                t_hlc: text(1),
                job_id: text(2),
                action: text(3),
                prev_chain_link: r.get_ref(4)?.as_str_or_null().unwrap_or(None),
                chain_link: text(5),
                payload: text(6),
                payload_agrees: true,
            });
        }
        Ok(())
    }

    fn entries(
        &mut self,
        tenant: &str,
        from: u64,
        limit: u64,
    ) -> Result<Vec<StoredEntry>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT l.seq, l.t_hlc, l.job_id, l.action, l.prev_chain_link, l.chain_link, l.payload, l.created_at,
                    l.import_id, i.bundle_id, i.file_name, l.source_node, l.t_hlc, l.orig_link, l.orig_prev_link,
                    l.partition_key, l.enqueued_at
             FROM scheduler_log l
             LEFT JOIN imports i ON i.id = l.import_id
             WHERE l.tenant_id = ?1 AND l.seq >= ?2
             ORDER BY l.seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![tenant, i64_of(from), i64_of(limit)], |r| {
            let import_id: Option<i64> = r.get(8)?;
            let provenance = match import_id {
                Some(import_id) => Some(Provenance {
                    import_id,
                    bundle_id: r.get::<_, Option<String>>(9)?.unwrap_or_default(),
                    file_name: r.get::<_, Option<String>>(10)?.unwrap_or_default(),
                    source_node: r.get::<_, Option<String>>(11)?.unwrap_or_default(),
                    original_t_hlc: r.get(12)?,
                    original_link: B64.encode(r.get::<_, Option<Vec<u8>>>(13)?.unwrap_or_default()),
                    original_prev_link: r.get::<_, Option<Vec<u8>>>(14)?.map(|b| B64.encode(b)),
                    partition_key: r.get(15)?,
                    enqueued_at: r.get::<_, Option<String>>(16)?.unwrap_or_default(),
                }),
                None => None,
            };
            Ok(StoredEntry {
                seq: r.get::<_, i64>(0)?.max(0) as u64,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                action: r.get(3)?,
                prev_chain_link: r.get(4)?,
                chain_link: r.get(5)?,
                payload: r.get(6)?,
                created_at: r.get(7)?,
                provenance,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn job(&mut self, tenant: &str, id: &[u8; 16]) -> Result<Option<JobRow>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT payload_hash, enqueue_seq, state, last_seq FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
            )?
            .query_row(params![tenant, id.as_slice()], |r| {
                Ok((
                    r.get::<_, Vec<u8>>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()?;
        row.map(|(h, e, state, l)| {
            Ok(JobRow {
                payload_hash: digest(self.path, &h, "scheduler_jobs.payload_hash")?,
                enqueue_seq: u64_of(self.path, e, "scheduler_jobs.enqueue_seq")?,
                state,
                last_seq: u64_of(self.path, l, "scheduler_jobs.last_seq")?,
            })
        })
        .transpose()
    }

    fn all_jobs(&mut self, tenant: &str, out: &mut JobMap<Digest32>) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT job_id, payload_hash FROM scheduler_jobs WHERE tenant_id = ?1",
        )?;
        let mut rows = stmt.query(params![tenant])?;
        while let Some(r) = rows.next()? {
            let id = r.get_ref(0)?.as_blob().unwrap_or(&[]);
            if let Ok(id) = <[u8; 16]>::try_from(id) {
                let h = r.get_ref(1)?.as_blob().unwrap_or(&[]);
                out.insert(id, digest(self.path, h, "scheduler_jobs.payload_hash")?);
            }
        }
        Ok(())
    }

    fn jobs_by_id(
        &mut self,
        tenant: &str,
        ids: &mut dyn ExactSizeIterator<Item = &[u8; 16]>,
        out: &mut JobMap<Digest32>,
    ) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT payload_hash FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
        )?;
        for id in ids {
            if let Some(h) = stmt
                .query_row(params![tenant, id.as_slice()], |r| r.get::<_, Vec<u8>>(0))
                .optional()?
            {
                out.insert(*id, digest(self.path, &h, "scheduler_jobs.payload_hash")?);
            }
        }
        Ok(())
    }

    fn payload_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT payload FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2")?
            .query_row(params![tenant, i64_of(seq)], |r| r.get(0))
            .optional()?)
    }

    fn t_hlc_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT t_hlc FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2")?
            .query_row(params![tenant, i64_of(seq)], |r| r.get(0))
            .optional()?)
    }

    fn find_import(
        &mut self,
        tenant: &str,
        bundle_id: &str,
        manifest_digest: &str,
    ) -> Result<Option<ImportRecord>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT {IMPORT_COLUMNS} FROM imports WHERE tenant_id = ?1 AND bundle_id = ?2 AND manifest_digest = ?3
                 ORDER BY forced, dropped > 0, id LIMIT 1"
            ))?
            .query_row(params![tenant, bundle_id, manifest_digest], import_of)
            .optional()?)
    }

    fn write_rows(
        &mut self,
        tenant: &str,
        created_at: &str,
        rows: &RowBatch,
    ) -> Result<(), StoreError> {
        // One statement for all full groups (its constants bound once; executing resets it but
        // keeps the bindings), one more for the remainder. Values are bound borrowed, not copied.
        let full = rows.len() / INSERT_ROWS * INSERT_ROWS;
        let groups = [
            (0, full, INSERT_ROWS),
            (full, rows.len(), rows.len() - full),
        ];
        for (from, to, n) in groups {
            if from == to {
                continue;
            }
            let mut stmt = BorrowedStmt::prepare(self.conn, log_insert_sql(n))?;
            stmt.text(1, Some(tenant))?;
            stmt.text(2, Some(created_at))?;
            for done in (from..to).step_by(n) {
                for k in 0..n {
                    bind_log_row(&mut stmt, 3 + k * LOG_ROW_PARAMS, rows.get(done + k))?;
                }
                stmt.execute()?;
            }
        }
        Ok(())
    }

    fn insert_jobs(
        &mut self,
        tenant: &str,
        jobs: &[([u8; 16], Digest32, u64)],
    ) -> Result<(), StoreError> {
        let full = jobs.len() / JOBS_ROWS * JOBS_ROWS;
        for part in [&jobs[..full], &jobs[full..]] {
            let Some(first) = part.chunks(JOBS_ROWS).next() else {
                continue;
            };
            // One statement per group size, its tenant bound once (see `write_rows`).
            let mut stmt = BorrowedStmt::prepare(self.conn, jobs_insert_sql(first.len()))?;
            stmt.text(1, Some(tenant))?;
            for chunk in part.chunks(JOBS_ROWS) {
                for (k, (id, hash, seq)) in chunk.iter().enumerate() {
                    let i = 2 + k * 3;
                    stmt.blob(i, Some(id.as_slice()))?;
                    stmt.blob(i + 1, Some(hash.as_slice()))?;
                    stmt.int(i + 2, Some(i64_of(*seq)))?;
                }
                stmt.execute()?;
            }
        }
        Ok(())
    }

    fn set_job_state(
        &mut self,
        tenant: &str,
        id: &[u8; 16],
        action: Action,
        seq: u64,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE scheduler_jobs SET state = ?3, last_seq = ?4 WHERE tenant_id = ?1 AND job_id = ?2",
            )?
            .execute(params![tenant, id.as_slice(), action.as_str(), i64_of(seq)])?;
        Ok(())
    }

    fn write_head(&mut self, h: &ChainHead) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO chain_heads (tenant_id, head_chain_link, head_hlc, length, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(tenant_id) DO UPDATE SET head_chain_link = excluded.head_chain_link,
                   head_hlc = excluded.head_hlc, length = excluded.length, updated_at = excluded.updated_at",
            )?
            .execute(params![
                h.tenant_id,
                h.head_chain_link,
                h.head_hlc,
                i64_of(h.length),
                h.updated_at
            ])?;
        Ok(())
    }

    fn insert_snapshot(&mut self, s: &Snapshot) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO batch_snapshot (tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                s.tenant_id,
                s.snapshot_hlc,
                s.from_chain_link,
                s.to_chain_link,
                i64_of(s.from_seq),
                i64_of(s.entry_count),
                s.merkle_root,
                s.dsse_envelope.as_ref().map(|e| e.to_string()),
                s.created_at
            ])?;
        Ok(self.conn.last_insert_rowid())
    }

    fn insert_import(&mut self, r: &ImportRecord) -> Result<i64, StoreError> {
        self.conn.prepare_cached(
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
            i64_of(r.entries),
            i64_of(r.new_entries),
            i64_of(r.duplicates),
            i64_of(r.dropped),
            r.forced,
            r.imported_at
        ])?;
        Ok(self.conn.last_insert_rowid())
    }

    fn node_tail(&mut self, tenant: &str, node: &str) -> Result<Option<NodeTail>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT seq, link, t_hlc FROM node_log WHERE tenant_id = ?1 AND node_id = ?2 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row(params![tenant, node], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get(2)?))
            })
            .optional()?;
        row.map(|(seq, link, t_hlc)| {
            Ok(NodeTail {
                seq: u64_of(self.path, seq, "node_log.seq")?,
                link: digest(self.path, &link, "node_log.link")?,
                t_hlc,
            })
        })
        .transpose()
    }

    fn node_job(
        &mut self,
        tenant: &str,
        node: &str,
        job_id: &str,
    ) -> Result<Option<(u64, String)>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT seq, payload FROM node_log INDEXED BY idx_node_log_job WHERE tenant_id = ?1 AND node_id = ?2 AND job_id = ?3",
            )?
            .query_row(params![tenant, node, job_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get(1)?))
            })
            .optional()?;
        row.map(|(s, p)| Ok((u64_of(self.path, s, "node_log.seq")?, p)))
            .transpose()
    }

    fn insert_node_row(
        &mut self,
        tenant: &str,
        node: &str,
        row: &NodeRow,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO node_log (tenant_id, node_id, seq, t_hlc, job_id, partition_key, payload,
                                       payload_hash, prev_link, link, enqueued_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                tenant,
                node,
                i64_of(row.seq),
                row.t_hlc,
                row.job_id,
                row.partition_key,
                row.payload,
                row.payload_hash.as_slice(),
                row.prev_link.as_ref().map(|p| p.as_slice()),
                row.link.as_slice(),
                row.enqueued_at,
            ])?;
        Ok(())
    }

    fn node_logs(
        &mut self,
        tenant: &str,
        node: Option<&str>,
    ) -> Result<Vec<NodeLogSummary>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT n.node_id, n.seq + 1, n.t_hlc, n.link FROM node_log n
             WHERE n.tenant_id = ?1 AND (?2 IS NULL OR n.node_id = ?2)
               AND n.seq = (SELECT MAX(seq) FROM node_log m WHERE m.tenant_id = n.tenant_id AND m.node_id = n.node_id)
             ORDER BY n.node_id",
        )?;
        let rows = stmt.query_map(params![tenant, node], |r| {
            Ok(NodeLogSummary {
                node_id: r.get(0)?,
                entries: r.get::<_, i64>(1)?.max(0) as u64,
                last_hlc: r.get(2)?,
                chain_head: B64.encode(r.get::<_, Vec<u8>>(3)?),
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn node_rows(
        &mut self,
        tenant: &str,
        node: &str,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<NodeRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, t_hlc, job_id, partition_key, payload, payload_hash, prev_link, link, enqueued_at
             FROM node_log WHERE tenant_id = ?1 AND node_id = ?2 AND seq >= ?3 ORDER BY seq LIMIT ?4",
        )?;
        let mut rows = stmt.query(params![tenant, node, i64_of(from_seq), i64_of(limit)])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let prev: Option<Vec<u8>> = r.get(6)?;
            out.push(NodeRow {
                seq: u64_of(self.path, r.get(0)?, "node_log.seq")?,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                partition_key: r.get(3)?,
                payload: r.get(4)?,
                payload_hash: digest(self.path, &r.get::<_, Vec<u8>>(5)?, "node_log.payload_hash")?,
                prev_link: prev
                    .map(|p| digest(self.path, &p, "node_log.prev_link"))
                    .transpose()?,
                link: digest(self.path, &r.get::<_, Vec<u8>>(7)?, "node_log.link")?,
                enqueued_at: r.get(8)?,
            });
        }
        Ok(out)
    }

    fn sql_exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let n = stmt.execute(rusqlite::params_from_iter(params.iter().map(SqliteVal)))?;
        Ok(n as u64)
    }

    fn sql_query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.conn.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(SqliteVal)))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(width);
            for i in 0..width {
                row.push(match r.get_ref(i)? {
                    ValueRef::Null => Val::Null,
                    ValueRef::Integer(v) => Val::Int(v),
                    ValueRef::Real(v) => Val::Real(v),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Val::Text(String::from_utf8_lossy(t).into_owned())
                    }
                });
            }
            out.push(row);
        }
        Ok(out)
    }

    fn lock_table(&mut self, _table: &str) -> Result<(), StoreError> {
        // Write transactions begin IMMEDIATE: this one already is the store's only writer.
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.open = false;
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }
}

/// A portable value bound as SQLite's.
struct SqliteVal<'a>(&'a Val);

impl rusqlite::ToSql for SqliteVal<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Val::Null => ValueRef::Null,
            Val::Int(v) => ValueRef::Integer(*v),
            Val::Real(v) => ValueRef::Real(*v),
            Val::Text(t) => ValueRef::Text(t.as_bytes()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A damaged row names the store file it is in (the message says to restore or recover it).
    #[test]
    fn a_damaged_row_names_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("named.db");
        let store = Store::open(&path).unwrap();
        store
            .conn()
            .execute_batch(
                "INSERT INTO hlc_state (node_id, physical, logical) VALUES ('n', 5, 0);
                 INSERT INTO node_log (tenant_id, node_id, seq, t_hlc, job_id, payload, payload_hash,
                     link, enqueued_at)
                 VALUES ('t', 'n', 0, 'x', 'j', '{}', x'00', x'00', 'now');",
            )
            .unwrap();
        let mut tx = store.begin(TxKind::Read).unwrap();
        let e = tx.node_tail("t", "n").unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("node_log.link"),
            "{e}"
        );
    }
}
