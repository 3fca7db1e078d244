//! Audit findings on the node WAL and the job ledger, through the real binary: compaction never
//! drops frames no checkpoint holds (after `wal advance` or a `ledger sync` that copied a
//! COMPACTED watermark), a log missing its first LSNs is a fold finding, malformed watermark
//! frames and HLCs that do not increase are reported by `wal inspect` and `ledger fold`, and a
//! frame from the far future is a clock-skew warning.

use std::path::Path;
use std::process::Command;

mod wal_support;

use wal_support::*;

fn inspect_json(path: &Path) -> (Option<i32>, serde_json::Value) {
    let o = airlock(&["wal", "inspect", p(path), "--json"]);
    (
        o.status.code(),
        serde_json::from_slice(&o.stdout).expect("JSON"),
    )
}

#[test]
fn compaction_without_a_checkpoint_is_refused_and_a_gap_is_a_finding() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = copy_basic(d.path(), "b.alwl");
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
    let before = std::fs::read(&log).expect("read");
    for cmd in ["wal", "ledger"] {
        let o = airlock(&[cmd, "compact", p(&log)]);
        assert_eq!(o.status.code(), Some(2), "{cmd} compact");
        let e = stderr(&o);
        assert!(
            e.contains("COMPACTED watermark covers LSN 5") && e.contains("no checkpoint"),
            "{e}"
        );
        assert_eq!(std::fs::read(&log).expect("read"), before, "unchanged");
    }
    let o = airlock(&["ledger", "fold", p(&log)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the whole log is there: {}",
        stderr(&o)
    );
    // With a checkpoint it compacts, and folds the same, without findings.
    assert_eq!(
        airlock(&["ledger", "checkpoint", p(&log)]).status.code(),
        Some(0)
    );
    let o = airlock(&["ledger", "compact", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = airlock(&["ledger", "fold", p(&log)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A log that lost LSN 1..=5 with no checkpoint: a finding, exit 1.
    let cut = d.path().join("cut.alwl");
    let b = std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector");
    let mut bytes = b[..8].to_vec();
    bytes.extend_from_slice(&b[AT[6]..]);
    std::fs::write(&cut, bytes).expect("write");
    let o = airlock(&["ledger", "fold", p(&cut)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("starts at LSN 6"), "{}", stderr(&o));
}

#[test]
fn a_compacted_watermark_copied_by_sync_does_not_let_compaction_drop_frames() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = copy_basic(d.path(), "a.alwl");
    let b = copy_basic(d.path(), "b.alwl");
    assert_eq!(
        airlock(&["ledger", "checkpoint", p(&a)]).status.code(),
        Some(0)
    );
    assert_eq!(
        airlock(&["ledger", "compact", p(&a)]).status.code(),
        Some(0)
    );
    let o = airlock(&["ledger", "sync", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = airlock(&["ledger", "compact", p(&b)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no checkpoint"), "{}", stderr(&o));
    let o = airlock(&["ledger", "fold", "--json", p(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let jobs: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(jobs["jobs"].as_object().map(|j| j.len()), Some(3));
}

/// A log name, the offset of the frame to edit, the edit, and the `badFrames` kind expected.
type Case = (&'static str, usize, fn(&mut [u8]), &'static str);

#[test]
fn malformed_watermark_frames_are_reported_by_inspect_and_fold() {
    let d = tempfile::tempdir().expect("tempdir");
    // The JobCreated at LSN 5 (151-byte payload) retyped as a watermark; a watermark with state
    // byte 9; REGIONAL <= 999 at LSN 10.
    let cases: [Case; 3] = [
        ("retyped", AT[5], |f| f[33] = 0, "watermark-length"),
        ("state", AT[4], |f| f[34] = 9, "watermark-state"),
        (
            "ahead",
            AT[10],
            |f| {
                f[34] = 1;
                f[35..43].copy_from_slice(&999u64.to_be_bytes());
            },
            "watermark-ahead",
        ),
    ];
    for (name, offset, edit, kind) in cases {
        let log = copy_basic(d.path(), &format!("{name}.alwl"));
        edit_frame(&log, offset, edit);
        let (code, j) = inspect_json(&log);
        assert_eq!(
            (code, j["outcome"].as_str()),
            (Some(0), Some("clean")),
            "{name}"
        );
        assert_eq!(j["badFrameCount"], 1, "{name}: {j}");
        assert_eq!(j["badFrames"][0]["kind"], kind, "{name}");
        assert_eq!(j["badFrames"][0]["offset"], offset, "{name}");
        let o = airlock(&["ledger", "fold", p(&log)]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(
            stderr(&o).contains("bad watermark frame"),
            "{name}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn hlc_order_and_clock_skew_are_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    // LSN 7 (a watermark, no HLC text in its payload) one second before LSN 6.
    let back = copy_basic(d.path(), "back.alwl");
    edit_frame(&back, AT[7], |f| {
        let packed = u64::from_be_bytes(f[16..24].try_into().expect("8"));
        let physical = (packed >> 16) - 1000;
        f[16..24].copy_from_slice(&((physical << 16) | (packed & 0xffff)).to_be_bytes());
    });
    let (code, j) = inspect_json(&back);
    assert_eq!(code, Some(0));
    assert_eq!(j["hlcRegression"]["lsn"], 7, "{j}");
    assert_eq!(j["hlcRegression"]["previousLsn"], 6);
    assert_eq!(j["hlcRegression"]["offset"], AT[7]);
    let o = airlock(&["ledger", "fold", p(&back)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("HLCs strictly increase"),
        "{}",
        stderr(&o)
    );
    // The last frame (a watermark) at physical 99999999999999 ms.
    let future = copy_basic(d.path(), "future.alwl");
    edit_frame(&future, AT[10], |f| {
        let packed = u64::from_be_bytes(f[16..24].try_into().expect("8"));
        f[16..24]
            .copy_from_slice(&((99_999_999_999_999u64 << 16) | (packed & 0xffff)).to_be_bytes());
    });
    let (_, j) = inspect_json(&future);
    assert_eq!(j["clockSkew"]["lsn"], 10, "{j}");
    assert_eq!(j["clockSkew"]["maxClockSkewMs"], 5000);
    assert!(j["hlcRegression"].is_null());
    let (_, j) = inspect_json(Path::new("../shared/vectors/wal/basic.alwl"));
    assert!(j["clockSkew"].is_null() && j["hlcRegression"].is_null() && j["badFrameCount"] == 0);
}

/// `wal inspect`'s clock-skew warning uses the configured tolerance, as `jobs verify` and `jobs
/// import` do (SPEC 2 and 13): `--max-clock-skew-ms`, then $AIRLOCK_MAX_CLOCK_SKEW, then
/// `scheduler.hlc.maxClockSkew` in the configuration file, then 5 s.
#[test]
fn inspect_clock_skew_warning_uses_the_configured_tolerance() {
    let d = tempfile::tempdir().expect("tempdir");
    // The last frame (a watermark, no HLC text in its payload) 60 s ahead of this clock.
    let log = copy_basic(d.path(), "ahead.alwl");
    let ahead = airlock::core::hlc::unix_ms_now() + 60_000;
    edit_frame(&log, AT[10], |f| {
        let packed = u64::from_be_bytes(f[16..24].try_into().expect("8"));
        f[16..24].copy_from_slice(&((ahead << 16) | (packed & 0xffff)).to_be_bytes());
    });
    let cfg = d.path().join("airlock.yaml");
    std::fs::write(&cfg, "scheduler:\n  hlc:\n    maxClockSkew: \"00:05:00\"\n").expect("write");
    let run = |args: &[&str], vars: &[(&str, &str)]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .env_remove("AIRLOCK_MAX_CLOCK_SKEW")
            .env_remove("AIRLOCK_CONFIG")
            .env("AIRLOCK_DB", d.path().join("airlock.db"))
            .env("XDG_DATA_HOME", d.path().join("data"));
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().expect("run airlock");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
        (json, text)
    };
    let skew = |args: &[&str], vars: &[(&str, &str)]| {
        let mut all = vec!["wal", "inspect", p(&log), "--json"];
        all.splice(0..0, args.iter().copied());
        let (json, text) = run(&all, vars);
        json.expect("JSON")["clockSkew"]["maxClockSkewMs"]
            .as_u64()
            .map_or_else(|| format!("none ({})", text.len()), |m| m.to_string())
    };
    // The default: 60 s ahead is more than 5 s.
    assert_eq!(skew(&[], &[]), "5000");
    // The environment and the file raise it to 5 min: no warning; the flag wins over both.
    let env = [("AIRLOCK_MAX_CLOCK_SKEW", "00:05:00")];
    assert!(skew(&[], &env).starts_with("none"));
    let cfg = cfg.to_str().expect("path");
    assert!(skew(&["--config", cfg], &[]).starts_with("none"));
    let mut flag = vec![
        "wal",
        "inspect",
        p(&log),
        "--json",
        "--max-clock-skew-ms",
        "1000",
    ];
    let (json, _) = run(&flag, &env);
    assert_eq!(json.expect("JSON")["clockSkew"]["maxClockSkewMs"], 1000);
    // The text form says the same.
    flag.retain(|a| *a != "--json");
    let (_, text) = run(&flag, &env);
    assert!(
        text.contains("clock skew") && text.contains("max skew 1000 ms"),
        "{text}"
    );
    let (_, text) = run(&["wal", "inspect", p(&log)], &env);
    assert!(!text.contains("clock skew"), "{text}");
}

/// A torn tail that cannot be saved beside the log (here: the copy's name would be longer than
/// the file system allows, which fails even for root) is an error that says the log is unchanged
/// and what to do, and the log is not cut.
#[test]
fn a_torn_tail_that_cannot_be_saved_says_nothing_was_cut() {
    let d = tempfile::tempdir().expect("tempdir");
    let log = d.path().join(format!("{}.alwl", "w".repeat(241)));
    std::fs::copy("../shared/vectors/wal/torn-tail.alwl", &log).expect("copy");
    let before = std::fs::read(&log).expect("read");
    let o = airlock(&["wal", "recover", p(&log)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("torn tail at offset 1358"), "{e}");
    assert!(
        e.contains("nothing was cut and the log is unchanged"),
        "{e}"
    );
    assert!(e.contains("`airlock wal recover` again"), "{e}");
    assert_eq!(
        std::fs::read(&log).expect("read"),
        before,
        "the log was changed"
    );
}
