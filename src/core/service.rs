//! The periodic work of the long-running service (SPEC section 13, seed hlc-ordering), as engine
//! calls that `airlock serve` schedules: verify every chain, snapshot the tenants with new entries,
//! and persist the HLC state.

use crate::core::chain::verify::{verify_chain_until_trusting, SnapshotTrust};
use crate::core::hlc::{Hlc, WallClock};
use crate::core::metrics::{self, Event};
use crate::core::store::backend::{Backend, TxKind};
use crate::core::store::rules;
use crate::core::store::scheduler::{SchedulerError, SnapshotSigner};
use crate::core::store::StoreError;
use std::sync::atomic::AtomicBool;

/// The outcome of verifying every tenant chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainsChecked {
    pub tenants: usize,
    /// Tenants whose chain has findings or a failing snapshot.
    pub failing: Vec<String>,
}

/// Verifies every tenant chain of the store (each verification counted in the metrics), until
/// `cancel` is set: the flag is looked at between tenants and between pages of a chain, so a
/// service that is stopping is not held up by a long verification. Every snapshot's signature is
/// judged under `policy` as `chain verify` judges it (a `signer-untrusted` snapshot makes its
/// tenant fail). `None` when it stopped before every chain was verified (what was verified is not
/// reported: it says nothing of the others).
pub fn verify_all(
    store: &dyn Backend,
    cancel: &AtomicBool,
    policy: SnapshotTrust<'_>,
) -> Result<Option<ChainsChecked>, SchedulerError> {
    let tenants = rules::tenants(store)?;
    let mut out = ChainsChecked {
        tenants: tenants.len(),
        failing: Vec::new(),
    };
    for t in tenants {
        let Some(r) = verify_chain_until_trusting(store, &t.tenant, None, cancel, policy)? else {
            return Ok(None);
        };
        if !r.ok {
            out.failing.push(t.tenant);
        }
    }
    Ok(Some(out))
}

/// Takes a batch snapshot (batches of `batch_size`, the last partial) of every tenant with entries
/// not yet covered by one; returns how many snapshots were taken.
pub fn snapshot_due(
    store: &dyn Backend,
    batch_size: u64,
    signer: Option<SnapshotSigner<'_>>,
) -> Result<u64, SchedulerError> {
    let due: Vec<String> = rules::tenants(store)?
        .into_iter()
        .filter(|t| t.unsnapshotted > 0)
        .map(|t| t.tenant)
        .collect();
    let mut taken = 0u64;
    for tenant in due {
        match rules::snapshot_now(store, &tenant, batch_size, signer) {
            Ok(s) => taken += s.len() as u64,
            // Another writer snapshotted it in between.
            Err(SchedulerError::NothingToSnapshot(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(taken)
}

/// Ticks this node's clock (resumed from the store) and persists it, so that a restarted clock, or
/// a wall clock that jumped back, never issues a timestamp at or below this one. Returns the tick.
pub fn persist_clock<W: WallClock>(
    store: &dyn Backend,
    node: &str,
    wall: W,
) -> Result<Hlc, StoreError> {
    let mut tx = store.begin(TxKind::Write)?;
    let mut clock = rules::clock_in(&mut *tx, node, wall)?;
    let t = clock.tick();
    tx.save_clock_state(node, clock.last())?;
    tx.commit()?;
    let tick = Event::Count {
        name: metrics::HLC_TICKS,
        delta: 1,
    };
    metrics::record_quietly(store, &[tick]);
    Ok(t)
}

/// The Prometheus text of everything the store counted (SPEC 13), with this moment's gauges: the
/// HLC's lead over the wall clock, the configured skew tolerance, the notification queue's
/// counts, and (from serve, which verifies chains on a schedule) how many chains failed its last
/// verification. What `/metrics` serves and `airlock metrics` prints.
pub fn metrics_text(
    store: &dyn Backend,
    max_clock_skew: Option<std::time::Duration>,
    chains_failing: Option<usize>,
) -> Result<String, StoreError> {
    use crate::core::metrics::exposition::{self, Gauges};
    let now = crate::core::hlc::unix_ms_now();
    let mut computed = crate::core::notify::metrics::metric_samples(store)?;
    if let Some(n) = chains_failing {
        computed.push((metrics::CHAINS_FAILING, String::new(), n as f64));
    }
    let gauges = Gauges {
        physical_offset_seconds: exposition::physical_offset_seconds(store, now)
            .map_err(metrics_error)?,
        max_clock_skew_seconds: max_clock_skew.map(|d| d.as_secs_f64()),
        computed,
    };
    exposition::render(store, gauges).map_err(metrics_error)
}

fn metrics_error(e: metrics::MetricsError) -> StoreError {
    e.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hlc::SystemWallClock;
    use crate::core::store::Store;

    struct Fixed(u64);
    impl WallClock for Fixed {
        fn now_ms(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn the_persisted_clock_never_goes_back() {
        let store = Store::open_in_memory().unwrap();
        let a = persist_clock(&store, "n1", Fixed(5_000)).unwrap();
        assert_eq!((a.physical, a.logical), (5_000, 0));
        // The wall clock jumped back: the next tick still sorts after the persisted one.
        let b = persist_clock(&store, "n1", Fixed(1_000)).unwrap();
        assert_eq!((b.physical, b.logical), (5_000, 1));
        let c = persist_clock(&store, "n1", SystemWallClock).unwrap();
        assert!(c.physical > 5_000);
    }

    #[test]
    fn nothing_to_do_on_an_empty_store() {
        let store = Store::open_in_memory().unwrap();
        let stop = AtomicBool::new(false);
        let trust = crate::core::trust::TrustSet::empty();
        let policy = SnapshotTrust {
            trust: &trust,
            require_signature: true,
        };
        let checked = verify_all(&store, &stop, policy).unwrap();
        assert_eq!(checked, Some(ChainsChecked::default()));
        assert_eq!(snapshot_due(&store, 10, None).unwrap(), 0);
    }
}
