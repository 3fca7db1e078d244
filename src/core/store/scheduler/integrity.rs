//! What must hold before anything is appended to a tenant chain: the tables an append touches pass
//! SQLite's `quick_check`, the stored head entry recomputes and is the head, and the last batch
//! snapshot's Merkle root recomputes. Appending onto a damaged chain would bury the damage under
//! valid-looking entries.

use super::read::chain_head;
use super::snapshots::{row_snapshot, SNAPSHOT_COLUMNS};
use super::unhex32;
use crate::core::chain::{payload_hash, scheduler_chain_link, Action};
use crate::core::merkle;
use crate::core::store::{quoted, StoreError};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

/// The tables an import or append writes.
const TOUCHED: [&str; 5] = [
    "scheduler_log",
    "scheduler_jobs",
    "chain_heads",
    "batch_snapshot",
    "imports",
];

/// Refuses (with what to do) when the store or `tenant`'s chain is damaged where an append builds on.
pub fn check_before_append(conn: &Connection, path: &Path, tenant: &str) -> Result<(), StoreError> {
    check(conn, path, tenant).map_err(|e| match e {
        StoreError::Sql(e) => crate::core::store::busy_or_sql(e, path),
        other => other,
    })
}

fn check(conn: &Connection, path: &Path, tenant: &str) -> Result<(), StoreError> {
    let damaged = |detail: String| StoreError::Damaged {
        path: path.to_path_buf(),
        detail,
    };
    for table in TOUCHED {
        let answers: Vec<String> = conn
            .prepare(&format!("PRAGMA quick_check({table})"))
            .and_then(|mut stmt| {
                stmt.query_map([], |r| r.get::<_, String>(0))?
                    .take(3)
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| damaged(format!("SQLite's quick_check of {table} failed: {e}")))?;
        if answers.iter().any(|a| a != "ok") {
            return Err(damaged(format!(
                "SQLite's quick_check of {table} failed: {}",
                answers
                    .iter()
                    .map(|a| quoted(a))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
    }
    let Some(head) = chain_head(conn, tenant)? else {
        return Ok(());
    };
    if head.length == 0 {
        return Ok(());
    }
    let last = head.length - 1;
    let row = stored_row(conn, tenant, last)?.ok_or_else(|| {
        damaged(format!(
            "the head of tenant {tenant:?} says {} entries, but entry #{last} is missing",
            head.length
        ))
    })?;
    if row.link != head.head_chain_link {
        return Err(damaged(format!(
            "the head of tenant {tenant:?} is {} but entry #{last} has link {}",
            quoted(&head.head_chain_link),
            quoted(&row.link)
        )));
    }
    if row.recomputed()? != row.link {
        return Err(damaged(format!(
            "entry #{last} of tenant {tenant:?} (the head) no longer recomputes from its fields"
        )));
    }
    if stored_row(conn, tenant, head.length)?.is_some() {
        return Err(damaged(format!(
            "tenant {tenant:?} has entries after its head (#{})",
            head.length
        )));
    }
    check_last_snapshot(conn, tenant, &damaged)
}

fn check_last_snapshot(
    conn: &Connection,
    tenant: &str,
    damaged: &dyn Fn(String) -> StoreError,
) -> Result<(), StoreError> {
    let Some(snap) = conn
        .query_row(
            &format!("SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq DESC LIMIT 1"),
            params![tenant],
            row_snapshot,
        )
        .optional()?
    else {
        return Ok(());
    };
    let end = snap
        .from_seq
        .checked_add(snap.entry_count)
        .filter(|e| *e <= i64::MAX as u64)
        .ok_or_else(|| damaged(format!("the last snapshot of tenant {tenant:?} has from_seq {} + entry_count {} out of range", snap.from_seq, snap.entry_count)))?;
    let mut stmt = conn.prepare_cached(
        "SELECT seq, chain_link FROM scheduler_log WHERE tenant_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![tenant, snap.from_seq as i64, end as i64])?;
    let mut links = Vec::new();
    while let Some(r) = rows.next()? {
        let (seq, link): (i64, String) = (r.get(0)?, r.get(1)?);
        links.push(unhex32(&link).ok_or_else(|| StoreError::CorruptRow {
            table: "scheduler_log",
            position: format!("tenant {tenant:?} seq {seq}"),
            detail: format!(
                "chain_link {} is not 64 lowercase hex digits",
                quoted(&link)
            ),
        })?);
    }
    let root = hex::encode(merkle::root(&merkle::leaf_hashes_of_links(&links)));
    if links.len() as u64 != snap.entry_count || root != snap.merkle_root {
        return Err(damaged(format!(
            "the last batch snapshot of tenant {tenant:?} (entries {}..{end}) no longer matches the chain: its Merkle root does not recompute",
            snap.from_seq
        )));
    }
    Ok(())
}

struct StoredRow {
    seq: i64,
    t_hlc: String,
    job_id: String,
    action: String,
    prev: Option<String>,
    link: String,
    payload: String,
}

impl StoredRow {
    fn recomputed(&self) -> Result<String, StoreError> {
        let action: Action = self.action.parse().map_err(|e| StoreError::CorruptRow {
            table: "scheduler_log",
            position: format!("seq {}", self.seq),
            detail: e,
        })?;
        Ok(scheduler_chain_link(
            &self.t_hlc,
            &self.job_id,
            action,
            self.prev.as_deref(),
            &hex::encode(payload_hash(&self.payload)),
        ))
    }
}

fn stored_row(conn: &Connection, tenant: &str, seq: u64) -> Result<Option<StoredRow>, StoreError> {
    let Ok(seq) = i64::try_from(seq) else {
        return Ok(None);
    };
    Ok(conn
        .query_row(
            "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2",
            params![tenant, seq],
            |r| {
                Ok(StoredRow {
                    seq: r.get(0)?,
                    t_hlc: r.get(1)?,
                    job_id: r.get(2)?,
                    action: r.get(3)?,
                    prev: r.get(4)?,
                    link: r.get(5)?,
                    payload: r.get(6)?,
                })
            },
        )
        .optional()?)
}
