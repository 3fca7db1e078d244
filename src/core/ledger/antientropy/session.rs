//! One anti-entropy session, run by side A against a peer B:
//!
//! 1. Top-down search. A asks for the children of its root (a 256-way node wide enough for its
//!    frames), compares each child's (count, hash) with its own, and asks again for the children
//!    of the differing ones, level by level, up to [`MAX_NODES_PER_EXCHANGE`] nodes per exchange
//!    (further differing subtrees are fetched whole). A child one side holds nothing of, and a
//!    differing leaf, become LSN spans to compare frame by frame. Each level is one exchange, so
//!    ledgers of up to 256^3 (16.7 M) frames that differ in one frame need 3 exchanges to find it.
//! 2. Frames. A sends its frames in those spans (for sync) and receives B's (chunks of
//!    [`MAX_LSNS_PER_EXCHANGE`] LSNs, one exchange each). Both sides then know every frame the
//!    other is missing: the first divergent LSN, the events missing on each side, and the LSNs
//!    where both hold a frame but not the same one (divergent: never overwritten).
//! 3. Sync copies what extends a log: each side appends the other's frames past its own end,
//!    byte for byte, unless the logs diverged before that end.

use super::protocol::{LsnSpan, NodeId, Summary, SyncPeer, SyncRequest, SyncResponse, FANOUT};
use super::replica::{decode_wire, encode_wire, identity, Replica};
use super::tree::RawFrame;
use crate::core::ledger::source::decode_frame;
use crate::core::ledger::LedgerError;
use crate::core::text::ShowPath;
use serde::Serialize;
use std::collections::HashMap;

/// Differing nodes descended into per exchange; beyond it, subtrees are compared whole.
pub const MAX_NODES_PER_EXCHANGE: usize = 64;
/// LSNs per frame exchange.
pub const MAX_LSNS_PER_EXCHANGE: u64 = 4096;

/// A frame named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameInfo {
    pub lsn: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub hlc: String,
    pub job_id: Option<String>,
}

/// The result of a diff or sync (`ledger diff --json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    pub first_divergent_lsn: Option<u64>,
    /// B's frames at LSNs A does not hold (a divergent LSN is in `divergent` only).
    pub missing_in_a: Vec<FrameInfo>,
    /// A's frames at LSNs B does not hold.
    pub missing_in_b: Vec<FrameInfo>,
    pub exchanges: u32,
    /// LSNs both hold with different frames (never overwritten).
    pub divergent: Vec<u64>,
    /// The LSN spans the search narrowed the difference to.
    pub spans: Vec<LsnSpan>,
    pub copied_to_a: Vec<u64>,
    pub copied_to_b: Vec<u64>,
    /// How each local side's tree was obtained (block index used, or why not).
    pub block_index: Vec<super::replica::IndexNote>,
    /// Torn tails recovery cut (and saved beside the log) before frames were copied in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub torn_tails_cut: Vec<super::replica::TornTailCut>,
}

impl SyncReport {
    pub fn in_sync(&self) -> bool {
        self.first_divergent_lsn.is_none()
    }
}

/// The peer's child summaries, floor, next LSN and node hash.
type PeerChildren = (Vec<Vec<Summary>>, u64, u64, Option<String>);

struct Search<'a> {
    local: &'a mut Replica,
    peer: &'a mut dyn SyncPeer,
    floor: u64,
    exchanges: u32,
}

impl Search<'_> {
    fn children(&mut self, nodes: &[NodeId]) -> Result<PeerChildren, LedgerError> {
        let req = SyncRequest::Children {
            floor: self.floor,
            nodes: nodes.to_vec(),
        };
        self.exchanges += 1;
        match self.peer.exchange(&req)? {
            SyncResponse::Children {
                floor,
                next_lsn,
                node,
                children,
            } if children.len() == nodes.len()
                && children.iter().all(|c| c.len() == FANOUT as usize) =>
            {
                Ok((children, floor, next_lsn, node))
            }
            _ => Err(LedgerError::Usage(
                "the peer answered the tree request with something else".into(),
            )),
        }
    }
}

