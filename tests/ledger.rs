//! The job ledger end to end through the `airlock` binary: the vectors via `ledger fold --json`
//! and `ledger conflicts --json`, exit codes, and crash drills killed with SIGKILL during appends,
//! checkpoints and compactions, which must fold to a prefix of the appended events that contains
//! every acknowledged one.

use airlock::core::ledger::append::drill_event;
use airlock::core::ledger::{source::fold_ledger, Event, Fold, LedgerRecord, Occurrence};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

fn airlock() -> Command {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
}

fn vector(name: &str) -> String {
    format!("../shared/vectors/ledger/{name}")
}

#[test]
fn fold_json_of_the_vector_wals_is_expected_json_exactly() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(vector("expected.json")).unwrap()).unwrap();
    for order in [
        ["gate-a.alwl", "gate-b.alwl"],
        ["gate-b.alwl", "gate-a.alwl"],
    ] {
        let out = airlock()
            .args([
                "ledger",
                "fold",
                "--json",
                &vector(order[0]),
                &vector(order[1]),
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, json!({"jobs": expected["jobs"]}));
    }
}

#[test]
fn conflicts_json_names_winner_losers_and_rule() {
    let out = airlock()
        .args([
            "ledger",
            "conflicts",
            "--json",
            &vector("gate-a.alwl"),
            &vector("gate-b.alwl"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<(&str, &str, &str)> = got["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["jobId"].as_str().unwrap(),
                d["rule"].as_str().unwrap(),
                d["losers"][0]["event"]["type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            ("euw1-1767614400050-gate7-00001", "fence", "JobCreated"),
            (
                "use1-1767614400000-gate42-00001",
                "cancel-wins",
                "JobCompleted"
            ),
            ("use1-1767614400005-gate42-00003", "hlc", "JobFailed"),
        ]
    );
}

#[test]
fn exit_codes_stale_fence_is_1_bad_input_is_2() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("g.alwl");
    let wal = wal.to_str().unwrap();
    let created = r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","spec":{},"assigned_dcs":["use1"],"fence_token":5}"#;
    let run = |args: &[&str]| airlock().args(args).output().unwrap();
    let ok = run(&[
        "ledger", "append", wal, "--node", "gate-a", "--event", created,
    ]);
    assert_eq!(ok.status.code(), Some(0));
    let accept = r#"{"type":"JobAccepted","job_id":"use1-1-g1-00001","dc_id":"use1","worker_count":1,"fence_token":4}"#;
    let stale = run(&["ledger", "append", wal, "--event", accept]);
    assert_eq!(stale.status.code(), Some(1));
    let err = String::from_utf8_lossy(&stale.stderr);
    assert!(err.contains("holds 4") && err.contains("is 5"), "{err}");
    let bad = run(&["ledger", "append", wal, "--event", "{not json"]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = run(&["ledger", "fold", "/nonexistent/x.alwl"]);
    assert_eq!(missing.status.code(), Some(2));
    let not_wal = run(&["ledger", "fold", &vector("expected.json")]);
    assert_eq!(not_wal.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&not_wal.stderr).contains("not a ledger WAL"));
}

/// The reference: the first `m` drill events with increasing HLCs, folded.
fn reference(m: u64) -> Value {
    let mut fold = Fold::default();
    for i in 0..m {
        let req = drill_event(i);
        let mut fields = req.fields.clone();
        fields.insert("hlc".into(), json!(format!("{}:0:gate-drill", 1000 + i)));
        fields.insert("type".into(), json!(req.event_type.name()));
        let event = Event::from_json(&Value::Object(fields).to_string()).unwrap();
        let at = Occurrence {
            source: "r".into(),
            lsn: i + 1,
        };
        fold.apply(LedgerRecord::new(event, at));
    }
    without_hlcs(&fold)
}

fn without_hlcs(fold: &Fold) -> Value {
    let mut v = serde_json::to_value(fold.views()).unwrap();
    for (_, job) in v["jobs"].as_object_mut().unwrap() {
        job.as_object_mut().unwrap().remove("decidedBy");
    }
    v
}

/// Runs a drill on a ledger holding `before` events, kills it, checks it; returns the events now.
fn drill_and_kill(wal: &Path, before: u64, kill_after: usize, checkpoint_every: u64) -> u64 {
    let mut child = airlock()
        .args([
            "ledger",
            "drill",
            wal.to_str().unwrap(),
            "--events",
            "1000000",
        ])
        .args(["--checkpoint-every", &checkpoint_every.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = 0u64;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.starts_with("acked ") {
            acked += 1;
        }
        if acked as usize >= kill_after {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for line in lines.map_while(Result::ok) {
        if line.starts_with("acked ") {
            acked += 1;
        }
    }
    // Recovery (as the next open does), then the fold: a prefix with every acknowledged event.
    airlock::core::wal::recover(wal).unwrap();
    let fold = fold_ledger(wal, "drill").unwrap();
    assert!(fold.findings().is_empty(), "{:?}", fold.findings());
    let m = fold.events_applied();
    let acked = before + acked;
    assert!(m >= acked, "{m} events folded, {acked} acknowledged");
    assert!(
        m <= acked + 1,
        "{m} events folded, only {acked} acknowledged (+1 in flight)"
    );
    assert_eq!(without_hlcs(&fold), reference(m), "after {m} events");
    m
}

#[test]
fn sigkill_during_append_checkpoint_and_compaction_folds_to_an_acknowledged_prefix() {
    // Kill points spread over appends; with a checkpoint + compaction every 7 or 3 events, many
    // kills land inside one of them.
    for (kill_after, every) in [(25usize, 0u64), (40, 7), (61, 3), (17, 5)] {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("drill.alwl");
        let m = drill_and_kill(&wal, 0, kill_after, every);
        // And a second run on the same ledger continues it.
        drill_and_kill(&wal, m, kill_after / 2 + 1, every);
    }
}
