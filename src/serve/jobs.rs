//! serve's background jobs: chain verification at start-up and every `serve.verifyInterval`
//! (each snapshot's signature judged under serve's trusted keys and signature policy, as
//! `chain verify` judges it), a batch snapshot every `scheduler.chain.batchInterval` for tenants
//! with new entries (signed when `signSnapshots`), the HLC state persisted every
//! `scheduler.hlc.persistenceInterval`. Each run is counted (`airlock_serve_job_runs_total{job}`,
//! failures in `airlock_serve_job_failures_total`); the work itself is counted by the engine
//! (verifications, snapshots, ticks). A verification gives up at its next page once serve is
//! stopping, the start-up one included.
//!
//! Once serve is stopping, no job waits out the store's busy timeout for a lock another process
//! holds (a long `jobs import`): the job then waiting gives up at once, and the last HLC
//! persistence tries for [`STOP_PERSIST_WAIT`], then says what it did not save and why.

use super::chain::snapshot_trust;
use super::state::ServeState;
use crate::core::hlc::SystemWallClock;
use crate::core::metrics::{self, Event};
use crate::core::service;
use crate::core::store::busy;
use crate::core::store::StoreError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub const VERIFY: &str = "verify";
pub const SNAPSHOT: &str = "snapshot";
pub const HLC_PERSIST: &str = "hlc_persist";

/// How long the last HLC persistence, on the way out, waits for a store another process has
/// locked (instead of the store's 10 s busy timeout).
pub const STOP_PERSIST_WAIT: Duration = Duration::from_millis(1500);

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
    // A last persistence on the way out, so the next start resumes from now; a store locked by
    // another process gets a short try, not the busy timeout.
    if o.hlc_enabled {
        state.busy_cutoff.give_up_after(STOP_PERSIST_WAIT);
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

/// Why a job failed; `store_busy`: another process held the store's lock until serve, stopping,
/// gave up waiting for it.
struct JobFailure {
    message: String,
    store_busy: bool,
}

impl<E: std::fmt::Display> From<E> for JobFailure {
    fn from(e: E) -> Self {
        JobFailure {
            message: e.to_string(),
            store_busy: false,
        }
    }
}

/// Runs one job on the blocking pool, under serve's busy cutoff, and counts it. False when it
/// gave up because serve is stopping (a verification cut short: neither counted nor a failure).
pub async fn run_once(state: &Arc<ServeState>, job: &'static str) -> bool {
    let st = state.clone();
    let outcome = state
        .with_store(move |store| {
            busy::with_cutoff(&st.busy_cutoff, || {
                let r = run_job(&st, store, job);
                // Counting a failure on a store that stayed locked would only wait for it again.
                if !matches!(
                    r,
                    Ok(None)
                        | Err(JobFailure {
                            store_busy: true,
                            ..
                        })
                ) {
                    let ok = r.is_ok();
                    metrics::record_quietly(store, &[Event::ServeJob { job, ok }]);
                }
                Ok(r.map_err(|f| f.message))
            })
        })
        .await;
    let failed = match outcome {
        Ok(Ok(Some(summary))) => {
            tracing::info!(job, "{summary}");
            return true;
        }
        Ok(Ok(None)) => {
            tracing::info!(job, "stopped before it finished: serve is shutting down");
            return false;
        }
        Ok(Err(e)) => e,
        Err(e) => e.message,
    };
    let failed = crate::text::visible(&failed);
    if job == HLC_PERSIST && state.stopping.load(Ordering::Acquire) {
        tracing::warn!(job, "{}", not_persisted(&failed));
    } else {
        tracing::warn!(job, "failed: {failed}");
    }
    true
}

/// The warning of a last HLC persistence that failed (on a busy store: gave up after
/// [`STOP_PERSIST_WAIT`]). Safe to skip: serve keeps no clock of its own between its store
/// writes, and every write that stamps an HLC timestamp persists the clock state in the same
/// transaction, so the store already holds at least every timestamp serve issued.
fn not_persisted(why: &str) -> String {
    format!(
        "the HLC state was not persisted on the way out: {why}. Serve exits anyway; the next \
         start resumes the clock from the last persisted HLC state in the store (the largest of \
         any node) and the wall clock, which is safe: every timestamp serve wrote to the store \
         was persisted with it, and a resumed clock never issues one at or below what the store \
         holds"
    )
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
) -> Result<Option<String>, JobFailure> {
    let o = &state.options;
    match job {
        VERIFY => {
            let Some(r) = service::verify_all(store, &state.stopping, snapshot_trust(o, false))?
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
            let n = service::snapshot_due(store, o.batch_size, signer)?;
            Ok(Some(format!("took {n} batch snapshot(s)")))
        }
        _ => {
            let t = service::persist_clock(store, &o.node_id, SystemWallClock).map_err(|e| {
                JobFailure {
                    store_busy: matches!(
                        e,
                        StoreError::Busy {
                            cut_short: true,
                            ..
                        }
                    ),
                    message: e.to_string(),
                }
            })?;
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
