//! Input: terminal events (keys, mouse), overlay keys, list-filter keys, and [`App::apply`], which
//! routes an [`Action`] to the screen that owns it.

use super::{App, Overlay, PendingOp};
use crate::tui::action::{self, movement, Action, ScreenId};
use crate::tui::filter::FilterKey;
use crate::tui::screens::keys::KeyOp;
use crate::tui::widgets::bars::Level;
use crate::tui::widgets::overlay;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind};
use std::ops::ControlFlow;

/// Chain keys kept while a bundle is being indexed.
const CHAIN_QUEUE_MAX: usize = 32;

/// The query keys the help filter and the command palette share: typing and Backspace edit the
/// query and go back to the first row; Up and Down move the row, Down no further than `last`.
/// False for any other key (a control chord such as `C-u` types nothing).
fn edit_query(k: &KeyEvent, query: &mut String, row: &mut usize, last: usize) -> bool {
    if let Some(c) = crate::tui::filter::typed_char(k) {
        query.push(c);
        *row = 0;
        return true;
    }
    match k.code {
        KeyCode::Backspace => {
            query.pop();
            *row = 0;
        }
        KeyCode::Down => *row = (*row + 1).min(last),
        KeyCode::Up => *row = row.saturating_sub(1),
        _ => return false,
    }
    true
}

/// Keys that move within the chain view: kept while it is indexing instead of dropped.
fn queues_while_indexing(a: Action) -> bool {
    a.is_movement()
        || matches!(
            a,
            Action::NextFinding
                | Action::PrevFinding
                | Action::FirstFinding
                | Action::PrevNode
                | Action::NextNode
        )
}

impl App {
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

