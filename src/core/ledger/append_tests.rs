//! Appends through the WAL writer, the fence check, and checkpoint + compaction equivalence.

use super::append::{compact, AppendRequest, LedgerLog};
use super::source::fold_ledger;
use super::LedgerError;
use crate::core::wal::WalOptions;
use serde_json::json;
use std::path::Path;

pub(crate) fn opts() -> WalOptions {
    WalOptions {
        prealloc_chunk: 0,
        ..WalOptions::default()
    }
}

pub(crate) fn request(i: u64) -> AppendRequest {
    let job = format!("use1-1700000000000-gate1-{:05}", i / 6 % 100_000);
    let v = match i % 6 {
        0 => {
            json!({"type": "JobCreated", "job_id": job, "spec": {"i": i}, "assigned_dcs": ["euw1", "use1"], "fence_token": 1})
        }
        1 => {
            json!({"type": "JobAccepted", "job_id": job, "dc_id": "use1", "worker_count": 4, "fence_token": 1})
        }
        2 => {
            json!({"type": "JobProgressReported", "job_id": job, "dc_id": "use1", "completed": i, "failed": 0})
        }
        3 => {
            json!({"type": "JobCancellationRequested", "job_id": job, "reason": "r", "requestor": "ops", "fence_token": 1})
        }
        4 => {
            json!({"type": "JobCompleted", "job_id": job, "final_status": "passed", "aggregate_metrics": {}})
        }
        _ => {
            json!({"type": "JobCancellationAcked", "job_id": job, "dc_id": "use1", "workflows_cancelled": 1})
        }
    };
    AppendRequest::from_json(&v.to_string(), None).unwrap()
}

fn snapshot(path: &Path) -> (String, String) {
    let fold = fold_ledger(path, "L").unwrap();
    let views = serde_json::to_string(&fold.views()).unwrap();
    let decisions = serde_json::to_string(&fold.decisions()).unwrap();
    (views, decisions)
}

#[test]
fn stale_fence_is_refused_with_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.alwl");
    let mut log = LedgerLog::open(&path, Some("gate-a"), opts()).unwrap();
    let created = json!({"type": "JobCreated", "job_id": "use1-1-g-00001", "spec": {}, "assigned_dcs": ["use1"], "fence_token": 3});
    log.append(&AppendRequest::from_json(&created.to_string(), None).unwrap())
        .unwrap();
    let accept = json!({"type": "JobAccepted", "job_id": "use1-1-g-00001", "dc_id": "use1", "worker_count": 1, "fence_token": 2});
    let err = log
        .append(&AppendRequest::from_json(&accept.to_string(), None).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::StaleFence {
                given: 2,
                current: 3,
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("holds 2") && msg.contains("is 3"), "{msg}");
    let progress = json!({"type": "JobProgressReported", "job_id": "use1-1-g-00001", "dc_id": "use1", "completed": 1, "failed": 0});
    let stale = AppendRequest::from_json(&progress.to_string(), Some(1)).unwrap();
    assert!(matches!(
        log.append(&stale),
        Err(LedgerError::StaleFence { .. })
    ));
    let ok = AppendRequest::from_json(&progress.to_string(), Some(3)).unwrap();
    let acked = log.append(&ok).unwrap();
    assert_eq!((acked.lsn, acked.durability), (2, "LOCAL"));
    assert!(acked.hlc.ends_with(":gate-a"));
    // Refused appends wrote nothing: two events in the log.
    log.close().unwrap();
    let fold = fold_ledger(&path, "L").unwrap();
    assert_eq!(fold.events_applied(), 2);
}

#[test]
fn bad_events_are_refused_before_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.alwl");
    let mut log = LedgerLog::open(&path, Some("gate-a"), opts()).unwrap();
    for (text, want) in [
        (
            r#"{"type": "JobCreated", "job_id": "x", "spec": {}, "assigned_dcs": ["a"], "fence_token": 1}"#,
            "job id",
        ),
        (r#"{"type": "JobMoved"}"#, "needs \"type\""),
        (
            r#"{"type": "JobFailed", "job_id": "r-1-g-00001", "error": "e", "failed_dc": "a", "hlc": "1:0:x"}"#,
            "leave \"hlc\" out",
        ),
        (
            r#"{"type": "JobFailed", "job_id": "r-1-g-00001", "error": "e"}"#,
            "missing field",
        ),
    ] {
        let err = AppendRequest::from_json(text, None).and_then(|r| log.append(&r).map(|_| ()));
        let msg = err.unwrap_err().to_string();
        assert!(msg.contains(want), "{text}: {msg}");
    }
    assert_eq!(log.fold().events_applied(), 0);
}

