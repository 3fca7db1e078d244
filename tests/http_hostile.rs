//! A hostile client against the two HTTP surfaces, `airlock serve` and `airlock relay`: what it
//! found, one test per defect (each failed before its fix). Attacks the servers already handled
//! (huge or many headers, slow heads, bodies past the limits, duplicate keys, deep nesting, ...)
//! are covered by tests/serve.rs and tests/relay_*.rs.

mod common;
mod support;

use common::{http_client, Server};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "hostile-test-token-0123456789";

/// A serve with a token and a ledger directory, in a directory of its own.
struct Hub {
    dir: tempfile::TempDir,
    server: Server,
}

impl Hub {
    fn start(extra: &[&str]) -> Hub {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| -> PathBuf { dir.path().join(name) };
        std::fs::write(path("token"), format!("{TOKEN}\n")).unwrap();
        let ledgers = path("ledgers");
        std::fs::write(
            path("airlock.yaml"),
            format!("ledger:\n  dir: {}\n", ledgers.display()),
        )
        .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
        cmd.arg("--db")
            .arg(path("hub.db"))
            .arg("--config")
            .arg(path("airlock.yaml"))
            .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
            .arg(path("token"))
            .args(extra)
            .current_dir(dir.path())
            .env("HOME", path("home"))
            .env("XDG_DATA_HOME", path("data"))
            .env("XDG_CONFIG_HOME", path("config"))
            .env("AIRLOCK_NODE_ID", "hub-1")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_DB")
            .env_remove("AIRLOCK_TOKEN_FILE")
            .env_remove("AIRLOCK_LISTEN")
            .stderr(Stdio::null());
        let server = Server::spawn(&mut cmd);
        Hub { dir, server }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    fn addr(&self) -> String {
        self.server.url.trim_start_matches("http://").to_string()
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("hub.db")
    }

    /// SIGTERM, and the exit status of the graceful stop (it must come within 20 s).
    fn stop(self) -> i32 {
        self.server.stop()
    }
}

/// Sends `request` as it is and reads the answer until the server closes the connection (or
/// `within` passes: then whatever arrived, which is empty for a server that never answered).
fn exchange(addr: &str, request: &[u8], within: Duration) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(within)).unwrap();
    c.write_all(request).unwrap();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The status and JSON body of an answer.
fn answer(resp: reqwest::blocking::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json().unwrap_or(Value::Null))
}

// ---------------------------------------------------------------- serve

/// A long key above a large array made the repeated-key check (every JSON body, before it is
/// parsed) copy the key's path once per element: a 6 MiB body kept a runtime thread busy for
/// hours. Now the check is linear and the body is answered at once (here: refused, it is no
/// event).
#[test]
fn a_long_key_above_a_large_array_is_checked_in_linear_time() {
    let hub = Hub::start(&[]);
    let key = "k".repeat(2 << 20);
    let elements = vec!["0"; 2 << 20].join(",");
    let body = format!(r#"{{"event":{{"{key}":[{elements}]}}}}"#);
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let (status, v) = answer(
        client
            .post(hub.url("/api/v1/ledger/gate-1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .expect("an answer within 120 s, not hours"),
    );
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "bad-request", "{v}");
}

/// Frame spans whose lengths add up past u64::MAX: the sum wrapped (a panic in a debug build, a
/// 500; in a release build a small total that let one request read the whole log, as often as it
/// liked). Now they are over the limit like any other request past 65,536 LSNs.
#[test]
fn frame_spans_that_add_up_past_u64_max_are_refused() {
    let hub = Hub::start(&[]);
    let event = json!({
        "type": "JobCreated",
        "job_id": "use1-1700000000000-gate.1-00001",
        "spec": {"n": 1},
        "assigned_dcs": ["use1"],
        "fence_token": 1,
    });
    let (status, v) = answer(
        http_client()
            .post(hub.url("/api/v1/ledger/gate-1/events"))
            .bearer_auth(TOKEN)
            .json(&json!({ "event": event }))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{v}");
    let half = 1u64 << 63;
    let request = json!({
        "kind": "frames",
        "floor": 0,
        "spans": [{"from": 0, "to": half}, {"from": 0, "to": half}, {"from": 0, "to": 1}],
        "offer": [],
        "apply": false,
    });
    let (status, v) = answer(
        http_client()
            .post(hub.url("/api/v1/ledger/gate-1/sync"))
            .bearer_auth(TOKEN)
            .json(&request)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 400, "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 65536 LSNs"), "{v}");
}

/// Two Authorization headers: serve read the first, so the answer depended on their order (a
/// proxy in front may check or strip the other one). Now both orders are refused.
#[test]
fn two_authorization_headers_are_refused_whatever_their_order() {
    let hub = Hub::start(&[]);
    let path = "/api/v1/scheduler/chain/verify?tenantId=acme";
    for pair in [[TOKEN, "wrong"], ["wrong", TOKEN]] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            pair[0], pair[1]
        );
        let text = exchange(&hub.addr(), request.as_bytes(), Duration::from_secs(30));
        assert!(text.starts_with("HTTP/1.1 400"), "{pair:?}: {text}");
        assert!(text.contains("repeated-header"), "{text}");
    }
    // One header with the token still works (404: this store has no chain for the tenant).
    let (status, v) = answer(
        http_client()
            .get(hub.url(path))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 404, "{v}");
}

