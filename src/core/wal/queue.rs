//! What appenders, the writer thread and the syncer share: the queue of entries waiting for a
//! batch, the written batch waiting for its fdatasync, the durable LSN and the failure that
//! poisons the log (the writer module describes the group-commit pipeline).

use super::error::WalError;
use super::event::EventBody;
use super::frame::{WalHlc, Watermark};
use super::metrics::WalMetrics;
use super::watermarks::Watermarks;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use tokio::sync::oneshot;

/// A written batch waiting for its fdatasync.
pub struct Written {
    pub acks: Vec<(Ack, Appended)>,
    pub bytes: u64,
}

/// An acknowledged frame: durable on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub lsn: u64,
    pub hlc: WalHlc,
}

pub(super) type Ack = oneshot::Sender<Result<Appended, WalError>>;

pub(super) enum Body {
    Event(EventBody),
    Mark(Watermark),
}

pub(super) struct Pending {
    pub(super) lsn: u64,
    pub(super) size: usize,
    pub(super) body: Body,
    pub(super) done: Ack,
}

pub(super) struct Inbox {
    pub(super) queue: Vec<Pending>,
    pub(super) queued_bytes: usize,
    pub(super) next_lsn: u64,
    pub(super) marks: Watermarks,
    pub(super) failed: Option<WalError>,
    pub(super) closing: bool,
    pub(super) writer_idle: bool,
    pub(super) wake_at: usize,
    /// When the first entry of `queue` was queued (the 500 µs of a batch run from it).
    pub(super) first_at: Instant,
    /// A written batch waiting for its fdatasync (at most one).
    pub(super) written: Option<Written>,
    /// Entries of the batch inside the syncer's fdatasync (0 once they are released).
    pub(super) syncing: usize,
    /// Durable batches whose appenders the syncer left to the writer thread to wake (it went on
    /// to the next fdatasync).
    pub(super) to_release: Vec<Vec<(Ack, Appended)>>,
    /// The writer waits for `written` to be taken.
    pub(super) writer_waits_slot: bool,
    pub(super) syncer_parked: bool,
    /// The writer stopped: the syncer ends once `written` is empty.
    pub(super) sync_stop: bool,
}

impl Inbox {
    /// Entries written and not yet released: the batch in the written slot and the one inside
    /// its fdatasync.
    pub(super) fn in_flight(&self) -> usize {
        self.syncing + self.written.as_ref().map_or(0, |w| w.acks.len())
    }

    /// How many entries the batch being filled should wait for, given `population`, the number
    /// of appenders that were active when the previous batch closed: those not in flight now;
    /// when every one is in flight, the appenders of the oldest batch in flight (they come back
    /// first, after its fdatasync). At least 1.
    pub(super) fn expected_back(&self, population: usize) -> usize {
        let free = population.saturating_sub(self.in_flight());
        let want = if free > 0 {
            free
        } else if self.syncing > 0 {
            self.syncing
        } else {
            self.in_flight()
        };
        want.max(1)
    }
}

pub(super) struct Shared {
    pub(super) inbox: Mutex<Inbox>,
    /// The writer thread waits here (for entries, or for the written slot to empty).
    pub(super) wake: Condvar,
    /// The syncer waits here for a written batch.
    pub(super) sync_wake: Condvar,
    /// `queue.len()` and `written.is_some()`, readable without the lock (for yielding waits).
    pub(super) queued: AtomicUsize,
    pub(super) slot_full: AtomicBool,
    /// `failed.is_some()`, readable without the lock: the writer never writes once it is set.
    pub(super) has_failed: AtomicBool,
    pub(super) durable: AtomicU64,
    pub(super) metrics: WalMetrics,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the appenders of durable frames with their LSN and HLC.
    pub(super) fn release_acks(&self, acks: Vec<(Ack, Appended)>) {
        let t = Instant::now();
        for (ack, done) in acks {
            let _ = ack.send(Ok(done));
        }
        self.metrics
            .phases
            .release
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// Releases (on the calling thread, without the lock) what the syncer left to release, and
    /// returns the lock again.
    pub(super) fn release_left<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inbox>,
    ) -> MutexGuard<'a, Inbox> {
        while !g.to_release.is_empty() {
            let left = std::mem::take(&mut g.to_release);
            drop(g);
            for acks in left {
                self.release_acks(acks);
            }
            g = self.lock();
        }
        g
    }

    /// Fails `in_hand`, everything queued and the written batch, and (via `failed`) every later
    /// append.
    /// The first failure is the one every waiter gets.
    pub(super) fn fail(&self, err: WalError, in_hand: Vec<Ack>) {
        let (err, queued, written, durable) = {
            let mut g = self.lock();
            if g.failed.is_none() {
                tracing::error!(error = %err, "WAL writer failed; appends refused until the log is reopened");
                self.metrics.failures.fetch_add(1, Ordering::Relaxed);
            }
            let err = g.failed.get_or_insert(err).clone();
            self.has_failed.store(true, Ordering::Release);
            g.queued_bytes = 0;
            self.queued.store(0, Ordering::Release);
            self.slot_full.store(false, Ordering::Release);
            let left = std::mem::take(&mut g.to_release);
            (err, std::mem::take(&mut g.queue), g.written.take(), left)
        };
        // Durable before the failure: acknowledged as such.
        for acks in durable {
            self.release_acks(acks);
        }
        self.wake.notify_one();
        self.sync_wake.notify_one();
        let written = written
            .into_iter()
            .flat_map(|w| w.acks.into_iter().map(|a| a.0));
        for ack in in_hand
            .into_iter()
            .chain(queued.into_iter().map(|p| p.done))
            .chain(written)
        {
            let _ = ack.send(Err(err.clone()));
        }
    }
}

/// Held by the writer and the syncer thread for their whole run: if one unwinds (a bug), the log
/// fails with an error naming that thread, so no appender and no other thread waits for it.
pub(super) struct FailOnUnwind<'a> {
    pub shared: &'a Shared,
    /// What the thread was doing, for the error: "write" or "fdatasync".
    pub op: &'static str,
    pub path: &'a std::path::Path,
}

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let e = std::io::Error::other("the thread doing it panicked");
            self.shared
                .fail(WalError::io(self.op, self.path, e), Vec::new());
        }
    }
}
