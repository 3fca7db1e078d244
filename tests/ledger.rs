//! The job ledger end to end through the `airlock` binary: the vectors via `ledger fold --json`
//! and `ledger conflicts --json`, exit codes, and crash drills killed with SIGKILL during appends,
//! checkpoints and compactions, which must fold to a prefix of the appended events that contains
//! every acknowledged one; and REGIONAL/GLOBAL appends confirmed by a real PostgreSQL 15 (started
//! by the tests, `pg_support`), with PostgreSQL's LSN carried into the checkpoint.

mod common;
#[path = "pg_support/mod.rs"]
mod pg_support;

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

// ---------------------------------------------------------------- REGIONAL / GLOBAL by PostgreSQL

fn created_event(n: u32) -> String {
    json!({"type": "JobCreated", "job_id": format!("use1-1700000000000-g1-{n:05}"),
           "spec": {"n": n}, "assigned_dcs": ["use1"], "fence_token": 1})
    .to_string()
}

/// The event frames PostgreSQL stores at `level` or above.
fn stored_frames(db: &str, level: i16) -> Vec<Vec<u8>> {
    let mut pg = postgres::Client::connect(db, postgres::NoTls).unwrap();
    let mut v: Vec<Vec<u8>> = pg
        .query(
            "SELECT frame FROM airlock.ledger_event WHERE level >= $1",
            &[&level],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    v.sort();
    v
}

/// The WAL's event frames (bytes as stored).
fn wal_events(wal: &Path) -> Vec<Vec<u8>> {
    let (frames, _) = airlock::core::wal::reader::read_frames(wal).unwrap();
    let mut v: Vec<Vec<u8>> = frames
        .iter()
        .filter(|f| f.watermark().is_none())
        .map(|f| f.encode())
        .collect();
    v.sort();
    v
}

fn pg_lsn(text: &str) -> u64 {
    let (hi, lo) = text.split_once('/').unwrap();
    u64::from_str_radix(hi, 16).unwrap() << 32 | u64::from_str_radix(lo, 16).unwrap()
}

/// `ledger append --durability regional --db postgres://...` confirms through PostgreSQL; the
/// confirmation (node WAL LSN and PostgreSQL LSN) is recorded beside the log and carried by the next
/// checkpoint, which a later process takes; GLOBAL without a standby leaves the event LOCAL (exit 1)
/// and the next REGIONAL append confirms it too; no PostgreSQL: nothing appended.
#[test]
fn one_shot_regional_append_is_confirmed_and_the_checkpoint_records_the_postgres_lsn() {
    let db = pg_support::fresh_db();
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("gate-1.alwl");
    let w = wal.to_str().unwrap();
    let append = |n: u32, level: &str, db: Option<&str>| {
        let mut c = airlock();
        if let Some(db) = db {
            c.args(["--db", db]);
        }
        c.args(["ledger", "append", w, "--node", "gate-1", "--json"])
            .args(["--event", &created_event(n), "--durability", level])
            .env_remove("AIRLOCK_LEDGER_POSTGRES")
            .output()
            .unwrap()
    };
    let out = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let mut pg_lsns = Vec::new();
    for n in 1..=2 {
        let o = append(n, "regional", Some(&db));
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["durability"], "REGIONAL", "{v}");
        pg_lsns.push(v["postgresLsn"].as_str().unwrap().to_string());
    }
    // LSNs: event 1, its REGIONAL watermark 2, event 3, watermark 4.
    assert!(pg_lsn(&pg_lsns[0]) < pg_lsn(&pg_lsns[1]), "{pg_lsns:?}");
    assert_eq!(stored_frames(&db, 1), wal_events(&wal));
    let record: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("gate-1.alwl.confirmations.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        record,
        json!({"REGIONAL": {"walLsn": 3, "postgresLsn": pg_lsns[1]}})
    );

    // A checkpoint taken by another process carries the confirmation beside the watermarks.
    let o = airlock()
        .args(["ledger", "checkpoint", w, "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let cp: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("gate-1.alwl.checkpoint.json")).unwrap(),
    )
    .unwrap();
    assert!(cp["watermarks"]["REGIONAL"].as_u64().unwrap() >= 3, "{cp}");
    assert_eq!(
        cp["state"]["confirmations"],
        json!({"REGIONAL": {"walLsn": 3, "postgresLsn": pg_lsns[1]}})
    );
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed["confirmations"], cp["state"]["confirmations"]);

    // GLOBAL needs a synchronous standby: the event stays LOCAL, exit 1, said so.
    let o = append(3, "global", Some(&db));
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("LOCAL") && out(&o).contains("synchronous standby"),
        "{}",
        out(&o)
    );
    assert_eq!(stored_frames(&db, 1).len(), 2);
    // Compacted, the record file gone: the checkpoint still knows what was confirmed, and the next
    // REGIONAL append confirms the unconfirmed GLOBAL attempt's event with its own (read back from
    // the WAL).
    let o = airlock().args(["ledger", "compact", w]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    std::fs::remove_file(dir.path().join("gate-1.alwl.confirmations.json")).unwrap();
    let o = append(4, "regional", Some(&db));
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let stored = stored_frames(&db, 1);
    assert_eq!(stored.len(), 4, "events 1..4 all REGIONAL");
    for f in wal_events(&wal) {
        assert!(
            stored.contains(&f),
            "a WAL event frame is not in PostgreSQL"
        );
    }
    let record: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("gate-1.alwl.confirmations.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["REGIONAL"]["postgresLsn"], v["postgresLsn"]);
    assert_eq!(record["REGIONAL"]["walLsn"], v["lsn"]);

    // No PostgreSQL named, or one that cannot be reached: refused (exit 2), nothing appended.
    let before = std::fs::read(&wal).unwrap();
    let o = append(5, "regional", None);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("--db postgres://"), "{}", out(&o));
    let gone = format!(
        "postgresql://postgres@{}/x",
        dir.path()
            .join("no-such-socket")
            .display()
            .to_string()
            .replace('/', "%2F")
    );
    let o = append(5, "regional", Some(&gone));
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("nothing was appended"), "{}", out(&o));
    assert_eq!(std::fs::read(&wal).unwrap(), before);
}

