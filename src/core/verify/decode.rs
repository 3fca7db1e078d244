//! The verifier's strict decoders for entry fields (displays recompute evidence with the same ones).

use crate::core::chain::Digest32;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

/// Decodes a 32-byte digest in standard padded base64 (the verifier's rule for payloadHash, link
/// and prevLink).
pub fn decode_digest(s: &str) -> Result<Digest32, String> {
    let mut out = [0u8; 32];
    // A valid value is exactly 44 characters; decoding into a fixed slot allocates nothing.
    if s.len() == 44 {
        if let Ok(32) = B64.decode_slice(s.as_bytes(), &mut out) {
            return Ok(out);
        }
    }
    let bytes = B64
        .decode(s.as_bytes())
        .map_err(|e| format!("{s:?} is not standard base64 with padding ({e})"))?;
    <Digest32>::try_from(bytes.as_slice())
        .map_err(|_| format!("{s:?} decodes to {} bytes, not 32", bytes.len()))
}

/// Parses a jobId: a UUID in lowercase hyphenated form only (the verifier's rule).
pub fn parse_job_id(s: &str) -> Result<uuid::Uuid, String> {
    let u = uuid::Uuid::parse_str(s).map_err(|e| format!("{s:?} is not a UUID ({e})"))?;
    let mut buf = uuid::Uuid::encode_buffer();
    if u.hyphenated().encode_lower(&mut buf) != s {
        return Err(format!("{s:?} is not in lowercase hyphenated form"));
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_job_ids_are_strict() {
        let d = B64.encode([7u8; 32]);
        assert_eq!(decode_digest(&d), Ok([7u8; 32]));
        assert!(decode_digest(&d[..43]).is_err());
        assert!(decode_digest(&B64.encode([7u8; 31]))
            .unwrap_err()
            .contains("31 bytes"));
        let id = "0b7e0f5c-3c1a-4a8e-9d0e-6f1b2c3d4e5f";
        assert!(parse_job_id(id).is_ok());
        assert!(parse_job_id(&id.to_uppercase()).is_err());
        assert!(parse_job_id(&id.replace('-', "")).is_err());
    }
}
