//! [`StoreTx`] over one PostgreSQL transaction.

use super::copy;
use super::{PgConn, PgError};
use crate::core::chain::{Action, Digest32};
use crate::core::merge::JobMap;
use crate::core::store::backend::{
    digest_col, position_col, ChainPage, ChainRow, JobRow, NodeRow, NodeTail, RowBatch, StoreTx,
    TxKind,
};
use crate::core::store::nodelog::NodeLogSummary;
use crate::core::store::scheduler::{
    ChainHead, DamagedSnapshot, ImportRecord, Provenance, RawSnapshot, Snapshot, SnapshotRow,
    StoredEntry,
};
use crate::core::store::sql::{dollar_params, Val};
use crate::core::store::StoreError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use postgres::types::ToSql;
use postgres::Row;

/// RFC 3339 UTC with milliseconds, as the embedded store writes its times.
const TS: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

/// One open transaction; rolled back when dropped without [`StoreTx::commit`].
pub struct PgTx<'a> {
    client: PgConn<'a>,
    open: bool,
    /// How long COMMIT may wait before its wait is cancelled (`None`: forever).
    commit_timeout: Option<std::time::Duration>,
    read_only: bool,
}

impl<'a> PgTx<'a> {
    pub fn begin(
        mut client: PgConn<'a>,
        kind: TxKind,
        commit_timeout: Option<std::time::Duration>,
    ) -> Result<PgTx<'a>, PgError> {
        client.batch_execute(match kind {
            TxKind::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            TxKind::Write => "BEGIN ISOLATION LEVEL READ COMMITTED",
        })?;
        let mut tx = PgTx {
            client,
            open: true,
            commit_timeout,
            read_only: matches!(kind, TxKind::Read),
        };
        // Under a busy cutoff (serve stopping), lock waits end with it, as SQLite's busy wait does
        // (`lock_timeout` 0 would mean no limit: at least 1 ms). An error rolls back on drop.
        if let Some(left) = crate::core::store::busy::remaining() {
            let ms = left.as_millis().clamp(1, i32::MAX as u128);
            tx.c()
                .batch_execute(&format!("SET LOCAL lock_timeout = {ms}"))?;
        }
        Ok(tx)
    }

    fn c(&mut self) -> &mut postgres::Client {
        &mut self.client
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if self.open && !self.client.is_closed() {
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }
}

fn digest(v: &[u8], what: &str) -> Result<Digest32, StoreError> {
    digest_col(v, what).map_err(|d| PgError::Damaged(d).into())
}

fn u64_of(v: i64, what: &str) -> Result<u64, StoreError> {
    position_col(v, what).map_err(|d| PgError::Damaged(d).into())
}

fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v)
        .map_err(|_| PgError::Server(format!("{v} is beyond PostgreSQL's BIGINT range")).into())
}

fn head_of(tenant: &str, r: &Row) -> Result<ChainHead, StoreError> {
    Ok(ChainHead {
        tenant_id: tenant.to_string(),
        head_chain_link: r.get(0),
        head_hlc: r.get(1),
        length: u64_of(r.get(2), "a chain length")?,
        updated_at: r.get(3),
    })
}

fn snapshot_sql(filter: &str) -> String {
    format!(
        "SELECT b.id, r.tenant_id, b.snapshot_hlc, b.from_chain_link, b.to_chain_link, r.from_seq,
                b.entry_count, b.merkle_root, b.dsse_envelope::text,
                to_char(b.created_at AT TIME ZONE 'UTC', {TS})
         FROM scheduler.batch_snapshot b JOIN airlock.snapshot_range r ON r.snapshot_id = b.id
         WHERE {filter} ORDER BY r.from_seq"
    )
}

