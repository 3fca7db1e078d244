//! The writer: byte-for-byte reproduction of `basic.alwl`, group commit under concurrency,
//! failure semantics, watermarks, checkpoint and compaction.

use super::inspect::{inspect, LsnRange};
use super::*;
use crate::core::hlc::WallClock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A wall clock the test sets by hand.
struct ScriptedWall(AtomicU64);
impl WallClock for ScriptedWall {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node.alwl");
    (dir, path)
}

fn event(t: FrameType, v: serde_json::Value) -> EventBody {
    EventBody::new(t, v.as_object().expect("object")).expect("event")
}

fn progress(i: u64) -> EventBody {
    event(
        FrameType::Event(EventType::JobProgressReported),
        serde_json::json!({"job_id": format!("use1-1-gate-{i:05}"), "dc_id": "use1", "completed": i, "failed": 0}),
    )
}

fn small_opts() -> WalOptions {
    WalOptions {
        prealloc_chunk: 64 << 10,
        ..WalOptions::default()
    }
}

#[test]
fn writer_reproduces_basic_alwl_byte_for_byte() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("../shared/vectors/wal/basic.expected.json").expect("vector"),
    )
    .expect("json");
    let (_dir, path) = temp_log();
    let wall = Arc::new(ScriptedWall(AtomicU64::new(0)));
    let opts = WalOptions {
        prealloc_chunk: 0,
        wall: wall.clone(),
        ..WalOptions::default()
    };
    let w = WalWriter::open(&path, "gate-a", opts).expect("open");
    for f in expected["frames"].as_array().expect("frames") {
        let hlc = crate::core::hlc::Hlc::parse(f["hlc"].as_str().expect("hlc")).expect("hlc");
        wall.0.store(hlc.physical, Ordering::SeqCst);
        let done = if f["type"] == "Watermark" {
            let state = FrameState::from_name(f["watermark"]["state"].as_str().expect("s"));
            w.advance(Watermark {
                state: state.expect("state"),
                lsn: f["watermark"]["lsn"].as_u64().expect("lsn"),
            })
        } else {
            let t = FrameType::from_name(f["type"].as_str().expect("type")).expect("type");
            let mut fields: serde_json::Value =
                serde_json::from_str(f["payload"].as_str().expect("payload")).expect("payload");
            fields.as_object_mut().expect("object").remove("hlc");
            w.append(event(t, fields))
        }
        .expect("append");
        assert_eq!(done.lsn, f["lsn"].as_u64().expect("lsn"));
        assert_eq!(
            done.hlc.text(Some("gate-a")),
            f["hlc"].as_str().expect("hlc")
        );
    }
    w.close().expect("close");
    let want = std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector");
    assert_eq!(std::fs::read(&path).expect("log"), want);
}

