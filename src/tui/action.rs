//! Every user action as data, and the one keymap table. Key handling, the help overlay, the command
//! palette and the status bar are all generated from [`BINDINGS`]; nothing is written twice.

use crate::core::inbox::Disposition;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The console's screens, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScreenId {
    Bundles,
    Chain,
    Merge,
    Scheduler,
    Outbox,
    Keys,
    Activity,
    Notifications,
    Wal,
    Ledger,
}

impl ScreenId {
    pub const ALL: [ScreenId; 10] = [
        ScreenId::Bundles,
        ScreenId::Chain,
        ScreenId::Merge,
        ScreenId::Scheduler,
        ScreenId::Outbox,
        ScreenId::Keys,
        ScreenId::Activity,
        ScreenId::Notifications,
        ScreenId::Wal,
        ScreenId::Ledger,
    ];

    pub fn title(self) -> &'static str {
        match self {
            ScreenId::Bundles => "Bundles",
            ScreenId::Chain => "Chain",
            ScreenId::Merge => "Merge preview",
            ScreenId::Scheduler => "Scheduler chain",
            ScreenId::Keys => "Keys & trust",
            ScreenId::Activity => "Activity",
            ScreenId::Outbox => "Outbox",
            ScreenId::Notifications => "Notifications",
            ScreenId::Wal => "WAL",
            ScreenId::Ledger => "Ledger",
        }
    }

    /// A short title for narrow terminals.
    pub fn short_title(self) -> &'static str {
        match self {
            ScreenId::Bundles => "Bundles",
            ScreenId::Chain => "Chain",
            ScreenId::Merge => "Merge",
            ScreenId::Scheduler => "Sched",
            ScreenId::Keys => "Keys",
            ScreenId::Activity => "Activity",
            ScreenId::Outbox => "Outbox",
            ScreenId::Notifications => "Notify",
            ScreenId::Wal => "WAL",
            ScreenId::Ledger => "Ledger",
        }
    }

    /// The number key that opens the screen (the tenth is 0).
    pub fn number(self) -> usize {
        (ScreenId::ALL.iter().position(|s| *s == self).unwrap_or(0) + 1) % 10
    }
}

/// Something the user can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Back,
    Help,
    Palette,
    Filter,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    NextScreen,
    PrevScreen,
    GoScreen(ScreenId),
    Open,
    Rescan,
    Reverify,
    PrevNode,
    NextNode,
    NextFinding,
    PrevFinding,
    FirstFinding,
    DetailDown,
    DetailUp,
    PrevPane,
    NextPane,
    CreateKey,
    TrustKey,
    UntrustKey,
    SignBundle,
    CheckSignature,
    CycleStatus,
    Replay,
    RetryEnvelope,
    CancelEnvelope,
    ExportOutbox,
    ToggleMark,
    MergePreview,
    PrevTab,
    NextTab,
    Replan,
    Import,
    ForceImport,
    VerifyChain,
    Prove,
    ToggleSnapshots,
    Search,
    SearchNext,
    SearchPrev,
    HalfPageDown,
    HalfPageUp,
    Copy,
    WriteProof,
    Snapshot,
    NotifyView,
    NotifyReload,
    RetryDelivery,
    RecoverWal,
    /// List the workspace's WAL files to open another.
    PickWal,
    LedgerConflicts,
    LedgerDiff,
    /// Open the source of the selected entry (its bundle at the entry; a conflict's first side).
    OpenSource,
    /// Open a conflict's second side.
    OpenOtherSource,
    /// Write a triage report of what the screen shows, with the operator's decision.
    TriageReport,
    /// Inbox mode: file the selected file away (import, reject, quarantine) with its report.
    FileAway(crate::core::inbox::Disposition),
}

