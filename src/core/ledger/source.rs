//! Reading ledgers: WAL files (SPEC 11) decoded into events and folded. A frame that is not a
//! valid event (fields, job id, fence token, or an `hlc` text that disagrees with the frame
//! header) becomes a [`Finding`] with its LSN and offset; damage that stops reading (a torn tail,
//! or damage followed by valid frames) becomes a finding too, after folding every valid frame.
//! A file that is not a WAL at all (bad header) is an error.

use super::checkpoint::{FoldState, STATE_FORMAT};
use super::contest::Occurrence;
use super::event::{Event, EventType};
use super::fold::{Finding, Fold, FoldSink};
use super::progress::{self, ProgressRef};
use super::LedgerError;
use crate::core::wal::{self, FrameRef, FrameType, Outcome, WalHlc, WalReader};
use std::path::Path;

/// Decodes one event frame, checking its HLC text against the header.
pub fn decode_frame(f: &FrameRef<'_>) -> Result<Option<Event>, String> {
    let FrameType::Event(ty) = f.frame_type else {
        return Ok(None);
    };
    let event = Event::from_payload(ty, f.payload).map_err(|e| e.to_string())?;
    let header = f.hlc;
    match WalHlc::from_hlc(event.hlc()) {
        Ok(h) if h == header => Ok(Some(event)),
        _ => Err(format!(
            "the payload's hlc {} does not agree with the frame header's HLC {}",
            event.hlc(),
            header.text(Some(&event.hlc().node))
        )),
    }
}

/// A progress report in canonical form whose HLC agrees with its frame header, read without
/// allocating; `None` sends the frame down the general path.
fn fast_progress<'a>(f: &FrameRef<'a>, nodes: &mut NodeHashes) -> Option<ProgressRef<'a>> {
    if f.frame_type != FrameType::Event(EventType::JobProgressReported) {
        return None;
    }
    let p = progress::parse(f.payload)?;
    let hash = nodes.of(p.hlc.node);
    (WalHlc::from_parts(p.hlc.physical, p.hlc.logical, hash) == Some(f.hlc)).then_some(p)
}

/// The node hash (SHA-256 prefix) of the last node id seen: a node log names one node.
#[derive(Default)]
struct NodeHashes {
    node: String,
    hash: u64,
}

impl NodeHashes {
    fn of(&mut self, node: &str) -> u64 {
        if self.node.is_empty() || self.node != node {
            self.node.clear();
            self.node.push_str(node);
            self.hash = wal::node_hash(node);
        }
        self.hash
    }
}

/// What reading one ledger produced.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    pub frames: u64,
    pub events: u64,
    pub first_lsn: Option<u64>,
    pub last_lsn: Option<u64>,
    /// The PostgreSQL confirmations the checkpoint recorded (none without one).
    pub confirmations: super::confirmations::Confirmations,
}

/// Folds the frames of one WAL with LSN above `after` into `fold`, labelled `label`.
pub fn fold_frames(
    path: &Path,
    label: &str,
    after: u64,
    fold: &mut impl FoldSink,
) -> Result<ReadSummary, LedgerError> {
    let reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
    let mut summary = ReadSummary::default();
    let mut nodes = NodeHashes::default();
    let source: std::sync::Arc<str> = label.into();
    // Bytes read, told to the sink about every MiB (a console's progress).
    let mut reported = 0u64;
    let recovery = wal::recovery::scan(reader, |f| {
        if f.offset - reported >= 1 << 20 {
            fold.read(f.offset - reported);
            reported = f.offset;
        }
        summary.frames += 1;
        summary.first_lsn.get_or_insert(f.lsn);
        summary.last_lsn = Some(f.lsn);
        if f.lsn <= after {
            return;
        }
        if let Some(p) = fast_progress(f, &mut nodes) {
            summary.events += 1;
            fold.progress(&p);
            return;
        }
        match decode_frame(f) {
            Ok(None) => {}
            Ok(Some(event)) => {
                summary.events += 1;
                let at = || Occurrence {
                    source: source.clone(),
                    lsn: f.lsn,
                };
                fold.event(event, f.payload, at);
            }
            Err(message) => fold.finding(Finding {
                source: label.to_string(),
                lsn: Some(f.lsn),
                offset: Some(f.offset),
                message,
            }),
        }
    })
    .map_err(|e| LedgerError::io("read", path, e))?;
    fold.read(recovery.file_len.saturating_sub(reported));
    if let (Some(wal::Damage::BadHeader(reason)), _) = (&recovery.damage, recovery.outcome) {
        return Err(LedgerError::NotAWal {
            path: path.to_path_buf(),
            reason: reason.clone(),
        });
    }
    if recovery.outcome != Outcome::Clean {
        let damage = recovery
            .damage
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_default();
        fold.finding(Finding {
            source: label.to_string(),
            lsn: summary.last_lsn.map(|l| l + 1),
            offset: Some(recovery.end),
            message: format!(
                "{}: {damage}; the frames before it were folded",
                recovery.outcome.name()
            ),
        });
    }
    Ok(summary)
}

/// Folds one ledger: its checkpoint (if any), then the frames after the checkpoint's applied LSN.
pub fn fold_with_checkpoint(path: &Path, label: &str) -> Result<(Fold, ReadSummary), LedgerError> {
    let mut fold = Fold::default();
    let summary = fold_ledger_into(path, label, &mut fold)?;
    Ok((fold, summary))
}

/// Folds one ledger (its checkpoint, if any, then the frames after it) into `fold`, which may
/// already hold other ledgers: no second copy of the job states is made.
pub fn fold_ledger_into(
    path: &Path,
    label: &str,
    fold: &mut impl FoldSink,
) -> Result<ReadSummary, LedgerError> {
    let mut confirmations = super::confirmations::Confirmations::new();
    let after = match wal::checkpoint::load(path)? {
        Some(cp) if !cp.state.is_null() => {
            let mut state: FoldState =
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
            confirmations = std::mem::take(&mut state.confirmations);
            fold.join(state.into_fold(label));
            cp.applied_lsn
        }
        _ => 0,
    };
    let mut summary = fold_frames(path, label, after, fold)?;
    summary.confirmations = confirmations;
    Ok(summary)
}

/// Folds one ledger (its checkpoint, if any, then the frames after it).
pub fn fold_ledger(path: &Path, label: &str) -> Result<Fold, LedgerError> {
    fold_with_checkpoint(path, label).map(|(f, _)| f)
}
