//! The syncer: the second half of the group-commit pipeline. The writer thread encodes a
//! batch and writes it with one write, then hands it here; this thread makes it durable with one
//! fdatasync, publishes the durable LSN and releases exactly that batch's appenders. While it
//! waits on the disk the writer already drains, encodes and writes the next batch (at most one
//! written batch waits for its fdatasync; the writer waits for that slot), so the appenders' CPU
//! work overlaps the disk. An fdatasync always starts after its batch's write completed, so when
//! it returns that batch and every earlier one are on disk.

use super::error::WalError;
use super::file::WalFile;
use super::queue::{FailOnUnwind, Inbox, Shared, Written};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a thread that expects a few appenders back within microseconds yields the CPU in a
/// loop before it parks on its condition variable: the default of `WalOptions::spin`. Only while
/// at most [`SPIN_GROUP`] appenders are expected: then the cores have time to spare, and on this
/// VM a futex wake-up of a parked thread costs about as much as the fdatasync it waits for
/// (docs/benchmarks/wal.md). With many appenders the yielding threads took the CPU the appenders
/// needed and every figure got worse, so there they park at once.
pub const SPIN: Duration = Duration::from_micros(200);

/// The most appenders expected back for which the writer and the syncer yield before parking.
pub const SPIN_GROUP: usize = 16;

/// Yields until `ready()` or `limit` has passed; true if ready.
pub fn spin_until(limit: Duration, ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::yield_now();
    }
}

pub struct Syncer {
    pub shared: Arc<Shared>,
    pub file: Arc<dyn WalFile>,
    pub path: PathBuf,
    pub spin: Duration,
}

impl Syncer {
    pub fn run(self) {
        let _unwind = FailOnUnwind {
            shared: &self.shared,
            op: "fdatasync",
            path: &self.path,
        };
        let mut released = false;
        while let Some(w) = self.next_written(released) {
            match fdatasync(&self.shared, &*self.file, &self.path, w.acks.len() as u64) {
                Ok(()) => {
                    released = w.acks.len() <= SPIN_GROUP;
                    make_durable(&self.shared, w);
                }
                Err(e) => {
                    self.shared
                        .fail(e, w.acks.into_iter().map(|(ack, _)| ack).collect());
                    return;
                }
            }
        }
    }

    /// Waits for the next written batch (yielding first when a few appenders were just released
    /// and the writer is expected to fill the slot soon); `None` once the writer stopped or failed.
    fn next_written(&self, just_released: bool) -> Option<Written> {
        let s = &self.shared;
        let mut yield_first = just_released;
        let mut g = s.lock();
        loop {
            if let Some(w) = g.written.take() {
                g.syncing = w.acks.len();
                s.slot_full.store(false, Ordering::Release);
                if g.writer_waits_slot {
                    s.wake.notify_one();
                }
                return Some(w);
            }
            if g.sync_stop || g.failed.is_some() {
                return None;
            }
            if !yield_first || self.spin.is_zero() {
                g = park(s, g);
                continue;
            }
            yield_first = false;
            drop(g);
            spin_until(self.spin, || s.slot_full.load(Ordering::Acquire));
            g = s.lock();
            if g.written.is_none() && !g.sync_stop && g.failed.is_none() {
                g = park(s, g);
            }
        }
    }
}

/// One fdatasync for a batch of `frames` frames.
pub(super) fn fdatasync(
    shared: &Shared,
    file: &dyn WalFile,
    path: &Path,
    frames: u64,
) -> Result<(), WalError> {
    let t = Instant::now();
    file.sync_data()
        .map_err(|e| WalError::io("fdatasync", path, e))?;
    let micros = t.elapsed().as_micros() as u64;
    let m = &shared.metrics;
    m.fdatasyncs.fetch_add(1, Ordering::Relaxed);
    m.fdatasync_micros.record(micros);
    m.fdatasync_per_frame_micros.record_n(micros, frames);
    Ok(())
}

/// Publishes the durable LSN, counts the batch and wakes exactly its appenders. When the
/// next written batch is already waiting, the waking is handed to the writer thread (which
/// is waiting for these very appenders) so this thread starts that batch's fdatasync at once
/// instead of after up to a thousand wake-ups.
pub(super) fn make_durable(shared: &Shared, w: Written) {
    let m = &shared.metrics;
    if let Some((_, last)) = w.acks.last() {
        shared.durable.store(last.lsn, Ordering::Release);
    }
    m.appends.fetch_add(w.acks.len() as u64, Ordering::Relaxed);
    m.batches.fetch_add(1, Ordering::Relaxed);
    m.bytes.fetch_add(w.bytes, Ordering::Relaxed);
    m.batch_size.record(w.acks.len() as u64);
    let mut g = shared.lock();
    // Out of flight before the first appender is woken: the writer counts on them coming
    // back (`Inbox::expected_back`).
    g.syncing = 0;
    if g.written.is_some() && !g.sync_stop && g.failed.is_none() {
        g.to_release.push(w.acks);
        drop(g);
        shared.wake.notify_one();
        return;
    }
    drop(g);
    shared.release_acks(w.acks);
}

fn park<'a>(s: &'a Shared, mut g: MutexGuard<'a, Inbox>) -> MutexGuard<'a, Inbox> {
    g.syncer_parked = true;
    g = s.sync_wake.wait(g).unwrap_or_else(PoisonError::into_inner);
    g.syncer_parked = false;
    g
}
