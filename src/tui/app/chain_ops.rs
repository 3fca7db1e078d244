//! The Chain screen: indexing a bundle in the background, its actions.

use super::App;
use crate::core::bundle::index::ChainIndex;
use crate::core::verify::VerifyOptions;
use crate::tui::action::{Action, ScreenId};
use crate::tui::screens::chain::{ChainScreen, ChainState};
use crate::tui::tasks::{stamp_of, TaskMsg};
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

impl App {
    /// Opens a bundle in the chain screen; indexing runs in the background.
    pub fn open_chain(&mut self, path: PathBuf) {
        self.chain_token += 1;
        // The Bundles screen's pass already indexed it (and the file did not change since).
        let kept = self
            .bundles
            .rows
            .iter()
            .find(|r| r.path == path && r.stamp == stamp_of(&path))
            .and_then(|r| r.index.clone());
        if let Some(index) = kept {
            self.chain = ChainScreen::default();
            self.chain_queue.clear();
            self.show(ScreenId::Chain);
            self.chain_ready(index);
            return;
        }
        let token = self.chain_token;
        let read = Arc::new(AtomicU64::new(0));
        let total = stamp_of(&path).size;
        self.chain = ChainScreen::loading(path.clone(), read.clone(), total);
        self.chain_queue.clear();
        self.show(ScreenId::Chain);
        let (trust, policy) = (self.trust.clone(), self.verify_policy());
        self.tasks.spawn(move |tx| {
            let opts = VerifyOptions::under(&trust, policy);
            let result = ChainIndex::build(&path, &opts, Some(read))
                .map(Box::new)
                .map_err(|e| e.to_string());
            let _ = tx.send(TaskMsg::Indexed { token, result });
        });
    }

    /// Shows a ready index: at its first finding when it has one, then runs the keys typed
    /// while it was being indexed.
    pub(super) fn chain_ready(&mut self, index: Arc<ChainIndex>) {
        let n = index.entry_count();
        let f = index.report.findings.len();
        self.chain.set_ready(index.clone());
        if f > 0 {
            self.chain.first_finding();
        }
        self.land_chain(&index);
        self.say(
            if f == 0 { Level::Ok } else { Level::Warning },
            format!(
                "indexed {}: {}",
                crate::format::count(n as u64, "entry", "entries"),
                if f == 0 {
                    "no findings".to_string()
                } else {
                    format!(
                        "{}, showing the first; n/N move between them",
                        crate::format::plural(f as u64, "finding")
                    )
                }
            ),
        );
        self.run_chain_queue();
    }

    /// The Chain screen's actions (routed here by [`App::apply`]).
    pub(super) fn chain_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::NextFinding | Action::PrevFinding if self.search.is_some() => {
                self.search_step(a == Action::NextFinding)
            }
            Action::NextFinding | Action::PrevFinding | Action::FirstFinding => {
                let forward = a != Action::PrevFinding;
                let hit = if a == Action::FirstFinding {
                    self.chain.first_finding()
                } else {
                    self.chain.jump_finding(forward)
                };
                match hit {
                    Some((log, idx)) => {
                        let n = self.chain.finding_cursor.map(|c| c + 1).unwrap_or(0);
                        let node = self
                            .chain
                            .index()
                            .and_then(|i| i.logs.get(log))
                            .map(|l| crate::text::visible(&l.node_id).into_owned())
                            .unwrap_or_default();
                        self.say(
                            Level::Info,
                            format!("finding {n}: node {node}, entry {idx}"),
                        );
                    }
                    None if self.chain.finding_count() == 0 => {
                        self.say(Level::Ok, "no findings in this bundle")
                    }
                    None => self.say(
                        Level::Info,
                        if forward {
                            "no finding after this entry (N goes back)"
                        } else {
                            "no finding before this entry (n goes forward)"
                        },
                    ),
                }
            }
            Action::PrevNode => self.chain.switch_log(-1),
            Action::NextNode => self.chain.switch_log(1),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl App {
    pub(super) fn on_indexed(
        &mut self,
        token: u64,
        result: Result<Box<ChainIndex>, String>,
    ) -> bool {
        if token != self.chain_token {
            return false;
        }
        match result {
            Ok(index) => self.chain_ready(std::sync::Arc::from(index)),
            Err(error) => {
                let path = self.chain.path().cloned().unwrap_or_default();
                self.say(Level::Error, format!("cannot open the bundle: {error}"));
                self.chain.state = ChainState::Failed { path, error };
                self.chain_queue.clear();
            }
        }
        true
    }
}
