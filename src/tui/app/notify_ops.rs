//! The Notifications screen: loading and the confirmed retry of a dead letter (an engine call),
//! both in the background (the store may be a PostgreSQL server across the network).

use super::{App, PendingOp};
use crate::tui::action::Action;
use crate::tui::screens::notifications;
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;

impl App {
    /// Reads emissions and deliveries from the store in the background.
    pub fn load_notifications(&mut self) {
        match self.db() {
            Ok(db) => {
                let token = self.notifications.begin_load();
                self.tasks.run(move || TaskMsg::NotificationsLoaded {
                    token,
                    loaded: notifications::read(&db),
                });
            }
            Err(e) => self.notifications.error = Some(e),
        }
    }

    /// Retries a dead letter (after confirmation), in the background, then reads the store again.
    pub(super) fn run_notify_retry(&mut self, id: i64) {
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => return self.say(Level::Warning, e),
        };
        let token = self.notifications.begin_load();
        self.tasks.spawn(move |tx| {
            let result = db.open_for_writing().and_then(|store| {
                crate::core::notify::store::retry(&store, id, crate::core::hlc::unix_ms_now())
                    .map_err(|e| e.to_string())
            });
            if result.is_ok() {
                let (action, inputs) = super::audit_ops::notify_retry_record(id);
                super::audit_ops::record(&Some(db.clone()), action, inputs);
            }
            let _ = tx.send(TaskMsg::NotifyRetried { id, result });
            let loaded = notifications::read(&db);
            let _ = tx.send(TaskMsg::NotificationsLoaded { token, loaded });
        });
    }

    /// A retry finished: say so (the reload that follows shows the row pending again).
    pub(super) fn on_notify_retried(&mut self, id: i64, result: Result<(), String>) -> bool {
        match result {
            Ok(()) => self.say(
                Level::Info,
                format!("delivery {id} is pending again; `airlock notify run` delivers it"),
            ),
            Err(e) => self.say(Level::Warning, e),
        }
        true
    }

    /// The Notifications screen's actions (routed here by [`App::apply`]).
    pub(super) fn notify_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::NotifyView => self.notifications.cycle_view(),
            Action::NotifyReload => self.load_notifications(),
            Action::RetryDelivery => {
                let Some(d) = self.notifications.selected_dead().cloned() else {
                    self.say(Level::Info, "select a dead letter to retry (v shows them)");
                    return ControlFlow::Break(true);
                };
                self.confirm(
                    "Retry this dead letter?",
                    vec![
                        format!(
                            "delivery {} of export {} to {} {}",
                            d.delivery_id,
                            crate::text::visible(&d.export_id),
                            d.target_kind,
                            crate::text::visible(&d.target)
                        ),
                        format!(
                            "dead after {}: {}",
                            crate::format::plural(d.attempts as u64, "attempt"),
                            crate::text::visible(d.last_reason.as_deref().unwrap_or(""))
                        ),
                        "It goes back to pending, due now, with a fresh retry schedule.".into(),
                    ],
                    PendingOp::NotifyRetry(d.delivery_id),
                );
            }
            _ => return ControlFlow::Continue(()),
        }
        ControlFlow::Break(true)
    }
}
