//! Stage 1 of an import, load: read and verify the input bundles (in parallel), keeping each one's
//! verified entries compactly ([`Loaded`]) and the entries past a broken log's verified prefix
//! ([`DroppedEntry`]).

use super::options::{ImportError, ImportOptions, STAGE_VERIFYING};
use crate::core::bundle::{
    read_bundle, BundleFileError, BundleHeader, BundleVisitor, EntryView, LogFields,
};
use crate::core::chain::Digest32;
use crate::core::file_input::ProgressReader;
use crate::core::hlc::hlc_text;
use crate::core::merge::MergeEntry;
use crate::core::verify::{Report, Verifier, VerifyOptions};
use serde::Serialize;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// An entry not imported because its log broke before it (only with `--force`, or in a refusal).
/// Serialised as the origin's fields followed by `reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedEntry {
    #[serde(flatten)]
    pub origin: EntryOrigin,
    /// The finding kind that broke the log.
    pub reason: String,
}

/// The fields of a collected entry its chain row needs besides the merge key (parallel to
/// `entries`): links as bytes, texts as a range of the bundle's arena.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowFields {
    pub(super) link: Digest32,
    pub(super) prev: Option<Digest32>,
    pub(super) text_start: u64,
    pub(super) payload_len: u32,
    pub(super) enqueued_len: u32,
    pub(super) partition_len: Option<u32>,
}

/// One input after verification.
pub(super) struct Loaded {
    pub(super) file: String,
    pub(super) header: BundleHeader,
    pub(super) report: Report,
    pub(super) nodes: Vec<String>,
    pub(super) entries: Vec<MergeEntry>,
    pub(super) rows: Vec<RowFields>,
    pub(super) arena: String,
    pub(super) dropped: Vec<DroppedEntry>,
    pub(super) status: BundleStatus,
    pub(super) already_at: Option<String>,
}

impl Loaded {
    pub(super) fn payload(&self, pos: usize) -> &str {
        let x = &self.rows[pos];
        let s = x.text_start as usize;
        &self.arena[s..s + x.payload_len as usize]
    }
    pub(super) fn enqueued_at(&self, pos: usize) -> &str {
        let x = &self.rows[pos];
        let s = x.text_start as usize + x.payload_len as usize;
        &self.arena[s..s + x.enqueued_len as usize]
    }
    pub(super) fn partition_key(&self, pos: usize) -> Option<&str> {
        let x = &self.rows[pos];
        let s = x.text_start as usize + x.payload_len as usize + x.enqueued_len as usize;
        x.partition_len.map(|l| &self.arena[s..s + l as usize])
    }
    pub(super) fn t_hlc(&self, pos: usize) -> String {
        let e = &self.entries[pos];
        hlc_text(e.physical, e.logical, &self.nodes[e.node as usize]).to_string()
    }
    pub(super) fn job_text(&self, pos: usize) -> String {
        uuid::Uuid::from_bytes(self.entries[pos].job_id).to_string()
    }
    pub(super) fn origin(&self, pos: usize) -> EntryOrigin {
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
    pub(super) fn takes_part(&self) -> bool {
        self.status == BundleStatus::New
    }
}

/// Wraps a [`Verifier`] and keeps every fully parsed entry.
struct Collector<'a> {
    verifier: Verifier<'a>,
    nodes: Vec<String>,
    /// Position of each node id in `nodes` (a bundle may hold any number of logs).
    node_at: HashMap<String, u32>,
    entries: Vec<MergeEntry>,
    rows: Vec<RowFields>,
    arena: String,
    unparsed: Vec<(u32, u32, String, String)>,
}

