//! A contest: every distinct event competing for one decision (a job's creation, one DC's
//! acceptance, the cancellation, the outcome). The winner is the greatest by (fence token, HLC,
//! payload bytes); every other candidate is kept as a loser so the console can show it.
//!
//! A contest is a set, so offering events in any order, or merging contests, gives the same
//! result; the same event read twice (from two replicas) is one candidate, remembered at its
//! smallest `(source, lsn)`.
//!
//! Memory: a candidate keeps its payload text (what a node wrote, and the last tie-breaker) with
//! the three fields that order it; the parsed event is decoded from the payload when asked for
//! ([`Candidate::event`]), never kept. A contest holds its few candidates in a sorted vector of
//! exactly their size (nearly every contest has one); past [`FEW`] it switches to an ordered set,
//! so a flood of distinct candidates for one decision stays O(log n) per event.

use super::event::{Event, EventError, EventType, FenceToken};
use crate::core::hlc::Hlc;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Where an event was read: the ledger (WAL file label, shared by every occurrence read from that
/// ledger) and the frame's LSN.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Occurrence {
    pub source: Arc<str>,
    pub lsn: u64,
}

/// One event as the fold keeps it: its payload and the fields that order it.
///
/// Invariant (checked where candidates are made from untrusted text, see [`Candidate::checked`]):
/// the payload decodes, as `kind`, to an event with this fence token and HLC.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    kind: EventType,
    /// The fence token, 0 for events without one (a fence token is at least 1).
    fence: u64,
    hlc: Hlc,
    /// The frame payload as read (JCS text); the final tie-breaker between distinct events.
    payload: Box<str>,
    pub at: Occurrence,
}

impl Candidate {
    /// A candidate for `event`, whose frame payload is `payload` (the caller read or wrote
    /// `event` from exactly this text).
    pub fn new(event: &Event, payload: Box<str>, at: Occurrence) -> Candidate {
        Candidate {
            kind: event.event_type(),
            fence: event.fence_token().map_or(0, |f| f.0),
            hlc: event.hlc().clone(),
            payload,
            at,
        }
    }

    /// A candidate for `event` with a payload from elsewhere (a checkpoint): refused unless the
    /// payload decodes to exactly `event`.
    pub fn checked(event: &Event, payload: Box<str>, at: Occurrence) -> Result<Candidate, String> {
        match Event::from_payload(event.event_type(), payload.as_bytes()) {
            Ok(decoded) if decoded == *event => Ok(Candidate::new(event, payload, at)),
            Ok(_) => Err(format!(
                "the payload of the {} at {}:{} does not match its event",
                event.event_type().name(),
                at.source,
                at.lsn
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn event_type(&self) -> EventType {
        self.kind
    }

    pub fn fence_token(&self) -> Option<FenceToken> {
        (self.fence > 0).then_some(FenceToken(self.fence))
    }

    pub fn hlc(&self) -> &Hlc {
        &self.hlc
    }

    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The event, decoded from the payload.
    pub fn event(&self) -> Result<Event, EventError> {
        Event::from_payload(self.kind, self.payload.as_bytes())
    }

    fn key(&self) -> (u64, &Hlc, &str) {
        (self.fence, &self.hlc, &self.payload)
    }

    fn cmp_key(&self, other: &Candidate) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The checkpoint form of a candidate: the event, its payload and where it was read.
#[derive(Serialize, Deserialize)]
struct CandidateForm {
    event: Event,
    payload: Box<str>,
    at: Occurrence,
}

impl Serialize for Candidate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let event = self.event().map_err(serde::ser::Error::custom)?;
        CandidateForm {
            event,
            payload: self.payload.clone(),
            at: self.at.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Candidate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = CandidateForm::deserialize(d)?;
        Candidate::checked(&f.event, f.payload, f.at).map_err(serde::de::Error::custom)
    }
}

/// Past this many candidates a contest keeps them in an ordered set.
pub const FEW: usize = 8;

/// A candidate ordered by its key alone (the set's element).
#[derive(Debug, Clone)]
struct ByKey(Candidate);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_key(&other.0) == Ordering::Equal
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_key(&other.0)
    }
}

#[derive(Debug, Clone)]
enum Entries {
    /// Sorted by key, distinct keys, capacity = length.
    Few(Vec<Candidate>),
    Many(BTreeSet<ByKey>),
}

/// The distinct candidates of one decision, ordered by (fence token, HLC, payload).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "Vec<Candidate>", into = "Vec<Candidate>")]
pub struct Contest {
    entries: Entries,
}

impl Default for Contest {
    fn default() -> Self {
        Contest {
            entries: Entries::Few(Vec::new()),
        }
    }
}

impl PartialEq for Contest {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.all().zip(other.all()).all(|(a, b)| a == b)
    }
}

impl Contest {
    pub fn offer(&mut self, c: Candidate) {
        match &mut self.entries {
            Entries::Few(v) => match v.binary_search_by(|x| x.cmp_key(&c)) {
                Ok(i) => {
                    if c.at < v[i].at {
                        v[i].at = c.at;
                    }
                }
                Err(i) if v.len() < FEW => {
                    v.reserve_exact(1);
                    v.insert(i, c);
                }
                Err(_) => {
                    let mut set: BTreeSet<ByKey> = v.drain(..).map(ByKey).collect();
                    set.insert(ByKey(c));
                    self.entries = Entries::Many(set);
                }
            },
            Entries::Many(set) => {
                let c = ByKey(c);
                match set.take(&c) {
                    Some(mut cur) => {
                        if c.0.at < cur.0.at {
                            cur.0.at = c.0.at;
                        }
                        set.insert(cur);
                    }
                    None => {
                        set.insert(c);
                    }
                }
            }
        }
    }

