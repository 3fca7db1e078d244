//! Findings in bounded memory. A damaged bundle may have a finding for every entry (every payload
//! edited: a million findings, ~750 bytes each in memory); past a budget they go to unnamed
//! temporary files in a compact binary form and are read back, in order, as the report is written.
//!
//! [`FindingLog`] holds the report's log findings in report order: the first ones in memory, the
//! rest in the file, with what the text report needs of each log ([`LogTally`]). The findings of
//! the log being read are sorted when the log ends (by entry, log-level ones last); past the
//! budget its in-memory chunk is sorted and written at the file's end as a run (a chunk that sorts
//! after the previous one extends it: entries come in order, so a log with a finding at every
//! entry makes one run). At the log's end one run followed by the rest of the chunk is already in
//! report order and stays where it is; otherwise the runs and the chunk are merged, stably, to the
//! file's end.
//!
//! [`SpillList`] is the same mechanism for any [`Spilled`] value kept in the order pushed (an
//! import's dropped entries).

use super::finding::{Check, Finding, FindingKind};
use super::report::LogTally;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes of findings kept in memory twice (the report's first findings, and the chunk of the log
/// being read) before the rest go to a temporary file (about 10,000 payload-modified findings).
pub const FINDINGS_MEMORY: usize = 4 << 20;
/// Encoded bytes collected before a write to the file.
const WRITE_BUFFER: usize = 256 << 10;
/// Read buffers of a merge, shared by its runs (each gets 8 to 256 KiB).
const MERGE_BUFFERS: usize = 4 << 20;

/// What one finding costs in memory, roughly (the budget's unit).
pub(super) fn weight(f: &Finding) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
    std::mem::size_of::<Finding>()
        + f.message.capacity()
        + text(&f.node_id)
        + text(&f.job_id)
        + text(&f.expected)
        + text(&f.actual)
}

/// A value that can be kept in a temporary file ([`SpillList`], [`FindingLog`]): its binary form
/// and what it costs in memory.
pub(crate) trait Spilled: Clone {
    /// Appends the value's binary form to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Reads back one value [`Spilled::encode`] wrote.
    fn decode(r: &mut impl Read) -> io::Result<Self>;
    /// What the value costs in memory, roughly (the budget's unit).
    fn weight(&self) -> usize;
}

impl Spilled for Finding {
    fn encode(&self, out: &mut Vec<u8>) {
        encode(self, out)
    }

    fn decode(r: &mut impl Read) -> io::Result<Self> {
        decode(r)
    }

    fn weight(&self) -> usize {
        weight(self)
    }
}

/// The order of a log's findings: by entry, log-level ones (no index) last, then by kind.
fn key(f: &Finding) -> (u64, FindingKind) {
    (f.index.unwrap_or(u64::MAX), f.kind)
}

/// Writing or reading back the findings' temporary file failed.
#[derive(Debug)]
pub struct SpillError {
    writing: bool,
    source: io::Error,
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = crate::core::text::visible_path(&Self::dir());
        if self.writing {
            write!(
                f,
                "verify keeps the findings past its first {} MiB in an unnamed temporary file in \
                 {dir} ($TMPDIR), and writing that file failed: {}. Make room there (it must be a \
                 writable directory), or point TMPDIR at a directory with room, then verify again",
                FINDINGS_MEMORY >> 20,
                self.source
            )
        } else {
            write!(
                f,
                "reading the findings back from their temporary file in {dir} ($TMPDIR) failed: {}",
                self.source
            )
        }
    }
}

impl std::error::Error for SpillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl SpillError {
    /// Where the temporary file is (`$TMPDIR`, else /tmp).
    fn dir() -> PathBuf {
        std::env::temp_dir()
    }

    /// Reading the findings back failed.
    pub(super) fn reading(source: io::Error) -> SpillError {
        SpillError {
            writing: false,
            source,
        }
    }
}

/// A read-back failure as an `io::Error` that says what failed.
pub(super) fn read_error(source: io::Error) -> io::Error {
    io::Error::new(source.kind(), SpillError::reading(source))
}

