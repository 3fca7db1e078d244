//! Stage 1 of an import, load: read and verify the input bundles (in parallel), keeping each one's
//! verified entries compactly ([`Loaded`]) and the entries past a broken log's verified prefix
//! ([`super::DroppedEntry`]).

use super::dropped::{self, Dropped, DroppedList, EntryOrigin, Unparsed};
use super::options::{ImportError, ImportOptions, STAGE_VERIFYING};
use super::readback::{fingerprint, ReadBack, Source};
use crate::core::bundle::{
    read_bundle, BundleFileError, BundleHeader, BundleVisitor, EntryView, LogFields,
};
use crate::core::file_input::ProgressReader;
use crate::core::hlc::hlc_text;
use crate::core::ledger::seeded::SeededState;
use crate::core::merge::{EntryKey, MergeInput};
use crate::core::verify::spill::SharedSpill;
use crate::core::verify::{read_two_threads, Report, Verifier, VerifyOptions};
use serde::Serialize;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// One input after verification: per verified entry only its [`EntryKey`] (HLC, job id, where it
/// sits in the file, a fingerprint); the entries themselves are read back from `source` when
/// written ([`super::readback`]).
pub(super) struct Loaded {
    pub(super) file: String,
    pub(super) header: BundleHeader,
    /// The manifest digest the bundle's logs actually have (recomputed; the header's
    /// `manifestDigest` unless that is a `manifest-mismatch`). Repeated inputs of one call and the
    /// merge's tie order go by it, never by the header's claim alone, which two different
    /// (tampered) files can share.
    pub(super) digest: String,
    pub(super) report: Report,
    /// Node id of each log's verified entries, by log position in the bundle.
    pub(super) log_nodes: Vec<String>,
    /// Where each log's verified entries start in `keys`.
    pub(super) log_starts: Vec<u32>,
    pub(super) keys: Vec<EntryKey>,
    /// The entries past each log's verified prefix, in report order (by node id and index).
    pub(super) dropped: Arc<DroppedList>,
    pub(super) status: BundleStatus,
    pub(super) already_at: Option<String>,
    /// The file verified, held open for reading the entries back.
    pub(super) source: File,
    /// The key of the entries' fingerprints.
    pub(super) check: SeededState,
}

impl Loaded {
    /// This input as the merge sees it.
    pub(super) fn merge_input(&self) -> MergeInput<'_> {
        MergeInput {
            bundle_id: &self.header.bundle_id,
            manifest_digest: &self.digest,
            log_nodes: &self.log_nodes,
            log_starts: &self.log_starts,
            keys: &self.keys,
        }
    }
    /// A reader of this input's entries, checked against what was verified.
    pub(super) fn read_back(&self) -> ReadBack<'_> {
        ReadBack::new(Source {
            file: &self.file,
            source: &self.source,
            input: self.merge_input(),
            check: &self.check,
        })
    }
    /// The node id of the entry at `pos`.
    pub(super) fn node(&self, pos: usize) -> &str {
        let (log, _) = self.merge_input().log_index(pos as u32);
        &self.log_nodes[log as usize]
    }
    /// The log (position in the bundle) of the entry at `pos`.
    pub(super) fn log_of(&self, pos: usize) -> usize {
        self.merge_input().log_index(pos as u32).0 as usize
    }
    pub(super) fn t_hlc(&self, pos: usize) -> String {
        let k = &self.keys[pos];
        hlc_text(k.physical, k.logical, self.node(pos)).to_string()
    }
    pub(super) fn job_text(&self, pos: usize) -> String {
        uuid::Uuid::from_bytes(self.keys[pos].job_id).to_string()
    }
    pub(super) fn origin(&self, pos: usize) -> EntryOrigin {
        let (_, index) = self.merge_input().log_index(pos as u32);
        EntryOrigin {
            bundle_id: self.header.bundle_id.clone(),
            file: self.file.clone(),
            node_id: self.node(pos).to_string(),
            index: index as u64,
            job_id: self.job_text(pos),
            t_hlc: self.t_hlc(pos),
        }
    }
    /// The index in its log of the entry at `pos`.
    pub(super) fn origin_index(&self, pos: usize) -> u64 {
        self.merge_input().log_index(pos as u32).1 as u64
    }
    pub(super) fn takes_part(&self) -> bool {
        self.status == BundleStatus::New
    }
}

/// Wraps a [`Verifier`] and keeps the key of every fully parsed entry (the verifier parses every
/// entry once and hands the collector what it parsed).
struct Collector<'a> {
    verifier: Verifier<'a>,
    check: SeededState,
    log_nodes: Vec<String>,
    log_starts: Vec<u32>,
    /// Per log: an entry was not parsed, so no later one of the log is kept (all are dropped).
    gap: Vec<bool>,
    keys: Vec<EntryKey>,
    /// Entries not kept, with jobId and tHlc as the file has them (clipped), in bounded memory.
    unparsed: Unparsed,
}

