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
use std::process::Output;
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
    let mut child = env.spawn_quiet(&env.notify_args(false, &[&fail, &hang], None));
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
/// (its delivery id) and the column, not only the column's position in an internal query: by
/// `notify show` (which cannot show it: exit 2) and by `notify list` (which lists it as damaged:
/// exit 1).
#[test]
fn a_damaged_delivery_row_is_named_by_id_and_column() {
    let env = Env::with_export();
    one_failed_attempt(&env);
    edit_store(
        &env,
        "UPDATE notify_deliveries SET next_attempt_at = -5 WHERE delivery_id = 1;",
    );
    let o = env.run(&["notify", "show", "1"]);
    assert_exit(&o, 2, "delivery_id 1, next_attempt_at");
    let o = env.run(&["notify", "list"]);
    assert_exit(&o, 1, "delivery_id 1, next_attempt_at");
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

// ------------------------------------------------- damaged rows and the cap on sends in flight

/// What [`held_receiver`] saw: requests open now (received, not answered yet), the most open at
/// once, and the requests answered 2xx.
#[derive(Default)]
struct Held {
    open: AtomicUsize,
    max_open: AtomicUsize,
    delivered: AtomicUsize,
    /// Answer 503 (instead of 200) while set.
    fail: AtomicBool,
}

/// A receiver on loopback that reads each request whole, then (while `hold` is false) answers at
/// once: 200, or 503 while `seen.fail` is set; while `hold` is true it keeps each request open
/// until `hold` turns false (or the client gives up). Returns its base URL.
async fn held_receiver(seen: Arc<Held>, hold: tokio::sync::watch::Receiver<bool>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (seen, mut hold) = (seen.clone(), hold.clone());
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                let end = loop {
                    if let Some(i) = req.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&req[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while req.len() < end + length {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let now = seen.open.fetch_add(1, Ordering::SeqCst) + 1;
                seen.max_open.fetch_max(now, Ordering::SeqCst);
                let gave_up = tokio::select! {
                    _ = hold.wait_for(|h| !*h) => false,
                    _ = sock.read(&mut buf) => true,
                };
                seen.open.fetch_sub(1, Ordering::SeqCst);
                if gave_up {
                    return;
                }
                let answer: &[u8] = if seen.fail.load(Ordering::SeqCst) {
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                if sock.write_all(answer).await.is_ok() && !seen.fail.load(Ordering::SeqCst) {
                    seen.delivered.fetch_add(1, Ordering::SeqCst);
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    base
}

/// Deliveries by status, read with SQL (not through the runner's decoding).
fn statuses(env: &Env) -> Vec<(i64, String)> {
    let db = rusqlite::Connection::open(env.path("store.db")).unwrap();
    let mut q = db
        .prepare("SELECT delivery_id, status FROM notify_deliveries ORDER BY delivery_id")
        .unwrap();
    let rows = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

/// Two webhooks with one failed attempt each (503: pending, retry due 1 s later), at a receiver
/// that answers 200 from then on. Returns the receiver's counters and the webhook URLs.
async fn two_pending_deliveries(env: &Arc<Env>) -> (Arc<Held>, Vec<String>) {
    let seen = Arc::new(Held::default());
    seen.fail.store(true, Ordering::SeqCst);
    let (_keep, hold) = tokio::sync::watch::channel(false);
    let base = held_receiver(seen.clone(), hold).await;
    let hooks = vec![format!("{base}/ok/a"), format!("{base}/ok/b")];
    let args = env.notify_args(true, &[&hooks[0], &hooks[1]], None);
    let e = env.clone();
    let o = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        e.run(&args)
    })
    .await;
    ok(&o);
    assert_eq!(
        statuses(env),
        vec![(1, "pending".into()), (2, "pending".into())]
    );
    seen.fail.store(false, Ordering::SeqCst);
    (seen, hooks)
}

/// One delivery row that cannot be decoded (a negative time, written by hand) does not stop
/// notification delivery: `notify run` delivers the other one, names the damaged row by its
/// delivery id and column once, counts it (`damaged` in the summary, exit 1); `notify list` lists
/// the other rows and the damaged one; the metrics count it as `status="damaged"`. (The runner
/// used to fail as a whole at its first read of the due rows: every export's notifications
/// stopped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_delivery_row_is_skipped_and_the_others_are_delivered() {
    let env = Arc::new(Env::with_export());
    let (seen, hooks) = two_pending_deliveries(&env).await;
    edit_store(
        &env,
        "UPDATE notify_deliveries SET next_attempt_at = -5 WHERE delivery_id = 1;",
    );
    let mut args = env.notify_args(false, &[&hooks[0], &hooks[1]], None);
    args.push("--json".into());
    let e = env.clone();
    let o = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        e.run(&args)
    })
    .await;
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert_eq!(
        statuses(&env),
        vec![(1, "pending".into()), (2, "delivered".into())],
        "{t}"
    );
    assert_eq!(seen.delivered.load(Ordering::SeqCst), 1, "{t}");
    assert_eq!(
        t.matches("delivery_id 1, next_attempt_at").count(),
        1,
        "reported once: {t}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (summary["delivered"].as_u64(), summary["damaged"].as_u64()),
        (Some(1), Some(1)),
        "{summary}"
    );

    let o = env.run(&["notify", "list"]);
    assert_exit(&o, 1, "delivery_id 1, next_attempt_at");
    assert!(
        text(&o)
            .lines()
            .any(|l| l.trim_start().starts_with("2 ") && l.contains("delivered")),
        "{}",
        text(&o)
    );
    let o = env.run(&["metrics"]);
    ok(&o);
    let t = text(&o);
    for line in [
        "airlock_notify_deliveries{target=\"webhook\",status=\"damaged\"} 1",
        "airlock_notify_deliveries{target=\"webhook\",status=\"pending\"} 0",
        "airlock_notify_deliveries{target=\"webhook\",status=\"delivered\"} 1",
    ] {
        assert!(t.lines().any(|l| l == line), "no {line} in:\n{t}");
    }
}

/// Targets of `urls` (webhooks with the test secret), the default cap.
fn webhook_targets(urls: &[String]) -> airlock::core::notify::settings::Targets {
    use airlock::core::notify::settings::{Targets, WebhookTarget};
    Targets {
        webhooks: urls
            .iter()
            .map(|url| WebhookTarget {
                url: url.clone(),
                secret: notify_support::SECRET.as_bytes().to_vec(),
                tls: None,
            })
            .collect(),
        nats: None,
        max_in_flight: airlock::core::notify::settings::DEFAULT_MAX_IN_FLIGHT,
    }
}

/// The service's runner over `env`'s store for `targets` (RunMode::Forever, polling every 10 ms)
/// until `record`, given every event, says stop (returns true); at most 120 s.
async fn run_as_service(
    env: &Env,
    targets: &airlock::core::notify::settings::Targets,
    mut record: impl FnMut(&airlock::core::notify::deliver::RunEvent) -> bool + Send,
) -> String {
    use airlock::core::notify::deliver::{self, RunMode, RunnerStore};
    let store = RunnerStore::new(AnyStore::open_db(&env.path("store.db")).unwrap());
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let mut on_event = |e: &deliver::RunEvent| {
        if record(e) {
            let _ = stop_tx.send(true);
        }
    };
    let poll = Duration::from_millis(10);
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        deliver::run_until(
            &store,
            targets,
            RunMode::Forever { poll },
            &mut stop,
            &mut on_event,
        ),
    )
    .await
    .expect("the runner stops when told");
    assert!(result.is_ok(), "{result:?}");
    format!("{result:?}")
}

/// The exit status of `child` once it has ended (without holding the runtime's thread); killed,
/// and the test failed with `said()`, when it has not ended `within`.
async fn exit_within(
    child: &mut std::process::Child,
    within: Duration,
    said: impl Fn() -> String,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not end within {within:?}: {}", said());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two pending deliveries (one webhook each) whose first row is damaged (`attempts` is text): the
/// environment and the webhooks' URLs.
async fn first_of_two_damaged() -> (Arc<Env>, Vec<String>) {
    let env = Arc::new(Env::with_export());
    let (_seen, hooks) = two_pending_deliveries(&env).await;
    edit_store(
        &env,
        "UPDATE notify_deliveries SET attempts = 'many' WHERE delivery_id = 1;",
    );
    (env, hooks)
}

/// What the service's runner said: its polls, whether the readable row was delivered, and each
/// report of the damaged row 1 with whether the runner had been told to stop by then. Stops the
/// run once it has polled 20 times and delivered.
#[derive(Default)]
struct ServiceSeen {
    polls: usize,
    delivered: bool,
    stopped: bool,
    reports: Vec<(bool, String)>,
}

impl ServiceSeen {
    fn note(&mut self, e: &airlock::core::notify::deliver::RunEvent) -> bool {
        let line = e.to_string();
        match e {
            airlock::core::notify::deliver::RunEvent::Waiting { .. } => self.polls += 1,
            _ if line.contains("-> delivered") => self.delivered = true,
            _ if line.contains("delivery_id 1, attempts") => {
                self.reports.push((self.stopped, line))
            }
            _ => {}
        }
        self.stopped = self.stopped || (self.polls >= 20 && self.delivered);
        self.stopped
    }
}

/// The service's runner (RunMode::Forever, polling) meets a damaged row at every poll: it says so
/// once, not at every poll, and keeps delivering the others. The run is stopped once it has
/// polled 20 times and delivered the other row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_delivery_row_is_reported_once_not_at_every_poll() {
    let (env, hooks) = first_of_two_damaged().await;
    let mut seen = ServiceSeen::default();
    let summary = run_as_service(&env, &webhook_targets(&hooks), |e| seen.note(e)).await;
    assert!(seen.delivered, "{summary}");
    assert_eq!(seen.reports.len(), 1, "{:?} {summary}", seen.reports);
    assert_eq!(statuses(&env)[1], (2, "delivered".into()));
}

/// The service's runner reports, while it runs, a damaged row of a target it does not deliver to
/// (its due reads never meet that row; it used to be said only when the service stopped), once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_reports_a_damaged_row_of_another_target_while_it_runs() {
    let (env, hooks) = first_of_two_damaged().await;
    // Only the second webhook (delivery 2): delivery 1's target is not this runner's.
    let targets = webhook_targets(&hooks[1..]);
    let mut seen = ServiceSeen::default();
    let summary = run_as_service(&env, &targets, |e| seen.note(e)).await;
    let reports = &seen.reports;
    assert_eq!(reports.len(), 1, "{reports:?} {summary}");
    assert!(
        !reports[0].0,
        "said while running, not at the stop: {reports:?}"
    );
    assert_eq!(statuses(&env)[1], (2, "delivered".into()));
}

