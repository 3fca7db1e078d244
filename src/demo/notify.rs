//! The demo's export-ready notifications: relay-01 enqueues a few jobs, exports its logs as a
//! signed portable export (the engine records the export and its emission), and the engine's
//! delivery runner makes one pass over two webhooks: a receiver on this machine that checks the
//! signature and takes it (delivered), and an upstream that is down (a real refused connection:
//! pending, with its retry scheduled). The Notifications screen shows both.

use super::bundles::{enqueue, jobs};
use super::night::OfflineNight;
use super::TENANT;
use crate::core::notify::deliver::{self, RunMode, RunnerStore};
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

/// One delivery pass to the local receiver (takes it) and to a closed port (refused).
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
        let app = axum::Router::new().route(
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
        );
        let server = tokio::spawn(async move { axum::serve(receiver, app).await });
        let targets = Targets {
            webhooks: [taken, down]
                .into_iter()
                .map(|url| WebhookTarget {
                    url,
                    secret: SECRET.to_vec(),
                    tls: None,
                })
                .collect(),
            nats: None,
        };
        let store = RunnerStore::new(AnyStore::open_db(db)?);
        // Whatever each attempt met is recorded as it was (were the released port taken again
        // meanwhile, that attempt would show what answered there instead).
        deliver::run(&store, &targets, RunMode::Once, &mut |_| {})
            .await
            .wrap_err("the demo's notification delivery")?;
        server.abort();
        Ok(())
    })
}
