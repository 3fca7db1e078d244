//! The console's state and loop: select over terminal events, background results and timers;
//! redraw only when something changed.
//!
//! `App` and its screens live here; input, background results and each screen's operations are
//! `impl App` blocks in the submodules.

mod audit_ops;
mod bundles_ops;
mod chain_ops;
mod copy_ops;
mod input;
mod keys_ops;
mod merge_ops;
mod notify_ops;
mod outbox_ops;
mod results;
mod scheduler_ops;
mod search_ops;
mod wal_ops;

use super::action::ScreenId;
use super::copy;
use super::screens::activity::ActivityScreen;
use super::screens::bundles::{BundleRow, BundlesScreen, VerifyState};
use super::screens::chain::{ChainScreen, ChainState};
use super::screens::keys::{KeyOp, KeysScreen};
use super::screens::ledger::LedgerScreen;
use super::screens::merge::{MergeScreen, MergeState};
use super::screens::notifications::NotificationsScreen;
use super::screens::outbox::{OutboxOp, OutboxScreen};
use super::screens::scheduler::SchedulerScreen;
use super::screens::wal::WalScreen;
use super::store_ref::StoreRef;
use super::tasks::{SharedTrustSet, TaskInbox, Tasks};
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
    /// A WAL to open on the WAL screen (`console --wal FILE`).
    pub wal: Option<PathBuf>,
}

/// A state-changing operation waiting for confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingOp {
    Key(KeyOp),
    Outbox(OutboxOp),
    /// Retry a dead-lettered notification delivery.
    NotifyRetry(i64),
    Replay,
    /// Import the previewed bundles (`force`: `--force`).
    Import {
        force: bool,
    },
    /// Snapshot the tenant chain now.
    Snapshot {
        tenant: String,
    },
    RecoverWal,
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
        /// Rows scrolled down (the text may not fit a small terminal).
        scroll: usize,
    },
    /// The `/` search prompt of a list or text panel.
    Search {
        input: String,
    },
    /// The name of a new key.
    KeyName {
        input: String,
    },
}

/// How long a status message stays before the key hints come back.
pub const MESSAGE_TTL: std::time::Duration = std::time::Duration::from_secs(6);

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
    pub notifications: NotificationsScreen,
    pub merge: MergeScreen,
    pub scheduler: SchedulerScreen,
    pub activity: ActivityScreen,
    pub wal: WalScreen,
    pub ledger: LedgerScreen,
    pub overlay: Option<Overlay>,
    pub message: Option<StatusMessage>,
    /// The active `/` search of the current screen (lowercase).
    pub search: Option<String>,
    /// Where `y` also writes what it copies (OSC 52 may not reach a clipboard).
    pub clipboard_file: PathBuf,
    /// Copied text waiting to be sent to the terminal as OSC 52.
    pub osc52: Option<String>,
    pub quit: bool,
    tasks: Tasks,
    trust: SharedTrustSet,
    examine_queue: VecDeque<PathBuf>,
    examining: usize,
    chain_token: u64,
    /// Chain keys typed while the bundle was being indexed.
    chain_queue: Vec<super::action::Action>,
    polling: bool,
    /// Progress values at the last draw (to redraw only when they move).
    last_progress: u64,
}

impl App {
    pub fn new(config: ConsoleConfig, theme: Theme, tasks: Tasks, trust: SharedTrustSet) -> App {
        let mut wal = WalScreen::default();
        if let Some(p) = &config.wal {
            wal.open(p);
        }
        let screen = if config.wal.is_some() {
            ScreenId::Wal
        } else {
            ScreenId::Bundles
        };
        App {
            config,
            theme,
            screen,
            bundles: BundlesScreen::default(),
            chain: ChainScreen::default(),
            keys: KeysScreen::default(),
            outbox: OutboxScreen::default(),
            notifications: NotificationsScreen::default(),
            merge: MergeScreen::default(),
            scheduler: SchedulerScreen::default(),
            activity: ActivityScreen::default(),
            wal,
            ledger: LedgerScreen::default(),
            overlay: None,
            message: None,
            search: None,
            clipboard_file: crate::core::paths::data_dir().join("clipboard.txt"),
            osc52: None,
            quit: false,
            tasks,
            trust,
            examine_queue: VecDeque::new(),
            examining: 0,
            chain_token: 0,
            chain_queue: Vec::new(),
            polling: false,
            last_progress: 0,
        }
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        self.message = Some(StatusMessage {
            level,
            text: text.into(),
            at: std::time::Instant::now(),
        });
    }

    /// The store (read-only with `--read-only`), or why there is none.
    fn db(&self) -> Result<StoreRef, String> {
        self.config
            .db
            .clone()
            .map(|path| StoreRef {
                path,
                read_only: self.config.read_only,
            })
            .ok_or_else(|| "no store configured (--db PATH)".to_string())
    }

