//! How the console was started (the CLI fills it in).

use std::path::PathBuf;

/// How the console was started.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    pub dir: PathBuf,
    pub db: Option<PathBuf>,
    pub outbox: Option<PathBuf>,
    pub read_only: bool,
    /// Why the console is read-only though `--read-only` was not given (the store cannot be
    /// written by this user), said when it starts.
    pub read_only_because: Option<String>,
    pub mouse: bool,
    /// Where local signing keys live (`keys generate` writes there).
    pub keys_dir: PathBuf,
    /// The trust store file.
    pub trust_store: PathBuf,
    /// Where outbox replays are sent.
    pub upstream: String,
    /// A WAL to open on the WAL screen (`console --wal FILE`).
    pub wal: Option<PathBuf>,
    /// The configured clock-skew tolerance (`scheduler.hlc.maxClockSkew`) of the console's
    /// verifications and imports.
    pub max_clock_skew: std::time::Duration,
}

impl ConsoleConfig {
    /// The `--db` value for messages (a URL without its password), empty without a store.
    pub fn db_display(&self) -> String {
        self.db
            .as_deref()
            .map(crate::core::store::any::display_db)
            .unwrap_or_default()
    }

    /// The console over a demo workspace (its bundles, store, outbox, keys and trust store),
    /// writable, replaying to `upstream`.
    pub fn for_demo(ws: &crate::demo::DemoWorkspace, upstream: String) -> ConsoleConfig {
        ConsoleConfig {
            dir: ws.bundles.clone(),
            db: Some(ws.db.clone()),
            outbox: Some(ws.outbox.clone()),
            read_only: false,
            read_only_because: None,
            mouse: false,
            keys_dir: ws.keys.clone(),
            trust_store: ws.trust_store.clone(),
            upstream,
            wal: None,
            max_clock_skew: crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW,
        }
    }
}
