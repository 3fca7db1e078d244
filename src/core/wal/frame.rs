//! The byte layout of a node WAL (SPEC section 11): file header, frame header, frame types and
//! states, the 16-byte binary HLC and the CRC.

use crate::core::hlc::{hlc_text, Hlc};
use sha2::{Digest, Sha256};
use std::fmt;

/// File magic.
pub const MAGIC: &[u8; 4] = b"ALWL";
/// The only file format version.
pub const VERSION: u32 = 1;
/// Bytes of the file header (`ALWL` + u32 version).
pub const FILE_HEADER_LEN: u64 = 8;
/// Bytes of a frame header: crc u32, total_len u32, lsn u64, hlc 16, state u8, type u8.
pub const FRAME_HEADER_LEN: usize = 34;
/// Largest payload the writer accepts (one batch's byte budget).
pub const MAX_PAYLOAD_LEN: usize = 1 << 20;
/// The longest frame a reader accepts (header + [`MAX_PAYLOAD_LEN`]): no writer makes a longer one,
/// and the bound keeps the search for a valid frame after damage linear.
pub const MAX_FRAME_LEN: u64 = (FRAME_HEADER_LEN + MAX_PAYLOAD_LEN) as u64;

/// The file header bytes.
pub fn file_header() -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(MAGIC);
    h[4..].copy_from_slice(&VERSION.to_be_bytes());
    h
}

/// One of the seed's eight ledger events (AD-38 part 1); its code is its frame type byte (SPEC 11:
/// 1 to 8 in table order).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum EventType {
    JobCreated = 1,
    JobAccepted = 2,
    JobProgressReported = 3,
    JobCancellationRequested = 4,
    JobCancellationAcked = 5,
    JobCompleted = 6,
    JobFailed = 7,
    JobTimedOut = 8,
}

impl EventType {
    /// Every event type in code order.
    pub const ALL: [EventType; 8] = [
        EventType::JobCreated,
        EventType::JobAccepted,
        EventType::JobProgressReported,
        EventType::JobCancellationRequested,
        EventType::JobCancellationAcked,
        EventType::JobCompleted,
        EventType::JobFailed,
        EventType::JobTimedOut,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<EventType> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// The seed's event name.
    pub fn name(self) -> &'static str {
        match self {
            EventType::JobCreated => "JobCreated",
            EventType::JobAccepted => "JobAccepted",
            EventType::JobProgressReported => "JobProgressReported",
            EventType::JobCancellationRequested => "JobCancellationRequested",
            EventType::JobCancellationAcked => "JobCancellationAcked",
            EventType::JobCompleted => "JobCompleted",
            EventType::JobFailed => "JobFailed",
            EventType::JobTimedOut => "JobTimedOut",
        }
    }

    /// The seed's payload fields of the event, `hlc` included.
    pub fn seed_fields(self) -> &'static [&'static str] {
        match self {
            EventType::JobCreated => &["job_id", "spec", "assigned_dcs", "fence_token", "hlc"],
            EventType::JobAccepted => &["job_id", "dc_id", "worker_count", "fence_token", "hlc"],
            EventType::JobProgressReported => &["job_id", "dc_id", "completed", "failed", "hlc"],
            EventType::JobCancellationRequested => {
                &["job_id", "reason", "requestor", "fence_token", "hlc"]
            }
            EventType::JobCancellationAcked => &["job_id", "dc_id", "workflows_cancelled", "hlc"],
            EventType::JobCompleted => &["job_id", "final_status", "aggregate_metrics", "hlc"],
            EventType::JobFailed => &["job_id", "error", "failed_dc", "hlc"],
            EventType::JobTimedOut => &["job_id", "timeout_type", "last_progress_hlc", "hlc"],
        }
    }
}

/// A frame's type byte: 0 is a watermark (control frame), 1-8 the seed's events ([`EventType::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameType {
    Watermark,
    Event(EventType),
}

impl From<EventType> for FrameType {
    fn from(t: EventType) -> FrameType {
        FrameType::Event(t)
    }
}

impl FrameType {
    /// Every type in byte order.
    pub fn all() -> impl Iterator<Item = FrameType> {
        std::iter::once(FrameType::Watermark).chain(EventType::ALL.map(FrameType::Event))
    }

    pub fn from_byte(b: u8) -> Option<FrameType> {
        match b {
            0 => Some(FrameType::Watermark),
            _ => EventType::from_code(b).map(FrameType::Event),
        }
    }

    pub fn byte(self) -> u8 {
        match self {
            FrameType::Watermark => 0,
            FrameType::Event(t) => t.code(),
        }
    }

