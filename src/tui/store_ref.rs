//! The store as the console opens it (read-only with `--read-only`).

use crate::core::store::any::{display_db, AnyStore, StoreLocation};
use std::path::PathBuf;

/// The store as the console may use it: read-only with `--read-only` (never created, never
/// written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRef {
    pub path: PathBuf,
    pub read_only: bool,
}

impl StoreRef {
    /// Opens the store (read-only when so configured); the error names the file.
    /// A PostgreSQL URL opens that database (the console then only writes through
    /// [`StoreRef::open_for_writing`]); the audit log and the notification queue live in it too.
    pub fn open(&self) -> Result<AnyStore, String> {
        let shown = || crate::text::visible(&display_db(&self.path)).into_owned();
        let at = StoreLocation::parse(&self.path).map_err(|e| e.to_string())?;
        let opened = match (&at, self.read_only) {
            (StoreLocation::Sqlite(p), true) => {
                crate::core::store::Store::open_read_only(p).map(AnyStore::Sqlite)
            }
            _ => AnyStore::open(&at),
        };
        opened.map_err(|e| format!("{}: {e}", shown()))
    }

    /// Opens the store to change it; refused with `--read-only`.
    pub fn open_for_writing(&self) -> Result<AnyStore, String> {
        if self.read_only {
            return Err("read-only: the console does not write to the store".into());
        }
        self.open()
    }
}
