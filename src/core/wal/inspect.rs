//! The inspector (SPEC 11): everything about a log without changing it: header, frames, LSN and
//! HLC ranges, counts by type and state, watermarks, and where recovery would stop and why.
//! Reads with positioned reads only, so it is safe while a writer appends.
//!
//! Besides recovery's verdict (bytes and CRCs), it checks what SPEC 11 says about the content of
//! frames that pass recovery: a watermark frame must carry exactly `state u8 | lsn u64` with a
//! known state and cover only LSNs below its own (`badFrames`; such a frame is not applied), HLCs
//! strictly increase (`hlcRegression`: the first frame whose HLC is not above its predecessor's),
//! and no frame is stamped more than the maximum clock skew ahead of this machine's clock
//! (`clockSkew`, a warning: the writer continues after the last HLC, so it would stamp every
//! later frame after it). These do not change the outcome, which is recovery's.

use super::frame::{node_hash, BadWatermark, FrameType, HlcOrder, HlcRegression, WalHlc};
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
        let empty = || format!("{s:?} is an empty LSN range");
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let num = |t: &str| t.parse::<u64>().map_err(|_| bad());
        let start = if a.is_empty() { 0 } else { num(a)? };
        let last = match b.strip_prefix('=') {
            Some(b) => num(b)?,
            None if b.is_empty() => u64::MAX,
            // `..0` is well written and holds no LSN.
            None => num(b)?.checked_sub(1).ok_or_else(empty)?,
        };
        if last < start {
            return Err(empty());
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
    /// Why the frame breaks SPEC 11 although it passes recovery's checks (a malformed
    /// watermark frame, see [`BadFrameView`]); absent for a sound frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WatermarkView {
    pub state: &'static str,
    pub lsn: u64,
}

impl FrameView {
    /// The frame on one line: LSN, HLC, type, current state and payload (a watermark as
    /// `STATE <= LSN`, a binary payload as `hex ...`); what `wal dump` prints and the console's
    /// `/` searches. Untrusted text: the caller shows it through `visible`.
    pub fn one_line(&self) -> String {
        let body = match (&self.watermark, &self.payload, &self.payload_hex) {
            (Some(w), _, _) => format!("{} <= {}", w.state, w.lsn),
            (None, Some(p), _) => p.clone(),
            (None, None, Some(h)) => format!("hex {h}"),
            _ => String::new(),
        };
        format!(
            "{} {} {} {} {}",
            self.lsn,
            self.hlc,
            self.frame_type,
            self.current_state.unwrap_or(self.state),
            body
        )
    }

    pub fn new(f: &FrameRef<'_>, node: Option<&str>, marks: &Watermarks) -> FrameView {
        let is_mark = f.frame_type == FrameType::Watermark;
        let wm = is_mark
            .then(|| super::frame::Watermark::decode(f.payload))
            .flatten();
        let text = std::str::from_utf8(f.payload).ok();
        let problem = f
            .checked_watermark()
            .and_then(Result::err)
            .map(|e| e.to_string());
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
            problem,
        }
    }
}

/// How many bad frames the inspector lists (the rest are counted in `badFrameCount`).
pub const KEPT_BAD_FRAMES: usize = 1000;

/// A frame that passes recovery's checks but whose content breaks SPEC 11 (`badFrames`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BadFrameView {
    pub offset: u64,
    pub lsn: u64,
    #[serde(rename = "type")]
    pub frame_type: &'static str,
    /// `watermark-length`, `watermark-state` or `watermark-ahead`.
    pub kind: &'static str,
    pub reason: String,
}

/// The first frame whose HLC is not above its predecessor's (`hlcRegression`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HlcRegressionView {
    pub offset: u64,
    pub lsn: u64,
    pub hlc: String,
    pub previous_lsn: u64,
    pub previous_hlc: String,
    /// Frames in all whose HLC is not above their predecessor's.
    pub count: u64,
}

impl HlcRegressionView {
    pub fn new(r: &HlcRegression, node: Option<&str>) -> HlcRegressionView {
        HlcRegressionView {
            offset: r.offset,
            lsn: r.lsn,
            hlc: r.hlc.text(node),
            previous_lsn: r.previous_lsn,
            previous_hlc: r.previous.text(node),
            count: r.count,
        }
    }
}

/// The first frame stamped more than the maximum clock skew ahead of this machine's clock
/// (`clockSkew`, a warning).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClockSkewView {
    pub offset: u64,
    pub lsn: u64,
    pub hlc: String,
    /// How far the frame's physical time is ahead of `nowMs`.
    pub ahead_ms: u64,
    pub max_clock_skew_ms: u64,
    /// This machine's clock when the log was inspected (Unix ms).
    pub now_ms: u64,
    /// Frames in all that are that far ahead.
    pub count: u64,
    /// The highest HLC in the log (what the writer would continue after).
    pub max_hlc: String,
}

