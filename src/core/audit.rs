//! The audit log: every state change an operator makes (import and forced import with what was
//! dropped, trust, untrust, sign, snapshot, replay, retry, cancel, export), appended to the store
//! with who, when and the inputs, each record hash-chained to the one before so that an edit or a
//! deletion inside the log is detected by [`verify`].
//!
//! Record hash: lowercase hex SHA-256 of the canonical JSON (RFC 8785, `core::canonical`) of
//! `{"action", "at", "inputs", "operator", "prev", "seq"}`, where `prev` is the previous record's
//! hash (64 zeros for the first).

use crate::core::canonical::canonical_text;
use crate::core::chain::sha256;
use crate::core::store::{Store, StoreError};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use serde_json::{json, Value};

/// Schema of the audit log (store migration 3).
pub const MIGRATION_3: &str = "CREATE TABLE audit_log (
        seq       INTEGER PRIMARY KEY,
        at        TEXT NOT NULL,
        operator  TEXT NOT NULL,
        action    TEXT NOT NULL,
        inputs    TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL
    );";

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Largest inputs document kept per record (bytes of canonical JSON).
pub const MAX_INPUTS: usize = 64 * 1024;

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub at: String,
    /// The operating system user who made the change.
    pub operator: String,
    /// What was done: `import`, `force-import`, `trust`, `untrust`, `sign`, `snapshot`,
    /// `replay`, `retry`, `cancel`, `export`, ...
    pub action: String,
    /// The change's inputs (files, ids, counts, what was dropped).
    pub inputs: Value,
    pub prev_hash: String,
    pub hash: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerdict {
    pub ok: bool,
    pub records: u64,
    /// The head hash (the last record's), when there is one.
    pub head: Option<String>,
    /// The first record that does not chain, and why.
    pub first_break: Option<AuditBreak>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditBreak {
    pub seq: u64,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("audit log: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("audit inputs are not canonical JSON: {0}")]
    Inputs(String),
    #[error("audit inputs of {0} bytes exceed the {MAX_INPUTS}-byte limit")]
    TooLarge(usize),
}

/// The operator: the OS user name (`$USER`, else `$LOGNAME`, else `uid N`).
pub fn operator() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        // SAFETY: getuid has no preconditions and cannot fail.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }))
}

/// The hash of a record's fields (see the module docs).
pub fn record_hash(
    seq: u64,
    at: &str,
    operator: &str,
    action: &str,
    inputs: &Value,
    prev: &str,
) -> Result<String, AuditError> {
    let doc = json!({
        "action": action,
        "at": at,
        "inputs": inputs,
        "operator": operator,
        "prev": prev,
        "seq": seq,
    });
    let text = canonical_text(&doc).map_err(|e| AuditError::Inputs(e.to_string()))?;
    Ok(hex::encode(sha256(text.as_bytes())))
}

/// Appends a record (one transaction; the chain's head is read inside it).
pub fn append(store: &mut Store, action: &str, inputs: Value) -> Result<AuditRecord, AuditError> {
    let size = canonical_text(&inputs)
        .map_err(|e| AuditError::Inputs(e.to_string()))?
        .len();
    if size > MAX_INPUTS {
        return Err(AuditError::TooLarge(size));
    }
    let operator = operator();
    let at = crate::core::time::now_rfc3339();
    let tx = store
        .conn_mut()
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let last: Option<(i64, String)> = tx
        .query_row(
            "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (seq, prev) = match last {
        Some((s, h)) => (s as u64 + 1, h),
        None => (0, GENESIS.to_string()),
    };
    let hash = record_hash(seq, &at, &operator, action, &inputs, &prev)?;
    tx.execute(
        "INSERT INTO audit_log (seq, at, operator, action, inputs, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            seq as i64,
            at,
            operator,
            action,
            inputs.to_string(),
            prev,
            hash
        ],
    )?;
    tx.commit()?;
    Ok(AuditRecord {
        seq,
        at,
        operator,
        action: action.to_string(),
        inputs,
        prev_hash: prev,
        hash,
    })
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRecord> {
    let inputs: String = r.get(4)?;
    Ok(AuditRecord {
        seq: r.get::<_, i64>(0)? as u64,
        at: r.get(1)?,
        operator: r.get(2)?,
        action: r.get(3)?,
        // A row whose inputs are not JSON keeps its text (verify then reports the break).
        inputs: serde_json::from_str(&inputs).unwrap_or(Value::String(inputs)),
        prev_hash: r.get(5)?,
        hash: r.get(6)?,
    })
}

/// The newest `limit` records, newest first.
pub fn recent(store: &Store, limit: u64) -> Result<Vec<AuditRecord>, AuditError> {
    let mut stmt = store.conn().prepare(
        "SELECT seq, at, operator, action, inputs, prev_hash, hash FROM audit_log
         ORDER BY seq DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit.min(i64::MAX as u64) as i64], row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Checks every record in order: consecutive positions from 0, each `prev` the previous hash,
/// each hash recomputed from the fields. Reads one row at a time.
pub fn verify(store: &Store) -> Result<AuditVerdict, AuditError> {
    let mut stmt = store.conn().prepare(
        "SELECT seq, at, operator, action, inputs, prev_hash, hash FROM audit_log ORDER BY seq",
    )?;
    let mut rows = stmt.query([])?;
    let mut prev = GENESIS.to_string();
    let mut expected_seq = 0u64;
    let mut first_break = None;
    let mut count = 0u64;
    while let Some(r) = rows.next()? {
        let rec = row(r)?;
        count += 1;
        if first_break.is_none() {
            let recomputed = record_hash(
                rec.seq,
                &rec.at,
                &rec.operator,
                &rec.action,
                &rec.inputs,
                &rec.prev_hash,
            )?;
            let reason = if rec.seq != expected_seq {
                Some(format!(
                    "record {expected_seq} is missing (the next one is {})",
                    rec.seq
                ))
            } else if rec.prev_hash != prev {
                Some(format!(
                    "its prev {} is not the previous record's hash {prev}",
                    rec.prev_hash
                ))
            } else if recomputed != rec.hash {
                Some(format!(
                    "its fields were changed: stored hash {}, recomputed {recomputed}",
                    rec.hash
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                first_break = Some(AuditBreak {
                    seq: rec.seq,
                    reason,
                });
            }
        }
        expected_seq = rec.seq + 1;
        prev = rec.hash;
    }
    Ok(AuditVerdict {
        ok: first_break.is_none(),
        records: count,
        head: (count > 0).then_some(prev),
        first_break,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_chain_and_an_edit_or_deletion_is_found() {
        let mut store = Store::open_in_memory().unwrap();
        let a = append(&mut store, "trust", json!({"key": "k1", "name": "alice"})).unwrap();
        let b = append(&mut store, "import", json!({"files": ["a.json"], "new": 6})).unwrap();
        append(&mut store, "cancel", json!({"envelope": "e-1"})).unwrap();
        assert_eq!((a.seq, b.seq), (0, 1));
        assert_eq!(a.prev_hash, GENESIS);
        assert_eq!(b.prev_hash, a.hash);
        let v = verify(&store).unwrap();
        assert!(v.ok && v.records == 3, "{v:?}");
        assert_eq!(recent(&store, 2).unwrap()[0].action, "cancel");

        store
            .conn()
            .execute(
                "UPDATE audit_log SET inputs = '{\"new\":60,\"files\":[\"a.json\"]}' WHERE seq = 1",
                [],
            )
            .unwrap();
        let v = verify(&store).unwrap();
        assert_eq!(v.first_break.as_ref().unwrap().seq, 1, "{v:?}");
        assert!(v.first_break.unwrap().reason.contains("changed"));

        let mut store = Store::open_in_memory().unwrap();
        for i in 0..3 {
            append(&mut store, "export", json!({ "n": i })).unwrap();
        }
        store
            .conn()
            .execute("DELETE FROM audit_log WHERE seq = 1", [])
            .unwrap();
        let v = verify(&store).unwrap();
        assert!(!v.ok);
        assert!(v.first_break.unwrap().reason.contains("missing"), "deleted");
    }
}
