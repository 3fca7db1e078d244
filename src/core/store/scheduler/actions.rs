//! Lifecycle entries (claim, complete, ...) appended one at a time.

use super::append::ChainAppender;
use super::read::chain_head;
use super::snapshots::Snapshot;
use super::SchedulerError;
use crate::core::chain::{payload_hash, Action};
use crate::core::hlc::{Hlc, WallClock};
use crate::core::store::{save_clock_state, Store};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

/// A lifecycle entry appended to a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
/// node's clock (persisted); its payload is the job's payload.
pub fn append_action<W: WallClock>(
    store: &mut Store,
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
    let mut clock = store.clock(node, wall)?;
    let path = store.path().to_path_buf();
    let tx = store.begin_write()?;
    // Inside the write lock: the clock resumes from what the store holds now, and the chain the
    // action builds on is checked.
    if let Some(last) = crate::core::store::load_clock_state(&tx)? {
        clock.resume(last);
    }
    super::check_before_append(&tx, &path, tenant)?;
    let head = chain_head(&tx, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let (state, last_seq): (String, i64) = tx
        .query_row(
            "SELECT state, last_seq FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
            params![tenant, job.as_bytes().as_slice()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?
        .ok_or_else(|| SchedulerError::UnknownJob {
            tenant: tenant.into(),
            job_id: job_text.clone(),
        })?;
    if !allowed.iter().any(|a| a.as_str() == state) {
        return Err(SchedulerError::BadTransition {
            job_id: job_text,
            state,
            action,
            allowed: allowed_text,
        });
    }
    let payload: String = tx.query_row(
        "SELECT payload FROM scheduler_log WHERE tenant_id = ?1 AND seq = ?2",
        params![tenant, last_seq],
        |r| r.get(0),
    )?;
    // The chain's own last HLC is witnessed so the new entry sorts after it.
    if let Ok(h) = Hlc::parse(&head.head_hlc) {
        clock.resume((h.physical, h.logical));
    }
    let t = clock.tick().to_string();
    let mut app = ChainAppender::begin(&tx, tenant, crate::core::hlc::unix_ms_now())?;
    let prev = app.head().map(str::to_string);
    let digest = hex::encode(payload_hash(&payload));
    let (seq, link) = app.append(&tx, &t, &job_text, action, &payload, &digest, None)?;
    let link = link.to_string();
    tx.execute(
        "UPDATE scheduler_jobs SET state = ?3, last_seq = ?4 WHERE tenant_id = ?1 AND job_id = ?2",
        params![
            tenant,
            job.as_bytes().as_slice(),
            action.as_str(),
            seq as i64
        ],
    )?;
    let summary = app.finish(
        &tx,
        batch_size,
        false,
        None,
        Some(head.head_chain_link),
        head.length,
    )?;
    save_clock_state(&tx, node, clock.last())?;
    tx.commit()?;
    crate::core::metrics::record_quietly(
        store.conn(),
        &[
            crate::core::metrics::Event::ChainAppended {
                entries: 1,
                ticks: 1,
            },
            crate::core::metrics::Event::Snapshots {
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
        previous_state: state,
        snapshots: summary.snapshots,
    })
}
