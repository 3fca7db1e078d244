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

struct Text<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Text<'a> {
    fn lit(&mut self, s: &[u8]) -> Option<()> {
        let end = self.i.checked_add(s.len())?;
        (self.b.get(self.i..end)? == s).then(|| self.i = end)
    }

    /// A JSON integer in canonical form, at most 2^53 - 1.
    fn count(&mut self) -> Option<u64> {
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        digits(&self.b[start..self.i]).filter(|&v| v <= MAX_SAFE_INTEGER)
    }

    /// A string of printable ASCII without escapes (the fields' alphabets have no `"` or `\`),
    /// read in one pass.
    fn string(&mut self) -> Option<&'a str> {
        self.lit(b"\"")?;
        let rest = &self.b[self.i..];
        let len = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c))?;
        if rest[len] != b'"' {
            return None;
        }
        self.i += len + 1;
        let s = &rest[..len];
        // SAFETY: every byte of `s` is ASCII (0x20..0x80, checked above), so it is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(s) })
    }
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

/// The strict HLC text of SPEC 2 (`physical:logical:node`), borrowed.
pub fn parse_hlc(text: &str) -> Option<HlcRef<'_>> {
    let b = text.as_bytes();
    let c1 = b.iter().position(|&c| c == b':')?;
    let c2 = c1 + 1 + b[c1 + 1..].iter().position(|&c| c == b':')?;
    let physical = digits(&b[..c1])?;
    let logical = u32::try_from(digits(&b[c1 + 1..c2])?).ok()?;
    let node = &text[c2 + 1..];
    validate_node_id(node).ok()?;
    Some(HlcRef {
        physical,
        logical,
        node,
    })
}

/// Reads `{"completed":N,"dc_id":"S","failed":N,"hlc":"S","job_id":"S"}` with valid fields, or
/// `None` for anything else.
pub fn parse(payload: &[u8]) -> Option<ProgressRef<'_>> {
    let mut t = Text { b: payload, i: 0 };
    t.lit(b"{\"completed\":")?;
    let completed = t.count()?;
    t.lit(b",\"dc_id\":")?;
    let dc_id = t.string()?;
    t.lit(b",\"failed\":")?;
    let failed = t.count()?;
    t.lit(b",\"hlc\":")?;
    let hlc = parse_hlc(t.string()?)?;
    t.lit(b",\"job_id\":")?;
    let job_id = t.string()?;
    t.lit(b"}")?;
    if t.i != payload.len() {
        return None;
    }
    validate_node_id(dc_id).ok()?;
    JobId::check(job_id).ok()?;
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