/// Runs a session: `apply` false is a diff (nothing written), true a sync.
pub fn run(
    local: &mut Replica,
    peer: &mut dyn SyncPeer,
    apply: bool,
) -> Result<SyncReport, LedgerError> {
    let own_floor = local.floor();
    let span = local.next_lsn() - own_floor;
    let mut level = 1u8;
    while FANOUT
        .checked_pow(u32::from(level))
        .is_some_and(|w| w < span)
    {
        level += 1;
    }
    let root = NodeId { level, index: 0 };
    let mut s = Search {
        local,
        peer,
        floor: own_floor,
        exchanges: 0,
    };
    let (first, peer_floor, peer_next, peer_node) = s.children(&[root])?;
    check_same_node(s.local, peer_node.as_deref())?;
    s.floor = own_floor.max(peer_floor);
    let mut spans = Vec::new();
    let mut frontier = compare(&mut s, &[root], &first, &mut spans)?;
    while !frontier.is_empty() {
        let (answer, ..) = s.children(&frontier)?;
        frontier = compare(&mut s, &frontier.clone(), &answer, &mut spans)?;
    }
    let root_end = s.floor.saturating_add(root.width());
    if peer_next > root_end {
        spans.push(LsnSpan {
            from: root_end,
            to: peer_next,
        });
    }
    spans.sort();
    let mut report = frames_phase(&mut s, &spans, apply)?;
    report.spans = spans;
    report.exchanges = s.exchanges;
    report.block_index.push(s.local.index_note().clone());
    report.torn_tails_cut.extend(s.local.take_cut());
    Ok(report)
}

fn check_same_node(local: &Replica, peer: Option<&str>) -> Result<(), LedgerError> {
    if let (Some(mine), Some(theirs)) = (local.node_hash(), peer) {
        let mine = format!("{mine:016x}");
        if mine != theirs {
            return Err(LedgerError::Usage(format!(
                "{} holds the log of node hash {mine}, the peer of node hash {theirs}: anti-entropy compares copies of one node's log",
                local.path().shown()
            )));
        }
    }
    Ok(())
}

/// Compares the peer's child summaries with ours; returns the nodes to descend into next.
fn compare(
    s: &mut Search<'_>,
    nodes: &[NodeId],
    theirs: &[Vec<Summary>],
    spans: &mut Vec<LsnSpan>,
) -> Result<Vec<NodeId>, LedgerError> {
    let floor = s.floor;
    let mut next = Vec::new();
    for (node, their_children) in nodes.iter().zip(theirs) {
        let mine = s.local.children(floor, *node)?;
        for (c, (m, t)) in mine.iter().zip(their_children).enumerate() {
            if m == t {
                continue;
            }
            let child = node.child(c as u64);
            let (a, b) = child.leaves();
            let whole = LsnSpan {
                from: floor.saturating_add(a),
                to: floor.saturating_add(b),
            };
            let leaf_or_one_sided = child.level == 0 || m.count == 0 || t.count == 0;
            if leaf_or_one_sided || next.len() >= MAX_NODES_PER_EXCHANGE {
                spans.push(whole);
            } else {
                next.push(child);
            }
        }
    }
    Ok(next)
}

/// Exchanges the frames of the spans, computes the report and (with `apply`) copies both ways.
fn frames_phase(
    s: &mut Search<'_>,
    spans: &[LsnSpan],
    apply: bool,
) -> Result<SyncReport, LedgerError> {
    let mut report = SyncReport::default();
    let mut mine_all: Vec<RawFrame> = Vec::new();
    let mut theirs_all: Vec<RawFrame> = Vec::new();
    for chunk in chunks(spans) {
        let mine = s.local.frames_in(s.floor, &chunk)?;
        let offer = if apply {
            mine.iter().map(encode_wire).collect()
        } else {
            Vec::new()
        };
        let req = SyncRequest::Frames {
            floor: s.floor,
            spans: chunk,
            offer,
            apply,
        };
        s.exchanges += 1;
        let SyncResponse::Frames { frames, appended } = s.peer.exchange(&req)? else {
            return Err(LedgerError::Usage(
                "the peer answered the frame request with something else".into(),
            ));
        };
        let theirs = frames
            .iter()
            .map(decode_wire)
            .collect::<Result<Vec<_>, _>>()?;
        report.copied_to_b.extend(appended);
        if apply {
            report.copied_to_a.extend(s.local.accept(&theirs)?);
        }
        mine_all.extend(mine);
        theirs_all.extend(theirs);
    }
    describe(&mut report, &mine_all, &theirs_all);
    Ok(report)
}

