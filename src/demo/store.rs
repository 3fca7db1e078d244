//! The workspace's store: an earlier export imported with the engine's `import`, a few lifecycle
//! actions on top, and a signed snapshot of the tail (the Scheduler screen's tenant chain).

use super::TENANT;
use crate::core::chain::Action;
use crate::core::hlc::SystemWallClock;
use crate::core::import::{import, ImportOptions, ImportStatus};
use crate::core::store::scheduler;
use crate::core::store::Store;
use crate::core::trust::{self, SigningKey, TrustSet};
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::Path;

/// Entries per batch snapshot in the demo store (small, so there are several).
pub const DEMO_BATCH_SIZE: u64 = 5;

/// Imports `bundle` into the store at `db` (small batches, so several snapshots), appends a few
/// lifecycle actions, and takes a signed snapshot of the tail.
pub fn import_earlier(db: &Path, bundle: &Path, trust: &TrustSet, key: &SigningKey) -> Result<()> {
    let mut store = Store::open(db)?;
    let mut opts = ImportOptions::new("relay-01");
    opts.trust = Some(trust);
    opts.batch_size = DEMO_BATCH_SIZE;
    let report = import(&mut store, &[bundle.to_path_buf()], &opts)?;
    if report.status != ImportStatus::Imported {
        return Err(eyre!(
            "the demo import did not go through: {:?}",
            report.status
        ));
    }
    let first = crate::core::store::rules::chain_entries(&store, TENANT, 0, 2)?;
    let lifecycle: [(usize, &[Action]); 2] = [
        (0, &[Action::Dequeue, Action::Execute, Action::Complete]),
        (1, &[Action::Dequeue, Action::Execute, Action::Fail]),
    ];
    for (i, actions) in lifecycle {
        let Some(e) = first.get(i) else { continue };
        for a in actions {
            crate::core::store::rules::append_action(
                &store,
                TENANT,
                &e.job_id,
                *a,
                "relay-01",
                SystemWallClock,
                DEMO_BATCH_SIZE,
            )?;
        }
    }
    let signer = trust::snapshot_signer(key);
    match crate::core::store::rules::snapshot_now(
        &store,
        TENANT,
        DEMO_BATCH_SIZE,
        Some(&signer as scheduler::SnapshotSigner<'_>),
    ) {
        Ok(_) | Err(scheduler::SchedulerError::NothingToSnapshot(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
