//! The WAL screen's operations: recover (confirmed first), opening a log from the Bundles screen.

use super::{App, PendingOp};
use crate::tui::action::{Action, ScreenId};
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::Path;

impl App {
    pub(super) fn wal_action(&mut self, a: Action) -> ControlFlow<bool> {
        if a != Action::RecoverWal {
            return ControlFlow::Continue(());
        }
        let Some(path) = self.wal.path().map(Path::to_path_buf) else {
            self.say(Level::Info, "no WAL open");
            return ControlFlow::Break(true);
        };
        let shown = crate::text::visible(&path.display().to_string()).into_owned();
        self.confirm(
            "Recover this WAL?",
            vec![
                shown,
                "A torn tail is copied beside the log (<log>.torn-at-OFFSET), then cut.".into(),
                "Damage followed by valid frames is refused; nothing is changed then.".into(),
                "No writer may have the log open.".into(),
            ],
            PendingOp::RecoverWal,
        );
        ControlFlow::Break(true)
    }

    /// Runs `core::wal::recover` (the same call as `airlock wal recover`) and re-indexes.
    pub(super) fn run_recover_wal(&mut self) {
        let Some(path) = self.wal.path().map(Path::to_path_buf) else {
            return;
        };
        match crate::core::wal::recover(&path) {
            Ok(r) => {
                let text = match &r.saved_tail {
                    Some(saved) => format!(
                        "cut {} torn bytes at offset {}; saved as {}",
                        r.cut_bytes.unwrap_or(0),
                        r.end,
                        crate::text::visible(&saved.display().to_string())
                    ),
                    None => format!("clean: {} frames, nothing changed", r.valid_frames),
                };
                self.say(Level::Info, text);
                self.wal.open(&path);
            }
            Err(e) => self.say(
                Level::Error,
                crate::text::visible(&e.to_string()).into_owned(),
            ),
        }
    }

    /// Opens a `.alwl` file on the WAL screen (Enter on the Bundles screen).
    pub(super) fn open_wal(&mut self, path: &Path) {
        self.wal.open(path);
        self.go(ScreenId::Wal);
    }
}
