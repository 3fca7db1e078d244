//! The notification tables of the store (migration 5): portable exports, one emission per
//! (export_id, artifact_sha256), and the durable delivery queue with every attempt.
//!
//! Delivery life: `pending` (due at `next_attempt_at`) -> `delivered` on success, or after the last
//! failure `dead` (the dead-letter queue, with reason and last status). Before each attempt the row
//! is claimed (`in_flight_since`, the claimer in `claim_holder`, a fresh `claim_token`; migration 6)
//! and committed; no other runner sends it while the claim is younger than [`CLAIM_LEASE_MS`],
//! unless its holder ran on this host and its process is provably gone ([`super::holder`]): then
//! the next runner takes it over at once. A claim from another host keeps its lease. A process
//! killed during the attempt leaves the row pending with its claim, so a later run sends it again
//! (receivers de-duplicate on export_id / Nats-Msg-Id). An attempt is recorded only by the runner
//! that still holds the claim (same token): a runner whose claim expired and was taken over does
//! not overwrite the newer claimer's outcome.

use super::signature::{retry_delay_ms, MAX_ATTEMPTS};
use crate::core::store::backend::{Backend, StoreTx, TxKind};
use crate::core::store::sql::{self, SqlRow, Val};
use crate::core::store::StoreError;
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

/// Schema of migration 6: who holds a delivery's claim ([`super::holder::Holder`] as JSON) and the
/// claim's token (a fresh UUID per claim; only its holder records the attempt).
pub const MIGRATION_6: &str = "
ALTER TABLE notify_deliveries ADD COLUMN claim_holder TEXT;
ALTER TABLE notify_deliveries ADD COLUMN claim_token TEXT;
";

/// A delivery target: each webhook URL, and NATS.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetKey {
    /// `webhook` or `nats`.
    pub kind: String,
    /// The webhook URL, or the NATS server URL (its password hidden in JSON).
    #[serde(serialize_with = "url_shown")]
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
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "outcome"
)]
pub enum EmissionOutcome {
    /// A new emission was recorded; it will be delivered.
    Emitted { emission_id: i64 },
    /// This (export_id, artifact_sha256) was emitted before: nothing new.
    AlreadyEmitted { emission_id: i64, first_at: String },
}

/// The identity (bundle id, created at, created by) of an earlier export of the same logs (inside
/// the export's read transaction).
pub fn earlier_identity(
    tx: &mut dyn StoreTx,
    tenant: &str,
    node_filter: &str,
    manifest_digest: &str,
    signed_by: &str,
) -> Result<Option<(String, String, String)>, StoreError> {
    let row = sql::query_opt(
        tx,
        "notify_exports",
        "SELECT bundle_id, bundle_created_at, bundle_created_by FROM notify_exports
         WHERE tenant_id = ?1 AND node_filter = ?2 AND manifest_digest = ?3 AND signed_by = ?4
         ORDER BY created_at LIMIT 1",
        &[
            tenant.into(),
            node_filter.into(),
            manifest_digest.into(),
            signed_by.into(),
        ],
    )?;
    row.map(|r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))
        .transpose()
}

const EXPORT_COLUMNS: &str = "export_id, artifact_sha256, bundle_id, tenant_id, node_filter,
    manifest_digest, signed_by, bundle_created_at, bundle_created_by, root_hash,
    portable_size_bytes, export_size_bytes, file_path, created_at";

/// Records the export and its emission in one transaction; a repeated export of the same artifact
/// records nothing new.
pub fn record_export(
    store: &dyn Backend,
    rec: &ExportRecord,
    event_type: &str,
    body: &str,
    now_ms: u64,
) -> Result<EmissionOutcome, StoreError> {
    let mut tx = store.begin(TxKind::Write)?;
    tx.lock_table("notify_emissions")?;
    sql::exec(
        &mut *tx,
        &format!(
            "INSERT INTO notify_exports ({EXPORT_COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT (export_id) DO NOTHING"
        ),
        &[
            (&rec.export_id).into(),
            (&rec.artifact_sha256).into(),
            (&rec.bundle_id).into(),
            (&rec.tenant_id).into(),
            (&rec.node_filter).into(),
            (&rec.manifest_digest).into(),
            (&rec.signed_by).into(),
            (&rec.bundle_created_at).into(),
            (&rec.bundle_created_by).into(),
            (&rec.root_hash).into(),
            rec.portable_size_bytes.into(),
            rec.export_size_bytes.into(),
            (&rec.file_path).into(),
            (&rec.created_at).into(),
        ],
    )?;
    // The row `airlock serve` downloads the artifact from (`/v1/exports/airgap/evidence/{id}/download`).
    crate::core::exports::record_export_in(
        &mut *tx,
        &crate::core::exports::ExportRecord {
            export_id: rec.export_id.clone(),
            bundle_id: rec.bundle_id.clone(),
            path: std::path::PathBuf::from(&rec.file_path),
            artifact_sha256: rec.artifact_sha256.clone(),
            size_bytes: rec.export_size_bytes,
            created_at: rec.created_at.clone(),
        },
    )?;
    let inserted = sql::exec(
        &mut *tx,
        "INSERT INTO notify_emissions (export_id, artifact_sha256, event_type, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (export_id, artifact_sha256) DO NOTHING",
        &[
            (&rec.export_id).into(),
            (&rec.artifact_sha256).into(),
            event_type.into(),
            body.into(),
            now_ms.into(),
        ],
    )?;
    let row = sql::query_opt(
        &mut *tx,
        "notify_emissions",
        "SELECT emission_id, created_at FROM notify_emissions WHERE export_id = ?1 AND artifact_sha256 = ?2",
        &[(&rec.export_id).into(), (&rec.artifact_sha256).into()],
    )?
    .ok_or_else(|| missing("notify_emissions", &rec.export_id))?;
    let (emission_id, first_at) = (row.i64(0)?, row.u64(1)?);
    tx.commit()?;
    Ok(if inserted == 1 {
        EmissionOutcome::Emitted { emission_id }
    } else {
        EmissionOutcome::AlreadyEmitted {
            emission_id,
            first_at: crate::core::time::rfc3339_millis(first_at),
        }
    })
}

