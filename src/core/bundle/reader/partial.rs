//! The best-effort reading of an entry the strict parse refused: well-typed fields kept, every
//! problem listed.

use super::super::model::EntryRef;
use super::problems::{problem, type_name, SchemaProblem, SchemaProblemKind};
use serde_json::Value;

const ENTRY_KEYS: [&str; 9] = [
    "nodeId",
    "tHlc",
    "jobId",
    "partitionKey",
    "payload",
    "payloadHash",
    "prevLink",
    "link",
    "enqueuedAt",
];

/// Builds a best-effort entry from an ill-shaped one and lists what is wrong with it.
pub(super) fn partial_entry(
    value: &Value,
    path: &str,
    log: usize,
    index: usize,
) -> (EntryRef<'static>, Vec<SchemaProblem>) {
    let mut problems = Vec::new();
    let empty = serde_json::Map::new();
    let obj = match value {
        Value::Object(m) => m,
        other => {
            problems.push(problem(
                path,
                Some(log),
                Some(index),
                SchemaProblemKind::NotAnObject,
                &format!("must be an object, found {}", type_name(other)),
            ));
            &empty
        }
    };
    for key in obj.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            problems.push(problem(
                &format!("{path}.{key}"),
                Some(log),
                Some(index),
                SchemaProblemKind::Unknown,
                "unknown field",
            ));
        }
    }
    let mut get = |key: &str, optional: bool, nullable: bool| -> Option<String> {
        let fpath = format!("{path}.{key}");
        match obj.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) if nullable => None,
            None if optional => None,
            None => {
                if matches!(value, Value::Object(_)) {
                    problems.push(problem(
                        &fpath,
                        Some(log),
                        Some(index),
                        SchemaProblemKind::Missing,
                        "missing required field",
                    ));
                }
                None
            }
            Some(other) => {
                problems.push(problem(
                    &fpath,
                    Some(log),
                    Some(index),
                    SchemaProblemKind::WrongType,
                    &format!(
                        "must be a string{}, found {}",
                        if nullable { " or null" } else { "" },
                        type_name(other)
                    ),
                ));
                None
            }
        }
    };
    let node_id = get("nodeId", false, false).unwrap_or_default();
    let t_hlc = get("tHlc", false, false).unwrap_or_default();
    let job_id = get("jobId", false, false).unwrap_or_default();
    let partition_key = get("partitionKey", true, false);
    let payload = get("payload", false, false).unwrap_or_default();
    let payload_hash = get("payloadHash", false, false).unwrap_or_default();
    let prev_link = get("prevLink", false, true);
    let link = get("link", false, false).unwrap_or_default();
    let enqueued_at = get("enqueuedAt", false, false).unwrap_or_default();
    use std::borrow::Cow::Owned;
    (
        EntryRef {
            node_id: Owned(node_id),
            t_hlc: Owned(t_hlc),
            job_id: Owned(job_id),
            partition_key: partition_key.map(Owned),
            payload: Owned(payload),
            payload_hash: Owned(payload_hash),
            prev_link: prev_link.map(Owned),
            link: Owned(link),
            enqueued_at: Owned(enqueued_at),
        },
        problems,
    )
}