/// `threads` threads appending `each` entries at once, each checking that its acknowledgement
/// came no earlier than durability; every acknowledged LSN, sorted.
fn appends_from_threads(w: &Arc<WalWriter>, threads: u64, each: u64) -> Vec<u64> {
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                (0..each)
                    .map(|i| {
                        let a = w.append(progress(t * 1000 + i)).expect("append");
                        assert!(w.durable_lsn() >= a.lsn, "acked before durable");
                        a.lsn
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut lsns: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    lsns.sort_unstable();
    lsns
}

#[test]
fn concurrent_sync_appenders_get_unique_durable_lsns_in_order() {
    let (_dir, path) = temp_log();
    let w = Arc::new(WalWriter::open(&path, "node-1", small_opts()).expect("open"));
    let lsns = appends_from_threads(&w, 8, 100);
    assert_eq!(lsns, (1..=800).collect::<Vec<_>>());
    let m = w.metrics();
    assert_eq!(m.appends, 800);
    assert!(m.batches <= 800 && m.batches >= 1);
    assert_eq!(m.batch_size.count, m.batches);
    assert_eq!(m.recoveries, 1);
    drop(w);
    let (frames, stop) = reader::read_frames(&path).expect("read");
    assert_eq!(frames.len(), 800);
    assert!(
        frames.windows(2).all(|p| p[0].hlc < p[1].hlc),
        "HLCs increase"
    );
    let r = examine(&path).expect("examine");
    assert_eq!(r.outcome, Outcome::Clean);
    // The helper thread zero-fills ahead of the writer; on a busy machine the writer can outrun
    // it and extend the file itself, so the log ends in preallocated zeros (whole chunks) or
    // exactly at its last frame.
    if stop.damage.is_some() {
        assert!(r.zero_tail, "stops in preallocated zeros");
        assert_eq!(
            std::fs::metadata(&path).expect("meta").len() % (64 << 10),
            0
        );
    }
}

#[test]
fn yielding_writer_and_syncer_commit_every_entry_once_in_order() {
    let (_dir, path) = temp_log();
    let opts = WalOptions {
        spin: std::time::Duration::from_micros(50),
        ..small_opts()
    };
    let w = Arc::new(WalWriter::open(&path, "node-1", opts).expect("open"));
    let lsns = appends_from_threads(&w, 8, 50);
    assert_eq!(lsns, (1..=400).collect::<Vec<_>>());
    assert_eq!(w.durable_lsn(), 400);
    drop(w);
    let (frames, _) = reader::read_frames(&path).expect("read");
    assert_eq!(frames.len(), 400);
}

#[test]
fn async_appenders_are_released_by_the_durable_watermark() {
    let (_dir, path) = temp_log();
    let w = Arc::new(WalWriter::open(&path, "node-1", small_opts()).expect("open"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let total: usize = rt.block_on(async {
        let tasks: Vec<_> = (0..200)
            .map(|t| {
                let w = w.clone();
                tokio::spawn(async move {
                    for i in 0..10 {
                        let a = w.append_async(progress(t * 100 + i)).await.expect("append");
                        assert!(w.durable_lsn() >= a.lsn);
                    }
                    10usize
                })
            })
            .collect();
        let mut n = 0;
        for t in tasks {
            n += t.await.expect("task");
        }
        n
    });
    assert_eq!(total, 2000);
    let m = w.metrics();
    assert!(
        m.batches < 2000,
        "entries were grouped: {} batches",
        m.batches
    );
    assert!(m.fdatasyncs >= m.batches);
}

#[test]
fn reopening_continues_lsn_and_hlc_and_refuses_other_nodes_and_second_writers() {
    let (_dir, path) = temp_log();
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("open");
    let first = w.append(progress(1)).expect("append");
    let again = WalWriter::open(&path, "node-1", small_opts());
    assert!(matches!(again, Err(WalError::Locked { .. })));
    // `wal recover` of a live log is refused too (it would cut frames being written as a tail);
    // the log is unchanged.
    let before = std::fs::read(&path).expect("read");
    let live = super::recovery::recover_exclusive(&path);
    assert!(matches!(live, Err(WalError::Locked { .. })), "{live:?}");
    assert_eq!(std::fs::read(&path).expect("read"), before);
    w.close().expect("close");
    assert_eq!(
        super::recovery::recover_exclusive(&path)
            .expect("recover once closed")
            .valid_frames,
        1
    );
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("reopen");
    assert_eq!(w.recovery().valid_frames, 1);
    let second = w.append(progress(2)).expect("append");
    assert_eq!(second.lsn, 2);
    assert!(second.hlc > first.hlc);
    w.close().expect("close");
    let e = WalWriter::open(&path, "node-2", small_opts())
        .err()
        .expect("wrong node");
    assert!(matches!(e, WalError::WrongNode { .. }), "{e}");
}

#[test]
fn a_readers_look_at_the_lock_never_makes_a_writer_or_compaction_refused() {
    let (_dir, path) = temp_log();
    WalWriter::open(&path, "node-1", small_opts())
        .expect("open")
        .close()
        .expect("close");
    // `wal inspect` asks whether a writer is live with a shared lock for an instant; hold one
    // across the writer's open, as a look landing at that moment would.
    let look = std::fs::File::open(&path).expect("open for a look");
    look.try_lock_shared().expect("shared look");
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        look.unlock().expect("unlock");
    });
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("a look is waited out");
    release.join().expect("look thread");
    w.append(progress(1)).expect("append");
    // The writer's own hold is still seen by a reader, and still refuses a second writer.
    assert!(super::reader::WalReader::open(&path)
        .expect("reader")
        .live());
    assert!(matches!(
        WalWriter::open(&path, "node-1", small_opts()),
        Err(WalError::Locked { .. })
    ));
    w.close().expect("close");
    assert!(!super::reader::WalReader::open(&path)
        .expect("reader")
        .live());
}

/// A shared lock held on the log for longer than a look (a backup tool's `flock -s`, a stuck
/// reader) is waited out for 2 s and then refused, but not as a writer: no process has the log
/// open for writing, and the error used to say one had, sending the operator after a writer that
/// does not exist.
#[test]
fn a_shared_lock_held_without_a_pause_is_not_reported_as_a_writer() {
    let (_dir, path) = temp_log();
    WalWriter::open(&path, "node-1", small_opts())
        .expect("open")
        .close()
        .expect("close");
    let reader = std::fs::File::open(&path).expect("open for a long look");
    reader.try_lock_shared().expect("shared lock");
    let Err(e) = WalWriter::open(&path, "node-1", small_opts()) else {
        panic!("a writer opened while a shared lock was held");
    };
    assert!(matches!(e, WalError::Locked { .. }), "{e}");
    let text = e.to_string();
    assert!(!text.contains("open for writing (lock held)"), "{text}");
    assert!(text.contains("shared lock"), "{text}");
    let e = super::recovery::recover_exclusive(&path).expect_err("refused");
    assert!(e.to_string().contains("shared lock"), "{e}");
    drop(reader);
    WalWriter::open(&path, "node-1", small_opts())
        .expect("opens once the lock is let go")
        .close()
        .expect("close");
}

/// A writer on `path` (no preallocation) whose file fails as the returned plan says.
fn faulty_writer(path: &std::path::Path) -> (Arc<WalWriter>, Arc<FaultPlan>) {
    let plan = FaultPlan::new();
    let p2 = plan.clone();
    let opts = WalOptions {
        prealloc_chunk: 0,
        ..WalOptions::default()
    };
    let w = WalWriter::open_with(path, "node-1", opts, move |f| {
        Box::new(FaultyFile { inner: f, plan: p2 })
    })
    .expect("open");
    (Arc::new(w), plan)
}

#[test]
fn a_failed_fdatasync_fails_the_batch_the_queue_and_every_later_append() {
    let (_dir, path) = temp_log();
    let (w, plan) = faulty_writer(&path);
    w.append(progress(0)).expect("healthy append");
    plan.fail_sync_after(1, libc::EIO);
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let w = w.clone();
            std::thread::spawn(move || w.append(progress(i)))
        })
        .collect();
    for t in threads {
        let e = t.join().expect("thread").expect_err("must fail, not hang");
        assert_eq!(e.os_code(), Some(libc::EIO), "{e}");
    }
    let later = w.append(progress(99)).expect_err("poisoned");
    assert!(matches!(later, WalError::Poisoned(_)), "{later}");
    assert!(later.to_string().contains("reopened"), "{later}");
    assert_eq!(w.metrics().failures, 1);
    drop(w);
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("reopen recovers");
    let next = w.append(progress(100)).expect("append after reopen");
    assert_eq!(next.lsn, w.recovery().last_lsn.expect("last") + 1);
}

