//! Relay defects found by the edge audit: deeply nested bodies, repeated keys under a secret key,
//! the Idempotency-Key on refusals, large upstream answers, and `/healthz` methods.

mod support;

use airlock::relay::RelayConfig;
use serde_json::{json, Value};
use std::time::Duration;
use support::{client, dead_upstream, standin, TestRelay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

async fn post_raw(c: &reqwest::Client, url: &str, body: String) -> (u16, Value) {
    let r = c
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A body nested far deeper than any parser allows used to overflow the relay's stack (the whole
/// relay aborted); now it is refused and the relay keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nested_body_is_refused_and_the_relay_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let url = format!("{}/progress/", relay.url);

    let (status, b) = post_raw(&c, &url, nested(30_000)).await;
    assert_eq!(status, 503, "{b}");
    assert_eq!(b["code"], "too-deep");
    assert_eq!(b["queued"], false);
    // Also under a secret key, whose value is replaced but still checked.
    let (status, b) = post_raw(&c, &url, format!("{{\"token\":{}}}", nested(30_000))).await;
    assert_eq!((status, b["code"].as_str()), (503, Some("too-deep")));

    let (status, _) = post_raw(&c, &url, nested(129)).await;
    assert_eq!(status, 503);
    let (status, b) = post_raw(&c, &url, nested(128)).await;
    assert_eq!(status, 202, "{b}");
    let (status, _) = post_raw(&c, &url, r#"{"ok":1}"#.into()).await;
    assert_eq!(status, 202);

    let ob = relay.stop_and_open().await;
    assert_eq!(ob.list(None, None).unwrap().len(), 2);
}

/// SPEC 9: a key repeated in one object is refused at any depth, also inside a secret key's value
/// (which used to be replaced without being looked at).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_under_a_secret_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let url = format!("{}/progress/", relay.url);
    for body in [
        r#"{"token":{"a":1,"a":2}}"#,
        r#"{"x":[{"password":[{"q":1,"\u0071":2}]}]}"#,
    ] {
        let (status, b) = post_raw(&c, &url, body.into()).await;
        assert_eq!(status, 400, "{body}: {b}");
        assert_eq!(b["code"], "repeated-key", "{body}");
    }
    let ob = relay.stop_and_open().await;
    assert!(ob.list(None, None).unwrap().is_empty());
}

/// docs/relay.md: every write the relay forwards or queues carries an Idempotency-Key, echoed in
/// the answer. A write the relay tried to forward and then refused (online-only, credentials, a
/// reused key) must name its key too: the upstream may have received it before timing out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_after_a_forward_attempt_name_the_idempotency_key() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let u = |p: &str| format!("{}{p}", relay.url);

    let r = c.delete(u("/tasks/t-1")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let minted = r.headers()["idempotency-key"].to_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&minted).is_ok(), "{minted}");

    let r = c
        .delete(u("/tasks/t-1"))
        .header("idempotency-key", "del-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["idempotency-key"], "del-1");

    let r = c
        .post(u("/progress/"))
        .header("idempotency-key", "cred-1")
        .header("authorization", "Bearer x")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["idempotency-key"], "cred-1");

    let send = |body: Value| {
        c.post(u("/progress/"))
            .header("idempotency-key", "k-1")
            .json(&body)
            .send()
    };
    assert_eq!(send(json!({"a": 1})).await.unwrap().status(), 202);
    let r = send(json!({"a": 2})).await.unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(r.headers()["idempotency-key"], "k-1");
    relay.stop().await;
}

/// An upstream that answers 200 with a body of `declared` bytes, sends `sent` of them, then holds
/// the connection open without sending more.
async fn stalling_upstream(declared: usize, sent: usize) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {declared}\r\n\r\n");
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&vec![b'x'; sent]).await;
                tokio::time::sleep(Duration::from_secs(60)).await;
            });
        }
    });
    url
}

/// A large upstream answer (an export) used to be held whole in the relay's memory before the
/// client saw a byte of it (3 GB answered, 3 GB resident). Past 1 MiB it is now passed on as it
/// arrives: here the client gets the head and the first bytes while the upstream still sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_upstream_answer_is_passed_on_as_it_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = stalling_upstream(64 << 20, 3 << 20).await;
    let mut config = RelayConfig::new(upstream, dir.path().join("o.sqlite3"));
    config.upstream_timeout = Duration::from_secs(30);
    let relay = TestRelay::start_with(config).await;
    let c = client();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        let mut r = c
            .get(format!("{}/exports/graph", relay.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let mut n = 0usize;
        while n < (2 << 20) {
            n += r.chunk().await.unwrap().expect("more body").len();
        }
        n
    })
    .await
    .expect("the answer starts before the upstream has sent all of it");
    assert!(got >= 2 << 20);
    relay.stop().await;
}

/// Only `GET /healthz` is the relay's own; other methods on the path go to the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_on_healthz_are_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let up = standin().await;
    let relay = TestRelay::start(&up.url(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let r = c
        .post(format!("{}/healthz", relay.url))
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 405);
    assert!(r.headers().contains_key("idempotency-key"));
    assert!(up
        .received()
        .iter()
        .any(|q| q.method == "POST" && q.path == "/healthz"));
    let health: Value = c
        .get(format!("{}/healthz", relay.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["relay"]["status"], "ok");
    relay.stop().await;
    up.stop().await;
}

/// An upstream that answers every request with a body of `len` bytes and `content-length: len`
/// (a `HEAD` gets the same head and no body, RFC 9110 9.3.2), then closes the connection.
async fn sized_upstream(len: usize) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                     content-length: {len}\r\nconnection: close\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes()).await;
                if !buf[..n].starts_with(b"HEAD ") {
                    let _ = s.write_all(&vec![b'x'; len]).await;
                }
                let _ = s.shutdown().await;
            });
        }
    });
    url
}

