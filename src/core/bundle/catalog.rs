//! Finding bundles in a directory (`airlock jobs list`, the console's Bundles screen).

use super::reader::{read_bundle_file, NoVisitor};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One file of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    pub file: String,
    #[serde(skip)]
    pub path: PathBuf,
    pub size: u64,
    /// A portable export (`export-portable-bundle-v1.tgz`); the summary is of its bundle.json.
    pub portable: bool,
    #[serde(flatten)]
    pub kind: ListingKind,
}

/// What a file turned out to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ListingKind {
    #[serde(rename_all = "camelCase")]
    Bundle {
        bundle_id: String,
        tenant_id: String,
        nodes: usize,
        entries: usize,
        created_at: String,
        signed: bool,
        signed_by: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    NotBundle { reason: String },
}

impl Listing {
    pub fn is_bundle(&self) -> bool {
        matches!(self.kind, ListingKind::Bundle { .. })
    }
}

/// Why a directory could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("cannot list {path}: {source}")]
pub struct ListError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Reads one file's bundle summary (one streaming pass; never fails: problems become `NotBundle`).
pub fn inspect(path: &Path) -> Listing {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let kind = match read_bundle_file(path, &mut NoVisitor) {
        Err(e) => ListingKind::NotBundle {
            reason: e.to_string(),
        },
        Ok(s) => {
            let missing: Vec<&str> = ["$.bundleId", "$.tenantId", "$.jobLogs"]
                .into_iter()
                .filter(|k| {
                    s.problems
                        .iter()
                        .any(|p| p.path == *k && p.message == "missing required field")
                })
                .collect();
            if missing.is_empty() {
                ListingKind::Bundle {
                    bundle_id: s.header.bundle_id,
                    tenant_id: s.header.tenant_id,
                    nodes: s.logs.len(),
                    entries: s.entries,
                    created_at: s.header.created_at,
                    signed: s.has_signature,
                    signed_by: s.header.signed_by,
                }
            } else {
                ListingKind::NotBundle {
                    reason: format!(
                        "JSON, but not a bundle (missing {})",
                        missing
                            .iter()
                            .map(|m| m.trim_start_matches("$."))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
        }
    };
    Listing {
        file,
        path: path.to_path_buf(),
        size,
        portable: crate::core::notify::is_portable_file(path),
        kind,
    }
}

/// The regular, non-hidden files of `dir`, sorted by name.
pub fn files_in(dir: &Path) -> Result<Vec<PathBuf>, ListError> {
    let err = |source| ListError {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type().map(|t| t.is_file()).unwrap_or(false)
            || entry
                .path()
                .metadata()
                .map(|m| m.is_file())
                .unwrap_or(false)
        {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Lists every file of `dir` with its bundle summary.
pub fn scan_dir(dir: &Path) -> Result<Vec<Listing>, ListError> {
    Ok(files_in(dir)?.iter().map(|p| inspect(p)).collect())
}