/// Serialises `items`, read back one at a time (from memory or a spill file), as a sequence of
/// `len` elements; a read error fails the serialisation with that error.
pub(crate) fn serialize_read_back<S, T, B, I>(s: S, len: usize, items: I) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    T: serde::Serialize + ?Sized,
    B: std::ops::Deref<Target = T>,
    I: Iterator<Item = io::Result<B>>,
{
    use serde::ser::{Error as _, SerializeSeq};
    let mut seq = s.serialize_seq(Some(len))?;
    for item in items {
        seq.serialize_element(&*item.map_err(S::Error::custom)?)?;
    }
    seq.end()
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    out.push(u8::from(v.is_some()));
    put_u64(out, v.unwrap_or_default());
}

pub(crate) fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    out.push(u8::from(s.is_some()));
    let s = s.unwrap_or_default();
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends `f` in the file's form: kind, log, index, nodeId, jobId, expected, actual, message.
fn encode(f: &Finding, out: &mut Vec<u8>) {
    let kind = FindingKind::ALL.iter().position(|k| *k == f.kind);
    out.push(kind.unwrap_or_default() as u8);
    put_opt_u64(out, f.log.map(|l| l as u64));
    put_opt_u64(out, f.index);
    for s in [&f.node_id, &f.job_id, &f.expected, &f.actual] {
        put_opt_str(out, s.as_deref());
    }
    put_opt_str(out, Some(f.message.as_str()));
}

pub(crate) fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("damaged record: {what}"),
    )
}

fn get_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn get_opt_u64(r: &mut impl Read) -> io::Result<Option<u64>> {
    let present = get_u8(r)? != 0;
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(present.then_some(u64::from_le_bytes(b)))
}

