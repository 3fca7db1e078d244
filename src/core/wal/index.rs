//! A frame index built in the background (the console's WAL screen): frame offsets appear as they
//! are read, so a 10-million-frame log shows its first rows at once; a row is decoded on demand
//! with one positioned read through one read handle held for the index's life. Ends with the
//! recovery classification and the watermarks.
//!
//! A log refused for damage (SPEC 11: damage at X, a CRC-valid frame after it) is indexed on past
//! X for reading: the index resynchronises at the next CRC-valid frame (the search recovery makes
//! to tell refused from torn), records the damaged span (X, its length, the reason at X) and goes
//! on, again after each further damage ([`IndexRows`]). What recovery does is unchanged: the
//! summary's [`Recovery`] is recovery's own reading, refused at X. Watermarks read after the first
//! damage are kept apart ([`LiveIndex::marks_after_damage`]) and applied to no frame's state.

use super::frame::RawHeader;
use super::frame::{FrameType, FRAME_HEADER_LEN, MAX_FRAME_LEN};
pub use super::index_rows::{DamagedSpan, Entry, MAX_DAMAGED_SPANS};
use super::index_rows::{IndexRows, Run};
use super::inspect::{node_of_event, stop_view, FrameView, StopView};
use super::reader::{all_zero_from, Damage, FrameRef, ReadAt, WalReader};
use super::recovery::{scan, Outcome, Recovery};
use super::resync::next_crc_valid_frame;
use super::watermarks::Watermarks;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

/// Offsets published to readers in chunks of this many frames.
const PUBLISH_EVERY: usize = 16_384;

/// What the index knows once the whole file is read.
#[derive(Debug, Clone)]
pub struct IndexSummary {
    /// What recovery would do (its own reading: it stops at the first damage).
    pub recovery: Recovery,
    pub stop: StopView,
    /// Where the index's reading ended: where recovery stops, or for a log refused for damage,
    /// the end of what was read past the damage.
    pub end: IndexEnd,
}

/// Where the index stopped reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEnd {
    pub offset: u64,
    /// The stop's kind when the index stopped where recovery does; past damage `end-of-file`,
    /// `zero-tail`, `span-limit` (too many damaged spans) or `cancelled`.
    pub kind: &'static str,
    pub reason: String,
}

/// The log file as the index read it, kept open for rows, and which file that is.
struct Handle {
    file: File,
    /// `(device, inode)`: a path that names another file now was replaced (a compaction).
    id: (u64, u64),
}

/// A log being indexed (or indexed).
pub struct LiveIndex {
    path: PathBuf,
    rows: RwLock<IndexRows>,
    file: OnceLock<Handle>,
    bytes_read: AtomicU64,
    file_len: AtomicU64,
    /// Watermarks read before the first damage (all of them in a log read in one go).
    marks: Mutex<Watermarks>,
    /// Watermarks read after damage: shown, applied to nothing.
    marks_after: Mutex<Watermarks>,
    node: OnceLock<String>,
    done: OnceLock<Result<IndexSummary, String>>,
    cancel: AtomicBool,
    /// Set when a row read found the file changed since it was indexed.
    stale: AtomicBool,
}

/// What the indexing thread has read but not yet published.
#[derive(Default)]
struct Walk {
    pending: Vec<u64>,
    runs: Vec<Run>,
    spans: Vec<DamagedSpan>,
    /// Frames read (published or not) and spans recorded.
    frames: usize,
    span_count: usize,
    last_lsn: Option<u64>,
    /// A run is open: the next frame continues it.
    in_run: bool,
    after_damage: bool,
}

impl Walk {
    /// Records the span from `x` (reading failed there for `damage`) to `resync`, or to the end
    /// of the file `len` when nothing valid follows; the next frame starts another run.
    fn span(&mut self, x: u64, damage: Damage, resync: Option<u64>, len: u64, after: Option<u64>) {
        self.spans.push(DamagedSpan {
            offset: x,
            len: resync.unwrap_or(len).saturating_sub(x),
            damage,
            resync,
            frames_before: self.frames,
            lsn_before: self.last_lsn,
            lsn_after: after,
        });
        self.span_count += 1;
        self.in_run = false;
        self.after_damage = true;
    }
}

