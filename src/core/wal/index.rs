//! A frame index built in the background (the console's WAL screen): frame offsets appear as they
//! are read, so a 10-million-frame log shows its first rows at once; a row is decoded on demand
//! with one positioned read. Ends with the recovery classification and the watermarks.

use super::frame::RawHeader;
use super::frame::{FrameType, FRAME_HEADER_LEN, MAX_FRAME_LEN};
use super::inspect::{node_of_event, stop_view, FrameView, StopView};
use super::reader::{FrameRef, WalReader};
use super::recovery::{scan, Recovery};
use super::watermarks::Watermarks;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

/// Offsets published to readers in chunks of this many frames.
const PUBLISH_EVERY: usize = 16_384;

/// What the index knows once the whole file is read.
#[derive(Debug, Clone)]
pub struct IndexSummary {
    pub recovery: Recovery,
    pub stop: StopView,
}

/// A log being indexed (or indexed).
pub struct LiveIndex {
    path: PathBuf,
    offsets: RwLock<Vec<u64>>,
    first_lsn: AtomicU64,
    bytes_read: AtomicU64,
    file_len: AtomicU64,
    marks: Mutex<Watermarks>,
    node: OnceLock<String>,
    done: OnceLock<Result<IndexSummary, String>>,
    cancel: AtomicBool,
    /// Set when a row read found the file changed since it was indexed.
    stale: AtomicBool,
}

impl LiveIndex {
    /// Starts indexing `path` on a background thread.
    pub fn start(path: &Path) -> Arc<LiveIndex> {
        let idx = Arc::new(LiveIndex {
            path: path.to_path_buf(),
            offsets: RwLock::new(Vec::new()),
            first_lsn: AtomicU64::new(1),
            bytes_read: AtomicU64::new(0),
            file_len: AtomicU64::new(0),
            marks: Mutex::new(Watermarks::default()),
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

    fn run(&self) -> std::io::Result<IndexSummary> {
        let reader = WalReader::open(&self.path)?;
        self.file_len.store(reader.file_len(), Ordering::Relaxed);
        let mut pending = Vec::with_capacity(PUBLISH_EVERY);
        let recovery = scan(reader, |f| self.visit(f, &mut pending))?;
        self.publish(&mut pending);
        self.bytes_read
            .store(self.file_len.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(IndexSummary {
            stop: stop_view(&recovery),
            recovery,
        })
    }

    fn visit(&self, f: &FrameRef<'_>, pending: &mut Vec<u64>) {
        if self.cancel.load(Ordering::Relaxed) {
            return;
        }
        if pending.is_empty() && self.is_empty() {
            self.first_lsn.store(f.lsn, Ordering::Relaxed);
        }
        pending.push(f.offset);
        if f.frame_type == FrameType::Watermark {
            // A watermark frame that breaks SPEC 11 (inspect reports it) is not applied.
            if let Some(Ok(w)) = f.checked_watermark() {
                self.marks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .apply(w);
            }
        } else if self.node.get().is_none() {
            if let Some(n) = node_of_event(f) {
                let _ = self.node.set(n);
            }
        }
        if pending.len() >= PUBLISH_EVERY {
            self.publish(pending);
            self.bytes_read.store(f.offset + f.len(), Ordering::Relaxed);
        }
    }

    fn publish(&self, pending: &mut Vec<u64>) {
        self.offsets
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .append(pending);
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
        self.offsets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(bytes read, file length)`.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.bytes_read.load(Ordering::Relaxed),
            self.file_len.load(Ordering::Relaxed),
        )
    }

    pub fn first_lsn(&self) -> u64 {
        self.first_lsn.load(Ordering::Relaxed)
    }

    pub fn node(&self) -> Option<&str> {
        self.node.get().map(String::as_str)
    }

    /// The watermarks read so far (all of them once done).
    pub fn marks(&self) -> Watermarks {
        *self.marks.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Decodes row `i` (one positioned read). The frame read must still be the one indexed there:
    /// its length within bounds, its LSN the row's and its CRC valid; otherwise the file changed
    /// since it was indexed (the index is marked stale) and nothing is trusted or allocated from
    /// what is there now.
    pub fn row(&self, i: usize) -> std::io::Result<FrameView> {
        use std::os::unix::fs::FileExt;
        let offset = self
            .offsets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(i)
            .copied()
            .ok_or(std::io::ErrorKind::NotFound)?;
        let expected_lsn = self.first_lsn().saturating_add(i as u64);
        let file = crate::core::file_input::open_regular(&self.path)?;
        let mut head = [0u8; FRAME_HEADER_LEN];
        let raw = match file.read_exact_at(&mut head, offset) {
            Ok(()) => RawHeader::parse(&head),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(self.changed(offset, expected_lsn, "the file now ends before it"))
            }
            Err(e) => return Err(e),
        };
        let total = u64::from(raw.total_len);
        if total < FRAME_HEADER_LEN as u64 || total > MAX_FRAME_LEN || raw.lsn != expected_lsn {
            return Err(self.changed(offset, expected_lsn, "another frame or no frame is there"));
        }
        let mut payload = vec![0u8; total as usize - FRAME_HEADER_LEN];
        match file.read_exact_at(&mut payload, offset + FRAME_HEADER_LEN as u64) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
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
    fn changed(&self, offset: u64, lsn: u64, what: &str) -> std::io::Error {
        self.stale.store(true, Ordering::Relaxed);
        std::io::Error::other(format!(
            "{}: the log changed since it was indexed (compacted, recovered or rewritten): LSN \
             {lsn} was at offset {offset}, but {what}; it is indexed again",
            self.path.display()
        ))
    }
}

impl Drop for LiveIndex {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_the_vector_in_the_background_and_decodes_rows() {
        let idx = LiveIndex::start(Path::new("../shared/vectors/wal/mid-damage.alwl"));
        let start = std::time::Instant::now();
        while idx.done().is_none() && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let summary = idx.done().expect("done").as_ref().expect("ok");
        assert_eq!(summary.recovery.offset, Some(520));
        assert_eq!(summary.stop.kind, "crc-mismatch");
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.node(), Some("gate-a"));
        let row = idx.row(1).expect("row");
        assert_eq!(
            (row.lsn, row.offset, row.frame_type),
            (2, 206, "JobAccepted")
        );
        assert!(idx.row(3).is_err());
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
}
