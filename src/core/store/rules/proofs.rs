//! Inclusion proofs ([`prove`]) over any store. Checking a proof offline is
//! [`crate::core::store::scheduler::verify_proof`].

use crate::core::chain::payload_hash;
use crate::core::merkle;
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::scheduler::{
    covering, InclusionProof, ProvenEntry, SchedulerError, PROOF_TYPE,
};

/// Builds the RFC 9162 inclusion proof of `job_id`'s ENQUEUE entry in the snapshot covering it.
pub fn prove(
    store: &dyn Backend,
    tenant: &str,
    job_id: &str,
) -> Result<InclusionProof, SchedulerError> {
    let job = uuid::Uuid::parse_str(job_id).map_err(|e| SchedulerError::Invalid {
        what: "job id",
        message: format!("{job_id:?} is not a UUID ({e})"),
    })?;
    let job_text = job.hyphenated().to_string();
    let mut tx = store.begin(TxKind::Read)?;
    tx.chain_head(tenant)?
        .ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let seq = tx
        .job(tenant, job.as_bytes())?
        .ok_or_else(|| SchedulerError::NothingToProve {
            tenant: tenant.into(),
            job_id: job_text.clone(),
        })?
        .enqueue_seq;
    let snap = covering(tx.snapshot_rows(tenant)?, seq)
        .map_err(|d| SchedulerError::Store(d.into_error()))?
        .ok_or_else(|| SchedulerError::NotSnapshotted {
            tenant: tenant.into(),
            job_id: job_text.clone(),
            seq,
        })?;
    let damaged = |seq: u64, message: String| SchedulerError::Damaged {
        tenant: tenant.into(),
        seq,
        message,
    };
    let end = snap.from_seq.saturating_add(snap.entry_count);
    let mut leaves = Vec::with_capacity(snap.entry_count.min(1 << 20) as usize);
    let mut entry = None;
    super::each_chain_row(&mut *tx, tenant, snap.from_seq, end, |r| {
        let d = super::unhex_link(r.chain_link)
            .ok_or_else(|| damaged(r.seq, format!("chain link {:?} is not hex", r.chain_link)))?;
        if r.seq == seq {
            entry = Some(ProvenEntry {
                seq,
                t_hlc: r.t_hlc.to_string(),
                job_id: r.job_id.to_string(),
                action: r.action.to_string(),
                prev_chain_link: r.prev_chain_link.map(str::to_string),
                payload_digest: hex::encode(payload_hash(r.payload)),
                chain_link: r.chain_link.to_string(),
            });
        }
        leaves.push(merkle::leaf_hash(&d));
        Ok(())
    })?;
    let entry = entry.ok_or_else(|| damaged(seq, "the job's entry is missing".into()))?;
    if leaves.len() as u64 != snap.entry_count {
        return Err(damaged(
            snap.from_seq,
            format!(
                "the snapshot covers {} entries but {} are stored",
                snap.entry_count,
                leaves.len()
            ),
        ));
    }
    let root = hex::encode(merkle::root(&leaves));
    if root != snap.merkle_root {
        return Err(damaged(
            snap.from_seq,
            format!(
                "the snapshot's Merkle root {} does not match its entries ({root})",
                snap.merkle_root
            ),
        ));
    }
    let index = (seq - snap.from_seq) as usize;
    let path = merkle::inclusion_proof(&leaves, index)
        .map_err(|e| damaged(seq, format!("no inclusion proof: {e}")))?;
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
