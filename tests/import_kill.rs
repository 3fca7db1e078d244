//! An import process killed with SIGKILL at arbitrary points leaves the store exactly as before or
//! exactly as after, and `chain verify` passes after every run; at least one kill is shown (by the
//! uncommitted write it left on disk) to have landed in the middle of the import's write.

mod chain_support;

use airlock::core::chain::verify::verify_chain;
use airlock::core::store::rules::chain_head;
use airlock::core::store::Store;
use chain_support::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn airlock(db: &Path, bulk: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.arg("--db")
        .arg(db)
        .env("AIRLOCK_NODE_ID", "kill-test")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if bulk {
        // Every import, however small, takes the rollback-journal path.
        c.env("AIRLOCK_BULK_JOURNAL_MIN_BYTES", "0");
    } else {
        c.env("AIRLOCK_BULK_JOURNAL_MIN_BYTES", u64::MAX.to_string());
    }
    c
}

#[test]
fn sigkill_during_import_leaves_the_store_before_or_after() {
    kill_runs(false);
}

#[test]
fn sigkill_during_a_rollback_journal_import_leaves_the_store_before_or_after() {
    kill_runs(true);
}

/// Whether the store's side file holds a write transaction that never committed: a hot rollback
/// journal (`journal_mode=TRUNCATE` empties it at commit), or WAL frames of the current generation
/// after the last commit frame.
fn uncommitted_write_on_disk(db: &Path, bulk: bool) -> bool {
    let side = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    if bulk {
        return std::fs::metadata(side("-journal")).is_ok_and(|m| m.len() > 0);
    }
    let Ok(wal) = std::fs::read(side("-wal")) else {
        return false;
    };
    let be = |b: &[u8]| u32::from_be_bytes(b[..4].try_into().unwrap());
    if wal.len() < 32 {
        return false;
    }
    let (page, salts) = (be(&wal[8..]) as usize, &wal[16..24]);
    let mut last_commit_size = None;
    let mut at = 32;
    while page > 0 && at + 24 + page <= wal.len() {
        let frame = &wal[at..at + 24];
        if &frame[8..16] != salts {
            break;
        }
        last_commit_size = Some(be(&frame[4..]));
        at += 24 + page;
    }
    last_commit_size == Some(0)
}

/// Starts an import into `db` and kills it as soon as its write transaction shows on disk (or
/// when it ends first); returns whether the kill left an uncommitted write behind.
fn kill_mid_write(db: &Path, files: &[std::path::PathBuf], bulk: bool) -> bool {
    let mut child = airlock(db, bulk)
        .args(["jobs", "import"])
        .args(files)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !uncommitted_write_on_disk(db, bulk) {
        if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
            break;
        }
        std::thread::yield_now();
    }
    let _ = child.kill(); // SIGKILL on Unix
    let _ = child.wait();
    uncommitted_write_on_disk(db, bulk)
}

fn kill_runs(bulk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for seed in 0..2 {
        let p = dir.path().join(format!("k{seed}.json"));
        synth_bundle(&p, "kill", 2, 1250, 1_767_614_400_000, seed);
        files.push(p);
    }
    // A base store with an earlier import, so "before" is not simply empty.
    let base = dir.path().join("base.db");
    {
        let mut store = Store::open(&base).unwrap();
        import_files(&mut store, &[vector("merge/a.json")], &opts());
    }
    let base_dump = dump(&Store::open(&base).unwrap());

    // One full run gives the length of "after" and a time scale for the kill points.
    let full = dir.path().join("full.db");
    std::fs::copy(&base, &full).unwrap();
    let started = Instant::now();
    let status = airlock(&full, bulk)
        .args(["jobs", "import"])
        .args(&files)
        .status()
        .unwrap();
    assert!(status.success());
    let span = started.elapsed().max(Duration::from_millis(20));
    let after_len = chain_head(&Store::open(&full).unwrap(), "kill")
        .unwrap()
        .unwrap()
        .length;
    assert_eq!(after_len, 2 * 2 * 1250);
    let after_dump = {
        let s = Store::open(&full).unwrap();
        dump(&s)
    };

    let runs = 16u32;
    let (mut before_seen, mut after_seen) = (0, 0);
    for i in 0..runs {
        let db = dir.path().join(format!("run{i}.db"));
        std::fs::copy(&base, &db).unwrap();
        // Kill points spread over the whole run and past it (a run can be slower than the first).
        let delay = span.mul_f64((i as f64 + 0.5) / runs as f64 * 1.6);
        let mut child = airlock(&db, bulk)
            .args(["jobs", "import"])
            .args(&files)
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        let store = Store::open(&db).unwrap();
        let d = dump(&store);
        let kill_len = chain_head(&store, "kill").unwrap().map(|h| h.length);
        // Wall-clock columns aside, the store is exactly one of the two states.
        if d == base_dump {
            assert_eq!(kill_len, None);
            before_seen += 1;
        } else {
            assert_eq!(kill_len, Some(after_len), "run {i}: partial chain");
            assert_eq!(d, after_dump, "run {i}: neither before nor after");
            after_seen += 1;
        }
        for tenant in ["acme", "kill"] {
            let r = verify_chain(&store, tenant, None).unwrap();
            assert!(r.ok, "run {i}, tenant {tenant}: {:?}", r.findings);
        }
    }
    eprintln!(
        "killed runs (bulk {bulk}): {before_seen} left the store as before, {after_seen} as after"
    );
    assert_eq!(before_seen + after_seen, runs);

    // Kills aimed at the write itself: the process is killed once its transaction shows on disk.
    // A kill that left the import's uncommitted write behind landed mid-write: reopening rolls it
    // back to exactly "before". Up to 32 tries (it stops after two landed kills), so imports that
    // outrun the watcher on a busy machine cannot fail the test.
    let mut landed = 0;
    for i in 0..32 {
        let db = dir.path().join(format!("mid{i}.db"));
        std::fs::copy(&base, &db).unwrap();
        let uncommitted = kill_mid_write(&db, &files, bulk);
        let store = Store::open(&db).unwrap();
        let d = dump(&store);
        assert!(
            d == base_dump || d == after_dump,
            "mid-write kill {i}: neither before nor after"
        );
        for tenant in ["acme", "kill"] {
            let r = verify_chain(&store, tenant, None).unwrap();
            assert!(
                r.ok,
                "mid-write kill {i}, tenant {tenant}: {:?}",
                r.findings
            );
        }
        if uncommitted && d == base_dump {
            assert_eq!(chain_head(&store, "kill").unwrap().map(|h| h.length), None);
            landed += 1;
            if landed == 2 {
                break;
            }
        }
    }
    assert!(
        landed > 0,
        "no kill landed while the import was writing (bulk {bulk})"
    );
}
