//! Operator replay (SPEC section 9): sends queued envelopes upstream in creation order with their
//! stored Idempotency-Key. 2xx -> delivered; 409 or 422 -> conflict; other 4xx -> failed; network
//! error or 5xx -> stays queued with `attempt_count+1` and an exponential `next_retry_at`. A later
//! envelope for the same resource waits behind an earlier one that is still queued.
//!
//! Results are committed in small groups after the upstream answered, so a crash between the
//! upstream's 2xx and the commit re-sends the envelope with the same key on the next run, and the
//! upstream's idempotency answers it with the original response.

use super::envelope::{
    response_summary, status_for_response, truncate, Envelope, EnvelopeStatus, MAX_ERROR_BYTES,
    MAX_RESPONSE_READ,
};
use super::lock::ReplayLock;
use super::store::{AttemptRecord, Outbox};
use super::OutboxError;
use crate::core::time::rfc3339_millis;
use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// The first retry delay; each further attempt doubles it.
pub const RETRY_BASE: Duration = Duration::from_secs(2);
/// The longest retry delay.
pub const RETRY_MAX: Duration = Duration::from_secs(30 * 60);

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The upstream base URL (`http://host:port[/prefix]`).
    pub upstream_url: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Treat every queued envelope as due, ignoring `next_retry_at`.
    pub ignore_backoff: bool,
    /// Stop the run after this many network errors in a row (the upstream is evidently down);
    /// the envelopes not tried stay queued untouched.
    pub max_consecutive_network_errors: u32,
    /// Commit results after this many envelopes (also at the end of the run).
    pub commit_every: usize,
}

impl ReplayOptions {
    /// Defaults: 30 s timeout, honour backoff, stop after 3 network errors in a row, commit every
    /// 64 results.
    pub fn new(upstream_url: impl Into<String>) -> ReplayOptions {
        ReplayOptions {
            upstream_url: upstream_url.into(),
            timeout: Duration::from_secs(30),
            ignore_backoff: false,
            max_consecutive_network_errors: 3,
            commit_every: 64,
        }
    }
}

/// Running counts, reported after every envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayProgress {
    /// Queued envelopes when the run started.
    pub total: u64,
    /// Envelopes sent so far.
    pub attempted: u64,
    pub delivered: u64,
    pub conflict: u64,
    pub failed: u64,
    /// `total` minus delivered, conflict and failed: still queued (retry later, not due yet,
    /// waiting behind an earlier envelope of the same resource, or not reached yet).
    pub still_queued: u64,
    /// Sent but kept queued this run (network error or 5xx).
    pub retry_later: u64,
    /// Skipped because `next_retry_at` has not passed.
    pub not_due: u64,
    /// Skipped because an earlier envelope of the same resource is still queued.
    pub waiting: u64,
}

/// The outcome of a replay run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplaySummary {
    #[serde(flatten)]
    pub counts: ReplayProgress,
    /// Set when the run stopped before trying every due envelope (and why).
    pub stopped_early: Option<String>,
    pub elapsed_ms: u64,
    pub upstream_url: String,
}

impl ReplaySummary {
    /// Whether nothing needs an operator: no conflict or failure this run and nothing left queued.
    pub fn is_clean(&self) -> bool {
        self.counts.conflict == 0 && self.counts.failed == 0 && self.counts.still_queued == 0
    }
}

/// The delay before the next attempt once `attempt_count` attempts have failed:
/// `2 s * 2^(attempt_count-1)`, at most 30 minutes.
pub fn retry_delay(attempt_count: u32) -> Duration {
    let exp = attempt_count.saturating_sub(1).min(20);
    RETRY_BASE.saturating_mul(1u32 << exp).min(RETRY_MAX)
}

