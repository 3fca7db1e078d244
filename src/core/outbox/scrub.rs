//! Scrubbing (SPEC section 9): secret-looking JSON fields, query parameters and headers never reach
//! the outbox.

use serde_json::Value;

/// The replacement for every secret value.
pub const REDACTED: &str = "[redacted]";

/// Normalised key names (lowercase, `-` replaced by `_`) whose values are secrets.
pub const SECRET_KEYS: &[&str] = &[
    "authorization",
    "cookie",
    "set_cookie",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "access_token",
    "refresh_token",
    "bearer_token",
    "client_secret",
    "private_key",
    "credential",
    "credentials",
];

/// Request headers stored with an envelope and resent on replay. Every other header is dropped.
pub const STORED_HEADERS: &[&str] = &["content-type", "accept"];

/// `key` lowercased with `-` replaced by `_`.
pub fn normalise_key(key: &str) -> String {
    key.to_lowercase().replace('-', "_")
}

/// Whether a JSON key (or query parameter name) names a secret, per SPEC section 9.
pub fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.contains(&normalise_key(key).as_str())
}

/// Whether a request header carries credentials; such a request is never queued. This covers the
/// secret key names (Authorization, Cookie, ...) and API-key or token headers such as `X-API-Key`,
/// `Api-Key`, `X-Auth-Token` and `Proxy-Authorization`.
pub fn is_credential_header(name: &str) -> bool {
    let n = normalise_key(name);
    is_secret_key(&n)
        || matches!(n.as_str(), "proxy_authorization" | "x_auth" | "x_api_token")
        || n.ends_with("_api_key")
        || n.ends_with("_apikey")
        || n.ends_with("_token")
        || n.ends_with("_secret")
        || n.starts_with("x_auth_")
}

/// Replaces, recursively through objects and arrays, the value of every secret key by
/// `"[redacted]"`. Returns how many values were replaced.
pub fn scrub_json(value: &mut Value) -> usize {
    match value {
        Value::Object(map) => {
            let mut n = 0;
            for (k, v) in map.iter_mut() {
                if is_secret_key(k) {
                    *v = Value::String(REDACTED.to_string());
                    n += 1;
                } else {
                    n += scrub_json(v);
                }
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(scrub_json).sum(),
        _ => 0,
    }
}

/// Redacts the values of secret query parameters in `path_and_query` (names are compared as written
/// and with `%2D`/`%5F` decoded). Returns the new text and how many values were replaced.
pub fn scrub_query(path_and_query: &str) -> (String, usize) {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return (path_and_query.to_string(), 0);
    };
    let mut n = 0;
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (name, _) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = name
                .replace("%2D", "-")
                .replace("%2d", "-")
                .replace("%5F", "_");
            if is_secret_key(name) || is_secret_key(&decoded) {
                n += 1;
                format!("{name}=%5Bredacted%5D")
            } else {
                pair.to_string()
            }
        })
        .collect();
    (format!("{path}?{}", parts.join("&")), n)
}

/// Scrubs a JSON text; returns the text to store. When nothing was redacted the original text is
/// kept byte for byte, so a replay sends exactly what the client sent.
pub fn scrub_json_text(text: &str) -> Result<(String, usize), serde_json::Error> {
    let mut v: Value = serde_json::from_str(text)?;
    let n = scrub_json(&mut v);
    if n == 0 {
        Ok((text.to_string(), 0))
    } else {
        Ok((serde_json::to_string(&v)?, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_secret_name_in_any_case_and_separator_is_redacted() {
        for k in SECRET_KEYS {
            for variant in [
                k.to_string(),
                k.to_uppercase(),
                k.replace('_', "-"),
                k.replace('_', "-").to_uppercase(),
            ] {
                let mut v = json!({ "outer": [ { variant.clone(): "s3cr3t" }, 1 ], variant.clone(): {"a": 1} });
                assert_eq!(scrub_json(&mut v), 2, "{variant}");
                assert_eq!(v["outer"][0][&variant], REDACTED);
                assert_eq!(v[&variant], REDACTED);
            }
        }
    }

    #[test]
    fn other_keys_are_kept() {
        let mut v =
            json!({"token_count": 5, "secretary": "x", "keys": ["password"], "passwords_ok": true});
        let before = v.clone();
        assert_eq!(scrub_json(&mut v), 0);
        assert_eq!(v, before);
        let (t, n) = scrub_json_text("{ \"b\": 1,  \"a\": 2 }").unwrap();
        assert_eq!((t.as_str(), n), ("{ \"b\": 1,  \"a\": 2 }", 0));
    }

    #[test]
    fn credential_headers() {
        for h in [
            "Authorization",
            "Cookie",
            "X-API-Key",
            "Api-Key",
            "apikey",
            "X-Auth-Token",
            "Proxy-Authorization",
            "X-Access-Token",
            "Client-Secret",
        ] {
            assert!(is_credential_header(h), "{h}");
        }
        for h in [
            "Content-Type",
            "Idempotency-Key",
            "Accept",
            "User-Agent",
            "X-Request-Id",
        ] {
            assert!(!is_credential_header(h), "{h}");
        }
    }

    #[test]
    fn query_secrets_are_redacted() {
        let (q, n) = scrub_query("/tasks/1?api-key=abc&x=1&Password=p");
        assert_eq!(n, 2);
        assert_eq!(
            q,
            "/tasks/1?api-key=%5Bredacted%5D&x=1&Password=%5Bredacted%5D"
        );
        assert_eq!(scrub_query("/tasks/1").0, "/tasks/1");
    }
}
