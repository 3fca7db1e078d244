//! Ledger checkpoints (seed AD-38 part 7, SPEC 11): the fold state is the WAL checkpoint's
//! applied state, written atomically beside the log with the LSN watermarks
//! ([`crate::core::wal::checkpoint`]). Recovery (the ledger reader) folds the checkpoint, then the
//! frames after its applied LSN; compaction (the WAL's) drops the frames the checkpoint covers.
//! A replicated ledger's state also carries its PostgreSQL confirmations
//! ([`super::confirmations`]): per level, the node WAL LSN confirmed and PostgreSQL's LSN.

use super::confirmations::Confirmations;
use super::contest::Occurrence;
use super::fold::{Finding, Fold, JobMap};
use super::LedgerError;
use crate::core::wal::{self, checkpoint::Checkpoint};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Names the state format inside a WAL checkpoint.
pub const STATE_FORMAT: &str = "airlock-ledger-fold/1";

/// The fold state as a checkpoint stores it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoldState {
    pub format: String,
    /// The label the occurrences in `jobs` carry (the log path when it was checkpointed).
    pub source: String,
    pub events: u64,
    pub jobs: JobMap,
    pub findings: Vec<Finding>,
    /// Findings past the kept ones ([`super::fold::KEPT_FINDINGS`]), counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub findings_not_kept: u64,
    /// REGIONAL/GLOBAL confirmations by PostgreSQL (absent for a LOCAL-only ledger).
    #[serde(default, skip_serializing_if = "Confirmations::is_empty")]
    pub confirmations: Confirmations,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FoldState {
    pub fn of(fold: &Fold, source: &str) -> FoldState {
        FoldState {
            format: STATE_FORMAT.to_string(),
            source: source.to_string(),
            events: fold.events_applied(),
            jobs: fold.jobs.clone(),
            findings: fold.findings(),
            findings_not_kept: fold.findings_not_kept(),
            confirmations: Confirmations::new(),
        }
    }

    /// The fold, with occurrences relabelled to `label` (the log's path now; every occurrence
    /// then shares one label).
    pub fn into_fold(self, label: &str) -> Fold {
        let mut fold = Fold::from_parts(
            self.jobs,
            self.findings,
            self.findings_not_kept,
            self.events,
        );
        fold.relabel(&self.source, label);
        fold
    }
}

/// The ledger fold state inside `cp`, the WAL checkpoint beside the log at `log` (a state that
/// is not one is an error naming the checkpoint file).
pub fn fold_state(log: &Path, cp: Checkpoint) -> Result<FoldState, LedgerError> {
    let state: FoldState =
        serde_json::from_value(cp.state).map_err(|e| LedgerError::Checkpoint {
            path: wal::checkpoint::checkpoint_path(log),
            message: e.to_string(),
        })?;
    if state.format != STATE_FORMAT {
        return Err(LedgerError::Checkpoint {
            path: wal::checkpoint::checkpoint_path(log),
            message: format!("state format {:?} is not {STATE_FORMAT:?}", state.format),
        });
    }
    Ok(state)
}

impl Fold {
    /// Renames the source of every occurrence labelled `from`.
    pub fn relabel(&mut self, from: &str, to: &str) {
        let to_label: std::sync::Arc<str> = to.into();
        let fix = |at: &mut Occurrence| {
            if &*at.source == from {
                at.source = to_label.clone();
            }
        };
        for job in self.jobs.values_mut() {
            job.for_each_occurrence(fix);
        }
        self.relabel_findings(from, to);
    }
}
