//! The client side of the connected transport: sends one bundle file to a serve's
//! `POST /api/v1/airgap/bundles`, streaming it from disk, and returns the answer.
//!
//! Limits (so a wrong or hostile URL cannot hang or exhaust the client): the connection must be
//! made within [`CONNECT_TIMEOUT`]; while the bundle is sent, the serve must take some of it at
//! least every `timeout` (so a large bundle on a slow link is fine as long as it moves); once it is
//! sent, the whole answer must arrive within `timeout` (the serve imports before it answers); the
//! answer is read up to [`ANSWER_LIMIT`] bytes.

use super::client::{read_answer, request_error, AnswerError, ANSWER_LIMIT, CONNECT_TIMEOUT};
use crate::core::text::ShowPath;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The path of the push endpoint.
pub const BUNDLES_PATH: &str = "/api/v1/airgap/bundles";

/// How long a push waits by default: for upload progress, and for the answer once the bundle is
/// sent (the serve verifies and imports it first).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a serve answered.
#[derive(Debug, Clone)]
pub struct PushOutcome {
    pub status: u16,
    /// The import report (200, 422) or `{"error", "message"}`.
    pub body: serde_json::Value,
}

/// Why a push did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{0} is not an http:// or https:// URL of an airlock serve")]
    BadUrl(String),
    #[error("cannot read {file}: {message}")]
    File { file: String, message: String },
    #[error("sending to {url} failed: {message}; check that an airlock serve runs there and is reachable")]
    Send { url: String, message: String },
    #[error("timed out after {secs} s waiting for {url} {what}; check that it is an airlock serve, or raise --push-timeout (or $AIRLOCK_PUSH_TIMEOUT) for a slow link or a large bundle")]
    TimedOut {
        url: String,
        secs: u64,
        what: &'static str,
    },
    #[error("timed out after {secs} s waiting for {url} to accept the connection; check the address and that the serve runs and is reachable")]
    ConnectTimedOut { url: String, secs: u64 },
    #[error("{url} sent a response larger than {limit} bytes; is it an airlock serve? Nothing more was read")]
    TooLarge { url: String, limit: u64 },
    #[error("{url} answered {status} without a JSON body; is it an airlock serve?")]
    NotJson { url: String, status: u16 },
}

/// How to push.
#[derive(Debug, Clone, Default)]
pub struct PushRequest<'a> {
    /// The serve's base URL (`http://host:port`) or the full endpoint URL.
    pub url: &'a str,
    /// The bearer token, if the serve has one.
    pub token: Option<&'a str>,
    /// The name the report and the store give the bundle (the CLI passes the path as given).
    pub name: &'a str,
    pub force: bool,
    pub dry_run: bool,
    pub verify_only: bool,
    /// Longest wait for upload progress, and for the answer after the upload (None: [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
}

/// The endpoint URL for a base URL.
pub fn endpoint(url: &str) -> Result<String, PushError> {
    let shown = || crate::text::visible(url).into_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(PushError::BadUrl(shown()));
    }
    // A malformed URL (no host, a bad port or host name) is said to be one, not reported later as
    // a serve that cannot be reached.
    if let Err(e) = reqwest::Url::parse(url) {
        return Err(PushError::BadUrl(format!("{} ({e})", shown())));
    }
    let base = url.trim_end_matches('/');
    if base.ends_with(BUNDLES_PATH) {
        Ok(base.to_string())
    } else {
        Ok(format!("{base}{BUNDLES_PATH}"))
    }
}

/// Streams `file` to the serve and returns its answer.
pub fn push_file(file: &Path, req: &PushRequest<'_>) -> Result<PushOutcome, PushError> {
    let url = endpoint(req.url)?;
    let shown_url = crate::text::visible(&url).into_owned();
    let shown = crate::text::visible_path(file);
    let file_err = |e: std::io::Error| PushError::File {
        file: shown.clone(),
        message: e.to_string(),
    };
    // Regular files only: a FIFO or device would hang the upload.
    let f = crate::core::file_input::open_regular(file).map_err(file_err)?;
    let len = f.metadata().map_err(file_err)?.len();
    let send_err = |e: reqwest::Error| PushError::Send {
        url: shown_url.clone(),
        message: request_error(e),
    };
    // No timeout of reqwest's own: its "total" timeout would cut a large upload on a slow link.
    // The watchdog below bounds each phase instead.
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(None)
        .no_proxy()
        .build()
        .map_err(send_err)?;
    let flag = |b: bool| if b { "true" } else { "false" };
    let activity = Arc::new(Activity::new(len));
    let body = Upload {
        file: f,
        activity: activity.clone(),
    };
    let mut r = client
        .post(&url)
        .query(&[
            ("file", req.name),
            ("force", flag(req.force)),
            ("dryRun", flag(req.dry_run)),
            ("verifyOnly", flag(req.verify_only)),
        ])
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(reqwest::blocking::Body::sized(body, len));
    if let Some(t) = req.token {
        r = r.bearer_auth(t);
    }
    // The exchange runs on its own thread so that this one can give up on a silent serve. A
    // thread given up on stops at its next upload read; one blocked on a silent answer ends with
    // the process.
    let (tx, rx) = std::sync::mpsc::channel();
    let worker_activity = activity.clone();
    std::thread::Builder::new()
        .name("airlock-push".into())
        .spawn(move || {
            let answer = r.send().map_err(Failure::Send).and_then(|resp| {
                let status = resp.status().as_u16();
                let body = read_answer(resp, ANSWER_LIMIT).map_err(Failure::Answer)?;
                Ok((status, body))
            });
            worker_activity.finished.store(true, Ordering::Relaxed);
            let _ = tx.send(answer);
        })
        .map_err(|e| PushError::Send {
            url: shown_url.clone(),
            message: format!("cannot start the upload thread: {e}"),
        })?;
    let timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let answer = loop {
        let (deadline, what) = activity.deadline(timeout);
        let now = Instant::now();
        if now >= deadline {
            activity.abandoned.store(true, Ordering::Relaxed);
            return Err(PushError::TimedOut {
                url: shown_url,
                secs: timeout.as_secs(),
                what,
            });
        }
        match rx.recv_timeout(deadline - now) {
            Ok(answer) => break answer,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PushError::Send {
                    url: shown_url,
                    message: "the upload thread stopped without an answer".into(),
                })
            }
        }
    };
    let (status, bytes) = match answer {
        Ok(a) => a,
        // reqwest's own timeouts are off but for connecting.
        Err(Failure::Send(e)) if e.is_timeout() => {
            return Err(PushError::ConnectTimedOut {
                url: shown_url,
                secs: CONNECT_TIMEOUT.as_secs(),
            })
        }
        Err(Failure::Send(e)) if e.is_body() => {
            // reqwest reports a failed connection during a streamed upload as "receiver is
            // gone", losing the cause; a second connect finds it (e.g. "Connection refused").
            let message = match connect_problem(&url) {
                Some(cause) => format!("cannot connect: {cause}"),
                None => request_error(e),
            };
            return Err(PushError::Send {
                url: shown_url,
                message,
            });
        }
        Err(Failure::Send(e)) => return Err(send_err(e)),
        Err(Failure::Answer(AnswerError::TooLarge(limit))) => {
            return Err(PushError::TooLarge {
                url: shown_url,
                limit,
            })
        }
        Err(Failure::Answer(e)) => {
            return Err(PushError::Send {
                url: shown_url,
                message: format!("reading the answer: {e}"),
            })
        }
    };
    let body: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|_| PushError::NotJson {
            url: shown_url,
            status,
        })?;
    Ok(PushOutcome { status, body })
}

