//! A State Hub stand-in for tests, benchmarks and drills (`airlock dev upstream`). It implements the
//! seed's central idempotency: an exact duplicate (same Idempotency-Key, same request) gets the
//! original response and is not applied again; the same key with a different request gets `409`.
//! It counts how often each key was applied, and can be told to answer 5xx, to answer slowly, to
//! answer a given path with a given status, or to refuse connections (its port really closes).
//!
//! Control endpoints (never idempotency-checked):
//! - `GET /_standin/stats`: `{"requests", "applied": {key: count}, "appliedWithoutKey", ...}`
//! - `POST /_standin/mode`: `{"failStatus": 503 | null, "delayMs": n, "refuseForMs": n}`
//! - `POST /_standin/script`: `{"path": "/tasks/t1", "status": 409, "body": {...}}`

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listen {
    Up,
    Refuse,
    Stop,
}

struct Stored {
    fingerprint: String,
    status: u16,
    body: Value,
}

/// One request the stand-in received (control endpoints excluded).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Received {
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub body: String,
    /// Header names received (lowercase).
    pub header_names: Vec<String>,
}

#[derive(Default)]
struct Book {
    stored: HashMap<String, Stored>,
    applied: HashMap<String, u32>,
    applied_without_key: u64,
    scripts: HashMap<String, (u16, Value)>,
    received: Vec<Received>,
}

struct Shared {
    book: Mutex<Book>,
    fail_status: AtomicU16,
    delay_ms: AtomicU64,
    requests: AtomicU64,
    ctl: watch::Sender<Listen>,
    listening: watch::Sender<bool>,
}

impl Shared {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The most requests kept in the received log.
const MAX_RECEIVED: usize = 100_000;

/// A running stand-in.
pub struct StandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl StandIn {
    /// Starts listening on `addr` (port 0 picks a free port).
    pub async fn start(addr: SocketAddr) -> std::io::Result<StandIn> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (ctl, rx) = watch::channel(Listen::Up);
        let (listening, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            book: Mutex::new(Book::default()),
            fail_status: AtomicU16::new(0),
            delay_ms: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            ctl,
            listening,
        });
        let task = tokio::spawn(supervise(addr, shared.clone(), Some(listener), rx));
        let s = StandIn {
            addr,
            shared,
            task: Some(task),
        };
        s.wait_listening(true).await;
        Ok(s)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer every (non-control) request with `status` (e.g. 503) without applying it; `None` to
    /// answer normally again.
    pub fn set_fail_status(&self, status: Option<u16>) {
        self.shared
            .fail_status
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// Wait this long before answering each request.
    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Answer requests for `path` (without query) with `status` and `body`. A 2xx script is applied
    /// and stored like a normal answer; other statuses are neither applied nor stored.
    pub fn script(&self, path: &str, status: u16, body: Value) {
        self.shared
            .book()
            .scripts
            .insert(path.to_string(), (status, body));
    }

    /// Closes the port (connections are refused) once in-flight requests are answered.
    pub async fn refuse(&self) {
        self.shared.ctl.send_replace(Listen::Refuse);
        self.wait_listening(false).await;
    }

    /// Listens again on the same port.
    pub async fn resume(&self) {
        self.shared.ctl.send_replace(Listen::Up);
        self.wait_listening(true).await;
    }

    async fn wait_listening(&self, want: bool) {
        let mut rx = self.shared.listening.subscribe();
        let _ = rx.wait_for(|v| *v == want).await;
    }

    /// How many times the request with Idempotency-Key `key` was applied.
    pub fn applied(&self, key: &str) -> u32 {
        self.shared.book().applied.get(key).copied().unwrap_or(0)
    }

    /// Applications per Idempotency-Key.
    pub fn applied_counts(&self) -> HashMap<String, u32> {
        self.shared.book().applied.clone()
    }

    /// Requests received so far, counted on arrival (control endpoints excluded).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request received so far (control endpoints excluded), oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.shared.book().received.clone()
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        self.shared.ctl.send_replace(Listen::Stop);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.shared.ctl.send_replace(Listen::Stop);
    }
}

