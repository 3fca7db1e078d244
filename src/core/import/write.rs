//! Planning and writing: the merge, the import transaction and the row preparer / writer pipeline.

use super::load::Loaded;
use super::report::{
    base_report, conflict_reports, lanes, BundleStatus, ChainChange, DuplicateReport, ImportReport,
    ImportResult, ImportStatus, PlannedEntry, Refusal,
};
use super::{phase, ImportError, ImportOptions, STAGE_DONE, STAGE_PLANNING, STAGE_WRITING};
use crate::core::chain::{scheduler_chain_link, Action, Digest32};
use crate::core::hlc::{hlc_text, Hlc, SystemWallClock};
use crate::core::merge::{plan_merge, DuplicateOf, EntryAt, MergeInput};
use crate::core::store::backend::{Backend, RowBatch, RowProvenance, StoreTx, TxKind};
use crate::core::store::rules::ChainAppender;
use crate::core::store::scheduler::ImportRecord;
use crate::core::store::StoreError;
use crate::core::time::rfc3339_millis;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Rows per chunk handed from the row preparer to the writer, and chunks in flight.
const PIPELINE_CHUNK: usize = 4096;
const PIPELINE_DEPTH: usize = 4;

pub(super) fn import_in_tx(
    store: &dyn Backend,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
) -> Result<ImportResult, ImportError> {
    let mut tx = store.begin(TxKind::Write)?;
    // A damaged store is refused before anything is appended to it.
    tx.check_before_append(&loaded[0].header.tenant_id)?;
    // The clock resumes from what the store holds now, inside the write transaction.
    let mut clock = crate::core::store::rules::clock_in(&mut *tx, &opts.node_id, SystemWallClock)?;
    let report = run(&mut *tx, loaded, opts, Mode::Import(&mut clock))?;
    if report.status == ImportStatus::Imported {
        tx.commit()?;
        phase("commit");
    }
    if let Some(p) = &opts.progress {
        p.stage.store(STAGE_DONE, Ordering::Relaxed);
    }
    Ok(report)
}

pub(super) enum Mode<'c> {
    Plan,
    Import(&'c mut crate::core::hlc::HlcClock<SystemWallClock>),
}

pub(super) fn run(
    tx: &mut dyn StoreTx,
    loaded: &mut [Loaded],
    opts: &ImportOptions<'_>,
    mut mode: Mode<'_>,
) -> Result<ImportReport, ImportError> {
    let dry_run = matches!(mode, Mode::Plan);
    if let Some(p) = &opts.progress {
        p.stage.store(STAGE_PLANNING, Ordering::Relaxed);
    }
    let tenant = loaded[0].header.tenant_id.clone();
    // Writers of this tenant's chain serialize here, before anything is read: another importer's
    // committed entries and imports are then seen below.
    let head = match &mode {
        Mode::Plan => tx.chain_head(&tenant)?,
        Mode::Import(_) => tx.lock_chain(&tenant)?,
    };
    for l in loaded.iter_mut() {
        if l.status == BundleStatus::New {
            if let Some(prev) =
                tx.find_import(&tenant, &l.header.bundle_id, &l.header.manifest_digest)?
            {
                // A forced import that dropped entries does not stand for the whole bundle: a clean
                // copy takes part again (what the chain holds already is a duplicate).
                if prev.dropped == 0 || !l.report.findings.is_empty() {
                    l.status = BundleStatus::AlreadyImported;
                    l.already_at = Some(prev.imported_at);
                }
            }
        }
    }
    let mut report = base_report(loaded, opts.force, dry_run);
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
    // A bundle with findings is refused whether or not it was imported before (a tampered copy of
    // an imported bundle must not pass as "nothing to do"); `--force` waives only broken logs.
    let has_findings = loaded.iter().any(|l| !l.report.findings.is_empty());
    let unwaivable = loaded
        .iter()
        .any(|l| l.report.unwaivable().next().is_some());
    if has_findings && (!opts.force || unwaivable) {
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
    let existing = tx.known_jobs(
        &tenant,
        length_before,
        &mut ExactIds {
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
    report.conflicts = conflict_reports(tx, &tenant, &plan, &|at| l_of(at))?;
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
                import_ids[pi] = tx.insert_import(&ImportRecord {
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
                })?;
            }
            let mut app = ChainAppender::begin(tx, &tenant, head.as_ref(), now)?;
            // Two-stage pipeline: this thread binds and inserts rows while a second one computes
            // the chain links and lays out the next rows (verification is over, so a core is
            // free). The preparer hands over chunks in chain order; used chunks come back for reuse.
            let mut prep = app.preparer();
            let merged = &plan.merged;
            let import_ids = &import_ids;
            let (to_writer, prepared) = std::sync::mpsc::sync_channel::<RowBatch>(PIPELINE_DEPTH);
            let (to_preparer, reused) = std::sync::mpsc::channel::<RowBatch>();
            let (written, jobs, max_hlc) = std::thread::scope(|s| {
                let preparer = s.spawn(move || {
                    let mut t = String::with_capacity(64);
                    let mut job_buf = uuid::Uuid::encode_buffer();
                    let mut digest_buf = [0u8; 64];
                    let mut max_hlc: Option<(u64, u32, u32, usize)> = None;
                    let mut jobs: Vec<([u8; 16], Digest32, u64)> = Vec::with_capacity(merged.len());
                    let mut chunk = RowBatch::default();
                    for at in merged.iter() {
                        let l = l_of(*at);
                        let pos = at.pos as usize;
                        let e = &l.entries[pos];
                        let x = &l.links_text[pos];
                        t.clear();
                        let node = &l.nodes[e.node as usize];
                        write!(t, "{}", hlc_text(e.physical, e.logical, node))
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
                            Some(RowProvenance {
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
                    written = app.write_prepared(tx, &mut chunk);
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
                let written = tx.insert_jobs(&tenant, &jobs);
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
                tx,
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
            tx.save_clock_state(&opts.node_id, clock.last())?;
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