pub(crate) fn get_opt_str(r: &mut impl Read) -> io::Result<Option<String>> {
    let present = get_u8(r)? != 0;
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    let len = u64::from_le_bytes(b);
    let mut text = Vec::new();
    if len <= 1 << 20 {
        text.resize(len as usize, 0);
        r.read_exact(&mut text)?;
    } else {
        // A long value (untrusted text can be): no allocation sized by the file alone.
        r.take(len).read_to_end(&mut text)?;
        if text.len() as u64 != len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    let text = String::from_utf8(text).map_err(|_| invalid("text"))?;
    Ok(present.then_some(text))
}

fn decode(r: &mut impl Read) -> io::Result<Finding> {
    let kind = *FindingKind::ALL
        .get(usize::from(get_u8(r)?))
        .ok_or_else(|| invalid("kind"))?;
    let log = get_opt_u64(r)?.map(|l| l as usize);
    let index = get_opt_u64(r)?;
    let node_id = get_opt_str(r)?;
    let job_id = get_opt_str(r)?;
    let expected = get_opt_str(r)?;
    let actual = get_opt_str(r)?;
    let message = get_opt_str(r)?.ok_or_else(|| invalid("message"))?;
    Ok(Finding {
        kind,
        node_id,
        index,
        job_id,
        expected,
        actual,
        message,
        log,
    })
}

/// One unnamed temporary file that several [`SpillList`]s append to (made on first use), so that
/// many lists (an import's dropped entries of each of hundreds of inputs) hold one descriptor, not
/// one each. Each list writes its buffered values as one piece at the file's end (under the lock)
/// and remembers where its pieces are; reads are positioned, so lists read at once.
#[derive(Default)]
pub(crate) struct SharedSpill {
    file: OnceLock<File>,
    /// Bytes in the file (every list's).
    end: Mutex<u64>,
}

impl SharedSpill {
    pub(crate) fn new() -> Arc<SharedSpill> {
        Arc::new(SharedSpill::default())
    }

    /// Writes `bytes` at the file's end (making the file first): where they are.
    fn append(&self, bytes: &[u8]) -> io::Result<Range<u64>> {
        let mut end = self.end.lock().unwrap_or_else(|e| e.into_inner());
        let file = match self.file.get() {
            Some(f) => f,
            None => {
                let _ = self.file.set(tempfile::tempfile()?);
                self.file.get().ok_or_else(|| io::Error::other("no file"))?
            }
        };
        file.write_all_at(bytes, *end)?;
        let at = *end..*end + bytes.len() as u64;
        *end = at.end;
        Ok(at)
    }
}

/// A file of its own: its bytes are where the list's offsets say.
static WHOLE: [(u64, Range<u64>); 1] = [(0, 0..u64::MAX)];

/// An unnamed temporary file that findings are appended to (made on first use), or a
/// [`SharedSpill`]. After a failed write nothing more is written; the error is kept for
/// [`SpillFile::check`].
#[derive(Default)]
struct SpillFile {
    file: Option<File>,
    /// Writes go to this file shared with other lists instead (`file` stays `None`).
    shared: Option<Arc<SharedSpill>>,
    /// In a shared file: where each piece of this list's bytes is, (offset in the list, range in
    /// the file), in order.
    pieces: Vec<(u64, Range<u64>)>,
    buf: Vec<u8>,
    /// Bytes in the file (this list's).
    written: u64,
    failed: Option<io::Error>,
}

impl SpillFile {
    fn append<T: Spilled>(&mut self, v: &T) {
        if self.failed.is_some() {
            return;
        }
        v.encode(&mut self.buf);
        if self.buf.len() >= WRITE_BUFFER {
            self.flush();
        }
    }

    /// The end of what was appended, in bytes (written or still buffered).
    fn end(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn flush(&mut self) {
        if self.buf.is_empty() || self.failed.is_some() {
            self.buf.clear();
            return;
        }
        if let Some(shared) = &self.shared {
            match shared.append(&self.buf) {
                Ok(at) => {
                    self.pieces.push((self.written, at));
                    self.written += self.buf.len() as u64;
                    self.buf.clear();
                }
                Err(e) => self.fail(e),
            }
            return;
        }
        let file = match &self.file {
            Some(f) => f,
            None => match tempfile::tempfile() {
                Ok(f) => self.file.insert(f),
                Err(e) => return self.fail(e),
            },
        };
        match file.write_all_at(&self.buf, self.written) {
            Ok(()) => {
                self.written += self.buf.len() as u64;
                self.buf.clear();
            }
            Err(e) => self.fail(e),
        }
    }

    /// The file read back and where this list's bytes are in it (see [`RangeReader`]).
    fn source(&self) -> (Option<&File>, &[(u64, Range<u64>)]) {
        match &self.shared {
            Some(shared) => (shared.file.get(), &self.pieces),
            None => (self.file.as_ref(), &WHOLE),
        }
    }

    fn fail(&mut self, e: io::Error) {
        self.failed = Some(e);
        self.buf = Vec::new();
    }

    /// Writes what is buffered; the first write error, if any.
    fn check(&mut self) -> Result<(), SpillError> {
        self.flushed().map_err(|source| SpillError {
            writing: true,
            source,
        })
    }

    /// Writes what is buffered; the first write error, if any, as it was.
    fn flushed(&mut self) -> io::Result<()> {
        self.flush();
        self.failed.take().map_or(Ok(()), Err)
    }
}

/// Reads the values in bytes `range` of a file (written), `buffer` bytes at a time (a buffer no
/// larger than the range: none for an empty one); `source` is the file and where its bytes are
/// ([`SpillFile::source`]).
fn reader<'a, T>(
    source: (Option<&'a File>, &'a [(u64, Range<u64>)]),
    range: Range<u64>,
    buffer: usize,
) -> SpillReader<'a, T> {
    let len = usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(usize::MAX);
    SpillReader {
        values: std::marker::PhantomData,
        bytes: BufReader::with_capacity(
            buffer.min(len),
            RangeReader {
                file: source.0,
                pieces: source.1,
                pos: range.start,
                end: range.end,
            },
        ),
    }
}

