//! The notification tables of the store (migration 5): portable exports, one emission per
//! (export_id, artifact_sha256), and the durable delivery queue with every attempt.
//!
//! Delivery life: `pending` (due at `next_attempt_at`) -> `delivered` on success, or after the last
//! failure `dead` (the dead-letter queue, with reason and last status). Before each attempt the row
//! is marked in flight and committed; a process killed during the attempt leaves the row pending,
//! so the next run sends it again (receivers de-duplicate on export_id / Nats-Msg-Id).

use super::signature::{retry_delay_ms, MAX_ATTEMPTS};
use crate::core::store::{Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

/// Schema of migration 5.
pub const MIGRATION_5: &str = "
CREATE TABLE notify_exports (
    export_id           TEXT PRIMARY KEY,
    artifact_sha256     TEXT NOT NULL,
    bundle_id           TEXT NOT NULL,
    tenant_id           TEXT NOT NULL,
    node_filter         TEXT NOT NULL,
    manifest_digest     TEXT NOT NULL,
    signed_by           TEXT NOT NULL,
    bundle_created_at   TEXT NOT NULL,
    bundle_created_by   TEXT NOT NULL,
    root_hash           TEXT NOT NULL,
    portable_size_bytes INTEGER NOT NULL,
    export_size_bytes   INTEGER NOT NULL,
    file_path           TEXT NOT NULL,
    created_at          TEXT NOT NULL
);
CREATE INDEX idx_notify_exports_logs
    ON notify_exports (tenant_id, node_filter, manifest_digest, signed_by);
CREATE TABLE notify_emissions (
    emission_id     INTEGER PRIMARY KEY,
    export_id       TEXT NOT NULL REFERENCES notify_exports (export_id),
    artifact_sha256 TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    body            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (export_id, artifact_sha256)
);
CREATE TABLE notify_deliveries (
    delivery_id     INTEGER PRIMARY KEY,
    emission_id     INTEGER NOT NULL REFERENCES notify_emissions (emission_id),
    target_kind     TEXT NOT NULL CHECK (target_kind IN ('webhook', 'nats')),
    target          TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    in_flight_since INTEGER,
    last_status     INTEGER,
    last_reason     TEXT,
    last_attempt_at INTEGER,
    done_at         INTEGER,
    dlq_published   INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    UNIQUE (emission_id, target_kind, target)
);
CREATE INDEX idx_notify_deliveries_due ON notify_deliveries (status, next_attempt_at);
CREATE TABLE notify_attempts (
    delivery_id INTEGER NOT NULL REFERENCES notify_deliveries (delivery_id),
    attempt     INTEGER NOT NULL,
    sent_at     TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('delivered', 'failed', 'interrupted')),
    status      INTEGER,
    reason      TEXT,
    PRIMARY KEY (delivery_id, attempt, sent_at)
);
";

/// A delivery target: each webhook URL, and NATS.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetKey {
    /// `webhook` or `nats`.
    pub kind: String,
    /// The webhook URL, or the NATS server URL.
    pub target: String,
}

impl TargetKey {
    pub fn webhook(url: &str) -> Self {
        TargetKey {
            kind: "webhook".into(),
            target: url.to_string(),
        }
    }
    pub fn nats(url: &str) -> Self {
        TargetKey {
            kind: "nats".into(),
            target: url.to_string(),
        }
    }
}

/// A finished portable export, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportRecord {
    pub export_id: String,
    pub artifact_sha256: String,
    pub bundle_id: String,
    pub tenant_id: String,
    pub node_filter: String,
    pub manifest_digest: String,
    pub signed_by: String,
    pub bundle_created_at: String,
    pub bundle_created_by: String,
    pub root_hash: String,
    pub portable_size_bytes: u64,
    pub export_size_bytes: u64,
    pub file_path: String,
    pub created_at: String,
}

/// What recording an export did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum EmissionOutcome {
    /// A new emission was recorded; it will be delivered.
    Emitted { emission_id: i64 },
    /// This (export_id, artifact_sha256) was emitted before: nothing new.
    AlreadyEmitted { emission_id: i64, first_at: String },
}