#[test]
fn a_failed_fdatasync_under_load_fails_every_batch_in_flight_and_keeps_acked_frames() {
    let (_dir, path) = temp_log();
    let (w, plan) = faulty_writer(&path);
    plan.fail_sync_after(6, libc::EIO);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let results: Vec<Result<Appended, WalError>> = rt.block_on(async {
        let tasks: Vec<_> = (0..100)
            .map(|t| {
                let w = w.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in 0..20 {
                        out.push(w.append_async(progress(t * 100 + i)).await);
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("task"));
        }
        all
    });
    let acked: Vec<u64> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|a| a.lsn)
        .collect();
    assert!(
        !acked.is_empty(),
        "the first five batches were acknowledged"
    );
    assert!(
        results.len() > acked.len(),
        "appends after the failure failed"
    );
    for r in &results {
        if let Err(e) = r {
            assert_eq!(e.os_code(), Some(libc::EIO), "{e}");
        }
    }
    let durable = w.durable_lsn();
    assert!(
        acked.iter().all(|&l| l <= durable),
        "acked only when durable"
    );
    let writes = plan.writes();
    // One batch may be waiting in the slot and one being written when the fdatasync fails;
    // nothing is written once the failure is known.
    assert!(
        writes <= plan.syncs() + 2,
        "{writes} writes, {} syncs",
        plan.syncs()
    );
    assert!(w.append(progress(9_999)).is_err());
    assert_eq!(plan.writes(), writes, "never written after the failure");
    assert_eq!(w.metrics().failures, 1);
    drop(w);
    let (frames, _) = reader::read_frames(&path).expect("read");
    let on_disk: std::collections::HashSet<u64> = frames.iter().map(|f| f.lsn).collect();
    assert!(
        acked.iter().all(|l| on_disk.contains(l)),
        "every acked frame survives"
    );
}

