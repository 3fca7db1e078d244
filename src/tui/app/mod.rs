//! The console's state and loop: select over terminal events, background results and timers;
//! redraw only when something changed.
//!
//! `App` and its screens live here; input, background results and each screen's operations are
//! `impl App` blocks in the submodules.

mod audit_ops;
mod bundles_ops;
mod chain_ops;
mod copy_ops;
mod inbox_ops;
mod input;
mod jump_ops;
mod keys_ops;
mod ledger_ops;
mod merge_ops;
mod notify_ops;
mod outbox_ops;
mod results;
mod scheduler_load;
mod scheduler_ops;
mod search_ops;
mod triage_ops;
mod wal_ops;

use super::action::ScreenId;
use super::copy;
use super::screen::{Ctx, Screen};
use super::screens::activity::ActivityScreen;
use super::screens::bundles::{BundleRow, BundlesScreen};
use super::screens::chain::ChainScreen;
use super::screens::keys::{KeyOp, KeysScreen};
use super::screens::ledger::LedgerScreen;
use super::screens::merge::MergeScreen;
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

pub use super::config::ConsoleConfig;

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
    /// File an inbox file away (`console --inbox`), as it was when verified.
    Inbox {
        path: PathBuf,
        stamp: crate::tui::tasks::FileStamp,
        disposition: crate::core::inbox::Disposition,
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
    /// The operator's decision for a triage report (`E`).
    Decision {
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
    /// The screens the user came from, most recent last (Esc goes back).
    pub history: Vec<ScreenId>,
    /// Where the bundle being opened by a jump should land.
    chain_target: Option<jump_ops::ChainTarget>,
    /// The tenant and chain position a jump to the Scheduler screen lands on.
    scheduler_target: Option<(String, u64)>,
    /// The inbox watcher in inbox mode (`console --inbox DIR`).
    drop_inbox: Option<crate::tui::inbox_watch::InboxWatch>,
    /// The background `/` search or `:goto job` of the screen shown, and where `n` continues.
    scans: search_ops::Scans,
    /// The help overlay as last drawn: its furthest scroll (the last page) and the rows a page
    /// shows, so that scrolling stops at the last row instead of leaving an empty box.
    help_view: (usize, usize),
}

/// Screens remembered for Esc.
const HISTORY_MAX: usize = 64;

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
        let because = config.read_only_because.clone();
        let mut app = App {
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
            help_view: (usize::MAX, 10),
            chain_queue: Vec::new(),
            polling: false,
            last_progress: 0,
            history: Vec::new(),
            chain_target: None,
            scheduler_target: None,
            drop_inbox: None,
            scans: search_ops::Scans::default(),
        };
        if let Some(why) = because {
            app.say(Level::Warning, why);
        }
        app
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        self.message = Some(StatusMessage {
            level,
            text: text.into(),
            at: std::time::Instant::now(),
        });
    }

    /// Which keys this console has: none that change state with `--read-only`, the inbox
    /// decision keys only with `--inbox`.
    fn key_mode(&self) -> crate::tui::action::Mode {
        crate::tui::action::Mode {
            read_only: self.config.read_only,
            inbox: self.drop_inbox.is_some(),
        }
    }

    /// What this console verifies and imports under: the signature policy of its trust store (and
    /// the environment's; an unreadable setting fails closed) and the configured clock-skew
    /// tolerance. Read when each verification starts, so a policy changed meanwhile holds.
    fn verify_policy(&self) -> crate::core::verify::VerifyPolicy {
        let required =
            crate::core::trust::policy::effective_policy_in(false, &self.config.trust_store)
                .map(|p| p.require_signature)
                .unwrap_or(true);
        crate::core::verify::VerifyPolicy {
            require_signature: required,
            max_clock_skew: self.config.max_clock_skew,
        }
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
        let progress = ScreenId::ALL.iter().fold(0u64, |acc, id| {
            acc.wrapping_add(self.screen_ref(*id).progress())
        });
        let changed = progress != self.last_progress;
        self.last_progress = progress;
        changed
    }

    /// The screen `id`.
    pub fn screen_ref(&self, id: ScreenId) -> &dyn Screen {
        match id {
            ScreenId::Bundles => &self.bundles,
            ScreenId::Chain => &self.chain,
            ScreenId::Merge => &self.merge,
            ScreenId::Scheduler => &self.scheduler,
            ScreenId::Outbox => &self.outbox,
            ScreenId::Keys => &self.keys,
            ScreenId::Activity => &self.activity,
            ScreenId::Notifications => &self.notifications,
            ScreenId::Wal => &self.wal,
            ScreenId::Ledger => &self.ledger,
        }
    }

    /// The screen `id`, to change.
    pub fn screen_mut(&mut self, id: ScreenId) -> &mut dyn Screen {
        match id {
            ScreenId::Bundles => &mut self.bundles,
            ScreenId::Chain => &mut self.chain,
            ScreenId::Merge => &mut self.merge,
            ScreenId::Scheduler => &mut self.scheduler,
            ScreenId::Outbox => &mut self.outbox,
            ScreenId::Keys => &mut self.keys,
            ScreenId::Activity => &mut self.activity,
            ScreenId::Notifications => &mut self.notifications,
            ScreenId::Wal => &mut self.wal,
            ScreenId::Ledger => &mut self.ledger,
        }
    }

    /// The screen on display.
    pub fn current(&self) -> &dyn Screen {
        self.screen_ref(self.screen)
    }

    fn current_mut(&mut self) -> &mut dyn Screen {
        self.screen_mut(self.screen)
    }

    // ---- navigation ----------------------------------------------------------------------------

    /// Goes to screen `s`, remembering where the user was (Esc comes back).
    fn go(&mut self, s: ScreenId) {
        self.remember(s);
        self.enter(s);
    }

    /// Shows screen `s` as a jump (an open, a preview): remembered for Esc, nothing loaded.
    pub(super) fn show(&mut self, s: ScreenId) {
        self.remember(s);
        self.screen = s;
    }

    /// Pushes the current screen on the history when `next` is another one.
    fn remember(&mut self, next: ScreenId) {
        if next != self.screen {
            if self.history.len() >= HISTORY_MAX {
                self.history.remove(0);
            }
            self.history.push(self.screen);
        }
    }

    /// Esc: back to the screen the user came from (else Bundles); false on Bundles with no
    /// history.
    pub(super) fn go_back(&mut self) -> bool {
        while let Some(s) = self.history.pop() {
            if s != self.screen {
                self.enter(s);
                return true;
            }
        }
        if self.screen == ScreenId::Bundles {
            return false;
        }
        self.enter(ScreenId::Bundles);
        true
    }

    /// Shows screen `s` (loading what it shows) without touching the history.
    fn enter(&mut self, s: ScreenId) {
        if s != self.screen {
            // A message about the screen being left would hide the new screen's key hints.
            self.message = None;
            self.search = None;
            self.leave_scans();
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
            self.pump_ledger();
        }
        if s == ScreenId::Keys {
            self.keys
                .reload(&self.config.keys_dir, &self.config.trust_store);
        }
        self.screen = s;
    }

    fn page(&self) -> usize {
        self.current().page()
    }

    fn move_by(&mut self, d: isize) {
        self.current_mut().move_by(d);
        if self.screen == ScreenId::Scheduler {
            self.pump_scheduler_page();
        }
        self.pump_ledger();
    }

    /// True while background work is running whose progress is on screen.
    pub fn busy(&self) -> bool {
        ScreenId::ALL.iter().any(|id| self.screen_ref(*id).busy())
    }

    /// The status bar's left side when there is no message: where the user is on the screen.
    fn context_line(&self) -> String {
        self.current().context_line()
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
        let theme = self.theme.clone();
        let config = self.config.clone();
        let ctx = Ctx {
            theme: &theme,
            config: &config,
            // Only Keys shows it (finding it walks the filtered list).
            bundle: (self.screen == ScreenId::Keys)
                .then(|| self.selected_bundle().map(|r| (r.path.clone(), r.signer())))
                .flatten(),
        };
        let mut right = self.current().title_right(&ctx);
        if !self.bundles.marked.is_empty() {
            // On every screen: the marks stay while the user looks elsewhere.
            let marked = format!("◉ {} marked", self.bundles.marked.len());
            right = if right.is_empty() {
                format!("{marked} ")
            } else {
                format!("{marked} · {right}")
            };
        }
        bars::title_bar(f, title, &self.theme, self.screen, &right);
        if self.screen == ScreenId::Wal && self.wal.picker_shown() {
            // The list follows the Bundles screen's reading of the workspace as it goes on.
            self.refresh_wal_choices();
        }
        self.current_mut().draw(f, body, &ctx);
        let context = self.context_line();
        // Keys the screen says do not apply now are not hinted.
        let hidden: Vec<crate::tui::action::Action> =
            crate::tui::action::active(self.screen, self.key_mode())
                .filter(|b| b.in_bar && !self.current().hint_applies(b.action))
                .map(|b| b.action)
                .collect();
        bars::status_bar(
            f,
            status,
            &self.theme,
            self.screen,
            bars::BarMode {
                keys: self.key_mode(),
                hidden: &hidden,
            },
            self.message.as_ref(),
            &context,
        );
        match &self.overlay {
            Some(Overlay::Help { filter, scroll }) => {
                self.help_view = overlay::draw_help(
                    f,
                    body,
                    &self.theme,
                    self.screen,
                    self.key_mode(),
                    filter,
                    *scroll,
                )
            }
            Some(Overlay::Palette { input, selected }) => overlay::draw_palette(
                f,
                body,
                &self.theme,
                self.screen,
                self.key_mode(),
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
            Some(Overlay::Decision { input }) => overlay::draw_prompt(
                f,
                body,
                &self.theme,
                "Triage report: decision and note (e.g. reject tampered link; Enter writes)",
                input,
            ),
            Some(Overlay::KeyName { input }) => {
                overlay::draw_prompt(f, body, &self.theme, "Name of the new key", input)
            }
            None => {}
        }
        if self.theme.ascii {
            crate::tui::widgets::ascii::downgrade(f.buffer_mut());
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
    let mut was_busy = false;
    loop {
        // Background work that ended after the last frame tick (its progress unchanged since, or
        // polled rather than messaged) is drawn once more: the screen never keeps its last
        // "working" state.
        let busy = app.busy();
        dirty |= was_busy && !busy;
        was_busy = busy;
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
