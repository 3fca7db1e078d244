//! Stage 4 of an import, report: what an import did or would do ([`ImportReport`]), built from what
//! the earlier stages produced (the loaded inputs, the plan, what was written).

use super::dropped::{DroppedEntry, DroppedList, EntryOrigin};
use super::load::{BundleStatus, Loaded};
use super::options::{ImportError, ImportOptions};
use super::plan::{Planned, Refusal};
use super::readback::ReadBack;
use super::write::Written;
use crate::core::chain::{scheduler_chain_link, Action};
use crate::core::hlc::Hlc;
use crate::core::merge::{ConflictSide, DuplicateOf};
use crate::core::store::backend::StoreTx;
use crate::core::store::scheduler::Snapshot;
use crate::core::verify::Report;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::{Arc, OnceLock};

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

/// The outcome of [`verify_inputs`], [`plan_import`] or [`import`] (`jobs import --json` prints it:
/// its JSON lists every dropped entry, [`ImportReport::dropped_entries`]).
#[derive(Debug, Clone)]
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
    pub new_entries: Option<Vec<PlannedEntry>>,
    pub duplicates: Vec<DuplicateReport>,
    pub conflicts: Vec<ConflictReport>,
    /// The dropped entries held here: every one, unless the call was made with
    /// [`ImportOptions::stream_dropped`], which leaves this empty; [`ImportReport::dropped_entries`]
    /// reads every one either way.
    pub dropped: Vec<DroppedEntry>,
    pub snapshots: Vec<Snapshot>,
    /// This machine's clock after witnessing the imported timestamps.
    pub clock: Option<String>,
    /// Only in plans: per-node swimlanes.
    pub lanes: Option<Vec<Lane>>,
    /// With [`ImportOptions::stream_dropped`]: the dropped entries, after `dropped`.
    dropped_rest: DroppedRest,
}

/// Dropped entries read back as they are reached: the inputs' lists in report order.
#[derive(Debug, Clone, Default)]
struct DroppedRest {
    lists: Vec<Arc<DroppedList>>,
    /// The first read-back failure, once one happened.
    failed: Arc<OnceLock<String>>,
}

impl DroppedRest {
    fn len(&self) -> usize {
        self.lists.iter().map(|l| l.len()).sum()
    }

    fn iter(&self) -> impl Iterator<Item = std::io::Result<DroppedEntry>> + '_ {
        self.lists.iter().flat_map(|l| l.iter()).inspect(|d| {
            if let Err(e) = d {
                self.failed.get_or_init(|| e.to_string());
            }
        })
    }
}

/// The report's `droppedUnreadable` (only when reading the dropped entries back failed while the
/// report was written): `dropped` lists the first `listed` of the `count` dropped entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedUnreadable {
    pub count: usize,
    pub listed: usize,
    pub error: String,
}

/// Exactly the JSON a derived `Serialize` gives (camelCase fields in this order, `newEntries` and
/// `lanes` only when set), `dropped` listing every dropped entry
/// ([`ImportReport::dropped_entries`]).
impl Serialize for ImportReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The fields written when the dropped entries read back (`droppedUnreadable` is not).
        let n = 13 + usize::from(self.new_entries.is_some()) + usize::from(self.lanes.is_some());
        let mut st = s.serialize_struct("ImportReport", n)?;
        st.serialize_field("status", &self.status)?;
        st.serialize_field("refusal", &self.refusal)?;
        st.serialize_field("tenantId", &self.tenant_id)?;
        st.serialize_field("dryRun", &self.dry_run)?;
        st.serialize_field("forced", &self.forced)?;
        st.serialize_field("bundles", &self.bundles)?;
        st.serialize_field("totals", &self.totals)?;
        st.serialize_field("chain", &self.chain)?;
        match &self.new_entries {
            Some(v) => st.serialize_field("newEntries", v)?,
            None => st.skip_field("newEntries")?,
        }
        st.serialize_field("duplicates", &self.duplicates)?;
        st.serialize_field("conflicts", &self.conflicts)?;
        let unreadable = Cell::new(None);
        st.serialize_field("dropped", &AllDropped(self, &unreadable))?;
        match unreadable.take() {
            Some(u) => st.serialize_field("droppedUnreadable", &u)?,
            None => st.skip_field("droppedUnreadable")?,
        }
        st.serialize_field("snapshots", &self.snapshots)?;
        st.serialize_field("clock", &self.clock)?;
        match &self.lanes {
            Some(v) => st.serialize_field("lanes", v)?,
            None => st.skip_field("lanes")?,
        }
        st.end()
    }
}

