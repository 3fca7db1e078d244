//! The notification metrics (issue: emissions, deliveries by target and outcome, dead letters,
//! queue depth): computed from the store's queue tables at exposition time, so they count what every
//! process did (CLI runs and the service) and survive restarts. The per-attempt latency histogram is
//! recorded by the runner ([`super::deliver`]) into the persisted metrics.

use super::store::counts;
use crate::core::metrics::{
    label_text, NOTIFY_ATTEMPTS, NOTIFY_DEAD_LETTERS, NOTIFY_DELIVERIES, NOTIFY_EMISSIONS,
};
use crate::core::store::backend::Backend;
use crate::core::store::StoreError;

/// Every delivery status, so the queue gauges exist (as 0) before anything was queued.
const STATUSES: [&str; 3] = ["pending", "delivered", "dead"];
const TARGETS: [&str; 2] = ["webhook", "nats"];

/// `(metric, label text, value)` samples for [`crate::core::metrics::exposition::Gauges::computed`].
pub fn metric_samples(store: &dyn Backend) -> Result<Vec<(&'static str, String, f64)>, StoreError> {
    let c = counts(store)?;
    let mut out = vec![(NOTIFY_EMISSIONS, String::new(), c.emissions as f64)];
    for (kind, outcome, n) in &c.attempts {
        let labels = label_text(&[("target", kind), ("outcome", outcome)]);
        out.push((NOTIFY_ATTEMPTS, labels, *n as f64));
    }
    for target in TARGETS {
        for status in STATUSES {
            let n = c
                .deliveries
                .iter()
                .find(|(k, s, _)| k == target && s == status)
                .map_or(0, |d| d.2);
            let labels = label_text(&[("target", target), ("status", status)]);
            out.push((NOTIFY_DELIVERIES, labels, n as f64));
        }
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
        assert_eq!(s.iter().filter(|x| x.0 == NOTIFY_DELIVERIES).count(), 6);
    }
}
