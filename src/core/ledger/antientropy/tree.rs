//! The Merkle tree of one ledger over its frames by LSN (SPEC 12): leaf data = a frame's bytes
//! 4..total_len (what its CRC covers), RFC 6962 hashing (section 8, [`crate::core::merkle`]).
//!
//! Only the hashes of 256-leaf blocks are kept (32 bytes per 256 frames) with each block's file
//! offset; a node above a block is the RFC 6962 root of its blocks' hashes (blocks are
//! power-of-two sized and left-aligned, so this equals the tree hash over the node's leaves), and
//! a block's leaves are re-read from the file (and its hash checked again) when a search reaches
//! them. The full blocks are kept beside the log in its block index ([`super::block_index`]).

use super::block_index::{self, BlockIndex};
use super::protocol::{NodeId, Summary, FANOUT};
use crate::core::chain::Digest32;
use crate::core::ledger::LedgerError;
use crate::core::merkle::{self, RootBuilder};
use crate::core::text::ShowPath;
use crate::core::wal::{ReadAt, WalReader};
use std::fs::File;
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
    /// Offset of each block's first frame.
    firsts: Vec<u64>,
    /// Offset of each full block's last frame.
    lasts: Vec<u64>,
    /// Offset just after the last frame.
    end: u64,
    /// Leading blocks whose hashes came from the block index (not hashed from the frames here).
    indexed_blocks: usize,
}

impl LedgerTree {
    /// The tree of a ledger with no frames.
    pub fn empty(path: &Path, floor: u64) -> LedgerTree {
        LedgerTree {
            path: path.to_path_buf(),
            floor,
            count: 0,
            blocks: Vec::new(),
            firsts: Vec::new(),
            lasts: Vec::new(),
            end: crate::core::wal::frame::FILE_HEADER_LEN,
            indexed_blocks: 0,
        }
    }

    /// Reads the ledger and hashes every frame with LSN >= `floor` (no block index: the index
    /// describes the log from its own first LSN, see `Replica::open`).
    pub fn build(path: &Path, floor: u64) -> Result<LedgerTree, LedgerError> {
        let reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
        let mut builder = TreeBuilder::new(path, floor);
        crate::core::wal::recovery::scan_raw(reader, |at, lsn, bytes| builder.push(at, lsn, bytes))
            .map_err(|e| LedgerError::io("read", path, e))?;
        Ok(builder.finish())
    }

    /// Blocks taken from the block index.
    pub fn indexed_blocks(&self) -> usize {
        self.indexed_blocks
    }

