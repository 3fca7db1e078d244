//! Metrics (SPEC section 13): every metric of the seeds' tables (seed job-sync-offline: `airgap_*`;
//! seed hlc-ordering: `hlc_*`, `scheduler_*`) with the seed's name, type and labels, plus the WAL's
//! and the service's own.
//!
//! Counters and histograms are kept in the store (`metric_samples`, migration 4), so one-shot CLI
//! runs count and nothing resets when `airlock serve` restarts. The engine records [`Event`]s where
//! the work happens (enqueue, export, import, chain verification, snapshots, appends), after the work
//! has committed; a failure to record is logged and never fails the work. [`exposition`] renders the
//! Prometheus text format from the store.

pub mod exposition;

/// Schema of the persisted metrics and the exports serve downloads (store migration 4).
pub const MIGRATION_4: &str = "CREATE TABLE metric_samples (
        name   TEXT NOT NULL,
        labels TEXT NOT NULL,
        value  REAL NOT NULL,
        PRIMARY KEY (name, labels)
    ) WITHOUT ROWID;
    CREATE TABLE exports (
        export_id       TEXT PRIMARY KEY,
        bundle_id       TEXT NOT NULL,
        path            TEXT NOT NULL,
        artifact_sha256 TEXT NOT NULL,
        size_bytes      INTEGER NOT NULL,
        created_at      TEXT NOT NULL
    );";

use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::{sql, StoreError};

/// What a metric is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricKind {
    Counter,
    Gauge,
    /// Upper bounds of the buckets (`+Inf` is implied).
    Histogram(&'static [f64]),
}

/// One metric of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSpec {
    pub name: &'static str,
    pub kind: MetricKind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

// Seed job-sync-offline.
pub const BUNDLES_EXPORTED: &str = "airgap_bundles_exported_total";
pub const BUNDLES_IMPORTED: &str = "airgap_bundles_imported_total";
pub const JOBS_SYNCED: &str = "airgap_jobs_synced_total";
pub const DUPLICATES_DROPPED: &str = "airgap_duplicates_dropped_total";
pub const MERGE_CONFLICTS: &str = "airgap_merge_conflicts_total";
pub const OFFLINE_ENQUEUES: &str = "airgap_offline_enqueues_total";
pub const BUNDLE_SIZE: &str = "airgap_bundle_size_bytes";
pub const SYNC_DURATION: &str = "airgap_sync_duration_seconds";
pub const MERGE_ENTRIES: &str = "airgap_merge_entries_count";
// Seed hlc-ordering.
pub const HLC_TICKS: &str = "hlc_ticks_total";
pub const SKEW_REJECTIONS: &str = "hlc_clock_skew_rejections_total";
pub const PHYSICAL_OFFSET: &str = "hlc_physical_offset_seconds";
pub const CHAIN_ENTRIES: &str = "scheduler_chain_entries_total";
pub const CHAIN_VERIFICATIONS: &str = "scheduler_chain_verifications_total";
pub const CHAIN_VERIFICATION_FAILURES: &str = "scheduler_chain_verification_failures_total";
pub const BATCH_SNAPSHOTS: &str = "scheduler_batch_snapshots_total";
// airlock's own: the tolerance the skew alert compares with.
pub const MAX_CLOCK_SKEW: &str = "hlc_max_clock_skew_seconds";
// The node write-ahead log (SPEC section 11); core::wal records these.
pub const WAL_APPENDS: &str = "airlock_wal_appends_total";
pub const WAL_BYTES: &str = "airlock_wal_bytes_written_total";
pub const WAL_FSYNCS: &str = "airlock_wal_fsyncs_total";
pub const WAL_FSYNC_DURATION: &str = "airlock_wal_fsync_duration_seconds";
pub const WAL_TORN_TAILS: &str = "airlock_wal_torn_tails_total";
pub const WAL_BATCHES: &str = "airlock_wal_batches_total";
pub const WAL_BATCH_FRAMES: &str = "airlock_wal_batch_frames";
pub const WAL_RECOVERIES: &str = "airlock_wal_recoveries_total";
// Export-ready notifications (SPEC section 10): counters computed from the store's queue tables at
// exposition time, the delivery latency recorded per attempt.
pub const NOTIFY_EMISSIONS: &str = "airlock_notify_emissions_total";
pub const NOTIFY_ATTEMPTS: &str = "airlock_notify_attempts_total";
pub const NOTIFY_DELIVERIES: &str = "airlock_notify_deliveries";
pub const NOTIFY_DEAD_LETTERS: &str = "airlock_notify_dead_letters_total";
pub const NOTIFY_DELIVERY_DURATION: &str = "airlock_notify_delivery_duration_seconds";
// The job ledger's replicated durability (SPEC 12/14).
pub const LEDGER_CONFIRMATIONS: &str = "airlock_ledger_confirmations_total";
pub const LEDGER_CONFIRM_SPILLS: &str = "airlock_ledger_unconfirmed_spills_total";
// airlock serve's background jobs.
pub const SERVE_JOB_RUNS: &str = "airlock_serve_job_runs_total";
pub const SERVE_JOB_FAILURES: &str = "airlock_serve_job_failures_total";
/// Tenants whose chain failed airlock serve's last verification: a gauge serve alone knows.
pub const CHAINS_FAILING: &str = "airlock_chains_failing";

