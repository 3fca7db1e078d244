//! One side of anti-entropy: a ledger WAL file, its tree, and the only write anti-entropy makes —
//! appending, byte for byte, frames that extend the log (never replacing a frame it holds).

use super::block_index::{self, BlockIndex};
use super::protocol::{LsnSpan, NodeId, Summary};
use super::tree::{LedgerTree, RawFrame, TreeBuilder};
use crate::core::ledger::LedgerError;
use crate::core::text::ShowPath;
use crate::core::wal::{self, frame::RawHeader, Outcome, WalHlc, WalReader, FRAME_HEADER_LEN};
use serde::Serialize;
use std::fs::{File, Metadata};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Covered blocks re-read and re-hashed at random each time an index is used (besides the last).
const SPOT_CHECKS: u64 = 16;

/// How far a side trusts the block index beside its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Use the index after its cheap checks (docs/ledger.md, "Trusting the block index").
    Index,
    /// Read, check and hash every frame (the index is rewritten).
    Full,
}

/// How one side's tree was obtained (`blockIndex` in `ledger diff --json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexNote {
    pub path: String,
    /// Whether the block index was used.
    pub used: bool,
    /// Frames whose hashes came from the index.
    pub covered_frames: u64,
    /// Frames read, checked and hashed in this run.
    pub hashed_frames: u64,
    pub note: String,
}

/// A ledger file taking part in anti-entropy.
#[derive(Debug)]
pub struct Replica {
    path: PathBuf,
    first_lsn: Option<u64>,
    last_lsn: Option<u64>,
    last_hlc: Option<WalHlc>,
    tree: Option<LedgerTree>,
    trust: Trust,
    note: IndexNote,
    /// The torn tail recovery cut before frames were appended here (reported by the session).
    cut: Option<TornTailCut>,
}

/// A torn tail that recovery cut from a copy before anti-entropy appended to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TornTailCut {
    pub path: PathBuf,
    pub offset: u64,
    pub cut_bytes: u64,
    pub saved_tail: Option<PathBuf>,
    pub valid_frames: u64,
}

/// The part of a frame that names the event: everything but the CRC, the length and the state
/// byte (a compacted copy carries a later state in that byte; it is still the same frame).
pub fn identity(bytes: &[u8]) -> (&[u8], &[u8]) {
    (&bytes[8..32], &bytes[33..])
}

impl Replica {
    /// Opens a ledger read-only, using its block index when it passes its checks; a missing file
    /// is an empty ledger (sync may create it).
    pub fn open(path: &Path) -> Result<Replica, LedgerError> {
        Replica::open_with(path, Trust::Index)
    }

    /// The torn tail recovery cut from this copy before frames were appended to it, once.
    pub fn take_cut(&mut self) -> Option<TornTailCut> {
        self.cut.take()
    }

    /// [`Replica::open`] with the given trust in the block index.
    pub fn open_with(path: &Path, trust: Trust) -> Result<Replica, LedgerError> {
        let mut r = Replica {
            path: path.to_path_buf(),
            first_lsn: None,
            last_lsn: None,
            last_hlc: None,
            tree: None,
            trust,
            note: IndexNote {
                path: crate::core::text::visible_path(path),
                note: "no log yet".into(),
                ..IndexNote::default()
            },
            cut: None,
        };
        if !path.exists() {
            return Ok(r);
        }
        let file = crate::core::file_input::open_regular(path)
            .map_err(|e| LedgerError::io("open", path, e))?;
        let meta = file
            .metadata()
            .map_err(|e| LedgerError::io("stat", path, e))?;
        let why = match trust {
            Trust::Full => "a full check was asked for".to_string(),
            Trust::Index => match block_index::load(path, &file, &meta) {
                Ok(idx) => match r.open_indexed(file, &meta, idx) {
                    Ok(()) => return Ok(r),
                    Err(e @ LedgerError::IndexMismatch { .. }) => {
                        block_index::discard(path);
                        format!("{e}; the index was discarded")
                    }
                    Err(e) => return Err(e),
                },
                Err(why) => why.to_string(),
            },
        };
        let file = crate::core::file_input::open_regular(path)
            .map_err(|e| LedgerError::io("open", path, e))?;
        let meta = file
            .metadata()
            .map_err(|e| LedgerError::io("stat", path, e))?;
        r.open_full(file, &meta, &why)?;
        Ok(r)
    }