/// How one run read past damage ended.
enum RunEnd {
    /// No frame could be read at the resync point (the damage goes on past it).
    Nothing,
    /// Frames were read; reading stopped here.
    Stopped(super::reader::Stop),
}

impl LiveIndex {
    /// Starts indexing `path` on a background thread.
    pub fn start(path: &Path) -> Arc<LiveIndex> {
        let idx = Arc::new(LiveIndex {
            path: path.to_path_buf(),
            rows: RwLock::new(IndexRows::default()),
            file: OnceLock::new(),
            bytes_read: AtomicU64::new(0),
            file_len: AtomicU64::new(0),
            marks: Mutex::new(Watermarks::default()),
            marks_after: Mutex::new(Watermarks::default()),
            node: OnceLock::new(),
            done: OnceLock::new(),
            cancel: AtomicBool::new(false),
            stale: AtomicBool::new(false),
        });
        let worker = idx.clone();
        let spawned = std::thread::Builder::new()
            .name("wal-index".into())
            .spawn(move || {
                let result = worker.run().map_err(|e| e.to_string());
                let _ = worker.done.set(result);
            });
        if let Err(e) = spawned {
            let _ = idx.done.set(Err(format!("cannot start the indexer: {e}")));
        }
        idx
    }

    fn run(&self) -> io::Result<IndexSummary> {
        let reader = WalReader::open(&self.path)?;
        // The row handle is the file this scan reads (the same open file), set before any
        // offset is published.
        let file = reader.source().try_clone()?;
        let meta = file.metadata()?;
        let _ = self.file.set(Handle {
            file,
            id: (meta.dev(), meta.ino()),
        });
        self.file_len.store(reader.file_len(), Ordering::Relaxed);
        let mut walk = Walk {
            pending: Vec::with_capacity(PUBLISH_EVERY),
            ..Walk::default()
        };
        let recovery = scan(reader, |f| self.visit(f, &mut walk))?;
        let stop = stop_view(&recovery);
        let end = match (&recovery, &recovery.damage) {
            (
                Recovery {
                    outcome: Outcome::Refused,
                    next_valid_frame: Some(next),
                    ..
                },
                Some(damage),
            ) => self.read_past_damage(&mut walk, recovery.end, damage.clone(), *next)?,
            _ => IndexEnd {
                offset: stop.offset,
                kind: stop.kind,
                reason: stop.reason.clone(),
            },
        };
        self.publish(&mut walk);
        self.bytes_read
            .store(self.file_len.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(IndexSummary {
            stop,
            recovery,
            end,
        })
    }

    /// Indexes on past the damage at `x` (a CRC-valid frame follows at `next`): a damaged span
    /// to each resync point, then the frames from there, until the end of the file, a zero tail
    /// or [`MAX_DAMAGED_SPANS`].
    fn read_past_damage(
        &self,
        walk: &mut Walk,
        mut x: u64,
        mut damage: Damage,
        next: u64,
    ) -> io::Result<IndexEnd> {
        let Some(handle) = self.file.get() else {
            return Err(io::Error::other("the log's read handle is gone"));
        };
        // Positioned reads through the kept handle (`pread`: no lock, no shared file position).
        let src = &handle.file;
        let len = src.size()?;
        self.file_len.fetch_max(len, Ordering::Relaxed);
        let mut next = Some(next);
        loop {
            if self.cancel.load(Ordering::Relaxed) {
                return Ok(end(x, "cancelled", "indexing was stopped".into()));
            }
            if walk.span_count >= MAX_DAMAGED_SPANS {
                return Ok(end(
                    x,
                    "span-limit",
                    format!(
                        "indexing stopped after {MAX_DAMAGED_SPANS} damaged spans: the file \
                         from offset {x} on is not indexed"
                    ),
                ));
            }
            let Some(m) = next else {
                walk.span(x, damage, None, len, None);
                return Ok(end(
                    len,
                    "end-of-file",
                    format!(
                        "no CRC-valid frame in the {} from offset {x} to the end of the file",
                        crate::format::plural(len - x, "byte")
                    ),
                ));
            };
            self.bytes_read.fetch_max(m, Ordering::Relaxed);
            match self.read_run(src, m, walk, (x, &damage, len))? {
                // The frame at `m` fails too: the same span goes on to the next one.
                RunEnd::Nothing => next = next_crc_valid_frame(src, m, len, &mut 0)?,
                RunEnd::Stopped(stop) => match stop.damage {
                    None => return Ok(end(stop.offset, "end-of-file", end_text())),
                    Some(_) if all_zero_from(src, stop.offset, len)? => {
                        return Ok(end(
                            stop.offset,
                            "zero-tail",
                            "only zeros (preallocated space) from here".into(),
                        ))
                    }
                    Some(d) => {
                        (x, damage) = (stop.offset, d);
                        next = next_crc_valid_frame(src, x, len, &mut 0)?;
                    }
                },
            }
        }
    }

    /// Reads the frames from the resync point `m` on (a run), recording the span `(x, damage)`
    /// before it once a frame is read there.
    fn read_run(
        &self,
        src: &File,
        m: u64,
        walk: &mut Walk,
        (x, damage, len): (u64, &Damage, u64),
    ) -> io::Result<RunEnd> {
        let mut head = [0u8; FRAME_HEADER_LEN];
        ReadAt::read_exact_at(src, &mut head, m)?;
        let lsn = RawHeader::parse(&head).lsn;
        if lsn == 0 {
            // Not a valid LSN anywhere (the reader takes the expected one on trust).
            return Ok(RunEnd::Nothing);
        }
        let mut reader = WalReader::resume(src, m, lsn)?;
        match reader.next_frame()? {
            None => return Ok(RunEnd::Nothing),
            Some(f) => {
                walk.span(x, damage.clone(), Some(m), len, Some(f.lsn));
                self.visit(&f, walk);
            }
        }
        while let Some(f) = reader.next_frame()? {
            if self.cancel.load(Ordering::Relaxed) {
                break;
            }
            self.visit(&f, walk);
        }
        let stop = reader.stop().cloned().unwrap_or(super::reader::Stop {
            offset: reader.file_len(),
            damage: None,
        });
        Ok(RunEnd::Stopped(stop))
    }

    fn visit(&self, f: &FrameRef<'_>, walk: &mut Walk) {
        if self.cancel.load(Ordering::Relaxed) {
            return;
        }
        if !walk.in_run {
            walk.runs.push(Run {
                first_row: walk.frames,
                first_lsn: f.lsn,
            });
            walk.in_run = true;
        }
        walk.pending.push(f.offset);
        walk.frames += 1;
        walk.last_lsn = Some(f.lsn);
        if f.frame_type == FrameType::Watermark {
            // A watermark frame that breaks SPEC 11 (inspect reports it) is not applied; one
            // after damage is kept apart.
            if let Some(Ok(w)) = f.checked_watermark() {
                let marks = if walk.after_damage {
                    &self.marks_after
                } else {
                    &self.marks
                };
                marks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .apply(w);
            }
        } else if self.node.get().is_none() {
            if let Some(n) = node_of_event(f) {
                let _ = self.node.set(n);
            }
        }
        if walk.pending.len() >= PUBLISH_EVERY {
            self.publish(walk);
            self.bytes_read
                .fetch_max(f.offset + f.len(), Ordering::Relaxed);
        }
    }

    /// Makes what was read visible to readers: spans, runs and offsets together.
    fn publish(&self, walk: &mut Walk) {
        let mut rows = self.rows.write().unwrap_or_else(PoisonError::into_inner);
        rows.spans.append(&mut walk.spans);
        rows.runs.append(&mut walk.runs);
        rows.offsets.append(&mut walk.pending);
    }

    fn read_rows(&self) -> std::sync::RwLockReadGuard<'_, IndexRows> {
        self.rows.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the background thread early (the screen closed the file).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames indexed so far.
    pub fn len(&self) -> usize {
        self.read_rows().offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frames and damaged spans indexed so far ([`LiveIndex::entry`]).
    pub fn entries(&self) -> usize {
        self.read_rows().entries()
    }

    /// Entry `i` in file order: a frame's row or a damaged span.
    pub fn entry(&self, i: usize) -> Option<Entry> {
        self.read_rows().entry(i)
    }

    /// The entry number of frame `row`.
    pub fn entry_of_frame(&self, row: usize) -> usize {
        self.read_rows().entry_of_frame(row)
    }

    /// The damaged spans recorded so far, in file order (none unless the log is refused).
    pub fn spans(&self) -> Vec<DamagedSpan> {
        self.read_rows().spans.clone()
    }

    /// The first frame row read after damage, if any damage was read past.
    pub fn first_after_damage(&self) -> Option<usize> {
        self.read_rows().first_after_damage()
    }

    /// The LSN frame `row` was indexed with.
    pub fn lsn_of(&self, row: usize) -> Option<u64> {
        self.read_rows().lsn_of(row)
    }

    /// The first frame row (in file order) with LSN `lsn`.
    pub fn frame_of_lsn(&self, lsn: u64) -> Option<usize> {
        self.read_rows().frame_of_lsn(lsn)
    }

    /// The LSN ranges read, one per run: `(first row, first LSN, last LSN)`.
    pub fn lsn_ranges(&self) -> Vec<(usize, u64, u64)> {
        self.read_rows().lsn_ranges()
    }

    /// `(bytes read, file length)`.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.bytes_read.load(Ordering::Relaxed),
            self.file_len.load(Ordering::Relaxed),
        )
    }