/// Positioned reads of a byte range of a list's bytes, in the file's `pieces` (offset in the list,
/// range in the file).
struct RangeReader<'a> {
    file: Option<&'a File>,
    pieces: &'a [(u64, Range<u64>)],
    pos: u64,
    end: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end - self.pos).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        let Some(file) = self.file.filter(|_| n > 0) else {
            return Ok(0);
        };
        // The piece holding `pos`: the last one starting at or before it.
        let i = self.pieces.partition_point(|p| p.0 <= self.pos);
        let Some((at, range)) = i.checked_sub(1).and_then(|i| self.pieces.get(i)) else {
            return Err(invalid("offset"));
        };
        let start = range.start + (self.pos - at);
        let in_piece = usize::try_from(range.end.saturating_sub(start)).unwrap_or(usize::MAX);
        let n = n.min(in_piece);
        if n == 0 {
            return Err(invalid("offset"));
        }
        #[cfg(test)]
        failing::read()?;
        let got = file.read_at(&mut buf[..n], start)?;
        self.pos += got as u64;
        Ok(got)
    }
}

/// The test seam: reads of spilled values fail on this thread past a count.
#[cfg(test)]
pub(crate) mod failing {
    use std::cell::Cell;
    use std::io;

    thread_local! {
        static READS_LEFT: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// On this thread, the next `n` reads of a spill file succeed and the ones after fail (`None`:
    /// none fail).
    pub(crate) fn fail_reads_after(n: Option<u64>) {
        READS_LEFT.with(|c| c.set(n));
    }

    pub(super) fn read() -> io::Result<()> {
        READS_LEFT.with(|c| match c.get() {
            Some(0) => Err(io::Error::other("injected read failure")),
            Some(n) => {
                c.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        })
    }
}

/// Values read back from a [`SpillFile`], in the order written.
struct SpillReader<'a, T> {
    values: std::marker::PhantomData<T>,
    bytes: BufReader<RangeReader<'a>>,
}

impl<T: Spilled> Iterator for SpillReader<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        match self.bytes.fill_buf() {
            Ok([]) => None,
            Ok(_) => Some(T::decode(&mut self.bytes)),
            Err(e) => Some(Err(e)),
        }
    }
}

/// The report's log findings in report order: the first ones in memory (up to the budget, and
/// only until a log's findings go to the file), the rest in a temporary file; with each log's
/// [`LogTally`] and the checks they fail. The log being read keeps its findings in a chunk (the
/// caller's vector); past the budget the chunk is sorted and written at the file's end as a run,
/// see the module's text.
pub(super) struct FindingLog {
    budget: usize,
    mem: Vec<Finding>,
    weight: usize,
    file: SpillFile,
    /// The byte ranges of the file holding the findings after `mem`, in order.
    live: Vec<Range<u64>>,
    /// Findings in `live`.
    in_file: usize,
    /// The log being read's runs (at the file's end, after `live`) and their findings.
    runs: Vec<Range<u64>>,
    in_runs: usize,
    /// The key of the last finding written to a run (a chunk sorting after it extends that run).
    last: Option<(u64, FindingKind)>,
    /// Findings of the chunk already weighed, and their weight.
    weighed: usize,
    chunk_weight: usize,
    /// Indexed by log position; each log's own findings (sorted), counted in any order.
    tallies: Vec<LogTally>,
    /// Bit `Check as u8` set when a finding fails that check.
    failed: u8,
}

impl FindingLog {
    /// Keeps about `budget` bytes of findings in memory twice (the report's first ones, the chunk
    /// of the log being read); `usize::MAX`: all of them.
    pub(super) fn new(budget: usize) -> Self {
        FindingLog {
            budget,
            mem: Vec::new(),
            weight: 0,
            file: SpillFile::default(),
            live: Vec::new(),
            in_file: 0,
            runs: Vec::new(),
            in_runs: 0,
            last: None,
            weighed: 0,
            chunk_weight: 0,
            tallies: Vec::new(),
            failed: 0,
        }
    }

    /// Counts `f` in its log's tally and the failed checks.
    fn tally(&mut self, f: &Finding) {
        self.failed |= 1 << f.kind.check() as u8;
        if let Some(log) = f.log {
            if self.tallies.len() <= log {
                self.tallies.resize(log + 1, LogTally::default());
            }
            self.tallies[log].add_any_order(f);
        }
    }

    /// Appends `f` to the file, after everything there.
    fn append(&mut self, f: &Finding) {
        let start = self.file.end();
        self.file.append(f);
        extend(&mut self.live, start..self.file.end());
        self.in_file += 1;
    }

