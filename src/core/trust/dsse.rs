//! DSSE (Dead Simple Signing Envelope) over ed25519: the pre-authentication encoding, bundle
//! statements, signing, checking, and the standard envelope JSON (SPEC sections 5 and 8).

use super::keys::key_id;
use super::names::looks_like_key_id;
use super::trust_set::TrustSet;
use crate::core::bundle::{BundleHeader, BUNDLE_PAYLOAD_TYPE};
use crate::core::canonical::write_json_string;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// payloadType of signed scheduler batch snapshots (SPEC section 8).
pub const BATCH_SNAPSHOT_PAYLOAD_TYPE: &str = "application/vnd.airlock.batch-snapshot.v1+json";

/// Outcome of checking a bundle's (or any statement's) signature against trusted keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureCheck {
    /// No signature/signedBy.
    Absent,
    /// Verified with `verify_strict` by a trusted key; `signer` is its trust-store name (or
    /// `--trusted-key <file>` for a key trusted for one run).
    Valid { key_id: String, signer: String },
    /// signedBy is trusted but the signature does not verify, or signature/signedBy are malformed.
    Invalid { key_id: String, reason: String },
    /// signedBy is not among the trusted keys.
    Untrusted { key_id: String },
}

impl SignatureCheck {
    /// The `checks.signature` word of `jobs verify --json`: pass, fail, absent or untrusted.
    pub fn status_word(&self) -> &'static str {
        match self {
            SignatureCheck::Absent => "absent",
            SignatureCheck::Valid { .. } => "pass",
            SignatureCheck::Invalid { .. } => "fail",
            SignatureCheck::Untrusted { .. } => "untrusted",
        }
    }

    pub fn is_valid(&self) -> bool {
        matches!(self, SignatureCheck::Valid { .. })
    }
}

/// DSSE pre-authentication encoding:
/// `"DSSEv1" SP len(type) SP type SP len(body) SP body`, lengths in ASCII decimal (bytes).
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + body.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(body);
    out
}

/// The bundle statement: the JCS serialisation of `bundleId`, `createdAt`, `createdByNodeId`,
/// `manifestDigest` and `tenantId` (in that, the JCS, order), taken from the header.
pub fn bundle_statement(header: &BundleHeader) -> String {
    let fields: [(&str, &str); 5] = [
        ("bundleId", &header.bundle_id),
        ("createdAt", &header.created_at),
        ("createdByNodeId", &header.created_by_node_id),
        ("manifestDigest", &header.manifest_digest),
        ("tenantId", &header.tenant_id),
    ];
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(&mut out, k).expect("writing to a Vec cannot fail");
        out.push(b':');
        write_json_string(&mut out, v).expect("writing to a Vec cannot fail");
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON text of UTF-8 strings is UTF-8")
}

/// Signs `statement` under `payload_type`: returns (base64 signature, key id).
pub fn sign_statement(key: &SigningKey, payload_type: &str, statement: &str) -> (String, String) {
    let sig = key.sign(&pae(payload_type, statement.as_bytes()));
    (B64.encode(sig.to_bytes()), key_id(&key.verifying_key()))
}

/// Signs a bundle header's statement: returns (base64 signature, key id).
pub fn sign_header(key: &SigningKey, header: &BundleHeader) -> (String, String) {
    sign_statement(key, BUNDLE_PAYLOAD_TYPE, &bundle_statement(header))
}

/// Verifies one signature over (payloadType, statement) with one public key (`verify_strict`).
pub fn verify_statement(
    public: &VerifyingKey,
    payload_type: &str,
    statement: &str,
    sig_b64: &str,
) -> Result<(), String> {
    let sig = decode_signature(sig_b64)?;
    public
        .verify_strict(&pae(payload_type, statement.as_bytes()), &sig)
        .map_err(|_| {
            "the signature does not verify for this statement: the signed fields or the logs (via manifestDigest) were changed after signing, or it was made by another key".to_string()
        })
}

fn decode_signature(sig_b64: &str) -> Result<Signature, String> {
    let bytes = B64
        .decode(sig_b64.as_bytes())
        .map_err(|e| format!("signature is not valid base64 ({e})"))?;
    let bytes: [u8; 64] = bytes.as_slice().try_into().map_err(|_| {
        format!(
            "signature must be 64 bytes (ed25519), found {}",
            bytes.len()
        )
    })?;
    Ok(Signature::from_bytes(&bytes))
}

