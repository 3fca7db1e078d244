//! Signing batch snapshot statements (SPEC section 8) with one ed25519 key: the body of every
//! `SnapshotSigner` (`chain snapshot --sign`, serve's periodic snapshots and imports, the demo).

use super::dsse::DsseEnvelope;
use ed25519_dalek::SigningKey;

/// Signs `statement` (the snapshot's JCS text, as bytes) under `payload_type` with `key`; returns the
/// DSSE envelope as JSON. A statement that is not UTF-8 is refused (a snapshot statement always is).
pub fn sign_snapshot_statement(
    key: &SigningKey,
    payload_type: &str,
    statement: &[u8],
) -> Result<serde_json::Value, String> {
    let text = std::str::from_utf8(statement)
        .map_err(|e| format!("the snapshot statement is not UTF-8 ({e})"))?;
    Ok(DsseEnvelope::sign(key, payload_type, text).to_json())
}

/// [`sign_snapshot_statement`] with `key` bound: pass `&snapshot_signer(&key)` where a
/// `SnapshotSigner` is taken.
pub fn snapshot_signer(
    key: &SigningKey,
) -> impl Fn(&str, &[u8]) -> Result<serde_json::Value, String> + Sync + '_ {
    move |payload_type, statement| sign_snapshot_statement(key, payload_type, statement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::trust::{SignatureCheck, TrustSet, BATCH_SNAPSHOT_PAYLOAD_TYPE};

    #[test]
    fn a_signed_statement_checks_against_the_key_and_not_another() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let sign = snapshot_signer(&key);
        let env = sign(BATCH_SNAPSHOT_PAYLOAD_TYPE, b"{\"entryCount\":1}").unwrap();
        let env: DsseEnvelope = serde_json::from_value(env).unwrap();
        assert_eq!(env.statement().unwrap(), "{\"entryCount\":1}");
        let mut trust = TrustSet::empty();
        trust.add_key("ops", key.verifying_key(), "test");
        assert!(env.check(&trust).is_valid());
        let mut other = TrustSet::empty();
        other.add_key(
            "x",
            SigningKey::from_bytes(&[8; 32]).verifying_key(),
            "test",
        );
        assert!(!matches!(env.check(&other), SignatureCheck::Valid { .. }));
        assert!(sign(BATCH_SNAPSHOT_PAYLOAD_TYPE, &[0xff]).is_err());
    }
}