/// A row the transaction itself just wrote or read is not there.
fn missing(table: &'static str, key: &str) -> StoreError {
    StoreError::CorruptRow {
        table,
        position: key.to_string(),
        detail: "the row is missing".into(),
    }
}

/// The recorded export of `export_id`.
pub fn export_record(
    store: &dyn Backend,
    export_id: &str,
) -> Result<Option<ExportRecord>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let row = sql::query_opt(
        &mut *tx,
        "notify_exports",
        &format!("SELECT {EXPORT_COLUMNS} FROM notify_exports WHERE export_id = ?1"),
        &[export_id.into()],
    )?;
    row.map(|r| {
        Ok(ExportRecord {
            export_id: r.text(0)?,
            artifact_sha256: r.text(1)?,
            bundle_id: r.text(2)?,
            tenant_id: r.text(3)?,
            node_filter: r.text(4)?,
            manifest_digest: r.text(5)?,
            signed_by: r.text(6)?,
            bundle_created_at: r.text(7)?,
            bundle_created_by: r.text(8)?,
            root_hash: r.text(9)?,
            portable_size_bytes: r.u64(10)?,
            export_size_bytes: r.u64(11)?,
            file_path: r.text(12)?,
            created_at: r.text(13)?,
        })
    })
    .transpose()
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
pub fn emissions(store: &dyn Backend) -> Result<Vec<EmissionRow>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let rows = sql::query(
        &mut *tx,
        "notify_emissions",
        "SELECT m.emission_id, m.export_id, m.artifact_sha256, x.tenant_id, x.bundle_id,
                x.file_path, m.created_at
         FROM notify_emissions m JOIN notify_exports x ON x.export_id = m.export_id
         ORDER BY m.emission_id DESC",
        &[],
    )?;
    rows.iter()
        .map(|r| {
            Ok(EmissionRow {
                emission_id: r.i64(0)?,
                export_id: r.text(1)?,
                artifact_sha256: r.text(2)?,
                tenant_id: r.text(3)?,
                bundle_id: r.text(4)?,
                file_path: r.text(5)?,
                created_at: crate::core::time::rfc3339_millis(r.u64(6)?),
            })
        })
        .collect()
}

/// Creates a pending delivery, due now, for every emission and target that has none yet.
/// Returns how many were created.
pub fn enroll(
    store: &dyn Backend,
    targets: &[TargetKey],
    now_ms: u64,
) -> Result<usize, StoreError> {
    let mut tx = store.begin(TxKind::Write)?;
    tx.lock_table("notify_deliveries")?;
    let mut created = 0;
    for t in targets {
        created += sql::exec(
            &mut *tx,
            "INSERT INTO notify_deliveries
                (emission_id, target_kind, target, status, next_attempt_at, created_at)
             SELECT emission_id, CAST(?1 AS TEXT), CAST(?2 AS TEXT), 'pending', CAST(?3 AS BIGINT),
                    CAST(?3 AS BIGINT)
             FROM notify_emissions WHERE true
             ON CONFLICT (emission_id, target_kind, target) DO NOTHING",
            &[(&t.kind).into(), (&t.target).into(), now_ms.into()],
        )?;
    }
    tx.commit()?;
    Ok(created as usize)
}

