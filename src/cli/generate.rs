//! `airlock generate-bundle` (hidden): writes a large valid bundle for benchmarks and drills.

use super::Exit;
use crate::core::bundle::synth::SynthTotal;
use crate::core::file_output::{AtomicFile, WriteFileError};
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
    /// Entries in all, at least one per node (split evenly over the nodes; the first logs take
    /// one more each when they do not divide).
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
    // What would not be exactly the bundle asked for, or not a valid one, is refused (exit 2).
    let total = SynthTotal::new(a.tenant, a.nodes, a.entries, a.start_ms, a.seed)?;
    let mut f = AtomicFile::create(&a.output)?;
    let written = total.write(f.writer());
    let header = written.map_err(|source| WriteFileError {
        path: a.output.clone(),
        source,
    })?;
    f.commit()?;
    eprintln!(
        "wrote bundle {} ({} nodes, {} entries) to {}",
        header.bundle_id,
        total.nodes(),
        a.entries,
        crate::text::visible_path(&a.output)
    );
    Ok(Exit::Ok)
}