    /// Adds the next finding of the report (counted).
    fn push(&mut self, f: Finding) {
        self.tally(&f);
        if self.live.is_empty() && self.budget != usize::MAX {
            self.weight += weight(&f);
        }
        if self.live.is_empty() && self.weight <= self.budget {
            self.mem.push(f);
        } else {
            self.append(&f);
        }
    }

    /// Called with the log's chunk after each entry (so a run never splits an entry's findings):
    /// writes it out as a run when it exceeds the budget.
    pub(super) fn after_entry(&mut self, chunk: &mut Vec<Finding>) {
        if self.budget == usize::MAX || chunk.len() == self.weighed {
            return;
        }
        self.chunk_weight += chunk[self.weighed..].iter().map(weight).sum::<usize>();
        self.weighed = chunk.len();
        if self.chunk_weight > self.budget {
            self.write_run(chunk);
        }
    }

    /// Adds one finding made at the log's end to its chunk.
    pub(super) fn push_late(&mut self, chunk: &mut Vec<Finding>, f: Finding) {
        chunk.push(f);
        self.after_entry(chunk);
    }

    fn write_run(&mut self, chunk: &mut Vec<Finding>) {
        chunk.sort_by_key(key);
        let start = self.file.end();
        let extends = match (self.last, chunk.first()) {
            (Some(last), Some(first)) => key(first) >= last,
            _ => false,
        };
        for f in chunk.iter() {
            self.tally(f);
            self.file.append(f);
        }
        self.in_runs += chunk.len();
        self.last = chunk.last().map(key).or(self.last);
        match self.runs.last_mut() {
            Some(run) if extends => run.end = self.file.end(),
            _ => self.runs.push(start..self.file.end()),
        }
        chunk.clear();
        self.weighed = 0;
        self.chunk_weight = 0;
    }

    /// Ends the log: its findings (the runs and `chunk`) join the report sorted by key, stably
    /// (the order `chunk.sort_by_key` would give were they all still in `chunk`), each passed
    /// through `fill` first. Runs that already are in that order stay where they are; others are
    /// merged to the file's end. A failure to read runs back is returned; a write failure is kept
    /// for [`FindingLog::check`] (the findings are then incomplete, and verification fails).
    pub(super) fn end_log(
        &mut self,
        mut chunk: Vec<Finding>,
        fill: &dyn Fn(&mut Finding),
    ) -> io::Result<()> {
        chunk.sort_by_key(key);
        self.weighed = 0;
        self.chunk_weight = 0;
        let runs = std::mem::take(&mut self.runs);
        let in_runs = std::mem::replace(&mut self.in_runs, 0);
        let last = self.last.take();
        if runs.is_empty() {
            for mut f in chunk {
                fill(&mut f);
                self.push(f);
            }
            return Ok(());
        }
        let in_place = runs.len() == 1 && chunk.first().is_none_or(|f| Some(key(f)) >= last);
        self.in_file += in_runs;
        if in_place {
            // The run is not passed through `fill`: every finding made before the log's end names
            // its node, and the chain's findings name the log's (the fill changes nothing there).
            extend(&mut self.live, runs[0].clone());
            for mut f in chunk {
                fill(&mut f);
                self.tally(&f);
                self.append(&f);
            }
            return Ok(());
        }
        for f in &chunk {
            self.tally(f);
        }
        self.in_file += chunk.len();
        self.file.flush();
        // Read through a second handle while the merge appends through the first.
        let source = self.file.file.as_ref().map(File::try_clone).transpose()?;
        let source = (source.as_ref(), &WHOLE[..]);
        let start = self.file.end();
        let file = &mut self.file;
        merge(source, &runs, chunk, &mut |mut f| {
            fill(&mut f);
            file.append(&f);
        })?;
        extend(&mut self.live, start..self.file.end());
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.mem.len() + self.in_file
    }

    /// Findings in the temporary file.
    pub(super) fn in_file(&self) -> usize {
        self.in_file
    }

    pub(super) fn fails(&self, c: Check) -> bool {
        self.failed & (1 << c as u8) != 0
    }

    /// Each log's tally over its own findings, by log position.
    pub(super) fn tallies(&self) -> &[LogTally] {
        &self.tallies
    }

