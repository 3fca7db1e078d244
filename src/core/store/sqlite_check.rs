//! SQLite's part of the check before an append: the tables an append touches pass `quick_check`
//! (a damaged b-tree is refused before anything is written onto it). The chain's own tail (head
//! entry, last snapshot) is checked by the shared rule [`crate::core::store::rules::check_tail`].
//! And the check before a database file is taken as ours: [`foreign_tables`].

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

/// The tables of a database that is not ours: when the file has tables but not `marker` (the
/// schema table every airlock database of that kind has: `schema_migrations` for the store,
/// `outbox_schema` for the relay's outbox), their names (at most five), so opening it refuses
/// instead of adding our tables (and WAL mode) to someone else's database. Empty for a new file,
/// one of ours, or a file SQLite cannot read (its own open error says more).
pub fn foreign_tables(conn: &Connection, marker: &str) -> Vec<String> {
    let names = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    );
    let Ok(mut stmt) = names else {
        return Vec::new();
    };
    let Ok(rows) = stmt.query_map([], |r| r.get::<_, String>(0)) else {
        return Vec::new();
    };
    let tables: Vec<String> = rows.map_while(Result::ok).collect();
    if tables.iter().any(|t| t == marker) {
        return Vec::new();
    }
    tables.into_iter().take(5).collect()
}

#[cfg(test)]
mod tests {
    use super::foreign_tables;

    #[test]
    fn a_database_without_our_schema_table_is_foreign() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        assert!(foreign_tables(&c, "schema_migrations").is_empty());
        c.execute_batch("CREATE TABLE customers (id INT); CREATE TABLE orders (id INT);")
            .unwrap();
        assert_eq!(
            foreign_tables(&c, "schema_migrations"),
            ["customers", "orders"]
        );
        c.execute_batch("CREATE TABLE schema_migrations (version INT);")
            .unwrap();
        assert!(foreign_tables(&c, "schema_migrations").is_empty());
        assert_eq!(foreign_tables(&c, "outbox_schema").len(), 3);
    }
}
