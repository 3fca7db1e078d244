//! `airlock console`: the interactive operations console.

use super::{Ctx, Exit};
use crate::tui::app::ConsoleConfig;
use crate::tui::tasks::TrustCheck;
use crate::tui::theme::Theme;
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Directory of bundles to review (default: the current directory).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The outbox file (default: $STATEHUB_OUTBOX_PATH, else ~/.statehub/edge-outbox.sqlite3).
    #[arg(long, value_name = "PATH")]
    pub outbox: Option<PathBuf>,
    /// Theme: dark, light, high-contrast, monochrome, or a path to a .toml theme
    /// (default: dark; monochrome when NO_COLOR is set).
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
    /// Review only: every state-changing action is removed.
    #[arg(long)]
    pub read_only: bool,
    /// Enable mouse input (wheel scrolls, click selects).
    #[arg(long)]
    pub mouse: bool,
    /// Open this node write-ahead log on the WAL screen.
    #[arg(long, value_name = "FILE")]
    pub wal: Option<PathBuf>,
}

/// The signature check for the console's verifications: the run's trust (trust store).
pub fn console_trust() -> Result<TrustCheck> {
    Ok(Arc::new(super::trust_for_run(&[])?))
}

pub fn run(ctx: &Ctx, a: ConsoleArgs) -> Result<Exit> {
    if let Some(w) = a.wal.as_ref().filter(|w| !w.is_file()) {
        return Err(eyre!(
            "--wal {}: not a file; give the path of a node WAL (.alwl)",
            crate::text::visible(&w.display().to_string())
        ));
    }
    if !a.dir.is_dir() {
        return Err(eyre!(
            "{} is not a directory: give --dir the folder that holds the bundles",
            crate::text::visible(&a.dir.display().to_string())
        ));
    }
    let theme = Theme::select(a.theme.as_deref(), Theme::no_color_env())?;
    let config = ConsoleConfig {
        dir: a.dir,
        db: Some(ctx.db_path()),
        outbox: Some(crate::core::outbox::outbox_path(a.outbox.as_deref())),
        read_only: a.read_only,
        mouse: a.mouse,
        keys_dir: crate::core::trust::store::default_keys_dir(),
        trust_store: crate::core::trust::store::trust_store_path(),
        upstream: crate::core::outbox::upstream_url(None),
        wal: a.wal,
    };
    crate::tui::run(config, theme, console_trust()?)?;
    Ok(Exit::Ok)
}