    /// The first frame's LSN (1 before any frame is read).
    pub fn first_lsn(&self) -> u64 {
        self.read_rows().runs.first().map_or(1, |r| r.first_lsn)
    }

    pub fn node(&self) -> Option<&str> {
        self.node.get().map(String::as_str)
    }

    /// The watermarks read so far before any damage (all of them once done, in a log read in
    /// one go): what states are computed with.
    pub fn marks(&self) -> Watermarks {
        *self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watermarks read after damage: not applied to any frame's state (the log as recovery
    /// reads it ends at the first damage).
    pub fn marks_after_damage(&self) -> Watermarks {
        *self
            .marks_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The summary once the whole file is read (or why indexing failed).
    pub fn done(&self) -> Option<&Result<IndexSummary, String>> {
        self.done.get()
    }

    /// True once [`LiveIndex::row`] found the file changed under the index (a compaction or
    /// recovery replaced or cut it, or something rewrote it): its offsets no longer hold the
    /// frames it indexed, and the log must be indexed again.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// Decodes frame row `i` (one positioned read through the index's handle). The path must
    /// still name the file indexed (a rename over it, as compaction does, makes the index stale)
    /// and the frame read must still be the one indexed there: its length within bounds, its LSN
    /// the row's and its CRC valid; otherwise the file changed since it was indexed (the index is
    /// marked stale) and nothing is trusted or allocated from what is there now.
    pub fn row(&self, i: usize) -> io::Result<FrameView> {
        let (offset, expected_lsn) = {
            let rows = self.read_rows();
            let offset = rows.offsets.get(i).copied();
            (offset, rows.lsn_of(i))
        };
        let (Some(offset), Some(expected_lsn), Some(handle)) =
            (offset, expected_lsn, self.file.get())
        else {
            return Err(io::ErrorKind::NotFound.into());
        };
        let now = std::fs::metadata(&self.path)?;
        if (now.dev(), now.ino()) != handle.id {
            return Err(self.changed(offset, expected_lsn, "the path names another file now"));
        }
        let file = &handle.file;
        let mut head = [0u8; FRAME_HEADER_LEN];
        let raw = match FileExt::read_exact_at(file, &mut head, offset) {
            Ok(()) => RawHeader::parse(&head),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(self.changed(offset, expected_lsn, "the file now ends before it"))
            }
            Err(e) => return Err(e),
        };
        let total = u64::from(raw.total_len);
        if total < FRAME_HEADER_LEN as u64 || total > MAX_FRAME_LEN || raw.lsn != expected_lsn {
            return Err(self.changed(offset, expected_lsn, "another frame or no frame is there"));
        }
        let mut payload = vec![0u8; total as usize - FRAME_HEADER_LEN];
        match FileExt::read_exact_at(file, &mut payload, offset + FRAME_HEADER_LEN as u64) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(self.changed(offset, expected_lsn, "the file now ends inside it"))
            }
            Err(e) => return Err(e),
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[4..]);
        crc.update(&payload);
        if crc.finalize() != raw.crc32 {
            return Err(self.changed(offset, expected_lsn, "its CRC no longer matches"));
        }
        let f = FrameRef {
            offset,
            crc32: raw.crc32,
            lsn: raw.lsn,
            hlc: raw.hlc,
            state: super::FrameState::from_byte(raw.state).unwrap_or(super::FrameState::Pending),
            frame_type: FrameType::from_byte(raw.frame_type).unwrap_or(FrameType::Watermark),
            payload: &payload,
        };
        Ok(FrameView::new(&f, self.node(), &self.marks()))
    }

    /// Marks the index stale and says why row reading stopped trusting it.
    fn changed(&self, offset: u64, lsn: u64, what: &str) -> io::Error {
        self.stale.store(true, Ordering::Relaxed);
        io::Error::other(format!(
            "{}: the log changed since it was indexed (compacted, recovered or rewritten): LSN \
             {lsn} was at offset {offset}, but {what}; it is indexed again",
            crate::core::text::visible_path(&self.path)
        ))
    }
}

