//! The HTTP edge relay (SPEC section 9): forwards every request while the upstream answers and,
//! while it does not (connect error, timeout, 502/503/504), applies the route table through the
//! engine ([`crate::core::outbox::intake`]) and stores queueable writes durably through the
//! group-commit writer before answering `202`. This module only translates HTTP to engine calls.

pub mod standin;

pub use crate::http_server::ConnectionLimits;

use crate::core::outbox::envelope::{is_outage_status, is_write_method};
use crate::core::outbox::idempotency::request_idempotency_key;
use crate::core::outbox::replay::{describe_network_error, join_url, parse_upstream};
use crate::core::outbox::{
    intake, EnqueueOutcome, IncomingWrite, Outbox, OutboxError, OutboxWriter, SourceMeta,
};
use crate::text::visible;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use serde_json::json;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest body the relay forwards while the upstream is up (queueing stops at 64 KiB).
pub const MAX_FORWARD_BODY: usize = 16 * 1024 * 1024;
// Request bodies the relay holds in memory at once, all connections together
// (`ConnectionLimits::body_memory_mib`, `--max-body-memory-mib`, 256 MiB unless given): without it,
// every connection the cap allows could hold a `MAX_FORWARD_BODY` (gigabytes on an edge box). A
// body reserves its declared length (nothing for a request without a body; a chunked one, the
// largest allowed, shrunk to its size once read) before it is read;
// when the budget is taken, a request waits up to half the body timeout, then gets 503
// (`crate::http_server::BodyBudget`, which serve's JSON bodies use too).
pub use crate::core::outbox::idempotency::MAX_IDEMPOTENCY_KEY;

/// How to run a relay.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub upstream_url: String,
    pub outbox_path: PathBuf,
    /// Per-request upstream timeout (a timeout counts as "upstream unreachable").
    pub upstream_timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Client-side timeouts and the connection cap.
    pub limits: ConnectionLimits,
}

impl RelayConfig {
    /// Defaults: 10 s request timeout, 2 s connect timeout, [`ConnectionLimits::default`].
    pub fn new(upstream_url: impl Into<String>, outbox_path: impl Into<PathBuf>) -> RelayConfig {
        RelayConfig {
            upstream_url: upstream_url.into(),
            outbox_path: outbox_path.into(),
            upstream_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            limits: ConnectionLimits::default(),
        }
    }
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
    #[error("the relay server failed: {0}")]
    Serve(#[from] std::io::Error),
}

const UPSTREAM_UNKNOWN: u8 = 0;
const UPSTREAM_UP: u8 = 1;
const UPSTREAM_DOWN: u8 = 2;

struct RelayState {
    client: reqwest::Client,
    probe: reqwest::Client,
    upstream: String,
    writer: OutboxWriter,
    reader: Mutex<Outbox>,
    outbox_path: PathBuf,
    relay_host: String,
    listen: SocketAddr,
    started_at: String,
    upstream_state: AtomicU8,
    body_timeout: Duration,
    /// `--max-body-memory-mib` (`ConnectionLimits::body_memory_mib`), one permit per KiB of
    /// request body held.
    body_budget: crate::http_server::BodyBudget,
}

impl RelayState {
    fn observe(&self, up: bool, detail: &str) {
        let new = if up { UPSTREAM_UP } else { UPSTREAM_DOWN };
        let old = self.upstream_state.swap(new, Ordering::Relaxed);
        if old != new {
            if up {
                tracing::info!(upstream = %self.upstream, "upstream answering; forwarding");
            } else {
                tracing::warn!(upstream = %self.upstream, reason = %visible(detail),
                    "upstream unreachable; queueing writes that may be queued");
            }
        }
    }
}

/// Runs a relay on `listener` until `shutdown` resolves, then finishes in-flight requests, commits
/// what the outbox writer holds, and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: RelayConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RelayError> {
    let upstream = parse_upstream(&config.upstream_url)?.to_string();
    let path = config.outbox_path.clone();
    let (writer_outbox, reader) = tokio::task::spawn_blocking(move || {
        let a = Outbox::open(&path)?;
        let b = Outbox::open(&path)?;
        Ok::<_, OutboxError>((a, b))
    })
    .await
    .map_err(|e| RelayError::Client(e.to_string()))??;
    let client = reqwest::Client::builder()
        .timeout(config.upstream_timeout)
        .connect_timeout(config.connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_max_idle_per_host(64)
        .build()
        .map_err(|e| RelayError::Client(e.to_string()))?;
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| RelayError::Client(e.to_string()))?;
    let listen = listener.local_addr()?;
    let state = Arc::new(RelayState {
        client,
        probe,
        upstream: upstream.trim_end_matches('/').to_string(),
        writer: OutboxWriter::spawn(writer_outbox)?,
        reader: Mutex::new(reader),
        outbox_path: config.outbox_path.clone(),
        relay_host: crate::core::paths::node_id(None),
        listen,
        started_at: crate::core::time::now_rfc3339(),
        upstream_state: AtomicU8::new(UPSTREAM_UNKNOWN),
        body_timeout: config.limits.body_timeout,
        body_budget: config.limits.body_budget(MAX_FORWARD_BODY as u64),
    });
    let app = Router::new()
        // GET (and HEAD) /healthz is the relay's own; any other method on it is forwarded, its
        // answer as the upstream sent it (a method router's fallback would add `Allow: GET,HEAD`).
        .route("/healthz", any(healthz_or_proxy))
        .fallback(proxy)
        .with_state(state.clone());
    tracing::info!(%listen, upstream = %state.upstream, outbox = %config.outbox_path.display(), "relay listening");
    crate::http_server::serve_connections(listener, app, config.limits, shutdown).await;
    tracing::info!("relay stopped accepting; flushing the outbox writer");
    // In-flight handlers are done; dropping the last state handle stops the writer thread after it
    // committed everything it was given.
    match Arc::try_unwrap(state) {
        Ok(s) => {
            let RelayState { writer, .. } = s;
            tokio::task::spawn_blocking(move || writer.close())
                .await
                .map_err(|e| RelayError::Client(e.to_string()))?;
        }
        Err(_) => tracing::warn!("relay state still shared at shutdown"),
    }
    Ok(())
}

