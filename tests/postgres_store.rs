//! The PostgreSQL store. Store tests with one body for both stores (`both_stores!`, tests/stores)
//! live with their subject: vectors, merge order independence, conflicts, --force in
//! tests/import_merge.rs; tampering, snapshots, proofs, lifecycle in tests/chain_verify.rs; here
//! the JSONB beside the canonical text, a damaged tail and node logs. Then PostgreSQL itself: the
//! seed schema, URLs, the CLI with `--db postgres://` (chain, audit log, notification queue,
//! metrics), refused URL schemes, a damaged index found by amcheck, concurrent importers in
//! separate processes, a server going away mid-import, and REGIONAL / GLOBAL durability with a
//! streaming standby that survives SIGKILL of the primary.
//!
//! One PostgreSQL cluster for the binary (started on first use), one database per test.

mod chain_support;
mod pg_support;
mod stores;

use airlock::core::chain::verify::verify_chain;
use airlock::core::chain::Action;
use airlock::core::hlc::SystemWallClock;
use airlock::core::import::ImportStatus;
use airlock::core::store::any::AnyStore;
use airlock::core::store::postgres::PgStore;
use airlock::core::store::rules::{append_action, chain_entries, snapshot_now};
use airlock::core::store::scheduler::SchedulerError;
use chain_support::{merge_inputs, opts, synth_bundle};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};
use stores::{imported, kinds_at, TestStore};

