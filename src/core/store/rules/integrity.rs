//! What must hold before anything is appended to a tenant chain ([`check_tail`]): the stored head
//! entry recomputes from its fields and is the head, nothing lies past the head, and the last batch
//! snapshot's Merkle root recomputes from the links it covers. Appending onto a damaged tail would
//! bury the damage under valid-looking entries. The store's own storage check (SQLite's
//! `quick_check`) is [`crate::core::store::backend::StoreTx::check_before_append`].

use crate::core::chain::{payload_hash, scheduler_chain_link, Action};
use crate::core::merkle;
use crate::core::store::backend::{ChainPage, StoreTx};
use crate::core::store::quoted;
use crate::core::store::scheduler::{ChainHead, SchedulerError, Snapshot};

/// Refuses (with what to do) when `tenant`'s chain is damaged where an append builds on: its head
/// entry (`head`, read under the chain lock) and its last snapshot (`last`).
pub fn check_tail(
    tx: &mut dyn StoreTx,
    tenant: &str,
    head: Option<&ChainHead>,
    last: Option<&Snapshot>,
) -> Result<(), SchedulerError> {
    let damaged = |detail: String| SchedulerError::TailDamaged {
        tenant: tenant.to_string(),
        detail,
    };
    let Some(head) = head.filter(|h| h.length > 0) else {
        return Ok(());
    };
    let mut page = ChainPage::default();
    let at = head.length - 1;
    tx.chain_page(tenant, at, head.length, &mut page)?;
    if page.is_empty() {
        return Err(damaged(format!(
            "the head of tenant {tenant:?} says {} entries, but entry #{at} is missing",
            head.length
        )));
    }
    let row = page.get(0);
    if row.chain_link != head.head_chain_link {
        return Err(damaged(format!(
            "the head of tenant {tenant:?} is {} but entry #{at} has link {}",
            quoted(&head.head_chain_link),
            quoted(row.chain_link)
        )));
    }
    let action: Action = row
        .action
        .parse()
        .map_err(|e: String| damaged(format!("entry #{at} of tenant {tenant:?}: {e}")))?;
    let recomputed = scheduler_chain_link(
        row.t_hlc,
        row.job_id,
        action,
        row.prev_chain_link,
        &hex::encode(payload_hash(row.payload)),
    );
    if recomputed != row.chain_link || !row.payload_agrees {
        return Err(damaged(format!(
            "entry #{at} of tenant {tenant:?} (the head) no longer recomputes from its fields"
        )));
    }
    tx.chain_page(
        tenant,
        head.length,
        head.length.saturating_add(1),
        &mut page,
    )?;
    if !page.is_empty() {
        return Err(damaged(format!(
            "tenant {tenant:?} has entries after its head (#{})",
            head.length
        )));
    }
    match last {
        Some(snap) => check_last_snapshot(tx, tenant, snap, &damaged),
        None => Ok(()),
    }
}

fn check_last_snapshot(
    tx: &mut dyn StoreTx,
    tenant: &str,
    snap: &Snapshot,
    damaged: &dyn Fn(String) -> SchedulerError,
) -> Result<(), SchedulerError> {
    let end = snap
        .from_seq
        .checked_add(snap.entry_count)
        .filter(|e| *e <= i64::MAX as u64)
        .ok_or_else(|| {
            damaged(format!(
                "the last snapshot of tenant {tenant:?} has from_seq {} + entry_count {} out of range",
                snap.from_seq, snap.entry_count
            ))
        })?;
    let mut links = Vec::new();
    super::each_chain_row(tx, tenant, snap.from_seq, end, |r| {
        links.push(
            super::unhex_link(r.chain_link).ok_or_else(|| SchedulerError::Damaged {
                tenant: tenant.to_string(),
                seq: r.seq,
                message: format!(
                    "chain_link {} is not 64 lowercase hex digits",
                    quoted(r.chain_link)
                ),
            })?,
        );
        Ok(())
    })?;
    let root = hex::encode(merkle::root(&merkle::leaf_hashes_of_links(&links)));
    if links.len() as u64 != snap.entry_count || root != snap.merkle_root {
        return Err(damaged(format!(
            "the last batch snapshot of tenant {tenant:?} (entries {}..{end}) no longer matches the chain: its Merkle root does not recompute",
            snap.from_seq
        )));
    }
    Ok(())
}
