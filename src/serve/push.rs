//! The client side of the connected transport: sends one bundle file to a serve's
//! `POST /api/v1/airgap/bundles`, streaming it from disk, and returns the answer.

use std::path::Path;
use std::time::Duration;

/// The path of the push endpoint.
pub const BUNDLES_PATH: &str = "/api/v1/airgap/bundles";

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
    #[error("sending to {url} failed: {message}")]
    Send { url: String, message: String },
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
}

/// The endpoint URL for a base URL.
pub fn endpoint(url: &str) -> Result<String, PushError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(PushError::BadUrl(crate::text::visible(url).into_owned()));
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
    let shown = crate::text::visible(&file.display().to_string()).into_owned();
    let file_err = |e: std::io::Error| PushError::File {
        file: shown.clone(),
        message: e.to_string(),
    };
    let f = std::fs::File::open(file).map_err(file_err)?;
    let len = f.metadata().map_err(file_err)?.len();
    let send_err = |e: reqwest::Error| PushError::Send {
        url: crate::text::visible(&url).into_owned(),
        message: e.to_string(),
    };
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(None)
        .no_proxy()
        .build()
        .map_err(send_err)?;
    let flag = |b: bool| if b { "true" } else { "false" };
    let mut r = client
        .post(&url)
        .query(&[
            ("file", req.name),
            ("force", flag(req.force)),
            ("dryRun", flag(req.dry_run)),
            ("verifyOnly", flag(req.verify_only)),
        ])
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(reqwest::blocking::Body::sized(f, len));
    if let Some(t) = req.token {
        r = r.bearer_auth(t);
    }
    let resp = r.send().map_err(send_err)?;
    let status = resp.status().as_u16();
    let body: serde_json::Value = resp.json().map_err(|_| PushError::NotJson {
        url: crate::text::visible(&url).into_owned(),
        status,
    })?;
    Ok(PushOutcome { status, body })
}

/// Reads a bearer token file: its first line, trimmed; empty is an error.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_string(&mut text))
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "the token file {} must hold one token of at least 16 visible characters on its first line",
            path.display()
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
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "0123456789abcdef0123");
        std::fs::write(&p, "short\n").unwrap();
        assert!(read_token_file(&p).is_err());
    }
}
