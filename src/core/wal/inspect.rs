//! The inspector (SPEC 11): everything about a log without changing it: header, frames, LSN and
//! HLC ranges, counts by type and state, watermarks, and where recovery would stop and why.
//! Reads with positioned reads only, so it is safe while a writer appends.

use super::frame::{node_hash, FrameType, WalHlc};
use super::reader::{Damage, FrameRef, ReadAt, WalReader};
use super::recovery::{scan, Outcome, Recovery};
use super::watermarks::Watermarks;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::str::FromStr;

/// An LSN range `A..B` (B excluded), `A..=B`, `A..` or `..B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LsnRange {
    pub start: u64,
    /// Last LSN included.
    pub last: u64,
}

impl LsnRange {
    pub const ALL: LsnRange = LsnRange {
        start: 0,
        last: u64::MAX,
    };
    pub fn contains(&self, lsn: u64) -> bool {
        self.start <= lsn && lsn <= self.last
    }
}

impl FromStr for LsnRange {
    type Err = String;
    fn from_str(s: &str) -> Result<LsnRange, String> {
        let bad =
            || format!("{s:?} is not an LSN range; write A..B (B excluded), A..=B, A.. or ..B");
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let num = |t: &str| t.parse::<u64>().map_err(|_| bad());
        let start = if a.is_empty() { 0 } else { num(a)? };
        let last = match b.strip_prefix('=') {
            Some(b) => num(b)?,
            None if b.is_empty() => u64::MAX,
            None => num(b)?.checked_sub(1).ok_or_else(bad)?,
        };
        if last < start {
            return Err(format!("{s:?} is an empty LSN range"));
        }
        Ok(LsnRange { start, last })
    }
}

/// One frame as the inspector and `wal dump` show it (SPEC 11 / `basic.expected.json`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FrameView {
    pub offset: u64,
    pub length: u64,
    pub lsn: u64,
    pub hlc: String,
    pub state: &'static str,
    #[serde(rename = "type")]
    pub frame_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The payload in hex when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_hex: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watermark: Option<WatermarkView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_state: Option<&'static str>,
    pub crc32: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WatermarkView {
    pub state: &'static str,
    pub lsn: u64,
}

impl FrameView {
    pub fn new(f: &FrameRef<'_>, node: Option<&str>, marks: &Watermarks) -> FrameView {
        let is_mark = f.frame_type == FrameType::Watermark;
        let wm = is_mark
            .then(|| super::frame::Watermark::decode(f.payload))
            .flatten();
        let text = std::str::from_utf8(f.payload).ok();
        FrameView {
            offset: f.offset,
            length: f.len(),
            lsn: f.lsn,
            hlc: f.hlc.text(node),
            state: f.state.name(),
            frame_type: f.frame_type.name(),
            payload: if is_mark {
                None
            } else {
                text.map(str::to_string)
            },
            payload_hex: (wm.is_none() && (is_mark || text.is_none()))
                .then(|| hex::encode(f.payload)),
            watermark: wm.map(|w| WatermarkView {
                state: w.state.name(),
                lsn: w.lsn,
            }),
            current_state: (!is_mark).then(|| marks.current(f.state, f.lsn).name()),
            crc32: format!("{:08x}", f.crc32),
        }
    }
}

/// Where recovery would stop and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StopView {
    pub offset: u64,
    /// `end-of-file`, `zero-tail`, or the damage kind (`crc-mismatch`, `lsn-gap`, ...).
    pub kind: &'static str,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_crc: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub computed_crc: Option<String>,
    pub zero_tail: bool,
    pub next_valid_frame: Option<u64>,
    /// What opening (or `airlock wal recover`) would do.
    pub action: String,
}

/// The inspector's report (`airlock wal inspect --json`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    pub outcome: &'static str,
    pub offset: Option<u64>,
    pub valid_frames: u64,
    pub cut_bytes: Option<u64>,
    pub file_size: u64,
    pub header: Option<HeaderView>,
    pub node: Option<String>,
    pub node_hash: Option<String>,
    pub first_lsn: Option<u64>,
    pub last_lsn: Option<u64>,
    pub first_hlc: Option<String>,
    pub last_hlc: Option<String>,
    pub counts_by_type: BTreeMap<&'static str, u64>,
    pub counts_by_state: BTreeMap<&'static str, u64>,
    pub counts_by_current_state: BTreeMap<&'static str, u64>,
    /// For each state above PENDING, the highest LSN its watermarks cover.
    pub watermarks: BTreeMap<&'static str, u64>,
    pub stop: StopView,
    pub frames: Vec<FrameView>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HeaderView {
    pub magic: &'static str,
    pub version: u32,
}

/// What the first pass learns: the node, its hash, the watermarks and the counts.
#[derive(Default)]
struct FirstPass {
    node: Option<String>,
    node_hash: Option<u64>,
    first_hlc: Option<WalHlc>,
    marks: Watermarks,
    by_type: BTreeMap<&'static str, u64>,
    by_state: BTreeMap<&'static str, u64>,
}

impl FirstPass {
    fn visit(&mut self, f: &FrameRef<'_>) {
        self.node_hash.get_or_insert(f.hlc.node_hash);
        self.first_hlc.get_or_insert(f.hlc);
        *self.by_type.entry(f.frame_type.name()).or_default() += 1;
        *self.by_state.entry(f.state.name()).or_default() += 1;
        if let Some(w) = (f.frame_type == FrameType::Watermark)
            .then(|| super::frame::Watermark::decode(f.payload))
            .flatten()
        {
            self.marks.apply(w);
        }
        if self.node.is_none() && f.frame_type != FrameType::Watermark {
            self.node = node_of_event(f);
        }
    }
}