/// The identity (bundle id, created at, created by) of an earlier export of the same logs.
pub fn earlier_identity(
    conn: &Connection,
    tenant: &str,
    node_filter: &str,
    manifest_digest: &str,
    signed_by: &str,
) -> Result<Option<(String, String, String)>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT bundle_id, bundle_created_at, bundle_created_by FROM notify_exports
             WHERE tenant_id = ?1 AND node_filter = ?2 AND manifest_digest = ?3 AND signed_by = ?4
             ORDER BY created_at LIMIT 1",
            params![tenant, node_filter, manifest_digest, signed_by],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?)
}

/// Records the export and its emission in one transaction; a repeated export of the same artifact
/// records nothing new.
pub fn record_export(
    store: &mut Store,
    rec: &ExportRecord,
    event_type: &str,
    body: &str,
    now_ms: u64,
) -> Result<EmissionOutcome, StoreError> {
    let tx = store.conn_mut().transaction()?;
    tx.execute(
        "INSERT OR IGNORE INTO notify_exports (export_id, artifact_sha256, bundle_id, tenant_id,
            node_filter, manifest_digest, signed_by, bundle_created_at, bundle_created_by, root_hash,
            portable_size_bytes, export_size_bytes, file_path, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            rec.export_id,
            rec.artifact_sha256,
            rec.bundle_id,
            rec.tenant_id,
            rec.node_filter,
            rec.manifest_digest,
            rec.signed_by,
            rec.bundle_created_at,
            rec.bundle_created_by,
            rec.root_hash,
            rec.portable_size_bytes as i64,
            rec.export_size_bytes as i64,
            rec.file_path,
            rec.created_at
        ],
    )?;
    // The row `airlock serve` downloads the artifact from (`/v1/exports/airgap/evidence/{id}/download`).
    crate::core::exports::record_export_in(
        &tx,
        &crate::core::exports::ExportRecord {
            export_id: rec.export_id.clone(),
            bundle_id: rec.bundle_id.clone(),
            path: std::path::PathBuf::from(&rec.file_path),
            artifact_sha256: rec.artifact_sha256.clone(),
            size_bytes: rec.export_size_bytes,
            created_at: rec.created_at.clone(),
        },
    )?;
    let inserted = tx.execute(
        "INSERT OR IGNORE INTO notify_emissions (export_id, artifact_sha256, event_type, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![rec.export_id, rec.artifact_sha256, event_type, body, now_ms as i64],
    )?;
    let (emission_id, first_at): (i64, i64) = tx.query_row(
        "SELECT emission_id, created_at FROM notify_emissions WHERE export_id = ?1 AND artifact_sha256 = ?2",
        params![rec.export_id, rec.artifact_sha256],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    tx.commit()?;
    Ok(if inserted == 1 {
        EmissionOutcome::Emitted { emission_id }
    } else {
        EmissionOutcome::AlreadyEmitted {
            emission_id,
            first_at: crate::core::time::rfc3339_millis(first_at as u64),
        }
    })
}

/// The recorded export of `export_id`.
pub fn export_record(store: &Store, export_id: &str) -> Result<Option<ExportRecord>, StoreError> {
    Ok(store
        .conn()
        .query_row(
            "SELECT export_id, artifact_sha256, bundle_id, tenant_id, node_filter, manifest_digest,
                signed_by, bundle_created_at, bundle_created_by, root_hash, portable_size_bytes,
                export_size_bytes, file_path, created_at
             FROM notify_exports WHERE export_id = ?1",
            params![export_id],
            |r| {
                Ok(ExportRecord {
                    export_id: r.get(0)?,
                    artifact_sha256: r.get(1)?,
                    bundle_id: r.get(2)?,
                    tenant_id: r.get(3)?,
                    node_filter: r.get(4)?,
                    manifest_digest: r.get(5)?,
                    signed_by: r.get(6)?,
                    bundle_created_at: r.get(7)?,
                    bundle_created_by: r.get(8)?,
                    root_hash: r.get(9)?,
                    portable_size_bytes: r.get::<_, i64>(10)? as u64,
                    export_size_bytes: r.get::<_, i64>(11)? as u64,
                    file_path: r.get(12)?,
                    created_at: r.get(13)?,
                })
            },
        )
        .optional()?)
}

/// One emission with its export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmissionRow {
    pub emission_id: i64,
    pub export_id: String,
    pub artifact_sha256: String,
    pub tenant_id: String,
    pub bundle_id: String,
    pub file_path: String,
    pub created_at: String,
}

