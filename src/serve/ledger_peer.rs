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

impl SyncPeer for HttpPeer {
    fn exchange(&mut self, req: &SyncRequest) -> Result<SyncResponse, LedgerError> {
        let mut r = self.client.post(&self.url).json(req);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        let failed = |m: String| LedgerError::Usage(format!("peer {}: {m}", self.url));
        let timed_out = || {
            failed(format!(
                "timed out after {} s waiting for {}; check that the serve runs and is reachable, or raise --peer-timeout (${TIMEOUT_ENV}, seconds)",
                self.timeout.as_secs(),
                self.url
            ))
        };
        let resp = r.send().map_err(|e| {
            if e.is_timeout() {
                timed_out()
            } else {
                failed(format!(
                    "{}; check that the serve runs there and is reachable",
                    request_error(e)
                ))
            }
        })?;
        let status = resp.status();
        let body = read_answer(resp, ANSWER_LIMIT).map_err(|e| match e {
            AnswerError::TooLarge(limit) => failed(format!(
                "response larger than {limit} bytes; is it an airlock serve? Nothing more was read"
            )),
            e if e.is_timeout() => timed_out(),
            e => failed(format!("reading the answer: {e}")),
        })?;
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
            return Err(failed(format!("HTTP {status}: {message}")));
        }
        serde_json::from_slice(&body).map_err(|e| failed(format!("not a sync answer: {e}")))
    }
}
