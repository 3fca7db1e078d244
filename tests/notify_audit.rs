//! Export-ready notifications under stress (SPEC section 10): two runners on one store, a NATS
//! server that accepts but never answers, a receiver that answers with an endless body, a JetStream
//! stream that does not capture the dead-letter subject, a dead letter retried and dead again, a
//! slow receiver beside a fast one, and the receiver's check of an artifact that is not there.
//!
//! Real components as in `tests/notify.rs`: the release binary, `nats-server -js` on a free loopback
//! port, axum receivers on loopback. Runs that would wait for the 31 s retry schedule go through the
//! library's runner on a clock whose sleeps return at once ([`FastClock`]).

mod common;
mod notify_support;

use airlock::core::notify::deliver::{self, DeliveryClock, RunEvent, RunMode, RunnerStore};
use airlock::core::notify::event::{DLQ_SUBJECT, EVENT_TYPE};
use airlock::core::notify::settings::{Targets, WebhookTarget};
use airlock::core::notify::store as nstore;
use airlock::core::store::any::AnyStore;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use common::text;
use notify_support::{Env, Nats, SECRET};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl Env {
    fn spawn_notify(&self, once: bool, hooks: &[&str], nats: Option<&str>) -> Child {
        let args = self.notify_args(once, hooks, nats);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
    fn store(&self) -> RunnerStore {
        RunnerStore::new(AnyStore::open_db(&self.path("store.db")).unwrap())
    }
    fn deliveries(&self) -> Vec<nstore::DeliveryRow> {
        nstore::deliveries(&AnyStore::open_db(&self.path("store.db")).unwrap(), None).unwrap()
    }
}

fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

// ---------------------------------------------------------------- receivers

/// Requests per path, with when each arrived.
type Log = Arc<Mutex<Vec<(String, Instant)>>>;

/// `/ok/*` answers 204; `/slow/*` answers 204 after 3 s; `/fail/*` 503 with a short body;
/// `/endless/*` 500 with a body that never ends; `/stale/*` answers its first request 503 after 3 s
/// and every later one 204 at once.
async fn hook(State(log): State<Log>, UrlPath((mode, _)): UrlPath<(String, String)>) -> Response {
    let earlier = {
        let mut log = log.lock().unwrap();
        log.push((mode.clone(), Instant::now()));
        log.iter().filter(|(m, _)| *m == mode).count() - 1
    };
    match mode.as_str() {
        "ok" => StatusCode::NO_CONTENT.into_response(),
        "stale" if earlier > 0 => StatusCode::NO_CONTENT.into_response(),
        "stale" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            (StatusCode::SERVICE_UNAVAILABLE, "too late").into_response()
        }
        "slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            StatusCode::NO_CONTENT.into_response()
        }
        "endless" => {
            let chunks = futures_util::stream::repeat_with(|| {
                Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b'A'; 64 * 1024]))
            });
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::body::Body::from_stream(chunks),
            )
                .into_response()
        }
        "binary" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::body::Bytes::from_static(b"bad \xff\xfe\x1b[2J end"),
        )
            .into_response(),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
    }
}

/// A receiver on loopback: its base URL (`http://127.0.0.1:P`) and its request log.
async fn receiver() -> (String, Log) {
    let log: Log = Arc::default();
    let app = axum::Router::new()
        .route("/{mode}/{name}", axum::routing::post(hook))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, log)
}

fn requests(log: &Log, mode: &str) -> Vec<Instant> {
    let log = log.lock().unwrap();
    log.iter()
        .filter(|(m, _)| m == mode)
        .map(|(_, t)| *t)
        .collect()
}

// ---------------------------------------------------------------- nats-server

/// (subject, Nats-Msg-Id) of every message in the stream.
async fn messages(stream: &mut async_nats::jetstream::stream::Stream) -> Vec<(String, String)> {
    let last = stream.info().await.unwrap().state.last_sequence;
    let mut out = Vec::new();
    for seq in 1..=last {
        let m = stream.get_raw_message(seq).await.unwrap();
        let id = m
            .headers
            .iter()
            .find(|(k, _)| k.to_string().eq_ignore_ascii_case("Nats-Msg-Id"))
            .and_then(|(_, v)| v.first().map(|v| v.as_str().to_string()))
            .unwrap_or_default();
        out.push((m.subject.to_string(), id));
    }
    out
}

