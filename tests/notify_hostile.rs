//! Export-ready notifications against hostile or broken receivers and stored rows (SPEC section
//! 10): a receiver that hangs must not hold back the retries of another one, a stored export_id
//! must not write NATS headers of its own, and stored rows reach the terminal with their control
//! characters made visible and their event bodies kept.
//!
//! Real components as in `tests/notify.rs`: the `airlock` binary, `nats-server -js` on a free
//! loopback port (`tests/notify_support`), receivers on loopback sockets.

mod common;
mod notify_support;

use airlock::core::notify::event::{DLQ_SUBJECT, EVENT_TYPE};
use airlock::core::notify::store as nstore;
use airlock::core::store::any::AnyStore;
use common::{assert_exit, text};
use notify_support::{Env, Nats};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
}

/// Runs `sql` on the test's store, as an operator (or an attacker) with `sqlite3` would.
fn edit_store(env: &Env, sql: &str) {
    let db = rusqlite::Connection::open(env.path("store.db")).unwrap();
    db.execute_batch(sql).unwrap();
}

fn deliveries(env: &Env) -> Vec<nstore::DeliveryRow> {
    nstore::deliveries(&AnyStore::open_db(&env.path("store.db")).unwrap(), None).unwrap()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// What the receivers saw: requests to `/fail`, and whether the client gave up the `/hang` request
/// (closed its connection).
#[derive(Default)]
struct Seen {
    fail_requests: AtomicUsize,
    hang_requests: AtomicUsize,
    hang_closed: AtomicBool,
    /// `/fail` requests counted when the `/hang` connection was closed.
    fail_requests_when_hang_closed: AtomicUsize,
}

/// A receiver on loopback: `/fail/*` answers 503 at once; `/hang/*` reads the request and never
/// answers, noting when the client closes the connection. Returns its base URL.
async fn receiver(seen: Arc<Seen>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.starts_with(b"POST /fail/") {
                    seen.fail_requests.fetch_add(1, Ordering::SeqCst);
                    let _ = sock
                        .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy")
                        .await;
                } else {
                    seen.hang_requests.fetch_add(1, Ordering::SeqCst);
                    // Never answer; the client's timeout ends the attempt by closing.
                    while !matches!(sock.read(&mut buf).await, Ok(0) | Err(_)) {}
                    seen.fail_requests_when_hang_closed
                        .store(seen.fail_requests.load(Ordering::SeqCst), Ordering::SeqCst);
                    seen.hang_closed.store(true, Ordering::SeqCst);
                }
            });
        }
    });
    base
}

/// A receiver that never answers (held until the client's 10 s timeout) must not hold back the
/// retries of another delivery: the failing webhook's second attempt, due 1 s after its first
/// failure, leaves while the hanging request is still open. (The runner used to wait for the
/// whole batch, so every other retry and new emission waited out the hanging receiver's 10 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_does_not_hold_back_another_deliverys_retries() {
    let env = Env::with_export();
    let seen = Arc::new(Seen::default());
    let base = receiver(seen.clone()).await;
    let (fail, hang) = (format!("{base}/fail/a"), format!("{base}/hang/b"));
    let args = env.notify_args(false, &[&fail, &hang], None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = env
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.fail_requests.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "no retry of the failing webhook");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let closed_first = seen.hang_closed.load(Ordering::SeqCst);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(seen.hang_requests.load(Ordering::SeqCst), 1);
    assert!(
        !closed_first,
        "the retry waited for the hanging receiver's timeout ({} request(s) to /fail before it)",
        seen.fail_requests_when_hang_closed.load(Ordering::SeqCst)
    );
}

/// `notify run --once` sends what is due when it starts, once: the failing webhook's retry, due
/// 1 s later while the hanging receiver still holds the first round, waits for the next run
/// (it went out in the same run, a second attempt of one delivery in one `--once`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_sends_each_due_delivery_once() {
    let env = Env::with_export();
    let seen = Arc::new(Seen::default());
    let base = receiver(seen.clone()).await;
    let (fail, hang) = (format!("{base}/fail/a"), format!("{base}/hang/b"));
    let args = env.notify_args(true, &[&fail, &hang], None);
    let e = Arc::new(env);
    let o = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        e.run(&args)
    })
    .await;
    assert_eq!(seen.hang_requests.load(Ordering::SeqCst), 1, "{}", text(&o));
    assert_eq!(seen.fail_requests.load(Ordering::SeqCst), 1, "{}", text(&o));
}

/// The Nats-Msg-Id header is the stored export_id: one altered to hold a line break must not add
/// headers of its own to the published message (async_nats writes header values as given). The
/// attempt fails with a reason that says why, and nothing is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_export_id_cannot_write_nats_headers() {
    let env = Env::with_export();
    let nats = Nats::start();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    edit_store(
        &env,
        "PRAGMA foreign_keys = OFF;
         UPDATE notify_emissions SET export_id = export_id || char(13, 10) || 'X-Injected: yes';
         UPDATE notify_exports SET export_id = export_id || char(13, 10) || 'X-Injected: yes';",
    );
    let url = nats.url.clone();
    let e = Arc::new(env);
    let env = e.clone();
    let o = blocking(move || e.run(&["notify", "run", "--once", "--nats", &url])).await;
    assert!(!text(&o).contains('\r'), "{}", text(&o));
    let last = stream.info().await.unwrap().state.last_sequence;
    for seq in 1..=last {
        let m = stream.get_raw_message(seq).await.unwrap();
        assert!(
            !m.headers
                .iter()
                .any(|(k, _)| k.to_string().eq_ignore_ascii_case("X-Injected")),
            "a header was injected: {:?}",
            m.headers
        );
    }
    assert_eq!(last, 0, "nothing is published under a broken id");
    let d = &deliveries(&env)[0];
    assert_eq!((d.status.as_str(), d.attempts), ("pending", 1), "{d:?}");
    let reason = d.last_reason.as_deref().unwrap_or_default();
    assert!(reason.contains("control character"), "{reason}");
}

