//! Ledger job ids (SPEC section 12): `{region_code}-{timestamp_ms}-{gate_id}-{sequence}`.
//!
//! * `region_code`: 1 to 32 characters of `[A-Za-z0-9]` (the home region, e.g. `use1`);
//! * `timestamp_ms`: Unix milliseconds in canonical decimal (no sign, no leading zeros);
//! * `gate_id`: 1 to 64 characters of `[A-Za-z0-9._]` (no `-`, which separates the parts);
//! * `sequence`: exactly five decimal digits, zero-padded (`00001`).
//!
//! The text is kept as given (it is the map key of the views); `format(parse(t)) == t` holds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Why a job id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "job id {text:?} is not {{region_code}}-{{timestamp_ms}}-{{gate_id}}-{{sequence}}: {reason}"
)]
pub struct JobIdError {
    pub text: String,
    pub reason: &'static str,
}

/// A validated ledger job id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(String);

/// The four parts of a job id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobIdParts {
    pub region: String,
    pub timestamp_ms: u64,
    pub gate: String,
    pub sequence: u32,
    pub text: String,
}

impl JobId {
    /// Checks the format without allocating; the hot path of the fold.
    pub fn check(text: &str) -> Result<(), JobIdError> {
        split(text).map(|_| ())
    }

    /// A job id whose text already passed [`JobId::check`].
    pub(crate) fn from_checked(text: &str) -> JobId {
        debug_assert!(Self::check(text).is_ok());
        JobId(text.to_string())
    }

    pub fn parse(text: &str) -> Result<JobId, JobIdError> {
        Self::check(text)?;
        Ok(JobId(text.to_string()))
    }

    /// Builds the text form from its parts (validated like a parsed id).
    pub fn from_parts(
        region: &str,
        timestamp_ms: u64,
        gate: &str,
        sequence: u32,
    ) -> Result<JobId, JobIdError> {
        JobId::parse(&format!("{region}-{timestamp_ms}-{gate}-{sequence:05}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn parts(&self) -> JobIdParts {
        // The text was validated on construction, so the split cannot fail here.
        let (region, ts, gate, seq) = split(&self.0).unwrap_or(("", 0, "", 0));
        JobIdParts {
            region: region.to_string(),
            timestamp_ms: ts,
            gate: gate.to_string(),
            sequence: seq,
            text: self.0.clone(),
        }
    }
}

fn split(text: &str) -> Result<(&str, u64, &str, u32), JobIdError> {
    let err = |reason| JobIdError {
        text: text.to_string(),
        reason,
    };
    // The three '-' separators, found in one pass over the bytes (the hot path of the fold).
    let mut dash = [0usize; 3];
    let mut n = 0;
    for (i, _) in text.bytes().enumerate().filter(|(_, c)| *c == b'-') {
        if n == dash.len() {
            n += 1;
            break;
        }
        dash[n] = i;
        n += 1;
    }
    if n != dash.len() {
        return Err(err("it must have exactly four parts separated by '-'"));
    }
    let (region, ts) = (&text[..dash[0]], &text[dash[0] + 1..dash[1]]);
    let (gate, seq) = (&text[dash[1] + 1..dash[2]], &text[dash[2] + 1..]);
    if region.is_empty() || region.len() > 32 || !region.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(err("region_code must be 1 to 32 characters of [A-Za-z0-9]"));
    }
    let canonical = !ts.is_empty()
        && ts.len() <= 20
        && ts.bytes().all(|b| b.is_ascii_digit())
        && (ts == "0" || !ts.starts_with('0'));
    let timestamp = ts.parse::<u64>().ok().filter(|_| canonical);
    let Some(timestamp) = timestamp else {
        return Err(err(
            "timestamp_ms must be Unix milliseconds in decimal without sign or leading zeros",
        ));
    };
    let gate_ok = !gate.is_empty()
        && gate.len() <= 64
        && gate
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    if !gate_ok {
        return Err(err("gate_id must be 1 to 64 characters of [A-Za-z0-9._]"));
    }
    if seq.len() != 5 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(
            "sequence must be exactly 5 digits, zero-padded (00001)",
        ));
    }
    let sequence = seq
        .parse::<u32>()
        .map_err(|_| err("sequence is not a number"))?;
    Ok((region, timestamp, gate, sequence))
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::borrow::Borrow<str> for JobId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        JobId::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_round_trips_with_its_parts() {
        let id = JobId::parse("use1-1704931200000-gate42-00001").unwrap();
        let p = id.parts();
        assert_eq!(
            (
                p.region.as_str(),
                p.timestamp_ms,
                p.gate.as_str(),
                p.sequence
            ),
            ("use1", 1704931200000, "gate42", 1)
        );
        assert_eq!(
            JobId::from_parts("use1", 1704931200000, "gate42", 1).unwrap(),
            id
        );
        assert_eq!(id.to_string(), "use1-1704931200000-gate42-00001");
    }

    #[test]
    fn malformed_ids_are_refused_with_the_part_named() {
        for (text, part) in [
            ("use1-1704931200000-gate42-1", "sequence"),
            ("use1-1704931200000-gate42-000001", "sequence"),
            ("use1-01704931200000-gate42-00001", "timestamp_ms"),
            ("use1-+1-gate42-00001", "timestamp_ms"),
            ("use1-99999999999999999999-gate42-00001", "timestamp_ms"),
            ("-1-gate42-00001", "region_code"),
            ("us e1-1-gate42-00001", "region_code"),
            ("use1-1--00001", "gate_id"),
            ("use1-1-gate-42-00001", "four parts"),
            ("use1-1-gate42", "four parts"),
            ("", "four parts"),
        ] {
            let e = JobId::parse(text).unwrap_err();
            assert!(e.to_string().contains(part), "{text}: {e}");
        }
        assert!(JobId::from_parts("use1", 1, "g", 100_000).is_err());
    }
}
