//! The writer: one thread owns the file; appenders (sync or async, many at once) queue entries and
//! wait for their frame to be durable. Group commit per SPEC 11: the thread takes the first queued
//! entry, drains what is queued up to 1000 entries / 1 MiB or until 500 µs have passed since the
//! first, does one write and one fdatasync, publishes the durable LSN and releases exactly the
//! appenders of that batch. While the queue is empty inside the 500 µs it waits only for as many
//! entries as the previous batch had (the appenders it just released), so a few appenders are not
//! held back by the timer. A failed write or fdatasync fails the batch, everything queued and every
//! later append with that error until the log is reopened (which recovers it).

use super::error::WalError;
use super::event::EventBody;
use super::file::{lock_exclusive, WalFile};
use super::frame::{
    encode_frame_into, file_header, node_hash, FrameState, FrameType, WalHlc, Watermark,
    FRAME_HEADER_LEN,
};
use super::metrics::{WalMetrics, WalMetricsSnapshot};
use super::prealloc::Preallocator;
use super::recovery::{recover_with, Outcome, Recovery};
use super::watermarks::Watermarks;
use crate::core::hlc::{hlc_text, validate_node_id, HlcClock, SystemWallClock, WallClock};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
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
            wall: Arc::new(SystemWallClock),
        }
    }
}

/// An acknowledged frame: durable on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub lsn: u64,
    pub hlc: WalHlc,
}

type Ack = oneshot::Sender<Result<Appended, WalError>>;

enum Body {
    Event(EventBody),
    Mark(Watermark),
}

struct Pending {
    lsn: u64,
    size: usize,
    body: Body,
    done: Ack,
}

struct Inbox {
    queue: Vec<Pending>,
    queued_bytes: usize,
    next_lsn: u64,
    marks: Watermarks,
    failed: Option<WalError>,
    closing: bool,
    writer_idle: bool,
    wake_at: usize,
}

