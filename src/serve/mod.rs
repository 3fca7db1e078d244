//! `airlock serve` (SPEC section 13): the long-running side. HTTP in, engine calls out:
//!
//! * `GET /api/v1/scheduler/chain/verify?tenantId=T`: the `chain verify --json` object;
//! * `POST /api/v1/airgap/bundles`: the connected transport, importing a bundle exactly as
//!   `jobs import` does (same engine call, report JSON, refusals and trust policy);
//! * `GET /v1/exports/airgap/evidence/{exportId}/download`: a recorded portable export;
//! * `/metrics`, `/healthz`, `/readyz`;
//! * the ledger's append and anti-entropy endpoints ([`ledger`]);
//! * background jobs ([`jobs`]): batch snapshots, HLC persistence, chain verification;
//! * notification delivery ([`notify`]) when `notifications.*` names targets.
//!
//! The router is composed of one sub-router per area ([`router`]); others attach theirs there.
//! Every store call runs on the blocking pool, never on the async threads. TLS is left to a
//! reverse proxy.

mod auth;
mod body;
mod bundles;
mod chain;
pub mod client;
mod error;
mod exports;
pub mod jobs;
pub mod ledger;
pub mod ledger_host;
pub mod ledger_peer;
pub mod notify;
mod ops;
pub mod push;
mod query;
mod spool;
mod state;

pub use auth::is_loopback;
pub use error::ApiError;
pub use state::{ServeOptions, ServeState, DEFAULT_BODY_MEMORY_MIB, JSON_BODY_LIMIT};

use axum::Router;
use std::future::Future;
use std::sync::Arc;

/// Why serve could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] crate::core::store::StoreError),
    #[error(transparent)]
    Spool(#[from] spool::SpoolError),
    #[error("ledger.dir {}: {message}", crate::text::visible_path(path))]
    LedgerDir {
        path: std::path::PathBuf,
        message: String,
    },
}

/// The whole API: one sub-router per area, behind the access check.
pub fn router(state: Arc<ServeState>) -> Router {
    Router::new()
        .merge(chain::routes())
        .merge(bundles::routes(&state))
        .merge(exports::routes())
        .merge(ops::routes())
        .merge(ledger::routes())
        .fallback(error::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::map_response(error::json_errors))
        .with_state(state)
}

/// Opens the store (creating and migrating it) and the upload spool, removing what a stopped serve
/// left there. Called before serve says it listens, so that a store that cannot open is an error
/// of the start, never a serve that announced itself and then exits.
pub async fn open(options: ServeOptions) -> Result<Arc<ServeState>, ServeError> {
    // Opening the store blocks (a PostgreSQL connection and its migrations): off the async threads.
    let state = tokio::task::spawn_blocking(move || ServeState::open(options))
        .await
        .map_err(std::io::Error::other)??;
    Ok(Arc::new(state))
}

/// How serve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Whether it had become ready: false when it was stopped during its start-up chain
    /// verification (cut short, `/readyz` never answered 200).
    pub became_ready: bool,
}

/// Serves on `listener` until `shutdown` resolves: runs the start-up chain verification and the
/// background jobs, answers requests, then stops the jobs (a verification in progress, the
/// start-up one included, gives up at its next page), lets in-flight requests and a started
/// import finish. `state` comes from [`open`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServeState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Stopped, ServeError> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let delivery = match state.options.notify.clone().filter(|t| !t.is_empty()) {
        Some(targets) => Some(notify::start(
            state.location().clone(),
            targets,
            state.options.notify_poll,
            stop_rx.clone(),
            state.busy_cutoff.clone(),
        )?),
        None => None,
    };
    let background = tokio::spawn(jobs::run_all(state.clone(), stop_rx));
    let app = router(state.clone());
    // The jobs are told the moment the signal comes, not once the requests in progress are done:
    // a long verification then ends while they finish.
    let st = state.clone();
    let shutdown = async move {
        shutdown.await;
        st.stop();
    };
    // The relay's accept loop: stalled or idle clients are closed, at most `max_connections` at
    // once, and shutdown waits only for requests in progress.
    crate::http_server::serve_connections(listener, app, state.options.limits, shutdown).await;
    state.stop();
    let _ = stop_tx.send(true);
    let _ = background.await;
    let became_ready = state.is_ready();
    // An import whose client went away runs on to its commit or rollback (it holds the lock until
    // then); the process must not end under it.
    drop(state.import_lock.clone().lock_owned().await);
    // Closing writers and the PostgreSQL client blocks: off the async threads.
    let st = state.clone();
    let _ = tokio::task::spawn_blocking(move || ledger::close_all(&st)).await;
    if let Some(thread) = delivery {
        // The delivery thread finishes the batch it has sent (each attempt is bounded), then stops.
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
    // The pooled store connections close off the async threads too (a PostgreSQL client's close
    // blocks); the last reference to the state is this one once the server has returned.
    let _ = tokio::task::spawn_blocking(move || drop(state)).await;
    tracing::info!("airlock serve stopped");
    Ok(Stopped { became_ready })
}
