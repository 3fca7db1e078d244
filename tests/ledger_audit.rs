//! Audit findings on the job ledger, through the real binary: a checkpoint never claims a
//! COMPACTED watermark raised by hand over events nothing applied, `dev wal-gen` writes logs that
//! fold without findings, and `ledger diff` lists a divergent LSN as divergent only.

mod wal_support;

use wal_support::*;

/// A replicated ledger (REGIONAL/GLOBAL asked for: `<log>.confirmations.json` beside it) whose
/// events PostgreSQL never confirmed gets a COMPACTED watermark by hand (`wal advance`). The
/// checkpoint does not claim it (applied LSN 0, a warning naming the LSNs), so compaction refuses
/// and the log keeps every event. (The checkpoint used to record the watermark's LSN as applied,
/// and compaction then dropped events PostgreSQL did not have.)
#[test]
fn a_checkpoint_does_not_claim_a_compacted_watermark_raised_by_wal_advance() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = copy_basic(d.path(), "g.alwl");
    std::fs::write(d.path().join("g.alwl.confirmations.json"), "{}\n").expect("write");
    let o = airlock(&[
        "wal",
        "advance",
        p(&log),
        "--state",
        "COMPACTED",
        "--lsn",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = airlock(&["ledger", "checkpoint", p(&log), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cp: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(cp["appliedLsn"], 0, "{cp}");
    assert_eq!(
        cp["unheldCompacted"],
        serde_json::json!({"from": 1, "to": 5})
    );
    let e = stderr(&o);
    assert!(
        e.contains("warning: the COMPACTED watermark covers LSN 5")
            && e.contains("LSNs 1..=5")
            && e.contains("does not claim them"),
        "{e}"
    );
    let o = airlock(&["ledger", "checkpoint", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not claim them"), "{}", stderr(&o));
    let before = std::fs::read(&log).expect("read");
    for cmd in ["ledger", "wal"] {
        let o = airlock(&[cmd, "compact", p(&log)]);
        assert_eq!(o.status.code(), Some(2), "{cmd} compact: {}", stdout(&o));
        assert!(stderr(&o).contains("LSNs 1..=5"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&log).expect("read"), before, "unchanged");
    }
    let o = airlock(&["ledger", "fold", "--json", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let jobs: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(jobs["jobs"].as_object().map(|j| j.len()), Some(3));
    // A LOCAL ledger's checkpoint holds every durable frame: nothing unclaimed, it compacts.
    let local = copy_basic(d.path(), "local.alwl");
    let o = airlock(&[
        "wal",
        "advance",
        p(&local),
        "--state",
        "COMPACTED",
        "--lsn",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = airlock(&["ledger", "checkpoint", p(&local), "--json"]);
    let cp: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(
        (cp["appliedLsn"].as_u64(), &cp["unheldCompacted"]),
        (Some(11), &serde_json::Value::Null)
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let o = airlock(&["ledger", "compact", p(&local)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// `dev wal-gen` writes a log `ledger fold` folds without findings (a fold benchmark's input):
/// valid job ids, each job created, accepted, reported on and completed in order.
#[test]
fn wal_gen_output_folds_without_findings() {
    let d = tempfile::tempdir().expect("tempdir");
    for (node, bytes) in [("bench", "600000"), ("gate-7.b", "40000")] {
        let log = d.path().join(format!("{node}.alwl"));
        let o = airlock(&["dev", "wal-gen", p(&log), "--bytes", bytes, "--node", node]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let frames: u64 = stdout(&o)
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .expect("wal-gen prints its frame count");
        let o = airlock(&["ledger", "fold", "--json", p(&log)]);
        assert_eq!(o.status.code(), Some(0), "{node}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{node}: no findings");
        let views: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let jobs = views["jobs"].as_object().expect("jobs");
        assert_eq!(
            jobs.len() as u64,
            frames.div_ceil(100),
            "{node}: 100 events a job"
        );
        let completed = jobs.values().filter(|j| j["status"] == "completed").count() as u64;
        assert_eq!(completed, frames / 100, "{node}");
        let gate = node.replace('-', "_");
        assert!(
            jobs.keys()
                .all(|k| k.starts_with("use1-17000000") && k.contains(&gate)),
            "{node}: {:?}",
            jobs.keys().next()
        );
        let o = airlock(&["wal", "inspect", "--json", p(&log), "--frames", "1..=1"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert!(
            j["clockSkew"].is_null() && j["hlcRegression"].is_null(),
            "{j}"
        );
    }
}

/// Two copies of a log that share LSN 1..=10, differ at LSN 6 (same HLC, another progress
/// count), and one of which holds LSN 11 too. `ledger diff` lists LSN 6 as divergent only, and
/// LSN 11 as missing on the side that lacks it, in either order, text and `--json`.
#[test]
fn diff_lists_a_divergent_lsn_only_as_divergent() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = copy_basic(d.path(), "a.alwl");
    let b = copy_basic(d.path(), "b.alwl");
    // LSN 6 in b: "completed":1200 -> 1300 (same length).
    edit_frame(&b, AT[6], |f| {
        let at = f
            .windows(4)
            .position(|w| w == b"1200")
            .expect("the progress count");
        f[at + 1] = b'3';
    });
    let o = airlock(&[
        "wal",
        "append",
        p(&b),
        "--type",
        "JobProgressReported",
        "--json",
        r#"{"job_id":"use1-1767614400000-gate42-00001","dc_id":"euw1","completed":5,"failed":0}"#,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lsns = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|f| f["lsn"].as_u64().expect("lsn"))
            .collect()
    };
    for (x, y, in_x, in_y) in [(&a, &b, vec![11], vec![]), (&b, &a, vec![], vec![11])] {
        let o = airlock(&["ledger", "diff", p(x), p(y), "--json"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(r["firstDivergentLsn"], 6, "{r}");
        assert_eq!(r["divergent"], serde_json::json!([6]), "{r}");
        assert_eq!(
            (lsns(&r["missingInA"]), lsns(&r["missingInB"])),
            (in_x.clone(), in_y.clone()),
            "{r}"
        );
        let o = airlock(&["ledger", "diff", p(x), p(y)]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let text = stdout(&o);
        let missing: Vec<&str> = text.lines().filter(|l| l.contains("missing in")).collect();
        assert_eq!(missing.len(), 1, "{text}");
        let lacking = if in_x.is_empty() { y } else { x };
        assert!(
            missing[0].contains(&format!(
                "missing in {}: LSN 11 JobProgressReported",
                p(lacking)
            )),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("divergent") && l.ends_with("LSN [6]")),
            "{text}"
        );
    }
}
