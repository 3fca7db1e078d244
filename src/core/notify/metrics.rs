//! The notification metrics (issue: emissions, deliveries by target and outcome, dead letters,
//! queue depth): computed from the store's queue tables at exposition time, so they count what every
//! process did (CLI runs and the service) and survive restarts. The per-attempt latency histogram is
//! recorded by the runner ([`super::deliver`]) into the persisted metrics.
//!
//! A delivery row that cannot be decoded (a damaged store, a row altered by hand) is counted under
//! `status="damaged"` instead of its stored status: the runner skips it ([`super::deliver`]), so it
//! is not queue depth, and an alert on `status="damaged"` tells the operator to repair it.

use super::store::{counts, damaged_deliveries};
use crate::core::metrics::{
    label_text, NOTIFY_ATTEMPTS, NOTIFY_DEAD_LETTERS, NOTIFY_DELIVERIES, NOTIFY_EMISSIONS,
};
use crate::core::store::backend::Backend;
use crate::core::store::StoreError;

/// Every delivery status, so the queue gauges exist (as 0) before anything was queued; `damaged`
/// counts the rows that cannot be decoded (not under their stored status).
const STATUSES: [&str; 4] = ["pending", "delivered", "dead", DAMAGED];
const TARGETS: [&str; 2] = ["webhook", "nats"];
/// The status label of the delivery rows that cannot be decoded.
pub const DAMAGED: &str = "damaged";
/// The target label of a damaged row whose `target_kind` is not `webhook` or `nats`.
const UNKNOWN_TARGET: &str = "unknown";

/// `(metric, label text, value)` samples for [`crate::core::metrics::exposition::Gauges::computed`].
pub fn metric_samples(store: &dyn Backend) -> Result<Vec<(&'static str, String, f64)>, StoreError> {
    let c = counts(store)?;
    let mut out = vec![(NOTIFY_EMISSIONS, String::new(), c.emissions as f64)];
    for (kind, outcome, n) in &c.attempts {
        let labels = label_text(&[("target", kind), ("outcome", outcome)]);
        out.push((NOTIFY_ATTEMPTS, labels, *n as f64));
    }
    let mut by_status: std::collections::HashMap<(String, String), u64> = c
        .deliveries
        .iter()
        .map(|(k, s, n)| ((k.clone(), s.clone()), *n))
        .collect();
    // A damaged row moves from its stored status (when that reads) to `damaged`.
    for d in damaged_deliveries(store)? {
        let kind = d
            .target_kind
            .as_deref()
            .filter(|k| TARGETS.contains(k))
            .unwrap_or(UNKNOWN_TARGET);
        if let Some(status) = &d.status {
            if let Some(n) = by_status.get_mut(&(kind.to_string(), status.clone())) {
                *n = n.saturating_sub(1);
            }
        }
        *by_status
            .entry((kind.to_string(), DAMAGED.to_string()))
            .or_default() += 1;
    }
    let count = |target: &str, status: &str| {
        by_status
            .get(&(target.to_string(), status.to_string()))
            .copied()
            .unwrap_or(0)
    };
    for target in TARGETS {
        for status in STATUSES {
            let labels = label_text(&[("target", target), ("status", status)]);
            out.push((NOTIFY_DELIVERIES, labels, count(target, status) as f64));
        }
    }
    let unknown = count(UNKNOWN_TARGET, DAMAGED);
    if unknown > 0 {
        let labels = label_text(&[("target", UNKNOWN_TARGET), ("status", DAMAGED)]);
        out.push((NOTIFY_DELIVERIES, labels, unknown as f64));
    }
    out.push((NOTIFY_DEAD_LETTERS, String::new(), c.dead_letters as f64));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::Store;

    #[test]
    fn an_empty_queue_has_zero_samples_for_every_target_and_status() {
        let store = Store::open_in_memory().unwrap();
        let s = metric_samples(&store).unwrap();
        assert_eq!(s[0], (NOTIFY_EMISSIONS, String::new(), 0.0));
        let depth = s
            .iter()
            .find(|x| x.0 == NOTIFY_DELIVERIES && x.1 == "target=\"nats\",status=\"pending\"")
            .unwrap();
        assert_eq!(depth.2, 0.0);
        assert_eq!(s.iter().filter(|x| x.0 == NOTIFY_DELIVERIES).count(), 8);
    }
}