    /// Writes what is buffered; the first write error, if any.
    pub(super) fn check(&mut self) -> Result<(), SpillError> {
        self.file.check()
    }

    /// Takes the findings when none went to the file (`None` otherwise).
    pub(super) fn take_memory(&mut self) -> Option<Vec<Finding>> {
        (self.in_file == 0).then(|| std::mem::take(&mut self.mem))
    }

    /// Every finding in order (those in the file read back as they are reached).
    pub(super) fn iter(&self) -> impl Iterator<Item = io::Result<Cow<'_, Finding>>> {
        let source = self.file.source();
        let read = self
            .live
            .iter()
            .flat_map(move |r| reader::<Finding>(source, r.clone(), 64 << 10))
            .map(|r| r.map(Cow::Owned).map_err(read_error));
        self.mem.iter().map(|f| Ok(Cow::Borrowed(f))).chain(read)
    }
}

/// Adds the byte range `r` after the last of `live` (joined when they touch).
fn extend(live: &mut Vec<Range<u64>>, r: Range<u64>) {
    if r.is_empty() {
        return;
    }
    match live.last_mut() {
        Some(last) if last.end == r.start => last.end = r.end,
        _ => live.push(r),
    }
}

/// Values in the order pushed, in bounded memory: the first ones in memory (up to a budget of
/// [`Spilled::weight`]), the rest in an unnamed temporary file (made on first use), read back in
/// order. Read it only after [`SpillList::finish`].
pub(crate) struct SpillList<T> {
    budget: usize,
    mem: Vec<T>,
    weight: usize,
    file: SpillFile,
    in_file: usize,
}

/// A position in a [`SpillList`]: the values pushed after it are read with [`SpillList::from`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpillMark {
    mem: usize,
    file: u64,
}

impl<T: Spilled> SpillList<T> {
    /// Keeps about `budget` bytes of values in memory; `usize::MAX`: all of them.
    pub(crate) fn new(budget: usize) -> Self {
        SpillList {
            budget,
            mem: Vec::new(),
            weight: 0,
            file: SpillFile::default(),
            in_file: 0,
        }
    }

    /// [`SpillList::new`] whose values past the budget go to `file`, shared with other lists.
    pub(crate) fn shared(budget: usize, file: &Arc<SharedSpill>) -> Self {
        let mut list = SpillList::new(budget);
        list.file.shared = Some(Arc::clone(file));
        list
    }

    /// The file the values past the budget went to (its device and inode), if any.
    #[cfg(test)]
    pub(crate) fn file_id(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = self.file.source().0?.metadata().ok()?;
        Some((m.dev(), m.ino()))
    }

    /// Adds `v` after the others. A write failure is kept for [`SpillList::finish`].
    pub(crate) fn push(&mut self, v: T) {
        if self.in_file == 0 {
            self.weight = self.weight.saturating_add(v.weight());
            if self.weight <= self.budget {
                self.mem.push(v);
                return;
            }
        }
        self.file.append(&v);
        self.in_file += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.mem.len() + self.in_file
    }

    /// Values in the temporary file.
    pub(crate) fn in_file(&self) -> usize {
        self.in_file
    }

    /// The position after the values pushed so far.
    pub(crate) fn mark(&self) -> SpillMark {
        SpillMark {
            mem: self.mem.len(),
            file: self.file.end(),
        }
    }

