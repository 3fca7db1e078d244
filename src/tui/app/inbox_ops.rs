//! Inbox mode (`airlock console --inbox DIR`): the watcher's pictures of the folder become Bundles
//! rows (NEW for arrivals, "copying…" until a file settles, then verified), and a decision
//! (import, reject, quarantine; asked first) files the selected file away with its triage report
//! (`core::inbox`), in the background.

use super::{App, PendingOp};
use crate::core::inbox::{self, Disposition, Evidence, FileStamp, FileState};
use crate::core::verify::Report;
use crate::tui::inbox_watch::{InboxPicture, InboxSettings, InboxWatch};
use crate::tui::screens::bundles::VerifyState;
use crate::tui::store_ref::StoreRef;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the verification found, owned (it goes to the background task).
enum Found {
    Verified(Box<Report>),
    NotBundle(String),
}

impl Found {
    fn evidence(&self) -> Evidence<'_> {
        match self {
            Found::Verified(r) => Evidence::Verified(r),
            Found::NotBundle(why) => Evidence::NotBundle(why),
        }
    }
}

impl App {
    /// Watches `settings.dir` as an inbox: the Bundles screen lists it from now on.
    pub fn watch_inbox(&mut self, settings: InboxSettings) -> Result<(), String> {
        let watch = InboxWatch::start(settings.clone(), self.tasks.sender())?;
        self.config.dir = settings.dir;
        // The list is the inbox's from now on; its first picture marks nothing NEW.
        self.bundles.rows.clear();
        self.bundles.marked.clear();
        self.bundles.listed_once = false;
        self.examine_queue.clear();
        self.bundles.inbox = Some(format!(
            "{} · settles after {:.1} s",
            watch.kind.label(),
            settings.settle.as_secs_f64()
        ));
        if let crate::tui::inbox_watch::WatchKind::Poll(why) = &watch.kind {
            self.say(Level::Info, format!("inbox: polling ({why})"));
        }
        self.drop_inbox = Some(watch);
        Ok(())
    }

    /// A new picture of the inbox: files that were not there before are NEW (after the first
    /// picture); files still copying wait; entries that are not regular files are listed as
    /// refused, never opened.
    pub(super) fn on_inbox_scanned(&mut self, result: Result<InboxPicture, String>) -> bool {
        let InboxPicture { files, refused } = match result {
            Ok(p) => p,
            Err(e) => return self.on_poll_failed(e),
        };
        let first = !self.bundles.listed_once;
        let known: HashSet<PathBuf> = self.bundles.rows.iter().map(|r| r.path.clone()).collect();
        let waiting: HashSet<PathBuf> = files
            .iter()
            .filter(|f| f.state == FileState::Copying)
            .map(|f| f.path.clone())
            .collect();
        let listed = files.into_iter().map(|f| (f.path, f.stamp)).collect();
        let changed = self.on_listed(listed, &waiting, refused);
        if !first {
            for r in &mut self.bundles.rows {
                if !known.contains(&r.path) && r.refused().is_none() {
                    r.new = true;
                }
            }
        }
        changed
    }

    /// The file was opened or decided: no longer NEW.
    pub(super) fn mark_seen(&mut self, path: &Path) {
        if let Some(r) = self.bundles.row_mut(path) {
            r.new = false;
        }
    }

