//! The edge outbox (SPEC section 9, seed statehub-offline-write-buffer): the route table, scrubbing,
//! envelopes and their statuses, the durable SQLite store, group commit for the relay, and operator
//! replay. The relay, the CLI and the console all call these functions; none of them holds a rule.
//!
//! Engine API at a glance:
//! - [`Outbox::open`] / [`Outbox::open_existing`]: open an outbox file by path.
//! - [`Outbox::counts`], [`Outbox::list`], [`Outbox::get`]: inspect.
//! - [`Outbox::retry`], [`Outbox::cancel`]: operator transitions (refused with a reason when invalid).
//! - [`Outbox::export`]: non-secret JSON, written atomically.
//! - [`replay`]: async, reports [`ReplayProgress`] through a callback; run it on a tokio task.
//! - [`intake`] + [`OutboxWriter`]: what the relay uses to turn a request into a durable envelope.
//! - [`request_idempotency_key`], [`new_idempotency_key`]: the Idempotency-Key rule.

pub mod envelope;
pub mod idempotency;
pub mod lock;
pub mod replay;
pub mod routes;
pub mod scrub;
pub mod store;
pub mod writer;

pub use envelope::{
    intake, Envelope, EnvelopeStatus, IncomingWrite, NewEnvelope, Receipt, Refusal, SourceMeta,
};
pub use idempotency::{new_idempotency_key, request_idempotency_key, IdempotencyKeyError};
pub use lock::ReplayLock;
pub use replay::{replay, ReplayOptions, ReplayProgress, ReplaySummary};
pub use routes::{classify, RouteClass, RouteMatch, ROUTES};
pub use store::{EnqueueOutcome, ExportSummary, Outbox, StatusCounts};
pub use writer::OutboxWriter;

use std::path::{Path, PathBuf};

/// The default upstream when neither `STATEHUB_UPSTREAM_URL` nor `API_BASE` is set.
pub const DEFAULT_UPSTREAM: &str = "http://127.0.0.1:8000";

/// The upstream URL: `explicit`, else `STATEHUB_UPSTREAM_URL`, else `API_BASE`, else
/// `http://127.0.0.1:8000` (empty variables count as unset).
pub fn upstream_url(explicit: Option<&str>) -> String {
    if let Some(u) = explicit {
        return u.to_string();
    }
    for var in ["STATEHUB_UPSTREAM_URL", "API_BASE"] {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return v.trim().to_string();
            }
        }
    }
    DEFAULT_UPSTREAM.to_string()
}

/// The outbox file: `explicit`, else `STATEHUB_OUTBOX_PATH`, else `~/.statehub/edge-outbox.sqlite3`.
pub fn outbox_path(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("STATEHUB_OUTBOX_PATH").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    crate::core::paths::home_dir().join(".statehub/edge-outbox.sqlite3")
}

/// An outbox failure, saying what to do about it where that is knowable.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("cannot open the outbox at {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error(
        "no outbox at {path}: the relay creates it when it starts; give --outbox PATH or set \
         STATEHUB_OUTBOX_PATH"
    )]
    Missing { path: PathBuf },
    #[error(
        "the outbox at {path} has schema version {found}, newer than this airlock understands \
         ({known}); upgrade airlock"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("outbox database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no envelope {id} in the outbox; list them with `airlock outbox list`")]
    NotFound { id: String },
    #[error("envelope id prefix {prefix} matches more than one envelope; give the full id")]
    Ambiguous { prefix: String },
    #[error("cannot {action} envelope {id} (status {status}): {reason}")]
    Transition {
        action: &'static str,
        id: String,
        status: EnvelopeStatus,
        reason: &'static str,
    },
    #[error("envelope {id} changed while it was being updated; look at it again and retry")]
    Changed { id: String },
    #[error("{}", busy_text(holder, *readers_only))]
    ReplayBusy {
        holder: String,
        /// No replay holds the lock: something else kept a shared lock on the lock file (an
        /// `outbox status` look lasts an instant) for all of
        /// [`crate::core::file_lock::LOOKS_WAITED`]; `holder` then names the lock file.
        readers_only: bool,
    },
    #[error("stored envelope {id} is unreadable ({reason}); nothing was changed. Inspect its row with sqlite3 (table `envelopes`, id {id}), then repair the row or restore the outbox from a backup")]
    Corrupt { id: String, reason: String },
    #[error("the outbox could not commit the write: {0}")]
    Commit(String),
    #[error("the outbox writer has stopped")]
    WriterStopped,
    #[error("invalid upstream URL {url:?}: {reason}")]
    BadUpstream { url: String, reason: String },
    #[error(transparent)]
    Write(#[from] crate::core::file_output::WriteFileError),
}

/// The text of [`OutboxError::ReplayBusy`]: another replay holds the lock (`holder`: who), or
/// (`readers_only`) none does but a shared lock on the lock file `holder` was held without a pause.
fn busy_text(holder: &str, readers_only: bool) -> String {
    if readers_only {
        format!(
            "no replay, retry or cancel is running on this outbox, but another process has held a \
             shared lock on its replay lock {holder} for {} s without a pause (an `outbox status` \
             look lasts an instant); find it (`fuser`), stop it, then run the command again",
            crate::core::file_lock::LOOKS_WAITED.as_secs()
        )
    } else {
        format!(
            "another replay, retry or cancel is running on this outbox ({holder}); wait for it to \
             finish, then run the command again"
        )
    }
}

impl OutboxError {
    /// Whether the error is "someone else holds the replay lock".
    pub fn is_busy(&self) -> bool {
        matches!(self, OutboxError::ReplayBusy { .. })
    }
}
