//! Webhook headers and signature (SPEC section 10), and the retry schedule.
//!
//! `X-Stella-Signature: sha256=` + lowercase hex HMAC-SHA256(secret, sentAt + "." + body), where
//! sentAt is this attempt's `X-Stella-Sent-At` value.

use super::event::EVENT_TYPE;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Delays before retries 1..=5, after the previous failure, in seconds.
pub const RETRY_DELAYS_SECONDS: [u64; 5] = [1, 2, 4, 8, 16];
/// One first attempt and up to five retries.
pub const MAX_ATTEMPTS: u32 = 1 + RETRY_DELAYS_SECONDS.len() as u32;

/// The delay after failed attempt number `attempts` (1-based), or `None` when it was the last.
pub fn retry_delay_ms(attempts: u32) -> Option<u64> {
    let i = attempts.checked_sub(1)? as usize;
    RETRY_DELAYS_SECONDS.get(i).map(|s| s * 1000)
}

/// `sha256=` + hex HMAC-SHA256(secret, sent_at + "." + body).
pub fn signature(secret: &[u8], sent_at: &str, body: &str) -> String {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(sent_at.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks a received signature in constant time (for receivers and tests).
pub fn signature_matches(secret: &[u8], sent_at: &str, body: &str, header: &str) -> bool {
    let Some(hex_part) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(given) = hex::decode(hex_part) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(sent_at.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    mac.verify_slice(&given).is_ok()
}

/// The headers of one webhook attempt, in a fixed order (Content-Type first).
pub fn webhook_headers(secret: &[u8], sent_at: &str, body: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "application/json".to_string()),
        ("X-Stella-Event-Type", EVENT_TYPE.to_string()),
        ("X-Stella-Sent-At", sent_at.to_string()),
        ("X-Stella-Signature", signature(secret, sent_at, body)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_signature_match_the_vector() {
        let text = std::fs::read_to_string("../shared/vectors/notify/expected.json").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let w = &v["webhook"];
        let secret = w["secret"].as_str().unwrap().as_bytes();
        let sent_at = w["sentAt"].as_str().unwrap();
        let body = w["body"].as_str().unwrap();
        assert_eq!(body, v["event"]["body"].as_str().unwrap());
        let headers = webhook_headers(secret, sent_at, body);
        for (name, value) in w["headers"].as_object().unwrap() {
            let got = headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            assert_eq!(got.map(String::as_str), value.as_str(), "{name}");
        }
        let sig = signature(secret, sent_at, body);
        assert!(signature_matches(secret, sent_at, body, &sig));
        assert!(!signature_matches(
            secret,
            "2026-01-05T12:00:01.251Z",
            body,
            &sig
        ));
        assert!(!signature_matches(b"other", sent_at, body, &sig));
    }

    #[test]
    fn schedule_matches_the_vector() {
        let text = std::fs::read_to_string("../shared/vectors/notify/expected.json").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let delays: Vec<u64> = v["retryDelaysSeconds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(delays, RETRY_DELAYS_SECONDS);
        assert_eq!(u64::from(MAX_ATTEMPTS), v["maxAttempts"].as_u64().unwrap());
        assert_eq!(retry_delay_ms(1), Some(1000));
        assert_eq!(retry_delay_ms(5), Some(16000));
        assert_eq!(retry_delay_ms(6), None);
        assert_eq!(retry_delay_ms(0), None);
    }
}
