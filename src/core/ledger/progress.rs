//! The fold's hot path: a JobProgressReported payload in its canonical form (JCS text with
//! exactly the seed's five fields, no escapes), read without allocating.
//!
//! Progress reports are nearly every event of a ledger. [`parse`] accepts only the canonical text
//! whose every field is valid (job id, DC id, counts, HLC text); anything else returns `None` and
//! the frame takes the general path ([`super::event::Event::from_payload`]), which accepts a
//! superset and reports the reason for a bad frame. For the texts both accept they give the same
//! values (a property test checks it).

use super::event::MAX_SAFE_INTEGER;
use super::job_id::JobId;
use crate::core::hlc::validate_node_id;

/// An HLC read from its text, the node borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HlcRef<'a> {
    pub physical: u64,
    pub logical: u32,
    pub node: &'a str,
}

/// A progress report borrowed from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressRef<'a> {
    pub job_id: &'a str,
    pub dc_id: &'a str,
    pub completed: u64,
    pub failed: u64,
    pub hlc: HlcRef<'a>,
}

/// Byte classes of the fields' alphabets, one table lookup per byte.
const DIGIT: u8 = 1;
/// `[A-Za-z0-9]`: region codes.
const ALNUM: u8 = 2;
/// `[A-Za-z0-9._]`: gate ids.
const GATE: u8 = 4;
/// `[A-Za-z0-9._-]`: node and DC ids.
const NODE: u8 = 8;

static CLASS: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let digit = c.is_ascii_digit();
        let alnum = c.is_ascii_alphanumeric();
        let gate = alnum || c == b'.' || c == b'_';
        let node = gate || c == b'-';
        t[b] = (digit as u8 * DIGIT)
            | (alnum as u8 * ALNUM)
            | (gate as u8 * GATE)
            | (node as u8 * NODE);
        b += 1;
    }
    t
}

struct Text<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Text<'a> {
    fn lit(&mut self, s: &[u8]) -> Option<()> {
        let end = self.i.checked_add(s.len())?;
        (self.b.get(self.i..end)? == s).then(|| self.i = end)
    }

    fn byte(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// The bytes from here while they are of `class`, `min..=max` of them.
    fn run(&mut self, class: u8, min: usize, max: usize) -> Option<&'a [u8]> {
        let start = self.i;
        while self
            .b
            .get(self.i)
            .is_some_and(|&c| CLASS[c as usize] & class != 0)
        {
            self.i += 1;
        }
        let s = &self.b[start..self.i];
        (min..=max).contains(&s.len()).then_some(s)
    }

    /// A canonical decimal (no sign, no leading zeros) fitting u64.
    fn decimal(&mut self) -> Option<u64> {
        digits(self.run(DIGIT, 1, 20)?)
    }

    /// A JSON integer in canonical form, at most 2^53 - 1.
    fn count(&mut self) -> Option<u64> {
        self.decimal().filter(|&v| v <= MAX_SAFE_INTEGER)
    }

    /// A node or DC id (1 to 128 of `[A-Za-z0-9._-]`), as `"` ends it or `:` ends an HLC.
    fn node(&mut self) -> Option<&'a str> {
        self.run(NODE, 1, 128).map(ascii)
    }

    /// `"physical:logical:node"` (SPEC 2), read in one pass.
    fn hlc(&mut self) -> Option<HlcRef<'a>> {
        self.byte(b'"')?;
        let physical = self.decimal()?;
        self.byte(b':')?;
        let logical = u32::try_from(self.decimal()?).ok()?;
        self.byte(b':')?;
        let node = self.node()?;
        self.byte(b'"')?;
        Some(HlcRef {
            physical,
            logical,
            node,
        })
    }

    /// `"region-timestamp-gate-sequence"` (SPEC 12, [`JobId`]), read in one pass.
    fn job_id(&mut self) -> Option<&'a str> {
        self.byte(b'"')?;
        let start = self.i;
        self.run(ALNUM, 1, 32)?;
        self.byte(b'-')?;
        self.decimal()?;
        self.byte(b'-')?;
        self.run(GATE, 1, 64)?;
        self.byte(b'-')?;
        self.run(DIGIT, 5, 5)?;
        let id = ascii(&self.b[start..self.i]);
        self.byte(b'"')?;
        Some(id)
    }
}

/// Bytes that passed a class of the table: every class is ASCII.
fn ascii(s: &[u8]) -> &str {
    debug_assert!(s.is_ascii());
    // SAFETY: callers pass only bytes whose CLASS entry is non-zero, all of them ASCII, so `s` is
    // UTF-8.
    unsafe { std::str::from_utf8_unchecked(s) }
}

