//! The writer: appenders (sync or async, many at once) queue entries and wait for their frame to
//! be durable. Group commit per SPEC 11, as a two-stage pipeline: the writer thread (the only one
//! that writes frames) takes the first queued entry, drains what is queued up to 1000 entries /
//! 1 MiB or until 500 µs have passed since the first, encodes the batch and writes it with one
//! write; the syncer thread ([`super::syncer`]) then makes it durable with one fdatasync, publishes
//! the durable LSN and releases exactly the appenders of that batch. While one batch waits on the
//! disk the writer prepares the next (at most one written batch waits for its fdatasync); with
//! nothing to overlap (the syncer idle, the queue empty) the writer syncs the batch itself. While
//! the queue is short of the appenders it expects back ([`super::queue::Inbox::expected_back`])
//! inside the 500 µs the writer parks until that many entries are queued (while at most
//! [`SPIN_GROUP`] are expected, after yielding for `WalOptions::spin`, default 200 µs), so a few
//! appenders are neither held back by the timer nor by a futex wake-up per entry (docs/wal.md,
//! "Writing: group commit"). A failed write or
//! fdatasync fails the batch, everything queued or written and every later append with that error
//! until the log is reopened (which recovers it).

use super::error::WalError;
use super::event::EventBody;
use super::file::{lock_exclusive, WalFile};
use super::frame::{
    encode_frame_into, file_header, node_hash, FrameState, FrameType, WalHlc, Watermark,
    FRAME_HEADER_LEN,
};
use super::metrics::{WalMetrics, WalMetricsSnapshot};
use super::prealloc::Preallocator;
pub use super::queue::Appended;
use super::queue::{Ack, Body, FailOnUnwind, Inbox, Pending, Shared, Written};
use super::recovery::{recover_with, Outcome, Recovery};
use super::stamp::FrameStamp;
use super::syncer::{fdatasync, make_durable, spin_until, Syncer, SPIN, SPIN_GROUP};
use super::watermarks::Watermarks;
use crate::core::hlc::{validate_node_id, SystemWallClock, WallClock};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Group-commit limits, preallocation and the clock.
#[derive(Clone)]
pub struct WalOptions {
    pub max_batch_entries: usize,
    pub max_batch_bytes: usize,
    pub max_batch_wait: Duration,
    /// The file is extended in zeroed chunks of this many bytes (0: no preallocation).
    pub prealloc_chunk: u64,
    /// How long the writer (waiting for the few appenders it expects back) and the syncer
    /// (waiting for the next written batch after releasing a few) yield the CPU before parking
    /// (0: park at once). Only while at most [`SPIN_GROUP`] appenders are expected back.
    pub spin: Duration,
    /// Wall clock of the HLC (tests substitute a scripted one).
    pub wall: Arc<dyn WallClock>,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            max_batch_entries: 1000,
            max_batch_bytes: 1 << 20,
            max_batch_wait: Duration::from_micros(500),
            prealloc_chunk: 16 << 20,
            spin: SPIN,
            wall: Arc::new(SystemWallClock),
        }
    }
}

/// An open log: appends go through its writer thread. Dropping it closes the log.
pub struct WalWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
    node: String,
    recovery: Recovery,
}

impl WalWriter {
    /// Opens (creating if missing) and recovers the log of `node` at `path`, then starts its writer.
    pub fn open(path: &Path, node: &str, opts: WalOptions) -> Result<WalWriter, WalError> {
        WalWriter::open_with(path, node, opts, |f| Box::new(f))
    }