/// A delivery with its emission, as listed and shown. The times are Unix ms here and RFC 3339
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`) in its JSON, like every other time airlock prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRow {
    pub delivery_id: i64,
    pub emission_id: i64,
    pub export_id: String,
    pub tenant_id: String,
    pub target_kind: String,
    /// The webhook or NATS URL (its password hidden in JSON).
    #[serde(serialize_with = "url_shown")]
    pub target: String,
    pub status: String,
    pub attempts: u32,
    /// Unix ms; meaningful while pending.
    #[serde(serialize_with = "ms_as_rfc3339")]
    pub next_attempt_at: u64,
    #[serde(serialize_with = "optional_ms_as_rfc3339")]
    pub in_flight_since: Option<u64>,
    pub last_status: Option<u16>,
    pub last_reason: Option<String>,
    #[serde(serialize_with = "optional_ms_as_rfc3339")]
    pub last_attempt_at: Option<u64>,
    #[serde(serialize_with = "optional_ms_as_rfc3339")]
    pub done_at: Option<u64>,
    pub dlq_published: bool,
    #[serde(skip)]
    pub body: String,
}

/// Unix ms as an RFC 3339 string with milliseconds (the JSON form of a time).
/// A target URL as it may be shown: the password of its userinfo hidden.
fn url_shown<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::core::text::hide_url_passwords(url))
}

fn ms_as_rfc3339<S: serde::Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::core::time::rfc3339_millis(*ms))
}

/// An optional Unix ms time as an RFC 3339 string with milliseconds, or null.
fn optional_ms_as_rfc3339<S: serde::Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => ms_as_rfc3339(ms, s),
        None => s.serialize_none(),
    }
}

impl DeliveryRow {
    pub fn key(&self) -> TargetKey {
        TargetKey {
            kind: self.target_kind.clone(),
            target: self.target.clone(),
        }
    }
}

/// A delivery row's select list and joins: its columns (the event body as `$body`, then
/// `$extra`), one list for every read of delivery rows.
macro_rules! delivery_select {
    ($body:literal, $extra:literal) => {
        concat!(
            "d.delivery_id, d.emission_id, m.export_id, x.tenant_id,
    d.target_kind, d.target, d.status, d.attempts, d.next_attempt_at, d.in_flight_since,
    d.last_status, d.last_reason, d.last_attempt_at, d.done_at, d.dlq_published, ",
            $body,
            $extra,
            "
    FROM notify_deliveries d
    JOIN notify_emissions m ON m.emission_id = d.emission_id
    JOIN notify_exports x ON x.export_id = m.export_id"
        )
    };
}

const DELIVERY_COLUMNS: &str = delivery_select!("m.body", "");

/// [`DELIVERY_COLUMNS`] with the event body cut to nothing (`substr(m.body, 1, 0)`: an empty text
/// for a text, NULL for NULL, in SQLite and PostgreSQL alike): what the damage scan of the metrics
/// reads, so that a scrape does not read every event body the queue ever held.
const DELIVERY_COLUMNS_WITHOUT_BODY: &str = delivery_select!("substr(m.body, 1, 0)", "");

/// The columns of [`DELIVERY_COLUMNS`], named in errors.
const DELIVERY_COLUMN_NAMES: [&str; 16] = [
    "delivery_id",
    "emission_id",
    "notify_emissions.export_id",
    "notify_exports.tenant_id",
    "target_kind",
    "target",
    "status",
    "attempts",
    "next_attempt_at",
    "in_flight_since",
    "last_status",
    "last_reason",
    "last_attempt_at",
    "done_at",
    "dlq_published",
    "notify_emissions.body",
];

/// The name of the column an error's `column N` position points at (1-based, in `names`), or the
/// position as it was when it names no column of `names`.
fn column_name(position: &str, names: &[&str]) -> String {
    position
        .strip_prefix("column ")
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| names.get(n.checked_sub(1)?))
        .map_or(position.to_string(), |name| name.to_string())
}

/// A damaged value of a delivery row, said with the row's delivery id and the column's name
/// (`delivery_id 7, next_attempt_at`), not only the column's position in the query.
fn located(e: StoreError, r: &SqlRow, names: &[&str]) -> StoreError {
    let id = match r.values.first() {
        Some(Val::Int(id)) => Some(*id),
        _ => None,
    };
    located_at(e, id, names)
}

/// [`located`] for a query whose first column is not the delivery id: `id` is the row's.
fn located_at(e: StoreError, id: Option<i64>, names: &[&str]) -> StoreError {
    match e {
        StoreError::CorruptRow {
            table,
            position,
            detail,
        } => {
            let column = column_name(&position, names);
            let id = id.map_or(String::new(), |id| format!("delivery_id {id}, "));
            StoreError::CorruptRow {
                table,
                position: format!("{id}{column}"),
                detail,
            }
        }
        e => e,
    }
}

fn delivery(r: &SqlRow) -> Result<DeliveryRow, StoreError> {
    delivery_fields(r).map_err(|e| located(e, r, &DELIVERY_COLUMN_NAMES))
}

fn delivery_fields(r: &SqlRow) -> Result<DeliveryRow, StoreError> {
    Ok(DeliveryRow {
        delivery_id: r.i64(0)?,
        emission_id: r.i64(1)?,
        export_id: r.text(2)?,
        tenant_id: r.text(3)?,
        target_kind: r.text(4)?,
        target: r.text(5)?,
        status: r.text(6)?,
        attempts: u32::try_from(r.u64(7)?).unwrap_or(u32::MAX),
        next_attempt_at: r.u64(8)?,
        in_flight_since: r.opt_u64(9)?,
        last_status: r.opt_u64(10)?.map(|s| u16::try_from(s).unwrap_or(u16::MAX)),
        last_reason: r.opt_text(11)?,
        last_attempt_at: r.opt_u64(12)?,
        done_at: r.opt_u64(13)?,
        dlq_published: r.i64(14)? != 0,
        body: r.text(15)?,
    })
}

/// A delivery row that cannot be decoded (a value of the wrong type or out of its range: a row
/// altered by hand, a damaged store). The runner skips it and says so once; `notify list` and the
/// metrics (`airlock_notify_deliveries{status="damaged"}`) show it. Nothing is written to it:
/// repairing (or restoring) the row is the operator's, and a repaired row is delivered again on
/// the runner's next round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DamagedDelivery {
    /// The row's id (its primary key: always readable on SQLite and PostgreSQL; `None` only if
    /// even that is not an integer).
    pub delivery_id: Option<i64>,
    /// The column that does not read, e.g. `next_attempt_at` (`notify_emissions.body` for the
    /// event body of its emission).
    pub column: String,
    /// What was found there instead.
    pub detail: String,
    /// The row's `target_kind` and `status`, when they read as text (the metrics' labels).
    #[serde(skip)]
    pub target_kind: Option<String>,
    #[serde(skip)]
    pub status: Option<String>,
}

impl DamagedDelivery {
    /// The damage of row `r` that `e` (an error of [`delivery_fields`]) reports.
    fn of(r: &SqlRow, e: StoreError) -> Result<DamagedDelivery, StoreError> {
        let StoreError::CorruptRow {
            position, detail, ..
        } = e
        else {
            return Err(e);
        };
        let text = |i: usize| match r.values.get(i) {
            Some(Val::Text(t)) => Some(t.clone()),
            _ => None,
        };
        Ok(DamagedDelivery {
            delivery_id: match r.values.first() {
                Some(Val::Int(id)) => Some(*id),
                _ => None,
            },
            column: column_name(&position, &DELIVERY_COLUMN_NAMES),
            detail,
            target_kind: text(4),
            status: text(6),
        })
    }

    /// The damage a store error reports, when it is a delivery row's damaged value named by
    /// delivery id and column (`notify_deliveries row delivery_id 7, attempts: ...`, as
    /// [`record_attempt`] reports it).
    pub fn from_error(e: &StoreError) -> Option<DamagedDelivery> {
        let StoreError::CorruptRow {
            table: "notify_deliveries",
            position,
            detail,
        } = e
        else {
            return None;
        };
        let (id, column) = position.strip_prefix("delivery_id ")?.split_once(", ")?;
        Some(DamagedDelivery {
            delivery_id: Some(id.parse().ok()?),
            column: column.to_string(),
            detail: detail.clone(),
            target_kind: None,
            status: None,
        })
    }

    /// The damage as the error a strict read gives (`notify_deliveries row delivery_id 7,
    /// next_attempt_at: ...`).
    pub fn to_error(&self) -> StoreError {
        StoreError::CorruptRow {
            table: "notify_deliveries",
            position: self.position(),
            detail: self.detail.clone(),
        }
    }

    /// `delivery_id 7, next_attempt_at` (the column alone when the id does not read).
    fn position(&self) -> String {
        match self.delivery_id {
            Some(id) => format!("delivery_id {id}, {}", self.column),
            None => self.column.clone(),
        }
    }
}