/// Unconfirmed frames beyond the in-memory limit are dropped from memory (a spill) and read back
/// from the WAL in bounded batches by the next confirmation: every frame reaches PostgreSQL, one
/// watermark per batch.
#[test]
fn unconfirmed_frames_past_the_limit_spill_and_are_confirmed_from_the_wal_in_batches() {
    use airlock::core::ledger::append::{AppendRequest, LedgerLog};
    use airlock::core::ledger::durability::{
        confirm_pending, frame_bytes, Durability, PendingFrames, PendingLimits,
    };
    let db = pg_support::fresh_db();
    let pg = airlock::core::store::postgres::PgStore::connect(&db).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("gate-2.alwl");
    let mut log = LedgerLog::open(&wal, Some("gate-2"), Default::default()).unwrap();
    let limits = PendingLimits {
        frames: 3,
        bytes: 1 << 20,
    };
    let mut pending = PendingFrames::new(Durability::Regional, limits);
    // First append on a fresh log: read back (one frame), confirmed, then frames are held.
    let req = AppendRequest::from_json(&created_event(1), None).unwrap();
    let a = log.append(&req).unwrap();
    pending.push(frame_bytes(&req, &a).unwrap());
    let c = confirm_pending(&mut log, &mut pg.client(), &mut pending, a.lsn).unwrap();
    assert_eq!(c.unwrap().frames, 1);
    assert!(!pending.is_spilled());
    // PostgreSQL "down" for ten appends: three are held, the fourth spills, memory stays empty.
    let mut last = 0;
    for n in 2..=11 {
        let req = AppendRequest::from_json(&created_event(n), None).unwrap();
        let a = log.append(&req).unwrap();
        pending.push(frame_bytes(&req, &a).unwrap());
        assert!(pending.held().0 <= 3);
        last = a.lsn;
    }
    assert!(pending.is_spilled());
    assert_eq!(pending.spills(), 1);
    assert_eq!(pending.held(), (0, 0));
    let c = confirm_pending(&mut log, &mut pg.client(), &mut pending, last)
        .unwrap()
        .unwrap();
    assert_eq!(c.frames, 1, "ten frames in batches of 3, 3, 3, 1");
    assert!(!pending.is_spilled());
    let rec = &log.confirmations()["REGIONAL"];
    assert_eq!(rec.wal_lsn, last);
    assert_eq!(rec.postgres_lsn, c.watermark.to_string());
    log.close().unwrap();
    assert_eq!(stored_frames(&db, 1), wal_events(&wal));
    // One REGIONAL watermark for the first confirmation and one per batch.
    let (frames, _) = airlock::core::wal::reader::read_frames(&wal).unwrap();
    assert_eq!(
        frames.iter().filter(|f| f.watermark().is_some()).count(),
        1 + 4
    );
}