// ---------------------------------------------------------------- library runs on a fast clock

/// A clock whose sleeps return at once, moving its time on: the whole retry schedule in ms.
struct FastClock(AtomicU64);

impl DeliveryClock for FastClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn sleep(&self, d: Duration) -> futures_util::future::BoxFuture<'static, ()> {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    }
}

fn targets(hooks: &[String], nats: Option<&str>) -> Targets {
    Targets {
        webhooks: hooks
            .iter()
            .map(|url| WebhookTarget {
                url: url.clone(),
                secret: SECRET.as_bytes().to_vec(),
                tls: None,
            })
            .collect(),
        nats: nats.map(str::to_string),
        max_in_flight: airlock::core::notify::settings::DEFAULT_MAX_IN_FLIGHT,
    }
}

/// Runs the library's runner until idle on a fast clock; returns its events.
async fn run_fast(store: &RunnerStore, t: &Targets) -> Vec<RunEvent> {
    let clock = Arc::new(FastClock(AtomicU64::new(airlock::core::hlc::unix_ms_now())));
    let mut events = Vec::new();
    let mut record = |e: &RunEvent| events.push(e.clone());
    deliver::run_on(store, t, RunMode::UntilIdle, clock, &mut record)
        .await
        .unwrap();
    events
}

// ---------------------------------------------------------------- tests

/// A second `notify run` while the first one waits for the receiver neither sends the delivery
/// again nor records a false "interrupted" attempt: it waits for the first one's claim and ends
/// with nothing pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_runner_leaves_a_delivery_in_flight_elsewhere_alone() {
    let env = Arc::new(Env::with_export());
    let (base, log) = receiver().await;
    let slow = format!("{base}/slow/a");
    let first = env.spawn_notify(false, &[&slow], None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while requests(&log, "slow").is_empty() {
        assert!(Instant::now() < deadline, "the first attempt never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (e, s) = (env.clone(), slow.clone());
    let second = blocking(move || {
        let args = e.notify_args(false, &[&s], None);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        e.run(&args)
    })
    .await;
    let first = blocking(move || first.wait_with_output().unwrap()).await;
    ok(&first);
    ok(&second);
    assert_eq!(
        requests(&log, "slow").len(),
        1,
        "sent once: {}\n{}",
        text(&first),
        text(&second)
    );
    let d = &env.deliveries()[0];
    assert_eq!((d.status.as_str(), d.attempts), ("delivered", 1));
    let history = nstore::attempts(
        &AnyStore::open_db(&env.path("store.db")).unwrap(),
        d.delivery_id,
    )
    .unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0].outcome, "delivered");
}

/// A fast receiver's delivery is recorded as soon as it answered, while a slow receiver of the same
/// batch still holds its request: a kill then does not send the fast one again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_is_recorded_when_its_receiver_answers_not_when_the_batch_ends() {
    let env = Arc::new(Env::with_export());
    let (base, log) = receiver().await;
    let (fast, slow) = (format!("{base}/ok/a"), format!("{base}/slow/b"));
    let mut child = env.spawn_notify(false, &[&fast, &slow], None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while requests(&log, "ok").is_empty() || requests(&log, "slow").is_empty() {
        assert!(Instant::now() < deadline, "the attempts never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await; // the slow one answers after 3 s
    child.kill().unwrap(); // SIGKILL while the slow receiver holds its request
    child.wait().unwrap();
    let rows = env.deliveries();
    let status = |url: &str| {
        rows.iter()
            .find(|d| d.target == url)
            .map(|d| d.status.clone())
            .unwrap()
    };
    assert_eq!(status(&fast), "delivered", "{rows:#?}");
    assert_eq!(status(&slow), "pending");
    assert_eq!(requests(&log, "ok").len(), 1);
}

/// A NATS server that accepts the connection and never answers does not hold back the webhook of
/// the same run: the POST leaves at once, the NATS attempt fails within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_that_never_answers_does_not_hold_back_webhooks() {
    let env = Arc::new(Env::with_export());
    let (base, log) = receiver().await;
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nats = format!("nats://{}", silent.local_addr().unwrap());
    let _accepting = std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming() {
            held.push(c); // accepted, never answered
        }
    });
    let hook = format!("{base}/ok/a");
    let started = Instant::now();
    let child = env.spawn_notify(true, &[&hook], Some(&nats));
    let o = blocking(move || child.wait_with_output().unwrap()).await;
    let posted = requests(&log, "ok");
    assert_eq!(posted.len(), 1, "{}", text(&o));
    let waited = posted[0] - started;
    assert!(
        waited < Duration::from_secs(4),
        "the webhook waited {waited:?} for NATS: {}",
        text(&o)
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(text(&o).contains("cannot connect to NATS"), "{}", text(&o));
    let rows = env.deliveries();
    let kind = |k: &str| {
        rows.iter()
            .find(|d| d.target_kind == k)
            .unwrap()
            .status
            .clone()
    };
    assert_eq!(
        (kind("webhook").as_str(), kind("nats").as_str()),
        ("delivered", "pending")
    );
}

