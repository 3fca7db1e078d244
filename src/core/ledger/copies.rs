//! Several WALs of one node in one fold (SPEC 11, 12).
//!
//! A node writes one frame per LSN and never rewrites one (SPEC 11), so two WALs whose frames
//! claim the same node (the node hash of their HLCs) are copies of one log: an older copy, a
//! compacted one, the same file given twice. Copies fold each event once; copies that hold
//! different frames at one LSN are not copies — a stale or damaged copy, or two nodes with one id —
//! and folding both would give a state no node ever had, so the fold is refused with both files,
//! the node and the first LSN where they differ, as `ledger diff` would find it.
//!
//! Checkpoints hold events as frames do: a checkpoint beside a copy is the fold of LSNs
//! 1..=applied, and it is folded whole or not at all. Of the copies' checkpoints, the one with the
//! highest applied LSN (the first by path among equals) is folded; it holds every LSN the others'
//! hold, so theirs are left out and every copy skips the frames it covers. Each LSN above it is
//! folded from the first copy, by path, whose frames hold it. Checkpoints at that same applied LSN
//! must hold the same fold state (occurrences relabelled to one source), else the fold is refused
//! naming both checkpoint files ([`LedgerError::DivergentCheckpoints`]); a checkpoint holding fewer
//! LSNs, and a checkpoint against another copy's frames, are not compared (that would mean folding
//! the frames again, which compaction may have dropped). A copy that starts above LSN 1 (compacted,
//! its checkpoint gone) misses only the LSNs no other copy holds, by frame or by checkpoint.
//!
//! Cost: a file's node is read from its first frame (a read of its first 4 KiB, more only for a larger frame), so
//! WALs of distinct nodes, the usual case, cost nothing per event. Only files that share a node are
//! read once more, together, in LSN order (each is in LSN order): one frame per file in memory,
//! no map of LSNs; their checkpoints are read once more (twice for equal applied LSNs: two states
//! in memory while they are compared). Frames are compared as anti-entropy compares them
//! ([`super::antientropy::replica::identity`]: the state byte aside, which compaction may raise).

use super::antientropy::replica::identity;
use super::LedgerError;
use crate::core::wal::{self, WalReader};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The LSNs of one input that other inputs (copies of the same log) fold instead: the fold skips
/// them, so each event is folded once. Also what the other copies hold at all, so a gap at the
/// start of this copy that another copy fills is not reported as missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldElsewhere {
    /// Disjoint, sorted, inclusive LSN ranges.
    spans: Vec<(u64, u64)>,
    /// What the other copies hold, by frame or by checkpoint (disjoint, sorted, inclusive).
    others: Vec<(u64, u64)>,
    /// The checkpoint beside this input is not folded: another copy's holds at least its LSNs.
    skip_checkpoint: bool,
}

impl HeldElsewhere {
    /// Whether `lsn` is folded from another input.
    pub fn holds(&self, lsn: u64) -> bool {
        self.spans
            .iter()
            .any(|&(from, to)| from <= lsn && lsn <= to)
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && !self.skip_checkpoint
    }

    /// Whether the checkpoint beside this input is left out (another copy's checkpoint holds its
    /// LSNs and is folded instead).
    pub fn skips_checkpoint(&self) -> bool {
        self.skip_checkpoint
    }

    /// The parts of `from..=to` that no other copy holds (all of it without copies).
    pub fn unheld(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let mut gaps = Vec::new();
        let mut at = from;
        for &(f, t) in &self.others {
            if at > to {
                break;
            }
            if t < at {
                continue;
            }
            if f > at {
                gaps.push((at, to.min(f - 1)));
            }
            at = t.saturating_add(1);
            if t == u64::MAX {
                return gaps;
            }
        }
        if at <= to {
            gaps.push((at, to));
        }
        gaps
    }
}

/// The union of `ranges`, merged into disjoint sorted spans.
fn union(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut spans: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (from, to) in ranges {
        match spans.last_mut() {
            Some(last) if from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
            _ => spans.push((from, to)),
        }
    }
    spans
}

