//! The write stage's two-thread pipeline: this thread binds and inserts rows while a second one
//! computes the chain links and lays out the next rows (verification is over, so a core is free).
//! The preparer hands over chunks in chain order; used chunks come back for reuse.

use super::load::Loaded;
use super::options::ImportProgress;
use super::plan::Planned;
use crate::core::chain::{Action, Digest32};
use crate::core::hlc::hlc_text;
use crate::core::store::backend::{RowBatch, RowProvenance, StoreTx};
use crate::core::store::rules::{ChainAppender, NewRow, RowPreparer};
use crate::core::store::StoreError;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};

/// Rows per chunk handed from the row preparer to the writer, and chunks in flight.
const PIPELINE_CHUNK: usize = 4096;
const PIPELINE_DEPTH: usize = 4;

/// A job row to insert after the chain rows: job id, payloadHash, chain position.
pub(super) type JobRow = ([u8; 16], Digest32, u64);

/// What appending the merged entries produced besides the chain rows.
pub(super) struct Appended {
    /// The job rows, sorted by job id (b-tree appends instead of random inserts).
    pub(super) jobs: Vec<JobRow>,
    /// The largest imported HLC: (physical, logical, node index, loaded input).
    pub(super) max_hlc: Option<(u64, u32, u32, usize)>,
}

/// Appends every merged entry of `planned` to the chain through `app`, in chain order.
pub(super) fn append_merged(
    tx: &mut dyn StoreTx,
    app: &mut ChainAppender,
    loaded: &[Loaded],
    planned: &Planned,
    import_ids: &[i64],
    progress: Option<&ImportProgress>,
) -> Result<Appended, StoreError> {
    let prep = app.preparer();
    let (to_writer, prepared) = std::sync::mpsc::sync_channel::<RowBatch>(PIPELINE_DEPTH);
    let (to_preparer, reused) = std::sync::mpsc::channel::<RowBatch>();
    let (written, appended) = std::thread::scope(|s| {
        let preparer =
            s.spawn(move || prepare_rows(prep, loaded, planned, import_ids, to_writer, reused));
        let mut written: Result<(), StoreError> = Ok(());
        let mut done = 0u64;
        for mut chunk in prepared.iter() {
            done += chunk.len() as u64;
            written = app.write_prepared(tx, &mut chunk);
            if written.is_err() {
                break;
            }
            if let Some(p) = progress {
                p.entries_written.store(done, Ordering::Relaxed);
            }
            let _ = to_preparer.send(chunk);
        }
        drop(prepared);
        let appended = preparer.join().expect("row preparer panicked");
        (written, appended)
    });
    written.map(|()| appended)
}

/// The preparer thread: lays out the rows of the merged entries in chunks.
fn prepare_rows(
    mut prep: RowPreparer,
    loaded: &[Loaded],
    planned: &Planned,
    import_ids: &[i64],
    to_writer: SyncSender<RowBatch>,
    reused: Receiver<RowBatch>,
) -> Appended {
    let merged = &planned.merge.merged;
    let mut t = String::with_capacity(64);
    let mut job_buf = uuid::Uuid::encode_buffer();
    let mut digest_buf = [0u8; 64];
    let mut max_hlc: Option<(u64, u32, u32, usize)> = None;
    let mut jobs: Vec<JobRow> = Vec::with_capacity(merged.len());
    let mut chunk = RowBatch::default();
    for at in merged.iter() {
        let l = planned.input(loaded, *at);
        let pos = at.pos as usize;
        let e = &l.entries[pos];
        let x = &l.rows[pos];
        t.clear();
        let node = &l.nodes[e.node as usize];
        write!(t, "{}", hlc_text(e.physical, e.logical, node)).expect("write to String");
        let job = uuid::Uuid::from_bytes(e.job_id)
            .hyphenated()
            .encode_lower(&mut job_buf);
        hex::encode_to_slice(e.payload_hash, &mut digest_buf).expect("64 bytes");
        let digest = std::str::from_utf8(&digest_buf).expect("hex is ASCII");
        let row = NewRow {
            t_hlc: &t,
            job_id: job,
            action: Action::Enqueue,
            payload: l.payload(pos),
            payload_digest_hex: digest,
            provenance: Some(RowProvenance {
                import_id: import_ids[at.input as usize],
                source_node: &l.report.log_nodes[e.log as usize],
                orig_link: &x.link,
                orig_prev_link: x.prev.as_ref(),
                partition_key: l.partition_key(pos),
                enqueued_at: l.enqueued_at(pos),
            }),
        };
        let seq = prep.push(&mut chunk, row);
        jobs.push((e.job_id, e.payload_hash, seq));
        if max_hlc.is_none_or(|m| (e.physical, e.logical) > (m.0, m.1)) {
            max_hlc = Some((
                e.physical,
                e.logical,
                e.node,
                planned.part[at.input as usize],
            ));
        }
        if chunk.len() >= PIPELINE_CHUNK {
            let full = std::mem::replace(&mut chunk, reused.try_recv().unwrap_or_default());
            if to_writer.send(full).is_err() {
                break; // the writer failed; its error is reported
            }
        }
    }
    if !chunk.is_empty() {
        let _ = to_writer.send(chunk);
    }
    drop(to_writer);
    jobs.sort_unstable_by_key(|j| j.0);
    Appended { jobs, max_hlc }
}
