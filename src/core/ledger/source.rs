//! Reading ledgers: WAL files (SPEC 11) decoded into events and folded. A frame that is not a
//! valid event (fields, job id, fence token, or an `hlc` text that disagrees with the frame
//! header) becomes a [`Finding`] with its LSN and offset; damage that stops reading (a torn tail,
//! or damage followed by valid frames) becomes a finding too, after folding every valid frame.
//! A file that is not a WAL at all (bad header) is an error.
//!
//! Frames that recovery accepts (bytes and CRCs) can still break SPEC 11, and each is a finding
//! instead of being applied or skipped in silence: a watermark frame whose payload is not exactly
//! `state u8 | lsn u64` with a known state, or that covers its own LSN or later (an event frame
//! whose type byte was set to 0 is one); a frame whose HLC is not above its predecessor's; and a
//! log that starts above LSN 1 with no checkpoint covering the LSNs before its first frame (they
//! were compacted away, so their events are missing from the fold; not when another copy of the
//! log given to the same fold holds them, [`super::copies`]).

use super::checkpoint::fold_state;
use super::contest::Occurrence;
use super::copies::HeldElsewhere;
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
    /// The last node id seen, if any.
    fn last(&self) -> Option<&str> {
        (!self.node.is_empty()).then_some(self.node.as_str())
    }

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

/// Folds the frames of one WAL with LSN above `after` into `fold`, labelled `label`, but for those
/// `held` says another copy of the same log folds ([`super::copies`]).
pub fn fold_frames(
    path: &Path,
    label: &str,
    after: u64,
    held: &HeldElsewhere,
    fold: &mut impl FoldSink,
) -> Result<ReadSummary, LedgerError> {
    let reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
    let mut summary = ReadSummary::default();
    let mut nodes = NodeHashes::default();
    let source: std::sync::Arc<str> = label.into();
    // Bytes read, told to the sink about every MiB (a console's progress).
    let mut reported = 0u64;
    let mut previous: Option<(u64, WalHlc)> = None;
    let recovery = wal::recovery::scan(reader, |f| {
        if f.offset - reported >= 1 << 20 {
            fold.read(f.offset - reported);
            reported = f.offset;
        }
        summary.frames += 1;
        summary.first_lsn.get_or_insert(f.lsn);
        summary.last_lsn = Some(f.lsn);
        let before = previous.replace((f.lsn, f.hlc));
        if f.lsn <= after || held.holds(f.lsn) {
            return;
        }
        if let Some((lsn, hlc)) = before.filter(|(_, h)| f.hlc <= *h) {
            let node = nodes
                .last()
                .map(str::to_string)
                .or_else(|| wal::inspect::node_of_event(f));
            let node = node.as_deref();
            fold.finding(Finding {
                source: label.to_string(),
                lsn: Some(f.lsn),
                offset: Some(f.offset),
                message: format!(
                    "HLC {} is not above the previous frame's (LSN {lsn}, HLC {}): HLCs strictly increase in a node WAL (SPEC 11)",
                    f.hlc.text(node),
                    hlc.text(node)
                ),
                torn_tail: false,
            });
        }
        if let Some(Err(bad)) = f.checked_watermark() {
            fold.finding(Finding {
                source: label.to_string(),
                lsn: Some(f.lsn),
                offset: Some(f.offset),
                message: format!("bad watermark frame, not applied: {bad}"),
                torn_tail: false,
            });
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
                torn_tail: false,
            }),
        }
    })
    .map_err(|e| LedgerError::io("read", path, e))?;
    fold.read(recovery.file_len.saturating_sub(reported));
    if let Some(first) = summary.first_lsn.filter(|&l| l > after.saturating_add(1)) {
        missing_start(label, after, first, held, fold);
    }
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
            torn_tail: recovery.outcome == Outcome::TornTail,
        });
    }
    Ok(summary)
}

