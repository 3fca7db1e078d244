//! Versioned schema migrations. Each step runs once, in order, inside a transaction.

use super::StoreError;
use rusqlite::Connection;
use std::path::Path;

/// (version, description, SQL). Append new steps; never edit a released one.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "node job log and HLC state",
        "CREATE TABLE node_log (
        tenant_id     TEXT NOT NULL,
        node_id       TEXT NOT NULL,
        seq           INTEGER NOT NULL,
        t_hlc         TEXT NOT NULL,
        job_id        TEXT NOT NULL,
        partition_key TEXT,
        payload       TEXT NOT NULL,
        payload_hash  BLOB NOT NULL,
        prev_link     BLOB,
        link          BLOB NOT NULL,
        enqueued_at   TEXT NOT NULL,
        PRIMARY KEY (tenant_id, node_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX idx_node_log_job ON node_log (tenant_id, node_id, job_id);
    CREATE TABLE hlc_state (
        node_id  TEXT PRIMARY KEY,
        physical INTEGER NOT NULL,
        logical  INTEGER NOT NULL
    );",
    ),
    (
        2,
        "scheduler chain, batch snapshots, imports and provenance",
        super::scheduler::MIGRATION_2,
    ),
    (3, "audit log", crate::core::audit::MIGRATION_3),
    (
        4,
        "persisted metrics and the portable exports serve downloads",
        crate::core::metrics::MIGRATION_4,
    ),
    (
        5,
        "export notifications: portable exports, emissions, deliveries, attempts",
        crate::core::notify::store::MIGRATION_5,
    ),
    (
        6,
        "export notifications: who holds a delivery's claim, and the claim's token",
        crate::core::notify::store::MIGRATION_6,
    ),
];

/// The newest schema version this build knows.
pub fn latest() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// The schema version recorded in a store (0 when it has none yet); reads only.
pub fn schema_version(conn: &Connection) -> Result<u32, rusqlite::Error> {
    let has_table: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
        [],
        |r| r.get(0),
    )?;
    if !has_table {
        return Ok(0);
    }
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
}

pub fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version     INTEGER PRIMARY KEY,
            description TEXT NOT NULL,
            applied_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        );",
    )?;
    let current: u32 = conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )?;
    if current > latest() {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: current,
            known: latest(),
        });
    }
    if current == latest() && missing_step(conn)?.is_none() {
        return Ok(());
    }
    // Each step in a write transaction that re-reads what was applied first: two processes opening
    // a new store at once apply every step exactly once. A step is applied when its own version is
    // missing, not only when it is above the highest applied one (a store made by a build that had
    // a later step but not an earlier one still gets the earlier step).
    loop {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| super::busy_or_sql(e, path))?;
        let Some((version, description, sql)) = missing_step(&tx)? else {
            return Ok(());
        };
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, description) VALUES (?1, ?2)",
            rusqlite::params![version, description],
        )?;
        tx.commit().map_err(|e| super::busy_or_sql(e, path))?;
    }
}

/// The first step (in order) whose version is not recorded as applied.
fn missing_step(
    conn: &Connection,
) -> Result<Option<&'static (u32, &'static str, &'static str)>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM schema_migrations WHERE version = ?1")?;
    for m in MIGRATIONS {
        if !stmt.exists([m.0])? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store made by a build that had step 4 and 5 but not 3 (branches merged later) still gets
    /// step 3 when it is opened again: steps are applied by their own version, not by the maximum.
    #[test]
    fn a_missing_earlier_step_is_applied_even_below_the_highest_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        drop(crate::core::store::Store::open(&path).unwrap());
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DELETE FROM schema_migrations WHERE version = 3; DROP TABLE audit_log;",
        )
        .unwrap();
        migrate(&mut conn, &path).unwrap();
        let has: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit_log'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(has, 1);
        assert!(missing_step(&conn).unwrap().is_none());
    }
}
