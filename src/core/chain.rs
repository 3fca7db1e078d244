//! Hash links: the node job log link (SPEC section 4) and the scheduler chain link (SPEC section 8).
//! Verifying a stored scheduler chain over either store is [`verify`].

mod base64_digest;
pub mod verify;

use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

/// A 32-byte SHA-256 digest.
pub type Digest32 = [u8; 32];

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest32 {
    Sha256::digest(bytes).into()
}

/// payloadHash = SHA-256(UTF-8 bytes of the canonical payload text).
pub fn payload_hash(canonical_payload: &str) -> Digest32 {
    sha256(canonical_payload.as_bytes())
}

/// link = SHA-256(prev || jobId.bytes || UTF-8(tHlc) || payloadHash); `prev` is 32 zero bytes for
/// the first entry.
pub fn node_link(
    prev: Option<&Digest32>,
    job_id: &Uuid,
    t_hlc: &str,
    payload_hash: &Digest32,
) -> Digest32 {
    let mut h = Sha256::new();
    h.update(prev.unwrap_or(&[0u8; 32]));
    h.update(job_id.as_bytes());
    h.update(t_hlc.as_bytes());
    h.update(payload_hash);
    h.finalize().into()
}

/// Decodes a 32-byte digest written in standard padded base64 (payloadHash, link and prevLink of
/// a bundle entry). The one rule for that text: anything else is refused with what was wrong.
pub fn decode_digest(s: &str) -> Result<Digest32, String> {
    use base64::Engine;
    if let Some(d) = base64_digest::decode_quick(s.as_bytes()) {
        return Ok(d);
    }
    // Only here: the engine is a 323-byte constant, copied wherever it is named.
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = [0u8; 32];
    // A valid value is exactly 44 characters; decoding into a fixed slot allocates nothing.
    if s.len() == 44 {
        if let Ok(32) = b64.decode_slice(s.as_bytes(), &mut out) {
            return Ok(out);
        }
    }
    let bytes = b64
        .decode(s.as_bytes())
        .map_err(|e| format!("{s:?} is not standard base64 with padding ({e})"))?;
    <Digest32>::try_from(bytes.as_slice())
        .map_err(|_| format!("{s:?} decodes to {} bytes, not 32", bytes.len()))
}

/// Standard padded base64 of a digest (the bundle's text form of payloadHash, link and prevLink).
pub fn encode_digest(d: &Digest32) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(d)
}

/// Links node-log entries one after another (SPEC section 4): each step hashes the payload, links
/// the entry to the one before and remembers the new link for the next step.
#[derive(Debug, Clone, Default)]
pub struct NodeLinker {
    prev: Option<Digest32>,
}

/// The digests of one linked entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkedEntry {
    pub payload_hash: Digest32,
    /// The link of the entry before (`None` for a log's first entry).
    pub prev_link: Option<Digest32>,
    pub link: Digest32,
}

impl NodeLinker {
    /// A linker whose next entry follows the entry with link `prev` (`None`: a log's first entry).
    pub fn after(prev: Option<Digest32>) -> Self {
        NodeLinker { prev }
    }

    /// Links the next entry (its canonical payload text, job id and tHlc text).
    pub fn link(&mut self, job_id: &Uuid, t_hlc: &str, canonical_payload: &str) -> LinkedEntry {
        let payload_hash = payload_hash(canonical_payload);
        let link = node_link(self.prev.as_ref(), job_id, t_hlc, &payload_hash);
        let prev_link = self.prev.replace(link);
        LinkedEntry {
            payload_hash,
            prev_link,
            link,
        }
    }

    /// The link of the last entry linked (or the one given to [`NodeLinker::after`]).
    pub fn head(&self) -> Option<Digest32> {
        self.prev
    }
}

/// Scheduler log actions (seed hlc-ordering).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Action {
    Enqueue,
    Dequeue,
    Execute,
    Complete,
    Fail,
}

impl Action {
    pub const ALL: [Action; 5] = [
        Action::Enqueue,
        Action::Dequeue,
        Action::Execute,
        Action::Complete,
        Action::Fail,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Enqueue => "ENQUEUE",
            Action::Dequeue => "DEQUEUE",
            Action::Execute => "EXECUTE",
            Action::Complete => "COMPLETE",
            Action::Fail => "FAIL",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown action {s:?}: expected one of ENQUEUE, DEQUEUE, EXECUTE, COMPLETE, FAIL"))
    }
}

/// Lowercase hex SHA-256 of the canonical payload text (the scheduler's payloadDigest).
pub fn payload_digest_hex(canonical_payload: &str) -> String {
    hex::encode(payload_hash(canonical_payload))
}

/// chain_link = hex SHA-256(UTF-8(tHlc) || UTF-8(jobId) || UTF-8(action) || UTF-8(prev or "genesis")
/// || UTF-8(payloadDigest)), without separators (the seed's formula, kept for compatibility).
pub fn scheduler_chain_link(
    t_hlc: &str,
    job_id: &str,
    action: Action,
    prev_chain_link: Option<&str>,
    payload_digest: &str,
) -> String {
    hex::encode(scheduler_chain_digest(
        t_hlc,
        job_id,
        action,
        prev_chain_link,
        payload_digest,
    ))
}

/// [`scheduler_chain_link`] as the 32 digest bytes (not yet hex).
pub fn scheduler_chain_digest(
    t_hlc: &str,
    job_id: &str,
    action: Action,
    prev_chain_link: Option<&str>,
    payload_digest: &str,
) -> Digest32 {
    scheduler_chain_digest_of(
        t_hlc,
        job_id,
        action.as_str(),
        prev_chain_link,
        payload_digest,
    )
}

/// [`scheduler_chain_digest`] over an action's stored text, whatever it holds: a stored row whose
/// action is not one of the five still has a link that does (not) recompute from its fields.
pub fn scheduler_chain_digest_of(
    t_hlc: &str,
    job_id: &str,
    action: &str,
    prev_chain_link: Option<&str>,
    payload_digest: &str,
) -> Digest32 {
    let mut h = Sha256::new();
    h.update(t_hlc.as_bytes());
    h.update(job_id.as_bytes());
    h.update(action.as_bytes());
    h.update(prev_chain_link.unwrap_or("genesis").as_bytes());
    h.update(payload_digest.as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linker_chains_each_entry_to_the_one_before() {
        let id = Uuid::from_u128(7);
        let mut linker = NodeLinker::default();
        let first = linker.link(&id, "1:0:n", "{}");
        assert_eq!(first.prev_link, None);
        assert_eq!(first.payload_hash, payload_hash("{}"));
        assert_eq!(
            first.link,
            node_link(None, &id, "1:0:n", &first.payload_hash)
        );
        let second = linker.link(&id, "2:0:n", "[]");
        assert_eq!(second.prev_link, Some(first.link));
        assert_eq!(
            second.link,
            node_link(Some(&first.link), &id, "2:0:n", &payload_hash("[]"))
        );
        assert_eq!(linker.head(), Some(second.link));
        assert_eq!(
            NodeLinker::after(Some(first.link)).link(&id, "2:0:n", "[]"),
            second
        );
    }

    #[test]
    fn digests_decode_from_padded_standard_base64_only() {
        let d = sha256(b"x");
        assert_eq!(decode_digest(&encode_digest(&d)), Ok(d));
        assert!(decode_digest(encode_digest(&d).trim_end_matches('=')).is_err());
        assert!(decode_digest("AAAA").unwrap_err().contains("3 bytes"));
        assert!(decode_digest("not base64!").is_err());
    }
}
