//! Checkpoint and compaction (SPEC 11). A checkpoint records the LSN watermarks and the applied
//! state in `<log>.checkpoint.json` (written atomically) with the LSN up to which that state holds
//! the log's events, as the state machine says (never inferred from the watermarks: a COMPACTED
//! watermark raised without a checkpoint is not claimed, [`Checkpoint::unheld_compacted`]), and
//! raises the COMPACTED watermark to it. Compaction rewrites the log without the frames at or
//! below the COMPACTED watermark: the kept frames (event frames with their current state in the
//! state byte) go to a temporary file beside the log, which is fdatasynced, renamed over the log,
//! and the directory fsynced. LSNs are kept, so the compacted log starts at the first kept LSN.
//!
//! Compaction drops only what a checkpoint holds: it refuses (changing nothing) when the COMPACTED
//! watermark would drop a frame above the applied LSN of the checkpoint beside the log, or when
//! there is no checkpoint and it would drop any frame. A COMPACTED watermark can arrive without a
//! checkpoint (`wal advance`, or anti-entropy copying the frame from a compacted replica), and
//! dropping by it alone would lose events no checkpoint holds. Malformed watermark frames
//! ([`super::frame::BadWatermark`]) are not applied (and are kept).

use super::error::WalError;
use super::frame::{encode_frame_into, file_header, FrameState, FrameType, Watermark};
use super::reader::WalReader;
use super::recovery::{recover_with, Recovery};
use super::watermarks::Watermarks;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest checkpoint file read back (the applied state is the caller's, kept bounded).
const MAX_CHECKPOINT_BYTES: u64 = 256 << 20;

/// What a checkpoint records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub version: u32,
    /// The last durable LSN when the checkpoint was taken.
    pub last_lsn: u64,
    /// For each state above PENDING, the highest LSN its watermarks cover.
    pub watermarks: BTreeMap<String, u64>,
    /// The LSN up to which `state` includes the log's events, as the state machine that made
    /// `state` said (never inferred from the watermarks: see [`Checkpoint::unheld_compacted`]).
    pub applied_lsn: u64,
    /// The applied state, as the state machine (e.g. the job ledger) serialised it.
    pub state: serde_json::Value,
}

impl Checkpoint {
    /// A checkpoint of `state`, which holds the log's events up to `applied_lsn`.
    pub fn new(
        last_lsn: u64,
        applied_lsn: u64,
        marks: &Watermarks,
        state: serde_json::Value,
    ) -> Checkpoint {
        Checkpoint {
            version: 1,
            last_lsn,
            watermarks: marks
                .bands()
                .into_iter()
                .map(|(s, l)| (s.name().to_string(), l))
                .collect(),
            applied_lsn,
            state,
        }
    }

    /// The LSNs the recorded COMPACTED watermark covers above the applied LSN, if any: frames
    /// the watermark says may be dropped although this checkpoint's state does not hold them
    /// (a watermark raised by hand with `wal advance`, or copied by `ledger sync` from a
    /// compacted copy). The checkpoint does not claim them, so compaction refuses to drop them
    /// until a checkpoint whose state holds them is taken.
    pub fn unheld_compacted(&self) -> Option<std::ops::RangeInclusive<u64>> {
        let compacted = self
            .watermarks
            .get(FrameState::Compacted.name())
            .copied()
            .unwrap_or(0);
        (compacted > self.applied_lsn).then(|| self.applied_lsn + 1..=compacted)
    }

    /// What [`Checkpoint::unheld_compacted`] finds, as a sentence for the operator.
    pub fn unheld_compacted_message(&self) -> Option<String> {
        let r = self.unheld_compacted()?;
        Some(format!(
            "the COMPACTED watermark covers LSN {} but the applied state holds LSNs up to {} only: LSNs {}..={} were marked COMPACTED without being applied (a watermark raised by `wal advance` or copied by `ledger sync`), so this checkpoint does not claim them and compaction will refuse to drop them until a checkpoint holds them",
            r.end(),
            self.applied_lsn,
            r.start(),
            r.end()
        ))
    }

    /// The watermarks this checkpoint recorded.
    pub fn marks(&self) -> Watermarks {
        let mut m = Watermarks::default();
        for (name, &lsn) in &self.watermarks {
            if let Some(state) = FrameState::from_name(name).filter(|s| *s != FrameState::Pending) {
                m.apply(Watermark { state, lsn });
            }
        }
        m
    }
}

/// `<log>.checkpoint.json`.
pub fn checkpoint_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".checkpoint.json");
    log.with_file_name(name)
}