#[test]
fn restart_after_checkpoint_and_compaction_folds_identically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.alwl");
    let plain = dir.path().join("plain.alwl");
    let mut log = LedgerLog::open(&path, Some("gate-a"), opts()).unwrap();
    for i in 0..40 {
        log.append(&request(i)).unwrap();
    }
    log.checkpoint().unwrap();
    for i in 40..70 {
        log.append(&request(i)).unwrap();
    }
    log.close().unwrap();
    // The same frames without checkpoint or compaction: the reference.
    std::fs::copy(&path, &plain).unwrap();
    let reference = snapshot(&plain);
    assert_eq!(snapshot(&path), reference, "checkpoint + later frames");
    let report = compact(&path).unwrap();
    assert!(report.frames_after < report.frames_before);
    assert_eq!(snapshot(&path), reference, "after compaction");
    // Restart: reopen (node taken from the log), append, checkpoint and compact again; the
    // reference gets the same new frames byte for byte.
    let mut log = LedgerLog::open(&path, None, opts()).unwrap();
    assert_eq!(log.node(), "gate-a");
    for i in 70..80 {
        log.append(&request(i)).unwrap();
    }
    log.close().unwrap();
    let mut tail = Vec::new();
    for f in crate::core::wal::WalReader::open(&path).unwrap() {
        let f = f.unwrap();
        if f.lsn > report.last_lsn.unwrap() {
            tail.extend_from_slice(&f.encode());
        }
    }
    let mut reference_bytes = std::fs::read(&plain).unwrap();
    reference_bytes.extend_from_slice(&tail);
    std::fs::write(&plain, reference_bytes).unwrap();
    let mut log = LedgerLog::open(&path, None, opts()).unwrap();
    log.checkpoint().unwrap();
    log.close().unwrap();
    compact(&path).unwrap();
    assert_eq!(
        snapshot(&path),
        snapshot(&plain),
        "after restart, checkpoint and compaction"
    );
}

#[test]
fn a_replicated_log_compacts_only_what_postgres_confirmed() {
    use super::confirmations::ConfirmedMark;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.alwl");
    let plain = dir.path().join("plain.alwl");
    let mut log = LedgerLog::open(&path, Some("gate-a"), opts()).unwrap();
    log.require_confirmation().unwrap();
    for i in 0..12 {
        log.append(&request(i)).unwrap();
    }
    // Nothing confirmed yet: the checkpoint lets compaction drop nothing.
    let cp = log.checkpoint().unwrap();
    assert_eq!(cp.applied_lsn, 0);
    log.close().unwrap();
    std::fs::copy(&path, &plain).unwrap();
    let reference = snapshot(&plain);
    let report = compact(&path).unwrap();
    assert_eq!(report.first_lsn_after, Some(1), "{report:?}");
    // A later process knows the log is replicated (the record beside it), confirms 5 of 12.
    let mut log = LedgerLog::open(&path, None, opts()).unwrap();
    assert!(log.is_replicated());
    let pg = "0/16B3748".to_string();
    let mark = ConfirmedMark {
        wal_lsn: 5,
        postgres_lsn: pg,
    };
    log.record_confirmation("REGIONAL", mark).unwrap();
    assert_eq!(log.checkpoint().unwrap().applied_lsn, 5);
    log.close().unwrap();
    let report = compact(&path).unwrap();
    assert_eq!(report.first_lsn_after, Some(6), "{report:?}");
    assert_eq!(snapshot(&path), reference, "the fold is unchanged");
    // A log never asked for REGIONAL/GLOBAL checkpoints every durable frame, as before.
    let local = dir.path().join("local.alwl");
    let mut log = LedgerLog::open(&local, Some("gate-a"), opts()).unwrap();
    for i in 0..4 {
        log.append(&request(i)).unwrap();
    }
    assert!(!log.is_replicated());
    assert_eq!(log.checkpoint().unwrap().applied_lsn, 4);
}

