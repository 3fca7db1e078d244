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
use crate::core::wal::{frame::RawHeader, FRAME_HEADER_LEN};
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

    /// Reads the ledger and hashes its frames with LSN >= `floor`.
    pub fn build(path: &Path, floor: u64) -> Result<LedgerTree, LedgerError> {
        let mut tree = LedgerTree {
            path: path.to_path_buf(),
            floor,
            count: 0,
            blocks: Vec::new(),
            offsets: Vec::new(),
        };
        let mut block = RootBuilder::default();
        let mut buf = Vec::new();
        let mut reader = crate::core::wal::WalReader::open(path)
            .map_err(|e| LedgerError::io("open", path, e))?;
        while let Some(f) = reader
            .next_frame()
            .map_err(|e| LedgerError::io("read", path, e))?
        {
            if f.lsn < floor {
                continue;
            }
            if block.is_empty() {
                tree.offsets.push(f.offset);
            }
            buf.clear();
            crate::core::wal::encode_frame_into(
                &mut buf,
                f.lsn,
                f.hlc,
                f.state,
                f.frame_type,
                &[f.payload],
            );
            block.push(merkle::leaf_hash(&buf[4..]));
            tree.count += 1;
            if block.len() == FANOUT {
                tree.blocks.push(block.finish());
                block = RootBuilder::default();
            }
        }
        if !block.is_empty() {
            tree.blocks.push(block.finish());
        }
        Ok(tree)
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
