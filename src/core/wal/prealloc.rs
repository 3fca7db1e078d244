//! Preallocation off the writer's path: a helper thread extends the log with zeroed chunks ahead
//! of the writer (and syncs the new size once per chunk), so the writer's fdatasyncs write frame
//! data only. Zeros are never written where the writer has written or is about to write: the
//! writer announces its end before writing past what is known to be zero-filled, and the helper
//! fills only above it, one piece at a time, while the writer waits only if its write would
//! overlap the piece being filled.
//!
//! A failed preallocation is not an append failure: the helper logs it and stops, and the writer
//! simply appends past the zeros (a write or fdatasync of its own that fails still fails the batch).

use super::file::WalFile;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// Bytes zero-filled per step (the writer waits at most one step when it overtakes the helper).
const PIECE: u64 = 1 << 20;

#[derive(Default)]
struct Zone {
    /// Where the helper should have filled to.
    target: u64,
    /// The writer writes below this offset; the helper never fills below it.
    writer_end: u64,
    /// The range the helper is filling now.
    filling: Option<(u64, u64)>,
    closing: bool,
    stopped: bool,
}

struct Shared {
    zone: Mutex<Zone>,
    changed: Condvar,
    /// Zero-filled and synced up to here: the writer writes below it without asking.
    ready: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Zone> {
        self.zone.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer's handle on its preallocation helper.
pub struct Preallocator {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    chunk: u64,
    requested: u64,
}

impl Preallocator {
    /// Starts the helper for a file that is zero-filled (or written) up to `ready`, extending it
    /// in chunks of `chunk` bytes (0: never).
    pub fn start(file: Arc<dyn WalFile>, ready: u64, chunk: u64) -> std::io::Result<Preallocator> {
        let shared = Arc::new(Shared {
            zone: Mutex::new(Zone {
                target: ready,
                ..Zone::default()
            }),
            changed: Condvar::new(),
            ready: AtomicU64::new(ready),
        });
        let thread = if chunk == 0 {
            None
        } else {
            let s = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name("wal-prealloc".into())
                    .spawn(move || helper(&s, file.as_ref()))?,
            )
        };
        Ok(Preallocator {
            shared,
            thread,
            chunk,
            requested: ready,
        })
    }

    /// Before writing `[start, end)`: waits only if the helper is filling a piece of it, and
    /// keeps the helper above `end`.
    pub fn claim(&self, start: u64, end: u64) {
        if end <= self.shared.ready.load(Ordering::Acquire) || self.thread.is_none() {
            return;
        }
        let mut z = self.shared.lock();
        while matches!(z.filling, Some((fs, fe)) if fs < end && start < fe) {
            z = self
                .shared
                .changed
                .wait(z)
                .unwrap_or_else(PoisonError::into_inner);
        }
        z.writer_end = z.writer_end.max(end);
    }

    /// After a batch ending at `end`: asks for the next chunk once less than half a chunk of
    /// zeros is left ahead.
    pub fn keep_ahead(&mut self, end: u64) {
        if self.thread.is_none() || end + self.chunk / 2 < self.requested {
            return;
        }
        self.requested = (end + self.chunk).next_multiple_of(self.chunk);
        let mut z = self.shared.lock();
        if z.stopped {
            return;
        }
        z.target = z.target.max(self.requested);
        self.shared.changed.notify_all();
    }

    /// Zero-filled and synced up to here.
    pub fn ready(&self) -> u64 {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Waits until the helper has filled everything asked so far (tests).
    #[cfg(test)]
    pub fn settle(&self) {
        let mut z = self.shared.lock();
        while !z.stopped && self.shared.ready.load(Ordering::Acquire) < z.target {
            z = self
                .shared
                .changed
                .wait(z)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn helper(shared: &Shared, file: &dyn WalFile) {
    if let Err(e) = fill_loop(shared, file) {
        tracing::warn!(error = %e, "WAL preallocation stopped; the writer appends past the zeros");
    }
    shared.lock().stopped = true;
    shared.changed.notify_all();
}

fn fill_loop(shared: &Shared, file: &dyn WalFile) -> std::io::Result<()> {
    let mut at = shared.ready.load(Ordering::Acquire);
    loop {
        let goal = {
            let mut z = shared.lock();
            while !z.closing && z.target <= at {
                z = shared
                    .changed
                    .wait(z)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if z.closing {
                return Ok(());
            }
            z.target
        };
        while at < goal {
            let piece_end = goal.min(at + PIECE);
            let start = {
                let mut z = shared.lock();
                if z.closing {
                    return Ok(());
                }
                let start = at.max(z.writer_end);
                if start < piece_end {
                    z.filling = Some((start, piece_end));
                }
                start
            };
            if start < piece_end {
                let done = file.zero_fill(start, piece_end - start);
                shared.lock().filling = None;
                shared.changed.notify_all();
                done?;
            }
            at = piece_end;
        }
        file.sync_data()?;
        {
            let _z = shared.lock();
            shared.ready.store(goal, Ordering::Release);
        }
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn the_helper_fills_ahead_and_never_over_what_the_writer_claimed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.alwl");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        let file: Arc<dyn WalFile> = Arc::new(file);
        let chunk = 256 << 10;
        let mut p = Preallocator::start(file.clone(), 0, chunk).expect("start");
        let mut end = 0u64;
        let data = vec![0xABu8; 3000];
        for _ in 0..300 {
            p.claim(end, end + data.len() as u64);
            file.write_all_at(&data, end).expect("write");
            end += data.len() as u64;
            p.keep_ahead(end);
        }
        p.settle();
        assert!(
            p.ready() >= end + chunk / 2,
            "ready {} end {end}",
            p.ready()
        );
        drop(p);
        let f = std::fs::File::open(&path).expect("open");
        let mut back = vec![0u8; end as usize];
        f.read_exact_at(&mut back, 0).expect("read");
        assert!(
            back.iter().all(|&b| b == 0xAB),
            "no zeros over written frames"
        );
        let len = f.metadata().expect("meta").len();
        let mut tail = vec![0u8; (len - end) as usize];
        f.read_exact_at(&mut tail, end).expect("read");
        assert!(tail.iter().all(|&b| b == 0), "zeros after the frames");
    }
}