/// Splits the spans into pieces of at most [`MAX_LSNS_PER_EXCHANGE`] LSNs each.
fn chunks(spans: &[LsnSpan]) -> Vec<Vec<LsnSpan>> {
    let mut out: Vec<Vec<LsnSpan>> = Vec::new();
    let mut cur: Vec<LsnSpan> = Vec::new();
    let mut used = 0u64;
    for sp in spans {
        let mut from = sp.from;
        while from < sp.to {
            let take = (sp.to - from).min(MAX_LSNS_PER_EXCHANGE - used);
            cur.push(LsnSpan {
                from,
                to: from + take,
            });
            used += take;
            from += take;
            if used == MAX_LSNS_PER_EXCHANGE {
                out.push(std::mem::take(&mut cur));
                used = 0;
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The report of the frames both sides hold in the spans compared: `missing_in_a` / `missing_in_b`
/// are the frames at LSNs the other side does not hold at all; `divergent` the LSNs both hold
/// with different frames (listed there only, never as missing: neither side lacks the LSN, and
/// sync never overwrites it).
fn describe(report: &mut SyncReport, mine: &[RawFrame], theirs: &[RawFrame]) {
    let my_by_lsn: HashMap<u64, &RawFrame> = mine.iter().map(|f| (f.lsn, f)).collect();
    let their_by_lsn: HashMap<u64, &RawFrame> = theirs.iter().map(|f| (f.lsn, f)).collect();
    let missing = |fs: &[RawFrame], other: &HashMap<u64, &RawFrame>| -> Vec<FrameInfo> {
        fs.iter()
            .filter(|f| !other.contains_key(&f.lsn))
            .map(info)
            .collect()
    };
    report.missing_in_a = missing(theirs, &my_by_lsn);
    report.missing_in_b = missing(mine, &their_by_lsn);
    let mut first = None::<u64>;
    for f in mine.iter().chain(theirs) {
        let differs = match (my_by_lsn.get(&f.lsn), their_by_lsn.get(&f.lsn)) {
            (Some(m), Some(t)) => m.bytes[4..] != t.bytes[4..],
            _ => true,
        };
        if differs {
            first = Some(first.map_or(f.lsn, |x| x.min(f.lsn)));
        }
    }
    report.first_divergent_lsn = first;
    let mut divergent: Vec<u64> = mine
        .iter()
        .filter_map(|m| {
            let t = their_by_lsn.get(&m.lsn)?;
            (identity(&m.bytes) != identity(&t.bytes)).then_some(m.lsn)
        })
        .collect();
    divergent.sort_unstable();
    report.divergent = divergent;
}

/// A frame's type, HLC and job id, for reports.
pub fn info(f: &RawFrame) -> FrameInfo {
    let head = super::replica::header(&f.bytes);
    let frame_type = crate::core::wal::FrameType::from_byte(head.frame_type);
    let state = crate::core::wal::FrameState::from_byte(head.state);
    let decoded = match (frame_type, state) {
        (Some(ft), Some(st)) => {
            let r = crate::core::wal::FrameRef {
                offset: 0,
                crc32: head.crc32,
                lsn: head.lsn,
                hlc: head.hlc,
                state: st,
                frame_type: ft,
                payload: &f.bytes[crate::core::wal::FRAME_HEADER_LEN..],
            };
            decode_frame(&r).ok().flatten()
        }
        _ => None,
    };
    FrameInfo {
        lsn: f.lsn,
        kind: frame_type.map_or("unknown", |t| t.name()).to_string(),
        hlc: decoded
            .as_ref()
            .map_or_else(|| head.hlc.text(None), |e| e.hlc().to_string()),
        job_id: decoded.map(|e| e.job_id().to_string()),
    }
}
