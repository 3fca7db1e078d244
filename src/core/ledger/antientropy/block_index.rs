//! The block index beside a ledger (`<log>.merkle-index`): the RFC 6962 hash of every full
//! 256-frame block of the log from its first LSN, with the offsets of each block's first and last
//! frame, so that opening a large log for anti-entropy does not read and hash every frame again.
//!
//! It is a cache bound to the log it describes, trusted only after cheap checks (docs/ledger.md,
//! "Trusting the block index"):
//!
//! * its own SHA-256 trailer (a torn or damaged index file is not used);
//! * the log's identity (device and inode) and length: the log is the file that was indexed and
//!   still holds the covered prefix;
//! * every block boundary: the frame at each recorded first and last offset is read and must pass
//!   its CRC, carry the LSN the block says, and the last frame of a block must end exactly where
//!   the next block's first frame starts (and the last block where the covered prefix ends).
//!
//! Frames inside a block are not re-read when the index is used; whenever a search or a copy does
//! read a block, its hash is recomputed from the frames and compared with the index
//! (`LedgerTree::frames` in the tree module), and a disagreement discards the index.
//!
//! Layout (big-endian): `ALMI`, u32 version 2, u64 floor (the log's first LSN), u64 frames covered
//! (a multiple of 256), u64 device, u64 inode, u64 covered length (offset after the last covered
//! frame); per block: 32-byte hash, u64 first-frame offset, u64 last-frame offset; then the
//! SHA-256 of everything before it.

use super::protocol::FANOUT;
use crate::core::chain::Digest32;
use crate::core::file_input::read_up_to_at;
use crate::core::wal::frame::{RawHeader, FILE_HEADER_LEN, FRAME_HEADER_LEN, MAX_FRAME_LEN};
use sha2::{Digest, Sha256};
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"ALMI";
const VERSION: u32 = 2;
pub(super) const HEAD: usize = 4 + 4 + 8 * 5;
pub(super) const ENTRY: usize = 32 + 8 + 8;
pub(super) const TRAILER: usize = 32;
/// Bytes read at a block boundary in one positioned read (a block's last frame and the next
/// block's first frame, when they are small).
const PEEK: usize = 1024;

/// The full blocks of a log as the index describes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockIndex {
    /// The log's first LSN: leaf `i` is the frame with LSN `floor + i`.
    pub floor: u64,
    pub hashes: Vec<Digest32>,
    /// Offset of each block's first frame.
    pub firsts: Vec<u64>,
    /// Offset of each block's last frame.
    pub lasts: Vec<u64>,
    /// Offset just after the last covered frame.
    pub covered_len: u64,
}

impl BlockIndex {
    /// Frames covered (every block is full).
    pub fn frames(&self) -> u64 {
        self.hashes.len() as u64 * FANOUT
    }
}

/// Why the index beside a log was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("there is no block index yet")]
    Absent,
    #[error("the block index cannot be read: {0}")]
    Unreadable(String),
    #[error("the block index is damaged ({0})")]
    Damaged(&'static str),
    #[error("the block index describes another file (device/inode differ): the log was replaced")]
    OtherFile,
    #[error("the log ({len} bytes) is shorter than the {covered} bytes the block index covers: it was truncated or rewritten")]
    Shorter { len: u64, covered: u64 },
    #[error("the block index disagrees with the log at byte offset {offset}: {what}")]
    Boundary { offset: u64, what: String },
}

/// Where the index of `log` is kept.
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

/// The identity the index is bound to: (device, inode).
pub fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Reads the index of `log` and checks it against the open log (`file`, `meta`); see the module
/// docs for what is checked.
pub fn load(log: &Path, file: &File, meta: &Metadata) -> Result<BlockIndex, Unusable> {
    let bytes = read_capped(log, meta)?;
    let idx = parse(&bytes, meta)?;
    check_boundaries(file, &idx)?;
    Ok(idx)
}

/// The index file's bytes, at most what a log of this length can need (one entry per 256
/// frames of at least a header each).
fn read_capped(log: &Path, meta: &Metadata) -> Result<Vec<u8>, Unusable> {
    let cap = (HEAD + TRAILER) as u64
        + (meta.len() / FRAME_HEADER_LEN as u64 / FANOUT + 1) * ENTRY as u64;
    let f = match crate::core::file_input::open_regular(&path_of(log)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Absent),
        Err(e) => return Err(Unusable::Unreadable(e.to_string())),
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, cap + 1), &mut bytes)
        .map_err(|e| Unusable::Unreadable(e.to_string()))?;
    if bytes.len() as u64 > cap {
        return Err(Unusable::Damaged("longer than any index of this log"));
    }
    Ok(bytes)
}

