//! Envelopes: the non-secret record of one queued write, its statuses and their transitions, and the
//! intake rule that turns a request the upstream could not take into an envelope or a refusal.

use super::routes::{classify, RouteClass};
use super::scrub;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The largest body the outbox accepts (64 KiB).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// The longest response summary kept per envelope.
pub const MAX_SUMMARY_BYTES: usize = 2048;
/// The most of an upstream response body a replay reads (the rest is not read: a huge answer
/// cannot exhaust memory).
pub const MAX_RESPONSE_READ: usize = 64 * 1024;
/// The longest error text kept per envelope.
pub const MAX_ERROR_BYTES: usize = 512;

/// Where an envelope is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvelopeStatus {
    /// Waiting for a replay (new, or an earlier attempt met a network error or 5xx).
    Queued,
    /// The upstream answered 2xx.
    Delivered,
    /// The upstream answered 409 or 422; kept with the response for operator review.
    Conflict,
    /// The upstream answered another 4xx.
    Failed,
    /// An operator cancelled it; it is never sent.
    Cancelled,
}

impl EnvelopeStatus {
    /// Every status, in display order.
    pub const ALL: [EnvelopeStatus; 5] = [
        EnvelopeStatus::Queued,
        EnvelopeStatus::Delivered,
        EnvelopeStatus::Conflict,
        EnvelopeStatus::Failed,
        EnvelopeStatus::Cancelled,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EnvelopeStatus::Queued => "queued",
            EnvelopeStatus::Delivered => "delivered",
            EnvelopeStatus::Conflict => "conflict",
            EnvelopeStatus::Failed => "failed",
            EnvelopeStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<EnvelopeStatus> {
        EnvelopeStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Whether an operator may move an envelope from this status back to `queued`
    /// (`outbox retry`). `Err` holds the reason when not.
    pub fn check_retry(self) -> Result<(), &'static str> {
        match self {
            EnvelopeStatus::Queued | EnvelopeStatus::Failed | EnvelopeStatus::Cancelled => Ok(()),
            EnvelopeStatus::Delivered => Err("it was already delivered upstream; nothing to retry"),
            EnvelopeStatus::Conflict => Err(
                "conflict envelopes are kept for review and never resent; resolve the conflict \
                 centrally, then cancel the envelope",
            ),
        }
    }

    /// Whether an operator may cancel an envelope in this status. `Err` holds the reason when not.
    pub fn check_cancel(self) -> Result<(), &'static str> {
        match self {
            EnvelopeStatus::Queued | EnvelopeStatus::Failed | EnvelopeStatus::Conflict => Ok(()),
            EnvelopeStatus::Delivered => {
                Err("it was already delivered upstream; a delivered envelope cannot be cancelled")
            }
            EnvelopeStatus::Cancelled => Err("it is already cancelled"),
        }
    }
}

impl std::fmt::Display for EnvelopeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Non-secret facts about where a queued write came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceMeta {
    /// The client's socket address as the relay saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_addr: Option<String>,
    /// The client's User-Agent (at most 200 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The host the relay runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_host: Option<String>,
    /// Why the write was queued instead of forwarded (connect error, timeout, HTTP 503, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_because: Option<String>,
}

/// A scrubbed write ready to be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewEnvelope {
    pub id: String,
    pub idempotency_key: String,
    pub method: String,
    /// Path and (scrubbed) query string, as sent upstream.
    pub path: String,
    pub resource_path: String,
    pub route_class: RouteClass,
    pub route_pattern: String,
    /// Scrubbed JSON body, `None` when the request had no body.
    pub body: Option<String>,
    /// Allow-listed headers ([`scrub::STORED_HEADERS`]), lowercase names.
    pub headers: BTreeMap<String, String>,
    /// SHA-256 (hex) over method, path and stored body: two requests with the same key are the same
    /// request when these agree.
    pub request_hash: String,
    pub source: SourceMeta,
}

