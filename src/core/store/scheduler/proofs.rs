//! Inclusion proofs: what one holds, checking it offline ([`verify_proof`]) and the acceptance
//! policy every surface applies ([`check_proof`]). A store builds
//! them with [`crate::core::store::rules::prove`].

use super::snapshots::{check_snapshot_signature, Snapshot};
use crate::core::chain::{scheduler_chain_link, Action};
use crate::core::merkle;
use crate::core::text::visible;
use crate::core::trust::{SignatureCheck, TrustSet};
use serde::{Deserialize, Serialize};

/// The fields a chain link is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvenEntry {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub action: String,
    pub prev_chain_link: Option<String>,
    pub payload_digest: String,
    pub chain_link: String,
}

/// An RFC 9162 inclusion proof of a job's ENQUEUE chain link in the snapshot covering it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InclusionProof {
    /// Always `airlock.inclusion-proof.v1`.
    #[serde(rename = "type")]
    pub kind: String,
    pub tenant_id: String,
    pub entry: ProvenEntry,
    pub leaf_index: u64,
    pub tree_size: u64,
    /// Lowercase hex of SHA-256(0x00 || chain link bytes).
    pub leaf_hash: String,
    /// Lowercase hex hashes, leaf to root.
    pub proof: Vec<String>,
    pub merkle_root: String,
    pub snapshot: Snapshot,
}

pub const PROOF_TYPE: &str = "airlock.inclusion-proof.v1";

/// Why an inclusion proof was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofCheckError {
    #[error("not an airlock inclusion proof (type {0:?})")]
    Type(String),
    #[error("the entry's chain link does not recompute from its fields: expected {expected}, stored {actual}")]
    Link { expected: String, actual: String },
    #[error("{0}")]
    Field(String),
    #[error("the proof does not verify: {0}")]
    Merkle(#[from] merkle::ProofError),
}

/// Checks a proof offline: the entry's link recomputes, the leaf hash is that link's, the path leads
/// to the Merkle root, and the root, size and bounds agree with the snapshot. A DSSE envelope, when
/// present, is the caller's to check against its trusted keys.
pub fn verify_proof(p: &InclusionProof) -> Result<(), ProofCheckError> {
    if p.kind != PROOF_TYPE {
        return Err(ProofCheckError::Type(p.kind.clone()));
    }
    let e = &p.entry;
    let action: Action = e.action.parse().map_err(ProofCheckError::Field)?;
    let link = scheduler_chain_link(
        &e.t_hlc,
        &e.job_id,
        action,
        e.prev_chain_link.as_deref(),
        &e.payload_digest,
    );
    if link != e.chain_link {
        return Err(ProofCheckError::Link {
            expected: link,
            actual: e.chain_link.clone(),
        });
    }
    let raw = hex::decode(&e.chain_link)
        .map_err(|_| ProofCheckError::Field("chainLink is not hex".into()))?;
    let leaf = merkle::leaf_hash(&raw);
    if hex::encode(leaf) != p.leaf_hash {
        return Err(ProofCheckError::Field(format!(
            "leafHash {} is not the leaf hash of the entry's chain link ({})",
            p.leaf_hash,
            hex::encode(leaf)
        )));
    }
    let s = &p.snapshot;
    let differ = [
        (s.merkle_root != p.merkle_root).then(|| {
            format!(
                "merkleRoot {} (the snapshot's: {})",
                visible(&p.merkle_root),
                visible(&s.merkle_root)
            )
        }),
        (s.entry_count != p.tree_size).then(|| {
            format!(
                "treeSize {} (the snapshot's entryCount: {})",
                p.tree_size, s.entry_count
            )
        }),
        (s.tenant_id != p.tenant_id).then(|| {
            format!(
                "tenantId {} (the snapshot's: {})",
                visible(&p.tenant_id),
                visible(&s.tenant_id)
            )
        }),
    ];
    let differ: Vec<String> = differ.into_iter().flatten().collect();
    if !differ.is_empty() {
        return Err(ProofCheckError::Field(format!(
            "the proof and its snapshot disagree: {}",
            differ.join("; ")
        )));
    }
    let position = s.from_seq.checked_add(p.leaf_index).ok_or_else(|| {
        ProofCheckError::Field(format!(
            "snapshot.fromSeq {} + leafIndex {} is out of range",
            s.from_seq, p.leaf_index
        ))
    })?;
    if p.leaf_index >= p.tree_size {
        return Err(ProofCheckError::Field(format!(
            "leafIndex {} is not below treeSize {}",
            p.leaf_index, p.tree_size
        )));
    }
    if e.seq != position {
        return Err(ProofCheckError::Field(format!(
            "entry position {} is not the snapshot's first position {} plus leafIndex {}",
            e.seq, s.from_seq, p.leaf_index
        )));
    }
    if p.leaf_index == 0 && s.from_chain_link != e.chain_link {
        return Err(ProofCheckError::Field(
            "the first leaf's chain link is not the snapshot's fromChainLink".into(),
        ));
    }
    if p.leaf_index == p.tree_size - 1 && s.to_chain_link != e.chain_link {
        return Err(ProofCheckError::Field(
            "the last leaf's chain link is not the snapshot's toChainLink".into(),
        ));
    }
    let proof: Vec<Vec<u8>> = p
        .proof
        .iter()
        .map(|h| {
            hex::decode(h)
                .map_err(|_| ProofCheckError::Field(format!("proof element {h:?} is not hex")))
        })
        .collect::<Result<_, _>>()?;
    let root = hex::decode(&p.merkle_root)
        .map_err(|_| ProofCheckError::Field("merkleRoot is not hex".into()))?;
    merkle::verify_inclusion(p.leaf_index, p.tree_size, &leaf, &proof, &root)?;
    Ok(())
}