/// Checks an upstream base URL: absolute `http://` with a host. (This build has no TLS client; put
/// a local TLS terminator in front of an `https` upstream.)
pub fn parse_upstream(url: &str) -> Result<reqwest::Url, OutboxError> {
    let bad = |reason: &str| OutboxError::BadUpstream {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let u =
        reqwest::Url::parse(url).map_err(|e| bad(&format!("{e}; expected http://HOST:PORT")))?;
    match u.scheme() {
        "http" => {}
        "https" => {
            return Err(bad(
                "https is not supported by this build; use an http:// upstream (for example a \
                 local TLS terminator)",
            ))
        }
        _ => return Err(bad("expected an http:// URL")),
    }
    if u.host_str().is_none() {
        return Err(bad("the URL has no host"));
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err(bad("a base URL takes no query string or fragment"));
    }
    Ok(u)
}

/// Joins a base URL and a request path-and-query (`http://h:1/api` + `/tasks/1` ->
/// `http://h:1/api/tasks/1`). The result always stays under the base: a path that does not start
/// with `/`, or holds a `.` or `..` segment (raw or percent-encoded, [`super::routes::dot_segment`]),
/// is refused with why, and so is any join the URL parser would take elsewhere (another host, a
/// path outside the base's).
pub fn join_url(base: &str, path_and_query: &str) -> Result<reqwest::Url, String> {
    if !path_and_query.starts_with('/') {
        return Err(format!(
            "the request path {:?} does not start with /",
            crate::core::text::visible(path_and_query)
        ));
    }
    if let Some(seg) = super::routes::dot_segment(path_and_query) {
        return Err(format!(
            "the request path holds a {:?} segment, which would leave the upstream's base path",
            crate::core::text::visible(seg)
        ));
    }
    let base_url = reqwest::Url::parse(base).map_err(|e| format!("the base URL: {e}"))?;
    let joined = reqwest::Url::parse(&format!("{}{}", base.trim_end_matches('/'), path_and_query))
        .map_err(|e| format!("the request path does not make a URL with the base: {e}"))?;
    let base_path = base_url.path().trim_end_matches('/');
    let path = joined.path();
    let under = path
        .strip_prefix(base_path)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
    if joined.origin() != base_url.origin() || !under {
        return Err(format!(
            "the request path would leave the upstream's base ({} is not under {base})",
            crate::core::text::visible(joined.as_str())
        ));
    }
    Ok(joined)
}

/// A network error as one line: the kind (connect error, timeout) and its innermost cause.
pub fn describe_network_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect error"
    } else {
        "network error"
    };
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    truncate(&format!("{kind}: {cause}"), MAX_ERROR_BYTES)
}

async fn on_db<R: Send + 'static>(
    slot: &mut Option<Outbox>,
    f: impl FnOnce(&mut Outbox) -> Result<R, OutboxError> + Send + 'static,
) -> Result<R, OutboxError> {
    let mut outbox = slot.take().ok_or(OutboxError::WriterStopped)?;
    let (outbox, r) = tokio::task::spawn_blocking(move || {
        let r = f(&mut outbox);
        (outbox, r)
    })
    .await
    .map_err(|e| OutboxError::Commit(format!("replay database task failed: {e}")))?;
    *slot = Some(outbox);
    r
}

enum Sent {
    Answered {
        code: u16,
        summary: String,
    },
    NetworkError(String),
    /// Never sent: the stored request cannot be sent as it is (it fails, for the operator).
    Unsendable(String),
}

