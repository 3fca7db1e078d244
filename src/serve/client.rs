//! What the HTTP clients of a serve (`jobs push`, `ledger diff|sync --peer`) share: the cap on an
//! answer's size, the connect timeout and errors that say what happened.

use crate::core::text::error_chain;
use std::time::Duration;

/// Largest answer read from a serve (a ledger frame exchange carries up to 65 536 frames; an import
/// report is far smaller). More is refused, read no further than the limit.
pub const ANSWER_LIMIT: u64 = 256 << 20;

/// How long to wait for a serve to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an answer could not be read.
#[derive(Debug)]
pub enum AnswerError {
    /// More than the limit (in bytes).
    TooLarge(u64),
    /// The connection failed (or timed out) while reading.
    Io(std::io::Error),
}

impl AnswerError {
    /// The read stopped because a timeout passed.
    pub fn is_timeout(&self) -> bool {
        let AnswerError::Io(e) = self else {
            return false;
        };
        e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
                .is_some_and(reqwest::Error::is_timeout)
    }
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::TooLarge(limit) => write!(f, "response larger than {limit} bytes"),
            AnswerError::Io(e) => f.write_str(&error_chain(e)),
        }
    }
}

/// Reads an answer body, at most `limit` bytes (the capped reader of [`crate::core::file_input`]).
pub fn read_answer(body: impl std::io::Read, limit: u64) -> Result<Vec<u8>, AnswerError> {
    crate::core::file_input::read_capped(body, limit).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            AnswerError::TooLarge(limit)
        } else {
            AnswerError::Io(e)
        }
    })
}

/// A reqwest error and its causes, without the request URL (the caller names it; reqwest's copy
/// carries the query string).
pub fn request_error(e: reqwest::Error) -> String {
    error_chain(&e.without_url())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_capped_and_errors_name_their_causes() {
        use std::io::Read;
        let big = std::io::repeat(b' ').take(101);
        assert!(matches!(
            read_answer(big, 100),
            Err(AnswerError::TooLarge(100))
        ));
        assert_eq!(read_answer(&b"{}"[..], 100).unwrap(), b"{}");
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(error_chain(&e), "error sending request: connection refused");
    }
}
