//! Merkle anti-entropy between two copies of a node's ledger (SPEC 12, seed AD-38 part 6): find
//! the first LSN range where they differ top-down over RFC 6962 trees of their frames in a bounded,
//! counted number of exchanges, then copy the frames one side is missing — never overwriting a
//! frame the other side holds.

pub mod block_index;
pub mod protocol;
pub mod replica;
pub mod session;
pub mod tree;

pub use protocol::{LsnSpan, NodeId, Summary, SyncPeer, SyncRequest, SyncResponse, WireFrame};
pub use replica::{IndexNote, Replica, Trust};
pub use session::{run, FrameInfo, SyncReport};

use super::LedgerError;
use replica::{decode_wire, encode_wire};

/// Most nodes one tree request may name, and most LSNs one frame request may cover.
pub const MAX_NODES_PER_REQUEST: usize = 1024;
pub const MAX_LSNS_PER_REQUEST: u64 = 1 << 16;

/// Answers one request against a local ledger: what [`LocalPeer`] calls (two files given by the
/// operator; the session compares their node hashes).
pub fn serve(replica: &mut Replica, req: &SyncRequest) -> Result<SyncResponse, LedgerError> {
    answer(replica, req, None)
}

/// [`serve`] for the ledger of `node` (`airlock serve`'s `/api/v1/ledger/{node}/sync`): the log
/// there, if it has frames, must be `node`'s, and so must every frame offered to it, else
/// [`LedgerError::ForeignNode`] and nothing is stored. Without the check, a peer's log of another
/// node was stored under `node`'s name, and every later append to `node` failed.
pub fn serve_node(
    replica: &mut Replica,
    req: &SyncRequest,
    node: &str,
) -> Result<SyncResponse, LedgerError> {
    let expected = crate::core::wal::frame::node_hash(node);
    let foreign = |found: u64, offered: bool| LedgerError::ForeignNode {
        node: node.to_string(),
        expected,
        found,
        offered,
    };
    if let Some(found) = replica.node_hash().filter(|h| *h != expected) {
        return Err(foreign(found, false));
    }
    answer(
        replica,
        req,
        Some((expected, &|found| foreign(found, true))),
    )
}

/// Refuses an offered frame of a node other than the expected one (its hash in, the error out).
type NodeCheck<'a> = &'a dyn Fn(u64) -> LedgerError;

fn answer(
    replica: &mut Replica,
    req: &SyncRequest,
    check: Option<(u64, NodeCheck<'_>)>,
) -> Result<SyncResponse, LedgerError> {
    match req {
        SyncRequest::Children { floor, nodes } => {
            if nodes.len() > MAX_NODES_PER_REQUEST
                || nodes.iter().any(|n| n.level == 0 || n.level > 8)
            {
                return Err(LedgerError::Usage(format!(
                    "a tree request names at most {MAX_NODES_PER_REQUEST} nodes of levels 1 to 8"
                )));
            }
            let floor = (*floor).max(replica.floor());
            let children = nodes
                .iter()
                .map(|n| replica.children(floor, *n))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(SyncResponse::Children {
                floor: replica.floor(),
                next_lsn: replica.next_lsn(),
                node: replica.node_hash().map(|h| format!("{h:016x}")),
                children,
            })
        }
        SyncRequest::Frames {
            floor,
            spans,
            offer,
            apply,
        } => {
            // Summed without wrapping: spans whose lengths add up past u64::MAX are over the
            // limit, never a small total that would let them read the whole log (or a panic).
            let total = spans
                .iter()
                .try_fold(0u64, |sum, s| sum.checked_add(s.to.saturating_sub(s.from)));
            let over = total.is_none_or(|t| t > MAX_LSNS_PER_REQUEST);
            if over || offer.len() as u64 > MAX_LSNS_PER_REQUEST {
                return Err(LedgerError::Usage(format!(
                    "a frame request covers at most {MAX_LSNS_PER_REQUEST} LSNs"
                )));
            }
            let floor = (*floor).max(replica.floor());
            let frames = replica.frames_in(floor, spans)?;
            let appended = if *apply {
                let offered = offer
                    .iter()
                    .map(decode_wire)
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some((expected, foreign)) = check {
                    let node_of = |f: &tree::RawFrame| replica::header(&f.bytes).hlc.node_hash;
                    if let Some(found) = offered.iter().map(node_of).find(|h| *h != expected) {
                        return Err(foreign(found));
                    }
                }
                replica.accept(&offered)?
            } else {
                Vec::new()
            };
            Ok(SyncResponse::Frames {
                frames: frames.iter().map(encode_wire).collect(),
                appended,
            })
        }
    }
}

/// A peer that is a ledger file in this process. Messages go through their JSON form, as they
/// would over HTTP.
pub struct LocalPeer {
    pub replica: Replica,
}

impl SyncPeer for LocalPeer {
    fn exchange(&mut self, req: &SyncRequest) -> Result<SyncResponse, LedgerError> {
        let wire = serde_json::to_vec(req).map_err(|e| LedgerError::Usage(e.to_string()))?;
        let req: SyncRequest =
            serde_json::from_slice(&wire).map_err(|e| LedgerError::Usage(e.to_string()))?;
        let resp = serve(&mut self.replica, &req)?;
        let wire = serde_json::to_vec(&resp).map_err(|e| LedgerError::Usage(e.to_string()))?;
        serde_json::from_slice(&wire).map_err(|e| LedgerError::Usage(e.to_string()))
    }
}

/// Diff (`apply` false) or sync two ledger files, using their block indexes when they pass
/// their checks.
pub fn between_files(
    a: &std::path::Path,
    b: &std::path::Path,
    apply: bool,
) -> Result<SyncReport, LedgerError> {
    between_files_with(a, b, apply, Trust::Index)
}

/// [`between_files`] with the given trust in the block indexes.
pub fn between_files_with(
    a: &std::path::Path,
    b: &std::path::Path,
    apply: bool,
    trust: Trust,
) -> Result<SyncReport, LedgerError> {
    // Each open reads, checks and hashes one file (or checks its index): both at once.
    let (mine, theirs) = std::thread::scope(|s| {
        let theirs = s.spawn(|| Replica::open_with(b, trust));
        let mine = Replica::open_with(a, trust);
        (
            mine,
            theirs.join().unwrap_or(Err(LedgerError::WorkerPanicked)),
        )
    });
    let mut local = mine?;
    let mut peer = LocalPeer { replica: theirs? };
    // Both trees are needed at the floor the session will settle on: hash the two files at once.
    let floor = local.floor().max(peer.replica.floor());
    std::thread::scope(|s| {
        let theirs = s.spawn(|| peer.replica.tree(floor).map(|_| ()));
        let mine = local.tree(floor).map(|_| ());
        let theirs = theirs.join().unwrap_or(Err(LedgerError::WorkerPanicked));
        mine.and(theirs)
    })?;
    let mut report = run(&mut local, &mut peer, apply)?;
    report.block_index.push(peer.replica.index_note().clone());
    report.torn_tails_cut.extend(peer.replica.take_cut());
    Ok(report)
}

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod tests;