async fn send(client: &reqwest::Client, base: &str, env: &Envelope) -> Sent {
    let method = match reqwest::Method::from_bytes(env.request.method.as_bytes()) {
        Ok(m) => m,
        Err(_) => {
            return Sent::NetworkError(format!("invalid stored method {:?}", env.request.method))
        }
    };
    // A stored path that would leave the base (an outbox written by an older relay, or edited)
    // is never sent: the envelope fails with why, for the operator.
    let url = match join_url(base, &env.request.path) {
        Ok(u) => u,
        Err(why) => return Sent::Unsendable(format!("not sent: {why}")),
    };
    let mut rb = client
        .request(method, url)
        .header("Idempotency-Key", &env.request.idempotency_key);
    for (k, v) in &env.request.headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    if let Some(body) = &env.request.body {
        if !env.request.headers.contains_key("content-type") {
            rb = rb.header("content-type", "application/json");
        }
        rb = rb.body(body.clone());
    }
    match rb.send().await {
        Ok(mut resp) => {
            let code = resp.status().as_u16();
            let summary = match read_capped(&mut resp, MAX_RESPONSE_READ).await {
                (b, BodyEnd::Whole) => response_summary(&b, true),
                (b, BodyEnd::Capped) => response_summary(&b, false),
                (_, BodyEnd::BrokeOff(e)) => {
                    format!("(response body unreadable: {})", describe_network_error(&e))
                }
            };
            Sent::Answered { code, summary }
        }
        Err(e) => Sent::NetworkError(describe_network_error(&e)),
    }
}

/// How a [`read_capped`] read of a response body ended.
pub enum BodyEnd {
    /// The whole body was read.
    Whole,
    /// The body went on past the cap; the rest was never read.
    Capped,
    /// The body broke off (or ran out of time) after the bytes read.
    BrokeOff(reqwest::Error),
}

/// Reads at most `max` bytes of a response body (the rest is never read, so a huge answer cannot
/// exhaust memory): the bytes read and how the read ended. The replay keeps a summary of an
/// upstream's answer, the notification runner a failed receiver's.
pub async fn read_capped(resp: &mut reqwest::Response, max: usize) -> (Vec<u8>, BodyEnd) {
    let mut buf = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - buf.len();
                if chunk.len() > room {
                    buf.extend_from_slice(&chunk[..room]);
                    return (buf, BodyEnd::Capped);
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => return (buf, BodyEnd::Whole),
            Err(e) => return (buf, BodyEnd::BrokeOff(e)),
        }
    }
}

/// The replay's HTTP client: the run's timeout, no redirects, no proxy.
fn replay_client(opts: &ReplayOptions) -> Result<reqwest::Client, OutboxError> {
    reqwest::Client::builder()
        .timeout(opts.timeout)
        .connect_timeout(opts.timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| OutboxError::BadUpstream {
            url: opts.upstream_url.clone(),
            reason: format!("cannot build the HTTP client: {e}"),
        })
}

/// What one send means for its envelope: the new status, when to retry (backoff after a network
/// error or a 5xx) and what the upstream said. `now_ms` is when the attempt started.
fn attempt_record(env: &Envelope, sent: Sent, now_ms: u64) -> AttemptRecord {
    let at = rfc3339_millis(crate::core::hlc::unix_ms_now());
    let attempts = env.attempt_count + 1;
    let retry_at = rfc3339_millis(now_ms + retry_delay(attempts).as_millis() as u64);
    match sent {
        Sent::Answered { code, summary } => {
            let status = status_for_response(code);
            let last_error = match status {
                EnvelopeStatus::Delivered => None,
                _ => Some(format!("upstream answered HTTP {code}")),
            };
            AttemptRecord {
                seq: env.seq,
                status,
                next_retry_at: if status == EnvelopeStatus::Queued {
                    retry_at
                } else {
                    env.next_retry_at.clone()
                },
                last_error,
                response_status: Some(code),
                response_summary: Some(summary),
                at,
            }
        }
        Sent::Unsendable(err) => AttemptRecord {
            seq: env.seq,
            status: EnvelopeStatus::Failed,
            next_retry_at: env.next_retry_at.clone(),
            last_error: Some(err),
            response_status: None,
            response_summary: None,
            at,
        },
        Sent::NetworkError(err) => AttemptRecord {
            seq: env.seq,
            status: EnvelopeStatus::Queued,
            next_retry_at: retry_at,
            last_error: Some(err),
            response_status: None,
            response_summary: None,
            at,
        },
    }
}

