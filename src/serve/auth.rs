//! Access: with a token (`--token-file`), every endpoint but `/healthz` and `/readyz` needs
//! `Authorization: Bearer <token>`, compared in constant time. Without one, serve listens on
//! loopback only (the CLI refuses anything else) and no endpoint that changes state answers.

use super::error::ApiError;
use super::state::ServeState;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Whether `host:port` binds only to this machine.
pub fn is_loopback(addr: &std::net::SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The bearer token of a request, if it carries one.
fn bearer(req: &Request) -> Option<&[u8]> {
    bearer_token(req.headers().get(header::AUTHORIZATION)?.as_bytes())
}

/// Whether the request carries more than one `Authorization` header. Which one counts would be
/// ambiguous (this serve read the first, a proxy in front may check or strip another), so such a
/// request is refused whichever of them holds the token, as a repeated query parameter or JSON key
/// is.
fn repeated_authorization(req: &Request) -> bool {
    req.headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
}

/// The token of an `Authorization` value `Bearer <token>`; the scheme name is case-insensitive
/// (RFC 9110 section 11.1), so `bearer <token>` is the same credential.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"Bearer ").then_some(rest)
}

/// Constant-time comparison of a presented token with the configured one.
pub fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    presented.len() == expected.len() && bool::from(presented.ct_eq(expected))
}

pub async fn require_token(
    State(state): State<Arc<ServeState>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD);
    match &state.options.token {
        Some(_) if repeated_authorization(&req) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "repeated-header",
                "the request carries more than one Authorization header; send exactly one: Authorization: Bearer <token>. Nothing was changed",
            )
            .into_response();
        }
        Some(expected) => {
            let ok = bearer(&req).is_some_and(|t| token_matches(t, expected.as_bytes()));
            if !ok {
                let mut resp = ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "send Authorization: Bearer <token>, the token of serve's --token-file",
                )
                .into_response();
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return resp;
            }
        }
        None if changes_state => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this serve has no token, so nothing that changes state is accepted; start it with --token-file FILE and send that token as a bearer token",
            )
            .into_response();
        }
        None => {}
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches(b"secret-token", b"secret-token"));
        assert!(!token_matches(b"secret-tokeN", b"secret-token"));
        assert!(!token_matches(b"secret", b"secret-token"));
        assert!(!token_matches(b"", b"secret-token"));
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"BEARER abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Basic abcdefgh"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert!(is_loopback(&"127.0.0.1:1".parse().unwrap()));
        assert!(is_loopback(&"[::1]:1".parse().unwrap()));
        assert!(!is_loopback(&"0.0.0.0:1".parse().unwrap()));
    }
}
