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
    (
        4,
        "persisted metrics and the portable exports serve downloads",
        "CREATE TABLE metric_samples (
        name   TEXT NOT NULL,
        labels TEXT NOT NULL,
        value  REAL NOT NULL,
        PRIMARY KEY (name, labels)
    ) WITHOUT ROWID;
    CREATE TABLE exports (
        export_id       TEXT PRIMARY KEY,
        bundle_id       TEXT NOT NULL,
        path            TEXT NOT NULL,
        artifact_sha256 TEXT NOT NULL,
        size_bytes      INTEGER NOT NULL,
        created_at      TEXT NOT NULL
    );",
    ),
    (
        5,
        "export notifications: portable exports, emissions, deliveries, attempts",
        crate::core::notify::store::MIGRATION_5,
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
    if current == latest() {
        return Ok(());
    }
    // Each step in a write transaction that re-reads the version first: two processes opening a
    // new store at once apply every step exactly once.
    loop {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| super::busy_or_sql(e, path))?;
        let current: u32 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )?;
        let Some((version, description, sql)) = MIGRATIONS.iter().find(|m| m.0 > current) else {
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
