//! The client side of ledger anti-entropy over HTTP: a [`SyncPeer`] that posts each request to a
//! serve's `POST {url}/sync` (`url` = `http://HOST:PORT/api/v1/ledger/NODE`) and reads its answer.
//! What `airlock ledger sync A --peer URL` and `ledger diff A --peer URL` use.

use crate::core::ledger::antientropy::{SyncPeer, SyncRequest, SyncResponse};
use crate::core::ledger::LedgerError;
use std::time::Duration;

/// Largest answer read (a frame exchange carries up to 65 536 frames).
const ANSWER_LIMIT: u64 = 256 << 20;

/// A serve's ledger as the other side of a session.
pub struct HttpPeer {
    client: reqwest::blocking::Client,
    url: String,
    token: Option<String>,
}

impl HttpPeer {
    /// `url` names the remote ledger (`.../api/v1/ledger/NODE`); `token` is the serve's bearer token.
    pub fn new(url: &str, token: Option<String>) -> Result<HttpPeer, LedgerError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| LedgerError::Usage(format!("--peer {url}: {e}")))?;
        if parsed.scheme() != "http" || !parsed.path().contains("/api/v1/ledger/") {
            return Err(LedgerError::Usage(format!(
                "--peer {url}: give http://HOST:PORT/api/v1/ledger/NODE (a serve's ledger of node NODE)"
            )));
        }
        let client = reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| LedgerError::Usage(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpPeer {
            client,
            url: format!("{}/sync", url.trim_end_matches('/')),
            token,
        })
    }
}

impl SyncPeer for HttpPeer {
    fn exchange(&mut self, req: &SyncRequest) -> Result<SyncResponse, LedgerError> {
        use std::io::Read;
        let mut r = self.client.post(&self.url).json(req);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        let failed = |m: String| LedgerError::Usage(format!("peer {}: {m}", self.url));
        let resp = r.send().map_err(|e| failed(e.to_string()))?;
        let status = resp.status();
        let mut body = Vec::new();
        resp.take(ANSWER_LIMIT + 1)
            .read_to_end(&mut body)
            .map_err(|e| failed(e.to_string()))?;
        if body.len() as u64 > ANSWER_LIMIT {
            return Err(failed(format!("answer larger than {ANSWER_LIMIT} bytes")));
        }
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
