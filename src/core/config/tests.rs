use super::*;
use std::collections::HashMap;

fn load_with(
    file_text: Option<&str>,
    env: &[(&str, &str)],
    flags: Vec<(&'static str, String, &'static str)>,
) -> (Result<Config, ConfigError>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("airlock.yaml");
    if let Some(t) = file_text {
        std::fs::write(&file, t).unwrap();
    }
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |name: &str| env.get(name).cloned();
    let inputs = ConfigInputs {
        file: file_text.map(|_| file.clone()),
        flags,
        env: &lookup,
    };
    (Config::load(&inputs), dir)
}

const SEED: &str = "# etc/scheduler.yaml\nscheduler:\n  hlc:\n    enabled: true\n    nodeId: \"scheduler-prod-01\"\n    maxClockSkew: \"00:00:05\"\n    persistenceInterval: \"00:01:00\"\n\n  chain:\n    enabled: true\n    batchSize: 1000\n    batchInterval: \"00:05:00\"\n    signSnapshots: true\n    keyId: \"scheduler-signing-key\"\n";

#[test]
fn the_seed_file_loads_with_lines() {
    let (c, _d) = load_with(Some(SEED), &[], vec![]);
    let c = c.unwrap();
    assert_eq!(c.text(NODE_ID), Some("scheduler-prod-01"));
    assert_eq!(c.duration(MAX_CLOCK_SKEW), Some(Duration::from_secs(5)));
    assert_eq!(
        c.duration(PERSISTENCE_INTERVAL),
        Some(Duration::from_secs(60))
    );
    assert_eq!(c.number(BATCH_SIZE), Some(1000));
    assert_eq!(c.duration(BATCH_INTERVAL), Some(Duration::from_secs(300)));
    assert_eq!(c.flag(SIGN_SNAPSHOTS), Some(true));
    assert_eq!(c.text(KEY_ID), Some("scheduler-signing-key"));
    assert!(matches!(
        c.get(NODE_ID).unwrap().source,
        Source::File { line: 5, .. }
    ));
    assert!(matches!(
        c.get(KEY_ID).unwrap().source,
        Source::File { line: 14, .. }
    ));
    assert_eq!(c.get(SERVE_LISTEN).unwrap().source, Source::Default);
}

#[test]
fn precedence_is_flag_env_file_default() {
    let file = "serve:\n  listen: 127.0.0.1:9000\nscheduler:\n  chain:\n    batchSize: 10\n";
    let env = [
        ("AIRLOCK_LISTEN", "127.0.0.1:9001"),
        ("AIRLOCK_BATCH_SIZE", "20"),
    ];
    // File over default.
    let (c, _d) = load_with(Some(file), &[], vec![]);
    let c = c.unwrap();
    assert_eq!(c.text(SERVE_LISTEN), Some("127.0.0.1:9000"));
    assert_eq!(c.duration(BATCH_INTERVAL), Some(Duration::from_secs(300)));
    // Environment over file.
    let (c, _d) = load_with(Some(file), &env, vec![]);
    let c = c.unwrap();
    assert_eq!(c.text(SERVE_LISTEN), Some("127.0.0.1:9001"));
    assert_eq!(
        c.get(SERVE_LISTEN).unwrap().source,
        Source::Env("AIRLOCK_LISTEN")
    );
    assert_eq!(c.number(BATCH_SIZE), Some(20));
    // Flag over environment.
    let flags = vec![(SERVE_LISTEN, "127.0.0.1:9002".to_string(), "--listen")];
    let (c, _d) = load_with(Some(file), &env, flags);
    let c = c.unwrap();
    assert_eq!(c.text(SERVE_LISTEN), Some("127.0.0.1:9002"));
    assert_eq!(
        c.get(SERVE_LISTEN).unwrap().source,
        Source::Flag("--listen".into())
    );
    assert_eq!(c.number(BATCH_SIZE), Some(20));
}

#[test]
fn unknown_keys_name_the_key_the_line_and_the_known_ones() {
    let (e, _d) = load_with(Some("scheduler:\n  hlc:\n    nodeid: x\n"), &[], vec![]);
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("\"scheduler.hlc.nodeid\""), "{msg}");
    assert!(msg.contains("nodeId"), "{msg}");
    let (e, _d) = load_with(Some("servee:\n  listen: 127.0.0.1:1\n"), &[], vec![]);
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("line 1") && msg.contains("servee"), "{msg}");
}

