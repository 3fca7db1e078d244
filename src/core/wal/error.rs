//! Errors of the WAL. They are `Clone` so one failed write or fdatasync can fail every waiter.

use super::watermarks::WatermarkError;
use crate::core::text::visible_path;
use std::path::{Path, PathBuf};

/// What to do about an I/O error that says the log cannot grow: a full file system or quota, or
/// a file size limit. Frames acknowledged before it stay durable; nothing after it was.
fn io_advice(op: &str, os_code: Option<i32>) -> &'static str {
    if COMPACTION_OPS.contains(&op) {
        return match os_code {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => {
                "; the compacted copy did not fit (a full file system, a quota or a file size                  limit, `ulimit -f`); the log is unchanged and its temporary copy removed: make                  room or raise the limit, then compact again"
            }
            _ => "",
        };
    }
    match os_code {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            "; the file system (or this user's quota) is full: free space there and reopen the \
             log (frames acknowledged before this error are intact; this one was not written)"
        }
        Some(libc::EFBIG) => {
            "; the log reached the largest file this process may write (a file size limit, \
             `ulimit -f`): raise the limit, or compact the log (`airlock wal compact`), and \
             reopen it (frames acknowledged before this error are intact)"
        }
        _ => "",
    }
}

/// The operations of a compaction's copy (`checkpoint::compact_with`): their advice is
/// about the copy, not about appends.
pub(super) const COMPACTION_OPS: [&str; 3] = [
    "create temporary file for",
    "write compacted copy of",
    "replace",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalError {
    #[error("{op} {}: {message}{}", visible_path(path), io_advice(op, *os_code))]
    Io {
        op: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        /// The OS error number (e.g. 27 = EFBIG), when there is one.
        os_code: Option<i32>,
        message: String,
    },
    #[error("{}: refused at byte offset {offset}: {reason}{}; recovery cuts only a torn tail, so the log is not opened. Inspect it with `airlock wal inspect`, then restore it from a replica or backup", visible_path(path), next_valid.map(|n| format!(", yet a CRC-valid frame follows at offset {n}")).unwrap_or_default())]
    Refused {
        path: PathBuf,
        offset: u64,
        reason: String,
        next_valid: Option<u64>,
    },
    #[error("{}: the log belongs to node hash {found:016x}, not to node {node:?} (hash {expected:016x}); open it with its own node id", visible_path(path))]
    WrongNode {
        path: PathBuf,
        node: String,
        expected: u64,
        found: u64,
    },
    #[error("{}", locked_text(path, *readers_only))]
    Locked {
        path: PathBuf,
        /// No writer holds the lock: something else kept a shared lock on the log (a reader's
        /// look lasts an instant) for all of [`crate::core::file_lock::LOOKS_WAITED`].
        readers_only: bool,
    },
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
    #[error("{}: {message}", visible_path(path))]
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

    /// The OS error number behind this error, looking through [`WalError::Poisoned`].
    pub fn os_code(&self) -> Option<i32> {
        match self {
            WalError::Io { os_code, .. } => *os_code,
            WalError::Poisoned(inner) => inner.os_code(),
            _ => None,
        }
    }
}

/// The text of [`WalError::Locked`]: a writer holds the log, or (`readers_only`) no writer does
/// but a shared lock was held on it without a pause, which stopping a writer would not clear.
fn locked_text(path: &Path, readers_only: bool) -> String {
    let path = visible_path(path);
    if readers_only {
        format!(
            "{path}: no process has this log open for writing, but another one has held a shared \
             lock on it for {} s without a pause (a `wal inspect` or console look lasts an \
             instant); find it (`fuser {path}`), stop it, then run the command again",
            crate::core::file_lock::LOOKS_WAITED.as_secs()
        )
    } else {
        format!("{path}: another process has this log open for writing (lock held); stop it first")
    }
}

#[cfg(test)]
mod tests {
    use super::WalError;
    use std::path::Path;

    /// A log that cannot grow says why and what to do; other I/O errors carry no advice; the path
    /// shows its control characters escaped.
    #[test]
    fn an_error_that_stops_the_log_growing_says_what_to_do() {
        let err = |code| {
            WalError::io(
                "write",
                Path::new("g\x1b[2J.alwl"),
                std::io::Error::from_raw_os_error(code),
            )
            .to_string()
        };
        let full = err(libc::ENOSPC);
        assert!(full.contains("is full: free space there"), "{full}");
        assert!(full.contains("g\\x1b[2J.alwl"), "{full}");
        assert!(err(libc::EDQUOT).contains("quota"));
        assert!(err(libc::EFBIG).contains("ulimit -f"));
        let other = err(libc::EIO);
        assert!(other.ends_with("(os error 5)"), "{other}");
        // A compaction's copy that did not fit: never "compact the log", which just failed.
        for op in super::COMPACTION_OPS {
            let e = WalError::io(
                op,
                Path::new("g.alwl"),
                std::io::Error::from_raw_os_error(libc::EFBIG),
            )
            .to_string();
            assert!(
                e.contains("the log is unchanged") && e.contains("compact again"),
                "{e}"
            );
            assert!(!e.contains("airlock wal compact"), "{e}");
        }
    }
}