/// `notify_deliveries row delivery_id 7, next_attempt_at: expected ..., found ...` (stored text
/// inside `detail` is shown by its Debug form; displays still pass it through `visible`).
impl std::fmt::Display for DamagedDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "notify_deliveries row {}: {}",
            self.position(),
            self.detail
        )
    }
}

/// Delivery rows read one by one: those that decode, and those that do not (each named by its
/// delivery id and column), in delivery id order. One damaged row never hides its neighbours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedDeliveries {
    pub rows: Vec<DeliveryRow>,
    pub damaged: Vec<DamagedDelivery>,
}

impl DecodedDeliveries {
    /// Every row decoded, or the first damaged one's error (what a strict read gives).
    pub fn strict(self) -> Result<Vec<DeliveryRow>, StoreError> {
        match self.damaged.first() {
            Some(d) => Err(d.to_error()),
            None => Ok(self.rows),
        }
    }
}

fn decode_each(rows: &[SqlRow]) -> Result<DecodedDeliveries, StoreError> {
    let mut out = DecodedDeliveries::default();
    for r in rows {
        match delivery_fields(r) {
            Ok(d) => out.rows.push(d),
            Err(e) => out.damaged.push(DamagedDelivery::of(r, e)?),
        }
    }
    Ok(out)
}

/// Deliveries, optionally of one status (`pending`, `delivered`, `dead`), oldest first; the first
/// row that cannot be decoded is an error naming its delivery id and column
/// ([`deliveries_decoded`] reads past it).
pub fn deliveries(
    store: &dyn Backend,
    status: Option<&str>,
) -> Result<Vec<DeliveryRow>, StoreError> {
    deliveries_decoded(store, status)?.strict()
}

/// [`deliveries`], each row decoded on its own: the rows that cannot be decoded are returned
/// beside the others instead of failing the whole read.
pub fn deliveries_decoded(
    store: &dyn Backend,
    status: Option<&str>,
) -> Result<DecodedDeliveries, StoreError> {
    read_deliveries(store, DELIVERY_COLUMNS, status)
}

/// The delivery rows (of every status) that cannot be decoded, without reading event bodies
/// (what the metrics count at every scrape).
pub fn damaged_deliveries(store: &dyn Backend) -> Result<Vec<DamagedDelivery>, StoreError> {
    Ok(deliveries_without_bodies(store, None)?.damaged)
}

/// [`deliveries_decoded`] with every event body read as empty: for counting and damage scans,
/// which need the rows' state, not the events they carry.
pub fn deliveries_without_bodies(
    store: &dyn Backend,
    status: Option<&str>,
) -> Result<DecodedDeliveries, StoreError> {
    read_deliveries(store, DELIVERY_COLUMNS_WITHOUT_BODY, status)
}

fn read_deliveries(
    store: &dyn Backend,
    columns: &str,
    status: Option<&str>,
) -> Result<DecodedDeliveries, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let sql = format!(
        "SELECT {columns} WHERE (CAST(?1 AS TEXT) IS NULL OR d.status = ?1) ORDER BY d.delivery_id"
    );
    let rows = sql::query(&mut *tx, "notify_deliveries", &sql, &[status.into()])?;
    decode_each(&rows)
}

/// One delivery.
pub fn delivery_by_id(store: &dyn Backend, id: i64) -> Result<Option<DeliveryRow>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let sql = format!("SELECT {DELIVERY_COLUMNS} WHERE d.delivery_id = ?1");
    let row = sql::query_opt(&mut *tx, "notify_deliveries", &sql, &[id.into()])?;
    row.as_ref().map(delivery).transpose()
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
pub fn attempts(store: &dyn Backend, id: i64) -> Result<Vec<AttemptRow>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let rows = sql::query(
        &mut *tx,
        "notify_attempts",
        "SELECT attempt, sent_at, outcome, status, reason FROM notify_attempts
         WHERE delivery_id = ?1 ORDER BY sent_at, attempt",
        &[id.into()],
    )?;
    rows.iter()
        .map(|r| {
            Ok(AttemptRow {
                attempt: u32::try_from(r.u64(0)?).unwrap_or(u32::MAX),
                sent_at: r.text(1)?,
                outcome: r.text(2)?,
                status: r.opt_u64(3)?.map(|s| u16::try_from(s).unwrap_or(u16::MAX)),
                reason: r.opt_text(4)?,
            })
        })
        .collect()
}

/// How long a claim (`in_flight_since`) keeps every other runner off a delivery: three times the
/// bound of one attempt. A claim older than this was left by a process that stopped (SIGKILL,
/// power loss) or hangs; a younger one belongs to a runner that is sending it now (another
/// `notify run`, `airlock serve`, or another machine on a shared PostgreSQL store), unless its
/// holder ran on this host and is provably gone ([`super::holder::Holder::is_gone`]).
pub const CLAIM_LEASE_MS: u64 = 30_000;

/// While another runner holds a claim, how often a waiting runner looks whether it finished.
pub const CLAIM_RECHECK_MS: u64 = 1_000;

/// The claim of a pending delivery still shuts out other runners at `now_ms`: it is younger than
/// the lease and its holder is not provably gone (a holder on another host always keeps its lease).
fn claimed_elsewhere(in_flight_since: Option<u64>, holder: Option<&str>, now_ms: u64) -> bool {
    in_flight_since.is_some_and(|since| since.saturating_add(CLAIM_LEASE_MS) > now_ms)
        && !holder.is_some_and(super::holder::holder_gone)
}

/// When a pending delivery is due, from its recorded `next_attempt_at`: no attempt is ever
/// scheduled further ahead than the longest retry delay (16 s after a failure; enrolment and
/// `notify retry` make it due at once), so a time beyond that is not a schedule to keep but a
/// clock that was set back since (or an altered row): it is due now, not after a wait of hours
/// or years that nothing would ever explain.
fn next_attempt(next_attempt_at: u64, now_ms: u64) -> u64 {
    if next_attempt_at > now_ms.saturating_add(longest_delay_ms()) {
        now_ms
    } else {
        next_attempt_at
    }
}

/// [`DELIVERY_COLUMNS`] and the claim's holder (column 17): what the runner's scans of the pending
/// rows read.
const DUE_COLUMNS: &str = delivery_select!("m.body", ", d.claim_holder");