/// One stored envelope (the non-secret outbox contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Creation order (1, 2, 3, ...).
    pub seq: i64,
    /// The write as it was queued (serialised inline, before the delivery state).
    #[serde(flatten)]
    pub request: NewEnvelope,
    pub status: EnvelopeStatus,
    pub attempt_count: u32,
    /// When a queued envelope is next due (RFC 3339 UTC).
    pub next_retry_at: String,
    pub last_error: Option<String>,
    pub response_status: Option<u16>,
    /// The upstream's response body: scrubbed, at most [`MAX_SUMMARY_BYTES`].
    pub response_summary: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// When the upstream acknowledged it with a 2xx.
    pub acked_at: Option<String>,
}

impl Envelope {
    /// Whether an operator may queue this envelope again (`outbox retry`): its status allows it
    /// ([`EnvelopeStatus::check_retry`]) and it is not a conflict that was cancelled after review
    /// (a conflict is never resent, also not by way of cancel and retry). `Err` holds the reason.
    pub fn check_retry(&self) -> Result<(), &'static str> {
        self.status.check_retry()?;
        let was_conflict = self
            .response_status
            .is_some_and(|c| status_for_response(c) == EnvelopeStatus::Conflict);
        if self.status == EnvelopeStatus::Cancelled && was_conflict {
            return Err(
                "it was cancelled after the upstream answered it with a conflict (409/422); \
                 conflict envelopes are never resent: send a new request if one is still needed",
            );
        }
        Ok(())
    }

    /// Whether an operator may cancel this envelope (`outbox cancel`). `Err` holds the reason.
    pub fn check_cancel(&self) -> Result<(), &'static str> {
        self.status.check_cancel()
    }
}

/// The status an upstream HTTP answer moves a queued envelope to: 2xx delivered, 409/422 conflict,
/// other 4xx failed, 5xx stays queued; 1xx/3xx (unexpected: redirects are not followed) failed.
pub fn status_for_response(code: u16) -> EnvelopeStatus {
    match code {
        200..=299 => EnvelopeStatus::Delivered,
        409 | 422 => EnvelopeStatus::Conflict,
        500..=599 => EnvelopeStatus::Queued,
        _ => EnvelopeStatus::Failed,
    }
}

/// The answer the relay gives for a queued write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub queued: bool,
    pub envelope_id: String,
    pub idempotency_key: String,
    pub route_class: String,
    pub status: String,
}

impl Receipt {
    /// The receipt for a queued envelope.
    pub fn queued(id: &str, key: &str, class: RouteClass) -> Receipt {
        Receipt {
            queued: true,
            envelope_id: id.to_string(),
            idempotency_key: key.to_string(),
            route_class: class.as_str().to_string(),
            status: EnvelopeStatus::Queued.as_str().to_string(),
        }
    }
}

/// A request the relay could not forward, as the intake rule sees it.
#[derive(Debug, Clone)]
pub struct IncomingWrite<'a> {
    pub method: &'a str,
    pub path_and_query: &'a str,
    /// Every request header (name, value as text).
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// The Idempotency-Key the relay attached when it tried to forward (the client's or a new one).
    pub idempotency_key: &'a str,
    pub source: SourceMeta,
}

/// Why a request cannot be queued; the relay answers it with `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    /// Machine-readable reason: `online-only`, `credentials`, `too-large`, `not-json`,
    /// `too-deep`, `repeated-key`, `empty-json-body`.
    pub code: &'static str,
    pub route_class: RouteClass,
    pub message: String,
}

/// Whether a request method is a write (gets an Idempotency-Key).
pub fn is_write_method(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH" | "DELETE")
}

/// Whether an upstream answer counts as "unreachable" for the route table (502, 503, 504).
pub fn is_outage_status(status: u16) -> bool {
    matches!(status, 502..=504)
}