/// Every emission, newest first.
pub fn emissions(store: &Store) -> Result<Vec<EmissionRow>, StoreError> {
    let mut stmt = store.conn().prepare(
        "SELECT m.emission_id, m.export_id, m.artifact_sha256, x.tenant_id, x.bundle_id,
                x.file_path, m.created_at
         FROM notify_emissions m JOIN notify_exports x ON x.export_id = m.export_id
         ORDER BY m.emission_id DESC",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(EmissionRow {
            emission_id: r.get(0)?,
            export_id: r.get(1)?,
            artifact_sha256: r.get(2)?,
            tenant_id: r.get(3)?,
            bundle_id: r.get(4)?,
            file_path: r.get(5)?,
            created_at: crate::core::time::rfc3339_millis(r.get::<_, i64>(6)? as u64),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Creates a pending delivery, due now, for every emission and target that has none yet.
/// Returns how many were created.
pub fn enroll(store: &mut Store, targets: &[TargetKey], now_ms: u64) -> Result<usize, StoreError> {
    let tx = store.conn_mut().transaction()?;
    let mut created = 0;
    for t in targets {
        created += tx.execute(
            "INSERT OR IGNORE INTO notify_deliveries
                (emission_id, target_kind, target, status, next_attempt_at, created_at)
             SELECT emission_id, ?1, ?2, 'pending', ?3, ?3 FROM notify_emissions",
            params![t.kind, t.target, now_ms as i64],
        )?;
    }
    tx.commit()?;
    Ok(created)
}

/// A delivery with its emission, as listed and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRow {
    pub delivery_id: i64,
    pub emission_id: i64,
    pub export_id: String,
    pub tenant_id: String,
    pub target_kind: String,
    pub target: String,
    pub status: String,
    pub attempts: u32,
    /// Unix ms; meaningful while pending.
    pub next_attempt_at: u64,
    pub in_flight_since: Option<u64>,
    pub last_status: Option<u16>,
    pub last_reason: Option<String>,
    pub last_attempt_at: Option<u64>,
    pub done_at: Option<u64>,
    pub dlq_published: bool,
    #[serde(skip)]
    pub body: String,
}

impl DeliveryRow {
    pub fn key(&self) -> TargetKey {
        TargetKey {
            kind: self.target_kind.clone(),
            target: self.target.clone(),
        }
    }
}

const DELIVERY_COLUMNS: &str = "d.delivery_id, d.emission_id, m.export_id, x.tenant_id,
    d.target_kind, d.target, d.status, d.attempts, d.next_attempt_at, d.in_flight_since,
    d.last_status, d.last_reason, d.last_attempt_at, d.done_at, d.dlq_published, m.body
    FROM notify_deliveries d
    JOIN notify_emissions m ON m.emission_id = d.emission_id
    JOIN notify_exports x ON x.export_id = m.export_id";

fn delivery(r: &Row<'_>) -> rusqlite::Result<DeliveryRow> {
    let opt_u64 = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(|v| v as u64))
    };
    Ok(DeliveryRow {
        delivery_id: r.get(0)?,
        emission_id: r.get(1)?,
        export_id: r.get(2)?,
        tenant_id: r.get(3)?,
        target_kind: r.get(4)?,
        target: r.get(5)?,
        status: r.get(6)?,
        attempts: r.get::<_, i64>(7)? as u32,
        next_attempt_at: r.get::<_, i64>(8)? as u64,
        in_flight_since: opt_u64(9)?,
        last_status: r.get::<_, Option<i64>>(10)?.map(|s| s as u16),
        last_reason: r.get(11)?,
        last_attempt_at: opt_u64(12)?,
        done_at: opt_u64(13)?,
        dlq_published: r.get::<_, i64>(14)? != 0,
        body: r.get(15)?,
    })
}

/// Deliveries, optionally of one status (`pending`, `delivered`, `dead`), oldest first.
pub fn deliveries(store: &Store, status: Option<&str>) -> Result<Vec<DeliveryRow>, StoreError> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} WHERE (?1 IS NULL OR d.status = ?1) ORDER BY d.delivery_id"
    );
    let mut stmt = store.conn().prepare(&sql)?;
    let rows = stmt.query_map(params![status], delivery)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// One delivery.
