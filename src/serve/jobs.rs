//! serve's background jobs: chain verification at start-up and every `serve.verifyInterval`, a batch
//! snapshot every `scheduler.chain.batchInterval` for tenants with new entries (signed when
//! `signSnapshots`), the HLC state persisted every `scheduler.hlc.persistenceInterval`. Each run is
//! counted (`airlock_serve_job_runs_total{job}`, failures in `airlock_serve_job_failures_total`);
//! the work itself is counted by the engine (verifications, snapshots, ticks). A verification gives
//! up at its next page once serve is stopping, the start-up one included.

use super::state::ServeState;
use crate::core::hlc::SystemWallClock;
use crate::core::metrics::{self, Event};
use crate::core::service;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub const VERIFY: &str = "verify";
pub const SNAPSHOT: &str = "snapshot";
pub const HLC_PERSIST: &str = "hlc_persist";

/// Runs the start-up verification, marks serve ready, then the periodic jobs until `stop` is set.
/// A stop during the start-up verification ends it at its next page (`ServeState::stop`): serve
/// never becomes ready then, and the periodic jobs never start.
pub async fn run_all(state: Arc<ServeState>, mut stop: watch::Receiver<bool>) {
    let o = &state.options;
    if run_once(&state, VERIFY).await {
        state.ready.store(true, Ordering::Release);
        let mut verify = ticker(o.chain_enabled, o.verify_interval);
        let mut snapshot = ticker(o.chain_enabled, o.batch_interval);
        let mut persist = ticker(o.hlc_enabled, o.persistence_interval);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = verify.tick() => { run_once(&state, VERIFY).await; }
                _ = snapshot.tick() => { run_once(&state, SNAPSHOT).await; }
                _ = persist.tick() => { run_once(&state, HLC_PERSIST).await; }
            }
        }
    }
    // A last persistence on the way out, so the next start resumes from now.
    if o.hlc_enabled {
        run_once(&state, HLC_PERSIST).await;
    }
}

/// An interval whose first tick is one period from now; a disabled job never ticks.
fn ticker(enabled: bool, period: Duration) -> tokio::time::Interval {
    let period = if enabled {
        period.max(Duration::from_secs(1))
    } else {
        Duration::from_secs(u32::MAX as u64)
    };
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// Runs one job on the blocking pool and counts it. False when it gave up because serve is
/// stopping (a verification cut short: neither counted nor a failure).
pub async fn run_once(state: &Arc<ServeState>, job: &'static str) -> bool {
    let st = state.clone();
    let outcome = state
        .with_store(move |store| {
            let r = run_job(&st, store, job);
            if !matches!(r, Ok(None)) {
                let ok = r.is_ok();
                metrics::record_quietly(store, &[Event::ServeJob { job, ok }]);
            }
            Ok(r)
        })
        .await;
    match outcome {
        Ok(Ok(Some(summary))) => tracing::info!(job, "{summary}"),
        Ok(Ok(None)) => {
            tracing::info!(job, "stopped before it finished: serve is shutting down");
            return false;
        }
        Ok(Err(e)) => tracing::warn!(job, "failed: {}", crate::text::visible(&e)),
        Err(e) => tracing::warn!(job, "failed: {}", crate::text::visible(&e.message)),
    }
    true
}

/// The verification job's log line. Tenant ids come from the store, which another process (or
/// a tampered file) may have written: every control or bidi/invisible character is escaped.
fn verify_summary(r: &service::ChainsChecked) -> String {
    let failing: Vec<String> = r
        .failing
        .iter()
        .map(|t| crate::text::visible(t).into_owned())
        .collect();
    format!(
        "verified {} chain(s), {} failing{}",
        r.tenants,
        failing.len(),
        if failing.is_empty() {
            String::new()
        } else {
            format!(": {}", failing.join(", "))
        }
    )
}

fn run_job(
    state: &ServeState,
    store: &crate::core::store::any::AnyStore,
    job: &str,
) -> Result<Option<String>, String> {
    let o = &state.options;
    match job {
        VERIFY => {
            let Some(r) = service::verify_all(store, &state.stopping).map_err(|e| e.to_string())?
            else {
                return Ok(None);
            };
            let summary = verify_summary(&r);
            *state.failing.lock().unwrap_or_else(|e| e.into_inner()) = r.failing;
            Ok(Some(summary))
        }
        SNAPSHOT => {
            let sign =
                |payload_type: &str, statement: &[u8]| state.sign_snapshot(payload_type, statement);
            let signer: Option<crate::core::store::scheduler::SnapshotSigner<'_>> =
                o.snapshot_key.as_ref().map(|_| &sign as _);
            let n =
                service::snapshot_due(store, o.batch_size, signer).map_err(|e| e.to_string())?;
            Ok(Some(format!("took {n} batch snapshot(s)")))
        }
        _ => {
            let t = service::persist_clock(store, &o.node_id, SystemWallClock)
                .map_err(|e| e.to_string())?;
            Ok(Some(format!("persisted the HLC state at {t}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_tenants_are_logged_escaped() {
        let r = service::ChainsChecked {
            tenants: 3,
            failing: vec!["t1\u{202e}LIVE\u{1b}[31m".into(), "t2".into()],
        };
        let line = verify_summary(&r);
        assert_eq!(
            line,
            "verified 3 chain(s), 2 failing: t1\\u{202e}LIVE\\x1b[31m, t2"
        );
        assert!(!line.chars().any(crate::text::needs_escape));
        let ok = service::ChainsChecked {
            tenants: 1,
            failing: vec![],
        };
        assert_eq!(verify_summary(&ok), "verified 1 chain(s), 0 failing");
    }
}