/// Writes the checkpoint beside the log atomically (temp file, fsync, rename, fsync directory).
pub fn write_checkpoint(log: &Path, cp: &Checkpoint) -> Result<PathBuf, WalError> {
    let path = checkpoint_path(log);
    let text = serde_json::to_vec_pretty(cp).map_err(|e| WalError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    crate::core::file_output::write_atomic_like(&path, &text, log)
        .map_err(|e| WalError::io("write", &path, e.source))?;
    Ok(path)
}

/// The checkpoint beside the log, if there is one.
pub fn load(log: &Path) -> Result<Option<Checkpoint>, WalError> {
    let path = checkpoint_path(log);
    let file = match crate::core::file_input::open_regular(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(WalError::io("open", &path, e)),
    };
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_CHECKPOINT_BYTES + 1),
        &mut text,
    )
    .map_err(|e| WalError::io("read", &path, e))?;
    if text.len() as u64 > MAX_CHECKPOINT_BYTES {
        return Err(WalError::Invalid {
            path,
            message: format!("larger than {MAX_CHECKPOINT_BYTES} bytes"),
        });
    }
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| WalError::Invalid {
            path,
            message: format!("not a WAL checkpoint: {e}"),
        })
}

/// The watermarks of the checkpoint beside the log (none without one).
pub fn load_marks(log: &Path) -> Result<Watermarks, WalError> {
    Ok(load(log)?.map(|c| c.marks()).unwrap_or_default())
}

