//! Import (SPEC section 7): verify every input bundle, plan the merge, and append the merged entries
//! to the tenant's scheduler chain in one transaction.
//!
//! Engine entry points (the CLI's `jobs import` and the console call exactly these):
//! * [`verify_inputs`]: verification only (`--verify-only`);
//! * [`plan_import`]: the dry-run plan, with per-node lanes for displays; writes nothing;
//! * [`import`]: verify, plan and write, all or nothing.
//!
//! Each input is read once: a [`Verifier`](crate::core::verify::Verifier) sees every entry while the
//! collector keeps the verified fields compactly (payload texts in one arena per bundle, hashes as
//! bytes).
//!
//! Layout: this file holds the options, progress, errors and the entry points; `load` reads and
//! verifies the inputs in parallel, `write` plans the merge and runs the transaction and the writer
//! pipeline, `report` holds the report types (re-exported here) and builds them.

mod load;
mod report;
mod write;

pub use report::*;

use load::load_all;
use write::{import_in_tx, run, Mode};

use crate::core::bundle::BundleFileError;
use crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW;
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::scheduler::{SchedulerError, SnapshotSigner, DEFAULT_BATCH_SIZE};
use crate::core::store::{Store, StoreError};
use crate::core::trust::TrustSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8};
use std::sync::Arc;
use std::time::Duration;

/// Phase timings on stderr when `AIRLOCK_IMPORT_TIMINGS` is set (a benchmarking aid): each call
/// prints the time since the previous one.
pub fn phase(what: &str) {
    use std::cell::Cell;
    use std::time::Instant;
    thread_local! {
        static LAST: Cell<Option<(Instant, Instant, f64)>> = const { Cell::new(None) };
    }
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON.get_or_init(|| std::env::var_os("AIRLOCK_IMPORT_TIMINGS").is_some()) {
        return;
    }
    // Process CPU time (user + system), from /proc on Linux; 0 elsewhere.
    let cpu = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(0.0);
    let now = Instant::now();
    let (start, last, last_cpu) = LAST.get().unwrap_or((now, now, cpu));
    eprintln!(
        "import timing: {what:<24} {:>7.3} s wall {:>6.2} s cpu  (at {:>7.3} s)",
        (now - last).as_secs_f64(),
        cpu - last_cpu,
        (now - start).as_secs_f64()
    );
    LAST.set(Some((start, now, cpu)));
}

/// How to import.
#[derive(Clone)]
pub struct ImportOptions<'a> {
    /// Import the verified prefix of broken logs instead of refusing (conflicts still refuse).
    pub force: bool,
    /// Report unsigned bundles as `signature-missing`.
    pub require_signature: bool,
    /// Trusted keys for the bundles' signatures (`None`: no key is trusted).
    pub trust: Option<&'a TrustSet>,
    /// Entries further ahead of `now_ms` are `clock-skew` findings.
    pub max_clock_skew: Duration,
    /// The verifying machine's clock, Unix ms.
    pub now_ms: u64,
    /// This machine's node id: its clock witnesses the largest imported HLC.
    pub node_id: String,
    /// Entries per automatic batch snapshot.
    pub batch_size: u64,
    /// Signs automatic snapshots when set.
    pub snapshot_signer: Option<SnapshotSigner<'a>>,
    /// Progress counters for displays.
    pub progress: Option<Arc<ImportProgress>>,
    /// Inputs of at least this many bytes in all are written with a rollback journal when no other
    /// connection has the store open ([`Store::with_bulk_journal`]); smaller imports stay in WAL.
    pub bulk_journal_min_bytes: u64,
    /// The names the report and the `imports` table give the inputs, in the order of the paths,
    /// instead of the paths themselves (`airlock serve` spools uploads under temporary names and
    /// reports them by the name the client gave).
    pub input_names: Option<&'a [String]>,
}

impl ImportOptions<'_> {
    pub fn new(node_id: impl Into<String>) -> Self {
        ImportOptions {
            force: false,
            require_signature: false,
            trust: None,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            now_ms: crate::core::hlc::unix_ms_now(),
            node_id: node_id.into(),
            batch_size: DEFAULT_BATCH_SIZE,
            snapshot_signer: None,
            progress: None,
            bulk_journal_min_bytes: BULK_JOURNAL_BYTES,
            input_names: None,
        }
    }
}

/// Live counters of a running import (read them from another thread).
#[derive(Debug, Default)]
pub struct ImportProgress {
    /// Total bytes of all inputs.
    pub bytes_total: AtomicU64,
    /// Bytes read so far.
    pub bytes_read: AtomicU64,
    /// Entries to write (known once the plan is made).
    pub entries_total: AtomicU64,
    /// Entries written so far.
    pub entries_written: AtomicU64,
    /// 0 verifying, 1 planning, 2 writing, 3 done.
    pub stage: AtomicU8,
}

pub const STAGE_VERIFYING: u8 = 0;
pub const STAGE_PLANNING: u8 = 1;
pub const STAGE_WRITING: u8 = 2;
pub const STAGE_DONE: u8 = 3;

