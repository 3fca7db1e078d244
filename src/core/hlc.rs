//! Hybrid logical clock (SPEC section 2): timestamps, their strict text form, and the clock.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Default maximum tolerated clock skew (seed `maxClockSkew: "00:00:05"`).
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(5);

/// Process-wide count of remote timestamps rejected for clock skew
/// (metric `hlc_clock_skew_rejections_total`).
pub static HLC_CLOCK_SKEW_REJECTIONS_TOTAL: AtomicU64 = AtomicU64::new(0);
/// Process-wide count of issued ticks (metric `hlc_ticks_total`).
pub static HLC_TICKS_TOTAL: AtomicU64 = AtomicU64::new(0);

/// Why a node id or an HLC text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HlcParseError {
    #[error("HLC text {0:?} must have the form physical:logical:node")]
    Shape(String),
    #[error("HLC text {text:?}: {part} {value:?} is not a canonical unsigned decimal (no sign, no leading zeros)")]
    NotCanonical {
        text: String,
        part: &'static str,
        value: String,
    },
    #[error("HLC text {text:?}: {part} {value:?} is out of range")]
    OutOfRange {
        text: String,
        part: &'static str,
        value: String,
    },
    #[error("node id {0:?} must be 1 to 128 characters of [A-Za-z0-9._-]")]
    NodeId(String),
}

/// Returns an error unless `node` is 1..=128 characters of `[A-Za-z0-9._-]`.
pub fn validate_node_id(node: &str) -> Result<(), HlcParseError> {
    let ok = !node.is_empty()
        && node.len() <= 128
        && node
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(HlcParseError::NodeId(node.to_string()))
    }
}

/// An HLC timestamp `(physical, logical, node)`, ordered by that tuple (node bytewise).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hlc {
    pub physical: u64,
    pub logical: u32,
    pub node: String,
}

impl Hlc {
    pub fn new(physical: u64, logical: u32, node: impl Into<String>) -> Self {
        Hlc {
            physical,
            logical,
            node: node.into(),
        }
    }

    /// Strict parser: `format(parse(t)) == t` for every accepted text.
    pub fn parse(text: &str) -> Result<Hlc, HlcParseError> {
        HlcRef::parse(text).map(|h| h.to_hlc())
    }

    /// Compares with the text form of another timestamp without allocating when possible.
    pub fn sort_key(&self) -> (u64, u32, &[u8]) {
        (self.physical, self.logical, self.node.as_bytes())
    }
}

/// An HLC timestamp borrowing its node id from the text it was parsed from (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HlcRef<'a> {
    pub physical: u64,
    pub logical: u32,
    pub node: &'a str,
}

impl<'a> HlcRef<'a> {
    /// [`Hlc::parse`]'s rules and errors, without copying the node id.
    pub fn parse(text: &'a str) -> Result<HlcRef<'a>, HlcParseError> {
        // `physical:logical:node`, split at the first two colons (a byte loop: the parts are short).
        let colon = |from: usize| {
            (from..text.len())
                .find(|&i| text.as_bytes()[i] == b':')
                .ok_or_else(|| HlcParseError::Shape(text.to_string()))
        };
        let first = colon(0)?;
        let second = colon(first + 1)?;
        let (p, l, node) = (
            &text[..first],
            &text[first + 1..second],
            &text[second + 1..],
        );
        let physical = parse_canonical_decimal(text, "physical", p)?;
        let logical = parse_canonical_decimal(text, "logical", l)?;
        let logical = u32::try_from(logical).map_err(|_| HlcParseError::OutOfRange {
            text: text.to_string(),
            part: "logical",
            value: l.to_string(),
        })?;
        validate_node_id(node)?;
        Ok(HlcRef {
            physical,
            logical,
            node,
        })
    }

    /// The owned timestamp.
    pub fn to_hlc(self) -> Hlc {
        Hlc::new(self.physical, self.logical, self.node)
    }
}

fn parse_canonical_decimal(
    text: &str,
    part: &'static str,
    value: &str,
) -> Result<u64, HlcParseError> {
    let not_canonical = || HlcParseError::NotCanonical {
        text: text.to_string(),
        part,
        value: value.to_string(),
    };
    if value.is_empty() || (value.len() > 1 && value.starts_with('0')) {
        return Err(not_canonical());
    }
    // One pass: digits only; the value is checked against u64::MAX only past 19 digits (which
    // cannot overflow).
    let mut n = 0u64;
    let mut overflow = false;
    for (k, b) in value.bytes().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(not_canonical());
        }
        if k < 19 {
            n = n * 10 + u64::from(d);
        } else {
            match n.checked_mul(10).and_then(|m| m.checked_add(u64::from(d))) {
                Some(m) => n = m,
                None => overflow = true,
            }
        }
    }
    if overflow {
        return Err(HlcParseError::OutOfRange {
            text: text.to_string(),
            part,
            value: value.to_string(),
        });
    }
    Ok(n)
}