/// The intake rule applied while the upstream is unreachable: credential-bearing requests and
/// online-only routes are refused with 503, bodies over 64 KiB with 413, non-JSON bodies and bodies
/// nested deeper than [`scrub::MAX_JSON_DEPTH`] with 503, a repeated key with 400;
/// anything else becomes a scrubbed [`NewEnvelope`] with a fresh envelope id.
pub fn intake(req: &IncomingWrite<'_>) -> Result<NewEnvelope, Refusal> {
    let route = classify(req.method, req.path_and_query);
    let refuse = |status, code, message: String| Refusal {
        status,
        code,
        route_class: route.class,
        message,
    };
    if let Some((name, _)) = req
        .headers
        .iter()
        .find(|(n, _)| scrub::is_credential_header(n))
    {
        return Err(refuse(
            503,
            "credentials",
            format!(
                "upstream unavailable; requests carrying credentials ({name} header) are never \
                 queued; retry when the upstream is back"
            ),
        ));
    }
    if !route.class.is_queueable() {
        return Err(refuse(
            503,
            "online-only",
            format!(
                "upstream unavailable; {} {} is online-only (route class online-only); retry when \
                 the upstream is back",
                req.method,
                super::routes::path_only(req.path_and_query)
            ),
        ));
    }
    if req.body.len() > MAX_BODY_BYTES {
        return Err(refuse(
            413,
            "too-large",
            format!(
                "body of {} bytes is over the outbox limit of {MAX_BODY_BYTES} bytes (64 KiB); \
                 nothing was queued",
                req.body.len()
            ),
        ));
    }
    let declares_json = req.headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("content-type") && {
            let v = v.to_ascii_lowercase();
            let media = v.split(';').next().unwrap_or("").trim().to_string();
            media == "application/json" || media.ends_with("+json")
        }
    });
    let empty = req.body.iter().all(|b| b.is_ascii_whitespace());
    if empty && declares_json {
        return Err(refuse(
            400,
            "empty-json-body",
            "the request declares a JSON body (Content-Type) but sends none; nothing was queued"
                .into(),
        ));
    }
    let body = if empty {
        None
    } else {
        let text = std::str::from_utf8(req.body).map_err(|_| {
            refuse(
                503,
                "not-json",
                "upstream unavailable; only JSON bodies can be queued and this body is not UTF-8"
                    .into(),
            )
        })?;
        let (scrubbed, _) = scrub::scrub_json_text(text).map_err(|e| match e {
            scrub::ScrubError::RepeatedKey(_) => refuse(
                400,
                "repeated-key",
                format!("{e}; send each key once per object. Nothing was queued"),
            ),
            scrub::ScrubError::TooDeep(_) => refuse(
                503,
                "too-deep",
                format!(
                    "upstream unavailable; this body cannot be queued ({e}); nothing was queued"
                ),
            ),
            scrub::ScrubError::NotJson(_) => refuse(
                503,
                "not-json",
                format!("upstream unavailable; only JSON bodies can be queued ({e})"),
            ),
        })?;
        Some(scrubbed)
    };
    let (path, _) = scrub::scrub_query(req.path_and_query);
    let headers: BTreeMap<String, String> = req
        .headers
        .iter()
        .filter(|(n, _)| scrub::STORED_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    let request_hash = request_hash(req.method, &path, body.as_deref());
    Ok(NewEnvelope {
        id: uuid::Uuid::new_v4().to_string(),
        idempotency_key: req.idempotency_key.to_string(),
        method: req.method.to_string(),
        path,
        resource_path: route.resource_path,
        route_class: route.class,
        route_pattern: route.pattern.unwrap_or_default().to_string(),
        body,
        headers,
        request_hash,
        source: req.source.clone(),
    })
}