impl<'a> Collector<'a> {
    /// An empty collector. Its lists grow as entries arrive, never pre-sized from the file's
    /// length: a sparse or lying file must not reserve memory it does not fill.
    fn new(verifier: Verifier<'a>) -> Collector<'a> {
        Collector {
            verifier,
            nodes: Vec::new(),
            node_at: HashMap::new(),
            entries: Vec::new(),
            rows: Vec::new(),
            arena: String::new(),
            unparsed: Vec::new(),
        }
    }

    fn node_index(&mut self, node: &str) -> u32 {
        if let Some(&i) = self.node_at.get(node) {
            return i;
        }
        let i = self.nodes.len() as u32;
        self.nodes.push(node.to_string());
        self.node_at.insert(node.to_string(), i);
        i
    }
}

impl BundleVisitor for Collector<'_> {
    fn entry(&mut self, log: usize, index: usize, _span: Range<u64>, view: EntryView<'_>) {
        // The verifier parses every field once, strictly; the collector keeps what it parsed.
        let parsed = self.verifier.check_entry(log, index, &view).parsed;
        let e = view.entry();
        match parsed {
            Some(p) => {
                let node = self.node_index(&p.hlc.node);
                let text_start = self.arena.len() as u64;
                self.arena.push_str(&e.payload);
                self.arena.push_str(&e.enqueued_at);
                if let Some(pk) = &e.partition_key {
                    self.arena.push_str(pk);
                }
                self.entries.push(MergeEntry {
                    physical: p.hlc.physical,
                    logical: p.hlc.logical,
                    node,
                    job_id: p.job_id,
                    payload_hash: p.payload_hash,
                    log: log as u32,
                    index: index as u32,
                });
                self.rows.push(RowFields {
                    link: p.link,
                    prev: p.prev_link,
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

fn load(path: &Path, file: String, opts: &ImportOptions<'_>) -> Result<Loaded, ImportError> {
    let unreadable = |error: BundleFileError| ImportError::Unreadable {
        file: file.clone(),
        error,
    };
    // A portable export opens (after every checksum check) as its bundle.json.
    let f = crate::core::notify::open_bundle_source(path)
        .map_err(|e| unreadable(BundleFileError::Io(e.to_string())))?;
    let vopts = VerifyOptions {
        require_signature: opts.require_signature,
        trust: opts.trust,
        max_clock_skew: Some(opts.max_clock_skew),
        now_ms: opts.now_ms,
        progress: None,
    };
    let mut c = Collector::new(Verifier::new(vopts));
    let reader = ProgressReader::new(
        std::io::BufReader::with_capacity(1 << 20, f),
        opts.progress.as_deref().map(|p| &p.bytes_read),
    );
    let summary =
        read_bundle(reader, &mut c).map_err(|e| unreadable(BundleFileError::Syntax(e)))?;
    let Collector {
        verifier,
        nodes,
        entries,
        rows,
        arena,
        unparsed,
        ..
    } = c;
    let report = verifier.finish(&summary);
    // Keep each log's verified prefix; everything after it is dropped.
    let prefixes: Vec<usize> = report.verified_prefixes();
    let mut first_kind: Vec<Option<&'static str>> = vec![None; report.log_entries.len()];
    for f in &report.findings {
        if let Some(slot) = f.log.and_then(|l| first_kind.get_mut(l)) {
            slot.get_or_insert(f.kind.as_str());
        }
    }
    let reason = |log: usize| {
        first_kind
            .get(log)
            .copied()
            .flatten()
            .unwrap_or("unverified")
            .to_string()
    };
    let log_node = |log: usize| report.log_nodes.get(log).cloned().unwrap_or_default();
    let mut dropped = Vec::new();
    let (mut entries, mut rows) = (entries, rows);
    let kept =
        |e: &MergeEntry| (e.index as usize) < prefixes.get(e.log as usize).copied().unwrap_or(0);
    if !entries.iter().all(kept) {
        // Filter in place: the usual case (nothing dropped) copies nothing.
        let mut w = 0;
        for r in 0..entries.len() {
            let e = entries[r];
            if kept(&e) {
                entries[w] = e;
                rows[w] = rows[r];
                w += 1;
            } else {
                dropped.push(DroppedEntry {
                    origin: EntryOrigin {
                        bundle_id: summary.header.bundle_id.clone(),
                        file: file.clone(),
                        node_id: log_node(e.log as usize),
                        index: e.index as u64,
                        job_id: uuid::Uuid::from_bytes(e.job_id).to_string(),
                        t_hlc: hlc_text(e.physical, e.logical, &nodes[e.node as usize]).to_string(),
                    },
                    reason: reason(e.log as usize),
                });
            }
        }
        entries.truncate(w);
        rows.truncate(w);
    }
    for (log, index, job, t) in unparsed {
        dropped.push(DroppedEntry {
            origin: EntryOrigin {
                bundle_id: summary.header.bundle_id.clone(),
                file: file.clone(),
                node_id: log_node(log as usize),
                index: index as u64,
                job_id: job,
                t_hlc: t,
            },
            reason: reason(log as usize),
        });
    }
    dropped.sort_by(|a, b| {
        (&a.origin.node_id, a.origin.index).cmp(&(&b.origin.node_id, b.origin.index))
    });
    Ok(Loaded {
        file,
        header: summary.header,
        report,
        nodes,
        entries,
        rows,
        arena,
        dropped,
        status: BundleStatus::New,
        already_at: None,
    })
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
                let name = opts.input_names.and_then(|n| n.get(i)).cloned();
                let r = load(p, name.unwrap_or_else(|| display_name(p)), opts);
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
    let mut seen: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    for l in loaded.iter_mut() {
        let key = (l.header.bundle_id.clone(), l.header.manifest_digest.clone());
        if !seen.insert(key) {
            l.status = BundleStatus::RepeatedInput;
        }
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hundred_thousand_nodes_are_looked_up_by_hash() {
        let mut c = Collector::new(Verifier::new(VerifyOptions::default()));
        for round in 0..2 {
            for i in 0..100_000u32 {
                assert_eq!(c.node_index(&format!("n{i:06}")), i, "round {round}");
            }
        }
        assert_eq!(c.nodes.len(), 100_000);
    }
}
