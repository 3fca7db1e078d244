//! The Outbox screen: loading, per-envelope operations, replay.

use super::{App, PendingOp};
use crate::tui::action::Action;
use crate::tui::screens::outbox::{self as outbox_screen, OutboxOp, ReplayRun};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::sync::Arc;

impl App {
    /// Loads the outbox's counts and list in the background.
    pub fn load_outbox(&mut self) {
        let Some(path) = self.config.outbox.clone() else {
            self.outbox.error = Some("no outbox configured (--outbox PATH)".into());
            return;
        };
        let filter = self.outbox.filter_status();
        let read_only = self.config.read_only;
        self.tasks.spawn(move |tx| {
            let _ = tx.send(TaskMsg::OutboxLoaded(outbox_screen::load(
                &path, filter, read_only,
            )));
        });
    }

    pub(super) fn run_outbox_op(&mut self, op: OutboxOp) {
        let Some(path) = self.config.outbox.clone() else {
            return;
        };
        let audit = self.audit_store();
        self.tasks.spawn(move |tx| {
            let (action, inputs) = super::audit_ops::outbox_op_record(&op, &path);
            let result = op.run(&path);
            if result.is_ok() {
                super::audit_ops::record(&audit, action, inputs);
            }
            let _ = tx.send(TaskMsg::OutboxOpDone(result));
        });
    }

    pub(super) fn start_replay(&mut self) {
        let Some(path) = self.config.outbox.clone() else {
            return;
        };
        let upstream = self.config.upstream.clone();
        let run = ReplayRun {
            progress: Arc::new(std::sync::Mutex::new(Default::default())),
            started: std::time::Instant::now(),
            upstream: upstream.clone(),
        };
        let progress = run.progress.clone();
        self.outbox.replay = Some(run);
        let audit = self.audit_store();
        self.tasks.spawn_async(move |tx| async move {
            let opts = outbox_screen::replay_options(&upstream);
            let result = crate::core::outbox::replay(&path, &opts, |p| {
                if let Ok(mut slot) = progress.lock() {
                    *slot = p.clone();
                }
            })
            .await
            .map_err(|e| e.to_string());
            if let Ok(summary) = &result {
                let inputs = serde_json::json!({
                    "outbox": crate::text::visible_path(&path),
                    "summary": summary,
                });
                tokio::task::spawn_blocking(move || {
                    super::audit_ops::record(&audit, "replay", inputs)
                })
                .await
                .ok();
            }
            let _ = tx.send(TaskMsg::ReplayDone(result));
        });
    }

    /// The Outbox screen's actions (routed here by [`App::apply`]).
    pub(super) fn outbox_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::CycleStatus => {
                self.outbox.filter = (self.outbox.filter + 1) % outbox_screen::FILTERS.len();
                self.outbox.selected = 0;
                self.load_outbox();
            }
            Action::Replay => {
                if self.outbox.replay.is_some() {
                    self.say(Level::Info, "a replay is already running");
                    return ControlFlow::Break(true);
                }
                let Some((queued, due)) = self.outbox.counts.as_ref().map(|c| (c.queued, c.due))
                else {
                    self.say(
                        Level::Info,
                        "the outbox counts are still loading; press R again in a moment",
                    );
                    return ControlFlow::Break(true);
                };
                self.confirm(
                    "Replay the outbox?",
                    vec![
                        format!(
                            "Send the {due} due queued envelope(s) (of {queued} queued) to {}",
                            self.config.upstream
                        ),
                        "in creation order, each with its stored Idempotency-Key.".into(),
                        "2xx -> delivered; 409/422 -> conflict (kept for review); other 4xx -> failed;"
                            .into(),
                        "network errors and 5xx stay queued with a later retry.".into(),
                    ],
                    PendingOp::Replay,
                );
            }
            Action::RetryEnvelope | Action::CancelEnvelope => {
                let Some(e) = self.outbox.selected_envelope().cloned() else {
                    self.say(Level::Info, "no envelope selected");
                    return ControlFlow::Break(true);
                };
                let check = if a == Action::RetryEnvelope {
                    e.check_retry()
                } else {
                    e.check_cancel()
                };
                if let Err(why) = check {
                    self.say(Level::Warning, format!("envelope {}: {why}", e.request.id));
                    return ControlFlow::Break(true);
                }
                let what = format!(
                    "{} {} ({})",
                    e.request.method,
                    e.request.path,
                    e.status.as_str()
                );
                if a == Action::RetryEnvelope {
                    self.confirm(
                        "Retry this envelope?",
                        vec![
                            format!("Queue envelope {} again:", e.request.id),
                            format!("  {what}"),
                            "The next replay sends it with the same Idempotency-Key.".into(),
                        ],
                        PendingOp::Outbox(OutboxOp::Retry { id: e.request.id }),
                    );
                } else {
                    self.confirm(
                        "Cancel this envelope?",
                        vec![
                            format!("Cancel envelope {}:", e.request.id),
                            format!("  {what}"),
                            "It will not be sent; retry (r) queues it again.".into(),
                        ],
                        PendingOp::Outbox(OutboxOp::Cancel { id: e.request.id }),
                    );
                }
            }
            Action::ExportOutbox => {
                let Some(path) = self.config.outbox.clone() else {
                    return ControlFlow::Break(true);
                };
                let stamp = crate::core::time::now_rfc3339().replace([':', '.'], "-");
                let output = path.with_file_name(format!("outbox-export-{stamp}.json"));
                // Counted by the last load; the export itself reads the outbox when it runs.
                let what = match self.outbox.counts.as_ref() {
                    Some(c) => format!(
                        "the outbox's {}",
                        crate::format::plural(c.total(), "envelope")
                    ),
                    None => "every envelope of the outbox".into(),
                };
                self.confirm(
                    "Export the outbox?",
                    vec![
                        format!("Write {what} (every status; secrets were scrubbed when stored)"),
                        "as JSON to a new file:".into(),
                        format!("  {}", output.display()),
                        format!("beside the outbox {}.", path.display()),
                        "The outbox itself is not changed.".into(),
                    ],
                    PendingOp::Outbox(OutboxOp::Export { output }),
                );
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl App {
    pub(super) fn on_outbox_loaded(
        &mut self,
        result: Result<
            (
                crate::core::outbox::StatusCounts,
                Vec<crate::core::outbox::Envelope>,
            ),
            String,
        >,
    ) -> bool {
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

    pub(super) fn on_outbox_op_done(&mut self, result: Result<String, String>) -> bool {
        match result {
            Ok(text) => self.say(Level::Ok, text),
            Err(e) => self.say(Level::Error, e),
        }
        self.load_outbox();
        true
    }

    pub(super) fn on_replay_done(
        &mut self,
        result: Result<crate::core::outbox::ReplaySummary, String>,
    ) -> bool {
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
}
