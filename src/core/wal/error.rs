//! Errors of the WAL. They are `Clone` so one failed write or fdatasync can fail every waiter.

use super::recovery::Recovery;
use super::watermarks::WatermarkError;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalError {
    #[error("{op} {}: {message}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        /// The OS error number (e.g. 27 = EFBIG), when there is one.
        os_code: Option<i32>,
        message: String,
    },
    #[error("{}: refused at byte offset {offset}: {reason}{}; recovery cuts only a torn tail, so the log is not opened. Inspect it with `airlock wal inspect`, then restore it from a replica or backup", path.display(), next_valid.map(|n| format!(", yet a CRC-valid frame follows at offset {n}")).unwrap_or_default())]
    Refused {
        path: PathBuf,
        offset: u64,
        reason: String,
        next_valid: Option<u64>,
    },
    #[error("{}: the log belongs to node hash {found:016x}, not to node {node:?} (hash {expected:016x}); open it with its own node id", path.display())]
    WrongNode {
        path: PathBuf,
        node: String,
        expected: u64,
        found: u64,
    },
    #[error("{}: another process has this log open for writing (lock held); stop it first", path.display())]
    Locked { path: PathBuf },
    #[error("the log failed earlier and takes no more appends until it is reopened (which recovers it): {0}")]
    Poisoned(Box<WalError>),
    #[error("the log writer has stopped (the log was closed)")]
    Closed,
    #[error(transparent)]
    Watermark(#[from] WatermarkError),
    #[error("event payload: {0}")]
    Payload(String),
    #[error(transparent)]
    Hlc(#[from] super::frame::HlcRangeError),
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

impl WalError {
    pub fn io(op: &'static str, path: &Path, e: std::io::Error) -> WalError {
        WalError::Io {
            op,
            path: path.to_path_buf(),
            kind: e.kind(),
            os_code: e.raw_os_error(),
            message: e.to_string(),
        }
    }

    pub fn refused(path: &Path, r: &Recovery) -> WalError {
        WalError::Refused {
            path: path.to_path_buf(),
            offset: r.offset.unwrap_or(r.end),
            reason: r
                .damage
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_else(|| "damaged frame".into()),
            next_valid: r.next_valid_frame,
        }
    }

    /// The OS error number behind this error, looking through [`WalError::Poisoned`].
    pub fn os_code(&self) -> Option<i32> {
        match self {
            WalError::Io { os_code, .. } => *os_code,
            WalError::Poisoned(inner) => inner.os_code(),
            _ => None,
        }
    }
}