/// The claim holder a [`DUE_COLUMNS`] row records; one that is not text counts as none (that
/// claim keeps its lease, as one recorded before migration 6 does, instead of failing every
/// runner).
fn due_holder(r: &SqlRow) -> Option<String> {
    r.opt_text(16).ok().flatten()
}

/// The longest retry delay in ms: no pending delivery is scheduled further ahead than this.
fn longest_delay_ms() -> u64 {
    super::signature::RETRY_DELAYS_SECONDS
        .iter()
        .max()
        .map_or(0, |s| s * 1000)
}

/// Which pending rows a scan reads: those whose recorded `next_attempt_at` is at most, or beyond,
/// a time.
#[derive(Clone, Copy)]
enum Span {
    UpTo(u64),
    Beyond(u64),
}

/// One scan of the pending rows to `targets` in `span`, in due order: by `next_attempt_at`, the
/// order of the index `idx_notify_deliveries_due` (status, next_attempt_at) that serves it (ties
/// in the index's own order: delivery id on SQLite, the rows' places on PostgreSQL). Rows
/// attempted within `skip_attempted` (from, to: Unix ms, inclusive) are left out. The rows are
/// read a page at a time (the first of `first_page` rows, each next one twice as long), and
/// handed to `each` one by one until it says `true` (stop) or the rows run out: a scan reads the
/// rows it hands out and the ones `each` passes over, never the whole queue.
fn scan_pending(
    tx: &mut dyn StoreTx,
    targets: &[TargetKey],
    span: Span,
    skip_attempted: Option<(u64, u64)>,
    first_page: usize,
    mut each: impl FnMut(&SqlRow) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    if targets.is_empty() {
        return Ok(());
    }
    let (op, bound) = match span {
        Span::UpTo(t) => ("<=", t),
        Span::Beyond(t) => (">", t),
    };
    // An empty window (1 > 0) when nothing is left out.
    let (from, to) = skip_attempted.unwrap_or((1, 0));
    let mut params: Vec<Val> = vec![
        bound.into(),
        0u64.into(),
        0u64.into(),
        from.into(),
        to.into(),
    ];
    let mut wanted = Vec::with_capacity(targets.len());
    for t in targets {
        let n = params.len();
        wanted.push(format!(
            "(d.target_kind = ?{} AND d.target = ?{})",
            n + 1,
            n + 2
        ));
        params.push((&t.kind).into());
        params.push((&t.target).into());
    }
    let sql = format!(
        "SELECT {DUE_COLUMNS}
         WHERE d.status = 'pending' AND d.next_attempt_at {op} ?1
           AND NOT (COALESCE(d.last_attempt_at, -1) BETWEEN ?4 AND ?5)
           AND ({})
         ORDER BY d.next_attempt_at LIMIT ?2 OFFSET ?3",
        wanted.join(" OR ")
    );
    let (mut offset, mut page) = (0usize, first_page.clamp(1, MAX_PAGE));
    loop {
        params[1] = (page as u64).into();
        params[2] = (offset as u64).into();
        let rows = sql::query(tx, "notify_deliveries", &sql, &params)?;
        for r in &rows {
            if each(r)? {
                return Ok(());
            }
        }
        if rows.len() < page {
            return Ok(());
        }
        offset += rows.len();
        page = page.saturating_mul(2).min(MAX_PAGE);
    }
}

/// The longest page a scan of the pending rows reads at once.
const MAX_PAGE: usize = 1 << 16;

/// What the runner asks of the due rows ([`due_decoded`]).
#[derive(Debug, Clone)]
pub struct DueQuery<'a> {
    pub targets: &'a [TargetKey],
    /// The time now (Unix ms): claims are judged at this time.
    pub now_ms: u64,
    /// The rows due by this time (`now_ms`; `--once`: when the run started, so that a retry this
    /// run scheduled waits for the next run).
    pub due_by_ms: u64,
    /// Leave out the rows attempted from this time to `now_ms` (`--once`: its start; a retry time
    /// beyond the schedule, due now, is then not one this run made and sends again).
    pub attempted_since: Option<u64>,
    /// The most rows returned (the runner's free slots).
    pub limit: usize,
    /// Deliveries left out (the runner's own sends in flight).
    pub skip: &'a std::collections::HashSet<i64>,
}

impl<'a> DueQuery<'a> {
    /// Every row due at `now_ms` (no limit, nothing skipped).
    pub fn all(
        targets: &'a [TargetKey],
        now_ms: u64,
        skip: &'a std::collections::HashSet<i64>,
    ) -> DueQuery<'a> {
        DueQuery {
            targets,
            now_ms,
            due_by_ms: now_ms,
            attempted_since: None,
            limit: usize::MAX,
            skip,
        }
    }
}

/// Pending deliveries to `targets` that are due at `now_ms` and not claimed by a runner that is
/// sending them now, in due order; a pending row that cannot be decoded is an error
/// ([`due_decoded`] reads past it).
pub fn due(
    store: &dyn Backend,
    targets: &[TargetKey],
    now_ms: u64,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let none = std::collections::HashSet::new();
    due_decoded(store, &DueQuery::all(targets, now_ms, &none))?.strict()
}

/// The due deliveries the runner sends next: at most `q.limit` pending rows to `q.targets`, due
/// by `q.due_by_ms` and not claimed by a runner that is sending them now, in due order (by
/// `next_attempt_at`; a retry time beyond the longest retry delay, which only a clock set back
/// explains, is due now and comes after those). What it costs is the rows it returns and the
/// ones it passes over (the runner's own sends in flight, other runners' live claims, damaged
/// rows), not the queue's length: it reads no further than the limit needs.
///
/// Each row is decoded on its own: the ones met that cannot be decoded are returned beside the
/// others (`damaged`), and never count against the limit (the scan reads past them), so however
/// many damaged rows are due, the readable ones behind them are still sent.
pub fn due_decoded(store: &dyn Backend, q: &DueQuery) -> Result<DecodedDeliveries, StoreError> {
    let mut out = DecodedDeliveries::default();
    if q.limit == 0 {
        return Ok(out);
    }
    let mut tx = store.begin(TxKind::Read)?;
    let window = q.attempted_since.map(|from| (from, q.now_ms));
    let first_page = q.limit.saturating_add(q.skip.len()).min(1024);
    let spans = [
        Span::UpTo(q.due_by_ms.min(q.now_ms)),
        Span::Beyond(q.now_ms.saturating_add(longest_delay_ms())),
    ];
    for span in spans {
        scan_pending(&mut *tx, q.targets, span, window, first_page, |r| {
            match delivery_fields(r) {
                Err(e) => out.damaged.push(DamagedDelivery::of(r, e)?),
                Ok(d) => {
                    let holder = due_holder(r);
                    if !q.skip.contains(&d.delivery_id)
                        && !claimed_elsewhere(d.in_flight_since, holder.as_deref(), q.now_ms)
                    {
                        out.rows.push(d);
                    }
                }
            }
            Ok(out.rows.len() >= q.limit)
        })?;
        if out.rows.len() >= q.limit {
            break;
        }
    }
    Ok(out)
}

