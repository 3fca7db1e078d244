//! Errors of the job ledger.

use crate::core::text::ShowPath;
use crate::core::wal::WalError;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{op} {}: {source}", path.shown())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a ledger WAL: {reason} (byte offset 0)", path.shown())]
    NotAWal { path: PathBuf, reason: String },
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(transparent)]
    Event(#[from] super::event::EventError),
    #[error("stale fence token for job {job_id}: the caller holds {given}, the job's is {current}; refetch the job and retry with its current token")]
    StaleFence {
        job_id: String,
        given: u64,
        current: u64,
    },
    #[error("{0}")]
    Usage(String),
    #[error("checkpoint {}: {message}; move it aside to fold the log from its first frame (only if the log was never compacted)", path.shown())]
    Checkpoint { path: PathBuf, message: String },
    #[error("{}: the block index does not describe the log: block {block} (LSNs {from}..={to}) hashes differently from its frames", path.shown())]
    IndexMismatch {
        path: PathBuf,
        block: u64,
        from: u64,
        to: u64,
    },
    #[error("{} and {} both hold the WAL of node {node} but hold different frames at LSN {lsn}: they are not copies of one log (a stale or damaged copy, or two nodes with one id), and folding both would mix two histories; nothing was folded. See every difference with `airlock ledger diff {} {}`, then fold only the copy you trust", a.shown(), b.shown(), a.shown(), b.shown())]
    Divergent {
        node: String,
        a: PathBuf,
        b: PathBuf,
        lsn: u64,
    },
    #[error("{} and {} are checkpoints beside copies of the WAL of node {node}, both holding its events up to LSN {lsn}, but their fold states differ: they are not checkpoints of one log (a stale or damaged checkpoint, or two nodes with one id), and folding one for both would hide the other; nothing was folded. Fold each copy alone to compare, then fold only the copy you trust", a.shown(), b.shown())]
    DivergentCheckpoints {
        node: String,
        a: PathBuf,
        b: PathBuf,
        lsn: u64,
    },
    #[error("a ledger worker thread panicked")]
    WorkerPanicked,
    #[error("{}", foreign_node_text(node, *expected, *found, *offered))]
    ForeignNode {
        /// The node the request names (its ledger is `<node>.alwl`).
        node: String,
        /// That node's hash.
        expected: u64,
        /// The hash of the node the frames (or the log already there) belong to.
        found: u64,
        /// The frames came in the request (else: the log already there is another node's).
        offered: bool,
    },
}

/// The text of [`LedgerError::ForeignNode`].
fn foreign_node_text(node: &str, expected: u64, found: u64, offered: bool) -> String {
    let node = crate::core::text::visible(node);
    if offered {
        format!(
            "the frames offered for the ledger of node {node:?} (node hash {expected:016x}) belong to node hash {found:016x}: a ledger holds one node's log, so nothing was stored; sync each log with its own node's ledger (.../ledger/NODE/sync, NODE the log's own node id)"
        )
    } else {
        format!(
            "the ledger of node {node:?} here holds the log of node hash {found:016x}, not of that node (node hash {expected:016x}); nothing was changed: name the log's own node, or move that ledger file aside"
        )
    }
}

impl LedgerError {
    pub fn io(op: &'static str, path: &Path, source: std::io::Error) -> LedgerError {
        LedgerError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