/// A receiver that answers 500 with a body that never ends: the attempt reads a bounded prefix,
/// keeps its first 200 characters as the reason, and ends without waiting out the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_error_body_is_read_only_up_to_a_bound() {
    let env = Arc::new(Env::with_export());
    let (base, _log) = receiver().await;
    let hook = format!("{base}/endless/a");
    let started = Instant::now();
    let child = env.spawn_notify(true, &[&hook], None);
    let o = blocking(move || child.wait_with_output().unwrap()).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "took {took:?}: {}", text(&o));
    let d = &env.deliveries()[0];
    assert_eq!(d.last_status, Some(500));
    let reason = d.last_reason.clone().unwrap();
    assert_eq!(
        reason,
        format!("HTTP 500 Internal Server Error: {}", "A".repeat(200))
    );
}

/// An error body that is not UTF-8 keeps its bytes in the reason as `\xNN` (not U+FFFD, which would
/// hide what the receiver sent); its control characters are stored as they came and escaped only
/// when shown (`notify list` escapes them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_body_that_is_not_utf8_keeps_its_bytes_in_the_reason() {
    let env = Arc::new(Env::with_export());
    let (base, _log) = receiver().await;
    let hook = format!("{base}/binary/a");
    let child = env.spawn_notify(true, &[&hook], None);
    let o = blocking(move || child.wait_with_output().unwrap()).await;
    let d = &env.deliveries()[0];
    assert_eq!(d.last_status, Some(500), "{}", text(&o));
    assert_eq!(
        d.last_reason.as_deref(),
        Some("HTTP 500 Internal Server Error: bad \\xff\\xfe\u{1b}[2J end")
    );
    let shown = env.run(&["notify", "list"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("bad \\xff\\xfe\\x1b[2J end"), "{shown}");
}

/// A delivery dead-lettered, retried by the operator and dead-lettered again is a second dead
/// letter: published under its own Nats-Msg-Id, so JetStream's duplicate window keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_delivery_that_dies_again_reaches_the_dlq_again() {
    let env = Env::with_export();
    let nats = Nats::start();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let (base, _log) = receiver().await;
    let t = targets(&[format!("{base}/fail/a")], Some(&nats.url));
    let store = env.store();
    run_fast(&store, &t).await;
    let dead: Vec<_> = env
        .deliveries()
        .into_iter()
        .filter(|d| d.status == "dead")
        .collect();
    assert_eq!(dead.len(), 1);
    let id = dead[0].delivery_id;
    let now = airlock::core::hlc::unix_ms_now();
    nstore::retry(&AnyStore::open_db(&env.path("store.db")).unwrap(), id, now).unwrap();
    let events = run_fast(&store, &t).await;
    assert!(
        events.contains(&RunEvent::DeadLetterPublished { delivery_id: id }),
        "{events:?}"
    );
    let dlq: Vec<String> = messages(&mut stream)
        .await
        .into_iter()
        .filter(|(s, _)| s == DLQ_SUBJECT)
        .map(|(_, id)| id)
        .collect();
    let export = &dead[0].export_id;
    assert_eq!(
        dlq,
        vec![
            format!("{export}:dlq:{id}:6"),
            format!("{export}:dlq:{id}:12")
        ]
    );
}