/// Every dropped entry; should reading them back fail, the ones read before, the failure kept in
/// the cell (the report stays one valid document: `droppedUnreadable` follows).
struct AllDropped<'a>(&'a ImportReport, &'a Cell<Option<DroppedUnreadable>>);

impl Serialize for AllDropped<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let count = self.0.dropped_count();
        let mut seq = s.serialize_seq(Some(count))?;
        for (listed, d) in self.0.dropped_entries().enumerate() {
            match d {
                Ok(d) => seq.serialize_element(&*d)?,
                Err(e) => {
                    self.1.set(Some(DroppedUnreadable {
                        count,
                        listed,
                        error: e.to_string(),
                    }));
                    break;
                }
            }
        }
        seq.end()
    }
}

impl ImportReport {
    /// Why the dropped entries could not all be read back, when reading them (the report's JSON,
    /// [`ImportReport::dropped_entries`]) failed: the report lists only those read before. An
    /// import checks they read back before its commit, so this is a failure of a file that read
    /// back a moment before; the import itself stands.
    pub fn dropped_unreadable(&self) -> Option<&str> {
        self.dropped_rest.failed.get().map(String::as_str)
    }

    /// How many dropped entries [`ImportReport::dropped_entries`] reads.
    pub fn dropped_count(&self) -> usize {
        self.dropped.len() + self.dropped_rest.len()
    }

    /// Every dropped entry in report order: `dropped`, then (with
    /// [`ImportOptions::stream_dropped`]) those read back from memory or their temporary file as
    /// they are reached.
    pub fn dropped_entries(
        &self,
    ) -> impl Iterator<Item = std::io::Result<Cow<'_, DroppedEntry>>> + '_ {
        let rest = self.dropped_rest.iter().map(|d| d.map(Cow::Owned));
        self.dropped
            .iter()
            .map(|d| Ok(Cow::Borrowed(d)))
            .chain(rest)
    }

    /// Why a call refused as [`Refusal::NothingToImport`] imports nothing, bundle by bundle (what
    /// was given and why none of it is left); `None` for any other outcome. Raw text: escape it
    /// for a terminal.
    pub fn nothing_to_import(&self) -> Option<String> {
        if self.refusal != Some(Refusal::NothingToImport) {
            return None;
        }
        let taking_part = self
            .bundles
            .iter()
            .filter(|b| b.status == BundleStatus::New);
        let why: Vec<String> = taking_part
            .map(|b| match (b.entries, b.dropped) {
                (0, 0) => format!("{} (bundle {}) has no entries", b.file, b.bundle_id),
                (_, dropped) => format!(
                    "every entry of {} (bundle {}) was dropped ({dropped} dropped: each of its logs breaks at its first entry, so no verified prefix is left)",
                    b.file, b.bundle_id
                ),
            })
            .collect();
        Some(format!(
            "refused: nothing to import: {}; nothing was imported and nothing was written",
            why.join("; ")
        ))
    }
}

/// The dry-run plan.
pub type ImportPlan = ImportReport;
/// The result of an import.
pub type ImportResult = ImportReport;

/// `--verify-only`: every input verified (status `verified`, or `refused` with findings).
pub(super) fn verify_report(
    loaded: &[Loaded],
    opts: &ImportOptions<'_>,
) -> Result<ImportReport, ImportError> {
    let mut r = base_report(loaded, opts.force, false);
    if r.totals.findings > 0 {
        r.status = ImportStatus::Refused;
        r.refusal = Some(Refusal::Findings);
    }
    // What `--force` would drop: a bundle given twice is imported once, so dropped once.
    set_dropped(&mut r, loaded, opts.stream_dropped)?;
    Ok(r)
}

