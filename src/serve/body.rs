//! Reading request bodies: chunk by chunk, refused once they pass a size limit (413 `too-large`)
//! and with 408 `body-timeout` when the body does not keep moving: each further
//! [`PROGRESS_BYTES`] of it (or its rest) must arrive within `--body-timeout-ms`. A large body is
//! fine while it moves; a client that stops sending, or trickles a byte now and then, does not
//! hold its connection, or a shutdown, for ever. The bundle upload spools through it; the JSON
//! endpoints read through [`StrictJson`], whose bodies are held in memory and so share the
//! body budget of all connections together (`--max-body-memory-mib`).

use super::error::ApiError;
use super::state::{ServeState, DEFAULT_BODY_MEMORY_MIB, JSON_BODY_LIMIT};
use crate::http_server::{BudgetTaken, BUDGET_RETRY_AFTER_SECS};
use axum::body::{Body, BodyDataStream, Bytes};
use axum::http::StatusCode;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

// One body without a declared length fits the default budget (a smaller one given is refused at
// start, `ConnectionLimits::body_memory_too_small`, and raised to it in the library).
const _: () = assert!(DEFAULT_BODY_MEMORY_MIB as u64 * (1 << 20) >= JSON_BODY_LIMIT);

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

    /// The whole body in memory (for bodies whose limit is small enough to hold). The buffer is
    /// sized once for a body that `declared` its length, and for one without a length grows by
    /// doubling but never past the limit: it never outgrows the share of the body budget the body
    /// reserved (a plain `Vec` could double a 40 MiB body's buffer to 80 MiB).
    pub async fn collect(mut self, declared: Option<u64>) -> Result<Vec<u8>, ApiError> {
        let mut out: Vec<u8> = Vec::new();
        while let Some(chunk) = self.next().await? {
            crate::http_server::append_within(&mut out, &chunk, declared, self.limit);
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
/// section 9). Read under [`JSON_BODY_LIMIT`], the stall timeout and the body budget all
/// JSON bodies share (`--max-body-memory-mib`).
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
        let declared = crate::http_server::declared_length(req.headers());
        let stall = state.options.limits.body_timeout;
        // Before any byte is read: the body's share of what all JSON bodies may hold at once.
        let mut share = state
            .body_budget
            .reserve(declared, JSON_BODY_LIMIT, stall / 2)
            .await
            .map_err(|taken| budget_taken(taken, declared))?;
        let reader = BodyReader::new(
            req.into_body(),
            JSON_BODY_LIMIT,
            stall,
            "the request body",
            json_too_large,
        );
        let bytes = reader.collect(declared).await?;
        // Read whole: from now on it holds only what its buffer takes.
        share.shrink_to(bytes.capacity() as u64);
        // Checking and parsing up to 64 MiB is CPU work: on the blocking pool, so that a few
        // large bodies never hold the threads that answer /healthz and every other request. The
        // share goes with the bytes and is given back when the parse ends, even when the client
        // has gone meanwhile.
        tokio::task::spawn_blocking(move || {
            let parsed = parse_strict(&bytes);
            drop((bytes, share));
            parsed
        })
        .await
        .map_err(|e| ApiError::internal(format!("parsing the request body: {e}")))?
        .map(StrictJson)
    }
}

/// The 503 `busy` for a JSON body the budget had no room for within the wait: nothing was read or
/// done, and the client is told to send it again (`Retry-After`).
fn budget_taken(taken: BudgetTaken, declared: Option<u64>) -> ApiError {
    let hint = if declared.is_none() {
        format!(
            "; a body sent with its Content-Length reserves only its size, one without reserves {} MiB",
            JSON_BODY_LIMIT >> 20
        )
    } else {
        String::new()
    };
    tracing::warn!(
        budget_kib = taken.total_kib,
        wanted_kib = taken.wanted_kib,
        "JSON request refused: the request-body budget stayed taken"
    );
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        format!(
            "serve's budget for JSON request bodies held in memory ({} MiB, all connections together) had no room for this one ({} KiB) within {} ms: other requests' bodies take it; nothing was changed: send it again shortly{hint}",
            taken.total_kib / 1024,
            taken.wanted_kib,
            taken.waited.as_millis()
        ),
    )
    .retry_after(BUDGET_RETRY_AFTER_SECS)
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
