//! The relay over real loopback sockets: forwarding while the upstream answers, the route table
//! while it does not.

mod support;

use airlock::core::outbox::{EnvelopeStatus, RouteClass, ROUTES};
use airlock::relay::RelayConfig;
use serde_json::{json, Value};
use std::time::Duration;
use support::{client, dead_upstream, get_json, post_json, standin, TestRelay};

fn concrete(pattern: &str) -> String {
    pattern.replace("{id}", "id-7")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_down_queueable_write_gets_a_receipt_and_one_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let r = c
        .post(format!("{}/progress/", relay.url))
        .header("idempotency-key", "client-key-1")
        .header("user-agent", "agent/1.0")
        .json(&json!({"session": "s1", "note": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert_eq!(r.headers()["idempotency-key"], "client-key-1");
    let receipt: Value = r.json().await.unwrap();
    assert_eq!(receipt["queued"], true);
    assert_eq!(receipt["status"], "queued");
    assert_eq!(receipt["routeClass"], "append-only");
    assert_eq!(receipt["idempotencyKey"], "client-key-1");
    let id = receipt["envelopeId"].as_str().unwrap().to_string();

    // A write without a key gets a fresh UUIDv4.
    let r = c
        .patch(format!("{}/tasks/t-1", relay.url))
        .json(&json!({"status": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let receipt2: Value = r.json().await.unwrap();
    assert_eq!(receipt2["routeClass"], "replace-style");
    let key2 = receipt2["idempotencyKey"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(key2).unwrap().get_version_num(), 4);

    let ob = relay.stop_and_open().await;
    let all = ob.list(None, None).unwrap();
    assert_eq!(all.len(), 2);
    let e = ob.get(&id).unwrap();
    assert_eq!(e.status, EnvelopeStatus::Queued);
    assert_eq!(e.request.method, "POST");
    assert_eq!(e.request.path, "/progress/");
    assert_eq!(e.request.idempotency_key, "client-key-1");
    assert_eq!(e.attempt_count, 0);
    assert_eq!(e.request.route_class, RouteClass::AppendOnly);
    assert_eq!(
        serde_json::from_str::<Value>(e.request.body.as_deref().unwrap()).unwrap(),
        json!({"session": "s1", "note": "done"})
    );
    assert_eq!(e.request.source.user_agent.as_deref(), Some("agent/1.0"));
    assert!(e
        .request
        .source
        .queued_because
        .as_deref()
        .unwrap()
        .contains("connect"));
    // Only allow-listed headers are stored.
    // Only allow-listed headers are stored (reqwest sends accept and content-type here).
    assert_eq!(
        e.request.headers.keys().collect::<Vec<_>>(),
        vec!["accept", "content-type"]
    );
    assert_eq!(all[1].request.resource_path, "/tasks/t-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_down_refusals_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let u = |p: &str| format!("{}{p}", relay.url);

    // Online-only: no matching route.
    let r = c
        .post(u("/repos/sync"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["routeClass"], "online-only");
    assert_eq!(b["queued"], false);
    assert!(b["error"].as_str().unwrap().contains("online-only"));

    // DELETE is online-only.
    let r = c.delete(u("/tasks/t-1")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(
        r.json::<Value>().await.unwrap()["routeClass"],
        "online-only"
    );

    // Reads are online-only.
    let r = c.get(u("/progress/")).send().await.unwrap();
    assert_eq!(r.status(), 503);

    // Credential-bearing requests to queueable routes are never queued.
    for (h, v) in [
        ("authorization", "Bearer abc"),
        ("cookie", "session=abc"),
        ("x-api-key", "abc"),
        ("api-key", "abc"),
    ] {
        let r = c
            .post(u("/progress/"))
            .header(h, v)
            .json(&json!({"a": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503, "{h}");
        let b: Value = r.json().await.unwrap();
        assert_eq!(b["code"], "credentials", "{h}");
        assert_eq!(b["routeClass"], "append-only");
    }

    // 65 KiB body: 413.
    let big = json!({"blob": "x".repeat(65 * 1024)});
    let r = c.post(u("/progress/")).json(&big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["queued"], false);

    // Non-JSON body to a queueable route: not queued.
    let r = c
        .post(u("/messages/"))
        .header("content-type", "application/octet-stream")
        .body(vec![0u8, 159, 146, 150])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);

    let ob = relay.stop_and_open().await;
    assert_eq!(ob.counts().unwrap().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listed_route_queues_with_its_class_and_unlisted_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    for r in ROUTES {
        let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
        let resp = c
            .request(method, format!("{}{}", relay.url, concrete(r.pattern)))
            .json(&json!({"x": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202, "{} {}", r.method, r.pattern);
        let b: Value = resp.json().await.unwrap();
        assert_eq!(
            b["routeClass"],
            r.class.as_str(),
            "{} {}",
            r.method,
            r.pattern
        );
    }
    for (m, p) in [
        ("PUT", "/tasks/id-7"),
        ("POST", "/tasks/id-7"),
        ("POST", "/progress"),
        ("PATCH", "/messages/id-7"),
        ("POST", "/consistency/sweep"),
        ("DELETE", "/messages/id-7"),
    ] {
        let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
        let resp = c
            .request(method, format!("{}{p}", relay.url))
            .json(&json!({"x": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 503, "{m} {p}");
        assert_eq!(
            resp.json::<Value>().await.unwrap()["routeClass"],
            "online-only"
        );
    }
    let ob = relay.stop_and_open().await;
    assert_eq!(ob.counts().unwrap().queued, ROUTES.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_status_headers_and_body_and_attaches_idempotency_keys() {
    let dir = tempfile::tempdir().unwrap();
    let up = standin().await;
    up.script("/tasks/t-9", 418, json!({"detail": "teapot"}));
    let relay = TestRelay::start(&up.url(), &dir.path().join("o.sqlite3")).await;
    let c = client();

    let r = c
        .post(format!("{}/progress/?x=1", relay.url))
        .header("idempotency-key", "k-fwd-1")
        .header("authorization", "Bearer forwarded-while-online")
        .json(&json!({"a": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["idempotencyKey"], "k-fwd-1");

    let r = c
        .patch(format!("{}/tasks/t-9", relay.url))
        .json(&json!({"s": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 418);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"detail": "teapot"})
    );

    let r = c
        .get(format!("{}/anything", relay.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let seen = up.received();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].path, "/progress/?x=1");
    assert_eq!(seen[0].idempotency_key.as_deref(), Some("k-fwd-1"));
    assert!(seen[0].header_names.iter().any(|h| h == "authorization"));
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].body).unwrap(),
        json!({"a": 1})
    );
    // A write without a key gets one; a read does not.
    let k = seen[1].idempotency_key.as_deref().unwrap();
    assert!(uuid::Uuid::parse_str(k).is_ok());
    assert_eq!(seen[2].idempotency_key, None);
    assert_eq!(up.applied("k-fwd-1"), 1);

    // Nothing was queued while the upstream answered.
    let ob = relay.stop_and_open().await;
    up.stop().await;
    assert_eq!(ob.counts().unwrap().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_5xx_and_timeouts_count_as_outages() {
    let dir = tempfile::tempdir().unwrap();
    let up = standin().await;
    let mut cfg = RelayConfig::new(up.url(), dir.path().join("o.sqlite3"));
    cfg.upstream_timeout = Duration::from_millis(300);
    let relay = TestRelay::start_with(cfg).await;
    let c = client();
    for status in [502u16, 503, 504] {
        up.set_fail_status(Some(status));
        let r = post_json(
            &c,
            &format!("{}/messages/", relay.url),
            &json!({"s": status}),
        )
        .await;
        assert_eq!(r.status(), 202, "upstream {status}");
    }
    // 500 is not an outage: passed through.
    up.set_fail_status(Some(500));
    let r = post_json(&c, &format!("{}/messages/", relay.url), &json!({"s": 500})).await;
    assert_eq!(r.status(), 500);
    up.set_fail_status(None);
    up.set_delay(Duration::from_millis(2000));
    let r = post_json(
        &c,
        &format!("{}/messages/", relay.url),
        &json!({"s": "slow"}),
    )
    .await;
    assert_eq!(r.status(), 202);
    let ob = relay.stop_and_open().await;
    up.set_delay(Duration::ZERO);
    up.stop().await;
    let all = ob.list(None, None).unwrap();
    assert_eq!(all.len(), 4);
    assert!(all[0]
        .request
        .source
        .queued_because
        .as_deref()
        .unwrap()
        .contains("502"));
    assert!(all[3]
        .request
        .source
        .queued_because
        .as_deref()
        .unwrap()
        .contains("timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_key_gets_the_same_receipt_and_a_reused_key_409() {
    let dir = tempfile::tempdir().unwrap();
    let relay = TestRelay::start(&dead_upstream(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let send = |body: Value| {
        c.post(format!("{}/progress/", relay.url))
            .header("idempotency-key", "same-key")
            .json(&body)
            .send()
    };
    let a: Value = send(json!({"n": 1})).await.unwrap().json().await.unwrap();
    let r = send(json!({"n": 1})).await.unwrap();
    assert_eq!(r.status(), 202);
    let b: Value = r.json().await.unwrap();
    assert_eq!(a["envelopeId"], b["envelopeId"]);
    let r = send(json!({"n": 2})).await.unwrap();
    assert_eq!(r.status(), 409);
    let r = c
        .post(format!("{}/progress/", relay.url))
        .header("idempotency-key", "bad key with spaces")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(relay.stop_and_open().await.counts().unwrap().queued, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_reports_upstream_state_and_outbox_counts() {
    let dir = tempfile::tempdir().unwrap();
    let up = standin().await;
    let relay = TestRelay::start(&up.url(), &dir.path().join("o.sqlite3")).await;
    let c = client();
    let h: Value = get_json(&c, &format!("{}/healthz", relay.url)).await;
    assert_eq!(h["relay"]["status"], "ok");
    assert_eq!(h["upstream"]["state"], "up");
    assert_eq!(h["outbox"]["counts"]["queued"], 0);
    up.refuse().await;
    let r = post_json(&c, &format!("{}/progress/", relay.url), &json!({"a": 1})).await;
    assert_eq!(r.status(), 202);
    let h: Value = get_json(&c, &format!("{}/healthz", relay.url)).await;
    assert_eq!(h["upstream"]["state"], "down");
    assert_eq!(h["outbox"]["counts"]["queued"], 1);
    // Back up: forwarding resumes.
    up.resume().await;
    let r = post_json(&c, &format!("{}/progress/", relay.url), &json!({"a": 2})).await;
    assert_eq!(r.status(), 201);
    relay.stop().await;
    up.stop().await;
}
