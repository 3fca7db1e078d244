//! The Merge screen: planning and importing in the background, the import confirmations.

use super::{App, PendingOp};
use crate::tui::action::{Action, ScreenId};
use crate::tui::screens::merge::{self as merge_screen, MergeState, MergeTab};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

impl App {
    /// Plans the import of `inputs` (the engine's `plan_import`) in the background. In inbox mode
    /// an input that is now refused (swapped for a link, FIFO, ... since it was chosen) is not
    /// read: the plan fails saying which ([`App::refused_inputs`]).
    ///
    /// A plan with `force` (`F`) is only for its confirmation: the shown plan and its lists stay
    /// (their `token` too, so a `/` search running over them goes on); it is dropped when another
    /// plan replaces the shown one, or another `F` follows, before it lands.
    pub fn start_plan(&mut self, inputs: Vec<PathBuf>, force: bool) {
        if force {
            self.merge.force_token += 1;
        } else {
            self.merge.token += 1;
        }
        if let Some(why) = self.refused_inputs(&inputs) {
            if !force {
                self.merge.inputs = inputs;
                self.merge.diff = None;
                self.merge.state = MergeState::Failed(why.clone());
            }
            self.say(Level::Error, format!("plan refused: {why}"));
            return;
        }
        let token = self.merge.token;
        let force_token = force.then_some(self.merge.force_token);
        let progress = Arc::new(crate::core::import::ImportProgress::default());
        if !force {
            self.merge.inputs = inputs.clone();
            self.merge.state = MergeState::Planning(progress.clone());
            self.merge.diff = None;
        }
        let db = self.db();
        let (trust, policy) = (self.trust.clone(), self.verify_policy());
        self.tasks.spawn(move |tx| {
            let result = db.and_then(|db| {
                let store = db.open()?;
                let opts = import_options(&trust, policy, force, progress);
                crate::core::import::plan_import(&store, &inputs, &opts)
                    .map(Box::new)
                    .map_err(|e| e.to_string())
            });
            let _ = tx.send(TaskMsg::Planned {
                token,
                force: force_token,
                result,
            });
        });
    }

    pub(super) fn start_import(&mut self, force: bool) {
        if let Some(why) = self.refused_inputs(&self.merge.inputs) {
            self.say(
                Level::Error,
                format!("import refused, nothing imported: {why}"),
            );
            return;
        }
        let progress = Arc::new(crate::core::import::ImportProgress::default());
        self.merge.importing = Some(progress.clone());
        let db = self.db();
        let (trust, policy) = (self.trust.clone(), self.verify_policy());
        let inputs = self.merge.inputs.clone();
        self.tasks.spawn(move |tx| {
            let result = db.and_then(|db| {
                let mut store = db.open_for_writing()?;
                let opts = import_options(&trust, policy, force, progress);
                let result = store
                    .import(&inputs, &opts)
                    .map(Box::new)
                    .map_err(|e| e.to_string())?;
                if result.status == crate::core::import::ImportStatus::Imported {
                    let (action, inputs) = super::audit_ops::import_record(force, &result);
                    super::audit_ops::record(&Some(db), action, inputs);
                }
                Ok(result)
            });
            let _ = tx.send(TaskMsg::Imported(result));
        });
    }

    /// The confirmation of a plain import: the plan's own summary lines.
    pub(super) fn confirm_import(&mut self) {
        let Some(plan) = self.merge.plan() else {
            self.say(
                Level::Info,
                "no plan yet: mark bundles on the Bundles screen (1) and press m",
            );
            return;
        };
        if let Err(why) = merge_screen::importable(plan) {
            self.say(Level::Warning, why);
            return;
        }
        let db = self.config.db_display();
        let mut lines = vec![format!("Import into the store {db}:")];
        lines.extend(
            crate::report_text::import_lines(plan, 0)
                .into_iter()
                .take(1 + plan.bundles.len() + 1),
        );
        lines.push("One transaction: all of it is written, or nothing.".into());
        self.confirm(
            "Import these bundles?",
            lines,
            PendingOp::Import { force: false },
        );
    }

