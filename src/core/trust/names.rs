//! Names of keys and trusted keys, and the shape of a key id: what `keys generate`, `keys trust add`
//! and `keys trust remove NAME|KEYID` accept.

use super::TrustError;

/// True when `s` has the shape of a key id (64 lowercase hex digits).
pub fn looks_like_key_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks a key or trust-store name: 1 to 64 characters of `[A-Za-z0-9._-]`, starting with a letter
/// or digit, and not shaped like a key id (so `trust remove NAME|KEYID` is never ambiguous).
pub fn validate_name(name: &str) -> Result<(), TrustError> {
    let bad = |reason: &str| {
        Err(TrustError::InvalidName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() || name.len() > 64 {
        return bad("a name has 1 to 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("use only letters, digits, '.', '_' and '-'");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return bad("a name starts with a letter or digit");
    }
    if looks_like_key_id(name) {
        return bad("a name must not look like a key id (64 hex digits)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for ok in ["ops", "site-a.2026", "A_1"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "a b",
            "é",
            &"a".repeat(65),
            &"b".repeat(64),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn key_id_shape() {
        assert!(looks_like_key_id(&"a".repeat(64)));
        assert!(!looks_like_key_id(&"A".repeat(64)));
        assert!(!looks_like_key_id("abc"));
    }
}