/// Canonical decimal (digits only, no sign, no leading zeros), fitting u64.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || (s.len() > 1 && s[0] == b'0') {
        return None;
    }
    s.iter().try_fold(0u64, |v, &d| {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// Reads `{"completed":N,"dc_id":"S","failed":N,"hlc":"S","job_id":"S"}` with valid fields, or
/// `None` for anything else. Each field is checked as it is read, in one pass over its bytes.
pub fn parse(payload: &[u8]) -> Option<ProgressRef<'_>> {
    let mut t = Text { b: payload, i: 0 };
    t.lit(b"{\"completed\":")?;
    let completed = t.count()?;
    t.lit(b",\"dc_id\":\"")?;
    let dc_id = t.node()?;
    t.lit(b"\",\"failed\":")?;
    let failed = t.count()?;
    t.lit(b",\"hlc\":")?;
    let hlc = t.hlc()?;
    t.lit(b",\"job_id\":")?;
    let job_id = t.job_id()?;
    t.lit(b"}")?;
    if t.i != payload.len() {
        return None;
    }
    debug_assert!(JobId::check(job_id).is_ok() && validate_node_id(dc_id).is_ok());
    Some(ProgressRef {
        job_id,
        dc_id,
        completed,
        failed,
        hlc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ledger::event::{Event, EventType};
    use rand::{Rng, SeedableRng};

    const GOOD: &str = r#"{"completed":120,"dc_id":"use1","failed":3,"hlc":"1700000000123:7:gate-4","job_id":"use1-1700000000000-gate4-00017"}"#;

    /// Whatever the hot path accepts, the general decoder accepts with the same values.
    fn agrees(payload: &[u8]) -> bool {
        let Some(p) = parse(payload) else {
            return false;
        };
        let Ok(Event::JobProgressReported(e)) =
            Event::from_payload(EventType::JobProgressReported, payload)
        else {
            panic!("fast path accepted what the decoder refuses: {payload:?}");
        };
        assert_eq!(p.job_id, e.job_id.as_str());
        assert_eq!(p.dc_id, e.dc_id.as_str());
        assert_eq!((p.completed, p.failed), (e.completed.0, e.failed.0));
        assert_eq!(
            (p.hlc.physical, p.hlc.logical, p.hlc.node),
            (e.hlc.physical, e.hlc.logical, e.hlc.node.as_str())
        );
        true
    }

    #[test]
    fn canonical_reports_are_read_like_the_decoder_reads_them() {
        assert!(agrees(GOOD.as_bytes()));
        assert!(agrees(GOOD.replace("120", "9007199254740991").as_bytes()));
        // Each field at the edges of its alphabet and length, read like the decoder reads it.
        let (node, region, gate) = (
            "n.-_9".repeat(25) + "abc",
            "R".repeat(32),
            "g._".repeat(21) + "x",
        );
        let edges = GOOD
            .replace("gate-4", &node)
            .replace("\"use1\"", &format!("\"{node}\""))
            .replace("use1-1700000000000-gate4", &format!("{region}-0-{gate}"));
        assert!(agrees(edges.as_bytes()), "{edges}");
        for longer in [
            edges.replace(&node, &format!("{node}x")),
            edges.replace(&region, &format!("{region}x")),
            edges.replace(&gate, &format!("{gate}x")),
            edges.replace("-0-", "-00-"),
        ] {
            assert!(parse(longer.as_bytes()).is_none(), "{longer}");
            assert!(
                Event::from_payload(EventType::JobProgressReported, longer.as_bytes()).is_err()
            );
        }
    }

    #[test]
    fn anything_else_goes_to_the_general_path() {
        for bad in [
            GOOD.replace("120", "0120"),
            GOOD.replace("120", "9007199254740992"),
            GOOD.replace("120", "1.5"),
            GOOD.replace("use1\",", "us\\u0065\","),
            GOOD.replace(":7:", ":07:"),
            GOOD.replace(":7:", ":65536x:"),
            GOOD.replace("gate-4\"", "gate 4\""),
            GOOD.replace("00017", "17"),
            GOOD.replace("{\"completed\"", "{ \"completed\""),
            GOOD.replace("\"failed\":3,", ""),
            GOOD.replace("}", ",\"x\":1}"),
            format!("{GOOD} "),
        ] {
            assert!(parse(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn random_edits_never_make_the_two_paths_disagree() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let alphabet = b"0123456789:-_.\\\"{},aZ \x01\xc3";
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut b = GOOD.as_bytes().to_vec();
            for _ in 0..rng.gen_range(1..3) {
                let i = rng.gen_range(0..b.len());
                match rng.gen_range(0..3) {
                    0 => b[i] = alphabet[rng.gen_range(0..alphabet.len())],
                    1 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, alphabet[rng.gen_range(0..alphabet.len())]),
                }
            }
            if agrees(&b) {
                accepted += 1;
            }
        }
        assert!(accepted > 100, "some edits stay valid: {accepted}");
    }
}