/// One `batch_snapshot` row with its range, checked as the embedded store checks its rows
/// ([`RawSnapshot::check`]).
fn snapshot_of(r: &Row) -> SnapshotRow {
    RawSnapshot {
        id: r.get(0),
        tenant_id: r.get(1),
        snapshot_hlc: r.get(2),
        from_chain_link: r.get(3),
        to_chain_link: r.get(4),
        from_seq: r.get(5),
        entry_count: i64::from(r.get::<_, i32>(6)),
        merkle_root: r.get(7),
        dsse_envelope: r.get(8),
        created_at: r.get(9),
    }
    .check()
}

/// A `batch_snapshot` row of `tenant` without its `airlock.snapshot_range` row.
fn range_lost(tenant: &str, id: i64) -> DamagedSnapshot {
    DamagedSnapshot {
        id,
        tenant_id: tenant.to_string(),
        column: "airlock.snapshot_range",
        why: "has no row for it, so its tenant and first position are lost (its from_chain_link is a link of this tenant's chain)".into(),
        expected: "an airlock.snapshot_range row (snapshot_id, tenant_id, from_seq)",
        actual: "none".into(),
        rest: None,
    }
}

const IMPORT_COLUMNS: &str = "id, import_batch, tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer,
    file_name, entries, new_entries, duplicates, dropped, forced, imported_at";

fn import_of(r: &Row) -> Result<ImportRecord, StoreError> {
    Ok(ImportRecord {
        id: r.get(0),
        import_batch: r.get(1),
        tenant_id: r.get(2),
        bundle_id: r.get(3),
        manifest_digest: r.get(4),
        created_by_node_id: r.get(5),
        signed_by: r.get(6),
        signer: r.get(7),
        file_name: r.get(8),
        entries: u64_of(r.get(9), "imports.entries")?,
        new_entries: u64_of(r.get(10), "imports.new_entries")?,
        duplicates: u64_of(r.get(11), "imports.duplicates")?,
        dropped: u64_of(r.get(12), "imports.dropped")?,
        forced: r.get(13),
        imported_at: r.get(14),
    })
}

fn node_row_of(r: &Row) -> Result<NodeRow, StoreError> {
    let prev: Option<&[u8]> = r.get(6);
    Ok(NodeRow {
        seq: u64_of(r.get(0), "a node log position")?,
        t_hlc: r.get(1),
        job_id: r.get(2),
        partition_key: r.get(3),
        payload: r.get(4),
        payload_hash: digest(r.get(5), "a node log payload_hash")?,
        prev_link: prev
            .map(|p| digest(p, "a node log prev_link"))
            .transpose()?,
        link: digest(r.get(7), "a node log link")?,
        enqueued_at: r.get(8),
    })
}

/// Adds a `(job_id, payload_hash)` row to `out` (a row whose id is not 16 bytes names no job).
fn put_job(r: &Row, out: &mut JobMap<Digest32>) -> Result<(), StoreError> {
    if let Ok(id) = <[u8; 16]>::try_from(r.get::<_, &[u8]>(0)) {
        out.insert(id, digest(r.get(1), "a job's payload_hash")?);
    }
    Ok(())
}

