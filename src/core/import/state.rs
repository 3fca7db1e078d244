//! Where a bundle stands against a store: imported whole, imported in part (a `--force` import
//! that dropped the entries after a break), or not imported. The store's `imports` rows say it
//! (same tenant, bundle id and manifest digest); the console's Bundles column shows this.

use crate::core::bundle::BundleHeader;
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::StoreError;
use serde::Serialize;

/// A bundle's import state in one store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum ImportState {
    /// Every entry was imported (or was a duplicate).
    Imported { at: String },
    /// Imported with `--force`: `dropped` of `entries` were left out.
    Partly {
        at: String,
        entries: u64,
        dropped: u64,
    },
    /// No import of this bundle (this id and manifest digest) in the store.
    NotImported,
}

impl ImportState {
    /// The contract word: `imported`, `partly` or `not`.
    pub fn word(&self) -> &'static str {
        match self {
            ImportState::Imported { .. } => "imported",
            ImportState::Partly { .. } => "partly",
            ImportState::NotImported => "not",
        }
    }
}

/// The import state of each bundle (by header) in one read transaction; a full import wins over
/// a forced one of the same bundle.
pub fn import_states(
    store: &dyn Backend,
    headers: &[&BundleHeader],
) -> Result<Vec<ImportState>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    headers
        .iter()
        .map(|h| {
            let found = tx.find_import(&h.tenant_id, &h.bundle_id, &h.manifest_digest)?;
            Ok(match found {
                None => ImportState::NotImported,
                Some(r) if r.dropped > 0 => ImportState::Partly {
                    at: r.imported_at,
                    entries: r.entries,
                    dropped: r.dropped,
                },
                Some(r) => ImportState::Imported { at: r.imported_at },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::import::{import, ImportOptions};
    use crate::core::store::Store;
    use std::path::{Path, PathBuf};

    const VECTORS: &str = "../shared/vectors";

    fn header(rel: &str) -> BundleHeader {
        crate::core::bundle::load_bundle(&Path::new(VECTORS).join(rel))
            .unwrap()
            .header
    }

    #[test]
    fn imported_partly_and_not() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
        let inputs: Vec<PathBuf> = vec![Path::new(VECTORS).join("merge/a.json")];
        import(&mut store, &inputs, &ImportOptions::new("relay-01")).unwrap();
        let mut forced = ImportOptions::new("relay-01");
        forced.force = true;
        let broken = vec![Path::new(VECTORS).join("tamper/entries-deleted.json")];
        import(&mut store, &broken, &forced).unwrap();
        let (a, deleted, d) = (
            header("merge/a.json"),
            header("tamper/entries-deleted.json"),
            header("conflict/d.json"),
        );
        let states = import_states(&store, &[&a, &deleted, &d]).unwrap();
        assert!(
            matches!(states[0], ImportState::Imported { .. }),
            "{states:?}"
        );
        assert!(
            matches!(states[1], ImportState::Partly { dropped, .. } if dropped > 0),
            "{states:?}"
        );
        assert_eq!(states[2], ImportState::NotImported);
        let words: Vec<&str> = states.iter().map(|s| s.word()).collect();
        assert_eq!(words, ["imported", "partly", "not"]);
    }
}
