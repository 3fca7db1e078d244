//! `airlock jobs import BUNDLE...`: verify, merge and append to the tenant's scheduler chain.

use super::output::print_json;
use super::{Ctx, Exit};
use crate::core::import::{self, ImportOptions, ImportStatus};
use crate::core::paths;
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Bundle files, all of one tenant; merged in one deterministic order whatever their order here.
    #[arg(required = true, value_name = "BUNDLE")]
    pub bundles: Vec<PathBuf>,
    /// Only verify the bundles (every finding), import nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify_only: bool,
    /// Import the verified prefix of broken logs and report what was dropped (conflicts still refuse).
    #[arg(long)]
    pub force: bool,
    /// Show the plan (new entries in order, duplicates, conflicts, dropped) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trust: super::TrustArgs,
    /// Entries per automatic batch snapshot.
    #[arg(long, env = "AIRLOCK_BATCH_SIZE", default_value_t = crate::core::store::scheduler::DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    #[command(flatten)]
    pub skew: super::SkewArgs,
    /// This machine's node id (default: $AIRLOCK_NODE_ID, else the host name).
    #[arg(long)]
    pub node: Option<String>,
    /// Imports of at least this many bytes of bundles write their pages once, with a rollback
    /// journal instead of the WAL, when no other connection has the store open (tuning, tests).
    #[arg(long, hide = true, env = "AIRLOCK_BULK_JOURNAL_MIN_BYTES", value_name = "BYTES",
          default_value_t = import::BULK_JOURNAL_BYTES)]
    pub bulk_journal_min_bytes: u64,
    /// How many planned entries / duplicates / dropped entries to list in human output.
    #[arg(long, default_value_t = 50)]
    pub show: usize,
}

/// `AIRLOCK_IMPORT_TIMINGS` (a benchmarking aid): the engine's import phases are `tracing` spans;
/// print each one's wall time on stderr when it closes.
fn print_phase_timings() {
    use tracing_subscriber::fmt::format::FmtSpan;
    let _ = tracing_subscriber::fmt()
        .with_writer(crate::log_lines::EscapedLines(std::io::stderr))
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new("airlock=info"))
        .with_span_events(FmtSpan::CLOSE)
        .try_init();
}

/// The SQLite store file `--db` names, when it is not there yet.
fn missing_sqlite_store(ctx: &Ctx) -> Result<Option<PathBuf>> {
    use crate::core::store::any::StoreLocation;
    Ok(match ctx.db_location()? {
        StoreLocation::Sqlite(p) if std::fs::symlink_metadata(&p).is_err() => Some(p),
        _ => None,
    })
}

pub fn run(ctx: &Ctx, a: ImportArgs) -> Result<Exit> {
    if std::env::var_os("AIRLOCK_IMPORT_TIMINGS").is_some() {
        print_phase_timings();
    }
    let trust = a.trust.trust()?;
    let mut opts = ImportOptions::new(paths::node_id(a.node.as_deref()));
    opts.force = a.force;
    opts.require_signature = a.trust.signature_required()?;
    opts.trust = Some(&trust);
    opts.batch_size = a.batch_size;
    opts.bulk_journal_min_bytes = a.bulk_journal_min_bytes;
    opts.max_clock_skew = ctx.max_clock_skew(&a.skew)?;
    // The report's dropped entries are read back as it is printed (bounded memory).
    opts.stream_dropped = true;
    let report = if a.verify_only {
        import::verify_inputs(&a.bundles, &opts)
    } else if a.dry_run {
        // Writes nothing: against a store that is not there, the plan is made against an empty
        // one (in memory) and no file is created.
        let store = ctx.open_store_or_empty()?;
        import::plan_import(&store, &a.bundles, &opts)
    } else if let Some(path) = missing_sqlite_store(ctx)? {
        // The first import makes the store, but only when it imports something: a refused or
        // failing one leaves no file (a mistyped --db stays an error for every later command).
        import::import_to_new_store(&path, &a.bundles, &opts)
    } else {
        let mut store = ctx.open_any_store()?;
        let r = store.import(&a.bundles, &opts);
        let _span = tracing::info_span!("import_close_store").entered();
        drop(store);
        r
    }
    .map_err(|e| eyre!("{e}"))?;
    if a.json {
        print_json(&report)?;
    } else {
        for line in crate::report_text::import_lines(&report, a.show) {
            println!("{line}");
        }
    }
    // The dropped entries read back before the commit, but not now (the file failed in between):
    // the report above is complete and valid, listing those read and saying so
    // (`droppedUnreadable` in JSON); the status stands for what happened to the store.
    if let Some(e) = report.dropped_unreadable() {
        let done = match report.status {
            ImportStatus::Imported => "the import was committed, but ",
            _ => "",
        };
        eprintln!(
            "warning: {done}the list of dropped entries is incomplete ({}); list them again with \
             `airlock jobs import --verify-only` on the same bundles",
            super::output::safe(e)
        );
    }
    // Refused (findings, conflicts, or nothing to import: every entry dropped, no entries) is 1.
    Ok(match report.status {
        ImportStatus::Refused => Exit::Failed,
        _ => Exit::Ok,
    })
}