    /// The confirmation of a forced import, from a plan made with `--force`: which entries of which
    /// broken logs are dropped; conflicts still refuse.
    pub(super) fn confirm_force(&mut self, plan: &crate::core::import::ImportPlan) {
        if !plan.conflicts.is_empty() {
            self.say(
                Level::Warning,
                format!(
                    "{} conflict(s) refuse the import even with --force: fix the producer",
                    plan.conflicts.len()
                ),
            );
            return;
        }
        if plan.status == crate::core::import::ImportStatus::NothingToDo {
            self.say(Level::Info, "nothing to import, even with --force");
            return;
        }
        let t = &plan.totals;
        let mut lines = vec![
            "With --force, each broken node log contributes only its verified prefix;".to_string(),
            "every entry after its first break is DROPPED (not imported):".to_string(),
        ];
        // Group the engine's dropped list per (file, node): first..last index and the reason.
        let mut groups: Vec<(String, String, u64, u64, usize, String)> = Vec::new();
        for d in &plan.dropped {
            match groups.last_mut() {
                Some(g) if g.0 == d.origin.file && g.1 == d.origin.node_id => {
                    g.3 = d.origin.index;
                    g.4 += 1;
                }
                _ => groups.push((
                    d.origin.file.clone(),
                    d.origin.node_id.clone(),
                    d.origin.index,
                    d.origin.index,
                    1,
                    d.reason.clone(),
                )),
            }
        }
        if groups.is_empty() {
            lines.push(
                "  (no entries: the findings are bundle-level, e.g. signature or manifest)".into(),
            );
        }
        for (file, node, from, to, n, reason) in groups.iter().take(8) {
            let name = std::path::Path::new(file)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.clone());
            lines.push(format!(
                "  {name} node {node}: entries {from}..={to} ({n}) — {}",
                crate::tui::widgets::clip(reason, 60)
            ));
        }
        if groups.len() > 8 {
            lines.push(format!("  … and {} more broken log(s)", groups.len() - 8));
        }
        lines.push(
            "Bundle-level findings (manifest digest, signature) are accepted as they are.".into(),
        );
        lines.push(format!(
            "Result: {} new, {} duplicate(s), {} dropped. Conflicts would still refuse the import.",
            t.new, t.duplicates, t.dropped
        ));
        self.say(Level::Info, "plan with --force ready: y imports, n cancels");
        self.confirm(
            "Force import (--force)?",
            lines,
            PendingOp::Import { force: true },
        );
    }

    /// The Merge screen's actions, and `m` on the Bundles screen (routed here by [`App::apply`]).
    pub(super) fn merge_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Open => {
                if self.merge.len_of(MergeTab::Conflicts) == 0 {
                    // No conflict, no diff: say so (and why, on a refused plan).
                    let text = match self.merge.refusal_note() {
                        Some(note) => format!("no conflict to diff ({note})"),
                        None if self.merge.plan().is_some() => {
                            "no conflict to diff: this plan has none".to_string()
                        }
                        None => "no plan yet: mark bundles on the Bundles screen (1) and press m"
                            .to_string(),
                    };
                    self.say(Level::Info, text);
                    return ControlFlow::Break(true);
                }
                if self.merge.current_tab() != MergeTab::Conflicts {
                    self.say(
                        Level::Info,
                        "Enter opens a conflict's payload diff (→ to the Conflicts list)",
                    );
                    return ControlFlow::Break(true);
                }
                self.merge.diff = Some(self.merge.selected);
                self.merge.scroll = 0;
            }
            Action::MergePreview => {
                let inputs = self.bundles.merge_inputs();
                if inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no bundle selected: Space marks bundles, m previews their merge",
                    );
                    return ControlFlow::Break(true);
                }
                self.merge.tab = 0;
                self.merge.selected = 0;
                self.merge.scroll = 0;
                self.start_plan(inputs, false);
                self.show(ScreenId::Merge);
            }
            Action::Replan => {
                if self.merge.inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no bundles chosen: mark them on the Bundles screen (1)",
                    );
                    return ControlFlow::Break(true);
                }
                let inputs = self.merge.inputs.clone();
                self.start_plan(inputs, false);
            }
            Action::Import => {
                if self.merge.is_busy() {
                    self.say(Level::Info, "wait for the running plan or import");
                    return ControlFlow::Break(true);
                }
                self.confirm_import();
            }
            Action::ForceImport => {
                if self.merge.is_busy() || self.merge.inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no finished plan to force: mark bundles and press m first",
                    );
                    return ControlFlow::Break(true);
                }
                self.say(Level::Info, "planning with --force…");
                let inputs = self.merge.inputs.clone();
                self.start_plan(inputs, true);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The engine's import options for the console: this machine's node id, the console's trust set