impl fmt::Display for Hlc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hlc_text(self.physical, self.logical, &self.node).fmt(f)
    }
}

/// The text form `physical:logical:node` of a timestamp held as parts, without building an
/// [`Hlc`] (readers that keep node ids interned, writers that reuse one buffer). Its `Display` is
/// the one place that text is written; [`Hlc::parse`] reads it back.
#[derive(Debug, Clone, Copy)]
pub struct HlcText<'a> {
    pub physical: u64,
    pub logical: u32,
    pub node: &'a str,
}

/// [`HlcText`] of `(physical, logical, node)`.
pub fn hlc_text(physical: u64, logical: u32, node: &str) -> HlcText<'_> {
    HlcText {
        physical,
        logical,
        node,
    }
}

impl HlcText<'_> {
    /// Writes the text, digits by table (no formatting machinery: the WAL writer and the import
    /// call this once per entry). `Display` writes through it too.
    pub fn write_to<W: fmt::Write>(&self, out: &mut W) -> fmt::Result {
        let mut digits = itoa::Buffer::new();
        out.write_str(digits.format(self.physical))?;
        out.write_char(':')?;
        out.write_str(digits.format(self.logical))?;
        out.write_char(':')?;
        out.write_str(self.node)
    }

    /// `out` = the text (cleared first).
    pub fn set(&self, out: &mut String) {
        out.clear();
        // Writing to a String cannot fail.
        let _ = self.write_to(out);
    }
}

impl fmt::Display for HlcText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

impl FromStr for Hlc {
    type Err = HlcParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hlc::parse(s)
    }
}

impl Ord for Hlc {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl PartialOrd for Hlc {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A remote timestamp too far ahead of the local wall clock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timestamp {remote} is {ahead_ms} ms ahead of the local wall clock ({wall_ms}); the maximum tolerated skew is {max_skew_ms} ms")]
pub struct ClockSkewError {
    pub remote: Hlc,
    pub wall_ms: u64,
    pub ahead_ms: u64,
    pub max_skew_ms: u64,
}

/// Source of wall-clock milliseconds; tests substitute a fixed clock.
pub trait WallClock: Send + Sync {
    fn now_ms(&self) -> u64;
}

/// The system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        unix_ms_now()
    }
}