both_stores! {
    fn the_jsonb_beside_the_canonical_text_is_checked_too(kind: Kind) {
        // PostgreSQL keeps `payload JSONB` beside the canonical text: a JSONB edited to another
        // value is payload-modified at its position (SQLite has only the text, checked as ever).
        let s = imported(kind, 1000);
        s.edit_log_row(2, r#"payload = '{"kind":"evil"}'"#);
        let r = verify_chain(s.b(), "acme", None).unwrap();
        assert_eq!(kinds_at(&r), vec![("payload-modified".to_string(), Some(2))]);
    }

    fn an_append_onto_a_damaged_tail_is_refused_and_changes_nothing(kind: Kind) {
        let cases = [
            (
                "head entry",
                "UPDATE scheduler_log SET payload = '{\"x\":1}' WHERE tenant_id = 'acme' AND seq = 13",
                "UPDATE airlock.chain_entry SET payload_text = '{\"x\":1}' WHERE tenant_id = 'acme' AND seq = 13",
                "no longer recomputes",
            ),
            (
                "last snapshot",
                "UPDATE batch_snapshot SET merkle_root = '00' || substr(merkle_root, 3) WHERE tenant_id = 'acme' AND from_seq = 8",
                "UPDATE scheduler.batch_snapshot b SET merkle_root = '00' || substr(b.merkle_root, 3)
                 FROM airlock.snapshot_range r WHERE r.snapshot_id = b.id AND r.tenant_id = 'acme' AND r.from_seq = 8",
                "Merkle root does not recompute",
            ),
        ];
        for (what, sqlite, pg, says) in cases {
            let s = imported(kind, 4);
            let job = chain_entries(s.b(), "acme", 0, 1).unwrap()[0].job_id.clone();
            s.exec(sqlite, pg);
            let before = s.dump();
            let err = snapshot_now(s.b(), "acme", 4, None).unwrap_err();
            assert!(matches!(err, SchedulerError::TailDamaged { .. }), "{what}: {err}");
            assert!(err.to_string().contains(says) && err.to_string().contains("backup"), "{what}: {err}");
            let err = append_action(s.b(), "acme", &job, Action::Dequeue, "sched-1", SystemWallClock, 4)
                .unwrap_err();
            assert!(matches!(err, SchedulerError::TailDamaged { .. }), "{what}: {err}");
            assert_eq!(s.dump(), before, "{what}");
        }
    }

    fn node_logs_enqueue_export_and_import_round_trip(kind: Kind) {
        use airlock::core::store::nodelog::{EnqueueOutcome, NewJob};
        use airlock::core::store::rules::{enqueue, export, node_logs};
        let mut s = TestStore::new(kind);
        let job = |p: &str| NewJob {
            payload_json: p.into(),
            partition_key: Some("p1".into()),
            idempotency_key: None,
            origin: "test".into(),
        };
        let jobs = vec![job("{\"b\":2, \"a\":1.0}"), job("{\"x\":\"é\"}"), job("{\"a\":1,\"b\":2}")];
        let out = enqueue(s.b(), "acme", "edge-1", &jobs, SystemWallClock).unwrap();
        assert!(matches!(out[2], EnqueueOutcome::Duplicate { existing_index: 0, .. }));
        let conflict = NewJob { idempotency_key: Some("k".into()), ..job("{\"v\":1}") };
        enqueue(s.b(), "acme", "edge-1", std::slice::from_ref(&conflict), SystemWallClock).unwrap();
        let other = NewJob { payload_json: "{\"v\":2}".into(), ..conflict };
        assert!(enqueue(s.b(), "acme", "edge-1", &[other], SystemWallClock).is_err());
        let logs = node_logs(s.b(), "acme", None).unwrap();
        assert_eq!((logs.len(), logs[0].entries), (1, 3));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        export(s.b(), "acme", None, "edge-1", std::fs::File::create(&path).unwrap(), None).unwrap();
        let r = s.import(&[path], &opts());
        assert_eq!((r.status, r.totals.new), (ImportStatus::Imported, 3));
        let entries = chain_entries(s.b(), "acme", 0, 10).unwrap();
        // The canonical text is what is stored and hashed (JSONB would print `1.0` and reorder).
        assert_eq!(entries[0].payload, "{\"a\":1,\"b\":2}");
        assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
    }
}

// ---------------------------------------------------------------- PostgreSQL only

fn pg() -> PgStore {
    PgStore::connect(&pg_support::fresh_db()).unwrap()
}

#[test]
fn the_seed_tables_are_exactly_as_the_seed_writes_them() {
    let s = pg();
    let mut c = s.client();
    let cols: Vec<String> = c
        .query(
            "SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, '')
             FROM information_schema.columns WHERE table_schema = 'scheduler'
             ORDER BY table_name, ordinal_position",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}.{} {} {} {}",
                r.get::<_, &str>(0),
                r.get::<_, &str>(1),
                r.get::<_, &str>(2),
                r.get::<_, &str>(3),
                r.get::<_, &str>(4)
            )
        })
        .collect();
    let want = [
        "batch_snapshot.id bigint NO nextval('scheduler.batch_snapshot_id_seq'::regclass)",
        "batch_snapshot.snapshot_hlc text NO ",
        "batch_snapshot.from_chain_link text NO ",
        "batch_snapshot.to_chain_link text NO ",
        "batch_snapshot.entry_count integer NO ",
        "batch_snapshot.merkle_root text NO ",
        "batch_snapshot.dsse_envelope jsonb YES ",
        "batch_snapshot.created_at timestamp with time zone NO now()",
        "chain_heads.tenant_id text NO ",
        "chain_heads.head_chain_link text NO ",
        "chain_heads.head_hlc text NO ",
        "chain_heads.updated_at timestamp with time zone NO now()",
        "scheduler_log.id bigint NO nextval('scheduler.scheduler_log_id_seq'::regclass)",
        "scheduler_log.t_hlc text NO ",
        "scheduler_log.job_id text NO ",
        "scheduler_log.action text NO ",
        "scheduler_log.prev_chain_link text YES ",
        "scheduler_log.chain_link text NO ",
        "scheduler_log.payload jsonb NO ",
        "scheduler_log.tenant_id text NO ",
        "scheduler_log.created_at timestamp with time zone NO now()",
    ];
    assert_eq!(cols, want);
    let idx: Vec<String> = c
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'scheduler' ORDER BY indexname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for w in [
        "CREATE INDEX idx_scheduler_log_hlc ON scheduler.scheduler_log USING btree (t_hlc)",
        "CREATE INDEX idx_scheduler_log_job ON scheduler.scheduler_log USING btree (job_id)",
        "CREATE INDEX idx_scheduler_log_tenant_hlc ON scheduler.scheduler_log USING btree (tenant_id, t_hlc)",
    ] {
        assert!(idx.iter().any(|i| i == w), "{w} missing from {idx:?}");
    }
    drop(c);
    assert_eq!(
        s.schema_version().unwrap(),
        airlock::core::store::postgres::latest_schema_version()
    );
}