/// The pattern of the actions that move the selection or the view (arrows, pages, ends, the detail
/// pane's scroll): one list for every `match` and [`Action::is_movement`].
macro_rules! movement {
    () => {
        Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::HalfPageDown
            | Action::HalfPageUp
            | Action::Home
            | Action::End
            | Action::DetailDown
            | Action::DetailUp
    };
}
pub(crate) use movement;

impl Action {
    /// Moving the selection or the view: [`movement!`].
    pub fn is_movement(self) -> bool {
        matches!(self, movement!())
    }
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// On every screen.
    Global,
    /// On one screen.
    Screen(ScreenId),
}

/// A key: code plus modifiers (shift is ignored for characters, which carry their case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn ch(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}

const fn code(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

impl Key {
    /// Does this key match a terminal key event?
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match (self.code, ev.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) => a == b && self.ctrl == ctrl,
            (KeyCode::BackTab, KeyCode::BackTab) => true,
            (KeyCode::Tab, KeyCode::Tab) => !ev.modifiers.contains(KeyModifiers::SHIFT),
            (a, b) => a == b && self.ctrl == ctrl,
        }
    }

    /// How the key is written in help and the status bar.
    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "Space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::F(n) => format!("F{n}"),
            other => format!("{other:?}"),
        };
        if self.ctrl {
            format!("C-{base}")
        } else {
            base
        }
    }
}

/// One row of the keymap table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub action: Action,
    pub keys: &'static [Key],
    /// The name used by the command palette.
    pub name: &'static str,
    /// One line for the help overlay.
    pub help: &'static str,
    pub scope: Scope,
    /// Shown in the status bar's key hints.
    pub in_bar: bool,
    /// Writes state (import, replay, trust, ...): asks for confirmation, and is absent with
    /// `--read-only`.
    pub changes_state: bool,
    /// Writes a file of its own (a proof, a triage report), naming it: absent with `--read-only`,
    /// which writes nothing, and refused there with "read-only: {this} was not written".
    pub writes_file: Option<&'static str>,
}

const fn b(
    action: Action,
    keys: &'static [Key],
    name: &'static str,
    help: &'static str,
    scope: Scope,
    in_bar: bool,
) -> Binding {
    Binding {
        action,
        keys,
        name,
        help,
        scope,
        in_bar,
        changes_state: false,
        writes_file: None,
    }
}

use Scope::Global;
const BUNDLES: Scope = Scope::Screen(ScreenId::Bundles);
const CHAIN: Scope = Scope::Screen(ScreenId::Chain);
const KEYS: Scope = Scope::Screen(ScreenId::Keys);
const OUTBOX: Scope = Scope::Screen(ScreenId::Outbox);
const NOTIFY: Scope = Scope::Screen(ScreenId::Notifications);
const MERGE: Scope = Scope::Screen(ScreenId::Merge);
const SCHED: Scope = Scope::Screen(ScreenId::Scheduler);
const WAL: Scope = Scope::Screen(ScreenId::Wal);
const LEDGER: Scope = Scope::Screen(ScreenId::Ledger);

/// A state-changing binding: confirmed before it runs, absent with `--read-only`, always in the bar.
const fn w(
    action: Action,
    keys: &'static [Key],
    name: &'static str,
    help: &'static str,
    scope: Scope,
) -> Binding {
    Binding {
        changes_state: true,
        ..b(action, keys, name, help, scope, true)
    }
}

/// A binding that writes a file of its own (`what`: the file, for the read-only refusal): no
/// confirmation, absent with `--read-only`.
const fn f(
    action: Action,
    keys: &'static [Key],
    name: &'static str,
    help: &'static str,
    scope: Scope,
    what: &'static str,
) -> Binding {
    Binding {
        writes_file: Some(what),
        ..b(action, keys, name, help, scope, false)
    }
}