    pub fn merge(&mut self, other: Contest) {
        match other.entries {
            Entries::Few(v) => v.into_iter().for_each(|c| self.offer(c)),
            Entries::Many(set) => set.into_iter().for_each(|c| self.offer(c.0)),
        }
    }

    pub fn for_each_occurrence(&mut self, f: &mut impl FnMut(&mut Occurrence)) {
        match &mut self.entries {
            Entries::Few(v) => v.iter_mut().for_each(|c| f(&mut c.at)),
            Entries::Many(set) => {
                // A set's elements are immutable in place; `at` is not part of the key.
                let all = std::mem::take(set);
                *set = all
                    .into_iter()
                    .map(|mut c| {
                        f(&mut c.0.at);
                        c
                    })
                    .collect();
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Few(v) => v.len(),
            Entries::Many(set) => set.len(),
        }
    }

    pub fn winner(&self) -> Option<&Candidate> {
        self.all().next_back()
    }

    /// Every candidate but the winner, strongest first.
    pub fn losers(&self) -> impl Iterator<Item = &Candidate> {
        self.all().rev().skip(1)
    }

    /// Every candidate, weakest first.
    pub fn all(&self) -> Box<dyn DoubleEndedIterator<Item = &Candidate> + '_> {
        match &self.entries {
            Entries::Few(v) => Box::new(v.iter()),
            Entries::Many(set) => Box::new(set.iter().map(|c| &c.0)),
        }
    }
}

impl From<Vec<Candidate>> for Contest {
    fn from(v: Vec<Candidate>) -> Self {
        let mut c = Contest::default();
        for x in v {
            c.offer(x);
        }
        c
    }
}

impl From<Contest> for Vec<Candidate> {
    fn from(c: Contest) -> Self {
        match c.entries {
            Entries::Few(v) => v,
            Entries::Many(set) => set.into_iter().map(|c| c.0).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(fence: u64, ms: u64, lsn: u64) -> Candidate {
        let text = format!(
            r#"{{"assigned_dcs":["use1"],"fence_token":{fence},"hlc":"{ms}:0:g","job_id":"use1-1-g1-00001","spec":{{}}}}"#
        );
        let event = Event::from_payload(EventType::JobCreated, text.as_bytes()).unwrap();
        let at = Occurrence {
            source: "s".into(),
            lsn,
        };
        Candidate::new(&event, text.into(), at)
    }

    #[test]
    fn many_candidates_keep_the_same_set_as_few() {
        // Past FEW the contest changes representation; the order, winner and kept occurrence
        // (smallest) must not depend on it or on the offering order.
        let all: Vec<Candidate> = (0..3 * FEW as u64)
            .flat_map(|i| {
                [
                    cand(i % 5 + 1, 100 + i, 10 + i),
                    cand(i % 5 + 1, 100 + i, 2),
                ]
            })
            .collect();
        let forward = Contest::from(all.clone());
        let backward = Contest::from(all.iter().rev().cloned().collect::<Vec<_>>());
        assert_eq!(forward, backward);
        assert_eq!(forward.len(), 3 * FEW);
        assert!(forward.all().all(|c| c.at.lsn == 2));
        let w = forward.winner().unwrap();
        assert_eq!(
            (w.fence_token(), w.hlc().physical),
            (Some(FenceToken(5)), 119)
        );
        let mut halves = Contest::from(all[..FEW].to_vec());
        halves.merge(Contest::from(all[FEW..].to_vec()));
        assert_eq!(halves, forward);
        let back: Vec<Candidate> = forward.clone().into();
        assert_eq!(Contest::from(back), forward);
    }

    #[test]
    fn a_checkpointed_candidate_must_match_its_payload() {
        let c = cand(1, 100, 1);
        let json = serde_json::to_value(&c).unwrap();
        let back: Candidate = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, c);
        let mut forged = json;
        forged["event"]["fence_token"] = 9.into();
        let e = serde_json::from_value::<Candidate>(forged).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
    }
}
