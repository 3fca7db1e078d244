//! Scrubbing (SPEC section 9): secret-looking JSON fields, query parameters and headers never reach
//! the outbox.

use serde_json::value::RawValue;
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

/// How many rounds of percent-decoding a query parameter name gets: a name encoded twice
/// (`p%2561ssword`) or more is decoded as a server that decodes again would see it.
const DECODE_ROUNDS: usize = 8;

/// Whether a query parameter name names a secret: after full percent-decoding, the name itself or
/// any of its bracketed parts (`user[password]`, `a[b][apiKey]`). Where SPEC 9 leaves it open the
/// rule leans to redaction: the name is decoded again while that changes it (a double-encoded
/// `p%2561ssword` is a password too), and a secret at any of those rounds counts.
pub fn is_secret_query_name(name: &str) -> bool {
    let secret = |decoded: &str| {
        decoded
            .split(['[', ']'])
            .filter(|part| !part.is_empty())
            .any(is_secret_key)
            || is_secret_key(decoded)
    };
    let mut current = name.to_string();
    for _ in 0..DECODE_ROUNDS {
        let decoded = percent_decode(&current);
        if secret(&decoded) {
            return true;
        }
        if decoded == current {
            return false;
        }
        current = decoded;
    }
    false
}

/// Redacts the values of secret query parameters in `path_and_query` (names fully percent-decoded,
/// bracketed parts checked). Parameters are separated by `&` and, as some servers read them, by
/// `;` too, so `a=1;password=x` has its password redacted whichever way the upstream splits it.
/// Returns the new text and how many values were replaced.
pub fn scrub_query(path_and_query: &str) -> (String, usize) {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return (path_and_query.to_string(), 0);
    };
    let mut n = 0;
    let mut out = String::with_capacity(path_and_query.len() + 16);
    out.push_str(path);
    out.push('?');
    let mut rest = query;
    loop {
        let end = rest.find(['&', ';']).unwrap_or(rest.len());
        let pair = &rest[..end];
        let (name, _) = pair.split_once('=').unwrap_or((pair, ""));
        if is_secret_query_name(name) {
            n += 1;
            out.push_str(name);
            out.push_str("=%5Bredacted%5D");
        } else {
            out.push_str(pair);
        }
        if end == rest.len() {
            break;
        }
        out.push_str(&rest[end..end + 1]);
        rest = &rest[end + 1..];
    }
    (out, n)
}

/// The deepest nesting of objects and arrays a stored body may have (serde_json's own limit for a
/// parsed value). Deeper bodies are refused before they can exhaust the stack.
pub const MAX_JSON_DEPTH: usize = 128;

/// Why a JSON body cannot be scrubbed.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the key {0} is repeated in one object, so what would be stored is ambiguous")]
    RepeatedKey(String),
    #[error("objects and arrays are nested deeper than {MAX_JSON_DEPTH} levels (at {0})")]
    TooDeep(String),
}

/// Scrubs a JSON text and returns the text to store: always the re-serialised scrubbed value, never
/// the raw text (SPEC section 9). A key repeated in one object is refused: a last-wins parse would
/// scrub one copy and a raw copy could keep the other.
///
/// Re-serialised compactly with each object's keys in byte order and strings' escapes decoded, but
/// every number exactly as the client wrote it: parsed into a float, `123456789012345678901234567890`
/// would be replayed as `1.2345678901234568e29` and `0.30000000000000000001` as `0.3` (a queued write
/// must not change what it says), and `1e400` would not be JSON at all.
///
/// Nesting deeper than [`MAX_JSON_DEPTH`] is refused ([`ScrubError::TooDeep`]), and a secret key's
/// value is checked like the rest (a repeated key inside it is refused too) before it is replaced.
pub fn scrub_json_text(text: &str) -> Result<(String, usize), ScrubError> {
    let raw: &RawValue = serde_json::from_str(text)?;
    let mut out = String::with_capacity(text.len());
    let n = write_scrubbed(raw, "$", 1, &mut out)?;
    Ok((out, n))
}

/// What to keep of an upstream's response body (`text`, the first bytes the replay read;
/// `complete` false when the body went on past them): a JSON body as [`scrub_json_text`] stores
/// it (a repeated key: every copy of a secret key redacted); a body that starts like JSON but
/// cannot be scrubbed (cut short, too deep, not valid) is not kept, since a secret in it could not
/// be found; any other text as it is.
pub fn scrub_response_text(text: &str, complete: bool) -> String {
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let json_like = matches!(
        trimmed.as_bytes().first(),
        Some(&OPEN_OBJECT | &OPEN_ARRAY | &QUOTE)
    );
    if !json_like {
        return text.to_string();
    }
    if complete {
        match scrub_json_text(text) {
            Ok((out, _)) => return out,
            Err(ScrubError::RepeatedKey(_)) => {
                // A last-wins parse keeps one copy of each key, and that copy is scrubbed.
                if let Ok(mut v) = serde_json::from_str::<Value>(text) {
                    scrub_json(&mut v);
                    if let Ok(out) = serde_json::to_string(&v) {
                        return out;
                    }
                }
            }
            Err(_) => {}
        }
    }
    format!(
        "(a JSON-like response body of {}{} bytes that could not be scrubbed; not kept)",
        if complete { "" } else { "more than " },
        text.len()
    )
}