/// How many deliveries are pending (of every target; damaged rows included): a count, no row read.
pub fn pending_count(store: &dyn Backend) -> Result<u64, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    sql::query_opt(
        &mut *tx,
        "notify_deliveries",
        "SELECT COUNT(*) FROM notify_deliveries WHERE status = 'pending'",
        &[],
    )?
    .map_or(Ok(0), |r| r.u64(0))
}

/// When something pending for one of `targets` may next be sent (Unix ms), if anything is
/// pending: its retry time, or for a delivery another runner holds, the next look at its claim.
pub fn next_due(
    store: &dyn Backend,
    targets: &[TargetKey],
    now_ms: u64,
) -> Result<Option<u64>, StoreError> {
    next_due_except(store, targets, now_ms, &std::collections::HashSet::new())
}

/// [`next_due`] leaving out the deliveries in `sending` (the runner's own sends in flight, whose
/// results it records when they arrive). Reads the pending rows in due order only as far as the
/// earliest time needs (a row is never sent before its `next_attempt_at`), not the whole queue.
pub fn next_due_except(
    store: &dyn Backend,
    targets: &[TargetKey],
    now_ms: u64,
    sending: &std::collections::HashSet<i64>,
) -> Result<Option<u64>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let far = now_ms.saturating_add(longest_delay_ms());
    let first_page = sending.len().saturating_add(8);
    let mut best: Option<u64> = None;
    // When a readable row not in `sending` may be sent; a row that cannot be decoded is not
    // waited for: the runner skips it (and said so).
    let time_of = |r: &SqlRow| -> Option<(u64, u64)> {
        let d = delivery_fields(r).ok()?;
        if sending.contains(&d.delivery_id) {
            return None;
        }
        let holder = due_holder(r);
        let at = next_attempt(d.next_attempt_at, now_ms);
        let at = match d.in_flight_since {
            Some(since) if claimed_elsewhere(Some(since), holder.as_deref(), now_ms) => {
                at.max((since + CLAIM_LEASE_MS).min(now_ms + CLAIM_RECHECK_MS))
            }
            _ => at,
        };
        Some((d.next_attempt_at, at))
    };
    // Rows within the schedule, earliest first: a row is never sent before its next_attempt_at,
    // so once that is past the best time found, no later row can beat it.
    scan_pending(&mut *tx, targets, Span::UpTo(far), None, first_page, |r| {
        Ok(match time_of(r) {
            Some((next, at)) => {
                let stop = best.is_some_and(|b| next >= b);
                best = Some(best.map_or(at, |b| b.min(at)));
                stop
            }
            None => false,
        })
    })?;
    // Rows beyond the schedule are due now (a clock set back) unless claimed elsewhere: never
    // earlier than now, so looked at only when nothing is due already.
    if best.is_none_or(|b| b > now_ms) {
        scan_pending(
            &mut *tx,
            targets,
            Span::Beyond(far),
            None,
            first_page,
            |r| {
                Ok(match time_of(r) {
                    Some((_, at)) => {
                        best = Some(best.map_or(at, |b| b.min(at)));
                        at <= now_ms
                    }
                    None => false,
                })
            },
        )?;
    }
    Ok(best)
}

/// A delivery this runner claimed: only the holder of `token` records its attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub delivery_id: i64,
    /// A fresh UUID, stored in `claim_token` until the attempt is recorded or the claim is taken
    /// over.
    pub token: String,
}

/// Claims due deliveries for this runner (committed before anything is sent) and returns what it
/// got. A delivery that is no longer pending or due, or that another runner claimed less than
/// [`CLAIM_LEASE_MS`] ago and still runs, is left alone: two runners never send it at once. A
/// claim that expired, or whose holder on this host is gone, was interrupted: that attempt is
/// recorded as `interrupted` (it does not count) and the claim is taken over.
pub fn claim(store: &dyn Backend, ids: &[i64], now_ms: u64) -> Result<Vec<Claim>, StoreError> {
    let me = super::holder::Holder::current().to_text();
    let mut tx = store.begin(TxKind::Write)?;
    tx.lock_table("notify_deliveries")?;
    let mut claimed = Vec::new();
    for id in ids {
        let Some(row) = sql::query_opt(
            &mut *tx,
            "notify_deliveries",
            "SELECT status, next_attempt_at, attempts, in_flight_since, claim_holder
             FROM notify_deliveries WHERE delivery_id = ?1",
            &[(*id).into()],
        )?
        else {
            continue;
        };
        // A row whose values do not read (a damaged row) is left alone: not claimed, not sent;
        // the runner's read of the due rows ([`due_decoded`]) names it.
        let fields = || -> Result<_, StoreError> {
            Ok((row.text(0)?, row.u64(1)?, row.u64(2)?, row.opt_u64(3)?))
        };
        let Ok((status, next_at, attempts, since)) = fields() else {
            continue;
        };
        // As in `claim_holders`: a holder that is not text counts as none.
        let holder = row.opt_text(4).ok().flatten();
        if status != "pending"
            || next_attempt(next_at, now_ms) > now_ms
            || claimed_elsewhere(since, holder.as_deref(), now_ms)
        {
            continue;
        }
        if let Some(since) = since {
            let reason = match &holder {
                Some(h) if since.saturating_add(CLAIM_LEASE_MS) > now_ms => format!(
                    "the process that claimed it ({}) is gone; sent again without waiting for its claim to expire",
                    super::holder::describe(h)
                ),
                _ => "its claim expired: the runner stopped or hung during this attempt; sent again"
                    .to_string(),
            };
            sql::exec(
                &mut *tx,
                "INSERT INTO notify_attempts (delivery_id, attempt, sent_at, outcome, reason)
                 VALUES (?1, ?2, ?3, 'interrupted', ?4)
                 ON CONFLICT (delivery_id, attempt, sent_at) DO NOTHING",
                &[
                    (*id).into(),
                    (attempts + 1).into(),
                    crate::core::time::rfc3339_millis(since).into(),
                    reason.into(),
                ],
            )?;
        }
        let token = uuid::Uuid::new_v4().to_string();
        sql::exec(
            &mut *tx,
            "UPDATE notify_deliveries SET in_flight_since = ?2, claim_holder = ?3, claim_token = ?4
             WHERE delivery_id = ?1",
            &[(*id).into(), now_ms.into(), (&me).into(), (&token).into()],
        )?;
        claimed.push(Claim {
            delivery_id: *id,
            token,
        });
    }
    tx.commit()?;
    Ok(claimed)
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
    /// Not recorded: this runner's claim expired and another runner took the delivery over (or it
    /// was already finished); the newer claimer's outcome stands.
    Superseded,
}

