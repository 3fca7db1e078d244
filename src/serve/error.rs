//! JSON errors: every refusal is `{"error": "<code>", "message": "<what and what to do>"}` with a
//! fitting status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
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
        (self.status, Json(body)).into_response()
    }
}

/// Unknown paths.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint at {}; see docs/serve.md for the API",
        crate::text::visible(uri.path())
    ))
}

/// A JSON request body read strictly: a key repeated inside one object (at any depth) is refused
/// with 400 `repeated-key` naming the key and its path, where a plain `Json` extractor would keep
/// the last value and act on a request the client may not have meant (the relay refuses such
/// bodies the same way, SPEC section 9).
pub struct StrictJson<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for StrictJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), "bad-request", e.body_text()))?;
        let not_json = |e: serde_json::Error| {
            ApiError::bad_request(format!("the request body is not JSON: {e}"))
        };
        if let Some(r) =
            crate::core::bundle::dupkeys::first_repeated_key(&bytes, "$").map_err(not_json)?
        {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "repeated-key",
                format!("{r}. Nothing was changed"),
            ));
        }
        serde_json::from_slice(&bytes)
            .map(StrictJson)
            .map_err(|e| ApiError::bad_request(format!("the request body does not fit: {e}")))
    }
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