/// Current Unix time in milliseconds.
pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Whether a physical time is further ahead of `wall_ms` than `max_skew` ([`check_skew`]'s rule).
pub fn skew_exceeded(physical: u64, wall_ms: u64, max_skew: Duration) -> bool {
    physical > wall_ms.saturating_add(max_skew.as_millis() as u64)
}

/// Checks that `remote` is not more than `max_skew` ahead of `wall_ms`.
pub fn check_skew(remote: &Hlc, wall_ms: u64, max_skew: Duration) -> Result<(), ClockSkewError> {
    let max_skew_ms = max_skew.as_millis() as u64;
    if skew_exceeded(remote.physical, wall_ms, max_skew) {
        return Err(ClockSkewError {
            remote: remote.clone(),
            wall_ms,
            ahead_ms: remote.physical - wall_ms,
            max_skew_ms,
        });
    }
    Ok(())
}

/// A hybrid logical clock for one node. Persist [`HlcClock::last`] after issuing timestamps and pass
/// it back to [`HlcClock::resume`] on start-up so a restarted clock never goes backwards.
pub struct HlcClock<W: WallClock = SystemWallClock> {
    node: String,
    last_physical: u64,
    last_logical: u32,
    max_skew: Duration,
    wall: W,
}

impl HlcClock<SystemWallClock> {
    pub fn new(node: impl Into<String>) -> Result<Self, HlcParseError> {
        HlcClock::with_wall(node, SystemWallClock)
    }
}

impl<W: WallClock> HlcClock<W> {
    pub fn with_wall(node: impl Into<String>, wall: W) -> Result<Self, HlcParseError> {
        let node = node.into();
        validate_node_id(&node)?;
        Ok(HlcClock {
            node,
            last_physical: 0,
            last_logical: 0,
            max_skew: DEFAULT_MAX_CLOCK_SKEW,
            wall,
        })
    }

    pub fn with_max_skew(mut self, max_skew: Duration) -> Self {
        self.max_skew = max_skew;
        self
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn max_skew(&self) -> Duration {
        self.max_skew
    }

    /// Witnesses a persisted last timestamp (of any node) so later ticks are greater than it.
    pub fn resume(&mut self, persisted: (u64, u32)) {
        if persisted > (self.last_physical, self.last_logical) {
            self.last_physical = persisted.0;
            self.last_logical = persisted.1;
        }
    }

    /// The last `(physical, logical)` this clock issued or witnessed.
    pub fn last(&self) -> (u64, u32) {
        (self.last_physical, self.last_logical)
    }

    /// A timestamp for a local event.
    pub fn tick(&mut self) -> Hlc {
        let wall = self.wall.now_ms();
        if wall > self.last_physical {
            self.last_physical = wall;
            self.last_logical = 0;
        } else {
            self.bump_logical();
        }
        HLC_TICKS_TOTAL.fetch_add(1, AtomicOrdering::Relaxed);
        Hlc::new(self.last_physical, self.last_logical, self.node.clone())
    }

    /// Merges a remote timestamp (Kulkarni et al.), refusing one too far in the future.
    pub fn receive(&mut self, remote: &Hlc) -> Result<Hlc, ClockSkewError> {
        let wall = self.wall.now_ms();
        if let Err(e) = check_skew(remote, wall, self.max_skew) {
            HLC_CLOCK_SKEW_REJECTIONS_TOTAL.fetch_add(1, AtomicOrdering::Relaxed);
            return Err(e);
        }
        let physical = wall.max(self.last_physical).max(remote.physical);
        let logical = if physical == self.last_physical && physical == remote.physical {
            self.last_logical.max(remote.logical).checked_add(1)
        } else if physical == self.last_physical {
            self.last_logical.checked_add(1)
        } else if physical == remote.physical {
            remote.logical.checked_add(1)
        } else {
            Some(0)
        };
        match logical {
            Some(l) => {
                self.last_physical = physical;
                self.last_logical = l;
            }
            None => {
                // The logical counter is exhausted: move to the next millisecond instead of wrapping.
                self.last_physical = physical + 1;
                self.last_logical = 0;
            }
        }
        Ok(Hlc::new(
            self.last_physical,
            self.last_logical,
            self.node.clone(),
        ))
    }

    fn bump_logical(&mut self) {
        match self.last_logical.checked_add(1) {
            Some(l) => self.last_logical = l,
            None => {
                self.last_physical += 1;
                self.last_logical = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[derive(Clone)]
    struct FixedWall(Arc<AtomicU64>);
    impl WallClock for FixedWall {
        fn now_ms(&self) -> u64 {
            self.0.load(AtomicOrdering::SeqCst)
        }
    }

    fn clock(at: u64) -> (HlcClock<FixedWall>, Arc<AtomicU64>) {
        let t = Arc::new(AtomicU64::new(at));
        (HlcClock::with_wall("n1", FixedWall(t.clone())).unwrap(), t)
    }

    #[test]
    fn tick_is_strictly_increasing_when_the_wall_clock_stalls_or_goes_back() {
        let (mut c, t) = clock(1000);
        let a = c.tick();
        let b = c.tick();
        t.store(900, AtomicOrdering::SeqCst);
        let d = c.tick();
        t.store(2000, AtomicOrdering::SeqCst);
        let e = c.tick();
        assert_eq!(a.to_string(), "1000:0:n1");
        assert_eq!(b.to_string(), "1000:1:n1");
        assert_eq!(d.to_string(), "1000:2:n1");
        assert_eq!(e.to_string(), "2000:0:n1");
    }

    #[test]
    fn receive_follows_kulkarni() {
        let (mut c, t) = clock(1000);
        c.tick();
        // remote ahead of both
        let r = c.receive(&Hlc::new(1500, 7, "r")).unwrap();
        assert_eq!((r.physical, r.logical), (1500, 8));
        // remote equal physical, lower logical
        let r = c.receive(&Hlc::new(1500, 2, "r")).unwrap();
        assert_eq!((r.physical, r.logical), (1500, 9));
        // wall moves ahead of everything
        t.store(3000, AtomicOrdering::SeqCst);
        let r = c.receive(&Hlc::new(1200, 50, "r")).unwrap();
        assert_eq!((r.physical, r.logical), (3000, 0));
    }

    #[test]
    fn receive_rejects_excessive_skew_with_a_typed_error_and_counts_it() {
        let (mut c, _t) = clock(10_000);
        let before = HLC_CLOCK_SKEW_REJECTIONS_TOTAL.load(AtomicOrdering::SeqCst);
        assert!(c.receive(&Hlc::new(15_000, 0, "r")).is_ok());
        let err = c.receive(&Hlc::new(20_001, 0, "r")).unwrap_err();
        assert_eq!(err.ahead_ms, 10_001);
        assert_eq!(err.max_skew_ms, 5000);
        assert!(HLC_CLOCK_SKEW_REJECTIONS_TOTAL.load(AtomicOrdering::SeqCst) > before);
        // state unchanged by the rejection
        assert_eq!(c.last(), (15_000, 1));
    }

    #[test]
    fn resume_never_goes_backwards() {
        let (mut c, _t) = clock(100);
        c.resume((5000, 3));
        assert_eq!(c.tick().to_string(), "5000:4:n1");
    }

    #[test]
    fn hlc_text_set_writes_what_it_displays() {
        let mut t = String::from("stale");
        for (p, l, n) in [
            (0, 0, "n"),
            (1_700_000_000_123, 42, "node-a"),
            (u64::MAX, u32::MAX, ""),
        ] {
            hlc_text(p, l, n).set(&mut t);
            assert_eq!(t, format!("{p}:{l}:{n}"));
        }
    }

    /// The parser before the by-hand split and digit loop: the reference for the property below.
    fn parse_by_splitn(text: &str) -> Result<(u64, u32, String), HlcParseError> {
        let mut parts = text.splitn(3, ':');
        let (Some(p), Some(l), Some(node)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(HlcParseError::Shape(text.to_string()));
        };
        let number = |part: &'static str, value: &str| {
            let canonical = !value.is_empty()
                && value.bytes().all(|b| b.is_ascii_digit())
                && (value == "0" || !value.starts_with('0'));
            if !canonical {
                return Err(HlcParseError::NotCanonical {
                    text: text.to_string(),
                    part,
                    value: value.to_string(),
                });
            }
            value.parse::<u64>().map_err(|_| HlcParseError::OutOfRange {
                text: text.to_string(),
                part,
                value: value.to_string(),
            })
        };
        let physical = number("physical", p)?;
        let logical = number("logical", l)?;
        let logical = u32::try_from(logical).map_err(|_| HlcParseError::OutOfRange {
            text: text.to_string(),
            part: "logical",
            value: l.to_string(),
        })?;
        validate_node_id(node)?;
        Ok((physical, logical, node.to_string()))
    }

    proptest::proptest! {
        /// Same answers and the same error texts as the old parser, on texts dense in colons,
        /// digits (around u64::MAX and u32::MAX) and node-id bytes.
        #[test]
        fn the_parser_agrees_with_the_splitn_parser(
            text in "(0|[0-9]{0,21}|18446744073709551615|18446744073709551616|4294967296)[:0-9]{0,3}[0-9]{0,11}[:a-z.\\- ]{0,6}[a-z0-9:]{0,4}"
        ) {
            let new = HlcRef::parse(&text)
                .map(|h| (h.physical, h.logical, h.node.to_string()))
                .map_err(|e| e.to_string());
            let old = parse_by_splitn(&text).map_err(|e| e.to_string());
            proptest::prop_assert_eq!(new, old, "{}", text);
        }
    }
}
