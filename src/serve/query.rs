//! Query strings: each parameter at most once, and only the parameters the endpoint reads.
//! `?force=false&force=true` is refused with 400 `repeated-parameter` naming it, where a plain
//! `Query<HashMap>` would keep the last value and act on a request the client may not have meant
//! (the same reason JSON bodies refuse a repeated key, [`super::body::StrictJson`]); a parameter
//! the endpoint does not know (`?dryrun=true` for `dryRun`) is refused with 400
//! `unknown-parameter` ([`StrictQuery::only`]) rather than ignored, so a mistyped switch never
//! runs the request it was meant to change.

use super::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use std::collections::HashMap;

/// The query's parameters by name, each given once.
pub struct StrictQuery(pub HashMap<String, String>);

impl StrictQuery {
    /// Refuses any parameter not in `known` (400 `unknown-parameter`, naming it and the ones the
    /// endpoint takes).
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        let Some(other) = self.0.keys().find(|k| !known.contains(&k.as_str())) else {
            return Ok(());
        };
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown-parameter",
            format!(
                "unknown query parameter {}: this endpoint takes {}. Nothing was changed",
                crate::text::visible(other),
                known.join(", ")
            ),
        ))
    }

    /// A query of `pairs` (tests of the endpoints' parameters).
    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> StrictQuery {
        StrictQuery(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A true/false switch: absent or `false` is false, `true` is true, anything else is 400.
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "query parameter {key}={}: write true or false",
                crate::text::visible(other)
            ))),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for StrictQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let pairs = parse_pairs(parts.uri.query().unwrap_or("")).map_err(|bad| {
            ApiError::bad_request(format!(
                "the query string: {bad} is not UTF-8 once percent-decoded; percent-encode the UTF-8 bytes of each name and value. Nothing was changed"
            ))
        })?;
        unique(pairs).map(StrictQuery)
    }
}

/// The query's `name=value` pairs in one pass, as `application/x-www-form-urlencoded` reads them
/// (split at `&`, then at the first `=`; `+` a space, `%XX` a byte). A pair that is not UTF-8
/// once decoded is the error, shown with its bytes escaped: a lossy parser would turn such bytes
/// into U+FFFD and act on a name or value the client never sent (`file=%ff` and `file=%fe` would
/// both become `file=\u{fffd}`).
fn parse_pairs(query: &str) -> Result<Vec<(String, String)>, String> {
    let text = |raw: &str| String::from_utf8(percent_decoded(raw)).ok();
    query
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            match (text(name), text(value)) {
                (Some(n), Some(v)) => Ok((n, v)),
                _ => Err(crate::text::visible_bytes(&percent_decoded(part))),
            }
        })
        .collect()
}

/// The first parameter (`name=value`, shown with its bytes escaped) that is not UTF-8 once
/// percent-decoded.
#[cfg(test)]
fn not_utf8(query: &str) -> Option<String> {
    parse_pairs(query).err()
}

/// `part` with `+` as a space and each `%XX` as its byte (a `%` not followed by two hex digits is
/// kept as it is, as the query parser keeps it).
fn percent_decoded(part: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(&part.replace('+', " ")).collect()
}

/// The pairs as a map; a name given twice is refused.
fn unique(pairs: Vec<(String, String)>) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        if out.contains_key(&k) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "repeated-parameter",
                format!(
                    "query parameter {} is given more than once; give it once. Nothing was changed",
                    crate::text::visible(&k)
                ),
            ));
        }
        out.insert(k, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_given_twice_is_refused() {
        let p = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let m = unique(p(&[("force", "true"), ("file", "a.json")])).unwrap();
        assert_eq!(m["force"], "true");
        let e = unique(p(&[("force", "false"), ("force", "true")])).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::BAD_REQUEST, "repeated-parameter")
        );
        assert!(e.message.contains("force"), "{}", e.message);
    }

    #[test]
    fn query_bytes_that_are_not_utf8_are_named_not_replaced() {
        assert_eq!(not_utf8("file=a.json&force=true"), None);
        assert_eq!(not_utf8("file=%C3%A9t%C3%A9+1"), None);
        assert_eq!(not_utf8("a=%zz&b=100%"), None);
        assert_eq!(
            not_utf8("force=true&file=%ff").as_deref(),
            Some("file=\\xff")
        );
        assert_eq!(not_utf8("%c3=1").as_deref(), Some("\\xc3=1"));
        assert_eq!(percent_decoded("a+b%2Bc%41"), b"a b+cA");
        // Split before decoding: an encoded `=` or `&` stays in its name or value.
        let pairs = parse_pairs("a=1&&b=x%3Dy%26z&c&d=").unwrap();
        let want = [("a", "1"), ("b", "x=y&z"), ("c", ""), ("d", "")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(pairs, want);
    }

    #[test]
    fn unknown_parameters_and_switches_other_than_true_or_false_are_refused() {
        let q = StrictQuery::of;
        assert!(q(&[("dryRun", "true")]).only(&["dryRun", "force"]).is_ok());
        let e = q(&[("dryrun", "true")])
            .only(&["dryRun", "force"])
            .unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::BAD_REQUEST, "unknown-parameter")
        );
        assert!(e.message.contains("dryrun") && e.message.contains("dryRun, force"));
        // Untrusted names are shown with their control characters visible.
        let e = q(&[("x\u{1b}[31m", "1")]).only(&["force"]).unwrap_err();
        assert!(!e.message.chars().any(crate::text::needs_escape), "{e:?}");
        assert!(!q(&[]).flag("force").unwrap());
        assert!(!q(&[("force", "false")]).flag("force").unwrap());
        assert!(q(&[("force", "true")]).flag("force").unwrap());
        let e = q(&[("force", "yes")]).flag("force").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }
}
