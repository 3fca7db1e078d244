//! The `airlock outbox` commands through the real binary: output, exit codes, errors.

mod support;

use airlock::core::outbox::{EnvelopeStatus, Outbox};
use std::process::Command;
use support::{envelope, seed};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

fn run(args: &[&str], outbox: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--outbox")
        .arg(outbox)
        .env_remove("STATEHUB_OUTBOX_PATH")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn status_list_export_retry_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let ids = seed(
        &path,
        &[
            envelope(
                "POST",
                "/progress/",
                r#"{"note":"\u001b]0;pwned\u0007"}"#,
                "k1",
            ),
            envelope("PATCH", "/tasks/\u{1b}x", "{}", "k2"),
        ],
    );
    let (code, out, _) = run(&["outbox", "status"], &path);
    assert_eq!(code, 0);
    assert!(out.contains("queued     2"), "{out}");

    let (code, out, _) = run(&["outbox", "list", "--status", "queued"], &path);
    assert_eq!(code, 0);
    assert!(out.contains(&ids[0]));
    assert!(
        !out.contains('\u{1b}'),
        "untrusted text reaches the terminal raw: {out:?}"
    );
    let (code, out, _) = run(&["outbox", "show", &ids[0]], &path);
    assert_eq!(code, 0);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'));

    let (code, out, _) = run(&["outbox", "list", "--json"], &path);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);

    let (code, _, err) = run(&["outbox", "list", "--status", "lost"], &path);
    assert_eq!(code, 2);
    assert!(err.contains("unknown status"), "{err}");

    let export = dir.path().join("out.json");
    let (code, _, _) = run(
        &["outbox", "export", "--output", export.to_str().unwrap()],
        &path,
    );
    assert_eq!(code, 0);
    assert!(export.exists());

    let (code, out, _) = run(&["outbox", "cancel", &ids[1]], &path);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = run(&["outbox", "cancel", &ids[1]], &path);
    assert_eq!(code, 1);
    assert!(err.contains("already cancelled"), "{err}");
    let (code, _, _) = run(&["outbox", "retry", &ids[1]], &path);
    assert_eq!(code, 0);
    let (code, _, err) = run(
        &["outbox", "retry", "00000000-0000-0000-0000-000000000000"],
        &path,
    );
    assert_eq!(code, 2);
    assert!(err.contains("no envelope"), "{err}");
    let ob = Outbox::open_existing(&path).unwrap();
    assert_eq!(ob.get(&ids[1]).unwrap().status, EnvelopeStatus::Queued);
}

#[test]
fn a_missing_outbox_is_a_clear_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.sqlite3");
    for args in [
        &["outbox", "status"][..],
        &["outbox", "list"][..],
        &["outbox", "replay", "--upstream-url", "http://127.0.0.1:9"][..],
    ] {
        let (code, _, err) = run(args, &path);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains("no outbox at"), "{err}");
    }
    assert!(
        !path.exists(),
        "an operator command must not create the outbox"
    );
}

#[test]
fn replay_with_a_bad_url_or_down_upstream_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    seed(&path, &[envelope("POST", "/progress/", "{}", "k1")]);
    let (code, _, err) = run(&["outbox", "replay", "--upstream-url", "ftp://x"], &path);
    assert_eq!(code, 2);
    assert!(err.contains("invalid upstream URL"), "{err}");
    let dead = support::dead_upstream();
    let (code, out, _) = run(&["outbox", "replay", "--upstream-url", &dead], &path);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("still queued  1"), "{out}");
}

/// A stored envelope whose number column holds text (`attempt_count`, `response_status`) stopped
/// `outbox list`, `show`, `export` and `replay` with "outbox database error: Invalid column type
/// Text at index: 13, name: attempt_count", naming no envelope and no remedy; it is reported as
/// the damaged JSON columns are: the envelope's id, the column, what to do, exit 2.
#[test]
fn an_envelope_whose_number_column_holds_text_is_named_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let ids = seed(
        &path,
        &[
            envelope("POST", "/progress/", "{}", "k1"),
            envelope("POST", "/progress/", "{}", "k2"),
        ],
    );
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "UPDATE envelopes SET attempt_count = 'abc' WHERE id = ?1",
        [&ids[0]],
    )
    .unwrap();
    c.execute(
        "UPDATE envelopes SET response_status = 'x' WHERE id = ?1",
        [&ids[1]],
    )
    .unwrap();
    drop(c);
    let out = dir.path().join("export.json");
    let out = out.to_str().unwrap();
    let replay = [
        "outbox",
        "replay",
        "--upstream-url",
        "http://127.0.0.1:9",
        "--timeout-ms",
        "500",
    ];
    for (args, id, column) in [
        (&["outbox", "list"][..], &ids[0], "attempt_count"),
        (&["outbox", "list", "--json"][..], &ids[0], "attempt_count"),
        (&["outbox", "show", &ids[1]][..], &ids[1], "response_status"),
        (
            &["outbox", "retry", &ids[1]][..],
            &ids[1],
            "response_status",
        ),
        (
            &["outbox", "export", "-o", out][..],
            &ids[0],
            "attempt_count",
        ),
        (&replay[..], &ids[0], "attempt_count"),
    ] {
        let (code, _, err) = run(args, &path);
        assert_eq!(code, 2, "{args:?}: {err}");
        let said =
            format!("stored envelope {id} is unreadable ({column} holds a value of type Text)");
        assert!(err.contains(&said), "{args:?}: {err}");
        assert!(err.contains("repair the row"), "{args:?}: {err}");
        assert!(!err.contains("Invalid column type"), "{args:?}: {err}");
    }
}

/// A queued envelope whose `next_retry_at` is not a time (`soon`, hand-edited or damaged) was
/// compared as text, sorted after every timestamp, and so was never due: `outbox replay` skipped
/// it on every run. It is due: the replay sends it.
#[test]
fn an_envelope_whose_retry_time_does_not_read_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    seed(&path, &[envelope("POST", "/progress/", "{}", "k1")]);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("UPDATE envelopes SET next_retry_at = 'soon'", [])
        .unwrap();
    drop(c);
    let dead = support::dead_upstream();
    let (code, out, _) = run(&["outbox", "replay", "--upstream-url", &dead], &path);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("still queued  1 (retry later 1, not due yet 0"),
        "{out}"
    );
    let c = rusqlite::Connection::open(&path).unwrap();
    let attempts: i64 = c
        .query_row("SELECT attempt_count FROM envelopes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(attempts, 1, "{out}");
}
