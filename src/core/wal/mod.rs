//! The node write-ahead log (SPEC section 11, seed AD-38).
//!
//! A WAL file is the header `ALWL` + u32 version 1, then frames back to back:
//!
//! ```text
//! crc32 u32 | total_len u32 | lsn u64 | hlc 16 bytes | state u8 | type u8 | payload
//! ```
//!
//! all big-endian, 34 header bytes, CRC-32 (IEEE) over bytes 4..total_len. The HLC is
//! `physical_ms << 16 | logical` then the first 8 bytes of SHA-256 of the node id. LSNs go up by
//! one per frame; HLCs strictly increase. Event payloads (types 1-8) are the JCS text of the seed's
//! fields with `hlc` as HLC text; a watermark frame (type 0) carries `state u8 | lsn u64`.
//!
//! # Public API (the job ledger builds on it)
//!
//! - Codec ([`frame`]): [`Frame`], [`FrameType`], [`FrameState`], [`WalHlc`] (16-byte HLC),
//!   [`Watermark`], [`encode_frame_into`], [`file_header`], [`node_hash`].
//! - Reading ([`reader`]): [`WalReader`] walks frames from a file ([`WalReader::open`]) or bytes
//!   ([`WalReader::from_bytes`]); [`WalReader::next_frame`] lends a [`FrameRef`] without
//!   allocating, and the reader is also an `Iterator` of owned [`Frame`]s. It stops at the first
//!   frame that fails; [`WalReader::stop`] says where and why ([`Damage`]).
//! - Recovery ([`recovery`]): [`examine`] classifies a file read-only into a [`Recovery`] with an
//!   [`Outcome`] (`Clean`, `TornTail`, `Refused`) and the offset; [`recover`] does what opening
//!   does: saves a torn tail to `<log>.torn-at-<offset>` and cuts it, refuses damage.
//! - State ([`watermarks`]): [`Watermarks`] folds watermark frames; `current(state, lsn)` is an
//!   entry's current state.
//! - Inspection ([`inspect`](mod@inspect)): [`inspect::inspect`] builds the SPEC 11 JSON object.
//! - Writing ([`writer`]): [`WalWriter::open`] creates or recovers a log for one node (exclusive
//!   `flock`, refuses another node's log) and starts the writer thread that owns the file.
//!   [`WalWriter::append`] (blocking) and [`WalWriter::append_async`] take an [`EventBody`] (the
//!   seed fields of an event, `hlc` left out: the writer assigns LSN and HLC) and return an
//!   [`Appended`] once the frame is fdatasynced. [`WalWriter::advance`] writes a watermark frame
//!   (forward only). Group commit, preallocation and failure semantics: see [`writer`].
//!   [`WalOptions`] holds the limits (1000 entries / 1 MiB / 500 µs) and the wall clock.
//! - Checkpoint and compaction ([`checkpoint`]): [`WalWriter::checkpoint`] records watermarks,
//!   the applied state and the LSN its state machine says it holds beside the log and raises
//!   APPLIED and COMPACTED to that LSN; [`compact`] rewrites the log without compacted frames
//!   (temp file, fdatasync, rename, fsync directory), LSNs kept.
//! - Metrics ([`metrics`]): [`WalWriter::metrics`] returns a [`WalMetricsSnapshot`] (appends,
//!   batches, batch-size and fdatasync-latency histograms, bytes, recoveries, torn tails).
//! - Fault injection ([`file`]): [`WalWriter::open_with`] wraps the file, e.g. in a [`FaultyFile`]
//!   whose [`FaultPlan`] fails the Nth write or fdatasync.
//!
//! Errors are [`WalError`] (cloneable, so one I/O failure can fail every waiter).

pub mod bench;
pub mod checkpoint;
pub mod drill;
pub mod error;
pub mod event;
pub mod file;
pub mod frame;
pub mod index;
pub mod index_rows;
pub mod inspect;
pub mod metrics;
pub mod prealloc;
mod queue;
pub mod reader;
pub mod recovery;
pub mod resync;
mod stamp;
mod syncer;
pub mod watermarks;
pub mod writer;

pub use checkpoint::{compact, Checkpoint, CompactReport};
pub use error::WalError;
pub use event::EventBody;
pub use file::{FaultPlan, FaultyFile, WalFile};
pub use frame::{
    encode_frame_into, file_header, node_hash, EventType, Frame, FrameState, FrameType, WalHlc,
    Watermark, FILE_HEADER_LEN, FRAME_HEADER_LEN, MAX_FRAME_LEN, MAX_PAYLOAD_LEN,
};
pub use inspect::{Inspection, LsnRange};
pub use metrics::{WalMetrics, WalMetricsSnapshot};
pub use reader::{Damage, FrameRef, ReadAt, Stop, WalReader};
pub use recovery::{
    examine, examine_counted, recover, recover_exclusive, torn_tail_path, Outcome, Recovery,
};
pub use watermarks::{WatermarkError, Watermarks};
pub use writer::{Appended, WalOptions, WalWriter};

/// The file name extension of a node WAL.
pub const WAL_EXTENSION: &str = "alwl";

/// Whether `path` names a node WAL (`*.alwl`): the Bundles list opens it as a WAL, the Ledger
/// screen folds it.
pub fn is_wal_path(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == WAL_EXTENSION)
}

#[cfg(test)]
mod group_commit_tests;
#[cfg(test)]
mod vector_tests;
#[cfg(test)]
mod writer_tests;
