//! The drop-directory inbox (`airlock console --inbox DIR`, `airlock inbox scan DIR`): files
//! dropped into a folder are verified once they stop growing, and the operator's decision files
//! each one away beside its triage report.
//!
//! The rules live here, the console and the CLI only present them:
//! * [`settle`]: which files of the folder are candidates (regular files, not hidden, not in a
//!   subfolder) and when one has stopped growing: its size and modification time unchanged for
//!   a settle interval ([`SettleTracker`]). A file still being copied is [`FileState::Copying`]
//!   and is not verified yet. A symbolic link, FIFO, socket or device is never a candidate: it is
//!   never opened nor followed, only reported ([`odd_entries`]: what it is and why) and left
//!   where it is for the operator to remove.
//! * [`file_away`]: a decision ([`Disposition`]: import, reject, quarantine) moves the file to
//!   `DIR/done/`, `DIR/rejected/` or `DIR/quarantine/` with its triage report beside it as
//!   `NAME.triage.json` (DSSE envelope, signed with the local key when there is one) and
//!   `NAME.triage.md`. Every step is a rename within the inbox's filesystem that never replaces
//!   an existing file: a name already taken gets a suffix (`NAME-1.ext`, `NAME-2.ext`, ...), the
//!   report is complete before it gets its name, and a crash leaves the file either still in the
//!   inbox or filed, never lost or half-written.

pub mod file_away;
pub mod settle;

pub use file_away::{file_away, filed_counts, is_report_name, report_names, Filed};
pub use settle::{
    odd_entries, picture, scan, scan_twice, stamp_of, FileStamp, FileState, InboxFile, OddEntry,
    OddKind, Picture, SettleTracker,
};

use crate::core::text::visible_path as shown;
use crate::core::triage::{Decision, TriageError, TriageReport};
use crate::core::verify::Report;
use std::path::Path;

/// The default settle interval: a file unchanged this long is taken as completely copied.
pub const DEFAULT_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// What the operator decided for one file, and the folder it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Disposition {
    /// Imported into the store: `done/`.
    Import,
    /// Refused: `rejected/`.
    Reject,
    /// Kept aside for a closer look: `quarantine/`.
    Quarantine,
}

impl Disposition {
    pub const ALL: [Disposition; 3] = [
        Disposition::Import,
        Disposition::Reject,
        Disposition::Quarantine,
    ];

    /// The subfolder of the inbox the file is moved to.
    pub fn folder(self) -> &'static str {
        match self {
            Disposition::Import => "done",
            Disposition::Reject => "rejected",
            Disposition::Quarantine => "quarantine",
        }
    }

    /// The decision word written in the triage report.
    pub fn word(self) -> &'static str {
        match self {
            Disposition::Import => "import",
            Disposition::Reject => "reject",
            Disposition::Quarantine => "quarantine",
        }
    }
}

/// What the verification of an inbox file found: the report for a bundle, else why it is not one.
#[derive(Debug, Clone, Copy)]
pub enum Evidence<'a> {
    Verified(&'a Report),
    /// Not a bundle, truncated or unreadable: the reason.
    NotBundle(&'a str),
}

/// The triage report filed beside `file`: the same report `E` writes on the Chain screen (the
/// bundle's verdict and findings) with the decision; for a file that is not a bundle, the reason.
pub fn triage_report(
    file: &Path,
    evidence: Evidence<'_>,
    disposition: Disposition,
    note: &str,
) -> TriageReport {
    let decision = Decision {
        action: disposition.word().to_string(),
        note: note.to_string(),
    };
    // The input as recorded: a name that is not UTF-8 keeps its bytes as \xNN, not U+FFFD.
    let shown = shown(file);
    match evidence {
        Evidence::Verified(report) => TriageReport::for_bundle(&shown, report, decision),
        Evidence::NotBundle(reason) => TriageReport::for_unreadable(&shown, reason, decision),
    }
}

/// Errors of an inbox operation; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a file directly in the inbox {inbox}")]
    NotInInbox { path: String, inbox: String },
    #[error("{path} is not a regular file (a symbolic link, FIFO, socket or device): it is never moved or filed; remove it from the inbox")]
    NotRegular { path: String },
    #[error("{path} changed since it was verified (size or modification time differs); wait until it is verified again, then decide")]
    Changed { path: String },
    #[error("{path} exists and is not a folder: move it away so the inbox can file into it")]
    NotAFolder { path: String },
    #[error("{path}: {tries} names tried in {folder}/, all taken; clear the folder")]
    NoFreeName {
        path: String,
        folder: &'static str,
        tries: u32,
    },
    #[error("{path}: {folder}/ is on another filesystem than the inbox; a file is only moved by a rename within one filesystem (make {folder}/ a plain folder of the inbox)")]
    CrossDevice { path: String, folder: &'static str },
    #[error(transparent)]
    Report(#[from] TriageError),
}
