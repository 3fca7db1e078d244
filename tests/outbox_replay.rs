//! Replay against the State Hub stand-in over loopback, operator transitions, export, and the
//! single-replay lock.

mod support;

use airlock::core::outbox::lock::lock_path;
use airlock::core::outbox::store::ReplayLockState;
use airlock::core::outbox::{
    replay, EnvelopeStatus, Outbox, OutboxError, ReplayLock, ReplayOptions, ReplayProgress,
};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{dead_upstream, envelope, seed, standin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_maps_answers_to_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let up = standin().await;
    up.script(
        "/tasks/t-409",
        409,
        json!({"detail": "task changed centrally"}),
    );
    up.script("/tasks/t-422", 422, json!({"detail": "invalid status"}));
    up.script("/tasks/t-400", 400, json!({"detail": "bad request"}));
    up.script("/tasks/t-404", 404, json!({"detail": "no such task"}));
    up.script("/tasks/t-503", 503, json!({"detail": "busy"}));
    let ids = seed(
        &path,
        &[
            envelope("POST", "/progress/", r#"{"n":1}"#, "k-ok"),
            envelope("PATCH", "/tasks/t-409", r#"{"s":"done"}"#, "k-409"),
            envelope("PATCH", "/tasks/t-422", r#"{"s":"??"}"#, "k-422"),
            envelope("PATCH", "/tasks/t-400", r#"{"s":1}"#, "k-400"),
            envelope("PATCH", "/tasks/t-404", r#"{"s":1}"#, "k-404"),
            envelope("PATCH", "/tasks/t-503", r#"{"s":1}"#, "k-503"),
            envelope("PATCH", "/messages/m1/read", "", "k-read"),
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::<ReplayProgress>::new()));
    let seen2 = seen.clone();
    let before = airlock::core::time::now_rfc3339();
    let s = replay(&path, &ReplayOptions::new(up.url()), move |p| {
        seen2.lock().unwrap().push(p.clone())
    })
    .await
    .unwrap();
    assert_eq!(s.counts.total, 7);
    assert_eq!(s.counts.attempted, 7);
    assert_eq!(s.counts.delivered, 2);
    assert_eq!(s.counts.conflict, 2);
    assert_eq!(s.counts.failed, 2);
    assert_eq!(s.counts.still_queued, 1);
    assert_eq!(s.counts.retry_later, 1);
    assert!(!s.is_clean());
    {
        let progress = seen.lock().unwrap();
        assert!(progress.len() >= 8);
        assert_eq!(progress.last().unwrap(), &s.counts);
    }

    let ob = Outbox::open_existing(&path).unwrap();
    let get = |i: usize| ob.get(&ids[i]).unwrap();
    let ok = get(0);
    assert_eq!(ok.status, EnvelopeStatus::Delivered);
    assert_eq!(ok.response_status, Some(201));
    assert!(ok.acked_at.is_some());
    assert_eq!(ok.attempt_count, 1);
    for i in [1, 2] {
        let e = get(i);
        assert_eq!(e.status, EnvelopeStatus::Conflict);
        assert!(e.response_summary.as_deref().unwrap().contains("detail"));
    }
    assert!(get(1)
        .response_summary
        .unwrap()
        .contains("task changed centrally"));
    assert_eq!(get(2).response_status, Some(422));
    assert_eq!(get(3).status, EnvelopeStatus::Failed);
    assert_eq!(get(4).status, EnvelopeStatus::Failed);
    assert_eq!(get(4).response_status, Some(404));
    let q = get(5);
    assert_eq!(q.status, EnvelopeStatus::Queued);
    assert_eq!(q.attempt_count, 1);
    assert!(q.next_retry_at > before, "{} > {before}", q.next_retry_at);
    assert!(q.last_error.unwrap().contains("503"));
    assert_eq!(get(6).status, EnvelopeStatus::Delivered);

    // Each delivered request reached the stand-in with its stored key, exactly once.
    assert_eq!(up.applied("k-ok"), 1);
    assert_eq!(up.applied("k-read"), 1);
    let received = up.received();
    assert!(received.iter().all(|r| r
        .idempotency_key
        .as_deref()
        .is_some_and(|k| k.starts_with("k-"))));

    // A second run leaves conflicts alone (never overwritten) and the not-yet-due envelope waits.
    up.script("/tasks/t-409", 200, json!({"ok": true}));
    let s2 = replay(&path, &ReplayOptions::new(up.url()), |_| {})
        .await
        .unwrap();
    assert_eq!(s2.counts.attempted, 0);
    assert_eq!(s2.counts.not_due, 1);
    let ob = Outbox::open_existing(&path).unwrap();
    let c = ob.get(&ids[1]).unwrap();
    assert_eq!(c.status, EnvelopeStatus::Conflict);
    assert!(c
        .response_summary
        .unwrap()
        .contains("task changed centrally"));
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_keep_envelopes_queued_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let items: Vec<_> = (0..5)
        .map(|i| envelope("PATCH", &format!("/tasks/t{i}"), "{}", &format!("k{i}")))
        .collect();
    let ids = seed(&path, &items);
    let before = airlock::core::time::now_rfc3339();
    let s = replay(&path, &ReplayOptions::new(dead_upstream()), |_| {})
        .await
        .unwrap();
    // Three network errors in a row stop the run; the rest are untouched.
    assert_eq!(s.counts.attempted, 3);
    assert_eq!(s.counts.still_queued, 5);
    assert!(s.stopped_early.is_some());
    let ob = Outbox::open_existing(&path).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let e = ob.get(id).unwrap();
        assert_eq!(e.status, EnvelopeStatus::Queued);
        if i < 3 {
            assert_eq!(e.attempt_count, 1);
            assert!(e.next_retry_at > before);
            assert!(e.last_error.unwrap().contains("connect"));
            assert_eq!(e.response_status, None);
        } else {
            assert_eq!(e.attempt_count, 0);
        }
    }
    // A second failure doubles the delay: the retry is due 4 s after the attempt, which began
    // between the two clock readings around the run (however slow the machine is).
    let mut opts = ReplayOptions::new(dead_upstream());
    opts.ignore_backoff = true;
    opts.max_consecutive_network_errors = 1;
    let started = airlock::core::hlc::unix_ms_now() as i64;
    replay(&path, &opts, |_| {}).await.unwrap();
    let ended = airlock::core::hlc::unix_ms_now() as i64;
    let e = Outbox::open_existing(&path).unwrap().get(&ids[0]).unwrap();
    assert_eq!(e.attempt_count, 2);
    let due = airlock::core::time::parse_rfc3339_ms(&e.next_retry_at).unwrap();
    assert!(
        (started + 4_000..=ended + 4_000).contains(&due),
        "second retry due at {due}, the attempt ran within [{started}, {ended}]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_envelopes_of_a_resource_wait_behind_a_queued_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let up = standin().await;
    up.script("/tasks/a", 503, json!({}));
    let ids = seed(
        &path,
        &[
            envelope("PATCH", "/tasks/a", r#"{"v":1}"#, "a1"),
            envelope("PATCH", "/tasks/b", r#"{"v":1}"#, "b1"),
            envelope("PATCH", "/tasks/a", r#"{"v":2}"#, "a2"),
            envelope("POST", "/decisions/d1/resolve", r#"{"v":1}"#, "d1"),
            envelope("PATCH", "/decisions/d1", r#"{"v":2}"#, "d2"),
        ],
    );
    let s = replay(&path, &ReplayOptions::new(up.url()), |_| {})
        .await
        .unwrap();
    assert_eq!(s.counts.delivered, 3);
    assert_eq!(s.counts.waiting, 1);
    let order: Vec<_> = up
        .received()
        .into_iter()
        .map(|r| r.idempotency_key.unwrap())
        .collect();
    assert_eq!(
        order,
        vec!["a1", "b1", "d1", "d2"],
        "creation order, a2 held back"
    );
    let ob = Outbox::open_existing(&path).unwrap();
    let a2 = ob.get(&ids[2]).unwrap();
    assert_eq!((a2.status, a2.attempt_count), (EnvelopeStatus::Queued, 0));
    drop(ob);

    // Once /tasks/a answers, both go in order.
    up.script("/tasks/a", 200, json!({"ok": true}));
    let mut opts = ReplayOptions::new(up.url());
    opts.ignore_backoff = true;
    let s = replay(&path, &opts, |_| {}).await.unwrap();
    assert_eq!(s.counts.delivered, 2);
    assert!(s.is_clean());
    let tail: Vec<_> = up.received()[4..]
        .iter()
        .map(|r| r.idempotency_key.clone().unwrap())
        .collect();
    assert_eq!(tail, vec!["a1", "a2"]);
    up.stop().await;
}

/// What a second replay and an operator's cancel got while the first replay was running.
#[derive(Debug)]
struct WhileRunning {
    second_replay: Result<(), OutboxError>,
    cancel: Result<(), OutboxError>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_replay_runs_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    seed(&path, &[envelope("POST", "/progress/", "{}", "k")]);
    let id = Outbox::open_existing(&path)
        .unwrap()
        .list(None, None)
        .unwrap()[0]
        .request
        .id
        .clone();
    let up = standin().await;
    let url = up.url();
    // The second replay and the cancel run inside the first replay's progress callback, which it
    // calls while it holds the lock: no timing decides what they meet.
    let seen = Arc::new(Mutex::new(None::<WhileRunning>));
    let seen2 = seen.clone();
    let (p2, u2) = (path.clone(), url.clone());
    let s = replay(&path, &ReplayOptions::new(url), move |_| {
        let mut seen = seen2.lock().unwrap();
        if seen.is_some() {
            return;
        }
        let second_replay = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(replay(&p2, &ReplayOptions::new(u2.clone()), |_| {}))
                        .map(|_| ())
                })
                .join()
                .unwrap()
        });
        let cancel = Outbox::open_existing(&p2).unwrap().cancel(&id).map(|_| ());
        *seen = Some(WhileRunning {
            second_replay,
            cancel,
        });
    })
    .await
    .unwrap();
    let seen = seen
        .lock()
        .unwrap()
        .take()
        .expect("the replay reported progress");
    let err = seen.second_replay.unwrap_err();
    assert!(err.is_busy(), "{err}");
    assert!(err.to_string().contains("another replay"));
    // Operator transitions wait for the replay too.
    assert!(
        matches!(seen.cancel, Err(OutboxError::ReplayBusy { .. })),
        "{:?}",
        seen.cancel
    );
    // The first run went on to deliver, exactly once, and let the lock go.
    assert_eq!(s.counts.delivered, 1);
    assert_eq!(up.applied("k"), 1);
    assert_eq!(up.requests(), 1);
    drop(ReplayLock::acquire(&path).unwrap());
    up.stop().await;
}

/// `outbox status` looks at the replay lock by taking a shared lock on the lock file for an
/// instant. A replay (or retry / cancel) that met that instant used to be refused as though another
/// replay ran. A shared look is now told apart from a replay's exclusive hold and waited out; a
/// replay's hold is still reported by status and still refuses a second replay at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_looking_at_the_lock_never_makes_a_replay_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    seed(&path, &[envelope("POST", "/progress/", "{}", "k")]);
    // The lock file exists, as it does after any replay.
    drop(ReplayLock::acquire(&path).unwrap());
    let up = standin().await;

    // A replay starts while a status holds its look (released 300 ms later).
    let look = std::fs::File::open(lock_path(&path)).unwrap();
    look.try_lock_shared().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(look);
    });
    let s = replay(&path, &ReplayOptions::new(up.url()), |_| {})
        .await
        .expect("a status's look at the lock does not refuse a replay");
    release.join().unwrap();
    assert_eq!(s.counts.delivered, 1);
    assert_eq!(up.applied("k"), 1);

    // Statuses in a loop while replays, retries and cancels take and release the lock for 1 s.
    let stop = Arc::new(AtomicBool::new(false));
    let looks = Arc::new(AtomicU64::new(0));
    let looker = {
        let (stop, looks, path) = (stop.clone(), looks.clone(), path.clone());
        std::thread::spawn(move || {
            let ob = Outbox::open_read_only(&path).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let _ = ob.replay_lock_state();
                looks.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    while looks.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let p2 = path.clone();
    let (taken, refused) = tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let (mut taken, mut refused) = (0u32, Vec::new());
        while t0.elapsed() < Duration::from_secs(1) {
            match ReplayLock::acquire(&p2) {
                Ok(_) => taken += 1,
                Err(e) => refused.push(e.to_string()),
            }
        }
        (taken, refused)
    })
    .await
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    looker.join().unwrap();
    assert!(taken > 0);
    assert!(
        refused.is_empty(),
        "{} of {} replays refused while statuses looked ({} looks): {:?}",
        refused.len(),
        taken as usize + refused.len(),
        looks.load(Ordering::Relaxed),
        refused.first()
    );

    // A replay's own hold: status reports it, a second replay is refused without waiting.
    let held = ReplayLock::acquire(&path).unwrap();
    let state = Outbox::open_read_only(&path).unwrap().replay_lock_state();
    assert!(
        matches!(&state, ReplayLockState::Held(h) if h.contains(&format!("pid {}", std::process::id()))),
        "{state:?}"
    );
    let t0 = Instant::now();
    let err = ReplayLock::acquire(&path).unwrap_err();
    assert!(err.is_busy(), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    drop(held);
    assert_eq!(
        Outbox::open_read_only(&path).unwrap().replay_lock_state(),
        ReplayLockState::Free
    );
    up.stop().await;
}

#[test]
fn retry_and_cancel_follow_the_transition_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    let ids = seed(
        &path,
        &[
            envelope("POST", "/progress/", "{}", "k1"),
            envelope("POST", "/progress/", r#"{"a":1}"#, "k2"),
        ],
    );
    let mut ob = Outbox::open_existing(&path).unwrap();
    // Mark the first delivered as replay would.
    ob.record_attempts(&[airlock::core::outbox::store::AttemptRecord {
        seq: ob.get(&ids[0]).unwrap().seq,
        status: EnvelopeStatus::Delivered,
        next_retry_at: airlock::core::time::now_rfc3339(),
        last_error: None,
        response_status: Some(201),
        response_summary: Some("{}".into()),
        at: airlock::core::time::now_rfc3339(),
    }])
    .unwrap();
    let err = ob.cancel(&ids[0]).unwrap_err();
    assert!(matches!(err, OutboxError::Transition { .. }));
    assert!(err.to_string().contains("delivered"), "{err}");
    assert!(ob.retry(&ids[0]).is_err());

    let e = ob.cancel(&ids[1]).unwrap();
    assert_eq!(e.status, EnvelopeStatus::Cancelled);
    assert!(ob
        .cancel(&ids[1])
        .unwrap_err()
        .to_string()
        .contains("already cancelled"));
    let e = ob.retry(&ids[1][..8]).unwrap();
    assert_eq!(e.status, EnvelopeStatus::Queued);
    assert!(matches!(ob.get("nope"), Err(OutboxError::NotFound { .. })));
    let c = ob.counts().unwrap();
    assert_eq!((c.queued, c.delivered, c.due), (1, 1, 1));
}

#[test]
fn export_is_non_secret_json_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.sqlite3");
    seed(
        &path,
        &[envelope(
            "POST",
            "/messages/",
            r#"{"text":"hi","client_secret":"EXPORT-SECRET-1"}"#,
            "k1",
        )],
    );
    let out = dir.path().join("export.json");
    std::fs::write(&out, "old").unwrap();
    let ob = Outbox::open_existing(&path).unwrap();
    let s = ob.export(&out, None).unwrap();
    assert_eq!(s.envelopes, 1);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("EXPORT-SECRET-1"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["counts"]["queued"], 1);
    assert_eq!(v["envelopes"][0]["idempotencyKey"], "k1");
    assert_eq!(v["envelopes"][0]["status"], "queued");
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    // Exporting into a missing directory fails cleanly.
    assert!(ob
        .export(&dir.path().join("no/such/dir/x.json"), None)
        .is_err());
}