/// GLOBAL through a synchronous standby: the one-shot append is applied on the standby before it
/// returns, and the checkpoint records the GLOBAL confirmation with PostgreSQL's LSN.
#[test]
fn one_shot_global_append_with_a_sync_standby_is_recorded_in_the_checkpoint() {
    // pg_basebackup asks for a spread checkpoint: completion target 0 makes it immediate (with the
    // default 0.9 the standby took ~100 s to make here).
    let primary =
        pg_support::Cluster::init(&["wal_level=replica", "checkpoint_completion_target=0"]);
    let db = primary.create_db();
    let standby = primary.standby(&["hot_standby=on"]);
    primary.require_sync_standby();
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("gate-3.alwl");
    let w = wal.to_str().unwrap();
    let o = airlock()
        .args([
            "--db", &db, "ledger", "append", w, "--node", "gate-3", "--json",
        ])
        .args(["--event", &created_event(1), "--durability", "global"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["durability"], "GLOBAL", "{v}");
    // remote_apply: the standby has the frame already.
    let standby_url = standby.url(db.rsplit('/').next().unwrap());
    let mut s = postgres::Client::connect(&standby_url, postgres::NoTls).unwrap();
    let on_standby: i64 = s
        .query_one(
            "SELECT count(*) FROM airlock.ledger_event WHERE level = 2",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(on_standby, 1);
    let o = airlock()
        .args(["ledger", "checkpoint", w])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!(
            "GLOBAL: confirmed by PostgreSQL up to LSN 1 (PostgreSQL LSN {})",
            v["postgresLsn"].as_str().unwrap()
        )),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let cp: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("gate-3.alwl.checkpoint.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        cp["state"]["confirmations"],
        json!({"GLOBAL": {"walLsn": 1, "postgresLsn": v["postgresLsn"]}})
    );
}

/// A WAL whose every frame is not a ledger event (job ids that are not SPEC 12's) folds with the
/// first findings listed and the rest counted, not held in memory.
#[test]
fn fold_of_a_log_of_unfoldable_frames_lists_the_first_findings_and_counts_the_rest() {
    use airlock::core::ledger::fold::KEPT_FINDINGS;
    use airlock::core::wal::{
        encode_frame_into, file_header, node_hash, EventType, FrameState, FrameType, WalHlc,
    };
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("other.alwl");
    // Valid frames (recovery accepts them) of JobProgressReported events whose job ids are bare
    // numbers. (`dev wal-gen` used to write such logs; its logs now fold clean.)
    let frames = KEPT_FINDINGS as u64 + 2_500;
    let mut bytes = file_header().to_vec();
    let hash = node_hash("bench");
    for lsn in 1..=frames {
        let (physical, logical) = (1_700_000_000_000 + lsn / 1000, (lsn % 1000) as u16);
        let payload = format!(
            r#"{{"completed":1,"dc_id":"use1","failed":0,"hlc":"{physical}:{logical}:bench","job_id":"{lsn:015}"}}"#
        );
        let hlc = WalHlc {
            physical,
            logical,
            node_hash: hash,
        };
        let t = FrameType::Event(EventType::JobProgressReported);
        encode_frame_into(
            &mut bytes,
            lsn,
            hlc,
            FrameState::Pending,
            t,
            &[payload.as_bytes()],
        );
    }
    std::fs::write(&wal, bytes).unwrap();
    let out = airlock()
        .args(["ledger", "fold"])
        .arg(&wal)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let listed = err.lines().filter(|l| l.contains("(byte offset ")).count();
    assert_eq!(listed, KEPT_FINDINGS);
    assert!(
        err.contains("LSN 1 (byte offset 8)"),
        "the first frames are the ones listed"
    );
    let more = frames - KEPT_FINDINGS as u64;
    assert!(
        err.contains(&format!("... and {more} more not kept")),
        "{}",
        err.lines().last().unwrap_or("")
    );
}

/// A key given twice in `ledger append --event` (at any depth) is refused naming the key and its
/// JSON path, exit 2, and nothing is appended (a last-wins parse would store one value silently).
#[test]
fn append_refuses_a_repeated_key_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = dir.path().join("g.alwl");
    let w = wal.to_str().unwrap();
    let run = |event: &str| {
        airlock()
            .args(["ledger", "append", w, "--node", "gate-a", "--event", event])
            .output()
            .unwrap()
    };
    let created = r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","spec":{},"assigned_dcs":["use1"],"fence_token":5}"#;
    for (event, key, path) in [
        (
            r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","job_id":"use1-1-g1-00002","spec":{},"assigned_dcs":["use1"],"fence_token":5}"#,
            "job_id",
            "$.job_id",
        ),
        (
            r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","spec":{},"assigned_dcs":["use1"],"fence_token":5,"fence_token":1}"#,
            "fence_token",
            "$.fence_token",
        ),
        (
            r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","spec":{"x":[{"a":1,"a":2}]},"assigned_dcs":["use1"],"fence_token":5}"#,
            "a",
            "$.spec.x[0].a",
        ),
    ] {
        let out = run(event);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("key \"{key}\" appears twice")) && err.contains(path),
            "{err}"
        );
        assert!(!wal.exists(), "nothing written");
    }
    // An invalid event is bad input too (exit 2), refused before the log is made.
    let bad = created.replace("use1-1-g1-00001", "x");
    let out = run(&bad);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!wal.exists(), "no log made for a refused event");
    assert_eq!(run(created).status.code(), Some(0));
    let before = std::fs::read(&wal).unwrap();
    let accept = r#"{"type":"JobAccepted","type":"JobFailed","job_id":"use1-1-g1-00001","dc_id":"use1","worker_count":1,"fence_token":5}"#;
    let out = run(accept);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("$.type"));
    assert_eq!(std::fs::read(&wal).unwrap(), before, "the log is unchanged");
}

