//! `y` copy, `P` write the shown inclusion proof, `S` snapshot the tenant chain.

use super::{App, PendingOp};
use crate::tui::action::Action;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;

impl App {
    pub(super) fn copy_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Copy => self.copy_selected(),
            Action::WriteProof => self.write_proof(),
            Action::Snapshot => {
                let Some(t) = self.scheduler.current() else {
                    self.say(Level::Info, "no tenant chain shown");
                    return ControlFlow::Break(true);
                };
                if t.unsnapshotted == 0 {
                    self.say(Level::Info, "every entry is in a snapshot already");
                    return ControlFlow::Break(true);
                }
                let tenant = t.tenant.clone();
                self.confirm(
                    "Snapshot the tenant chain?",
                    vec![
                        format!(
                            "Snapshot tenant {}: {} entr(ies) not in a snapshot yet,",
                            crate::text::visible(&tenant),
                            t.unsnapshotted
                        ),
                        format!(
                            "one Merkle root per batch of {} (unsigned from the console;",
                            crate::core::store::scheduler::DEFAULT_BATCH_SIZE
                        ),
                        "`airlock chain snapshot --sign` signs).".into(),
                    ],
                    PendingOp::Snapshot { tenant },
                );
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// What `y` copies on this screen: (what it is, the value).
    pub fn copy_value(&self) -> Option<(&'static str, String)> {
        self.current().copy_value()
    }

    fn copy_selected(&mut self) {
        let Some((what, value)) = self.copy_value() else {
            self.say(Level::Info, "nothing selected to copy");
            return;
        };
        let file = self.clipboard_file.clone();
        let shown = crate::text::visible_path(&file);
        // --read-only writes nothing: the terminal's clipboard only.
        if self.config.read_only {
            self.say(
                Level::Info,
                format!(
                    "copied the {what} via OSC 52 (terminal clipboard); read-only: {shown} was not \
                     written; run without --read-only to also get the value in that file"
                ),
            );
            self.osc52 = Some(value);
            return;
        }
        match crate::tui::copy::write_fallback(&file, &value) {
            Ok(()) => self.say(
                Level::Ok,
                format!("copied the {what} (terminal clipboard via OSC 52; also in {shown})"),
            ),
            Err(e) => self.say(
                Level::Warning,
                format!("copied the {what} via OSC 52 only; {shown}: {e}"),
            ),
        }
        self.osc52 = Some(value);
    }

    /// Writes the inclusion proof on screen beside the store, for `chain verify-proof`.
    fn write_proof(&mut self) {
        if self.refuse_read_only_write(Action::WriteProof) {
            return;
        }
        let Some(Ok(crate::tui::screens::scheduler::CheckedProof { proof, .. })) =
            self.scheduler.proof.as_ref().map(|p| &p.result)
        else {
            self.say(
                Level::Info,
                "no proof shown: p proves the selected job first",
            );
            return;
        };
        let dir = self
            .config
            .db
            .as_ref()
            .and_then(|d| d.parent().map(|p| p.to_path_buf()))
            .unwrap_or_else(|| ".".into());
        let name = format!(
            "proof-{}-{}.json",
            crate::core::time::now_rfc3339().replace([':', '.'], "-"),
            proof.entry.seq
        );
        let path = dir.join(name);
        let shown = crate::text::visible_path(&path);
        let written = serde_json::to_vec_pretty(proof)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                crate::core::file_output::write_atomic(&path, &b).map_err(|e| e.to_string())
            });
        match written {
            Ok(()) => self.say(
                Level::Ok,
                format!("proof written to {shown}: airlock chain verify-proof {shown}"),
            ),
            Err(e) => self.say(Level::Error, format!("cannot write {shown}: {e}")),
        }
    }

    pub(super) fn start_snapshot(&mut self, tenant: String) {
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.say(Level::Error, e);
                return;
            }
        };
        let audit = Some(db.clone());
        self.tasks.spawn(move |tx| {
            let result = db.open_for_writing().and_then(|store| {
                crate::core::store::rules::snapshot_now(
                    &store,
                    &tenant,
                    crate::core::store::scheduler::DEFAULT_BATCH_SIZE,
                    None,
                )
                .map_err(|e| e.to_string())
            });
            if let Ok(snaps) = &result {
                let roots: Vec<&str> = snaps.iter().map(|s| s.merkle_root.as_str()).collect();
                super::audit_ops::record(
                    &audit,
                    "snapshot",
                    serde_json::json!({ "tenant": tenant, "merkleRoots": roots }),
                );
            }
            let msg = result.map(|snaps| {
                format!(
                    "{} snapshot(s) of tenant {} written",
                    snaps.len(),
                    crate::text::visible(&tenant)
                )
            });
            let _ = tx.send(TaskMsg::Scheduler(
                crate::tui::screens::scheduler::SchedMsg::Snapshotted(msg),
            ));
        });
    }
}
