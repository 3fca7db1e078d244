//! The DSSE envelope of a signed bundle header (SPEC section 5), and a header signer that keeps
//! the header it signed so the envelope can be written after the bundle: what `jobs export --sign
//! --dsse-out` and `jobs sign --dsse-out` write, callable from any surface.

use super::dsse::{bundle_statement, dsse_envelope, sign_header};
use super::TrustError;
use crate::core::bundle::{BundleHeader, BUNDLE_PAYLOAD_TYPE};
use crate::core::file_output::AtomicFile;
use ed25519_dalek::SigningKey;
use std::cell::RefCell;
use std::io::Write;
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

/// An envelope file made ready before the bundle is written (`--dsse-out`): the path is checked
/// and its temporary file created first, so a bad path (a directory, a missing folder, the bundle
/// itself) refuses the command before any bundle is written or replaced.
pub struct DsseOut {
    file: AtomicFile,
}

impl DsseOut {
    /// Checks `path` (not `bundle`, where the bundle goes) and creates its temporary file.
    pub fn prepare(path: &Path, bundle: Option<&Path>) -> Result<DsseOut, TrustError> {
        check_dsse_target(Some(path), bundle)?;
        Ok(DsseOut {
            file: AtomicFile::create(path)?,
        })
    }

    /// Writes the envelope of the signed `header` (pretty JSON and a newline) and puts the file in
    /// place.
    pub fn write(mut self, header: &BundleHeader) -> Result<(), TrustError> {
        let env = bundle_dsse_envelope(header)?;
        let w = self.file.writer();
        serde_json::to_writer_pretty(&mut *w, &env)
            .map_err(std::io::Error::other)
            .and_then(|()| w.write_all(b"\n"))
            .map_err(|source| TrustError::Write {
                path: self.file.target().to_path_buf(),
                source,
            })?;
        self.file.commit()?;
        Ok(())
    }
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
