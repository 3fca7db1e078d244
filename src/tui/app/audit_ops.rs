//! Every state change the console makes is appended to the store's audit log
//! (`core::audit`), from the background task that made it, with what it changed.

use super::App;
use crate::core::import::ImportResult;
use crate::tui::screens::keys::KeyOp;
use crate::tui::screens::outbox::OutboxOp;
use crate::tui::store_ref::StoreRef;
use crate::tui::tasks::TaskMsg;
use serde_json::{json, Value};

/// Dropped entries listed one by one in an import's audit record (the count is always there).
const DROPPED_LISTED: usize = 100;

/// Appends one record; a failure is logged (the change itself already happened).
pub(super) fn record(db: &Option<StoreRef>, action: &str, inputs: Value) {
    let Some(db) = db else { return };
    let result = db.open_for_writing().and_then(|store| {
        crate::core::audit::append(&store, action, inputs).map_err(|e| e.to_string())
    });
    if let Err(e) = result {
        tracing::warn!(action, error = %e, "the change was not recorded in the audit log");
    }
}

/// What a keys operation records (a signature check changes nothing: `None`).
pub(super) fn key_op_record(op: &KeyOp) -> Option<(&'static str, Value)> {
    let path = |p: &std::path::Path| crate::text::visible_path(p);
    match op {
        KeyOp::Generate { name } => Some(("generate-key", json!({ "name": name }))),
        KeyOp::Trust { public_path, name } => Some((
            "trust",
            json!({ "name": name, "publicKeyFile": path(public_path) }),
        )),
        KeyOp::Untrust { name } => Some(("untrust", json!({ "name": name }))),
        KeyOp::Sign {
            bundle,
            private_path,
        } => Some((
            "sign",
            json!({ "bundle": path(bundle), "privateKeyFile": path(private_path) }),
        )),
        KeyOp::Check { .. } => None,
    }
}

/// What an outbox operation records.
pub(super) fn outbox_op_record(op: &OutboxOp, outbox: &std::path::Path) -> (&'static str, Value) {
    let outbox = crate::text::visible_path(outbox);
    match op {
        OutboxOp::Retry { id } => ("retry", json!({ "outbox": outbox, "envelope": id })),
        OutboxOp::Cancel { id } => ("cancel", json!({ "outbox": outbox, "envelope": id })),
        OutboxOp::Export { output } => (
            "export",
            json!({ "outbox": outbox, "output": crate::text::visible_path(output) }),
        ),
    }
}

/// What a dead letter's retry records: the delivery put back to pending.
pub(super) fn notify_retry_record(delivery: i64) -> (&'static str, Value) {
    ("notify-retry", json!({ "delivery": delivery }))
}

/// What a WAL recovery records when it changed the log (a torn tail cut and saved beside it); a
/// clean log or a refusal changes nothing: `None`.
pub(super) fn wal_recover_record(
    wal: &std::path::Path,
    r: &crate::core::wal::Recovery,
) -> Option<(&'static str, Value)> {
    let saved = r.saved_tail.as_ref()?;
    Some((
        "wal-recover",
        json!({
            "wal": crate::text::visible_path(wal),
            "offset": r.end,
            "cutBytes": r.cut_bytes,
            "validFrames": r.valid_frames,
            "savedTail": crate::text::visible_path(saved),
        }),
    ))
}

/// What an import records: the files, the totals and, for a forced one, what was dropped.
pub(super) fn import_record(force: bool, result: &ImportResult) -> (&'static str, Value) {
    let files: Vec<&str> = result.bundles.iter().map(|b| b.file.as_str()).collect();
    let dropped: Vec<Value> = result
        .dropped
        .iter()
        .take(DROPPED_LISTED)
        .map(|d| {
            json!({
                "file": d.origin.file, "node": d.origin.node_id, "index": d.origin.index,
                "jobId": d.origin.job_id, "reason": d.reason,
            })
        })
        .collect();
    (
        if force { "force-import" } else { "import" },
        json!({
            "files": files,
            "tenant": result.tenant_id,
            "status": format!("{:?}", result.status),
            "new": result.totals.new,
            "duplicates": result.totals.duplicates,
            "droppedCount": result.totals.dropped,
            "dropped": dropped,
        }),
    )
}

impl App {
    /// Reads the audit log for the Activity screen in the background.
    pub fn load_activity(&mut self) {
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.activity.error = Some(e);
                return;
            }
        };
        self.tasks.spawn(move |tx| {
            let load = crate::tui::screens::activity::load(&db);
            let _ = tx.send(TaskMsg::Activity(load));
        });
    }

    /// The store the audit log is written to (none with `--read-only`, which changes nothing).
    pub(super) fn audit_store(&self) -> Option<StoreRef> {
        self.db().ok().filter(|d| !d.read_only)
    }
}

impl App {
    pub(super) fn on_activity(
        &mut self,
        load: crate::tui::screens::activity::ActivityLoad,
    ) -> bool {
        self.activity.set(load);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit log keeps a path as it is shown everywhere else: a control character and a byte
    /// that is not UTF-8 as visible escapes, never U+FFFD (two names would read as one).
    #[cfg(unix)]
    #[test]
    fn an_outbox_record_names_its_paths_escaped() {
        use std::os::unix::ffi::OsStrExt;
        let outbox = std::path::Path::new(std::ffi::OsStr::from_bytes(b"o\x1b\xff.sqlite3"));
        let output = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"e\xfe.json"));
        let (action, record) = outbox_op_record(&OutboxOp::Export { output }, outbox);
        assert_eq!(action, "export");
        assert_eq!(record["outbox"], "o\\x1b\\xff.sqlite3");
        assert_eq!(record["output"], "e\\xfe.json");
    }
}
