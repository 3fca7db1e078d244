//! The console's state and loop: select over terminal events, background results and timers;
//! redraw only when something changed.

use super::action::{self, Action, ScreenId};
use super::chain_index::ChainIndex;
use super::screens::bundles::{BundleRow, BundlesScreen, VerifyState};
use super::screens::chain::{ChainScreen, ChainState};
use super::screens::keys::{KeyOp, KeysPane, KeysScreen};
use super::screens::outbox::{self as outbox_screen, OutboxOp, OutboxScreen, ReplayRun};
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
        }
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
                        self.outbox.envelopes = list;
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
        if self.screen == ScreenId::Bundles && self.bundles.filter_editing {
            match k.code {
                KeyCode::Esc => {
                    self.bundles.filter_editing = false;
                    self.bundles.filter.clear();
                }
                KeyCode::Enter | KeyCode::Down | KeyCode::Up => {
                    self.bundles.filter_editing = false;
                }
                KeyCode::Backspace => {
                    self.bundles.filter.pop();
                }
                KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.bundles.filter.push(c);
                    self.bundles.selected = 0;
                }
                _ => return false,
            }
            self.bundles.clamp();
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
                ScreenId::Bundles if !self.bundles.filter.is_empty() => {
                    self.bundles.filter.clear();
                    self.bundles.clamp();
                }
                ScreenId::Bundles => {
                    if self.message.take().is_none() {
                        return false;
                    }
                }
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
            Action::Filter => {
                self.bundles.filter_editing = true;
                self.bundles.filter.clear();
            }
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page() as isize)),
            Action::PageDown => self.move_by(self.page() as isize),
            Action::Home => match self.screen {
                ScreenId::Bundles => self.bundles.selected = 0,
                ScreenId::Chain => self.chain.home(),
                ScreenId::Keys => self.keys.move_by(-(isize::MAX / 2)),
                ScreenId::Outbox => self.outbox.move_by(-(isize::MAX / 2)),
            },
            Action::End => match self.screen {
                ScreenId::Bundles => self.bundles.move_by(isize::MAX / 2),
                ScreenId::Chain => self.chain.end(),
                ScreenId::Keys => self.keys.move_by(isize::MAX / 2),
                ScreenId::Outbox => self.outbox.move_by(isize::MAX / 2),
            },
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
            Action::DetailDown => {
                self.chain.detail_scroll = self.chain.detail_scroll.saturating_add(3)
            }
            Action::DetailUp => {
                self.chain.detail_scroll = self.chain.detail_scroll.saturating_sub(3)
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
        true
    }

    fn page(&self) -> usize {
        match self.screen {
            ScreenId::Bundles => self.bundles.page.max(1),
            ScreenId::Chain => self.chain.page.max(1),
            ScreenId::Keys => 10,
            ScreenId::Outbox => self.outbox.page.max(1),
        }
    }

    fn move_by(&mut self, d: isize) {
        match self.screen {
            ScreenId::Bundles => self.bundles.move_by(d),
            ScreenId::Chain => self.chain.move_by(d),
            ScreenId::Keys => self.keys.move_by(d),
            ScreenId::Outbox => self.outbox.move_by(d),
        }
    }

    /// True while background work is running whose progress is on screen.
    pub fn busy(&self) -> bool {
        self.chain.is_loading()
            || self.outbox.replay.is_some()
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