pub fn delivery_by_id(store: &Store, id: i64) -> Result<Option<DeliveryRow>, StoreError> {
    let sql = format!("SELECT {DELIVERY_COLUMNS} WHERE d.delivery_id = ?1");
    Ok(store
        .conn()
        .query_row(&sql, params![id], delivery)
        .optional()?)
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRow {
    pub attempt: u32,
    pub sent_at: String,
    pub outcome: String,
    pub status: Option<u16>,
    pub reason: Option<String>,
}

/// The attempts of a delivery, in order.
pub fn attempts(store: &Store, id: i64) -> Result<Vec<AttemptRow>, StoreError> {
    let mut stmt = store.conn().prepare(
        "SELECT attempt, sent_at, outcome, status, reason FROM notify_attempts
         WHERE delivery_id = ?1 ORDER BY sent_at, attempt",
    )?;
    let rows = stmt.query_map(params![id], |r| {
        Ok(AttemptRow {
            attempt: r.get::<_, i64>(0)? as u32,
            sent_at: r.get(1)?,
            outcome: r.get(2)?,
            status: r.get::<_, Option<i64>>(3)?.map(|s| s as u16),
            reason: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Pending deliveries to `targets` that are due at `now_ms`, oldest first.
pub fn due(
    store: &Store,
    targets: &[TargetKey],
    now_ms: u64,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let wanted: std::collections::HashSet<&TargetKey> = targets.iter().collect();
    Ok(deliveries(store, Some("pending"))?
        .into_iter()
        .filter(|d| d.next_attempt_at <= now_ms && wanted.contains(&d.key()))
        .collect())
}

/// When the next pending delivery to one of `targets` is due (Unix ms), if any is pending.
pub fn next_due(store: &Store, targets: &[TargetKey]) -> Result<Option<u64>, StoreError> {
    let wanted: std::collections::HashSet<&TargetKey> = targets.iter().collect();
    Ok(deliveries(store, Some("pending"))?
        .into_iter()
        .filter(|d| wanted.contains(&d.key()))
        .map(|d| d.next_attempt_at)
        .min())
}

/// Marks deliveries in flight (committed before anything is sent). A row already in flight was
/// interrupted by a crash: that attempt is recorded as `interrupted` (it does not count).
pub fn mark_in_flight(store: &mut Store, ids: &[i64], now_ms: u64) -> Result<(), StoreError> {
    let tx = store.conn_mut().transaction()?;
    for id in ids {
        let (attempts, since): (i64, Option<i64>) = tx.query_row(
            "SELECT attempts, in_flight_since FROM notify_deliveries WHERE delivery_id = ?1",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if let Some(since) = since {
            tx.execute(
                "INSERT OR IGNORE INTO notify_attempts (delivery_id, attempt, sent_at, outcome, reason)
                 VALUES (?1, ?2, ?3, 'interrupted', 'the process stopped during this attempt; sent again')",
                params![id, attempts + 1, crate::core::time::rfc3339_millis(since as u64)],
            )?;
        }
        tx.execute(
            "UPDATE notify_deliveries SET in_flight_since = ?2 WHERE delivery_id = ?1",
            params![id, now_ms as i64],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// The result of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptResult {
    pub sent_at: String,
    pub sent_at_ms: u64,
    pub delivered: bool,
    pub status: Option<u16>,
    pub reason: Option<String>,
}

/// What became of a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAttempt {
    Delivered,
    /// Retry at this Unix ms.
    RetryAt(u64),
    Dead,
}

/// Records an attempt and moves the delivery on: delivered, retry after the schedule's delay
/// (from `finished_ms`, the failure), or dead after the last attempt.
pub fn record_attempt(
    store: &mut Store,
    id: i64,
    a: &AttemptResult,
    finished_ms: u64,
) -> Result<AfterAttempt, StoreError> {
    let tx = store.conn_mut().transaction()?;
    let attempts: i64 = tx.query_row(
        "SELECT attempts FROM notify_deliveries WHERE delivery_id = ?1",
        params![id],
        |r| r.get(0),
    )?;
    let n = attempts as u32 + 1;
    let outcome = if a.delivered { "delivered" } else { "failed" };
    tx.execute(
        "INSERT OR REPLACE INTO notify_attempts (delivery_id, attempt, sent_at, outcome, status, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![id, n, a.sent_at, outcome, a.status.map(i64::from), a.reason],
    )?;
    let after = if a.delivered {
        AfterAttempt::Delivered
    } else {
        match retry_delay_ms(n).filter(|_| n < MAX_ATTEMPTS) {
            Some(d) => AfterAttempt::RetryAt(finished_ms + d),
            None => AfterAttempt::Dead,
        }
    };
    let (status, next, done) = match after {
        AfterAttempt::Delivered => ("delivered", finished_ms, Some(finished_ms as i64)),
        AfterAttempt::RetryAt(t) => ("pending", t, None),
        AfterAttempt::Dead => ("dead", finished_ms, Some(finished_ms as i64)),
    };
    tx.execute(
        "UPDATE notify_deliveries SET status = ?2, attempts = ?3, next_attempt_at = ?4,
            in_flight_since = NULL, last_status = ?5, last_reason = ?6, last_attempt_at = ?7,
            done_at = ?8
         WHERE delivery_id = ?1",
        params![
            id,
            status,
            n,
            next as i64,
            a.status.map(i64::from),
            a.reason,
            a.sent_at_ms as i64,
            done
        ],
    )?;
    tx.commit()?;
    Ok(after)
}

/// Dead deliveries whose DLQ message has not been published yet.
pub fn unpublished_dead(store: &Store) -> Result<Vec<DeliveryRow>, StoreError> {
    Ok(deliveries(store, Some("dead"))?
        .into_iter()
        .filter(|d| !d.dlq_published)
        .collect())
}

/// Notes that a dead delivery's DLQ message was published.
pub fn mark_dlq_published(store: &Store, id: i64) -> Result<(), StoreError> {
    store.conn().execute(
        "UPDATE notify_deliveries SET dlq_published = 1 WHERE delivery_id = ?1",
        params![id],
    )?;
    Ok(())
}

/// Why an operator action on a delivery was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryActionError {
    #[error("no delivery {0}; `airlock notify list` shows the ids")]
    Unknown(i64),
    #[error("delivery {id} is {status}; only a dead-lettered delivery can be retried")]
    NotDead { id: i64, status: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `notify retry ID`: a dead-lettered delivery back to pending, due now, with a fresh schedule
/// (its earlier attempts stay in the history).
pub fn retry(store: &mut Store, id: i64, now_ms: u64) -> Result<(), DeliveryActionError> {
    let row = delivery_by_id(store, id)?.ok_or(DeliveryActionError::Unknown(id))?;
    if row.status != "dead" {
        return Err(DeliveryActionError::NotDead {
            id,
            status: row.status,
        });
    }
    store
        .conn()
        .execute(
            "UPDATE notify_deliveries SET status = 'pending', attempts = 0, next_attempt_at = ?2,
                in_flight_since = NULL, done_at = NULL, dlq_published = 0
             WHERE delivery_id = ?1",
            params![id, now_ms as i64],
        )
        .map_err(StoreError::from)?;
    Ok(())
}

/// Counts for metrics: emissions, deliveries by target kind and status, attempts by outcome,
/// dead letters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifyCounts {
    pub emissions: u64,
    /// (target kind, status, count).
    pub deliveries: Vec<(String, String, u64)>,
    /// (target kind, outcome, count) over every attempt.
    pub attempts: Vec<(String, String, u64)>,
    pub dead_letters: u64,
}

/// The counters, from the tables (they survive restarts because they are the store).
pub fn counts(store: &Store) -> Result<NotifyCounts, StoreError> {
    let conn = store.conn();
    let emissions: i64 =
        conn.query_row("SELECT COUNT(*) FROM notify_emissions", [], |r| r.get(0))?;
    let grouped = |sql: &str| -> Result<Vec<(String, String, u64)>, StoreError> {
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let deliveries = grouped(
        "SELECT target_kind, status, COUNT(*) FROM notify_deliveries
         GROUP BY target_kind, status ORDER BY 1, 2",
    )?;
    let attempts = grouped(
        "SELECT d.target_kind, a.outcome, COUNT(*) FROM notify_attempts a
         JOIN notify_deliveries d ON d.delivery_id = a.delivery_id
         GROUP BY d.target_kind, a.outcome ORDER BY 1, 2",
    )?;
    // Every dead-lettering, including deliveries retried since: the last failed attempt.
    let dead_letters: i64 = conn.query_row(
        "SELECT COUNT(*) FROM notify_attempts WHERE outcome = 'failed' AND attempt = ?1",
        params![MAX_ATTEMPTS],
        |r| r.get(0),
    )?;
    Ok(NotifyCounts {
        emissions: emissions as u64,
        deliveries,
        attempts,
        dead_letters: dead_letters as u64,
    })
}
