//! Import (SPEC section 7): verify every input bundle, plan the merge, and append the merged entries
//! to the tenant's scheduler chain in one transaction.
//!
//! Engine entry points (the CLI's `jobs import`, the console and `airlock serve` call exactly these):
//! * [`verify_inputs`]: verification only (`--verify-only`);
//! * [`plan_import`]: the dry-run plan, with per-node lanes for displays; writes nothing;
//! * [`import`] (SQLite) and [`import_into`] (any store): verify, plan and write, all or nothing.
//!
//! A pipeline, one file per stage, each stage owning its output type and reading only the stages
//! before it:
//! 1. [`load`]: read and verify the inputs in parallel, each once (a
//!    [`Verifier`](crate::core::verify::Verifier) sees every entry and hands the collector the entry
//!    it parsed; per verified entry only a 48-byte key: HLC, job id, byte span, fingerprint)
//!    -> `Loaded`;
//! 2. [`plan`]: under the tenant's chain lock, skip bundles imported before, refuse findings, plan
//!    the merge (a k-way merge over the node logs) -> `Planned`;
//! 3. [`write`]: the `imports` rows, then each merged entry read back from its file
//!    ([`readback`], refused unless it is what pass 1 verified), the chain rows (the two-thread
//!    [`pipeline`]), job rows, head, snapshots and clock -> `Written`;
//! 4. [`report`]: the [`ImportReport`] from the three.
//!
//! [`options`] holds what every stage takes (options, progress, the error). Phases are `tracing`
//! spans (`import_read_verify`, `import_plan`, `import_write`, ...): `AIRLOCK_IMPORT_TIMINGS=1`
//! makes `jobs import` print each one's time on stderr.

mod dropped;
mod job_order;
mod load;
mod options;
mod pipeline;
mod plan;
mod readback;
mod report;
mod state;
mod write;

pub use dropped::{DroppedEntry, EntryOrigin};
pub use load::BundleStatus;
pub use options::*;
pub use plan::Refusal;
pub use report::*;
pub use state::{import_states, ImportState};

use crate::core::hlc::SystemWallClock;
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::writeback::EarlyWriteback;
use crate::core::store::Store;
use load::{load_all, Loaded};
use plan::{plan, stage, HeadAccess, Planned};
use std::path::PathBuf;

