//! RFC 8785 (JCS) canonical JSON text (SPEC section 3).

use serde_json::Value;
use std::io::Write;

/// Why a payload text could not be turned into a canonical payload.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalError {
    #[error("payload is not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("payload cannot be canonicalised: {0}")]
    Unrepresentable(String),
    /// RFC 8785 canonicalises I-JSON (RFC 7493), whose object names are unique: a repeated key
    /// has no canonical form (a last-wins parse would silently drop one of the values).
    #[error("{0}")]
    RepeatedKey(#[from] crate::core::bundle::dupkeys::RepeatedKey),
}

/// The canonical (RFC 8785) text of a JSON value.
pub fn canonical_text(value: &Value) -> Result<String, CanonicalError> {
    serde_json_canonicalizer::to_string(value)
        .map_err(|e| CanonicalError::Unrepresentable(e.to_string()))
}

/// Parses JSON text (any formatting) and returns its canonical text.
/// Nesting deeper than serde_json's recursion limit (128) is refused with a clear error, and so is
/// a key repeated inside one object (at any depth), naming the key and its JSON path.
pub fn canonicalize_text(text: &str) -> Result<String, CanonicalError> {
    let syntax = |e: serde_json::Error| CanonicalError::Syntax {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    };
    let value: Value = serde_json::from_str(text).map_err(syntax)?;
    if let Some(repeat) =
        crate::core::bundle::dupkeys::first_repeated_key(text.as_bytes(), "$").map_err(syntax)?
    {
        return Err(repeat.into());
    }
    canonical_text(&value)
}

/// Checks that `text` is exactly the canonical (RFC 8785) text of a JSON value, as a bundle's
/// `payload` must be; the error says why not and where the text first differs.
pub fn check_canonical(text: &str) -> Result<(), String> {
    let canonical = canonicalize_text(text).map_err(|e| e.to_string())?;
    if canonical == text {
        return Ok(());
    }
    let at = canonical
        .bytes()
        .zip(text.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(canonical.len().min(text.len()));
    Err(format!(
        "is JSON but not its canonical (RFC 8785) text: it differs from the canonical form at byte {at} (repeated keys, key order, spacing or number form)"
    ))
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Writes `s` as an RFC 8785 JSON string literal (quotes included).
/// JCS escapes only `"`, `\` and control characters; everything else is written as UTF-8.
pub fn write_json_string<W: Write>(out: &mut W, s: &str) -> std::io::Result<()> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.write_all(b"\"")?;
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Skip the long runs of bytes that need no escaping.
        match bytes[i..].iter().position(|&b| NEEDS_ESCAPE[b as usize]) {
            None => break,
            Some(p) => i += p,
        }
        let b = bytes[i];
        out.write_all(&bytes[start..i])?;
        match b {
            b'"' => out.write_all(b"\\\"")?,
            b'\\' => out.write_all(b"\\\\")?,
            0x08 => out.write_all(b"\\b")?,
            0x09 => out.write_all(b"\\t")?,
            0x0a => out.write_all(b"\\n")?,
            0x0c => out.write_all(b"\\f")?,
            0x0d => out.write_all(b"\\r")?,
            _ => out.write_all(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ])?,
        }
        i += 1;
        start = i;
    }
    out.write_all(&bytes[start..])?;
    out.write_all(b"\"")
}

/// Bytes JCS escapes: `"`, `\` and the C0 controls.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn string_writer_matches_the_canonicalizer(s in "\\PC*|[\\x00-\\x7f]*") {
            let mut ours = Vec::new();
            write_json_string(&mut ours, &s).unwrap();
            let theirs = canonical_text(&Value::String(s.clone())).unwrap();
            prop_assert_eq!(String::from_utf8(ours).unwrap(), theirs);
        }
    }

    #[test]
    fn deep_nesting_is_a_clear_error_not_a_crash() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let err = canonicalize_text(&deep).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn a_repeated_key_is_refused_naming_the_key_and_its_path() {
        // A last-wins parse would canonicalise {"a":1,"a":2} to {"a":2} and store it as the job.
        for (text, key, path) in [
            (r#"{"a":1,"a":2}"#, "a", "$.a"),
            (r#"{"x":[{"k":{"b":0,"b":0}}]}"#, "b", "$.x[0].k.b"),
        ] {
            match canonicalize_text(text) {
                Err(CanonicalError::RepeatedKey(r)) => {
                    assert_eq!((r.key.as_str(), r.path.as_str()), (key, path), "{text}");
                    let msg = CanonicalError::RepeatedKey(r).to_string();
                    assert!(
                        msg.contains(&format!("\"{key}\"")) && msg.contains(path),
                        "{msg}"
                    );
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(check_canonical(r#"{"a":1,"a":1}"#)
            .unwrap_err()
            .contains("appears twice"));
        // Same key in different objects is fine; syntax errors are still syntax errors.
        assert_eq!(
            canonicalize_text(r#"{"b":{"a":1},"a":[{"a":1},{"a":2}]}"#).unwrap(),
            r#"{"a":[{"a":1},{"a":2}],"b":{"a":1}}"#
        );
        assert!(matches!(
            canonicalize_text(r#"{"a":1,"a":2"#),
            Err(CanonicalError::Syntax { .. })
        ));
    }
}