/// The first byte of an object, an array and a string (named in ASCII: brackets in literals
/// confuse line-based tools that count them).
const OPEN_OBJECT: u8 = 0x7b;
const OPEN_ARRAY: u8 = 0x5b;
const QUOTE: u8 = 0x22;

/// Writes `raw` (at JSON path `path`, nesting level `depth`) compactly to `out` with every secret
/// key's value replaced; numbers keep their text. Returns how many values were replaced. Each level
/// is parsed once more (bodies are at most 64 KiB and at most [`MAX_JSON_DEPTH`] levels deep: the
/// raw-value parse does not limit nesting, so this recursion does).
fn write_scrubbed(
    raw: &RawValue,
    path: &str,
    depth: usize,
    out: &mut String,
) -> Result<usize, ScrubError> {
    let text = raw.get();
    let opens = matches!(text.as_bytes().first(), Some(&OPEN_OBJECT | &OPEN_ARRAY));
    if opens && depth > MAX_JSON_DEPTH {
        return Err(ScrubError::TooDeep(path.to_string()));
    }
    match text.as_bytes().first().copied() {
        Some(OPEN_OBJECT) => {
            let Members(mut members) = serde_json::from_str(text)?;
            members.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(w) = members.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(ScrubError::RepeatedKey(format!("{path}.{}", w[0].0)));
            }
            let mut n = 0;
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k)?);
                out.push(':');
                let at = format!("{path}.{k}");
                if is_secret_key(k) {
                    // Checked like any other value (repeated keys, depth), then replaced.
                    write_scrubbed(v, &at, depth + 1, &mut String::new())?;
                    out.push_str(&serde_json::to_string(REDACTED)?);
                    n += 1;
                } else {
                    n += write_scrubbed(v, &at, depth + 1, out)?;
                }
            }
            out.push('}');
            Ok(n)
        }
        Some(OPEN_ARRAY) => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            let mut n = 0;
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                n += write_scrubbed(v, &format!("{path}[{i}]"), depth + 1, out)?;
            }
            out.push(']');
            Ok(n)
        }
        Some(QUOTE) => {
            let s: String = serde_json::from_str(text)?;
            out.push_str(&serde_json::to_string(&s)?);
            Ok(0)
        }
        // A number (its text as written: serde_json checked its grammar), true, false or null.
        _ => {
            out.push_str(text);
            Ok(0)
        }
    }
}

/// An object's members in document order, repeats kept (a map would keep only one of them).
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(member);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
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

    /// The stored text is the compact scrubbed value with keys in byte order and escapes
    /// decoded, as a parse-and-print would give, except that every number keeps its text.
    #[test]
    fn stored_bodies_keep_every_number_as_written() {
        let (out, n) = scrub_json_text(
            " {\"z\": -0, \"big\": 123456789012345678901234567890, \"pi\": 3.14159265358979323846264,\n \"e\": 1E2, \"huge\": 1e400, \"a\": [true, null, \"x\\u0041\", {\"apiKey\": 7}], \"session_token\": 5 } ",
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"a":[true,null,"xA",{"apiKey":"[redacted]"}],"big":123456789012345678901234567890,"e":1E2,"huge":1e400,"pi":3.14159265358979323846264,"session_token":"[redacted]","z":-0}"#
        );
        assert_eq!(n, 2);
        // An ordinary body comes out as serde_json's own compact print of it.
        let body = r#"{"b": {"y": [1, 2.5, -3], "x": "\u00e9\n"}, "a": "ok", "password": "p"}"#;
        let mut v: Value = serde_json::from_str(body).unwrap();
        scrub_json(&mut v);
        assert_eq!(
            scrub_json_text(body).unwrap().0,
            serde_json::to_string(&v).unwrap()
        );
        // Not JSON is still refused.
        for bad in ["{\"a\":01}", "{\"a\":1.}", "[1,]", "{\"a\":NaN}", ""] {
            assert!(scrub_json_text(bad).is_err(), "{bad}");
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
    fn nesting_is_bounded_and_secret_values_are_checked_before_they_are_replaced() {
        let deep = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
        assert!(scrub_json_text(&deep(MAX_JSON_DEPTH)).is_ok());
        for text in [
            deep(MAX_JSON_DEPTH + 1),
            deep(100_000),
            format!("{{\"token\":{}}}", deep(100_000)),
        ] {
            assert!(matches!(
                scrub_json_text(&text),
                Err(ScrubError::TooDeep(_))
            ));
        }
        let err = scrub_json_text(r#"{"token":{"a":1,"a":2}}"#).unwrap_err();
        assert!(err.to_string().contains("$.token.a"), "{err}");
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
    fn doubly_encoded_names_and_semicolon_separators_are_redacted_too() {
        let (q, n) = scrub_query("/t?p%2561ssword=a&api%25255Fkey=b&x=1;token=c;y=2&%25=d&q=%");
        assert_eq!(n, 3, "{q}");
        assert_eq!(
            q,
            "/t?p%2561ssword=%5Bredacted%5D&api%25255Fkey=%5Bredacted%5D&x=1;token=%5Bredacted%5D;y=2&%25=d&q=%"
        );
        // Nothing secret: the text is kept exactly, separators included.
        let plain = "/t?a=1;b=2&&c;d=";
        assert_eq!(scrub_query(plain), (plain.to_string(), 0));
        assert!(!is_secret_query_name("p%252561ss"));
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
