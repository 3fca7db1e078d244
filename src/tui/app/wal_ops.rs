//! The WAL screen's operations: recover (confirmed first, run in the background), opening a log
//! from the Bundles screen.

use super::{App, PendingOp};
use crate::tui::action::{Action, ScreenId};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

impl App {
    pub(super) fn wal_action(&mut self, a: Action) -> ControlFlow<bool> {
        if a != Action::RecoverWal {
            return ControlFlow::Continue(());
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
        self.tasks.run(move || {
            let result = crate::core::wal::recover_exclusive(&path).map_err(|e| e.to_string());
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

    /// Opens a `.alwl` file on the WAL screen (Enter on the Bundles screen).
    pub(super) fn open_wal(&mut self, path: &Path) {
        self.wal.open(path);
        self.go(ScreenId::Wal);
    }
}
