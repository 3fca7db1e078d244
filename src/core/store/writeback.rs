//! Early write-out of a store file during one large write transaction.
//!
//! Under a rollback journal, a bulk import's new pages reach the database file long before the
//! commit (the page cache spills them), but the kernel keeps them dirty in memory until the
//! commit's `fsync`, which then writes the whole store at once: on the import benchmark about a
//! second of waiting at the end. [`EarlyWriteback`] asks the kernel to start writing those pages
//! while the transaction is still appending (`sync_file_range(SYNC_FILE_RANGE_WRITE)` from a helper
//! thread), so the commit's `fsync` finds little left to write. Durability and atomicity are
//! unchanged: this only writes what SQLite already put in the file, earlier; the commit still syncs.

use std::path::Path;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::Duration;

/// How often the helper thread starts the write-out of what became dirty.
const PERIOD: Duration = Duration::from_millis(100);

/// Starts writing a file's dirty pages out every [`PERIOD`] until dropped (Linux only; elsewhere,
/// or if the file cannot be opened, it does nothing).
pub struct EarlyWriteback {
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EarlyWriteback {
    /// Starts the write-out of `path` (a store file the caller is writing through SQLite).
    pub fn start(path: &Path) -> Self {
        let idle = EarlyWriteback {
            stop: None,
            thread: None,
        };
        if !cfg!(target_os = "linux") {
            return idle;
        }
        let Ok(file) = std::fs::File::open(path) else {
            return idle;
        };
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("store-writeback".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(PERIOD) {
                    start_writeout(&file);
                }
            });
        match thread {
            Ok(thread) => EarlyWriteback {
                stop: Some(stop),
                thread: Some(thread),
            },
            Err(_) => idle,
        }
    }
}

impl Drop for EarlyWriteback {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts (does not wait for) the write-out of every dirty page of `file`.
#[cfg(target_os = "linux")]
fn start_writeout(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; the call only starts writeback of the file's page cache.
    // A failure only means the commit's fsync writes those pages instead.
    let _ = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

#[cfg(not(target_os = "linux"))]
fn start_writeout(_file: &std::fs::File) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The helper writes nothing itself and stops when dropped; a missing file makes it idle.
    #[test]
    fn starts_and_stops_without_changing_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        let wb = EarlyWriteback::start(&path);
        f.write_all(&[7u8; 1 << 16]).unwrap();
        std::thread::sleep(PERIOD * 2);
        drop(wb);
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 1 << 16]);
        let idle = EarlyWriteback::start(&dir.path().join("missing"));
        assert!(idle.thread.is_none());
    }
}
