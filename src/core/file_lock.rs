//! Whole-file advisory locks (`flock` on Unix) for the files that allow one writer at a time: a
//! node's WAL and an outbox's replay lock. The kernel drops a lock when its holder exits, even on
//! SIGKILL.
//!
//! Readers (`wal inspect`, `outbox status`) ask whether a writer is there the only way a whole-file
//! lock can be asked: by taking a shared lock for an instant ([`held_exclusively`]). A writer that
//! meets such an instant must not mistake it for another writer, so [`try_exclusive`] tells the two
//! apart: while a writer holds the lock, a shared lock is refused too; when the shared lock is
//! granted, only readers' looks were in the way, and they are waited out.

use std::fs::{File, TryLockError};
use std::io;
use std::time::{Duration, Instant};

/// How long [`try_exclusive`] waits out readers looking at the lock one after another without a
/// pause before it gives up (one look lasts microseconds).
pub const LOOKS_WAITED: Duration = Duration::from_secs(2);

/// How long [`try_exclusive`] keeps trying a lock held exclusively before it reports it held: a
/// lock this process has just let go can still be held for an instant by a child that another
/// thread forked meanwhile (fork copies every descriptor, and the copy is closed only at exec).
/// Without this grace, one thread's `Command::spawn` made another thread's next replay or WAL
/// open fail as busy, against a lock nobody was using.
pub const RELEASE_WAITED: Duration = Duration::from_millis(50);

/// What [`try_exclusive`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Exclusive {
    /// The lock is held by this file description now.
    Taken,
    /// Another writer holds it (exclusively).
    HeldByAnother,
    /// Only readers' shared looks held it, but they did not stop for [`LOOKS_WAITED`].
    LooksWithoutPause,
}

/// Takes `file`'s exclusive lock without waiting for another writer (beyond [`RELEASE_WAITED`]);
/// readers' instant looks (see the module) are waited out, for at most [`LOOKS_WAITED`].
pub fn try_exclusive(file: &File) -> io::Result<Exclusive> {
    let start = Instant::now();
    let deadline = start + LOOKS_WAITED;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Exclusive::Taken),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(e),
        }
        if held_exclusively(file)? {
            if start.elapsed() >= RELEASE_WAITED {
                return Ok(Exclusive::HeldByAnother);
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if Instant::now() >= deadline {
            return Ok(Exclusive::LooksWithoutPause);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether another file description holds `file`'s lock exclusively (a writer is there). Takes a
/// shared lock for an instant and lets it go at once.
pub fn held_exclusively(file: &File) -> io::Result<bool> {
    match file.try_lock_shared() {
        Ok(()) => {
            file.unlock()?;
            Ok(false)
        }
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_handles() -> (tempfile::TempDir, File, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        (dir, a, b)
    }

    #[test]
    fn a_writer_waits_out_a_readers_look_but_not_another_writer() {
        let (_dir, writer, reader) = two_handles();
        reader.try_lock_shared().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            reader.unlock().unwrap();
            reader
        });
        assert_eq!(try_exclusive(&writer).unwrap(), Exclusive::Taken);
        let reader = release.join().unwrap();
        assert!(held_exclusively(&reader).unwrap());
        assert_eq!(try_exclusive(&reader).unwrap(), Exclusive::HeldByAnother);
        writer.unlock().unwrap();
        assert!(!held_exclusively(&reader).unwrap());
        assert_eq!(try_exclusive(&reader).unwrap(), Exclusive::Taken);
    }

    /// A lock let go within [`RELEASE_WAITED`] (as a forked child's copy is closed at its exec)
    /// is taken, not reported held.
    #[test]
    fn a_lock_let_go_within_the_grace_is_taken() {
        let (_dir, holder, other) = two_handles();
        holder.lock().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(RELEASE_WAITED / 5);
            holder.unlock().unwrap();
            holder
        });
        assert_eq!(try_exclusive(&other).unwrap(), Exclusive::Taken);
        let holder = release.join().unwrap();
        assert_eq!(try_exclusive(&holder).unwrap(), Exclusive::HeldByAnother);
    }
}
