//! What every handler and background job shares: the options, a small pool of store connections,
//! the trust policy and readiness.

use super::error::ApiError;
use crate::core::store::any::{AnyStore, StoreLocation};
use crate::core::store::StoreError;
use crate::core::trust::TrustSet;
use ed25519_dalek::SigningKey;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How to run serve (built from the configuration by the CLI).
#[derive(Clone)]
pub struct ServeOptions {
    /// The store: a SQLite file path or a PostgreSQL URL (`store.path`, `--db`).
    pub store_path: PathBuf,
    pub node_id: String,
    pub max_clock_skew: Duration,
    /// HLC persistence (`scheduler.hlc.enabled`, `persistenceInterval`).
    pub hlc_enabled: bool,
    pub persistence_interval: Duration,
    /// Batch snapshots and periodic verification (`scheduler.chain.enabled`).
    pub chain_enabled: bool,
    pub batch_size: u64,
    pub batch_interval: Duration,
    /// Signs batch snapshots when set (`signSnapshots` with `keyId`).
    pub snapshot_key: Option<SigningKey>,
    pub verify_interval: Duration,
    /// The bearer token; `None`: only read-only endpoints, loopback only.
    pub token: Option<String>,
    pub max_bundle_bytes: u64,
    /// The trust policy of imports, as `jobs import --require-signature`.
    pub require_signature: bool,
    pub trust: TrustSet,
    /// Where uploads are spooled before import (default: beside the store).
    pub spool_dir: PathBuf,
    /// Export-ready notification targets (`notifications.*`); `None`: no delivery.
    pub notify: Option<crate::core::notify::settings::Targets>,
    /// How often delivery looks for new emissions (`notifications.pollInterval`).
    pub notify_poll: Duration,
    /// The ledgers serve hosts (`ledger.*`); `None`: no ledger endpoints.
    pub ledger: Option<super::ledger_host::LedgerOptions>,
    /// Header, idle and body timeouts and the connection cap (`--header-timeout-ms` ...).
    pub limits: crate::http_server::ConnectionLimits,
}

/// Shared state of a running serve.
pub struct ServeState {
    pub options: ServeOptions,
    idle: Mutex<Vec<AnyStore>>,
    location: StoreLocation,
    /// Set once the start-up chain verification has finished.
    pub ready: AtomicBool,
    /// Set when serve is asked to stop: a chain verification in progress gives up at its next
    /// page (`core::service::verify_all`).
    pub stopping: AtomicBool,
    /// Ends the background jobs' waits for a store another process has locked: set when serve is
    /// asked to stop (a wait in progress gives up within 100 ms), then moved for the last HLC
    /// persistence on the way out. Requests are not under it: one in progress finishes.
    pub busy_cutoff: std::sync::Arc<crate::core::store::busy::BusyCutoff>,
    /// Tenants whose chain failed the last verification.
    pub failing: Mutex<Vec<String>>,
    /// One import at a time (each is one write transaction on the store). Owned guards: an import
    /// holds it until its blocking work ends, even when its client has gone.
    pub import_lock: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// The open ledgers (appends, anti-entropy).
    pub ledgers: super::ledger_host::LedgerHost,
    /// The memory all JSON request bodies may hold at once (`limits.body_memory_mib`,
    /// `--max-body-memory-mib`; see [`DEFAULT_BODY_MEMORY_MIB`]). Bundle uploads spool to disk and
    /// take none of it.
    pub body_budget: crate::http_server::BodyBudget,
}

/// The default budget of JSON request bodies serve holds in memory at once, all connections
/// together (`--max-body-memory-mib` sets another, at least one [`JSON_BODY_LIMIT`] body): without
/// it, every connection `--max-connections` allows could make serve buffer a [`JSON_BODY_LIMIT`]
/// body, gigabytes for one token holder. Before any byte of it is
/// read, a JSON body reserves its declared `Content-Length`, or `JSON_BODY_LIMIT` when it declares
/// none (chunked), and is read no further than that; the share is given back once the body has been
/// parsed (an undeclared one holds only its real size from the end of its reading). A request that
/// finds the budget taken waits up to half the body timeout for room, then gets 503 `busy` with
/// `Retry-After` and nothing is done ([`crate::http_server::BodyBudget`], the relay's budget too).
///
/// Bundle uploads take no share: they are streamed to a spool file one chunk at a time
/// (`BodyReader::next`, `bundles::spool_body`), never held whole, and imported one at a time.
pub use crate::http_server::DEFAULT_BODY_MEMORY_MIB;

