//! The job ledger (SPEC 12, seed AD-38 parts 1, 5, 6, 7): job state as a fold of immutable events
//! read from node WALs, conflict triage that explains every decision, checkpoints, and Merkle
//! anti-entropy between two copies of a ledger.

pub mod antientropy;
pub mod append;
pub mod batch;
pub mod bench;
pub mod checkpoint;
pub mod confirmations;
pub mod contest;
pub mod copies;
pub mod dc_map;
pub mod durability;
pub mod error;
pub mod event;
pub mod fold;
pub mod job_id;
pub mod parallel;
pub mod progress;
pub mod resolve;
pub mod seeded;
pub mod source;
pub mod timeline;

pub use append::{AppendRequest, AppendedEvent, LedgerLog};
pub use contest::{Candidate, Contest, Occurrence};
pub use error::LedgerError;
pub use event::{Event, EventError, EventType, FenceToken};
pub use fold::{Finding, Fold, JobFold, LedgerRecord};
pub use job_id::{JobId, JobIdError};
pub use resolve::{resolve, Decision, EventRef, JobView, Resolution, Rule, Status, Views};

/// The log file of node `node` in a directory of ledgers (`DIR/NODE.alwl`, what `airlock serve`
/// hosts): the node id must be a valid HLC node id and must not start with a dot (`..`, `.x`
/// would name a hidden file, or look like a path step, beside the others).
pub fn node_log_file(dir: &std::path::Path, node: &str) -> Result<std::path::PathBuf, String> {
    crate::core::hlc::validate_node_id(node).map_err(|e| e.to_string())?;
    if node.starts_with('.') {
        return Err(format!(
            "{:?} starts with a dot: a ledger's node id names its file; give a name that starts with a letter, digit, '_' or '-'",
            crate::core::text::visible(node)
        ));
    }
    Ok(dir.join(format!("{node}.{}", crate::core::wal::WAL_EXTENSION)))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod append_tests;

#[cfg(test)]
mod copies_tests;
