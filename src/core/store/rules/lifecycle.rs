//! Lifecycle entries (DEQUEUE, EXECUTE, COMPLETE, FAIL) and on-demand snapshots, over any store.

use super::appender::{ChainAppender, NewRow};
use crate::core::chain::{payload_hash, Action};
use crate::core::hlc::{Hlc, WallClock};
use crate::core::metrics::Event;
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::scheduler::{SchedulerError, Snapshot, SnapshotSigner};

/// A lifecycle entry appended to a chain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendedAction {
    pub tenant_id: String,
    pub job_id: String,
    pub action: Action,
    pub seq: u64,
    pub t_hlc: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
    pub previous_state: String,
    pub snapshots: Vec<Snapshot>,
}

/// The lifecycle: ENQUEUE -> DEQUEUE -> EXECUTE -> COMPLETE | FAIL, and FAIL -> DEQUEUE (a retry).
fn allowed_after(action: Action) -> Result<(&'static [Action], &'static str), SchedulerError> {
    match action {
        Action::Dequeue => Ok((&[Action::Enqueue, Action::Fail], "ENQUEUE or FAIL")),
        Action::Execute => Ok((&[Action::Dequeue], "DEQUEUE")),
        Action::Complete | Action::Fail => Ok((&[Action::Execute], "EXECUTE")),
        Action::Enqueue => Err(SchedulerError::NotLifecycle(action)),
    }
}

/// Appends a DEQUEUE / EXECUTE / COMPLETE / FAIL entry for a known job. Its tHlc is a tick of this
/// node's clock (persisted); its payload is the job's payload. Writers of the tenant's chain wait
/// for each other.
pub fn append_action<W: WallClock>(
    store: &dyn Backend,
    tenant: &str,
    job_id: &str,
    action: Action,
    node: &str,
    wall: W,
    batch_size: u64,
) -> Result<AppendedAction, SchedulerError> {
    let (allowed, allowed_text) = allowed_after(action)?;
    let job = uuid::Uuid::parse_str(job_id).map_err(|e| SchedulerError::Invalid {
        what: "job id",
        message: format!("{job_id:?} is not a UUID ({e})"),
    })?;
    let job_text = job.hyphenated().to_string();
    let mut tx = store.begin(TxKind::Write)?;
    let tx_ref = &mut *tx;
    let head = super::lock_for_append(tx_ref, tenant)?;
    let mut clock = super::clock_in(tx_ref, node, wall)?;
    let row = tx_ref
        .job(tenant, job.as_bytes())?
        .ok_or_else(|| SchedulerError::UnknownJob {
            tenant: tenant.into(),
            job_id: job_text.clone(),
        })?;
    if !allowed.iter().any(|a| a.as_str() == row.state) {
        return Err(SchedulerError::BadTransition {
            job_id: job_text,
            state: row.state,
            action,
            allowed: allowed_text,
        });
    }
    let payload =
        tx_ref
            .payload_at(tenant, row.last_seq)?
            .ok_or_else(|| SchedulerError::Damaged {
                tenant: tenant.into(),
                seq: row.last_seq,
                message: "the job's last entry is missing".into(),
            })?;
    // The chain's own last HLC is witnessed so the new entry sorts after it.
    if let Ok(h) = Hlc::parse(&head.head_hlc) {
        clock.resume((h.physical, h.logical));
    }
    let t = clock.tick().to_string();
    let mut app =
        ChainAppender::begin(tx_ref, tenant, Some(&head), crate::core::hlc::unix_ms_now())?;
    let prev = app.head().map(str::to_string);
    let digest = hex::encode(payload_hash(&payload));
    let new_row = NewRow {
        t_hlc: &t,
        job_id: &job_text,
        action,
        payload: &payload,
        payload_digest_hex: &digest,
        provenance: None,
    };
    let (seq, link) = app.append(tx_ref, new_row)?;
    let link = link.to_string();
    tx_ref.set_job_state(tenant, job.as_bytes(), action, seq)?;
    let summary = app.finish(
        tx_ref,
        batch_size,
        false,
        None,
        Some(head.head_chain_link.clone()),
        head.length,
    )?;
    tx_ref.save_clock_state(node, clock.last())?;
    tx.commit()?;
    crate::core::metrics::record_quietly(
        store,
        &[
            Event::ChainAppended {
                entries: 1,
                ticks: 1,
            },
            Event::Snapshots {
                count: summary.snapshots.len() as u64,
            },
        ],
    );
    Ok(AppendedAction {
        tenant_id: tenant.to_string(),
        job_id: job_text,
        action,
        seq,
        t_hlc: t,
        prev_chain_link: prev,
        chain_link: link,
        previous_state: row.state,
        snapshots: summary.snapshots,
    })
}

/// Takes an on-demand snapshot of the tenant's uncovered tail (batches of `batch_size`, the last one
/// partial), optionally signed.
pub fn snapshot_now(
    store: &dyn Backend,
    tenant: &str,
    batch_size: u64,
    signer: Option<SnapshotSigner<'_>>,
) -> Result<Vec<Snapshot>, SchedulerError> {
    let mut tx = store.begin(TxKind::Write)?;
    let tx_ref = &mut *tx;
    let head = super::lock_for_append(tx_ref, tenant)?;
    let app = ChainAppender::begin(tx_ref, tenant, Some(&head), crate::core::hlc::unix_ms_now())?;
    if app.uncovered() == 0 {
        return Err(SchedulerError::NothingToSnapshot(tenant.into()));
    }
    let summary = app.finish(
        tx_ref,
        batch_size,
        true,
        signer,
        Some(head.head_chain_link.clone()),
        head.length,
    )?;
    tx.commit()?;
    crate::core::metrics::record_quietly(
        store,
        &[Event::Snapshots {
            count: summary.snapshots.len() as u64,
        }],
    );
    Ok(summary.snapshots)
}