fn parse(bytes: &[u8], meta: &Metadata) -> Result<BlockIndex, Unusable> {
    if bytes.len() < HEAD + TRAILER || !(bytes.len() - HEAD - TRAILER).is_multiple_of(ENTRY) {
        return Err(Unusable::Damaged("wrong length"));
    }
    let (body, trailer) = bytes.split_at(bytes.len() - TRAILER);
    if Sha256::digest(body).as_slice() != trailer {
        return Err(Unusable::Damaged("checksum mismatch"));
    }
    if &body[..4] != MAGIC || body[4..8] != VERSION.to_be_bytes() {
        return Err(Unusable::Damaged("not a version 2 block index"));
    }
    let (floor, count) = (u64_at(body, 8), u64_at(body, 16));
    let (dev, ino, covered_len) = (u64_at(body, 24), u64_at(body, 32), u64_at(body, 40));
    let entries = &body[HEAD..];
    let blocks = entries.len() / ENTRY;
    if floor == 0 || blocks == 0 || count != blocks as u64 * FANOUT {
        return Err(Unusable::Damaged("frame count disagrees with its blocks"));
    }
    if (dev, ino) != identity(meta) {
        return Err(Unusable::OtherFile);
    }
    if covered_len > meta.len() {
        return Err(Unusable::Shorter {
            len: meta.len(),
            covered: covered_len,
        });
    }
    let mut idx = BlockIndex {
        floor,
        hashes: Vec::with_capacity(blocks),
        firsts: Vec::with_capacity(blocks),
        lasts: Vec::with_capacity(blocks),
        covered_len,
    };
    for e in entries.chunks_exact(ENTRY) {
        let mut h = [0u8; 32];
        h.copy_from_slice(&e[..32]);
        idx.hashes.push(h);
        idx.firsts.push(u64_at(e, 32));
        idx.lasts.push(u64_at(e, 40));
    }
    Ok(idx)
}

/// A frame header read at a boundary, after its CRC was checked.
struct Boundary {
    lsn: u64,
    end: u64,
}

/// Reads the frames at the recorded boundaries (see the module docs).
fn check_boundaries(file: &File, idx: &BlockIndex) -> Result<(), Unusable> {
    let mut peek = Peek::new(file);
    let mut expect_at = FILE_HEADER_LEN;
    for (b, (&first, &last)) in idx.firsts.iter().zip(&idx.lasts).enumerate() {
        let lsn = idx.floor + b as u64 * FANOUT;
        if first != expect_at || last <= first {
            return Err(Unusable::Boundary {
                offset: first,
                what: format!("block {b} does not start where the previous one ends ({expect_at})"),
            });
        }
        let head = peek.frame(first)?;
        let tail = peek.frame(last)?;
        if head.lsn != lsn || tail.lsn != lsn + FANOUT - 1 {
            return Err(Unusable::Boundary {
                offset: first,
                what: format!(
                    "block {b} should hold LSNs {lsn}..={}, its boundary frames have LSNs {} and {}",
                    lsn + FANOUT - 1,
                    head.lsn,
                    tail.lsn
                ),
            });
        }
        expect_at = tail.end;
    }
    if expect_at != idx.covered_len {
        return Err(Unusable::Boundary {
            offset: expect_at,
            what: format!("the covered prefix should end at {}", idx.covered_len),
        });
    }
    Ok(())
}

/// Positioned reads of frames at boundaries through a small buffer: a block's last frame and
/// the next block's first frame are adjacent, so one read usually serves both.
struct Peek<'a> {
    file: &'a File,
    buf: Vec<u8>,
    at: u64,
}

impl<'a> Peek<'a> {
    fn new(file: &'a File) -> Peek<'a> {
        Peek {
            file,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// `len` bytes at `offset`, from the buffer or read into it (`PEEK` bytes or more).
    fn bytes(&mut self, offset: u64, len: usize) -> std::io::Result<&[u8]> {
        let have = offset >= self.at && offset + len as u64 <= self.at + self.buf.len() as u64;
        if !have {
            self.buf.resize(len.max(PEEK), 0);
            let n = read_up_to_at(self.file, &mut self.buf, offset)?;
            self.buf.truncate(n);
            self.at = offset;
            if n < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let s = (offset - self.at) as usize;
        Ok(&self.buf[s..s + len])
    }

    /// Reads and CRC-checks the frame at `offset`.
    fn frame(&mut self, offset: u64) -> Result<Boundary, Unusable> {
        let bad = |what: String| Unusable::Boundary { offset, what };
        let head = self
            .bytes(offset, FRAME_HEADER_LEN)
            .map_err(|e| bad(format!("no frame header there: {e}")))?;
        let mut h = [0u8; FRAME_HEADER_LEN];
        h.copy_from_slice(head);
        let raw = RawHeader::parse(&h);
        let len = raw.total_len as usize;
        if len < FRAME_HEADER_LEN || len as u64 > MAX_FRAME_LEN {
            return Err(bad(format!("total_len {len} is not a frame's")));
        }
        let frame = self
            .bytes(offset, len)
            .map_err(|e| bad(format!("the frame runs past the end of the log: {e}")))?;
        if crc32fast::hash(&frame[4..]) != raw.crc32 {
            return Err(bad("the frame there fails its CRC".into()));
        }
        Ok(Boundary {
            lsn: raw.lsn,
            end: offset + len as u64,
        })
    }
}

/// Writes the index of `log` (best effort: it is a cache; a failure is logged).
pub fn save(log: &Path, identity: (u64, u64), idx: &BlockIndex) {
    let blocks = idx.hashes.len();
    let mut out = Vec::with_capacity(HEAD + blocks * ENTRY + TRAILER);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    for v in [
        idx.floor,
        idx.frames(),
        identity.0,
        identity.1,
        idx.covered_len,
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for ((h, first), last) in idx.hashes.iter().zip(&idx.firsts).zip(&idx.lasts) {
        out.extend_from_slice(h);
        out.extend_from_slice(&first.to_be_bytes());
        out.extend_from_slice(&last.to_be_bytes());
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    if let Err(e) = crate::core::file_output::write_atomic(&path_of(log), &out) {
        tracing::debug!(error = %e, "ledger block index not written");
    }
}

/// Removes the index of `log` (it was found not to describe the log).
pub fn discard(log: &Path) {
    if let Err(e) = std::fs::remove_file(path_of(log)) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::debug!(error = %e, "ledger block index not removed");
        }
    }
}
