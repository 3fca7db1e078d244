//! serve's notification delivery: `core::notify::deliver::run_until` with `RunMode::Forever` on a
//! thread of its own (its store calls never block the async threads), supervised (a failed run is
//! logged, counted as a failed `notify` job and restarted after a pause), and stopped gracefully:
//! on shutdown a batch already sent is finished and recorded, the rest stays pending for the next
//! run (nothing is lost; a kill in between is the crash case the queue already survives).

use crate::core::metrics::{self, Event};
use crate::core::notify::deliver::{run_until, RunEvent, RunMode, RunnerStore};
use crate::core::notify::settings::Targets;
use crate::core::store::any::{AnyStore, StoreLocation};
use crate::core::store::busy::{self, BusyCutoff};
use crate::text::visible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The job name in `airlock_serve_job_runs_total{job}`.
pub const NOTIFY: &str = "notify";

/// Pause before a failed delivery loop is started again.
const RESTART_PAUSE: Duration = Duration::from_secs(5);

/// Starts the delivery thread; it returns once `stop` turns true. Its store work gives up waiting
/// for another process's lock once `cutoff` has passed (serve stopping).
pub fn start(
    location: StoreLocation,
    targets: Targets,
    poll: Duration,
    stop: watch::Receiver<bool>,
    cutoff: Arc<BusyCutoff>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("airlock-notify".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(job = NOTIFY, "cannot start the delivery runtime: {e}");
                    return;
                }
            };
            rt.block_on(supervise(location, targets, poll, stop, cutoff));
        })
}

async fn supervise(
    location: StoreLocation,
    targets: Targets,
    poll: Duration,
    mut stop: watch::Receiver<bool>,
    cutoff: Arc<BusyCutoff>,
) {
    let mode = RunMode::Forever { poll };
    let mut log = |e: &RunEvent| log_event(e);
    loop {
        if *stop.borrow() {
            return;
        }
        // Opening blocks (a PostgreSQL connection): on the blocking pool, like every store call.
        let (at, c) = (location.clone(), cutoff.clone());
        let opened =
            tokio::task::spawn_blocking(move || busy::with_cutoff(&c, || AnyStore::open(&at)))
                .await;
        let failure = match opened {
            Ok(Ok(store)) => {
                let store = RunnerStore::new(store).under_cutoff(cutoff.clone());
                let result = run_until(&store, &targets, mode, &mut stop, &mut log).await;
                let ok = result.is_ok();
                let counted = store
                    .call(move |s| {
                        metrics::record_quietly(s, &[Event::ServeJob { job: NOTIFY, ok }]);
                        Ok(())
                    })
                    .await;
                if let Err(e) = counted {
                    tracing::warn!(job = NOTIFY, "{e}");
                }
                // Closing a PostgreSQL connection blocks: off this async thread.
                let _ = tokio::task::spawn_blocking(move || drop(store)).await;
                match result {
                    Ok(summary) => {
                        tracing::info!(
                            job = NOTIFY,
                            "delivery stopped: {} attempt(s), {} pending",
                            summary.attempts,
                            summary.pending
                        );
                        return;
                    }
                    Err(e) => e.to_string(),
                }
            }
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::warn!(
            job = NOTIFY,
            "delivery failed: {}; restarting in {} s",
            visible(&failure),
            RESTART_PAUSE.as_secs()
        );
        tokio::select! {
            _ = tokio::time::sleep(RESTART_PAUSE) => {}
            _ = stop.changed() => {}
        }
    }
}

fn log_event(e: &RunEvent) {
    match e {
        RunEvent::Waiting { .. } => {}
        RunEvent::DeadLetterNotPublished { .. } => tracing::warn!(job = NOTIFY, "{e}"),
        // The runner itself warns of a damaged row (with its id and column as fields).
        RunEvent::Damaged(_) => {}
        _ => tracing::info!(job = NOTIFY, "{e}"),
    }
}
