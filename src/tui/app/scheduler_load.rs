//! The Scheduler screen's store loaders: each opens the store (read-only with `--read-only`) and
//! makes one engine call (`core::store::rules`, `core::store::scheduler`). They run on background
//! tasks; the screen only draws what they return.

use crate::core::chain::verify::{verify_chain, ChainReport};
use crate::core::store::any::AnyStore;
use crate::core::store::rules;
use crate::core::store::scheduler::{self, Snapshot, StoredEntry, TenantSummary};
use crate::core::trust::{SignatureCheck, TrustSet};
use crate::tui::screens::scheduler::{CheckedProof, ProofView, PAGE};
use crate::tui::store_ref::StoreRef;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub fn find_job(db: &StoreRef, tenant: &str, job_id: &str) -> Result<Option<u64>, String> {
    crate::core::store::rules::seq_of_job(&open(db)?, tenant, job_id).map_err(|e| e.to_string())
}

fn open(db: &StoreRef) -> Result<AnyStore, String> {
    db.open()
}

pub fn load_tenants(db: &StoreRef) -> Result<Vec<TenantSummary>, String> {
    rules::tenants(&open(db)?).map_err(|e| e.to_string())
}

pub fn load_page(db: &StoreRef, tenant: &str, from: u64) -> Result<Vec<StoredEntry>, String> {
    rules::chain_entries(&open(db)?, tenant, from, PAGE).map_err(|e| e.to_string())
}

pub fn load_snapshots(
    db: &StoreRef,
    tenant: &str,
    trust: &TrustSet,
) -> Result<Vec<(Snapshot, SignatureCheck)>, String> {
    let snaps = rules::snapshots(&open(db)?, tenant).map_err(|e| e.to_string())?;
    Ok(snaps
        .into_iter()
        .map(|s| {
            let check = scheduler::check_snapshot_signature(&s, trust);
            (s, check)
        })
        .collect())
}

pub fn run_verify(
    db: &StoreRef,
    tenant: &str,
    progress: Arc<AtomicU64>,
) -> Result<Box<ChainReport>, String> {
    verify_chain(&open(db)?, tenant, Some(progress))
        .map(Box::new)
        .map_err(|e| e.to_string())
}

/// The proof of `job_id` checked against `trust`, a signed snapshot `required` or not (the
/// console's signature policy).
pub fn run_prove(
    db: &StoreRef,
    tenant: &str,
    job_id: &str,
    trust: &TrustSet,
    required: bool,
) -> ProofView {
    let result = open(db).and_then(|store| {
        let proof = rules::prove(&store, tenant, job_id).map_err(|e| e.to_string())?;
        let verdict = scheduler::check_proof(&proof, trust, required);
        Ok(CheckedProof {
            proof: Box::new(proof),
            verdict,
        })
    });
    ProofView {
        job_id: job_id.to_string(),
        result,
    }
}