/// `ledger compact` on a log with a torn tail says what it cut and where it saved it.
#[test]
fn compact_reports_the_torn_tail_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t.alwl");
    std::fs::copy("../shared/vectors/wal/torn-tail.alwl", &log).unwrap();
    let out = airlock()
        .args(["ledger", "compact", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cut a torn tail of 20 bytes at offset 1358")
            && text.contains("t.alwl.torn-at-1358"),
        "{text}"
    );
    assert!(dir.path().join("t.alwl.torn-at-1358").exists());
}

/// Appends drill events `events` to the ledger at `path` of node `gate-x`.
fn append_drill(path: &Path, events: impl IntoIterator<Item = u64>) {
    use airlock::core::ledger::append::LedgerLog;
    let mut log = LedgerLog::open(path, Some("gate-x"), Default::default()).unwrap();
    for i in events {
        log.append(&drill_event(i)).unwrap();
    }
    log.close().unwrap();
}

/// Two WALs of one node: a copy folds as the log alone (each event once, exit 0); copies that hold
/// different frames at LSN 5 are refused (exit 1, nothing on stdout) naming both files, the node,
/// the LSN and `ledger diff`, which reports the same LSN.
#[test]
fn fold_of_two_copies_of_a_node_log_folds_a_copy_once_and_refuses_divergent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.alwl");
    append_drill(&a, 0..4);
    let stale = dir.path().join("stale.alwl");
    std::fs::copy(&a, &stale).unwrap();
    append_drill(&a, 4..9);
    let copy = dir.path().join("copy.alwl");
    std::fs::copy(&a, &copy).unwrap();
    let (a, copy) = (a.to_str().unwrap(), copy.to_str().unwrap());
    let alone = fold_json(&[a]);
    common::assert_exit(&alone, 0, "jobs");
    for wals in [[a, copy], [copy, a]] {
        let both = fold_json(&wals);
        common::assert_exit(&both, 0, "jobs");
        assert_eq!(both.stdout, alone.stdout, "{wals:?}");
    }
    // The stale copy then took other events at LSN 5 and 6 (another job's).
    append_drill(&stale, [10, 11]);
    let stale = stale.to_str().unwrap();
    for wals in [[a, stale], [stale, a]] {
        let refused = fold_json(&wals);
        common::assert_exit(&refused, 1, "refused: ");
        let err = String::from_utf8_lossy(&refused.stderr);
        for want in [a, stale, "gate-x", "LSN 5", "airlock ledger diff"] {
            assert!(err.contains(want), "{wals:?}: {want:?} not in {err}");
        }
        assert!(refused.stdout.is_empty(), "nothing folded: {wals:?}");
    }
    let diff = airlock()
        .args(["ledger", "diff", a, stale])
        .output()
        .unwrap();
    common::assert_exit(&diff, 1, "first divergent LSN 5");
}

