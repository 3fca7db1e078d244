//! The node job log (SPEC section 4): what an offline enqueue and a bundle export take and give.
//! The rules themselves ([`crate::core::store::rules::enqueue`], [`crate::core::store::rules::export`])
//! run over either store.

use super::StoreError;
use crate::core::bundle::BundleHeader;
use crate::core::canonical::CanonicalError;

/// One job to enqueue: the payload as JSON text in any formatting.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub payload_json: String,
    pub partition_key: Option<String>,
    pub idempotency_key: Option<String>,
    /// Where the payload came from, for error messages (e.g. `line 3 of jobs.jsonl`).
    pub origin: String,
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "outcome"
)]
pub enum EnqueueOutcome {
    /// Appended at `index` of the node log.
    Enqueued {
        index: u64,
        job_id: String,
        t_hlc: String,
        payload_hash: String,
        link: String,
    },
    /// The same job (same jobId, same payload) is already in the log: nothing appended.
    Duplicate { job_id: String, existing_index: u64 },
}

/// Why an enqueue was refused. Nothing is written when any job of a call is refused.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error("{origin}: {source}")]
    Payload {
        origin: String,
        #[source]
        source: CanonicalError,
    },
    #[error("{origin}: job {job_id} already exists in this log with a different payload (an idempotency key reused for another payload); nothing was enqueued")]
    Conflict { origin: String, job_id: String },
    #[error("invalid {what}: {message}")]
    Invalid { what: &'static str, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for EnqueueError {
    fn from(e: rusqlite::Error) -> Self {
        EnqueueError::Store(StoreError::Sql(e))
    }
}

/// A node log stored for a tenant (defined beside the storage interface that returns it).
pub use super::backend::NodeLogSummary;

/// What an export wrote.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSummary {
    pub bundle_id: String,
    pub tenant_id: String,
    pub created_at: String,
    pub manifest_digest: String,
    pub nodes: Vec<NodeLogSummary>,
    pub entries: u64,
    pub bytes: u64,
    pub signed_by: Option<String>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "tenant {0:?} has no node log entries{1}; enqueue jobs first or check --tenant/--node"
    )]
    Empty(String, String),
    #[error("signing failed: {0}")]
    Sign(String),
    #[error("writing the bundle failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ExportError {
    fn from(e: rusqlite::Error) -> Self {
        ExportError::Store(StoreError::Sql(e))
    }
}

/// Signs a finished header: returns (base64 signature, key id).
pub type HeaderSigner<'a> = &'a dyn Fn(&BundleHeader) -> Result<(String, String), String>;

/// The header fields of a bundle that do not derive from its logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleIdentity {
    pub bundle_id: String,
    pub created_at: String,
    pub created_by: String,
}