/// Records an attempt made under `claim` and moves the delivery on: delivered, retry after the
/// schedule's delay (from `finished_ms`, the failure), or dead after the last attempt. When the
/// delivery no longer carries this claim's token (another runner took it over after the lease), or
/// is no longer pending, nothing is written: [`AfterAttempt::Superseded`].
pub fn record_attempt(
    store: &dyn Backend,
    claim: &Claim,
    a: &AttemptResult,
    finished_ms: u64,
) -> Result<AfterAttempt, StoreError> {
    let id = claim.delivery_id;
    let mut tx = store.begin(TxKind::Write)?;
    tx.lock_table("notify_deliveries")?;
    let row = sql::query_opt(
        &mut *tx,
        "notify_deliveries",
        "SELECT attempts, status, claim_token FROM notify_deliveries WHERE delivery_id = ?1",
        &[id.into()],
    )?
    .ok_or_else(|| missing("notify_deliveries", &id.to_string()))?;
    // A value that does not read is named by the delivery id and column (nothing is written):
    // the runner reports the row as damaged and goes on with the others.
    let fields = || -> Result<_, StoreError> { Ok((row.u64(0)?, row.text(1)?, row.opt_text(2)?)) };
    let (attempts, status, token) =
        fields().map_err(|e| located_at(e, Some(id), &["attempts", "status", "claim_token"]))?;
    if status != "pending" || token.as_deref() != Some(claim.token.as_str()) {
        return Ok(AfterAttempt::Superseded);
    }
    let n = u32::try_from(attempts)
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let outcome = if a.delivered { "delivered" } else { "failed" };
    sql::exec(
        &mut *tx,
        "INSERT INTO notify_attempts (delivery_id, attempt, sent_at, outcome, status, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (delivery_id, attempt, sent_at) DO UPDATE SET outcome = excluded.outcome,
            status = excluded.status, reason = excluded.reason",
        &[
            id.into(),
            n.into(),
            (&a.sent_at).into(),
            outcome.into(),
            a.status.map(u32::from).into(),
            a.reason.as_ref().into(),
        ],
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
        AfterAttempt::RetryAt(t) => ("pending", t, None),
        AfterAttempt::Dead => ("dead", finished_ms, Some(finished_ms)),
        AfterAttempt::Delivered | AfterAttempt::Superseded => {
            ("delivered", finished_ms, Some(finished_ms))
        }
    };
    sql::exec(
        &mut *tx,
        "UPDATE notify_deliveries SET status = ?2, attempts = ?3, next_attempt_at = ?4,
            in_flight_since = NULL, claim_holder = NULL, claim_token = NULL, last_status = ?5,
            last_reason = ?6, last_attempt_at = ?7, done_at = ?8
         WHERE delivery_id = ?1",
        &[
            id.into(),
            status.into(),
            n.into(),
            next.into(),
            a.status.map(u32::from).into(),
            a.reason.as_ref().into(),
            a.sent_at_ms.into(),
            done.into(),
        ],
    )?;
    tx.commit()?;
    Ok(after)
}

/// A dead delivery whose DLQ message has not been published yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub delivery: DeliveryRow,
    /// Failed attempts over the delivery's whole history: 6 at its first dead-lettering, 12 at the
    /// next after a `notify retry`, ... (what tells its dead-letterings apart).
    pub failed_attempts: u64,
}

/// Dead deliveries whose DLQ message has not been published yet; a dead row that cannot be
/// decoded is an error ([`unpublished_dead_decoded`] reads past it).
pub fn unpublished_dead(store: &dyn Backend) -> Result<Vec<DeadLetter>, StoreError> {
    let (dead, damaged) = unpublished_dead_decoded(store)?;
    match damaged.first() {
        Some(d) => Err(d.to_error()),
        None => Ok(dead),
    }
}

/// [`unpublished_dead`], each dead row decoded on its own: the dead letters to publish, and the
/// dead rows that cannot be decoded (whose DLQ message cannot be written).
pub fn unpublished_dead_decoded(
    store: &dyn Backend,
) -> Result<(Vec<DeadLetter>, Vec<DamagedDelivery>), StoreError> {
    let decoded = deliveries_decoded(store, Some("dead"))?;
    let dead: Vec<DeliveryRow> = decoded
        .rows
        .into_iter()
        .filter(|d| !d.dlq_published)
        .collect();
    let mut tx = store.begin(TxKind::Read)?;
    let mut out = Vec::with_capacity(dead.len());
    for delivery in dead {
        let failed_attempts = sql::query_opt(
            &mut *tx,
            "notify_attempts",
            "SELECT COUNT(*) FROM notify_attempts WHERE delivery_id = ?1 AND outcome = 'failed'",
            &[delivery.delivery_id.into()],
        )?
        .map_or(Ok(0), |r| r.u64(0))?;
        out.push(DeadLetter {
            delivery,
            failed_attempts,
        });
    }
    Ok((out, decoded.damaged))
}

