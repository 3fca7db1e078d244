//! Background results: [`App::handle_msg`] applies one [`TaskMsg`] to the screens.

use super::App;
use crate::core::bundle::catalog::ListingKind;
use crate::tui::screens::bundles::VerifyState;
use crate::tui::screens::chain::ChainState;
use crate::tui::screens::merge::{self as merge_screen, MergeState, MergeTab};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;

impl App {
    /// Applies one background result; true when the screen must be redrawn.
    pub fn handle_msg(&mut self, msg: TaskMsg) -> bool {
        match msg {
            TaskMsg::Polled(Ok(files)) => {
                self.polling = false;
                self.on_polled(files)
            }
            TaskMsg::Polled(Err(e)) => {
                self.polling = false;
                let changed = self.bundles.dir_error.as_deref() != Some(e.as_str());
                self.bundles.dir_error = Some(e);
                self.bundles.listed_once = true;
                changed
            }
            TaskMsg::Examined {
                path,
                stamp,
                listing,
                index,
            } => self.on_examined(path, stamp, listing, index),
            TaskMsg::OutboxLoaded(result) => {
                self.outbox.loaded = true;
                match result {
                    Ok((counts, list)) => {
                        self.outbox.error = None;
                        self.outbox.counts = Some(counts);
                        self.outbox.set_envelopes(list);
                    }
                    Err(e) => self.outbox.error = Some(e),
                }
                true
            }
            TaskMsg::OutboxOpDone(result) => {
                match result {
                    Ok(text) => self.say(Level::Ok, text),
                    Err(e) => self.say(Level::Error, e),
                }
                self.load_outbox();
                true
            }
            TaskMsg::ReplayDone(result) => {
                self.outbox.replay = None;
                match result {
                    Ok(s) => {
                        let c = &s.counts;
                        self.say(
                            if s.is_clean() { Level::Ok } else { Level::Warning },
                            format!(
                                "replay done in {} ms: {} sent, ✓ {} delivered, ≠ {} conflict, ✗ {} failed, ◔ {} still queued{}",
                                s.elapsed_ms,
                                c.attempted,
                                c.delivered,
                                c.conflict,
                                c.failed,
                                c.still_queued,
                                s.stopped_early
                                    .as_deref()
                                    .map(|w| format!(" (stopped early: {w})"))
                                    .unwrap_or_default()
                            ),
                        );
                    }
                    Err(e) => self.say(Level::Error, format!("replay failed: {e}")),
                }
                self.load_outbox();
                true
            }
            TaskMsg::KeyOpDone(result) => {
                match result {
                    Ok((text, trust_changed)) => {
                        if trust_changed {
                            self.reload_trust();
                        }
                        self.say(Level::Ok, text);
                    }
                    Err(e) => self.say(Level::Error, e),
                }
                self.keys
                    .reload(&self.config.keys_dir, &self.config.trust_store);
                true
            }
            TaskMsg::Scheduler(m) => self.on_scheduler(m),
            TaskMsg::Planned {
                token,
                force,
                result,
            } => self.on_planned(token, force, result),
            TaskMsg::Imported(result) => {
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
                true
            }
            TaskMsg::Indexed { token, result } => {
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
    }

    fn on_examined(
        &mut self,
        path: std::path::PathBuf,
        stamp: crate::tui::tasks::FileStamp,
        listing: crate::core::bundle::catalog::Listing,
        index: Option<Box<crate::core::bundle::index::ChainIndex>>,
    ) -> bool {
        self.examining = self.examining.saturating_sub(1);
        let budget = self.index_budget();
        if let Some(row) = self
            .bundles
            .rows
            .iter_mut()
            .find(|r| r.path == path && r.stamp == stamp)
        {
            row.verify = match (&listing.kind, &index) {
                (ListingKind::NotBundle { reason, cause }, _) => {
                    VerifyState::NotBundle(reason.clone(), *cause)
                }
                (_, Some(ix)) => VerifyState::Done(Box::new(ix.report.clone())),
                (_, None) => VerifyState::Failed("not indexed".into()),
            };
            row.listing = Some(listing);
            // Kept for the Chain screen (no second read) while within the budget.
            row.index = index
                .filter(|ix| ix.entry_count() <= budget)
                .map(std::sync::Arc::from);
        }
        self.pump_examine();
        true
    }

    fn on_planned(
        &mut self,
        token: u64,
        force: bool,
        result: Result<Box<crate::core::import::ImportPlan>, String>,
    ) -> bool {
        if token != self.merge.token {
            return false;
        }
        match (force, result) {
            (false, Ok(mut plan)) => {
                self.merge.bound(&mut plan);
                self.merge.lines = crate::report_text::import_lines(&plan, merge_screen::SHOW);
                let first = self.merge.lines.first().cloned().unwrap_or_default();
                let has_conflicts = !plan.conflicts.is_empty();
                self.merge.state = MergeState::Ready(plan);
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
