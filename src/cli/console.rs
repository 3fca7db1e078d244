//! `airlock console`: the interactive operations console.

use super::{Ctx, Exit};
use crate::demo::WorkspaceLayout;
use crate::tui::app::ConsoleConfig;
use crate::tui::tasks::SharedTrustSet;
use crate::tui::theme::Theme;
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Directory of bundles to review (default: the current directory, or the workspace's
    /// `bundles/`).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A workspace folder (as `airlock demo` makes): its bundles/, airlock.db,
    /// edge-outbox.sqlite3, trust.json and keys/ are used unless given one by one.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The outbox file (default: $STATEHUB_OUTBOX_PATH, else ~/.statehub/edge-outbox.sqlite3).
    #[arg(long, value_name = "PATH")]
    pub outbox: Option<PathBuf>,
    /// The trust store file (default: the --workspace's trust.json, else the user's trust store
    /// $XDG_DATA_HOME/airlock/trust.json, as for every other command).
    #[arg(long, value_name = "PATH")]
    pub trust_store: Option<PathBuf>,
    /// Where local signing keys live (default: the user's keys directory).
    #[arg(long, value_name = "DIR")]
    pub keys_dir: Option<PathBuf>,
    /// Theme: dark, light, high-contrast, monochrome, or a path to a .toml theme
    /// (default: dark; monochrome when NO_COLOR is set).
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
    /// Review only: every state-changing action is removed, and the store and outbox are opened
    /// read-only (never created).
    #[arg(long)]
    pub read_only: bool,
    /// Enable mouse input (wheel scrolls, click selects).
    #[arg(long)]
    pub mouse: bool,
    /// ASCII glyphs and 16 colours, for a Linux VT or a serial console (also chosen by
    /// TERM=linux, vt100, vt220 or dumb).
    #[arg(long)]
    pub ascii: bool,
    /// Inbox mode: watch this drop directory. Files that arrive get a NEW badge, are verified
    /// once they stop growing, and `i` / `x` / `Q` file each one to DIR/done/ (imported),
    /// DIR/rejected/ or DIR/quarantine/ with its triage report beside it.
    #[arg(long, value_name = "DIR")]
    pub inbox: Option<PathBuf>,
    /// Inbox mode: poll the folder every second instead of inotify (e.g. a network filesystem).
    #[arg(long, requires = "inbox")]
    pub inbox_poll: bool,
    /// Inbox mode: how long a file's size and time must stay unchanged before it is verified,
    /// in milliseconds.
    #[arg(long, value_name = "MS", requires = "inbox", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(50..=600_000))]
    pub inbox_settle_ms: u64,
    /// Open this node write-ahead log on the WAL screen.
    #[arg(long, value_name = "FILE")]
    pub wal: Option<PathBuf>,
}

/// The command that opens the console on a workspace again (printed by `airlock demo`).
pub fn reopen_command(root: &Path) -> String {
    format!(
        "airlock console --workspace {}",
        crate::text::visible_path(root)
    )
}

/// The signature check for the console's verifications: the given trust store, else the run's
/// default trust.
pub fn console_trust(trust_store: Option<&Path>) -> Result<SharedTrustSet> {
    match trust_store {
        Some(path) => Ok(Arc::new(
            crate::core::trust::TrustStore::open(path)?.trust_set(),
        )),
        None => Ok(Arc::new(super::trust_for_run(&[])?)),
    }
}

/// What the console will open, from the arguments (each explicit path wins over the workspace's).
pub fn config_for(ctx: &Ctx, a: &ConsoleArgs) -> Result<ConsoleConfig> {
    let ws = a.workspace.as_deref().map(WorkspaceLayout::under);
    if let Some(w) = a.wal.as_ref().filter(|w| !w.is_file()) {
        return Err(eyre!(
            "--wal {}: not a file; give the path of a node WAL (.alwl)",
            crate::text::visible_path(w)
        ));
    }
    if let Some(root) = &a.workspace {
        if !root.is_dir() {
            return Err(eyre!(
                "{} is not a directory: give --workspace the folder `airlock demo` made",
                crate::text::visible_path(root)
            ));
        }
    }
    if let (Some(d), Some(i)) = (&a.dir, &a.inbox) {
        if d != i {
            return Err(eyre!(
                "--dir and --inbox name two folders: the inbox is the folder the console lists; give --inbox DIR alone"
            ));
        }
    }
    let dir = a
        .inbox
        .clone()
        .or_else(|| a.dir.clone())
        .or_else(|| ws.as_ref().map(|w| w.bundles.clone()))
        .unwrap_or_else(|| PathBuf::from("."));
    if !dir.is_dir() {
        return Err(eyre!(
            "{} is not a directory: give {} the folder that holds the bundles",
            crate::text::visible_path(&dir),
            if a.inbox.is_some() {
                "--inbox"
            } else {
                "--dir"
            }
        ));
    }
    let db = match (&ctx.db, &ws) {
        (Some(db), _) => db.clone(),
        (None, Some(w)) => w.db.clone(),
        (None, None) => ctx.db_path(),
    };
    let outbox = a
        .outbox
        .clone()
        .or_else(|| ws.as_ref().map(|w| w.outbox.clone()));
    // A store this user cannot write (a copy on a read-only medium) is reviewed read-only, as with
    // --read-only, instead of failing on every screen.
    let read_only_because = match crate::core::store::any::StoreLocation::parse(&db) {
        Ok(crate::core::store::any::StoreLocation::Sqlite(p))
            if !a.read_only && crate::core::store::Store::only_readable(&p) =>
        {
            Some(format!(
                "read-only: this user cannot write the store {} (or its folder), so the console opened it read-only, as with --read-only",
                crate::text::visible_path(&p)
            ))
        }
        _ => None,
    };
    Ok(ConsoleConfig {
        dir,
        db: Some(db),
        outbox: Some(crate::core::outbox::outbox_path(outbox.as_deref())),
        read_only: a.read_only || read_only_because.is_some(),
        read_only_because,
        mouse: a.mouse,
        keys_dir: a
            .keys_dir
            .clone()
            .or_else(|| ws.as_ref().map(|w| w.keys.clone()))
            .unwrap_or_else(crate::core::trust::default_keys_dir),
        trust_store: a
            .trust_store
            .clone()
            .or_else(|| ws.as_ref().map(|w| w.trust_store.clone()))
            .unwrap_or_else(crate::core::trust::trust_store_path),
        upstream: crate::core::outbox::upstream_url(None),
        wal: a.wal.clone(),
        max_clock_skew: ctx.max_clock_skew(&super::SkewArgs::default())?,
    })
}

pub fn run(ctx: &Ctx, a: ConsoleArgs) -> Result<Exit> {
    let mut theme = Theme::select(a.theme.as_deref(), Theme::no_color_env())?;
    let term = std::env::var("TERM").ok();
    theme.ascii = a.ascii || crate::tui::widgets::ascii::term_wants_ascii(term.as_deref());
    let config = config_for(ctx, &a)?;
    let explicit_trust =
        (a.trust_store.is_some() || a.workspace.is_some()).then(|| config.trust_store.clone());
    let trust = console_trust(explicit_trust.as_deref())?;
    let inbox = a
        .inbox
        .as_ref()
        .map(|_| crate::tui::inbox_watch::InboxSettings {
            dir: config.dir.clone(),
            settle: std::time::Duration::from_millis(a.inbox_settle_ms),
            poll: a.inbox_poll,
        });
    let end = crate::tui::run_with_inbox(config, theme, trust, inbox)?;
    crate::tui::exit_for(end);
    Ok(Exit::Ok)
}
