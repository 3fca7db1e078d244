//! The second WAL audit, through the real binary: LSNs are never given twice (a log compacted to
//! its header continues after its checkpoint, a log older than its checkpoint is refused), new
//! frames are stamped above the highest HLC and never past the largest a frame holds, compaction
//! follows a symbolic link and keeps the log's permission bits (as do the files saved beside it),
//! torn tails are reported by every command that cuts one and are no fold failure, and `wal
//! recover --json` prints one object for every outcome.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod wal_support;

use wal_support::*;

/// A JobCreated event of basic.alwl's node (gate-a) for job `seq`.
fn created(seq: u32) -> String {
    format!(
        r#"{{"job_id":"use1-1767614400000-gate42-{seq:05}","fence_token":1,"assigned_dcs":["use1"],"spec":{{"workflow":"drill"}}}}"#
    )
}

fn append(log: &Path, seq: u32) -> std::process::Output {
    airlock(&[
        "wal",
        "append",
        p(log),
        "--type",
        "JobCreated",
        "--json",
        &created(seq),
        "--node",
        "gate-a",
    ])
}

/// The LSN `wal append` printed (`lsn N hlc H`).
fn appended_lsn(o: &std::process::Output) -> u64 {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    let out = stdout(o);
    out.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no LSN in {out:?}"))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn a_log_compacted_to_its_header_continues_after_its_checkpoint() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = copy_basic(d.path(), "n.alwl");
    let o = airlock(&["ledger", "checkpoint", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The checkpoint's own watermark frames (LSN 11 and 12) would be kept; a checkpoint that
    // holds them too (a state machine that applied every frame) lets compaction drop them all.
    let cp_path = d.path().join("n.alwl.checkpoint.json");
    let mut cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cp_path).expect("checkpoint")).expect("JSON");
    let o = airlock(&["wal", "inspect", p(&log), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let last = j["lastLsn"]
        .as_u64()
        .unwrap_or_else(|| panic!("lastLsn in {j}"));
    cp["lastLsn"] = last.into();
    cp["appliedLsn"] = last.into();
    cp["watermarks"]["COMPACTED"] = last.into();
    std::fs::write(&cp_path, serde_json::to_vec(&cp).expect("JSON")).expect("write");
    let o = airlock(&["wal", "compact", p(&log), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(report["lastLsn"], last, "{report}");
    assert_eq!(report["framesAfter"], 0, "everything compacted: {report}");
    assert_eq!(
        std::fs::metadata(&log).expect("stat").len(),
        8,
        "the header only"
    );
    // Before, the next frame took LSN 1 again, and the fold skipped it as already applied.
    let lsn = appended_lsn(&append(&log, 50));
    assert_eq!(lsn, last + 1, "LSNs continue after the checkpoint");
    let o = airlock(&["wal", "inspect", p(&log), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(j["frames"][0]["lsn"], last + 1, "{j}");
}

#[test]
fn a_log_older_than_its_checkpoint_is_refused_by_the_writer() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = copy_basic(d.path(), "n.alwl");
    let backup = std::fs::read(&log).expect("read");
    assert_eq!(appended_lsn(&append(&log, 11)), 11);
    let o = airlock(&["ledger", "checkpoint", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The log is restored from the backup taken before LSN 11; its checkpoint stays.
    std::fs::write(&log, &backup).expect("restore");
    let o = append(&log, 99);
    assert_eq!(o.status.code(), Some(2), "refused: {}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("the log ends at LSN 10 but its checkpoint")
            && e.contains("n.alwl.checkpoint.json")
            && e.contains("older than its checkpoint")
            && e.contains("LSNs 11..=")
            && e.contains("ledger sync"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&log).expect("read"),
        backup,
        "nothing written"
    );
    // Reading it is still allowed.
    assert_eq!(airlock(&["wal", "inspect", p(&log)]).status.code(), Some(0));
}

#[test]
fn new_frames_are_stamped_above_the_highest_hlc_and_never_past_the_largest() {
    let d = tempfile::tempdir().expect("tempdir");
    let set_hlc = |log: &Path, at: usize, physical: u64, logical: u64| {
        edit_frame(log, at, |f| {
            f[16..24].copy_from_slice(&((physical << 16) | logical).to_be_bytes());
        });
    };
    // LSN 9 a day ahead of LSN 10 (an HLC that went back: another tool, an old clock).
    let log = copy_basic(d.path(), "back.alwl");
    let ahead = 1_767_614_400_000 + 86_400_000;
    set_hlc(&log, AT[9], ahead, 0);
    let o = append(&log, 11);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let hlc = stdout(&o);
    let physical: u64 = hlc
        .split_whitespace()
        .nth(3)
        .and_then(|h| h.split(':').next())
        .and_then(|p| p.parse().ok())
        .expect("HLC");
    assert!(physical >= ahead, "stamped above the highest HLC: {hlc}");
    // The last frame at the largest HLC a frame holds: no frame can follow, and none is written.
    let max = copy_basic(d.path(), "max.alwl");
    set_hlc(&max, AT[10], (1 << 48) - 1, 0xffff);
    let before = std::fs::read(&max).expect("read");
    let o = append(&max, 11);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("largest a frame holds (281474976710655:65535)")
            && e.contains("Start a new log"),
        "{e}"
    );
    let after = std::fs::read(&max).expect("read");
    assert_eq!(
        after[..before.len()],
        before[..],
        "the frames are unchanged"
    );
    assert!(
        after[before.len()..].iter().all(|&b| b == 0),
        "only preallocated zeros follow"
    );
}

#[test]
fn compaction_follows_a_link_and_keeps_the_logs_permissions() {
    let d = tempfile::tempdir().expect("tempdir");
    let real = copy_basic(d.path(), "real.alwl");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let link = d.path().join("link.alwl");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let o = airlock(&["ledger", "checkpoint", p(&link)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        mode(&d.path().join("link.alwl.checkpoint.json")),
        0o600,
        "the checkpoint takes the log's bits"
    );
    let o = airlock(&["wal", "compact", p(&link), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let meta = std::fs::symlink_metadata(&link).expect("stat");
    assert!(meta.file_type().is_symlink(), "the link is still a link");
    assert_eq!(report["compactedLsn"], 10, "{report}");
    assert_eq!(
        std::fs::metadata(&real).expect("stat").len(),
        report["bytesAfter"].as_u64().expect("bytes"),
        "the file it names was compacted"
    );
    assert_eq!(mode(&real), 0o600, "compaction kept the log's bits");
    // A torn tail saved beside a private log is private too.
    let torn = d.path().join("t.alwl");
    std::fs::copy("../shared/vectors/wal/torn-tail.alwl", &torn).expect("copy");
    std::fs::set_permissions(&torn, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let o = airlock(&["wal", "recover", p(&torn)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode(&d.path().join("t.alwl.torn-at-1358")), 0o640);
}

#[test]
fn every_command_that_cuts_a_torn_tail_says_so_and_a_fold_does_not_fail_on_one() {
    let d = tempfile::tempdir().expect("tempdir");
    let vector = "../shared/vectors/wal/torn-tail.alwl";
    let fresh = |name: &str| {
        let path = d.path().join(name);
        std::fs::copy(vector, &path).expect("copy");
        path
    };
    // A fold reports the torn tail and leaves it out: a note, exit 0.
    let log = fresh("f.alwl");
    let o = airlock(&["ledger", "fold", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("note: ") && stderr(&o).contains("torn-tail"),
        "{}",
        stderr(&o)
    );
    // A checkpoint opens the log, which cuts the tail: said on stderr.
    let log = fresh("c.alwl");
    let o = airlock(&["ledger", "checkpoint", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cut a torn tail of 20 bytes at offset 1358")
            && stderr(&o).contains("c.alwl.torn-at-1358"),
        "{}",
        stderr(&o)
    );
    // A sync that appends to a torn copy cuts it first: said, and in --json.
    let torn = fresh("s.alwl");
    let full = copy_basic(d.path(), "full.alwl");
    assert_eq!(
        appended_lsn(&append(&full, 11)),
        11,
        "a frame the torn copy lacks"
    );
    let o = airlock(&["ledger", "sync", p(&torn), p(&full), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let cut = &j["tornTailsCut"][0];
    assert_eq!(cut["offset"], 1358, "{j}");
    assert_eq!(cut["cutBytes"], 20, "{j}");
    assert!(
        cut["savedTail"]
            .as_str()
            .is_some_and(|s| s.ends_with("s.alwl.torn-at-1358")),
        "{j}"
    );
    let torn = fresh("s2.alwl");
    let o = airlock(&["ledger", "sync", p(&torn), p(&full)]);
    assert!(
        stdout(&o).contains("cut a torn tail of 20 bytes at offset 1358"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn wal_recover_json_is_one_object_for_every_outcome() {
    let d = tempfile::tempdir().expect("tempdir");
    let expected: serde_json::Value = serde_json::from_slice(
        &std::fs::read("../shared/vectors/wal/recovery.expected.json").expect("vector"),
    )
    .expect("JSON");
    let mid = d.path().join("mid.alwl");
    std::fs::copy("../shared/vectors/wal/mid-damage.alwl", &mid).expect("copy");
    let before = std::fs::read(&mid).expect("read");
    let o = airlock(&["wal", "recover", p(&mid), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let want = &expected["mid-damage"];
    for key in ["outcome", "offset", "validFrames", "cutBytes"] {
        assert_eq!(j[key], want[key], "{key}: {j} vs {want}");
    }
    assert_eq!(j["changed"], false);
    assert!(j["nextValidFrame"].as_u64().is_some(), "{j}");
    assert!(j["reason"].as_str().is_some(), "{j}");
    assert_eq!(std::fs::read(&mid).expect("read"), before, "unchanged");
    // The other outcomes carry the same members.
    let torn = d.path().join("t.alwl");
    std::fs::copy("../shared/vectors/wal/torn-tail.alwl", &torn).expect("copy");
    let o = airlock(&["wal", "recover", p(&torn), "--json"]);
    let t: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&t), keys(&j));
    assert_eq!(t["changed"], true);
}

#[test]
fn wal_commands_name_a_directory_and_an_empty_range() {
    let d = tempfile::tempdir().expect("tempdir");
    for cmd in ["recover", "compact"] {
        let o = airlock(&["wal", cmd, p(d.path())]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(
            stderr(&o).contains("it is a directory; give a regular file"),
            "{cmd}: {}",
            stderr(&o)
        );
    }
    let o = airlock(&[
        "wal",
        "inspect",
        "../shared/vectors/wal/basic.alwl",
        "--frames",
        "..0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("\"..0\" is an empty LSN range"),
        "{}",
        stderr(&o)
    );
}
