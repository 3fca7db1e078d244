//! `airlock metrics [--textfile DIR]`: the persisted metrics in the Prometheus text format, on stdout
//! or written atomically as `DIR/airlock.prom` for node_exporter's textfile collector (hosts that
//! never run `airlock serve`).

use super::output::safe;
use super::{Ctx, Exit};
use crate::core::config;
use crate::core::metrics::exposition::{self, Gauges};
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
pub fn exposition_text(store: &crate::core::store::Store, cfg: &config::Config) -> Result<String> {
    let now = crate::core::hlc::unix_ms_now();
    let gauges = Gauges {
        physical_offset_seconds: exposition::physical_offset_seconds(store.conn(), now)?,
        max_clock_skew_seconds: cfg
            .duration(config::MAX_CLOCK_SKEW)
            .map(|d| d.as_secs_f64()),
    };
    Ok(exposition::render(store.conn(), gauges)?)
}

pub fn run(ctx: &Ctx, a: MetricsArgs) -> Result<Exit> {
    let cfg = ctx.load_config(Vec::new())?;
    let store = ctx.open_store()?;
    let text = exposition_text(&store, &cfg)?;
    let Some(dir) = a.textfile else {
        print!("{text}");
        return Ok(Exit::Ok);
    };
    if !dir.is_dir() {
        return Err(eyre!(
            "--textfile {}: not a directory (give node_exporter's --collector.textfile.directory)",
            safe(&dir.display().to_string())
        ));
    }
    let target = dir.join("airlock.prom");
    crate::core::file_output::write_atomic(&target, text.as_bytes())?;
    Ok(Exit::Ok)
}