async fn supervise(
    addr: SocketAddr,
    shared: Arc<Shared>,
    mut first: Option<tokio::net::TcpListener>,
    mut rx: watch::Receiver<Listen>,
) {
    let app = Router::new().fallback(handle).with_state(shared.clone());
    loop {
        let want = *rx.borrow_and_update();
        match want {
            Listen::Stop => {
                shared.listening.send_replace(false);
                return;
            }
            Listen::Refuse => {
                shared.listening.send_replace(false);
                if rx.changed().await.is_err() {
                    return;
                }
            }
            Listen::Up => {
                let listener = match first.take() {
                    Some(l) => l,
                    None => match tokio::net::TcpListener::bind(addr).await {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!(%addr, error = %e, "stand-in cannot listen again yet");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                shared.listening.send_replace(true);
                let mut stop_rx = rx.clone();
                let _ = axum::serve(listener, app.clone())
                    .with_graceful_shutdown(async move {
                        let _ = stop_rx.wait_for(|v| *v != Listen::Up).await;
                    })
                    .await;
                shared.listening.send_replace(false);
            }
        }
    }
}

fn fingerprint(method: &Method, uri: &Uri, body: &[u8]) -> String {
    let body_text = match serde_json::from_slice::<Value>(body) {
        Ok(v) => v.to_string(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    format!(
        "{} {}\n{}",
        method,
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
        body_text
    )
}

fn answer(status: u16, body: Value, replayed: bool) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (code, axum::Json(body)).into_response();
    if replayed {
        r.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    r
}

async fn control(sh: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (method.as_str(), path) {
        ("GET", "/_standin/stats") => {
            let book = sh.book();
            answer(
                200,
                json!({
                    "requests": sh.requests.load(Ordering::SeqCst),
                    "applied": book.applied,
                    "appliedWithoutKey": book.applied_without_key,
                    "failStatus": match sh.fail_status.load(Ordering::SeqCst) { 0 => Value::Null, s => json!(s) },
                    "delayMs": sh.delay_ms.load(Ordering::SeqCst),
                }),
                false,
            )
        }
        ("POST", "/_standin/mode") => {
            if let Some(fs) = v.get("failStatus") {
                let s = fs.as_u64().filter(|s| (100..=599).contains(s)).unwrap_or(0);
                sh.fail_status.store(s as u16, Ordering::SeqCst);
            }
            if let Some(d) = v.get("delayMs").and_then(Value::as_u64) {
                sh.delay_ms.store(d, Ordering::SeqCst);
            }
            if let Some(ms) = v.get("refuseForMs").and_then(Value::as_u64) {
                let ctl = sh.ctl.clone();
                tokio::spawn(async move {
                    ctl.send_replace(Listen::Refuse);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    if *ctl.borrow() == Listen::Refuse {
                        ctl.send_replace(Listen::Up);
                    }
                });
            }
            answer(200, json!({"ok": true}), false)
        }
        ("POST", "/_standin/script") => {
            let (Some(p), Some(s)) = (
                v.get("path").and_then(Value::as_str),
                v.get("status").and_then(Value::as_u64),
            ) else {
                return answer(
                    400,
                    json!({"error": "expected {\"path\": \"/x\", \"status\": 409, \"body\": {...}}"}),
                    false,
                );
            };
            let body = v.get("body").cloned().unwrap_or(json!({}));
            sh.book()
                .scripts
                .insert(p.to_string(), (s.clamp(100, 599) as u16, body));
            answer(200, json!({"ok": true}), false)
        }
        _ => answer(
            404,
            json!({"error": "unknown stand-in control endpoint"}),
            false,
        ),
    }
}

async fn handle(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if path.starts_with("/_standin/") {
        return control(&sh, &method, &path, &body).await;
    }
    sh.requests.fetch_add(1, Ordering::SeqCst);
    let delay = sh.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut book = sh.book();
    if book.received.len() < MAX_RECEIVED {
        book.received.push(Received {
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or(path.clone()),
            idempotency_key: key.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
            header_names: headers.keys().map(|k| k.as_str().to_string()).collect(),
        });
    }
    let fail = sh.fail_status.load(Ordering::SeqCst);
    if fail != 0 {
        return answer(fail, json!({"error": "stand-in told to fail"}), false);
    }
    if method == Method::GET || method == Method::HEAD {
        return answer(200, json!({"ok": true, "path": path}), false);
    }
    let fp = fingerprint(&method, &uri, &body);
    if let Some(k) = &key {
        if let Some(s) = book.stored.get(k) {
            if s.fingerprint == fp {
                return answer(s.status, s.body.clone(), true);
            }
            return answer(
                409,
                json!({"detail": "Idempotency-Key reused with a different request"}),
                false,
            );
        }
    }
    let (status, body) = match book.scripts.get(&path) {
        Some((s, b)) => (*s, b.clone()),
        None => (
            if method == Method::POST { 201 } else { 200 },
            json!({
                "ok": true,
                "id": uuid::Uuid::new_v4().to_string(),
                "method": method.as_str(),
                "path": path,
                "idempotencyKey": key,
            }),
        ),
    };
    if (200..300).contains(&status) {
        match &key {
            Some(k) => {
                *book.applied.entry(k.clone()).or_insert(0) += 1;
                book.stored.insert(
                    k.clone(),
                    Stored {
                        fingerprint: fp,
                        status,
                        body: body.clone(),
                    },
                );
            }
            None => book.applied_without_key += 1,
        }
    }
    answer(status, body, false)
}
