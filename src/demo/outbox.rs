//! The workspace's outbox, as an edge relay leaves it after an outage.

use super::layout::WorkspaceLayout;
use crate::core::outbox::envelope::{intake, IncomingWrite, SourceMeta};
use crate::core::outbox::{replay, Outbox, ReplayOptions};
use crate::relay::standin::StandIn;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A write the demo queues: method, path, JSON body.
type DemoWrite = (&'static str, &'static str, serde_json::Value);

fn queue_writes(outbox: &mut Outbox, writes: &[DemoWrite]) -> Result<()> {
    let mut items = Vec::new();
    for (method, path, body) in writes {
        let body = body.to_string();
        let key = crate::core::outbox::new_idempotency_key();
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let req = IncomingWrite {
            method,
            path_and_query: path,
            headers: &headers,
            body: body.as_bytes(),
            idempotency_key: &key,
            source: SourceMeta {
                queued_because: Some("connect error: upstream unreachable (demo)".into()),
                ..SourceMeta::default()
            },
        };
        items.push(intake(&req).map_err(|r| eyre!("demo write refused: {r:?}"))?);
    }
    outbox.enqueue_batch(&items)?;
    Ok(())
}

/// Writes replayed once against a stand-in upstream on loopback that answers some with 409
/// (conflict) and 400 (failed), then more writes queued while the upstream was down again.
pub fn build_outbox(root: &Path) -> Result<PathBuf> {
    let path = WorkspaceLayout::under(root).outbox;
    let mut outbox = Outbox::open(&path)?;
    let mut first: Vec<DemoWrite> = Vec::new();
    for i in 0..4 {
        first.push((
            "POST",
            "/progress/",
            json!({"session": "night-shift", "step": i, "note": format!("checkpoint {i}"), "access_token": "tok-live-7f3a"}),
        ));
    }
    for i in 0..3 {
        first.push((
            "POST",
            "/messages/",
            json!({"to": "ops-lead", "subject": format!("handover {i}"), "password": "hunter2"}),
        ));
    }
    first.push(("PATCH", "/messages/m-17/read", json!({"read": true})));
    first.push((
        "POST",
        "/token-events/",
        json!({"model": "gpt-x", "tokens": 1200}),
    ));
    first.push((
        "POST",
        "/token-events/",
        json!({"model": "gpt-x", "tokens": 800}),
    ));
    queue_writes(&mut outbox, &first)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let standin = StandIn::start("127.0.0.1:0".parse().expect("loopback address")).await?;
        standin.script(
            "/messages/m-17/read",
            409,
            json!({"error": "message m-17 was already marked read by another agent"}),
        );
        standin.script(
            "/token-events/",
            400,
            json!({"error": "unknown model gpt-x"}),
        );
        let opts = ReplayOptions::new(standin.url());
        let result = replay(&path, &opts, |_| {}).await;
        standin.stop().await;
        result.map(|_| ()).map_err(color_eyre::Report::from)
    })?;
    let mut later: Vec<DemoWrite> = Vec::new();
    for i in 4..8 {
        later.push((
            "POST",
            "/progress/",
            json!({"session": "night-shift", "step": i, "note": format!("checkpoint {i}")}),
        ));
    }
    later.push((
        "POST",
        "/messages/",
        json!({"to": "ops-lead", "subject": "upstream down again", "api_key": "k-123"}),
    ));
    queue_writes(&mut outbox, &later)?;
    Ok(path)
}