/// Largest JSON request body (the ledger's frame exchange carries up to 65 536 frames).
pub const JSON_BODY_LIMIT: u64 = 64 << 20;

/// Idle connections kept for reuse.
const POOL_SIZE: usize = 8;

impl ServeState {
    /// Opens the store once (creating and migrating it) and the spool directory. A SQLite store
    /// this user cannot write is refused here (serve writes it from its first minute), and the
    /// spool is checked before the store is opened: a start that fails on either leaves nothing
    /// new behind (no store file made, no spool directory).
    pub fn open(options: ServeOptions) -> Result<ServeState, super::ServeError> {
        let location = StoreLocation::parse(&options.store_path).map_err(StoreError::from)?;
        if let StoreLocation::Sqlite(p) = &location {
            crate::core::store::Store::refuse_read_only(p)?;
        }
        if let Some(ledger) = &options.ledger {
            super::ledger_host::check_dir(ledger)?;
        }
        let made_spool = super::spool::prepare(&options.spool_dir)?;
        let store = match AnyStore::open(&location) {
            Ok(s) => s,
            Err(e) => {
                if made_spool {
                    // Empty: made a moment ago.
                    let _ = std::fs::remove_dir(&options.spool_dir);
                }
                return Err(e.into());
            }
        };
        // Uploads a killed serve left behind would otherwise fill the disk, one per crash.
        match super::spool::sweep_stale(&options.spool_dir) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                "removed {n} upload(s) left in {} by a serve that stopped mid-upload",
                crate::text::visible_path(&options.spool_dir)
            ),
            Err(e) => tracing::warn!(
                "cannot clean the upload spool {}: {e}",
                crate::text::visible_path(&options.spool_dir)
            ),
        }
        let body_budget = options.limits.body_budget(JSON_BODY_LIMIT);
        Ok(ServeState {
            options,
            idle: Mutex::new(vec![store]),
            location,
            ready: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            busy_cutoff: Default::default(),
            failing: Mutex::new(Vec::new()),
            import_lock: Default::default(),
            ledgers: Default::default(),
            body_budget,
        })
    }

    /// Runs `f` with a store connection on the blocking pool.
    pub async fn with_store<T, F>(self: &std::sync::Arc<Self>, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut AnyStore) -> Result<T, ApiError> + Send + 'static,
    {
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = state.take_store()?;
            let out = f(&mut store);
            state.give_back(store);
            out
        })
        .await
        .map_err(|e| ApiError::internal(format!("a store task failed: {e}")))?
    }

    /// Runs `f` with a store connection on this thread (already a blocking one), e.g. to record
    /// metrics; does nothing when no connection can be had (metrics never fail the work).
    pub fn with_backend(&self, f: impl FnOnce(&AnyStore)) {
        match self.take_store() {
            Ok(store) => {
                f(&store);
                self.give_back(store);
            }
            Err(e) => tracing::warn!("no store connection: {}", e.message),
        }
    }

    fn take_store(&self) -> Result<AnyStore, ApiError> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(s) => Ok(s),
            None => AnyStore::open(&self.location).map_err(ApiError::store),
        }
    }

    /// Where the store is (for the notification runner's own connection).
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    fn give_back(&self, store: AnyStore) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < POOL_SIZE {
            idle.push(store);
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Asks the background jobs to stop: a verification in progress ends at its next page, and a
    /// job waiting for a store another process has locked gives up.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.busy_cutoff.give_up_now();
    }

    /// Signs a batch snapshot statement with the configured key (a [`SnapshotSigner`] body).
    ///
    /// [`SnapshotSigner`]: crate::core::store::scheduler::SnapshotSigner
    pub fn sign_snapshot(
        &self,
        payload_type: &str,
        statement: &[u8],
    ) -> Result<serde_json::Value, String> {
        let key = self
            .options
            .snapshot_key
            .as_ref()
            .ok_or("no snapshot signing key is configured")?;
        crate::core::trust::sign_snapshot_statement(key, payload_type, statement)
    }
}