struct Shared {
    inbox: Mutex<Inbox>,
    wake: Condvar,
    durable: AtomicU64,
    metrics: WalMetrics,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
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

struct DynWall(Arc<dyn WallClock>);
impl WallClock for DynWall {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| WalError::io("open", path, e))?;
        lock_exclusive(&file, path)?;
        let (recovery, marks) = recover_for(path, node)?;
        let metrics = WalMetrics::default();
        metrics.recoveries.fetch_add(1, Ordering::Relaxed);
        if recovery.outcome == Outcome::TornTail {
            metrics.torn_tails.fetch_add(1, Ordering::Relaxed);
        }
        let next_lsn = recovery.last_lsn.map_or(1, |l| l + 1);
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
            }),
            wake: Condvar::new(),
            durable: AtomicU64::new(next_lsn - 1),
            metrics,
        });
        let allocated = file
            .metadata()
            .map_err(|e| WalError::io("stat", path, e))?
            .len();
        let file: Arc<dyn WalFile> = Arc::from(wrap(file));
        let prealloc = start_prealloc(&file, path, recovery.end, allocated, opts.prealloc_chunk)?;
        let mut clock = HlcClock::with_wall(node, DynWall(opts.wall.clone())).map_err(|e| {
            WalError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
        if let Some(h) = recovery.last_hlc {
            clock.resume((h.physical, h.logical as u32));
        }
        let thread = WriterThread {
            shared: shared.clone(),
            file,
            path: path.to_path_buf(),
            end: recovery.end,
            prealloc,
            clock,
            node_hash: node_hash(node),
            opts,
            buf: Vec::new(),
            hlc_text: String::new(),
            expect: 1,
            spare: Vec::new(),
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
        let lsn = g.next_lsn;
        g.next_lsn += 1;
        g.queued_bytes += size;
        g.queue.push(Pending {
            lsn,
            size,
            body,
            done: tx,
        });
        if g.writer_idle && g.queue.len() >= g.wake_at {
            g.writer_idle = false;
            self.shared.wake.notify_one();
        }
        Ok(rx)
    }

    /// Checkpoint: records the watermarks and `applied_state` beside the log, then raises the
    /// COMPACTED watermark to the APPLIED one (so [`super::checkpoint::compact`] may drop them).
    pub fn checkpoint(
        &self,
        applied_state: serde_json::Value,
    ) -> Result<super::checkpoint::Checkpoint, WalError> {
        let marks = self.watermarks();
        let cp = super::checkpoint::Checkpoint::new(self.durable_lsn(), &marks, applied_state);
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
fn recover_for(path: &Path, node: &str) -> Result<(Recovery, Watermarks), WalError> {
    let expected = node_hash(node);
    let mut foreign = None;
    let mut marks = super::checkpoint::load_marks(path)?;
    let recovery = recover_with(path, |f| {
        if f.hlc.node_hash != expected {
            foreign.get_or_insert(f.hlc.node_hash);
        }
        if f.frame_type == FrameType::Watermark {
            if let Some(w) = Watermark::decode(f.payload) {
                marks.apply(w);
            }
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
    Ok((recovery, marks))
}

struct WriterThread {
    shared: Arc<Shared>,
    file: Arc<dyn WalFile>,
    path: PathBuf,
    /// Where the next frame goes.
    end: u64,
    /// Zeroed chunks ahead of `end`, written by a helper thread.
    prealloc: Preallocator,
    clock: HlcClock<DynWall>,
    node_hash: u64,
    opts: WalOptions,
    buf: Vec<u8>,
    hlc_text: String,
    /// Entries in the previous batch: how many to wait for when the queue runs dry.
    expect: usize,
    spare: Vec<Pending>,
}

impl WriterThread {
    fn run(mut self) {
        while let Some(mut batch) = self.take_batch() {
            match self.commit(&batch) {
                Ok(acks) => {
                    self.expect = batch.len();
                    for (p, ack) in batch.drain(..).zip(acks.iter()) {
                        let _ = p.done.send(Ok(*ack));
                    }
                    self.spare = batch;
                    self.prealloc.keep_ahead(self.end);
                }
                Err(e) => {
                    self.poison(e, batch);
                    return;
                }
            }
        }
    }

    /// Blocks for the first entry, then drains per the group-commit rule. `None` once closing.
    fn take_batch(&mut self) -> Option<Vec<Pending>> {
        let shared = self.shared.clone();
        let mut g = shared.lock();
        while g.queue.is_empty() {
            if g.closing || g.failed.is_some() {
                return None;
            }
            g.writer_idle = true;
            g.wake_at = 1;
            g = shared.wake.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        g.writer_idle = false;
        let deadline = Instant::now() + self.opts.max_batch_wait;
        let mut batch = std::mem::take(&mut self.spare);
        let mut bytes = 0usize;
        self.drain(&mut g, &mut batch, &mut bytes);
        let want = self.expect.min(self.opts.max_batch_entries);
        while batch.len() < want && bytes < self.opts.max_batch_bytes && !g.closing {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g.writer_idle = true;
            g.wake_at = want - batch.len();
            g = shared
                .wake
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            g.writer_idle = false;
            self.drain(&mut g, &mut batch, &mut bytes);
        }
        Some(batch)
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
    }

    fn next_hlc(&mut self) -> WalHlc {
        let mut h = self.clock.tick();
        if h.logical > u16::MAX as u32 {
            self.clock.resume((h.physical + 1, 0));
            h = self.clock.tick();
        }
        WalHlc {
            physical: h.physical,
            logical: h.logical as u16,
            node_hash: self.node_hash,
        }
    }

    /// Encodes the batch, writes it with one write and makes it durable with one fdatasync.
    fn commit(&mut self, batch: &[Pending]) -> Result<Vec<Appended>, WalError> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut acks = Vec::with_capacity(batch.len());
        for p in batch {
            let hlc = self.next_hlc();
            match &p.body {
                Body::Event(e) => {
                    self.hlc_text.clear();
                    let text = hlc_text(hlc.physical, hlc.logical.into(), self.clock.node());
                    let _ = write!(self.hlc_text, "{text}");
                    let pieces = e.pieces(self.hlc_text.as_bytes());
                    encode_frame_into(
                        &mut buf,
                        p.lsn,
                        hlc,
                        FrameState::Pending,
                        e.frame_type(),
                        &pieces,
                    );
                }
                Body::Mark(w) => {
                    encode_frame_into(
                        &mut buf,
                        p.lsn,
                        hlc,
                        FrameState::Pending,
                        FrameType::Watermark,
                        &[&w.encode()],
                    );
                }
            }
            acks.push(Appended { lsn: p.lsn, hlc });
        }
        let result = self.write_and_sync(&buf);
        let len = buf.len() as u64;
        self.buf = buf;
        result?;
        self.end += len;
        if let Some(last) = acks.last() {
            self.shared.durable.store(last.lsn, Ordering::Release);
        }
        let m = &self.shared.metrics;
        m.appends.fetch_add(batch.len() as u64, Ordering::Relaxed);
        m.batches.fetch_add(1, Ordering::Relaxed);
        m.bytes.fetch_add(len, Ordering::Relaxed);
        m.batch_size.record(batch.len() as u64);
        Ok(acks)
    }

    fn write_and_sync(&self, buf: &[u8]) -> Result<(), WalError> {
        self.prealloc.claim(self.end, self.end + buf.len() as u64);
        self.file
            .write_all_at(buf, self.end)
            .map_err(|e| WalError::io("write", &self.path, e))?;
        self.sync()
    }

    fn sync(&self) -> Result<(), WalError> {
        let t = Instant::now();
        self.file
            .sync_data()
            .map_err(|e| WalError::io("fdatasync", &self.path, e))?;
        let m = &self.shared.metrics;
        m.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        m.fdatasync_micros.record(t.elapsed().as_micros() as u64);
        Ok(())
    }

    /// Fails the batch, everything queued, and (via `failed`) every later append.
    fn poison(&mut self, err: WalError, batch: Vec<Pending>) {
        tracing::error!(path = %self.path.display(), error = %err, "WAL writer failed; appends refused until the log is reopened");
        self.shared.metrics.failures.fetch_add(1, Ordering::Relaxed);
        let queued = {
            let mut g = self.shared.lock();
            g.failed = Some(err.clone());
            g.queued_bytes = 0;
            std::mem::take(&mut g.queue)
        };
        for p in batch.into_iter().chain(queued) {
            let _ = p.done.send(Err(err.clone()));
        }
    }
}
