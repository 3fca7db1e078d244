//! `airlock demo`: builds a demo workspace ([`crate::demo`]) and opens the console on it.

use super::{Ctx, Exit};
use crate::demo::build_workspace;
use crate::tui::app::ConsoleConfig;
use crate::tui::theme::Theme;
use clap::Args;
use color_eyre::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to build the demo workspace (created; must be empty or absent).
    #[arg(long, default_value = "airlock-demo")]
    pub dir: PathBuf,
    /// Build the workspace and print where it is, without opening the console.
    #[arg(long)]
    pub no_console: bool,
    /// Theme for the console (as for `airlock console --theme`).
    #[arg(long, value_name = "NAME|FILE")]
    pub theme: Option<String>,
}

pub fn run(_ctx: &Ctx, a: DemoArgs) -> Result<Exit> {
    let ws = build_workspace(&a.dir)?;
    let shown = |p: &Path| crate::text::visible_path(p);
    if a.no_console {
        println!("demo workspace: {}", shown(&ws.root));
        println!("  bundles:      {}", shown(&ws.bundles));
        println!("  trust store:  {}", shown(&ws.trust_store));
        println!("  outbox:       {}", shown(&ws.outbox));
        println!("  store:        {}", shown(&ws.db));
        println!("  exports:      {}", shown(&ws.exports));
        for f in &ws.files {
            println!("    {}", crate::text::visible(f));
        }
        for w in &ws.wals {
            println!("    {}", shown(w.file_name().map(Path::new).unwrap_or(w)));
        }
        return Ok(Exit::Ok);
    }
    let theme = Theme::select(a.theme.as_deref(), Theme::no_color_env())?;
    let trust = Arc::new(crate::core::trust::TrustStore::open(&ws.trust_store)?.trust_set());
    // A stand-in upstream on loopback for the session, so replay works without a network.
    let upstream_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let standin = upstream_rt.block_on(crate::relay::standin::StandIn::start(
        "127.0.0.1:0".parse().expect("loopback address"),
    ))?;
    let config = ConsoleConfig::for_demo(&ws, standin.url());
    let end = crate::tui::run(config, theme, trust)?;
    upstream_rt.block_on(standin.stop());
    crate::tui::exit_for(end);
    println!(
        "demo workspace kept in {}\nopen it again (same store, outbox, trust store and keys) with:\n  {}",
        shown(&ws.root),
        super::console::reopen_command(&ws.root)
    );
    Ok(Exit::Ok)
}