/// Why an inclusion proof is not accepted ([`check_proof`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofRejection {
    /// The proof itself does not check ([`verify_proof`]).
    #[error("{0}")]
    Proof(#[from] ProofCheckError),
    /// The snapshot carries a signature that does not verify.
    #[error("the snapshot signature is invalid: {0}")]
    BadSignature(String),
    /// A signature by a trusted key is required and the snapshot has none (the status word says
    /// what it has: `absent` or `untrusted`).
    #[error("the snapshot is not signed by a trusted key (signature {0})")]
    NotTrusted(&'static str),
}

/// The acceptance verdict on an inclusion proof: the snapshot's signature state and whether the
/// proof is accepted under the signature policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofVerdict {
    pub signature: SignatureCheck,
    pub outcome: Result<(), ProofRejection>,
}

impl ProofVerdict {
    pub fn is_accepted(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// The acceptance policy for an inclusion proof, one for every surface: the proof must check
/// offline ([`verify_proof`]); a snapshot signature that is present must verify; and with
/// `require_signature` the snapshot must be signed by a key in `trust`. An unsigned proof (or one
/// signed by an unknown key) is accepted when no signature is required: its root is then only as
/// trustworthy as its source, which the surfaces say.
pub fn check_proof(
    proof: &InclusionProof,
    trust: &TrustSet,
    require_signature: bool,
) -> ProofVerdict {
    let signature = check_snapshot_signature(&proof.snapshot, trust);
    let outcome = match verify_proof(proof) {
        Err(e) => Err(ProofRejection::Proof(e)),
        Ok(()) => match &signature {
            SignatureCheck::Invalid { reason, .. } => {
                Err(ProofRejection::BadSignature(reason.clone()))
            }
            SignatureCheck::Valid { .. } => Ok(()),
            other if require_signature => Err(ProofRejection::NotTrusted(other.status_word())),
            _ => Ok(()),
        },
    };
    ProofVerdict { signature, outcome }
}