/// What the inspector compares frame HLCs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InspectOptions {
    /// This machine's clock (Unix ms).
    pub now_ms: u64,
    /// `scheduler.hlc.maxClockSkew` (default [`crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW`]).
    pub max_clock_skew_ms: u64,
}

impl Default for InspectOptions {
    fn default() -> InspectOptions {
        InspectOptions::with_max_skew(crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW)
    }
}

impl InspectOptions {
    /// This machine's clock now, and `max_clock_skew` (the configured tolerance).
    pub fn with_max_skew(max_clock_skew: std::time::Duration) -> InspectOptions {
        InspectOptions {
            now_ms: crate::core::hlc::unix_ms_now(),
            max_clock_skew_ms: u64::try_from(max_clock_skew.as_millis()).unwrap_or(u64::MAX),
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
    /// Frames that pass recovery's checks but break SPEC 11 (malformed watermark frames, not
    /// applied), the first [`KEPT_BAD_FRAMES`] in file order.
    pub bad_frames: Vec<BadFrameView>,
    /// How many bad frames there are in all.
    pub bad_frame_count: u64,
    /// The first frame whose HLC does not increase (SPEC 11: HLCs strictly increase).
    pub hlc_regression: Option<HlcRegressionView>,
    /// A warning: the first frame stamped more than the maximum clock skew ahead of this
    /// machine's clock.
    pub clock_skew: Option<ClockSkewView>,
    pub frames: Vec<FrameView>,
}

impl Inspection {
    /// Whether a frame breaks SPEC 11 although recovery accepts the bytes (bad frames, an HLC
    /// that does not increase). A clock-skew warning is not counted.
    pub fn has_problems(&self) -> bool {
        self.bad_frame_count > 0 || self.hlc_regression.is_some()
    }

    /// One line per problem and warning, for the human output.
    pub fn problem_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .bad_frames
            .iter()
            .map(|b| {
                format!(
                    "bad frame    LSN {} at offset {} ({}): {}",
                    b.lsn, b.offset, b.frame_type, b.reason
                )
            })
            .collect();
        let unlisted = self.bad_frame_count - self.bad_frames.len() as u64;
        if unlisted > 0 {
            lines.push(format!("bad frame    ... and {unlisted} more"));
        }
        if let Some(r) = &self.hlc_regression {
            lines.push(format!(
                "HLC order    LSN {} at offset {} has HLC {}, not above LSN {}'s {}: HLCs must strictly increase ({} such frame{})",
                r.lsn,
                r.offset,
                r.hlc,
                r.previous_lsn,
                r.previous_hlc,
                r.count,
                if r.count == 1 { "" } else { "s" }
            ));
        }
        if let Some(c) = &self.clock_skew {
            lines.push(format!(
                "warning      clock skew: LSN {} at offset {} has HLC {}, {} ms ahead of this machine's clock (max skew {} ms; {} such frame{}); the writer stamps new frames after {}",
                c.lsn,
                c.offset,
                c.hlc,
                c.ahead_ms,
                c.max_clock_skew_ms,
                c.count,
                if c.count == 1 { "" } else { "s" },
                c.max_hlc
            ));
        }
        lines
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HeaderView {
    pub magic: &'static str,
    pub version: u32,
}

/// What the first pass learns: the node, its hash, the watermarks, the counts and the frames
/// that break SPEC 11.
#[derive(Default)]
struct FirstPass {
    opts: Option<InspectOptions>,
    node: Option<String>,
    node_hash: Option<u64>,
    first_hlc: Option<WalHlc>,
    marks: Watermarks,
    by_type: BTreeMap<&'static str, u64>,
    by_state: BTreeMap<&'static str, u64>,
    bad_frames: Vec<BadFrameView>,
    bad_frame_count: u64,
    hlc_order: HlcOrder,
    max_hlc: Option<WalHlc>,
    /// The first frame too far ahead (offset, LSN, HLC) and how many there are.
    skew: Option<(u64, u64, WalHlc)>,
    skew_count: u64,
}

impl FirstPass {
    fn new(opts: InspectOptions) -> FirstPass {
        FirstPass {
            opts: Some(opts),
            ..FirstPass::default()
        }
    }

    fn bad_frame(&mut self, f: &FrameRef<'_>, e: BadWatermark) {
        self.bad_frame_count += 1;
        if self.bad_frames.len() < KEPT_BAD_FRAMES {
            self.bad_frames.push(BadFrameView {
                offset: f.offset,
                lsn: f.lsn,
                frame_type: f.frame_type.name(),
                kind: e.kind(),
                reason: e.to_string(),
            });
        }
    }

    fn visit(&mut self, f: &FrameRef<'_>) {
        self.node_hash.get_or_insert(f.hlc.node_hash);
        self.first_hlc.get_or_insert(f.hlc);
        *self.by_type.entry(f.frame_type.name()).or_default() += 1;
        *self.by_state.entry(f.state.name()).or_default() += 1;
        self.hlc_order.frame(f.offset, f.lsn, f.hlc);
        self.max_hlc = self.max_hlc.max(Some(f.hlc));
        if let Some(o) = self.opts {
            if f.hlc.physical > o.now_ms.saturating_add(o.max_clock_skew_ms) {
                self.skew_count += 1;
                self.skew.get_or_insert((f.offset, f.lsn, f.hlc));
            }
        }
        match f.checked_watermark() {
            Some(Ok(w)) => self.marks.apply(w),
            Some(Err(e)) => self.bad_frame(f, e),
            None => {}
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
    inspect_with(path, range, InspectOptions::default())
}

/// [`inspect`] against a given clock and maximum skew (the configured
/// `scheduler.hlc.maxClockSkew`).
pub fn inspect_with(path: &Path, range: LsnRange, opts: InspectOptions) -> io::Result<Inspection> {
    let mut frames = Vec::new();
    let mut report = inspect_each_with(path, range, opts, |v| frames.push(v))?;
    report.frames = frames;
    Ok(report)
}

/// [`inspect`], handing each listed frame to `each` instead of collecting them (for big logs).
pub fn inspect_each(
    path: &Path,
    range: LsnRange,
    each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    inspect_each_with(path, range, InspectOptions::default(), each)
}

/// [`inspect_each`] against a given clock and maximum skew.
pub fn inspect_each_with(
    path: &Path,
    range: LsnRange,
    opts: InspectOptions,
    each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    inspect_source_with(
        crate::core::file_input::open_regular(path)?,
        crate::core::file_input::open_regular(path)?,
        range,
        opts,
        each,
    )
}

/// Inspects a log held in memory.
pub fn inspect_bytes(bytes: Vec<u8>, range: LsnRange) -> io::Result<Inspection> {
    inspect_bytes_with(bytes, range, InspectOptions::default())
}

/// [`inspect_bytes`] against a given clock and maximum skew.
pub fn inspect_bytes_with(
    bytes: Vec<u8>,
    range: LsnRange,
    opts: InspectOptions,
) -> io::Result<Inspection> {
    let mut frames = Vec::new();
    let mut report = inspect_source_with(
        io::Cursor::new(bytes.clone()),
        io::Cursor::new(bytes),
        range,
        opts,
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
    let hlc_regression = first
        .hlc_order
        .regression()
        .map(|r| HlcRegressionView::new(&r, node));
    let clock_skew = match (first.skew, first.opts) {
        (Some((offset, lsn, hlc)), Some(o)) => Some(ClockSkewView {
            offset,
            lsn,
            hlc: hlc.text(node),
            ahead_ms: hlc.physical.saturating_sub(o.now_ms),
            max_clock_skew_ms: o.max_clock_skew_ms,
            now_ms: o.now_ms,
            count: first.skew_count,
            max_hlc: first.max_hlc.unwrap_or(hlc).text(node),
        }),
        _ => None,
    };
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
        bad_frames: first.bad_frames,
        bad_frame_count: first.bad_frame_count,
        hlc_regression,
        clock_skew,
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
    each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    inspect_source_with(src, src2, range, InspectOptions::default(), each)
}

/// [`inspect_source`] against a given clock and maximum skew.
pub fn inspect_source_with<S: ReadAt>(
    src: S,
    src2: S,
    range: LsnRange,
    opts: InspectOptions,
    mut each: impl FnMut(FrameView),
) -> io::Result<Inspection> {
    let mut first = FirstPass::new(opts);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::wal::frame::{edit_frame, set_physical};

    /// Offsets of the frames of `basic.alwl` by LSN (1..=10): 1 JobCreated, 4 watermark, 5
    /// JobCreated (151-byte payload), 6 JobProgressReported, 10 watermark.
    const AT: [usize; 11] = [0, 8, 206, 363, 520, 563, 748, 900, 943, 1131, 1315];
    /// 2026-01-05, a little after the vector's last frame.
    const NOW: u64 = 1_767_614_401_000;

    fn basic() -> Vec<u8> {
        std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector")
    }

    fn run(bytes: Vec<u8>) -> Inspection {
        let opts = InspectOptions {
            now_ms: NOW,
            max_clock_skew_ms: 5_000,
        };
        inspect_bytes_with(bytes, LsnRange::ALL, opts).expect("inspect")
    }

    #[test]
    fn the_vector_has_no_problems() {
        let r = run(basic());
        assert!(!r.has_problems());
        assert!(r.bad_frames.is_empty() && r.clock_skew.is_none());
        assert!(r.problem_lines().is_empty());
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["badFrames"], serde_json::json!([]));
        assert_eq!(json["hlcRegression"], serde_json::Value::Null);
        assert!(r.frames.iter().all(|f| f.problem.is_none()));
    }

    #[test]
    fn an_event_frame_retyped_as_a_watermark_is_a_bad_frame() {
        let mut b = basic();
        edit_frame(&mut b, AT[5], |f| f[33] = 0);
        let r = run(b);
        assert_eq!(r.outcome, "clean", "recovery's verdict is about bytes");
        assert_eq!(r.bad_frame_count, 1);
        let bad = &r.bad_frames[0];
        assert_eq!(
            (bad.lsn, bad.offset, bad.kind),
            (5, 563, "watermark-length")
        );
        assert!(bad.reason.contains("151 bytes"), "{}", bad.reason);
        assert!(r.frames[4].problem.is_some());
        assert!(r.has_problems());
        assert!(r.problem_lines()[0].contains("LSN 5 at offset 563"));
    }

    #[test]
    fn an_unknown_state_or_a_watermark_ahead_of_its_frame_is_a_bad_frame_and_not_applied() {
        let mut b = basic();
        edit_frame(&mut b, AT[4], |f| f[34] = 9);
        let r = run(b);
        assert_eq!(r.bad_frames[0].kind, "watermark-state");
        assert_eq!(r.bad_frames[0].lsn, 4);
        // REGIONAL <= 999 in the last frame (LSN 10): covers frames not yet in the log.
        let mut b = basic();
        edit_frame(&mut b, AT[10], |f| {
            f[34] = 1;
            f[35..43].copy_from_slice(&999u64.to_be_bytes());
        });
        let r = run(b);
        assert_eq!(r.bad_frames.len(), 1);
        assert_eq!(r.bad_frames[0].kind, "watermark-ahead");
        assert!(r.bad_frames[0].reason.contains("LSN 999"));
        assert!(
            r.watermarks["REGIONAL"] < 999,
            "not applied: {:?}",
            r.watermarks
        );
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["badFrames"][0]["lsn"], 10);
        assert_eq!(json["badFrameCount"], 1);
    }

    #[test]
    fn the_first_frame_whose_hlc_does_not_increase_is_reported() {
        let mut b = basic();
        // LSN 6 (a progress report) one second before LSN 5, payload kept consistent.
        set_physical(&mut b, AT[6], 1_767_614_399_010);
        let r = run(b);
        assert_eq!(r.outcome, "clean");
        let h = r.hlc_regression.as_ref().expect("reported");
        assert_eq!((h.lsn, h.offset, h.previous_lsn, h.count), (6, 748, 5, 1));
        assert_eq!(h.hlc, "1767614399010:0:gate-a");
        assert!(
            h.previous_hlc.starts_with("1767614400"),
            "{}",
            h.previous_hlc
        );
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["hlcRegression"]["lsn"], 6);
        assert_eq!(
            json["hlcRegression"]["previousHlc"],
            h.previous_hlc.as_str()
        );
        assert!(r.problem_lines()[0].contains("HLC order"));
    }

    #[test]
    fn a_frame_from_the_far_future_is_a_clock_skew_warning() {
        let mut b = basic();
        set_physical(&mut b, AT[10], 99_999_999_999_999);
        let r = run(b);
        assert_eq!(r.outcome, "clean");
        assert!(r.hlc_regression.is_none());
        let c = r.clock_skew.as_ref().expect("warned");
        assert_eq!((c.lsn, c.offset, c.count), (10, 1315, 1));
        assert_eq!(c.ahead_ms, 99_999_999_999_999 - NOW);
        assert_eq!(c.max_clock_skew_ms, 5_000);
        assert!(c.hlc.starts_with("99999999999999:"));
        // Within the skew: no warning.
        let mut b = basic();
        set_physical(&mut b, AT[10], NOW + 5_000);
        assert!(run(b).clock_skew.is_none());
    }
}