    /// `i`, `x`, `Q` on Bundles in inbox mode: asks before filing the selected file away.
    pub(super) fn inbox_action(&mut self, d: Disposition) -> ControlFlow<bool> {
        if self.drop_inbox.is_none() {
            self.say(
                Level::Info,
                "inbox decisions need inbox mode: airlock console --inbox DIR",
            );
            return ControlFlow::Break(true);
        }
        let Some(row) = self.bundles.selected_row() else {
            self.say(Level::Info, "nothing selected");
            return ControlFlow::Break(true);
        };
        let name = crate::text::visible(&row.file_name()).into_owned();
        let verdict = match &row.verify {
            VerifyState::Done(_)
            | VerifyState::NotBundle(..)
            | VerifyState::Failed(_)
            | VerifyState::Wal(_) => row.state_label(&self.theme).0,
            VerifyState::Waiting => {
                self.say(
                    Level::Info,
                    format!("{name} is still being copied: decide once it is verified"),
                );
                return ControlFlow::Break(true);
            }
            VerifyState::Refused(kind, _) => {
                let kind = kind.word();
                self.say(
                    Level::Warning,
                    format!(
                        "{name} is refused ({kind}): it is never opened, moved or filed; remove \
                         it from the inbox (Enter says why)"
                    ),
                );
                return ControlFlow::Break(true);
            }
            VerifyState::Pending | VerifyState::Running(_) => {
                self.say(
                    Level::Info,
                    format!("{name} is being verified: decide once it is done"),
                );
                return ControlFlow::Break(true);
            }
        };
        if d == Disposition::Import && !row.is_bundle() {
            self.say(
                Level::Warning,
                format!("{name} is not a bundle: it can only be rejected (x) or quarantined (Q)"),
            );
            return ControlFlow::Break(true);
        }
        let (path, stamp) = (row.path.clone(), row.stamp);
        let lines = self.decision_lines(d, &path, &verdict);
        let title = match d {
            Disposition::Import => "Import and file to done/?",
            Disposition::Reject => "Reject to rejected/?",
            Disposition::Quarantine => "Quarantine to quarantine/?",
        };
        self.confirm(
            title,
            lines,
            PendingOp::Inbox {
                path,
                stamp,
                disposition: d,
            },
        );
        ControlFlow::Break(true)
    }

    fn decision_lines(&self, d: Disposition, file: &Path, verdict: &str) -> Vec<String> {
        let folder = d.folder();
        let file_name = file.file_name().unwrap_or_default();
        let name = crate::text::visible_path(Path::new(file_name));
        let (json, md) = inbox::report_names(file_name);
        let (json, md) = (
            crate::text::visible_path(Path::new(&json)),
            crate::text::visible_path(Path::new(&md)),
        );
        let mut lines = vec![format!("{name}: {verdict}")];
        if d == Disposition::Import {
            let db = self.config.db_display();
            lines.push(format!(
                "Import it into the store {db} (one transaction), then move it to {folder}/."
            ));
            lines.push("A refused import (findings, conflicts) leaves it in the inbox.".into());
        } else {
            lines.push(format!("Move it to {folder}/ in the inbox."));
        }
        lines.push("Its triage report goes beside it (signed when there is a local key):".into());
        lines.push(format!("  {json} and {md}"));
        lines.push(format!(
            "A name already taken in {folder}/ gets a suffix; nothing is replaced."
        ));
        lines
    }

