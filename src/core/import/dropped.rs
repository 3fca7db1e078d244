//! The entries an import drops (past a broken log's verified prefix), in bounded memory: a bundle
//! whose logs break early drops nearly all of its entries. Per dropped entry only what differs
//! from entry to entry ([`Dropped`]: log, index, jobId, tHlc) is kept, the first ones in memory
//! and the rest in an unnamed temporary file ([`SpillList`], as `jobs verify` keeps its findings;
//! one file for all the inputs of a call, [`SharedSpill`], so a call holds one descriptor for
//! them however many inputs drop entries), read back in order as the report is written. The bundle, the file, each log's node id and
//! reason are kept once ([`DroppedList`]).
//!
//! The order is the report's: by node id, then index (the entries of logs sharing a node id
//! merged by index, those parsed first, each kind in log order: exactly the stable sort by (node
//! id, index) of every log's parsed entries past its prefix followed by the unparsed ones).

use crate::core::hlc::hlc_text;
use crate::core::merge::EntryKey;
use crate::core::verify::spill::{
    get_opt_str, invalid, put_opt_str, put_u64, SharedSpill, SpillList, SpillMark, Spilled,
};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::sync::Arc;

/// Where an input entry sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryOrigin {
    pub bundle_id: String,
    pub file: String,
    pub node_id: String,
    /// 0-based index in its node log.
    pub index: u64,
    pub job_id: String,
    pub t_hlc: String,
}

/// An entry not imported because its log broke before it (only with `--force`, or in a refusal).
/// Serialised as the origin's fields followed by `reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedEntry {
    #[serde(flatten)]
    pub origin: EntryOrigin,
    /// The finding kind that broke the log.
    pub reason: String,
}

/// What differs from one dropped entry to the next (the rest is its log's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dropped {
    pub(super) log: u32,
    pub(super) index: u64,
    pub(super) job_id: String,
    pub(super) t_hlc: String,
}

impl Spilled for Dropped {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, u64::from(self.log));
        put_u64(out, self.index);
        put_opt_str(out, Some(&self.job_id));
        put_opt_str(out, Some(&self.t_hlc));
    }

    fn decode(r: &mut impl Read) -> io::Result<Self> {
        let mut b = [0u8; 8];
        r.read_exact(&mut b)?;
        let log = u32::try_from(u64::from_le_bytes(b)).map_err(|_| invalid("log"))?;
        r.read_exact(&mut b)?;
        let index = u64::from_le_bytes(b);
        let mut text = || get_opt_str(r)?.ok_or_else(|| invalid("text"));
        let job_id = text()?;
        let t_hlc = text()?;
        Ok(Dropped {
            log,
            index,
            job_id,
            t_hlc,
        })
    }

    fn weight(&self) -> usize {
        std::mem::size_of::<Self>() + self.job_id.capacity() + self.t_hlc.capacity()
    }
}

/// The entries of a bundle that were never parsed (or follow one that was not), as they arrive:
/// log after log, each in index order. Each run of one log in increasing index is a segment.
pub(super) struct Unparsed {
    list: SpillList<Dropped>,
    /// (log, where its entries start, how many, the last index).
    segments: Vec<(u32, SpillMark, usize, u64)>,
}

impl Unparsed {
    pub(super) fn new(budget: usize) -> Self {
        Unparsed {
            list: SpillList::new(budget),
            segments: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, d: Dropped) {
        match self.segments.last_mut() {
            Some((log, _, n, last)) if *log == d.log && d.index > *last => {
                *n += 1;
                *last = d.index;
            }
            _ => self.segments.push((d.log, self.list.mark(), 1, d.index)),
        }
        self.list.push(d);
    }

    /// Writes what is buffered (before [`collect`] reads it); the first write error, if any.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        self.list.finish()
    }
}

/// One input's dropped entries in report order (see the module's text).
pub(super) struct DroppedList {
    bundle_id: String,
    file: String,
    /// The node id (clipped) of each log, by log position.
    nodes: Vec<String>,
    /// The kind of each log's first finding, by log position.
    reasons: Vec<Option<&'static str>>,
    entries: SpillList<Dropped>,
}

impl std::fmt::Debug for DroppedList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DroppedList")
            .field("bundle_id", &self.bundle_id)
            .field("file", &self.file)
            .field("len", &self.len())
            .field("in_file", &self.entries.in_file())
            .finish()
    }
}

impl DroppedList {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many are in the temporary file.
    #[cfg(test)]
    pub(super) fn in_file(&self) -> usize {
        self.entries.in_file()
    }

    /// The temporary file holding those (device, inode), if any.
    #[cfg(test)]
    pub(super) fn file_id(&self) -> Option<(u64, u64)> {
        self.entries.file_id()
    }

    /// Reads every entry in the temporary file back (decoding each, keeping none): the first
    /// failure, so that an import refuses before its commit a list its report could not list.
    pub(super) fn check_readable(&self) -> io::Result<()> {
        if self.entries.in_file() == 0 {
            return Ok(());
        }
        self.entries
            .iter()
            .try_for_each(|d| d.map(drop).map_err(reading))
    }

    /// Every dropped entry in report order (those in the file read back as they are reached).
    pub(super) fn iter(&self) -> impl Iterator<Item = io::Result<DroppedEntry>> + '_ {
        self.entries
            .iter()
            .map(|d| d.map(|d| self.entry(&d)).map_err(reading))
    }

    fn entry(&self, d: &Dropped) -> DroppedEntry {
        let log = d.log as usize;
        DroppedEntry {
            origin: EntryOrigin {
                bundle_id: self.bundle_id.clone(),
                file: self.file.clone(),
                node_id: self.nodes.get(log).cloned().unwrap_or_default(),
                index: d.index,
                job_id: d.job_id.clone(),
                t_hlc: d.t_hlc.clone(),
            },
            reason: self
                .reasons
                .get(log)
                .copied()
                .flatten()
                .unwrap_or("unverified")
                .to_string(),
        }
    }
}