impl<'a> Collector<'a> {
    /// An empty collector, keeping about `budget` bytes of unparsed entries in memory. Its lists
    /// grow as entries arrive, never pre-sized from the file's length: a sparse or lying file
    /// must not reserve memory it does not fill.
    fn new(verifier: Verifier<'a>, budget: usize) -> Collector<'a> {
        Collector {
            verifier,
            check: SeededState::default(),
            log_nodes: Vec::new(),
            log_starts: Vec::new(),
            gap: Vec::new(),
            keys: Vec::new(),
            unparsed: Unparsed::new(budget),
        }
    }

    /// The keys of `log` and where they start in `keys`.
    fn log_keys(&self, log: usize) -> (usize, &[EntryKey]) {
        let start = self.log_starts[log] as usize;
        let end = self
            .log_starts
            .get(log + 1)
            .map_or(self.keys.len(), |&s| s as usize);
        (start, &self.keys[start..end])
    }

    /// Opens the logs up to `log` (logs arrive in file order).
    fn reach(&mut self, log: usize) {
        while self.log_starts.len() <= log {
            self.log_starts.push(self.keys.len() as u32);
            self.log_nodes.push(String::new());
            self.gap.push(false);
        }
    }
}

impl BundleVisitor for Collector<'_> {
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, view: EntryView<'_>) {
        // The verifier parses every field once, strictly; the collector keeps what it parsed.
        let parsed = self.verifier.check_entry(log, index, &view).parsed;
        let e = view.entry();
        self.reach(log);
        let len = span.end.saturating_sub(span.start);
        match parsed {
            Some(p) if !self.gap[log] && len <= u32::MAX as u64 => {
                if self.log_nodes[log].is_empty() {
                    self.log_nodes[log] = p.hlc.node.clone();
                }
                self.keys.push(EntryKey {
                    physical: p.hlc.physical,
                    offset: span.start,
                    check: fingerprint(&self.check, e),
                    job_id: p.job_id,
                    logical: p.hlc.logical,
                    len: len as u32,
                });
            }
            _ => {
                self.gap[log] = true;
                self.unparsed.push(Dropped {
                    log: log as u32,
                    index: index as u64,
                    job_id: clipped(&e.job_id),
                    t_hlc: clipped(&e.t_hlc),
                });
            }
        }
    }

    fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        self.reach(log);
        self.verifier.entries_begin(log, fields);
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        self.reach(log);
        self.verifier.log_end(log, fields);
    }
}

/// How many leading keys of each log to keep: its verified prefix, cut further (defensively) at
/// the first entry whose HLC or node does not increase, which verification already refuses.
fn kept_counts(c: &Collector<'_>, prefixes: &[usize]) -> Vec<usize> {
    (0..c.log_starts.len())
        .map(|log| {
            let (_, keys) = c.log_keys(log);
            let mut n = prefixes.get(log).copied().unwrap_or(0).min(keys.len());
            if let Some(i) = keys[..n]
                .windows(2)
                .position(|w| (w[0].physical, w[0].logical) >= (w[1].physical, w[1].logical))
            {
                n = i + 1;
            }
            n
        })
        .collect()
}

/// An input's name in reports and provenance: a name that is not UTF-8 shows its bytes as `\xNN`
/// (not U+FFFD: two different names must not look the same).
fn display_name(path: &Path) -> String {
    crate::core::text::visible_path(path)
}

/// Reads and verifies one input, keeping its entries' keys (and about `budget` bytes of its
/// dropped entries in memory, the rest in `spill`); with `two_threads` the checks run on a second
/// thread beside the reading (when there are fewer inputs than cores).
pub(super) fn load(
    path: &Path,
    file: String,
    opts: &ImportOptions<'_>,
    two_threads: bool,
    (budget, spill): (usize, &Arc<SharedSpill>),
) -> Result<Loaded, ImportError> {
    let unreadable = |error: BundleFileError| ImportError::Unreadable {
        file: file.clone(),
        error,
    };
    // A portable export opens (after every checksum check) as its bundle.json.
    let source = crate::core::notify::open_bundle_source(path)
        .map_err(|e| unreadable(BundleFileError::opening(path, e)))?;
    let vopts = VerifyOptions {
        require_signature: opts.require_signature,
        trust: opts.trust,
        max_clock_skew: Some(opts.max_clock_skew),
        now_ms: opts.now_ms,
        progress: None,
    };
    let mut c = Collector::new(Verifier::new(vopts), budget);
    // Read through a reference: the file stays open for the second pass (`read_at`).
    let reader = ProgressReader::new(
        std::io::BufReader::with_capacity(1 << 20, &source),
        opts.progress.as_deref().map(|p| &p.bytes_read),
    );
    let summary = if two_threads {
        read_two_threads(reader, &mut c)
    } else {
        read_bundle(reader, &mut c)
    }
    .map_err(|e| unreadable(BundleFileError::Syntax(e)))?;
    let report = std::mem::replace(&mut c.verifier, Verifier::new(VerifyOptions::default()))
        .finish(&summary);
    c.reach(report.log_entries.len().saturating_sub(1));
    let kept = kept_counts(&c, &report.verified_prefixes());
    c.unparsed.finish().map_err(ImportError::DroppedList)?;
    let names = (summary.header.bundle_id.as_str(), file.as_str());
    let dropped = dropped_entries(&c, &kept, &report, names, (budget, spill))
        .map_err(ImportError::DroppedList)?;
    // The unparsed entries are in `dropped` now.
    c.unparsed = Unparsed::new(0);
    // Keep each log's verified prefix (in place: the usual case, nothing dropped, copies nothing).
    let mut w = 0usize;
    for (log, &n) in kept.iter().enumerate() {
        let start = c.log_starts[log] as usize;
        c.keys.copy_within(start..start + n, w);
        c.log_starts[log] = w as u32;
        w += n;
    }
    c.keys.truncate(w);
    c.keys.shrink_to_fit();
    Ok(Loaded {
        file,
        digest: summary.computed_manifest_digest,
        header: summary.header,
        report,
        log_nodes: c.log_nodes,
        log_starts: c.log_starts,
        keys: c.keys,
        dropped: Arc::new(dropped),
        status: BundleStatus::New,
        already_at: None,
        source,
        check: c.check,
    })
}

