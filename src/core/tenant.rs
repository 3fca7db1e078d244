//! The tenant id rule (SPEC section 6), one function for enqueue, verify and import.

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// Longest tenant id, in characters.
pub const MAX_TENANT_CHARS: usize = 256;

/// Why a tenant id is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    #[error("a tenant id has 1 to {MAX_TENANT_CHARS} characters, this one has {0}")]
    Length(usize),
    #[error("a tenant id must not contain control or bidirectional-override characters (U+{0:04X} at character {1})")]
    Control(u32, usize),
    #[error("a tenant id must be in Unicode NFC (composed) form, so look-alikes cannot name two tenants")]
    NotNfc,
}

/// Checks a tenant id: 1 to 256 characters, no control characters (Unicode Cc, and the bidirectional
/// formatting characters that reorder what a terminal shows), Unicode NFC.
pub fn validate_tenant_id(tenant: &str) -> Result<(), TenantError> {
    let n = tenant.chars().count();
    if n == 0 || n > MAX_TENANT_CHARS {
        return Err(TenantError::Length(n));
    }
    if let Some((i, c)) = tenant
        .chars()
        .enumerate()
        .find(|(_, c)| is_hidden_control(*c))
    {
        return Err(TenantError::Control(c as u32, i));
    }
    let nfc = match is_nfc_quick(tenant.chars()) {
        IsNormalized::Yes => true,
        IsNormalized::No => false,
        IsNormalized::Maybe => tenant.nfc().eq(tenant.chars()),
    };
    if !nfc {
        return Err(TenantError::NotNfc);
    }
    Ok(())
}

/// Control characters and the bidirectional marks, embeddings, overrides and isolates (the list
/// the terminal escaping uses: [`crate::core::text::is_bidi_control`]).
fn is_hidden_control(c: char) -> bool {
    c.is_control() || crate::core::text::is_bidi_control(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_refuses_what_enqueue_refuses() {
        assert!(validate_tenant_id("acme").is_ok());
        assert!(validate_tenant_id("caf\u{e9}").is_ok());
        assert_eq!(validate_tenant_id("cafe\u{301}"), Err(TenantError::NotNfc));
        assert_eq!(validate_tenant_id(""), Err(TenantError::Length(0)));
        assert_eq!(
            validate_tenant_id(&"t".repeat(300)),
            Err(TenantError::Length(300))
        );
        assert!(validate_tenant_id(&"\u{e9}".repeat(256)).is_ok());
        for bad in [
            "a\0b",
            "a\u{1b}[2J",
            "a\nb",
            "evil\u{202e}gpj",
            "ben\u{61c}ch",
            "a\u{200f}b",
            "a\u{2067}b",
        ] {
            assert!(
                matches!(validate_tenant_id(bad), Err(TenantError::Control(..))),
                "{bad:?}"
            );
        }
    }
}
