//! No secret value ever reaches the outbox files (the database, its -wal and -shm).

mod support;

use airlock::core::outbox::scrub::SECRET_KEYS;
use airlock::core::outbox::Outbox;
use serde_json::json;
use support::{all_bytes, client, dead_upstream, TestRelay};

/// All file bytes as text (secrets are ASCII, so a lossy conversion keeps them findable).
fn text_of(files: Vec<(std::path::PathBuf, Vec<u8>)>) -> String {
    let bytes: Vec<u8> = files.into_iter().flat_map(|(_, b)| b).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn variants(k: &str) -> Vec<String> {
    let dashed = k.replace('_', "-");
    let mut title = String::new();
    let mut up = true;
    for c in dashed.chars() {
        title.push(if up { c.to_ascii_uppercase() } else { c });
        up = c == '-';
    }
    vec![k.to_string(), k.to_uppercase(), dashed, title]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_never_reach_the_outbox_files() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let mut secrets = Vec::new();
    let mut sent = 0;
    for (i, k) in SECRET_KEYS.iter().enumerate() {
        for (j, name) in variants(k).into_iter().enumerate() {
            let top = format!("SECRET-top-{i}-{j}-zq");
            let nested = format!("SECRET-nested-{i}-{j}-zq");
            let in_array = format!("SECRET-array-{i}-{j}-zq");
            let deep_obj = format!("SECRET-deepobj-{i}-{j}-zq");
            let query = format!("SECRET-query-{i}-{j}-zq");
            let body = json!({
                name.clone(): top,
                "visible": format!("VISIBLE-{i}-{j}-zq"),
                "meta": { "inner": { name.clone(): nested } },
                "items": [ 1, { name.clone(): in_array }, [ { name.clone(): { "x": deep_obj } } ] ],
            });
            let r = c
                .patch(format!("{}/tasks/t-{i}-{j}?{name}={query}", relay.url))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202, "{name}");
            sent += 1;
            secrets.extend([top, nested, in_array, deep_obj, query]);
        }
    }
    // Read the raw files while the relay still runs (the rows are in the -wal) ...
    let files = all_bytes(dir.path());
    assert!(files
        .iter()
        .any(|(p, b)| p.to_string_lossy().ends_with("o.sqlite3-wal") && !b.is_empty()));
    let everything = text_of(files);
    // The search works: non-secret values are there.
    assert!(everything.contains("VISIBLE-0-0-zq"));
    for s in &secrets {
        assert!(
            !everything.contains(s.as_str()),
            "{s} found in the outbox files"
        );
    }
    let path = relay.outbox.clone();
    relay.stop().await;
    // ... and after a clean stop (checkpointed into the main file).
    let everything = text_of(all_bytes(dir.path()));
    assert!(everything.contains("VISIBLE-0-0-zq"));
    for s in &secrets {
        assert!(!everything.contains(s.as_str()), "{s} found after stop");
    }
    let ob = Outbox::open_existing(&path).unwrap();
    let list = ob.list(None, None).unwrap();
    assert_eq!(list.len(), sent);
    let body: serde_json::Value =
        serde_json::from_str(list[0].request.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["authorization"], "[redacted]");
    assert_eq!(body["meta"]["inner"]["authorization"], "[redacted]");
    assert_eq!(body["items"][1]["authorization"], "[redacted]");
    assert_eq!(body["items"][2][0]["authorization"], "[redacted]");
}