    /// Writes what is buffered; the first write error, if any (the list is then incomplete).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let r = self.file.flushed();
        // Nothing more is written: the write buffer's memory goes (many lists are kept at once).
        self.file.buf = Vec::new();
        r
    }

    /// Every value in order (those in the file read back as they are reached).
    pub(crate) fn iter(&self) -> impl Iterator<Item = io::Result<Cow<'_, T>>> {
        self.from(SpillMark { mem: 0, file: 0 }, 64 << 10)
    }

    /// The values pushed after `mark`, in order, reading the file `buffer` bytes at a time.
    pub(crate) fn from(
        &self,
        mark: SpillMark,
        buffer: usize,
    ) -> impl Iterator<Item = io::Result<Cow<'_, T>>> {
        self.between(mark, None, buffer)
    }

    /// The values pushed after `mark` (and, with `until`, before that later mark's values in the
    /// file), in order, reading the file at most `buffer` bytes at a time: the read buffer is no
    /// larger than the bytes it reads, so many small ranges read at once (a merge of thousands)
    /// cost what they hold, not `buffer` each.
    pub(crate) fn between(
        &self,
        mark: SpillMark,
        until: Option<SpillMark>,
        buffer: usize,
    ) -> impl Iterator<Item = io::Result<Cow<'_, T>>> {
        debug_assert!(self.file.buf.is_empty(), "read before finish");
        let end = until.map_or(self.file.written, |u| u.file.min(self.file.written));
        let read = reader::<T>(self.file.source(), mark.file..end.max(mark.file), buffer);
        let mem_end = until.map_or(self.mem.len(), |u| u.mem.min(self.mem.len()));
        let mem = self.mem.get(mark.mem..mem_end).unwrap_or_default();
        let read = read.map(|r| r.map(Cow::Owned));
        mem.iter().map(|v| Ok(Cow::Borrowed(v))).chain(read)
    }
}