/// A delivery to a receiver that refuses connections (port 1): one failed attempt on record.
fn one_failed_attempt(env: &Env) {
    let secret = env.path("secret").display().to_string();
    ok(&env.run(&[
        "notify",
        "run",
        "--once",
        "--webhook",
        "http://127.0.0.1:1/hook",
        "--webhook-secret-file",
        &secret,
    ]));
}

/// Stored rows with terminal control sequences (an attempt's sent_at has no constraint; status,
/// target kind and outcome only CHECK constraints, which `PRAGMA ignore_check_constraints` lifts)
/// are shown with their control characters made visible by `notify list` and `notify show`.
#[test]
fn stored_control_characters_are_made_visible_by_list_and_show() {
    let env = Env::with_export();
    one_failed_attempt(&env);
    edit_store(
        &env,
        "PRAGMA ignore_check_constraints = ON;
         UPDATE notify_attempts SET sent_at = '2026' || char(27) || ']0;title' || char(7),
                                    outcome = 'failed' || char(27) || '[2J';
         UPDATE notify_deliveries SET status = 'pending' || char(27) || '[31m',
                                      target_kind = 'webhook' || char(27) || '[5m';",
    );
    for args in [["notify", "list"], ["notify", "show"]] {
        let mut args = args.to_vec();
        if args[1] == "show" {
            args.push("1");
        }
        let o = env.run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{t}");
        assert!(
            !t.contains('\x1b') && !t.contains('\x07'),
            "{args:?}: {t:?}"
        );
        assert!(t.contains("\\x1b"), "{args:?}: {t}");
    }
}

/// An event body that is not JSON (an altered row) is kept: `notify show --json` prints it as a
/// JSON string instead of failing without saying where, and `notify export` keeps it in the
/// dead-letter file instead of writing `null` (as the NATS dead-letter message already does).
#[test]
fn a_stored_event_body_that_is_not_json_is_shown_and_exported() {
    let env = Env::with_export();
    one_failed_attempt(&env);
    edit_store(
        &env,
        "UPDATE notify_emissions SET body = 'not json {' || char(27) || '[31m';
         UPDATE notify_deliveries SET status = 'dead', done_at = next_attempt_at;",
    );
    let o = env.run(&["notify", "show", "1", "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["event"], "not json {\u{1b}[31m", "{v}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains('\x1b'));
    let file = env.path("dlq.json");
    let o = env.run(&["notify", "export", "-o", file.to_str().unwrap()]);
    assert_exit(&o, 0, "1 dead letter(s)");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        v["deadLetters"][0]["event"], "not json {\u{1b}[31m",
        "the stored body is kept: {v}"
    );
}

/// A webhook URL with a control character in it is refused at start (exit 2, naming the setting
/// and the character), not quietly sent elsewhere: the URL parser drops tabs and line breaks
/// (`/ok/a<LF>b` is sent to `/ok/ab`, `:185<TAB>55` to port 18555), so the address used was not
/// the text configured, and two spellings of one address were two targets.
#[test]
fn a_webhook_url_with_a_control_character_is_refused() {
    let env = Env::with_export();
    let secret = env.path("secret").display().to_string();
    for url in [
        "http://127.0.0.1:1/ok/a\nb",
        "http://127.0.0.1:1/ok/\u{1b}[31m",
        "http://127.0.0.1:1\t/ok",
    ] {
        let o = env.run(&[
            "notify",
            "run",
            "--once",
            "--webhook",
            url,
            "--webhook-secret-file",
            &secret,
        ]);
        assert_exit(&o, 2, "notifications.webhooks[0].url");
        assert!(
            text(&o).contains("control character"),
            "{url:?}: {}",
            text(&o)
        );
        assert!(deliveries(&env).is_empty(), "{url:?}: nothing is enrolled");
    }
}

/// A delivery row with a value out of its range (a negative time) is reported naming the row
/// (its delivery id) and the column, not only the column's position in an internal query.
#[test]
fn a_damaged_delivery_row_is_named_by_id_and_column() {
    let env = Env::with_export();
    one_failed_attempt(&env);
    edit_store(
        &env,
        "UPDATE notify_deliveries SET next_attempt_at = -5 WHERE delivery_id = 1;",
    );
    let o = env.run(&["notify", "list"]);
    assert_exit(&o, 2, "delivery_id 1, next_attempt_at");
}

/// A pending delivery's next attempt is never scheduled more than 16 s ahead (the longest retry
/// delay), so one recorded a year ahead means the clock was set back since (or the row was
/// altered): it is due now, not after a year of "waiting until ..." that `notify retry` (dead
/// deliveries only) cannot cut short.
#[test]
fn a_retry_time_far_ahead_of_the_clock_is_due_now() {
    let env = Env::with_export();
    one_failed_attempt(&env);
    edit_store(
        &env,
        "UPDATE notify_deliveries SET next_attempt_at = next_attempt_at + 365 * 86400000;",
    );
    one_failed_attempt(&env);
    let d = &deliveries(&env)[0];
    assert_eq!((d.status.as_str(), d.attempts), ("pending", 2), "{d:?}");
}
