//! The console's state and loop: select over terminal events, background results and timers;
//! redraw only when something changed.

use super::action::{self, Action, ScreenId};
use super::chain_index::ChainIndex;
use super::filter::FilterKey;
use super::screens::bundles::{BundleRow, BundlesScreen, VerifyState};
use super::screens::chain::{ChainScreen, ChainState};
use super::screens::keys::{KeyOp, KeysPane, KeysScreen};
use super::screens::merge::{self as merge_screen, MergeScreen, MergeState, MergeTab};
use super::screens::outbox::{self as outbox_screen, OutboxOp, OutboxScreen, ReplayRun};
use super::screens::scheduler::{self as sched, SchedMsg, SchedulerScreen};
use super::tasks::{stamp_of, FileStamp, TaskInbox, TaskMsg, Tasks, TrustCheck};
use super::theme::Theme;
use super::widgets::bars::{self, Level, StatusMessage};
use super::widgets::overlay;
use crate::core::bundle::catalog::{self, ListingKind};
use crate::core::verify::{verify_file, VerifyOptions};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::Frame;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How the console was started.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    pub dir: PathBuf,
    pub db: Option<PathBuf>,
    pub outbox: Option<PathBuf>,
    pub read_only: bool,
    pub mouse: bool,
    /// Where local signing keys live (`keys generate` writes there).
    pub keys_dir: PathBuf,
    /// The trust store file.
    pub trust_store: PathBuf,
    /// Where outbox replays are sent.
    pub upstream: String,
}

/// A state-changing operation waiting for confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingOp {
    Key(KeyOp),
    Outbox(OutboxOp),
    Replay,
    /// Import the previewed bundles (`force`: `--force`).
    Import {
        force: bool,
    },
}

/// An overlay over the current screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    Help {
        filter: String,
        scroll: usize,
    },
    Palette {
        input: String,
        selected: usize,
    },
    /// Confirmation of a state-changing operation.
    Confirm {
        title: String,
        lines: Vec<String>,
        op: PendingOp,
    },
    /// The name of a new key.
    KeyName {
        input: String,
    },
}

/// Files examined (inspected + verified) at once.
const EXAMINE_PARALLEL: usize = 2;

/// The whole console.
pub struct App {
    pub config: ConsoleConfig,
    pub theme: Theme,
    pub screen: ScreenId,
    pub bundles: BundlesScreen,
    pub chain: ChainScreen,
    pub keys: KeysScreen,
    pub outbox: OutboxScreen,
    pub merge: MergeScreen,
    pub scheduler: SchedulerScreen,
    pub overlay: Option<Overlay>,
    pub message: Option<StatusMessage>,
    pub quit: bool,
    tasks: Tasks,
    trust: TrustCheck,
    examine_queue: VecDeque<PathBuf>,
    examining: usize,
    chain_token: u64,
    polling: bool,
    /// Progress values at the last draw (to redraw only when they move).
    last_progress: u64,
}

impl App {
    pub fn new(config: ConsoleConfig, theme: Theme, tasks: Tasks, trust: TrustCheck) -> App {
        App {
            config,
            theme,
            screen: ScreenId::Bundles,
            bundles: BundlesScreen::default(),
            chain: ChainScreen::default(),
            keys: KeysScreen::default(),
            outbox: OutboxScreen::default(),
            merge: MergeScreen::default(),
            scheduler: SchedulerScreen::default(),
            overlay: None,
            message: None,
            quit: false,
            tasks,
            trust,
            examine_queue: VecDeque::new(),
            examining: 0,
            chain_token: 0,
            polling: false,
            last_progress: 0,
        }
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        self.message = Some(StatusMessage {
            level,
            text: text.into(),
        });
    }

    // ---- background work -------------------------------------------------------------------

    /// Lists the directory (names and stamps only) in the background.
    pub fn poll_dir(&mut self) {
        if self.polling {
            return;
        }
        self.polling = true;
        let dir = self.config.dir.clone();
        self.tasks.spawn(move |tx| {
            let result = catalog::files_in(&dir)
                .map(|files| {
                    files
                        .into_iter()
                        .map(|p| {
                            let s = stamp_of(&p);
                            (p, s)
                        })
                        .collect()
                })
                .map_err(|e| e.to_string());
            let _ = tx.send(TaskMsg::Polled(result));
        });
    }

    fn on_polled(&mut self, files: Vec<(PathBuf, FileStamp)>) -> bool {
        let selected = self.bundles.selected_row().map(|r| r.path.clone());
        let mut changed = !self.bundles.listed_once || self.bundles.dir_error.is_some();
        self.bundles.listed_once = true;
        self.bundles.dir_error = None;
        let mut rows = Vec::with_capacity(files.len());
        for (path, stamp) in files {
            match self
                .bundles
                .rows
                .iter()
                .position(|r| r.path == path && r.stamp == stamp)
            {
                Some(i) => rows.push(self.bundles.rows[i].clone()),
                None => {
                    changed = true;
                    self.examine_queue.push_back(path.clone());
                    rows.push(BundleRow {
                        path,
                        stamp,
                        listing: None,
                        verify: VerifyState::Pending,
                    });
                }
            }
        }
        if rows.len() != self.bundles.rows.len() {
            changed = true;
        }
        self.bundles.rows = rows;
        if let Some(p) = selected {
            self.bundles.select_path(&p);
        }
        self.bundles.clamp();
        self.pump_examine();
        changed
    }

