//! The group-commit rule of SPEC 11 seen from the file: every batch is one write of at most
//! 1000 frames and 1 MiB, one fdatasync per batch, and an appender
//! is never held past the 500 µs (here: the configured wait) when the appenders the writer
//! expects do not come back.

use super::bench::sized_event;
use super::file::WalFile;
use super::*;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A real file that records the byte range of every write and counts the syncs (each one made
/// `sync_delay` slower, so appenders pile up behind it).
struct RecordingFile {
    inner: std::fs::File,
    writes: Arc<Mutex<Vec<(u64, u64)>>>,
    syncs: Arc<Mutex<u64>>,
    sync_delay: Duration,
}

impl WalFile for RecordingFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut w = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        w.push((offset, buf.len() as u64));
        WalFile::write_all_at(&self.inner, buf, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        *self.syncs.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        std::thread::sleep(self.sync_delay);
        self.inner.sync_data()
    }
    fn len(&self) -> std::io::Result<u64> {
        WalFile::len(&self.inner)
    }
}

type Recorded = (Arc<Mutex<Vec<(u64, u64)>>>, Arc<Mutex<u64>>);

fn recording_writer(
    path: &Path,
    wait: Duration,
    sync_delay: Duration,
) -> (Arc<WalWriter>, Recorded) {
    let writes = Arc::new(Mutex::new(Vec::new()));
    let syncs = Arc::new(Mutex::new(0));
    let (w2, s2) = (writes.clone(), syncs.clone());
    let opts = WalOptions {
        prealloc_chunk: 0,
        max_batch_wait: wait,
        ..WalOptions::default()
    };
    let w = WalWriter::open_with(path, "node-1", opts, move |f| {
        Box::new(RecordingFile {
            inner: f,
            writes: w2,
            syncs: s2,
            sync_delay,
        })
    })
    .expect("open");
    (Arc::new(w), (writes, syncs))
}

/// Per write: (frames, frame bytes) of the frames that start inside it.
fn batches(path: &Path, writes: &[(u64, u64)]) -> Vec<(usize, u64)> {
    let (frames, _) = reader::read_frames(path).expect("read");
    let mut out = vec![(0usize, 0u64); writes.len()];
    for f in &frames {
        let i = writes
            .iter()
            .position(|&(o, l)| f.offset >= o && f.offset < o + l)
            .expect("every frame came from one write");
        out[i].0 += 1;
        out[i].1 += f.len();
        assert!(
            f.offset + f.len() <= writes[i].0 + writes[i].1,
            "a frame split over writes"
        );
    }
    out
}

fn append_all(w: &Arc<WalWriter>, tasks: usize, each: usize, bytes: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let w = w.clone();
                tokio::spawn(async move {
                    for i in 0..each {
                        let e = sized_event(bytes, "node-1", t * each + i).expect("event");
                        w.append_async(e).await.expect("append");
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("task");
        }
    });
}

#[test]
fn a_batch_is_one_write_of_at_most_1000_frames_and_one_fdatasync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n.alwl");
    // A long wait, and slow fdatasyncs behind which 2,500 appenders queue up: batches close at
    // 1000 entries, not at the timer.
    let slow = Duration::from_millis(20);
    let (w, (writes, syncs)) = recording_writer(&path, Duration::from_millis(300), slow);
    append_all(&w, 2500, 8, 100);
    let m = w.metrics();
    drop(w);
    let writes = writes.lock().expect("writes").clone();
    let per = batches(&path, &writes);
    let frames: usize = per.iter().map(|b| b.0).sum();
    assert_eq!(frames, 20_000);
    assert!(per.iter().all(|b| b.0 >= 1 && b.0 <= 1000), "{per:?}");
    assert!(
        per.iter().any(|b| b.0 == 1000),
        "the cap was reached: {per:?}"
    );
    // The header is written at creation, not by the writer: one write per batch, and as many
    // fdatasyncs as batches (plus none for preallocation, which is off here).
    assert_eq!(writes.len() as u64, m.batches);
    assert_eq!(*syncs.lock().expect("syncs"), m.batches);
}

#[test]
fn a_batch_holds_at_most_1_mib() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n.alwl");
    let (w, (writes, _)) = recording_writer(&path, Duration::from_millis(300), Duration::ZERO);
    // 40 appenders of ~100 KB frames, then two of ~600 KB at once (together over 1 MiB).
    append_all(&w, 40, 3, 100 << 10);
    append_all(&w, 2, 1, 600 << 10);
    drop(w);
    let writes = writes.lock().expect("writes").clone();
    let per = batches(&path, &writes);
    assert_eq!(per.iter().map(|b| b.0).sum::<usize>(), 122);
    for &(n, bytes) in &per {
        assert!(bytes <= 1 << 20, "{n} frames, {bytes} bytes in one batch");
    }
    assert!(
        per.iter().any(|&(n, _)| n > 1),
        "frames were grouped: {per:?}"
    );
    let last_two = &per[per.len() - 2..];
    assert!(last_two.iter().all(|&(n, _)| n == 1), "split: {per:?}");
}

#[test]
fn an_appender_is_not_held_past_the_wait_when_the_expected_ones_do_not_come() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n.alwl");
    let (w, _) = recording_writer(&path, Duration::from_millis(40), Duration::ZERO);
    // Eight in lock step: the writer learns to expect eight.
    let lsns = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|t| {
                let w = w.clone();
                s.spawn(move || {
                    (0..10)
                        .map(|i| w.append(sized_event(100, "node-1", t * 10 + i).expect("e")))
                        .map(|r| r.expect("append").lsn)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .count()
    });
    assert_eq!(lsns, 80);
    let grouped = w.metrics().batches;
    assert!(
        grouped < 80,
        "lock-step appenders were grouped: {grouped} batches"
    );
    // Now one appender alone: each append is written at the wait, not held for the seven.
    let (tx, rx) = std::sync::mpsc::channel();
    let w2 = w.clone();
    std::thread::spawn(move || {
        for i in 0..3 {
            let r = w2.append(sized_event(100, "node-1", 100 + i).expect("e"));
            let _ = tx.send(r.map(|a| a.lsn));
        }
    });
    for want in 81..=83 {
        let got = rx.recv_timeout(Duration::from_secs(30)).expect("not held");
        assert_eq!(got.expect("append"), want);
    }
}