/// Notes that a dead delivery's DLQ message was published.
pub fn mark_dlq_published(store: &dyn Backend, id: i64) -> Result<(), StoreError> {
    let mut tx = store.begin(TxKind::Write)?;
    sql::exec(
        &mut *tx,
        "UPDATE notify_deliveries SET dlq_published = 1 WHERE delivery_id = ?1",
        &[id.into()],
    )?;
    tx.commit()
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
pub fn retry(store: &dyn Backend, id: i64, now_ms: u64) -> Result<(), DeliveryActionError> {
    let row = delivery_by_id(store, id)?.ok_or(DeliveryActionError::Unknown(id))?;
    if row.status != "dead" {
        return Err(DeliveryActionError::NotDead {
            id,
            status: row.status,
        });
    }
    let mut tx = store.begin(TxKind::Write)?;
    sql::exec(
        &mut *tx,
        "UPDATE notify_deliveries SET status = 'pending', attempts = 0, next_attempt_at = ?2,
            in_flight_since = NULL, claim_holder = NULL, claim_token = NULL, done_at = NULL,
            dlq_published = 0
         WHERE delivery_id = ?1 AND status = 'dead'",
        &[id.into(), now_ms.into()],
    )?;
    tx.commit()?;
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
pub fn counts(store: &dyn Backend) -> Result<NotifyCounts, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let mut count = |table: &'static str, sql: &str, params: &[Val]| -> Result<u64, StoreError> {
        sql::query_opt(&mut *tx, table, sql, params)?.map_or(Ok(0), |r| r.u64(0))
    };
    let emissions = count(
        "notify_emissions",
        "SELECT COUNT(*) FROM notify_emissions",
        &[],
    )?;
    // Every dead-lettering, including deliveries retried since: the last failed attempt.
    let dead_letters = count(
        "notify_attempts",
        "SELECT COUNT(*) FROM notify_attempts WHERE outcome = 'failed' AND attempt = ?1",
        &[MAX_ATTEMPTS.into()],
    )?;
    let mut grouped =
        |table: &'static str, sql: &str| -> Result<Vec<(String, String, u64)>, StoreError> {
            let rows = sql::query(&mut *tx, table, sql, &[])?;
            rows.iter()
                .map(|r| Ok((r.text(0)?, r.text(1)?, r.u64(2)?)))
                .collect()
        };
    let deliveries = grouped(
        "notify_deliveries",
        "SELECT target_kind, status, COUNT(*) FROM notify_deliveries
         GROUP BY target_kind, status ORDER BY 1, 2",
    )?;
    let attempts = grouped(
        "notify_attempts",
        "SELECT d.target_kind, a.outcome, COUNT(*) FROM notify_attempts a
         JOIN notify_deliveries d ON d.delivery_id = a.delivery_id
         GROUP BY d.target_kind, a.outcome ORDER BY 1, 2",
    )?;
    Ok(NotifyCounts {
        emissions,
        deliveries,
        attempts,
        dead_letters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of a delivery gives its times as RFC 3339 with milliseconds (null when unset);
    /// the row itself keeps Unix ms for the console.
    #[test]
    fn delivery_json_times_are_rfc3339() {
        let row = DeliveryRow {
            delivery_id: 1,
            emission_id: 2,
            export_id: "e".into(),
            tenant_id: "t".into(),
            target_kind: "webhook".into(),
            target: "http://127.0.0.1:9/hook".into(),
            status: "dead".into(),
            attempts: 6,
            next_attempt_at: 1_767_614_401_000,
            in_flight_since: None,
            last_status: Some(503),
            last_reason: Some("HTTP 503".into()),
            last_attempt_at: Some(1_767_614_431_250),
            done_at: Some(1_767_614_431_250),
            dlq_published: true,
            body: "{}".into(),
        };
        let v = serde_json::to_value(&row).unwrap();
        assert_eq!(v["nextAttemptAt"], "2026-01-05T12:00:01.000Z");
        assert_eq!(v["lastAttemptAt"], "2026-01-05T12:00:31.250Z");
        assert_eq!(v["doneAt"], "2026-01-05T12:00:31.250Z");
        assert!(v["inFlightSince"].is_null());
        assert_eq!(v["lastStatus"], 503);
        assert!(v.get("body").is_none());
    }

    /// A damaged row's error (what a strict read and `record_attempt` give) names it by delivery
    /// id and column, and reads back as the same damage.
    #[test]
    fn a_damaged_rows_error_reads_back() {
        let d = DamagedDelivery {
            delivery_id: Some(7),
            column: "next_attempt_at".into(),
            detail: "expected a non-negative integer, found Some(Int(-5))".into(),
            target_kind: None,
            status: None,
        };
        let e = d.to_error();
        assert!(e
            .to_string()
            .contains("notify_deliveries row delivery_id 7, next_attempt_at: expected"));
        assert_eq!(
            d.to_string(),
            "notify_deliveries row delivery_id 7, next_attempt_at: expected a non-negative integer, found Some(Int(-5))"
        );
        assert_eq!(DamagedDelivery::from_error(&e), Some(d));
        let other = StoreError::CorruptRow {
            table: "notify_attempts",
            position: "delivery_id 7, sent_at".into(),
            detail: String::new(),
        };
        assert_eq!(DamagedDelivery::from_error(&other), None);
    }

    /// The emission outcome is camelCase inside as well as in its tag.
    #[test]
    fn emission_outcome_json_is_camel_case() {
        let v = serde_json::to_value(EmissionOutcome::AlreadyEmitted {
            emission_id: 7,
            first_at: "2026-01-05T12:00:01.000Z".into(),
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "outcome": "alreadyEmitted",
                "emissionId": 7,
                "firstAt": "2026-01-05T12:00:01.000Z"
            })
        );
        let v = serde_json::to_value(EmissionOutcome::Emitted { emission_id: 7 }).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"outcome": "emitted", "emissionId": 7})
        );
    }
}