    /// The frames after the index's covered prefix are read, checked and hashed; the rest is the
    /// index's.
    fn open_indexed(
        &mut self,
        file: File,
        meta: &Metadata,
        idx: BlockIndex,
    ) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let (floor, covered) = (idx.floor, idx.frames());
        let last_covered = idx.lasts.last().copied().unwrap_or(0);
        let mut head = [0u8; FRAME_HEADER_LEN];
        file.read_exact_at(&mut head, last_covered)
            .map_err(|e| LedgerError::io("read", &path, e))?;
        let reader = WalReader::resume(file, idx.covered_len, floor + covered)
            .map_err(|e| LedgerError::io("read", &path, e))?;
        let mut builder = TreeBuilder::resume(&path, idx);
        let rec = wal::recovery::scan_raw(reader, |at, lsn, bytes| builder.push(at, lsn, bytes))
            .map_err(|e| LedgerError::io("read", &path, e))?;
        if rec.outcome == Outcome::Refused {
            return Err(wal::recovery::refusal(&path, &rec).into());
        }
        self.first_lsn = Some(floor);
        self.last_lsn = rec.last_lsn.or(Some(floor + covered - 1));
        self.last_hlc = rec.last_hlc.or(Some(RawHeader::parse(&head).hlc));
        let tree = builder.finish();
        tree.spot_check(SPOT_CHECKS)?;
        let hashed = tree.count - covered;
        self.note.used = true;
        self.note.covered_frames = covered;
        self.note.hashed_frames = hashed;
        self.note.note = format!(
            "block index used: {covered} frames covered (boundaries checked), {hashed} after them read, checked and hashed"
        );
        save_index(&path, meta, &tree);
        self.tree = Some(tree);
        Ok(())
    }

    /// One pass checks the log (as recovery would) and hashes its frames for the tree at its own
    /// floor, the floor a session almost always settles on.
    fn open_full(&mut self, file: File, meta: &Metadata, why: &str) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let reader = WalReader::new(file).map_err(|e| LedgerError::io("open", &path, e))?;
        let mut builder: Option<TreeBuilder> = None;
        let rec = wal::recovery::scan_raw(reader, |at, lsn, bytes| {
            builder
                .get_or_insert_with(|| TreeBuilder::new(&path, lsn))
                .push(at, lsn, bytes)
        })
        .map_err(|e| LedgerError::io("read", &path, e))?;
        if rec.outcome == Outcome::Refused {
            return Err(wal::recovery::refusal(&path, &rec).into());
        }
        self.first_lsn = rec.first_lsn;
        self.last_lsn = rec.last_lsn;
        self.last_hlc = rec.last_hlc;
        let tree = builder.map(TreeBuilder::finish);
        let hashed = tree.as_ref().map_or(0, |t| t.count);
        self.note.used = false;
        self.note.covered_frames = 0;
        self.note.hashed_frames = hashed;
        self.note.note = format!("{why}: every frame read, checked and hashed");
        if hashed < super::protocol::FANOUT {
            self.note.note += " (fewer than 256 frames: no full block to index)";
        }
        if let Some(t) = &tree {
            save_index(&path, meta, t);
        }
        self.tree = tree;
        Ok(())
    }

    /// How this side's tree was obtained.
    pub fn index_note(&self) -> &IndexNote {
        &self.note
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first LSN the log holds (1 for an empty log).
    pub fn floor(&self) -> u64 {
        self.first_lsn.unwrap_or(1)
    }

    pub fn next_lsn(&self) -> u64 {
        self.last_lsn.map_or(1, |l| l + 1)
    }

    /// Node hash of the log's frames (every frame of a node log carries the same one).
    pub fn node_hash(&self) -> Option<u64> {
        self.last_hlc.map(|h| h.node_hash)
    }

    /// The tree over frames with LSN >= `floor` (built once per floor; at the log's own floor
    /// through the block index, as when opening).
    pub fn tree(&mut self, floor: u64) -> Result<&LedgerTree, LedgerError> {
        let stale = self.tree.as_ref().is_none_or(|t| t.floor != floor);
        if stale {
            let t = if self.last_lsn.is_none() {
                LedgerTree::empty(&self.path, floor)
            } else if floor == self.floor() {
                let note = self.note.clone();
                let fresh = Replica::open_with(&self.path, self.trust)?;
                self.note = note;
                fresh
                    .tree
                    .unwrap_or_else(|| LedgerTree::empty(&self.path, floor))
            } else {
                LedgerTree::build(&self.path, floor)?
            };
            self.tree = Some(t);
        }
        self.tree
            .as_ref()
            .ok_or_else(|| LedgerError::Usage("tree not built".into()))
    }

    /// Runs `f` on the tree at `floor`. When reading frames shows that the block index does not
    /// describe the log, the index is discarded, the tree rebuilt from every frame, the reason
    /// kept in [`Replica::index_note`], and `f` runs again.
    fn on_tree<T>(
        &mut self,
        floor: u64,
        f: impl Fn(&LedgerTree) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        match f(self.tree(floor)?) {
            Err(e @ LedgerError::IndexMismatch { .. }) => {
                tracing::warn!(error = %e, "ledger block index discarded");
                block_index::discard(&self.path);
                self.trust = Trust::Full;
                let fresh = Replica::open_with(&self.path, Trust::Full)?;
                self.note = fresh.note;
                self.note.note = format!(
                    "{e}: the index was discarded and every frame read, checked and hashed again"
                );
                self.tree = fresh.tree;
                f(self.tree(floor)?)
            }
            r => r,
        }
    }

    /// The summaries of a node's children in the tree at `floor`.
    pub fn children(&mut self, floor: u64, node: NodeId) -> Result<Vec<Summary>, LedgerError> {
        self.on_tree(floor, |t| t.children(node))
    }

    /// The frames in `spans` (LSNs), in LSN order.
    pub fn frames_in(
        &mut self,
        floor: u64,
        spans: &[LsnSpan],
    ) -> Result<Vec<RawFrame>, LedgerError> {
        self.on_tree(floor, |tree| {
            let mut out = Vec::new();
            for s in spans {
                let from = s.from.max(floor) - floor;
                let to = s.to.max(floor) - floor;
                out.extend(tree.frames(from, to)?);
            }
            Ok(out)
        })
    }

    /// Appends the offered frames that extend this log: those from its next LSN on, consecutive,
    /// of the same node, with increasing HLCs — and only if every offered frame it already has an
    /// LSN for is the same frame. Returns the LSNs appended (durable: fdatasynced).
    pub fn accept(&mut self, offer: &[RawFrame]) -> Result<Vec<u64>, LedgerError> {
        let next = self.next_lsn();
        let held: Vec<LsnSpan> = offer
            .iter()
            .filter(|f| f.lsn < next && f.lsn >= self.floor())
            .map(|f| LsnSpan {
                from: f.lsn,
                to: f.lsn + 1,
            })
            .collect();
        let mine = self.frames_in(self.floor(), &held)?;
        let by_lsn: std::collections::HashMap<u64, &RawFrame> =
            mine.iter().map(|f| (f.lsn, f)).collect();
        let diverged = offer.iter().any(|f| {
            by_lsn
                .get(&f.lsn)
                .is_some_and(|m| identity(&m.bytes) != identity(&f.bytes))
        });
        if diverged {
            return Ok(Vec::new());
        }
        let mut take: Vec<&RawFrame> = Vec::new();
        let mut last_hlc = self.last_hlc;
        let node = self.node_hash();
        for (want, f) in (next..).zip(offer.iter().filter(|f| f.lsn >= next)) {
            let head = header(&f.bytes);
            let same_node = node.is_none_or(|n| n == head.hlc.node_hash);
            let later = last_hlc.is_none_or(|h| head.hlc > h);
            if f.lsn != want || !same_node || !later {
                break;
            }
            take.push(f);
            last_hlc = Some(head.hlc);
        }
        if take.is_empty() {
            return Ok(Vec::new());
        }
        self.append_frames(&take)?;
        Ok(take.iter().map(|f| f.lsn).collect())
    }

    fn append_frames(&mut self, frames: &[&RawFrame]) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let io = |op, e| LedgerError::io(op, &path, e);
        let file = crate::core::file_input::open_regular_with(
            &path,
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .map_err(|e| io("open", e))?;
        wal::file::lock_exclusive(&file, &path)?;
        if file.metadata().map_err(|e| io("stat", e))?.len() == 0 {
            file.write_all_at(&wal::file_header(), 0)
                .map_err(|e| io("write header of", e))?;
        }
        let rec = wal::recover(&path)?;
        if rec.outcome == Outcome::TornTail {
            self.cut = Some(TornTailCut {
                path: path.clone(),
                offset: rec.end,
                cut_bytes: rec.cut_bytes.unwrap_or(0),
                saved_tail: rec.saved_tail.clone(),
                valid_frames: rec.valid_frames,
            });
        }
        if rec.last_lsn != self.last_lsn {
            return Err(LedgerError::Usage(format!(
                "{}: the log changed during anti-entropy (last LSN {:?}, expected {:?}); run it again",
                path.shown(),
                rec.last_lsn,
                self.last_lsn
            )));
        }
        let bytes: Vec<u8> = frames
            .iter()
            .flat_map(|f| f.bytes.iter().copied())
            .collect();
        file.write_all_at(&bytes, rec.end)
            .map_err(|e| io("append to", e))?;
        file.sync_data().map_err(|e| io("fdatasync", e))?;
        let last = frames.last().map(|f| header(&f.bytes));
        self.first_lsn = self.first_lsn.or(frames.first().map(|f| f.lsn));
        self.last_lsn = last.map(|h| h.lsn).or(self.last_lsn);
        self.last_hlc = last.map(|h| h.hlc).or(self.last_hlc);
        self.tree = None;
        Ok(())
    }
}

