//! Job identity (SPEC section 3): UUIDv5 over the canonical payload or an idempotency key.

use uuid::Uuid;

/// uuid5(URL, "urn:airlock:job").
pub const JOB_NAMESPACE: Uuid = Uuid::from_u128(0xb2604c5f_e926_5471_b022_23198169599e);

/// The job id of a canonical payload, or of an idempotency key when one is supplied.
pub fn job_id(canonical_payload: &str, idempotency_key: Option<&str>) -> Uuid {
    match idempotency_key {
        Some(key) => {
            let mut name = Vec::with_capacity(16 + key.len());
            name.extend_from_slice(b"idempotency-key:");
            name.extend_from_slice(key.as_bytes());
            Uuid::new_v5(&JOB_NAMESPACE, &name)
        }
        None => Uuid::new_v5(&JOB_NAMESPACE, canonical_payload.as_bytes()),
    }
}

/// Parses a jobId: a UUID in lowercase hyphenated form only (SPEC section 3; the one rule for jobId
/// text in bundles and stores).
pub fn parse_job_id(s: &str) -> Result<Uuid, String> {
    if let Some(u) = lower_hyphenated(s.as_bytes()) {
        return Ok(u);
    }
    // Not the one accepted form: say what is wrong with it.
    let u = Uuid::parse_str(s).map_err(|e| format!("{s:?} is not a UUID ({e})"))?;
    let mut buf = Uuid::encode_buffer();
    if u.hyphenated().encode_lower(&mut buf) != s {
        return Err(format!("{s:?} is not in lowercase hyphenated form"));
    }
    Ok(u)
}

/// `s` as a UUID when it is exactly 8-4-4-4-12 lowercase hex digits: the `uuid` crate reads 36
/// bytes only in that hyphenated form, and no byte may be an uppercase letter (every bundle entry
/// has a jobId; parsing and then formatting it again to compare cost more).
fn lower_hyphenated(s: &[u8]) -> Option<Uuid> {
    if s.len() != 36 {
        return None;
    }
    // Without an early exit, so the test runs over all 36 bytes at once.
    let upper = s
        .iter()
        .fold(false, |up, &c| up | (c.wrapping_sub(b'A') < 26));
    if upper {
        return None;
    }
    Uuid::try_parse_ascii(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_parse_in_lowercase_hyphenated_form_only() {
        let id = "6f1c2d3e-4a5b-5c6d-8e9f-0a1b2c3d4e5f";
        assert_eq!(parse_job_id(id).unwrap().to_string(), id);
        assert!(parse_job_id(&id.to_uppercase()).is_err());
        assert!(parse_job_id(&format!("{{{id}}}")).is_err());
        assert!(parse_job_id(&id.replace('-', "")).is_err());
        assert!(parse_job_id("not-a-uuid").is_err());
    }

    proptest::proptest! {
        /// The quick path accepts exactly what parsing and formatting again accepts.
        #[test]
        fn the_quick_parse_agrees_with_the_uuid_crate(
            id in proptest::num::u128::ANY,
            at in 0usize..36,
            byte in proptest::num::u8::ANY,
        ) {
            let text = Uuid::from_u128(id).hyphenated().to_string();
            let mut b = text.clone().into_bytes();
            b[at] = byte;
            for t in [text.into_bytes(), b] {
                let Ok(s) = std::str::from_utf8(&t) else { continue };
                let slow = Uuid::parse_str(s)
                    .ok()
                    .filter(|u| u.hyphenated().to_string() == s);
                proptest::prop_assert_eq!(lower_hyphenated(&t), slow);
                proptest::prop_assert_eq!(parse_job_id(s).ok(), slow);
            }
        }
    }

    #[test]
    fn namespace_is_uuid5_of_the_url_namespace() {
        assert_eq!(
            Uuid::new_v5(&Uuid::NAMESPACE_URL, b"urn:airlock:job"),
            JOB_NAMESPACE
        );
    }
}