/// and verification policy ([`App::verify_policy`]), the default batch size; `force` is `--force`.
pub(super) fn import_options<'a>(
    trust: &'a crate::core::trust::TrustSet,
    policy: crate::core::verify::VerifyPolicy,
    force: bool,
    progress: Arc<crate::core::import::ImportProgress>,
) -> crate::core::import::ImportOptions<'a> {
    let mut opts = crate::core::import::ImportOptions::new(crate::core::paths::node_id(None));
    opts.force = force;
    opts.trust = Some(trust);
    opts.require_signature = policy.require_signature;
    opts.max_clock_skew = policy.max_clock_skew;
    opts.progress = Some(progress);
    // The merge preview stays bounded whatever the bundles' size (counts stay exact).
    opts.preview_window = Some(crate::core::import::PREVIEW_WINDOW);
    opts
}

impl App {
    pub(super) fn on_imported(
        &mut self,
        result: Result<Box<crate::core::import::ImportResult>, String>,
    ) -> bool {
        self.merge.importing = None;
        match result {
            Ok(r) => {
                let lines = crate::report_text::import_lines(&r, 0);
                let level = match r.status {
                    crate::core::import::ImportStatus::Imported => Level::Ok,
                    crate::core::import::ImportStatus::Refused => Level::Error,
                    _ => Level::Info,
                };
                self.say(level, lines.first().cloned().unwrap_or_default());
            }
            Err(e) => self.say(Level::Error, format!("import failed: {e}")),
        }
        // The store changed: plan again and reread the chains.
        let inputs = self.merge.inputs.clone();
        self.start_plan(inputs, false);
        self.merge.quiet = true;
        self.load_scheduler();
        self.refresh_import_states();
        true
    }

    /// In inbox mode, why some of `inputs` must not be read: the inbox lists them as refused, or
    /// they are no longer regular files (a link is never followed out of the inbox, a FIFO never
    /// opened). `None` when all may be read (always outside inbox mode).
    fn refused_inputs(&self, inputs: &[PathBuf]) -> Option<String> {
        self.drop_inbox.as_ref()?;
        let refused: Vec<String> = inputs
            .iter()
            .filter(|p| {
                let listed_refused = self
                    .bundles
                    .rows
                    .iter()
                    .any(|r| &r.path == *p && r.refused().is_some());
                let not_regular =
                    std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_file());
                listed_refused || not_regular
            })
            .map(|p| crate::text::visible_path(p))
            .collect();
        if refused.is_empty() {
            return None;
        }
        Some(format!(
            "{} {} no longer a regular file in the inbox (a link, FIFO, socket or device is \
             never opened); choose the bundles again on the Bundles screen (1)",
            refused.join(", "),
            if refused.len() == 1 { "is" } else { "are" }
        ))
    }

    pub(super) fn on_planned(
        &mut self,
        token: u64,
        force: Option<u64>,
        result: Result<Box<crate::core::import::ImportPlan>, String>,
    ) -> bool {
        if token != self.merge.token || force.is_some_and(|f| f != self.merge.force_token) {
            return false;
        }
        match (force.is_some(), result) {
            (false, Ok(mut plan)) => {
                self.merge.bound(&mut plan);
                self.merge.lines =
                    Arc::new(crate::report_text::import_lines(&plan, merge_screen::SHOW));
                let first = self.merge.lines.first().cloned().unwrap_or_default();
                let has_conflicts = !plan.conflicts.is_empty();
                self.merge.state = MergeState::Ready(Arc::from(plan));
                if !std::mem::take(&mut self.merge.quiet) {
                    self.say(
                        if has_conflicts {
                            Level::Warning
                        } else {
                            Level::Info
                        },
                        first,
                    );
                }
                if has_conflicts && self.merge.current_tab() == MergeTab::Plan {
                    self.merge.show_tab(MergeTab::Conflicts);
                }
            }
            (false, Err(e)) => {
                self.say(Level::Error, format!("plan failed: {e}"));
                self.merge.state = MergeState::Failed(e);
            }
            (true, Ok(plan)) => self.confirm_force(&plan),
            (true, Err(e)) => self.say(Level::Error, format!("plan failed: {e}")),
        }
        true
    }
}
