//! The anti-entropy exchange as request/response messages (serde), so that the same session runs
//! between two files in one process ([`super::LocalPeer`]) and between two `airlock serve`
//! instances over HTTP (a transport only moves these messages; [`super::serve`] answers them).

use serde::{Deserialize, Serialize};

/// Children per tree node.
pub const FANOUT: u64 = 256;

/// A node of the 256-way tree over a ledger's frames: it covers the leaves
/// `[index * 256^level, (index + 1) * 256^level)`, leaf `i` being the frame with LSN `floor + i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeId {
    pub level: u8,
    pub index: u64,
}

impl NodeId {
    /// Number of leaves the node covers (saturating for absurd levels).
    pub fn width(self) -> u64 {
        FANOUT
            .checked_pow(u32::from(self.level))
            .unwrap_or(u64::MAX)
    }

    /// The leaf range `[start, end)` the node covers.
    pub fn leaves(self) -> (u64, u64) {
        let w = self.width();
        let start = self.index.saturating_mul(w);
        (start, start.saturating_add(w))
    }

    pub fn child(self, c: u64) -> NodeId {
        NodeId {
            level: self.level.saturating_sub(1),
            index: self.index.saturating_mul(FANOUT).saturating_add(c),
        }
    }
}

/// One subtree as one side sees it: how many frames it holds there and their RFC 6962 tree hash
/// (lowercase hex; the empty tree's hash when it holds none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub hash: String,
}

/// A half-open LSN range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LsnSpan {
    pub from: u64,
    pub to: u64,
}

/// A whole frame as stored (base64 of its bytes, header included), with its LSN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireFrame {
    pub lsn: u64,
    pub frame: String,
}

/// What one side asks the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum SyncRequest {
    /// The summaries of the 256 children of each node, over frames with LSN >= max(floors).
    #[serde(rename_all = "camelCase")]
    Children { floor: u64, nodes: Vec<NodeId> },
    /// The frames the peer holds in `spans`; with `apply`, the peer first appends those of `offer`
    /// that extend its log (never replacing a frame it has).
    #[serde(rename_all = "camelCase")]
    Frames {
        floor: u64,
        spans: Vec<LsnSpan>,
        offer: Vec<WireFrame>,
        apply: bool,
    },
}

/// What the other side answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum SyncResponse {
    #[serde(rename_all = "camelCase")]
    Children {
        /// The peer's first LSN (after compaction, above 1).
        floor: u64,
        /// The LSN the peer's next frame would have.
        next_lsn: u64,
        /// Node hash (hex) of the peer's frames; null for an empty log.
        node: Option<String>,
        children: Vec<Vec<Summary>>,
    },
    #[serde(rename_all = "camelCase")]
    Frames {
        /// The peer's frames in the spans, before it applied the offer.
        frames: Vec<WireFrame>,
        /// LSNs the peer appended from the offer.
        appended: Vec<u64>,
    },
}

/// The other side of a session: anything that answers requests (a local file, an HTTP client).
pub trait SyncPeer {
    fn exchange(&mut self, req: &SyncRequest) -> Result<SyncResponse, super::super::LedgerError>;
}