/// The node id of an event frame: its payload's `hlc` text, if it agrees with the binary node hash.
pub fn node_of_event(f: &FrameRef<'_>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct HlcOnly {
        hlc: String,
    }
    let h: HlcOnly = serde_json::from_slice(f.payload).ok()?;
    let hlc = crate::core::hlc::Hlc::parse(&h.hlc).ok()?;
    (node_hash(&hlc.node) == f.hlc.node_hash).then_some(hlc.node)
}

/// Inspects the log at `path` read-only, listing the frames whose LSN is in `range`.
pub fn inspect(path: &Path, range: LsnRange) -> io::Result<Inspection> {
    let mut frames = Vec::new();
    let mut report = inspect_each(path, range, |v| frames.push(v))?;
    report.frames = frames;
    Ok(report)
}

/// [`inspect`], handing each listed frame to `each` instead of collecting them (for big logs).
pub fn inspect_each(
    path: &Path,
    range: LsnRange,
    each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    inspect_source(
        crate::core::file_input::open_regular(path)?,
        crate::core::file_input::open_regular(path)?,
        range,
        each,
    )
}

/// Inspects a log held in memory.
pub fn inspect_bytes(bytes: Vec<u8>, range: LsnRange) -> io::Result<Inspection> {
    let mut frames = Vec::new();
    let mut report = inspect_source(
        io::Cursor::new(bytes.clone()),
        io::Cursor::new(bytes),
        range,
        |v| frames.push(v),
    )?;
    report.frames = frames;
    Ok(report)
}

fn build(
    r: Recovery,
    first: FirstPass,
    by_current: BTreeMap<&'static str, u64>,
    frames: Vec<FrameView>,
) -> Inspection {
    let node = first.node.as_deref();
    let header_ok = !matches!(r.damage, Some(Damage::BadHeader(_)));
    Inspection {
        outcome: r.outcome.name(),
        offset: r.offset,
        valid_frames: r.valid_frames,
        cut_bytes: r.cut_bytes,
        file_size: r.file_len,
        header: header_ok.then_some(HeaderView {
            magic: "ALWL",
            version: super::frame::VERSION,
        }),
        node: first.node.clone(),
        node_hash: first.node_hash.map(|h| format!("{h:016x}")),
        first_lsn: r.first_lsn,
        last_lsn: r.last_lsn,
        first_hlc: first.first_hlc.map(|h| h.text(node)),
        last_hlc: r.last_hlc.map(|h| h.text(node)),
        counts_by_type: first.by_type,
        counts_by_state: first.by_state,
        counts_by_current_state: by_current,
        watermarks: first
            .marks
            .bands()
            .into_iter()
            .map(|(s, l)| (s.name(), l))
            .collect(),
        stop: stop_view(&r),
        frames,
    }
}

/// Where recovery stops, why, and what it would do.
pub fn stop_view(r: &Recovery) -> StopView {
    let (stored, computed) = match &r.damage {
        Some(Damage::Crc { stored, computed }) => (
            Some(format!("{stored:08x}")),
            Some(format!("{computed:08x}")),
        ),
        _ => (None, None),
    };
    let (kind, reason) = match (&r.damage, r.zero_tail) {
        (None, _) => (
            "end-of-file",
            "the last frame ends at the end of the file".to_string(),
        ),
        (Some(d), true) => (
            "zero-tail",
            format!("only zeros (preallocated space) from here: {d}"),
        ),
        (Some(d), false) => (d.kind(), d.to_string()),
    };
    let action = match r.outcome {
        Outcome::Clean => "nothing to do: the log is clean".to_string(),
        Outcome::TornTail => format!(
            "copy the {} torn bytes beside the log (<log>.torn-at-{}) and cut the log there",
            r.cut_bytes.unwrap_or(0),
            r.end
        ),
        Outcome::Refused => match r.next_valid_frame {
            Some(n) => format!("refuse to open: a CRC-valid frame follows at offset {n}, so this is damage, not a torn write"),
            None => "refuse to open: the file header is not a WAL header".to_string(),
        },
    };
    StopView {
        offset: r.end,
        kind,
        reason,
        stored_crc: stored,
        computed_crc: computed,
        zero_tail: r.zero_tail,
        next_valid_frame: r.next_valid_frame,
        action,
    }
}

/// Inspects a log given twice (two passes: watermarks first, then the frames with their states).
pub fn inspect_source<S: ReadAt>(
    src: S,
    src2: S,
    range: LsnRange,
    mut each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    let mut first = FirstPass::default();
    let recovery = scan(WalReader::new(src)?, |f| first.visit(f))?;
    let mut by_current: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut reader = WalReader::new(src2)?;
    let mut left = recovery.valid_frames;
    while left > 0 {
        let Some(f) = reader.next_frame()? else { break };
        left -= 1;
        if f.frame_type != FrameType::Watermark {
            *by_current
                .entry(first.marks.current(f.state, f.lsn).name())
                .or_default() += 1;
        }
        if range.contains(f.lsn) {
            each(FrameView::new(&f, first.node.as_deref(), &first.marks));
        }
    }
    Ok(build(recovery, first, by_current, Vec::new()))
}
