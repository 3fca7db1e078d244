//! The ledgers an `airlock serve` hosts: options (`ledger.*`) and the open logs with what each has
//! recorded and not yet confirmed (the state the ledger endpoints share).

use crate::core::ledger::append::LedgerLog;
use crate::core::ledger::durability::{Durability, PendingFrames};
use crate::core::store::postgres::PgStore;
use crate::core::wal::WalMetricsSnapshot;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// How serve hosts ledgers (`ledger.*` of the configuration).
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    pub dir: PathBuf,
    pub durability: Durability,
    /// PostgreSQL URL confirming REGIONAL/GLOBAL.
    pub postgres: Option<String>,
}

/// One open ledger.
pub struct Open {
    pub log: LedgerLog,
    /// Metrics already recorded in the store.
    pub recorded: WalMetricsSnapshot,
    /// Event frames not yet confirmed at the configured level (bounded; the WAL holds the rest).
    pub unconfirmed: PendingFrames,
}

/// The open ledgers and the PostgreSQL connection.
#[derive(Default)]
pub struct Ledgers {
    pub open: HashMap<String, Open>,
    pub pg: Option<PgStore>,
}

/// The shared ledger state of serve.
pub type LedgerHost = Mutex<Ledgers>;

/// Checks `ledger.dir` when serve starts: something there that is not a directory (the ledgers
/// are made in it on first use) fails the start, instead of every append answering 500.
pub fn check_dir(o: &LedgerOptions) -> Result<(), super::ServeError> {
    match std::fs::metadata(&o.dir) {
        Ok(m) if !m.is_dir() => Err(super::ServeError::LedgerDir {
            path: o.dir.clone(),
            message: "it is there but not a directory; serve keeps each node's ledger in it (NODE.alwl): give ledger.dir a directory, or move that file aside".into(),
        }),
        _ => Ok(()),
    }
}
