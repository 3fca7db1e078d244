//! Finding bundles in a directory (`airlock jobs list`, the console's Bundles screen).

use super::reader::{read_bundle_file, BundleFileError, NoVisitor, ReadSummary, SchemaProblemKind};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One file of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    /// The file name, escaped ([`file_name`]); `path` is the file itself.
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
    NotBundle {
        reason: String,
        /// Why, as a kind (not part of the JSON listing).
        #[serde(skip)]
        cause: NotBundleCause,
    },
}

/// Why a file is not listed as a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotBundleCause {
    /// It could not be read (permissions, I/O error).
    Unreadable,
    /// Its JSON stops before the end (a half-copied or cut file).
    Truncated,
    /// It was read whole and is something else.
    #[default]
    NotABundle,
}

impl NotBundleCause {
    /// The word a listing shows.
    pub fn label(self) -> &'static str {
        match self {
            NotBundleCause::Unreadable => "unreadable",
            NotBundleCause::Truncated => "truncated",
            NotBundleCause::NotABundle => "not a bundle",
        }
    }
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
    match read_bundle_file(path, &mut NoVisitor) {
        Err(e) => not_bundle(path, &e),
        Ok(s) => listing_of(path, &s),
    }
}

/// The file's name as a listing shows it: a name that is not UTF-8 keeps its bytes as `\xNN` and
/// control characters are escaped ([`crate::core::text::visible_path`], as `jobs import` names its
/// inputs), so two names never look the same and none reaches a terminal raw.
fn file_name(path: &Path) -> String {
    crate::core::text::visible_path(path.file_name().map(Path::new).unwrap_or(path))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The listing of a file that could not be read as a bundle: unreadable, truncated, or not one.
pub fn not_bundle(path: &Path, e: &BundleFileError) -> Listing {
    let cause = match e {
        BundleFileError::Io(_) => NotBundleCause::Unreadable,
        BundleFileError::Syntax(_) if stops_mid_object(path) => NotBundleCause::Truncated,
        BundleFileError::Syntax(_) => NotBundleCause::NotABundle,
    };
    Listing {
        file: file_name(path),
        path: path.to_path_buf(),
        size: file_size(path),
        portable: crate::core::notify::is_portable_file(path),
        kind: ListingKind::NotBundle {
            reason: e.to_string(),
            cause,
        },
    }
}

/// The listing of a file read whole: a bundle, or JSON missing what makes one.
pub fn listing_of(path: &Path, s: &ReadSummary) -> Listing {
    let missing: Vec<&str> = ["$.bundleId", "$.tenantId", "$.jobLogs"]
        .into_iter()
        .filter(|k| {
            s.problems
                .iter()
                .any(|p| p.path == *k && p.kind == SchemaProblemKind::Missing)
        })
        .collect();
    let kind = if missing.is_empty() {
        ListingKind::Bundle {
            bundle_id: s.header.bundle_id.clone(),
            tenant_id: s.header.tenant_id.clone(),
            nodes: s.logs.len(),
            entries: s.entries,
            created_at: s.header.created_at.clone(),
            signed: s.has_signature,
            signed_by: s.header.signed_by.clone(),
        }
    } else {
        ListingKind::NotBundle {
            cause: NotBundleCause::NotABundle,
            reason: format!(
                "JSON, but not a bundle (missing {})",
                missing
                    .iter()
                    .map(|m| m.trim_start_matches("$."))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    Listing {
        file: file_name(path),
        path: path.to_path_buf(),
        size: file_size(path),
        portable: crate::core::notify::is_portable_file(path),
        kind,
    }
}

/// A bundle is one JSON object: a file that starts with `{` but does not end with `}` stops
/// mid-document (half-copied or cut). Reads only its first and last bytes.
pub fn stops_mid_object(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = crate::core::file_input::open_regular(path) else {
        return false;
    };
    let mut head = [0u8; 64];
    let n = f.read(&mut head).unwrap_or(0);
    if head[..n].iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return false;
    }
    let mut tail = [0u8; 64];
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return false;
    };
    if f.seek(SeekFrom::Start(len.saturating_sub(64))).is_err() {
        return false;
    }
    let m = f.read(&mut tail).unwrap_or(0);
    tail[..m].iter().rev().find(|b| !b.is_ascii_whitespace()) != Some(&b'}')
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
