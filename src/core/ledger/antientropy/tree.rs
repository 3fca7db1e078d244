//! The Merkle tree of one ledger over its frames by LSN (SPEC 12): leaf data = a frame's bytes
//! 4..total_len (what its CRC covers), RFC 6962 hashing (section 8, [`crate::core::merkle`]).
//!
//! Only the hashes of 256-leaf blocks are kept (32 bytes per 256 frames) with each block's file
//! offset; a node above a block is the RFC 6962 root of its blocks' hashes (blocks are
//! power-of-two sized and left-aligned, so this equals the tree hash over the node's leaves), and
//! a block's leaves are re-read from the file when a search reaches them.

use super::protocol::{NodeId, Summary, FANOUT};
use crate::core::chain::Digest32;
use crate::core::ledger::LedgerError;
use crate::core::merkle::{self, RootBuilder};
use crate::core::wal::{frame::RawHeader, WalReader, FRAME_HEADER_LEN};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A frame read back by offset: its LSN and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    pub lsn: u64,
    pub bytes: Vec<u8>,
}

impl RawFrame {
    pub fn leaf_hash(&self) -> Digest32 {
        merkle::leaf_hash(&self.bytes[4..])
    }

    pub fn crc(&self) -> u32 {
        u32::from_be_bytes([self.bytes[0], self.bytes[1], self.bytes[2], self.bytes[3]])
    }
}

/// Block hashes of one ledger's frames from `floor` on.
#[derive(Debug, Clone)]
pub struct LedgerTree {
    path: PathBuf,
    pub floor: u64,
    pub count: u64,
    blocks: Vec<Digest32>,
    offsets: Vec<u64>,
}

impl LedgerTree {
    /// The tree of a ledger with no frames.
    pub fn empty(path: &Path, floor: u64) -> LedgerTree {
        LedgerTree {
            path: path.to_path_buf(),
            floor,
            count: 0,
            blocks: Vec::new(),
            offsets: Vec::new(),
        }
    }

    /// Reads the ledger and hashes its frames with LSN >= `floor`, starting from the block index
    /// beside the log (`<log>.merkle-index`) when it still describes this file, and updating it.
    pub fn build(path: &Path, floor: u64) -> Result<LedgerTree, LedgerError> {
        let reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
        let mut builder = TreeBuilder::new(path, floor);
        crate::core::wal::recovery::scan_raw(reader, |at, lsn, bytes| builder.push(at, lsn, bytes))
            .map_err(|e| LedgerError::io("read", path, e))?;
        Ok(builder.finish())
    }

    /// Count and hash of the leaves `[start, end)` clipped to what this ledger holds, for a node
    /// at level >= 1 (block-aligned).
    fn block_summary(&self, start: u64, end: u64) -> Summary {
        let count = end.min(self.count).saturating_sub(start);
        if count == 0 {
            return empty();
        }
        let b0 = (start / FANOUT) as usize;
        let b1 = end.min(self.count).div_ceil(FANOUT) as usize;
        Summary {
            count,
            hash: hex::encode(merkle::root(&self.blocks[b0..b1])),
        }
    }

    /// The summaries of a node's 256 children.
    pub fn children(&self, node: NodeId) -> Result<Vec<Summary>, LedgerError> {
        if node.level == 0 {
            return Err(LedgerError::Usage("a leaf has no children".into()));
        }
        if node.level == 1 {
            let (start, end) = node.leaves();
            let frames = self.frames(start, end)?;
            let mut out: Vec<Summary> = frames
                .iter()
                .map(|f| Summary {
                    count: 1,
                    hash: hex::encode(f.leaf_hash()),
                })
                .collect();
            out.resize(FANOUT as usize, empty());
            return Ok(out);
        }
        Ok((0..FANOUT)
            .map(|c| {
                let (s, e) = node.child(c).leaves();
                self.block_summary(s, e)
            })
            .collect())
    }

    /// The frames at leaves `[start, end)` (LSNs `floor + start ..`), read back from the file.
    pub fn frames(&self, start: u64, end: u64) -> Result<Vec<RawFrame>, LedgerError> {
        let end = end.min(self.count);
        if start >= end {
            return Ok(Vec::new());
        }
        let file = File::open(&self.path).map_err(|e| LedgerError::io("open", &self.path, e))?;
        let mut offset = self.offsets[(start / FANOUT) as usize];
        let mut leaf = start - start % FANOUT;
        let mut out = Vec::new();
        while leaf < end {
            let f = read_frame_at(&file, &self.path, offset)?;
            offset += f.bytes.len() as u64;
            if leaf >= start {
                out.push(f);
            }
            leaf += 1;
        }
        Ok(out)
    }
}

