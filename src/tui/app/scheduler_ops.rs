//! The Scheduler screen: tenants, pages of entries, snapshots, chain verification, proofs.

use super::scheduler_load as sched;
use super::App;
use crate::core::chain::verify::ChainReport;
use crate::tui::action::Action;
use crate::tui::screens::scheduler::{self as sched_screen, SchedMsg};
use crate::tui::tasks::TaskMsg;
use crate::tui::widgets::bars::Level;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

impl App {
    /// Reads the tenant list (and then the visible page and the snapshots) in the background.
    pub fn load_scheduler(&mut self) {
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.scheduler.error = Some(e);
                return;
            }
        };
        self.tasks.spawn(move |tx| {
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Tenants(sched::load_tenants(
                &db,
            ))));
        });
    }

    /// Reads the page of entries the Scheduler screen needs, if it is not cached.
    pub(super) fn pump_scheduler_page(&mut self) {
        let Some((tenant, from)) = self.scheduler.wanted_page() else {
            return;
        };
        let Ok(db) = self.db() else { return };
        self.scheduler.requested = Some((tenant.clone(), from));
        self.tasks.spawn(move |tx| {
            let result = sched::load_page(&db, &tenant, from);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Page {
                tenant,
                from,
                result,
            }));
        });
    }

    pub(super) fn load_snapshots(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let result = sched::load_snapshots(&db, &tenant, &trust);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Snapshots { tenant, result }));
        });
    }

    pub(super) fn start_chain_verify(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let checked = Arc::new(AtomicU64::new(0));
        self.scheduler.verify = Some(sched_screen::VerifyRun {
            tenant: tenant.clone(),
            checked: checked.clone(),
            total: self.scheduler.length(),
        });
        let (trust, required) = (self.trust.clone(), self.verify_policy().require_signature);
        self.tasks.spawn(move |tx| {
            let result = sched::run_verify(&db, &tenant, checked, &trust, required);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Verified { tenant, result }));
        });
    }

    pub(super) fn start_prove(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let Some(job) = self.scheduler.selected_entry().map(|e| e.job_id.clone()) else {
            self.say(Level::Info, "the entry is still being read");
            return;
        };
        let (trust, required) = (self.trust.clone(), self.verify_policy().require_signature);
        self.tasks.spawn(move |tx| {
            let proof = sched::run_prove(&db, &tenant, &job, &trust, required);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Proof { tenant, proof }));
        });
    }

    /// `:goto job ID` on the Scheduler screen: the store says where the job is.
    pub(super) fn start_find_job(&mut self, job_id: String) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            self.say(Level::Info, "no tenant chain shown");
            return;
        };
        self.tasks.spawn(move |tx| {
            let result = sched::find_job(&db, &tenant, &job_id);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::JobFound {
                tenant,
                job_id,
                result,
            }));
        });
    }

    pub(super) fn on_scheduler(&mut self, msg: SchedMsg) -> bool {
        let current = self.scheduler.tenant_id();
        match msg {
            SchedMsg::JobFound {
                tenant,
                job_id,
                result,
            } if current.as_ref() == Some(&tenant) => {
                let job = crate::text::visible(&job_id).into_owned();
                match result {
                    Ok(Some(seq)) => {
                        let d = seq as i128 - self.scheduler.selected as i128;
                        self.scheduler.move_by(d as isize);
                        self.pump_scheduler_page();
                        self.say(Level::Info, format!("job {job}: position {seq}"));
                    }
                    Ok(None) => self.say(
                        Level::Warning,
                        format!(
                            "job {job} is not in tenant {}'s chain",
                            crate::text::visible(&tenant)
                        ),
                    ),
                    Err(e) => self.say(Level::Error, e),
                }
            }
            SchedMsg::JobFound { .. } => {}
            SchedMsg::Snapshotted(Ok(text)) => {
                self.say(Level::Ok, text);
                self.load_scheduler();
            }
            SchedMsg::Snapshotted(Err(e)) => {
                self.say(Level::Error, format!("snapshot failed: {e}"))
            }
            SchedMsg::Tenants(Ok(t)) => {
                self.scheduler.set_tenants(t);
                self.load_snapshots();
                self.land_scheduler();
            }
            SchedMsg::Tenants(Err(e)) => self.scheduler.error = Some(e),
            SchedMsg::Page {
                tenant,
                from,
                result,
            } => {
                if self.scheduler.requested.as_ref() == Some(&(tenant.clone(), from)) {
                    self.scheduler.requested = None;
                }
                match result {
                    Ok(entries) => {
                        self.scheduler.entries = entries;
                        self.scheduler.entries_from = from;
                        self.scheduler.entries_tenant = tenant;
                    }
                    Err(e) => self.say(Level::Error, format!("reading the chain: {e}")),
                }
            }
            SchedMsg::Snapshots { tenant, result } => {
                if current.as_ref() == Some(&tenant) {
                    match result {
                        Ok(list) => {
                            self.scheduler.snapshots = list.listed;
                            self.scheduler.follow_snapshot = true;
                            if let Some(first) = list.damaged.first() {
                                self.say(
                                    Level::Error,
                                    format!(
                                        "{} snapshot row(s) left out, their positions damaged: {first}; `v` (chain verify) lists every one",
                                        list.damaged.len()
                                    ),
                                );
                            }
                        }
                        Err(e) => self.say(Level::Error, format!("reading snapshots: {e}")),
                    }
                }
            }
            SchedMsg::Verified { tenant, result } => {
                self.scheduler.verify = None;
                if current.as_ref() != Some(&tenant) {
                    return true;
                }
                match result {
                    Ok(r) => self.on_chain_verified(&tenant, r),
                    Err(e) => self.say(Level::Error, format!("verify failed: {e}")),
                }
            }
            SchedMsg::Proof { tenant, proof } => {
                if current.as_ref() == Some(&tenant) {
                    match &proof.result {
                        Ok(c) if c.verdict.is_accepted() => self.say(
                            Level::Ok,
                            format!(
                                "inclusion proof of {} verifies",
                                crate::text::visible(&proof.job_id)
                            ),
                        ),
                        Ok(c) => self.say(
                            Level::Error,
                            format!(
                                "the proof is not accepted: {}",
                                c.verdict
                                    .outcome
                                    .as_ref()
                                    .err()
                                    .map(|e| e.to_string())
                                    .unwrap_or_default()
                            ),
                        ),
                        Err(e) => self.say(Level::Warning, format!("no proof: {e}")),
                    }
                    self.scheduler.detail_scroll = 0;
                    self.scheduler.show_snapshots = false;
                    self.scheduler.proof = Some(proof);
                }
            }
        }
        self.pump_scheduler_page();
        true
    }

    /// A finished verification of the current tenant's chain: the verdict in the status bar, the
    /// selection on the first finding at an entry, or the snapshots shown when every finding is
    /// at none (a snapshot's signature, the head).
    fn on_chain_verified(&mut self, tenant: &str, r: Box<ChainReport>) {
        let n = r.findings.len();
        self.say(
            if r.ok { Level::Ok } else { Level::Warning },
            if r.ok {
                format!(
                    "chain {} verified: {}, {}, no findings",
                    crate::text::visible(tenant),
                    crate::format::count(r.length, "entry", "entries"),
                    crate::format::plural(r.snapshots.len() as u64, "snapshot root")
                )
            } else {
                format!(
                    "chain {}: {}, marked ✗ at their positions{}",
                    crate::text::visible(tenant),
                    crate::format::plural(n as u64, "finding"),
                    if r.findings.iter().any(|f| f.index.is_none()) {
                        " (those at no entry, such as a snapshot's signature, with the snapshots)"
                    } else {
                        ""
                    }
                )
            },
        );
        match r.findings.iter().find_map(|f| f.index) {
            Some(first) => {
                self.scheduler.selected = first.min(self.scheduler.length().saturating_sub(1))
            }
            // Only snapshot (or head) findings: show them.
            None if !r.findings.is_empty() => {
                self.scheduler.show_snapshots = true;
                self.load_snapshots();
            }
            None => {}
        }
        self.scheduler.report = Some(r);
    }

    /// The Scheduler screen's actions (routed here by [`App::apply`]).
    pub(super) fn scheduler_action(&mut self, a: Action) -> ControlFlow<bool> {
        match a {
            Action::Replan => self.load_scheduler(),
            Action::VerifyChain => {
                if self.scheduler.verify.is_some() {
                    self.say(Level::Info, "a verification is already running");
                    return ControlFlow::Break(true);
                }
                self.start_chain_verify();
            }
            Action::Prove => self.start_prove(),
            Action::ToggleSnapshots => {
                self.scheduler.show_snapshots = !self.scheduler.show_snapshots;
                self.scheduler.detail_scroll = 0;
                self.scheduler.follow_snapshot = true;
                if self.scheduler.show_snapshots {
                    self.load_snapshots();
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
