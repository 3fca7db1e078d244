//! Query strings: each parameter at most once. `?force=false&force=true` is refused with 400
//! `repeated-parameter` naming it, where a plain `Query<HashMap>` would keep the last value and act
//! on a request the client may not have meant (the same reason JSON bodies refuse a repeated key,
//! [`super::body::StrictJson`]).

use super::error::ApiError;
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::StatusCode;
use std::collections::HashMap;

/// The query's parameters by name, each given once.
pub struct StrictQuery(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for StrictQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("the query string: {}", e.body_text())))?;
        unique(pairs).map(StrictQuery)
    }
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
}
