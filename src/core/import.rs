//! Import (SPEC section 7): verify every input bundle, plan the merge, and append the merged entries
//! to the tenant's scheduler chain in one transaction.
//!
//! Engine entry points (the CLI's `jobs import` and the console call exactly these):
//! * [`verify_inputs`]: verification only (`--verify-only`);
//! * [`plan_import`]: the dry-run plan, with per-node lanes for displays; writes nothing;
//! * [`import`]: verify, plan and write, all or nothing.
//!
//! Each input is read once: a [`Verifier`] sees every entry while the collector keeps the verified
//! fields compactly (payload texts in one arena per bundle, hashes as bytes).

use crate::core::bundle::{
    read_bundle, BundleFileError, BundleHeader, BundleVisitor, EntryView, LogFields,
};
use crate::core::chain::{scheduler_chain_link, Action, Digest32};
use crate::core::hlc::{Hlc, SystemWallClock, DEFAULT_MAX_CLOCK_SKEW};
use crate::core::merge::{
    plan_merge, ConflictSide, DuplicateOf, EntryAt, MergeEntry, MergeInput, MergePlan,
};
use crate::core::store::scheduler::{
    self, chain_head, existing_jobs, find_import, insert_import, insert_jobs, ChainAppender,
    ImportRecord, NewProvenance, PreparedRows, SchedulerError, Snapshot, SnapshotSigner,
    DEFAULT_BATCH_SIZE,
};
use crate::core::store::{save_clock_state, Store, StoreError};
use crate::core::time::rfc3339_millis;
use crate::core::trust::TrustSet;
use crate::core::verify::{Report, Verifier, VerifyOptions};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Serialize;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rows per chunk handed from the row preparer to the writer, and chunks in flight.
const PIPELINE_CHUNK: usize = 4096;
const PIPELINE_DEPTH: usize = 4;

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

/// What happened (or would happen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportStatus {
    /// Entries or bundles were recorded.
    Imported,
    /// Every bundle was imported before / every entry is already in the chain: nothing written.
    NothingToDo,
    /// Findings (without `--force`) or conflicts: nothing written.
    Refused,
    /// `--verify-only`: every input verified without findings.
    Verified,
    /// `--dry-run`: the plan below would be imported.
    Planned,
}

/// Why an import was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    Findings,
    Conflicts,
}

/// The fate of one input bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BundleStatus {
    /// Takes part in this import.
    New,
    /// The same bundle (id and manifest digest) was imported before: skipped.
    AlreadyImported,
    /// The same bundle was given twice in this call: the repeat is skipped.
    RepeatedInput,
}

/// One input bundle in the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleSummary {
    pub file: String,
    pub bundle_id: String,
    pub tenant_id: String,
    pub manifest_digest: String,
    pub created_by_node_id: String,
    pub signed_by: Option<String>,
    pub signer: Option<String>,
    pub status: BundleStatus,
    pub already_imported_at: Option<String>,
    pub entries: u64,
    pub new_entries: u64,
    pub duplicates: u64,
    pub dropped: u64,
    /// The SPEC section 6 verification report.
    pub verification: Report,
}

/// Counts over the whole call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub bundles: u64,
    pub entries: u64,
    pub new: u64,
    pub duplicates: u64,
    pub conflicts: u64,
    pub dropped: u64,
    pub findings: u64,
}

/// The tenant chain before and after.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainChange {
    pub head_before: Option<String>,
    pub length_before: u64,
    pub head: Option<String>,
    pub head_hlc: Option<String>,
    pub length: u64,
}

/// Where an input entry sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryOrigin {
    pub bundle_id: String,
    pub file: String,
    pub node_id: String,
    /// 0-based index in its node log.
    pub index: u64,
    pub job_id: String,
    pub t_hlc: String,
}

/// An entry the import appends (dry-run plans list them all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedEntry {
    /// Chain position it gets.
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub node_id: String,
    pub bundle_id: String,
    pub index: u64,
    pub payload_hash: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
}

/// A dropped duplicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DuplicateReport {
    pub job_id: String,
    pub t_hlc: String,
    pub node_id: String,
    pub bundle_id: String,
    pub index: u64,
    /// `input` (an earlier entry of this import) or `chain` (already in the tenant chain).
    pub against: &'static str,
    pub kept: Option<EntryOrigin>,
}

/// One side of a conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConflictSideReport {
    /// `input` or `chain`.
    pub source: &'static str,
    pub payload_hash: String,
    pub payload: Option<String>,
    /// For `input` sides.
    pub origin: Option<EntryOrigin>,
    /// For the `chain` side: its chain position.
    pub chain_seq: Option<u64>,
}

/// A jobId with more than one payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConflictReport {
    pub job_id: String,
    /// Base64, one per side.
    pub payload_hashes: Vec<String>,
    pub sides: Vec<ConflictSideReport>,
}