    pub(super) fn click(&mut self, col: u16, row: u16) -> bool {
        self.current_mut().click(col, row)
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
            let mut result = FilterKey::Ignored;
            self.bundles.refilter(|f| result = f.key(&k));
            return result != FilterKey::Ignored;
        }
        if self.screen == ScreenId::Outbox && self.outbox.text_filter.editing {
            match self.outbox.text_filter.key(&k) {
                FilterKey::Ignored => return false,
                FilterKey::Changed => self.outbox.refilter(),
                FilterKey::Done => {}
            }
            return true;
        }
        // A key this console does not have (an inbox key without --inbox, a state-changing
        // key with --read-only) still goes to `apply`, which says what it needs instead of
        // ignoring it.
        match action::lookup(self.screen, self.key_mode(), &k)
            .or_else(|| action::lookup(self.screen, action::Mode::ALL_KEYS, &k))
        {
            Some(a) => self.apply(a),
            None => false,
        }
    }

    pub(super) fn overlay_key(&mut self, ov: Overlay, k: KeyEvent) -> bool {
        match ov {
            Overlay::Confirm {
                title,
                lines,
                op,
                scroll,
            } => self.confirm_key(title, lines, op, scroll, k),
            Overlay::Search { input } => self.prompt_key(
                input,
                &k,
                |input| Overlay::Search { input },
                |app, input| {
                    let term = input.trim().to_lowercase();
                    app.search = (!term.is_empty()).then_some(term);
                    if app.search.is_some() {
                        app.search_step(true);
                    }
                },
            ),
            Overlay::Decision { input } => self.prompt_key(
                input,
                &k,
                |input| Overlay::Decision { input },
                |app, input| app.write_triage(&input),
            ),
            Overlay::KeyName { input } => self.prompt_key(
                input,
                &k,
                |input| Overlay::KeyName { input },
                |app, input| {
                    let name = input.trim().to_string();
                    app.run_key_op(KeyOp::Generate { name })
                },
            ),

            Overlay::Help { mut filter, scroll } => {
                // No further down than the last page of the rows (as last drawn).
                let rows = overlay::help_rows(self.screen, self.key_mode(), &filter).len();
                let (last, page) = self.help_view;
                let last = last.min(rows.saturating_sub(1));
                let mut scroll = scroll.min(last);
                let half = (page / 2).max(1);
                let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
                match k.code {
                    KeyCode::PageDown => scroll = (scroll + page.max(1)).min(last),
                    KeyCode::PageUp => scroll = scroll.saturating_sub(page.max(1)),
                    KeyCode::Char('d') if ctrl => scroll = (scroll + half).min(last),
                    KeyCode::Char('u') if ctrl => scroll = scroll.saturating_sub(half),
                    KeyCode::Esc => {
                        if filter.is_empty() {
                            self.overlay = None;
                            return true;
                        }
                        filter.clear();
                    }
                    KeyCode::Char('?' | 'q') if filter.is_empty() => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::F(1) => {
                        self.overlay = None;
                        return true;
                    }
                    _ => {
                        if !edit_query(&k, &mut filter, &mut scroll, last) {
                            return false;
                        }
                    }
                }
                self.overlay = Some(Overlay::Help { filter, scroll });
                true
            }
            Overlay::Palette {
                mut input,
                mut selected,
            } => {
                let rows = overlay::palette_rows(self.screen, self.key_mode(), &input);
                match k.code {
                    KeyCode::Esc => {
                        self.overlay = None;
                        return true;
                    }
                    KeyCode::Enter => {
                        self.overlay = None;
                        if let Some(goto) = crate::tui::search::parse_goto(&input) {
                            match goto {
                                Ok(g) => self.goto(g),
                                Err(why) => self.say(Level::Warning, why),
                            }
                            return true;
                        }
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
                    KeyCode::Tab => selected = (selected + 1).min(rows.len().saturating_sub(1)),
                    KeyCode::BackTab => selected = selected.saturating_sub(1),
                    _ => {
                        let last = rows.len().saturating_sub(1);
                        if !edit_query(&k, &mut input, &mut selected, last) {
                            return false;
                        }
                    }
                }
                self.overlay = Some(Overlay::Palette { input, selected });
                true
            }
        }
    }

    /// A key in a confirmation: `y` runs it, `n`/Esc cancel, arrows scroll.
    fn confirm_key(
        &mut self,
        title: String,
        lines: Vec<String>,
        op: PendingOp,
        scroll: usize,
        k: KeyEvent,
    ) -> bool {
        // Only `y` confirms: Enter is also "open"/"diff", so a second Enter must not
        // run a destructive operation.
        let scroll = match k.code {
            KeyCode::Char('y') => {
                self.overlay = None;
                self.say(Level::Info, "working…");
                self.run_pending(op);
                return true;
            }
            KeyCode::Char('n') | KeyCode::Esc => {
                self.overlay = None;
                self.say(Level::Info, "cancelled; nothing was changed");
                return true;
            }
            KeyCode::Enter => {
                self.say(Level::Info, "press y to confirm, n or Esc to cancel");
                return true;
            }
            KeyCode::Down | KeyCode::Char('j') => (scroll + 1).min(lines.len().saturating_mul(4)),
            KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
            KeyCode::PageDown => scroll + 10,
            KeyCode::PageUp => scroll.saturating_sub(10),
            _ => return false,
        };
        self.overlay = Some(Overlay::Confirm {
            title,
            lines,
            op,
            scroll,
        });
        true
    }

    /// A key in a one-line prompt (the `/` search, a triage decision, a key name): Esc closes it,
    /// Enter closes it and hands its text to `submit`, Backspace and printable characters edit
    /// the text (`reopen` makes the prompt again around it).
    fn prompt_key(
        &mut self,
        mut input: String,
        k: &KeyEvent,
        reopen: fn(String) -> Overlay,
        submit: impl FnOnce(&mut Self, String),
    ) -> bool {
        match k.code {
            KeyCode::Esc => self.overlay = None,
            KeyCode::Enter => {
                self.overlay = None;
                submit(self, input);
            }
            KeyCode::Backspace => {
                input.pop();
                self.overlay = Some(reopen(input));
            }
            _ => match crate::tui::filter::typed_char(k) {
                Some(c) => {
                    input.push(c);
                    self.overlay = Some(reopen(input));
                }
                None => return false,
            },
        }
        true
    }

    pub(super) fn run_pending(&mut self, op: PendingOp) {
        if self.config.read_only {
            self.say(Level::Warning, "read-only: nothing was changed");
            return;
        }
        match op {
            PendingOp::Key(op) => self.run_key_op(op),
            PendingOp::Outbox(op) => self.run_outbox_op(op),
            PendingOp::NotifyRetry(id) => self.run_notify_retry(id),
            PendingOp::Replay => self.start_replay(),
            PendingOp::Import { force } => self.start_import(force),
            PendingOp::Snapshot { tenant } => self.start_snapshot(tenant),
            PendingOp::RecoverWal => self.run_recover_wal(),
            PendingOp::Inbox {
                path,
                stamp,
                disposition,
            } => self.start_filing(path, stamp, disposition),
        }
    }

    /// With `--read-only`, which writes nothing: refuses an action that writes a file of its own
    /// (the action table names the file), saying so; false when `a` may run.
    pub(super) fn refuse_read_only_write(&mut self, a: Action) -> bool {
        let Some(what) = action::writes_file(a).filter(|_| self.config.read_only) else {
            return false;
        };
        self.say(
            Level::Warning,
            format!("read-only: {what} was not written; run without --read-only to write it"),
        );
        true
    }

    /// Runs one action; true when the screen must be redrawn. With `--read-only`, a
    /// state-changing or file-writing action is refused here too (not only absent from the
    /// keymap), whatever path it came by (palette, mouse, a test).
    pub fn apply(&mut self, a: Action) -> bool {
        if self.config.read_only && action::changes_state(a) {
            self.say(
                Level::Warning,
                "read-only: this console does not change anything (started with --read-only)",
            );
            return true;
        }
        if self.refuse_read_only_write(a) {
            return true;
        }
        if self.screen == ScreenId::Chain && self.chain.is_loading() && queues_while_indexing(a) {
            return self.queue_chain_key(a);
        }
        if self.current_mut().handle(a) {
            self.pump_ledger();
            return true;
        }
        let flow = match a {
            Action::Quit
            | Action::Back
            | Action::Help
            | Action::Palette
            | Action::NextScreen
            | Action::PrevScreen
            | Action::GoScreen(_)
            | Action::Filter
            | Action::PrevTab
            | Action::NextTab
            | movement!() => self.navigate(a),
            Action::Open if self.screen == ScreenId::Merge => self.merge_action(a),
            Action::Open | Action::PickWal if self.screen == ScreenId::Wal => self.wal_action(a),
            Action::Open | Action::Rescan | Action::Reverify | Action::ToggleMark => {
                self.bundles_action(a)
            }
            Action::NextFinding
            | Action::PrevFinding
            | Action::FirstFinding
            | Action::PrevNode
            | Action::NextNode => self.chain_action(a),
            Action::Replan if self.screen == ScreenId::Scheduler => self.scheduler_action(a),
            Action::Replan if self.screen == ScreenId::Activity => {
                self.load_activity();
                ControlFlow::Continue(())
            }
            Action::MergePreview | Action::Replan | Action::Import | Action::ForceImport => {
                self.merge_action(a)
            }
            Action::Search | Action::SearchNext | Action::SearchPrev => self.search_action(a),
            Action::Copy | Action::WriteProof | Action::Snapshot => self.copy_action(a),
            Action::LedgerConflicts | Action::LedgerDiff => ControlFlow::Continue(()),
            Action::VerifyChain | Action::Prove | Action::ToggleSnapshots => {
                self.scheduler_action(a)
            }
            Action::PrevPane
            | Action::NextPane
            | Action::CreateKey
            | Action::TrustKey
            | Action::UntrustKey
            | Action::SignBundle
            | Action::CheckSignature => self.keys_action(a),
            Action::CycleStatus
            | Action::Replay
            | Action::RetryEnvelope
            | Action::CancelEnvelope
            | Action::ExportOutbox => self.outbox_action(a),
            Action::NotifyView | Action::NotifyReload | Action::RetryDelivery => {
                self.notify_action(a)
            }
            Action::RecoverWal | Action::PickWal => self.wal_action(a),
            Action::OpenSource | Action::OpenOtherSource => self.jump_action(a),
            Action::FileAway(d) => self.inbox_action(d),
            Action::TriageReport => {
                self.start_triage();
                ControlFlow::Continue(())
            }
        };
        if let ControlFlow::Break(redraw) = flow {
            return redraw;
        }
        if self.screen == ScreenId::Scheduler {
            self.pump_scheduler_page();
        }
        true
    }

    /// Keeps a Chain key typed while the bundle is being indexed; it runs when the index is ready.
    fn queue_chain_key(&mut self, a: Action) -> bool {
        if self.chain_queue.len() >= CHAIN_QUEUE_MAX {
            self.say(
                Level::Warning,
                format!("indexing: {CHAIN_QUEUE_MAX} keys queued already; this one is dropped"),
            );
            return true;
        }
        self.chain_queue.push(a);
        self.say(
            Level::Info,
            format!(
                "indexing: {} key(s) queued, run when the bundle is ready",
                self.chain_queue.len()
            ),
        );
        true
    }

    /// Runs the Chain keys queued while indexing (the index just became ready).
    pub(super) fn run_chain_queue(&mut self) {
        for a in std::mem::take(&mut self.chain_queue) {
            self.apply(a);
        }
    }

    /// The actions every screen shares: quitting, overlays, switching screens, moving the cursor.
    fn navigate(&mut self, a: Action) -> ControlFlow<bool> {
        let screens = ScreenId::ALL;
        let pos = screens.iter().position(|s| *s == self.screen).unwrap_or(0);
        match a {
            Action::Quit => {
                if self.screen == ScreenId::Bundles {
                    self.quit = true;
                } else {
                    self.history.clear();
                    self.enter(ScreenId::Bundles);
                }
            }
            // Esc first stops a running search or goto (the selection stays).
            Action::Back if self.cancel_scan() => {}
            Action::Back if self.search.is_some() => {
                self.search = None;
                self.say(Level::Info, "search cleared");
            }
            // The screen closes what it has open first (a diff, a filter), then Esc goes back
            // where the user came from; on Bundles with nowhere to go it clears the message.
            Action::Back => {
                let closed = self.current_mut().back() || self.go_back();
                if !closed && self.message.take().is_none() {
                    return ControlFlow::Break(false);
                }
            }
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
            Action::HalfPageDown => self.move_by((self.page() as isize / 2).max(1)),
            Action::HalfPageUp => self.move_by(-(self.page() as isize / 2).max(1)),
            Action::Home => self.current_mut().home(),
            Action::End => self.current_mut().end(),
            Action::DetailDown => self.current_mut().scroll_detail(3),
            Action::DetailUp => self.current_mut().scroll_detail(-3),
            Action::PrevTab | Action::NextTab => {
                // Merge switches its lists itself (Screen::handle); on Scheduler the tenant
                // changes and its snapshots are read again.
                let d = if a == Action::PrevTab { -1 } else { 1 };
                if self.screen == ScreenId::Scheduler {
                    self.scheduler.switch_tenant(d);
                    self.load_snapshots();
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