#[test]
fn urls_with_a_socket_directory_connect_and_bad_ones_say_why() {
    let url = pg_support::fresh_db();
    // Connecting again migrates nothing and works with the ?host= form too.
    let db = url.rsplit('/').next().unwrap();
    let sock = pg_support::shared().socket_dir.display().to_string();
    let alt = format!("postgres://postgres@/{db}?host={sock}");
    for u in [&url, &alt] {
        let s = PgStore::connect(u).unwrap();
        assert_eq!(
            s.schema_version().unwrap(),
            airlock::core::store::postgres::latest_schema_version()
        );
    }
    let e = PgStore::connect("postgresql://postgres:secret@%2Fnonexistent-dir/x")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("cannot connect to PostgreSQL") && !e.contains("secret"),
        "{e}"
    );
    let e = PgStore::connect("postgres://u@h:notaport/x")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("is not a PostgreSQL URL"), "{e}");
}

struct Cli {
    dir: tempfile::TempDir,
    db: String,
}

impl Cli {
    fn new(db: String) -> Cli {
        Cli {
            dir: tempfile::tempdir().unwrap(),
            db,
        }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .env("AIRLOCK_DB", &self.db)
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("AIRLOCK_NODE_ID", "edge-1")
            .current_dir(self.dir.path());
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn every_store_command_runs_against_postgres_through_the_cli() {
    let cli = Cli::new(pg_support::fresh_db());
    let payloads = cli.path("jobs.jsonl");
    std::fs::write(
        &payloads,
        "{\"kind\":\"scan\",\"n\":1}\n{\"kind\":\"scan\",\"n\":2}\n",
    )
    .unwrap();
    cli.ok(&[
        "jobs",
        "enqueue",
        "--tenant",
        "acme",
        "--jsonl",
        payloads.to_str().unwrap(),
    ]);
    let bundle = cli.path("b.json");
    cli.ok(&[
        "jobs",
        "export",
        "--tenant",
        "acme",
        "--output",
        bundle.to_str().unwrap(),
    ]);
    let b = bundle.to_str().unwrap();
    let dry: Value =
        serde_json::from_str(&cli.ok(&["jobs", "import", b, "--dry-run", "--json"])).unwrap();
    assert_eq!(dry["status"], "planned");
    let r: Value =
        serde_json::from_str(&cli.ok(&["jobs", "import", b, "--json", "--batch-size", "1"]))
            .unwrap();
    assert_eq!(r["status"], "imported");
    let again: Value = serde_json::from_str(&cli.ok(&["jobs", "import", b, "--json"])).unwrap();
    assert_eq!(again["status"], "nothing-to-do");
    let show: Value =
        serde_json::from_str(&cli.ok(&["chain", "show", "--tenant", "acme", "--json"])).unwrap();
    let job = show["entries"][0]["jobId"].as_str().unwrap().to_string();
    cli.ok(&[
        "chain", "append", "--tenant", "acme", "--job-id", &job, "--action", "DEQUEUE",
    ]);
    cli.ok(&["chain", "snapshot", "--tenant", "acme"]);
    let proof = cli.path("proof.json");
    cli.ok(&[
        "chain",
        "prove",
        "--tenant",
        "acme",
        "--job-id",
        &job,
        "--output",
        proof.to_str().unwrap(),
    ]);
    cli.ok(&["chain", "verify-proof", proof.to_str().unwrap()]);
    let v: Value =
        serde_json::from_str(&cli.ok(&["chain", "verify", "--tenant", "acme", "--json"])).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["length"].as_u64()),
        (Some(true), Some(3))
    );
    assert!(cli.ok(&["chain", "tenants"]).contains("acme"));
    // --db wins over AIRLOCK_DB.
    let sqlite = cli.path("local.db");
    let o = cli.run(&["--db", sqlite.to_str().unwrap(), "chain", "tenants"]);
    assert!(
        text(&o).contains(&format!("no store at {}", sqlite.display())),
        "{}",
        text(&o)
    );
}