#[test]
fn bad_values_name_the_key_and_the_line() {
    let cases = [
        (
            "scheduler:\n  hlc:\n    maxClockSkew: 5s\n",
            "scheduler.hlc.maxClockSkew",
            "line 3",
        ),
        (
            "scheduler:\n  chain:\n    batchSize: 0\n",
            "scheduler.chain.batchSize",
            "line 3",
        ),
        (
            "scheduler:\n  chain:\n    signSnapshots: \"yes\"\n",
            "scheduler.chain.signSnapshots",
            "line 3",
        ),
        ("serve:\n  listen: localhost\n", "serve.listen", "line 2"),
        (
            "scheduler:\n  hlc:\n    persistenceInterval: \"00:00:00\"\n",
            "scheduler.hlc.persistenceInterval",
            "line 3",
        ),
        ("scheduler: 5\n", "scheduler", "line 1"),
        (
            "notifications:\n  webhooks:\n    - url: https://x\n      secret: s\n",
            "notifications.webhooks",
            "line 4",
        ),
    ];
    for (text, key, line) in cases {
        let (e, _d) = load_with(Some(text), &[], vec![]);
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains(key) && msg.contains(line), "{text:?}: {msg}");
    }
    let (e, _d) = load_with(
        Some("serve:\n  listen: 127.0.0.1:1\nserve:\n  tokenFile: x\n"),
        &[],
        vec![],
    );
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("line 3") && msg.contains("line 1"), "{msg}");
    let (e, _d) = load_with(None, &[("AIRLOCK_MAX_CLOCK_SKEW", "5")], vec![]);
    let msg = e.unwrap_err().to_string();
    assert!(
        msg.contains("environment AIRLOCK_MAX_CLOCK_SKEW") && msg.contains("maxClockSkew"),
        "{msg}"
    );
}

#[test]
fn missing_files_the_default_location_and_notifications() {
    // An explicit file that does not exist is an error; the default one is optional.
    let env = [("AIRLOCK_CONFIG", "/nonexistent/airlock.yaml")];
    let (e, _d) = load_with(None, &env, vec![]);
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("/nonexistent/airlock.yaml"));
    let (c, _d) = load_with(None, &[("AIRLOCK_DB", "/nonexistent/x/airlock.db")], vec![]);
    let c = c.unwrap();
    assert_eq!(c.file, PathBuf::from("/nonexistent/x/etc/airlock.yaml"));
    assert!(!c.file_found);
    // A PostgreSQL store has no directory: the default file is in the working directory.
    let (c, _d) = load_with(
        None,
        &[("AIRLOCK_DB", "postgres://u@%2Ftmp/airlock")],
        vec![],
    );
    assert_eq!(c.unwrap().file, PathBuf::from("etc/airlock.yaml"));
    let text = "notifications:\n  webhooks:\n    - url: https://h/hook\n      secretFile: /etc/s\n  nats:\n    url: nats://127.0.0.1:4222\ntrust:\n  requireSignature: true\n";
    let (c, _d) = load_with(Some(text), &[], vec![]);
    let c = c.unwrap();
    assert_eq!(c.webhooks().len(), 1);
    assert_eq!(c.text(NATS_URL), Some("nats://127.0.0.1:4222"));
    assert_eq!(c.flag(REQUIRE_SIGNATURE), Some(true));
    let json = c.to_json();
    assert_eq!(json["settings"].as_array().unwrap().len(), KEYS.len());
}

/// `notifications.maxInFlight` reaches the notification runner (serve reads it from the file;
/// `notify run --max-in-flight` wins over it); unset, the default cap; 0 is refused by the file's
/// parse, past 1024 when the targets are loaded.
#[test]
fn notifications_max_in_flight_reaches_the_runner() {
    use crate::core::notify::{settings::DEFAULT_MAX_IN_FLIGHT, NotifySettings};
    let nats = "notifications:\n  nats:\n    url: nats://127.0.0.1:4222\n";
    let loaded = |text: &str| {
        let (c, _d) = load_with(Some(text), &[], vec![]);
        NotifySettings::from_config(&c.unwrap()).load()
    };
    assert_eq!(loaded(nats).unwrap().max_in_flight, DEFAULT_MAX_IN_FLIGHT);
    let eight = format!("{nats}  maxInFlight: 8\n");
    assert_eq!(loaded(&eight).unwrap().max_in_flight, 8);
    let flagged = NotifySettings {
        max_in_flight: Some(3),
        ..Default::default()
    };
    let (c, _d) = load_with(Some(&eight), &[], vec![]);
    let both = flagged.or_configured(NotifySettings::from_config(&c.unwrap()));
    assert_eq!(both.load().unwrap().max_in_flight, 3);
    let e = loaded(&format!("{nats}  maxInFlight: 5000\n")).unwrap_err();
    assert!(e.to_string().contains("give 1 to 1024"), "{e}");
    let (c, _d) = load_with(Some(&format!("{nats}  maxInFlight: 0\n")), &[], vec![]);
    assert!(c.unwrap_err().to_string().contains("at least 1"));
}
