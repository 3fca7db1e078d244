//! The store as the console opens it (read-only with `--read-only`).

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
    pub fn open(&self) -> Result<crate::core::store::Store, String> {
        let opened = if self.read_only {
            crate::core::store::Store::open_read_only(&self.path)
        } else {
            crate::core::store::Store::open(&self.path)
        };
        opened.map_err(|e| e.to_string())
    }

    /// Opens the store to change it; refused with `--read-only`.
    pub fn open_for_writing(&self) -> Result<crate::core::store::Store, String> {
        if self.read_only {
            return Err("read-only: the console does not write to the store".into());
        }
        self.open()
    }
}
