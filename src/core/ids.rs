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
    let u = Uuid::parse_str(s).map_err(|e| format!("{s:?} is not a UUID ({e})"))?;
    let mut buf = Uuid::encode_buffer();
    if u.hyphenated().encode_lower(&mut buf) != s {
        return Err(format!("{s:?} is not in lowercase hyphenated form"));
    }
    Ok(u)
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

    #[test]
    fn namespace_is_uuid5_of_the_url_namespace() {
        assert_eq!(
            Uuid::new_v5(&Uuid::NAMESPACE_URL, b"urn:airlock:job"),
            JOB_NAMESPACE
        );
    }
}