/// A stream that does not capture the dead-letter subject: each dead letter is tried once in the
/// run (one line each), not again after every later batch; it stays unpublished for the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_that_cannot_be_published_is_tried_once_per_run() {
    let env = Env::with_export();
    let nats = Nats::start();
    let _stream = nats.stream(&[EVENT_TYPE]).await;
    let (base, _log) = receiver().await;
    // Two webhooks that always fail: both dead-lettered, neither letter can be published.
    let t = targets(
        &[format!("{base}/fail/a"), format!("{base}/fail/b")],
        Some(&nats.url),
    );
    let store = env.store();
    let events = run_fast(&store, &t).await;
    let not_published = |id: i64| {
        events
            .iter()
            .filter(|e| matches!(e, RunEvent::DeadLetterNotPublished { delivery_id, .. } if *delivery_id == id))
            .count()
    };
    let dead: Vec<i64> = env
        .deliveries()
        .into_iter()
        .filter(|d| d.status == "dead")
        .map(|d| d.delivery_id)
        .collect();
    assert_eq!(dead.len(), 2, "{events:?}");
    for id in dead {
        assert_eq!(not_published(id), 1, "{events:#?}");
        assert!(!env
            .deliveries()
            .iter()
            .any(|d| d.delivery_id == id && d.dlq_published));
    }
}

/// `notify check` of an artifact that is not there: unreadable input (exit 2), as documented, not
/// a refused artifact (exit 1).
#[test]
fn check_of_a_missing_artifact_is_unreadable_input() {
    let env = Env::with_export();
    let vectors: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("../shared/vectors/notify/expected.json").unwrap(),
    )
    .unwrap();
    let event = env.path("event.json");
    std::fs::write(&event, vectors["event"]["body"].as_str().unwrap()).unwrap();
    let missing = env.path("nothing-here.tgz");
    let o = env.run(&[
        "notify",
        "check",
        event.to_str().unwrap(),
        "--artifact",
        missing.to_str().unwrap(),
    ]);
    common::assert_exit(&o, 2, "nothing-here.tgz");
}

/// A runner whose claim expired while it waited for the receiver (another runner took the delivery
/// over and delivered it) does not record its late failure over the newer runner's outcome: the
/// delivery stays delivered with one counted attempt, and the stale runner says its result was not
/// recorded. The two runners are the library's, on clocks 31 s apart (the second sees the first
/// one's claim as expired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_claim_expired_does_not_overwrite_the_newer_outcome() {
    let env = Env::with_export();
    let (base, log) = receiver().await;
    let t = targets(&[format!("{base}/stale/a")], None);
    let now = airlock::core::hlc::unix_ms_now();
    let (store, t1) = (env.store(), t.clone());
    let stale = tokio::spawn(async move {
        let clock = Arc::new(FastClock(AtomicU64::new(now)));
        let mut events = Vec::new();
        let mut record = |e: &RunEvent| events.push(e.to_string());
        deliver::run_on(&store, &t1, RunMode::Once, clock, &mut record)
            .await
            .unwrap();
        events
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while requests(&log, "stale").is_empty() {
        assert!(Instant::now() < deadline, "the first attempt never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The second runner, on a clock past the first one's lease, takes over and delivers.
    let later = Arc::new(FastClock(AtomicU64::new(
        now + nstore::CLAIM_LEASE_MS + 1000,
    )));
    let mut newer = Vec::new();
    let mut record = |e: &RunEvent| newer.push(e.to_string());
    deliver::run_on(&env.store(), &t, RunMode::Once, later, &mut record)
        .await
        .unwrap();
    assert!(
        newer.iter().any(|e| e.contains("-> delivered")),
        "{newer:#?}"
    );
    let stale = stale.await.unwrap();
    assert_eq!(requests(&log, "stale").len(), 2);
    let d = &env.deliveries()[0];
    assert_eq!(
        (d.status.as_str(), d.attempts, d.last_status),
        ("delivered", 1, Some(204)),
        "the stale runner's 503 must not overwrite the delivery: {stale:#?}"
    );
    assert!(
        stale.iter().any(|e| e.contains("503")
            && e.contains("not recorded")
            && e.contains("took the delivery over")),
        "{stale:#?}"
    );
    let history = nstore::attempts(
        &AnyStore::open_db(&env.path("store.db")).unwrap(),
        d.delivery_id,
    )
    .unwrap();
    let outcomes: Vec<&str> = history.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["interrupted", "delivered"], "{history:?}");
}

/// A webhook URL whose text names no host (`http:///x`, which the URL parser would read as
/// `http://x/`) is refused before anything is sent: exit 2, naming the setting, the URL, what is
/// wrong and what to give instead.
#[test]
fn a_webhook_url_without_a_host_is_refused() {
    let env = Env::with_export();
    for url in ["http:///x", "https:///hook", "http:hook"] {
        let args = env.notify_args(true, &[url], None);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = env.run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{url}: {t}");
        for needle in [
            &format!("notifications.webhooks[0].url {url:?}") as &str,
            "no host",
            "--webhook",
            "HOST[:PORT]",
        ] {
            assert!(t.contains(needle), "{url}: expected {needle:?} in:\n{t}");
        }
        assert!(env.deliveries().is_empty(), "{url}: nothing enrolled");
    }
}

/// A clock 20 times faster than the machine's: the retry schedule (31 s) passes in 1.5 s, while
/// the sockets, and an attempt's timeout, keep real time.
struct ScaledClock {
    base_ms: u64,
    start: Instant,
}

impl DeliveryClock for ScaledClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64 * 20
    }
    fn sleep(&self, d: Duration) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d / 20))
    }
}