#[test]
fn a_failed_write_fails_appends_with_that_error() {
    let (_dir, path) = temp_log();
    let plan = FaultPlan::new();
    let p2 = plan.clone();
    let w = WalWriter::open_with(&path, "node-1", small_opts(), move |f| {
        Box::new(FaultyFile { inner: f, plan: p2 })
    })
    .expect("open");
    plan.fail_write_after(1, libc::ENOSPC);
    let e = w.append(progress(1)).expect_err("write fails");
    assert_eq!(e.os_code(), Some(libc::ENOSPC));
    assert!(w.append(progress(2)).is_err());
    assert!(w.close().is_err(), "close reports the failure");
}

#[test]
fn watermarks_only_move_forward_and_set_current_states() {
    let (_dir, path) = temp_log();
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("open");
    for i in 0..5 {
        w.append(progress(i)).expect("append");
    }
    let mark = |state, lsn| Watermark { state, lsn };
    w.advance(mark(FrameState::Global, 3)).expect("global");
    let back = w
        .advance(mark(FrameState::Regional, 2))
        .expect_err("backwards");
    assert!(matches!(
        back,
        WalError::Watermark(WatermarkError::NotForward { .. })
    ));
    let future = w
        .advance(mark(FrameState::Applied, 99))
        .expect_err("future");
    assert!(matches!(
        future,
        WalError::Watermark(WatermarkError::Future { .. })
    ));
    w.advance(mark(FrameState::Applied, 1)).expect("applied");
    w.close().expect("close");
    let shown = inspect(&path, LsnRange::ALL).expect("inspect");
    let states: Vec<_> = shown
        .frames
        .iter()
        .filter_map(|f| f.current_state)
        .collect();
    assert_eq!(
        states,
        ["APPLIED", "GLOBAL", "GLOBAL", "PENDING", "PENDING"]
    );
    assert_eq!(shown.watermarks["GLOBAL"], 3);
}

#[test]
fn checkpoint_and_compaction_keep_lsns_states_and_drop_compacted_frames() {
    let (_dir, path) = temp_log();
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("open");
    for i in 0..10 {
        w.append(progress(i)).expect("append");
    }
    w.advance(Watermark {
        state: FrameState::Regional,
        lsn: 8,
    })
    .expect("regional");
    w.advance(Watermark {
        state: FrameState::Applied,
        lsn: 6,
    })
    .expect("applied");
    let cp = w
        .checkpoint(6, serde_json::json!({"jobs": 6}))
        .expect("checkpoint");
    assert_eq!(cp.applied_lsn, 6);
    let busy = compact(&path).expect_err("writer holds the lock");
    assert!(matches!(busy, WalError::Locked { .. }));
    w.close().expect("close");
    let before = inspect(&path, LsnRange::ALL).expect("inspect");
    let report = compact(&path).expect("compact");
    assert_eq!(report.compacted_lsn, 6);
    assert_eq!(report.first_lsn_after, Some(7));
    assert_eq!(report.frames_before, 13);
    assert_eq!(report.frames_after, 7);
    let after = inspect(&path, LsnRange::ALL).expect("inspect");
    assert_eq!(after.outcome, "clean");
    assert_eq!(after.first_lsn, Some(7));
    for f in &after.frames {
        let old = before.frames.iter().find(|o| o.lsn == f.lsn).expect("kept");
        assert_eq!(f.payload, old.payload);
        assert_eq!(f.current_state, old.current_state);
        if f.frame_type != "Watermark" {
            assert_eq!(
                Some(f.state),
                old.current_state,
                "state byte carries the state"
            );
        }
    }
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("reopen");
    assert_eq!(w.append(progress(11)).expect("append").lsn, 14);
    assert_eq!(w.watermarks().covered(FrameState::Applied), 6);
    assert!(checkpoint::load(&path).expect("load").is_some());
}

