//! What a stored tenant chain reads as: its head, the tenants summary, stored entries with provenance
//! (read through [`crate::core::store::rules`]).

use super::snapshots::Snapshot;
use serde::Serialize;

/// The stored head of a tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    pub tenant_id: String,
    pub head_chain_link: String,
    pub head_hlc: String,
    pub length: u64,
    pub updated_at: String,
}

/// Summary of one tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSummary {
    pub tenant: String,
    pub head: String,
    pub head_hlc: String,
    pub length: u64,
    pub last_snapshot: Option<Snapshot>,
    /// Entries after the last snapshot.
    pub unsnapshotted: u64,
    /// The ids of the tenant's `batch_snapshot` rows that do not read (`chain verify` reports
    /// each); a row whose positions are damaged is left out of `lastSnapshot`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged_snapshots: Vec<i64>,
}

/// Where an entry came from (ENQUEUE entries written by an import).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub import_id: i64,
    pub bundle_id: String,
    pub file_name: String,
    pub source_node: String,
    pub original_t_hlc: String,
    /// Base64 as in the bundle.
    pub original_link: String,
    pub original_prev_link: Option<String>,
    pub partition_key: Option<String>,
    pub enqueued_at: String,
}

/// One stored chain entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEntry {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub action: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
    pub payload: String,
    pub created_at: String,
    pub provenance: Option<Provenance>,
}