/// An entry not imported because its log broke before it (only with `--force`, or in a refusal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedEntry {
    pub bundle_id: String,
    pub file: String,
    pub node_id: String,
    pub index: u64,
    pub job_id: String,
    pub t_hlc: String,
    /// The finding kind that broke the log.
    pub reason: String,
}

/// What happens to an input entry, for displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fate {
    New,
    Duplicate,
    Conflict,
    Dropped,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneEntry {
    pub t_hlc: String,
    pub physical: u64,
    pub logical: u32,
    pub job_id: String,
    pub bundle_id: String,
    pub fate: Fate,
    /// Chain position for new entries.
    pub seq: Option<u64>,
}

/// One node's entries across all inputs, in HLC order (a swimlane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    pub node_id: String,
    pub entries: Vec<LaneEntry>,
}

/// The outcome of [`verify_inputs`], [`plan_import`] or [`import`] (`jobs import --json` prints it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub status: ImportStatus,
    pub refusal: Option<Refusal>,
    pub tenant_id: Option<String>,
    pub dry_run: bool,
    pub forced: bool,
    pub bundles: Vec<BundleSummary>,
    pub totals: Totals,
    pub chain: ChainChange,
    /// Only in plans (`--dry-run`): every entry to append, in chain order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_entries: Option<Vec<PlannedEntry>>,
    pub duplicates: Vec<DuplicateReport>,
    pub conflicts: Vec<ConflictReport>,
    pub dropped: Vec<DroppedEntry>,
    pub snapshots: Vec<Snapshot>,
    /// This machine's clock after witnessing the imported timestamps.
    pub clock: Option<String>,
    /// Only in plans: per-node swimlanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Vec<Lane>>,
}

/// The dry-run plan.
pub type ImportPlan = ImportReport;
/// The result of an import.
pub type ImportResult = ImportReport;

/// Extra fields of a collected entry (parallel to `entries`).
#[derive(Debug, Clone, Copy)]
struct Extra {
    link: Digest32,
    prev: Option<Digest32>,
    text_start: u64,
    payload_len: u32,
    enqueued_len: u32,
    partition_len: Option<u32>,
}

/// One input after verification.
struct Loaded {
    file: String,
    header: BundleHeader,
    report: Report,
    nodes: Vec<String>,
    entries: Vec<MergeEntry>,
    extra: Vec<Extra>,
    arena: String,
    dropped: Vec<DroppedEntry>,
    status: BundleStatus,
    already_at: Option<String>,
}

impl Loaded {
    fn payload(&self, pos: usize) -> &str {
        let x = &self.extra[pos];
        let s = x.text_start as usize;
        &self.arena[s..s + x.payload_len as usize]
    }
    fn enqueued_at(&self, pos: usize) -> &str {
        let x = &self.extra[pos];
        let s = x.text_start as usize + x.payload_len as usize;
        &self.arena[s..s + x.enqueued_len as usize]
    }
    fn partition_key(&self, pos: usize) -> Option<&str> {
        let x = &self.extra[pos];
        let s = x.text_start as usize + x.payload_len as usize + x.enqueued_len as usize;
        x.partition_len.map(|l| &self.arena[s..s + l as usize])
    }
    fn t_hlc(&self, pos: usize) -> String {
        let e = &self.entries[pos];
        format!(
            "{}:{}:{}",
            e.physical, e.logical, self.nodes[e.node as usize]
        )
    }
    fn job_text(&self, pos: usize) -> String {
        uuid::Uuid::from_bytes(self.entries[pos].job_id).to_string()
    }
    fn origin(&self, pos: usize) -> EntryOrigin {
        let e = &self.entries[pos];
        EntryOrigin {
            bundle_id: self.header.bundle_id.clone(),
            file: self.file.clone(),
            node_id: self.nodes[e.node as usize].clone(),
            index: e.index as u64,
            job_id: self.job_text(pos),
            t_hlc: self.t_hlc(pos),
        }
    }
    fn takes_part(&self) -> bool {
        self.status == BundleStatus::New
    }
}

/// Wraps a [`Verifier`] and keeps every fully parsed entry.
struct Collector<'a> {
    verifier: Verifier<'a>,
    nodes: Vec<String>,
    entries: Vec<MergeEntry>,
    extra: Vec<Extra>,
    arena: String,
    unparsed: Vec<(u32, u32, String, String)>,
}

fn digest_b64(s: &str) -> Option<Digest32> {
    let mut out = [0u8; 32];
    match B64.decode_slice(s.as_bytes(), &mut out) {
        Ok(32) => Some(out),
        _ => None,
    }
}

impl Collector<'_> {
    fn node_index(&mut self, node: &str) -> u32 {
        if let Some(i) = self.nodes.iter().rposition(|n| n == node) {
            return i as u32;
        }
        self.nodes.push(node.to_string());
        (self.nodes.len() - 1) as u32
    }
}