/// A read-back failure that says what failed.
fn reading(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("reading the dropped entries back from their temporary file failed: {e}"),
    )
}

/// What [`collect`] takes of a loaded bundle.
pub(super) struct Parts<'a> {
    pub(super) bundle_id: &'a str,
    pub(super) file: &'a str,
    /// Node id (clipped) and first finding's kind of each log, by log position.
    pub(super) nodes: Vec<String>,
    pub(super) reasons: Vec<Option<&'static str>>,
    /// Each log's parsed keys (from its first entry on) and how many of them are kept.
    pub(super) logs: Vec<(&'a [EntryKey], usize)>,
    /// The node id each log's keys carry (their HLC's).
    pub(super) key_nodes: &'a [String],
}

/// One ordered source of a node's dropped entries: its merge key is (index, class, ordinal).
type Stream<'a> = Box<dyn Iterator<Item = io::Result<Dropped>> + 'a>;

/// The dropped entries of a bundle in report order, kept in about `budget` bytes of memory (the
/// rest in `spill`, the file every input of a call shares): the parsed ones past each log's kept
/// prefix, and `unparsed` (finished).
pub(super) fn collect(
    parts: Parts<'_>,
    unparsed: &Unparsed,
    budget: usize,
    spill: &Arc<SharedSpill>,
) -> io::Result<DroppedList> {
    // The sources: per log its parsed entries past the prefix (class 0, ordinal the log), per
    // segment its unparsed entries (class 1, ordinal the segment): the original order of ties.
    let node = |log: usize| parts.nodes.get(log).map_or("", String::as_str);
    let mut sources: Vec<(&str, u8, usize)> = Vec::new();
    for (log, (keys, kept)) in parts.logs.iter().enumerate() {
        if keys.len() > *kept {
            sources.push((node(log), 0, log));
        }
    }
    for (seg, s) in unparsed.segments.iter().enumerate() {
        sources.push((node(s.0 as usize), 1, seg));
    }
    // By node id (stably: ties keep the order above).
    sources.sort_by(|a, b| a.0.cmp(b.0));
    let mut entries = SpillList::shared(budget, spill);
    let mut rest = &sources[..];
    while let Some(first) = rest.first() {
        let n = rest.iter().take_while(|s| s.0 == first.0).count();
        let streams: Vec<(u8, usize, Stream<'_>)> = rest[..n]
            .iter()
            .map(|&(_, class, ord)| (class, ord, stream(&parts, unparsed, class, ord, n)))
            .collect();
        merge_by_index(streams, &mut |d| entries.push(d))?;
        rest = &rest[n..];
    }
    entries.finish()?;
    Ok(DroppedList {
        bundle_id: parts.bundle_id.to_string(),
        file: parts.file.to_string(),
        nodes: parts.nodes,
        reasons: parts.reasons,
        entries,
    })
}

/// Source `ord` of class `class` (see [`collect`]), one of `of` read at once.
fn stream<'a>(
    parts: &Parts<'a>,
    unparsed: &'a Unparsed,
    class: u8,
    ord: usize,
    of: usize,
) -> Stream<'a> {
    if class == 0 {
        let (keys, kept) = parts.logs[ord];
        let node = parts.key_nodes.get(ord).map_or("", String::as_str);
        let log = ord as u32;
        return Box::new(keys.iter().enumerate().skip(kept).map(move |(index, k)| {
            Ok(Dropped {
                log,
                index: index as u64,
                job_id: uuid::Uuid::from_bytes(k.job_id).to_string(),
                t_hlc: hlc_text(k.physical, k.logical, node).to_string(),
            })
        }));
    }
    let (_, mark, n, _) = unparsed.segments[ord];
    // Read no further than the segment: its read buffer is then no larger than its bytes (a
    // bundle of many one-entry logs under one node id merges that many segments at once).
    let until = unparsed.segments.get(ord + 1).map(|s| s.1);
    let buffer = ((4usize << 20) / of).clamp(8 << 10, 64 << 10);
    Box::new(
        unparsed
            .list
            .between(mark, until, buffer)
            .take(n)
            .map(|d| d.map(std::borrow::Cow::into_owned).map_err(reading)),
    )
}

/// A k-way merge of `streams` (each in increasing index) by (index, class, ordinal), to `out`.
fn merge_by_index(
    mut streams: Vec<(u8, usize, Stream<'_>)>,
    out: &mut dyn FnMut(Dropped),
) -> io::Result<()> {
    if let [(_, _, only)] = &mut streams[..] {
        for d in only {
            out(d?);
        }
        return Ok(());
    }
    let mut heads: Vec<Option<Dropped>> = Vec::with_capacity(streams.len());
    let mut heap = BinaryHeap::new();
    for (i, (class, ord, s)) in streams.iter_mut().enumerate() {
        let head = s.next().transpose()?;
        if let Some(d) = &head {
            heap.push(Reverse((d.index, *class, *ord, i)));
        }
        heads.push(head);
    }
    while let Some(Reverse((_, class, ord, i))) = heap.pop() {
        let next = streams[i].2.next().transpose()?;
        if let Some(d) = &next {
            heap.push(Reverse((d.index, class, ord, i)));
        }
        if let Some(d) = std::mem::replace(&mut heads[i], next) {
            out(d);
        }
    }
    Ok(())
}
