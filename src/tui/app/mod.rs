//! The console's state and loop: select over terminal events, background results and timers;
//! redraw only when something changed.
//!
//! `App` and its screens live here; input, background results and each screen's operations are
//! `impl App` blocks in the submodules.

mod bundles_ops;
mod chain_ops;
mod input;
mod keys_ops;
mod merge_ops;
mod outbox_ops;
mod results;
mod scheduler_ops;

use super::action::ScreenId;
use super::screens::bundles::{BundleRow, BundlesScreen, VerifyState};
use super::screens::chain::{ChainScreen, ChainState};
use super::screens::keys::{KeyOp, KeysScreen};
use super::screens::ledger::LedgerScreen;
use super::screens::merge::{MergeScreen, MergeState};
use super::screens::outbox::{OutboxOp, OutboxScreen};
use super::screens::scheduler::SchedulerScreen;
use super::tasks::{TaskInbox, Tasks, TrustCheck};
use super::theme::Theme;
use super::widgets::bars::{self, Level, StatusMessage};
use super::widgets::overlay;
use ratatui::layout::{Constraint, Layout};
use ratatui::Frame;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

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
    pub ledger: LedgerScreen,
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
            ledger: LedgerScreen::default(),
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

    /// The store, or why there is none.
    fn db(&self) -> Result<PathBuf, String> {
        self.config
            .db
            .clone()
            .ok_or_else(|| "no store configured (--db PATH)".to_string())
    }

    pub(super) fn confirm(&mut self, title: &str, lines: Vec<String>, op: PendingOp) {
        self.overlay = Some(Overlay::Confirm {
            title: title.to_string(),
            lines,
            op,
        });
    }

    /// The bundle selected on the Bundles screen, if it is a bundle.
    fn selected_bundle(&self) -> Option<&BundleRow> {
        self.bundles.selected_row().filter(|r| r.is_bundle())
    }

    /// Timer: poll the directory, and refresh the outbox while it is on screen.
    pub fn on_poll(&mut self) {
        self.poll_dir();
        if self.screen == ScreenId::Outbox && self.outbox.replay.is_none() {
            self.load_outbox();
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

    // ---- navigation ----------------------------------------------------------------------------

    fn go(&mut self, s: ScreenId) {
        if s == ScreenId::Scheduler {
            self.load_scheduler();
        }
        if s == ScreenId::Outbox {
            self.load_outbox();
        }
        if s == ScreenId::Ledger {
            self.ledger.load(&self.config.dir);
        }
        if s == ScreenId::Keys {
            self.keys
                .reload(&self.config.keys_dir, &self.config.trust_store);
        }
        self.screen = s;
    }

    fn page(&self) -> usize {
        match self.screen {
            ScreenId::Bundles => self.bundles.page.max(1),
            ScreenId::Chain => self.chain.page.max(1),
            ScreenId::Keys => 10,
            ScreenId::Ledger => self.ledger.page.max(1),
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
            ScreenId::Ledger => self.ledger.move_by(d),
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
            ScreenId::Keys | ScreenId::Ledger => String::new(),
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
            ScreenId::Ledger => self.ledger.draw(f, body, &theme),
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
            ScreenId::Ledger => self.ledger.summary(),
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