/// The one conflict type of SPEC section 7: same jobId, different payloadHash.
pub const CONFLICT_PAYLOAD_MISMATCH: &str = "payload_mismatch";

const SIZE_BUCKETS: &[f64] = &[
    1024.0,
    16384.0,
    262144.0,
    1048576.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
];
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
];
const ENTRY_BUCKETS: &[f64] = &[1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0];
const FSYNC_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

const BATCH_FRAME_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0];
const ATTEMPT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const fn m(
    name: &'static str,
    kind: MetricKind,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricSpec {
    MetricSpec {
        name,
        kind,
        labels,
        help,
    }
}

use MetricKind::{Counter, Gauge, Histogram};

/// Every metric, in exposition order.
pub const CATALOG: &[MetricSpec] = &[
    m(BUNDLES_EXPORTED, Counter, &[], "Total bundles exported"),
    m(BUNDLES_IMPORTED, Counter, &[], "Total bundles imported"),
    m(JOBS_SYNCED, Counter, &[], "Total jobs synced"),
    m(DUPLICATES_DROPPED, Counter, &[], "Duplicates dropped during merge"),
    m(MERGE_CONFLICTS, Counter, &["type"], "Merge conflicts by type"),
    m(OFFLINE_ENQUEUES, Counter, &[], "Offline enqueue operations"),
    m(BUNDLE_SIZE, Histogram(SIZE_BUCKETS), &[], "Bundle size distribution"),
    m(SYNC_DURATION, Histogram(DURATION_BUCKETS), &[], "Sync operation duration"),
    m(MERGE_ENTRIES, Histogram(ENTRY_BUCKETS), &[], "Entries per merge operation"),
    m(HLC_TICKS, Counter, &[], "Total HLC tick operations"),
    m(SKEW_REJECTIONS, Counter, &[], "Events rejected due to clock skew"),
    m(PHYSICAL_OFFSET, Gauge, &[], "Current physical time offset: how far the store's HLC runs ahead of this machine's wall clock"),
    m(MAX_CLOCK_SKEW, Gauge, &[], "Configured maximum tolerated clock skew (scheduler.hlc.maxClockSkew)"),
    m(CHAIN_ENTRIES, Counter, &[], "Total chain log entries"),
    m(CHAIN_VERIFICATIONS, Counter, &[], "Chain verification operations"),
    m(CHAIN_VERIFICATION_FAILURES, Counter, &[], "Failed verifications"),
    m(BATCH_SNAPSHOTS, Counter, &[], "Batch snapshots created"),
    m(WAL_APPENDS, Counter, &[], "Frames appended to node write-ahead logs"),
    m(WAL_BYTES, Counter, &[], "Bytes written to node write-ahead logs"),
    m(WAL_FSYNCS, Counter, &[], "Group-commit fdatasync calls of node write-ahead logs"),
    m(WAL_FSYNC_DURATION, Histogram(FSYNC_BUCKETS), &[], "Duration of one write-ahead log group commit fdatasync"),
    m(WAL_TORN_TAILS, Counter, &[], "Torn tails cut off by write-ahead log recovery"),
    m(WAL_BATCHES, Counter, &[], "Group commits (one write and one fdatasync) of node write-ahead logs"),
    m(WAL_BATCH_FRAMES, Histogram(BATCH_FRAME_BUCKETS), &[], "Frames per write-ahead log group commit"),
    m(WAL_RECOVERIES, Counter, &["outcome"], "Write-ahead log recoveries at open by outcome (clean, torn-tail)"),
    m(NOTIFY_EMISSIONS, Counter, &[], "Export-ready events emitted (one per export_id and artifact)"),
    m(NOTIFY_ATTEMPTS, Counter, &["target", "outcome"], "Notification delivery attempts by target kind and outcome (delivered, failed, interrupted)"),
    m(NOTIFY_DELIVERIES, Gauge, &["target", "status"], "Notification deliveries by target kind and status (pending is the queue depth)"),
    m(NOTIFY_DEAD_LETTERS, Counter, &[], "Notification deliveries dead-lettered after their last attempt"),
    m(NOTIFY_DELIVERY_DURATION, Histogram(ATTEMPT_BUCKETS), &[], "Duration of one notification delivery attempt"),
    m(LEDGER_CONFIRMATIONS, Counter, &["level", "outcome"], "Ledger REGIONAL/GLOBAL confirmations from PostgreSQL by outcome"),
    m(LEDGER_CONFIRM_SPILLS, Counter, &["level"], "Times a ledger's unconfirmed frames outgrew memory and were left to be read back from its WAL"),
    m(SERVE_JOB_RUNS, Counter, &["job"], "Runs of airlock serve's background jobs"),
    m(SERVE_JOB_FAILURES, Counter, &["job"], "Failed runs of airlock serve's background jobs"),
    m(CHAINS_FAILING, Gauge, &[], "Tenants whose scheduler chain failed airlock serve's last verification"),
];

/// The catalogue entry of `name`.
pub fn spec(name: &str) -> Option<&'static MetricSpec> {
    CATALOG.iter().find(|s| s.name == name)
}