    /// Starts queued examinations up to the parallel limit.
    fn pump_examine(&mut self) {
        while self.examining < EXAMINE_PARALLEL {
            let Some(path) = self.examine_queue.pop_front() else {
                break;
            };
            let Some(row) = self.bundles.rows.iter_mut().find(|r| r.path == path) else {
                continue;
            };
            if !matches!(row.verify, VerifyState::Pending) {
                continue;
            }
            let counter = Arc::new(AtomicU64::new(0));
            row.verify = VerifyState::Running(counter.clone());
            let stamp = row.stamp;
            self.examining += 1;
            let trust = self.trust.clone();
            self.tasks.spawn(move |tx| {
                let listing = catalog::inspect(&path);
                let is_bundle = listing.is_bundle();
                let _ = tx.send(TaskMsg::Inspected {
                    path: path.clone(),
                    stamp,
                    listing,
                });
                let result = if is_bundle {
                    let opts = VerifyOptions {
                        trust: Some(&trust),
                        progress: Some(counter),
                        ..VerifyOptions::default()
                    };
                    verify_file(&path, &opts)
                        .map(Box::new)
                        .map_err(|e| e.to_string())
                } else {
                    Err(String::new())
                };
                let _ = tx.send(TaskMsg::Verified {
                    path,
                    stamp,
                    result: result.map(|b| *b),
                });
            });
        }
    }

