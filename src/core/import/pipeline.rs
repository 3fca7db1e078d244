//! The write stage's two-thread pipeline: this thread binds and inserts rows while a second one
//! computes the chain links and lays out the next rows (verification is over, so a core is free).
//! The preparer hands over chunks in chain order; used chunks come back for reuse.

use super::job_order::{JobOrder, JobRow};
use super::load::Loaded;
use super::options::{ImportError, ImportProgress};
use super::plan::Planned;
use super::readback::ReadBack;
use crate::core::chain::Action;
use crate::core::hlc::hlc_text;
use crate::core::store::backend::{RowBatch, RowProvenance, StoreTx};
use crate::core::store::rules::{ChainAppender, NewRow, RowPreparer};
use crate::core::store::StoreError;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};

/// Rows per chunk handed from the row preparer to the writer, and chunks in flight.
const PIPELINE_CHUNK: usize = 4096;
const PIPELINE_DEPTH: usize = 4;
/// Job rows per chunk handed to the writer once every chain row is prepared.
const JOBS_CHUNK: usize = 8192;
/// Snapshot batches whose links are kept before their roots are computed (one call for many, so
/// the roots are computed on all cores).
const FOLD_AT: usize = 256;

/// What appending the merged entries produced besides the chain and job rows.
pub(super) struct Appended {
    /// The largest imported HLC: (physical, logical, loaded input, position in it).
    pub(super) max_hlc: Option<(u64, u32, usize, usize)>,
}

/// What the preparer hands the writer.
enum Prepared {
    Rows(RowBatch),
    /// Job rows, after every chain row; all of them come in job-id order.
    Jobs(Vec<JobRow>),
}

/// Appends every merged entry of `planned` to the chain through `app`, in chain order.
pub(super) fn append_merged(
    tx: &mut dyn StoreTx,
    app: &mut ChainAppender,
    loaded: &[Loaded],
    planned: &Planned,
    import_ids: &[i64],
    batch_size: u64,
    progress: Option<&ImportProgress>,
) -> Result<Appended, ImportError> {
    let prep = app.preparer();
    let (to_writer, prepared) = std::sync::mpsc::sync_channel::<Prepared>(PIPELINE_DEPTH);
    let (to_preparer, reused) = std::sync::mpsc::channel::<RowBatch>();
    let (written, appended, roots) = std::thread::scope(|s| {
        let preparer =
            s.spawn(move || prepare_rows(prep, loaded, planned, import_ids, to_writer, reused));
        let mut written: Result<(), StoreError> = Ok(());
        let mut done = 0u64;
        let mut jobs = None;
        // The chain rows come first, then the job rows.
        for chunk in prepared.iter() {
            let mut chunk = match chunk {
                Prepared::Rows(chunk) => chunk,
                Prepared::Jobs(first) => {
                    jobs = Some(first);
                    break;
                }
            };
            done += chunk.len() as u64;
            written = app.write_prepared(tx, &mut chunk);
            // Snapshot roots of full batches now: links need not wait in memory.
            if app.links_held() >= FOLD_AT * batch_size.max(1) as usize {
                app.fold_full_batches(batch_size);
            }
            if let Some(p) = progress {
                p.entries_written.store(done, Ordering::Relaxed);
            }
            let _ = to_preparer.send(chunk);
            if written.is_err() {
                break;
            }
        }
        let mut roots = None;
        if let (Some(first), Ok(())) = (jobs, &written) {
            // Every link is final now: the snapshots' Merkle roots are computed on another
            // thread while the job rows are inserted (the preparer only merges them).
            let app = &*app;
            std::thread::scope(|s| {
                let due = s.spawn(|| app.due_roots(batch_size, false));
                written = insert_job_chunks(tx, &planned.tenant, first, &prepared);
                roots = due.join().ok();
            });
        }
        drop(prepared);
        let appended = preparer.join().expect("row preparer panicked");
        (written, appended, roots)
    });
    if let Some(r) = roots {
        app.use_roots(r);
    }
    written?;
    appended
}

/// Inserts the job rows the preparer hands over after the chain rows, `first` and the rest.
fn insert_job_chunks(
    tx: &mut dyn StoreTx,
    tenant: &str,
    first: Vec<JobRow>,
    prepared: &Receiver<Prepared>,
) -> Result<(), StoreError> {
    tx.insert_jobs(tenant, &first)?;
    for chunk in prepared.iter() {
        if let Prepared::Jobs(jobs) = chunk {
            tx.insert_jobs(tenant, &jobs)?;
        }
    }
    Ok(())
}

/// The preparer thread: reads the merged entries back (checked against what was verified) and
/// lays out their rows in chunks, then hands over the job rows in job-id order ([`JobOrder`]).
fn prepare_rows(
    mut prep: RowPreparer,
    loaded: &[Loaded],
    planned: &Planned,
    import_ids: &[i64],
    to_writer: SyncSender<Prepared>,
    reused: Receiver<RowBatch>,
) -> Result<Appended, ImportError> {
    let merged = &planned.merge.merged;
    let mut readers: Vec<ReadBack<'_>> = planned
        .part
        .iter()
        .map(|&i| loaded[i].read_back())
        .collect();
    let mut t = String::with_capacity(64);
    let mut job_buf = uuid::Uuid::encode_buffer();
    let mut digest_buf = [0u8; 64];
    let mut max_hlc: Option<(u64, u32, usize, usize)> = None;
    let mut jobs = JobOrder::new(merged.len());
    let mut chunk = RowBatch::default();
    for at in merged.iter() {
        let l = planned.input(loaded, *at);
        let pos = at.pos as usize;
        let k = l.keys[pos];
        let back = readers[at.input as usize].entry(at.pos)?;
        hlc_text(k.physical, k.logical, l.node(pos)).set(&mut t);
        let job = uuid::Uuid::from_bytes(k.job_id)
            .hyphenated()
            .encode_lower(&mut job_buf);
        hex::encode_to_slice(back.payload_hash, &mut digest_buf).expect("64 bytes");
        let digest = std::str::from_utf8(&digest_buf).expect("hex is ASCII");
        let row = NewRow {
            t_hlc: &t,
            job_id: job,
            action: Action::Enqueue,
            payload: &back.entry.payload,
            payload_digest_hex: digest,
            provenance: Some(RowProvenance {
                import_id: import_ids[at.input as usize],
                source_node: &l.report.log_nodes[l.log_of(pos)],
                orig_link: &back.link,
                orig_prev_link: back.prev.as_ref(),
                partition_key: back.entry.partition_key.as_deref(),
                enqueued_at: &back.entry.enqueued_at,
            }),
        };
        let seq = prep.push(&mut chunk, row);
        jobs.push((k.job_id, back.payload_hash, seq))
            .map_err(ImportError::JobOrder)?;
        if max_hlc.is_none_or(|m| (k.physical, k.logical) > (m.0, m.1)) {
            max_hlc = Some((k.physical, k.logical, planned.part[at.input as usize], pos));
        }
        if chunk.len() >= PIPELINE_CHUNK {
            let full = std::mem::replace(&mut chunk, reused.try_recv().unwrap_or_default());
            if to_writer.send(Prepared::Rows(full)).is_err() {
                return Ok(Appended { max_hlc }); // the writer failed; its error is reported
            }
        }
    }
    if !chunk.is_empty() && to_writer.send(Prepared::Rows(chunk)).is_err() {
        return Ok(Appended { max_hlc });
    }
    jobs.finish(JOBS_CHUNK, |c| to_writer.send(Prepared::Jobs(c)).is_ok())
        .map_err(ImportError::JobOrder)?;
    Ok(Appended { max_hlc })
}
