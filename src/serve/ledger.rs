//! The ledger's endpoints (SPEC 12 and 13): appends to this node's ledgers and Merkle anti-entropy
//! between two `airlock serve` instances.
//!
//! * `POST /api/v1/ledger/{node}/events` `{"event": {...}, "fence": N}`: `ledger append` over HTTP
//!   (validated, fence-checked, durable when it answers: LOCAL, or REGIONAL/GLOBAL once PostgreSQL
//!   confirmed it when `ledger.durability` says so);
//! * `POST /api/v1/ledger/{node}/sync`: one anti-entropy exchange (a `SyncRequest`, answered by
//!   `core::ledger::antientropy::serve`); `airlock ledger sync A --peer URL` drives the session.
//!
//! The ledgers are `<ledger.dir>/<node>.alwl`. Every ledger call runs on the blocking pool under one
//! lock (an anti-entropy write closes the log's writer first; the next append reopens it).

use super::body::StrictJson;
use super::error::ApiError;
use super::ledger_host::{LedgerOptions, Ledgers, Open};
use super::state::ServeState;
use crate::core::ledger::antientropy::{self, Replica, SyncRequest, SyncResponse};
use crate::core::ledger::append::{AppendRequest, InputNames, LedgerLog};
use crate::core::ledger::durability::{
    self, ConfirmError, Durability, PendingFrames, PendingLimits,
};
use crate::core::ledger::LedgerError;
use crate::core::metrics::{self, Event};
use crate::core::store::postgres::PgStore;
use crate::core::text::ShowPath;
use crate::core::wal::{WalMetricsSnapshot, WalOptions};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use std::path::PathBuf;
use std::sync::Arc;

pub fn routes() -> Router<Arc<ServeState>> {
    Router::new()
        .route("/api/v1/ledger/{node}/events", post(append))
        .route("/api/v1/ledger/{node}/sync", post(sync))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AppendBody {
    event: serde_json::Value,
    #[serde(default)]
    fence: Option<u64>,
}

fn options(state: &ServeState) -> Result<LedgerOptions, ApiError> {
    state.options.ledger.clone().ok_or_else(|| {
        ApiError::not_found("this serve hosts no ledgers: set ledger.dir in the configuration")
    })
}

fn ledger_path(o: &LedgerOptions, node: &str) -> Result<PathBuf, ApiError> {
    crate::core::ledger::node_log_file(&o.dir, node)
        .map_err(|e| ApiError::bad_request(format!("ledger node id: {e}")))
}

fn ledger_error(e: LedgerError) -> ApiError {
    match e {
        LedgerError::StaleFence { .. } => {
            ApiError::new(StatusCode::CONFLICT, "stale-fence", e.to_string())
        }
        LedgerError::Usage(_) | LedgerError::Event(_) => ApiError::bad_request(e.to_string()),
        // Frames of another node offered for this one: the request names the wrong ledger.
        LedgerError::ForeignNode { offered: true, .. } => {
            ApiError::new(StatusCode::BAD_REQUEST, "wrong-node", e.to_string())
        }
        // The log under this node's name is another node's (a file put there by hand, or stored
        // by an older serve): nothing is wrong with the request's frames, the ledger disagrees.
        LedgerError::ForeignNode { offered: false, .. }
        | LedgerError::Wal(crate::core::wal::WalError::WrongNode { .. }) => {
            ApiError::new(StatusCode::CONFLICT, "wrong-node", e.to_string())
        }
        // Another process (a `ledger append`, a second serve) writes this log: nothing is wrong
        // with this machine, and the append succeeds once it has let go.
        LedgerError::Wal(crate::core::wal::WalError::Locked { .. }) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-busy",
            format!("{e}; nothing was appended: retry once that process has closed the log"),
        )
        // A `ledger append` holds the log for an instant: worth a retry a second later (what
        // `ledger sync --peer` does).
        .retry_after(1),
        other => ApiError::internal(other.to_string()),
    }
}