/// Why a plain TCP connection to the URL's host and port fails, if it does.
fn connect_problem(url: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = parsed.port_or_known_default()?;
    let addrs = match (host, port).to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Some(format!("cannot resolve {host}: {e}")),
    };
    let mut last = None;
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return None,
            Err(e) => last = Some(format!("{addr}: {e}")),
        }
    }
    last
}

/// What went wrong on the exchange thread.
enum Failure {
    Send(reqwest::Error),
    Answer(AnswerError),
}

/// How far the exchange has come, shared between the exchange thread and the watchdog.
struct Activity {
    start: Instant,
    /// Bundle bytes the client has taken for sending.
    sent: AtomicU64,
    len: u64,
    /// Milliseconds after `start` of the last upload progress, or of the upload's end.
    last_ms: AtomicU64,
    /// The exchange thread is done (answer or error on its way).
    finished: AtomicBool,
    /// The watchdog gave up: the upload stops at its next read.
    abandoned: AtomicBool,
}

impl Activity {
    fn new(len: u64) -> Activity {
        Activity {
            start: Instant::now(),
            sent: AtomicU64::new(0),
            len,
            last_ms: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let ms = self.start.elapsed().as_millis().min(u64::MAX as u128) as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// When to give up, and what was being waited for: `timeout` after the last upload progress
    /// while sending, `timeout` after the upload's end for the whole answer.
    fn deadline(&self, timeout: Duration) -> (Instant, &'static str) {
        let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        let what = if self.sent.load(Ordering::Relaxed) < self.len {
            "to take the bundle (no upload progress)"
        } else {
            "to answer"
        };
        if self.finished.load(Ordering::Relaxed) {
            // The answer is on the channel: a little more than a moment suffices.
            return (Instant::now() + Duration::from_secs(1), what);
        }
        (last + timeout, what)
    }
}

/// The bundle file as the request body, reporting progress to the watchdog.
struct Upload {
    file: std::fs::File,
    activity: Arc<Activity>,
}

impl std::io::Read for Upload {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.activity.abandoned.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the push timed out",
            ));
        }
        let n = self.file.read(buf)?;
        self.activity.sent.fetch_add(n as u64, Ordering::Relaxed);
        if n == 0 {
            // At the file's end (shorter than it was): nothing more to send.
            self.activity
                .sent
                .fetch_max(self.activity.len, Ordering::Relaxed);
        }
        self.activity.touch();
        Ok(n)
    }
}

/// Reads a bearer token file: its first line, trimmed; empty is an error.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    // Regular files only: a FIFO given as the token file is refused, not waited on.
    crate::core::file_input::open_regular(path)
        .and_then(|f| f.take(4096).read_to_string(&mut text))
        .map_err(|e| format!("cannot read the token file {}: {e}", path.shown()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "the token file {} must hold one token of at least 16 visible characters on its first line",
            path.shown()
        ));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_tokens() {
        assert_eq!(
            endpoint("http://127.0.0.1:8443/").unwrap(),
            "http://127.0.0.1:8443/api/v1/airgap/bundles"
        );
        assert_eq!(
            endpoint("https://h/api/v1/airgap/bundles").unwrap(),
            "https://h/api/v1/airgap/bundles"
        );
        assert!(endpoint("ftp://h").is_err());
        // Malformed URLs are said to be malformed (not "check that a serve runs there"), with
        // their control characters visible.
        for bad in ["http://\u{1b}[31m", "http://", "http://h:99999"] {
            let e = endpoint(bad).unwrap_err().to_string();
            assert!(e.contains("is not an http:// or https:// URL"), "{e}");
            assert!(!e.chars().any(crate::text::needs_escape), "{e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "0123456789abcdef0123");
        std::fs::write(&p, "short\n").unwrap();
        assert!(read_token_file(&p).is_err());
    }
}