impl BundleVisitor for Collector<'_> {
    fn entry(&mut self, log: usize, index: usize, _span: Range<u64>, view: EntryView<'_>) {
        self.verifier.check_entry(log, index, &view);
        let e = view.entry();
        let parsed = match view {
            EntryView::Parsed(e) => (|| {
                let hlc = Hlc::parse(&e.t_hlc).ok()?;
                let job = uuid::Uuid::parse_str(&e.job_id).ok()?;
                let hash = digest_b64(&e.payload_hash)?;
                let link = digest_b64(&e.link)?;
                let prev = match &e.prev_link {
                    None => None,
                    Some(p) => Some(digest_b64(p)?),
                };
                Some((hlc, job, hash, link, prev))
            })(),
            EntryView::Invalid { .. } => None,
        };
        match parsed {
            Some((hlc, job, hash, link, prev)) => {
                let node = self.node_index(&hlc.node);
                let text_start = self.arena.len() as u64;
                self.arena.push_str(&e.payload);
                self.arena.push_str(&e.enqueued_at);
                if let Some(pk) = &e.partition_key {
                    self.arena.push_str(pk);
                }
                self.entries.push(MergeEntry {
                    physical: hlc.physical,
                    logical: hlc.logical,
                    node,
                    job_id: *job.as_bytes(),
                    payload_hash: hash,
                    log: log as u32,
                    index: index as u32,
                });
                self.extra.push(Extra {
                    link,
                    prev,
                    text_start,
                    payload_len: e.payload.len() as u32,
                    enqueued_len: e.enqueued_at.len() as u32,
                    partition_len: e.partition_key.as_ref().map(|p| p.len() as u32),
                });
            }
            None => self.unparsed.push((
                log as u32,
                index as u32,
                e.job_id.to_string(),
                e.t_hlc.to_string(),
            )),
        }
    }

    fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        self.verifier.entries_begin(log, fields);
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        self.verifier.log_end(log, fields);
    }
}

fn display_name(path: &Path) -> String {
    path.display().to_string()
}

fn load(path: &Path, opts: &ImportOptions<'_>) -> Result<Loaded, ImportError> {
    let file = display_name(path);
    let unreadable = |error: BundleFileError| ImportError::Unreadable {
        file: file.clone(),
        error,
    };
    let meta =
        std::fs::metadata(path).map_err(|e| unreadable(BundleFileError::Io(e.to_string())))?;
    if meta.is_dir() {
        return Err(unreadable(BundleFileError::Io(
            "is a directory, not a bundle file".into(),
        )));
    }
    let f =
        std::fs::File::open(path).map_err(|e| unreadable(BundleFileError::Io(e.to_string())))?;
    let estimated_entries = (meta.len() / 300) as usize;
    let vopts = VerifyOptions {
        require_signature: opts.require_signature,
        trust: opts.trust,
        max_clock_skew: Some(opts.max_clock_skew),
        now_ms: opts.now_ms,
        progress: None,
    };
    let mut c = Collector {
        verifier: Verifier::new(vopts),
        nodes: Vec::new(),
        // Sized from the file (an entry takes well over 300 bytes of JSON, its kept texts less than
        // a third of it), so the collections are not regrown and copied while reading.
        entries: Vec::with_capacity(estimated_entries),
        extra: Vec::with_capacity(estimated_entries),
        arena: String::with_capacity(meta.len() as usize / 3),
        unparsed: Vec::new(),
    };
    struct Fwd<R> {
        inner: R,
        progress: Option<Arc<ImportProgress>>,
    }
    impl<R: std::io::Read> std::io::Read for Fwd<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            if let Some(p) = &self.progress {
                p.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(n)
        }
    }
    let reader = Fwd {
        inner: std::io::BufReader::with_capacity(1 << 20, f),
        progress: opts.progress.clone(),
    };
    let summary =
        read_bundle(reader, &mut c).map_err(|e| unreadable(BundleFileError::Syntax(e)))?;
    let Collector {
        verifier,
        nodes,
        entries,
        extra,
        arena,
        unparsed,
    } = c;
    let report = verifier.finish(&summary);
    // Keep each log's verified prefix; everything after it is dropped.
    let prefixes: Vec<usize> = (0..report.log_entries.len())
        .map(|l| report.verified_prefix(l))
        .collect();
    let reason = |log: usize| {
        report
            .log_findings(log)
            .next()
            .map(|f| f.kind.as_str().to_string())
            .unwrap_or_else(|| "unverified".into())
    };
    let log_node = |log: usize| report.log_nodes.get(log).cloned().unwrap_or_default();
    let mut dropped = Vec::new();
    let (mut entries, mut extra) = (entries, extra);
    let kept =
        |e: &MergeEntry| (e.index as usize) < prefixes.get(e.log as usize).copied().unwrap_or(0);
    if !entries.iter().all(kept) {
        // Filter in place: the usual case (nothing dropped) copies nothing.
        let mut w = 0;
        for r in 0..entries.len() {
            let e = entries[r];
            if kept(&e) {
                entries[w] = e;
                extra[w] = extra[r];
                w += 1;
            } else {
                dropped.push(DroppedEntry {
                    bundle_id: summary.header.bundle_id.clone(),
                    file: file.clone(),
                    node_id: log_node(e.log as usize),
                    index: e.index as u64,
                    job_id: uuid::Uuid::from_bytes(e.job_id).to_string(),
                    t_hlc: format!("{}:{}:{}", e.physical, e.logical, nodes[e.node as usize]),
                    reason: reason(e.log as usize),
                });
            }
        }
        entries.truncate(w);
        extra.truncate(w);
    }
    for (log, index, job, t) in unparsed {
        dropped.push(DroppedEntry {
            bundle_id: summary.header.bundle_id.clone(),
            file: file.clone(),
            node_id: log_node(log as usize),
            index: index as u64,
            job_id: job,
            t_hlc: t,
            reason: reason(log as usize),
        });
    }
    dropped.sort_by(|a, b| (&a.node_id, a.index).cmp(&(&b.node_id, b.index)));
    Ok(Loaded {
        file,
        header: summary.header,
        report,
        nodes,
        entries,
        extra,
        arena,
        dropped,
        status: BundleStatus::New,
        already_at: None,
    })
}