async fn append(
    State(state): State<Arc<ServeState>>,
    Path(node): Path<String>,
    StrictJson(body): StrictJson<AppendBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let o = options(&state)?;
    let path = ledger_path(&o, &node)?;
    let req = AppendRequest::from_json_as(&body.event.to_string(), body.fence, InputNames::HTTP)
        .map_err(ledger_error)?;
    // Validated before the log is opened: a refused event leaves no new (preallocated) file.
    req.validate(Some(&node)).map_err(ledger_error)?;
    let st = state.clone();
    run_blocking(move || {
        let mut host = st.ledgers.lock().unwrap_or_else(|e| e.into_inner());
        let host = &mut *host;
        let slot = open_slot(host, &st, &o, &node, &path)?;
        let appended = slot.log.append(&req).map_err(ledger_error)?;
        if o.durability != Durability::Local {
            let frame = durability::frame_bytes(&req, &appended).map_err(ledger_error)?;
            if slot.unconfirmed.push(frame) {
                count_spill(&st, o.durability);
            }
        }
        flush_wal_metrics(&st, slot);
        let mut answer =
            serde_json::to_value(&appended).map_err(|e| ApiError::internal(e.to_string()))?;
        if let Some(c) = confirm(host, &st, &o, &node, appended.lsn)? {
            answer["durability"] = serde_json::json!(o.durability.name());
            answer["postgresLsn"] = serde_json::json!(c);
        }
        Ok(Json(answer))
    })
    .await
}

/// The open slot of `node`, opening (and recovering) the ledger on first use.
fn open_slot<'a>(
    host: &'a mut Ledgers,
    st: &ServeState,
    o: &LedgerOptions,
    node: &str,
    path: &std::path::Path,
) -> Result<&'a mut Open, ApiError> {
    if !host.open.contains_key(node) {
        std::fs::create_dir_all(&o.dir).map_err(|e| {
            ApiError::internal(format!("cannot create ledger.dir {}: {e}", o.dir.shown()))
        })?;
        let mut log =
            LedgerLog::open(path, Some(node), WalOptions::default()).map_err(ledger_error)?;
        if o.durability.replicated().is_some() {
            // Before the first append: no checkpoint may compact what PostgreSQL lacks.
            log.require_confirmation().map_err(ledger_error)?;
        }
        let outcome = log.wal().recovery().outcome.name();
        // Frames appended and never confirmed before are read back from the WAL when the first
        // confirmation runs (bounded batches), not held here.
        let unconfirmed = PendingFrames::new(o.durability, PendingLimits::default());
        st.with_backend(|c| metrics::record_quietly(c, &[metrics::wal_recovered(outcome)]));
        host.open.insert(
            node.to_string(),
            Open {
                log,
                recorded: WalMetricsSnapshot::default(),
                unconfirmed,
            },
        );
    }
    host.open
        .get_mut(node)
        .ok_or_else(|| ApiError::internal("ledger slot vanished"))
}

/// Records the WAL metrics since the last flush.
fn flush_wal_metrics(st: &ServeState, slot: &mut Open) {
    let now = slot.log.wal().metrics();
    let events = metrics::wal_deltas(&slot.recorded, &now);
    st.with_backend(|c| metrics::record_quietly(c, &events));
    slot.recorded = now;
}