    /// [`WalWriter::open`] with the file wrapped by `wrap` (fault injection in tests and drills).
    pub fn open_with(
        path: &Path,
        node: &str,
        opts: WalOptions,
        wrap: impl FnOnce(File) -> Box<dyn WalFile>,
    ) -> Result<WalWriter, WalError> {
        validate_node_id(node).map_err(|e| WalError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if !path.exists() {
            crate::core::file_output::write_atomic(path, &file_header())
                .map_err(|e| WalError::io("create", path, e.source))?;
        }
        // A FIFO or device here is refused at once (a plain open would wait for a peer forever).
        let file = crate::core::file_input::open_regular_with(
            path,
            OpenOptions::new().read(true).write(true),
        )
        .map_err(|e| WalError::io("open", path, e))?;
        lock_exclusive(&file, path)?;
        let Resume {
            recovery,
            marks,
            next_lsn,
            last_hlc,
        } = recover_for(path, node)?;
        let metrics = WalMetrics::default();
        metrics.recoveries.fetch_add(1, Ordering::Relaxed);
        if recovery.outcome == Outcome::TornTail {
            metrics.torn_tails.fetch_add(1, Ordering::Relaxed);
        }
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                queue: Vec::new(),
                queued_bytes: 0,
                next_lsn,
                marks,
                failed: None,
                closing: false,
                writer_idle: false,
                wake_at: 1,
                first_at: Instant::now(),
                written: None,
                syncing: 0,
                to_release: Vec::new(),
                writer_waits_slot: false,
                syncer_parked: false,
                sync_stop: false,
            }),
            wake: Condvar::new(),
            sync_wake: Condvar::new(),
            queued: AtomicUsize::new(0),
            slot_full: AtomicBool::new(false),
            has_failed: AtomicBool::new(false),
            durable: AtomicU64::new(next_lsn - 1),
            metrics,
        });
        let allocated = file
            .metadata()
            .map_err(|e| WalError::io("stat", path, e))?
            .len();
        let file: Arc<dyn WalFile> = Arc::from(wrap(file));
        let prealloc = start_prealloc(&file, path, recovery.end, allocated, opts.prealloc_chunk)?;
        let last = last_hlc.map_or((0, 0), |h| (h.physical, h.logical));
        let stamp = FrameStamp::new(opts.wall.clone(), node, node_hash(node), last);
        let syncer = Syncer {
            shared: shared.clone(),
            file: file.clone(),
            path: path.to_path_buf(),
            spin: opts.spin,
        };
        let syncer = std::thread::Builder::new()
            .name("wal-sync".into())
            .spawn(move || syncer.run())
            .map_err(|e| WalError::io("start the fdatasync thread for", path, e))?;
        let thread = WriterThread {
            shared: shared.clone(),
            file,
            path: path.to_path_buf(),
            end: recovery.end,
            prealloc,
            stamp,
            opts,
            buf: Vec::new(),
            population: 1,
            spare: Vec::new(),
            syncer: Some(syncer),
        };
        let handle = std::thread::Builder::new()
            .name("wal-writer".into())
            .spawn(move || thread.run())
            .map_err(|e| WalError::io("start writer for", path, e))?;
        Ok(WalWriter {
            shared,
            thread: Some(handle),
            path: path.to_path_buf(),
            node: node.to_string(),
            recovery,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// What recovery found (and did) when the log was opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The highest LSN known durable.
    pub fn durable_lsn(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// The watermarks as of the last queued watermark.
    pub fn watermarks(&self) -> Watermarks {
        self.shared.lock().marks
    }

    pub fn metrics(&self) -> WalMetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// Appends an event and blocks until it is durable. Do not call from inside an async runtime;
    /// use [`WalWriter::append_async`] there.
    pub fn append(&self, event: EventBody) -> Result<Appended, WalError> {
        let rx = self.submit(Body::Event(event))?;
        rx.blocking_recv().unwrap_or(Err(WalError::Closed))
    }

    /// Appends an event and waits (asynchronously) until it is durable.
    pub async fn append_async(&self, event: EventBody) -> Result<Appended, WalError> {
        let rx = self.submit(Body::Event(event))?;
        rx.await.unwrap_or(Err(WalError::Closed))
    }

    /// Records that every frame up to `wm.lsn` reached `wm.state` (a watermark frame), and blocks
    /// until that frame is durable. Watermarks only move forward.
    pub fn advance(&self, wm: Watermark) -> Result<Appended, WalError> {
        let rx = self.submit(Body::Mark(wm))?;
        rx.blocking_recv().unwrap_or(Err(WalError::Closed))
    }

    /// [`WalWriter::advance`] for async callers.
    pub async fn advance_async(&self, wm: Watermark) -> Result<Appended, WalError> {
        let rx = self.submit(Body::Mark(wm))?;
        rx.await.unwrap_or(Err(WalError::Closed))
    }

    fn submit(
        &self,
        body: Body,
    ) -> Result<oneshot::Receiver<Result<Appended, WalError>>, WalError> {
        let size = FRAME_HEADER_LEN
            + match &body {
                Body::Event(e) => e.payload_len(24 + self.node.len()),
                Body::Mark(_) => Watermark::LEN,
            };
        let (tx, rx) = oneshot::channel();
        let mut g = self.shared.lock();
        if let Some(e) = &g.failed {
            return Err(WalError::Poisoned(Box::new(e.clone())));
        }
        if g.closing {
            return Err(WalError::Closed);
        }
        if let Body::Mark(wm) = &body {
            g.marks.check_forward(*wm, g.next_lsn - 1)?;
            g.marks.apply(*wm);
        }
        if g.queue.is_empty() {
            g.first_at = Instant::now();
        }
        let lsn = g.next_lsn;
        g.next_lsn += 1;
        g.queued_bytes += size;
        g.queue.push(Pending {
            lsn,
            size,
            body,
            done: tx,
        });
        self.shared.queued.store(g.queue.len(), Ordering::Release);
        if g.writer_idle && g.queue.len() >= g.wake_at {
            g.writer_idle = false;
            self.shared.wake.notify_one();
        }
        Ok(rx)
    }

    /// Checkpoint: `applied_state` holds the log's events up to `applied_lsn` (the state
    /// machine says so; it must be durable). Raises APPLIED to `applied_lsn`, records the
    /// watermarks, `applied_lsn` and `applied_state` beside the log, then raises COMPACTED to
    /// `applied_lsn` (so [`super::checkpoint::compact`] may drop those frames).
    ///
    /// The checkpoint's applied LSN is the state machine's, never inferred from the watermarks: a
    /// COMPACTED (or APPLIED) watermark raised without a checkpoint (`wal advance`, or `ledger
    /// sync` copying one) covers frames nothing applied, and claiming them would let compaction
    /// drop them. [`super::checkpoint::Checkpoint::unheld_compacted`] names such frames.
    pub fn checkpoint(
        &self,
        applied_lsn: u64,
        applied_state: serde_json::Value,
    ) -> Result<super::checkpoint::Checkpoint, WalError> {
        let durable = self.durable_lsn();
        if applied_lsn > durable {
            return Err(WalError::Invalid {
                path: self.path.clone(),
                message: format!(
                    "checkpoint refused: the applied state is said to hold LSNs up to {applied_lsn}, but the log is durable only up to LSN {durable}"
                ),
            });
        }
        if applied_lsn > self.watermarks().covered(FrameState::Applied) {
            self.advance(Watermark {
                state: FrameState::Applied,
                lsn: applied_lsn,
            })?;
        }
        let marks = self.watermarks();
        let last_lsn = self.durable_lsn();
        let cp = super::checkpoint::Checkpoint::new(last_lsn, applied_lsn, &marks, applied_state);
        super::checkpoint::write_checkpoint(&self.path, &cp)?;
        if cp.applied_lsn > marks.covered(FrameState::Compacted) {
            self.advance(Watermark {
                state: FrameState::Compacted,
                lsn: cp.applied_lsn,
            })?;
        }
        Ok(cp)
    }

    /// Writes what is queued, stops the writer thread and closes the file.
    pub fn close(mut self) -> Result<(), WalError> {
        self.stop();
        match self.shared.lock().failed.clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WalWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Zero-fills the first chunk now when nothing is preallocated beyond `end` (so a file size limit
/// or a full disk shows at open), then hands the next chunks to the helper thread.
fn start_prealloc(
    file: &Arc<dyn WalFile>,
    path: &Path,
    end: u64,
    allocated: u64,
    chunk: u64,
) -> Result<Preallocator, WalError> {
    let mut ready = allocated;
    if chunk > 0 && allocated <= end {
        let target = (end + 1).next_multiple_of(chunk);
        file.zero_fill(allocated, target - allocated)
            .and_then(|()| file.sync_data())
            .map_err(|e| WalError::io("preallocate", path, e))?;
        ready = target;
    }
    Preallocator::start(file.clone(), ready, chunk)
        .map_err(|e| WalError::io("start the preallocation helper for", path, e))
}

/// Recovers the log and checks that every frame is this node's; returns the watermarks.
/// Where a writer takes up a recovered log.
struct Resume {
    recovery: Recovery,
    marks: Watermarks,
    /// The LSN of the next frame ([`next_lsn`]).
    next_lsn: u64,
    /// The highest HLC in the log: new frames are stamped above it (a log whose HLCs do not
    /// increase, made by another tool or an old clock, still gets only higher ones).
    last_hlc: Option<WalHlc>,
}

fn recover_for(path: &Path, node: &str) -> Result<Resume, WalError> {
    let expected = node_hash(node);
    let mut foreign = None;
    let checkpoint = super::checkpoint::load(path)?;
    let mut marks = checkpoint
        .as_ref()
        .map(super::checkpoint::Checkpoint::marks)
        .unwrap_or_default();
    let mut last_hlc = None;
    let recovery = recover_with(path, |f| {
        if f.hlc.node_hash != expected {
            foreign.get_or_insert(f.hlc.node_hash);
        }
        last_hlc = last_hlc.max(Some(f.hlc));
        // A watermark frame that breaks SPEC 11 (inspect and fold report it) is not applied.
        if let Some(Ok(w)) = f.checked_watermark() {
            marks.apply(w);
        }
    })?;
    if let Some(found) = foreign {
        return Err(WalError::WrongNode {
            path: path.to_path_buf(),
            node: node.to_string(),
            expected,
            found,
        });
    }
    let next_lsn = next_lsn(path, &recovery, checkpoint.map(|c| c.last_lsn))?;
    Ok(Resume {
        recovery,
        marks,
        next_lsn,
        last_hlc,
    })
}

/// The LSN of the next frame: after the log's last frame, or, for a log compacted down to its
/// header, after the last LSN its checkpoint records, so no LSN is ever given twice. A log that
/// ends below its checkpoint's last LSN is older than the checkpoint (restored from a backup,
/// or cut by hand): appending to it would give those LSNs a second time, to other events, and a
/// fold would skip the new ones as already applied, so it is refused.
fn next_lsn(
    path: &Path,
    recovery: &Recovery,
    checkpoint_last: Option<u64>,
) -> Result<u64, WalError> {
    let held = checkpoint_last.unwrap_or(0);
    match recovery.last_lsn {
        None => Ok(held + 1),
        Some(last) if last >= held => Ok(last + 1),
        Some(last) => Err(WalError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "the log ends at LSN {last} but its checkpoint {} was taken at LSN {held}: the log is older than its checkpoint (restored from a backup?), and new frames would take LSNs {}..={held} a second time. Put back the copy of the log that reaches LSN {held} (from a replica: `airlock ledger sync`), or, if those frames are lost for good, move the checkpoint aside and fold this log again",
                crate::core::text::visible_path(&super::checkpoint::checkpoint_path(path)),
                last + 1
            ),
        }),
    }
}

/// Why a frame cannot be stamped: the log's last HLC is the largest a frame holds.
fn hlc_spent(path: &Path) -> WalError {
    WalError::Invalid {
        path: path.to_path_buf(),
        message: format!(
            "the log's HLC has reached the largest a frame holds ({}:{}), so no later frame can be stamped; nothing was written. Start a new log for this node",
            (1u64 << 48) - 1,
            u16::MAX
        ),
    }
}

struct WriterThread {
    shared: Arc<Shared>,
    file: Arc<dyn WalFile>,
    path: PathBuf,
    /// Where the next frame goes.
    end: u64,
    /// Zeroed chunks ahead of `end`, written by a helper thread.
    prealloc: Preallocator,
    stamp: FrameStamp,
    opts: WalOptions,
    buf: Vec<u8>,
    /// Appenders active when the previous batch closed (its entries plus those in flight): how
    /// many the next batch expects ([`Inbox::expected_back`]).
    population: usize,
    spare: Vec<Pending>,
    syncer: Option<JoinHandle<()>>,
}

impl WriterThread {
    fn run(mut self) {
        let shared = self.shared.clone();
        let path = self.path.clone();
        let _unwind = FailOnUnwind {
            shared: &shared,
            op: "write",
            path: &path,
        };
        while let Some(batch) = self.take_batch() {
            match self.write_batch(batch) {
                Ok(written) => {
                    self.prealloc.keep_ahead(self.end);
                    if self.nothing_to_overlap() {
                        if !self.sync_here(written) {
                            break;
                        }
                    } else if !self.hand_off(written) {
                        break;
                    }
                }
                Err((e, acks)) => {
                    self.shared.fail(e, acks);
                    break;
                }
            }
        }
        let mut g = self.shared.lock();
        g.sync_stop = true;
        if g.syncer_parked {
            self.shared.sync_wake.notify_one();
        }
        drop(g);
        if let Some(t) = self.syncer.take() {
            let _ = t.join();
        }
        drop(self.shared.release_left(self.shared.lock()));
    }

    /// Blocks for the first entry, then drains per the group-commit rule. `None` once closing
    /// (and the queue is empty) or failed.
    fn take_batch(&mut self) -> Option<Vec<Pending>> {
        let shared = self.shared.clone();
        let idle = Instant::now();
        let g = shared.lock();
        let mut g = self.wait_first(&shared, g)?;
        let first = Instant::now();
        add_micros_between(&shared.metrics.phases.idle, idle, first);
        let deadline = g.first_at + self.opts.max_batch_wait;
        let mut batch = std::mem::take(&mut self.spare);
        let mut bytes = 0usize;
        self.drain(&mut g, &mut batch, &mut bytes);
        let mut yielded = false;
        loop {
            g = shared.release_left(g);
            let want = g
                .expected_back(self.population)
                .min(self.opts.max_batch_entries);
            // While the written slot is taken the batch could not be handed on anyway: it keeps
            // filling (so the appenders released meanwhile join it instead of forming a third
            // group), and closes at the limits or at the deadline.
            let slot_free = g.written.is_none();
            if (slot_free && batch.len() >= want)
                || batch.len() >= self.opts.max_batch_entries
                || bytes >= self.opts.max_batch_bytes
                || g.closing
                || g.failed.is_some()
            {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let missing = if slot_free {
                want - batch.len()
            } else {
                self.opts.max_batch_entries - batch.len()
            };
            if !yielded && !self.spin_for(missing).is_zero() {
                // The appenders of the previous batch are on their way back: yield briefly
                // instead of paying a futex wake-up.
                yielded = true;
                drop(g);
                spin_until(self.opts.spin.min(deadline - now), || {
                    shared.queued.load(Ordering::Acquire) >= missing
                });
                g = shared.lock();
            } else {
                g.writer_idle = true;
                g.wake_at = missing;
                g.writer_waits_slot = !slot_free;
                g = shared
                    .wake
                    .wait_timeout(g, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                g.writer_idle = false;
                g.writer_waits_slot = false;
            }
            self.drain(&mut g, &mut batch, &mut bytes);
        }
        self.population = batch.len() + g.in_flight();
        let failed = g.failed.clone();
        drop(g);
        add_micros(&shared.metrics.phases.fill, first);
        if let Some(e) = failed {
            for p in batch {
                let _ = p.done.send(Err(e.clone()));
            }
            return None;
        }
        Some(batch)
    }

    /// Parks until the queue holds an entry; `None` once closing with nothing queued, or failed.
    /// While appenders are expected back (a batch in flight, or the last one just released) it
    /// asks to be woken once for all of them, not at the first, and keeps the 500 µs of the
    /// batch by never sleeping longer than that (the deadline runs from the first entry's
    /// arrival, `Inbox::first_at`). After one such wait that saw nothing come with nothing in
    /// flight, it parks until the first entry.
    fn wait_first<'a>(
        &self,
        shared: &'a Shared,
        mut g: std::sync::MutexGuard<'a, Inbox>,
    ) -> Option<std::sync::MutexGuard<'a, Inbox>> {
        let mut quiet = false;
        let mut spun = false;
        loop {
            g = shared.release_left(g);
            if !g.queue.is_empty() {
                break;
            }
            if g.closing || g.failed.is_some() {
                return None;
            }
            let want = g
                .expected_back(self.population)
                .min(self.opts.max_batch_entries);
            // Appenders are expected back, unless one full wait saw none come with nothing in
            // flight.
            let expecting = !(quiet && g.in_flight() == 0);
            let spin = self.spin_for(want);
            if expecting && !spun && !spin.is_zero() {
                // A few appenders are on their way back: yield briefly instead of parking, so
                // the last of them does not pay a futex wake-up of this thread.
                spun = true;
                drop(g);
                spin_until(spin, || shared.queued.load(Ordering::Acquire) >= want);
                g = shared.lock();
                continue;
            }
            spun = false;
            g.writer_idle = true;
            if want > 1 && expecting {
                g.wake_at = want;
                let (ng, r) = shared
                    .wake
                    .wait_timeout(g, self.opts.max_batch_wait)
                    .unwrap_or_else(PoisonError::into_inner);
                g = ng;
                quiet = r.timed_out() && g.queue.is_empty();
            } else {
                g.wake_at = 1;
                g = shared.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            g.writer_idle = false;
        }
        Some(g)
    }

    /// How long to yield for `want` entries before parking: `WalOptions::spin` while the
    /// appenders expected back are few (then the cores have time to spare), else 0.
    fn spin_for(&self, want: usize) -> Duration {
        if want <= SPIN_GROUP && self.population <= SPIN_GROUP {
            self.opts.spin
        } else {
            Duration::ZERO
        }
    }

    /// Moves queued entries into the batch while it stays within the entry and byte limits
    /// (the first entry of a batch is always taken).
    fn drain(&self, g: &mut Inbox, batch: &mut Vec<Pending>, bytes: &mut usize) {
        let room = self.opts.max_batch_entries - batch.len();
        if batch.is_empty() && g.queue.len() <= room && g.queued_bytes <= self.opts.max_batch_bytes
        {
            std::mem::swap(batch, &mut g.queue);
            *bytes = g.queued_bytes;
            g.queued_bytes = 0;
            self.shared.queued.store(0, Ordering::Release);
            return;
        }
        let mut n = 0;
        let mut taken = 0;
        while n < g.queue.len() && n < room {
            let size = g.queue[n].size;
            if *bytes + taken + size > self.opts.max_batch_bytes && !(batch.is_empty() && n == 0) {
                break;
            }
            taken += size;
            n += 1;
        }
        batch.extend(g.queue.drain(..n));
        *bytes += taken;
        g.queued_bytes -= taken;
        self.shared.queued.store(g.queue.len(), Ordering::Release);
    }

    /// Stamps and encodes the batch into one buffer and writes it with one write. On failure
    /// returns the error and the batch's acknowledgements (to fail them).
    fn write_batch(&mut self, mut batch: Vec<Pending>) -> Result<Written, (WalError, Vec<Ack>)> {
        let t = Instant::now();
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        self.stamp.begin_batch();
        let mut acks = Vec::with_capacity(batch.len());
        let mut entries = batch.drain(..);
        while let Some(p) = entries.next() {
            let Some(hlc) = self.stamp.next() else {
                let mut acks: Vec<Ack> = acks.into_iter().map(|(a, _)| a).collect();
                acks.push(p.done);
                acks.extend(entries.map(|p| p.done));
                self.buf = buf;
                return Err((hlc_spent(&self.path), acks));
            };
            match &p.body {
                Body::Event(e) => {
                    let text = self.stamp.text(hlc);
                    let pieces = e.pieces(text);
                    let t = e.frame_type();
                    encode_frame_into(&mut buf, p.lsn, hlc, FrameState::Pending, t, &pieces);
                }
                Body::Mark(w) => {
                    let t = FrameType::Watermark;
                    encode_frame_into(&mut buf, p.lsn, hlc, FrameState::Pending, t, &[&w.encode()]);
                }
            }
            acks.push((p.done, Appended { lsn: p.lsn, hlc }));
        }
        drop(entries);
        self.spare = batch;
        add_micros(&self.shared.metrics.phases.encode, t);
        let t = Instant::now();
        let len = buf.len() as u64;
        self.pad_to_page(&mut buf);
        self.prealloc.claim(self.end, self.end + buf.len() as u64);
        let result = if self.shared.has_failed.load(Ordering::Acquire) {
            // An fdatasync failed meanwhile: the page cache state is unknown, never write again.
            Err(std::io::Error::other(
                "an earlier fdatasync of this log failed",
            ))
        } else {
            self.file.write_all_at(&buf, self.end)
        };
        self.buf = buf;
        add_micros(&self.shared.metrics.phases.write, t);
        match result {
            Ok(()) => {
                self.end += len;
                Ok(Written { acks, bytes: len })
            }
            Err(e) => Err((
                WalError::io("write", &self.path, e),
                acks.into_iter().map(|a| a.0).collect(),
            )),
        }
    }

    /// Extends the write with zeros to the end of its last page when those bytes are already
    /// zero-filled and synced (preallocated): a write ending inside a page that is not cached makes
    /// the kernel read that page from disk first, which cost more than the fdatasync on this VM.
    /// The file's bytes do not change (zeros over zeros); the next batch overwrites them.
    fn pad_to_page(&self, buf: &mut Vec<u8>) {
        let end = self.end + buf.len() as u64;
        let padded = end.next_multiple_of(PAGE);
        if padded > end && padded <= self.prealloc.ready() {
            buf.resize(buf.len() + (padded - end) as usize, 0);
        }
    }

    /// True when the syncer has no batch and no entry is queued: handing this batch over would
    /// only add a thread hop before its fdatasync, with nothing to prepare meanwhile.
    fn nothing_to_overlap(&self) -> bool {
        let g = self.shared.lock();
        g.syncing == 0 && g.written.is_none() && g.queue.is_empty() && g.failed.is_none()
    }

    /// The batch's fdatasync and release on this thread; false (the log failed) on an error.
    fn sync_here(&mut self, w: Written) -> bool {
        let frames = w.acks.len() as u64;
        match fdatasync(&self.shared, &*self.file, &self.path, frames) {
            Ok(()) => {
                make_durable(&self.shared, w);
                true
            }
            Err(e) => {
                let acks = w.acks.into_iter().map(|(ack, _)| ack).collect();
                self.shared.fail(e, acks);
                false
            }
        }
    }

    /// Gives the written batch to the syncer once its slot is free; false (the batch failed)
    /// when the log has failed meanwhile.
    fn hand_off(&mut self, w: Written) -> bool {
        let shared = &self.shared;
        let mut g = shared.lock();
        loop {
            g = shared.release_left(g);
            if g.written.is_none() || g.failed.is_some() {
                break;
            }
            g.writer_waits_slot = true;
            g = shared.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
            g.writer_waits_slot = false;
        }
        if let Some(e) = g.failed.clone() {
            drop(g);
            for (ack, _) in w.acks {
                let _ = ack.send(Err(e.clone()));
            }
            return false;
        }
        g.written = Some(w);
        shared.slot_full.store(true, Ordering::Release);
        if g.syncer_parked {
            shared.sync_wake.notify_one();
        }
        true
    }
}

/// Page size of the page cache (a write covering whole pages needs no read first).
const PAGE: u64 = 4096;

fn add_micros(sum: &AtomicU64, since: Instant) {
    add_micros_between(sum, since, Instant::now());
}

fn add_micros_between(sum: &AtomicU64, from: Instant, to: Instant) {
    sum.fetch_add((to - from).as_micros() as u64, Ordering::Relaxed);
}
