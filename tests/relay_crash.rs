//! Crash safety with the real binary: SIGKILL the relay during a burst of queued writes, and
//! SIGKILL a replay mid-run.

mod common;
mod support;

use airlock::core::outbox::{EnvelopeStatus, Outbox};
use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{client, dead_upstream, envelope, seed};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

/// Starts `airlock relay` on a free port; returns the child and its URL (from its first line).
fn spawn_relay(upstream: &str, outbox: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args([
            "relay",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream,
            "--outbox",
        ])
        .arg(outbox)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = common::announced_url(&mut child);
    (child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_burst_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("o.sqlite3");
    let (mut child, url) = spawn_relay(&dead_upstream(), &outbox);
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let c = client();
    let mut clients = Vec::new();
    for t in 0..16 {
        let (c, url, acked, count) = (c.clone(), url.clone(), acked.clone(), count.clone());
        clients.push(tokio::spawn(async move {
            for i in 0..2000 {
                let r = c
                    .post(format!("{url}/progress/"))
                    .json(&serde_json::json!({"client": t, "i": i}))
                    .send()
                    .await;
                let Ok(r) = r else { break };
                if r.status() != 202 {
                    break;
                }
                let Ok(v) = r.json::<serde_json::Value>().await else {
                    break;
                };
                acked
                    .lock()
                    .unwrap()
                    .push(v["envelopeId"].as_str().unwrap().to_string());
                count.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for _ in 0..3000 {
        if count.load(Ordering::SeqCst) >= 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for t in clients {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 300,
        "only {} writes acknowledged",
        acked.len()
    );

    // Restart the relay on the same outbox (it recovers the WAL), then check through the engine.
    let (mut again, _) = spawn_relay(&dead_upstream(), &outbox);
    let ob = Outbox::open_existing(&outbox).unwrap();
    let stored: HashSet<String> = ob
        .list(Some(EnvelopeStatus::Queued), None)
        .unwrap()
        .into_iter()
        .map(|e| e.request.id)
        .collect();
    again.kill().unwrap();
    again.wait().unwrap();
    let missing: Vec<_> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged writes lost",
        missing.len()
    );
    assert!(stored.len() >= acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_replay_then_rerun_applies_each_key_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("o.sqlite3");
    let n = 400;
    let items: Vec<_> = (0..n)
        .map(|i| {
            envelope(
                "POST",
                "/progress/",
                &format!("{{\"i\":{i}}}"),
                &format!("key-{i}"),
            )
        })
        .collect();
    seed(&outbox, &items);
    let up = support::standin().await;
    up.set_delay(Duration::from_millis(3));
    let (up_url, outbox2) = (up.url(), outbox.clone());
    let replay_cmd = move || {
        let mut c = Command::new(BIN);
        c.args([
            "outbox",
            "replay",
            "--json",
            "--upstream-url",
            &up_url,
            "--outbox",
        ])
        .arg(&outbox2)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    let mut child = replay_cmd().spawn().unwrap();
    for _ in 0..6000 {
        if up.applied_counts().len() >= 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let applied_at_kill = up.applied_counts().len();
    assert!(
        applied_at_kill >= 100 && applied_at_kill < n,
        "{applied_at_kill}"
    );
    {
        let ob = Outbox::open_existing(&outbox).unwrap();
        let c = ob.counts().unwrap();
        assert!(c.queued > 0, "the replay was killed mid-run");
        assert!((c.delivered as usize) <= applied_at_kill);
    }

    up.set_delay(Duration::ZERO);
    let rerun = replay_cmd.clone();
    let out = tokio::task::spawn_blocking(move || rerun().output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "rerun failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["stillQueued"], 0);

    let ob = Outbox::open_existing(&outbox).unwrap();
    let c = ob.counts().unwrap();
    assert_eq!(c.delivered as usize, n);
    let applied = up.applied_counts();
    assert_eq!(applied.len(), n);
    for i in 0..n {
        assert_eq!(applied[&format!("key-{i}")], 1, "key-{i}");
    }
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_relay_gracefully_with_writes_kept() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("o.sqlite3");
    let (mut child, url) = spawn_relay(&dead_upstream(), &outbox);
    let c = client();
    for i in 0..5 {
        let r = c
            .post(format!("{url}/messages/"))
            .json(&serde_json::json!({"i": i}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exited = None;
    for _ in 0..1000 {
        if let Some(s) = child.try_wait().unwrap() {
            exited = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let Some(s) = exited else {
        child.kill().unwrap();
        panic!("relay did not stop within 10 s of SIGTERM");
    };
    assert!(s.success(), "{s:?}");
    let ob = Outbox::open_existing(&outbox).unwrap();
    assert_eq!(ob.counts().unwrap().queued, 5);
}

/// A second SIGTERM while the graceful stop waits (here for a request whose body never comes)
/// ends the relay at once with status 143, saying so.
#[test]
fn a_second_sigterm_during_the_shutdown_forces_the_exit() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["relay", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(dead_upstream())
        .arg("--outbox")
        .arg(dir.path().join("o.sqlite3"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = common::announced_url(&mut child);
    let mut half = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(
        half,
        "POST /messages/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"i\""
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let term = |child: &Child| {
        // SAFETY: kill(2) on the child's pid; no memory is passed.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    };
    term(&child);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the graceful stop waits for the request in progress"
    );
    term(&child);
    let mut status = None;
    for _ in 0..1000 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let Some(status) = status else {
        child.kill().unwrap();
        panic!("the relay did not exit within 10 s of the second SIGTERM");
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        err.contains("airlock relay: SIGTERM received again during the shutdown"),
        "{err}"
    );
    drop(half);
}