/// A COMPACTED watermark raised by hand (`wal advance`) covers frames the state machine never
/// applied: a checkpoint records the applied LSN its caller gives, not the watermark's, says so
/// (`unheld_compacted`), and compaction then refuses to drop those frames.
#[test]
fn a_checkpoint_does_not_claim_a_compacted_watermark_raised_without_one() {
    let (_dir, path) = temp_log();
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("open");
    for i in 0..6 {
        w.append(progress(i)).expect("append");
    }
    w.advance(Watermark {
        state: FrameState::Compacted,
        lsn: 5,
    })
    .expect("compacted by hand");
    // The state machine applied LSN 1..=2 only.
    let cp = w
        .checkpoint(2, serde_json::json!({"applied": 2}))
        .expect("checkpoint");
    assert_eq!(cp.applied_lsn, 2, "not the COMPACTED watermark's 5");
    assert_eq!(cp.unheld_compacted(), Some(3..=5));
    let msg = cp.unheld_compacted_message().expect("message");
    assert!(
        msg.contains("covers LSN 5") && msg.contains("LSNs 3..=5") && msg.contains("wal advance"),
        "{msg}"
    );
    // More than is durable is refused, and nothing is written.
    let e = w.checkpoint(99, serde_json::Value::Null).expect_err("99");
    assert!(e.to_string().contains("durable only up to LSN"), "{e}");
    assert_eq!(checkpoint::load(&path).expect("load"), Some(cp));
    w.close().expect("close");
    let before = std::fs::read(&path).expect("read");
    let e = compact(&path).expect_err("LSN 3..=5 not held").to_string();
    assert!(
        e.contains("up to 2 as applied") && e.contains("LSNs 3..=5"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), before, "unchanged");
    // A checkpoint that holds them lets compaction drop them.
    let w = WalWriter::open(&path, "node-1", small_opts()).expect("reopen");
    let cp = w
        .checkpoint(6, serde_json::Value::Null)
        .expect("checkpoint");
    assert_eq!((cp.applied_lsn, cp.unheld_compacted()), (6, None));
    w.close().expect("close");
    assert_eq!(compact(&path).expect("compact").first_lsn_after, Some(7));
}

/// Any truncation of a valid log recovers to a prefix of its frames.
#[test]
fn every_truncation_recovers_to_a_prefix() {
    let (bytes, frames) = basic_frames();
    for cut in 0..=bytes.len() {
        let r = recovery::scan(
            WalReader::from_bytes(bytes[..cut].to_vec()).expect("reader"),
            |_| {},
        )
        .expect("scan");
        if cut < 8 {
            assert_eq!(r.outcome, Outcome::Refused);
            continue;
        }
        let whole = frames
            .iter()
            .filter(|f| f.offset + f.len() <= cut as u64)
            .count();
        assert_eq!(r.valid_frames as usize, whole, "cut at {cut}");
        let boundary = frames.iter().any(|f| f.offset + f.len() == cut as u64) || cut == 8;
        let want = if boundary {
            Outcome::Clean
        } else {
            Outcome::TornTail
        };
        assert_eq!(r.outcome, want, "cut at {cut}");
    }
}

fn basic_frames() -> (Vec<u8>, Vec<Frame>) {
    let bytes = std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector");
    let frames = WalReader::from_bytes(bytes.clone())
        .expect("reader")
        .map(|f| f.expect("frame"))
        .collect();
    (bytes, frames)
}

fn flipped_outcome(bytes: &[u8], at: usize, mask: u8) -> recovery::Recovery {
    let mut b = bytes.to_vec();
    b[at] ^= mask;
    recovery::scan(WalReader::from_bytes(b).expect("reader"), |_| {}).expect("scan")
}

/// Any single flipped byte in a frame followed by valid frames refuses at that frame's offset.
#[test]
fn every_flipped_byte_before_the_last_frame_refuses_at_its_frame() {
    let (bytes, frames) = basic_frames();
    for f in &frames[..frames.len() - 1] {
        for at in f.offset as usize..(f.offset + f.len()) as usize {
            for mask in [0x01, 0x80, 0xff] {
                let r = flipped_outcome(&bytes, at, mask);
                assert_eq!(r.outcome, Outcome::Refused, "byte {at} ^ {mask:#x}");
                assert_eq!(r.offset, Some(f.offset), "byte {at} ^ {mask:#x}");
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn a_flipped_byte_refuses_at_its_frame_or_tears_the_last(at in 8usize..1358, mask in 1u8..=255) {
        let (bytes, frames) = basic_frames();
        let hit = frames.iter().position(|f| (f.offset..f.offset + f.len()).contains(&(at as u64))).expect("in a frame");
        let r = flipped_outcome(&bytes, at, mask);
        proptest::prop_assert_eq!(r.offset, Some(frames[hit].offset));
        let want = if hit + 1 < frames.len() { Outcome::Refused } else { Outcome::TornTail };
        proptest::prop_assert_eq!(r.outcome, want);
    }
}

/// A file whose every fdatasync after the first panics: the syncer thread unwinds.
struct PanickingSync {
    inner: std::fs::File,
    syncs: AtomicU64,
}

impl super::file::WalFile for PanickingSync {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.inner, buf, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        if self.syncs.fetch_add(1, Ordering::SeqCst) >= 1 {
            panic!("injected panic inside fdatasync");
        }
        self.inner.sync_data()
    }
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.inner.metadata()?.len())
    }
}

