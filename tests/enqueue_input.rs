//! `airlock jobs enqueue` input checks through the real binary: a payload with a key repeated in
//! one object is refused (exit 2, key and JSON path named) and nothing is stored.

use std::path::Path;
use std::process::{Command, Output};

fn enqueue(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["jobs", "enqueue", "-t", "acme", "--node", "n1"])
        .args(args)
        .env("AIRLOCK_DB", dir.join("store.db"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("HOME", dir)
        .env_remove("AIRLOCK_CONFIG")
        .output()
        .unwrap()
}

fn node_log_rows(dir: &Path) -> i64 {
    let db = dir.join("store.db");
    if !db.exists() {
        return 0;
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT COUNT(*) FROM node_log", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_payload_with_a_repeated_key_is_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (payload, key, path) in [
        (r#"{"a":1,"a":2}"#, "a", "$.a"),
        (r#"{"x":{"y":[{"k":1,"k":1}]}}"#, "k", "$.x.y[0].k"),
    ] {
        let out = enqueue(d, &[payload]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{payload}: {err}");
        assert!(
            err.contains(&format!("key \"{key}\" appears twice")) && err.contains(path),
            "{err}"
        );
        assert_eq!(node_log_rows(d), 0, "{payload}: nothing stored");
    }
    // One bad line refuses the whole --jsonl batch, naming the line.
    let lines = d.join("p.jsonl");
    std::fs::write(&lines, "{\"a\":1}\n{\"b\":1,\"b\":2}\n").unwrap();
    let out = enqueue(d, &["--jsonl", lines.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2") && err.contains("$.b"), "{err}");
    assert_eq!(node_log_rows(d), 0);
    // The same key in different objects is not a repeat.
    let out = enqueue(d, &[r#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(node_log_rows(d), 1);
}