    pub(super) fn confirm(&mut self, title: &str, lines: Vec<String>, op: PendingOp) {
        self.overlay = Some(Overlay::Confirm {
            title: title.to_string(),
            lines,
            op,
            scroll: 0,
        });
    }

    /// The bundle selected on the Bundles screen, if it is a bundle.
    fn selected_bundle(&self) -> Option<&BundleRow> {
        self.bundles.selected_row().filter(|r| r.is_bundle())
    }

    /// Timer: poll the directory, refresh the outbox while it is on screen, and let a status
    /// message expire. True when the screen must be redrawn.
    pub fn on_poll(&mut self) -> bool {
        self.poll_dir();
        if self.screen == ScreenId::Outbox && self.outbox.replay.is_none() {
            self.load_outbox();
        }
        self.expire_message(std::time::Instant::now())
    }

    /// Drops a status message older than [`MESSAGE_TTL`] (it hides the key hints); true if one was
    /// dropped.
    pub fn expire_message(&mut self, now: std::time::Instant) -> bool {
        let old = self
            .message
            .as_ref()
            .is_some_and(|m| now.saturating_duration_since(m.at) >= MESSAGE_TTL);
        if old {
            self.message = None;
        }
        old
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
        if let Some(run) = &self.outbox.replay {
            // The counts move with every envelope and the elapsed time with every frame.
            let p = run.progress.lock().map(|p| p.clone()).unwrap_or_default();
            progress = progress
                .wrapping_add(p.total << 40)
                .wrapping_add(p.attempted << 20)
                .wrapping_add(run.started.elapsed().as_millis() as u64 / 100);
        }
        progress = progress.wrapping_add(self.wal.progress());
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
        if s != self.screen {
            // A message about the screen being left would hide the new screen's key hints.
            self.message = None;
            self.search = None;
        }
        if self.screen == ScreenId::Merge && s != ScreenId::Merge {
            self.merge.release();
            crate::tui::widgets::return_freed_memory();
        }
        if s == ScreenId::Merge && self.merge.released {
            self.merge.released = false;
            let inputs = self.merge.inputs.clone();
            self.start_plan(inputs, false);
        }
        if s == ScreenId::Scheduler {
            self.load_scheduler();
        }
        if s == ScreenId::Outbox {
            self.load_outbox();
        }
        if s == ScreenId::Notifications {
            self.load_notifications();
        }
        if s == ScreenId::Activity {
            self.load_activity();
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
            ScreenId::Activity => self.activity.page.max(1),
            ScreenId::Ledger => self.ledger.page.max(1),
            ScreenId::Outbox => self.outbox.page.max(1),
            ScreenId::Notifications => self.notifications.page.max(1),
            ScreenId::Merge => self.merge.page.max(1),
            ScreenId::Scheduler => self.scheduler.page.max(1),
            ScreenId::Wal => self.wal.page.max(1),
        }
    }

    fn move_by(&mut self, d: isize) {
        match self.screen {
            ScreenId::Bundles => self.bundles.move_by(d),
            ScreenId::Chain => self.chain.move_by(d),
            ScreenId::Keys => self.keys.move_by(d),
            ScreenId::Activity => self.activity.move_by(d),
            ScreenId::Ledger => self.ledger.move_by(d),
            ScreenId::Outbox => self.outbox.move_by(d),
            ScreenId::Notifications => self.notifications.move_by(d),
            ScreenId::Merge => self.merge.move_by(d),
            ScreenId::Scheduler => {
                self.scheduler.move_by(d);
                self.pump_scheduler_page();
            }
            ScreenId::Wal => self.wal.move_by(d),
        }
    }

    /// True while background work is running whose progress is on screen.
    pub fn busy(&self) -> bool {
        self.chain.is_loading()
            || self.outbox.replay.is_some()
            || self.merge.is_busy()
            || self.scheduler.verify.is_some()
            || self.wal.is_indexing()
            || self
                .bundles
                .rows
                .iter()
                .any(|r| matches!(r.verify, VerifyState::Running(_)))
    }