/// Builds a [`LedgerTree`] from the frames of a scan (one pass that also checks the log), using
/// the block index for the frames it covers.
pub struct TreeBuilder {
    tree: LedgerTree,
    /// Frames below this LSN are covered by the index (known once the first frame is seen).
    indexed_below: Option<u64>,
    indexed: u64,
    block: RootBuilder,
    /// Offset and CRC of the last frame of the last full block.
    last: Option<(u64, u32)>,
}

impl TreeBuilder {
    pub fn new(path: &Path, floor: u64) -> TreeBuilder {
        TreeBuilder {
            tree: LedgerTree::empty(path, floor),
            indexed_below: None,
            indexed: 0,
            block: RootBuilder::default(),
            last: None,
        }
    }

    /// Takes the next frame of the log (bytes with header, at its offset).
    pub fn push(&mut self, at: u64, lsn: u64, bytes: &[u8]) {
        if lsn < self.tree.floor {
            return;
        }
        let below = *self.indexed_below.get_or_insert_with(|| {
            let floor = self.tree.floor;
            match index::load_for(&self.tree.path, floor) {
                Some((blocks, offsets, count)) => {
                    self.tree.blocks = blocks;
                    self.tree.offsets = offsets;
                    self.tree.count = count;
                    self.indexed = count;
                    floor + count
                }
                None => floor,
            }
        });
        if lsn < below {
            return;
        }
        if self.block.is_empty() {
            self.tree.offsets.push(at);
        }
        self.block.push(merkle::leaf_hash(&bytes[4..]));
        self.tree.count += 1;
        if self.block.len() == FANOUT {
            self.tree.blocks.push(self.block.finish());
            self.block = RootBuilder::default();
            self.last = Some((
                at,
                u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            ));
        }
    }

    /// The tree; the block index beside the log is updated when a full block was added.
    pub fn finish(mut self) -> LedgerTree {
        if let Some((at, crc)) = self
            .last
            .filter(|_| self.tree.count >= self.indexed + FANOUT)
        {
            index::save_for(&self.tree, at, crc);
        }
        if !self.block.is_empty() {
            self.tree.blocks.push(self.block.finish());
        }
        self.tree
    }
}

fn empty() -> Summary {
    Summary {
        count: 0,
        hash: hex::encode(merkle::empty_root()),
    }
}

/// Reads and checks (CRC) the frame at `offset`.
pub fn read_frame_at(file: &File, path: &Path, offset: u64) -> Result<RawFrame, LedgerError> {
    let mut head = [0u8; FRAME_HEADER_LEN];
    file.read_exact_at(&mut head, offset)
        .map_err(|e| LedgerError::io("read", path, e))?;
    let raw = RawHeader::parse(&head);
    let len = raw.total_len as usize;
    if !(FRAME_HEADER_LEN..=FRAME_HEADER_LEN + crate::core::wal::MAX_PAYLOAD_LEN).contains(&len) {
        return Err(changed(path, offset));
    }
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, offset)
        .map_err(|e| LedgerError::io("read", path, e))?;
    if crate::core::wal::frame::frame_crc(&bytes) != raw.crc32 {
        return Err(changed(path, offset));
    }
    Ok(RawFrame {
        lsn: raw.lsn,
        bytes,
    })
}

fn changed(path: &Path, offset: u64) -> LedgerError {
    LedgerError::Usage(format!(
        "{}: no valid frame at byte offset {offset}; the log changed during anti-entropy, run it again",
        path.display()
    ))
}

/// The block index beside a log: `ALMI`, version, floor, full-block leaf count, the log's inode,
/// the offset and CRC of the last indexed frame, then per block its hash and first frame's offset.
/// It is a cache: used only when the log is the same file (inode), the floor is the same and the
/// last indexed frame is still there unchanged; otherwise the tree is rebuilt from the frames.
mod index {
    use super::{read_frame_at, Digest32, LedgerTree, FANOUT};
    use std::fs::{File, Metadata};
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    const MAGIC: &[u8; 4] = b"ALMI";
    const HEAD: usize = 4 + 4 + 8 + 8 + 8 + 8 + 4;