/// Reads and verifies every input (checking they share one tenant).
fn load_all(paths: &[PathBuf], opts: &ImportOptions<'_>) -> Result<Vec<Loaded>, ImportError> {
    if paths.is_empty() {
        return Err(ImportError::NoInputs);
    }
    crate::core::hlc::validate_node_id(&opts.node_id)
        .map_err(|e| ImportError::NodeId(e.to_string()))?;
    if let Some(p) = &opts.progress {
        let total = paths
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        p.bytes_total.store(total, Ordering::Relaxed);
        p.stage.store(STAGE_VERIFYING, Ordering::Relaxed);
    }
    // Inputs are verified in parallel (one thread per core, each taking the next file).
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(paths.len());
    let next = AtomicU64::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<Loaded, ImportError>>>> =
        paths.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(p) = paths.get(i) else { break };
                let r = load(p, opts);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut loaded = Vec::with_capacity(paths.len());
    for slot in slots {
        let r = slot
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .expect("every input was loaded");
        loaded.push(r?);
    }
    for l in &loaded {
        if l.header.tenant_id.is_empty() {
            return Err(ImportError::NoTenant {
                file: l.file.clone(),
            });
        }
    }
    let first = loaded[0].header.tenant_id.clone();
    if loaded.iter().any(|l| l.header.tenant_id != first) {
        let list: Vec<String> = loaded
            .iter()
            .map(|l| format!("{} is {:?}", l.file, l.header.tenant_id))
            .collect();
        return Err(ImportError::MixedTenants(list.join(", ")));
    }
    // The same bundle given twice: the repeat is skipped.
    for i in 0..loaded.len() {
        let dup = (0..i).any(|j| {
            loaded[j].header.bundle_id == loaded[i].header.bundle_id
                && loaded[j].header.manifest_digest == loaded[i].header.manifest_digest
                && loaded[j].status == BundleStatus::New
        });
        if dup {
            loaded[i].status = BundleStatus::RepeatedInput;
        }
    }
    Ok(loaded)
}

