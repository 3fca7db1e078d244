//! `airlock serve` over real loopback HTTP (SPEC section 13): chain verify (ok, broken, 400, 404),
//! pushed bundles imported and refused exactly as `jobs import` does, metrics with the seeds' names
//! surviving a restart, access rules, graceful shutdown (a signal during the start-up verification,
//! a second signal forcing the exit); promtool on the metrics, the alert rules
//! and their unit tests; the configuration's precedence and errors through the CLI.

mod chain_support;
mod common;
#[path = "pg_support/mod.rs"]
mod pg_support;
mod stores;

use common::{announced_url, assert_exit, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use stores::Kind;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        Env { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn cmd(&self, db: &str, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        // A PostgreSQL URL as given, a SQLite store in the test's directory.
        let db = match db.contains("://") {
            true => db.into(),
            false => self.path(db),
        };
        c.arg("--db")
            .arg(db)
            .args(args)
            .current_dir(self.dir.path())
            .env("HOME", self.path("home"))
            .env("XDG_DATA_HOME", self.path("data"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AIRLOCK_NODE_ID", "hub-1")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_DB")
            .env_remove("AIRLOCK_TOKEN_FILE")
            .env_remove("AIRLOCK_BATCH_SIZE")
            .env_remove("AIRLOCK_LISTEN");
        c
    }
    fn run(&self, db: &str, args: &[&str]) -> Output {
        self.cmd(db, args).output().unwrap()
    }
    fn json(&self, db: &str, args: &[&str]) -> (i32, Value) {
        let o = self.run(db, args);
        let v =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{args:?}: {}", text(&o)));
        (o.status.code().unwrap_or(-1), v)
    }
}

/// A running `airlock serve` child on a free loopback port.
struct Serve(common::Server);

impl std::ops::Deref for Serve {
    type Target = common::Server;
    fn deref(&self) -> &common::Server {
        &self.0
    }
}

impl Serve {
    fn start(env: &Env, db: &str, extra: &[&str]) -> Serve {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Serve(common::Server::spawn(
            env.cmd(db, &args).stderr(Stdio::null()),
        ))
    }
    fn get(&self, path: &str, token: bool) -> (u16, String) {
        let mut r = client().get(format!("{}{path}", self.url));
        if token {
            r = r.bearer_auth(TOKEN);
        }
        let resp = r.send().unwrap();
        (resp.status().as_u16(), resp.text().unwrap())
    }
    /// The HTTP status of a GET of `path`.
    fn status(&self, path: &str, token: bool) -> u16 {
        self.get(path, token).0
    }
    /// SIGTERM, and the exit status of a graceful shutdown.
    fn stop(self) -> i32 {
        self.0.stop()
    }
}

/// `airlock serve` on hub.db with the configuration file `cfg`, clients needing the test token.
/// `airlock ledger append WAL --node NODE --event EVENT` on this machine, which must succeed.
fn append_local(env: &Env, wal: &Path, node: &str, event: &Value) {
    let event = event.to_string();
    let args = [
        "ledger",
        "append",
        wal.to_str().unwrap(),
        "--node",
        node,
        "--event",
        &event,
    ];
    let o = env.run("x.db", &args);
    assert!(o.status.success(), "{}", text(&o));
}

/// A hub serving ledgers from `ledgers/` of `env`: the server, that directory and its token file.
fn ledger_hub(env: &Env) -> (Serve, PathBuf, PathBuf) {
    let cfg = env.path("airlock.yaml");
    let served = env.path("ledgers");
    std::fs::write(&cfg, format!("ledger:\n  dir: {}\n", served.display())).unwrap();
    (serve_hub(env, &cfg), served, env.path("token"))
}

fn serve_hub(env: &Env, cfg: &Path) -> Serve {
    let token = env.path("token");
    let (cfg, token) = (cfg.to_str().unwrap(), token.to_str().unwrap());
    Serve::start(env, "hub.db", &["--config", cfg, "--token-file", token])
}

fn client() -> reqwest::blocking::Client {
    common::http_client()
}

/// The report without the values that depend on when and where it ran.
fn stable(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for k in ["clock", "createdAt", "importedAt", "alreadyImportedAt"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series}"))
}

fn promtool(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut c = Command::new("promtool");
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap_or_else(|e| {
        panic!(
            "promtool is needed ({e}): install the Debian package `prometheus` (scripts/setup.sh)"
        )
    });
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// Enqueues jobs for tenant t1 in `src.db` and exports `good.json`; `bad.json` has one payload
/// changed (a payload-hash finding).
fn bundles(env: &Env) -> (PathBuf, PathBuf) {
    for n in 1..=3 {
        let o = env.run(
            "src.db",
            &[
                "jobs",
                "enqueue",
                "-t",
                "t1",
                "--node",
                "edge-a",
                &format!("{{\"n\":{n}}}"),
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = env.run("src.db", &["jobs", "export", "-t", "t1", "-o", "good.json"]);
    assert!(o.status.success(), "{}", text(&o));
    let good = std::fs::read_to_string(env.path("good.json")).unwrap();
    let bad = good.replacen("{\\\"n\\\":2}", "{\\\"n\\\":7}", 1);
    assert_ne!(good, bad);
    std::fs::write(env.path("bad.json"), bad).unwrap();
    (env.path("good.json"), env.path("bad.json"))
}

/// The signature policy of every other command holds for serve's imports: the trust store's
/// (`keys policy --require-signature on`) and the environment's refuse an unsigned push exactly as
/// `jobs import` refuses it.
#[test]
fn serve_applies_the_trust_store_and_environment_signature_policy() {
    let env = Env::new();
    let (good, _) = bundles(&env);
    let good = good.to_str().unwrap();
    let push = |serve: &Serve| {
        env.json(
            "unused.db",
            &[
                "jobs",
                "push",
                good,
                "--to",
                &serve.url,
                "--token-file",
                "token",
                "--json",
            ],
        )
    };
    let o = env.run("srv.db", &["keys", "policy", "--require-signature", "on"]);
    assert!(o.status.success(), "{}", text(&o));
    let serve = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let (code, pushed) = push(&serve);
    assert_eq!(
        (code, &pushed["status"]),
        (1, &Value::from("refused")),
        "{pushed}"
    );
    assert!(pushed.to_string().contains("signature-missing"), "{pushed}");
    drop(serve);
    let o = env.run("srv.db", &["keys", "policy", "--require-signature", "off"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut c = env.cmd(
        "srv.db",
        &["serve", "--listen", "127.0.0.1:0", "--token-file", "token"],
    );
    c.env("AIRLOCK_REQUIRE_SIGNATURE", "1")
        .stderr(Stdio::null());
    let serve = Serve(common::Server::spawn(&mut c));
    let (code, pushed) = push(&serve);
    assert_eq!(
        (code, &pushed["status"]),
        (1, &Value::from("refused")),
        "{pushed}"
    );
}

/// One portable export of tenant n1 recorded in `db` (an emission for serve's runner to deliver).
fn portable_export(env: &Env, db: &str) {
    let o = env.run(db, &["jobs", "enqueue", "-t", "n1", "{\"x\":1}"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::create_dir_all(env.path("out")).unwrap();
    let out = env.path("out");
    let o = env.run(
        db,
        &[
            "jobs",
            "export",
            "-t",
            "n1",
            "--portable",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
}

both_stores! {
fn serve_end_to_end_over_http(kind: Kind) {
    let env = Env::new();
    let srv = stores::db_arg(kind, env.dir.path(), "srv.db");
    let srv = srv.as_str();
    let (hook, got) = stores::webhook_receiver();
    std::fs::write(env.path("secret"), "s3cret\n").unwrap();
    portable_export(&env, srv);
    bundles(&env);
    std::fs::create_dir_all(env.path("etc")).unwrap();
    std::fs::write(
        env.path("etc/airlock.yaml"),
        format!(
            "serve:\n  maxBundleBytes: 100000\nnotifications:\n  pollInterval: \"00:00:01\"\n  webhooks:\n    - url: {hook}\n      secretFile: {}\n",
            env.path("secret").display()
        ),
    )
    .unwrap();
    let serve = Serve::start(&env, srv, &["--token-file", "token"]);
    let push = |file: &str| {
        env.json(
            "unused.db",
            &[
                "jobs",
                "push",
                file,
                "--to",
                &serve.url,
                "--token-file",
                "token",
                "--json",
            ],
        )
    };

    // Chain verify: 400 without tenantId, 401 without the token, 404 for an unknown tenant.
    let (status, body) = serve.get("/api/v1/scheduler/chain/verify", true);
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "bad-request"
    );
    assert_eq!(
        serve.status("/api/v1/scheduler/chain/verify?tenantId=t1", false),
        401
    );
    assert_eq!(
        serve.status("/api/v1/scheduler/chain/verify?tenantId=nobody", true),
        404
    );

    // Pushing `file` answers exactly as `jobs import` of it does (the same report and exit code).
    let push_like_import = |file: &str, code: i32, status: &str| {
        let (cli_code, cli) = env.json("cli.db", &["jobs", "import", file, "--json"]);
        let (push_code, pushed) = push(file);
        assert_eq!((cli_code, push_code), (code, code), "{file}");
        assert_eq!(pushed["status"], status, "{file}");
        assert_eq!(stable(pushed), stable(cli), "{file}");
    };
    // A refused push is refused exactly as the CLI refuses it (same report, exit 1), writes nothing.
    push_like_import("bad.json", 1, "refused");
    assert_eq!(
        serve.status("/api/v1/scheduler/chain/verify?tenantId=t1", true),
        404
    );

    // A good push is imported exactly as the CLI imports it.
    push_like_import("good.json", 0, "imported");
    // Again: nothing to do, as the CLI says.
    push_like_import("good.json", 0, "nothing-to-do");

    // Verify over HTTP = `chain verify --json`.
    let (status, body) = serve.get("/api/v1/scheduler/chain/verify?tenantId=t1", true);
    assert_eq!(status, 200);
    let api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api["ok"], true);
    let (_, cli) = env.json(srv, &["chain", "verify", "-t", "t1", "--json"]);
    assert_eq!(api, cli);

    // Over the limit: 413 before the body is read (declared length), JSON error.
    let r = client()
        .post(format!("{}/api/v1/airgap/bundles", serve.url))
        .bearer_auth(TOKEN)
        .body(vec![b' '; 200_000])
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert_eq!(r.json::<Value>().unwrap()["error"], "too-large");
    // Not a bundle: 400 with the import's error.
    let r = client()
        .post(format!("{}/api/v1/airgap/bundles?file=x.json", serve.url))
        .bearer_auth(TOKEN)
        .body("not json")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("x.json"));
    // The export download is 404 until an export is recorded.
    let (status, _) = serve.get(
        "/v1/exports/airgap/evidence/0b7ec3b6-8f8a-5b8e-9d0c-2f1f3c1d2e4a/download",
        true,
    );
    assert_eq!(status, 404);

    // A broken chain: the API reports what the CLI reports.
    match kind {
        Kind::Sqlite => {
            let conn = rusqlite::Connection::open(env.path("srv.db")).unwrap();
            conn.execute(
                "UPDATE scheduler_log SET payload = '{\"n\":9}' WHERE tenant_id = 't1' AND seq = 1",
                [],
            )
            .unwrap();
        }
        Kind::Postgres => {
            let mut c = postgres::Client::connect(srv, postgres::NoTls).unwrap();
            c.batch_execute(
                "UPDATE airlock.chain_entry SET payload_text = '{\"n\":9}' WHERE tenant_id = 't1' AND seq = 1",
            )
            .unwrap();
        }
    }
    let (status, body) = serve.get("/api/v1/scheduler/chain/verify?tenantId=t1", true);
    assert_eq!(status, 200);
    let api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(api["ok"], false);
    assert!(!api["findings"].as_array().unwrap().is_empty());
    let (code, cli) = env.json(srv, &["chain", "verify", "-t", "t1", "--json"]);
    assert_eq!((code, &api), (1, &cli));

    // Metrics with the seeds' names, valid for promtool.
    let (status, metrics) = serve.get("/metrics", true);
    assert_eq!(status, 200);
    let check = promtool(&["check", "metrics"], Some(&metrics));
    assert!(check.status.success(), "{}", text(&check));
    assert_eq!(sample(&metrics, "airgap_bundles_imported_total"), 1.0);
    assert_eq!(sample(&metrics, "airgap_jobs_synced_total"), 3.0);
    let verifications = sample(&metrics, "scheduler_chain_verifications_total");
    assert!(verifications >= 3.0, "{verifications}");
    assert!(sample(&metrics, "scheduler_chain_verification_failures_total") >= 1.0);
    assert!(sample(&metrics, "airgap_sync_duration_seconds_count") >= 3.0);
    assert_eq!(sample(&metrics, "hlc_max_clock_skew_seconds"), 5.0);
    // The export-ready notification recorded before serve started was delivered by serve's runner.
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "serve delivered no notification");
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let delivered = "airlock_notify_deliveries{target=\"webhook\",status=\"delivered\"}";
    while sample(&serve.get("/metrics", true).1, delivered) != 1.0 {
        assert!(Instant::now() < deadline, "the delivery was not recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(serve.stop(), 0, "graceful shutdown exits 0");

    // Restarted (without a token): the counters kept their values; the start-up verification of
    // the broken chain is counted and reported by /readyz; a push is refused with 403.
    let serve = Serve::start(&env, srv, &[]);
    let (_, metrics) = serve.get("/metrics", false);
    assert_eq!(sample(&metrics, "airgap_bundles_imported_total"), 1.0);
    assert!(sample(&metrics, "scheduler_chain_verifications_total") > verifications);
    assert_eq!(
        sample(&metrics, "airlock_serve_job_runs_total{job=\"verify\"}"),
        2.0
    );
    let (_, ready) = serve.get("/readyz", false);
    assert!(ready.contains("\"t1\""), "{ready}");
    let r = client()
        .post(format!("{}/api/v1/airgap/bundles", serve.url))
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(serve.stop(), 0);

    // Off loopback without a token: refused before listening.
    let o = env.run(srv, &["serve", "--listen", "0.0.0.0:0"]);
    assert_exit(&o, 2, "--token-file");
}
}

#[test]
fn export_to_url_pushes_and_metrics_textfile_and_rules_pass_promtool() {
    let env = Env::new();
    bundles(&env);
    let serve = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let o = env.run(
        "src.db",
        &[
            "jobs",
            "export",
            "-t",
            "t1",
            "--to",
            &serve.url,
            "--token-file",
            "token",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("imported by the serve"), "{}", text(&o));
    let (_, api) = serve.get("/api/v1/scheduler/chain/verify?tenantId=t1", true);
    assert_eq!(serde_json::from_str::<Value>(&api).unwrap()["length"], 3);
    assert_eq!(serve.stop(), 0);

    // One-shot runs count too: the source store saw 3 enqueues and 2 exports.
    std::fs::create_dir(env.path("textfile")).unwrap();
    let o = env.run("src.db", &["metrics", "--textfile", "textfile"]);
    assert!(o.status.success(), "{}", text(&o));
    let prom = std::fs::read_to_string(env.path("textfile/airlock.prom")).unwrap();
    let check = promtool(&["check", "metrics"], Some(&prom));
    assert!(check.status.success(), "{}", text(&check));
    assert_eq!(sample(&prom, "airgap_offline_enqueues_total"), 3.0);
    assert_eq!(sample(&prom, "airgap_bundles_exported_total"), 2.0);
    assert_eq!(sample(&prom, "hlc_ticks_total"), 3.0);
    let leftovers: Vec<_> = std::fs::read_dir(env.path("textfile")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only airlock.prom, no temporary file");

    // The alert rules and their unit tests.
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let r = rules.join("airlock-rules.yml");
    let o = promtool(&["check", "rules", r.to_str().unwrap()], None);
    assert!(o.status.success(), "{}", text(&o));
    let t = rules.join("airlock-rules.test.yml");
    let o = promtool(&["test", "rules", t.to_str().unwrap()], None);
    assert!(o.status.success(), "{}", text(&o));
    let rules_text = std::fs::read_to_string(&r).unwrap();
    assert!(rules_text.contains("alert: HlcClockSkewExceeded"));

    // The dashboard (the seed's file name) queries only metrics airlock exposes.
    let dash = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/hlc-queue-metrics.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(dash).unwrap()).unwrap();
    let mut used = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                let known = ["airgap_", "hlc_", "scheduler_", "airlock_"];
                if !known.iter().any(|p| word.starts_with(p)) {
                    continue;
                }
                let base = word.strip_suffix("_bucket").unwrap_or(word);
                assert!(
                    prom.contains(&format!("# TYPE {base} ")),
                    "{word} in the dashboard is not exposed"
                );
                used += 1;
            }
        }
    }
    assert!(used >= 16);
}

#[test]
fn config_precedence_and_errors_through_the_cli() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("etc")).unwrap();
    std::fs::write(
        env.path("etc/airlock.yaml"),
        "scheduler:\n  hlc:\n    nodeId: from-file\n  chain:\n    batchSize: 10\nserve:\n  listen: 127.0.0.1:9000\n",
    )
    .unwrap();
    let value = |v: &Value, key: &str| {
        v["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .cloned()
            .unwrap()
    };
    // The file beside the store, overridden by the environment.
    let mut c = env.cmd("s.db", &["config", "show", "--json"]);
    c.env("AIRLOCK_BATCH_SIZE", "20");
    let v: Value = serde_json::from_slice(&c.output().unwrap().stdout).unwrap();
    assert_eq!(v["fileFound"], true);
    assert_eq!(value(&v, "scheduler.chain.batchSize")["value"], 20);
    assert_eq!(
        value(&v, "scheduler.chain.batchSize")["source"],
        "environment AIRLOCK_BATCH_SIZE"
    );
    assert_eq!(value(&v, "serve.listen")["value"], "127.0.0.1:9000");
    assert!(value(&v, "serve.listen")["source"]
        .as_str()
        .unwrap()
        .ends_with("airlock.yaml line 7"));
    // AIRLOCK_NODE_ID (environment) beats the file; defaults fill the rest.
    assert_eq!(value(&v, "scheduler.hlc.nodeId")["value"], "hub-1");
    assert_eq!(
        value(&v, "scheduler.chain.batchInterval")["source"],
        "default"
    );
    // trust.requireSignature shows the policy verify and import apply: the environment's, then
    // the trust store's (`keys policy`), each named as the source.
    let require = |vars: &[(&str, &str)]| {
        let mut c = env.cmd("s.db", &["config", "show", "--json"]);
        c.env_remove("AIRLOCK_REQUIRE_SIGNATURE");
        for (k, v) in vars {
            c.env(k, v);
        }
        let v: Value = serde_json::from_slice(&c.output().unwrap().stdout).unwrap();
        let s = value(&v, "trust.requireSignature");
        (
            s["value"].clone(),
            s["source"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(require(&[]), (Value::Bool(false), "default".into()));
    // A store URL is shown without its password (in the user part or the query).
    let url = "postgres://u:S3cretPW@127.0.0.1:1/db?password=S3cretPW";
    let o = env
        .cmd(url, &["config", "show", "--json"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        !shown.contains("S3cretPW")
            && shown.contains("postgres://u:***@127.0.0.1:1/db?password=***"),
        "{shown}"
    );
    assert_eq!(
        require(&[("AIRLOCK_REQUIRE_SIGNATURE", "1")]),
        (
            Value::Bool(true),
            "environment AIRLOCK_REQUIRE_SIGNATURE".into()
        )
    );
    let o = env.run("s.db", &["keys", "policy", "--require-signature", "on"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (value_now, source) = require(&[]);
    assert_eq!(value_now, Value::Bool(true));
    assert!(
        source.starts_with("trust store ") && source.ends_with("(airlock keys policy)"),
        "{source}"
    );
    let o = env.run("s.db", &["keys", "policy", "--require-signature", "off"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // --config wins over the file beside the store; errors name the key and the line, exit 2.
    std::fs::write(
        env.path("bad.yaml"),
        "scheduler:\n  chain:\n    batchInterval: 5m\n",
    )
    .unwrap();
    let o = env.run("s.db", &["--config", "bad.yaml", "config", "show"]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("line 3") && t.contains("scheduler.chain.batchInterval"),
        "{t}"
    );
    std::fs::write(
        env.path("dup.yaml"),
        "serve:\n  listen: 127.0.0.1:1\n  listen: 127.0.0.1:2\n",
    )
    .unwrap();
    let o = env.run("s.db", &["--config", "dup.yaml", "serve"]);
    assert_exit(&o, 2, "line 3");
}

// ---------------------------------------------------------------- ledger endpoints

/// A drill-style event of job `n` (no HLC: the log assigns it).
fn created(n: u32, fence: u64) -> Value {
    serde_json::json!({
        "type": "JobCreated",
        "job_id": format!("use1-1700000000000-gate.1-{n:05}"),
        "spec": {"n": n},
        "assigned_dcs": ["use1"],
        "fence_token": fence,
    })
}

fn post_event(s: &Serve, node: &str, event: Value, token: bool) -> (u16, Value) {
    let mut r = client()
        .post(format!("{}/api/v1/ledger/{node}/events", s.url))
        .json(&serde_json::json!({ "event": event }));
    if token {
        r = r.bearer_auth(TOKEN);
    }
    let resp = r.send().unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().unwrap_or(Value::Null))
}

fn fold(env: &Env, wal: &Path) -> Value {
    let (code, v) = env.json("x.db", &["ledger", "fold", wal.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    v
}

#[test]
fn ledger_appends_and_anti_entropy_over_http_converge() {
    let env = Env::new();
    let (s, served, token) = ledger_hub(&env);
    for n in 1..=4 {
        let (status, v) = post_event(&s, "gate-1", created(n, 2), true);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["lsn"], n);
        assert_eq!(v["durability"], "LOCAL");
    }
    // A stale fence token, a bad node id, no token: refused, nothing appended.
    let (status, v) = post_event(&s, "gate-1", created(1, 1), true);
    assert_eq!(status, 409, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("stale fence"),
        "{v}"
    );
    assert_eq!(post_event(&s, "bad%20node", created(5, 1), true).0, 400);
    assert_eq!(post_event(&s, "gate-1", created(5, 1), false).0, 401);
    // A key given twice (the fence token: which one is meant?) is refused, not last-wins.
    let body = created(5, 2)
        .to_string()
        .replace("\"fence_token\":2", "\"fence_token\":1,\"fence_token\":2");
    let resp = client()
        .post(format!("{}/api/v1/ledger/gate-1/events", s.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(format!("{{\"event\":{body}}}"))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().unwrap();
    assert_eq!(v["error"], "repeated-key", "{v}");
    // A refused event for a node with no log yet leaves no (preallocated) log behind; a node id
    // that would name a hidden file is refused.
    let mut bad = created(1, 1);
    bad["job_id"] = "x".into();
    let (status, refused) = post_event(&s, "fresh", bad, true);
    assert_eq!(status, 400, "{refused}");
    assert!(!served.join("fresh.alwl").exists());
    assert_eq!(post_event(&s, "..x", created(1, 1), true).0, 400);
    assert!(!served.join("..x.alwl").exists());
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("$.event.fence_token"),
        "{v}"
    );

    // A local copy that has nothing gets the four frames.
    let url = format!("{}/api/v1/ledger/gate-1", s.url);
    let local = env.path("local.alwl");
    let sync = |cmd: &str| {
        env.json(
            "x.db",
            &[
                "ledger",
                cmd,
                local.to_str().unwrap(),
                "--peer",
                &url,
                "--token-file",
                token.to_str().unwrap(),
                "--json",
            ],
        )
    };
    let (code, r) = sync("sync");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["copiedToA"], serde_json::json!([1, 2, 3, 4]));
    assert!(r["exchanges"].as_u64().unwrap() >= 1);
    let remote = served.join("gate-1.alwl");
    assert_eq!(fold(&env, &local), fold(&env, &remote));

    // The local copy gains two events; diff finds them, sync sends them, then both are equal.
    for n in 5..=6 {
        append_local(&env, &local, "gate-1", &created(n, 2));
    }
    let (code, r) = sync("diff");
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["firstDivergentLsn"], 5);
    assert_eq!(r["missingInB"].as_array().unwrap().len(), 2);
    let (code, r) = sync("sync");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["copiedToB"], serde_json::json!([5, 6]));
    let (code, r) = sync("diff");
    assert_eq!(code, 0, "{r}");
    assert_eq!(fold(&env, &local), fold(&env, &remote));
    assert_eq!(fold(&env, &remote)["jobs"].as_object().unwrap().len(), 6);
    // The serve's writer reopens after the sync and continues the log.
    let (status, v) = post_event(&s, "gate-1", created(7, 2), true);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["lsn"], 7);
    // Without the token the exchange is refused and says why.
    let o = env.run(
        "x.db",
        &["ledger", "diff", local.to_str().unwrap(), "--peer", &url],
    );
    assert_exit(&o, 2, "401");

    // The WAL's metrics reach /metrics.
    let (_, m) = s.get("/metrics", true);
    assert!(sample(&m, "airlock_wal_appends_total") >= 5.0, "{m}");
    assert!(sample(&m, "airlock_wal_fsyncs_total") >= 1.0);
    assert!(sample(&m, "airlock_wal_fsync_duration_seconds_count") >= 1.0);
    assert!(sample(&m, "airlock_wal_batch_frames_count") >= 1.0);
    assert!(sample(&m, "airlock_wal_recoveries_total{outcome=\"clean\"}") >= 2.0);
    let o = promtool(&["check", "metrics"], Some(&m));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(s.stop(), 0);
}

/// `ledger sync gate-a.alwl --peer .../ledger/typo` (a log of node gate-a offered for node typo,
/// which has no log yet) is refused with 400 `wrong-node` and nothing is stored; it used to store
/// gate-a's log as typo.alwl, and every later append to typo got 500. A log of another node
/// already under a node's name makes its appends 409 `wrong-node`, not 500. Errors about the body
/// name its fields, not the CLI's flags.
#[test]
fn a_log_of_another_node_is_refused_not_stored_and_never_an_internal_error() {
    let env = Env::new();
    let (s, served, token) = ledger_hub(&env);
    let local = env.path("gate-a.alwl");
    append_local(&env, &local, "gate-a", &created(1, 1));
    let o = env.run(
        "x.db",
        &[
            "ledger",
            "sync",
            local.to_str().unwrap(),
            "--peer",
            &format!("{}/api/v1/ledger/typo", s.url),
            "--token-file",
            token.to_str().unwrap(),
        ],
    );
    assert_exit(&o, 2, "400");
    assert!(text(&o).contains("belong to node hash"), "{}", text(&o));
    assert!(
        !served.join("typo.alwl").exists(),
        "the foreign log was stored"
    );
    let (status, v) = post_event(&s, "typo", created(2, 1), true);
    assert_eq!(status, 200, "{v}");
    // A log of gate-a put under another node's name (by hand, or by an older serve).
    std::fs::copy(&local, served.join("other.alwl")).unwrap();
    let (status, v) = post_event(&s, "other", created(3, 1), true);
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["error"], "wrong-node", "{v}");
    // The body's fields, not `--fence` or `--event`.
    let resp = client()
        .post(format!("{}/api/v1/ledger/typo/events", s.url))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"event": created(4, 1), "fence": 5}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().unwrap();
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("the body's \"fence\" 5 disagrees"), "{msg}");
    let (status, v) = post_event(&s, "typo", serde_json::json!({"job_id": "x"}), true);
    assert_eq!(status, 400, "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("the body's \"event\" needs \"type\"") && !msg.contains("--"),
        "{msg}"
    );
    assert_eq!(s.stop(), 0);
    // A ledger.dir that is a file fails the start, naming it (it was noticed at the first append
    // as a 500).
    std::fs::remove_dir_all(&served).unwrap();
    std::fs::write(&served, b"a file").unwrap();
    let o = common::output_within(
        &mut env.cmd(
            "hub.db",
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--config",
                env.path("airlock.yaml").to_str().unwrap(),
            ],
        ),
        Duration::from_secs(30),
    );
    assert_exit(&o, 2, "ledger.dir");
    assert!(text(&o).contains("not a directory"), "{}", text(&o));
}

#[test]
fn ledger_appends_are_confirmed_regional_by_postgresql_and_global_needs_a_standby() {
    let env = Env::new();
    let db = pg_support::fresh_db();
    let served = env.path("ledgers");
    let write_cfg = |level: &str| {
        let cfg = env.path(&format!("{level}.yaml"));
        std::fs::write(
            &cfg,
            format!(
                "ledger:\n  dir: {}\n  durability: {level}\n  postgresUrl: \"{db}\"\n",
                served.display()
            ),
        )
        .unwrap();
        cfg
    };
    let s = serve_hub(&env, &write_cfg("regional"));
    let mut pg_lsns = Vec::new();
    for n in 1..=3 {
        let (status, v) = post_event(&s, "gate-1", created(n, 1), true);
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["durability"], "REGIONAL", "{v}");
        pg_lsns.push(v["postgresLsn"].as_str().unwrap().to_string());
    }
    let (_, m) = s.get("/metrics", true);
    assert_eq!(
        sample(
            &m,
            "airlock_ledger_confirmations_total{level=\"regional\",outcome=\"confirmed\"}"
        ),
        3.0
    );
    assert_eq!(s.stop(), 0);
    // PostgreSQL holds each event frame byte for byte; the WAL records REGIONAL up to LSN 3.
    let wal = served.join("gate-1.alwl");
    let (frames, _) = airlock::core::wal::reader::read_frames(&wal).unwrap();
    let events: Vec<Vec<u8>> = frames
        .iter()
        .filter(|f| f.watermark().is_none())
        .map(|f| f.encode())
        .collect();
    assert_eq!(events.len(), 3);
    // Each confirmation is a watermark frame (it takes the next LSN) covering the event before it.
    let last_event = frames
        .iter()
        .rev()
        .find(|f| f.watermark().is_none())
        .unwrap()
        .lsn;
    let marks: Vec<_> = frames.iter().filter_map(|f| f.watermark()).collect();
    assert_eq!(marks.len(), 3);
    assert_eq!(
        marks.last().map(|w| (w.state.name(), w.lsn)),
        Some(("REGIONAL", last_event))
    );
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let stored: Vec<Vec<u8>> = pg
        .query(
            "SELECT frame FROM airlock.ledger_event WHERE level = 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut want = events.clone();
    let mut got = stored;
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(pg_lsns[0] <= pg_lsns[2] || pg_lsns[0].len() < pg_lsns[2].len());

    // GLOBAL without a synchronous standby: the event is LOCAL (in the WAL), the answer says it is
    // not confirmed and why.
    let s = serve_hub(&env, &write_cfg("global"));
    let (status, v) = post_event(&s, "gate-1", created(4, 1), true);
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"], "not-confirmed");
    let msg = v["message"].as_str().unwrap();
    let lsn = last_event + 2;
    assert!(
        msg.contains(&format!("LSN {lsn} is LOCAL")) && msg.contains("synchronous standby"),
        "{msg}"
    );
    let (_, m) = s.get("/metrics", true);
    assert_eq!(
        sample(
            &m,
            "airlock_ledger_confirmations_total{level=\"global\",outcome=\"failed\"}"
        ),
        1.0
    );
    assert_eq!(s.stop(), 0);
    assert_eq!(fold(&env, &wal)["jobs"].as_object().unwrap().len(), 4);
}

#[test]
fn one_shot_commands_honour_the_configuration_file_and_flags_win() {
    let env = Env::new();
    let cfg = env.path("one.yaml");
    std::fs::write(
        &cfg,
        format!(
            "store:\n  path: {}\nscheduler:\n  hlc:\n    nodeId: node-from-file\ntrust:\n  requireSignature: true\n",
            env.path("from-file.db").display()
        ),
    )
    .unwrap();
    // `cmd` always passes --db; these runs leave it out so the file's store.path applies.
    let run = |args: &[&str], node_env: Option<&str>| {
        let mut full = vec!["--config", cfg.to_str().unwrap()];
        full.extend_from_slice(args);
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(&full)
            .current_dir(env.path(""))
            .env("HOME", env.path("home"))
            .env("XDG_DATA_HOME", env.path("data"))
            .env("XDG_CONFIG_HOME", env.path("config"))
            .env_remove("AIRLOCK_DB")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_NODE_ID")
            .env_remove("AIRLOCK_REQUIRE_SIGNATURE");
        if let Some(n) = node_env {
            c.env("AIRLOCK_NODE_ID", n);
        }
        c.output().unwrap()
    };
    let o = run(&["jobs", "enqueue", "-t", "t1", "{\"a\":1}"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("node-from-file"), "{}", text(&o));
    assert!(
        env.path("from-file.db").is_file(),
        "store.path from the file"
    );
    // Environment over file, flag over environment.
    let o = run(
        &["jobs", "enqueue", "-t", "t1", "{\"a\":2}"],
        Some("node-from-env"),
    );
    assert!(text(&o).contains("node-from-env"), "{}", text(&o));
    let o = run(
        &[
            "jobs",
            "enqueue",
            "-t",
            "t1",
            "--node",
            "node-flag",
            "{\"a\":3}",
        ],
        Some("node-from-env"),
    );
    assert!(text(&o).contains("node-flag"), "{}", text(&o));
    let other = env.path("flag.db");
    let o = run(
        &[
            "--db",
            other.to_str().unwrap(),
            "jobs",
            "enqueue",
            "-t",
            "t1",
            "{\"a\":4}",
        ],
        None,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(other.is_file(), "--db wins over store.path");
    // trust.requireSignature: an unsigned bundle is refused by jobs import.
    let bundle = env.path("b.json");
    let o = run(
        &["jobs", "export", "-t", "t1", "-o", bundle.to_str().unwrap()],
        None,
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        &[
            "--db",
            env.path("imp.db").to_str().unwrap(),
            "jobs",
            "import",
            bundle.to_str().unwrap(),
        ],
        None,
    );
    assert_exit(&o, 1, "signature-missing");
    // A bad file is an error for one-shot commands too, naming the line and key.
    std::fs::write(&cfg, "store:\n  path: /x\n  bogus: 1\n").unwrap();
    let o = run(&["jobs", "list"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("line 3") && text(&o).contains("store.bogus"),
        "{}",
        text(&o)
    );
}

// ---------------------------------------------------------------- connections

/// A client that stalls (half a request head, half a bundle body) or sits idle is closed by
/// the serve's timeouts; others are answered meanwhile; SIGTERM is not held up by such clients.
#[test]
fn stalled_and_idle_clients_are_closed_and_do_not_hold_shutdown() {
    use std::io::{Read, Write};
    let env = Env::new();
    let s = Serve::start(
        &env,
        "srv.db",
        &[
            "--token-file",
            "token",
            "--header-timeout-ms",
            "400",
            "--keep-alive-timeout-ms",
            "400",
            "--body-timeout-ms",
            "400",
        ],
    );
    let addr = s.url.trim_start_matches("http://").to_string();
    let closed_within = |mut c: std::net::TcpStream, what: &str| {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let t = Instant::now();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        assert!(t.elapsed() < Duration::from_secs(8), "{what}: still open");
        String::from_utf8_lossy(&buf).into_owned()
    };
    // Half a head.
    let mut head = std::net::TcpStream::connect(&addr).unwrap();
    head.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // An idle socket.
    let idle = std::net::TcpStream::connect(&addr).unwrap();
    // Half a bundle.
    let mut body = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        body,
        "POST /api/v1/airgap/bundles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n{{\"bundle"
    )
    .unwrap();
    // Half a ledger event (a JSON endpoint reads its body under the same stall timeout).
    let mut event = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        event,
        "POST /api/v1/ledger/gate-1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{{\"event\""
    )
    .unwrap();
    // A JSON body declared past the limit is refused before any byte of it is read.
    let mut huge = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        huge,
        "POST /api/v1/ledger/gate-1/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
    )
    .unwrap();
    assert_eq!(s.status("/healthz", false), 200);
    let answer = closed_within(huge, "a body past the limit");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("too-large"), "{answer}");
    let answer = closed_within(event, "half a ledger event");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("no byte of the request body"), "{answer}");
    closed_within(head, "half a head");
    closed_within(idle, "an idle socket");
    let answer = closed_within(body, "half a body");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body-timeout"), "{answer}");
    // A new stalled client does not hold the shutdown past its timeout.
    let mut late = std::net::TcpStream::connect(&addr).unwrap();
    late.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    let t = Instant::now();
    assert_eq!(s.stop(), 0);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

/// Every refusal is JSON, the router's own too: a method an endpoint does not take (405, with
/// `Allow`), a path segment that is not UTF-8 (400), an unknown path (404).
#[test]
fn router_refusals_are_json_like_every_other_error() {
    let env = Env::new();
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let json = |resp: reqwest::blocking::Response| -> (u16, Option<String>, Value) {
        let status = resp.status().as_u16();
        let allow = resp
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_string());
        (status, allow, resp.json().expect("a JSON body"))
    };
    let (status, allow, v) = json(
        client()
            .post(format!("{}/healthz", s.url))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 405, "{v}");
    assert_eq!(v["error"], "method-not-allowed", "{v}");
    assert!(allow.expect("an Allow header").contains("GET"));
    assert!(
        v["message"].as_str().unwrap().contains("Allow header"),
        "{v}"
    );
    let (status, _, v) = json(
        client()
            .get(format!("{}/api/v1/ledger/%ff/events", s.url))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert!(status == 400 || status == 405, "{status} {v}");
    assert!(v["error"].is_string() && v["message"].is_string(), "{v}");
    let (status, _, v) = json(
        client()
            .get(format!("{}/v1/exports/airgap/evidence/%ff/download", s.url))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "bad-request", "{v}");
    assert!(v["message"].as_str().unwrap().contains("UTF-8"), "{v}");
    let (status, _, v) = json(
        client()
            .get(format!("{}/nowhere", s.url))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert_eq!(
        (status, v["error"].as_str()),
        (404, Some("not-found")),
        "{v}"
    );
}

// ---------------------------------------------------------------- audit: start, spool, exports

/// The `.upload-*` directories in the spool beside `srv.db`.
fn uploads(env: &Env) -> Vec<PathBuf> {
    match std::fs::read_dir(env.path("spool")) {
        Ok(d) => d
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".upload-")
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A store that cannot open (here: not a database) fails the start with exit 2 and says why,
/// without first announcing that serve listens (a supervisor would believe that line).
#[test]
fn a_store_that_cannot_open_fails_the_start_without_a_listening_line() {
    let env = Env::new();
    std::fs::write(env.path("bad.db"), vec![0x5a; 20_000]).unwrap();
    let o = env.run("bad.db", &["serve", "--listen", "127.0.0.1:0"]);
    assert_exit(&o, 2, "is not a SQLite database");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("listening"), "{}", text(&o));
}

/// A store this user can only read (the file 0444, its directory writable) fails the start with
/// exit 2 saying what, where and what to do, before any "listening" line, and changes nothing (it
/// used to start, say ready, and answer every push 503 "attempt to write a readonly database").
/// As root (which ignores file modes) serve runs as `nobody`.
#[test]
fn a_store_this_user_cannot_write_fails_the_start() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    small_chain(&env, "store.db");
    let folder = env.path("ro");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(env.path("store.db"), folder.join("ro.db")).unwrap();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(env.dir.path(), 0o755).unwrap();
    mode(&folder, 0o777).unwrap();
    mode(&folder.join("ro.db"), 0o444).unwrap();
    let before = std::fs::read(folder.join("ro.db")).unwrap();
    let mut cmd = env.cmd("ro/ro.db", &["serve", "--listen", "127.0.0.1:0"]);
    let o = common::output_within(common::unprivileged(&mut cmd), Duration::from_secs(30));
    assert_exit(&o, 2, "cannot write the store");
    assert!(text(&o).contains("ro.db"), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("listening"));
    let names: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["ro.db"], "nothing made beside the store");
    assert_eq!(std::fs::read(folder.join("ro.db")).unwrap(), before);
}

/// A regular file where the upload spool goes (beside the store) fails the start naming the
/// spool, not the store, and leaves no new store behind (one was made and migrated before).
#[test]
fn a_file_in_the_spools_place_fails_the_start_naming_it_and_makes_no_store() {
    let env = Env::new();
    std::fs::write(env.path("spool"), b"not a directory").unwrap();
    let o = common::output_within(
        &mut env.cmd("new.db", &["serve", "--listen", "127.0.0.1:0"]),
        Duration::from_secs(30),
    );
    assert_exit(&o, 2, "upload spool");
    assert!(!text(&o).contains("cannot open the store"), "{}", text(&o));
    assert!(text(&o).contains("not a directory"), "{}", text(&o));
    for made in ["new.db", "new.db-wal", "new.db-shm"] {
        assert!(!env.path(made).exists(), "{made} was left behind");
    }
}

/// Uploads a killed serve left in its spool (here: half a bundle when SIGKILL came) are removed
/// when serve starts again; they would otherwise fill the disk one crash at a time.
#[test]
fn uploads_left_by_a_killed_serve_are_removed_when_it_starts_again() {
    use std::io::Write;
    let env = Env::new();
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let mut half = std::net::TcpStream::connect(s.url.trim_start_matches("http://")).unwrap();
    write!(
        half,
        "POST /api/v1/airgap/bundles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n{{\"bundleId\""
    )
    .unwrap();
    wait_for("the upload spooling", Duration::from_secs(10), || {
        uploads(&env).len() == 1
    });
    drop(s); // SIGKILL
    drop(half);
    assert_eq!(uploads(&env).len(), 1, "the killed serve's upload is left");
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    assert!(uploads(&env).is_empty(), "{:?}", uploads(&env));
    assert_eq!(s.stop(), 0);
}

/// A client that gives up while its import waits (here for another writer of the store) does not
/// cut the import short: it keeps its upload (and with it the import lock) until it has finished,
/// then the bundle is imported and the upload removed.
#[test]
fn an_import_keeps_its_upload_when_its_client_goes_away() {
    let env = Env::new();
    let (good, _) = bundles(&env);
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let other = rusqlite::Connection::open(env.path("srv.db")).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let impatient = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let r = impatient
        .post(format!("{}/api/v1/airgap/bundles?file=good.json", s.url))
        .bearer_auth(TOKEN)
        .body(std::fs::read(&good).unwrap())
        .send();
    assert!(r.is_err(), "the import should still wait for the store");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(uploads(&env).len(), 1, "the waiting import lost its upload");
    other.execute_batch("ROLLBACK").unwrap();
    wait_for("the import to finish", Duration::from_secs(20), || {
        uploads(&env).is_empty()
    });
    let (status, body) = s.get("/api/v1/scheduler/chain/verify?tenantId=t1", true);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["length"].as_u64()),
        (Some(true), Some(3))
    );
    assert_eq!(s.stop(), 0);
}

/// An export whose file was replaced by a FIFO is refused at once (409), not opened and waited
/// on: such a request would never finish, and serve would never stop on SIGTERM.
#[test]
fn an_export_file_swapped_for_a_fifo_is_refused_and_does_not_hold_shutdown() {
    let env = Env::new();
    portable_export(&env, "srv.db");
    let (id, path): (String, String) = rusqlite::Connection::open(env.path("srv.db"))
        .unwrap()
        .query_row("SELECT export_id, path FROM exports", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    common::make_fifo(std::path::Path::new(&path));
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let r = client()
        .get(format!(
            "{}/v1/exports/airgap/evidence/{id}/download",
            s.url
        ))
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(5))
        .send()
        .expect("an answer, not a request waiting on the FIFO");
    assert_eq!(r.status().as_u16(), 409);
    let v: Value = r.json().unwrap();
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{v}"
    );
    assert_eq!(s.stop(), 0);
}

/// A query parameter given twice is refused (which `force` was meant?), not last-wins; the bearer
/// scheme is case-insensitive; failure series are there at 0 before the first failure.
#[test]
fn parameters_are_given_once_and_the_bearer_scheme_is_any_case() {
    let env = Env::new();
    let (good, _) = bundles(&env);
    let s = Serve::start(&env, "srv.db", &["--token-file", "token"]);
    let r = client()
        .post(format!(
            "{}/api/v1/airgap/bundles?file=good.json&force=false&force=true",
            s.url
        ))
        .bearer_auth(TOKEN)
        .body(std::fs::read(&good).unwrap())
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().unwrap();
    assert_eq!(v["error"], "repeated-parameter", "{v}");
    assert!(v["message"].as_str().unwrap().contains("force"), "{v}");
    assert_eq!(
        s.status("/api/v1/scheduler/chain/verify?tenantId=t1", true),
        404,
        "nothing was imported"
    );
    assert_eq!(
        s.status(
            "/api/v1/scheduler/chain/verify?tenantId=t1&tenantId=t2",
            true
        ),
        400
    );
    let r = client()
        .get(format!("{}/metrics", s.url))
        .header("authorization", format!("bearer {TOKEN}"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let m = r.text().unwrap();
    assert_eq!(
        sample(&m, "airlock_serve_job_runs_total{job=\"verify\"}"),
        1.0
    );
    assert_eq!(
        sample(&m, "airlock_serve_job_failures_total{job=\"verify\"}"),
        0.0
    );
    assert_eq!(sample(&m, "airlock_chains_failing"), 0.0);
    assert_eq!(s.stop(), 0);
}

/// Tenant ids read from the store reach the log escaped: a store written by another process (or a
/// tampered file) cannot put a bidi override or an escape sequence raw into serve's log.
#[test]
fn failing_tenants_from_the_store_are_logged_escaped() {
    let env = Env::new();
    let (good, _) = bundles(&env);
    let o = env.run("srv.db", &["jobs", "import", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let conn = rusqlite::Connection::open(env.path("srv.db")).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' AND p.name = 'tenant_id'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let evil = "t1\u{202e}evil\u{1b}[31m";
    for t in &tables {
        conn.execute(
            &format!("UPDATE {t} SET tenant_id = ?1 WHERE tenant_id = 't1'"),
            [evil],
        )
        .unwrap();
    }
    conn.execute(
        "UPDATE scheduler_log SET payload = '{\"n\":9}' WHERE seq = 1",
        [],
    )
    .unwrap();
    drop(conn);
    let log = std::fs::File::create(env.path("serve.log")).unwrap();
    let s = Serve(common::Server::spawn(
        env.cmd(
            "srv.db",
            &["serve", "--listen", "127.0.0.1:0", "--token-file", "token"],
        )
        .stderr(log),
    ));
    // The broken chain is a gauge that holds until a verification passes (the alert keys on it).
    let m = client()
        .get(format!("{}/metrics", s.url))
        .header("authorization", format!("bearer {TOKEN}"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(sample(&m, "airlock_chains_failing"), 1.0, "{m}");
    assert_eq!(s.stop(), 0);
    let log = std::fs::read_to_string(env.path("serve.log")).unwrap();
    assert!(log.contains("1 failing: t1\\u{202e}evil\\x1b[31m"), "{log}");
    assert!(
        !log.contains('\u{202e}') && !log.contains('\u{1b}'),
        "{log}"
    );
}

/// Every alert rule shipped has an entry in the runbook of docs/serve.md (the rules' descriptions
/// send the operator there).
#[test]
fn every_alert_rule_has_a_runbook_entry() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read_to_string(root.join("deploy/prometheus/airlock-rules.yml")).unwrap();
    let docs = std::fs::read_to_string(root.join("docs/serve.md")).unwrap();
    let runbook = docs
        .split_once("\n## Runbook\n")
        .expect("docs/serve.md has a ## Runbook section")
        .1;
    let runbook = runbook.split("\n## ").next().unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 5, "{alerts:?}");
    for a in alerts {
        assert!(
            runbook.contains(&format!("\n### {a}\n")),
            "no runbook entry for {a}"
        );
    }
}

/// A ledger another process holds open for writing is 503 `ledger-busy` (retry later), not a 500
/// that blames this machine; the append succeeds once the other writer has let go.
#[test]
fn a_ledger_another_process_writes_is_busy_not_an_internal_error() {
    let env = Env::new();
    let cfg = env.path("airlock.yaml");
    let served = env.path("ledgers");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(&cfg, format!("ledger:\n  dir: {}\n", served.display())).unwrap();
    let log = served.join("gate-1.alwl");
    append_local(&env, &log, "gate-1", &created(1, 2));
    let s = serve_hub(&env, &cfg);
    let other_writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&log)
        .unwrap();
    other_writer.try_lock().unwrap();
    let (status, v) = post_event(&s, "gate-1", created(2, 2), true);
    assert_eq!(
        (status, v["error"].as_str()),
        (503, Some("ledger-busy")),
        "{v}"
    );
    drop(other_writer);
    let (status, v) = post_event(&s, "gate-1", created(2, 2), true);
    assert_eq!((status, v["lsn"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(s.stop(), 0);
}

// ---------------------------------------------------------------- stopping

/// `airlock serve` with stderr kept: the child (stdout already read) and its URL.
fn start_logged(env: &Env, db: &str, extra: &[&str]) -> (Child, String) {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = env
        .cmd(db, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = announced_url(&mut child);
    (child, url)
}

/// What an exited child wrote to stderr.
fn stderr_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child process by its id.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Tenants in `db`: `copies` copies of tenant `big`'s chain under other tenant ids (a chain link
/// does not cover the tenant id, so each copy verifies), as many rows to verify as that many
/// imports, written in seconds.
fn copy_chain(env: &Env, db: &str, copies: usize) {
    let conn = rusqlite::Connection::open(env.path(db)).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for k in 1..=copies {
        let t = format!("big-{k}");
        conn.execute(
            "INSERT INTO scheduler_log (tenant_id, seq, t_hlc, job_id, action, prev_chain_link,
                 chain_link, payload, created_at)
             SELECT ?1, seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload, created_at
             FROM scheduler_log WHERE tenant_id = 'big'",
            [&t],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO chain_heads (tenant_id, head_chain_link, head_hlc, length, updated_at)
             SELECT ?1, head_chain_link, head_hlc, length, updated_at
             FROM chain_heads WHERE tenant_id = 'big'",
            [&t],
        )
        .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
}

/// A SIGTERM while serve still runs its start-up chain verification (here 1.6 M entries: 20 s
/// and more in a debug build) stops it at once: the verification gives up at its next page,
/// serve exits 0 (a requested stop) and says on stderr that it stopped before it was ready. It
/// used to finish the whole verification first.
#[test]
fn a_signal_during_the_start_up_verification_stops_serve_at_once() {
    let env = Env::new();
    let o = env.run(
        "big.db",
        &[
            "dev",
            "gen-bundle",
            "--tenant",
            "big",
            "--nodes",
            "2",
            "--entries",
            "40000",
            "-o",
            "big.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run("big.db", &["jobs", "import", "big.json"]);
    assert!(o.status.success(), "{}", text(&o));
    copy_chain(&env, "big.db", 39);
    let (mut child, url) = start_logged(&env, "big.db", &[]);
    let ready = client().get(format!("{url}/readyz")).send().unwrap();
    assert_eq!(
        ready.status(),
        503,
        "the start-up verification should still run"
    );
    // Well within the time the whole verification takes (20 s and more in a debug build): what
    // serve used to wait for before exiting.
    let status = common::terminate(&mut child, Duration::from_secs(10));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(
        err.contains("airlock serve: stopped by SIGTERM before it was ready"),
        "{err}"
    );
    // The verification was cut short, not run to its end.
    assert!(!err.contains("verified 40 chain(s)"), "{err}");
}

/// A second SIGTERM while the graceful shutdown waits (here for an upload that stalls) ends serve
/// at once with status 143 (128 + SIGTERM), saying so; the first alone waits for the upload.
#[test]
fn a_second_signal_during_the_shutdown_forces_the_exit() {
    use std::io::Write;
    let env = Env::new();
    let args = ["--token-file", "token", "--body-timeout-ms", "120000"];
    let (mut child, url) = start_logged(&env, "srv.db", &args);
    let mut half = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(
        half,
        "POST /api/v1/airgap/bundles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n{{\"bundleId\""
    )
    .unwrap();
    wait_for("the upload spooling", Duration::from_secs(10), || {
        uploads(&env).len() == 1
    });
    signal(&child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the graceful shutdown should wait for the upload"
    );
    signal(&child, libc::SIGTERM);
    wait_for("the forced exit", Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
    let status = child.wait().unwrap();
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        err.contains("SIGTERM received again during the shutdown: exiting now with status 143"),
        "{err}"
    );
    drop(half);
}

/// A store whose tenant t1 has a chain of 10 entries.
fn small_chain(env: &Env, db: &str) {
    let args = [
        "dev",
        "gen-bundle",
        "--tenant",
        "t1",
        "--entries",
        "10",
        "-o",
        "t1.json",
    ];
    let o = env.run(db, &args);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run(db, &["jobs", "import", "t1.json"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Another process's write lock on the store, as a long `jobs import` into it holds: the store is
/// in WAL mode (serve keeps it so), where `BEGIN IMMEDIATE` is what blocks serve's writes (its
/// reads go on). Rolled back when dropped.
fn hold_write_lock(env: &Env, db: &str) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(env.path(db)).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

/// After a stop with the store locked: nothing in it is damaged, and serve starts (and stops,
/// persisting its HLC state) again.
fn assert_store_intact(env: &Env, db: &str) {
    let conn = rusqlite::Connection::open(env.path(db)).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    let o = env.run(db, &["chain", "verify", "--tenant", "t1"]);
    assert!(o.status.success(), "{}", text(&o));
    let (mut child, url) = start_logged(env, db, &[]);
    wait_for("serve ready again", Duration::from_secs(30), || {
        client()
            .get(format!("{url}/readyz"))
            .send()
            .is_ok_and(|r| r.status() == 200)
    });
    let status = common::terminate(&mut child, Duration::from_secs(20));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(err.contains("persisted the HLC state at"), "{err}");
}

/// A SIGTERM while another process holds the store's write lock (a long import): serve's last HLC
/// persistence tries briefly, says that it did not persist the HLC state because the store is
/// busy, and serve exits 0 at once. It used to wait out the 10 s busy timeout twice (the
/// persistence, then counting its failure): 20 s. The bound is a no-hang bound, not a timing.
#[test]
fn a_stop_while_another_process_holds_the_store_lock_does_not_wait_out_the_busy_timeout() {
    let env = Env::new();
    small_chain(&env, "busy.db");
    let (mut child, url) = start_logged(&env, "busy.db", &[]);
    common::wait_ready(&url);
    let lock = hold_write_lock(&env, "busy.db");
    let status = common::terminate(&mut child, Duration::from_secs(8));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(
        err.contains("the HLC state was not persisted on the way out")
            && err.contains("is busy: locked by another writer")
            && err.contains("airlock is stopping and gave up waiting"),
        "{err}"
    );
    assert!(err.contains("airlock serve stopped"), "{err}");
    drop(lock);
    assert_store_intact(&env, "busy.db");
}

/// A job already waiting for the store's lock when the signal comes (here the start-up
/// verification, counting its run on a store another process locked before serve started) gives
/// up at once instead of waiting out the busy timeout; serve exits 0. It used to take 30 s (the
/// wait in progress, then the last persistence and its count).
#[test]
fn a_job_waiting_for_a_locked_store_gives_up_when_serve_stops() {
    let env = Env::new();
    small_chain(&env, "busy.db");
    let lock = hold_write_lock(&env, "busy.db");
    let (mut child, url) = start_logged(&env, "busy.db", &[]);
    // The verification reads (WAL readers are not blocked), then waits to write its count.
    std::thread::sleep(Duration::from_millis(1000));
    let ready = client().get(format!("{url}/readyz")).send().unwrap();
    assert_eq!(
        ready.status(),
        503,
        "the start-up job should wait for the lock"
    );
    let status = common::terminate(&mut child, Duration::from_secs(8));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(
        err.contains("the HLC state was not persisted on the way out"),
        "{err}"
    );
    drop(lock);
    assert_store_intact(&env, "busy.db");
}

/// The notification runner's store work is under serve's cutoff too: with a delivery due and the
/// store locked by another process from the start, the runner waits for the lock (to record the
/// due deliveries, to claim one); a stop makes it give up at once (the delivery stays pending for
/// the next run) instead of serve waiting for the runner's 10 s busy timeout.
#[test]
fn a_stop_while_the_notification_runner_waits_for_a_locked_store_does_not_wait_it_out() {
    let env = Env::new();
    portable_export(&env, "busy.db");
    std::fs::write(env.path("secret"), "s3cret\n").unwrap();
    std::fs::create_dir_all(env.path("etc")).unwrap();
    std::fs::write(
        env.path("etc/airlock.yaml"),
        format!(
            "notifications:\n  pollInterval: \"00:00:01\"\n  webhooks:\n    - url: {}\n      secretFile: {}\n",
            "http://127.0.0.1:9/hook",
            env.path("secret").display()
        ),
    )
    .unwrap();
    let lock = hold_write_lock(&env, "busy.db");
    let (mut child, _url) = start_logged(&env, "busy.db", &[]);
    std::thread::sleep(Duration::from_millis(1500));
    let status = common::terminate(&mut child, Duration::from_secs(8));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(err.contains("airlock serve stopped"), "{err}");
    drop(lock);
    let conn = rusqlite::Connection::open(env.path("busy.db")).unwrap();
    // Never claimed, never sent: nothing was delivered or given up on.
    let done: i64 = conn
        .query_row(
            "SELECT count(*) FROM notify_deliveries WHERE status != 'pending'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(done, 0);
}

/// PostgreSQL has no busy timeout: a stop while another transaction holds a lock the last HLC
/// persistence needs (here the clock table, as `LOCK TABLE` would; a long import holds its rows)
/// used to wait for that transaction however long it ran. Now the persistence's `lock_timeout`
/// is serve's cutoff: it says the HLC state was not persisted, and serve exits 0.
#[test]
fn a_stop_while_postgresql_holds_the_clock_lock_does_not_hang() {
    let env = Env::new();
    let db = pg_support::fresh_db();
    let (mut child, url) = start_logged(&env, &db, &[]);
    common::wait_ready(&url);
    let mut other = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    other
        .batch_execute("BEGIN; LOCK TABLE airlock.hlc_state IN EXCLUSIVE MODE")
        .unwrap();
    let status = common::terminate(&mut child, Duration::from_secs(8));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(
        err.contains("the HLC state was not persisted on the way out")
            && err.contains("lock timeout"),
        "{err}"
    );
    other.batch_execute("ROLLBACK").unwrap();
    // The next start persists again.
    let (mut child, _) = start_logged(&env, &db, &[]);
    let status = common::terminate(&mut child, Duration::from_secs(20));
    let err = stderr_of(&mut child);
    assert_eq!(status, 0, "{err}");
    assert!(err.contains("persisted the HLC state at"), "{err}");
}