/// Sends `request` to the relay at `url` on a new connection and reads until the relay closes it.
async fn raw_exchange(url: &str, request: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("the relay answers and closes")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// RFC 9110 9.3.2 / 8.6: a `HEAD` answer carries the Content-Length a `GET` would have. The relay
/// used to drop the upstream's Content-Length (a hop-by-hop header to it) and, having no body to
/// measure, send none at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_answer_keeps_the_upstreams_content_length_and_has_no_body() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = sized_upstream(5000).await;
    let relay = TestRelay::start(&upstream, &dir.path().join("o.sqlite3")).await;
    let c = client();
    let url = format!("{}/exports/graph", relay.url);

    let get = c.get(&url).send().await.unwrap();
    assert_eq!(get.status(), 200);
    assert_eq!(get.headers()["content-length"], "5000");
    assert_eq!(get.bytes().await.unwrap().len(), 5000);

    let head = c.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()),
        Some("5000"),
        "{:?}",
        head.headers()
    );
    // On the wire: exactly one Content-Length, and nothing after the head.
    let raw = raw_exchange(
        &relay.url,
        "HEAD /exports/graph HTTP/1.1\r\nhost: relay\r\nconnection: close\r\n\r\n",
    )
    .await;
    let lower = raw.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{raw}");
    assert_eq!(lower.matches("content-length:").count(), 1, "{raw}");
    assert!(lower.contains("content-length: 5000\r\n"), "{raw}");
    assert!(!lower.contains("transfer-encoding"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n"), "a body followed the head: {raw}");
    relay.stop().await;
}

/// An upstream whose answers have no Content-Length: a GET's body is chunked (a streamed export),
/// and a `HEAD` gets the same head (`transfer-encoding: chunked`) and no body.
async fn chunked_upstream() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                            transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                let _ = s.write_all(head.as_bytes()).await;
                if !buf[..n].starts_with(b"HEAD ") {
                    let _ = s.write_all(b"5\r\nhello\r\n0\r\n\r\n").await;
                }
                let _ = s.shutdown().await;
            });
        }
    });
    url
}

/// A `HEAD` whose GET would be chunked (its length unknown): the relay's answer used to carry
/// `content-length: 0`, made up by the router for the empty body, telling the client the body is
/// empty. It now carries no Content-Length, as the upstream sent none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_answer_without_an_upstream_length_claims_none() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = chunked_upstream().await;
    let relay = TestRelay::start(&upstream, &dir.path().join("o.sqlite3")).await;
    let url = format!("{}/exports/graph", relay.url);

    let get = client().get(&url).send().await.unwrap();
    assert_eq!(get.status(), 200);
    assert_eq!(get.bytes().await.unwrap().as_ref(), b"hello");

    let raw = raw_exchange(
        &relay.url,
        "HEAD /exports/graph HTTP/1.1\r\nhost: relay\r\nconnection: close\r\n\r\n",
    )
    .await;
    let lower = raw.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{raw}");
    assert!(!lower.contains("content-length:"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n"), "a body followed the head: {raw}");
    relay.stop().await;
}

/// SPEC 9 gives writes their key (the client's or a new one); it says nothing to take a read's
/// away. A client's Idempotency-Key on a forwarded GET or HEAD used to be dropped; it now reaches
/// the upstream unchanged, and the relay still mints none for a read that has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reads_idempotency_key_is_forwarded_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let up = standin().await;
    let relay = TestRelay::start(&up.url(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let u = |p: &str| format!("{}{p}", relay.url);

    let r = c
        .get(u("/tasks/t-1"))
        .header("idempotency-key", "read-key-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .head(u("/tasks/t-2"))
        .header("idempotency-key", "Read Key/2 (as sent)")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c.get(u("/tasks/t-3")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // A write keeps its key as before.
    let r = c
        .post(u("/progress/"))
        .header("idempotency-key", "write-key-1")
        .json(&json!({"a": 1}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());

    let got = up.received();
    let key_of = |method: &str, path: &str| {
        let q = got
            .iter()
            .find(|q| q.method == method && q.path == path)
            .unwrap_or_else(|| panic!("{method} {path} reached the upstream: {got:?}"));
        (
            q.idempotency_key.clone(),
            q.header_names
                .iter()
                .filter(|n| *n == "idempotency-key")
                .count(),
        )
    };
    assert_eq!(key_of("GET", "/tasks/t-1"), (Some("read-key-1".into()), 1));
    assert_eq!(
        key_of("HEAD", "/tasks/t-2"),
        (Some("Read Key/2 (as sent)".into()), 1)
    );
    assert_eq!(key_of("GET", "/tasks/t-3"), (None, 0));
    assert_eq!(
        key_of("POST", "/progress/"),
        (Some("write-key-1".into()), 1)
    );
    relay.stop().await;
    up.stop().await;
}