/// Checks a signature over (payloadType, statement) claimed to be by `signed_by` against the
/// trusted keys. Malformed signatures or key ids are `Invalid` whoever claims them.
pub fn check_statement_signature(
    payload_type: &str,
    statement: &str,
    sig_b64: &str,
    signed_by: &str,
    trust: &TrustSet,
) -> SignatureCheck {
    let invalid = |reason: String| SignatureCheck::Invalid {
        key_id: signed_by.to_string(),
        reason,
    };
    if !looks_like_key_id(signed_by) {
        return invalid("signedBy is not a key id (64 lowercase hex digits)".into());
    }
    if let Err(reason) = decode_signature(sig_b64) {
        return invalid(reason);
    }
    let Some((public, name)) = trust.lookup(signed_by) else {
        return SignatureCheck::Untrusted {
            key_id: signed_by.to_string(),
        };
    };
    match verify_statement(public, payload_type, statement, sig_b64) {
        Ok(()) => SignatureCheck::Valid {
            key_id: signed_by.to_string(),
            signer: name.to_string(),
        },
        Err(reason) => invalid(reason),
    }
}

/// Checks a bundle header's `signature`/`signedBy` against the trusted keys.
pub fn check_bundle_signature(header: &BundleHeader, trust: &TrustSet) -> SignatureCheck {
    match (&header.signature, &header.signed_by) {
        (None, None) => SignatureCheck::Absent,
        (Some(_), None) => SignatureCheck::Invalid {
            key_id: String::new(),
            reason: "the bundle has a signature but no signedBy".into(),
        },
        (None, Some(by)) => SignatureCheck::Invalid {
            key_id: by.clone(),
            reason: "the bundle has signedBy but no signature".into(),
        },
        (Some(sig), Some(by)) => check_statement_signature(
            BUNDLE_PAYLOAD_TYPE,
            &bundle_statement(header),
            sig,
            by,
            trust,
        ),
    }
}

/// One signature of a DSSE envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DsseSignature {
    pub keyid: String,
    pub sig: String,
}

/// The standard DSSE envelope: `{"payloadType", "payload" (base64), "signatures": [{"keyid", "sig"}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DsseEnvelope {
    pub payload_type: String,
    pub payload: String,
    pub signatures: Vec<DsseSignature>,
}

impl DsseEnvelope {
    /// Signs `statement` and wraps it in an envelope.
    pub fn sign(key: &SigningKey, payload_type: &str, statement: &str) -> Self {
        let (sig, keyid) = sign_statement(key, payload_type, statement);
        DsseEnvelope {
            payload_type: payload_type.to_string(),
            payload: B64.encode(statement.as_bytes()),
            signatures: vec![DsseSignature { keyid, sig }],
        }
    }

    /// Parses the envelope of a signed statement (a batch snapshot's, SPEC section 8; a bundle's,
    /// section 5): the standard DSSE JSON with at least one signature. An envelope is how a
    /// statement is signed; an unsigned snapshot (or bundle) has no envelope at all, so an envelope
    /// whose `signatures` list is empty is malformed, never "unsigned" (that would let an edit of
    /// the list downgrade a signed snapshot to an unsigned one).
    pub fn from_signed_json(value: &serde_json::Value) -> Result<DsseEnvelope, String> {
        let env =
            DsseEnvelope::deserialize(value).map_err(|e| format!("not a DSSE envelope ({e})"))?;
        env.require_signature()?;
        Ok(env)
    }

    /// Fails when the envelope carries no signature (see [`DsseEnvelope::from_signed_json`]).
    pub fn require_signature(&self) -> Result<(), String> {
        if self.signatures.is_empty() {
            return Err(EMPTY_SIGNATURES.to_string());
        }
        Ok(())
    }

    /// The decoded statement text.
    pub fn statement(&self) -> Result<String, String> {
        let bytes = B64
            .decode(self.payload.as_bytes())
            .map_err(|e| format!("payload is not valid base64 ({e})"))?;
        String::from_utf8(bytes).map_err(|_| "payload is not UTF-8".to_string())
    }

