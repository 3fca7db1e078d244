//! Inclusion proofs: [`prove`] and [`verify_proof`].

use super::read::chain_head;
use super::snapshots::{row_snapshot, Snapshot, SNAPSHOT_COLUMNS};
use super::SchedulerError;
use crate::core::chain::{payload_hash, scheduler_chain_link, Action};
use crate::core::merkle;
use crate::core::store::Store;
use rusqlite::{params, OptionalExtension};
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

/// Builds the inclusion proof of `job_id`'s ENQUEUE entry.
pub fn prove(store: &Store, tenant: &str, job_id: &str) -> Result<InclusionProof, SchedulerError> {
    let conn = store.conn();
    let job = uuid::Uuid::parse_str(job_id)
        .map_err(|e| SchedulerError::Invalid {
            what: "job id",
            message: format!("{job_id:?} is not a UUID ({e})"),
        })?
        .hyphenated()
        .to_string();
    chain_head(conn, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let seq: i64 = conn
        .query_row(
            "SELECT enqueue_seq FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
            params![
                tenant,
                uuid::Uuid::parse_str(&job)
                    .map(|u| u.into_bytes().to_vec())
                    .unwrap_or_default()
            ],
            |r| r.get(0),
        )
        .optional()?
        .ok_or_else(|| SchedulerError::UnknownJob {
            tenant: tenant.into(),
            job_id: job.clone(),
        })?;
    let seq = seq as u64;
    let snap = conn
        .query_row(
            &format!("SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 AND from_seq <= ?2 ORDER BY from_seq DESC LIMIT 1"),
            params![tenant, seq as i64],
            row_snapshot,
        )
        .optional()?
        .filter(|s| s.covers(seq))
        .ok_or_else(|| SchedulerError::NotSnapshotted {
            tenant: tenant.into(),
            job_id: job.clone(),
            seq,
        })?;
    let mut stmt = conn.prepare_cached(
        "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log
         WHERE tenant_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![
        tenant,
        snap.from_seq as i64,
        (snap.from_seq + snap.entry_count) as i64
    ])?;
    let mut leaves = Vec::new();
    let mut entry = None;
    while let Some(r) = rows.next()? {
        let s = r.get::<_, i64>(0)? as u64;
        let link: String = r.get(5)?;
        let mut d = [0u8; 32];
        hex::decode_to_slice(&link, &mut d).map_err(|_| SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: s,
            message: format!("chain link {link:?} is not hex"),
        })?;
        if s == seq {
            let payload: String = r.get(6)?;
            entry = Some(ProvenEntry {
                seq,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                action: r.get(3)?,
                prev_chain_link: r.get(4)?,
                payload_digest: hex::encode(payload_hash(&payload)),
                chain_link: link,
            });
        }
        leaves.push(merkle::leaf_hash(&d));
    }
    let entry = entry.ok_or_else(|| SchedulerError::Damaged {
        tenant: tenant.into(),
        seq,
        message: "the job's entry is missing".into(),
    })?;
    if leaves.len() as u64 != snap.entry_count {
        return Err(SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: snap.from_seq,
            message: format!(
                "the snapshot covers {} entries but {} are stored",
                snap.entry_count,
                leaves.len()
            ),
        });
    }
    let root = hex::encode(merkle::root(&leaves));
    if root != snap.merkle_root {
        return Err(SchedulerError::Damaged {
            tenant: tenant.into(),
            seq: snap.from_seq,
            message: format!(
                "the snapshot's Merkle root {} does not match its entries ({root})",
                snap.merkle_root
            ),
        });
    }
    let index = (seq - snap.from_seq) as usize;
    let path = merkle::inclusion_proof(&leaves, index).expect("index inside the snapshot");
    Ok(InclusionProof {
        kind: PROOF_TYPE.into(),
        tenant_id: tenant.to_string(),
        leaf_index: index as u64,
        tree_size: snap.entry_count,
        leaf_hash: hex::encode(leaves[index]),
        proof: path.iter().map(hex::encode).collect(),
        merkle_root: snap.merkle_root.clone(),
        entry,
        snapshot: snap,
    })
}

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
    if s.merkle_root != p.merkle_root || s.entry_count != p.tree_size || s.tenant_id != p.tenant_id
    {
        return Err(ProofCheckError::Field(
            "merkleRoot, treeSize or tenantId differ from the snapshot's".into(),
        ));
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
