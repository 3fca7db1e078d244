//! Stage 3 of an import, write: inside the caller's write transaction, record one `imports` row per
//! bundle taking part, append the merged entries to the tenant chain and insert their job rows (the
//! row pipeline), write the head and the snapshots that became due, and witness the largest imported
//! timestamp on this machine's clock ([`Written`]).

use super::load::Loaded;
use super::options::{ImportError, ImportOptions, STAGE_WRITING};
use super::pipeline::append_merged;
use super::plan::{stage, Planned};
use crate::core::hlc::{hlc_text, Hlc, HlcClock, SystemWallClock};
use crate::core::store::backend::StoreTx;
use crate::core::store::rules::AppendSummary;
use crate::core::store::rules::ChainAppender;
use crate::core::store::scheduler::ImportRecord;
use crate::core::time::rfc3339_millis;
use std::sync::atomic::Ordering;

/// What the write stage did.
pub(super) struct Written {
    pub(super) summary: AppendSummary,
    /// This machine's clock after witnessing the imported timestamps (`physical:logical:node`).
    pub(super) clock: String,
}

/// Writes a plan that [`Planned::writes`].
pub(super) fn write(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
    opts: &ImportOptions<'_>,
    clock: &mut HlcClock<SystemWallClock>,
) -> Result<Written, ImportError> {
    let _span = tracing::info_span!("import_write", entries = planned.merge.merged.len()).entered();
    if let Some(p) = &opts.progress {
        p.entries_total
            .store(planned.merge.merged.len() as u64, Ordering::Relaxed);
    }
    stage(opts.progress.as_deref(), STAGE_WRITING);
    let now = crate::core::hlc::unix_ms_now();
    let import_ids = record_imports(tx, loaded, planned, opts, now)?;
    let mut app = ChainAppender::begin(tx, &planned.tenant, planned.head.as_ref(), now)?;
    let appended = {
        let _span = tracing::info_span!("import_append").entered();
        append_merged(
            tx,
            &mut app,
            loaded,
            planned,
            &import_ids,
            opts.batch_size,
            opts.progress.as_deref(),
        )?
    };
    if let Some(p) = &opts.progress {
        p.entries_written
            .store(planned.merge.merged.len() as u64, Ordering::Relaxed);
    }
    let summary = {
        let _span = tracing::info_span!("import_head_and_snapshots").entered();
        app.finish(
            tx,
            opts.batch_size,
            false,
            opts.snapshot_signer,
            planned.head.as_ref().map(|h| h.head_chain_link.clone()),
            planned.length_before,
        )?
    };
    if let Some((p, l, input, pos)) = appended.max_hlc {
        let node = loaded[input].node(pos).to_string();
        clock.receive(&Hlc::new(p, l, node))?;
    }
    tx.save_clock_state(&opts.node_id, clock.last())?;
    let (cp, cl) = clock.last();
    Ok(Written {
        summary,
        clock: hlc_text(cp, cl, &opts.node_id).to_string(),
    })
}

/// One `imports` row per bundle taking part, inserted in (bundleId, manifest digest, digest of
/// its logs) order so ids do not depend on the argument order (two tampered copies can claim one
/// id and digest); returns the ids per merge input.
fn record_imports(
    tx: &mut dyn StoreTx,
    loaded: &[Loaded],
    planned: &Planned,
    opts: &ImportOptions<'_>,
    now: u64,
) -> Result<Vec<i64>, ImportError> {
    let part = &planned.part;
    let batch = uuid::Uuid::new_v4().to_string();
    let mut order: Vec<usize> = (0..part.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&loaded[part[a]], &loaded[part[b]]);
        (&x.header.bundle_id, &x.header.manifest_digest, &x.digest).cmp(&(
            &y.header.bundle_id,
            &y.header.manifest_digest,
            &y.digest,
        ))
    });
    let mut import_ids = vec![0i64; part.len()];
    for &pi in &order {
        let l = &loaded[part[pi]];
        import_ids[pi] = tx.insert_import(&ImportRecord {
            id: 0,
            import_batch: batch.clone(),
            tenant_id: planned.tenant.clone(),
            bundle_id: l.header.bundle_id.clone(),
            manifest_digest: l.header.manifest_digest.clone(),
            created_by_node_id: l.header.created_by_node_id.clone(),
            signed_by: l.header.signed_by.clone(),
            signer: l.report.stats.signer.clone(),
            file_name: l.file.clone(),
            entries: l.report.stats.entries as u64,
            new_entries: planned.new_per_input[pi],
            duplicates: planned.duplicates_per_input[pi],
            dropped: l.dropped.len() as u64,
            forced: opts.force && !l.report.findings.is_empty(),
            imported_at: rfc3339_millis(now),
        })?;
    }
    Ok(import_ids)
}