/// The dropped entries of the inputs taking part, bundle by bundle in (bundleId, digest, file)
/// order, so the list does not depend on the argument order (each bundle's own list is by node
/// and index): in `r.dropped`, or (`stream`) read back as the report is written.
fn set_dropped(r: &mut ImportReport, loaded: &[Loaded], stream: bool) -> Result<(), ImportError> {
    let mut inputs: Vec<&Loaded> = loaded.iter().filter(|l| l.takes_part()).collect();
    inputs.sort_by(|a, b| {
        (&a.header.bundle_id, &a.digest, &a.file).cmp(&(&b.header.bundle_id, &b.digest, &b.file))
    });
    let rest = DroppedRest {
        lists: inputs.iter().map(|l| Arc::clone(&l.dropped)).collect(),
        failed: Arc::default(),
    };
    r.totals.dropped = rest.len() as u64;
    if stream {
        r.dropped = Vec::new();
        r.dropped_rest = rest;
    } else {
        r.dropped = rest
            .iter()
            .collect::<std::io::Result<_>>()
            .map_err(ImportError::DroppedList)?;
    }
    Ok(())
}

/// The dry-run report: the plan's decisions, every entry to append with its chain link, the lanes.
pub(super) fn plan_report(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
    opts: &ImportOptions<'_>,
) -> Result<ImportPlan, ImportError> {
    let window = opts.preview_window.unwrap_or(usize::MAX);
    let mut report = decided_report(tx, loaded, planned, opts, Some(window))?;
    if report.refusal.is_some() {
        return Ok(report);
    }
    let (planned_entries, head) = planned_entries(loaded, planned, window)?;
    if let Some((link, t_hlc)) = head {
        report.chain.head = Some(link);
        report.chain.head_hlc = Some(t_hlc);
    }
    report.chain.length = planned.length_before + planned.merge.merged.len() as u64;
    report.new_entries = Some(planned_entries);
    report.lanes = Some(lanes(loaded, planned, window)?);
    report.status = if planned.part.is_empty() {
        ImportStatus::NothingToDo
    } else {
        ImportStatus::Planned
    };
    Ok(report)
}

/// The report of an import: the plan's decisions and what was written (`None`: nothing was).
pub(super) fn import_report(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
    written: Option<Written>,
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let mut report = decided_report(tx, loaded, planned, opts, None)?;
    if report.refusal.is_some() {
        return Ok(report);
    }
    let Some(w) = written else {
        report.status = ImportStatus::NothingToDo;
        return Ok(report);
    };
    report.clock = Some(w.clock);
    report.chain.head = w.summary.head;
    report.chain.head_hlc = w.summary.head_hlc;
    report.chain.length = w.summary.length;
    report.snapshots = w.summary.snapshots;
    report.status = ImportStatus::Imported;
    if opts.stream_dropped {
        // The report lists them after the commit: a list that does not read back now refuses the
        // import (nothing written) rather than leave an import its report cannot list.
        for l in loaded.iter().filter(|l| l.takes_part()) {
            l.dropped
                .check_readable()
                .map_err(ImportError::DroppedList)?;
        }
    }
    Ok(report)
}