/// Runs `airlock ledger ARGS...` and checks its exit code.
fn ledger_ok(args: &[&str]) {
    let out = airlock().arg("ledger").args(args).output().unwrap();
    common::assert_exit(&out, 0, "");
}

/// A compacted copy whose checkpoint is gone (it starts at LSN 13) folds with a full copy without
/// a finding: the set holds LSN 1..=12 (alone it is a finding, exit 1). Checkpoints beside two
/// copies that claim the same LSNs but hold different fold states are refused (exit 1, both named).
#[test]
fn fold_of_copies_with_checkpoints_reports_only_what_the_set_misses_and_refuses_divergent_checkpoints(
) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.alwl");
    append_drill(&a, 0..12);
    let full = dir.path().join("full.alwl");
    std::fs::copy(&a, &full).unwrap();
    let (a_s, full_s) = (a.to_str().unwrap(), full.to_str().unwrap());
    ledger_ok(&["checkpoint", a_s]);
    ledger_ok(&["compact", a_s]);
    let a_cp = dir.path().join("a.alwl.checkpoint.json");
    let kept = std::fs::read(&a_cp).unwrap();
    std::fs::remove_file(&a_cp).unwrap();
    common::assert_exit(&fold_json(&[a_s]), 1, "1..=12 were compacted or cut away");
    let alone = fold_json(&[full_s]);
    common::assert_exit(&alone, 0, "jobs");
    for wals in [[a_s, full_s], [full_s, a_s]] {
        let both = fold_json(&wals);
        common::assert_exit(&both, 0, "jobs");
        assert!(!common::text(&both).contains("finding"), "{wals:?}");
        assert_eq!(both.stdout, alone.stdout, "{wals:?}");
    }
    // a's checkpoint back; beside the full copy, one of another log of gate-x at the same LSN.
    std::fs::write(&a_cp, kept).unwrap();
    let other = dir.path().join("other.alwl");
    append_drill(&other, 100..112);
    ledger_ok(&["checkpoint", other.to_str().unwrap()]);
    let full_cp = dir.path().join("full.alwl.checkpoint.json");
    std::fs::copy(dir.path().join("other.alwl.checkpoint.json"), &full_cp).unwrap();
    let refused = fold_json(&[a_s, full_s]);
    common::assert_exit(&refused, 1, "refused: ");
    let err = String::from_utf8_lossy(&refused.stderr);
    for want in [a_cp.to_str().unwrap(), full_cp.to_str().unwrap(), "LSN 12"] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert!(refused.stdout.is_empty(), "nothing folded");
}

/// `airlock ledger fold --json WALS...`.
fn fold_json(wals: &[&str]) -> std::process::Output {
    airlock()
        .args(["ledger", "fold", "--json"])
        .args(wals)
        .output()
        .unwrap()
}