/// `settings::DEFAULT_MAX_IN_FLIGHT`, as a literal: the cap these tests hold the runner to when
/// none is given.
const CAP: usize = 32;

/// CAP + 8 deliveries due at once (one emission, CAP + 8 webhooks) at a receiver that holds every
/// request open: at most CAP are open at once; the others are sent as the held ones are answered,
/// and every delivery is delivered by that one run (`--once` included: what the cap held back is
/// not left for the next run). (The runner used to start every due delivery at once.) `given`:
/// the cap passed with `--max-in-flight` (CAP is then that).
async fn the_cap_on_sends_in_flight_holds(once: bool, given: Option<usize>) {
    let cap = given.unwrap_or(CAP);
    let env = Env::with_export();
    let seen = Arc::new(Held::default());
    let (release, hold) = tokio::sync::watch::channel(true);
    let base = held_receiver(seen.clone(), hold).await;
    let hooks: Vec<String> = (0..cap + 8).map(|i| format!("{base}/hold/{i}")).collect();
    let hooks: Vec<&str> = hooks.iter().map(String::as_str).collect();
    let mut args = env.notify_args(once, &hooks, None);
    if let Some(n) = given {
        args.extend(["--max-in-flight".into(), n.to_string()]);
    }
    let mut child = env.spawn_quiet(&args);
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.open.load(Ordering::SeqCst) < cap {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("only {} request(s) open", seen.open.load(Ordering::SeqCst));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Time for requests past the cap to arrive, if the runner sent them.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let held = seen.max_open.load(Ordering::SeqCst);
    release.send(false).unwrap();
    let status = exit_within(&mut child, Duration::from_secs(120), String::new).await;
    assert!(held <= cap, "{held} requests open at once while held");
    let most = seen.max_open.load(Ordering::SeqCst);
    assert!(most <= cap, "{most} requests open at once");
    assert_eq!(status.code(), Some(0));
    let statuses = statuses(&env);
    assert_eq!(statuses.len(), cap + 8);
    assert!(
        statuses.iter().all(|(_, s)| s == "delivered"),
        "{statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_the_cap_of_sends_is_in_flight() {
    the_cap_on_sends_in_flight_holds(false, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_the_cap_of_sends_is_in_flight_with_once() {
    the_cap_on_sends_in_flight_holds(true, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_sets_the_cap() {
    the_cap_on_sends_in_flight_holds(true, Some(3)).await;
}

/// A cap of 0 or past 1024 is refused before anything is sent, saying what to give.
#[test]
fn a_max_in_flight_out_of_range_is_refused() {
    let env = Env::with_export();
    for n in ["0", "1025"] {
        let mut args = env.notify_args(true, &["http://127.0.0.1:9/hook"], None);
        args.extend(["--max-in-flight".into(), n.into()]);
        let out = env.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{n}: {err}");
        assert!(
            err.contains(&format!("notifications.maxInFlight {n}: give 1 to 1024")),
            "{err}"
        );
    }
}

// ------------------------------------------------------------ a large queue: bounded reads

/// One webhook's deliveries, enrolled (due at `now`) for `n + 1` emissions: delivery ids 1..=n+1.
fn queue_of(env: &Env, n: usize, hook: &str, now: u64) -> AnyStore {
    env.more_emissions(n);
    let store = AnyStore::open_db(&env.path("store.db")).unwrap();
    let created = nstore::enroll(&store, &[nstore::TargetKey::webhook(hook)], now).unwrap();
    assert_eq!(created, n + 1);
    store
}

/// The runner's read of the due rows returns at most its limit (the free slots), in due order
/// (earliest `next_attempt_at` first, not delivery id order), leaves out the ones it is told to
/// skip (its own sends in flight) and the ones not due yet, and a retry time beyond the schedule
/// (a clock set back) is due now, after the others. (The runner used to read and decode every
/// pending row with its event body at every round, to keep the first few in delivery id order:
/// draining a queue of N cost N^2 row reads.)
#[test]
fn the_due_read_returns_at_most_its_limit_in_due_order() {
    let env = Env::with_export();
    let hook = "http://127.0.0.1:1/hook";
    let now = 1_800_000_000_000u64;
    let store = queue_of(&env, 49, hook, now - 60_000);
    // Delivery i is due at now - 100 * i s: the highest id is due first. Delivery 50 is due in
    // 5 s (not yet); delivery 49 a year ahead (a clock set back: due now).
    edit_store(
        &env,
        &format!(
            "UPDATE notify_deliveries SET next_attempt_at = {now} - 100000 * delivery_id;
             UPDATE notify_deliveries SET next_attempt_at = {now} + 5000 WHERE delivery_id = 50;
             UPDATE notify_deliveries SET next_attempt_at = {now} + 31536000000 WHERE delivery_id = 49;"
        ),
    );
    let targets = [nstore::TargetKey::webhook(hook)];
    let ids = |rows: &[nstore::DeliveryRow]| rows.iter().map(|d| d.delivery_id).collect::<Vec<_>>();
    // Every due row, in due order: 48 down to 1, then 49 (due now).
    let all = nstore::due(&store, &targets, now).unwrap();
    let mut expected: Vec<i64> = (1..=48).rev().collect();
    expected.push(49);
    assert_eq!(ids(&all), expected);

    let skip: std::collections::HashSet<i64> = [48, 46].into_iter().collect();
    let mut q = nstore::DueQuery::all(&targets, now, &skip);
    q.limit = 5;
    let got = nstore::due_decoded(&store, &q).unwrap();
    assert!(got.damaged.is_empty());
    assert_eq!(ids(&got.rows), vec![47, 45, 44, 43, 42]);
    // A limit beyond what is due returns what is due (the row beyond the schedule last).
    q.limit = 100;
    let got = nstore::due_decoded(&store, &q).unwrap();
    assert_eq!(got.rows.len(), 47);
    assert_eq!(got.rows.last().map(|d| d.delivery_id), Some(49));
    // `--once`: due by its start (47 and 48, 48 skipped), and the row beyond the schedule only
    // while this run has not attempted it: then it is not sent again.
    let once = |attempted_since| nstore::DueQuery {
        due_by_ms: now - 4_700_000,
        attempted_since,
        limit: 100,
        ..nstore::DueQuery::all(&targets, now, &skip)
    };
    let got = nstore::due_decoded(&store, &once(Some(now - 1000))).unwrap();
    assert_eq!(ids(&got.rows), vec![47, 49]);
    edit_store(
        &env,
        &format!(
            "UPDATE notify_deliveries SET last_attempt_at = {now} - 10 WHERE delivery_id = 49;"
        ),
    );
    let got = nstore::due_decoded(&store, &once(Some(now - 1000))).unwrap();
    assert_eq!(ids(&got.rows), vec![47]);
    let got = nstore::due_decoded(&store, &once(None)).unwrap();
    assert_eq!(ids(&got.rows), vec![47, 49]);
}

/// More damaged due rows than there are slots (40 > 32), due before the readable ones: the
/// runner reports each once and still delivers every readable row (a damaged row read against
/// the limit would take a slot at every round, and 32 of them would stop every delivery).
async fn damaged_rows_do_not_take_the_slots(once: bool) {
    let env = Arc::new(Env::with_export());
    let seen = Arc::new(Held::default());
    let (_keep, hold) = tokio::sync::watch::channel(false);
    let base = held_receiver(seen.clone(), hold).await;
    let hook = format!("{base}/ok/a");
    let now = airlock::core::hlc::unix_ms_now();
    drop(queue_of(&env, 47, &hook, now - 60_000));
    // Deliveries 1..=40 are damaged (a count that is not a number) and due first.
    edit_store(
        &env,
        "UPDATE notify_deliveries SET attempts = 'many', next_attempt_at = next_attempt_at - 1000
         WHERE delivery_id <= 40;",
    );
    let mut args = env.notify_args(once, &[&hook], None);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Output to files, so that a run that never ends is killed (not waited for).
    let (out, err) = (env.path("run.out"), env.path("run.err"));
    let mut child = env
        .cmd(&args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = exit_within(&mut child, Duration::from_secs(120), || {
        std::fs::read_to_string(&err).unwrap_or_default()
    })
    .await;
    let o = Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    };
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (summary["delivered"].as_u64(), summary["damaged"].as_u64()),
        (Some(8), Some(40)),
        "{summary}"
    );
    assert_eq!(seen.delivered.load(Ordering::SeqCst), 8, "{t}");
    let statuses = statuses(&env);
    assert!(
        statuses
            .iter()
            .all(|(id, s)| s == if *id <= 40 { "pending" } else { "delivered" }),
        "{statuses:?}"
    );
    assert_eq!(t.matches("delivery_id 7, attempts").count(), 1, "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_due_rows_beyond_the_cap_do_not_stop_the_readable_ones() {
    damaged_rows_do_not_take_the_slots(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_due_rows_beyond_the_cap_do_not_stop_the_readable_ones_with_once() {
    damaged_rows_do_not_take_the_slots(true).await;
}

/// A NATS server on loopback that greets, then refuses every connection with an `-ERR` whose text
/// holds control characters (a screen clear, a bell, a line break that would forge a log line);
/// its URL and how many connections it refused.
fn nats_answering_err() -> (String, Arc<AtomicUsize>) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://{}", listener.local_addr().unwrap());
    let refused = Arc::new(AtomicUsize::new(0));
    let count = refused.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let info = "INFO {\"server_id\":\"x\",\"version\":\"2.9.0\",\"proto\":1,\"host\":\"127.0.0.1\",\"port\":4222,\"max_payload\":1048576}\r\n";
            let _ = conn.write_all(info.as_bytes());
            let mut line = String::new();
            let _ = std::io::BufReader::new(&conn).read_line(&mut line);
            let _ = conn.write_all(b"-ERR 'stop\x1b[2J\x07 here\x1b]0;t\x07'\r\n");
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (url, refused)
}

/// serve's log carries no raw control character, whichever crate logs the line: async_nats's own
/// error line quoted the server's `-ERR` text raw (airlock's line about it was escaped already).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_line_of_serve_carries_a_nats_servers_control_characters() {
    let env = Arc::new(Env::with_export());
    let (nats, refused) = nats_answering_err();
    let cfg = env.path("airlock.yaml");
    std::fs::write(
        &cfg,
        format!("notifications:\n  pollInterval: \"00:00:01\"\n  nats:\n    url: {nats}\n"),
    )
    .unwrap();
    let child = env
        .cmd(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            cfg.to_str().unwrap(),
        ])
        .env("HOME", env.path("home"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while refused.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "serve never connected to NATS");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = blocking(move || child.wait_with_output().unwrap()).await;
    let log = out.stderr;
    let shown = String::from_utf8_lossy(&log);
    assert!(shown.contains("stop\\x1b[2J\\x07 here"), "{shown}");
    let raw: Vec<u8> = log
        .iter()
        .copied()
        .filter(|b| (*b < 0x20 && *b != b'\n') || *b == 0x7f)
        .collect();
    assert!(raw.is_empty(), "raw control bytes {raw:?} in:\n{shown}");
}

/// A webhook URL with credentials (`http://user:secret@host/...`) is shown with its password
/// hidden everywhere: the attempt line, the stored reason (the HTTP client's error names the URL),
/// `notify list` and its JSON. It appeared verbatim.
#[test]
fn a_webhook_urls_password_is_never_shown() {
    let env = Env::with_export();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let hook = format!("http://hookuser:s3cr3t-pw@127.0.0.1:{port}/hook");
    let args = env.notify_args(true, &[&hook], None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = env.run(&args);
    let list = env.run(&["notify", "list"]);
    let json = env.run(&["notify", "list", "--json"]);
    let show = env.run(&["notify", "show", "1"]);
    for o in [&run, &list, &json, &show] {
        let t = text(o);
        assert!(!t.contains("s3cr3t-pw"), "the password was shown:\n{t}");
        assert!(t.contains("hookuser:***@127.0.0.1"), "{t}");
    }
    let d = &deliveries(&env)[0];
    assert!(
        !d.last_reason.as_deref().unwrap_or("").contains("s3cr3t-pw"),
        "{:?}",
        d.last_reason
    );
}

/// A webhook URL whose password holds a `/`, `?` or `#` (not percent-encoded) does not parse (the
/// character ends the URL's host part), and the refusal quoted it whole: "invalid port number" after
/// `http://u:se/cret@...`. The password is masked there too.
#[test]
fn a_webhook_password_holding_a_slash_is_not_shown_when_the_url_is_refused() {
    let env = Env::with_export();
    for hook in [
        "http://hookuser:S3/cretPW@127.0.0.1:9/hook",
        "http://hookuser:S3?cretPW@127.0.0.1:9/hook",
        "http://hookuser:S3#cretPW@127.0.0.1:9/hook",
    ] {
        let args = env.notify_args(true, &[hook], None);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = env.run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(!t.contains("cretPW") && !t.contains("S3"), "{hook}: {t}");
        assert!(t.contains("hookuser:***@127.0.0.1:9/hook"), "{t}");
    }
}