    /// Carries out a confirmed decision in the background: the import first (for `import`), then
    /// the move with the report.
    pub(super) fn start_filing(&mut self, path: PathBuf, stamp: FileStamp, d: Disposition) {
        let found = match self.bundles.rows.iter().find(|r| r.path == path) {
            Some(r) if r.stamp != stamp => None,
            Some(r) => match &r.verify {
                VerifyState::Done(report) => Some(Found::Verified(report.clone())),
                VerifyState::NotBundle(why, _) | VerifyState::Failed(why) => {
                    Some(Found::NotBundle(why.clone()))
                }
                VerifyState::Wal(_) => Some(Found::NotBundle(
                    "a node write-ahead log (.alwl), not a bundle".into(),
                )),
                _ => None,
            },
            None => None,
        };
        let Some(found) = found else {
            self.say(
                Level::Warning,
                "the file changed or went away since it was verified: nothing was done",
            );
            return;
        };
        self.mark_seen(&path);
        let db = self.db();
        let audit_db = db.clone().ok();
        let (trust, policy) = (self.trust.clone(), self.verify_policy());
        let keys_dir = self.config.keys_dir.clone();
        let dir = self.config.dir.clone();
        self.tasks.spawn(move |tx| {
            let mut warnings = Vec::new();
            let result = (|| {
                let note = match d {
                    Disposition::Import => import_one(db?, &trust, policy, &path)?,
                    _ => String::new(),
                };
                let report = inbox::triage_report(&path, found.evidence(), d, &note);
                let signer = crate::core::trust::report_signer(&keys_dir);
                warnings = signer.warnings;
                let key = signer.key.as_ref();
                let filed =
                    inbox::file_away(&dir, &path, stamp, d, &report, key).map_err(|e| match d {
                        Disposition::Import => {
                            format!("{note}, but the file was not moved: {e}")
                        }
                        _ => e.to_string(),
                    })?;
                let shown = |p: &Path| crate::text::visible_path(p);
                super::audit_ops::record(
                    &audit_db,
                    "inbox-file",
                    serde_json::json!({
                        "file": shown(&path), "decision": d.word(), "to": shown(&filed.file),
                        "report": shown(&filed.json), "note": note,
                    }),
                );
                Ok((filed, note))
            })();
            let _ = tx.send(TaskMsg::InboxFiled {
                path,
                result,
                warnings,
            });
        });
    }

    pub(super) fn on_inbox_filed(
        &mut self,
        path: PathBuf,
        result: Result<(inbox::Filed, String), String>,
        warnings: Vec<String>,
    ) -> bool {
        let name = crate::text::visible_path(Path::new(path.file_name().unwrap_or_default()));
        match result {
            Ok((filed, note)) => {
                let to = crate::text::visible_path(&filed.file);
                let signed = match &filed.signed_by {
                    Some(_) => "signed report",
                    None if warnings.is_empty() => "unsigned report (no local key)",
                    None => "unsigned report",
                };
                let done = if note.is_empty() {
                    String::new()
                } else {
                    format!("{note}; ")
                };
                let text = format!("{done}filed to {to} with its {signed}");
                match super::triage_ops::with_warnings(&warnings, &text) {
                    Some(text) => self.say(Level::Warning, text),
                    None => self.say(Level::Ok, text),
                }
                self.refresh_import_states();
            }
            Err(e) => {
                let text = format!("{}: {e}", crate::text::visible(&name));
                let text = super::triage_ops::with_warnings(&warnings, &text).unwrap_or(text);
                self.say(Level::Error, text)
            }
        }
        if let Some(w) = &self.drop_inbox {
            w.rescan();
        }
        true
    }
}

/// Imports one bundle (as the Merge preview's import does, recorded in the audit log); the
/// summary for the report, or why it was not imported.
fn import_one(
    db: StoreRef,
    trust: &crate::core::trust::TrustSet,
    policy: crate::core::verify::VerifyPolicy,
    path: &Path,
) -> Result<String, String> {
    use crate::core::import::ImportStatus;
    let mut store = db.open_for_writing()?;
    let progress = Arc::new(crate::core::import::ImportProgress::default());
    let opts = super::merge_ops::import_options(trust, policy, false, progress);
    let result = store
        .import(&[path.to_path_buf()], &opts)
        .map_err(|e| e.to_string())?;
    match result.status {
        ImportStatus::Imported => {
            let (action, inputs) = super::audit_ops::import_record(false, &result);
            super::audit_ops::record(&Some(db), action, inputs);
            Ok(format!(
                "imported: {} new, {} duplicate(s)",
                result.totals.new, result.totals.duplicates
            ))
        }
        ImportStatus::NothingToDo => Ok("already in the store: nothing new to import".into()),
        _ => Err(crate::report_text::import_lines(&result, 0)
            .first()
            .cloned()
            .map(|l| format!("{l}; the file stays in the inbox (reject or quarantine it)"))
            .unwrap_or_else(|| "import refused; the file stays in the inbox".into())),
    }
}