/// Writes the tree's full blocks as the log's block index when they are more than it held.
fn save_index(path: &Path, meta: &Metadata, tree: &LedgerTree) {
    if let Some(idx) = tree
        .index()
        .filter(|i| i.hashes.len() > tree.indexed_blocks())
    {
        block_index::save(path, block_index::identity(meta), &idx);
    }
}

pub(crate) fn header(bytes: &[u8]) -> RawHeader {
    let mut head = [0u8; FRAME_HEADER_LEN];
    head.copy_from_slice(&bytes[..FRAME_HEADER_LEN]);
    RawHeader::parse(&head)
}

/// Decodes and checks a frame received from a peer (base64, length, CRC, LSN).
pub fn decode_wire(w: &super::protocol::WireFrame) -> Result<RawFrame, LedgerError> {
    use base64::Engine;
    let bad = |why: &str| LedgerError::Usage(format!("peer frame at LSN {}: {why}", w.lsn));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&w.frame)
        .map_err(|e| bad(&format!("not base64: {e}")))?;
    if bytes.len() < FRAME_HEADER_LEN || bytes.len() > FRAME_HEADER_LEN + wal::MAX_PAYLOAD_LEN {
        return Err(bad("wrong length"));
    }
    let head = header(&bytes);
    if head.total_len as usize != bytes.len() {
        return Err(bad("total_len disagrees with the frame's length"));
    }
    if wal::frame::frame_crc(&bytes) != head.crc32 {
        return Err(bad("CRC mismatch"));
    }
    if head.lsn != w.lsn {
        return Err(bad("LSN disagrees with the frame header"));
    }
    if wal::FrameState::from_byte(head.state).is_none()
        || wal::FrameType::from_byte(head.frame_type).is_none()
    {
        return Err(bad("unknown state or type"));
    }
    Ok(RawFrame { lsn: w.lsn, bytes })
}

pub fn encode_wire(f: &RawFrame) -> super::protocol::WireFrame {
    use base64::Engine;
    super::protocol::WireFrame {
        lsn: f.lsn,
        frame: base64::engine::general_purpose::STANDARD.encode(&f.bytes),
    }
}