    /// The event, unless this is a watermark.
    pub fn event(self) -> Option<EventType> {
        match self {
            FrameType::Watermark => None,
            FrameType::Event(t) => Some(t),
        }
    }

    /// The seed's event name (`Watermark` for the control frame).
    pub fn name(self) -> &'static str {
        self.event().map_or("Watermark", EventType::name)
    }

    /// Parses a seed event name (exact spelling).
    pub fn from_name(name: &str) -> Option<FrameType> {
        FrameType::all().find(|t| t.name() == name)
    }

    /// The seed's payload fields of an event type, `hlc` included (empty for watermarks).
    pub fn seed_fields(self) -> &'static [&'static str] {
        self.event().map_or(&[], EventType::seed_fields)
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame's durability state; states only move forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameState {
    Pending = 0,
    Regional = 1,
    Global = 2,
    Applied = 3,
    Compacted = 4,
}

impl FrameState {
    pub const ALL: [FrameState; 5] = [
        FrameState::Pending,
        FrameState::Regional,
        FrameState::Global,
        FrameState::Applied,
        FrameState::Compacted,
    ];

    pub fn from_byte(b: u8) -> Option<FrameState> {
        FrameState::ALL.get(b as usize).copied()
    }

    pub fn byte(self) -> u8 {
        self as u8
    }

    /// The SPEC name in capitals (`PENDING`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FrameState::Pending => "PENDING",
            FrameState::Regional => "REGIONAL",
            FrameState::Global => "GLOBAL",
            FrameState::Applied => "APPLIED",
            FrameState::Compacted => "COMPACTED",
        }
    }

    /// Parses a state name, case-insensitively.
    pub fn from_name(name: &str) -> Option<FrameState> {
        FrameState::ALL
            .iter()
            .copied()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for FrameState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// First 8 bytes of SHA-256 of a node id, as the big-endian u64 of the binary HLC.
pub fn node_hash(node: &str) -> u64 {
    let d = Sha256::digest(node.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// An HLC as a frame carries it: `physical << 16 | logical`, then the node hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WalHlc {
    pub physical: u64,
    pub logical: u16,
    pub node_hash: u64,
}

/// An HLC that does not fit the 16-byte frame encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HLC {hlc} cannot be stored in a WAL frame: physical must be below 2^48 and logical below 65536")]
pub struct HlcRangeError {
    pub hlc: String,
}

impl WalHlc {
    pub fn from_hlc(hlc: &Hlc) -> Result<WalHlc, HlcRangeError> {
        Self::from_parts(hlc.physical, hlc.logical, node_hash(&hlc.node)).ok_or(HlcRangeError {
            hlc: hlc.to_string(),
        })
    }

    /// `None` when physical or logical is out of the encodable range.
    pub fn from_parts(physical: u64, logical: u32, node_hash: u64) -> Option<WalHlc> {
        if physical >= 1 << 48 || logical > u16::MAX as u32 {
            return None;
        }
        Some(WalHlc {
            physical,
            logical: logical as u16,
            node_hash,
        })
    }

    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&((self.physical << 16) | self.logical as u64).to_be_bytes());
        b[8..].copy_from_slice(&self.node_hash.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; 16]) -> WalHlc {
        let packed = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
        WalHlc {
            physical: packed >> 16,
            logical: (packed & 0xffff) as u16,
            node_hash: u64::from_be_bytes(b[8..].try_into().unwrap_or_default()),
        }
    }

    /// The HLC with its node id, if `node` hashes to this timestamp's node hash.
    pub fn with_node(self, node: &str) -> Option<Hlc> {
        (node_hash(node) == self.node_hash)
            .then(|| Hlc::new(self.physical, self.logical as u32, node))
    }

    /// Text form; the node is the id when known (and matching), else `#` + the hash in hex.
    pub fn text(self, node: Option<&str>) -> String {
        match node.filter(|n| node_hash(n) == self.node_hash) {
            Some(n) => hlc_text(self.physical, self.logical.into(), n).to_string(),
            None => format!(
                "{}:{}:#{:016x}",
                self.physical, self.logical, self.node_hash
            ),
        }
    }
}

/// One decoded frame: owned (`Frame`, the default) or borrowed from a reader's window
/// ([`crate::core::wal::FrameRef`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<P = Vec<u8>> {
    /// Byte offset of the frame in its file.
    pub offset: u64,
    pub crc32: u32,
    pub lsn: u64,
    pub hlc: WalHlc,
    /// The state byte as written (see [`crate::core::wal::Watermarks::current`] for the current state).
    pub state: FrameState,
    pub frame_type: FrameType,
    pub payload: P,
}

