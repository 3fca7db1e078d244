//! Stage 2 of an import, plan: under the tenant's chain lock (or a read snapshot for a dry run),
//! mark the bundles imported before, refuse findings `--force` does not waive, and plan the merge of
//! the bundles taking part against the jobs the chain already holds ([`Planned`]).

use super::load::{BundleStatus, Loaded};
use super::options::{ImportError, ImportOptions, ImportProgress, STAGE_PLANNING};
use super::readback::ReadBack;
use crate::core::merge::{plan_merge, ConflictSide, EntryAt, MergeInput, MergePlan};
use crate::core::store::backend::StoreTx;
use crate::core::store::scheduler::ChainHead;
use serde::Serialize;
use std::sync::atomic::Ordering;

/// Why an import was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    Findings,
    Conflicts,
    /// The bundles taking part hold no entry to import: `--force` dropped every entry (each log
    /// breaks at its first), or they have no entries at all. Nothing imported is not a success.
    NothingToImport,
}

/// How the plan reads the chain head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadAccess {
    /// A dry run: read it.
    Read,
    /// An import: take the tenant's chain lock first (writers of the chain serialize there, so
    /// another importer's committed entries and imports are seen below).
    Lock,
}

/// What the plan stage decided.
pub(super) struct Planned {
    pub(super) tenant: String,
    /// The chain head before this import.
    pub(super) head: Option<ChainHead>,
    pub(super) length_before: u64,
    /// Set when the import must write nothing.
    pub(super) refusal: Option<Refusal>,
    /// Positions in the loaded inputs of the bundles taking part (merge input `i` is
    /// `loaded[part[i]]`).
    pub(super) part: Vec<usize>,
    /// The merge of the bundles taking part (empty when refused for findings).
    pub(super) merge: MergePlan,
    /// Per merge input: entries it adds and duplicates it drops.
    pub(super) new_per_input: Vec<u64>,
    pub(super) duplicates_per_input: Vec<u64>,
}

impl Planned {
    /// The loaded input a merge position points into.
    pub(super) fn input<'l>(&self, loaded: &'l [Loaded], at: EntryAt) -> &'l Loaded {
        &loaded[self.part[at.input as usize]]
    }

    /// Whether the write stage has anything to record (refusals and "nothing to do" write nothing).
    pub(super) fn writes(&self) -> bool {
        self.refusal.is_none() && !self.part.is_empty()
    }

    /// Whether a merge input is part of a conflict (for lanes).
    pub(super) fn conflicting_inputs(&self) -> impl Iterator<Item = EntryAt> + '_ {
        self.merge.conflicts.iter().flat_map(|c| {
            c.sides.iter().filter_map(|s| match s {
                ConflictSide::Input(at) => Some(*at),
                ConflictSide::Chain { .. } => None,
            })
        })
    }
}