/// A COMPACTED watermark raised by hand (`wal advance`) over frames PostgreSQL never confirmed:
/// the ledger's checkpoint records what it may apply (the confirmed LSNs), not the watermark,
/// so compaction refuses to drop the unconfirmed frames and the fold is unchanged.
#[test]
fn a_checkpoint_does_not_claim_a_compacted_watermark_raised_by_hand() {
    use super::confirmations::ConfirmedMark;
    use crate::core::wal::{FrameState, Watermark};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.alwl");
    let mut log = LedgerLog::open(&path, Some("gate-a"), opts()).unwrap();
    log.require_confirmation().unwrap();
    for i in 0..12 {
        log.append(&request(i)).unwrap();
    }
    let mark = ConfirmedMark {
        wal_lsn: 3,
        postgres_lsn: "0/16B3748".into(),
    };
    log.record_confirmation("REGIONAL", mark).unwrap();
    log.wal()
        .advance(Watermark {
            state: FrameState::Compacted,
            lsn: 10,
        })
        .unwrap();
    let cp = log.checkpoint().unwrap();
    assert_eq!(
        cp.applied_lsn, 3,
        "what PostgreSQL confirmed, not COMPACTED's 10"
    );
    assert_eq!(cp.unheld_compacted(), Some(4..=10));
    log.close().unwrap();
    let reference = snapshot(&path);
    let before = std::fs::read(&path).unwrap();
    let e = compact(&path).unwrap_err().to_string();
    assert!(e.contains("LSNs 4..=10"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "unchanged");
    assert_eq!(snapshot(&path), reference);
}

/// `wal append` builds its frame through `from_fields_json` + `event_body`: what that refuses is
/// what the fold refuses, and a repeated key is refused before any value is picked.
#[test]
fn event_body_refuses_what_the_fold_refuses_and_repeated_keys() {
    use crate::core::ledger::EventType;
    let t = EventType::JobCreated;
    let ok = r#"{"job_id":"use1-1-g1-00001","assigned_dcs":["euw1"],"fence_token":1,"spec":{}}"#;
    let body = AppendRequest::from_fields_json(t, ok)
        .unwrap()
        .event_body("gate-a")
        .unwrap();
    let payload = body.payload("1:0:gate-a");
    assert!(super::Event::from_payload(t, &payload).is_ok());
    for (fields, want) in [
        (ok.replace("use1-1-g1-00001", "x"), "four parts"),
        (
            ok.replace("\"fence_token\":1", "\"fence_token\":-1"),
            "fence_token -1",
        ),
        (
            ok.replace("\"fence_token\":1", "\"fence_token\":18446744073709551616"),
            "fence_token 1.8446744073709552e19",
        ),
        (ok.replace("\"euw1\"", "\"eu\\u001bw1\""), "datacenter id"),
        (
            ok.replace("\"spec\":{}", "\"spec\":[]"),
            "spec must be a JSON object",
        ),
    ] {
        let e = AppendRequest::from_fields_json(t, &fields)
            .unwrap()
            .event_body("gate-a")
            .unwrap_err();
        assert!(e.to_string().contains(want), "{fields}: {e}");
        assert!(!e.to_string().contains("at line"), "no probe position: {e}");
    }
    for (fields, path) in [
        (
            ok.replace("\"fence_token\":1", "\"fence_token\":1,\"fence_token\":2"),
            "$.fence_token",
        ),
        (
            ok.replace("\"spec\":{}", "\"spec\":{\"a\":1,\"a\":2}"),
            "$.spec.a",
        ),
    ] {
        let e = AppendRequest::from_fields_json(t, &fields).unwrap_err();
        assert!(
            matches!(&e, LedgerError::Usage(m) if m.contains(path) && m.contains("twice")),
            "{e}"
        );
    }
    let twice = r#"{"type":"JobCreated","job_id":"use1-1-g1-00001","job_id":"use1-1-g1-00002","assigned_dcs":["euw1"],"fence_token":1,"spec":{}}"#;
    let e = AppendRequest::from_json(twice, None).unwrap_err();
    assert!(e.to_string().contains("\"job_id\" appears twice"), "{e}");
}