/// A k-way merge of the sorted runs of `file` and the sorted `chunk`, to `out`; equal keys keep
/// their order (runs in the order written, the chunk last).
fn merge(
    source: (Option<&File>, &[(u64, Range<u64>)]),
    runs: &[Range<u64>],
    chunk: Vec<Finding>,
    out: &mut dyn FnMut(Finding),
) -> io::Result<()> {
    let buffer = (MERGE_BUFFERS / runs.len().max(1)).clamp(8 << 10, 256 << 10);
    let mut sources: Vec<Box<dyn Iterator<Item = io::Result<Finding>> + '_>> = runs
        .iter()
        .map(|r| Box::new(reader::<Finding>(source, r.clone(), buffer)) as Box<_>)
        .collect();
    sources.push(Box::new(chunk.into_iter().map(Ok)));
    let mut heads: Vec<Option<Finding>> = Vec::with_capacity(sources.len());
    let mut heap = BinaryHeap::new();
    for (i, s) in sources.iter_mut().enumerate() {
        let head = s.next().transpose()?;
        if let Some(f) = &head {
            heap.push(Reverse((key(f), i)));
        }
        heads.push(head);
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let next = sources[i].next().transpose()?;
        if let Some(f) = &next {
            heap.push(Reverse((key(f), i)));
        }
        if let Some(f) = std::mem::replace(&mut heads[i], next) {
            out(f);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(i: u64, kind: FindingKind, text: &str) -> Finding {
        Finding::new(kind, format!("{text} {i} \u{1b}é"))
            .at(Some(2), Some("n1"), (i != 7).then_some(i))
            .job(i.is_multiple_of(2).then(|| format!("job-{i}")))
            .values(Some(text.repeat(i as usize % 3)), None)
    }

    /// A read buffer is no larger than the range it reads: a merge of many short ranges (an
    /// import's dropped entries of thousands of one-entry logs under one node id) used to take
    /// `buffer` bytes for each (8 KiB and more: about 1 GiB for 100,000 such logs).
    #[test]
    fn a_read_buffer_is_no_larger_than_its_range() {
        let mut list = SpillList::new(0);
        let mut marks = Vec::new();
        for i in 0..6 {
            marks.push(list.mark());
            list.push(finding(i, FindingKind::PayloadModified, "x"));
        }
        list.finish().unwrap();
        assert_eq!(list.in_file(), 6);
        let file = list.file.source();
        let (a, b) = (marks[2].file, marks[3].file);
        assert!(b > a && b - a < 200, "{a}..{b}");
        let one = reader::<Finding>(file, a..b, 64 << 10);
        assert!(one.bytes.capacity() <= (b - a) as usize);
        assert_eq!(reader::<Finding>(file, b..b, 64 << 10).bytes.capacity(), 0);
        // Between two marks: exactly the values pushed between them.
        let got: Vec<Finding> = list
            .between(marks[2], Some(marks[4]), 64 << 10)
            .map(|f| f.unwrap().into_owned())
            .collect();
        let want: Vec<Finding> = (2..4)
            .map(|i| finding(i, FindingKind::PayloadModified, "x"))
            .collect();
        assert_eq!(got, want);
        assert_eq!(list.from(marks[5], 64 << 10).count(), 1);
        // In memory alike.
        let mut mem = SpillList::new(usize::MAX);
        let mut marks = Vec::new();
        for i in 0..6 {
            marks.push(mem.mark());
            mem.push(finding(i, FindingKind::PayloadModified, "x"));
        }
        mem.finish().unwrap();
        assert_eq!(mem.between(marks[1], Some(marks[3]), 64).count(), 2);
    }

    #[test]
    fn a_finding_reads_back_as_written() {
        let all: Vec<Finding> = (0..20)
            .map(|i| finding(i, FindingKind::ALL[i as usize % 15], "x"))
            .chain([Finding::new(FindingKind::ManifestMismatch, "")])
            .collect();
        let mut buf = Vec::new();
        for f in &all {
            encode(f, &mut buf);
        }
        let mut r = &buf[..];
        for f in &all {
            assert_eq!(&decode(&mut r).unwrap(), f);
        }
        assert!(r.is_empty());
        assert!(decode(&mut &buf[..5]).is_err());
    }

    /// Findings pushed in an order with runs that extend each other, runs that do not, repeated
    /// keys across runs and log-level findings: every budget gives exactly the stable sort, log
    /// after log (the second log's runs go after the first's findings).
    #[test]
    fn runs_merge_to_the_stable_sort_whatever_the_budget() {
        let mut merged: Vec<Finding> = Vec::new();
        for i in 0..3000u64 {
            merged.push(finding(i, FindingKind::PayloadModified, "p"));
            if i % 5 == 0 {
                merged.push(finding(i, FindingKind::SchemaInvalid, "s"));
            }
        }
        // Made at the log's end: out of order, repeats of earlier keys.
        for i in (0..3000u32).step_by(7).rev().map(u64::from) {
            merged.push(finding(i, FindingKind::SchemaInvalid, "late"));
        }
        merged.push(finding(7, FindingKind::TailTruncated, "log"));
        // In order, with log-level findings last: one run, left in place.
        let in_place: Vec<Finding> = merged[..2000]
            .iter()
            .filter(|f| f.kind == FindingKind::PayloadModified && f.index.is_some())
            .cloned()
            .chain([finding(7, FindingKind::HeadMismatch, "log")])
            .collect();
        let logs = [&merged, &in_place, &merged[..500].to_vec()];
        let mut want = Vec::new();
        for log in logs {
            let mut sorted = log.to_vec();
            sorted.sort_by_key(key);
            want.extend(sorted);
        }
        for budget in [0, 1000, 50_000, usize::MAX] {
            let mut out = FindingLog::new(budget);
            for log in logs {
                let mut chunk = Vec::new();
                for f in log.iter().cloned() {
                    out.push_late(&mut chunk, f);
                }
                out.end_log(chunk, &|_| {}).unwrap();
            }
            out.check().unwrap();
            assert_eq!(out.len(), want.len());
            assert_eq!(out.in_file() > 0, budget != usize::MAX, "budget {budget}");
            let back: Vec<Finding> = out.iter().map(|f| f.unwrap().into_owned()).collect();
            assert!(back == want, "budget {budget}");
            let tally = &out.tallies()[2];
            assert_eq!(tally.count, want.len());
            assert_eq!(tally.first_break, Some((0, FindingKind::SchemaInvalid)));
            assert_eq!(tally.cut, Some(0));
            assert!(out.fails(Check::Links) && out.fails(Check::Schema));
            assert!(!out.fails(Check::Chain));
        }
        // Findings in order are written once; others once more, merged.
        let rewritten = |log: &[Finding]| {
            let mut out = FindingLog::new(0);
            let mut chunk = Vec::new();
            for f in log.iter().cloned() {
                out.push_late(&mut chunk, f);
            }
            out.end_log(chunk, &|_| {}).unwrap();
            let live: u64 = out.live.iter().map(|r| r.end - r.start).sum();
            out.file.end() - live
        };
        assert_eq!(rewritten(&in_place), 0);
        assert!(rewritten(&merged) > 0);
    }
}