fn json_response(status: u16, body: serde_json::Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    (code, Json(body)).into_response()
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

async fn healthz_or_proxy(
    state: State<Arc<RelayState>>,
    peer: ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    match *req.method() {
        axum::http::Method::GET | axum::http::Method::HEAD => healthz(state).await,
        _ => proxy(state, peer, req).await,
    }
}

async fn healthz(State(st): State<Arc<RelayState>>) -> Response {
    let probe_url = format!("{}/healthz", st.upstream);
    let (up, detail) = match st.probe.get(&probe_url).send().await {
        Ok(r) if is_outage_status(r.status().as_u16()) => (
            false,
            format!("upstream answered HTTP {}", r.status().as_u16()),
        ),
        Ok(r) => (
            true,
            format!("upstream answered HTTP {}", r.status().as_u16()),
        ),
        Err(e) => (false, describe_network_error(&e)),
    };
    st.observe(up, &detail);
    let st2 = st.clone();
    let counts = tokio::task::spawn_blocking(move || {
        let outbox = st2.reader.lock().unwrap_or_else(|p| p.into_inner());
        outbox.counts()
    })
    .await;
    let outbox = match counts {
        Ok(Ok(c)) => {
            json!({"path": crate::text::visible_path(&st.outbox_path), "state": "ok", "counts": c})
        }
        Ok(Err(e)) => {
            json!({"path": crate::text::visible_path(&st.outbox_path), "state": "error", "error": e.to_string()})
        }
        Err(e) => {
            json!({"path": crate::text::visible_path(&st.outbox_path), "state": "error", "error": e.to_string()})
        }
    };
    json_response(
        200,
        json!({
            "relay": {
                "status": "ok",
                "version": env!("CARGO_PKG_VERSION"),
                "listen": st.listen.to_string(),
                "startedAt": st.started_at,
            },
            "upstream": {
                "url": st.upstream,
                "state": if up { "up" } else { "down" },
                "detail": detail,
                "checkedAt": crate::core::time::now_rfc3339(),
            },
            "outbox": outbox,
        }),
    )
}

/// Why a request body could not be read whole.
enum ReadError {
    /// Past [`MAX_FORWARD_BODY`] (413).
    TooLarge,
    /// Broken framing, or the client stopped sending (400).
    Framing(axum::Error),
}

/// The path and query for logs: secret query values redacted, control characters escaped.
fn loggable(path_and_query: &str) -> String {
    visible(&crate::core::outbox::scrub::scrub_query(path_and_query).0).into_owned()
}

fn too_large() -> Response {
    json_response(
        413,
        json!({"error": format!("body is over the relay's limit of {MAX_FORWARD_BODY} bytes"), "queued": false}),
    )
}

/// The share of the relay's body budget a request's body may take: its declared length, else the
/// largest body allowed. Waits up to half the body timeout for it (a request that finds the
/// memory taken is told so before the bodies holding it could be cut off), then 503: nothing
/// forwarded or queued; the client retries.
async fn reserve_body(
    st: &RelayState,
    declared: Option<u64>,
) -> Result<crate::http_server::BodyShare, Response> {
    let limit = MAX_FORWARD_BODY as u64;
    match st
        .body_budget
        .reserve(declared, limit, st.body_timeout / 2)
        .await
    {
        Ok(share) => Ok(share),
        Err(taken) => {
            let mut r = json_response(
                503,
                json!({"error": format!(
                    "the relay's memory for request bodies ({} MiB, all connections together: --max-body-memory-mib) had no room for this one ({} KiB) within {} ms: other requests' bodies take it; nothing was forwarded or queued: retry shortly",
                    taken.total_kib / 1024,
                    taken.wanted_kib,
                    taken.waited.as_millis()
                ), "queued": false}),
            );
            r.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(crate::http_server::BUDGET_RETRY_AFTER_SECS),
            );
            Err(r)
        }
    }
}

