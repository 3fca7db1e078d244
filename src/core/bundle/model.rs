//! The sync bundle document (SPEC section 5), as written on disk.

use crate::core::chain::{decode_digest, encode_digest, NodeLinker};
use crate::core::ids::parse_job_id;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// payloadType of the DSSE statement that signs a bundle.
pub const BUNDLE_PAYLOAD_TYPE: &str = "application/vnd.airlock.job-sync-bundle.v1+json";

/// One node-log entry exactly as stored in a bundle (all values are the file's own text).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub node_id: String,
    pub t_hlc: String,
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    pub payload: String,
    pub payload_hash: String,
    #[serde(deserialize_with = "required_nullable")]
    pub prev_link: Option<String>,
    pub link: String,
    pub enqueued_at: String,
}

/// `prevLink` is required and may be null (SPEC 5: null on a log's first entry). serde takes a
/// missing `Option` field for `None`; through this function a missing `prevLink` is a missing
/// field (schema-invalid), never a silent genesis.
fn required_nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
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
    #[serde(deserialize_with = "required_nullable")]
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

/// Why a log could not be relinked: an entry whose jobId or link text is not what the SPEC allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {index} of log {node_id:?}: {field}: {problem}")]
pub struct RelinkError {
    pub node_id: String,
    pub index: usize,
    pub field: &'static str,
    pub problem: String,
}

impl JobLog {
    /// Recomputes, from entry `from` on, every payloadHash, prevLink and link, then chainHead and
    /// lastHlc, from the entries' own payload, jobId and tHlc text: the log as a writer that
    /// recomputes everything would leave it (tests and demo forgeries; generators link as they
    /// write through [`crate::core::chain::NodeLinker`]). A log left empty keeps its chainHead and
    /// lastHlc.
    pub fn relink(&mut self, from: usize) -> Result<(), RelinkError> {
        let node_id = &self.node_id;
        let fail = |index: usize, field: &'static str, problem: String| RelinkError {
            node_id: node_id.clone(),
            index,
            field,
            problem,
        };
        let prev = match from
            .checked_sub(1)
            .and_then(|p| self.entries.get(p).map(|e| (p, e)))
        {
            Some((p, e)) => Some(decode_digest(&e.link).map_err(|m| fail(p, "link", m))?),
            None => None,
        };
        let mut linker = NodeLinker::after(prev);
        for (i, e) in self.entries.iter_mut().enumerate().skip(from) {
            let id = parse_job_id(&e.job_id).map_err(|m| fail(i, "jobId", m))?;
            let linked = linker.link(&id, &e.t_hlc, &e.payload);
            e.payload_hash = encode_digest(&linked.payload_hash);
            e.prev_link = linked.prev_link.as_ref().map(encode_digest);
            e.link = encode_digest(&linked.link);
        }
        if let Some(last) = self.entries.last() {
            self.chain_head = last.link.clone();
            self.last_hlc = last.t_hlc.clone();
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: &str, payload: &str) -> Entry {
        Entry {
            node_id: "n".into(),
            t_hlc: t.into(),
            job_id: crate::core::ids::job_id(payload, None).to_string(),
            partition_key: None,
            payload: payload.into(),
            payload_hash: String::new(),
            prev_link: None,
            link: String::new(),
            enqueued_at: String::new(),
        }
    }

    #[test]
    fn relink_recomputes_from_an_entry_on_and_keeps_what_is_before() {
        let mut log = JobLog {
            node_id: "n".into(),
            last_hlc: String::new(),
            chain_head: String::new(),
            entries: vec![
                entry("1:0:n", "{}"),
                entry("2:0:n", "[]"),
                entry("3:0:n", "1"),
            ],
        };
        log.relink(0).unwrap();
        let mut linker = NodeLinker::default();
        for e in &log.entries {
            let l = linker.link(&parse_job_id(&e.job_id).unwrap(), &e.t_hlc, &e.payload);
            assert_eq!(e.link, encode_digest(&l.link));
            assert_eq!(e.prev_link, l.prev_link.as_ref().map(encode_digest));
        }
        assert_eq!(log.chain_head, log.entries[2].link);
        assert_eq!(log.last_hlc, "3:0:n");
        let whole = log.clone();
        log.entries[2].link = "garbage".into();
        log.relink(2).unwrap();
        assert_eq!(log, whole);
        log.entries[1].link = "garbage".into();
        let err = log.relink(2).unwrap_err();
        assert_eq!((err.index, err.field), (1, "link"));
        log.entries[1].job_id = log.entries[1].job_id.to_uppercase();
        assert_eq!(log.relink(1).unwrap_err().field, "jobId");
    }
}