#[test]
fn a_panicking_syncer_fails_every_waiting_appender_instead_of_hanging() {
    let (_dir, path) = temp_log();
    let opts = WalOptions {
        prealloc_chunk: 0,
        ..WalOptions::default()
    };
    let w = Arc::new(
        WalWriter::open_with(&path, "node-1", opts, |f| {
            Box::new(PanickingSync {
                inner: f,
                syncs: AtomicU64::new(0),
            })
        })
        .expect("open"),
    );
    w.append(progress(0)).expect("the first fdatasync works");
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 1..=16 {
        let (w, tx) = (w.clone(), tx.clone());
        std::thread::spawn(move || {
            let _ = tx.send(w.append(progress(i)));
        });
    }
    for _ in 0..16 {
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("an appender is still waiting for a thread that panicked");
        r.expect_err("nothing after the panic is acknowledged");
    }
    let later = w
        .append(progress(99))
        .expect_err("the log is failed")
        .to_string();
    assert!(
        later.contains("reopened") || later.contains("panicked"),
        "{later}"
    );
}

#[test]
fn fifos_and_devices_are_refused_by_every_opener_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo.alwl");
    crate::core::file_input::make_fifo(&fifo);
    for path in [fifo.as_path(), std::path::Path::new("/dev/zero")] {
        let not_regular = |text: String| {
            assert!(
                text.contains("not a regular file"),
                "{}: {text}",
                path.display()
            );
        };
        not_regular(
            WalReader::open(path)
                .err()
                .expect("reader refused")
                .to_string(),
        );
        not_regular(
            inspect(path, LsnRange::ALL)
                .expect_err("inspect")
                .to_string(),
        );
        not_regular(recovery::examine(path).expect_err("examine").to_string());
        not_regular(recovery::recover(path).expect_err("recover").to_string());
        let w = WalWriter::open(path, "n1", small_opts());
        not_regular(w.err().expect("writer refused").to_string());
    }
}

/// A log read while a writer appends to it (`wal inspect`, the console, anti-entropy) is read up
/// to where its picture ends: the frame being written there (zeros or half of it when read) is not
/// taken for damage or a torn tail.
#[test]
fn a_live_log_reads_clean_while_a_writer_appends() {
    let (_dir, path) = temp_log();
    let w =
        std::sync::Arc::new(WalWriter::open(&path, "node-1", WalOptions::default()).expect("open"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appenders: Vec<_> = (0..4)
        .map(|t| {
            let (w, stop) = (w.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = t * 1_000_000;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    w.append(progress(i)).expect("append");
                    i += 1;
                }
            })
        })
        .collect();
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let r = super::recovery::examine(&path).expect("examine");
        *outcomes.entry(format!("{:?}", r.outcome)).or_insert(0) += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for a in appenders {
        a.join().expect("appender");
    }
    assert_eq!(
        outcomes.keys().collect::<Vec<_>>(),
        ["Clean"],
        "{outcomes:?}"
    );
}

/// A reader with a small read-ahead (a look at the first frames) reads the same frames as the
/// usual one, frames larger than its read-ahead included.
#[test]
fn a_small_read_ahead_reads_the_same_frames_large_ones_included() {
    let (_dir, path) = temp_log();
    let w = WalWriter::open(&path, "gate-a", small_opts()).expect("open");
    let big = super::bench::sized_event(100_000, "gate-a", 1).expect("event");
    for i in 0..20 {
        let e = if i % 3 == 0 { big.clone() } else { progress(i) };
        w.append(e).expect("append");
    }
    w.close().expect("close");
    let frames = |mut r: WalReader<std::fs::File>| {
        let mut out = Vec::new();
        while let Some((_, lsn, bytes)) = r.next_raw().expect("read") {
            out.push((lsn, bytes.to_vec()));
        }
        out
    };
    let usual = frames(WalReader::open(&path).expect("open"));
    assert_eq!(usual.len(), 20);
    assert!(usual[0].1.len() > 100_000);
    let small = frames(WalReader::open_reading_ahead(&path, 4096).expect("open"));
    assert_eq!(small, usual);
}