/// What plans and imports share: bundles, chain before, dropped entries, and (unless refused for
/// findings) duplicates, conflicts and counts.
fn decided_report(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
    opts: &ImportOptions<'_>,
    preview: Option<usize>,
) -> Result<ImportReport, ImportError> {
    let mut report = base_report(loaded, opts.force, preview.is_some());
    let head = planned.head.as_ref();
    report.chain = ChainChange {
        head_before: head.map(|h| h.head_chain_link.clone()),
        length_before: planned.length_before,
        head: head.map(|h| h.head_chain_link.clone()),
        head_hlc: head.map(|h| h.head_hlc.clone()),
        length: planned.length_before,
    };
    set_dropped(&mut report, loaded, opts.stream_dropped)?;
    if planned.refusal == Some(Refusal::Findings) {
        report.status = ImportStatus::Refused;
        report.refusal = Some(Refusal::Findings);
        return Ok(report);
    }
    let merge = &planned.merge;
    report.duplicates = merge
        .duplicates
        .iter()
        .map(|d| {
            let o = planned.input(loaded, d.entry).origin(d.entry.pos as usize);
            DuplicateReport {
                job_id: o.job_id,
                t_hlc: o.t_hlc,
                node_id: o.node_id,
                bundle_id: o.bundle_id,
                index: o.index,
                against: against(d.of),
                kept: match d.of {
                    DuplicateOf::Input(k) => Some(planned.input(loaded, k).origin(k.pos as usize)),
                    DuplicateOf::Chain => None,
                },
            }
        })
        .collect();
    report.conflicts = conflict_reports(tx, loaded, planned)?;
    report.totals.new = merge.merged.len() as u64;
    report.totals.duplicates = merge.duplicates.len() as u64;
    report.totals.conflicts = merge.conflicts.len() as u64;
    for (pi, &li) in planned.part.iter().enumerate() {
        report.bundles[li].new_entries = planned.new_per_input[pi];
        report.bundles[li].duplicates = planned.duplicates_per_input[pi];
    }
    if let Some(refusal) = planned.refusal {
        report.status = ImportStatus::Refused;
        report.refusal = Some(refusal);
        if let Some(window) = preview {
            report.lanes = Some(lanes(loaded, planned, window)?);
        }
    }
    Ok(report)
}

/// Where a duplicate's kept twin is: `input` or `chain`.
fn against(of: DuplicateOf) -> &'static str {
    match of {
        DuplicateOf::Input(_) => "input",
        DuplicateOf::Chain => "chain",
    }
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
        dropped_rest: DroppedRest::default(),
    }
}

/// The listed entries to append and the head (link, tHlc) after all of them.
type PlannedEntries = (Vec<PlannedEntry>, Option<(String, String)>);

/// The first `window` entries a dry run would append, in chain order, with the chain link each
/// would get (the payload hashes read back from the inputs, as the import would), and the head
/// (link, tHlc) after the last.
fn planned_entries(
    loaded: &[Loaded],
    planned: &Planned,
    window: usize,
) -> Result<PlannedEntries, ImportError> {
    let mut readers: Vec<ReadBack<'_>> = planned
        .part
        .iter()
        .map(|&i| loaded[i].read_back())
        .collect();
    let mut prev = planned.head.as_ref().map(|h| h.head_chain_link.clone());
    let mut head = None;
    let mut out = Vec::with_capacity(planned.merge.merged.len().min(window));
    for (k, at) in planned.merge.merged.iter().enumerate() {
        let l = planned.input(loaded, *at);
        let pos = at.pos as usize;
        let payload_hash = readers[at.input as usize].entry(at.pos)?.payload_hash;
        let t = l.t_hlc(pos);
        let job = l.job_text(pos);
        let link = scheduler_chain_link(
            &t,
            &job,
            Action::Enqueue,
            prev.as_deref(),
            &hex::encode(payload_hash),
        );
        if k < window {
            out.push(PlannedEntry {
                seq: planned.length_before + k as u64,
                t_hlc: t.clone(),
                job_id: job,
                node_id: l.node(pos).to_string(),
                bundle_id: l.header.bundle_id.clone(),
                index: l.origin_index(pos),
                payload_hash: B64.encode(payload_hash),
                prev_chain_link: prev.clone(),
                chain_link: link.clone(),
            });
        }
        head = Some((link.clone(), t));
        prev = Some(link);
    }
    Ok((out, head))
}