impl<P: AsRef<[u8]>> Frame<P> {
    /// Bytes of the whole frame (header + payload).
    pub fn len(&self) -> u64 {
        (FRAME_HEADER_LEN + self.payload.as_ref().len()) as u64
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The watermark a control frame carries.
    pub fn watermark(&self) -> Option<Watermark> {
        if self.frame_type == FrameType::Watermark {
            Watermark::decode(self.payload.as_ref())
        } else {
            None
        }
    }

    /// The frame's bytes as they are stored.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() as usize);
        encode_frame_into(
            &mut out,
            self.lsn,
            self.hlc,
            self.state,
            self.frame_type,
            &[self.payload.as_ref()],
        );
        out
    }
}

/// A watermark payload: every frame with LSN <= `lsn` has reached at least `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Watermark {
    pub state: FrameState,
    pub lsn: u64,
}

impl Watermark {
    pub const LEN: usize = 9;

    pub fn encode(self) -> [u8; 9] {
        let mut b = [0u8; 9];
        b[0] = self.state.byte();
        b[1..].copy_from_slice(&self.lsn.to_be_bytes());
        b
    }

    /// `None` unless the payload is exactly 9 bytes with a known state.
    pub fn decode(p: &[u8]) -> Option<Watermark> {
        if p.len() != Self::LEN {
            return None;
        }
        Some(Watermark {
            state: FrameState::from_byte(p[0])?,
            lsn: u64::from_be_bytes(p[1..9].try_into().ok()?),
        })
    }
}

/// Why a watermark frame cannot be applied. SPEC 11 pins its payload as exactly `state u8 |
/// lsn u64` (9 bytes, a known state), meaning "every frame with LSN <= lsn has reached at least
/// that state": the frames it covers come before it, so it covers only LSNs below its own.
/// Recovery checks bytes and CRCs only; the inspector and the ledger fold report these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadWatermark {
    #[error("watermark payload is {0} bytes; SPEC 11 pins it as exactly 9 (state u8 | lsn u64), so this frame is not a watermark (an event frame whose type byte was changed?)")]
    Length(usize),
    #[error("watermark state byte {0} is not a state (PENDING 0, REGIONAL 1, GLOBAL 2, APPLIED 3, COMPACTED 4)")]
    State(u8),
    #[error("{state} watermark covers LSN {lsn}, at or above its own frame's LSN {frame_lsn}: a watermark covers only frames written before it")]
    Ahead {
        state: FrameState,
        lsn: u64,
        frame_lsn: u64,
    },
}

impl BadWatermark {
    /// A short name for JSON (`watermark-length`, `watermark-state`, `watermark-ahead`).
    pub fn kind(&self) -> &'static str {
        match self {
            BadWatermark::Length(_) => "watermark-length",
            BadWatermark::State(_) => "watermark-state",
            BadWatermark::Ahead { .. } => "watermark-ahead",
        }
    }
}

impl Watermark {
    /// The watermark of the control frame at `frame_lsn`, checked against SPEC 11: exactly 9
    /// bytes, a known state, and covering only LSNs below the frame's own.
    pub fn check(frame_lsn: u64, payload: &[u8]) -> Result<Watermark, BadWatermark> {
        if payload.len() != Self::LEN {
            return Err(BadWatermark::Length(payload.len()));
        }
        let state = FrameState::from_byte(payload[0]).ok_or(BadWatermark::State(payload[0]))?;
        let mut lsn = [0u8; 8];
        lsn.copy_from_slice(&payload[1..9]);
        let lsn = u64::from_be_bytes(lsn);
        if lsn >= frame_lsn {
            return Err(BadWatermark::Ahead {
                state,
                lsn,
                frame_lsn,
            });
        }
        Ok(Watermark { state, lsn })
    }
}

impl<P: AsRef<[u8]>> Frame<P> {
    /// For a control frame, its watermark checked against SPEC 11 ([`Watermark::check`]);
    /// `None` for an event frame.
    pub fn checked_watermark(&self) -> Option<Result<Watermark, BadWatermark>> {
        (self.frame_type == FrameType::Watermark)
            .then(|| Watermark::check(self.lsn, self.payload.as_ref()))
    }
}

/// The first frame of a log whose HLC is not above its predecessor's (SPEC 11: HLCs strictly
/// increase), and how many such frames the log has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HlcRegression {
    pub offset: u64,
    pub lsn: u64,
    pub hlc: WalHlc,
    pub previous_lsn: u64,
    pub previous: WalHlc,
    /// Frames in all whose HLC is not above their predecessor's.
    pub count: u64,
}