    /// The status bar's left side when there is no message: where the user is on the screen.
    fn context_line(&self) -> String {
        match self.screen {
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
            ScreenId::Notifications => self.notifications.summary(),
            ScreenId::Wal => self.wal.summary(),
            ScreenId::Ledger => self.ledger.summary(),
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
                (MergeState::Ready(p), None) => {
                    let mut line = format!(
                        "{} new, {} duplicate(s), {} conflict(s), {} dropped",
                        p.totals.new, p.totals.duplicates, p.totals.conflicts, p.totals.dropped
                    );
                    if let Some(note) = self.merge.cut_note() {
                        line.push_str(" · ");
                        line.push_str(&note);
                    }
                    line
                }
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
            ScreenId::Activity => self.activity.context_line(),
            ScreenId::Keys => format!(
                "{} local key(s), {} trusted",
                self.keys.local.len(),
                self.keys.trusted.len()
            ),
        }
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
            ScreenId::Activity | ScreenId::Notifications => self
                .config
                .db
                .as_ref()
                .map(|p| format!("store {} ", crate::text::visible(&p.display().to_string())))
                .unwrap_or_default(),
            ScreenId::Merge | ScreenId::Scheduler => self
                .config
                .db
                .as_ref()
                .map(|p| format!("store {} ", crate::text::visible(&p.display().to_string())))
                .unwrap_or_default(),
            ScreenId::Outbox => {
                format!("upstream {} ", crate::text::visible(&self.config.upstream))
            }
            ScreenId::Wal => self
                .wal
                .path()
                .map(|p| format!("{} ", crate::text::visible(&p.display().to_string())))
                .unwrap_or_default(),
        };
        bars::title_bar(f, title, &self.theme, self.screen, &right);
        let theme = self.theme.clone();
        match self.screen {
            ScreenId::Bundles => self.bundles.draw(f, body, &theme, &dir),
            ScreenId::Chain => self.chain.draw(f, body, &theme),
            ScreenId::Activity => self.activity.draw(f, body, &theme),
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
            ScreenId::Notifications => self.notifications.draw(f, body, &theme),
            ScreenId::Wal => self.wal.draw(f, body, &theme),
            ScreenId::Ledger => self.ledger.draw(f, body, &theme),
            ScreenId::Scheduler => {
                let db = self.config.db.clone();
                self.scheduler.draw(f, body, &theme, db.as_deref());
            }
        }
        let context = self.context_line();
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
            Some(Overlay::Confirm {
                title,
                lines,
                scroll,
                ..
            }) => overlay::draw_confirm(f, body, &self.theme, title, lines, *scroll),
            Some(Overlay::Search { input }) => {
                overlay::draw_prompt(f, body, &self.theme, "Search (n/N next/previous)", input)
            }
            Some(Overlay::KeyName { input }) => {
                overlay::draw_prompt(f, body, &self.theme, "Name of the new key", input)
            }
            None => {}
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// The user quit (q, Ctrl-C) or the terminal closed its input.
    Quit,
    /// A termination signal (SIGTERM, SIGHUP, SIGQUIT) arrived: its number.
    Signal(i32),
}

/// The termination signals the console catches so that it can restore the terminal first.
struct ExitSignals {
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl ExitSignals {
    fn install() -> std::io::Result<ExitSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(ExitSignals {
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
        })
    }

    /// The next termination signal's number.
    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.hup.recv() => libc::SIGHUP,
            _ = self.quit.recv() => libc::SIGQUIT,
        }
    }
}

/// How often progress is redrawn while background work runs (one frame).
const FRAME: std::time::Duration = std::time::Duration::from_millis(50);

/// Drives the app until it quits: terminal events, background results, signals and timers.
///
/// Every source is awaited with the task's own waker (never `now_or_never`, whose no-op waker
/// would leave crossterm's reader thread waking nobody: keys then waited for the next timer). A
/// key is handled the moment it arrives, keys already queued are handled with it, and the screen
/// is drawn once per batch when something changed.
pub async fn run_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    inbox: &mut TaskInbox,
) -> std::io::Result<LoopEnd> {
    use futures_util::StreamExt;
    let mut events = crossterm::event::EventStream::new();
    let mut signals = ExitSignals::install()?;
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut poll = tokio::time::interval(std::time::Duration::from_secs(2));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    loop {
        if dirty {
            terminal.draw(|f| app.draw(f))?;
            dirty = false;
        }
        if let Some(text) = app.osc52.take() {
            copy::send_osc52(&mut std::io::stdout(), &text)?;
        }
        if app.quit {
            return Ok(LoopEnd::Quit);
        }
        tokio::select! {
            biased;
            sig = signals.next() => return Ok(LoopEnd::Signal(sig)),
            ev = events.next() => match ev {
                Some(Ok(ev)) => {
                    dirty |= app.handle_event(ev);
                    // Keys already queued (a paste, key repeat) are handled before drawing; the
                    // zero-timeout poll only looks, so the stream's waker stays registered.
                    while !app.quit && crossterm::event::poll(std::time::Duration::ZERO)? {
                        match events.next().await {
                            Some(Ok(ev)) => dirty |= app.handle_event(ev),
                            Some(Err(e)) => return Err(e),
                            None => return Ok(LoopEnd::Quit),
                        }
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Ok(LoopEnd::Quit),
            },
            Some(msg) = inbox.rx.recv() => {
                dirty |= app.handle_msg(msg);
                while let Ok(msg) = inbox.rx.try_recv() {
                    dirty |= app.handle_msg(msg);
                }
            }
            _ = frame.tick(), if app.busy() => dirty |= app.on_tick(),
            _ = poll.tick() => dirty |= app.on_poll(),
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
