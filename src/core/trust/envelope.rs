//! The DSSE envelope of a signed bundle header (SPEC section 5), and a header signer that keeps
//! the header it signed so the envelope can be written after the bundle: what `jobs export --sign
//! --dsse-out` and `jobs sign --dsse-out` write, callable from any surface.

use super::dsse::{bundle_statement, dsse_envelope, sign_header};
use super::TrustError;
use crate::core::bundle::{BundleHeader, BUNDLE_PAYLOAD_TYPE};
use ed25519_dalek::SigningKey;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// The standard DSSE envelope JSON of a signed bundle header (its statement, payload type and
/// signature). An unsigned header has none.
pub fn bundle_dsse_envelope(header: &BundleHeader) -> Result<serde_json::Value, TrustError> {
    let (Some(sig), Some(by)) = (&header.signature, &header.signed_by) else {
        return Err(TrustError::Unsigned);
    };
    Ok(dsse_envelope(
        BUNDLE_PAYLOAD_TYPE,
        &bundle_statement(header),
        sig,
        by,
    ))
}

/// Writes the DSSE envelope of a signed bundle header to `path` atomically (pretty JSON and a
/// newline).
pub fn write_bundle_dsse(path: &Path, header: &BundleHeader) -> Result<(), TrustError> {
    let env = bundle_dsse_envelope(header)?;
    let mut text = serde_json::to_string_pretty(&env).map_err(|e| TrustError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    text.push('\n');
    crate::core::file_output::write_atomic(path, text.as_bytes())?;
    Ok(())
}

/// Refuses an envelope path that is the bundle file itself (`bundle`: where the bundle is written).
pub fn check_dsse_target(dsse_out: Option<&Path>, bundle: Option<&Path>) -> Result<(), TrustError> {
    if let (Some(d), Some(b)) = (dsse_out, bundle) {
        let same = d == b
            || match (std::fs::canonicalize(d), std::fs::canonicalize(b)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            };
        if same {
            return Err(TrustError::DsseIsBundle {
                path: PathBuf::from(d),
            });
        }
    }
    Ok(())
}

/// Signs bundle headers (as a `nodelog::HeaderSigner`) and remembers the last one it signed, so
/// its DSSE envelope can be written once the bundle is.
pub struct BundleHeaderSigner {
    key: SigningKey,
    last: RefCell<Option<BundleHeader>>,
}

impl BundleHeaderSigner {
    pub fn new(key: SigningKey) -> Self {
        BundleHeaderSigner {
            key,
            last: RefCell::new(None),
        }
    }

    /// A closure usable as `nodelog::HeaderSigner` (`&signing.signer()`): returns the signature
    /// and key id of the header without its signature fields.
    pub fn signer(&self) -> impl Fn(&BundleHeader) -> Result<(String, String), String> + '_ {
        move |h: &BundleHeader| {
            let mut unsigned = h.clone();
            unsigned.signature = None;
            unsigned.signed_by = None;
            let (sig, by) = sign_header(&self.key, &unsigned);
            unsigned.signature = Some(sig.clone());
            unsigned.signed_by = Some(by.clone());
            *self.last.borrow_mut() = Some(unsigned);
            Ok((sig, by))
        }
    }

    /// The last header signed, signature included.
    pub fn signed_header(&self) -> Option<BundleHeader> {
        self.last.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::trust::{check_bundle_signature, key_id, DsseEnvelope, TrustSet};

    fn header() -> BundleHeader {
        BundleHeader {
            bundle_id: "3f0c8a4e-6a43-4b8e-9c55-2b8f7a1d9e01".into(),
            tenant_id: "acme".into(),
            created_at: "2026-01-05T12:01:00.000Z".into(),
            created_by_node_id: "node-a".into(),
            manifest_digest: format!("sha256:{}", "0".repeat(64)),
            signature: None,
            signed_by: None,
        }
    }

    #[test]
    fn the_envelope_carries_the_signed_statement_and_refuses_an_unsigned_header() {
        assert!(matches!(
            bundle_dsse_envelope(&header()),
            Err(TrustError::Unsigned)
        ));
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let signer = BundleHeaderSigner::new(key.clone());
        let (sig, by) = signer.signer()(&header()).unwrap();
        assert_eq!(by, key_id(&key.verifying_key()));
        let signed = signer.signed_header().unwrap();
        assert_eq!(signed.signature.as_deref(), Some(sig.as_str()));
        let mut trust = TrustSet::empty();
        trust.add_key("k", key.verifying_key(), "test");
        assert!(check_bundle_signature(&signed, &trust).is_valid());
        let env: DsseEnvelope =
            serde_json::from_value(bundle_dsse_envelope(&signed).unwrap()).unwrap();
        assert_eq!(env.payload_type, BUNDLE_PAYLOAD_TYPE);
        assert_eq!(env.statement().unwrap(), bundle_statement(&signed));
        assert!(env.check(&trust).is_valid());
    }

    #[test]
    fn the_envelope_never_overwrites_the_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path().join("b.json");
        std::fs::write(&b, "{}").unwrap();
        let via = dir.path().join(".").join("b.json");
        assert!(check_dsse_target(Some(&via), Some(&b)).is_err());
        assert!(check_dsse_target(Some(&dir.path().join("b.dsse.json")), Some(&b)).is_ok());
        assert!(check_dsse_target(None, Some(&b)).is_ok());
    }
}