/// The keymap: every action, its keys, its palette name and its help line.
#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    b(Action::Help, &[ch('?'), code(KeyCode::F(1))], "help", "show every key of this screen (type to filter)", Global, true),
    b(Action::Palette, &[ch(':')], "palette", "command palette: run any action by name", Global, true),
    b(Action::Quit, &[ch('q'), ctrl('c')], "quit", "quit (q goes back first when not on the top screen)", Global, true),
    b(Action::Back, &[code(KeyCode::Esc)], "back", "close the overlay, clear the filter or go back", Global, false),
    b(Action::NextScreen, &[code(KeyCode::Tab)], "next-screen", "next screen", Global, false),
    b(Action::PrevScreen, &[code(KeyCode::BackTab)], "previous-screen", "previous screen", Global, false),
    b(Action::GoScreen(ScreenId::Bundles), &[ch('1')], "screen-bundles", "go to the Bundles screen", Global, false),
    b(Action::GoScreen(ScreenId::Chain), &[ch('2')], "screen-chain", "go to the Chain screen", Global, false),
    b(Action::Up, &[code(KeyCode::Up), ch('k')], "up", "move up", Global, false),
    b(Action::Down, &[code(KeyCode::Down), ch('j')], "down", "move down", Global, false),
    b(Action::PageUp, &[code(KeyCode::PageUp), ctrl('b')], "page-up", "one page up", Global, false),
    b(Action::PageDown, &[code(KeyCode::PageDown), ctrl('f')], "page-down", "one page down", Global, false),
    b(Action::Home, &[code(KeyCode::Home), ch('g')], "first", "go to the first row", Global, false),
    b(Action::End, &[code(KeyCode::End), ch('G')], "last", "go to the last row", Global, false),
    b(Action::Filter, &[ch('/')], "filter", "filter the envelopes by text (id, status, method, path, route class, idempotency key)", OUTBOX, false),
    w(Action::FileAway(Disposition::Import), &[ch('i')], "inbox-import", "inbox mode (--inbox DIR): import the selected file into the store, then move it to done/ with its triage report beside it (asks first)", BUNDLES),
    w(Action::FileAway(Disposition::Reject), &[ch('x')], "inbox-reject", "inbox mode: move the selected file to rejected/ with its triage report beside it (asks first)", BUNDLES),
    w(Action::FileAway(Disposition::Quarantine), &[ch('Q')], "inbox-quarantine", "inbox mode: move the selected file to quarantine/ with its triage report beside it (asks first)", BUNDLES),
    b(Action::Filter, &[ch('/')], "filter", "filter the list by text (file, bundle id, tenant, signer, state)", BUNDLES, true),
    b(Action::Open, &[code(KeyCode::Enter)], "open", "open the selected bundle's chain view", BUNDLES, true),
    b(Action::Rescan, &[ch('r')], "rescan", "rescan the directory now (it is also rescanned by itself: every 2 s, or as files arrive in an inbox)", BUNDLES, true),
    b(Action::Reverify, &[ch('v')], "reverify", "verify the selected bundle again", BUNDLES, false),
    b(Action::NextFinding, &[ch('n')], "next-finding", "jump to the next finding (the next / search match while a search is active)", CHAIN, true),
    b(Action::PrevFinding, &[ch('N')], "previous-finding", "jump to the previous finding (or / search match)", CHAIN, true),
    b(Action::FirstFinding, &[ch('f')], "first-break", "jump to the first break of the bundle", CHAIN, false),
    b(Action::PrevNode, &[code(KeyCode::Left), ch('h'), ch('[')], "previous-node", "previous node log tab", CHAIN, true),
    b(Action::NextNode, &[code(KeyCode::Right), ch('l'), ch(']')], "next-node", "next node log tab", CHAIN, true),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the detail panel down", CHAIN, false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the detail panel up", CHAIN, false),
    b(Action::Back, &[code(KeyCode::Esc)], "back", "back to the screen you came from (Bundles when there is none)", CHAIN, true),
    b(Action::GoScreen(ScreenId::Keys), &[ch('6')], "screen-keys", "go to the Keys & trust screen", Global, false),
    b(Action::GoScreen(ScreenId::Ledger), &[ch('0')], "screen-ledger", "go to the Ledger screen (jobs folded from the workspace's *.alwl WALs)", Global, false),
    b(Action::LedgerConflicts, &[ch('c')], "conflicts", "show only the jobs a conflict decided, or every job", LEDGER, true),
    b(Action::LedgerDiff, &[ch('d')], "ledger-diff", "diff the first two ledgers (first divergent range highlighted), or back to the timeline", LEDGER, true),
    b(Action::PrevPane, &[code(KeyCode::Left), ch('h')], "local-keys", "focus the local keys", KEYS, false),
    b(Action::NextPane, &[code(KeyCode::Right), ch('l')], "trusted-keys", "focus the trusted keys", KEYS, false),
    w(Action::CreateKey, &[ch('c')], "generate-key", "generate a new signing key pair in the keys directory", KEYS),
    w(Action::TrustKey, &[ch('t')], "trust", "trust the selected local key (asks first)", KEYS),
    w(Action::UntrustKey, &[ch('u')], "untrust", "remove the selected trusted key from the trust store (asks first)", KEYS),
    w(Action::SignBundle, &[ch('s')], "sign", "sign the bundle selected on Bundles with the selected key (asks first)", KEYS),
    b(Action::GoScreen(ScreenId::Merge), &[ch('3')], "screen-merge", "go to the Merge preview screen", Global, false),
    b(Action::GoScreen(ScreenId::Scheduler), &[ch('4')], "screen-scheduler", "go to the Scheduler chain screen", Global, false),
    b(Action::GoScreen(ScreenId::Outbox), &[ch('5')], "screen-outbox", "go to the Outbox screen", Global, false),
    b(Action::GoScreen(ScreenId::Notifications), &[ch('8')], "screen-notify", "go to the Notifications screen", Global, false),
    b(Action::NotifyView, &[ch('v')], "view", "cycle emissions, deliveries and the dead-letter queue", NOTIFY, true),
    b(Action::NotifyReload, &[ch('g')], "reload", "read emissions and deliveries from the store again", NOTIFY, true),
    w(Action::RetryDelivery, &[ch('r')], "retry", "put the selected dead letter back in the delivery queue (asks first)", NOTIFY),
    b(Action::GoScreen(ScreenId::Wal), &[ch('9')], "screen-wal", "go to the WAL screen", Global, false),
    w(Action::RecoverWal, &[ch('R')], "recover-wal", "recover the WAL: save and cut a torn tail, or refuse damage (asks first)", WAL),
    b(Action::Open, &[code(KeyCode::Enter)], "open-wal", "open the selected log of the workspace's WAL files (listed while none is open, or after o)", WAL, true),
    b(Action::PickWal, &[ch('o')], "other-wal", "list the workspace's WAL files to open another (Esc comes back)", WAL, true),
    b(Action::Search, &[ch('/')], "search", "search the frames (LSN, HLC, type, state, payload text; the damage row) in the background, Esc stops; n/N next/previous match", WAL, true),
    b(Action::SearchNext, &[ch('n')], "search-next", "next match of the / search (wraps)", WAL, false),
    b(Action::SearchPrev, &[ch('N')], "search-previous", "previous match of the / search (wraps)", WAL, false),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the payload panel down (a long payload)", WAL, false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the payload panel up", WAL, false),
    b(Action::CycleStatus, &[ch('f')], "filter-status", "show all envelopes, or only one status (cycles)", OUTBOX, true),
    w(Action::Replay, &[ch('R')], "replay", "replay queued envelopes to the upstream, with live progress (asks first)", OUTBOX),
    w(Action::RetryEnvelope, &[ch('r')], "retry", "queue the selected failed or cancelled envelope again (asks first)", OUTBOX),
    w(Action::CancelEnvelope, &[ch('x')], "cancel", "cancel the selected envelope: it will never be sent (asks first)", OUTBOX),
    w(Action::ExportOutbox, &[ch('e')], "export", "export every envelope (non-secret JSON) beside the outbox", OUTBOX),
    b(Action::ToggleMark, &[ch(' ')], "mark", "mark or unmark the selected bundle for a merge preview", BUNDLES, true),
    b(Action::MergePreview, &[ch('m')], "merge-preview", "merge preview of the marked bundles (or the selected one) against the store", BUNDLES, true),
    b(Action::PrevTab, &[code(KeyCode::Left), ch('h')], "previous-list", "previous list: plan, merged order, duplicates, conflicts, dropped", MERGE, true),
    b(Action::NextTab, &[code(KeyCode::Right), ch('l')], "next-list", "next list: plan, merged order, duplicates, conflicts, dropped", MERGE, true),
    b(Action::Open, &[code(KeyCode::Enter)], "diff", "open the side-by-side payload diff of the selected conflict", MERGE, true),
    b(Action::Replan, &[ch('r')], "replan", "plan again against the current store (core::import::plan_import)", MERGE, false),
    w(Action::Import, &[ch('i')], "import", "import the previewed bundles into the store (shows the plan, asks first)", MERGE),
    w(Action::ForceImport, &[ch('F')], "force-import", "import with --force: only each broken log's verified prefix (spells out what is dropped, asks first)", MERGE),
    b(Action::Back, &[code(KeyCode::Esc)], "close", "close the diff, or back to the screen you came from", MERGE, false),
    b(Action::PrevTab, &[code(KeyCode::Left), ch('h')], "previous-tenant", "previous tenant chain", SCHED, false),
    b(Action::NextTab, &[code(KeyCode::Right), ch('l')], "next-tenant", "next tenant chain", SCHED, false),
    b(Action::VerifyChain, &[ch('v')], "verify-chain", "verify the tenant chain in the background: every link, the head, every snapshot root and signature", SCHED, true),
    b(Action::Prove, &[ch('p')], "prove", "RFC 9162 inclusion proof of the selected job, checked with verify_proof", SCHED, true),
    b(Action::ToggleSnapshots, &[ch('s')], "snapshots", "show the batch snapshots (Merkle roots, signatures) or the entry detail", SCHED, true),
    b(Action::Replan, &[ch('r')], "reload", "reload tenants and entries from the store", SCHED, false),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the detail panel down", SCHED, false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the detail panel up", SCHED, false),
    b(Action::DetailDown, &[ch('J')], "diff-down", "scroll the diff or plan down", MERGE, false),
    b(Action::DetailUp, &[ch('K')], "diff-up", "scroll the diff or plan up", MERGE, false),
    b(Action::Copy, &[ch('y')], "copy", "copy the selected value (bundle id, jobId, link, key id, Merkle root, proof) via OSC 52 and to clipboard.txt (OSC 52 only with --read-only)", Global, false),
    f(Action::WriteProof, &[ch('P')], "write-proof", "write the shown inclusion proof to a file for `airlock chain verify-proof`", SCHED, "the proof file"),
    w(Action::Snapshot, &[ch('S')], "snapshot", "snapshot the tenant chain's unsnapshotted entries now (Merkle root per batch; asks first)", SCHED),
    b(Action::GoScreen(ScreenId::Activity), &[ch('7')], "screen-activity", "go to the Activity screen (the store's audit log)", Global, false),
    b(Action::Search, &[ch('/')], "search", "search the audit records (operator, action, inputs) in the background, Esc stops; n/N next/previous match", Scope::Screen(ScreenId::Activity), true),
    b(Action::SearchNext, &[ch('n')], "search-next", "next match of the / search (wraps)", Scope::Screen(ScreenId::Activity), false),
    b(Action::SearchPrev, &[ch('N')], "search-previous", "previous match of the / search (wraps)", Scope::Screen(ScreenId::Activity), false),
    b(Action::Replan, &[ch('r')], "reload", "read the audit log again and verify its hash chain", Scope::Screen(ScreenId::Activity), true),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the record panel down (long inputs)", Scope::Screen(ScreenId::Activity), false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the record panel up", Scope::Screen(ScreenId::Activity), false),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the envelope panel down (headers, body, last error)", OUTBOX, false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the envelope panel up", OUTBOX, false),
    b(Action::DetailDown, &[ch('J')], "detail-down", "scroll the detail panel down (a long reason)", NOTIFY, false),
    b(Action::DetailUp, &[ch('K')], "detail-up", "scroll the detail panel up", NOTIFY, false),
    b(Action::HalfPageDown, &[ctrl('d')], "half-page-down", "half a page down", Global, false),
    b(Action::HalfPageUp, &[ctrl('u')], "half-page-up", "half a page up", Global, false),
    b(Action::Search, &[ch('/')], "search", "search the entries (job id, tHlc, partition, payload); n/N next/previous match, Esc clears", CHAIN, true),
    b(Action::Search, &[ch('/')], "search", "search the current list or the plan text in the background, Esc stops; n/N next/previous match", MERGE, true),
    b(Action::SearchNext, &[ch('n')], "search-next", "next match of the / search (wraps)", MERGE, false),
    b(Action::SearchPrev, &[ch('N')], "search-previous", "previous match of the / search (wraps)", MERGE, false),
    b(Action::Search, &[ch('/')], "search", "search the whole stored chain (position, job id, action, tHlc, payload) in the background, Esc stops; :goto seq N / :goto job ID jump anywhere", SCHED, true),
    b(Action::SearchNext, &[ch('n')], "search-next", "next match of the / search (wraps)", SCHED, false),
    b(Action::SearchPrev, &[ch('N')], "search-previous", "previous match of the / search (wraps)", SCHED, false),
    b(Action::OpenSource, &[code(KeyCode::Enter), ch('o')], "open-source", "open the bundle the entry came from, at its node and entry (provenance); Esc comes back", SCHED, true),
    b(Action::OpenSource, &[ch('o')], "open-source", "open the selected entry's bundle at the entry; on a conflict its first side (the stored side: its chain position)", MERGE, true),
    b(Action::OpenOtherSource, &[ch('O')], "open-other-side", "open a conflict's second side (its bundle, or its chain position when stored)", MERGE, false),
    f(Action::TriageReport, &[ch('E')], "triage-report", "write a triage report of this bundle (verdict, findings, your decision): JSON signed with the local key + Markdown", CHAIN, "the triage report"),
    f(Action::TriageReport, &[ch('E')], "triage-report", "write a triage report of this plan (verdict, findings, plan, conflict sides, your decision): signed JSON + Markdown", MERGE, "the triage report"),
    f(Action::TriageReport, &[ch('E')], "triage-report", "write a triage report of the last chain verification (v first) with your decision: signed JSON + Markdown", SCHED, "the triage report"),
    b(Action::CheckSignature, &[ch('v')], "check-signature", "check the selected bundle's signature against the trust store", KEYS, true),
];

