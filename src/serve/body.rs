//! Reading request bodies: chunk by chunk, refused once they pass a size limit (413 `too-large`)
//! and with 408 `body-timeout` when the body does not keep moving: each further
//! [`PROGRESS_BYTES`] of it (or its rest) must arrive within `--body-timeout-ms`. A large body is
//! fine while it moves; a client that stops sending, or trickles a byte now and then, does not
//! hold its connection, or a shutdown, for ever. The bundle upload spools through it; the JSON
//! endpoints read through [`StrictJson`].

use super::error::ApiError;
use super::state::ServeState;
use axum::body::{Body, BodyDataStream, Bytes};
use axum::http::StatusCode;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Largest JSON request body (the ledger's frame exchange carries up to 65 536 frames).
pub const JSON_BODY_LIMIT: u64 = 64 << 20;

/// How much of a body must arrive within each body timeout (the slowest upload kept is this
/// much per `--body-timeout-ms`: 2 KiB/s at the default 30 s).
pub const PROGRESS_BYTES: u64 = 64 << 10;

/// A request body read chunk by chunk under a size limit and a progress timeout.
pub struct BodyReader {
    stream: BodyDataStream,
    limit: u64,
    stall: Duration,
    total: u64,
    /// When the last chunk arrived (or reading began): no byte for `stall` after it is a 408.
    last_at: Instant,
    /// When the first byte of the current window arrived, and how much of it has arrived since:
    /// [`PROGRESS_BYTES`] must arrive within `stall` of that first byte, then a new window begins.
    /// A timeout per chunk alone let a client that sends one byte just under every timeout hold
    /// its request (and the shutdown, which waits for it) for as long as it liked.
    window_first: Option<Instant>,
    window_bytes: u64,
    /// What the body is, for the timeout's message ("the bundle", "the request body").
    what: &'static str,
    too_large: fn(u64) -> ApiError,
}

impl BodyReader {
    pub fn new(
        body: Body,
        limit: u64,
        stall: Duration,
        what: &'static str,
        too_large: fn(u64) -> ApiError,
    ) -> Self {
        BodyReader {
            stream: body.into_data_stream(),
            limit,
            stall,
            total: 0,
            last_at: Instant::now(),
            window_first: None,
            window_bytes: 0,
            what,
            too_large,
        }
    }

    /// The next chunk, `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ApiError> {
        let deadline = self.window_first.unwrap_or(self.last_at) + self.stall;
        let Ok(next) = tokio::time::timeout_at(deadline, self.stream.next()).await else {
            return Err(self.timed_out());
        };
        let Some(chunk) = next else { return Ok(None) };
        let chunk = chunk.map_err(|e| {
            if e.to_string().contains("length limit") {
                (self.too_large)(self.limit)
            } else {
                ApiError::bad_request(format!("reading the request body: {e}"))
            }
        })?;
        self.total += chunk.len() as u64;
        if self.total > self.limit {
            return Err((self.too_large)(self.limit));
        }
        let now = Instant::now();
        self.last_at = now;
        self.window_first.get_or_insert(now);
        self.window_bytes += chunk.len() as u64;
        if self.window_bytes >= PROGRESS_BYTES {
            self.window_first = None;
            self.window_bytes = 0;
        }
        Ok(Some(chunk))
    }

    /// The 408 once the body stopped (no byte for the timeout) or moves too slowly.
    fn timed_out(&self) -> ApiError {
        let ms = self.stall.as_millis();
        let message = if self.last_at.elapsed() >= self.stall {
            format!(
                "no byte of {} arrived for {ms} ms after {} bytes; send it again (--body-timeout-ms)",
                self.what, self.total
            )
        } else {
            format!(
                "{} arrives too slowly: {} bytes of it in {ms} ms (after {} bytes), where {PROGRESS_BYTES} bytes (or the rest of it) must arrive within that time; send it again over a faster link (--body-timeout-ms)",
                self.what,
                self.window_bytes,
                self.total - self.window_bytes
            )
        };
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "body-timeout", message)
    }

    /// The whole body in memory (for bodies whose limit is small enough to hold).
    pub async fn collect(mut self) -> Result<Vec<u8>, ApiError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.next().await? {
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }
}

/// 413 before any byte of the body is read when its declared `Content-Length` is over `limit`
/// (a body that runs past it undeclared is refused by [`BodyReader`]).
pub fn refuse_declared(
    headers: &axum::http::HeaderMap,
    limit: u64,
    too_large: fn(u64) -> ApiError,
) -> Result<(), ApiError> {
    match crate::http_server::declared_length(headers) {
        Some(n) if n > limit => Err(too_large(limit)),
        _ => Ok(()),
    }
}

fn json_too_large(limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        format!("the request body is larger than {limit} bytes; send fewer events or frames per request"),
    )
}

/// A JSON body that refuses a repeated key (in any object, at any depth) with 400 `repeated-key`
/// naming the key and its path, where a plain `Json` extractor would keep the last value and act
/// on a request the client may not have meant (the relay refuses such bodies the same way, SPEC
/// section 9). Read under [`JSON_BODY_LIMIT`] and the stall timeout.
pub struct StrictJson<T>(pub T);

impl<T> axum::extract::FromRequest<Arc<ServeState>> for StrictJson<T>
where
    T: serde::de::DeserializeOwned + Send + 'static,
{
    type Rejection = ApiError;

    async fn from_request(
        req: axum::extract::Request,
        state: &Arc<ServeState>,
    ) -> Result<Self, ApiError> {
        refuse_declared(req.headers(), JSON_BODY_LIMIT, json_too_large)?;
        let stall = state.options.limits.body_timeout;
        let reader = BodyReader::new(
            req.into_body(),
            JSON_BODY_LIMIT,
            stall,
            "the request body",
            json_too_large,
        );
        let bytes = reader.collect().await?;
        // Checking and parsing up to 64 MiB is CPU work: on the blocking pool, so that a few
        // large bodies never hold the threads that answer /healthz and every other request.
        tokio::task::spawn_blocking(move || parse_strict(&bytes))
            .await
            .map_err(|e| ApiError::internal(format!("parsing the request body: {e}")))?
            .map(StrictJson)
    }
}

/// `bytes` as a `T`: JSON with no key repeated in any object (400 `repeated-key` naming it).
fn parse_strict<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let not_json =
        |e: serde_json::Error| ApiError::bad_request(format!("the request body is not JSON: {e}"));
    if let Some(r) =
        crate::core::bundle::dupkeys::first_repeated_key(bytes, "$").map_err(not_json)?
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "repeated-key",
            format!("{r}. Nothing was changed"),
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body does not fit: {e}")))
}
