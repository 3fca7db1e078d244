//! The client side of ledger anti-entropy over HTTP: a [`SyncPeer`] that posts each request to a
//! serve's `POST {url}/sync` (`url` = `http://HOST:PORT/api/v1/ledger/NODE`) and reads its answer.
//! What `airlock ledger sync A --peer URL` and `ledger diff A --peer URL` use.

use super::client::{read_answer, request_error, AnswerError, ANSWER_LIMIT};
use crate::core::ledger::antientropy::{SyncPeer, SyncRequest, SyncResponse};
use crate::core::ledger::LedgerError;
use std::time::Duration;

/// How long one exchange may take by default (sending, the serve's work, the answer's first bytes;
/// then each read of the answer); `--peer-timeout` / `$AIRLOCK_PEER_TIMEOUT` (whole seconds) set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment variable that sets the exchange timeout, in whole seconds.
pub const TIMEOUT_ENV: &str = "AIRLOCK_PEER_TIMEOUT";

/// A serve's ledger as the other side of a session.
pub struct HttpPeer {
    client: reqwest::blocking::Client,
    url: String,
    token: Option<String>,
    timeout: Duration,
}

impl HttpPeer {
    /// `url` names the remote ledger (`.../api/v1/ledger/NODE`); `token` is the serve's bearer token;
    /// `timeout` bounds each exchange (`--peer-timeout`, default [`DEFAULT_TIMEOUT`]).
    pub fn new(
        url: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<HttpPeer, LedgerError> {
        let shown = crate::text::visible(url);
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| LedgerError::Usage(format!("--peer {shown}: {e}")))?;
        if parsed.scheme() != "http" || !parsed.path().contains("/api/v1/ledger/") {
            return Err(LedgerError::Usage(format!(
                "--peer {shown}: give http://HOST:PORT/api/v1/ledger/NODE (a serve's ledger of node NODE)"
            )));
        }
        let client = reqwest::blocking::Client::builder()
            .no_proxy()
            .connect_timeout(super::client::CONNECT_TIMEOUT.min(timeout))
            .timeout(timeout)
            .build()
            .map_err(|e| LedgerError::Usage(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpPeer {
            client,
            url: format!("{}/sync", url.trim_end_matches('/')),
            token,
            timeout,
        })
    }
}

/// Times an exchange is sent again after a 503 with `Retry-After` (serve had no room for its body,
/// or another process held the log: nothing was done), waiting as told, at most
/// [`MAX_RETRY_AFTER`] each time.
pub const BUSY_RETRIES: u32 = 5;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// One exchange's answer: its status, the `Retry-After` it asked for (seconds), and its body.
struct Answer {
    status: reqwest::StatusCode,
    retry_after: Option<u64>,
    body: Vec<u8>,
}

impl HttpPeer {
    fn failed(&self, m: String) -> LedgerError {
        LedgerError::Usage(format!("peer {}: {m}", self.url))
    }

    fn timed_out(&self) -> LedgerError {
        self.failed(format!(
            "timed out after {} s waiting for {}; check that the serve runs and is reachable, or raise --peer-timeout (${TIMEOUT_ENV}, seconds)",
            self.timeout.as_secs(),
            self.url
        ))
    }

    /// Sends `req` once and reads the answer (bounded by [`ANSWER_LIMIT`]).
    fn send(&self, req: &SyncRequest) -> Result<Answer, LedgerError> {
        let mut r = self.client.post(&self.url).json(req);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().map_err(|e| {
            if e.is_timeout() {
                self.timed_out()
            } else {
                self.failed(format!(
                    "{}; check that the serve runs there and is reachable",
                    request_error(e)
                ))
            }
        })?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = read_answer(resp, ANSWER_LIMIT).map_err(|e| match e {
            AnswerError::TooLarge(limit) => self.failed(format!(
                "response larger than {limit} bytes; is it an airlock serve? Nothing more was read"
            )),
            e if e.is_timeout() => self.timed_out(),
            e => self.failed(format!("reading the answer: {e}")),
        })?;
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }
}

impl SyncPeer for HttpPeer {
    fn exchange(&mut self, req: &SyncRequest) -> Result<SyncResponse, LedgerError> {
        let mut tries = 1;
        let answer = loop {
            let a = self.send(req)?;
            match a.retry_after {
                Some(secs)
                    if a.status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                        && tries <= BUSY_RETRIES =>
                {
                    std::thread::sleep(Duration::from_secs(secs.max(1)).min(MAX_RETRY_AFTER));
                    tries += 1;
                }
                _ => break a,
            }
        };
        if !answer.status.is_success() {
            let body = &answer.body;
            let message = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
            let after = if tries > 1 {
                format!(" (sent {tries} times, waiting as the serve asked)")
            } else {
                String::new()
            };
            return Err(self.failed(format!("HTTP {}: {message}{after}", answer.status)));
        }
        serde_json::from_slice(&answer.body)
            .map_err(|e| self.failed(format!("not a sync answer: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};

    /// A one-connection-per-request HTTP server answering `answers` in turn; the count of requests.
    fn server(answers: Vec<String>) -> (String, std::thread::JoinHandle<usize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/api/v1/ledger/gate-a",
            listener.local_addr().unwrap()
        );
        let handle = std::thread::spawn(move || {
            let mut served = 0;
            for answer in answers {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                (&stream).write_all(answer.as_bytes()).unwrap();
                served += 1;
            }
            served
        });
        (url, handle)
    }

    fn answer(status: &str, extra: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    const BUSY: &str = r#"{"error":"busy","message":"no room for this body"}"#;
    const CHILDREN: &str = r#"{"kind":"children","floor":1,"nextLsn":1,"node":null,"children":[]}"#;

    fn request() -> SyncRequest {
        SyncRequest::Children {
            floor: 1,
            nodes: Vec::new(),
        }
    }

    /// A 503 with `Retry-After` (nothing was done) is sent again after the wait asked for.
    #[test]
    fn a_busy_answer_with_retry_after_is_sent_again() {
        let (url, served) = server(vec![
            answer("503 Service Unavailable", "retry-after: 1\r\n", BUSY),
            answer("200 OK", "", CHILDREN),
        ]);
        let mut peer = HttpPeer::new(&url, None, Duration::from_secs(30)).unwrap();
        let got = peer.exchange(&request());
        assert!(got.is_ok(), "{:?}", got.err());
        assert_eq!(served.join().unwrap(), 2);
    }

    /// A 503 without `Retry-After` is an error at once, naming the serve's message.
    #[test]
    fn a_503_without_retry_after_is_not_sent_again() {
        let (url, served) = server(vec![answer("503 Service Unavailable", "", BUSY)]);
        let mut peer = HttpPeer::new(&url, None, Duration::from_secs(30)).unwrap();
        let err = peer.exchange(&request()).err().unwrap().to_string();
        assert!(
            err.contains("HTTP 503") && err.contains("no room for this body"),
            "{err}"
        );
        assert!(!err.contains("sent"), "{err}");
        assert_eq!(served.join().unwrap(), 1);
    }
}