    /// The full blocks as a block index (None without a full block).
    pub fn index(&self) -> Option<BlockIndex> {
        let full = self.lasts.len();
        if full == 0 {
            return None;
        }
        Some(BlockIndex {
            floor: self.floor,
            hashes: self.blocks[..full].to_vec(),
            firsts: self.firsts[..full].to_vec(),
            lasts: self.lasts.clone(),
            covered_len: self.firsts.get(full).copied().unwrap_or(self.end),
        })
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

    /// The frames at leaves `[start, end)` (LSNs `floor + start ..`), read back from the file:
    /// every block they touch is read whole, each frame checked (CRC, LSN in sequence) and the
    /// block's hash recomputed and compared with the tree's, so a frame handed out is one the
    /// tree describes (a block index that does not describe the log is
    /// [`LedgerError::IndexMismatch`]).
    pub fn frames(&self, start: u64, end: u64) -> Result<Vec<RawFrame>, LedgerError> {
        let end = end.min(self.count);
        if start >= end {
            return Ok(Vec::new());
        }
        let first_block = start / FANOUT;
        let stop = (end.div_ceil(FANOUT) * FANOUT).min(self.count);
        let first_at = self.firsts[first_block as usize];
        // Read exactly the blocks' bytes: up to the next block's first frame (or the tree's end).
        let until = self
            .firsts
            .get(stop.div_ceil(FANOUT) as usize)
            .copied()
            .unwrap_or(self.end);
        let file = crate::core::file_input::open_regular(&self.path)
            .map_err(|e| LedgerError::io("open", &self.path, e))?;
        let src = Prefix { file, len: until };
        let mut reader = WalReader::resume(src, first_at, self.floor + first_block * FANOUT)
            .map_err(|e| LedgerError::io("read", &self.path, e))?;
        let mut leaf = first_block * FANOUT;
        let mut block = RootBuilder::default();
        let mut out = Vec::new();
        while leaf < stop {
            let next = reader
                .next_raw()
                .map_err(|e| LedgerError::io("read", &self.path, e))?;
            let Some((_, lsn, bytes)) = next else {
                return Err(changed(&self.path, first_at));
            };
            block.push(merkle::leaf_hash(&bytes[4..]));
            if leaf >= start {
                out.push(RawFrame {
                    lsn,
                    bytes: bytes.to_vec(),
                });
            }
            leaf += 1;
            if leaf.is_multiple_of(FANOUT) || leaf == self.count {
                self.check_block((leaf - 1) / FANOUT, &block)?;
                block = RootBuilder::default();
            }
        }
        out.truncate((end - start) as usize);
        Ok(out)
    }

    /// Reads the last block the index covers and `n` others picked at random, recomputing their
    /// hashes ([`LedgerTree::frames`]): a log rewritten in place under its index is caught with
    /// probability growing with the share of blocks that changed.
    pub fn spot_check(&self, n: u64) -> Result<(), LedgerError> {
        use std::hash::BuildHasher;
        let k = self.indexed_blocks as u64;
        if k == 0 {
            return Ok(());
        }
        let seed = std::collections::hash_map::RandomState::new();
        for b in (0..n).map(|i| seed.hash_one(i) % k).chain([k - 1]) {
            self.frames(b * FANOUT, b * FANOUT + 1)?;
        }
        Ok(())
    }

    /// Compares block `b`'s hash recomputed from its frames with the tree's.
    fn check_block(&self, b: u64, block: &RootBuilder) -> Result<(), LedgerError> {
        if block.finish() == self.blocks[b as usize] {
            return Ok(());
        }
        if (b as usize) < self.indexed_blocks {
            let from = self.floor + b * FANOUT;
            return Err(LedgerError::IndexMismatch {
                path: block_index::path_of(&self.path),
                block: b,
                from,
                to: from + FANOUT - 1,
            });
        }
        Err(changed(&self.path, self.firsts[b as usize]))
    }
}

/// The first `len` bytes of a file, as a reader's source (so that it reads no further).
struct Prefix {
    file: File,
    len: u64,
}

impl ReadAt for Prefix {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.len)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
}

/// Builds a [`LedgerTree`] from frames in LSN order (a scan that also checks the log), possibly
/// after the blocks a block index covers.
pub struct TreeBuilder {
    tree: LedgerTree,
    block: RootBuilder,
}

impl TreeBuilder {
    pub fn new(path: &Path, floor: u64) -> TreeBuilder {
        TreeBuilder {
            tree: LedgerTree::empty(path, floor),
            block: RootBuilder::default(),
        }
    }

    /// Starts from the blocks of a checked block index; the frames after it are pushed.
    pub fn resume(path: &Path, idx: BlockIndex) -> TreeBuilder {
        let indexed_blocks = idx.hashes.len();
        let count = idx.frames();
        TreeBuilder {
            tree: LedgerTree {
                path: path.to_path_buf(),
                floor: idx.floor,
                count,
                blocks: idx.hashes,
                firsts: idx.firsts,
                lasts: idx.lasts,
                end: idx.covered_len,
                indexed_blocks,
            },
            block: RootBuilder::default(),
        }
    }

    /// Takes the next frame of the log (bytes with header, at its offset).
    pub fn push(&mut self, at: u64, lsn: u64, bytes: &[u8]) {
        if lsn < self.tree.floor {
            return;
        }
        if self.block.is_empty() {
            self.tree.firsts.push(at);
        }
        self.block.push(merkle::leaf_hash(&bytes[4..]));
        self.tree.count += 1;
        self.tree.end = at + bytes.len() as u64;
        if self.block.len() == FANOUT {
            self.tree.blocks.push(self.block.finish());
            self.tree.lasts.push(at);
            self.block = RootBuilder::default();
        }
    }

    pub fn finish(mut self) -> LedgerTree {
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

fn changed(path: &Path, offset: u64) -> LedgerError {
    LedgerError::Usage(format!(
        "{}: no valid frame at byte offset {offset}; the log changed during anti-entropy, run it again",
        path.shown()
    ))
}