fn base_report(loaded: &[Loaded], forced: bool, dry_run: bool) -> ImportReport {
    let bundles: Vec<BundleSummary> = loaded
        .iter()
        .map(|l| BundleSummary {
            file: l.file.clone(),
            bundle_id: l.header.bundle_id.clone(),
            tenant_id: l.header.tenant_id.clone(),
            manifest_digest: l.header.manifest_digest.clone(),
            created_by_node_id: l.header.created_by_node_id.clone(),
            signed_by: l.header.signed_by.clone(),
            signer: l.report.stats.signer.clone(),
            status: l.status,
            already_imported_at: l.already_at.clone(),
            entries: l.report.stats.entries as u64,
            new_entries: 0,
            duplicates: 0,
            dropped: if l.takes_part() {
                l.dropped.len() as u64
            } else {
                0
            },
            verification: l.report.clone(),
        })
        .collect();
    let totals = Totals {
        bundles: loaded.len() as u64,
        entries: bundles.iter().map(|b| b.entries).sum(),
        findings: loaded.iter().map(|l| l.report.findings.len() as u64).sum(),
        ..Totals::default()
    };
    ImportReport {
        status: ImportStatus::Verified,
        refusal: None,
        tenant_id: loaded.first().map(|l| l.header.tenant_id.clone()),
        dry_run,
        forced,
        bundles,
        totals,
        chain: ChainChange::default(),
        new_entries: None,
        duplicates: Vec::new(),
        conflicts: Vec::new(),
        dropped: Vec::new(),
        snapshots: Vec::new(),
        clock: None,
        lanes: None,
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
    store: &Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportPlan, ImportError> {
    let mut loaded = load_all(paths, opts)?;
    run(store.conn(), &mut loaded, opts, Mode::Plan)
}

/// Verifies, plans and imports in one transaction. Refusals (findings without `--force`,
/// conflicts) and "nothing to do" write nothing.
pub fn import(
    store: &mut Store,
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    phase("start");
    let mut loaded = load_all(paths, opts)?;
    phase("read + verify");
    let mut clock = store
        .clock(&opts.node_id, SystemWallClock)
        .map_err(ImportError::Store)?;
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
            .with_bulk_journal(|store| import_in_tx(store, &mut loaded, opts, &mut clock))
            .0
    } else {
        import_in_tx(store, &mut loaded, opts, &mut clock)
    };
    let _ = store.conn().pragma_update(None, "cache_size", old_cache);
    result
}

/// Default [`ImportOptions::bulk_journal_min_bytes`]: 32 MiB of bundles (some 60,000 entries).
pub const BULK_JOURNAL_BYTES: u64 = 32 << 20;

fn import_in_tx(
    store: &mut Store,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    clock: &mut crate::core::hlc::HlcClock<SystemWallClock>,
) -> Result<ImportResult, ImportError> {
    let tx = store
        .conn_mut()
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let report = run(&tx, loaded, opts, Mode::Import(clock))?;
    if report.status == ImportStatus::Imported {
        tx.commit()?;
        phase("commit");
    }
    if let Some(p) = &opts.progress {
        p.stage.store(STAGE_DONE, Ordering::Relaxed);
    }
    Ok(report)
}

enum Mode<'c> {
    Plan,
    Import(&'c mut crate::core::hlc::HlcClock<SystemWallClock>),
}

fn run(
    conn: &rusqlite::Connection,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    mut mode: Mode<'_>,
) -> Result<ImportReport, ImportError> {
    let dry_run = matches!(mode, Mode::Plan);
    if let Some(p) = &opts.progress {
        p.stage.store(STAGE_PLANNING, Ordering::Relaxed);
    }
    let tenant = loaded[0].header.tenant_id.clone();
    for l in loaded.iter_mut() {
        if l.status == BundleStatus::New {
            if let Some(prev) = find_import(
                conn,
                &tenant,
                &l.header.bundle_id,
                &l.header.manifest_digest,
            )? {
                l.status = BundleStatus::AlreadyImported;
                l.already_at = Some(prev.imported_at);
            }
        }
    }
    let mut report = base_report(loaded, opts.force, dry_run);
    let head = chain_head(conn, &tenant)?;
    let length_before = head.as_ref().map(|h| h.length).unwrap_or(0);
    report.chain = ChainChange {
        head_before: head.as_ref().map(|h| h.head_chain_link.clone()),
        length_before,
        head: head.as_ref().map(|h| h.head_chain_link.clone()),
        head_hlc: head.as_ref().map(|h| h.head_hlc.clone()),
        length: length_before,
    };
    report.dropped = loaded
        .iter()
        .filter(|l| l.takes_part())
        .flat_map(|l| l.dropped.clone())
        .collect();
    report.totals.dropped = report.dropped.len() as u64;
    let has_findings = loaded
        .iter()
        .filter(|l| l.takes_part())
        .any(|l| !l.report.findings.is_empty());
    if has_findings && !opts.force {
        report.status = ImportStatus::Refused;
        report.refusal = Some(Refusal::Findings);
        return Ok(report);
    }
    // The merge over the bundles taking part.
    let part: Vec<usize> = (0..loaded.len())
        .filter(|&i| loaded[i].takes_part())
        .collect();
    let inputs: Vec<MergeInput<'_>> = part
        .iter()
        .map(|&i| MergeInput {
            bundle_id: &loaded[i].header.bundle_id,
            manifest_digest: &loaded[i].header.manifest_digest,
            nodes: &loaded[i].nodes,
            entries: &loaded[i].entries,
        })
        .collect();
    let total: usize = inputs.iter().map(|i| i.entries.len()).sum();
    let existing = existing_jobs(
        conn,
        &tenant,
        length_before,
        ExactIds {
            inputs: &inputs,
            input: 0,
            pos: 0,
            left: total,
        },
    )?;
    let plan = plan_merge(&inputs, &existing);
    phase("merge plan");
    let l_of = |at: EntryAt| &loaded[part[at.input as usize]];
    // Duplicates and conflicts, with provenance.
    report.duplicates = plan
        .duplicates
        .iter()
        .map(|d| {
            let l = l_of(d.entry);
            let o = l.origin(d.entry.pos as usize);
            DuplicateReport {
                job_id: o.job_id,
                t_hlc: o.t_hlc,
                node_id: o.node_id,
                bundle_id: o.bundle_id,
                index: o.index,
                against: match d.of {
                    DuplicateOf::Input(_) => "input",
                    DuplicateOf::Chain => "chain",
                },
                kept: match d.of {
                    DuplicateOf::Input(k) => Some(l_of(k).origin(k.pos as usize)),
                    DuplicateOf::Chain => None,
                },
            }
        })
        .collect();
    report.conflicts = conflict_reports(conn, &tenant, &plan, &|at| l_of(at))?;
    report.totals.new = plan.merged.len() as u64;
    report.totals.duplicates = plan.duplicates.len() as u64;
    report.totals.conflicts = plan.conflicts.len() as u64;
    for (pi, &li) in part.iter().enumerate() {
        let b = &mut report.bundles[li];
        b.new_entries = plan
            .merged
            .iter()
            .filter(|a| a.input as usize == pi)
            .count() as u64;
        b.duplicates = plan
            .duplicates
            .iter()
            .filter(|d| d.entry.input as usize == pi)
            .count() as u64;
    }
    if !plan.conflicts.is_empty() {
        report.status = ImportStatus::Refused;
        report.refusal = Some(Refusal::Conflicts);
        if dry_run {
            report.lanes = Some(lanes(loaded, &part, &plan, length_before));
        }
        return Ok(report);
    }
    let anything_new = !part.is_empty();
    match &mut mode {
        Mode::Plan => {
            let mut prev = head.as_ref().map(|h| h.head_chain_link.clone());
            let mut planned = Vec::with_capacity(plan.merged.len());
            for (k, at) in plan.merged.iter().enumerate() {
                let l = l_of(*at);
                let pos = at.pos as usize;
                let e = &l.entries[pos];
                let t = l.t_hlc(pos);
                let job = l.job_text(pos);
                let link = scheduler_chain_link(
                    &t,
                    &job,
                    Action::Enqueue,
                    prev.as_deref(),
                    &hex::encode(e.payload_hash),
                );
                planned.push(PlannedEntry {
                    seq: length_before + k as u64,
                    t_hlc: t,
                    job_id: job,
                    node_id: l.nodes[e.node as usize].clone(),
                    bundle_id: l.header.bundle_id.clone(),
                    index: e.index as u64,
                    payload_hash: B64.encode(e.payload_hash),
                    prev_chain_link: prev.clone(),
                    chain_link: link.clone(),
                });
                prev = Some(link);
            }
            if let Some(last) = planned.last() {
                report.chain.head = Some(last.chain_link.clone());
                report.chain.head_hlc = Some(last.t_hlc.clone());
            }
            report.chain.length = length_before + planned.len() as u64;
            report.new_entries = Some(planned);
            report.lanes = Some(lanes(loaded, &part, &plan, length_before));
            report.status = if anything_new {
                ImportStatus::Planned
            } else {
                ImportStatus::NothingToDo
            };
            Ok(report)
        }
        Mode::Import(clock) => {
            if !anything_new {
                report.status = ImportStatus::NothingToDo;
                return Ok(report);
            }
            if let Some(p) = &opts.progress {
                p.entries_total
                    .store(plan.merged.len() as u64, Ordering::Relaxed);
                p.stage.store(STAGE_WRITING, Ordering::Relaxed);
            }
            let now = crate::core::hlc::unix_ms_now();
            let batch = uuid::Uuid::new_v4().to_string();
            // imports rows in (bundleId, digest) order so ids do not depend on the argument order.
            let mut order: Vec<usize> = (0..part.len()).collect();
            order.sort_by(|&a, &b| {
                let (x, y) = (&loaded[part[a]].header, &loaded[part[b]].header);
                (&x.bundle_id, &x.manifest_digest).cmp(&(&y.bundle_id, &y.manifest_digest))
            });
            let mut import_ids = vec![0i64; part.len()];
            for &pi in &order {
                let l = &loaded[part[pi]];
                let b = &report.bundles[part[pi]];
                import_ids[pi] = insert_import(
                    conn,
                    &ImportRecord {
                        id: 0,
                        import_batch: batch.clone(),
                        tenant_id: tenant.clone(),
                        bundle_id: l.header.bundle_id.clone(),
                        manifest_digest: l.header.manifest_digest.clone(),
                        created_by_node_id: l.header.created_by_node_id.clone(),
                        signed_by: l.header.signed_by.clone(),
                        signer: l.report.stats.signer.clone(),
                        file_name: l.file.clone(),
                        entries: b.entries,
                        new_entries: b.new_entries,
                        duplicates: b.duplicates,
                        dropped: b.dropped,
                        forced: opts.force && !l.report.findings.is_empty(),
                        imported_at: rfc3339_millis(now),
                    },
                )?;
            }
            let mut app = ChainAppender::begin(conn, &tenant, now)?;
            // Two-stage pipeline: this thread binds and inserts rows while a second one computes
            // the chain links and lays out the next rows (verification is over, so a core is
            // free). The preparer hands over chunks in chain order; used chunks come back for reuse.
            let mut prep = app.preparer();
            let merged = &plan.merged;
            let import_ids = &import_ids;
            let (to_writer, prepared) =
                std::sync::mpsc::sync_channel::<PreparedRows>(PIPELINE_DEPTH);
            let (to_preparer, reused) = std::sync::mpsc::channel::<PreparedRows>();
            let (written, jobs, max_hlc) = std::thread::scope(|s| {
                let preparer = s.spawn(move || {
                    let mut t = String::with_capacity(64);
                    let mut job_buf = uuid::Uuid::encode_buffer();
                    let mut digest_buf = [0u8; 64];
                    let mut max_hlc: Option<(u64, u32, u32, usize)> = None;
                    let mut jobs: Vec<([u8; 16], Digest32, u64)> = Vec::with_capacity(merged.len());
                    let mut chunk = PreparedRows::default();
                    for at in merged.iter() {
                        let l = l_of(*at);
                        let pos = at.pos as usize;
                        let e = &l.entries[pos];
                        let x = &l.extra[pos];
                        t.clear();
                        let node = &l.nodes[e.node as usize];
                        write!(t, "{}:{}:{}", e.physical, e.logical, node)
                            .expect("write to String");
                        let job = uuid::Uuid::from_bytes(e.job_id)
                            .hyphenated()
                            .encode_lower(&mut job_buf);
                        hex::encode_to_slice(e.payload_hash, &mut digest_buf).expect("64 bytes");
                        let digest = std::str::from_utf8(&digest_buf).expect("hex is ASCII");
                        let seq = prep.push(
                            &mut chunk,
                            &t,
                            job,
                            Action::Enqueue,
                            l.payload(pos),
                            digest,
                            Some(NewProvenance {
                                import_id: import_ids[at.input as usize],
                                source_node: &l.report.log_nodes[e.log as usize],
                                orig_link: &x.link,
                                orig_prev_link: x.prev.as_ref(),
                                partition_key: l.partition_key(pos),
                                enqueued_at: l.enqueued_at(pos),
                            }),
                        );
                        jobs.push((e.job_id, e.payload_hash, seq));
                        if max_hlc.is_none_or(|m| (e.physical, e.logical) > (m.0, m.1)) {
                            max_hlc = Some((e.physical, e.logical, e.node, at.input as usize));
                        }
                        if chunk.len() >= PIPELINE_CHUNK {
                            let full = std::mem::replace(
                                &mut chunk,
                                reused.try_recv().unwrap_or_default(),
                            );
                            if to_writer.send(full).is_err() {
                                break; // the writer failed; its error is reported
                            }
                        }
                    }
                    if !chunk.is_empty() {
                        let _ = to_writer.send(chunk);
                    }
                    drop(to_writer);
                    // Job rows go in key order: b-tree appends instead of random inserts.
                    jobs.sort_unstable_by_key(|j| j.0);
                    (jobs, max_hlc)
                });
                let mut written: Result<(), StoreError> = Ok(());
                let mut done = 0u64;
                for mut chunk in prepared.iter() {
                    done += chunk.len() as u64;
                    written = app.write_prepared(conn, &mut chunk);
                    if written.is_err() {
                        break;
                    }
                    if let Some(p) = &opts.progress {
                        p.entries_written.store(done, Ordering::Relaxed);
                    }
                    let _ = to_preparer.send(chunk);
                }
                drop(prepared);
                let (jobs, max_hlc) = preparer.join().expect("row preparer panicked");
                (written, jobs, max_hlc)
            });
            written?;
            phase("append loop");
            // The snapshots' Merkle roots are computed on another thread meanwhile.
            let roots = std::thread::scope(|s| {
                let roots = s.spawn(|| app.due_roots(opts.batch_size, false));
                let written = insert_jobs(conn, &tenant, &jobs);
                (written, roots.join())
            });
            match roots {
                (Err(e), _) => return Err(e.into()),
                (Ok(()), Ok(r)) => app.use_roots(r),
                (Ok(()), Err(_)) => {} // finish computes them itself
            }
            drop(jobs);
            phase("scheduler_jobs rows");
            if let Some(p) = &opts.progress {
                p.entries_written
                    .store(plan.merged.len() as u64, Ordering::Relaxed);
            }
            let summary = app.finish(
                conn,
                opts.batch_size,
                false,
                opts.snapshot_signer,
                report.chain.head_before.clone(),
                length_before,
            )?;
            phase("head + snapshots");
            if let Some((p, l, node, input)) = max_hlc {
                let node = loaded[part[input]].nodes[node as usize].clone();
                clock.receive(&Hlc::new(p, l, node))?;
            }
            save_clock_state(conn, &opts.node_id, clock.last())?;
            let (cp, cl) = clock.last();
            report.clock = Some(format!("{cp}:{cl}:{}", opts.node_id));
            report.chain.head = summary.head;
            report.chain.head_hlc = summary.head_hlc;
            report.chain.length = summary.length;
            report.snapshots = summary.snapshots;
            report.status = ImportStatus::Imported;
            Ok(report)
        }
    }
}

/// Iterates over the job ids of all inputs, with an exact length.
struct ExactIds<'a, 'b> {
    inputs: &'a [MergeInput<'b>],
    input: usize,
    pos: usize,
    left: usize,
}

