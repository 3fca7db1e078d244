//! The node WAL end to end through the real binary: the inspector's JSON and exit codes on the
//! vectors, a real EFBIG from a file size limit, and SIGKILL at random moments with 8 and 1,000
//! appenders (every acknowledged frame survives recovery with its exact bytes).

mod common;

use airlock::core::wal::{examine, reader::read_frames, Outcome};
use rand::Rng;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

fn vector(name: &str) -> PathBuf {
    Path::new("../shared/vectors/wal").join(name)
}

fn airlock(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run airlock")
}

/// How many frames a vector's expected JSON lists.
fn got_basic_frames(want: &serde_json::Value) -> serde_json::Value {
    want["frames"].as_array().map_or(0, |f| f.len()).into()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn inspect_json_matches_the_vectors_and_exit_codes_follow_the_outcome() {
    let basic = vector("basic.alwl");
    let out = airlock(&["wal", "inspect", basic.to_str().expect("path"), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let got = json(&out);
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(vector("basic.expected.json")).expect("vector"),
    )
    .expect("json");
    assert_eq!(got["frames"], want["frames"]);
    assert_eq!(got["node"], want["node"]);
    let recovery: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(vector("recovery.expected.json")).expect("vector"),
    )
    .expect("json");
    for (name, code) in [("zero-tail", 0), ("torn-tail", 1), ("mid-damage", 1)] {
        let path = vector(&format!("{name}.alwl"));
        let before = std::fs::read(&path).expect("vector");
        let out = airlock(&["wal", "inspect", path.to_str().expect("path"), "--json"]);
        assert_eq!(out.status.code(), Some(code), "{name}");
        let got = json(&out);
        for key in ["outcome", "offset", "validFrames", "cutBytes"] {
            assert_eq!(got[key], recovery[name][key], "{name}.{key}");
        }
        assert_eq!(std::fs::read(&path).expect("vector"), before, "read-only");
    }
    let out = airlock(&[
        "wal",
        "inspect",
        basic.to_str().expect("p"),
        "--json",
        "--frames",
        "2..4",
    ]);
    let lsns: Vec<u64> = json(&out)["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| f["lsn"].as_u64().expect("lsn"))
        .collect();
    assert_eq!(lsns, [2, 3]);
    // The frames are streamed as they are read: a range past the log still makes one JSON object.
    let none = json(&airlock(&[
        "wal",
        "inspect",
        basic.to_str().expect("p"),
        "--json",
        "--frames",
        "100..200",
    ]));
    assert_eq!(none["frames"], serde_json::json!([]));
    assert_eq!(none["validFrames"], got_basic_frames(&want));
    let bad = airlock(&[
        "wal",
        "inspect",
        basic.to_str().expect("p"),
        "--frames",
        "4..2",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = airlock(&["wal", "inspect", "/nonexistent/x.alwl"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.alwl"));
}

#[test]
fn recover_cuts_the_torn_tail_and_refuses_mid_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let torn = dir.path().join("t.alwl");
    std::fs::copy(vector("torn-tail.alwl"), &torn).expect("copy");
    let out = airlock(&["wal", "recover", torn.to_str().expect("p")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("offset 1358") && text.contains("t.alwl.torn-at-1358"),
        "{text}"
    );
    let original = std::fs::read(vector("torn-tail.alwl")).expect("vector");
    assert_eq!(
        std::fs::read(dir.path().join("t.alwl.torn-at-1358")).expect("saved"),
        &original[1358..]
    );
    let mid = dir.path().join("m.alwl");
    std::fs::copy(vector("mid-damage.alwl"), &mid).expect("copy");
    let out = airlock(&["wal", "recover", mid.to_str().expect("p")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("offset 520"));
    // --json says so on stdout too (a script gets the outcome and the offset).
    let out = airlock(&["wal", "recover", mid.to_str().expect("p"), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(
        (&v["outcome"], &v["offset"]),
        (&"refused".into(), &520.into())
    );
    // A log that cannot be read prints the error only: no half a JSON object on stdout.
    let missing = dir.path().join("missing.alwl");
    for cmd in ["inspect", "dump"] {
        let out = airlock(&["wal", cmd, missing.to_str().expect("p"), "--json"]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        assert!(
            out.stdout.is_empty(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Runs `airlock args` under a file size limit ([`common::with_file_size_limit`]).
fn with_file_size_limit(args: &[&str], limit: u64) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    common::with_file_size_limit(cmd, limit)
}

#[test]
fn a_real_efbig_fails_every_appender_with_that_error_and_nothing_hangs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("p");
    let started = Instant::now();
    let out = with_file_size_limit(
        &[
            "dev",
            "wal-bench",
            "--appenders",
            "64",
            "--entries",
            "100000",
            "--dir",
            d,
        ],
        256 << 10,
    );
    assert!(started.elapsed() < Duration::from_secs(30), "no hang");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("File too large") && err.contains("os error 27"),
        "{err}"
    );
    assert!(err.contains("raise the limit, or compact the log"), "{err}");

    let log = dir.path().join("n.alwl");
    let l = log.to_str().expect("p");
    let ev = r#"{"job_id":"use1-1-g1-00001","dc_id":"d","completed":1,"failed":0}"#;
    let args = [
        "wal",
        "append",
        l,
        "--node",
        "n",
        "--type",
        "JobProgressReported",
        "--json",
        ev,
    ];
    let out = with_file_size_limit(&args, 4096);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("os error 27"));
    let r = examine(&log).expect("examine");
    assert_eq!(
        r.outcome,
        Outcome::Clean,
        "the failed log still recovers cleanly"
    );
    assert_eq!(
        airlock(&args).status.code(),
        Some(0),
        "appends again once reopened"
    );
}

struct Ack {
    lsn: u64,
    hlc: String,
    job_id: String,
}

/// Starts a drill, kills it with SIGKILL `wait` after its first acknowledgement (or after 20 s
/// without one), returns the acks it printed.
fn drill_and_kill(log: &Path, appenders: usize, wait: Duration) -> Vec<Ack> {
    let mut child = Command::new(BIN)
        .args(["dev", "wal-drill", "--file", log.to_str().expect("p")])
        .args(["--appenders", &appenders.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drill");
    let stdout = child.stdout.take().expect("stdout");
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parts: Vec<&str> = line.split(' ').collect();
            if let [lsn, hlc, job] = parts[..] {
                if let Ok(lsn) = lsn.parse() {
                    let _ = first_tx.send(());
                    acks.push(Ack {
                        lsn,
                        hlc: hlc.to_string(),
                        job_id: job.to_string(),
                    });
                }
            }
        }
        acks
    });
    let _ = first_rx.recv_timeout(Duration::from_secs(20));
    std::thread::sleep(wait);
    // SAFETY: signalling our own child by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    reader.join().expect("reader")
}

/// The payload the drill appends for `job_id` (`a{appender}-{n}`), rebuilt independently.
fn drill_payload(job_id: &str, hlc: &str) -> Vec<u8> {
    let n: u64 = job_id.rsplit('-').next().expect("n").parse().expect("n");
    let value = serde_json::json!({"completed": n, "dc_id": "use1", "failed": 0, "hlc": hlc, "job_id": job_id});
    airlock::core::canonical::canonical_text(&value)
        .expect("jcs")
        .into_bytes()
}

fn kill_rounds(appenders: usize, rounds: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::thread_rng();
    let mut total_acks = 0;
    for round in 0..rounds {
        // A fresh log every 5 rounds keeps the files small; within one, each kill is recovered.
        let log = dir.path().join(format!("drill-{}.alwl", round / 5));
        let acks = drill_and_kill(&log, appenders, Duration::from_millis(rng.gen_range(0..40)));
        total_acks += acks.len();
        if !log.exists() {
            assert!(acks.is_empty(), "acked without a log file");
            continue;
        }
        let r = examine(&log).expect("examine");
        assert_ne!(r.outcome, Outcome::Refused, "round {round}: {r:?}");
        let (frames, _) = read_frames(&log).expect("read");
        let first = frames.first().map_or(1, |f| f.lsn);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.lsn, first + i as u64, "no gaps");
        }
        for a in &acks {
            let f = frames
                .get((a.lsn - first) as usize)
                .unwrap_or_else(|| panic!("round {round}: acked LSN {} lost", a.lsn));
            let payload: serde_json::Value = serde_json::from_slice(&f.payload).expect("payload");
            assert_eq!(payload["job_id"], a.job_id.as_str(), "LSN {}", a.lsn);
            assert_eq!(payload["hlc"], a.hlc.as_str(), "LSN {}", a.lsn);
            assert_eq!(f.hlc.text(Some("drill")), a.hlc);
            assert_eq!(f.payload, drill_payload(&a.job_id, &a.hlc), "exact bytes");
        }
    }
    assert!(total_acks > 0, "the drills acknowledged appends");
}

// 25 random moments each here (a debug build on a shared machine); the full 100 per appender count
// run in release mode through `airlock dev wal-crash-drill` (bench/wal.sh, docs/benchmarks/wal.md).
#[test]
fn sigkill_with_8_appenders_loses_no_acknowledged_frame() {
    kill_rounds(8, 25);
}

#[test]
fn sigkill_with_1000_appenders_loses_no_acknowledged_frame() {
    kill_rounds(1000, 25);
}

/// The drill command users run (`dev wal-crash-drill`) reports the rounds and finds nothing lost.
#[test]
fn the_crash_drill_command_checks_every_round() {
    let out = airlock(&[
        "dev",
        "wal-crash-drill",
        "--appenders",
        "16",
        "--rounds",
        "4",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let r = json(&out);
    assert_eq!(r["rounds"], 4);
    assert!(r["acked"].as_u64().expect("acked") > 0, "{r}");
    assert_eq!(r["problems"], serde_json::json!([]));
}

/// `wal append` runs the ledger's event validation before writing: what it refuses, `ledger
/// append` refuses too (exit 2, nothing written), and every event type it writes folds cleanly.
#[test]
fn wal_append_refuses_events_the_ledger_refuses_and_what_it_writes_folds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("g.alwl");
    let l = log.to_str().expect("p");
    let append = |t: &str, fields: &str| {
        airlock(&[
            "wal", "append", l, "--node", "gate-a", "--type", t, "--json", fields,
        ])
    };
    let ok = r#"{"job_id":"use1-1-g1-00001","assigned_dcs":["euw1"],"fence_token":1,"spec":{}}"#;
    for (fields, want) in [
        (ok.replace("use1-1-g1-00001", "x"), "job id \"x\""),
        (
            ok.replace("\"fence_token\":1", "\"fence_token\":-1"),
            "fence_token -1",
        ),
        (
            ok.replace("\"fence_token\":1", "\"fence_token\":18446744073709551616"),
            "fence_token 1.8446744073709552e19",
        ),
        (ok.replace("\"euw1\"", "\"eu\\u001bw1\""), "datacenter id"),
        (ok.replace("\"spec\":{}", "\"spec\":[]"), "spec must be"),
    ] {
        let out = append("JobCreated", &fields);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fields}: {err}");
        assert!(err.contains(want), "{fields}: {err}");
        assert!(!err.contains('\u{1b}'), "{err}");
        assert!(!log.exists(), "{fields}: nothing written");
    }
    let job = "use1-1-g1-00001";
    let events = [
        ("JobCreated", ok.to_string()),
        (
            "JobAccepted",
            format!(r#"{{"job_id":"{job}","dc_id":"euw1","worker_count":2,"fence_token":1}}"#),
        ),
        (
            "JobProgressReported",
            format!(r#"{{"job_id":"{job}","dc_id":"euw1","completed":3,"failed":0}}"#),
        ),
        (
            "JobCancellationRequested",
            format!(r#"{{"job_id":"{job}","reason":"r","requestor":"ops","fence_token":1}}"#),
        ),
        (
            "JobCancellationAcked",
            format!(r#"{{"job_id":"{job}","dc_id":"euw1","workflows_cancelled":1}}"#),
        ),
        (
            "JobCompleted",
            r#"{"job_id":"use1-1-g1-00002","final_status":"passed","aggregate_metrics":{}}"#.into(),
        ),
        (
            "JobFailed",
            r#"{"job_id":"use1-1-g1-00003","error":"boom","failed_dc":"euw1"}"#.into(),
        ),
        (
            "JobTimedOut",
            r#"{"job_id":"use1-1-g1-00004","timeout_type":"global","last_progress_hlc":null}"#
                .into(),
        ),
    ];
    for (t, fields) in &events {
        let out = append(t, fields);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{t}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let fold = airlock(&["ledger", "fold", "--json", l]);
    assert_eq!(
        fold.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fold.stderr)
    );
    let jobs = &json(&fold)["jobs"];
    assert_eq!(jobs[job]["status"], "cancelled");
    assert_eq!(jobs["use1-1-g1-00004"]["status"], "timed_out");
    // A refused append to an existing log leaves it byte for byte as it was.
    let before = std::fs::read(&log).expect("log");
    let out = append(
        "JobAccepted",
        r#"{"job_id":"x","dc_id":"euw1","worker_count":2,"fence_token":1}"#,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&log).expect("log"), before);
}

/// A key given twice in `wal append --json` (at any depth) is refused naming the key and its JSON
/// path, exit 2, nothing written (a last-wins parse would store one value silently).
#[test]
fn wal_append_refuses_a_repeated_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("g.alwl");
    let l = log.to_str().expect("p");
    for (fields, key, path) in [
        (
            r#"{"job_id":"use1-1-g1-00001","job_id":"use1-1-g1-00002","assigned_dcs":["euw1"],"fence_token":1,"spec":{}}"#,
            "job_id",
            "$.job_id",
        ),
        (
            r#"{"job_id":"use1-1-g1-00001","assigned_dcs":["euw1"],"fence_token":1,"fence_token":2,"spec":{}}"#,
            "fence_token",
            "$.fence_token",
        ),
        (
            r#"{"job_id":"use1-1-g1-00001","assigned_dcs":["euw1"],"fence_token":1,"spec":{"a":{"b":1,"b":2}}}"#,
            "b",
            "$.spec.a.b",
        ),
    ] {
        let out = airlock(&[
            "wal",
            "append",
            l,
            "--node",
            "gate-a",
            "--type",
            "JobCreated",
            "--json",
            fields,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("key \"{key}\" appears twice")) && err.contains(path),
            "{err}"
        );
        assert!(!log.exists(), "nothing written");
    }
}

/// `wal compact` on a log with a torn tail says what it cut and where it saved it, in the words
/// of `wal recover`, and `--json` carries recover's object as `recovery`.
#[test]
fn compact_reports_the_torn_tail_it_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read(vector("torn-tail.alwl")).expect("vector");
    let torn = dir.path().join("t.alwl");
    std::fs::write(&torn, &original).expect("copy");
    let out = airlock(&["wal", "compact", torn.to_str().expect("p")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cut a torn tail of 20 bytes at offset 1358")
            && text.contains("saved it as")
            && text.contains("t.alwl.torn-at-1358"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("t.alwl.torn-at-1358")).expect("saved"),
        &original[1358..]
    );
    let again = dir.path().join("j.alwl");
    std::fs::write(&again, &original).expect("copy");
    let out = airlock(&["wal", "compact", "--json", again.to_str().expect("p")]);
    assert_eq!(out.status.code(), Some(0));
    let r = json(&out)["recovery"].clone();
    assert_eq!(r["outcome"], "torn-tail", "{r}");
    assert_eq!(r["offset"], 1358);
    assert_eq!(r["cutBytes"], 20);
    assert!(
        r["savedTail"]
            .as_str()
            .is_some_and(|s| s.ends_with("j.alwl.torn-at-1358")),
        "{r}"
    );
    // A clean log: nothing cut, nothing said about it.
    let out = airlock(&["wal", "compact", again.to_str().expect("p")]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("torn"));
    let out = airlock(&["wal", "compact", "--json", again.to_str().expect("p")]);
    assert_eq!(json(&out)["recovery"]["outcome"], "clean");
}
