//! The Scheduler screen's store loaders: each opens the store (read-only with `--read-only`) and
//! makes one engine call (`core::store::rules`, `core::store::scheduler`). They run on background
//! tasks; the screen only draws what they return.

use crate::core::chain::verify::{verify_existing_chain_trusting, ChainReport, SnapshotTrust};
use crate::core::store::any::AnyStore;
use crate::core::store::rules;
use crate::core::store::scheduler::{self, StoredEntry, TenantSummary};
use crate::core::trust::TrustSet;
use crate::tui::screens::scheduler::{search_text, CheckedProof, ProofView, SnapshotList, PAGE};
use crate::tui::store_ref::StoreRef;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Entries a background `/` search reads from the store at a time.
const SEARCH_PAGE: u64 = 4096;

/// A tenant's stored chain read a page at a time, in the direction a search goes: the rows of a
/// background `/` search on the Scheduler screen (the screen itself holds only the rows shown).
pub struct StoredRows {
    store: AnyStore,
    tenant: String,
    from: u64,
    rows: Vec<StoredEntry>,
    /// The first read that failed (the search stops at it and says so).
    pub error: Option<String>,
}

impl StoredRows {
    pub fn open(db: &StoreRef, tenant: String) -> Result<StoredRows, String> {
        Ok(StoredRows {
            store: open(db)?,
            tenant,
            from: 0,
            rows: Vec::new(),
            error: None,
        })
    }

    /// Entry `seq`'s search text (see [`search_text`]); reads the page around it going
    /// `forward` (or back) when it is not held. `None` after a failed read.
    pub fn text(&mut self, seq: u64, forward: bool) -> Option<String> {
        if self.error.is_some() {
            return None;
        }
        let held = seq >= self.from && seq - self.from < self.rows.len() as u64;
        if !held {
            let from = if forward {
                seq
            } else {
                seq.saturating_sub(SEARCH_PAGE - 1)
            };
            match rules::chain_entries(&self.store, &self.tenant, from, SEARCH_PAGE) {
                Ok(rows) => (self.from, self.rows) = (from, rows),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return None;
                }
            }
        }
        let i = seq.checked_sub(self.from)? as usize;
        self.rows.get(i).map(search_text)
    }
}

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

/// The tenant's snapshots with their signature verdicts, and what the rows that cover nothing
/// known (damaged positions) say about themselves.
pub fn load_snapshots(
    db: &StoreRef,
    tenant: &str,
    trust: &TrustSet,
) -> Result<SnapshotList, String> {
    let rows = rules::snapshot_rows(&open(db)?, tenant).map_err(|e| e.to_string())?;
    let (listed, unplaced) = scheduler::checked_snapshot_rows(rows, trust);
    Ok(SnapshotList {
        listed,
        damaged: unplaced.iter().map(|d| d.describe()).collect(),
    })
}

/// `chain verify` of `tenant`: every link, the head, every snapshot root, and every snapshot's
/// signature against `trust`, a signature `required` or not (the console's signature policy).
pub fn run_verify(
    db: &StoreRef,
    tenant: &str,
    progress: Arc<AtomicU64>,
    trust: &TrustSet,
    required: bool,
) -> Result<Box<ChainReport>, String> {
    let policy = SnapshotTrust {
        trust,
        require_signature: required,
    };
    verify_existing_chain_trusting(&open(db)?, tenant, Some(progress), policy)
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
