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
use crate::core::store::backend::{Backend, StoreTx};
use crate::core::store::StoreError;

/// Parses a stored chain link: exactly 64 lowercase hex digits.
pub fn unhex_link(s: &str) -> Option<Digest32> {
    crate::core::store::scheduler::unhex32(s)
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
