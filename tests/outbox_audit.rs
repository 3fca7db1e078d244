//! Outbox defects found by the edge audit: what replay keeps of an upstream's answer (bounded and
//! scrubbed), conflicts resent by way of cancel and retry, and stored text in the CLI's output.

mod support;

use airlock::core::outbox::envelope::{response_summary, MAX_SUMMARY_BYTES};
use airlock::core::outbox::{replay, EnvelopeStatus, Outbox, OutboxError, ReplayOptions};
use serde_json::json;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::{envelope, seed, standin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// Summaries used to be scrubbed only when serde_json could parse the whole answer into a value:
/// a number out of its range, deep nesting or a cut-off body kept every secret in it.
#[test]
fn response_summaries_never_keep_a_secret_they_cannot_scrub() {
    let deep = format!(
        "{}{{\"token\":\"LEAK\"}}{}",
        "[".repeat(200),
        "]".repeat(200)
    );
    let cases: Vec<(String, bool)> = vec![
        (r#"{"current":{"token":"LEAK","n":1e400}}"#.into(), true),
        (r#"{"a":{"apiKey":"LEAK","apiKey":"LEAK"}}"#.into(), true),
        (r#"{"password":"LEAK","rest":"cut sh"#.into(), false),
        (r#"{"password":"LEAK","rest":[1,2"#.into(), true),
        (deep, true),
        ("\u{feff}{\"secret\":\"LEAK\"}".into(), true),
        (r#"  [{"session_token":"LEAK"}]"#.into(), true),
    ];
    for (body, complete) in &cases {
        let s = response_summary(body.as_bytes(), *complete);
        assert!(!s.contains("LEAK"), "{body} -> {s}");
        assert!(s.len() <= MAX_SUMMARY_BYTES);
    }
    // What can be scrubbed is kept, scrubbed, numbers as written; plain text is kept as it is.
    assert_eq!(
        response_summary(br#"{"detail":"changed","n":1e400,"token":"t"}"#, true),
        r#"{"detail":"changed","n":1e400,"token":"[redacted]"}"#
    );
    assert_eq!(
        response_summary(b"<html>bad gateway</html>", true),
        "<html>bad gateway</html>"
    );
}

/// An upstream answering `code` with `body`, then `extra` bytes of `x` (beyond the declared length
/// counting); returns its URL and how many body bytes it managed to write.
async fn raw_upstream(code: u16, body: &'static str, extra: usize) -> (String, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let written = Arc::new(AtomicUsize::new(0));
    let w = written.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let w = w.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 {code} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len() + extra
                );
                if s.write_all(head.as_bytes()).await.is_err()
                    || s.write_all(body.as_bytes()).await.is_err()
                {
                    return;
                }
                let chunk = vec![b'x'; 1 << 20];
                let mut left = extra;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if s.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    w.fetch_add(n, Ordering::Relaxed);
                    left -= n;
                }
            });
        }
    });
    (url, written)
}

/// Replay used to read the whole answer into memory (a 3 GB answer: 5.8 GB resident) to keep
/// 2 KiB of it. It now reads at most 64 KiB and drops the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_reads_only_a_bounded_part_of_a_huge_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let total = 256 << 20;
    let (url, written) = raw_upstream(200, "", total).await;
    seed(&path, &[envelope("POST", "/progress/", "{}", "k-huge")]);
    let s = replay(&path, &ReplayOptions::new(url), |_| {})
        .await
        .unwrap();
    assert_eq!(s.counts.delivered, 1);
    let sent = written.load(Ordering::Relaxed);
    assert!(sent < 64 << 20, "the replay read {sent} of {total} bytes");
    let ob = Outbox::open_existing(&path).unwrap();
    let env = &ob.list(None, None).unwrap()[0];
    assert!(env.response_summary.as_deref().unwrap().len() <= MAX_SUMMARY_BYTES);
}

/// End to end: a conflict answer with a secret the old summary could not scrub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_answers_secret_never_reaches_the_outbox() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let (url, _) = raw_upstream(409, r#"{"current":{"token":"LEAK1","n":1e400}}"#, 0).await;
    seed(&path, &[envelope("PATCH", "/tasks/t1", "{}", "k-1")]);
    replay(&path, &ReplayOptions::new(url), |_| {})
        .await
        .unwrap();
    let ob = Outbox::open_existing(&path).unwrap();
    let env = &ob.list(None, None).unwrap()[0];
    assert_eq!(env.status, EnvelopeStatus::Conflict);
    let summary = env.response_summary.as_deref().unwrap();
    assert!(!summary.contains("LEAK1"), "{summary}");
    assert!(summary.contains("[redacted]"), "{summary}");
    drop(ob);
    let bytes: Vec<u8> = support::all_bytes(dir.path())
        .into_iter()
        .flat_map(|(_, b)| b)
        .collect();
    assert!(!bytes.windows(5).any(|w| w == b"LEAK1"));
}