    /// Checks the envelope: `Valid` when any signature verifies by a trusted key; otherwise the
    /// first `Invalid`, else the first `Untrusted`; `Absent` without signatures. `Absent` is for
    /// airlock's own documents that mark "unsigned" with an empty list (triage reports); an
    /// envelope of SPEC sections 5 and 8 is read with [`DsseEnvelope::from_signed_json`], which
    /// refuses an empty list as malformed.
    pub fn check(&self, trust: &TrustSet) -> SignatureCheck {
        let statement = match self.statement() {
            Ok(s) => s,
            Err(reason) => {
                return SignatureCheck::Invalid {
                    key_id: self
                        .signatures
                        .first()
                        .map(|s| s.keyid.clone())
                        .unwrap_or_default(),
                    reason,
                }
            }
        };
        let mut first_invalid = None;
        let mut first_untrusted = None;
        for s in &self.signatures {
            match check_statement_signature(&self.payload_type, &statement, &s.sig, &s.keyid, trust)
            {
                c @ SignatureCheck::Valid { .. } => return c,
                c @ SignatureCheck::Invalid { .. } => {
                    first_invalid.get_or_insert(c);
                }
                c => {
                    first_untrusted.get_or_insert(c);
                }
            }
        }
        first_invalid
            .or(first_untrusted)
            .unwrap_or(SignatureCheck::Absent)
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an envelope always serialises")
    }
}

/// Why an envelope with `"signatures": []` is malformed (SPEC sections 5 and 8).
pub const EMPTY_SIGNATURES: &str = "malformed DSSE envelope: its \"signatures\" list is empty, but a DSSE envelope carries at least one signature (a statement that is not signed has no envelope at all); restore the envelope as it was written, or sign again";

/// The DSSE envelope JSON for an already-made signature.
pub fn dsse_envelope(
    payload_type: &str,
    statement: &str,
    sig_b64: &str,
    key_id: &str,
) -> serde_json::Value {
    DsseEnvelope {
        payload_type: payload_type.to_string(),
        payload: B64.encode(statement.as_bytes()),
        signatures: vec![DsseSignature {
            keyid: key_id.to_string(),
            sig: sig_b64.to_string(),
        }],
    }
    .to_json()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_counts_bytes_not_chars() {
        assert_eq!(pae("t", "é".as_bytes()), b"DSSEv1 1 t 2 \xc3\xa9".to_vec());
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn statement_escapes_like_jcs() {
        let h = BundleHeader {
            bundle_id: "a\"b".into(),
            tenant_id: "t\u{1}é".into(),
            ..Default::default()
        };
        let s = bundle_statement(&h);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(crate::core::canonical::canonical_text(&v).unwrap(), s);
    }

    /// SPEC sections 5 and 8: an envelope is the signed form of a statement, so one with an empty
    /// `signatures` list is malformed (not unsigned); one signature or more parses.
    #[test]
    fn an_envelope_without_signatures_is_malformed() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let env = DsseEnvelope::sign(&key, BATCH_SNAPSHOT_PAYLOAD_TYPE, "{}");
        assert_eq!(
            DsseEnvelope::from_signed_json(&env.to_json()),
            Ok(env.clone())
        );
        let mut empty = env.to_json();
        empty["signatures"] = serde_json::json!([]);
        let err = DsseEnvelope::from_signed_json(&empty).unwrap_err();
        assert_eq!(err, EMPTY_SIGNATURES);
        assert!(err.contains("\"signatures\" list is empty"), "{err}");
        let missing = serde_json::json!({"payloadType": "t", "payload": ""});
        let err = DsseEnvelope::from_signed_json(&missing).unwrap_err();
        assert!(
            err.contains("not a DSSE envelope") && err.contains("signatures"),
            "{err}"
        );
    }

    #[test]
    fn envelope_round_trip_for_batch_snapshots() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let stmt = r#"{"entryCount":3,"tenantId":"acme"}"#;
        let env = DsseEnvelope::sign(&key, BATCH_SNAPSHOT_PAYLOAD_TYPE, stmt);
        let mut trust = TrustSet::empty();
        assert_eq!(
            env.check(&trust),
            SignatureCheck::Untrusted {
                key_id: key_id(&key.verifying_key())
            }
        );
        trust.add_key("ops", key.verifying_key(), "test");
        assert!(env.check(&trust).is_valid());
        let mut forged = env.clone();
        forged.payload = B64.encode(r#"{"entryCount":4,"tenantId":"acme"}"#);
        assert!(matches!(
            forged.check(&trust),
            SignatureCheck::Invalid { .. }
        ));
        let mut retyped = env.clone();
        retyped.payload_type = BUNDLE_PAYLOAD_TYPE.into();
        assert!(matches!(
            retyped.check(&trust),
            SignatureCheck::Invalid { .. }
        ));
    }
}
