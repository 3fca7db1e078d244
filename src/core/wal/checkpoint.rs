//! Checkpoint and compaction (SPEC 11). A checkpoint records the LSN watermarks and the applied
//! state in `<log>.checkpoint.json` (written atomically) and raises the COMPACTED watermark to the
//! APPLIED one. Compaction rewrites the log without the frames at or below the COMPACTED
//! watermark: the kept frames (event frames with their current state in the state byte) go to a
//! temporary file beside the log, which is fdatasynced, renamed over the log, and the directory
//! fsynced. LSNs are kept, so the compacted log starts at the first kept LSN.

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
    /// The LSN up to which `state` includes the log's events (the APPLIED watermark).
    pub applied_lsn: u64,
    /// The applied state, as the state machine (e.g. the job ledger) serialised it.
    pub state: serde_json::Value,
}

impl Checkpoint {
    pub fn new(last_lsn: u64, marks: &Watermarks, state: serde_json::Value) -> Checkpoint {
        Checkpoint {
            version: 1,
            last_lsn,
            watermarks: marks
                .bands()
                .into_iter()
                .map(|(s, l)| (s.name().to_string(), l))
                .collect(),
            applied_lsn: marks.covered(FrameState::Applied),
            state,
        }
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
    crate::core::file_output::write_atomic(&path, &text)
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

/// Compacts the log at `path` (no writer may have it open: the write lock is taken).
pub fn compact(path: &Path) -> Result<CompactReport, WalError> {
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| WalError::io("open", path, e))?;
    super::file::lock_exclusive(&lock, path)?;
    let mut marks = load_marks(path)?;
    let recovery = recover_with(path, |f| {
        if let Some(w) = (f.frame_type == FrameType::Watermark)
            .then(|| Watermark::decode(f.payload))
            .flatten()
        {
            marks.apply(w);
        }
    })?;
    let compacted = marks.covered(FrameState::Compacted);
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