/// A conflict is never resent (SPEC 9, the seed: no silent overwrite of newer central state);
/// cancelling it and then retrying the cancelled envelope used to queue it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_conflict_cannot_be_queued_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let up = standin().await;
    up.script("/tasks/t-409", 409, json!({"detail": "changed centrally"}));
    up.script("/tasks/t-404", 404, json!({"detail": "no such task"}));
    let ids = seed(
        &path,
        &[
            envelope("PATCH", "/tasks/t-409", r#"{"s":1}"#, "k-409"),
            envelope("PATCH", "/tasks/t-404", r#"{"s":1}"#, "k-404"),
        ],
    );
    replay(&path, &ReplayOptions::new(up.url()), |_| {})
        .await
        .unwrap();
    let mut ob = Outbox::open_existing(&path).unwrap();
    assert_eq!(ob.get(&ids[0]).unwrap().status, EnvelopeStatus::Conflict);
    assert_eq!(
        ob.cancel(&ids[0]).unwrap().status,
        EnvelopeStatus::Cancelled
    );
    let err = ob.retry(&ids[0]).unwrap_err();
    assert!(matches!(err, OutboxError::Transition { .. }), "{err}");
    assert!(err.to_string().contains("conflict"), "{err}");
    assert_eq!(ob.get(&ids[0]).unwrap().status, EnvelopeStatus::Cancelled);
    // A failed envelope may still be cancelled and queued again.
    assert_eq!(ob.get(&ids[1]).unwrap().status, EnvelopeStatus::Failed);
    ob.cancel(&ids[1]).unwrap();
    assert_eq!(ob.retry(&ids[1]).unwrap().status, EnvelopeStatus::Queued);
    up.stop().await;
}

/// `outbox show` and `outbox status` print stored times escaped like every other stored text (an
/// outbox file may come from another host), and a missing outbox says when the relay makes one.
#[test]
fn stored_times_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let ids = seed(&path, &[envelope("POST", "/progress/", "{}", "k1")]);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute(
            "UPDATE envelopes SET created_at = ?1, next_retry_at = ?1, updated_at = ?1, acked_at = ?1",
            ["2026\u{1b}]0;pwned\u{7}"],
        )
        .unwrap();
    }
    for args in [
        vec!["outbox", "show", ids[0].as_str()],
        vec!["outbox", "status"],
    ] {
        let out = Command::new(BIN)
            .args(&args)
            .arg("--outbox")
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains('\u{1b}'), "{args:?}: {stdout}");
        assert!(!stdout.contains('\u{7}'), "{args:?}: {stdout}");
        assert!(stdout.contains("\\x1b]0;pwned"), "{args:?}: {stdout}");
    }
    let out = Command::new(BIN)
        .args(["outbox", "status", "--outbox"])
        .arg(dir.path().join("missing.sqlite3"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("creates it when it starts"), "{stderr}");
}

/// `outbox status`, `list` and `show` on an outbox file the user can only read (in a folder they
/// cannot write, so no lock file either): they open it read-only and report; `status` says the
/// replay lock is unknown rather than failing. As root (which ignores file modes) the commands run
/// as `nobody`.
#[cfg(unix)]
#[test]
fn read_only_commands_work_on_an_outbox_the_user_can_only_read() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("ro");
    std::fs::create_dir(&folder).unwrap();
    let path = folder.join("outbox.sqlite3");
    let ids = seed(&path, &[envelope("PATCH", "/tasks/t1", "{}", "k-ro")]);
    let root = unsafe { libc::geteuid() } == 0;
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    if root {
        // Root owns everything; nobody may traverse and read, not write.
        mode(dir.path(), 0o755);
        mode(&folder, 0o755);
        mode(&path, 0o644);
    } else {
        mode(&path, 0o444);
        mode(&folder, 0o555);
    }
    let run = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args).arg("--outbox").arg(&path).env("HOME", "/");
        if root {
            c.uid(65534).gid(65534);
        }
        c.output().unwrap()
    };
    let show = ["outbox", "show", ids[0].as_str()];
    let cases: [&[&str]; 5] = [
        &["outbox", "status"],
        &["outbox", "status", "--json"],
        &["outbox", "list"],
        &["outbox", "list", "--json"],
        &show,
    ];
    let mut outputs = Vec::new();
    for args in cases {
        let o = run(args);
        let t = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        outputs.push((args, o.status.code(), t));
    }
    // A lock file the user cannot open: the lock is unknown, the status still reported.
    mode(&folder, 0o755);
    let lock = airlock::core::outbox::lock::lock_path(&path);
    std::fs::write(&lock, b"").unwrap();
    mode(&lock, if root { 0o600 } else { 0o000 });
    mode(&folder, if root { 0o755 } else { 0o555 });
    let unknown = [
        run(&["outbox", "status"]),
        run(&["outbox", "status", "--json"]),
    ];
    mode(&folder, 0o755);
    for (args, code, t) in &outputs {
        assert_eq!(*code, Some(0), "{args:?}: {t}");
        assert!(!t.contains("readonly"), "{args:?}: {t}");
        assert!(!t.contains("replay lock: unknown"), "{args:?}: {t}");
    }
    assert!(outputs[0].2.contains("queued     1"), "{}", outputs[0].2);
    let v: serde_json::Value = serde_json::from_str(&outputs[1].2).unwrap();
    assert_eq!(v["counts"]["queued"], 1, "{v}");
    assert_eq!(v["replayLock"], "free", "{v}");
    assert!(outputs[2].2.contains(ids[0].as_str()), "{}", outputs[2].2);
    assert!(outputs[4].2.contains("k-ro"), "{}", outputs[4].2);
    let t = String::from_utf8_lossy(&unknown[0].stdout);
    assert_eq!(unknown[0].status.code(), Some(0), "{t}{:?}", unknown[0]);
    assert!(
        t.contains("replay lock: unknown (cannot open the lock file"),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_slice(&unknown[1].stdout).unwrap();
    assert!(
        v["replayLock"].as_str().unwrap().starts_with("unknown"),
        "{v}"
    );
    assert!(v["replayRunning"].is_null(), "{v}");
}
