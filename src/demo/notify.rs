//! The demo's export-ready notifications: relay-01 enqueues a few jobs, exports its logs as a
//! signed portable export (the engine records the export and its emission), and the engine's
//! delivery runner delivers it to three webhooks:
//!
//! * a receiver on this machine that checks the signature and takes it (delivered);
//! * a receiver that answers 503 to every attempt: the runner's six attempts at the pinned retry
//!   schedule (1, 2, 4, 8, 16 s apart) make it a dead letter. Those attempts run on a clock that
//!   starts at the export and moves on only while the runner waits for a retry ([`RetryClock`]),
//!   so the demo does not take 31 s (the last attempts are stamped up to 31 s after the demo was
//!   built); each attempt is a real request to the real receiver;
//! * an upstream that is down (a real refused connection: pending, with its retry scheduled).
//!
//! The Notifications screen shows all three; `r` on the dead letter retries it.

use super::bundles::{enqueue, jobs};
use super::night::OfflineNight;
use super::TENANT;
use crate::core::notify::deliver::{self, DeliveryClock, RunMode, RunnerStore};
use crate::core::notify::export::{export_portable, PortableRequest};
use crate::core::notify::settings::{Targets, WebhookTarget};
use crate::core::notify::signature::signature_matches;
use crate::core::store::any::AnyStore;
use crate::core::store::Store;
use crate::core::trust::SigningKey;
use axum::http::{HeaderMap, StatusCode};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The shared secret of the demo's webhooks.
const SECRET: &[u8] = b"demo-webhook-secret";

/// Exports relay-01's logs from the store at `db` into `root/exports` and delivers the emission
/// once; returns the export directory.
pub fn export_and_notify(
    root: &Path,
    db: &Path,
    night: &OfflineNight,
    key: &SigningKey,
) -> Result<PathBuf> {
    let mut store = Store::open(db)?;
    enqueue(
        &mut store,
        night,
        "relay-01",
        &jobs("relay-01", 6, "-r")[..],
    )?;
    let out_dir = root.join("exports");
    std::fs::create_dir_all(&out_dir)?;
    export_portable(
        &store,
        &PortableRequest {
            tenant: TENANT,
            node: None,
            created_by: "relay-01",
            sign_with: Some(key),
            out_dir: &out_dir,
            expires_at: None,
            now_ms: crate::core::hlc::unix_ms_now(),
        },
    )
    .map_err(|e| eyre!("the demo's portable export: {e}"))?;
    drop(store);
    let db = db.to_path_buf();
    // Its own thread and runtime: `airlock demo` may already be inside one.
    std::thread::spawn(move || deliver_once(&db))
        .join()
        .map_err(|_| eyre!("the demo's delivery thread panicked"))??;
    Ok(out_dir)
}

/// A clock that starts at `now_ms` and moves on only when the runner waits: a retry due in 16 s
/// is tried at once, stamped 16 s later.
struct RetryClock {
    now_ms: AtomicU64,
}

impl DeliveryClock for RetryClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    fn sleep(&self, d: Duration) -> futures_util::future::BoxFuture<'static, ()> {
        self.now_ms
            .fetch_add(d.as_millis() as u64, Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    }
}

/// Delivers the emission: to the local receiver (takes it) and the failing one (dead letter) on
/// [`RetryClock`], and once to a closed port (refused, pending).
fn deliver_once(db: &Path) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let taken = format!("http://{}/hooks/export-ready", receiver.local_addr()?);
        let down = {
            // A port nothing listens on: bound, noted, released.
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            format!("http://{}/hooks/export-ready", l.local_addr()?)
        };
        let failing = format!("http://{}/hooks/broken", receiver.local_addr()?);
        let app = axum::Router::new()
            .route(
                "/hooks/export-ready",
                axum::routing::post(|headers: HeaderMap, body: String| async move {
                    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
                    match (header("X-Stella-Sent-At"), header("X-Stella-Signature")) {
                        (Some(at), Some(sig)) if signature_matches(SECRET, at, &body, sig) => {
                            StatusCode::NO_CONTENT
                        }
                        _ => StatusCode::UNAUTHORIZED,
                    }
                }),
            )
            .route(
                "/hooks/broken",
                axum::routing::post(|| async { StatusCode::SERVICE_UNAVAILABLE }),
            );
        let server = tokio::spawn(async move { axum::serve(receiver, app).await });
        let targets = |urls: Vec<String>| Targets {
            webhooks: urls
                .into_iter()
                .map(|url| WebhookTarget {
                    url,
                    secret: SECRET.to_vec(),
                    tls: None,
                })
                .collect(),
            nats: None,
            max_in_flight: crate::core::notify::settings::DEFAULT_MAX_IN_FLIGHT,
        };
        let store = RunnerStore::new(AnyStore::open_db(db)?);
        let retries = Arc::new(RetryClock {
            now_ms: AtomicU64::new(crate::core::hlc::unix_ms_now()),
        });
        let answered = targets(vec![taken.clone(), failing.clone()]);
        deliver::run_on(&store, &answered, RunMode::UntilIdle, retries, &mut |_| {})
            .await
            .wrap_err("the demo's notification delivery")?;
        // Whatever each attempt met is recorded as it was (were the released port taken again
        // meanwhile, that attempt would show what answered there instead).
        let all = targets(vec![taken, failing, down]);
        deliver::run(&store, &all, RunMode::Once, &mut |_| {})
            .await
            .wrap_err("the demo's notification delivery")?;
        server.abort();
        Ok(())
    })
}
