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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_is_uuid5_of_the_url_namespace() {
        assert_eq!(
            Uuid::new_v5(&Uuid::NAMESPACE_URL, b"urn:airlock:job"),
            JOB_NAMESPACE
        );
    }
}