    pub fn path_of(log: &Path) -> PathBuf {
        let mut name = log.file_name().unwrap_or_default().to_os_string();
        name.push(".merkle-index");
        log.with_file_name(name)
    }

    fn u64_at(b: &[u8], i: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_be_bytes(x)
    }

    /// (blocks, offsets, leaf count, offset after the last indexed frame), if the index is valid.
    pub fn load(
        log: &Path,
        file: &File,
        meta: &Metadata,
        floor: u64,
    ) -> Option<(Vec<Digest32>, Vec<u64>, u64, u64)> {
        // At most one block entry per 256 minimal frames of the log: a bound from the log itself.
        let cap = (HEAD as u64) + (meta.len() / 34 / FANOUT + 1) * 40;
        let mut bytes = Vec::new();
        let f = File::open(path_of(log)).ok()?;
        std::io::Read::read_to_end(&mut std::io::Read::take(f, cap + 1), &mut bytes).ok()?;
        if bytes.len() < HEAD
            || bytes.len() as u64 > cap
            || &bytes[..4] != MAGIC
            || bytes[4..8] != 1u32.to_be_bytes()
        {
            return None;
        }
        let (ifloor, count, ino, last_at) = (
            u64_at(&bytes, 8),
            u64_at(&bytes, 16),
            u64_at(&bytes, 24),
            u64_at(&bytes, 32),
        );
        let crc = u32::from_be_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]);
        let blocks = (count / FANOUT) as usize;
        if ifloor != floor
            || ino != meta.ino()
            || count % FANOUT != 0
            || count == 0
            || bytes.len() != HEAD + blocks * 40
        {
            return None;
        }
        let last = read_frame_at(file, log, last_at).ok()?;
        if last.lsn != floor + count - 1 || last.crc() != crc {
            return None;
        }
        let mut hashes = Vec::with_capacity(blocks);
        let mut offsets = Vec::with_capacity(blocks);
        for entry in bytes[HEAD..].chunks_exact(40) {
            let mut h = [0u8; 32];
            h.copy_from_slice(&entry[..32]);
            hashes.push(h);
            offsets.push(u64_at(entry, 32));
        }
        Some((hashes, offsets, count, last_at + last.bytes.len() as u64))
    }

    /// [`load`] for the log at `log` (opened here): blocks, offsets and leaf count.
    pub fn load_for(log: &Path, floor: u64) -> Option<(Vec<Digest32>, Vec<u64>, u64)> {
        let file = File::open(log).ok()?;
        let meta = file.metadata().ok()?;
        load(log, &file, &meta, floor).map(|(b, o, c, _)| (b, o, c))
    }

    /// [`save`] for the tree's log (best effort: it is a cache).
    pub fn save_for(tree: &LedgerTree, last_at: u64, last_crc: u32) {
        match File::open(&tree.path).and_then(|f| f.metadata()) {
            Ok(meta) => save(&tree.path, &meta, tree, last_at, last_crc),
            Err(e) => tracing::debug!(error = %e, "ledger Merkle index not written"),
        }
    }

    /// Writes the index of the tree's full blocks (best effort: it is a cache).
    pub fn save(log: &Path, meta: &Metadata, tree: &LedgerTree, last_at: u64, last_crc: u32) {
        let full = tree.blocks.len();
        let mut out = Vec::with_capacity(HEAD + full * 40);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&1u32.to_be_bytes());
        out.extend_from_slice(&tree.floor.to_be_bytes());
        out.extend_from_slice(&(full as u64 * FANOUT).to_be_bytes());
        out.extend_from_slice(&meta.ino().to_be_bytes());
        out.extend_from_slice(&last_at.to_be_bytes());
        out.extend_from_slice(&last_crc.to_be_bytes());
        for (h, o) in tree.blocks.iter().zip(&tree.offsets) {
            out.extend_from_slice(h);
            out.extend_from_slice(&o.to_be_bytes());
        }
        if let Err(e) = crate::core::file_output::write_atomic(&path_of(log), &out) {
            tracing::debug!(error = %e, "ledger Merkle index not written");
        }
    }
}