/// Reads the whole request body: at most [`MAX_FORWARD_BODY`] bytes (else 413), well-framed (else
/// 400), complete within `timeout` of the head (else 408 and the connection is closed).
async fn read_body(
    declared: Option<u64>,
    body: Body,
    timeout: Duration,
) -> Result<Bytes, Response> {
    if declared.is_some_and(|n| n > MAX_FORWARD_BODY as u64) {
        return Err(too_large());
    }
    // Into one buffer that never outgrows the body's share of the budget (`append_within`).
    let read = async {
        let mut stream = body.into_data_stream();
        let mut out = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
            let chunk = chunk.map_err(ReadError::Framing)?;
            if out.len() + chunk.len() > MAX_FORWARD_BODY {
                return Err(ReadError::TooLarge);
            }
            crate::http_server::append_within(&mut out, &chunk, declared, MAX_FORWARD_BODY as u64);
        }
        Ok(Bytes::from(out))
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(ReadError::TooLarge)) => Err(too_large()),
        Ok(Err(ReadError::Framing(e))) => Err(json_response(
            400,
            json!({"error": format!("cannot read the request body (broken chunked framing, or the client stopped sending): {e}"), "queued": false}),
        )),
        Err(_) => {
            let mut r = json_response(
                408,
                json!({"error": format!("the request body did not arrive within {} ms; nothing was forwarded or queued", timeout.as_millis()), "queued": false}),
            );
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

/// Forwards every request while the upstream answers; during an outage, queues what may be
/// queued (see [`queue`]).
async fn proxy(
    State(st): State<Arc<RelayState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let Some(path_and_query) = origin_path(&parts.method, &parts.uri) else {
        return names_no_path(&parts.method, &parts.uri);
    };
    if let Some(seg) = crate::core::outbox::routes::dot_segment(&path_and_query) {
        return leaves_the_base(seg);
    }
    // Held until the answer: the body stays in memory while it is forwarded or queued. A request
    // without a body (neither Content-Length nor Transfer-Encoding: a GET) takes nothing, so slow
    // reads are bounded by the connection cap, not by the body budget.
    let declared = crate::http_server::declared_length(&parts.headers);
    let mut reserved = match reserve_body(&st, declared).await {
        Ok(p) => p,
        Err(busy) => return busy,
    };
    let bytes = match read_body(declared, body, st.body_timeout).await {
        Ok(b) => b,
        Err(refusal) => return refusal,
    };
    // Read whole (a chunked body reserved the largest allowed): from now on it holds its size.
    reserved.shrink_to(bytes.len() as u64);
    let key_headers = parts.headers.get_all("idempotency-key");
    let key = match request_idempotency_key(
        key_headers.iter().map(|v| v.as_bytes()),
        is_write_method(parts.method.as_str()),
    ) {
        Ok(k) => k,
        Err(e) => return json_response(400, json!({"error": e.to_string(), "queued": false})),
    };
    let request = Forwarded {
        method: &parts.method,
        path_and_query: &path_and_query,
        headers: &parts.headers,
        body: &bytes,
        key: key.as_deref(),
    };
    let outage_reason = match forward(&st, &request).await {
        Ok(answered) => return answered,
        Err(reason) => reason,
    };
    st.observe(false, &outage_reason);
    let mut answer = queue(&st, peer, &request, outage_reason).await;
    // The upstream may have received the write before it failed (a timeout): whatever the
    // answer, the client learns the key it was sent with, so a resend can carry the same one.
    if let Some(v) = request.key.and_then(|k| HeaderValue::from_str(k).ok()) {
        answer.headers_mut().insert("idempotency-key", v);
    }
    answer
}

/// The path and query the relay forwards: a request for a path (`/...`, sent as a path or as an
/// absolute URL). `OPTIONS *` and `CONNECT host:port` name none; joined to the upstream's URL,
/// `*` made an address that cannot be parsed (`http://upstream:8000*`), which the relay took for
/// an unreachable upstream: a 503 "upstream unavailable" and the upstream marked down in the log
/// and in `/healthz` while it answered. They get 400 instead, and nothing is forwarded or queued.
fn origin_path(method: &axum::http::Method, uri: &axum::http::Uri) -> Option<String> {
    // An absolute URL without a path (`http://host`) asks for `/`.
    let absolute = uri.scheme().is_some().then_some("/");
    let p = uri.path_and_query().map(|p| p.as_str()).or(absolute)?;
    (p.starts_with('/') && method != axum::http::Method::CONNECT).then(|| p.to_string())
}

/// The 400 for a request [`origin_path`] finds no path in.
fn names_no_path(method: &axum::http::Method, uri: &axum::http::Uri) -> Response {
    json_response(
        400,
        json!({
            "error": format!(
                "the relay forwards requests for a path (/...); {method} {} names none. Nothing was forwarded or queued",
                visible(&uri.to_string())
            ),
            "queued": false,
        }),
    )
}

/// The 400 for a path with a `.` or `..` segment (raw or percent-encoded): joined to the
/// upstream's base URL it would name a resource outside the base path (`/base` + `/../x` is `/x`),
/// so nothing is forwarded or queued.
fn leaves_the_base(seg: &str) -> Response {
    json_response(
        400,
        json!({
            "error": format!(
                "the request path holds a {:?} segment (a dot segment, written out or percent-encoded); the relay forwards only paths under the upstream's base: send the path without . and .. segments. Nothing was forwarded or queued",
                visible(seg)
            ),
            "code": "dot-segment",
            "queued": false,
        }),
    )
}

/// A request as the relay passes it on.
struct Forwarded<'a> {
    method: &'a axum::http::Method,
    path_and_query: &'a str,
    headers: &'a HeaderMap,
    body: &'a Bytes,
    /// The Idempotency-Key of a write (none for a read: a read's own header, if any, is passed
    /// on unchanged with the other headers).
    key: Option<&'a str>,
}

