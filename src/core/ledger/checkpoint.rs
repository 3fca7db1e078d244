//! Ledger checkpoints (seed AD-38 part 7, SPEC 11): the fold state is the WAL checkpoint's
//! applied state, written atomically beside the log with the LSN watermarks
//! ([`crate::core::wal::checkpoint`]). Recovery folds the checkpoint, then the frames after its
//! applied LSN; compaction (the WAL's) drops the frames the checkpoint covers.

use super::contest::Occurrence;
use super::fold::{Finding, Fold, JobFold};
use super::job_id::JobId;
use super::source::{fold_frames, ReadSummary};
use super::LedgerError;
use crate::core::wal;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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
    pub jobs: HashMap<JobId, JobFold>,
    pub findings: Vec<Finding>,
}

impl FoldState {
    pub fn of(fold: &Fold, source: &str) -> FoldState {
        FoldState {
            format: STATE_FORMAT.to_string(),
            source: source.to_string(),
            events: fold.events_applied(),
            jobs: fold.jobs.clone(),
            findings: fold.findings(),
        }
    }

    /// The fold, with occurrences relabelled to `label` (the log's path now).
    pub fn into_fold(self, label: &str) -> Fold {
        let mut fold = Fold::from_parts(self.jobs, self.findings, self.events);
        if self.source != label {
            fold.relabel(&self.source, label);
        }
        fold
    }
}

/// Folds one ledger: its checkpoint (if any), then the frames after the checkpoint's applied LSN.
pub fn fold_with_checkpoint(path: &Path, label: &str) -> Result<(Fold, ReadSummary), LedgerError> {
    let (mut fold, after) = match wal::checkpoint::load(path)? {
        Some(cp) if !cp.state.is_null() => {
            let state: FoldState =
                serde_json::from_value(cp.state).map_err(|e| LedgerError::Checkpoint {
                    path: wal::checkpoint::checkpoint_path(path),
                    message: e.to_string(),
                })?;
            if state.format != STATE_FORMAT {
                return Err(LedgerError::Checkpoint {
                    path: wal::checkpoint::checkpoint_path(path),
                    message: format!("state format {:?} is not {STATE_FORMAT:?}", state.format),
                });
            }
            (state.into_fold(label), cp.applied_lsn)
        }
        _ => (Fold::default(), 0),
    };
    let summary = fold_frames(path, label, after, &mut fold)?;
    Ok((fold, summary))
}

impl Fold {
    /// Renames the source of every occurrence labelled `from`.
    pub fn relabel(&mut self, from: &str, to: &str) {
        let fix = |at: &mut Occurrence| {
            if at.source == from {
                at.source = to.to_string();
            }
        };
        for job in self.jobs.values_mut() {
            job.for_each_occurrence(fix);
        }
        self.relabel_findings(from, to);
    }
}