/// How the console was started, as far as which keys exist: `--read-only` removes every
/// state-changing or file-writing action, and the inbox decision keys exist only with `--inbox`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mode {
    pub read_only: bool,
    pub inbox: bool,
}

impl Mode {
    /// `--read-only` without an inbox.
    pub const READ_ONLY: Mode = Mode {
        read_only: true,
        inbox: false,
    };
    /// Every key a console can have (the documented keymap).
    pub const ALL_KEYS: Mode = Mode {
        read_only: false,
        inbox: true,
    };
}

/// The bindings that apply on `screen` in `mode`, screen-specific first: with `read_only`,
/// state-changing and file-writing actions are not there at all, and outside inbox mode neither are the inbox's.
pub fn active(screen: ScreenId, mode: Mode) -> impl Iterator<Item = &'static Binding> {
    let specific = BINDINGS
        .iter()
        .filter(move |b| b.scope == Scope::Screen(screen));
    // A global binding whose every key the screen binds itself is shadowed: not listed.
    let shadowed = move |g: &Binding| {
        g.keys.iter().all(|k| {
            BINDINGS
                .iter()
                .any(|b| b.scope == Scope::Screen(screen) && b.keys.contains(k))
        })
    };
    let global = BINDINGS
        .iter()
        .filter(move |b| b.scope == Scope::Global && !shadowed(b));
    specific
        .chain(global)
        .filter(move |b| !(mode.read_only && (b.changes_state || b.writes_file.is_some())))
        .filter(move |b| mode.inbox || !inbox_only(b.action))
}