/// Sends the request upstream. The upstream's answer, or why it counts as unreachable (a network
/// error, a timeout, or 502/503/504).
async fn forward(st: &RelayState, req: &Forwarded<'_>) -> Result<Response, String> {
    // `proxy` refused dot segments already; the join guarantees the base path whatever comes.
    let url = match join_url(&st.upstream, req.path_and_query) {
        Ok(u) => u,
        Err(why) => {
            return Ok(json_response(
                400,
                json!({"error": format!("{why}; nothing was forwarded or queued"), "queued": false}),
            ))
        }
    };
    let mut rb = st.client.request(req.method.clone(), url);
    for (name, value) in req.headers {
        // A write's key is the one the engine decided (the client's or a new one); a read's
        // Idempotency-Key, if the client sent one, is passed on as it came, like any other header.
        if is_hop_by_hop(name) || (req.key.is_some() && name.as_str() == "idempotency-key") {
            continue;
        }
        rb = rb.header(name, value);
    }
    if let Some(k) = req.key {
        rb = rb.header("idempotency-key", k);
    }
    if !req.body.is_empty() {
        rb = rb.body(req.body.clone());
    }
    match rb.send().await {
        Ok(resp) if !is_outage_status(resp.status().as_u16()) => {
            st.observe(true, "");
            Ok(pass_through(resp, req.key, req.method == axum::http::Method::HEAD).await)
        }
        Ok(resp) => Err(format!("upstream answered HTTP {}", resp.status().as_u16())),
        Err(e) => send_failure(&e),
    }
}