const HEAD_SQL: &str = "SELECT h.head_chain_link, h.head_hlc, COALESCE(s.length, 0),
        to_char(h.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
     FROM scheduler.chain_heads h LEFT JOIN airlock.chain_state s ON s.tenant_id = h.tenant_id
     WHERE h.tenant_id = $1 AND h.head_chain_link <> ''";

impl StoreTx for PgTx<'_> {
    fn check_before_append(&mut self, _tenant: &str) -> Result<(), StoreError> {
        super::check::check_indexes(self.c())
    }

    fn load_clock_state(&mut self) -> Result<Option<(u64, u32)>, StoreError> {
        let row = self.c().query_opt(
            "SELECT physical, logical FROM airlock.hlc_state ORDER BY physical DESC, logical DESC LIMIT 1",
            &[],
        )?;
        row.map(|r| {
            let l = u64_of(r.get(1), "hlc_state.logical")?;
            Ok((
                u64_of(r.get(0), "hlc_state.physical")?,
                u32::try_from(l)
                    .map_err(|_| PgError::Damaged(format!("hlc_state.logical {l} > u32")))?,
            ))
        })
        .transpose()
    }

    fn save_clock_state(&mut self, node: &str, last: (u64, u32)) -> Result<(), StoreError> {
        let p = i64_of(last.0)?;
        self.c().execute(
            "INSERT INTO airlock.hlc_state (node_id, physical, logical) VALUES ($1, $2, $3)
             ON CONFLICT (node_id) DO UPDATE SET physical = EXCLUDED.physical, logical = EXCLUDED.logical
             WHERE (EXCLUDED.physical, EXCLUDED.logical) > (airlock.hlc_state.physical, airlock.hlc_state.logical)",
            &[&node, &p, &i64::from(last.1)],
        )?;
        Ok(())
    }

    fn chain_head(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
        let row = self.c().query_opt(HEAD_SQL, &[&tenant])?;
        row.map(|r| head_of(tenant, &r)).transpose()
    }

    fn lock_chain(&mut self, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
        // A new tenant gets a placeholder row (empty link, rolled back unless the transaction
        // appends) so there is a row to lock; a second writer waits on its key until we end.
        self.c().execute(
            "INSERT INTO scheduler.chain_heads (tenant_id, head_chain_link, head_hlc) VALUES ($1, '', '')
             ON CONFLICT (tenant_id) DO NOTHING",
            &[&tenant],
        )?;
        self.c().execute(
            "SELECT 1 FROM scheduler.chain_heads WHERE tenant_id = $1 FOR UPDATE",
            &[&tenant],
        )?;
        self.chain_head(tenant)
    }

    fn chain_heads(&mut self) -> Result<Vec<ChainHead>, StoreError> {
        let rows = self.c().query(
            &format!(
                "SELECT h.head_chain_link, h.head_hlc, COALESCE(s.length, 0),
                        to_char(h.updated_at AT TIME ZONE 'UTC', {TS}), h.tenant_id
                 FROM scheduler.chain_heads h LEFT JOIN airlock.chain_state s ON s.tenant_id = h.tenant_id
                 WHERE h.head_chain_link <> ''"
            ),
            &[],
        )?;
        let mut out = rows
            .iter()
            .map(|r| head_of(r.get::<_, &str>(4), r))
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| a.tenant_id.as_bytes().cmp(b.tenant_id.as_bytes()));
        Ok(out)
    }

    fn log_rows_outside_chain(
        &mut self,
        tenant: &str,
        length: u64,
        limit: u64,
    ) -> Result<Vec<i64>, StoreError> {
        // The count reads the tenant's part of an index; the anti-join runs only when it is off.
        let n: i64 = self
            .c()
            .query_one(
                "SELECT COUNT(*) FROM scheduler.scheduler_log WHERE tenant_id = $1",
                &[&tenant],
            )?
            .get(0);
        if u64::try_from(n).unwrap_or(0) <= length {
            return Ok(Vec::new());
        }
        let rows = self.c().query(
            "SELECT l.id FROM scheduler.scheduler_log l WHERE l.tenant_id = $1
               AND NOT EXISTS (SELECT 1 FROM airlock.chain_entry e
                               WHERE e.tenant_id = $1 AND e.log_id = l.id)
             ORDER BY l.id LIMIT $2",
            &[&tenant, &i64_of(limit)?],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn snapshot_rows(&mut self, tenant: &str) -> Result<Vec<SnapshotRow>, StoreError> {
        let rows = self
            .c()
            .query(&snapshot_sql("r.tenant_id = $1"), &[&tenant])?;
        let mut out: Vec<SnapshotRow> = rows.iter().map(snapshot_of).collect();
        // A batch_snapshot row whose airlock.snapshot_range row is gone has no tenant and no
        // position here: the inner join above would drop it, and the tenant's snapshot with it
        // (verify passing without it, the next snapshot covering its entries again). One that
        // starts at a link of this tenant's chain is this tenant's, with positions that do not
        // read. The anti-join finds nothing on an undamaged store.
        let lost = self.c().query(
            "SELECT b.id FROM scheduler.batch_snapshot b
             WHERE NOT EXISTS (SELECT 1 FROM airlock.snapshot_range r WHERE r.snapshot_id = b.id)
               AND EXISTS (SELECT 1 FROM scheduler.scheduler_log l
                           WHERE l.tenant_id = $1 AND l.chain_link = b.from_chain_link)
             ORDER BY b.id",
            &[&tenant],
        )?;
        out.extend(lost.iter().map(|r| Err(range_lost(tenant, r.get(0)))));
        Ok(out)
    }

    fn chain_page(
        &mut self,
        tenant: &str,
        from: u64,
        to: u64,
        page: &mut ChainPage,
    ) -> Result<(), StoreError> {
        page.clear();
        let (from, to) = (i64_of(from)?, i64_of(to)?);
        let limit = i64_of(crate::core::store::backend::PAGE_ROWS)?;
        let rows = self.c().query(
            "SELECT e.seq, l.t_hlc, l.job_id, l.action, l.prev_chain_link, l.chain_link, e.payload_text,
                    airlock.payload_agrees(l.payload, e.payload_text)
             FROM airlock.chain_entry e JOIN scheduler.scheduler_log l ON l.id = e.log_id
             WHERE e.tenant_id = $1 AND e.seq >= $2 AND e.seq < $3 ORDER BY e.seq LIMIT $4",
            &[&tenant, &from, &to, &limit],
        )?;
        for r in &rows {
            page.push(ChainRow {
                seq: u64_of(r.get(0), "a chain position")?,
                t_hlc: r.get(1),
                job_id: r.get(2),
                action: r.get(3),
                prev_chain_link: r.get(4),
                chain_link: r.get(5),
                payload: r.get(6),
                payload_agrees: r.get(7),
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
        let (from, limit) = (i64_of(from)?, i64_of(limit.min(i64::MAX as u64))?);
        let rows = self.c().query(
            &format!(
                "SELECT e.seq, l.t_hlc, l.job_id, l.action, l.prev_chain_link, l.chain_link, e.payload_text,
                        to_char(l.created_at AT TIME ZONE 'UTC', {TS}),
                        e.import_id, i.bundle_id, i.file_name, e.source_node, e.orig_link, e.orig_prev_link,
                        e.partition_key, e.enqueued_at
                 FROM airlock.chain_entry e JOIN scheduler.scheduler_log l ON l.id = e.log_id
                 LEFT JOIN airlock.imports i ON i.id = e.import_id
                 WHERE e.tenant_id = $1 AND e.seq >= $2 ORDER BY e.seq LIMIT $3"
            ),
            &[&tenant, &from, &limit],
        )?;
        rows.iter()
            .map(|r| {
                let import_id: Option<i64> = r.get(8);
                let provenance = import_id.map(|import_id| Provenance {
                    import_id,
                    bundle_id: r.get::<_, Option<String>>(9).unwrap_or_default(),
                    file_name: r.get::<_, Option<String>>(10).unwrap_or_default(),
                    source_node: r.get::<_, Option<String>>(11).unwrap_or_default(),
                    original_t_hlc: r.get(1),
                    original_link: B64.encode(r.get::<_, Option<&[u8]>>(12).unwrap_or_default()),
                    original_prev_link: r.get::<_, Option<&[u8]>>(13).map(|b| B64.encode(b)),
                    partition_key: r.get(14),
                    enqueued_at: r.get::<_, Option<String>>(15).unwrap_or_default(),
                });
                Ok(StoredEntry {
                    seq: u64_of(r.get(0), "a chain position")?,
                    t_hlc: r.get(1),
                    job_id: r.get(2),
                    action: r.get(3),
                    prev_chain_link: r.get(4),
                    chain_link: r.get(5),
                    payload: r.get(6),
                    created_at: r.get(7),
                    provenance,
                })
            })
            .collect()
    }

    fn job(&mut self, tenant: &str, id: &[u8; 16]) -> Result<Option<JobRow>, StoreError> {
        let row = self.c().query_opt(
            "SELECT payload_hash, enqueue_seq, state, last_seq FROM airlock.chain_jobs
             WHERE tenant_id = $1 AND job_id = $2",
            &[&tenant, &id.as_slice()],
        )?;
        row.map(|r| {
            Ok(JobRow {
                payload_hash: digest(r.get(0), "a job's payload_hash")?,
                enqueue_seq: u64_of(r.get(1), "a job's enqueue position")?,
                state: r.get(2),
                last_seq: u64_of(r.get(3), "a job's last position")?,
            })
        })
        .transpose()
    }

    fn all_jobs(&mut self, tenant: &str, out: &mut JobMap<Digest32>) -> Result<(), StoreError> {
        let rows = self.c().query(
            "SELECT job_id, payload_hash FROM airlock.chain_jobs WHERE tenant_id = $1",
            &[&tenant],
        )?;
        rows.iter().try_for_each(|r| put_job(r, out))
    }

    fn jobs_by_id(
        &mut self,
        tenant: &str,
        ids: &mut dyn ExactSizeIterator<Item = &[u8; 16]>,
        out: &mut JobMap<Digest32>,
    ) -> Result<(), StoreError> {
        let ids: Vec<&[u8]> = ids.map(|i| i.as_slice()).collect();
        for chunk in ids.chunks(16384) {
            let rows = self.c().query(
                "SELECT job_id, payload_hash FROM airlock.chain_jobs
                 WHERE tenant_id = $1 AND job_id = ANY($2)",
                &[&tenant, &chunk],
            )?;
            rows.iter().try_for_each(|r| put_job(r, out))?;
        }
        Ok(())
    }

    fn payload_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError> {
        let seq = i64_of(seq)?;
        Ok(self
            .c()
            .query_opt(
                "SELECT payload_text FROM airlock.chain_entry WHERE tenant_id = $1 AND seq = $2",
                &[&tenant, &seq],
            )?
            .map(|r| r.get(0)))
    }

    fn t_hlc_at(&mut self, tenant: &str, seq: u64) -> Result<Option<String>, StoreError> {
        let seq = i64_of(seq)?;
        Ok(self
            .c()
            .query_opt(
                "SELECT l.t_hlc FROM airlock.chain_entry e JOIN scheduler.scheduler_log l ON l.id = e.log_id
                 WHERE e.tenant_id = $1 AND e.seq = $2",
                &[&tenant, &seq],
            )?
            .map(|r| r.get(0)))
    }

    fn find_import(
        &mut self,
        tenant: &str,
        bundle_id: &str,
        manifest_digest: &str,
    ) -> Result<Option<ImportRecord>, StoreError> {
        let row = self.c().query_opt(
            &format!(
                "SELECT {IMPORT_COLUMNS} FROM airlock.imports
                 WHERE tenant_id = $1 AND bundle_id = $2 AND manifest_digest = $3 ORDER BY forced, dropped > 0, id LIMIT 1"
            ),
            &[&tenant, &bundle_id, &manifest_digest],
        )?;
        row.as_ref().map(import_of).transpose()
    }

    fn write_rows(
        &mut self,
        tenant: &str,
        _created_at: &str,
        rows: &RowBatch,
    ) -> Result<(), StoreError> {
        copy::write_rows(self.c(), tenant, rows)
    }

    fn insert_jobs(
        &mut self,
        tenant: &str,
        jobs: &[([u8; 16], Digest32, u64)],
    ) -> Result<(), StoreError> {
        copy::write_jobs(self.c(), tenant, jobs)
    }

    fn set_job_state(
        &mut self,
        tenant: &str,
        id: &[u8; 16],
        action: Action,
        seq: u64,
    ) -> Result<(), StoreError> {
        let seq = i64_of(seq)?;
        self.c().execute(
            "UPDATE airlock.chain_jobs SET state = $3, last_seq = $4 WHERE tenant_id = $1 AND job_id = $2",
            &[&tenant, &id.as_slice(), &action.as_str(), &seq],
        )?;
        Ok(())
    }

    fn write_head(&mut self, head: &ChainHead) -> Result<(), StoreError> {
        let length = i64_of(head.length)?;
        self.c().execute(
            "INSERT INTO scheduler.chain_heads (tenant_id, head_chain_link, head_hlc, updated_at)
             VALUES ($1, $2, $3, $4::text::timestamptz)
             ON CONFLICT (tenant_id) DO UPDATE SET head_chain_link = EXCLUDED.head_chain_link,
               head_hlc = EXCLUDED.head_hlc, updated_at = EXCLUDED.updated_at",
            &[
                &head.tenant_id,
                &head.head_chain_link,
                &head.head_hlc,
                &head.updated_at,
            ],
        )?;
        self.c().execute(
            "INSERT INTO airlock.chain_state (tenant_id, length) VALUES ($1, $2)
             ON CONFLICT (tenant_id) DO UPDATE SET length = EXCLUDED.length",
            &[&head.tenant_id, &length],
        )?;
        Ok(())
    }

    fn insert_snapshot(&mut self, s: &Snapshot) -> Result<i64, StoreError> {
        let count = i32::try_from(s.entry_count).map_err(|_| {
            PgError::Server(format!(
                "a snapshot of {} entries is beyond batch_snapshot.entry_count (INTEGER)",
                s.entry_count
            ))
        })?;
        let env = s.dsse_envelope.as_ref().map(|e| e.to_string());
        let id: i64 = self
            .c()
            .query_one(
                "INSERT INTO scheduler.batch_snapshot (snapshot_hlc, from_chain_link, to_chain_link, entry_count,
                                                       merkle_root, dsse_envelope, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7::text::timestamptz) RETURNING id",
                &[
                    &s.snapshot_hlc,
                    &s.from_chain_link,
                    &s.to_chain_link,
                    &count,
                    &s.merkle_root,
                    &env,
                    &s.created_at,
                ],
            )?
            .get(0);
        let from = i64_of(s.from_seq)?;
        self.c().execute(
            "INSERT INTO airlock.snapshot_range (snapshot_id, tenant_id, from_seq) VALUES ($1, $2, $3)",
            &[&id, &s.tenant_id, &from],
        )?;
        Ok(id)
    }

    fn insert_import(&mut self, r: &ImportRecord) -> Result<i64, StoreError> {
        let n = |v: u64| i64_of(v);
        Ok(self
            .c()
            .query_one(
                "INSERT INTO airlock.imports (import_batch, tenant_id, bundle_id, manifest_digest, created_by_node_id,
                     signed_by, signer, file_name, entries, new_entries, duplicates, dropped, forced, imported_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
                &[
                    &r.import_batch,
                    &r.tenant_id,
                    &r.bundle_id,
                    &r.manifest_digest,
                    &r.created_by_node_id,
                    &r.signed_by,
                    &r.signer,
                    &r.file_name,
                    &n(r.entries)?,
                    &n(r.new_entries)?,
                    &n(r.duplicates)?,
                    &n(r.dropped)?,
                    &r.forced,
                    &r.imported_at,
                ],
            )?
            .get(0))
    }

    fn node_tail(&mut self, tenant: &str, node: &str) -> Result<Option<NodeTail>, StoreError> {
        let row = self.c().query_opt(
            "SELECT seq, link, t_hlc FROM airlock.node_log WHERE tenant_id = $1 AND node_id = $2
             ORDER BY seq DESC LIMIT 1",
            &[&tenant, &node],
        )?;
        row.map(|r| {
            Ok(NodeTail {
                seq: u64_of(r.get(0), "a node log position")?,
                link: digest(r.get(1), "a node log link")?,
                t_hlc: r.get(2),
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
        let row = self.c().query_opt(
            "SELECT seq, payload FROM airlock.node_log WHERE tenant_id = $1 AND node_id = $2 AND job_id = $3
             ORDER BY seq LIMIT 1",
            &[&tenant, &node, &job_id],
        )?;
        row.map(|r| Ok((u64_of(r.get(0), "a node log position")?, r.get(1))))
            .transpose()
    }

    fn insert_node_row(
        &mut self,
        tenant: &str,
        node: &str,
        row: &NodeRow,
    ) -> Result<(), StoreError> {
        let seq = i64_of(row.seq)?;
        self.c().execute(
            "INSERT INTO airlock.node_log (tenant_id, node_id, seq, t_hlc, job_id, partition_key, payload,
                                           payload_hash, prev_link, link, enqueued_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &tenant,
                &node,
                &seq,
                &row.t_hlc,
                &row.job_id,
                &row.partition_key,
                &row.payload,
                &row.payload_hash.as_slice(),
                &row.prev_link.as_ref().map(|p| p.as_slice()),
                &row.link.as_slice(),
                &row.enqueued_at,
            ],
        )?;
        Ok(())
    }

    fn node_logs(
        &mut self,
        tenant: &str,
        node: Option<&str>,
    ) -> Result<Vec<NodeLogSummary>, StoreError> {
        let rows = self.c().query(
            "SELECT DISTINCT ON (node_id) node_id, seq + 1, t_hlc, link FROM airlock.node_log
             WHERE tenant_id = $1 AND ($2::text IS NULL OR node_id = $2)
             ORDER BY node_id, seq DESC",
            &[&tenant, &node],
        )?;
        let mut out: Vec<NodeLogSummary> = rows
            .iter()
            .map(|r| {
                Ok(NodeLogSummary {
                    node_id: r.get(0),
                    entries: u64_of(r.get(1), "a node log position")?,
                    last_hlc: r.get(2),
                    chain_head: B64.encode(r.get::<_, &[u8]>(3)),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        // Bytewise node order, as the bundle requires (not the database collation's).
        out.sort_by(|a, b| a.node_id.as_bytes().cmp(b.node_id.as_bytes()));
        Ok(out)
    }

    fn node_rows(
        &mut self,
        tenant: &str,
        node: &str,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<NodeRow>, StoreError> {
        let (from, limit) = (i64_of(from_seq)?, i64_of(limit)?);
        let rows = self.c().query(
            "SELECT seq, t_hlc, job_id, partition_key, payload, payload_hash, prev_link, link, enqueued_at
             FROM airlock.node_log WHERE tenant_id = $1 AND node_id = $2 AND seq >= $3 ORDER BY seq LIMIT $4",
            &[&tenant, &node, &from, &limit],
        )?;
        rows.iter().map(node_row_of).collect()
    }

    fn sql_exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        Ok(self.c().execute(dollar_params(sql).as_str(), &refs)?)
    }

    fn sql_query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        let rows = self.c().query(dollar_params(sql).as_str(), &refs)?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<_, Val>(i).map_err(StoreError::from))
                    .collect()
            })
            .collect()
    }

    fn lock_table(&mut self, table: &str) -> Result<(), StoreError> {
        let ident = table.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if !ident {
            return Err(PgError::Server(format!("{table:?} is not an airlock table")).into());
        }
        self.c()
            .batch_execute(&format!("LOCK TABLE airlock.{table} IN EXCLUSIVE MODE"))?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        // A COMMIT that fails ends the transaction too (committed, rolled back, or unknown: the
        // error says which); nothing is left to roll back.
        self.open = false;
        if self.read_only {
            // Nothing was written: a lost connection loses nothing, no standby is waited for.
            self.c().batch_execute("COMMIT").map_err(PgError::from)?;
            return Ok(());
        }
        let timeout = self.commit_timeout;
        super::commit::commit(self.c(), timeout)?;
        Ok(())
    }
}
