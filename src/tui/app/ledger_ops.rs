//! The Ledger screen's background work: folding the workspace's WALs, comparing the first two,
//! reading the selected job's lanes. The screen asks (a request with a token); this runs the
//! engine's call on the task pool and hands the answer back (stale answers are dropped there).

use super::App;
use crate::tui::screens::ledger;
use crate::tui::tasks::TaskMsg;

impl App {
    /// Starts whatever the Ledger screen asked for since the last call.
    pub(super) fn pump_ledger(&mut self) {
        if let Some(r) = self.ledger.take_fold_request() {
            self.tasks.run(move || TaskMsg::LedgerFolded {
                token: r.token,
                folded: ledger::fold(&r.paths, &r.read),
            });
        }
        if let Some(r) = self.ledger.take_diff_request() {
            self.tasks.run(move || TaskMsg::LedgerDiffed {
                token: r.token,
                report: ledger::diff(&r.a, &r.b),
            });
        }
        if let Some(r) = self.ledger.take_lanes_request() {
            self.tasks.run(move || TaskMsg::LedgerLanes {
                token: r.token,
                lanes: crate::core::ledger::timeline::job_timeline(&r.paths, &r.job)
                    .unwrap_or_default(),
            });
        }
    }

    /// A fold arrived: show it, then read the (possibly new) selected job's lanes.
    pub(super) fn on_ledger_folded(&mut self, token: u64, folded: ledger::Folded) -> bool {
        let shown = self.ledger.set_fold(token, folded);
        if shown {
            self.pump_ledger();
        }
        shown
    }
}