impl<'a> Iterator for ExactIds<'a, '_> {
    type Item = &'a [u8; 16];
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let input = self.inputs.get(self.input)?;
            if let Some(e) = input.entries.get(self.pos) {
                self.pos += 1;
                self.left -= 1;
                return Some(&e.job_id);
            }
            self.input += 1;
            self.pos = 0;
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ExactIds<'_, '_> {}

fn conflict_reports<'l>(
    conn: &rusqlite::Connection,
    tenant: &str,
    plan: &MergePlan,
    l_of: &dyn Fn(EntryAt) -> &'l Loaded,
) -> Result<Vec<ConflictReport>, ImportError> {
    let mut out = Vec::with_capacity(plan.conflicts.len());
    for c in &plan.conflicts {
        let job = uuid::Uuid::from_bytes(c.job_id).to_string();
        let mut sides = Vec::new();
        for s in &c.sides {
            sides.push(match s {
                ConflictSide::Input(at) => {
                    let l = l_of(*at);
                    let pos = at.pos as usize;
                    ConflictSideReport {
                        source: "input",
                        payload_hash: B64.encode(l.entries[pos].payload_hash),
                        payload: Some(l.payload(pos).to_string()),
                        origin: Some(l.origin(pos)),
                        chain_seq: None,
                    }
                }
                ConflictSide::Chain { payload_hash } => {
                    let row: Option<(i64, String)> = rusqlite::OptionalExtension::optional(
                        conn.query_row(
                            "SELECT j.enqueue_seq, l.payload FROM scheduler_jobs j
                             JOIN scheduler_log l ON l.tenant_id = j.tenant_id AND l.seq = j.enqueue_seq
                             WHERE j.tenant_id = ?1 AND j.job_id = ?2",
                            rusqlite::params![tenant, c.job_id.as_slice()],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        ),
                    )?;
                    ConflictSideReport {
                        source: "chain",
                        payload_hash: B64.encode(payload_hash),
                        payload: row.as_ref().map(|r| r.1.clone()),
                        origin: None,
                        chain_seq: row.map(|r| r.0 as u64),
                    }
                }
            });
        }
        out.push(ConflictReport {
            job_id: job,
            payload_hashes: sides.iter().map(|s| s.payload_hash.clone()).collect(),
            sides,
        });
    }
    Ok(out)
}