fn series(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
}

#[test]
fn audit_log_notification_queue_and_metrics_live_in_postgres() {
    let db = pg_support::fresh_db();
    let cli = Cli::new(db.clone());
    // The audit log: records appended by the engine (as the console does), listed and verified by
    // the CLI from PostgreSQL; an edited record is found.
    let store = PgStore::connect(&db).unwrap();
    for (action, n) in [("trust", 1), ("import", 2), ("cancel", 3)] {
        airlock::core::audit::append(&store, action, serde_json::json!({ "n": n })).unwrap();
    }
    let listed: Value = serde_json::from_str(&cli.ok(&["audit", "list", "--json"])).unwrap();
    let actions: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["cancel", "import", "trust"]);
    let v: Value = serde_json::from_str(&cli.ok(&["audit", "verify", "--json"])).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["records"].as_u64()),
        (Some(true), Some(3))
    );
    store
        .client()
        .batch_execute("UPDATE airlock.audit_log SET inputs = '{\"n\":20}' WHERE seq = 1")
        .unwrap();
    let o = cli.run(&["audit", "verify", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["firstBreak"]["seq"], 1);

    // A portable export records its emission in PostgreSQL; `notify run` delivers it; the queue
    // and the metrics read back from the same database.
    for p in ["{\"a\":1}", "{\"a\":2}"] {
        cli.ok(&["jobs", "enqueue", "-t", "acme", p]);
    }
    let out = cli.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let export: Value = serde_json::from_str(&cli.ok(&[
        "jobs",
        "export",
        "--tenant",
        "acme",
        "--portable",
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let emissions: Value =
        serde_json::from_str(&cli.ok(&["notify", "emissions", "--json"])).unwrap();
    assert_eq!(emissions[0]["exportId"], export["exportId"], "{emissions}");
    let (url, got) = stores::webhook_receiver();
    std::fs::write(cli.path("secret"), "s3cret\n").unwrap();
    let secret = cli.path("secret");
    let run = [
        "notify",
        "run",
        "--once",
        "--webhook",
        &url,
        "--webhook-secret-file",
        secret.to_str().unwrap(),
    ];
    cli.ok(&run);
    assert_eq!(got.load(std::sync::atomic::Ordering::SeqCst), 1);
    let delivered: Value =
        serde_json::from_str(&cli.ok(&["notify", "list", "--status", "delivered", "--json"]))
            .unwrap();
    assert_eq!(delivered.as_array().unwrap().len(), 1, "{delivered}");
    let id = delivered[0]["deliveryId"].to_string();
    assert!(cli.ok(&["notify", "show", &id]).contains("delivered"));
    let o = cli.run(&["notify", "retry", &id]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("only a dead-lettered delivery"),
        "{}",
        text(&o)
    );
    // Nothing new to send: a second run sends nothing.
    cli.ok(&run);
    assert_eq!(got.load(std::sync::atomic::Ordering::SeqCst), 1);

    let metrics = cli.ok(&["metrics"]);
    assert_eq!(series(&metrics, "airgap_offline_enqueues_total"), 2.0);
    assert_eq!(series(&metrics, "airgap_bundles_exported_total"), 1.0);
    assert_eq!(series(&metrics, "airlock_notify_emissions_total"), 1.0);
    assert_eq!(
        series(
            &metrics,
            "airlock_notify_deliveries{target=\"webhook\",status=\"delivered\"}"
        ),
        1.0
    );
    assert_eq!(
        series(&metrics, "airlock_notify_delivery_duration_seconds_count"),
        1.0
    );
    // The samples are rows of PostgreSQL's airlock.metric_samples.
    let rows: i64 = store
        .client()
        .query_one("SELECT COUNT(*) FROM airlock.metric_samples", &[])
        .unwrap()
        .get(0);
    assert!(rows > 0);
}

/// The counterpart of SQLite's quick_check: a damaged index (a zeroed B-tree page, written while
/// the server was stopped) is found by amcheck before an import writes anything; REINDEX mends it.
#[test]
fn a_damaged_index_is_refused_before_an_import_writes_anything() {
    let cluster = pg_support::Cluster::init(&["fsync=off", "full_page_writes=off"]);
    let db = cluster.create_db();
    let mut store = AnyStore::Postgres(PgStore::connect(&db).unwrap());
    let r = store.import(&merge_inputs(), &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    let file: String = {
        let AnyStore::Postgres(pg) = &store else {
            unreachable!()
        };
        let mut c = pg.client();
        let ext: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM pg_extension WHERE extname = 'amcheck'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(ext, 1, "migration 5 creates amcheck");
        c.batch_execute("CHECKPOINT").unwrap();
        c.query_one(
            "SELECT pg_relation_filepath('airlock.chain_entry_pkey')",
            &[],
        )
        .unwrap()
        .get(0)
    };
    drop(store);
    cluster.stop();
    let path = cluster.data_dir().join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() >= 2 * 8192, "the index has a leaf page");
    bytes[8192..2 * 8192].fill(0);
    std::fs::write(&path, bytes).unwrap();
    let cluster = cluster.start_again();
    let mut store = AnyStore::Postgres(PgStore::connect(&db).unwrap());
    let count = |store: &AnyStore| -> i64 {
        let AnyStore::Postgres(pg) = store else {
            unreachable!()
        };
        let n = pg
            .client()
            .query_one("SELECT COUNT(*) FROM scheduler.scheduler_log", &[]);
        n.unwrap().get(0)
    };
    let before = count(&store);
    let e = store
        .import(&merge_inputs(), &opts())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bt_index_check") && e.contains("chain_entry_pkey") && e.contains("REINDEX"),
        "{e}"
    );
    assert_eq!(count(&store), before, "nothing was written");
    {
        let AnyStore::Postgres(pg) = &store else {
            unreachable!()
        };
        pg.client()
            .batch_execute("REINDEX INDEX airlock.chain_entry_pkey")
            .unwrap();
    }
    let r = store.import(&merge_inputs(), &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::NothingToDo);
    drop(store);
    cluster.stop();
}

#[test]
fn unsupported_or_unreachable_urls_are_errors_that_create_nothing() {
    for db in ["mysql://root@db/airlock", "sqlite:///tmp/x.db"] {
        let cli = Cli::new(db.into());
        let o = cli.run(&["chain", "tenants"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("does not support"), "{}", text(&o));
        let left: Vec<_> = std::fs::read_dir(cli.dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{db} created {left:?}");
    }
    // A PostgreSQL URL is never taken as a file path (no `postgresql:` directory appears).
    let cli = Cli::new("postgresql://postgres@%2Fnonexistent-airlock-dir/x".into());
    let o = cli.run(&["jobs", "enqueue", "--tenant", "t", "{}"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot connect to PostgreSQL"),
        "{}",
        text(&o)
    );
    assert!(!cli.path("postgresql:").exists());
    let left: Vec<_> = std::fs::read_dir(cli.dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // The server's own reason, not a bare "db error".
    let cli = Cli::new(pg_support::shared().url("no_such_database_here"));
    let o = cli.run(&["chain", "tenants"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("database \"no_such_database_here\" does not exist"),
        "{}",
        text(&o)
    );
    // A URL missing a slash is refused, not a SQLite store under a `postgres:` folder.
    let cli = Cli::new("postgres:/x".into());
    let o = cli.run(&["jobs", "enqueue", "--tenant", "t", "{}"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not a PostgreSQL URL"), "{}", text(&o));
    let left: Vec<_> = std::fs::read_dir(cli.dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A password holding a `?` (not percent-encoded): the driver sends all of it (`se?cret`), but the
/// message cut the query off first and so found no user part to mask: "cannot connect to
/// PostgreSQL at postgres://u:se?cret@...". Masked now, as a query's `password=` is.
#[test]
fn a_password_holding_a_question_mark_is_not_shown() {
    let url = "postgres://u:S3?cretPW@%2Fnonexistent-airlock-dir/db?password=Qu3ryPW";
    let cli = Cli::new(url.into());
    let o = cli.run(&["chain", "tenants"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot connect to PostgreSQL at postgres://u:***@%2Fnonexistent-airlock-dir/db?password=***"),
        "{}",
        text(&o)
    );
    for secret in ["S3", "cretPW", "Qu3ryPW"] {
        assert!(!text(&o).contains(secret), "{secret}: {}", text(&o));
    }
}

fn import_json(cli: &Cli, files: &[PathBuf]) -> std::process::Child {
    let mut args = vec!["jobs".to_string(), "import".into(), "--json".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cli.cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_importers_make_one_chain_with_every_entry_once() {
    let db = pg_support::fresh_db();
    let cli = Cli::new(db.clone());
    let bundles: Vec<PathBuf> = (0..4)
        .map(|k| {
            let p = cli.path(&format!("b{k}.json"));
            synth_bundle(&p, "acme", 3, 400, 1_767_614_400_000 + k * 7, 100 + k);
            p
        })
        .collect();
    // Four processes, disjoint bundles, one tenant, at once.
    let children: Vec<_> = bundles
        .iter()
        .map(|b| import_json(&cli, std::slice::from_ref(b)))
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let s = PgStore::connect(&db).unwrap();
    let r = verify_chain(&s, "acme", None).unwrap();
    assert!(r.ok, "{:?}", r.findings);
    assert_eq!(r.length, 4 * 1200);
    assert_eq!(r.snapshots.len(), 4, "one snapshot per 1000 entries");
    // Two processes importing the same bundles: each entry once.
    let db2 = pg_support::fresh_db();
    let cli2 = Cli::new(db2.clone());
    let children: Vec<_> = (0..2).map(|_| import_json(&cli2, &bundles[..2])).collect();
    let mut statuses = Vec::new();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        statuses.push(v["status"].as_str().unwrap().to_string());
    }
    statuses.sort();
    assert_eq!(statuses, ["imported", "nothing-to-do"]);
    let s2 = PgStore::connect(&db2).unwrap();
    let r = verify_chain(&s2, "acme", None).unwrap();
    assert!(r.ok);
    assert_eq!(r.length, 2 * 1200);
}

#[test]
fn a_server_going_away_mid_import_rolls_back_and_says_so() {
    let db = pg_support::fresh_db();
    let cli = Cli::new(db.clone());
    let first = cli.path("first.json");
    synth_bundle(&first, "acme", 1, 10, 1_767_614_400_000, 1);
    cli.ok(&["jobs", "import", first.to_str().unwrap()]);
    let big = cli.path("big.json");
    synth_bundle(&big, "acme", 4, 8_000, 1_767_614_500_000, 2);
    let child = import_json(&cli, std::slice::from_ref(&big));
    let dbname = db.rsplit('/').next().unwrap().to_string();
    let mut admin = pg_support::shared().admin();
    let start = std::time::Instant::now();
    let killed = loop {
        let n: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = $1 AND application_name = 'airlock' AND xact_start IS NOT NULL
                   AND query LIKE 'COPY%'",
                &[&dbname],
            )
            .unwrap()
            .get(0);
        if n > 0 {
            break true;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let o = child.wait_with_output().unwrap();
    assert!(
        killed,
        "the import finished before its connection could be cut: {}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("PostgreSQL") && err.contains("rolled back"),
        "{err}"
    );
    let s = PgStore::connect(&db).unwrap();
    let r = verify_chain(&s, "acme", None).unwrap();
    assert!(r.ok);
    assert_eq!(r.length, 10, "nothing of the cut import was kept");
    let mut c = s.client();
    let rows: i64 = c
        .query_one("SELECT count(*) FROM scheduler.scheduler_log", &[])
        .unwrap()
        .get(0);
    let imports: i64 = c
        .query_one("SELECT count(*) FROM airlock.imports", &[])
        .unwrap()
        .get(0);
    assert_eq!((rows, imports), (10, 1));
}

#[test]
fn regional_confirmations_commit_on_the_primary_and_global_needs_a_sync_standby() {
    use airlock::core::store::postgres::durability::{confirm, confirmed, Level};
    let s = pg();
    let mut c = s.client();
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 40]).collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let a = confirm(&mut c, Level::Regional, &refs[..3]).unwrap();
    let b = confirm(&mut c, Level::Regional, &refs).unwrap();
    assert!(b.watermark > a.watermark);
    assert_eq!(b.frames, 5);
    assert_eq!(confirmed(&mut c, Level::Regional).unwrap().len(), 5);
    let e = confirm(&mut c, Level::Global, &refs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("synchronous standby"), "{e}");
    assert!(confirmed(&mut c, Level::Global).unwrap().is_empty());
}

#[test]
fn global_confirmations_survive_sigkill_of_the_primary_and_promotion_of_the_standby() {
    use airlock::core::store::postgres::durability::{confirm, confirmed, Level};
    let primary = pg_support::Cluster::init(&["wal_level=replica"]);
    let url = primary.create_db();
    let store = PgStore::connect(&url).unwrap();
    let standby = primary.standby(&["hot_standby=on"]);
    // Synchronous only once the standby exists (before, every commit would wait for it).
    primary.require_sync_standby();
    let mut c = store.client();
    let mut acknowledged = Vec::new();
    let mut last = None;
    for batch in 0..20u32 {
        let frames: Vec<Vec<u8>> = (0..10u32)
            .map(|i| format!("frame {batch}.{i}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let conf = confirm(&mut c, Level::Global, &refs).unwrap();
        assert!(Some(conf.watermark) > last);
        last = Some(conf.watermark);
        acknowledged.extend(conf.digests.iter().copied().zip(frames));
    }
    drop(c);
    primary.kill9();
    standby.promote();
    let db = url.rsplit('/').next().unwrap();
    let promoted = PgStore::connect(&standby.url(db)).unwrap();
    let mut c = promoted.client();
    let kept: std::collections::HashMap<[u8; 32], Vec<u8>> = confirmed(&mut c, Level::Global)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(kept.len(), acknowledged.len());
    for (d, frame) in &acknowledged {
        assert_eq!(
            kept.get(d),
            Some(frame),
            "a GLOBAL-acknowledged event is missing"
        );
    }
    // The promoted standby is the new primary: REGIONAL confirmations go on.
    confirm(&mut c, Level::Regional, &[b"after failover".as_slice()]).unwrap();
}

/// A writer role that may not run amcheck (its functions are for superusers unless granted)
/// imports and appends: the index check is skipped with a warning, not reported as damage.
#[test]
fn a_writer_role_without_amcheck_rights_is_not_told_the_store_is_damaged() {
    let db = pg_support::fresh_db();
    // The superuser migrates (and installs amcheck) first.
    drop(PgStore::connect(&db).unwrap());
    let name = db.rsplit('/').next().unwrap().to_string();
    let role = format!("writer_{name}");
    {
        let admin = PgStore::connect(&db).unwrap();
        let mut c = admin.client();
        c.batch_execute(&format!(
            "CREATE ROLE {role} LOGIN;
             GRANT CONNECT ON DATABASE {name} TO {role};
             GRANT USAGE ON SCHEMA scheduler, airlock TO {role};
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA scheduler, airlock TO {role};
             GRANT USAGE ON ALL SEQUENCES IN SCHEMA scheduler, airlock TO {role};"
        ))
        .unwrap();
    }
    let as_writer = db.replacen(
        "postgresql://postgres@",
        &format!("postgresql://{role}@"),
        1,
    );
    let mut store = AnyStore::Postgres(PgStore::connect(&as_writer).unwrap());
    let r = store.import(&merge_inputs(), &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
}

/// A `scheduler.batch_snapshot` row whose `airlock.snapshot_range` row (its tenant and first
/// position, which the seed's table lacks) was deleted dropped out of the tenant's snapshots: `chain
/// verify` passed without it and the next snapshot covered its entries again. It is the tenant's
/// damaged snapshot row (found by its first link): a `schema-invalid` finding, counted among the
/// snapshots, and appends are refused until it is repaired.
#[test]
fn a_snapshot_whose_range_row_is_gone_is_damage_not_forgotten() {
    let s = imported(stores::Kind::Postgres, 4);
    let before = verify_chain(s.b(), "acme", None).unwrap();
    assert!(before.ok && before.snapshots.len() >= 2, "{before:?}");
    let n = before.snapshots.len();
    s.exec(
        "",
        "DELETE FROM airlock.snapshot_range WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM airlock.snapshot_range)",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert!(!r.ok);
    assert_eq!(kinds_at(&r), vec![("schema-invalid".to_string(), None)]);
    assert!(
        r.findings[0]
            .message
            .contains("airlock.snapshot_range has no row for it"),
        "{:?}",
        r.findings
    );
    assert_eq!(r.snapshots.len(), n, "{:?}", r.snapshots);
    assert_eq!(
        r.snapshots
            .iter()
            .filter(|c| c.unreadable.is_some())
            .count(),
        1
    );
    let taken = snapshot_now(s.b(), "acme", 4, None);
    assert!(taken.is_err(), "{taken:?}");
    let again = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(again.snapshots.len(), n, "nothing was snapshotted again");
}

/// A row written straight into the seed's `scheduler.scheduler_log` for a tenant (no
/// `airlock.chain_entry`, so no chain position) is in the log the seed's consumers read, but no
/// chain read saw it: `chain verify` said the chain verified. It is an `entry-inserted` finding
/// naming the log row.
#[test]
fn a_log_row_written_outside_the_chain_is_an_inserted_entry() {
    let s = imported(stores::Kind::Postgres, 4);
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
    s.exec(
        "",
        "INSERT INTO scheduler.scheduler_log (t_hlc, job_id, action, prev_chain_link, chain_link, payload, tenant_id)
         SELECT t_hlc, job_id, 'CANCEL', chain_link, repeat('a', 64), payload, tenant_id
         FROM scheduler.scheduler_log WHERE tenant_id = 'acme' ORDER BY id DESC LIMIT 1",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert!(!r.ok);
    assert_eq!(kinds_at(&r), vec![("entry-inserted".to_string(), None)]);
    assert!(
        r.findings[0].message.contains("in no chain position"),
        "{:?}",
        r.findings
    );
    // Another tenant's chain is not concerned.
    let other = verify_chain(s.b(), "nobody", None).unwrap();
    assert!(other.findings.is_empty(), "{:?}", other.findings);
}
