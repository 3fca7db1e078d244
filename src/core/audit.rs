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
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::sql::{self, SqlRow};
use crate::core::store::StoreError;
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
    /// `replay`, `retry`, `cancel`, `export`, `notify-retry`, `wal-recover`, ...
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

const COLUMNS: &str = "seq, at, operator, action, inputs, prev_hash, hash";

/// Appends a record (one transaction, the log's writers serialized; the head is read inside it).
pub fn append(store: &dyn Backend, action: &str, inputs: Value) -> Result<AuditRecord, AuditError> {
    let size = canonical_text(&inputs)
        .map_err(|e| AuditError::Inputs(e.to_string()))?
        .len();
    if size > MAX_INPUTS {
        return Err(AuditError::TooLarge(size));
    }
    let operator = operator();
    let at = crate::core::time::now_rfc3339();
    let mut tx = store.begin(TxKind::Write)?;
    tx.lock_table("audit_log")?;
    let last = sql::query_opt(
        &mut *tx,
        "audit_log",
        "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1",
        &[],
    )?;
    let (seq, prev) = match last {
        Some(r) => (r.u64(0)? + 1, r.text(1)?),
        None => (0, GENESIS.to_string()),
    };
    let hash = record_hash(seq, &at, &operator, action, &inputs, &prev)?;
    sql::exec(
        &mut *tx,
        &format!("INSERT INTO audit_log ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
        &[
            seq.into(),
            (&at).into(),
            (&operator).into(),
            action.into(),
            inputs.to_string().into(),
            (&prev).into(),
            (&hash).into(),
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

fn record_of(r: &SqlRow) -> Result<AuditRecord, StoreError> {
    let inputs = r.text(4)?;
    Ok(AuditRecord {
        seq: r.u64(0)?,
        at: r.text(1)?,
        operator: r.text(2)?,
        action: r.text(3)?,
        // A row whose inputs are not JSON keeps its text (verify then reports the break).
        inputs: serde_json::from_str(&inputs).unwrap_or(Value::String(inputs)),
        prev_hash: r.text(5)?,
        hash: r.text(6)?,
    })
}

/// The newest `limit` records, newest first.
pub fn recent(store: &dyn Backend, limit: u64) -> Result<Vec<AuditRecord>, AuditError> {
    let mut tx = store.begin(TxKind::Read)?;
    let rows = sql::query(
        &mut *tx,
        "audit_log",
        &format!("SELECT {COLUMNS} FROM audit_log ORDER BY seq DESC LIMIT ?1"),
        &[limit.min(i64::MAX as u64).into()],
    )?;
    Ok(rows.iter().map(record_of).collect::<Result<_, _>>()?)
}

/// Records read per query by [`verify`].
const VERIFY_PAGE: u64 = 1024;

/// Checks every record in order: consecutive positions from 0, each `prev` the previous hash,
/// each hash recomputed from the fields. Reads a page of records at a time, in one read
/// transaction.
pub fn verify(store: &dyn Backend) -> Result<AuditVerdict, AuditError> {
    let mut tx = store.begin(TxKind::Read)?;
    let mut prev = GENESIS.to_string();
    let mut expected_seq = 0u64;
    let mut first_break = None;
    let mut count = 0u64;
    let mut from = 0u64;
    loop {
        let page = sql::query(
            &mut *tx,
            "audit_log",
            &format!("SELECT {COLUMNS} FROM audit_log WHERE seq >= ?1 ORDER BY seq LIMIT ?2"),
            &[from.into(), VERIFY_PAGE.into()],
        )?;
        for r in &page {
            let rec = record_of(r)?;
            count += 1;
            if first_break.is_none() {
                first_break = check_record(&rec, expected_seq, &prev)?;
            }
            expected_seq = rec.seq + 1;
            from = rec.seq.saturating_add(1);
            prev = rec.hash;
        }
        if (page.len() as u64) < VERIFY_PAGE {
            break;
        }
    }
    Ok(AuditVerdict {
        ok: first_break.is_none(),
        records: count,
        head: (count > 0).then_some(prev),
        first_break,
    })
}

/// Why `rec` does not follow a record whose hash is `prev` at position `expected_seq - 1`.
fn check_record(
    rec: &AuditRecord,
    expected_seq: u64,
    prev: &str,
) -> Result<Option<AuditBreak>, AuditError> {
    let recomputed = record_hash(
        rec.seq,
        &rec.at,
        &rec.operator,
        &rec.action,
        &rec.inputs,
        &rec.prev_hash,
    )?;
    let reason = if rec.seq != expected_seq {
        format!(
            "record {expected_seq} is missing (the next one is {})",
            rec.seq
        )
    } else if rec.prev_hash != prev {
        format!(
            "its prev {} is not the previous record's hash {prev}",
            rec.prev_hash
        )
    } else if recomputed != rec.hash {
        format!(
            "its fields were changed: stored hash {}, recomputed {recomputed}",
            rec.hash
        )
    } else {
        return Ok(None);
    };
    Ok(Some(AuditBreak {
        seq: rec.seq,
        reason,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::Store;

    #[test]
    fn records_chain_and_an_edit_or_deletion_is_found() {
        let store = Store::open_in_memory().unwrap();
        let a = append(&store, "trust", json!({"key": "k1", "name": "alice"})).unwrap();
        let b = append(&store, "import", json!({"files": ["a.json"], "new": 6})).unwrap();
        append(&store, "cancel", json!({"envelope": "e-1"})).unwrap();
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

        let store = Store::open_in_memory().unwrap();
        for i in 0..3 {
            append(&store, "export", json!({ "n": i })).unwrap();
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