    /// Opens a bundle in the chain screen; indexing runs in the background.
    pub fn open_chain(&mut self, path: PathBuf) {
        self.chain_token += 1;
        let token = self.chain_token;
        let read = Arc::new(AtomicU64::new(0));
        let total = stamp_of(&path).size;
        self.chain = ChainScreen::loading(path.clone(), read.clone(), total);
        self.screen = ScreenId::Chain;
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let opts = VerifyOptions {
                trust: Some(&trust),
                ..VerifyOptions::default()
            };
            let result = ChainIndex::build(&path, &opts, Some(read)).map(Box::new);
            let _ = tx.send(TaskMsg::Indexed { token, result });
        });
    }

    /// Re-reads the trust store after a change and verifies every bundle again against it.
    fn reload_trust(&mut self) {
        match crate::core::trust::TrustStore::open(&self.config.trust_store) {
            Ok(store) => self.trust = Arc::new(store.trust_set()),
            Err(e) => {
                self.say(Level::Error, e.to_string());
                return;
            }
        }
        let paths: Vec<PathBuf> = self
            .bundles
            .rows
            .iter_mut()
            .filter(|r| r.is_bundle() && !matches!(r.verify, VerifyState::Running(_)))
            .map(|r| {
                r.verify = VerifyState::Pending;
                r.path.clone()
            })
            .collect();
        self.examine_queue.extend(paths);
        self.pump_examine();
    }

    /// Runs a keys-and-trust operation in the background.
    fn run_key_op(&mut self, op: KeyOp) {
        let keys_dir = self.config.keys_dir.clone();
        let trust_store = self.config.trust_store.clone();
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let result = op.run(&keys_dir, &trust_store, &trust);
            let _ = tx.send(TaskMsg::KeyOpDone(result));
        });
    }

    /// The bundle selected on the Bundles screen, if it is a bundle.
    fn selected_bundle(&self) -> Option<&BundleRow> {
        self.bundles.selected_row().filter(|r| r.is_bundle())
    }

    /// Loads the outbox's counts and list in the background.
    pub fn load_outbox(&mut self) {
        let Some(path) = self.config.outbox.clone() else {
            self.outbox.error = Some("no outbox configured (--outbox PATH)".into());
            return;
        };
        let filter = self.outbox.filter_status();
        self.tasks.spawn(move |tx| {
            let _ = tx.send(TaskMsg::OutboxLoaded(outbox_screen::load(&path, filter)));
        });
    }

    /// Timer: poll the directory, and refresh the outbox while it is on screen.
    pub fn on_poll(&mut self) {
        self.poll_dir();
        if self.screen == ScreenId::Outbox && self.outbox.replay.is_none() {
            self.load_outbox();
        }
    }

    fn run_outbox_op(&mut self, op: OutboxOp) {
        let Some(path) = self.config.outbox.clone() else {
            return;
        };
        self.tasks.spawn(move |tx| {
            let _ = tx.send(TaskMsg::OutboxOpDone(op.run(&path)));
        });
    }

    fn start_replay(&mut self) {
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
        self.tasks.spawn_async(move |tx| async move {
            let opts = outbox_screen::replay_options(&upstream);
            let result = crate::core::outbox::replay(&path, &opts, |p| {
                if let Ok(mut slot) = progress.lock() {
                    *slot = p.clone();
                }
            })
            .await
            .map_err(|e| e.to_string());
            let _ = tx.send(TaskMsg::ReplayDone(result));
        });
    }

    fn run_pending(&mut self, op: PendingOp) {
        match op {
            PendingOp::Key(op) => self.run_key_op(op),
            PendingOp::Outbox(op) => self.run_outbox_op(op),
            PendingOp::Replay => self.start_replay(),
            PendingOp::Import { force } => self.start_import(force),
        }
    }

    /// The store, or why there is none.
    fn db(&self) -> Result<PathBuf, String> {
        self.config
            .db
            .clone()
            .ok_or_else(|| "no store configured (--db PATH)".to_string())
    }

    /// Plans the import of `inputs` (the engine's `plan_import`) in the background.
    pub fn start_plan(&mut self, inputs: Vec<PathBuf>, force: bool) {
        self.merge.token += 1;
        let token = self.merge.token;
        let progress = Arc::new(crate::core::import::ImportProgress::default());
        if !force {
            self.merge.inputs = inputs.clone();
            self.merge.state = MergeState::Planning(progress.clone());
            self.merge.diff = None;
        }
        let db = self.db();
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let result = db.and_then(|db| {
                let store = crate::core::store::Store::open(&db).map_err(|e| e.to_string())?;
                let opts = import_options(&trust, force, progress);
                crate::core::import::plan_import(&store, &inputs, &opts)
                    .map(Box::new)
                    .map_err(|e| e.to_string())
            });
            let _ = tx.send(TaskMsg::Planned {
                token,
                force,
                result,
            });
        });
    }

    fn start_import(&mut self, force: bool) {
        let progress = Arc::new(crate::core::import::ImportProgress::default());
        self.merge.importing = Some(progress.clone());
        let db = self.db();
        let trust = self.trust.clone();
        let inputs = self.merge.inputs.clone();
        self.tasks.spawn(move |tx| {
            let result = db.and_then(|db| {
                let mut store = crate::core::store::Store::open(&db).map_err(|e| e.to_string())?;
                let opts = import_options(&trust, force, progress);
                crate::core::import::import(&mut store, &inputs, &opts)
                    .map(Box::new)
                    .map_err(|e| e.to_string())
            });
            let _ = tx.send(TaskMsg::Imported(result));
        });
    }

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
    fn pump_scheduler_page(&mut self) {
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

    fn load_snapshots(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let result = sched::load_snapshots(&db, &tenant, &trust);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Snapshots { tenant, result }));
        });
    }

    fn start_chain_verify(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let checked = Arc::new(AtomicU64::new(0));
        self.scheduler.verify = Some(sched::VerifyRun {
            tenant: tenant.clone(),
            checked: checked.clone(),
            total: self.scheduler.length(),
        });
        self.tasks.spawn(move |tx| {
            let result = sched::run_verify(&db, &tenant, checked);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Verified { tenant, result }));
        });
    }

    fn start_prove(&mut self) {
        let (Ok(db), Some(tenant)) = (self.db(), self.scheduler.tenant_id()) else {
            return;
        };
        let Some(job) = self.scheduler.selected_entry().map(|e| e.job_id.clone()) else {
            self.say(Level::Info, "the entry is still being read");
            return;
        };
        let trust = self.trust.clone();
        self.tasks.spawn(move |tx| {
            let proof = sched::run_prove(&db, &tenant, &job, &trust);
            let _ = tx.send(TaskMsg::Scheduler(SchedMsg::Proof { tenant, proof }));
        });
    }

    fn on_scheduler(&mut self, msg: SchedMsg) -> bool {
        let current = self.scheduler.tenant_id();
        match msg {
            SchedMsg::Tenants(Ok(t)) => {
                self.scheduler.set_tenants(t);
                self.load_snapshots();
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
                        Ok(s) => self.scheduler.snapshots = s,
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
                    Ok(r) => {
                        let n = r.findings.len();
                        self.say(
                            if r.ok { Level::Ok } else { Level::Warning },
                            if r.ok {
                                format!(
                                    "chain {} verified: {} entries, {} snapshot root(s), no findings",
                                    crate::text::visible(&tenant),
                                    r.length,
                                    r.snapshots.len()
                                )
                            } else {
                                format!("chain {}: {n} finding(s), marked ✗ at their positions", crate::text::visible(&tenant))
                            },
                        );
                        if let Some(first) = r.findings.iter().find_map(|f| f.index) {
                            self.scheduler.selected =
                                first.min(self.scheduler.length().saturating_sub(1));
                        }
                        self.scheduler.report = Some(r);
                    }
                    Err(e) => self.say(Level::Error, format!("verify failed: {e}")),
                }
            }
            SchedMsg::Proof { tenant, proof } => {
                if current.as_ref() == Some(&tenant) {
                    match &proof.result {
                        Ok((_, Ok(()), _)) => self.say(
                            Level::Ok,
                            format!(
                                "inclusion proof of {} verifies",
                                crate::text::visible(&proof.job_id)
                            ),
                        ),
                        Ok((_, Err(e), _)) => {
                            self.say(Level::Error, format!("the proof does not verify: {e}"))
                        }
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

    /// The confirmation of a plain import: the plan's own summary lines.
    fn confirm_import(&mut self) {
        let Some(plan) = self.merge.plan() else {
            self.say(
                Level::Info,
                "no plan yet: mark bundles on the Bundles screen (1) and press m",
            );
            return;
        };
        if let Err(why) = merge_screen::importable(plan) {
            self.say(Level::Warning, why);
            return;
        }
        let db = self
            .config
            .db
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut lines = vec![format!("Import into the store {db}:")];
        lines.extend(
            crate::report_text::import_lines(plan, 0)
                .into_iter()
                .take(1 + plan.bundles.len() + 1),
        );
        lines.push("One transaction: all of it is written, or nothing.".into());
        self.confirm(
            "Import these bundles?",
            lines,
            PendingOp::Import { force: false },
        );
    }

    /// The confirmation of a forced import, from a plan made with `--force`: which entries of which
    /// broken logs are dropped; conflicts still refuse.
    fn confirm_force(&mut self, plan: &crate::core::import::ImportPlan) {
        if !plan.conflicts.is_empty() {
            self.say(
                Level::Warning,
                format!(
                    "{} conflict(s) refuse the import even with --force: fix the producer",
                    plan.conflicts.len()
                ),
            );
            return;
        }
        if plan.status == crate::core::import::ImportStatus::NothingToDo {
            self.say(Level::Info, "nothing to import, even with --force");
            return;
        }
        let t = &plan.totals;
        let mut lines = vec![
            "With --force, each broken node log contributes only its verified prefix;".to_string(),
            "every entry after its first break is DROPPED (not imported):".to_string(),
        ];
        // Group the engine's dropped list per (file, node): first..last index and the reason.
        let mut groups: Vec<(String, String, u64, u64, usize, String)> = Vec::new();
        for d in &plan.dropped {
            match groups.last_mut() {
                Some(g) if g.0 == d.file && g.1 == d.node_id => {
                    g.3 = d.index;
                    g.4 += 1;
                }
                _ => groups.push((
                    d.file.clone(),
                    d.node_id.clone(),
                    d.index,
                    d.index,
                    1,
                    d.reason.clone(),
                )),
            }
        }
        if groups.is_empty() {
            lines.push(
                "  (no entries: the findings are bundle-level, e.g. signature or manifest)".into(),
            );
        }
        for (file, node, from, to, n, reason) in groups.iter().take(8) {
            let name = std::path::Path::new(file)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.clone());
            lines.push(format!(
                "  {name} node {node}: entries {from}..={to} ({n}) — {}",
                super::widgets::clip(reason, 60)
            ));
        }
        if groups.len() > 8 {
            lines.push(format!("  … and {} more broken log(s)", groups.len() - 8));
        }
        lines.push(
            "Bundle-level findings (manifest digest, signature) are accepted as they are.".into(),
        );
        lines.push(format!(
            "Result: {} new, {} duplicate(s), {} dropped. Conflicts would still refuse the import.",
            t.new, t.duplicates, t.dropped
        ));
        self.say(Level::Info, "plan with --force ready: y imports, n cancels");
        self.confirm(
            "Force import (--force)?",
            lines,
            PendingOp::Import { force: true },
        );
    }

    fn confirm(&mut self, title: &str, lines: Vec<String>, op: PendingOp) {
        self.overlay = Some(Overlay::Confirm {
            title: title.to_string(),
            lines,
            op,
        });
    }

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
            TaskMsg::Inspected {
                path,
                stamp,
                listing,
            } => {
                if let Some(row) = self
                    .bundles
                    .rows
                    .iter_mut()
                    .find(|r| r.path == path && r.stamp == stamp)
                {
                    if let ListingKind::NotBundle { reason } = &listing.kind {
                        row.verify = VerifyState::NotBundle(reason.clone());
                    }
                    row.listing = Some(listing);
                }
                true
            }
            TaskMsg::Verified {
                path,
                stamp,
                result,
            } => {
                self.examining = self.examining.saturating_sub(1);
                if let Some(row) = self
                    .bundles
                    .rows
                    .iter_mut()
                    .find(|r| r.path == path && r.stamp == stamp)
                {
                    if !matches!(row.verify, VerifyState::NotBundle(_)) {
                        row.verify = match result {
                            Ok(report) => VerifyState::Done(Box::new(report)),
                            Err(e) => VerifyState::Failed(e),
                        };
                    }
                }
                self.pump_examine();
                true
            }
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
            } => {
                if token != self.merge.token {
                    return false;
                }
                match (force, result) {
                    (false, Ok(plan)) => {
                        self.merge.lines =
                            crate::report_text::import_lines(&plan, merge_screen::SHOW);
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
                    Ok(index) => {
                        let n = index.entry_count();
                        let f = index.report.findings.len();
                        self.chain.set_ready(index);
                        self.say(
                            if f == 0 { Level::Ok } else { Level::Warning },
                            format!(
                                "indexed {n} entries: {}",
                                if f == 0 {
                                    "no findings".to_string()
                                } else {
                                    format!("{f} finding(s); n jumps to the next one")
                                }
                            ),
                        );
                    }
                    Err(error) => {
                        let path = self.chain.path().cloned().unwrap_or_default();
                        self.say(Level::Error, format!("cannot open the bundle: {error}"));
                        self.chain.state = ChainState::Failed { path, error };
                    }
                }
                true
            }
        }
    }

    /// Timer tick: true when a visible progress value moved.
    pub fn on_tick(&mut self) -> bool {
        let mut progress = 0u64;
        if let ChainState::Loading { read, .. } = &self.chain.state {
            progress = progress.wrapping_add(read.load(Ordering::Relaxed) >> 16);
        }
        let merge_progress = match (&self.merge.importing, &self.merge.state) {
            (Some(p), _) | (None, MergeState::Planning(p)) => Some(p.clone()),
            _ => None,
        };
        if let Some(p) = merge_progress {
            progress = progress
                .wrapping_add(p.bytes_read.load(Ordering::Relaxed) >> 12)
                .wrapping_add(p.entries_written.load(Ordering::Relaxed))
                .wrapping_add(p.stage.load(Ordering::Relaxed) as u64);
        }
        if let Some(v) = &self.scheduler.verify {
            progress = progress.wrapping_add(v.checked.load(Ordering::Relaxed));
        }
        for r in &self.bundles.rows {
            if let VerifyState::Running(c) = &r.verify {
                progress = progress.wrapping_add(c.load(Ordering::Relaxed) >> 16);
            }
        }
        let changed = progress != self.last_progress;
        self.last_progress = progress;
        changed
    }

    // ---- input ---------------------------------------------------------------------------------

    /// Handles a terminal event; true when the screen must be redrawn.
    pub fn handle_event(&mut self, ev: Event) -> bool {
        match ev {
            Event::Key(k) if k.kind != KeyEventKind::Release => self.handle_key(k),
            Event::Resize(..) => true,
            Event::Mouse(m) if self.config.mouse => match m.kind {
                MouseEventKind::ScrollDown => self.apply(Action::Down),
                MouseEventKind::ScrollUp => self.apply(Action::Up),
                MouseEventKind::Down(_) => self.click(m.column, m.row),
                _ => false,
            },
            _ => false,
        }
    }

    fn click(&mut self, col: u16, row: u16) -> bool {
        let pos = ratatui::layout::Position::new(col, row);
        match self.screen {
            ScreenId::Bundles if self.bundles.table_area.contains(pos) => {
                let r = (row - self.bundles.table_area.y) as usize;
                if r >= 1 {
                    self.bundles.selected = self.bundles.offset + r - 1;
                    self.bundles.clamp();
                }
                true
            }
            ScreenId::Chain if self.chain.table_area.contains(pos) => {
                let r = (row - self.chain.table_area.y) as usize;
                if r >= 1 {
                    let target = self.chain.offset + r - 1;
                    let delta = target as isize - self.chain.selected as isize;
                    self.chain.move_by(delta);
                }
                true
            }
            _ => false,
        }
    }

    pub fn handle_key(&mut self, k: KeyEvent) -> bool {
        if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return true;
        }
        if let Some(ov) = self.overlay.clone() {
            return self.overlay_key(ov, k);
        }
        if self.screen == ScreenId::Bundles && self.bundles.filter.editing {
            match self.bundles.filter.key(&k) {
                FilterKey::Ignored => return false,
                FilterKey::Changed => self.bundles.selected = 0,
                FilterKey::Done => {}
            }
            self.bundles.clamp();
            return true;
        }
        if self.screen == ScreenId::Outbox && self.outbox.text_filter.editing {
            match self.outbox.text_filter.key(&k) {
                FilterKey::Ignored => return false,
                FilterKey::Changed => self.outbox.refilter(),
                FilterKey::Done => {}
            }
            return true;
        }
        match action::lookup(self.screen, self.config.read_only, &k) {
            Some(a) => self.apply(a),
            None => false,
        }
    }

    fn overlay_key(&mut self, ov: Overlay, k: KeyEvent) -> bool {
        match ov {
            Overlay::Confirm { op, .. } => {
                match k.code {
                    KeyCode::Char('y') | KeyCode::Enter => {
                        self.overlay = None;
                        self.say(Level::Info, "working…");
                        self.run_pending(op);
                    }
                    KeyCode::Char('n') | KeyCode::Esc => {
                        self.overlay = None;
                        self.say(Level::Info, "cancelled; nothing was changed");
                    }
                    _ => return false,
                }
                true
            }
            Overlay::KeyName { mut input } => {
                match k.code {
                    KeyCode::Esc => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::Enter => {
                        self.overlay = None;
                        let name = input.trim().to_string();
                        self.run_key_op(KeyOp::Generate { name });
                        return true;
                    }
                    KeyCode::Backspace => {
                        input.pop();
                    }
                    KeyCode::Char(c) if !c.is_control() => input.push(c),
                    _ => return false,
                }
                self.overlay = Some(Overlay::KeyName { input });
                true
            }

            Overlay::Help { mut filter, scroll } => {
                let mut scroll = scroll;
                match k.code {
                    KeyCode::Esc => {
                        if filter.is_empty() {
                            self.overlay = None;
                            return true;
                        }
                        filter.clear();
                    }
                    KeyCode::Char('?') if filter.is_empty() => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::F(1) => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::Backspace => {
                        filter.pop();
                    }
                    KeyCode::Down => scroll += 1,
                    KeyCode::Up => scroll = scroll.saturating_sub(1),
                    KeyCode::Char(c) => {
                        filter.push(c);
                        scroll = 0;
                    }
                    _ => return false,
                }
                self.overlay = Some(Overlay::Help { filter, scroll });
                true
            }
            Overlay::Palette {
                mut input,
                mut selected,
            } => {
                let rows = overlay::palette_rows(self.screen, self.config.read_only, &input);
                match k.code {
                    KeyCode::Esc => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::Enter => {
                        self.overlay = None;
                        if let Some(b) = rows.get(selected) {
                            let a = b.action;
                            self.apply(a);
                        } else {
                            self.say(
                                Level::Warning,
                                format!("no command named {:?}", crate::text::visible(&input)),
                            );
                        }
                        return true;
                    }
                    KeyCode::Down | KeyCode::Tab => {
                        selected = (selected + 1).min(rows.len().saturating_sub(1))
                    }
                    KeyCode::Up | KeyCode::BackTab => selected = selected.saturating_sub(1),
                    KeyCode::Backspace => {
                        input.pop();
                        selected = 0;
                    }
                    KeyCode::Char(c) => {
                        input.push(c);
                        selected = 0;
                    }
                    _ => return false,
                }
                self.overlay = Some(Overlay::Palette { input, selected });
                true
            }
        }
    }

    fn go(&mut self, s: ScreenId) {
        if s == ScreenId::Scheduler {
            self.load_scheduler();
        }
        if s == ScreenId::Outbox {
            self.load_outbox();
        }
        if s == ScreenId::Keys {
            self.keys
                .reload(&self.config.keys_dir, &self.config.trust_store);
        }
        self.screen = s;
    }

    /// Runs one action; true when the screen must be redrawn.
    pub fn apply(&mut self, a: Action) -> bool {
        let screens = ScreenId::ALL;
        let pos = screens.iter().position(|s| *s == self.screen).unwrap_or(0);
        match a {
            Action::Quit => {
                if self.screen == ScreenId::Bundles {
                    self.quit = true;
                } else {
                    self.go(ScreenId::Bundles);
                }
            }
            Action::Back => match self.screen {
                ScreenId::Bundles if !self.bundles.filter.text.is_empty() => {
                    self.bundles.filter.text.clear();
                    self.bundles.clamp();
                }
                ScreenId::Outbox if !self.outbox.text_filter.text.is_empty() => {
                    self.outbox.text_filter.text.clear();
                    self.outbox.refilter();
                }
                ScreenId::Bundles => {
                    if self.message.take().is_none() {
                        return false;
                    }
                }
                ScreenId::Merge if self.merge.diff.is_some() => self.merge.diff = None,
                _ => self.go(ScreenId::Bundles),
            },
            Action::Help => {
                self.overlay = Some(Overlay::Help {
                    filter: String::new(),
                    scroll: 0,
                })
            }
            Action::Palette => {
                self.overlay = Some(Overlay::Palette {
                    input: String::new(),
                    selected: 0,
                })
            }
            Action::NextScreen => self.go(screens[(pos + 1) % screens.len()]),
            Action::PrevScreen => self.go(screens[(pos + screens.len() - 1) % screens.len()]),
            Action::GoScreen(s) => self.go(s),
            Action::Filter => match self.screen {
                ScreenId::Outbox => {
                    self.outbox.text_filter.start();
                    self.outbox.refilter();
                }
                _ => self.bundles.filter.start(),
            },
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page() as isize)),
            Action::PageDown => self.move_by(self.page() as isize),
            Action::Home => match self.screen {
                ScreenId::Bundles => self.bundles.selected = 0,
                ScreenId::Chain => self.chain.home(),
                ScreenId::Keys => self.keys.move_by(-(isize::MAX / 2)),
                ScreenId::Outbox => self.outbox.move_by(-(isize::MAX / 2)),
                ScreenId::Merge => self.merge.move_by(-(isize::MAX / 2)),
                ScreenId::Scheduler => self.scheduler.move_by(-(isize::MAX / 2)),
            },
            Action::End => match self.screen {
                ScreenId::Bundles => self.bundles.move_by(isize::MAX / 2),
                ScreenId::Chain => self.chain.end(),
                ScreenId::Keys => self.keys.move_by(isize::MAX / 2),
                ScreenId::Outbox => self.outbox.move_by(isize::MAX / 2),
                ScreenId::Merge => self.merge.move_by(isize::MAX / 2),
                ScreenId::Scheduler => self.scheduler.move_by(isize::MAX / 2),
            },
            Action::Open if self.screen == ScreenId::Merge => {
                if self.merge.current_tab() != MergeTab::Conflicts
                    || self.merge.len_of(MergeTab::Conflicts) == 0
                {
                    self.say(
                        Level::Info,
                        "Enter opens a conflict's payload diff (→ to the Conflicts list)",
                    );
                    return true;
                }
                self.merge.diff = Some(self.merge.selected);
                self.merge.scroll = 0;
            }
            Action::Open => {
                let Some(row) = self.bundles.selected_row() else {
                    self.say(Level::Info, "nothing selected");
                    return true;
                };
                if !row.is_bundle() {
                    let why = match &row.verify {
                        VerifyState::NotBundle(r) => r.clone(),
                        _ => "it has not been read yet".into(),
                    };
                    self.say(
                        Level::Warning,
                        format!("{} is not a bundle: {why}", row.file_name()),
                    );
                    return true;
                }
                let path = row.path.clone();
                self.open_chain(path);
            }
            Action::Rescan => {
                for r in &mut self.bundles.rows {
                    r.stamp.modified = None;
                }
                self.poll_dir();
                self.say(Level::Info, "rescanning the directory");
            }
            Action::Reverify => {
                let Some(path) = self.bundles.selected_row().map(|r| r.path.clone()) else {
                    return false;
                };
                if let Some(r) = self.bundles.rows.iter_mut().find(|r| r.path == path) {
                    if r.is_bundle() && !matches!(r.verify, VerifyState::Running(_)) {
                        r.verify = VerifyState::Pending;
                        self.examine_queue.push_back(path);
                        self.pump_examine();
                    }
                }
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
            Action::DetailDown => match self.screen {
                ScreenId::Scheduler => self.scheduler.detail_scroll += 3,
                ScreenId::Merge => self.merge.scroll += 3,
                _ => self.chain.detail_scroll = self.chain.detail_scroll.saturating_add(3),
            },
            Action::DetailUp => match self.screen {
                ScreenId::Scheduler => {
                    self.scheduler.detail_scroll = self.scheduler.detail_scroll.saturating_sub(3)
                }
                ScreenId::Merge => self.merge.scroll = self.merge.scroll.saturating_sub(3),
                _ => self.chain.detail_scroll = self.chain.detail_scroll.saturating_sub(3),
            },
            Action::ToggleMark => {
                if self.bundles.toggle_mark() {
                    self.bundles.move_by(1);
                } else {
                    self.say(
                        Level::Info,
                        "only bundles can be marked for a merge preview",
                    );
                }
            }
            Action::MergePreview => {
                let inputs = self.bundles.merge_inputs();
                if inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no bundle selected: Space marks bundles, m previews their merge",
                    );
                    return true;
                }
                self.merge.tab = 0;
                self.merge.selected = 0;
                self.merge.scroll = 0;
                self.start_plan(inputs, false);
                self.screen = ScreenId::Merge;
            }
            Action::PrevTab | Action::NextTab => {
                let d = if a == Action::PrevTab { -1 } else { 1 };
                if self.screen == ScreenId::Scheduler {
                    self.scheduler.switch_tenant(d);
                    self.load_snapshots();
                } else {
                    self.merge.switch_tab(d);
                }
            }
            Action::Replan if self.screen == ScreenId::Scheduler => self.load_scheduler(),
            Action::Replan => {
                if self.merge.inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no bundles chosen: mark them on the Bundles screen (1)",
                    );
                    return true;
                }
                let inputs = self.merge.inputs.clone();
                self.start_plan(inputs, false);
            }
            Action::Import => {
                if self.merge.is_busy() {
                    self.say(Level::Info, "wait for the running plan or import");
                    return true;
                }
                self.confirm_import();
            }
            Action::ForceImport => {
                if self.merge.is_busy() || self.merge.inputs.is_empty() {
                    self.say(
                        Level::Info,
                        "no finished plan to force: mark bundles and press m first",
                    );
                    return true;
                }
                self.say(Level::Info, "planning with --force…");
                let inputs = self.merge.inputs.clone();
                self.start_plan(inputs, true);
            }
            Action::VerifyChain => {
                if self.scheduler.verify.is_some() {
                    self.say(Level::Info, "a verification is already running");
                    return true;
                }
                self.start_chain_verify();
            }
            Action::Prove => self.start_prove(),
            Action::ToggleSnapshots => {
                self.scheduler.show_snapshots = !self.scheduler.show_snapshots;
                self.scheduler.detail_scroll = 0;
                if self.scheduler.show_snapshots {
                    self.load_snapshots();
                }
            }
            Action::PrevPane => self.keys.pane = KeysPane::Local,
            Action::NextPane => self.keys.pane = KeysPane::Trusted,
            Action::CreateKey => {
                self.overlay = Some(Overlay::KeyName {
                    input: self.keys.fresh_name(),
                })
            }
            Action::TrustKey => {
                let Some(k) = self.keys.selected_local().cloned() else {
                    self.say(Level::Info, "no local key selected (c generates one)");
                    return true;
                };
                let Some(public_path) = k.public_path.clone() else {
                    self.say(
                        Level::Warning,
                        format!("key {} has no public key file", k.name),
                    );
                    return true;
                };
                let store = self.config.trust_store.display().to_string();
                self.confirm(
                    "Trust this key?",
                    vec![
                        format!("Add key {} to the trust store", k.name),
                        format!("  key id {}", k.key_id.clone().unwrap_or_default()),
                        format!("  store  {store}"),
                        "Bundles signed by it will verify as trusted.".into(),
                    ],
                    PendingOp::Key(KeyOp::Trust {
                        public_path,
                        name: k.name,
                    }),
                );
            }
            Action::UntrustKey => {
                let Some(k) = self.keys.selected_trusted().cloned() else {
                    self.say(
                        Level::Info,
                        "no trusted key selected (→ focuses the trusted keys)",
                    );
                    return true;
                };
                self.confirm(
                    "Untrust this key?",
                    vec![
                        format!("Remove {} ({}) from the trust store.", k.name, k.key_id),
                        "Bundles it signed will then fail verification with signer-untrusted."
                            .into(),
                    ],
                    PendingOp::Key(KeyOp::Untrust { name: k.name }),
                );
            }
            Action::SignBundle => {
                let Some(row) = self.selected_bundle() else {
                    self.say(
                        Level::Info,
                        "select a bundle on the Bundles screen (1) first",
                    );
                    return true;
                };
                let bundle = row.path.clone();
                let file = row.file_name();
                let existing = match row.listing.as_ref().map(|l| &l.kind) {
                    Some(ListingKind::Bundle { signed_by, .. }) => signed_by.clone(),
                    _ => None,
                };
                let Some(k) = self.keys.selected_local().cloned() else {
                    self.say(Level::Info, "no local key selected (c generates one)");
                    return true;
                };
                let Some(private_path) = k.private_path.clone() else {
                    self.say(
                        Level::Warning,
                        format!("key {} has no private key file", k.name),
                    );
                    return true;
                };
                let mut lines = vec![
                    format!("Sign {file} with key {}", k.name),
                    format!("  key id {}", k.key_id.clone().unwrap_or_default()),
                    "The file is rewritten in place (atomically) with signature and signedBy."
                        .into(),
                ];
                if let Some(old) = existing {
                    lines.push(format!(
                        "It is already signed by {old}: that signature will be OVERWRITTEN."
                    ));
                }
                self.confirm(
                    "Sign this bundle?",
                    lines,
                    PendingOp::Key(KeyOp::Sign {
                        bundle,
                        private_path,
                    }),
                );
            }
            Action::CycleStatus => {
                self.outbox.filter = (self.outbox.filter + 1) % outbox_screen::FILTERS.len();
                self.outbox.selected = 0;
                self.load_outbox();
            }
            Action::Replay => {
                if self.outbox.replay.is_some() {
                    self.say(Level::Info, "a replay is already running");
                    return true;
                }
                let (queued, due) = self
                    .outbox
                    .counts
                    .as_ref()
                    .map(|c| (c.queued, c.due))
                    .unwrap_or((0, 0));
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
                    return true;
                };
                let check = if a == Action::RetryEnvelope {
                    e.status.check_retry()
                } else {
                    e.status.check_cancel()
                };
                if let Err(why) = check {
                    self.say(Level::Warning, format!("envelope {}: {why}", e.id));
                    return true;
                }
                let what = format!("{} {} ({})", e.method, e.path, e.status.as_str());
                if a == Action::RetryEnvelope {
                    self.confirm(
                        "Retry this envelope?",
                        vec![
                            format!("Queue envelope {} again:", e.id),
                            format!("  {what}"),
                            "The next replay sends it with the same Idempotency-Key.".into(),
                        ],
                        PendingOp::Outbox(OutboxOp::Retry { id: e.id }),
                    );
                } else {
                    self.confirm(
                        "Cancel this envelope?",
                        vec![
                            format!("Cancel envelope {}:", e.id),
                            format!("  {what}"),
                            "It will never be sent. This cannot be undone.".into(),
                        ],
                        PendingOp::Outbox(OutboxOp::Cancel { id: e.id }),
                    );
                }
            }
            Action::ExportOutbox => {
                let Some(path) = self.config.outbox.clone() else {
                    return true;
                };
                let stamp = crate::core::time::now_rfc3339().replace([':', '.'], "-");
                let output = path.with_file_name(format!("outbox-export-{stamp}.json"));
                self.run_outbox_op(OutboxOp::Export { output });
            }
            Action::CheckSignature => {
                let Some(row) = self.selected_bundle() else {
                    self.say(
                        Level::Info,
                        "select a bundle on the Bundles screen (1) first",
                    );
                    return true;
                };
                let bundle = row.path.clone();
                self.run_key_op(KeyOp::Check { bundle });
            }
        }
        if self.screen == ScreenId::Scheduler {
            self.pump_scheduler_page();
        }
        true
    }

    fn page(&self) -> usize {
        match self.screen {
            ScreenId::Bundles => self.bundles.page.max(1),
            ScreenId::Chain => self.chain.page.max(1),
            ScreenId::Keys => 10,
            ScreenId::Outbox => self.outbox.page.max(1),
            ScreenId::Merge => self.merge.page.max(1),
            ScreenId::Scheduler => self.scheduler.page.max(1),
        }
    }

    fn move_by(&mut self, d: isize) {
        match self.screen {
            ScreenId::Bundles => self.bundles.move_by(d),
            ScreenId::Chain => self.chain.move_by(d),
            ScreenId::Keys => self.keys.move_by(d),
            ScreenId::Outbox => self.outbox.move_by(d),
            ScreenId::Merge => self.merge.move_by(d),
            ScreenId::Scheduler => {
                self.scheduler.move_by(d);
                self.pump_scheduler_page();
            }
        }
    }

    /// True while background work is running whose progress is on screen.
    pub fn busy(&self) -> bool {
        self.chain.is_loading()
            || self.outbox.replay.is_some()
            || self.merge.is_busy()
            || self.scheduler.verify.is_some()
            || self
                .bundles
                .rows
                .iter()
                .any(|r| matches!(r.verify, VerifyState::Running(_)))
    }

    // ---- drawing -------------------------------------------------------------------------------

    pub fn draw(&mut self, f: &mut Frame) {
        let area = f.area();
        f.render_widget(
            ratatui::widgets::Block::default().style(self.theme.base),
            area,
        );
        let [title, body, status] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(area);
        let dir = self.config.dir.display().to_string();
        let right = match self.screen {
            ScreenId::Bundles => format!("{} ", crate::text::visible(&dir)),
            ScreenId::Chain => self
                .chain
                .path()
                .map(|p| format!("{} ", crate::text::visible(&p.display().to_string())))
                .unwrap_or_default(),
            ScreenId::Keys => String::new(),
            ScreenId::Merge | ScreenId::Scheduler => self
                .config
                .db
                .as_ref()
                .map(|p| format!("store {} ", crate::text::visible(&p.display().to_string())))
                .unwrap_or_default(),
            ScreenId::Outbox => {
                format!("upstream {} ", crate::text::visible(&self.config.upstream))
            }
        };
        bars::title_bar(f, title, &self.theme, self.screen, &right);
        let theme = self.theme.clone();
        match self.screen {
            ScreenId::Bundles => self.bundles.draw(f, body, &theme, &dir),
            ScreenId::Chain => self.chain.draw(f, body, &theme),
            ScreenId::Keys => {
                let bundle = self
                    .bundles
                    .selected_row()
                    .filter(|r| r.is_bundle())
                    .map(|r| (r.path.clone(), r.signer()));
                self.keys.draw(
                    f,
                    body,
                    &theme,
                    &self.config.keys_dir,
                    &self.config.trust_store,
                    bundle.as_ref().map(|(p, s)| (p, s.clone())),
                );
            }
            ScreenId::Outbox => {
                let path = self.config.outbox.clone().unwrap_or_default();
                self.outbox.draw(f, body, &theme, &path);
            }
            ScreenId::Merge => self.merge.draw(f, body, &theme),
            ScreenId::Scheduler => {
                let db = self.config.db.clone();
                self.scheduler.draw(f, body, &theme, db.as_deref());
            }
        }
        let context = match self.screen {
            ScreenId::Bundles => self.bundles.summary(),
            ScreenId::Chain => match self.chain.index() {
                Some(i) => format!(
                    "entry {} of {} · node {}",
                    self.chain.selected,
                    i.logs
                        .get(self.chain.log)
                        .map(|l| l.entries.len())
                        .unwrap_or(0),
                    i.logs
                        .get(self.chain.log)
                        .map(|l| crate::text::visible(&l.node_id).into_owned())
                        .unwrap_or_default()
                ),
                None => String::new(),
            },
            ScreenId::Outbox => match &self.outbox.counts {
                Some(c) => format!(
                    "{} envelope(s): {} queued ({} due), {} conflict, {} failed",
                    c.total(),
                    c.queued,
                    c.due,
                    c.conflict,
                    c.failed
                ),
                None => String::new(),
            },
            ScreenId::Merge => match (&self.merge.state, self.merge.diff) {
                (_, Some(_)) => "payload diff: ≠ marks changed lines · Esc closes".to_string(),
                (MergeState::Ready(p), None) => format!(
                    "{} new, {} duplicate(s), {} conflict(s), {} dropped",
                    p.totals.new, p.totals.duplicates, p.totals.conflicts, p.totals.dropped
                ),
                (MergeState::Planning(_), _) => "planning…".into(),
                _ => "Space marks bundles on the Bundles screen, m previews".into(),
            },
            ScreenId::Scheduler => match self.scheduler.current() {
                Some(t) => format!(
                    "entry {} of {} · tenant {}",
                    self.scheduler.selected,
                    t.length,
                    crate::text::visible(&t.tenant)
                ),
                None => String::new(),
            },
            ScreenId::Keys => format!(
                "{} local key(s), {} trusted",
                self.keys.local.len(),
                self.keys.trusted.len()
            ),
        };
        bars::status_bar(
            f,
            status,
            &self.theme,
            self.screen,
            self.config.read_only,
            self.message.as_ref(),
            &context,
        );
        match &self.overlay {
            Some(Overlay::Help { filter, scroll }) => overlay::draw_help(
                f,
                body,
                &self.theme,
                self.screen,
                self.config.read_only,
                filter,
                *scroll,
            ),
            Some(Overlay::Palette { input, selected }) => overlay::draw_palette(
                f,
                body,
                &self.theme,
                self.screen,
                self.config.read_only,
                input,
                *selected,
            ),
            Some(Overlay::Confirm { title, lines, .. }) => {
                overlay::draw_confirm(f, body, &self.theme, title, lines)
            }
            Some(Overlay::KeyName { input }) => {
                overlay::draw_prompt(f, body, &self.theme, "Name of the new key", input)
            }
            None => {}
        }
    }
}