/// The applied LSN of the checkpoint the fold would use beside the WAL at `path` (one with a
/// ledger fold state; 0 without).
fn checkpoint_lsn(path: &Path) -> Result<u64, LedgerError> {
    Ok(match wal::checkpoint::load(path)? {
        Some(cp) if !cp.state.is_null() => cp.applied_lsn,
        _ => 0,
    })
}

/// The node a WAL's first frame claims.
#[derive(Debug, Clone)]
struct Claim {
    hash: u64,
    /// The node id, when the first frame is an event that names it.
    node: Option<String>,
}

/// The node claimed by the first valid frame of the WAL at `path` (none: no frame, or a bad
/// header — the fold reports that). Reads the header and that frame only, not the reader's usual
/// megabytes.
fn claim(path: &Path) -> Result<Option<Claim>, LedgerError> {
    let mut reader =
        WalReader::open_reading_ahead(path, 4096).map_err(|e| LedgerError::io("open", path, e))?;
    let first = reader
        .next_frame()
        .map_err(|e| LedgerError::io("read", path, e))?;
    Ok(first.map(|f| Claim {
        hash: f.hlc.node_hash,
        node: wal::inspect::node_of_event(&f),
    }))
}

/// One input of a group being read in LSN order: its current frame and the LSNs it held.
struct Head<'a> {
    path: &'a Path,
    reader: WalReader<File>,
    /// The current frame's LSN and bytes (`None`: the file is read to its end).
    lsn: Option<u64>,
    frame: Vec<u8>,
    range: Option<(u64, u64)>,
}

