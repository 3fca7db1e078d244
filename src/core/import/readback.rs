//! Reading verified entries back from their file (the import's second pass): by the byte offset
//! and length the first pass recorded, through one read-ahead window per log (merge order walks
//! each log front to back), each entry checked against the keyed fingerprint of the fields the
//! first pass verified. A file changed in between is refused ([`ImportError::InputChanged`]):
//! what is written is exactly what was verified.

use super::options::ImportError;
use crate::core::bundle::fast_entry::scan_fast;
use crate::core::bundle::EntryRef;
use crate::core::chain::{decode_digest, Digest32};
use crate::core::file_input::read_up_to_at;
use crate::core::ledger::seeded::SeededState;
use crate::core::merge::MergeInput;
use std::hash::BuildHasher;

/// Read-ahead bytes shared by the windows of one input (each log gets its share, at most 1 MiB).
const WINDOW_BUDGET: usize = 16 << 20;
const WINDOW_MAX: usize = 1 << 20;

/// The keyed fingerprint of an entry's fields (every field a chain row or a report takes from it).
pub(super) fn fingerprint(state: &SeededState, e: &EntryRef<'_>) -> u64 {
    state.hash_one((
        &e.node_id,
        &e.t_hlc,
        &e.job_id,
        &e.partition_key,
        &e.payload,
        &e.payload_hash,
        &e.prev_link,
        &e.link,
        &e.enqueued_at,
    ))
}

/// An entry read back: its fields (borrowed from the reader) and its decoded hashes.
pub(super) struct Back<'a> {
    pub(super) entry: EntryRef<'a>,
    pub(super) payload_hash: Digest32,
    pub(super) link: Digest32,
    pub(super) prev: Option<Digest32>,
}

/// Bytes of the file from `start`.
#[derive(Default)]
struct Window {
    start: u64,
    data: Vec<u8>,
}

/// What reading an input back needs: its name, the verified file (held open), its keys and the
/// fingerprints' key.
pub(super) struct Source<'l> {
    pub(super) file: &'l str,
    pub(super) source: &'l std::fs::File,
    pub(super) input: MergeInput<'l>,
    pub(super) check: &'l SeededState,
}

/// Reads the entries of one input back.
pub(super) struct ReadBack<'l> {
    src: Source<'l>,
    windows: Vec<Window>,
    chunk: usize,
    payload: String,
}

impl<'l> ReadBack<'l> {
    pub(super) fn new(src: Source<'l>) -> Self {
        let logs = src.input.log_starts.len().max(1);
        ReadBack {
            src,
            windows: (0..logs).map(|_| Window::default()).collect(),
            chunk: (WINDOW_BUDGET / logs).min(WINDOW_MAX),
            payload: String::new(),
        }
    }

    /// The entry at `pos` of the input's keys, as verified.
    pub(super) fn entry(&mut self, pos: u32) -> Result<Back<'_>, ImportError> {
        let l = &self.src;
        let key = l.input.keys[pos as usize];
        let (log, _) = l.input.log_index(pos);
        let changed = || ImportError::InputChanged {
            file: l.file.to_string(),
            offset: key.offset,
        };
        let w = &mut self.windows[log as usize];
        let (off, len) = (key.offset, key.len as usize);
        let inside = off >= w.start && off - w.start + len as u64 <= w.data.len() as u64;
        if !inside {
            w.data.resize(self.chunk.max(len), 0);
            let got = read_up_to_at(l.source, &mut w.data, off).map_err(|_| changed())?;
            w.data.truncate(got);
            w.start = off;
            if got < len {
                return Err(changed());
            }
        }
        let at = (off - w.start) as usize;
        let bytes = &w.data[at..at + len];
        let entry = match scan_fast(bytes, len).filter(|f| f.byte_len() == len) {
            Some(fast) => fast.entry(&mut self.payload),
            None => serde_json::from_slice::<EntryRef<'_>>(bytes).map_err(|_| changed())?,
        };
        if fingerprint(l.check, &entry) != key.check {
            return Err(changed());
        }
        let payload_hash = decode_digest(&entry.payload_hash).map_err(|_| changed())?;
        let link = decode_digest(&entry.link).map_err(|_| changed())?;
        let prev = match entry.prev_link.as_deref() {
            Some(p) => Some(decode_digest(p).map_err(|_| changed())?),
            None => None,
        };
        Ok(Back {
            entry,
            payload_hash,
            link,
            prev,
        })
    }
}