fn end(offset: u64, kind: &'static str, reason: String) -> IndexEnd {
    IndexEnd {
        offset,
        kind,
        reason,
    }
}

fn end_text() -> String {
    "the last frame ends at the end of the file".into()
}

impl Drop for LiveIndex {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector refused for damage at 520 (LSN 4's frame): recovery's reading is unchanged,
    /// and the index goes on past the damage to LSN 5-10 (the frame at 563 on).
    #[test]
    fn indexes_the_vector_in_the_background_and_decodes_rows() {
        let idx = LiveIndex::start(Path::new("../shared/vectors/wal/mid-damage.alwl"));
        let start = std::time::Instant::now();
        while idx.done().is_none() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let summary = idx.done().expect("done").as_ref().expect("ok");
        assert_eq!(summary.recovery.outcome, Outcome::Refused);
        assert_eq!(summary.recovery.offset, Some(520));
        assert_eq!(summary.recovery.valid_frames, 3);
        assert_eq!(summary.stop.kind, "crc-mismatch");
        assert_eq!(idx.len(), 9);
        assert_eq!(idx.node(), Some("gate-a"));
        let row = idx.row(1).expect("row");
        assert_eq!(
            (row.lsn, row.offset, row.frame_type),
            (2, 206, "JobAccepted")
        );
        let spans = idx.spans();
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].offset, spans[0].resync), (520, Some(563)));
        assert_eq!(idx.row(3).expect("row after the damage").lsn, 5);
        assert!(idx.row(9).is_err());
    }

    fn indexed(path: &Path) -> Arc<LiveIndex> {
        let idx = LiveIndex::start(path);
        let start = std::time::Instant::now();
        while idx.done().is_none() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        idx
    }

    /// The log is replaced under the index (as a compaction renames its new file over it): a row
    /// is never decoded from what the old offsets hold now, a length read there is not trusted
    /// (0xFFFFFFF0 would allocate 4 GiB, 5 would underflow), and the index says it is stale.
    #[test]
    fn a_log_replaced_under_the_index_is_stale_not_misread() {
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("b.alwl");
        let basic = std::fs::read("../shared/vectors/wal/basic.alwl").expect("read");
        std::fs::write(&log, &basic).expect("write");
        let idx = indexed(&log);
        assert_eq!(idx.len(), 10);
        assert_eq!(idx.row(1).expect("row").lsn, 2);
        assert!(!idx.is_stale());
        // The replacement: the header, LSN 5's frame where LSN 1 was, a 5-byte length where
        // LSN 2 was and a 4 GiB one where LSN 3 was.
        let mut new = vec![0u8; basic.len()];
        new[..8].copy_from_slice(&basic[..8]);
        new[8..8 + 185].copy_from_slice(&basic[563..563 + 185]);
        new[206..214].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
        new[363..371].copy_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0]);
        let tmp = d.path().join("b.new");
        std::fs::write(&tmp, &new).expect("write");
        std::fs::rename(&tmp, &log).expect("rename");
        for row in [0, 1, 2, 9] {
            let e = idx.row(row).expect_err("a changed frame");
            assert!(
                e.to_string().contains("changed since it was indexed"),
                "{e}"
            );
        }
        assert!(idx.is_stale());
    }

    use crate::core::wal::{encode_frame_into, file_header, FrameState, WalHlc, Watermark};

    /// A log of `n` event frames (LSN 1 on), with a REGIONAL watermark frame as LSN `mark_at`
    /// covering the LSN before it; with each frame's `(offset, length)`, index = LSN - 1.
    fn log_of(n: u64, mark_at: Option<u64>) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut bytes = file_header().to_vec();
        let mut at = Vec::new();
        for lsn in 1..=n {
            let start = bytes.len();
            let hlc = WalHlc::from_parts(1_700_000_000_000 + lsn, 0, 7).expect("hlc");
            if Some(lsn) == mark_at {
                let w = Watermark {
                    state: FrameState::Regional,
                    lsn: lsn - 1,
                };
                let payload = w.encode();
                encode_frame_into(
                    &mut bytes,
                    lsn,
                    hlc,
                    FrameState::Pending,
                    FrameType::Watermark,
                    &[&payload],
                );
            } else {
                let payload = format!("{{\"n\":{lsn}}}");
                encode_frame_into(
                    &mut bytes,
                    lsn,
                    hlc,
                    FrameState::Pending,
                    FrameType::from_byte(3).expect("type"),
                    &[payload.as_bytes()],
                );
            }
            at.push((start, bytes.len() - start));
        }
        (bytes, at)
    }

    /// Flips a byte in the body of LSN `lsn`'s frame: its CRC fails, its header stays.
    fn damage(bytes: &mut [u8], at: &[(usize, usize)], lsn: u64) {
        let (offset, _) = at[lsn as usize - 1];
        bytes[offset + FRAME_HEADER_LEN] ^= 0x5a;
    }

    fn written(d: &tempfile::TempDir, bytes: &[u8]) -> Arc<LiveIndex> {
        let log = d.path().join("damaged.alwl");
        std::fs::write(&log, bytes).expect("write");
        indexed(&log)
    }

    /// Every frame's LSN as row() decodes it.
    fn lsns(idx: &LiveIndex) -> Vec<u64> {
        (0..idx.len())
            .map(|i| idx.row(i).expect("row").lsn)
            .collect()
    }

    /// Damage in LSN 8's body with 12 valid frames after it: recovery still refuses at its
    /// offset, and the index records the span (to LSN 9's frame, the reason at the damage) and
    /// indexes the 12 frames after it.
    #[test]
    fn indexes_on_past_one_damaged_span() {
        let (mut bytes, at) = log_of(20, None);
        damage(&mut bytes, &at, 8);
        let d = tempfile::tempdir().expect("tempdir");
        let idx = written(&d, &bytes);
        let summary = idx.done().expect("done").as_ref().expect("ok");
        assert_eq!(summary.recovery.outcome, Outcome::Refused);
        assert_eq!(summary.recovery.offset, Some(at[7].0 as u64));
        assert_eq!(summary.recovery.valid_frames, 7);
        let spans = idx.spans();
        assert_eq!(spans.len(), 1, "{spans:?}");
        let s = &spans[0];
        assert_eq!(s.offset, at[7].0 as u64);
        assert_eq!(s.len, at[7].1 as u64);
        assert_eq!(s.resync, Some(at[8].0 as u64));
        assert_eq!(s.damage.kind(), "crc-mismatch");
        assert_eq!(s.frames_before, 7);
        assert_eq!((s.lsn_before, s.lsn_after), (Some(7), Some(9)));
        assert_eq!(s.lost_lsns(), Some((8, 8)));
        assert_eq!(idx.len(), 19, "7 frames before, 12 after");
        let want: Vec<u64> = (1..=7).chain(9..=20).collect();
        assert_eq!(lsns(&idx), want);
        assert_eq!(idx.entries(), 20);
        assert_eq!(idx.entry(7), Some(Entry::Damage(s.clone())));
        assert_eq!(idx.entry(8), Some(Entry::Frame(7)));
        assert_eq!(idx.first_after_damage(), Some(7));
        assert_eq!(idx.frame_of_lsn(9), Some(7));
        assert_eq!(idx.frame_of_lsn(8), None);
        assert_eq!(summary.end.kind, "end-of-file");
        assert_eq!(summary.end.offset, bytes.len() as u64);
        assert!(!idx.is_stale());
    }

    /// Two damaged spans (LSN 5; LSN 15 and 16 back to back, one span) and a watermark after
    /// the damage: each span has its offset, length and reason, the LSNs on either side, and
    /// the watermark is kept apart, applied to no frame.
    #[test]
    fn indexes_on_past_two_damaged_spans() {
        let (mut bytes, at) = log_of(30, Some(25));
        damage(&mut bytes, &at, 5);
        damage(&mut bytes, &at, 15);
        damage(&mut bytes, &at, 16);
        let d = tempfile::tempdir().expect("tempdir");
        let idx = written(&d, &bytes);
        let summary = idx.done().expect("done").as_ref().expect("ok");
        assert_eq!(summary.recovery.offset, Some(at[4].0 as u64));
        assert_eq!(summary.recovery.valid_frames, 4);
        let spans = idx.spans();
        let got: Vec<_> = spans
            .iter()
            .map(|s| {
                (
                    s.offset,
                    s.len,
                    s.damage.kind(),
                    s.frames_before,
                    s.lsn_before,
                    s.lsn_after,
                )
            })
            .collect();
        let (o5, o15) = (at[4].0 as u64, at[14].0 as u64);
        assert_eq!(
            got,
            [
                (o5, at[4].1 as u64, "crc-mismatch", 4, Some(4), Some(6)),
                (
                    o15,
                    (at[14].1 + at[15].1) as u64,
                    "crc-mismatch",
                    13,
                    Some(14),
                    Some(17)
                ),
            ]
        );
        assert_eq!(spans[1].lsn_gap_text(), "LSN 15-16 lost (2 LSNs)");
        assert_eq!(idx.len(), 27, "4 frames, then 9, then 14");
        let want: Vec<u64> = (1..=4).chain(6..=14).chain(17..=30).collect();
        assert_eq!(lsns(&idx), want);
        assert_eq!(idx.lsn_ranges(), [(0, 1, 4), (4, 6, 14), (13, 17, 30)]);
        assert_eq!(idx.entry(4), Some(Entry::Damage(spans[0].clone())));
        assert_eq!(idx.entry(14), Some(Entry::Damage(spans[1].clone())));
        assert_eq!(idx.entry(15), Some(Entry::Frame(13)));
        assert_eq!(idx.marks(), Watermarks::default(), "none before the damage");
        assert_eq!(idx.marks_after_damage().covered(FrameState::Regional), 24);
        let row = idx.row(idx.frame_of_lsn(20).expect("LSN 20")).expect("row");
        assert_eq!(row.current_state, Some("PENDING"), "not applied");
    }

    /// Rows are read through one handle the index keeps (the file is not opened per row): the
    /// log has exactly one descriptor open in this process after many row reads.
    #[test]
    fn rows_are_read_through_one_kept_handle() {
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("kept.alwl");
        std::fs::copy("../shared/vectors/wal/basic.alwl", &log).expect("copy");
        let idx = indexed(&log);
        for _ in 0..100 {
            for i in 0..idx.len() {
                idx.row(i).expect("row");
            }
        }
        let log = log.canonicalize().expect("canonical");
        let open = std::fs::read_dir("/proc/self/fd")
            .expect("fds")
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| *p == log)
            .count();
        assert_eq!(open, 1);
    }

    /// A rename over the log of a file with the very same bytes is still another file: the
    /// index is stale (its handle reads the old one).
    #[test]
    fn a_same_bytes_file_renamed_over_the_log_is_stale() {
        let d = tempfile::tempdir().expect("tempdir");
        let log = d.path().join("same.alwl");
        std::fs::copy("../shared/vectors/wal/basic.alwl", &log).expect("copy");
        let idx = indexed(&log);
        idx.row(0).expect("row");
        std::fs::copy(&log, d.path().join("same.new")).expect("copy");
        std::fs::rename(d.path().join("same.new"), &log).expect("rename");
        let e = idx.row(0).expect_err("another file");
        assert!(
            e.to_string().contains("changed since it was indexed"),
            "{e}"
        );
        assert!(idx.is_stale());
    }
}