fn lanes(loaded: &[Loaded], part: &[usize], plan: &MergePlan, length_before: u64) -> Vec<Lane> {
    use std::collections::{BTreeMap, HashMap};
    let mut fate: HashMap<EntryAt, (Fate, Option<u64>)> = HashMap::new();
    for (k, at) in plan.merged.iter().enumerate() {
        fate.insert(*at, (Fate::New, Some(length_before + k as u64)));
    }
    for d in &plan.duplicates {
        fate.insert(d.entry, (Fate::Duplicate, None));
    }
    for c in &plan.conflicts {
        for s in &c.sides {
            if let ConflictSide::Input(at) = s {
                fate.insert(*at, (Fate::Conflict, None));
            }
        }
    }
    let mut by_node: BTreeMap<String, Vec<LaneEntry>> = BTreeMap::new();
    for (li, l) in loaded.iter().enumerate() {
        let pi = part.iter().position(|&p| p == li);
        for pos in 0..l.entries.len() {
            let e = &l.entries[pos];
            let (f, seq) = match pi {
                Some(pi) => fate
                    .get(&EntryAt {
                        input: pi as u32,
                        pos: pos as u32,
                    })
                    .copied()
                    .unwrap_or((Fate::Conflict, None)),
                None => (Fate::Skipped, None),
            };
            by_node
                .entry(l.nodes[e.node as usize].clone())
                .or_default()
                .push(LaneEntry {
                    t_hlc: l.t_hlc(pos),
                    physical: e.physical,
                    logical: e.logical,
                    job_id: l.job_text(pos),
                    bundle_id: l.header.bundle_id.clone(),
                    fate: f,
                    seq,
                });
        }
        for d in &l.dropped {
            let (physical, logical) = Hlc::parse(&d.t_hlc)
                .map(|h| (h.physical, h.logical))
                .unwrap_or((0, 0));
            by_node
                .entry(d.node_id.clone())
                .or_default()
                .push(LaneEntry {
                    t_hlc: d.t_hlc.clone(),
                    physical,
                    logical,
                    job_id: d.job_id.clone(),
                    bundle_id: d.bundle_id.clone(),
                    fate: if pi.is_some() {
                        Fate::Dropped
                    } else {
                        Fate::Skipped
                    },
                    seq: None,
                });
        }
    }
    by_node
        .into_iter()
        .map(|(node_id, mut entries)| {
            entries.sort_by(|a, b| {
                (a.physical, a.logical, &a.job_id, &a.bundle_id).cmp(&(
                    b.physical,
                    b.logical,
                    &b.job_id,
                    &b.bundle_id,
                ))
            });
            Lane { node_id, entries }
        })
        .collect()
}

/// Re-exported for displays: the scheduler engine calls the console and CLI use next to import.
pub use scheduler::{
    append_action, chain_entries, prove, snapshot_now, snapshots, tenants, verify_chain,
    verify_proof,
};
