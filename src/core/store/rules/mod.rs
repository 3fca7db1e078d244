//! The engine's store rules, written once over the storage interface
//! ([`super::backend::StoreTx`]): appending to a tenant chain (links, head, batch snapshots),
//! lifecycle actions, on-demand snapshots, verification, inclusion proofs, reading chains, and the
//! node job logs (enqueue, export). SQLite and PostgreSQL only supply rows.

mod appender;
mod integrity;
mod lifecycle;
mod nodelog;
mod proofs;
mod read;

pub use appender::*;
pub use integrity::*;
pub use lifecycle::*;
pub use nodelog::*;
pub use proofs::*;
pub use read::*;

use crate::core::chain::Digest32;
use crate::core::hlc::WallClock;
use crate::core::store::backend::{Backend, ChainPage, ChainRow, StoreTx};
use crate::core::store::scheduler::{ChainHead, SchedulerError};
use crate::core::store::StoreError;

/// Parses a stored chain link: exactly 64 lowercase hex digits.
pub fn unhex_link(s: &str) -> Option<Digest32> {
    crate::core::store::scheduler::unhex32(s)
}

/// Calls `f` with each row of the tenant's chain from `from` up to (not including) `end`, reading
/// a page at a time.
fn each_chain_row(
    tx: &mut dyn StoreTx,
    tenant: &str,
    from: u64,
    end: u64,
    mut f: impl FnMut(ChainRow<'_>) -> Result<(), SchedulerError>,
) -> Result<(), SchedulerError> {
    let mut page = ChainPage::default();
    let mut from = from;
    while from < end {
        tx.chain_page(tenant, from, end, &mut page)?;
        let Some(last) = page.last_seq() else { break };
        for k in 0..page.len() {
            f(page.get(k))?;
        }
        from = last + 1;
    }
    Ok(())
}

/// Locks the tenant's chain for an append (writers of one chain wait for each other) and checks
/// that the store takes appends: the chain's head.
fn lock_for_append(tx: &mut dyn StoreTx, tenant: &str) -> Result<ChainHead, SchedulerError> {
    let head = tx
        .lock_chain(tenant)?
        .ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    tx.check_before_append(tenant)?;
    Ok(head)
}

/// A clock for `node` resuming from the persisted state of every clock in the store, so it never
/// issues a timestamp at or below one issued or witnessed before.
pub fn clock_in<W: WallClock>(
    tx: &mut dyn StoreTx,
    node: &str,
    wall: W,
) -> Result<crate::core::hlc::HlcClock<W>, StoreError> {
    let mut clock = crate::core::hlc::HlcClock::with_wall(node, wall)?;
    if let Some(last) = tx.load_clock_state()? {
        clock.resume(last);
    }
    Ok(clock)
}

/// [`clock_in`] in a read transaction of its own.
pub fn clock<W: WallClock>(
    store: &dyn Backend,
    node: &str,
    wall: W,
) -> Result<crate::core::hlc::HlcClock<W>, StoreError> {
    let mut tx = store.begin(crate::core::store::backend::TxKind::Read)?;
    clock_in(&mut *tx, node, wall)
}