/// A body trickled one byte at a time, each byte well inside the body timeout: it was never cut
/// off (the timeout counted from the last byte), so one client held its request, and a graceful
/// stop waiting for it, for as long as it liked. Now the body must keep moving (64 KiB per
/// timeout) and the trickle gets 408 about one timeout after its first byte.
#[test]
fn a_body_trickled_byte_by_byte_is_cut_off() {
    let hub = Hub::start(&["--body-timeout-ms", "1000"]);
    let mut c = TcpStream::connect(hub.addr()).unwrap();
    write!(
        c,
        "POST /api/v1/ledger/gate-1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    .unwrap();
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    // One byte every 300 ms for up to 30 s (100 bytes): the answer must come well before.
    while started.elapsed() < Duration::from_secs(30) {
        if c.write_all(b" ").is_err() {
            break;
        }
        let mut buf = [0u8; 4096];
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    got.extend_from_slice(&rest);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "after {:?}: {text}",
        started.elapsed()
    );
    assert!(
        text.contains("body-timeout") && text.contains("too slowly"),
        "{text}"
    );
}

/// A query value that is not UTF-8 once percent-decoded was turned into U+FFFD and acted on
/// (`tenantId=%ff` looked up the tenant "\u{fffd}"; `file=%ff` named an import "\u{fffd}").
/// Now it is refused with 400, naming the bytes.
#[test]
fn query_values_that_are_not_utf8_are_refused_not_replaced() {
    let hub = Hub::start(&[]);
    let (status, v) = answer(
        http_client()
            .get(hub.url("/api/v1/scheduler/chain/verify?tenantId=%ff"))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 400, "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(message.contains(r"tenantId=\xff"), "{v}");
    assert!(!message.contains('\u{fffd}'), "{v}");
}

/// A client that asks for a large export and then stops reading: its answer could not be
/// written, so the connection stayed open for ever, and so did serve on SIGTERM (a graceful stop
/// lets answers finish). Now an answer the client takes no byte of for the body timeout closes
/// the connection, and serve stops.
#[test]
fn a_client_that_stops_reading_its_answer_does_not_hold_serve() {
    use sha2::Digest;
    let hub = Hub::start(&["--body-timeout-ms", "1000"]);
    // A recorded export far larger than the sockets' buffers.
    let artifact = hub.dir.path().join("big-export.tgz");
    let bytes = vec![7u8; 64 << 20];
    std::fs::write(&artifact, &bytes).unwrap();
    let id = "6a2f0a51-3c55-4b8e-9b0e-2d6f3f7c9a10";
    rusqlite::Connection::open(hub.store())
        .unwrap()
        .execute(
            "INSERT INTO exports (export_id, bundle_id, path, artifact_sha256, size_bytes, created_at)
             VALUES (?1, 'b-1', ?2, ?3, ?4, '2026-01-01T00:00:00.000Z')",
            rusqlite::params![
                id,
                artifact.to_str().unwrap(),
                hex::encode(sha2::Sha256::digest(&bytes)),
                bytes.len() as i64
            ],
        )
        .unwrap();
    let mut c = TcpStream::connect(hub.addr()).unwrap();
    write!(
        c,
        "GET /v1/exports/airgap/evidence/{id}/download HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "{}", String::from_utf8_lossy(&head));
    // The client reads nothing more and keeps its socket open.
    assert_eq!(hub.stop(), 0);
    drop(c);
}

/// JSON bodies were bounded per request (64 MiB) but not for the whole serve: any number of
/// connections could each make it buffer 64 MiB. Now they share a 256 MiB budget: while four
/// bodies without a length (each reserves 64 MiB) are still arriving, an append gets 503 `busy`
/// with `Retry-After` and appends nothing; once those bodies have finished, the same append goes
/// through.
#[test]
fn json_bodies_in_memory_are_bounded_for_the_whole_serve() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // A request waits up to half the body timeout for room before its 503.
    let hub = Hub::start(&["--body-timeout-ms", "6000"]);
    let events = "/api/v1/ledger/gate-1/events";
    let send = |body: &str| -> (u16, Option<String>, Value) {
        let resp = http_client()
            .post(hub.url(events))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let (status, v) = answer(resp);
        (status, retry, v)
    };
    // serve's default body budget (256 MiB, `--max-body-memory-mib`) over JSON_BODY_LIMIT (64
    // MiB, what a body without a length reserves): the bodies that take the whole budget.
    let held = 4;
    let mut bodies = Vec::new();
    for _ in 0..held {
        let mut c = TcpStream::connect(hub.addr()).unwrap();
        write!(
            c,
            "POST {events} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n1\r\n \r\n"
        )
        .unwrap();
        bodies.push(c);
    }
    // They keep arriving (64 KiB of blanks every 200 ms): the body timeout never cuts them off.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let mut streams: Vec<TcpStream> = bodies.iter().map(|c| c.try_clone().unwrap()).collect();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
            while !stop.load(Ordering::Relaxed) {
                for c in &mut streams {
                    let _ = c.write_all(chunk.as_bytes());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    // Until serve has reserved the four bodies' shares, a probe (not JSON: 400, nothing done) is
    // let through; then it is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _, v) = send("x");
        if status == 503 {
            break;
        }
        assert_eq!(status, 400, "{v}");
        assert!(
            Instant::now() < deadline,
            "four bodies of 64 MiB still arriving never took serve's budget: {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let event = json!({
        "event": {
            "type": "JobCreated",
            "job_id": "use1-1700000000000-gate.1-00001",
            "spec": {"n": 1},
            "assigned_dcs": ["use1"],
            "fence_token": 1,
        }
    })
    .to_string();
    let (status, retry, v) = send(&event);
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"], "busy", "{v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("256 MiB") && message.contains("send it again"),
        "{v}"
    );
    assert_eq!(retry.as_deref(), Some("1"), "{v}");
    let log = hub.dir.path().join("ledgers").join("gate-1.alwl");
    assert!(!log.exists(), "the refused append left {}", log.display());
    // The four bodies end (`{}` is no append: 400); their shares are given back.
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    for mut c in bodies {
        c.write_all(b"2\r\n{}\r\n0\r\n\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    }
    let (status, _, v) = send(&event);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["lsn"], 1, "the refused append left nothing: {v}");
    assert_eq!(hub.stop(), 0);
}

// ---------------------------------------------------------------- relay

async fn relay_with_standin() -> (
    tempfile::TempDir,
    airlock::relay::standin::StandIn,
    support::TestRelay,
) {
    let dir = tempfile::tempdir().unwrap();
    let up = support::standin().await;
    let relay = support::TestRelay::start(&up.url(), &dir.path().join("outbox.sqlite3")).await;
    (dir, up, relay)
}

/// Raw request and answer over one connection, async.
async fn exchange_async(url: &str, request: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    c.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), c.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// `OPTIONS *` (and `CONNECT host:port`) name no path: joined to the upstream's URL, `*` made
/// an address that does not parse, which the relay took for an unreachable upstream: 503
/// "upstream unavailable" and the upstream marked down while it answered. Now 400, and the
/// upstream is not marked down.
#[tokio::test(flavor = "multi_thread")]
async fn requests_that_name_no_path_are_refused_and_leave_the_upstream_up() {
    let (_dir, _up, relay) = relay_with_standin().await;
    for request in [
        &b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"[..],
        b"CONNECT example.com:80 HTTP/1.1\r\nHost: example.com:80\r\nConnection: close\r\n\r\n",
    ] {
        let text = exchange_async(&relay.url, request).await;
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
        assert!(text.contains("names none"), "{text}");
        assert!(!text.contains("upstream unavailable"), "{text}");
    }
    relay.stop().await;
}

/// The answer to a method other than GET/HEAD on `/healthz` is the upstream's; the relay's
/// router added `Allow: GET,HEAD` to it (its method router's fallback), a header the upstream
/// never sent. Now it comes back as sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_forwarded_answer_on_healthz_gets_no_header_the_upstream_did_not_send() {
    let (_dir, _up, relay) = relay_with_standin().await;
    let resp = support::client()
        .post(format!("{}/healthz", relay.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let allow = resp.headers().get("allow").cloned();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["method"], "POST", "the stand-in answered: {v}");
    assert_eq!(allow, None, "{v}");
    relay.stop().await;
}

/// Request bodies held at once are bounded for the whole relay, not only per request: sixteen
/// uploads without a length that send nothing more hold the 256 MiB budget (each may grow to the
/// 16 MiB forwarding limit), and the next request is told 503 "retry" within half the body
/// timeout, nothing forwarded or queued. (Every connection the cap allows could hold 16 MiB: 8 GiB
/// at the default cap, on an edge box.) Once the stalled uploads are cut off, requests go through.
#[tokio::test(flavor = "multi_thread")]
async fn request_bodies_in_memory_are_bounded_for_the_whole_relay() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let up = support::standin().await;
    let mut config = airlock::relay::RelayConfig::new(up.url(), dir.path().join("outbox.sqlite3"));
    config.limits.body_timeout = Duration::from_secs(4);
    // `--max-body-memory-mib 32`: room for two bodies without a length (16 MiB each).
    config.limits.body_memory_mib = 32;
    let relay = support::TestRelay::start_with(config).await;
    let held = 32 * 1024 * 1024 / airlock::relay::MAX_FORWARD_BODY;
    let mut stalled = Vec::new();
    for _ in 0..held {
        let mut c = tokio::net::TcpStream::connect(relay.url.trim_start_matches("http://"))
            .await
            .unwrap();
        c.write_all(b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
            .await
            .unwrap();
        stalled.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resp = support::client()
        .post(format!("{}/progress/", relay.url))
        .header("idempotency-key", "k-budget")
        .json(&json!({"n": 1}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["queued"], false, "{v}");
    assert!(v["error"].as_str().unwrap().contains("retry"), "{v}");
    // The stalled uploads are cut off at the body timeout; the budget is free again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let resp = support::client()
        .post(format!("{}/progress/", relay.url))
        .header("idempotency-key", "k-budget-2")
        .json(&json!({"n": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    drop(stalled);
    relay.stop().await;
}