/// The engine's import options for the console: this machine's node id, the console's trust set,
/// the default batch size and clock skew; `force` is `--force`.
fn import_options<'a>(
    trust: &'a crate::core::trust::TrustSet,
    force: bool,
    progress: Arc<crate::core::import::ImportProgress>,
) -> crate::core::import::ImportOptions<'a> {
    let mut opts = crate::core::import::ImportOptions::new(crate::core::paths::node_id(None));
    opts.force = force;
    opts.trust = Some(trust);
    opts.progress = Some(progress);
    opts
}

/// Drives the app until it quits: terminal events, background results and timers.
pub async fn run_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    inbox: &mut TaskInbox,
) -> std::io::Result<()> {
    use futures_util::{FutureExt, StreamExt};
    let mut events = crossterm::event::EventStream::new();
    let mut progress = tokio::time::interval(std::time::Duration::from_millis(100));
    progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut poll = tokio::time::interval(std::time::Duration::from_secs(2));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    loop {
        if dirty {
            terminal.draw(|f| app.draw(f))?;
            dirty = false;
        }
        if app.quit {
            return Ok(());
        }
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(ev)) => {
                    dirty |= app.handle_event(ev);
                    // Drain whatever else is already queued before drawing again.
                    while let Some(Some(Ok(ev))) = events.next().now_or_never() {
                        dirty |= app.handle_event(ev);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            Some(msg) = inbox.rx.recv() => {
                dirty |= app.handle_msg(msg);
                while let Ok(msg) = inbox.rx.try_recv() {
                    dirty |= app.handle_msg(msg);
                }
            }
            _ = progress.tick(), if app.busy() => dirty |= app.on_tick(),
            _ = poll.tick() => app.on_poll(),
        }
    }
}

/// Applies every background result until no work is left (tests, screenshots, benchmarks).
pub fn settle(app: &mut App, inbox: &mut TaskInbox) {
    loop {
        match inbox.rx.try_recv() {
            Ok(msg) => {
                app.handle_msg(msg);
            }
            Err(_) if inbox.in_flight() == 0 && inbox.rx.is_empty() => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}
