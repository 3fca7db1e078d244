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
//!
//! Errors are [`WalError`] (cloneable, so one I/O failure can fail every waiter).

pub mod error;
pub mod frame;
pub mod inspect;
pub mod reader;
pub mod recovery;
pub mod watermarks;

pub use error::WalError;
pub use frame::{
    encode_frame_into, file_header, node_hash, Frame, FrameState, FrameType, WalHlc, Watermark,
    FILE_HEADER_LEN, FRAME_HEADER_LEN, MAX_PAYLOAD_LEN,
};
pub use inspect::{Inspection, LsnRange};
pub use reader::{Damage, FrameRef, ReadAt, Stop, WalReader};
pub use recovery::{examine, recover, torn_tail_path, Outcome, Recovery};
pub use watermarks::{WatermarkError, Watermarks};

#[cfg(test)]
mod vector_tests;
