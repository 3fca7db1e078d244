//! One job's events across ledgers, lane per node on the HLC axis, each marked with its part in
//! the job's resolution (the deciding event, a winner or a loser of a conflict): what the console
//! draws as swimlanes.

use super::resolve::{EventRef, Resolution};
use super::source::decode_frame;
use super::LedgerError;
use crate::core::wal::WalReader;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// An event's part in the resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Decided the terminal or cancelling status (`decidedBy`).
    Deciding,
    /// Won a conflict.
    Won,
    /// Lost a conflict (kept, shown).
    Lost,
    Plain,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    pub physical: u64,
    pub logical: u32,
    pub hlc: String,
    pub kind: &'static str,
    pub source: String,
    pub lsn: u64,
    pub role: Role,
}

/// One lane: a node's events in HLC order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineLane {
    pub node: String,
    pub entries: Vec<TimelineEntry>,
}

fn key(e: &EventRef) -> (String, &'static str) {
    (e.hlc.clone(), e.kind)
}

/// Reads the job's events from the ledgers (labelled by their paths, as the fold labels them).
pub fn job_timeline(paths: &[PathBuf], res: &Resolution) -> Result<Vec<TimelineLane>, LedgerError> {
    let deciding = res.deciding.as_ref().map(key);
    let won: HashSet<_> = res.decisions.iter().map(|d| key(&d.winner)).collect();
    let lost: HashSet<_> = res
        .decisions
        .iter()
        .flat_map(|d| d.losers.iter().map(|l| key(&l.event)))
        .collect();
    let mut lanes: BTreeMap<String, Vec<TimelineEntry>> = BTreeMap::new();
    let mut seen = HashSet::new();
    for path in paths {
        let mut reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
        while let Some(f) = reader
            .next_frame()
            .map_err(|e| LedgerError::io("read", path, e))?
        {
            let Ok(Some(event)) = decode_frame(&f) else {
                continue;
            };
            if event.job_id().as_str() != res.job_id {
                continue;
            }
            let hlc = event.hlc().clone();
            let k = (hlc.to_string(), event.event_type().name());
            if !seen.insert((k.clone(), f.payload.to_vec())) {
                continue; // the same event in two copies of a ledger
            }
            let role = if deciding.as_ref() == Some(&k) {
                Role::Deciding
            } else if lost.contains(&k) {
                Role::Lost
            } else if won.contains(&k) {
                Role::Won
            } else {
                Role::Plain
            };
            lanes
                .entry(hlc.node.clone())
                .or_default()
                .push(TimelineEntry {
                    physical: hlc.physical,
                    logical: hlc.logical,
                    hlc: k.0,
                    kind: k.1,
                    source: crate::core::text::visible_path(path),
                    lsn: f.lsn,
                    role,
                });
        }
    }
    Ok(lanes
        .into_iter()
        .map(|(node, mut entries)| {
            entries.sort_by_key(|e| (e.physical, e.logical));
            TimelineLane { node, entries }
        })
        .collect())
}