/// A request that got no answer: an outage (the reason, as [`forward`] gives it), unless it could
/// not be made from what the client sent (nothing reached the network): that is the client's
/// fault, answered 400, and the upstream is not marked down and nothing is queued.
fn send_failure(e: &reqwest::Error) -> Result<Response, String> {
    if !e.is_builder() {
        return Err(describe_network_error(e));
    }
    Ok(json_response(
        400,
        json!({
            "error": format!(
                "the relay cannot make an upstream request of this one ({}); nothing was forwarded or queued",
                visible(&describe_network_error(e))
            ),
            "queued": false,
        }),
    ))
}

/// During an outage: the engine decides whether the request may be queued ([`intake`]); a
/// queueable one is committed to the outbox before the `202`.
async fn queue(
    st: &RelayState,
    peer: SocketAddr,
    req: &Forwarded<'_>,
    outage_reason: String,
) -> Response {
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let user_agent = req.headers.get(header::USER_AGENT).map(|v| {
        crate::core::outbox::envelope::truncate(&String::from_utf8_lossy(v.as_bytes()), 200)
    });
    let incoming = IncomingWrite {
        method: req.method.as_str(),
        path_and_query: req.path_and_query,
        headers: &headers,
        body: req.body,
        idempotency_key: req.key.unwrap_or(""),
        source: SourceMeta {
            remote_addr: Some(peer.to_string()),
            user_agent,
            relay_host: Some(st.relay_host.clone()),
            queued_because: Some(outage_reason.clone()),
        },
    };
    let envelope = match intake(&incoming) {
        Ok(e) => e,
        Err(refusal) => {
            tracing::debug!(method = %req.method, path = %loggable(req.path_and_query), code = refusal.code, "not queued");
            return json_response(
                refusal.status,
                json!({
                    "error": refusal.message,
                    "code": refusal.code,
                    "routeClass": refusal.route_class.as_str(),
                    "queued": false,
                    "upstream": outage_reason,
                }),
            );
        }
    };
    match st.writer.enqueue(envelope).await {
        Ok(EnqueueOutcome::Queued(r)) | Ok(EnqueueOutcome::Duplicate(r)) => {
            tracing::debug!(envelope = %r.envelope_id, path = %loggable(req.path_and_query), "queued");
            json_response(202, serde_json::to_value(&r).unwrap_or_default())
        }
        Ok(EnqueueOutcome::KeyReused { envelope_id }) => json_response(
            409,
            json!({
                "error": "this Idempotency-Key is already used by a different queued request; use a new key for a new request",
                "envelopeId": envelope_id,
                "queued": false,
            }),
        ),
        Err(e) => {
            tracing::error!(error = %e, "outbox write failed");
            json_response(
                503,
                json!({
                    "error": format!("upstream unavailable and the outbox could not store the write ({e}); nothing was queued, retry later"),
                    "code": "outbox-unavailable",
                    "queued": false,
                }),
            )
        }
    }
}