/// The finding for a log that starts at `first`, above its checkpoint's applied LSN + 1 (`after`):
/// the LSNs between were compacted or cut away. Those another copy of the log holds are folded
/// from it ([`super::copies`]), so only the LSNs no copy holds are reported.
fn missing_start(
    label: &str,
    after: u64,
    first: u64,
    held: &HeldElsewhere,
    fold: &mut impl FoldSink,
) {
    let gaps = held.unheld(after + 1, first - 1);
    let Some(&(from, _)) = gaps.first() else {
        return;
    };
    let covered = if after == 0 {
        "there is no checkpoint (with a ledger fold state) beside it".to_string()
    } else {
        format!("its checkpoint covers LSNs up to {after} only")
    };
    let lsns = gaps
        .iter()
        .map(|(f, t)| format!("{f}..={t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let elsewhere = if gaps == [(after + 1, first - 1)] {
        ""
    } else {
        " (the other copies of this log given hold the rest)"
    };
    fold.finding(Finding {
        source: label.to_string(),
        // No offset: the missing frames are nowhere in this file.
        lsn: Some(from),
        offset: None,
        message: format!(
            "the log starts at LSN {first} but {covered}: the events of LSNs {lsns} were compacted or cut away and are missing from this fold{elsewhere}"
        ),
        torn_tail: false,
    });
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
    fold_copy_into(path, label, &HeldElsewhere::default(), fold)
}

/// [`fold_ledger_into`] for one of several copies of a log: the frames `held` names, and the
/// checkpoint if `held` says so, are folded from another copy ([`super::copies::check`]).
pub fn fold_copy_into(
    path: &Path,
    label: &str,
    held: &HeldElsewhere,
    fold: &mut impl FoldSink,
) -> Result<ReadSummary, LedgerError> {
    let mut confirmations = super::confirmations::Confirmations::new();
    let after = match wal::checkpoint::load(path)? {
        // Another copy's checkpoint holds these LSNs and is folded instead: only skip them.
        Some(cp) if !cp.state.is_null() && held.skips_checkpoint() => cp.applied_lsn,
        Some(cp) if !cp.state.is_null() => {
            let applied = cp.applied_lsn;
            let mut state = fold_state(path, cp)?;
            confirmations = std::mem::take(&mut state.confirmations);
            fold.join(state.into_fold(label));
            applied
        }
        _ => 0,
    };
    let mut summary = fold_frames(path, label, after, held, fold)?;
    summary.confirmations = confirmations;
    Ok(summary)
}

/// Folds one ledger (its checkpoint, if any, then the frames after it).
pub fn fold_ledger(path: &Path, label: &str) -> Result<Fold, LedgerError> {
    fold_with_checkpoint(path, label).map(|(f, _)| f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::wal::frame::{edit_frame, set_physical};
    use crate::core::wal::WalOptions;
    use std::path::PathBuf;

    /// Frame offsets of `basic.alwl` by LSN (see `core::wal::inspect`'s tests).
    const AT: [usize; 11] = [0, 8, 206, 363, 520, 563, 748, 900, 943, 1131, 1315];

    fn basic() -> Vec<u8> {
        std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector")
    }

    fn write(dir: &Path, bytes: &[u8]) -> PathBuf {
        let path = dir.join("n.alwl");
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn findings(path: &Path) -> Vec<Finding> {
        fold_ledger(path, "n").expect("fold").findings()
    }

    #[test]
    fn the_vector_folds_without_findings() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(findings(&write(d.path(), &basic())), vec![]);
    }

    #[test]
    fn a_malformed_watermark_frame_is_a_finding() {
        let d = tempfile::tempdir().expect("tempdir");
        // The JobCreated at LSN 5 retyped as a watermark (CRC recomputed).
        let mut b = basic();
        edit_frame(&mut b, AT[5], |f| f[33] = 0);
        let f = findings(&write(d.path(), &b));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].lsn, f[0].offset), (Some(5), Some(563)));
        assert!(
            f[0].message.contains("bad watermark frame"),
            "{}",
            f[0].message
        );
        // An unknown state; a watermark covering LSNs at or after its own.
        let mut b = basic();
        edit_frame(&mut b, AT[4], |f| f[34] = 9);
        let f = findings(&write(d.path(), &b));
        assert!(f[0].message.contains("state byte 9"), "{f:?}");
        let mut b = basic();
        edit_frame(&mut b, AT[10], |f| {
            f[35..43].copy_from_slice(&999u64.to_be_bytes())
        });
        let f = findings(&write(d.path(), &b));
        assert_eq!(f[0].lsn, Some(10));
        assert!(f[0].message.contains("LSN 999"), "{f:?}");
    }

    #[test]
    fn a_frame_whose_hlc_does_not_increase_is_a_finding() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut b = basic();
        set_physical(&mut b, AT[6], 1_767_614_399_010);
        let f = findings(&write(d.path(), &b));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].lsn, f[0].offset), (Some(6), Some(748)));
        assert!(
            f[0].message.contains("1767614399010:0:gate-a") && f[0].message.contains("LSN 5"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_log_starting_above_lsn_1_without_a_covering_checkpoint_is_a_finding() {
        let d = tempfile::tempdir().expect("tempdir");
        // LSN 6..=10 only: LSN 1..=5 compacted away with no checkpoint holding them.
        let b = basic();
        let mut cut = b[..8].to_vec();
        cut.extend_from_slice(&b[AT[6]..]);
        let f = findings(&write(d.path(), &cut));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].lsn, Some(1));
        assert!(
            f[0].message.contains("starts at LSN 6") && f[0].message.contains("1..=5"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn a_checkpointed_and_compacted_ledger_folds_without_findings() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = write(d.path(), &basic());
        let mut log = super::super::append::LedgerLog::open(&path, None, WalOptions::default())
            .expect("open");
        log.checkpoint().expect("checkpoint");
        log.close().expect("close");
        let before = fold_ledger(&path, "n").expect("fold").views();
        let r = super::super::append::compact(&path).expect("compact");
        assert!(r.first_lsn_after.is_some_and(|l| l > 1), "{r:?}");
        let fold = fold_ledger(&path, "n").expect("fold");
        assert_eq!(fold.findings(), vec![]);
        assert_eq!(fold.views(), before);
    }

    #[test]
    fn ledger_compaction_needs_a_checkpoint_with_a_fold_state() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = write(d.path(), &basic());
        let w = wal::WalWriter::open(&path, "gate-a", WalOptions::default()).expect("open");
        // A WAL checkpoint without a ledger fold state raises COMPACTED to APPLIED.
        w.advance(wal::Watermark {
            state: wal::FrameState::Applied,
            lsn: 5,
        })
        .expect("advance");
        w.checkpoint(5, serde_json::Value::Null)
            .expect("checkpoint");
        w.close().expect("close");
        let before = std::fs::read(&path).expect("read");
        let e = super::super::append::compact(&path).expect_err("no fold state");
        assert!(e.to_string().contains("holds no ledger fold state"), "{e}");
        assert_eq!(std::fs::read(&path).expect("read"), before, "unchanged");
    }
}