/// Confirms the node's unconfirmed frames at the configured level (every frame up to `lsn`, so the
/// watermark never covers a frame PostgreSQL has not stored); PostgreSQL's LSN (X/Y).
fn confirm(
    host: &mut Ledgers,
    st: &ServeState,
    o: &LedgerOptions,
    node: &str,
    lsn: u64,
) -> Result<Option<String>, ApiError> {
    let Some((level, _)) = o.durability.replicated() else {
        return Ok(None);
    };
    let url = o.postgres.as_deref().ok_or_else(|| {
        ApiError::internal("ledger.durability needs ledger.postgresUrl".to_string())
    })?;
    let not_confirmed =
        |message: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not-confirmed", message);
    if host.pg.is_none() {
        let pg = PgStore::connect(url).map_err(|e| {
            count_confirmation(st, level, false);
            not_confirmed(format!(
                "event at LSN {lsn} is LOCAL (fdatasynced in the node WAL) but not {}: {e}",
                o.durability.name()
            ))
        })?;
        host.pg = Some(pg);
    }
    let (Some(pg), Some(slot)) = (host.pg.as_ref(), host.open.get_mut(node)) else {
        return Err(ApiError::internal("ledger slot vanished"));
    };
    // A connection that must be replaced and cannot be (the server went away) is not used: the
    // event stays LOCAL and the next append connects afresh.
    let attempt = pg.connection().map(|mut conn| {
        durability::confirm_pending(&mut slot.log, &mut conn, &mut slot.unconfirmed, lsn)
    });
    let result = match attempt {
        Ok(result) => result,
        Err(e) => {
            count_confirmation(st, level, false);
            host.pg = None;
            return Err(not_confirmed(format!(
                "event at LSN {lsn} is LOCAL (fdatasynced in the node WAL) but not {}: {e}",
                o.durability.name()
            )));
        }
    };
    count_confirmation(st, level, result.is_ok());
    match result {
        // Nothing left to send (already confirmed): the recorded confirmation stands.
        Ok(c) => Ok(c.map(|c| c.watermark.to_string()).or_else(|| {
            slot.log
                .confirmations()
                .get(o.durability.name())
                .map(|m| m.postgres_lsn.clone())
        })),
        Err(e @ ConfirmError::Postgres { .. }) => {
            // A broken connection is reopened on the next append.
            host.pg = None;
            Err(not_confirmed(e.to_string()))
        }
        Err(e) => Err(not_confirmed(e.to_string())),
    }
}

fn count_confirmation(
    st: &ServeState,
    level: crate::core::store::postgres::durability::Level,
    ok: bool,
) {
    let level = match level {
        crate::core::store::postgres::durability::Level::Regional => "regional",
        crate::core::store::postgres::durability::Level::Global => "global",
    };
    let labels = metrics::label_text(&[
        ("level", level),
        ("outcome", if ok { "confirmed" } else { "failed" }),
    ]);
    st.with_backend(|c| {
        metrics::record_quietly(
            c,
            &[Event::CountLabelled {
                name: metrics::LEDGER_CONFIRMATIONS,
                labels,
                delta: 1,
            }],
        )
    });
}

fn count_spill(st: &ServeState, durability: Durability) {
    let labels = metrics::label_text(&[("level", &durability.name().to_ascii_lowercase())]);
    st.with_backend(|c| {
        metrics::record_quietly(
            c,
            &[Event::CountLabelled {
                name: metrics::LEDGER_CONFIRM_SPILLS,
                labels,
                delta: 1,
            }],
        )
    });
}

async fn sync(
    State(state): State<Arc<ServeState>>,
    Path(node): Path<String>,
    StrictJson(req): StrictJson<SyncRequest>,
) -> Result<Json<SyncResponse>, ApiError> {
    let o = options(&state)?;
    let path = ledger_path(&o, &node)?;
    let st = state.clone();
    run_blocking(move || {
        let mut host = st.ledgers.lock().unwrap_or_else(|e| e.into_inner());
        // Anti-entropy appends through its own file handle: the writer steps aside.
        if let Some(open) = host.open.remove(&node) {
            open.log.close().map_err(ledger_error)?;
        }
        let mut replica = Replica::open(&path).map_err(ledger_error)?;
        let answer = antientropy::serve_node(&mut replica, &req, &node).map_err(ledger_error)?;
        Ok(Json(answer))
    })
    .await
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("a ledger task failed: {e}")))?
}

/// Closes every open ledger (what is queued is written) and the PostgreSQL connection at shutdown.
pub fn close_all(state: &ServeState) {
    let mut host = state.ledgers.lock().unwrap_or_else(|e| e.into_inner());
    host.pg = None;
    for (node, mut open) in host.open.drain() {
        flush_wal_metrics(state, &mut open);
        if let Err(e) = open.log.close() {
            tracing::warn!(
                "closing ledger {node}: {}",
                crate::text::visible(&e.to_string())
            );
        }
    }
}