impl<'a> Head<'a> {
    fn open(path: &'a Path) -> Result<Head<'a>, LedgerError> {
        let reader = WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
        let mut head = Head {
            path,
            reader,
            lsn: None,
            frame: Vec::new(),
            range: None,
        };
        head.advance()?;
        Ok(head)
    }

    /// Moves to the next valid frame (reading stops where recovery would: the fold reports why).
    fn advance(&mut self) -> Result<(), LedgerError> {
        let next = self
            .reader
            .next_raw()
            .map_err(|e| LedgerError::io("read", self.path, e))?;
        self.lsn = next.map(|(_, lsn, bytes)| {
            self.frame.clear();
            self.frame.extend_from_slice(bytes);
            lsn
        });
        if let Some(lsn) = self.lsn {
            let first = self.range.map_or(lsn, |r| r.0);
            self.range = Some((first, lsn));
        }
        Ok(())
    }
}

/// Reads the inputs of one node together in LSN order: each LSN held by several must hold the same
/// frame in each. Returns each input's LSN range, in `paths`' order.
fn compare(paths: &[&Path], node: &str) -> Result<Vec<Option<(u64, u64)>>, LedgerError> {
    let mut heads = paths
        .iter()
        .map(|p| Head::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    while let Some(lsn) = heads.iter().filter_map(|h| h.lsn).min() {
        let mut holders = (0..heads.len()).filter(|&i| heads[i].lsn == Some(lsn));
        let Some(first) = holders.next() else { break };
        for other in holders {
            if identity(&heads[first].frame) != identity(&heads[other].frame) {
                return Err(LedgerError::Divergent {
                    node: node.to_string(),
                    a: heads[first].path.to_path_buf(),
                    b: heads[other].path.to_path_buf(),
                    lsn,
                });
            }
        }
        for h in heads.iter_mut().filter(|h| h.lsn == Some(lsn)) {
            h.advance()?;
        }
    }
    Ok(heads.iter().map(|h| h.range).collect())
}

/// What copy `k` of a group (in path order) skips, given each copy's frame range and checkpoint
/// applied LSN (0: none). A checkpoint is one fold state for LSNs 1..=applied and cannot be folded
/// in part, so of the copies' checkpoints only the one with the highest applied LSN (the first by
/// path among equals) is folded: it holds every LSN the others hold, and every copy skips the
/// LSNs it covers. Each LSN above it is folded from the first copy, by path, whose frames hold it.
fn plan(ranges: &[Option<(u64, u64)>], applied: &[u64], k: usize) -> HeldElsewhere {
    let top = applied.iter().copied().max().unwrap_or(0);
    let base = applied.iter().position(|&a| a == top).unwrap_or(0);
    let mut skipped: Vec<(u64, u64)> = ranges[..k].iter().flatten().copied().collect();
    if top > 0 && k != base {
        skipped.push((1, top));
    }
    let others = (0..ranges.len())
        .filter(|&m| m != k)
        .flat_map(|m| {
            ranges[m]
                .into_iter()
                .chain((applied[m] > 0).then_some((1, applied[m])))
        })
        .collect();
    HeldElsewhere {
        spans: union(skipped),
        others: union(others),
        skip_checkpoint: k != base && applied[k] > 0,
    }
}

/// Checkpoints of one log that hold the same LSNs (the highest applied LSN: the one folded for
/// all) must hold the same fold state, once their occurrences carry one label (each names the log
/// it was taken beside); else [`LedgerError::DivergentCheckpoints`]. Checkpoints that hold fewer
/// LSNs are not compared: a state is a fold, not the events, and telling whether one fold is an
/// earlier stage of another would mean folding the frames between (which compaction dropped).
/// Two states are in memory at a time.
fn same_checkpoints(paths: &[&Path], applied: &[u64], node: &str) -> Result<(), LedgerError> {
    let top = applied.iter().copied().max().unwrap_or(0);
    let at_top: Vec<usize> = (0..paths.len())
        .filter(|&m| top > 0 && applied[m] == top)
        .collect();
    let [base, rest @ ..] = at_top.as_slice() else {
        return Ok(());
    };
    if rest.is_empty() {
        return Ok(());
    }
    let state = |m: usize| -> Result<super::Fold, LedgerError> {
        match wal::checkpoint::load(paths[m])? {
            Some(cp) if !cp.state.is_null() => {
                Ok(super::checkpoint::fold_state(paths[m], cp)?.into_fold(""))
            }
            _ => Ok(super::Fold::default()),
        }
    };
    let first = state(*base)?;
    for &other in rest {
        if first != state(other)? {
            return Err(LedgerError::DivergentCheckpoints {
                node: node.to_string(),
                a: wal::checkpoint::checkpoint_path(paths[*base]),
                b: wal::checkpoint::checkpoint_path(paths[other]),
                lsn: top,
            });
        }
    }
    Ok(())
}

/// Checks the inputs of a fold: those of one node must be copies of one log (else
/// [`LedgerError::Divergent`]). Returns, for each input in `paths`' order, what it skips because
/// another copy of the same log folds it ([`plan`]): LSNs, and its checkpoint.
pub fn check(paths: &[PathBuf]) -> Result<Vec<HeldElsewhere>, LedgerError> {
    let mut held = vec![HeldElsewhere::default(); paths.len()];
    if paths.len() < 2 {
        return Ok(held);
    }
    // (node hash, path, index), sorted: each node's inputs are adjacent, in the order of their
    // paths whatever the order they were given in (the fold's result does not depend on it).
    let mut claims: Vec<(u64, &Path, usize, Option<String>)> = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        if let Some(c) = claim(p)? {
            claims.push((c.hash, p.as_path(), i, c.node));
        }
    }
    claims.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    for group in claims.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
        let node = group
            .iter()
            .find_map(|c| c.3.clone())
            .unwrap_or_else(|| format!("(unnamed, node hash {:016x})", group[0].0));
        let members: Vec<&Path> = group.iter().map(|c| c.1).collect();
        let ranges = compare(&members, &node)?;
        let applied = members
            .iter()
            .map(|p| checkpoint_lsn(p))
            .collect::<Result<Vec<u64>, _>>()?;
        same_checkpoints(&members, &applied, &node)?;
        for (k, c) in group.iter().enumerate() {
            held[c.2] = plan(&ranges, &applied, k);
        }
    }
    Ok(held)
}
