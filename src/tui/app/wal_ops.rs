//! The WAL screen's operations: recover (confirmed first, run in the background), opening a log
//! from the Bundles screen.

use super::{App, PendingOp};
use crate::tui::action::{Action, ScreenId};
use crate::tui::screens::bundles::VerifyState;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

impl App {
    pub(super) fn wal_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Open => return self.open_picked_wal(),
            Action::PickWal => {
                self.wal.picking = true;
                self.refresh_wal_choices();
                if let Some(p) = self.wal.path().map(Path::to_path_buf) {
                    self.wal.picker.select_path(&p);
                }
                return ControlFlow::Break(true);
            }
            Action::RecoverWal => {}
            _ => return ControlFlow::Continue(()),
        }
        if self.wal.picker_shown() {
            let text = if self.wal.index.is_some() {
                "the list of WAL files is shown: Esc goes back to the open log, then R recovers it"
            } else {
                "no WAL open: Enter opens the selected one"
            };
            self.say(Level::Info, text);
            return ControlFlow::Break(true);
        }
        let Some(path) = self.wal.path().map(Path::to_path_buf) else {
            self.say(Level::Info, "no WAL open");
            return ControlFlow::Break(true);
        };
        if self.wal.recovering {
            self.say(Level::Info, "a recovery of this WAL is already running");
            return ControlFlow::Break(true);
        }
        let lines = vec![
            crate::text::visible_path(&path),
            "A torn tail is copied beside the log (<log>.torn-at-OFFSET), then cut.".into(),
            "Damage followed by valid frames is refused; nothing is changed then.".into(),
            "No writer may have the log open.".into(),
            // What the screen's reading found, as recovery would act on it now.
            self.wal.recovery_preview(),
        ];
        self.confirm("Recover this WAL?", lines, PendingOp::RecoverWal);
        ControlFlow::Break(true)
    }

    /// Runs `core::wal::recover` (the same call as `airlock wal recover`) in the background: it
    /// reads the whole log, which may be gigabytes. The answer re-indexes the log.
    pub(super) fn run_recover_wal(&mut self) {
        let Some(path) = self.wal.path().map(Path::to_path_buf) else {
            return;
        };
        self.wal.recovering = true;
        self.say(
            Level::Info,
            format!(
                "recovering {} in the background…",
                crate::text::visible_path(&path)
            ),
        );
        let audit = self.audit_store();
        self.tasks.run(move || {
            let result = crate::core::wal::recover_exclusive(&path).map_err(|e| e.to_string());
            if let Some((action, inputs)) = result
                .as_ref()
                .ok()
                .and_then(|r| super::audit_ops::wal_recover_record(&path, r))
            {
                super::audit_ops::record(&audit, action, inputs);
            }
            TaskMsg::WalRecovered { path, result }
        });
    }

    /// A recovery finished: say what it cut and where it saved it (or why it refused), and
    /// index the log again.
    pub(super) fn on_wal_recovered(
        &mut self,
        path: PathBuf,
        result: Result<crate::core::wal::Recovery, String>,
    ) -> bool {
        self.wal.recovering = false;
        match result {
            Ok(r) => {
                let text = match &r.saved_tail {
                    Some(saved) => format!(
                        "cut {} at offset {}; saved as {}",
                        crate::format::plural(r.cut_bytes.unwrap_or(0), "torn byte"),
                        r.end,
                        crate::text::visible_path(saved)
                    ),
                    None => format!(
                        "clean: {}, nothing changed",
                        crate::format::plural(r.valid_frames, "frame")
                    ),
                };
                self.say(Level::Info, text);
                if self.wal.path() == Some(path.as_path()) {
                    self.wal.open(&path);
                }
            }
            Err(e) => self.say(Level::Error, crate::text::visible(&e).into_owned()),
        }
        true
    }

    /// Enter on the list of the workspace's logs: opens the selected one.
    fn open_picked_wal(&mut self) -> ControlFlow<bool> {
        if !self.wal.picker_shown() {
            return ControlFlow::Break(false);
        }
        match self.wal.picker.selected_path().map(Path::to_path_buf) {
            Some(path) => self.wal.open(&path),
            None => self.say(Level::Info, "no WAL file in the workspace to open"),
        }
        ControlFlow::Break(true)
    }

    /// The logs the Bundles screen found in the workspace (and examined), for the WAL screen's
    /// list; entries the workspace refuses (a link named `x.alwl`, a FIFO) are not offered.
    pub(super) fn refresh_wal_choices(&mut self) {
        let choices = self
            .bundles
            .rows
            .iter()
            .filter(|r| crate::core::wal::is_wal_path(&r.path) && r.refused().is_none())
            .map(|r| crate::tui::screens::wal_picker::WalChoice {
                path: r.path.clone(),
                name: r.file_name(),
                size: r.stamp.size,
                state: r.state_label(&self.theme),
                frames: match &r.verify {
                    VerifyState::Wal(Ok(rec)) => {
                        let frames = crate::format::plural(rec.valid_frames, "frame");
                        match rec.offset {
                            None => frames,
                            Some(x) => format!("{frames}, stops at {x}"),
                        }
                    }
                    VerifyState::Wal(Err(e)) => crate::text::visible(e).into_owned(),
                    _ => String::new(),
                },
            })
            .collect();
        self.wal.picker.set_choices(&self.config.dir, choices);
    }

    /// Opens a `.alwl` file on the WAL screen (Enter on the Bundles screen).
    pub(super) fn open_wal(&mut self, path: &Path) {
        self.wal.open(path);
        self.go(ScreenId::Wal);
    }
}