/// Counts an attempt's outcome; true when the envelope stays queued (its resource then waits).
fn tally(p: &mut ReplayProgress, status: EnvelopeStatus) -> bool {
    p.attempted += 1;
    match status {
        EnvelopeStatus::Delivered => p.delivered += 1,
        EnvelopeStatus::Conflict => p.conflict += 1,
        EnvelopeStatus::Failed => p.failed += 1,
        _ => {
            p.retry_later += 1;
            return true;
        }
    }
    false
}

/// Replays the outbox at `outbox_path` against `opts.upstream_url` until no due queued envelope
/// remains (each queued envelope is tried at most once per run). Takes the replay lock first: a
/// second concurrent replay fails with [`OutboxError::ReplayBusy`]. `progress` is called with the
/// running counts after every envelope (and once at the start); it runs on the replay task, so keep
/// it cheap (e.g. `watch::Sender::send_replace`). The future is `Send`: run it with `tokio::spawn`.
pub async fn replay<F>(
    outbox_path: &Path,
    opts: &ReplayOptions,
    mut progress: F,
) -> Result<ReplaySummary, OutboxError>
where
    F: FnMut(&ReplayProgress) + Send,
{
    let started = Instant::now();
    let base = parse_upstream(&opts.upstream_url)?.to_string();
    // Off the runtime's threads: taking the lock may wait out a status's look (up to 2 s).
    let path = outbox_path.to_path_buf();
    let _lock = tokio::task::spawn_blocking(move || ReplayLock::acquire(&path))
        .await
        .map_err(|e| OutboxError::Commit(e.to_string()))??;
    let client = replay_client(opts)?;
    let path = outbox_path.to_path_buf();
    let mut db = Some(
        tokio::task::spawn_blocking(move || Outbox::open_existing(&path))
            .await
            .map_err(|e| OutboxError::Commit(e.to_string()))??,
    );
    let (max_seq, total) = on_db(&mut db, |o| {
        let max = o.max_seq()?;
        let total = o.counts()?.queued;
        Ok((max, total))
    })
    .await?;
    let mut p = ReplayProgress {
        total,
        still_queued: total,
        ..Default::default()
    };
    progress(&p);

    let mut cursor = 0i64;
    let mut blocked: HashSet<String> = HashSet::new();
    let mut pending: Vec<AttemptRecord> = Vec::new();
    let mut consecutive_network_errors = 0u32;
    let mut stopped_early = None;
    let commit_every = opts.commit_every.max(1);
    'run: loop {
        let page = on_db(&mut db, move |o| o.queued_page(cursor, max_seq, 256)).await?;
        if page.is_empty() {
            break;
        }
        for env in page {
            cursor = env.seq;
            if blocked.contains(&env.request.resource_path) {
                p.waiting += 1;
                progress(&p);
                continue;
            }
            let now_ms = crate::core::hlc::unix_ms_now();
            if !opts.ignore_backoff && not_due(&env.next_retry_at, now_ms) {
                blocked.insert(env.request.resource_path.clone());
                p.not_due += 1;
                progress(&p);
                continue;
            }
            let sent = send(&client, &base, &env).await;
            if matches!(sent, Sent::NetworkError(_)) {
                consecutive_network_errors += 1;
            } else {
                consecutive_network_errors = 0;
            }
            let record = attempt_record(&env, sent, now_ms);
            if tally(&mut p, record.status) {
                blocked.insert(env.request.resource_path.clone());
            }
            p.still_queued = p.total.saturating_sub(p.delivered + p.conflict + p.failed);
            tracing::debug!(envelope = %env.request.id, status = %record.status, "replayed");
            let network_error = record.response_status.is_none();
            let last_error = record.last_error.clone();
            pending.push(record);
            if pending.len() >= commit_every {
                let batch = std::mem::take(&mut pending);
                on_db(&mut db, move |o| o.record_attempts(&batch)).await?;
            }
            progress(&p);
            if network_error && consecutive_network_errors >= opts.max_consecutive_network_errors {
                stopped_early = Some(format!(
                    "stopped after {consecutive_network_errors} network errors in a row (last: {}); \
                     the rest stays queued: check the upstream, then replay again",
                    last_error.unwrap_or_default()
                ));
                break 'run;
            }
        }
    }
    if !pending.is_empty() {
        let batch = std::mem::take(&mut pending);
        on_db(&mut db, move |o| o.record_attempts(&batch)).await?;
    }
    progress(&p);
    Ok(ReplaySummary {
        counts: p,
        stopped_early,
        elapsed_ms: started.elapsed().as_millis() as u64,
        upstream_url: opts.upstream_url.clone(),
    })
}

