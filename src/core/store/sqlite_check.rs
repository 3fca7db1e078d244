//! SQLite's part of the check before an append: the tables an append touches pass `quick_check`
//! (a damaged b-tree is refused before anything is written onto it). The chain's own tail (head
//! entry, last snapshot) is checked by the shared rule [`crate::core::store::rules::check_tail`].

use crate::core::store::{quoted, StoreError};
use rusqlite::Connection;
use std::path::Path;

/// The tables an import or append writes.
const TOUCHED: [&str; 5] = [
    "scheduler_log",
    "scheduler_jobs",
    "chain_heads",
    "batch_snapshot",
    "imports",
];

/// Refuses (with what to do) when a table an append writes fails SQLite's `quick_check`.
pub fn quick_check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    check(conn, path).map_err(|e| match e {
        StoreError::Sql(e) => crate::core::store::busy_or_sql(e, path),
        other => other,
    })
}

fn check(conn: &Connection, path: &Path) -> Result<(), StoreError> {
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
    Ok(())
}
