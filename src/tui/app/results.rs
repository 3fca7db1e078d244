//! Background results: [`App::handle_msg`] hands each [`TaskMsg`] to the `on_*` method beside
//! the code that spawned the work (`bundles_ops`, `outbox_ops`, `merge_ops`, ...).

use super::App;
use crate::tui::tasks::TaskMsg;

impl App {
    /// Applies one background result; true when the screen must be redrawn.
    pub fn handle_msg(&mut self, msg: TaskMsg) -> bool {
        match msg {
            TaskMsg::Polled(result) => {
                self.polling = false;
                match result {
                    Ok(files) => self.on_polled(files),
                    Err(e) => self.on_poll_failed(e),
                }
            }
            TaskMsg::Examined {
                path,
                stamp,
                listing,
                index,
            } => self.on_examined(path, stamp, listing, index),
            TaskMsg::OutboxLoaded(result) => self.on_outbox_loaded(result),
            TaskMsg::OutboxOpDone(result) => self.on_outbox_op_done(result),
            TaskMsg::ReplayDone(result) => self.on_replay_done(result),
            TaskMsg::KeyOpDone(result) => self.on_key_op_done(result),
            TaskMsg::Scheduler(m) => self.on_scheduler(m),
            TaskMsg::Activity(load) => self.on_activity(load),
            TaskMsg::Planned {
                token,
                force,
                result,
            } => self.on_planned(token, force, result),
            TaskMsg::Imported(result) => self.on_imported(result),
            TaskMsg::Indexed { token, result } => self.on_indexed(token, result),
            TaskMsg::Located { token, at } => self.on_located(token, at),
            TaskMsg::Scanned { token, event } => self.on_scanned(token, event),
            TaskMsg::ImportStates(result) => self.on_import_states(result),
            TaskMsg::TriageWritten { result, warnings } => self.on_triage_written(result, warnings),
            TaskMsg::LedgerLanes { token, lanes } => self.ledger.set_lanes(token, lanes),
            TaskMsg::LedgerFolded { token, folded } => self.on_ledger_folded(token, folded),
            TaskMsg::LedgerDiffed { token, report } => self.ledger.set_diff(token, report),
            TaskMsg::WalRecovered { path, result } => self.on_wal_recovered(path, result),
            TaskMsg::WalExamined {
                path,
                stamp,
                result,
            } => self.on_wal_examined(path, stamp, result),
            TaskMsg::NotificationsLoaded { token, loaded } => {
                self.notifications.set_loaded(token, loaded)
            }
            TaskMsg::NotifyRetried { id, result } => self.on_notify_retried(id, result),
            TaskMsg::InboxScanned(result) => self.on_inbox_scanned(result),
            TaskMsg::InboxFiled {
                path,
                result,
                warnings,
            } => self.on_inbox_filed(path, result, warnings),
        }
    }
}