/// Something that happened, as the metrics count it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// Jobs appended to a node log (each took one HLC tick).
    Enqueued { jobs: u64 },
    /// A bundle written.
    Exported { bytes: u64, seconds: f64 },
    /// One import call that ran (imported, nothing to do, or refused).
    Imported(ImportCounts<'a>),
    /// A chain verification and whether it passed.
    ChainVerified { ok: bool },
    /// Batch snapshots taken.
    Snapshots { count: u64 },
    /// Entries appended to a scheduler chain outside imports (lifecycle actions).
    ChainAppended { entries: u64, ticks: u64 },
    /// Timestamps refused for being too far ahead of the wall clock.
    SkewRejected { count: u64 },
    /// A background job of `airlock serve` ran.
    ServeJob { job: &'a str, ok: bool },
    /// Add `delta` to the counter `name` (no labels), e.g. the WAL's counters.
    Count { name: &'static str, delta: u64 },
    /// One histogram observation, e.g. a WAL fsync duration.
    Observe { name: &'static str, value: f64 },
    /// Add `delta` to the counter `name` with these labels (`label_text` form).
    CountLabelled {
        name: &'static str,
        labels: String,
        delta: u64,
    },
    /// Many histogram observations at once: `(value, how many)` and their exact sum (a WAL's
    /// histogram delta since the last flush).
    ObserveMany {
        name: &'static str,
        samples: Vec<(f64, u64)>,
        sum: f64,
    },
}

/// The numbers of one import call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImportCounts<'a> {
    /// Whether entries were written (status `imported`).
    pub imported: bool,
    /// Bundles newly imported.
    pub bundles: u64,
    /// Entries appended to the chain.
    pub jobs: u64,
    pub duplicates: u64,
    pub conflicts: u64,
    /// `clock-skew` findings.
    pub skew_rejections: u64,
    pub snapshots: u64,
    /// Size in bytes of each input.
    pub input_bytes: &'a [u64],
    pub seconds: f64,
}

/// Why recording or reading metrics failed.
#[derive(Debug, thiserror::Error)]
#[error("metrics: {0}")]
pub struct MetricsError(#[from] pub StoreError);

/// Adds the events to the persisted counters, in one transaction (rows in one order, so
/// concurrent recorders of a PostgreSQL store never deadlock).
pub fn record(store: &dyn Backend, events: &[Event<'_>]) -> Result<(), MetricsError> {
    let mut deltas: Vec<(&'static str, String, f64)> = Vec::new();
    for e in events {
        deltas_of(e, &mut deltas);
    }
    deltas.retain(|d| d.2 != 0.0);
    if deltas.is_empty() {
        return Ok(());
    }
    deltas.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut tx = store.begin(TxKind::Write)?;
    for (name, labels, delta) in deltas {
        sql::exec(
            &mut *tx,
            "INSERT INTO metric_samples (name, labels, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (name, labels) DO UPDATE SET value = metric_samples.value + excluded.value",
            &[name.into(), labels.into(), delta.into()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// The persisted samples: those that read, and what is wrong with each row that does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// Every sample that reads `(name, labels, value)`, ordered by name and labels.
    pub rows: Vec<(String, String, f64)>,
    /// One line per `metric_samples` row left out (its name and labels escaped, and why): a
    /// value that is not a number, a name or labels that are not text, labels that are not a
    /// label set as [`label_text`] writes them (they would be copied into the exposition as they
    /// are: a newline would add series, a control character reach the terminal).
    pub damaged: Vec<String>,
}

/// Every persisted sample, a damaged row left out and named ([`Samples`]): one such row no longer
/// fails the whole exposition.
pub fn samples(store: &dyn Backend) -> Result<Samples, MetricsError> {
    let mut tx = store.begin(TxKind::Read)?;
    let rows = sql::query(
        &mut *tx,
        "metric_samples",
        "SELECT name, labels, value FROM metric_samples ORDER BY name, labels",
        &[],
    )?;
    let mut out = Samples::default();
    for r in &rows {
        let name = r.text(0);
        let labels = r.text(1);
        let value = r.f64(2);
        let why = match (&name, &labels, &value) {
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Some(e.to_string()),
            (Ok(_), Ok(l), Ok(_)) => stored_labels_problem(l),
        };
        match (name, labels, value, why) {
            (Ok(n), Ok(l), Ok(v), None) => out.rows.push((n, l, v)),
            (name, labels, _, why) => out.damaged.push(format!(
                "metric_samples row name {} labels {} left out: {}",
                shown_or(name.ok()),
                shown_or(labels.ok()),
                crate::core::text::visible(&why.unwrap_or_default())
            )),
        }
    }
    Ok(out)
}

/// A stored text for a message: quoted and escaped, or `(unreadable)`.
fn shown_or(text: Option<String>) -> String {
    match text {
        Some(t) => format!("\"{}\"", crate::core::text::visible(&t)),
        None => "(unreadable)".into(),
    }
}

/// Why stored label text is not what [`label_text`] writes (empty, `sum`, `count`, or
/// `k="v",...` with `\\`, `\"` and `\n` the only escapes and no control character), if it is not.
pub fn stored_labels_problem(labels: &str) -> Option<String> {
    if matches!(labels, "" | "sum" | "count") {
        return None;
    }
    let bad = |what: &str| Some(format!("the labels are not a label set ({what})"));
    let mut rest = labels;
    loop {
        let Some((key, after)) = rest.split_once("=\"") else {
            return bad("no key=\"value\"");
        };
        let key_ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !key_ok {
            return bad("a label name is not [A-Za-z_][A-Za-z0-9_]*");
        }
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                None => return bad("a value is not closed"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    _ => return bad("a value has an escape other than \\\\, \\\" or \\n"),
                },
                Some((_, c)) if crate::core::text::needs_escape(c) => {
                    return bad("a value holds a control character")
                }
                Some(_) => {}
            }
        };
        rest = &after[end + 1..];
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None if rest.is_empty() => return None,
            None => return bad("text after a value"),
        }
    }
}

/// [`record`], logging a failure instead of returning it: metrics never fail the work they count.
pub fn record_quietly(store: &dyn Backend, events: &[Event<'_>]) {
    if let Err(e) = record(store, events) {
        tracing::warn!("{e}");
    }
}

fn deltas_of(e: &Event<'_>, out: &mut Vec<(&'static str, String, f64)>) {
    let mut add = |name: &'static str, labels: String, v: f64| out.push((name, labels, v));
    match e {
        Event::Enqueued { jobs } => {
            add(OFFLINE_ENQUEUES, String::new(), *jobs as f64);
            add(HLC_TICKS, String::new(), *jobs as f64);
        }
        Event::Exported { bytes, seconds } => {
            add(BUNDLES_EXPORTED, String::new(), 1.0);
            observe(BUNDLE_SIZE, *bytes as f64, &mut add);
            observe(SYNC_DURATION, *seconds, &mut add);
        }
        Event::Imported(c) => {
            add(BUNDLES_IMPORTED, String::new(), c.bundles as f64);
            add(JOBS_SYNCED, String::new(), c.jobs as f64);
            add(CHAIN_ENTRIES, String::new(), c.jobs as f64);
            add(DUPLICATES_DROPPED, String::new(), c.duplicates as f64);
            let conflict = label_text(&[("type", CONFLICT_PAYLOAD_MISMATCH)]);
            add(MERGE_CONFLICTS, conflict, c.conflicts as f64);
            add(SKEW_REJECTIONS, String::new(), c.skew_rejections as f64);
            add(BATCH_SNAPSHOTS, String::new(), c.snapshots as f64);
            for b in c.input_bytes {
                observe(BUNDLE_SIZE, *b as f64, &mut add);
            }
            observe(SYNC_DURATION, c.seconds, &mut add);
            if c.imported {
                observe(MERGE_ENTRIES, c.jobs as f64, &mut add);
            }
        }
        Event::ChainVerified { ok } => {
            add(CHAIN_VERIFICATIONS, String::new(), 1.0);
            add(
                CHAIN_VERIFICATION_FAILURES,
                String::new(),
                if *ok { 0.0 } else { 1.0 },
            );
        }
        Event::Snapshots { count } => add(BATCH_SNAPSHOTS, String::new(), *count as f64),
        Event::ChainAppended { entries, ticks } => {
            add(CHAIN_ENTRIES, String::new(), *entries as f64);
            add(HLC_TICKS, String::new(), *ticks as f64);
        }
        Event::SkewRejected { count } => add(SKEW_REJECTIONS, String::new(), *count as f64),
        Event::ServeJob { job, ok } => {
            let labels = label_text(&[("job", job)]);
            add(SERVE_JOB_RUNS, labels.clone(), 1.0);
            add(SERVE_JOB_FAILURES, labels, if *ok { 0.0 } else { 1.0 });
        }
        Event::Count { name, delta } => add(name, String::new(), *delta as f64),
        Event::Observe { name, value } => observe(name, *value, &mut add),
        Event::CountLabelled {
            name,
            labels,
            delta,
        } => add(name, labels.clone(), *delta as f64),
        Event::ObserveMany { name, samples, sum } => observe_many(name, samples, *sum, &mut add),
    }
}

/// Many observations of a histogram: cumulative buckets, `_sum` = `sum`, `_count`.
fn observe_many(
    name: &'static str,
    samples: &[(f64, u64)],
    sum: f64,
    add: &mut impl FnMut(&'static str, String, f64),
) {
    let Some(MetricKind::Histogram(bounds)) = spec(name).map(|s| s.kind) else {
        return;
    };
    let total: u64 = samples.iter().map(|s| s.1).sum();
    if total == 0 {
        return;
    }
    for b in bounds {
        let n: u64 = samples.iter().filter(|s| s.0 <= *b).map(|s| s.1).sum();
        add(
            name,
            label_text(&[("le", &exposition::number(*b))]),
            n as f64,
        );
    }
    add(name, label_text(&[("le", "+Inf")]), total as f64);
    add(name, "sum".into(), sum);
    add(name, "count".into(), total as f64);
}

/// The events that bring the persisted WAL metrics from `before` to `now` (two snapshots of one
/// open log's counters): appends, bytes, group commits, fdatasyncs and their latency, frames per
/// batch, torn tails.
pub fn wal_deltas(
    before: &crate::core::wal::WalMetricsSnapshot,
    now: &crate::core::wal::WalMetricsSnapshot,
) -> Vec<Event<'static>> {
    use crate::core::wal::metrics::HistogramSnapshot;
    let count = |name, a: u64, b: u64| Event::Count {
        name,
        delta: b.saturating_sub(a),
    };
    // Per-bucket count deltas of a histogram, each bucket's lower bound scaled by `scale`.
    let delta = |a: &HistogramSnapshot, b: &HistogramSnapshot, scale: f64| -> Vec<(f64, u64)> {
        let old: std::collections::HashMap<u64, u64> = a.buckets.iter().copied().collect();
        b.buckets
            .iter()
            .filter_map(|(floor, n)| {
                let d = n.saturating_sub(old.get(floor).copied().unwrap_or(0));
                (d > 0).then_some((*floor as f64 * scale, d))
            })
            .collect()
    };
    vec![
        count(WAL_APPENDS, before.appends, now.appends),
        count(WAL_BYTES, before.bytes, now.bytes),
        count(WAL_BATCHES, before.batches, now.batches),
        count(WAL_FSYNCS, before.fdatasyncs, now.fdatasyncs),
        count(WAL_TORN_TAILS, before.torn_tails, now.torn_tails),
        Event::ObserveMany {
            name: WAL_FSYNC_DURATION,
            samples: delta(&before.fdatasync_micros, &now.fdatasync_micros, 1e-6),
            sum: now
                .fdatasync_micros
                .sum
                .saturating_sub(before.fdatasync_micros.sum) as f64
                * 1e-6,
        },
        Event::ObserveMany {
            name: WAL_BATCH_FRAMES,
            samples: delta(&before.batch_size, &now.batch_size, 1.0),
            sum: now.batch_size.sum.saturating_sub(before.batch_size.sum) as f64,
        },
    ]
}

/// A WAL recovery at open, by outcome (`clean`, `torn-tail`).
pub fn wal_recovered(outcome: &str) -> Event<'static> {
    Event::CountLabelled {
        name: WAL_RECOVERIES,
        labels: label_text(&[("outcome", outcome)]),
        delta: 1,
    }
}

/// One observation of a histogram: its cumulative buckets, `_sum` and `_count`.
fn observe(name: &'static str, v: f64, add: &mut impl FnMut(&'static str, String, f64)) {
    let Some(MetricKind::Histogram(bounds)) = spec(name).map(|s| s.kind) else {
        return;
    };
    for b in bounds.iter().filter(|b| v <= **b) {
        add(name, label_text(&[("le", &exposition::number(*b))]), 1.0);
    }
    add(name, label_text(&[("le", "+Inf")]), 1.0);
    add(name, "sum".into(), v);
    add(name, "count".into(), 1.0);
}

/// `a="x",b="y"` with the exposition format's escapes.
pub fn label_text(labels: &[(&str, &str)]) -> String {
    labels
        .iter()
        .map(|(k, v)| {
            let mut out = String::with_capacity(v.len());
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    // Any other control character never reaches the exposition (nor a terminal
                    // showing it): its visible escape, as text (`\\x1b`).
                    c if crate::core::text::needs_escape(c) => out.push_str(
                        &crate::core::text::visible(c.encode_utf8(&mut [0; 4]))
                            .replace('\\', "\\\\"),
                    ),
                    c => out.push(c),
                }
            }
            format!("{k}=\"{out}\"")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