/// A NATS publish made while the connection was down is never sent once it is back: the delivery
/// is dead-lettered, and after the server returns the stream holds its dead letter and not its
/// event. async_nats kept the publishes of the lost connection and sent them after reconnecting,
/// after they had timed out and the delivery had been recorded dead, so the stream held both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_of_a_lost_connection_is_not_sent_after_the_delivery_died() {
    let env = Env::with_export();
    let mut nats = Nats::start();
    nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let (store, t) = (env.store(), targets(&[], Some(&nats.url)));
    let (tx, rx) = std::sync::mpsc::channel::<RunEvent>();
    let runner = tokio::spawn(async move {
        let clock = Arc::new(ScaledClock {
            base_ms: airlock::core::hlc::unix_ms_now(),
            start: Instant::now(),
        });
        let mut on_event = move |e: &RunEvent| {
            let _ = tx.send(e.clone());
        };
        let poll = Duration::from_secs(2);
        deliver::run_on(&store, &t, RunMode::Forever { poll }, clock, &mut on_event).await
    });
    let status_of = |export: &str| {
        env.deliveries()
            .into_iter()
            .find(|d| d.export_id == export)
            .map(|d| d.status)
    };
    let first: String = rusqlite::Connection::open(env.path("store.db"))
        .unwrap()
        .query_row(
            "SELECT export_id FROM notify_emissions WHERE emission_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let wait = |what: &str, secs: u64, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("the first delivery", 30, &|| {
        status_of(&first).as_deref() == Some("delivered")
    });
    // The connection goes down; then a new export is emitted.
    nats.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    ok(&env.run(&["jobs", "enqueue", "-t", "acme", "{\"a\":3}"]));
    let out = env.path("out-late");
    let out = out.to_str().unwrap();
    ok(&env.run(&[
        "jobs",
        "export",
        "--tenant",
        "acme",
        "--portable",
        "-o",
        out,
    ]));
    let late: String = rusqlite::Connection::open(env.path("store.db"))
        .unwrap()
        .query_row(
            "SELECT export_id FROM notify_emissions ORDER BY emission_id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_ne!(late, first);
    wait("the late delivery to die", 150, &|| {
        status_of(&late).as_deref() == Some("dead")
    });
    nats.restart();
    let mut stream = nats.stream(&[EVENT_TYPE, DLQ_SUBJECT]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !messages(&mut stream)
        .await
        .iter()
        .any(|(subject, _)| subject == DLQ_SUBJECT)
    {
        assert!(
            Instant::now() < deadline,
            "the dead letter was never published"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Long enough for a reconnected client to send what it kept (its backoff is at most 4 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    runner.abort();
    let msgs = messages(&mut stream).await;
    assert!(
        !msgs.iter().any(|(s, id)| s == EVENT_TYPE && *id == late),
        "the dead delivery's event reached the stream: {msgs:?}"
    );
    assert_eq!(
        msgs.iter().filter(|(s, _)| s == EVENT_TYPE).count(),
        1,
        "{msgs:?}"
    );
    let events: Vec<RunEvent> = rx.try_iter().collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::DeadLetterPublished { .. })),
        "{events:?}"
    );
}
