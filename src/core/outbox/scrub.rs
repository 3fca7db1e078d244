//! Scrubbing (SPEC section 9): secret-looking JSON fields, query parameters and headers never reach
//! the outbox.

use serde_json::Value;

/// The replacement for every secret value.
pub const REDACTED: &str = "[redacted]";

/// Normalised key names (letters lower-cased, every `-` and `_` removed) whose values are secrets
/// (SPEC section 9). Names ending with one of [`SECRET_SUFFIXES`] are secrets too.
pub const SECRET_KEYS: &[&str] = &[
    "authorization",
    "auth",
    "bearer",
    "cookie",
    "setcookie",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "apikey",
    "xapikey",
    "token",
    "credential",
    "credentials",
    "privatekey",
];

/// Normalised endings that make a name secret (`accessToken`, `client-secret`, `session_token`).
pub const SECRET_SUFFIXES: &[&str] = &["token", "secret", "password", "apikey"];

/// Request headers stored with an envelope and resent on replay. Every other header is dropped.
pub const STORED_HEADERS: &[&str] = &["content-type", "accept"];

/// `key` with its letters lower-cased and every `-` and `_` removed (SPEC section 9).
pub fn normalise_key(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a JSON key (or a decoded query parameter name) names a secret, per SPEC section 9.
pub fn is_secret_key(key: &str) -> bool {
    let n = normalise_key(key);
    SECRET_KEYS.contains(&n.as_str()) || SECRET_SUFFIXES.iter().any(|s| n.ends_with(s))
}

/// Whether a request header carries credentials; such a request is never queued (it would be
/// dropped on replay, so it is refused instead). Besides the secret names, any header whose
/// normalised name mentions authentication, a session, a signature or a cookie counts
/// (`Proxy-Authorization`, `X-Auth-Token`, `X-Session-Id`, `Signature`, `X-API-Key`).
pub fn is_credential_header(name: &str) -> bool {
    let n = normalise_key(name);
    is_secret_key(name)
        || [
            "auth",
            "token",
            "secret",
            "passw",
            "cookie",
            "session",
            "signature",
            "apikey",
            "credential",
            "bearer",
            "privatekey",
        ]
        .iter()
        .any(|part| n.contains(part))
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

/// Full percent-decoding (and `+` as a space) of a query parameter name; invalid escapes are kept.
pub fn percent_decode(name: &str) -> String {
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a query parameter name names a secret: after full percent-decoding, the name itself or
/// any of its bracketed parts (`user[password]`, `a[b][apiKey]`).
pub fn is_secret_query_name(name: &str) -> bool {
    let decoded = percent_decode(name);
    decoded
        .split(['[', ']'])
        .filter(|part| !part.is_empty())
        .any(is_secret_key)
        || is_secret_key(&decoded)
}

/// Redacts the values of secret query parameters in `path_and_query` (names fully percent-decoded,
/// bracketed parts checked). Returns the new text and how many values were replaced.
pub fn scrub_query(path_and_query: &str) -> (String, usize) {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return (path_and_query.to_string(), 0);
    };
    let mut n = 0;
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (name, _) = pair.split_once('=').unwrap_or((pair, ""));
            if is_secret_query_name(name) {
                n += 1;
                format!("{name}=%5Bredacted%5D")
            } else {
                pair.to_string()
            }
        })
        .collect();
    (format!("{path}?{}", parts.join("&")), n)
}

/// Why a JSON body cannot be scrubbed.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the key {0} is repeated in one object, so what would be stored is ambiguous")]
    RepeatedKey(String),
}

/// Scrubs a JSON text and returns the text to store: always the re-serialised scrubbed value, never
/// the raw text (SPEC section 9). A key repeated in one object is refused: a last-wins parse would
/// scrub one copy and a raw copy could keep the other.
pub fn scrub_json_text(text: &str) -> Result<(String, usize), ScrubError> {
    let repeated = crate::core::bundle::dupkeys::repeated_keys(text.as_bytes(), "$")?;
    if let Some(first) = repeated.first() {
        return Err(ScrubError::RepeatedKey(first.clone()));
    }
    let mut v: Value = serde_json::from_str(text)?;
    let n = scrub_json(&mut v);
    Ok((serde_json::to_string(&v)?, n))
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
        assert_eq!((t.as_str(), n), ("{\"a\":2,\"b\":1}", 0));
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
            "Token",
            "Auth",
            "X-Session-Id",
            "Signature",
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
    fn camel_case_suffixes_and_spec_names_are_secret() {
        for k in [
            "accessToken",
            "clientSecret",
            "privateKey",
            "sessionToken",
            "client-secret",
            "session_token",
            "PWD",
            "x_api_key",
            "userPassword",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in ["tokens", "secretary", "keyboard", "author"] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn repeated_keys_are_refused_and_the_stored_text_is_re_serialised() {
        let err = scrub_json_text(r#"{"a":{"password":"x","password":"y"}}"#).unwrap_err();
        assert!(err.to_string().contains("$.a.password"), "{err}");
        let (t, n) = scrub_json_text(r#"{"accessToken": "s", "x" : 1}"#).unwrap();
        assert_eq!(
            (t.as_str(), n),
            (r#"{"accessToken":"[redacted]","x":1}"#, 1)
        );
    }

    #[test]
    fn query_names_are_decoded_and_bracketed_parts_checked() {
        let (q, n) = scrub_query(
            "/t?token=a&p%61ssword=b&api%5fkey=c&user[password]=d&user%5Bpwd%5D=e&ok=f",
        );
        assert_eq!(n, 5, "{q}");
        assert!(q.ends_with("&ok=f"), "{q}");
        for secret in ["=a", "=b", "=c", "=d", "=e"] {
            assert!(!q.contains(secret), "{q}");
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
