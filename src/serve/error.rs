//! JSON errors: every refusal is `{"error": "<code>", "message": "<what and what to do>"}` with a
//! fitting status (and `Retry-After` where waiting is the remedy, [`ApiError::retry_after`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for the `Retry-After` header, when the client should send the request again.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same refusal with `Retry-After: secs`.
    pub fn retry_after(mut self, secs: u32) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub fn store(e: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            e.to_string(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code, "message": self.message });
        let mut out = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            out.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        out
    }
}

/// Unknown paths.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint at {}; see docs/serve.md for the API",
        crate::text::visible(uri.path())
    ))
}

/// Every error answer as JSON: the router's own (405 for a method an endpoint does not take, 400
/// for a path or query it cannot read) come as plain text or empty; they are rewritten to the
/// `{"error", "message"}` body every endpoint's own refusals use (the `Allow` header is kept).
pub async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let allow = parts.headers.get(axum::http::header::ALLOW).cloned();
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method-not-allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "too-large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported-media-type",
        s if s.is_server_error() => "internal",
        _ => "bad-request",
    };
    let message = if status == StatusCode::METHOD_NOT_ALLOWED {
        "this endpoint does not take that method (the Allow header and docs/serve.md list the ones it takes)".to_string()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        crate::text::visible(&String::from_utf8_lossy(&text)).into_owned()
    };
    let mut out = ApiError::new(status, code, message).into_response();
    if let Some(a) = allow {
        out.headers_mut().insert(axum::http::header::ALLOW, a);
    }
    out
}
