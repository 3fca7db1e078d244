//! Reading tenant chains for displays: heads, the tenants summary, entries, snapshots.

use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::scheduler::{
    split_snapshot_rows, ChainHead, SchedulerError, Snapshot, StoredEntry, TenantSummary,
};
use crate::core::store::StoreError;

/// A tenant's stored head.
pub fn chain_head(store: &dyn Backend, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
    store.begin(TxKind::Read)?.chain_head(tenant)
}

/// Every tenant with a scheduler chain, by tenant id. A damaged snapshot row does not hide its
/// tenant: its id is listed in `damaged_snapshots` (the last snapshot is the last that reads).
pub fn tenants(store: &dyn Backend) -> Result<Vec<TenantSummary>, StoreError> {
    let mut tx = store.begin(TxKind::Read)?;
    let heads = tx.chain_heads()?;
    let mut out = Vec::with_capacity(heads.len());
    for h in heads {
        let (mut snaps, damaged) = split_snapshot_rows(tx.snapshot_rows(&h.tenant_id)?);
        let last = snaps.pop();
        let covered = last
            .as_ref()
            .map(|s| s.from_seq.saturating_add(s.entry_count))
            .unwrap_or(0);
        out.push(TenantSummary {
            unsnapshotted: h.length.saturating_sub(covered),
            tenant: h.tenant_id,
            head: h.head_chain_link,
            head_hlc: h.head_hlc,
            length: h.length,
            last_snapshot: last,
            damaged_snapshots: damaged.iter().map(|d| d.id).collect(),
        });
    }
    Ok(out)
}

/// Entries `from..from+limit` of a tenant chain, in chain order, with provenance.
pub fn chain_entries(
    store: &dyn Backend,
    tenant: &str,
    from: u64,
    limit: u64,
) -> Result<Vec<StoredEntry>, StoreError> {
    store.begin(TxKind::Read)?.entries(tenant, from, limit)
}

/// What `chain show` shows: the tenant's head and entries `from..from+limit`. A tenant with
/// neither a head nor an entry (a mistyped id) is [`SchedulerError::NoChain`], as for `chain
/// verify`, `prove` and `append`.
pub fn show_chain(
    store: &dyn Backend,
    tenant: &str,
    from: u64,
    limit: u64,
) -> Result<(Option<ChainHead>, Vec<StoredEntry>), SchedulerError> {
    let mut tx = store.begin(TxKind::Read)?;
    let head = tx.chain_head(tenant)?;
    let entries = tx.entries(tenant, from, limit)?;
    if head.is_none() && entries.is_empty() && tx.entries(tenant, 0, 1)?.is_empty() {
        return Err(SchedulerError::NoChain(tenant.to_string()));
    }
    Ok((head, entries))
}

/// The tenant's snapshots in chain order.
pub fn snapshots(store: &dyn Backend, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
    store.begin(TxKind::Read)?.snapshots(tenant)
}

/// The tenant's `batch_snapshot` rows in chain order, each a snapshot or what is damaged in it
/// (one damaged row does not hide the others).
pub fn snapshot_rows(
    store: &dyn Backend,
    tenant: &str,
) -> Result<Vec<crate::core::store::scheduler::SnapshotRow>, StoreError> {
    store.begin(TxKind::Read)?.snapshot_rows(tenant)
}

/// The chain position where `job_id` was enqueued in the tenant's chain (`None` when the chain
/// does not hold it, or the text is not a job id).
pub fn seq_of_job(
    store: &dyn Backend,
    tenant: &str,
    job_id: &str,
) -> Result<Option<u64>, StoreError> {
    let Ok(id) = uuid::Uuid::try_parse(job_id) else {
        return Ok(None);
    };
    Ok(store
        .begin(TxKind::Read)?
        .job(tenant, id.as_bytes())?
        .map(|j| j.enqueue_seq))
}
