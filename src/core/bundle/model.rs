//! The sync bundle document (SPEC section 5), as written on disk.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// payloadType of the DSSE statement that signs a bundle.
pub const BUNDLE_PAYLOAD_TYPE: &str = "application/vnd.airlock.job-sync-bundle.v1+json";

/// One node-log entry exactly as stored in a bundle (all values are the file's own text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub node_id: String,
    pub t_hlc: String,
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    pub payload: String,
    pub payload_hash: String,
    pub prev_link: Option<String>,
    pub link: String,
    pub enqueued_at: String,
}

/// A borrowed view of an entry, parsed straight from the file's bytes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EntryRef<'a> {
    #[serde(borrow)]
    pub node_id: Cow<'a, str>,
    #[serde(borrow)]
    pub t_hlc: Cow<'a, str>,
    #[serde(borrow)]
    pub job_id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub partition_key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub payload: Cow<'a, str>,
    #[serde(borrow)]
    pub payload_hash: Cow<'a, str>,
    #[serde(borrow)]
    pub prev_link: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub link: Cow<'a, str>,
    #[serde(borrow)]
    pub enqueued_at: Cow<'a, str>,
}

impl EntryRef<'_> {
    pub fn to_owned_entry(&self) -> Entry {
        Entry {
            node_id: self.node_id.to_string(),
            t_hlc: self.t_hlc.to_string(),
            job_id: self.job_id.to_string(),
            partition_key: self.partition_key.as_ref().map(|s| s.to_string()),
            payload: self.payload.to_string(),
            payload_hash: self.payload_hash.to_string(),
            prev_link: self.prev_link.as_ref().map(|s| s.to_string()),
            link: self.link.to_string(),
            enqueued_at: self.enqueued_at.to_string(),
        }
    }
}

impl<'a> From<&'a Entry> for EntryRef<'a> {
    fn from(e: &'a Entry) -> Self {
        EntryRef {
            node_id: Cow::Borrowed(&e.node_id),
            t_hlc: Cow::Borrowed(&e.t_hlc),
            job_id: Cow::Borrowed(&e.job_id),
            partition_key: e.partition_key.as_deref().map(Cow::Borrowed),
            payload: Cow::Borrowed(&e.payload),
            payload_hash: Cow::Borrowed(&e.payload_hash),
            prev_link: e.prev_link.as_deref().map(Cow::Borrowed),
            link: Cow::Borrowed(&e.link),
            enqueued_at: Cow::Borrowed(&e.enqueued_at),
        }
    }
}

/// One node's log inside a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobLog {
    pub node_id: String,
    pub last_hlc: String,
    pub chain_head: String,
    pub entries: Vec<Entry>,
}

/// The top-level fields of a bundle (everything but `jobLogs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct BundleHeader {
    pub bundle_id: String,
    pub tenant_id: String,
    pub created_at: String,
    pub created_by_node_id: String,
    pub manifest_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// A whole bundle in memory (small bundles, tests, export).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub header: BundleHeader,
    pub job_logs: Vec<JobLog>,
}

impl Bundle {
    pub fn entry_count(&self) -> usize {
        self.job_logs.iter().map(|l| l.entries.len()).sum()
    }
}
