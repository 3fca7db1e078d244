//! The relay under hostile requests (issue 10): scrubbing per SPEC section 9, refusals for
//! ambiguous requests, and what the process prints and logs. Real sockets throughout.

mod common;
mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{all_bytes, client, dead_upstream, TestRelay};

fn outbox_text(dir: &std::path::Path) -> String {
    let bytes: Vec<u8> = all_bytes(dir).into_iter().flat_map(|(_, b)| b).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn camel_case_names_encoded_query_names_and_repeated_keys_never_leak() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let body = r#"{"accessToken":"LEAK-1","clientSecret":"LEAK-2","privateKey":"LEAK-3",
        "sessionToken":"LEAK-4","nested":[{"x-api-key":"LEAK-5","pwd":"LEAK-6"}],"note":"SHOWN-1"}"#;
    let r = c
        .patch(format!(
            "{}/tasks/t-1?token=LEAK-7&p%61ssword=LEAK-8&api%5fkey=LEAK-9&user[password]=LEAK-10&page=SHOWN-2",
            relay.url
        ))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
    // A repeated key would let one copy through a last-wins scrub: refused.
    let r = c
        .patch(format!("{}/tasks/t-2", relay.url))
        .header("content-type", "application/json")
        .body(r#"{"password":"LEAK-11","password":"LEAK-12"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["code"], "repeated-key");
    let path = relay.outbox.clone();
    relay.stop().await;
    let everything = outbox_text(dir.path());
    assert!(everything.contains("SHOWN-1") && everything.contains("SHOWN-2"));
    for i in 1..=12 {
        assert!(
            !everything.contains(&format!("LEAK-{i}\""))
                && !everything.contains(&format!("LEAK-{i}&")),
            "LEAK-{i} reached the outbox"
        );
    }
    assert!(!everything.contains("LEAK-10"));
    let ob = airlock::core::outbox::Outbox::open_existing(&path).unwrap();
    assert_eq!(ob.counts().unwrap().queued, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_or_credentialled_requests_are_refused_not_queued() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let u = format!("{}/progress/", relay.url);
    let r = c
        .post(&u)
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "empty-json-body");
    let r = c
        .post(&u)
        .header("idempotency-key", "k-1")
        .header("idempotency-key", "k-2")
        .json(&serde_json::json!({"a": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for h in ["Token", "Auth", "X-Session-Id", "Signature"] {
        let r = c
            .post(&u)
            .header(h, "value")
            .json(&serde_json::json!({"a": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503, "{h}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["code"],
            "credentials",
            "{h}"
        );
    }
    // Broken chunked framing is a bad request, not a body over the limit.
    let addr = relay.url.trim_start_matches("http://").to_string();
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        s.write_all(b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let path = relay.outbox.clone();
    relay.stop().await;
    let ob = airlock::core::outbox::Outbox::open_existing(&path).unwrap();
    assert_eq!(ob.counts().unwrap().queued, 0);
}

#[test]
fn the_relay_opens_its_outbox_before_announcing_and_never_logs_a_secret_query() {
    let bin = env!("CARGO_BIN_EXE_airlock");
    let o = Command::new(bin)
        .args(["relay", "--listen", "127.0.0.1:0", "--outbox", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("listening"));

    let dir = tempfile::tempdir().unwrap();
    let (child, url) = spawn_relay(&dir, &[], &[("RUST_LOG", "trace")]);
    let status = raw_http::post(&format!("{url}/progress/?token=TOPSECRET-Q"));
    assert_eq!(status, 202);
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("queued"), "{log}");
    assert!(!log.contains("TOPSECRET-Q"), "{log}");
}

/// `relay.listen` of the configuration file is where the relay listens (flag over file over the
/// default, as for `serve.listen`), next to `outbox.path` and `relay.upstreamUrl` from the same file.
#[test]
fn the_relay_listens_where_the_configuration_file_says() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.path().join("r.yaml");
    let outbox = dir.path().join("o.sqlite3");
    std::fs::write(
        &cfg,
        format!(
            "relay:\n  listen: 127.0.0.1:{port}\n  upstreamUrl: {}\noutbox:\n  path: {}\n",
            dead_upstream(),
            outbox.display()
        ),
    )
    .unwrap();
    let start = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--db")
            .arg(dir.path().join("store.db"))
            .arg("--config")
            .arg(&cfg)
            .arg("relay")
            .args(extra)
            .env_remove("STATEHUB_OUTBOX_PATH")
            .env_remove("STATEHUB_UPSTREAM_URL")
            .env_remove("API_BASE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let url = announced_url_of(&mut child);
        (child, url)
    };
    let (child, url) = start(&[]);
    let answer = raw_http::get(&format!("{url}/healthz"));
    let out = stop(child);
    assert_eq!(url, format!("http://127.0.0.1:{port}"), "{}", text(&out));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body: Value =
        serde_json::from_str(&answer[answer.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["relay"]["status"], "ok");
    assert_eq!(body["relay"]["listen"], format!("127.0.0.1:{port}"));
    assert_eq!(body["outbox"]["path"], outbox.display().to_string());
    // --listen still wins over the file.
    let (child, url) = start(&["--listen", "127.0.0.1:0"]);
    let out = stop(child);
    assert_ne!(url, format!("http://127.0.0.1:{port}"), "{}", text(&out));
}

/// The URL a relay started with piped stdout announces on its first line.
fn announced_url_of(child: &mut std::process::Child) -> String {
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL announced: {line:?}"))
        .to_string()
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Starts `airlock relay` on a free port with a dead upstream and `args`, under `ulimit -n
/// NOFILE` when the environment names one; returns it and its URL from the first stdout line.
fn spawn_relay(
    dir: &tempfile::TempDir,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, String) {
    let bin = env!("CARGO_BIN_EXE_airlock");
    let nofile = env
        .iter()
        .find(|(k, _)| *k == "NOFILE")
        .map(|(_, v)| v.to_string());
    let mut c = match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    c.args([
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &dead_upstream(),
    ])
    .arg("--outbox")
    .arg(dir.path().join("o.sqlite3"))
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let url = announced_url_of(&mut child);
    (child, url)
}

/// SIGTERM, then everything the relay printed.
fn stop(child: std::process::Child) -> std::process::Output {
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait_with_output().unwrap()
}

/// Connects to the relay at `url`, sends `bytes` and reads until the relay closes the connection.
/// Returns what was read, or panics if the connection is still open after 30 s.
fn closed_after(url: &str, bytes: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "still open after 30 s ({e}) having sent {:?}; read {:?}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&out)
            ),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn half_sent_heads_and_stalled_bodies_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = spawn_relay(
        &dir,
        &[
            "--header-timeout-ms",
            "300",
            "--body-timeout-ms",
            "300",
            "--keep-alive-timeout-ms",
            "600000",
        ],
        &[],
    );
    // Nothing at all, then half a head: the header timeout closes both.
    closed_after(&url, b"");
    closed_after(&url, b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Ty");
    // A complete head whose body never comes: 408, then the connection is closed.
    let answer = closed_after(
        &url,
        b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"a\"",
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("nothing was forwarded or queued"),
        "{answer}"
    );
    stop(child);
    let ob = airlock::core::outbox::Outbox::open_existing(&dir.path().join("o.sqlite3")).unwrap();
    assert_eq!(ob.counts().unwrap().total(), 0);
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = spawn_relay(
        &dir,
        &[
            "--header-timeout-ms",
            "600000",
            "--keep-alive-timeout-ms",
            "300",
        ],
        &[],
    );
    // One complete request on a kept-alive connection, then silence.
    let answer = closed_after(
        &url,
        b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    );
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    assert!(
        !answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    // A connection that never sends anything.
    closed_after(&url, b"");
    stop(child);
}

#[test]
fn idle_sockets_past_the_cap_and_the_file_limit_do_not_starve_a_new_request() {
    let dir = tempfile::tempdir().unwrap();
    // 200 idle sockets against a relay limited to 128 open files and its default cap.
    let (child, url) = spawn_relay(
        &dir,
        &[
            "--keep-alive-timeout-ms",
            "300",
            "--header-timeout-ms",
            "600000",
        ],
        &[("NOFILE", "128")],
    );
    let addr = url.trim_start_matches("http://").to_string();
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"POST /progress/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}").unwrap();
    let mut answer = String::new();
    let r = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 202"), "{r:?}: {answer:?}");
    drop(idle);
    let out = stop(child);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connection cap lowered"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A one-request HTTP client over a plain socket (this test has no async runtime).
mod raw_http {
    use std::io::{Read, Write};
    /// `GET url` on a connection of its own; the whole answer (status line, headers, body).
    pub fn get(url: &str) -> String {
        exchange(url, "GET", "")
    }
    /// `POST url` with the body `{}`; the answer's status.
    pub fn post(url: &str) -> u16 {
        let out = exchange(
            url,
            "POST",
            "Content-Type: application/json\r\nContent-Length: 2\r\n",
        );
        out[9..12].parse().unwrap()
    }
    /// One request (`extra` headers, a `{}` body when a length is among them) on a connection of
    /// its own; the whole answer.
    fn exchange(url: &str, method: &str, extra: &str) -> String {
        let rest = url.trim_start_matches("http://");
        let (addr, path) = rest.split_at(rest.find('/').unwrap());
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let body = if extra.is_empty() { "" } else { "{}" };
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n{body}"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
}

/// `--max-body-memory-mib` is refused at start, before the outbox or the store is opened, when it
/// is 0, past 1 TiB, or less than one of the largest bodies the server accepts (relay 16 MiB,
/// serve 64 MiB): such a budget could never hold the body it must accept.
#[test]
fn a_body_memory_budget_that_cannot_hold_one_body_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("o.sqlite3");
    let store = dir.path().join("s.db");
    let args = |head: Vec<String>, mib: &str| {
        let tail = ["--listen", "127.0.0.1:0", "--max-body-memory-mib", mib];
        head.into_iter()
            .chain(tail.map(String::from))
            .collect::<Vec<_>>()
    };
    let o = outbox.display().to_string();
    let relay = |mib: &str| {
        let head = ["relay", "--outbox", &o, "--upstream", "http://127.0.0.1:9"];
        args(head.map(String::from).to_vec(), mib)
    };
    let s = store.display().to_string();
    let serve = |mib: &str| args(["--db", &s, "serve"].map(String::from).to_vec(), mib);
    for (args, said) in [
        (relay("0"), "--max-body-memory-mib must be at least 1"),
        (relay("1048577"), "must be at most 1048576 (1 TiB)"),
        (
            relay("15"),
            "less than one of the relay's bodies (16 MiB): give at least 16",
        ),
        (
            serve("63"),
            "less than one of serve's JSON bodies (64 MiB): give at least 64",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    assert!(!outbox.exists() && !store.exists(), "nothing opened");
}

/// An upstream on loopback that answers 200 to everything and records each request's path.
async fn recording_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(uri.path().to_string());
            "{}"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen)
}

/// Sends `head` (a request line and headers, the body after them) as it is, without a client's
/// normalisation of the path (`curl --path-as-is`); the answer's text.
async fn raw_request(url: &str, head: String) -> String {
    let addr = url.trim_start_matches("http://").to_string();
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .unwrap()
}

/// A request path with a `.` or `..` segment, raw or percent-encoded in any case, is refused with
/// 400 and never reaches the upstream outside its base path (`/base` + `/../progress/` was sent
/// upstream as `/progress/`, `/%2e%2e/_standin/stats` as `/_standin/stats`); a stored envelope
/// with such a path is never replayed either, it fails with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_segments_never_leave_the_upstreams_base_path() {
    let (upstream, seen) = recording_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{upstream}/base");
    let relay = TestRelay::start(&base, &dir.path().join("o.sqlite3")).await;
    for (method, path) in [
        ("POST", "/../progress/"),
        ("GET", "/%2e%2e/_standin/stats"),
        ("GET", "/%2E%2E/x"),
        ("GET", "/.%2E/x"),
        ("PATCH", "/messages/%2e%2e/read"),
        ("GET", "/a/./b"),
        ("GET", "/a/%2e/b"),
        ("GET", "/a/..?x=1"),
    ] {
        let answer = raw_request(
            &relay.url,
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("dot-segment"), "{path}: {answer}");
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    let answer = raw_request(
        &relay.url,
        "GET /a.b/..c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_string(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(*seen.lock().unwrap(), ["/base/a.b/..c"]);
    let path = relay.outbox.clone();
    relay.stop().await;
    // An envelope stored with such a path (an older relay's, or edited) fails at replay.
    support::seed(
        &path,
        &[support::envelope("POST", "/progress/", "{}", "k-dot")],
    );
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE envelopes SET path = '/%2e%2e/progress/'", [])
        .unwrap();
    let summary = airlock::core::outbox::replay(
        &path,
        &airlock::core::outbox::ReplayOptions::new(base),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(summary.counts.failed, 1, "{summary:?}");
    assert_eq!(*seen.lock().unwrap(), ["/base/a.b/..c"]);
    let ob = airlock::core::outbox::Outbox::open_existing(&path).unwrap();
    let listed = serde_json::to_string(&ob.list(None, Some(10)).unwrap()).unwrap();
    assert!(listed.contains("base path"), "{listed}");
}

/// An upstream on loopback that answers every request `{}` after `delay`.
async fn slow_upstream(delay: Duration) -> String {
    let app = axum::Router::new().fallback(move || async move {
        tokio::time::sleep(delay).await;
        "{}"
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// A request without a body (no Content-Length, no Transfer-Encoding) takes none of the body
/// budget for its round trip: 40 slow GETs are all in flight at once (each reserved 16 MiB, so 16
/// fitted a 256 MiB budget and the rest got 503). A chunked body reserves the largest allowed only
/// until it is read: then its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_without_a_body_and_read_chunked_bodies_leave_the_budget_free() {
    let upstream = slow_upstream(Duration::from_millis(1500)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = airlock::relay::RelayConfig::new(upstream, dir.path().join("o.sqlite3"));
    // Waits up to 1 s for room: shorter than one upstream round trip.
    config.limits.body_timeout = Duration::from_secs(2);
    let relay = TestRelay::start_with(config).await;
    let c = client();
    let gets = (0..40).map(|i| {
        let (c, url) = (c.clone(), format!("{}/tasks/t-{i}", relay.url));
        async move { c.get(url).send().await.unwrap().status().as_u16() }
    });
    let statuses = futures_util::future::join_all(gets).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    relay.stop().await;

    // One budget of 16 MiB: a chunked body takes all of it until it is read.
    let dir = tempfile::tempdir().unwrap();
    let upstream = slow_upstream(Duration::from_millis(1500)).await;
    let mut config = airlock::relay::RelayConfig::new(upstream, dir.path().join("o.sqlite3"));
    config.limits.body_timeout = Duration::from_secs(2);
    config.limits.body_memory_mib = 16;
    let relay = TestRelay::start_with(config).await;
    let chunked = raw_request(
        &relay.url,
        "POST /tasks/chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_string(),
    );
    let later = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let posts = (0..4).map(|i| {
            let (c, url) = (c.clone(), format!("{}/tasks/p-{i}", relay.url));
            async move {
                c.post(url)
                    .json(&serde_json::json!({"a": i}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        });
        futures_util::future::join_all(posts).await
    };
    let (chunked, statuses) = tokio::join!(chunked, later);
    assert!(chunked.starts_with("HTTP/1.1 200"), "{chunked}");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    relay.stop().await;
}

/// An outbox file this user can only read (0444, its directory writable) fails the relay's start
/// with exit 2 saying so, before the "listening" line; it used to start, say "ok" in /healthz and
/// answer every queued write 503. As root (which ignores file modes) the relay runs as `nobody`.
#[test]
fn an_outbox_this_user_cannot_write_fails_the_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("edge");
    std::fs::create_dir(&folder).unwrap();
    let outbox = folder.join("o.sqlite3");
    support::seed(
        &outbox,
        &[support::envelope("POST", "/progress/", "{}", "k-ro")],
    );
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode(dir.path(), 0o755);
    mode(&folder, 0o777);
    mode(&outbox, 0o444);
    let before = std::fs::read(&outbox).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_airlock"));
    cmd.args([
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &dead_upstream(),
    ])
    .arg("--outbox")
    .arg(&outbox)
    .env("HOME", "/");
    let o = common::output_within(common::unprivileged(&mut cmd), Duration::from_secs(30));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("read-only for this user"), "{t}");
    assert!(t.contains("o.sqlite3"), "{t}");
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("listening"),
        "{t}"
    );
    assert_eq!(std::fs::read(&outbox).unwrap(), before);
}