/// The entries past each log's kept prefix, and those never parsed, with the reason that broke
/// their log, in report order (by node id and index), about `budget` bytes of them in memory.
fn dropped_entries(
    c: &Collector<'_>,
    kept: &[usize],
    report: &Report,
    (bundle_id, file): (&str, &str),
    (budget, spill): (usize, &Arc<SharedSpill>),
) -> std::io::Result<DroppedList> {
    let mut reasons: Vec<Option<&'static str>> = vec![None; report.log_entries.len()];
    for f in &report.findings {
        if let Some(slot) = f.log.and_then(|l| reasons.get_mut(l)) {
            slot.get_or_insert(f.kind.as_str());
        }
    }
    let parts = dropped::Parts {
        bundle_id,
        file,
        nodes: report.log_nodes.iter().map(|n| clipped(n)).collect(),
        reasons,
        logs: (0..kept.len())
            .map(|log| (c.log_keys(log).1, kept[log]))
            .collect(),
        key_nodes: &c.log_nodes,
    };
    dropped::collect(parts, &c.unparsed, budget, spill)
}

/// `text`, or its first characters and how long it was (the rule findings clip by).
fn clipped(text: &str) -> String {
    crate::core::verify::finding::clip(text).into_owned()
}

/// Reads and verifies every input (checking they share one tenant).
pub(super) fn load_all(
    paths: &[PathBuf],
    opts: &ImportOptions<'_>,
) -> Result<Vec<Loaded>, ImportError> {
    if paths.is_empty() {
        return Err(ImportError::NoInputs);
    }
    let _span = tracing::info_span!("import_read_verify", inputs = paths.len()).entered();
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
    // Inputs are verified in parallel (one thread per core, each taking the next file); with
    // fewer inputs than cores, each one's checks run beside its reading.
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = cores.min(paths.len());
    let two_threads = paths.len() < cores;
    // The inputs share the memory for dropped entries, and one temporary file for the rest (one
    // descriptor, not one per input).
    let budget = opts.dropped_memory / paths.len();
    let spill = SharedSpill::new();
    let next = AtomicU64::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<Loaded, ImportError>>>> =
        paths.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(p) = paths.get(i) else { break };
                let name = opts.input_names.and_then(|n| n.get(i)).cloned();
                let r = load(
                    p,
                    name.unwrap_or_else(|| display_name(p)),
                    opts,
                    two_threads,
                    (budget, &spill),
                );
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
    mark_repeated_inputs(&mut loaded);
    Ok(loaded)
}

/// The same bundle given twice (same bundle id and the same logs, by their recomputed digest): one
/// copy takes part and the others are [`BundleStatus::RepeatedInput`]. Which copy does not depend on
/// the argument order: the one with the fewest findings, then the least file name.
fn mark_repeated_inputs(loaded: &mut [Loaded]) {
    fn repeat_key(l: &Loaded) -> (&str, &str, usize, &str) {
        let h = &l.header;
        (&h.bundle_id, &l.digest, l.report.findings.len(), &l.file)
    }
    let mut order: Vec<usize> = (0..loaded.len()).collect();
    order.sort_by(|&a, &b| {
        repeat_key(&loaded[a])
            .cmp(&repeat_key(&loaded[b]))
            .then(a.cmp(&b))
    });
    for w in order.windows(2) {
        let (first, next) = (&loaded[w[0]], &loaded[w[1]]);
        if (&first.header.bundle_id, &first.digest) == (&next.header.bundle_id, &next.digest) {
            loaded[w[1]].status = BundleStatus::RepeatedInput;
        }
    }
}