/// Plans the import of `loaded` (statuses of bundles imported before are updated in place).
pub(super) fn plan(
    tx: &mut dyn StoreTx,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    access: HeadAccess,
) -> Result<Planned, ImportError> {
    let _span = tracing::info_span!("import_plan").entered();
    stage(opts.progress.as_deref(), STAGE_PLANNING);
    let tenant = loaded[0].header.tenant_id.clone();
    let head = match access {
        HeadAccess::Read => tx.chain_head(&tenant)?,
        HeadAccess::Lock => tx.lock_chain(&tenant)?,
    };
    mark_already_imported(tx, &tenant, loaded)?;
    let length_before = head.as_ref().map(|h| h.length).unwrap_or(0);
    let mut planned = Planned {
        tenant,
        head,
        length_before,
        refusal: None,
        part: Vec::new(),
        merge: MergePlan::default(),
        new_per_input: Vec::new(),
        duplicates_per_input: Vec::new(),
    };
    // A bundle with findings is refused whether or not it was imported before (a tampered copy of
    // an imported bundle must not pass as "nothing to do"); `--force` waives only broken logs.
    let has_findings = loaded.iter().any(|l| !l.report.findings.is_empty());
    let unwaivable = loaded
        .iter()
        .any(|l| l.report.unwaivable().next().is_some());
    if has_findings && (!opts.force || unwaivable) {
        planned.refusal = Some(Refusal::Findings);
        return Ok(planned);
    }
    planned.part = (0..loaded.len())
        .filter(|&i| loaded[i].takes_part())
        .collect();
    let inputs: Vec<MergeInput<'_>> = planned
        .part
        .iter()
        .map(|&i| loaded[i].merge_input())
        .collect();
    let total: usize = inputs.iter().map(|i| i.keys.len()).sum();
    let existing = tx.known_jobs(
        &planned.tenant,
        length_before,
        &mut ExactIds {
            inputs: &inputs,
            input: 0,
            pos: 0,
            left: total,
        },
    )?;
    // Payload hashes are read back (and checked) only for job ids that occur more than once or
    // that the chain holds.
    let mut readers: Vec<ReadBack<'_>> = planned
        .part
        .iter()
        .map(|&i| loaded[i].read_back())
        .collect();
    planned.merge = plan_merge(&inputs, &existing, &mut |at| {
        readers[at.input as usize]
            .entry(at.pos)
            .map(|b| b.payload_hash)
    })?;
    planned.new_per_input = vec![0; inputs.len()];
    planned.duplicates_per_input = vec![0; inputs.len()];
    for at in &planned.merge.merged {
        planned.new_per_input[at.input as usize] += 1;
    }
    for d in &planned.merge.duplicates {
        planned.duplicates_per_input[d.entry.input as usize] += 1;
    }
    if !planned.merge.conflicts.is_empty() {
        planned.refusal = Some(Refusal::Conflicts);
    } else if total == 0 && !planned.part.is_empty() {
        // Not one verified entry (a duplicate would be one): recording the bundles as imported
        // would claim an import that appended nothing, and a first import would leave a tenant
        // with a head but no chain.
        planned.refusal = Some(Refusal::NothingToImport);
    }
    Ok(planned)
}

/// The plan of an import under the tenant's chain lock. `pre` is a plan made against an empty
/// store just before this store was made ([`super::import_to_new_store`]): while the tenant still
/// has no chain here and no input was imported before, planning again would give exactly that plan
/// (a plan depends on the store only through the head, the jobs of the chain and the earlier
/// imports), so it is taken instead of merging every entry a second time. Anything else (another
/// importer got in between) plans again.
pub(super) fn plan_locked(
    tx: &mut dyn StoreTx,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    pre: Option<Planned>,
) -> Result<Planned, ImportError> {
    if let Some(pre) = pre {
        if pre.head.is_none() && tx.lock_chain(&pre.tenant)?.is_none() {
            let before: Vec<BundleStatus> = loaded.iter().map(|l| l.status).collect();
            mark_already_imported(tx, &pre.tenant, loaded)?;
            if loaded.iter().map(|l| l.status).eq(before) {
                stage(opts.progress.as_deref(), STAGE_PLANNING);
                return Ok(pre);
            }
        }
    }
    plan(tx, loaded, opts, HeadAccess::Lock)
}

/// Sets the stage displays show.
pub(super) fn stage(progress: Option<&ImportProgress>, stage: u8) {
    if let Some(p) = progress {
        p.stage.store(stage, Ordering::Relaxed);
    }
}

/// Bundles (same id and manifest digest) imported before are skipped, unless that import was
/// forced: a forced import (of a copy with findings) never stands for the whole bundle, whose clean
/// copy then takes part (what the chain holds already is a duplicate). This covers a forced import
/// that dropped entries and one of a tampered copy that only claimed the bundle's digest (its logs
/// differ: a `manifest-mismatch`). A copy with findings is skipped after any import of the bundle.
fn mark_already_imported(
    tx: &mut dyn StoreTx,
    tenant: &str,
    loaded: &mut [Loaded],
) -> Result<(), ImportError> {
    for l in loaded.iter_mut() {
        if l.status != BundleStatus::New {
            continue;
        }
        let h = &l.header;
        if let Some(prev) = tx.find_import(tenant, &h.bundle_id, &h.manifest_digest)? {
            let stands_for_it = !prev.forced && prev.dropped == 0;
            if stands_for_it || !l.report.findings.is_empty() {
                l.status = BundleStatus::AlreadyImported;
                l.already_at = Some(prev.imported_at);
            }
        }
    }
    Ok(())
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
            if let Some(e) = input.keys.get(self.pos) {
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