/// Why an import could not run at all (exit status 2; nothing in the store changed).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no bundle files given")]
    NoInputs,
    #[error("{file}: {error}")]
    Unreadable {
        file: String,
        error: BundleFileError,
    },
    #[error("{file}: no tenantId, so it cannot be imported into a tenant chain (is it a bundle? `airlock jobs verify` lists what is wrong with it)")]
    NoTenant { file: String },
    #[error("the bundles belong to different tenants ({0}); import each tenant's bundles in a separate call")]
    MixedTenants(String),
    #[error("invalid node id for this machine: {0}")]
    NodeId(String),
    #[error("the local clock refused the largest imported timestamp: {0}")]
    Clock(#[from] crate::core::hlc::ClockSkewError),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ImportError {
    fn from(e: rusqlite::Error) -> Self {
        ImportError::Store(StoreError::Sql(e))
    }
}

/// `--verify-only`: verifies every input (status `verified`, or `refused` with findings).
pub fn verify_inputs(
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportReport, ImportError> {
    let loaded = load_all(paths, opts)?;
    let mut r = base_report(&loaded, opts.force, false);
    if r.totals.findings > 0 {
        r.status = ImportStatus::Refused;
        r.refusal = Some(Refusal::Findings);
    }
    r.dropped = loaded.iter().flat_map(|l| l.dropped.clone()).collect();
    r.totals.dropped = r.dropped.len() as u64;
    Ok(r)
}

/// The dry-run plan: exactly what [`import`] would do now, with per-node lanes; writes nothing.
pub fn plan_import(
    store: &dyn Backend,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportPlan, ImportError> {
    let mut loaded = load_all(paths, opts)?;
    let mut tx = store.begin(TxKind::Read)?;
    run(&mut *tx, &mut loaded, opts, Mode::Plan)
}

/// [`import`] into any store (PostgreSQL included): verify, plan and import in one transaction
/// that holds the tenant's chain lock, so importers running at once append one after the other.
pub fn import_into(
    store: &dyn Backend,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    phase("start");
    let mut loaded = load_all(paths, opts)?;
    phase("read + verify");
    import_in_tx(store, &mut loaded, opts)
}

/// Verifies, plans and imports in one transaction. Refusals (findings without `--force`,
/// conflicts) and "nothing to do" write nothing.
pub fn import(
    store: &mut Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    phase("start");
    let started = std::time::Instant::now();
    let result = import_counted(store, paths, opts);
    record_import(store, paths, &result, started.elapsed().as_secs_f64());
    result
}

fn import_counted(
    store: &mut Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let mut loaded = load_all(paths, opts)?;
    phase("read + verify");
    // One transaction holds every new page until commit: give it a page cache large enough not to
    // spill into the WAL (allocated only as used), and put the usual size back afterwards.
    let input_bytes: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let old_cache: i64 = store
        .conn()
        .query_row("PRAGMA cache_size", [], |r| r.get(0))?;
    let want_kib = (input_bytes / 1024 * 3 / 2).clamp(64 * 1024, 4 * 1024 * 1024) as i64;
    store.conn().pragma_update(None, "cache_size", -want_kib)?;
    // Large imports write their pages once (no WAL copy and checkpoint): see
    // [`Store::with_bulk_journal`]. Small ones stay in WAL mode.
    let result = if input_bytes >= opts.bulk_journal_min_bytes {
        store
            .with_bulk_journal(|store| import_in_tx(&*store, &mut loaded, opts))
            .0
    } else {
        import_in_tx(&*store, &mut loaded, opts)
    };
    let _ = store.conn().pragma_update(None, "cache_size", old_cache);
    result
}

/// Counts one import call in the metrics (SPEC section 13): what it imported, dropped as duplicates,
/// refused as conflicts or for clock skew, and how long it took.
fn record_import(
    store: &Store,
    paths: &[PathBuf],
    result: &Result<ImportResult, ImportError>,
    seconds: f64,
) {
    use crate::core::metrics::{record_quietly, Event, ImportCounts};
    let sizes: Vec<u64> = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .collect();
    let counts = match result {
        Ok(r) => {
            let imported = r.status == ImportStatus::Imported;
            let skew = r.bundles.iter().flat_map(|b| &b.verification.findings);
            let skew = skew.filter(|f| f.kind == crate::core::verify::FindingKind::ClockSkew);
            ImportCounts {
                imported,
                bundles: if imported {
                    let new = r.bundles.iter().filter(|b| b.status == BundleStatus::New);
                    new.count() as u64
                } else {
                    0
                },
                jobs: if imported { r.totals.new } else { 0 },
                duplicates: match r.status {
                    ImportStatus::Imported | ImportStatus::NothingToDo => r.totals.duplicates,
                    _ => 0,
                },
                conflicts: r.conflicts.len() as u64,
                skew_rejections: skew.count() as u64,
                snapshots: r.snapshots.len() as u64,
                input_bytes: &sizes,
                seconds,
            }
        }
        Err(ImportError::Clock(_)) => ImportCounts {
            skew_rejections: 1,
            input_bytes: &sizes,
            seconds,
            ..ImportCounts::default()
        },
        Err(_) => return,
    };
    record_quietly(store.conn(), &[Event::Imported(counts)]);
}

/// Default [`ImportOptions::bulk_journal_min_bytes`]: 32 MiB of bundles (some 60,000 entries).
pub const BULK_JOURNAL_BYTES: u64 = 32 << 20;
