//! Hash links: the node job log link (SPEC section 4) and the scheduler chain link (SPEC section 8).
//! Verifying a stored scheduler chain over either store is [`verify`].

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
    let mut h = Sha256::new();
    h.update(t_hlc.as_bytes());
    h.update(job_id.as_bytes());
    h.update(action.as_str().as_bytes());
    h.update(prev_chain_link.unwrap_or("genesis").as_bytes());
    h.update(payload_digest.as_bytes());
    h.finalize().into()
}