/// Refuses a compaction that would drop a frame above what the checkpoint holds (`held`: its
/// applied LSN, or why there is none usable).
fn check_covered(
    path: &Path,
    recovery: &Recovery,
    compacted: u64,
    held: &Result<u64, String>,
) -> Result<(), WalError> {
    let applied = *held.as_ref().unwrap_or(&0);
    let (Some(first), Some(last)) = (recovery.first_lsn, recovery.last_lsn) else {
        return Ok(());
    };
    let from = first.max(applied.saturating_add(1));
    let to = last.min(compacted);
    if from > to {
        return Ok(());
    }
    let cp = checkpoint_path(path);
    let cp = crate::core::text::visible_path(&cp);
    let why = match held {
        Ok(a) => format!("the checkpoint {cp} records LSNs up to {a} as applied"),
        Err(w) if w.is_empty() => format!("there is no checkpoint beside the log ({cp})"),
        Err(w) => format!("the checkpoint {cp} cannot be used: {w}"),
    };
    Err(WalError::Invalid {
        path: path.to_path_buf(),
        message: format!(
            "compaction refused, nothing changed: the COMPACTED watermark covers LSN {compacted} but {why}, so dropping LSNs {from}..={to} would lose frames no checkpoint holds. Take a checkpoint first (`airlock ledger checkpoint` for a job ledger), then compact again"
        ),
    })
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactReport {
    pub compacted_lsn: u64,
    pub frames_before: u64,
    pub frames_after: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub first_lsn_after: Option<u64>,
    pub last_lsn: Option<u64>,
    /// What recovery found before compacting (a torn tail is cut first).
    #[serde(skip)]
    pub recovery: Option<Recovery>,
}

/// Compacts the log at `path` (no writer may have it open: the write lock is taken). Refuses
/// (nothing changed) to drop a frame that the checkpoint beside the log does not cover.
pub fn compact(path: &Path) -> Result<CompactReport, WalError> {
    compact_with(path, |_| Ok(()))
}

/// [`compact`], with the state machine's say on whether the checkpoint beside the log holds its
/// applied state: `accept` returning `Err(why)` makes compaction treat the log as having no
/// checkpoint (the job ledger refuses a checkpoint without a fold state).
pub fn compact_with(
    path: &Path,
    accept: impl FnOnce(&Checkpoint) -> Result<(), String>,
) -> Result<CompactReport, WalError> {
    let lock = crate::core::file_input::open_regular_with(
        path,
        std::fs::OpenOptions::new().read(true).write(true),
    )
    .map_err(|e| WalError::io("open", path, e))?;
    super::file::lock_exclusive(&lock, path)?;
    let checkpoint = load(path)?;
    let mut marks = checkpoint
        .as_ref()
        .map(Checkpoint::marks)
        .unwrap_or_default();
    let recovery = recover_with(path, |f| {
        if let Some(Ok(w)) = f.checked_watermark() {
            marks.apply(w);
        }
    })?;
    let compacted = marks.covered(FrameState::Compacted);
    let held = match &checkpoint {
        Some(cp) => accept(cp).map(|()| cp.applied_lsn),
        None => Err(String::new()),
    };
    check_covered(path, &recovery, compacted, &held)?;
    let mut out = crate::core::file_output::AtomicFile::create(path)
        .map_err(|e| WalError::io("create temporary file for", path, e.source))?;
    let mut reader = WalReader::open(path).map_err(|e| WalError::io("open", path, e))?;
    let w = out.writer();
    let werr = |e| WalError::io("write compacted copy of", path, e);
    w.write_all(&file_header()).map_err(werr)?;
    let mut report = CompactReport {
        compacted_lsn: compacted,
        frames_before: recovery.valid_frames,
        frames_after: 0,
        bytes_before: recovery.end,
        bytes_after: super::frame::FILE_HEADER_LEN,
        first_lsn_after: None,
        last_lsn: recovery.last_lsn,
        recovery: None,
    };
    let mut frame = Vec::new();
    let mut left = recovery.valid_frames;
    while left > 0 {
        let Some(f) = reader
            .next_frame()
            .map_err(|e| WalError::io("read", path, e))?
        else {
            break;
        };
        left -= 1;
        if f.lsn <= compacted {
            continue;
        }
        let state = if f.frame_type == FrameType::Watermark {
            f.state
        } else {
            marks.current(f.state, f.lsn)
        };
        frame.clear();
        encode_frame_into(&mut frame, f.lsn, f.hlc, state, f.frame_type, &[f.payload]);
        w.write_all(&frame).map_err(werr)?;
        report.frames_after += 1;
        report.bytes_after += frame.len() as u64;
        report.first_lsn_after.get_or_insert(f.lsn);
    }
    out.commit()
        .map_err(|e| WalError::io("replace", path, e.source))?;
    drop(lock);
    report.recovery = Some(recovery);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::wal::frame::{node_hash, WalHlc};

    /// `basic.alwl` (LSN 1..=10, gate-a) with a watermark frame appended at LSN 11.
    fn basic_with(dir: &Path, wm: Watermark) -> PathBuf {
        let mut bytes = std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector");
        let hlc = WalHlc::from_parts(1_767_614_400_041, 0, node_hash("gate-a")).expect("fits");
        encode_frame_into(
            &mut bytes,
            11,
            hlc,
            FrameState::Pending,
            FrameType::Watermark,
            &[&wm.encode()],
        );
        let path = dir.join("n.alwl");
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn checkpoint_at(log: &Path, applied_lsn: u64) {
        let cp = Checkpoint {
            version: 1,
            last_lsn: 10,
            watermarks: BTreeMap::new(),
            applied_lsn,
            state: serde_json::json!({"applied": applied_lsn}),
        };
        write_checkpoint(log, &cp).expect("checkpoint");
    }

    const COMPACTED_5: Watermark = Watermark {
        state: FrameState::Compacted,
        lsn: 5,
    };

    #[test]
    fn compaction_without_a_checkpoint_refuses_to_drop_frames_and_changes_nothing() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = basic_with(d.path(), COMPACTED_5);
        let before = std::fs::read(&path).expect("read");
        let e = compact(&path).expect_err("no checkpoint holds LSN 1..=5");
        let text = e.to_string();
        assert!(
            text.contains("COMPACTED watermark covers LSN 5")
                && text.contains("no checkpoint beside the log")
                && text.contains("LSNs 1..=5")
                && text.contains("Take a checkpoint first"),
            "{text}"
        );
        assert_eq!(std::fs::read(&path).expect("read"), before, "unchanged");
    }

    #[test]
    fn compaction_refuses_to_drop_frames_above_the_checkpoints_applied_lsn() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = basic_with(d.path(), COMPACTED_5);
        checkpoint_at(&path, 3);
        let before = std::fs::read(&path).expect("read");
        let text = compact(&path).expect_err("LSN 4..=5 not held").to_string();
        assert!(
            text.contains("records LSNs up to 3 as applied") && text.contains("LSNs 4..=5"),
            "{text}"
        );
        assert_eq!(std::fs::read(&path).expect("read"), before, "unchanged");
        // A state machine that does not accept the checkpoint: as if there were none.
        checkpoint_at(&path, 5);
        let text = compact_with(&path, |_| Err("not mine".into()))
            .expect_err("refused")
            .to_string();
        assert!(text.contains("cannot be used: not mine"), "{text}");
        // Covered by the checkpoint: compacted.
        let r = compact(&path).expect("compact");
        assert_eq!((r.compacted_lsn, r.first_lsn_after), (5, Some(6)));
        assert_eq!(r.frames_after, 6);
    }

    #[test]
    fn compaction_that_drops_nothing_needs_no_checkpoint() {
        let d = tempfile::tempdir().expect("tempdir");
        let path = basic_with(
            d.path(),
            Watermark {
                state: FrameState::Regional,
                lsn: 10,
            },
        );
        let r = compact(&path).expect("nothing to drop");
        assert_eq!((r.compacted_lsn, r.frames_after), (0, 11));
    }

    #[test]
    fn a_malformed_compacted_watermark_is_not_applied() {
        let d = tempfile::tempdir().expect("tempdir");
        // COMPACTED 999 in the frame at LSN 11: it covers frames not in the log.
        let path = basic_with(
            d.path(),
            Watermark {
                state: FrameState::Compacted,
                lsn: 999,
            },
        );
        checkpoint_at(&path, 10);
        let r = compact(&path).expect("compact");
        assert_eq!(
            (r.compacted_lsn, r.frames_after),
            (0, 11),
            "nothing dropped"
        );
    }
}
