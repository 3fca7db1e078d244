//! `/` search with n/N on the Chain, Merge and Scheduler screens, and the palette's `goto`.

use super::App;
use crate::tui::action::{Action, ScreenId};
use crate::tui::search::{find, Goto, Hit};
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;

impl App {
    /// `/`, `n`, `N` on screens whose `n`/`N` mean search (Merge, Scheduler).
    pub(super) fn search_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Search => {
                self.overlay = Some(super::Overlay::Search {
                    input: self.search.clone().unwrap_or_default(),
                })
            }
            Action::SearchNext | Action::SearchPrev if self.search.is_none() => {
                self.say(Level::Info, "no search: / starts one");
            }
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// Moves to the next (or previous) row matching the active search, wrapping with a message.
    pub(super) fn search_step(&mut self, forward: bool) {
        let Some(term) = self.search.clone() else {
            return;
        };
        let (len, from) = self.search_span();
        let screen = self.current();
        let hit = find(len, from, forward, &term, |i| screen.search_row(i));
        let shown = crate::text::visible(&term).into_owned();
        match hit {
            Hit::Found { at, wrapped } => {
                self.search_select(at);
                let text = if wrapped {
                    format!(
                        "search {shown:?} wrapped to the {}",
                        if forward { "top" } else { "bottom" }
                    )
                } else {
                    format!("search {shown:?}: row {at}")
                };
                self.say(Level::Info, text);
            }
            Hit::None => self.say(Level::Warning, format!("no match for {shown:?}")),
            Hit::GaveUp { at } => {
                self.search_select(at);
                self.say(
                    Level::Info,
                    format!(
                        "no match for {shown:?} in the next {} rows; n continues from here",
                        crate::tui::search::SEARCH_LIMIT
                    ),
                );
            }
        }
    }

    /// The rows the search runs over on this screen and the cursor's row.
    fn search_span(&self) -> (usize, usize) {
        self.current().search_span()
    }

    fn search_select(&mut self, at: usize) {
        self.current_mut().search_select(at);
        if self.screen == ScreenId::Scheduler {
            self.pump_scheduler_page();
        }
    }

    /// `:goto seq N` (an entry position) or `:goto job ID` on Chain and Scheduler.
    pub(super) fn goto(&mut self, g: Goto) {
        match (self.screen, g) {
            (ScreenId::Chain | ScreenId::Scheduler, Goto::Seq(n)) => {
                let (len, _) = self.search_span();
                if (n as usize) >= len {
                    self.say(
                        Level::Warning,
                        format!("there is no position {n}: this list has {len} entries"),
                    );
                    return;
                }
                self.search_select(n as usize);
                self.say(Level::Info, format!("at position {n}"));
            }
            (ScreenId::Chain, Goto::Job(id)) => self.goto_chain_job(&id),
            (ScreenId::Scheduler, Goto::Job(id)) => self.start_find_job(id),
            _ => self.say(Level::Info, "goto works on the Chain and Scheduler screens"),
        }
    }

    /// Finds a jobId in every node log of the open bundle.
    fn goto_chain_job(&mut self, id: &str) {
        let Some(index) = self.chain.index() else {
            self.say(Level::Info, "no bundle open");
            return;
        };
        let found = (0..index.logs.len()).find_map(|log| {
            (0..index.logs[log].entries.len())
                .find(|&i| index.read_row(log, i).entry.job_id.to_lowercase() == id)
                .map(|i| (log, i))
        });
        match found {
            Some((log, i)) => {
                let d = log as isize - self.chain.log as isize;
                self.chain.switch_log(d);
                self.search_select(i);
                self.say(Level::Info, format!("job {id}: node log {log}, entry {i}"));
            }
            None => self.say(
                Level::Warning,
                format!("no entry with jobId {}", crate::text::visible(id)),
            ),
        }
    }
}
