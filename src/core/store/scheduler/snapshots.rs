//! Batch snapshots: the stored rows and their signed statements (taken by
//! [`crate::core::store::rules::snapshot_now`] and the appender).

use super::SNAPSHOT_PAYLOAD_TYPE;
use serde::{Deserialize, Serialize};

/// A batch snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub id: i64,
    pub tenant_id: String,
    pub snapshot_hlc: String,
    pub from_chain_link: String,
    pub to_chain_link: String,
    /// Chain position of the first covered entry.
    pub from_seq: u64,
    pub entry_count: u64,
    pub merkle_root: String,
    /// The DSSE envelope (JSON) when signed.
    pub dsse_envelope: Option<serde_json::Value>,
    pub created_at: String,
}

impl Snapshot {
    /// The statement a signature covers: JCS of the six keys of SPEC section 8.
    pub fn statement(&self) -> String {
        snapshot_statement(
            &self.tenant_id,
            &self.snapshot_hlc,
            &self.from_chain_link,
            &self.to_chain_link,
            self.entry_count,
            &self.merkle_root,
        )
    }

    pub fn covers(&self, seq: u64) -> bool {
        seq >= self.from_seq && seq - self.from_seq < self.entry_count
    }
}

/// Checks a snapshot's DSSE envelope: its statement must be this snapshot's, its signature by a
/// trusted key. `Absent` when the snapshot is unsigned (it has no envelope); an envelope that is
/// malformed, `"signatures": []` included ([`DsseEnvelope::from_signed_json`]), is `Invalid`.
/// Every surface checks snapshot signatures with this one function: `chain verify-proof`
/// ([`super::check_proof`]), `chain verify` and the console.
///
/// [`DsseEnvelope::from_signed_json`]: crate::core::trust::DsseEnvelope::from_signed_json
pub fn check_snapshot_signature(
    s: &Snapshot,
    trust: &crate::core::trust::TrustSet,
) -> crate::core::trust::SignatureCheck {
    use crate::core::trust::{DsseEnvelope, SignatureCheck};
    let Some(env) = &s.dsse_envelope else {
        return SignatureCheck::Absent;
    };
    let env = match DsseEnvelope::from_signed_json(env) {
        Ok(e) => e,
        Err(reason) => {
            return SignatureCheck::Invalid {
                key_id: String::new(),
                reason,
            }
        }
    };
    let key_id = env
        .signatures
        .first()
        .map(|x| x.keyid.clone())
        .unwrap_or_default();
    if env.payload_type != SNAPSHOT_PAYLOAD_TYPE {
        return SignatureCheck::Invalid {
            key_id,
            reason: format!(
                "payloadType is {:?}, not {SNAPSHOT_PAYLOAD_TYPE}",
                env.payload_type
            ),
        };
    }
    if env.statement().ok().as_deref() != Some(s.statement().as_str()) {
        return SignatureCheck::Invalid {
            key_id,
            reason: "the signed statement is not this snapshot's".into(),
        };
    }
    env.check(trust)
}

/// JCS of `{entryCount, fromChainLink, merkleRoot, snapshotHlc, tenantId, toChainLink}`.
pub fn snapshot_statement(
    tenant: &str,
    snapshot_hlc: &str,
    from: &str,
    to: &str,
    count: u64,
    root: &str,
) -> String {
    let v = serde_json::json!({
        "tenantId": tenant,
        "snapshotHlc": snapshot_hlc,
        "fromChainLink": from,
        "toChainLink": to,
        "entryCount": count,
        "merkleRoot": root,
    });
    crate::core::canonical::canonical_text(&v).expect("plain strings and integers canonicalise")
}

/// Signs a snapshot statement: receives (payloadType, statement bytes), returns the DSSE envelope.
pub type SnapshotSigner<'a> = &'a (dyn Fn(&str, &[u8]) -> Result<serde_json::Value, String> + Sync);
