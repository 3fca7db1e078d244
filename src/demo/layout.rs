//! Where things live in a workspace folder: the names `airlock demo` gives its files, which
//! `airlock console --workspace` opens again.

use std::path::{Path, PathBuf};

/// The files of a workspace folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceLayout {
    pub bundles: PathBuf,
    pub db: PathBuf,
    pub outbox: PathBuf,
    pub trust_store: PathBuf,
    pub keys: PathBuf,
}

impl WorkspaceLayout {
    pub fn under(root: &Path) -> WorkspaceLayout {
        WorkspaceLayout {
            bundles: root.join("bundles"),
            db: root.join("airlock.db"),
            outbox: root.join("edge-outbox.sqlite3"),
            trust_store: root.join("trust.json"),
            keys: root.join("keys"),
        }
    }
}
