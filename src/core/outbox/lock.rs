//! One replay (or operator transition) at a time per outbox: an exclusive OS file lock on
//! `<outbox>.replay-lock`. The kernel drops the lock when its holder exits, even on SIGKILL, so a
//! crashed replay never leaves the outbox locked.
//!
//! `outbox status` looks at the lock with a shared lock for an instant
//! ([`super::Outbox::replay_lock_state`]); a replay meeting that instant waits it out
//! ([`crate::core::file_lock`]): a status never makes a replay refused.

use super::OutboxError;
use crate::core::file_lock::{self, Exclusive};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A held replay lock; released on drop.
#[derive(Debug)]
pub struct ReplayLock {
    _file: File,
    path: PathBuf,
}

/// The lock file for the outbox at `outbox`.
pub fn lock_path(outbox: &Path) -> PathBuf {
    let mut name = outbox.as_os_str().to_owned();
    name.push(".replay-lock");
    PathBuf::from(name)
}

impl ReplayLock {
    /// Takes the lock without waiting; `ReplayBusy` (naming the holder) when another replay, retry
    /// or cancel holds it.
    pub fn acquire(outbox: &Path) -> Result<ReplayLock, OutboxError> {
        let path = lock_path(outbox);
        let io = |source| OutboxError::Io {
            path: path.clone(),
            source,
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        // The lock file is truncated and written once held: never through a symbolic link (one
        // planted beside an outbox in a shared directory would aim that at another file).
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = opts.open(&path).map_err(io)?;
        if !file.metadata().map_err(io)?.is_file() {
            return Err(io(std::io::Error::other(
                "the replay lock is not a regular file; remove it and run the command again",
            )));
        }
        match file_lock::try_exclusive(&file).map_err(io)? {
            Exclusive::Taken => {}
            Exclusive::HeldByAnother => {
                return Err(OutboxError::ReplayBusy {
                    holder: read_holder(&mut file),
                    readers_only: false,
                });
            }
            Exclusive::LooksWithoutPause => {
                return Err(OutboxError::ReplayBusy {
                    holder: crate::core::text::visible_path(&path),
                    readers_only: true,
                });
            }
        }
        let info = format!(
            "pid {} since {}",
            std::process::id(),
            crate::core::time::now_rfc3339()
        );
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(info.as_bytes()).map_err(io)?;
        Ok(ReplayLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Who holds a lock file, as its holder wrote it (`pid N since TIME`): at most 4 KiB read and 200
/// characters kept, "holder unknown" when empty.
pub(super) fn read_holder(file: &mut std::fs::File) -> String {
    let mut holder = String::new();
    let _ = file.take(4096).read_to_string(&mut holder);
    let holder: String = holder.trim().chars().take(200).collect();
    if holder.is_empty() {
        "holder unknown".into()
    } else {
        holder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = dir.path().join("o.sqlite3");
        let a = ReplayLock::acquire(&outbox).unwrap();
        let err = ReplayLock::acquire(&outbox).unwrap_err();
        assert!(matches!(err, OutboxError::ReplayBusy { .. }), "{err}");
        assert!(err
            .to_string()
            .contains(&format!("pid {}", std::process::id())));
        drop(a);
        ReplayLock::acquire(&outbox).unwrap();
    }

    /// A shared lock kept on the lock file for longer than a status's look is refused after 2 s,
    /// but not as "another replay is running" (none is) nor blamed on `outbox status`.
    #[test]
    fn a_shared_lock_held_without_a_pause_is_not_reported_as_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = dir.path().join("o.sqlite3");
        drop(ReplayLock::acquire(&outbox).unwrap());
        let reader = std::fs::File::open(lock_path(&outbox)).unwrap();
        reader.try_lock_shared().unwrap();
        let err = ReplayLock::acquire(&outbox).unwrap_err();
        assert!(err.is_busy(), "{err}");
        let text = err.to_string();
        assert!(
            !text.contains("another replay, retry or cancel is running"),
            "{text}"
        );
        assert!(!text.contains("outbox status` looked"), "{text}");
        assert!(text.contains("shared lock"), "{text}");
        drop(reader);
        ReplayLock::acquire(&outbox).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_in_place_of_the_lock_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = dir.path().join("o.sqlite3");
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, lock_path(&outbox)).unwrap();
        let err = ReplayLock::acquire(&outbox).unwrap_err();
        assert!(matches!(err, OutboxError::Io { .. }), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }
}
