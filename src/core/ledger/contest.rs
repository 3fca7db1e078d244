//! A contest: every distinct event competing for one decision (a job's creation, one DC's
//! acceptance, the cancellation, the outcome). The winner is the greatest by (fence token, HLC,
//! payload bytes); every other candidate is kept as a loser so the console can show it.
//!
//! A contest is a set, so offering events in any order, or merging contests, gives the same
//! result; the same event read twice (from two replicas) is one candidate, remembered at its
//! smallest `(source, lsn)`.

use super::event::Event;
use crate::core::hlc::Hlc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where an event was read: the ledger (WAL file label) and the frame's LSN.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Occurrence {
    pub source: String,
    pub lsn: u64,
}

/// One event as the fold keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub event: Event,
    /// The frame payload as read (JCS text); the final tie-breaker between distinct events.
    pub payload: Box<str>,
    pub at: Occurrence,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    fence: u64,
    hlc: Hlc,
    payload: Box<str>,
}

impl Candidate {
    fn key(&self) -> Key {
        Key {
            fence: self.event.fence_token().map_or(0, |f| f.0),
            hlc: self.event.hlc().clone(),
            payload: self.payload.clone(),
        }
    }
}

/// The distinct candidates of one decision, ordered by (fence token, HLC, payload).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "Vec<Candidate>", into = "Vec<Candidate>")]
pub struct Contest {
    entries: BTreeMap<Key, Candidate>,
}

impl Contest {
    pub fn offer(&mut self, c: Candidate) {
        match self.entries.entry(c.key()) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(c);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                if c.at < o.get().at {
                    o.get_mut().at = c.at;
                }
            }
        }
    }

    pub fn merge(&mut self, other: Contest) {
        for c in other.entries.into_values() {
            self.offer(c);
        }
    }

    pub fn for_each_occurrence(&mut self, f: &mut impl FnMut(&mut Occurrence)) {
        for c in self.entries.values_mut() {
            f(&mut c.at);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn winner(&self) -> Option<&Candidate> {
        self.entries.values().next_back()
    }

    /// Every candidate but the winner, strongest first.
    pub fn losers(&self) -> impl Iterator<Item = &Candidate> {
        self.entries.values().rev().skip(1)
    }

    /// Every candidate, weakest first.
    pub fn all(&self) -> impl DoubleEndedIterator<Item = &Candidate> {
        self.entries.values()
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
        c.entries.into_values().collect()
    }
}
