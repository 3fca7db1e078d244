//! `airlock dev gen-bundle`: the bundle written is exactly the one asked for (`--entries` in all,
//! over `--nodes` logs) and a valid one; what cannot be that is refused (exit 2, no file), and a
//! failed write names the file.

mod common;

use airlock::core::verify::{verify_file, VerifyOptions};
use common::{assert_exit, text};
use std::path::Path;
use std::process::{Command, Output};

fn gen(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.args(["dev", "gen-bundle", "-o", "out.json"])
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("AIRLOCK_DB")
        .env_remove("AIRLOCK_CONFIG");
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    gen(dir, args).output().unwrap()
}

/// `--entries` is the total, whether or not it divides by `--nodes`: the first logs take the
/// remainder, one entry each.
#[test]
fn the_bundle_has_exactly_the_entries_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    for (nodes, entries, lengths) in [
        ("3", "10", vec![4, 3, 3]),
        ("4", "4", vec![1, 1, 1, 1]),
        ("4", "40", vec![10; 4]),
        ("1", "1", vec![1]),
    ] {
        let o = run(dir.path(), &["--nodes", nodes, "--entries", entries]);
        assert_exit(&o, 0, &format!("({nodes} nodes, {entries} entries)"));
        let r = verify_file(&dir.path().join("out.json"), &VerifyOptions::default()).unwrap();
        assert!(r.ok, "{nodes} x {entries}: {:#?}", r.findings);
        assert_eq!(r.log_entries, lengths, "{nodes} nodes, {entries} entries");
    }
}

/// What would write another bundle than the one asked for (fewer entries than nodes: empty logs
/// are not written), or one that does not verify (a tenant id the verifier refuses, times past
/// the last RFC 3339 one), is refused, saying which option and why, and writes nothing.
#[test]
fn what_cannot_be_written_as_asked_is_refused_with_the_option_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--entries", "3"], "--entries 3 is fewer than --nodes 4"),
        (&["--entries", "0", "--nodes", "1"], "--entries 0 is fewer"),
        (
            &["--nodes", "0", "--entries", "5"],
            "--nodes must be at least 1",
        ),
        (
            &["--entries", "4", "--start-ms", "18446744073709551615"],
            "--start-ms 18446744073709551615: the last entry would be past 9999-12-31",
        ),
        (
            &["--entries", "4", "--start-ms", "253402300799999"],
            "--start-ms 253402300799999",
        ),
        (&["--entries", "4", "--tenant", "t\u{1b}[2J"], "--tenant: "),
        (
            &["--entries", "4", "--tenant", ""],
            "--tenant: a tenant id has 1 to 256",
        ),
    ];
    for (args, needle) in cases {
        let o = run(dir.path(), args);
        assert_exit(&o, 2, needle);
        assert!(!text(&o).contains('\u{1b}'), "{args:?}: raw escape printed");
        assert!(
            !dir.path().join("out.json").exists(),
            "{args:?} wrote a file"
        );
    }
    // The last entry at the last printable millisecond is still written, and verifies (far
    // ahead of this machine's clock: that check is left out).
    let o = run(
        dir.path(),
        &[
            "--entries",
            "1",
            "--nodes",
            "1",
            "--start-ms",
            "253402300799999",
        ],
    );
    assert_exit(&o, 0, "(1 nodes, 1 entries)");
    let opts = VerifyOptions {
        max_clock_skew: None,
        ..VerifyOptions::default()
    };
    let r = verify_file(&dir.path().join("out.json"), &opts).unwrap();
    assert!(r.ok, "{:#?}", r.findings);
}

/// A write that fails (here the file size limit, as on a full disk) names the file.
#[cfg(unix)]
#[test]
fn a_failed_write_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let o = common::with_file_size_limit(gen(dir.path(), &["--entries", "2000"]), 64 << 10);
    assert_exit(&o, 2, "cannot write out.json");
    assert!(!dir.path().join("out.json").exists());
}