/// Checks, frame by frame in file order, that HLCs strictly increase.
#[derive(Debug, Clone, Default)]
pub struct HlcOrder {
    last: Option<(u64, WalHlc)>,
    first: Option<HlcRegression>,
    count: u64,
}

impl HlcOrder {
    /// The next frame of the log.
    pub fn frame(&mut self, offset: u64, lsn: u64, hlc: WalHlc) {
        if let Some((previous_lsn, previous)) = self.last {
            if hlc <= previous {
                self.count += 1;
                self.first.get_or_insert(HlcRegression {
                    offset,
                    lsn,
                    hlc,
                    previous_lsn,
                    previous,
                    count: 0,
                });
            }
        }
        self.last = Some((lsn, hlc));
    }

    /// The first frame whose HLC did not increase (with the count), if any.
    pub fn regression(&self) -> Option<HlcRegression> {
        self.first.map(|r| HlcRegression {
            count: self.count,
            ..r
        })
    }
}

/// Appends one encoded frame to `out`; the payload may be given in pieces (no copy first).
/// Returns the frame's CRC. Panics never; the caller bounds the payload to u32.
pub fn encode_frame_into(
    out: &mut Vec<u8>,
    lsn: u64,
    hlc: WalHlc,
    state: FrameState,
    frame_type: FrameType,
    payload: &[&[u8]],
) -> u32 {
    let start = out.len();
    let plen: usize = payload.iter().map(|p| p.len()).sum();
    let total = (FRAME_HEADER_LEN + plen) as u32;
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&lsn.to_be_bytes());
    out.extend_from_slice(&hlc.to_bytes());
    out.push(state.byte());
    out.push(frame_type.byte());
    for p in payload {
        out.extend_from_slice(p);
    }
    let crc = crc32fast::hash(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_be_bytes());
    crc
}

/// The fixed fields of a frame header, parsed without any check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    pub crc32: u32,
    pub total_len: u32,
    pub lsn: u64,
    pub hlc: WalHlc,
    pub state: u8,
    pub frame_type: u8,
}

impl RawHeader {
    pub fn parse(b: &[u8; FRAME_HEADER_LEN]) -> RawHeader {
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut lsn = [0u8; 8];
        lsn.copy_from_slice(&b[8..16]);
        let mut hlc = [0u8; 16];
        hlc.copy_from_slice(&b[16..32]);
        RawHeader {
            crc32: u32_at(0),
            total_len: u32_at(4),
            lsn: u64::from_be_bytes(lsn),
            hlc: WalHlc::from_bytes(&hlc),
            state: b[32],
            frame_type: b[33],
        }
    }
}

/// CRC-32 (IEEE, as zlib) of a frame's bytes 4..total_len.
pub fn frame_crc(frame: &[u8]) -> u32 {
    crc32fast::hash(&frame[4..])
}

/// Test helper: rewrites the frame at `offset` of a log's bytes with `edit` (given the whole
/// frame, header included) and recomputes its CRC, as a deliberate edit would.
#[cfg(test)]
pub(crate) fn edit_frame(bytes: &mut [u8], offset: usize, edit: impl FnOnce(&mut [u8])) {
    let len = u32::from_be_bytes([
        bytes[offset + 4],
        bytes[offset + 5],
        bytes[offset + 6],
        bytes[offset + 7],
    ]) as usize;
    let frame = &mut bytes[offset..offset + len];
    edit(frame);
    let crc = frame_crc(frame);
    frame[..4].copy_from_slice(&crc.to_be_bytes());
}