/// Only in inbox mode (`console --inbox`): bound, listed and hinted there only.
pub fn inbox_only(action: Action) -> bool {
    matches!(action, Action::FileAway(_))
}

/// Does `action` change state anywhere it is bound (refused with `--read-only`)?
pub fn changes_state(action: Action) -> bool {
    BINDINGS
        .iter()
        .any(|b| b.action == action && b.changes_state)
}

/// The file `action` writes where it is bound, if it writes one (refused with `--read-only`).
pub fn writes_file(action: Action) -> Option<&'static str> {
    BINDINGS
        .iter()
        .find(|b| b.action == action && b.writes_file.is_some())
        .and_then(|b| b.writes_file)
}

/// The action a key triggers on `screen`.
pub fn lookup(screen: ScreenId, mode: Mode, ev: &KeyEvent) -> Option<Action> {
    active(screen, mode)
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.action)
}

/// The keys of a binding as one label, e.g. `↑/k`.
pub fn keys_label(b: &Binding) -> String {
    b.keys.iter().map(Key::label).collect::<Vec<_>>().join("/")
}

/// Every key of every screen as Markdown (docs/console.md embeds it; a test keeps them equal).
pub fn keymap_markdown() -> String {
    let mut out = String::new();
    for screen in ScreenId::ALL {
        out.push_str(&format!(
            "\n**{} {}**\n\n| keys | command | what it does |\n|---|---|---|\n",
            screen.number(),
            screen.title()
        ));
        for b in active(screen, Mode::ALL_KEYS) {
            let ro = if b.changes_state {
                " *(asks first; absent with --read-only)*"
            } else if b.writes_file.is_some() {
                " *(writes a file; absent with --read-only)*"
            } else {
                ""
            };
            out.push_str(&format!(
                "| `{}` | {} | {}{} |\n",
                keys_label(b).replace('|', "\\|"),
                b.name,
                b.help.replace('|', "\\|"),
                ro
            ));
        }
    }
    out
}