/// `--verify-only`: verifies every input (status `verified`, or `refused` with findings).
pub fn verify_inputs(
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportReport, ImportError> {
    let loaded = load_all(paths, opts)?;
    report::verify_report(&loaded, opts)
}

/// The dry-run plan: exactly what [`import`] would do now, with per-node lanes; writes nothing.
pub fn plan_import(
    store: &dyn Backend,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportPlan, ImportError> {
    let mut loaded = load_all(paths, opts)?;
    between_passes();
    let mut tx = store.begin(TxKind::Read)?;
    let planned = plan(&mut *tx, &mut loaded, opts, HeadAccess::Read)?;
    report::plan_report(&mut *tx, &loaded, &planned, opts)
}

/// [`import`] into any store (PostgreSQL included): verify, plan and import in one transaction
/// that holds the tenant's chain lock, so importers running at once append one after the other.
pub fn import_into(
    store: &dyn Backend,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let started = std::time::Instant::now();
    let result =
        load_all(paths, opts).and_then(|mut loaded| import_in_tx(store, &mut loaded, opts, None));
    record_import(store, paths, &result, started.elapsed().as_secs_f64());
    result
}

/// Verifies, plans and imports in one transaction. Refusals (findings without `--force`,
/// conflicts) and "nothing to do" write nothing.
pub fn import(
    store: &mut Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let started = std::time::Instant::now();
    let result = import_counted(store, paths, opts);
    record_import(store, paths, &result, started.elapsed().as_secs_f64());
    result
}

/// Stages 2 to 4 in one write transaction, committed only when something was imported. `pre`:
/// see [`plan::plan_locked`].
fn import_in_tx(
    store: &dyn Backend,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    pre: Option<Planned>,
) -> Result<ImportResult, ImportError> {
    between_passes();
    let mut tx = store.begin(TxKind::Write)?;
    // A damaged store is refused before anything is appended to it.
    tx.check_before_append(&loaded[0].header.tenant_id)?;
    // The clock resumes from what the store holds now, inside the write transaction, and tolerates
    // the skew verification did: an entry that passed the clock-skew check is never refused here.
    let mut clock = crate::core::store::rules::clock_in(&mut *tx, &opts.node_id, SystemWallClock)?
        .with_max_skew(opts.max_clock_skew);
    let planned = plan::plan_locked(&mut *tx, loaded, opts, pre)?;
    let written = match planned.writes() {
        true => Some(write::write(&mut *tx, loaded, &planned, opts, &mut clock)?),
        false => None,
    };
    let report = report::import_report(&mut *tx, loaded, &planned, written, opts)?;
    if report.status == ImportStatus::Imported {
        let _span = tracing::info_span!("import_commit").entered();
        tx.commit()?;
    }
    stage(opts.progress.as_deref(), STAGE_DONE);
    Ok(report)
}

/// The page cache of an import under a rollback journal, KiB.
const BULK_CACHE_KIB: i64 = 32 * 1024;

fn import_counted(
    store: &mut Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let loaded = load_all(paths, opts)?;
    import_loaded(store, paths, loaded, opts, None)
}

/// [`import`] into the SQLite store at `store_path`, made only when the import writes (`jobs
/// import` when the store is not there yet): the inputs are read and verified once and planned
/// against an empty store; a call that would write nothing (refused, nothing to do) or cannot run
/// leaves no file behind, as a dry run does. Otherwise the store is made and the import runs on
/// what was loaded, with that plan unless the store changed meanwhile ([`plan::plan_locked`]).
pub fn import_to_new_store(
    store_path: &std::path::Path,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let started = std::time::Instant::now();
    let mut loaded = load_all(paths, opts)?;
    let planned = {
        let empty = Store::open_in_memory()?;
        let mut tx = empty.begin(TxKind::Read)?;
        let planned = plan(&mut *tx, &mut loaded, opts, HeadAccess::Read)?;
        if !planned.writes() {
            stage(opts.progress.as_deref(), STAGE_DONE);
            return report::import_report(&mut *tx, &loaded, &planned, None, opts);
        }
        planned
    };
    let mut store = Store::open(store_path)?;
    let result = import_loaded(&mut store, paths, loaded, opts, Some(planned));
    record_import(&store, paths, &result, started.elapsed().as_secs_f64());
    result
}

/// [`import_counted`] on inputs already loaded.
fn import_loaded(
    store: &mut Store,
    paths: &[PathBuf],
    mut loaded: Vec<Loaded>,
    opts: &ImportOptions<'_>,
    pre: Option<Planned>,
) -> Result<ImportResult, ImportError> {
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
            .with_bulk_journal(|store| {
                // With a rollback journal, new pages can go to the database file before the
                // commit (nothing of theirs is journaled): a small cache keeps memory bounded.
                let mode: String = store
                    .conn()
                    .query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
                // They are also written out while the import runs, not all by the commit's fsync.
                let mut _writeback = None;
                if mode.eq_ignore_ascii_case("truncate") {
                    store
                        .conn()
                        .pragma_update(None, "cache_size", -BULK_CACHE_KIB)?;
                    _writeback = Some(EarlyWriteback::start(store.path()));
                }
                import_in_tx(&*store, &mut loaded, opts, pre)
            })
            .0
    } else {
        import_in_tx(&*store, &mut loaded, opts, pre)
    };
    let _ = store.conn().pragma_update(None, "cache_size", old_cache);
    result
}
#[cfg(test)]
thread_local! {
    /// Run once between the verifying pass and the reading back (tests change the inputs there).
    static BETWEEN_PASSES: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

/// The test hook between the two passes over the inputs (nothing outside tests).
fn between_passes() {
    #[cfg(test)]
    // Taken before it runs: the hook may start an import of its own.
    if let Some(f) = BETWEEN_PASSES.with(|h| h.borrow_mut().take()) {
        f()
    }
}

#[cfg(test)]
mod tests;

/// Counts one import call in the metrics (SPEC section 13): what it imported, dropped as duplicates,
/// refused as conflicts or for clock skew, and how long it took.
fn record_import(
    store: &dyn Backend,
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
    record_quietly(store, &[Event::Imported(counts)]);
}
