//! `airlock generate-bundle` (hidden): writes a large valid bundle for benchmarks and drills.

use super::Exit;
use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
use crate::core::file_output::AtomicFile;
use clap::Args;
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Tenant id.
    #[arg(long, default_value = "bench")]
    pub tenant: String,
    /// Number of node logs.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// Entries in all (split evenly over the nodes).
    #[arg(long, default_value_t = 1_000_000)]
    pub entries: usize,
    /// Unix ms of the first entry.
    #[arg(long, default_value_t = 1_767_614_400_000)]
    pub start_ms: u64,
    /// Seed for the payloads (different seeds give disjoint job ids).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output file.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
}

pub fn run(a: GenerateArgs) -> Result<Exit> {
    let spec = SynthSpec {
        tenant: a.tenant,
        nodes: a.nodes.max(1),
        entries_per_node: a.entries / a.nodes.max(1),
        start_ms: a.start_ms,
        seed: a.seed,
    };
    let mut f = AtomicFile::create(&a.output)?;
    let header = write_synthetic_bundle(&spec, f.writer())?;
    f.commit()?;
    eprintln!(
        "wrote bundle {} ({} nodes x {} entries) to {}",
        header.bundle_id,
        spec.nodes,
        spec.entries_per_node,
        crate::text::visible_path(&a.output)
    );
    Ok(Exit::Ok)
}
