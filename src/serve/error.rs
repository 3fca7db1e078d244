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