/// SHA-256 (hex) over method, path and body, each length-prefixed.
pub fn request_hash(method: &str, path: &str, body: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in [method, path, body.unwrap_or("")] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// `s` cut to at most `max` bytes on a character boundary (with `…` when cut).
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A bounded, scrubbed summary of an upstream response body: `body` is what was read of it (at
/// most [`MAX_RESPONSE_READ`] bytes), `complete` whether that was all of it. JSON is scrubbed as a
/// stored request body is; JSON that cannot be scrubbed (cut short, too deep, invalid) is not kept
/// ([`scrub::scrub_response_text`]).
pub fn response_summary(body: &[u8], complete: bool) -> String {
    let text = String::from_utf8_lossy(body);
    truncate(
        &scrub::scrub_response_text(&text, complete),
        MAX_SUMMARY_BYTES,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write<'a>(
        method: &'a str,
        path: &'a str,
        headers: &'a [(String, String)],
        body: &'a [u8],
    ) -> IncomingWrite<'a> {
        IncomingWrite {
            method,
            path_and_query: path,
            headers,
            body,
            idempotency_key: "k-1",
            source: SourceMeta::default(),
        }
    }

    #[test]
    fn transitions() {
        use EnvelopeStatus::*;
        assert!(Delivered.check_cancel().is_err());
        assert!(Cancelled.check_cancel().is_err());
        assert!(Queued.check_cancel().is_ok());
        assert!(Conflict.check_cancel().is_ok());
        assert!(Failed.check_cancel().is_ok());
        assert!(Delivered.check_retry().is_err());
        assert!(Conflict.check_retry().is_err());
        assert!(Failed.check_retry().is_ok());
        assert!(Cancelled.check_retry().is_ok());
        for s in EnvelopeStatus::ALL {
            assert_eq!(EnvelopeStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn intake_refuses_and_scrubs() {
        let h = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("User-Agent".to_string(), "agent".to_string()),
        ];
        let env = intake(&write(
            "PATCH",
            "/tasks/9?token=1&password=x",
            &h,
            br#"{"status":"done","password":"hunter2"}"#,
        ))
        .unwrap();
        assert_eq!(env.route_class, RouteClass::ReplaceStyle);
        assert_eq!(env.resource_path, "/tasks/9");
        assert!(!env.body.as_deref().unwrap().contains("hunter2"));
        assert!(!env.path.contains("=x"));
        assert_eq!(
            env.headers.into_iter().collect::<Vec<_>>(),
            vec![("content-type".to_string(), "application/json".to_string())]
        );

        let e = intake(&write("DELETE", "/tasks/9", &h, b"")).unwrap_err();
        assert_eq!((e.status, e.code), (503, "online-only"));
        let cred = vec![("X-API-Key".to_string(), "abc".to_string())];
        let e = intake(&write("POST", "/progress/", &cred, b"{}")).unwrap_err();
        assert_eq!((e.status, e.code), (503, "credentials"));
        let big = vec![b' '; MAX_BODY_BYTES + 1];
        let e = intake(&write("POST", "/progress/", &h, &big)).unwrap_err();
        assert_eq!((e.status, e.code), (413, "too-large"));
        let e = intake(&write("POST", "/progress/", &h, b"not json")).unwrap_err();
        assert_eq!((e.status, e.code), (503, "not-json"));
        let ok = intake(&write("PATCH", "/messages/m1/read", &[], b"")).unwrap();
        assert_eq!(ok.body, None);
        // Declared JSON but no body: refused, never queued as an empty write.
        let e = intake(&write("PATCH", "/messages/m1/read", &h, b"")).unwrap_err();
        assert_eq!((e.status, e.code), (400, "empty-json-body"));
        let e = intake(&write("POST", "/progress/", &h, br#"{"a":1,"a":2}"#)).unwrap_err();
        assert_eq!((e.status, e.code), (400, "repeated-key"));
    }

    #[test]
    fn summaries_are_bounded_and_scrubbed() {
        let s = response_summary(br#"{"detail":"x","api_key":"zzz"}"#, true);
        assert!(!s.contains("zzz"));
        let long = "é".repeat(5000);
        assert!(response_summary(long.as_bytes(), true).len() <= MAX_SUMMARY_BYTES);
    }
}