fn conflict_reports(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
) -> Result<Vec<ConflictReport>, ImportError> {
    let tenant = &planned.tenant;
    let mut out = Vec::with_capacity(planned.merge.conflicts.len());
    for c in &planned.merge.conflicts {
        let job = uuid::Uuid::from_bytes(c.job_id).to_string();
        let mut sides = Vec::new();
        for s in &c.sides {
            sides.push(match s {
                ConflictSide::Input(at) => {
                    let l = planned.input(loaded, *at);
                    let mut reader = l.read_back();
                    let back = reader.entry(at.pos)?;
                    ConflictSideReport {
                        source: "input",
                        payload_hash: B64.encode(back.payload_hash),
                        payload: Some(back.entry.payload.to_string()),
                        origin: Some(l.origin(at.pos as usize)),
                        chain_seq: None,
                    }
                }
                ConflictSide::Chain { payload_hash } => {
                    let seq = tx.job(tenant, &c.job_id)?.map(|j| j.enqueue_seq);
                    let payload = match seq {
                        Some(seq) => tx.payload_at(tenant, seq)?,
                        None => None,
                    };
                    ConflictSideReport {
                        source: "chain",
                        payload_hash: B64.encode(payload_hash),
                        payload,
                        origin: None,
                        chain_seq: seq,
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

/// Per-node swimlanes of the input entries with their fates: each lane's first `window` entries
/// in HLC order (each log is in HLC order, so only the first `window` of each log can be among
/// them).
fn lanes(loaded: &[Loaded], planned: &Planned, window: usize) -> Result<Vec<Lane>, ImportError> {
    use std::collections::BTreeMap;
    // Per merge input and entry: 0 conflict, 1 duplicate, 2 + k the k-th new entry.
    let mut codes: Vec<Vec<u32>> = planned
        .part
        .iter()
        .map(|&li| vec![0u32; loaded[li].keys.len()])
        .collect();
    for (k, at) in planned.merge.merged.iter().enumerate() {
        codes[at.input as usize][at.pos as usize] = 2u32.saturating_add(k as u32);
    }
    for d in &planned.merge.duplicates {
        codes[d.entry.input as usize][d.entry.pos as usize] = 1;
    }
    for at in planned.conflicting_inputs() {
        codes[at.input as usize][at.pos as usize] = 0;
    }
    let mut by_node: BTreeMap<String, Vec<LaneEntry>> = BTreeMap::new();
    for (li, l) in loaded.iter().enumerate() {
        let pi = planned.part.iter().position(|&p| p == li);
        let input = l.merge_input();
        for log in 0..l.log_starts.len() {
            let (start, end) = (l.log_starts[log] as usize, input.log_end(log) as usize);
            let shown = end.min(start.saturating_add(window));
            for (pos, e) in l.keys.iter().enumerate().take(shown).skip(start) {
                let (fate, seq) = match pi.map(|pi| codes[pi][pos]) {
                    Some(0) => (Fate::Conflict, None),
                    Some(1) => (Fate::Duplicate, None),
                    Some(c) => (Fate::New, Some(planned.length_before + (c - 2) as u64)),
                    None => (Fate::Skipped, None),
                };
                by_node
                    .entry(l.node(pos).to_string())
                    .or_default()
                    .push(LaneEntry {
                        t_hlc: l.t_hlc(pos),
                        physical: e.physical,
                        logical: e.logical,
                        job_id: l.job_text(pos),
                        bundle_id: l.header.bundle_id.clone(),
                        fate,
                        seq,
                    });
            }
        }
        for d in l.dropped.iter() {
            let d = d.map_err(ImportError::DroppedList)?;
            let (physical, logical) = Hlc::parse(&d.origin.t_hlc)
                .map(|h| (h.physical, h.logical))
                .unwrap_or((0, 0));
            by_node
                .entry(d.origin.node_id.clone())
                .or_default()
                .push(LaneEntry {
                    t_hlc: d.origin.t_hlc.clone(),
                    physical,
                    logical,
                    job_id: d.origin.job_id.clone(),
                    bundle_id: d.origin.bundle_id.clone(),
                    fate: if pi.is_some() {
                        Fate::Dropped
                    } else {
                        Fate::Skipped
                    },
                    seq: None,
                });
        }
    }
    Ok(by_node
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
            entries.truncate(window);
            Lane { node_id, entries }
        })
        .collect())
}