/// Whether a queued envelope's backoff has yet to pass. A `next_retry_at` that is not a time (a
/// damaged or hand-edited row) counts as passed: the backoff only delays a send, and reading it as
/// text put a value like `soon` after every timestamp, so replay skipped the envelope forever.
pub fn not_due(next_retry_at: &str, now_ms: u64) -> bool {
    crate::core::time::parse_rfc3339_ms(next_retry_at).is_some_and(|at| at > now_ms as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_codes_map_to_statuses() {
        assert_eq!(status_for_response(200), EnvelopeStatus::Delivered);
        assert_eq!(status_for_response(201), EnvelopeStatus::Delivered);
        assert_eq!(status_for_response(409), EnvelopeStatus::Conflict);
        assert_eq!(status_for_response(422), EnvelopeStatus::Conflict);
        assert_eq!(status_for_response(400), EnvelopeStatus::Failed);
        assert_eq!(status_for_response(404), EnvelopeStatus::Failed);
        assert_eq!(status_for_response(500), EnvelopeStatus::Queued);
        assert_eq!(status_for_response(503), EnvelopeStatus::Queued);
        assert_eq!(status_for_response(302), EnvelopeStatus::Failed);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(retry_delay(1), Duration::from_secs(2));
        assert_eq!(retry_delay(2), Duration::from_secs(4));
        assert_eq!(retry_delay(5), Duration::from_secs(32));
        assert_eq!(retry_delay(100), RETRY_MAX);
    }

    #[test]
    fn upstream_urls_are_checked() {
        assert!(parse_upstream("http://127.0.0.1:8000").is_ok());
        assert!(parse_upstream("https://x").is_err());
        assert!(parse_upstream("127.0.0.1:8000").is_err());
        assert!(parse_upstream("http://h/?a=1").is_err());
        assert_eq!(
            join_url("http://h:1/api/", "/tasks/1").unwrap().as_str(),
            "http://h:1/api/tasks/1"
        );
        assert_eq!(
            join_url("http://h:1", "/tasks/1?a=../b").unwrap().as_str(),
            "http://h:1/tasks/1?a=../b"
        );
    }

    /// No join leaves the base: dot segments in any spelling, a backslash, a path without `/`.
    #[test]
    fn joins_stay_under_the_base() {
        for path in [
            "/../progress/",
            "/%2e%2e/_standin/stats",
            "/%2E%2E/x",
            "/.%2e/x",
            "/%2e./x",
            "/a/./b",
            "/a/%2E/b",
            "/a/..",
            "/..\\x",
            "x",
            "",
        ] {
            assert!(
                join_url("http://h:1/base", path).is_err(),
                "{path:?} was joined"
            );
        }
        assert_eq!(
            join_url("http://h:1/base", "/a.b/..c/%2e%2ex")
                .unwrap()
                .path(),
            "/base/a.b/..c/%2e%2ex"
        );
        assert_eq!(join_url("http://h:1/base", "/").unwrap().path(), "/base/");
    }
}