/// Test helper: sets the physical time of the frame at `offset` (and the `hlc` text of its
/// payload, if it has one: it must keep its length), keeping the logical counter and node hash.
#[cfg(test)]
pub(crate) fn set_physical(bytes: &mut [u8], offset: usize, physical: u64) {
    edit_frame(bytes, offset, |f| {
        let h = RawHeader::parse(f[..FRAME_HEADER_LEN].try_into().expect("header")).hlc;
        let new = WalHlc { physical, ..h };
        f[16..32].copy_from_slice(&new.to_bytes());
        let old_text = format!("\"hlc\":\"{}:{}:", h.physical, h.logical);
        let new_text = format!("\"hlc\":\"{}:{}:", physical, h.logical);
        let payload = &mut f[FRAME_HEADER_LEN..];
        if let Some(i) = payload
            .windows(old_text.len())
            .position(|w| w == old_text.as_bytes())
        {
            assert_eq!(
                old_text.len(),
                new_text.len(),
                "the payload keeps its length"
            );
            payload[i..i + new_text.len()].copy_from_slice(new_text.as_bytes());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_encoding_matches_spec_layout() {
        let h = Hlc::new(1767614400000, 0, "gate-a");
        let w = WalHlc::from_hlc(&h).expect("fits");
        let b = w.to_bytes();
        assert_eq!(hex::encode(b), "019b8e0746000000457ee95c895151cb");
        assert_eq!(WalHlc::from_bytes(&b), w);
        assert_eq!(w.with_node("gate-a"), Some(h));
        assert_eq!(w.with_node("gate-b"), None);
        assert_eq!(w.text(None), "1767614400000:0:#457ee95c895151cb");
    }

    #[test]
    fn hlc_out_of_range_is_refused() {
        assert!(WalHlc::from_hlc(&Hlc::new(1 << 48, 0, "n")).is_err());
        assert!(WalHlc::from_hlc(&Hlc::new(1, 65536, "n")).is_err());
        assert!(WalHlc::from_hlc(&Hlc::new(1, 65535, "n")).is_ok());
    }

    #[test]
    fn types_and_states_round_trip_and_reject_unknown_bytes() {
        for (b, t) in FrameType::all().enumerate() {
            assert_eq!(t.byte() as usize, b);
            assert_eq!(FrameType::from_byte(t.byte()), Some(t));
            assert_eq!(FrameType::from_name(t.name()), Some(t));
        }
        assert_eq!(FrameType::from_byte(9), None);
        assert_eq!(FrameType::from_byte(0), Some(FrameType::Watermark));
        for s in FrameState::ALL {
            assert_eq!(FrameState::from_byte(s.byte()), Some(s));
        }
        assert_eq!(FrameState::from_byte(5), None);
        assert_eq!(FrameType::Event(EventType::JobTimedOut).byte(), 8);
        assert_eq!(FrameState::Compacted.byte(), 4);
    }

    #[test]
    fn frame_encoding_has_34_byte_header_and_crc_over_bytes_4_on() {
        let hlc = WalHlc::from_parts(5, 1, 7).expect("fits");
        let wm = Watermark {
            state: FrameState::Global,
            lsn: 2,
        };
        let mut out = Vec::new();
        let crc = encode_frame_into(
            &mut out,
            9,
            hlc,
            FrameState::Pending,
            FrameType::Watermark,
            &[&wm.encode()],
        );
        assert_eq!(out.len(), 43);
        assert_eq!(&out[4..8], &43u32.to_be_bytes());
        assert_eq!(crc, crc32fast::hash(&out[4..]));
        assert_eq!(frame_crc(&out), crc);
        let h = RawHeader::parse(out[..34].try_into().expect("34"));
        assert_eq!((h.lsn, h.hlc, h.state, h.frame_type), (9, hlc, 0, 0));
        assert_eq!(Watermark::decode(&out[34..]), Some(wm));
        assert_eq!(Watermark::decode(&out[34..42]), None);
    }

    #[test]
    fn a_watermark_is_checked_against_its_pinned_payload_and_its_own_lsn() {
        let wm = Watermark {
            state: FrameState::Regional,
            lsn: 9,
        };
        assert_eq!(Watermark::check(10, &wm.encode()), Ok(wm));
        assert_eq!(
            Watermark::check(9, &wm.encode()),
            Err(BadWatermark::Ahead {
                state: FrameState::Regional,
                lsn: 9,
                frame_lsn: 9
            })
        );
        assert_eq!(
            Watermark::check(10, &[0u8; 151]),
            Err(BadWatermark::Length(151))
        );
        assert_eq!(
            Watermark::check(10, &[1u8; 8]),
            Err(BadWatermark::Length(8))
        );
        let mut bad_state = wm.encode();
        bad_state[0] = 9;
        assert_eq!(
            Watermark::check(10, &bad_state),
            Err(BadWatermark::State(9))
        );
    }

    #[test]
    fn hlc_order_reports_the_first_frame_that_does_not_increase() {
        let h = |p, l| WalHlc::from_parts(p, l, 7).expect("fits");
        let mut o = HlcOrder::default();
        o.frame(8, 1, h(10, 0));
        o.frame(50, 2, h(10, 1));
        assert_eq!(o.regression(), None);
        o.frame(90, 3, h(10, 1)); // equal: not strictly increasing
        o.frame(130, 4, h(9, 5));
        o.frame(170, 5, h(11, 0));
        let r = o.regression().expect("regression");
        assert_eq!(
            (r.offset, r.lsn, r.hlc, r.previous_lsn, r.previous, r.count),
            (90, 3, h(10, 1), 2, h(10, 1), 2)
        );
    }
}