/// Upstream answers up to this size are read whole before the relay answers, so that one whose
/// body breaks off becomes a `502` naming the Idempotency-Key; a larger one is passed on as it
/// arrives (the relay never holds more than this much of an answer).
pub const BUFFERED_ANSWER: usize = 1024 * 1024;

/// The upstream's answer for the client: its status and headers (hop-by-hop ones dropped, the
/// Idempotency-Key added to a write's answer) and its body, whole when it is at most
/// [`BUFFERED_ANSWER`] bytes, else streamed. The answer to a `head` request has no body but keeps
/// the upstream's Content-Length, the length a GET's body would have (RFC 9110 9.3.2, 8.6), and
/// has none when the upstream sent none (a GET answered chunked: its length is not known, and
/// `0` would say the body is empty); otherwise the length is the relay's own framing of the body
/// it sends.
async fn pass_through(
    mut resp: reqwest::Response,
    key: Option<&str>,
    request_was_head: bool,
) -> Response {
    let status = resp.status();
    let mut headers = HeaderMap::new();
    for (name, value) in resp.headers() {
        if !is_hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        } else if request_was_head && name == header::CONTENT_LENGTH {
            headers.insert(name.clone(), value.clone());
        }
    }
    if let Some(k) = key {
        if !headers.contains_key("idempotency-key") {
            if let Ok(v) = HeaderValue::from_str(k) {
                headers.insert("idempotency-key", v);
            }
        }
    }
    let mut head = Vec::new();
    let body = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                head.extend_from_slice(&chunk);
                if head.len() > BUFFERED_ANSWER {
                    break stream_rest(head, resp);
                }
            }
            // No length of its own for a HEAD answer: an empty body of unknown size, so that no
            // `content-length: 0` is made up for it (the upstream's own, if any, is in `headers`).
            Ok(None) if request_was_head => break unsized_empty_body(),
            Ok(None) => break Body::from(head),
            Err(e) => {
                return json_response(
                    502,
                    json!({
                        "error": format!("the upstream answered HTTP {} but its body broke off ({}); the write may have been applied: retry with the same Idempotency-Key", status.as_u16(), describe_network_error(&e)),
                        "idempotencyKey": key,
                        "queued": false,
                    }),
                )
            }
        }
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// An empty body whose size is not known in advance: the router adds no `content-length: 0` for
/// it (it does for a body known to be empty), and a HEAD answer sends no body either way.
fn unsized_empty_body() -> Body {
    Body::from_stream(futures_util::stream::empty::<
        Result<Bytes, std::convert::Infallible>,
    >())
}

/// A body of `head` (already read) followed by the rest of `resp` as it arrives. If the upstream's
/// body breaks off, so does the client's (its answer has already begun).
fn stream_rest(head: Vec<u8>, resp: reqwest::Response) -> Body {
    use futures_util::StreamExt;
    let first = futures_util::stream::once(async move { Ok(Bytes::from(head)) });
    let rest = futures_util::stream::unfold(Some(resp), |state| async move {
        let mut resp = state?;
        match resp.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(resp))),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %visible(&describe_network_error(&e)), "the upstream's answer broke off while it was passed on");
                Some((Err(e), None))
            }
        }
    });
    Body::from_stream(first.chain(rest))
}

#[cfg(test)]
mod tests {
    use super::send_failure;

    /// A request reqwest could not even make is the client's (400, not queued, no outage); one
    /// that got no answer is an outage.
    #[tokio::test]
    async fn a_request_that_cannot_be_made_is_no_outage() {
        let client = reqwest::Client::new();
        let unbuildable = client.get("http://[::1").send().await.unwrap_err();
        assert!(unbuildable.is_builder());
        let answered = send_failure(&unbuildable).expect("answered, not an outage");
        assert_eq!(answered.status(), 400);
        let refused = client.get("http://127.0.0.1:1/").send().await.unwrap_err();
        let reason = send_failure(&refused).expect_err("an outage");
        assert!(reason.starts_with("connect error"), "{reason}");
    }
}
