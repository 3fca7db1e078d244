//! What PostgreSQL confirmed of a ledger (SPEC 12 and 14): per replicated level, the node WAL's LSN
//! up to which its events are stored at that level, and the PostgreSQL WAL position (`pg_lsn`) the
//! confirmation made durable.
//!
//! SPEC 11 pins the watermark frame's payload (`state u8 | lsn u64`), which has no room for the
//! PostgreSQL position, so it is kept beside it:
//! * in the ledger's applied state inside the WAL checkpoint (`state.confirmations`, written with the
//!   fold and the watermarks at each checkpoint);
//! * and, between checkpoints, in `<log>.confirmations.json` (written atomically after each
//!   confirmation, so a checkpoint taken by a later process still knows it).
//!
//! Both hold `{"REGIONAL": {"walLsn": N, "postgresLsn": "X/Y"}, "GLOBAL": {...}}`; a log opened
//! takes, per level, the record with the higher `walLsn`.

use super::LedgerError;
use crate::core::text::ShowPath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One level's latest confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfirmedMark {
    /// Every event of the node WAL with LSN <= this is stored in PostgreSQL at the level.
    pub wal_lsn: u64,
    /// PostgreSQL's WAL position (`X/Y`) durable at the level when the confirmation returned.
    pub postgres_lsn: String,
}

/// Per level name (`REGIONAL`, `GLOBAL`), the latest confirmation.
pub type Confirmations = BTreeMap<String, ConfirmedMark>;

/// The largest `<log>.confirmations.json` read (two small records).
const MAX_BYTES: u64 = 64 << 10;

/// `<log>.confirmations.json`.
pub fn confirmations_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".confirmations.json");
    log.with_file_name(name)
}

/// The confirmations recorded beside the log (none when the file does not exist).
pub fn load(log: &Path) -> Result<Confirmations, LedgerError> {
    use std::io::Read;
    let path = confirmations_path(log);
    let file = match crate::core::file_input::open_regular(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Confirmations::new()),
        Err(e) => return Err(LedgerError::io("open", &path, e)),
    };
    let mut text = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| LedgerError::io("read", &path, e))?;
    let bad = |message: String| {
        LedgerError::Usage(format!(
            "{}: {message}; it records PostgreSQL confirmations (docs/ledger.md): move it aside and confirm again",
            path.shown()
        ))
    };
    if text.len() as u64 > MAX_BYTES {
        return Err(bad(format!("larger than {MAX_BYTES} bytes")));
    }
    let marks: Confirmations = serde_json::from_slice(&text).map_err(|e| {
        // serde_json's message ends with the line and column.
        bad(format!("not a confirmations record: {e}"))
    })?;
    if let Some(level) = marks
        .keys()
        .find(|k| !matches!(k.as_str(), "REGIONAL" | "GLOBAL"))
    {
        return Err(bad(format!("unknown level {level:?} (REGIONAL or GLOBAL)")));
    }
    Ok(marks)
}

/// Writes the confirmations beside the log atomically (temp file, fsync, rename, fsync directory).
pub fn store(log: &Path, marks: &Confirmations) -> Result<(), LedgerError> {
    let path = confirmations_path(log);
    let mut text = serde_json::to_vec_pretty(marks)
        .map_err(|e| LedgerError::Usage(format!("confirmations cannot be serialised: {e}")))?;
    text.push(b'\n');
    crate::core::file_output::write_atomic(&path, &text)
        .map_err(|e| LedgerError::io("write", &path, e.source))
}

/// Takes, per level, the record of `other` where it covers more of the log.
pub fn merge(into: &mut Confirmations, other: Confirmations) {
    for (level, mark) in other {
        match into.get(&level) {
            Some(have) if have.wal_lsn >= mark.wal_lsn => {}
            _ => {
                into.insert(level, mark);
            }
        }
    }
}

/// The highest node WAL LSN confirmed at `level` or a stronger one (`GLOBAL` implies `REGIONAL`).
pub fn confirmed_up_to(marks: &Confirmations, level: &str) -> Option<u64> {
    let levels: &[&str] = match level {
        "REGIONAL" => &["REGIONAL", "GLOBAL"],
        _ => &["GLOBAL"],
    };
    levels
        .iter()
        .filter_map(|l| marks.get(*l).map(|m| m.wal_lsn))
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(wal_lsn: u64, pg: &str) -> ConfirmedMark {
        ConfirmedMark {
            wal_lsn,
            postgres_lsn: pg.into(),
        }
    }

    #[test]
    fn records_round_trip_merge_forward_and_refuse_damage() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("gate.alwl");
        assert!(load(&log).unwrap().is_empty());
        let mut marks = Confirmations::new();
        marks.insert("REGIONAL".into(), mark(5, "0/16B3D48"));
        store(&log, &marks).unwrap();
        assert_eq!(load(&log).unwrap(), marks);
        assert_eq!(
            std::fs::read_to_string(confirmations_path(&log)).unwrap(),
            "{\n  \"REGIONAL\": {\n    \"walLsn\": 5,\n    \"postgresLsn\": \"0/16B3D48\"\n  }\n}\n"
        );
        // Merge keeps the record covering more of the log, per level.
        let mut older = Confirmations::new();
        older.insert("REGIONAL".into(), mark(3, "0/100"));
        older.insert("GLOBAL".into(), mark(2, "0/90"));
        let mut m = marks.clone();
        merge(&mut m, older);
        assert_eq!(m["REGIONAL"], mark(5, "0/16B3D48"));
        assert_eq!(m["GLOBAL"], mark(2, "0/90"));
        assert_eq!(confirmed_up_to(&m, "REGIONAL"), Some(5));
        assert_eq!(confirmed_up_to(&m, "GLOBAL"), Some(2));
        m.insert("GLOBAL".into(), mark(9, "0/200"));
        assert_eq!(confirmed_up_to(&m, "REGIONAL"), Some(9));
        // Damage is an error naming the file, never a silent reset.
        std::fs::write(
            confirmations_path(&log),
            "{\"LOCAL\": {\"walLsn\": 1, \"postgresLsn\": \"0/1\"}}",
        )
        .unwrap();
        let e = load(&log).unwrap_err().to_string();
        assert!(
            e.contains("confirmations.json") && e.contains("LOCAL"),
            "{e}"
        );
        std::fs::write(confirmations_path(&log), "{").unwrap();
        assert!(load(&log).unwrap_err().to_string().contains("line 1"));
    }
}
