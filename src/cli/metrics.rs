//! `airlock metrics [--textfile DIR]`: the persisted metrics in the Prometheus text format, on stdout
//! or written atomically as `DIR/airlock.prom` for node_exporter's textfile collector (hosts that
//! never run `airlock serve`).

use super::{Ctx, Exit};
use crate::core::config;
use crate::core::text::visible_path;
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Write DIR/airlock.prom (node_exporter textfile format) atomically instead of printing.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
}

/// The exposition text of the store, with the gauges of this moment.
pub fn exposition_text(
    store: &dyn crate::core::store::backend::Backend,
    cfg: &config::Config,
) -> Result<String> {
    Ok(crate::core::service::metrics_text(
        store,
        cfg.duration(config::MAX_CLOCK_SKEW),
        None,
    )?)
}

pub fn run(ctx: &Ctx, a: MetricsArgs) -> Result<Exit> {
    let cfg = ctx.load_config(Vec::new())?;
    let store = ctx.open_store_for_reading()?;
    let text = exposition_text(&store, &cfg)?;
    let Some(dir) = a.textfile else {
        print!("{text}");
        return Ok(Exit::Ok);
    };
    if !dir.is_dir() {
        return Err(eyre!(
            "--textfile {}: not a directory (give node_exporter's --collector.textfile.directory)",
            visible_path(&dir)
        ));
    }
    // airlock names this file in a folder others may write: a link there is replaced, never
    // written through.
    let target = dir.join("airlock.prom");
    crate::core::file_output::write_atomic_no_follow(&target, text.as_bytes())?;
    Ok(Exit::Ok)
}