/// Does a binding match a help/palette filter (case-insensitive, on keys, name and help)?
pub fn matches_filter(b: &Binding, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let f = filter.to_lowercase();
    b.name.contains(&f)
        || b.help.to_lowercase().contains(&f)
        || keys_label(b).to_lowercase().contains(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn no_key_is_bound_twice_on_one_screen() {
        for screen in ScreenId::ALL {
            let mut seen: Vec<(Key, Scope, &str)> = Vec::new();
            for b in active(screen, Mode::ALL_KEYS) {
                for k in b.keys {
                    if let Some((_, other_scope, other)) = seen.iter().find(|(s, _, _)| s == k) {
                        // Only a screen's own binding may shadow a global one (e.g. Esc).
                        assert!(
                            b.scope == Scope::Global && *other_scope != Scope::Global,
                            "{screen:?}: {} bound to {other} and {}",
                            k.label(),
                            b.name
                        );
                    }
                    seen.push((*k, b.scope, b.name));
                }
            }
        }
    }

    #[test]
    fn screen_keys_win_and_every_screen_has_a_number() {
        assert_eq!(
            lookup(ScreenId::Chain, Mode::default(), &key(KeyCode::Char('n'))),
            Some(Action::NextFinding)
        );
        assert_eq!(
            lookup(ScreenId::Bundles, Mode::default(), &key(KeyCode::Char('n'))),
            None
        );
        for s in ScreenId::ALL {
            let c = char::from_digit(s.number() as u32, 10).unwrap();
            assert_eq!(
                lookup(ScreenId::Bundles, Mode::default(), &key(KeyCode::Char(c))),
                Some(Action::GoScreen(s))
            );
        }
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(
            lookup(ScreenId::Chain, Mode::READ_ONLY, &ctrl_c),
            Some(Action::Quit)
        );
    }

    #[test]
    fn inbox_keys_exist_only_in_inbox_mode() {
        let i = key(KeyCode::Char('i'));
        assert_eq!(lookup(ScreenId::Bundles, Mode::default(), &i), None);
        assert!(!active(ScreenId::Bundles, Mode::default()).any(|b| inbox_only(b.action)));
        let inbox = Mode {
            read_only: false,
            inbox: true,
        };
        assert_eq!(
            lookup(ScreenId::Bundles, inbox, &i),
            Some(Action::FileAway(Disposition::Import))
        );
        // Filing away moves files: not there with --read-only, inbox or not.
        let read_only_inbox = Mode {
            read_only: true,
            inbox: true,
        };
        assert_eq!(lookup(ScreenId::Bundles, read_only_inbox, &i), None);
    }

    /// `--read-only` writes nothing: the keys that write a file of their own (a proof, a triage
    /// report) are gone like the state-changing ones; copy stays (OSC 52 writes no file).
    #[test]
    fn read_only_removes_the_file_writing_keys() {
        let (p, e, y) = (
            key(KeyCode::Char('P')),
            key(KeyCode::Char('E')),
            key(KeyCode::Char('y')),
        );
        assert_eq!(
            lookup(ScreenId::Scheduler, Mode::default(), &p),
            Some(Action::WriteProof)
        );
        assert_eq!(lookup(ScreenId::Scheduler, Mode::READ_ONLY, &p), None);
        for s in [ScreenId::Chain, ScreenId::Merge, ScreenId::Scheduler] {
            assert_eq!(
                lookup(s, Mode::default(), &e),
                Some(Action::TriageReport),
                "{s:?}"
            );
            assert_eq!(lookup(s, Mode::READ_ONLY, &e), None, "{s:?}");
            assert_eq!(lookup(s, Mode::READ_ONLY, &y), Some(Action::Copy), "{s:?}");
        }
        assert!(writes_file(Action::WriteProof).is_some());
        assert!(writes_file(Action::TriageReport).is_some());
        assert_eq!(writes_file(Action::Copy), None);
    }

    /// docs/console.md lists every key of every screen, as the table generates it
    /// (`AIRLOCK_UPDATE_DOCS=1 cargo test --lib keymap` rewrites the block).
    #[test]
    fn docs_list_every_key() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/console.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- keymap:begin -->", "<!-- keymap:end -->");
        let a = doc.find(begin).expect("keymap begin marker") + begin.len();
        let b = doc.find(end).expect("keymap end marker");
        let want = keymap_markdown();
        if std::env::var_os("AIRLOCK_UPDATE_DOCS").is_some() {
            let new = format!("{}{}\n{}", &doc[..a], want, &doc[b..]);
            std::fs::write(path, new).unwrap();
            return;
        }
        assert_eq!(
            doc[a..b].trim(),
            want.trim(),
            "docs/console.md keymap is stale"
        );
    }

    #[test]
    fn palette_names_are_unique_per_screen() {
        for screen in ScreenId::ALL {
            let names: Vec<&str> = active(screen, Mode::ALL_KEYS).map(|b| b.name).collect();
            let mut dedup = names.clone();
            dedup.sort();
            dedup.dedup();
            assert_eq!(names.len(), dedup.len(), "{screen:?}: {names:?}");
        }
    }
}
