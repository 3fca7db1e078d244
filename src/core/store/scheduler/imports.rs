//! The `imports` table: one row per imported bundle.

use serde::Serialize;

/// One row of `imports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRecord {
    pub id: i64,
    pub import_batch: String,
    pub tenant_id: String,
    pub bundle_id: String,
    pub manifest_digest: String,
    pub created_by_node_id: String,
    pub signed_by: Option<String>,
    pub signer: Option<String>,
    pub file_name: String,
    pub entries: u64,
    pub new_entries: u64,
    pub duplicates: u64,
    pub dropped: u64,
    pub forced: bool,
    pub imported_at: String,
}
