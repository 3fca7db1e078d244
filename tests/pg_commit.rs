//! The PostgreSQL store's COMMIT, when it does not simply succeed, and a database that is not
//! airlock's:
//!
//! - a connection lost while COMMIT is in flight (the backend terminated, the server stopped) is
//!   "outcome unknown", never "rolled back": the commit had landed each time;
//! - a COMMIT waiting for a synchronous standby that is not there ends at its deadline
//!   (`AIRLOCK_PG_COMMIT_TIMEOUT`, `PgStore::set_commit_timeout`) with "committed on the primary,
//!   not confirmed by a standby";
//! - after a COMMIT for which a cancel request was sent, the store goes on with a new connection
//!   (the request could still arrive and cancel the next statement on the old one);
//! - tables in schemas `scheduler` / `airlock` that airlock did not make are refused by name, on a
//!   new database and where a pending migration step would create them.
//!
//! A COMMIT waits for a standby that does not exist in the cluster of [`sync_cluster`]:
//! `synchronous_standby_names = 'nonexistent'` with `synchronous_commit = local` for the cluster
//! and `on` for a test's database once its schema is made (`ALTER DATABASE ... SET`).

mod chain_support;
mod pg_support;

use airlock::core::chain::verify::verify_chain;
use airlock::core::store::backend::{Backend, TxKind};
use airlock::core::store::postgres::{PgError, PgStore};
use airlock::core::store::StoreError;
use chain_support::synth_bundle;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A cluster whose synchronous standby never answers (for databases that ask for it).
fn sync_cluster() -> &'static pg_support::Cluster {
    static C: OnceLock<pg_support::Cluster> = OnceLock::new();
    C.get_or_init(|| {
        pg_support::Cluster::init(&[
            "fsync=off",
            "full_page_writes=off",
            "synchronous_standby_names='nonexistent'",
            "synchronous_commit=local",
        ])
    })
}

fn db_name(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_string()
}

/// Makes every later session on `url`'s database wait for the missing standby at COMMIT (`on`),
/// or not (`local`).
fn sync_commit(url: &str, setting: &str) {
    sync_cluster()
        .admin()
        .batch_execute(&format!(
            "ALTER DATABASE {} SET synchronous_commit = {setting}",
            db_name(url)
        ))
        .unwrap();
}

/// The airlock binary on `db`, in `dir`.
fn airlock(db: &str, dir: &Path, timeout: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.args(args)
        .env("AIRLOCK_DB", db)
        .env("AIRLOCK_PG_COMMIT_TIMEOUT", timeout)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("AIRLOCK_NODE_ID", "edge-1")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` at most `limit` (a COMMIT without a deadline would wait forever): kills it
/// and fails past that.
fn finish_within(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let o = child.wait_with_output().unwrap();
            panic!("still running after {limit:?}, killed: {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn import_status(db: &str, dir: &Path, bundle: &Path) -> String {
    let o = airlock(
        db,
        dir,
        "",
        &["jobs", "import", "--json", bundle.to_str().unwrap()],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["status"].as_str().unwrap().to_string()
}

fn chain_length(db: &str) -> u64 {
    let s = PgStore::connect(db).unwrap();
    let r = verify_chain(&s, "acme", None).unwrap();
    assert!(r.ok, "{r:?}");
    r.length
}

/// A database of [`sync_cluster`] holding one imported bundle of 10 entries, and a second bundle
/// of 3 x 20 entries to import (returned with the working directory).
fn store_with_a_second_bundle() -> (String, tempfile::TempDir, PathBuf) {
    let db = sync_cluster().create_db();
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.json");
    synth_bundle(&first, "acme", 1, 10, 1_767_614_400_000, 1);
    assert_eq!(import_status(&db, dir.path(), &first), "imported");
    let second = dir.path().join("second.json");
    synth_bundle(&second, "acme", 3, 20, 1_767_614_500_000, 2);
    (db, dir, second)
}

/// Waits until a session of database `db` waits for synchronous replication; returns its pid.
fn waiting_for_sync_rep(db: &str) -> i32 {
    let mut admin = sync_cluster().admin();
    let start = Instant::now();
    loop {
        let row = admin
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'SyncRep' LIMIT 1",
                &[&db_name(db)],
            )
            .unwrap();
        if let Some(r) = row {
            return r.get(0);
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no COMMIT waited for the synchronous standby"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_connection_lost_during_commit_says_the_outcome_is_unknown_and_the_import_had_landed() {
    let (db, dir, second) = store_with_a_second_bundle();
    sync_commit(&db, "on");
    // No deadline: the COMMIT waits until its backend is terminated.
    let child = airlock(
        &db,
        dir.path(),
        "0",
        &["jobs", "import", "--json", second.to_str().unwrap()],
    )
    .spawn()
    .unwrap();
    let pid = waiting_for_sync_rep(&db);
    let mut admin = sync_cluster().admin();
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    let o = finish_within(child, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for says in [
        "lost while COMMIT was in flight",
        "outcome is unknown",
        "may or may not have been kept",
        "nothing to do",
        "airlock chain verify",
        // PostgreSQL's own words before it closed the connection.
        "committed locally",
    ] {
        assert!(err.contains(says), "{says:?} missing: {err}");
    }
    assert!(!err.contains("rolled back"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // It had landed: the old "rolled back, nothing kept" was wrong. Run again: nothing to do.
    sync_commit(&db, "local");
    assert_eq!(chain_length(&db), 10 + 60);
    assert_eq!(import_status(&db, dir.path(), &second), "nothing-to-do");
    assert_eq!(chain_length(&db), 10 + 60);
}

#[test]
fn a_commit_waiting_for_a_missing_standby_ends_at_its_deadline_committed_on_the_primary() {
    let (db, dir, second) = store_with_a_second_bundle();
    sync_commit(&db, "on");
    let start = Instant::now();
    let child = airlock(
        &db,
        dir.path(),
        "2",
        &["jobs", "import", "--json", second.to_str().unwrap()],
    )
    .spawn()
    .unwrap();
    let o = finish_within(child, Duration::from_secs(90));
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(90), "{took:?}");
    for says in [
        "still waiting after 2 s",
        "synchronous standby",
        "\"nonexistent\"",
        "standby down or unreachable",
        "committed and visible on this primary",
        "no synchronous standby confirmed it",
        "nothing to do",
        "AIRLOCK_PG_COMMIT_TIMEOUT",
        // PostgreSQL's warning: the wait was cancelled, the transaction had committed locally.
        "canceling wait for synchronous replication",
    ] {
        assert!(err.contains(says), "{says:?} missing: {err}");
    }
    assert!(
        !err.contains("rolled back") && !err.contains("panicked"),
        "{err}"
    );
    sync_commit(&db, "local");
    assert_eq!(chain_length(&db), 10 + 60);
    assert_eq!(import_status(&db, dir.path(), &second), "nothing-to-do");
}

/// A migrated store whose sessions (from now on) wait at COMMIT for the missing standby, with a
/// COMMIT deadline of 1 s.
fn store_waiting_at_commit() -> (String, PgStore) {
    let db = sync_cluster().create_db();
    drop(PgStore::connect(&db).unwrap());
    sync_commit(&db, "on");
    let mut store = PgStore::connect(&db).unwrap();
    store.set_commit_timeout(Some(Duration::from_secs(1)));
    (db, store)
}

#[test]
fn the_commit_deadline_is_set_on_the_store_and_a_bad_setting_is_refused() {
    let (db, store) = store_waiting_at_commit();
    let mut tx = store.begin(TxKind::Write).unwrap();
    tx.save_clock_state("edge-9", (1_767_614_400_000, 7))
        .unwrap();
    let start = Instant::now();
    let e = tx.commit().unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(
        matches!(e, StoreError::Postgres(PgError::CommitNotReplicated { .. })),
        "{e}"
    );
    // Committed and visible on the primary (here and in a new session), the store usable.
    let other = PgStore::connect(&db).unwrap();
    for s in [&store, &other] {
        let mut tx = s.begin(TxKind::Read).unwrap();
        assert_eq!(tx.load_clock_state().unwrap(), Some((1_767_614_400_000, 7)));
    }
    let o = airlock(
        &db,
        tempfile::tempdir().unwrap().path(),
        "soon",
        &["chain", "tenants"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        err.contains("AIRLOCK_PG_COMMIT_TIMEOUT=\"soon\"")
            && err.contains("whole number of seconds"),
        "{err}"
    );
}

/// The server process of `store`'s connection (from a new lease of it).
fn backend_pid(store: &PgStore) -> i32 {
    store
        .client()
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0)
}

#[test]
fn after_a_cancelled_commit_the_store_goes_on_with_a_new_connection() {
    // A cancel request sent for a COMMIT past its deadline may arrive after COMMIT returned and
    // cancel the next statement on that connection: the store (kept for hours by `airlock serve`)
    // must not run another statement on it.
    let (db, store) = store_waiting_at_commit();
    let before = backend_pid(&store);
    let mut tx = store.begin(TxKind::Write).unwrap();
    tx.save_clock_state("edge-9", (1_767_614_400_000, 7))
        .unwrap();
    let e = tx.commit().unwrap_err();
    assert!(
        matches!(e, StoreError::Postgres(PgError::CommitNotReplicated { .. })),
        "{e}"
    );
    // New sessions no longer wait for the missing standby (the old one would).
    sync_commit(&db, "local");
    let after = backend_pid(&store);
    assert_ne!(
        before, after,
        "the cancelled COMMIT's connection was used again"
    );
    // Its session ended (a moment after the client closed it).
    let mut admin = sync_cluster().admin();
    let start = Instant::now();
    while admin
        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&before])
        .unwrap()
        .is_some()
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the old connection was left open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same store goes on: writes and reads, on the one new connection.
    for i in 0..5u32 {
        let mut tx = store.begin(TxKind::Write).unwrap();
        tx.save_clock_state("edge-9", (1_767_614_400_001, i))
            .unwrap();
        tx.commit().unwrap();
        let mut tx = store.begin(TxKind::Read).unwrap();
        assert_eq!(tx.load_clock_state().unwrap(), Some((1_767_614_400_001, i)));
        drop(tx);
    }
    assert_eq!(backend_pid(&store), after);
    assert_eq!(
        store.schema_version().unwrap(),
        airlock::core::store::postgres::latest_schema_version()
    );
}

#[test]
fn a_server_stopped_during_commit_is_outcome_unknown_and_the_commit_is_there_after_restart() {
    // Its own cluster: this test stops it.
    let cluster = pg_support::Cluster::init(&[
        "fsync=off",
        "synchronous_standby_names='nonexistent'",
        "synchronous_commit=local",
    ]);
    let db = cluster.create_db();
    drop(PgStore::connect(&db).unwrap());
    cluster
        .admin()
        .batch_execute(&format!(
            "ALTER DATABASE {} SET synchronous_commit = on",
            db_name(&db)
        ))
        .unwrap();
    let mut store = PgStore::connect(&db).unwrap();
    store.set_commit_timeout(None);
    let committing = std::thread::spawn(move || {
        let mut tx = store.begin(TxKind::Write).unwrap();
        tx.save_clock_state("edge-9", (1_767_614_400_000, 3))
            .unwrap();
        tx.commit().map_err(|e| (e.to_string(), e))
    });
    let mut admin = cluster.admin();
    let start = Instant::now();
    while admin
        .query_opt(
            "SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'SyncRep'",
            &[&db_name(&db)],
        )
        .unwrap()
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no COMMIT waited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(admin);
    cluster.stop();
    let (msg, e) = committing.join().unwrap().unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Postgres(PgError::CommitOutcomeUnknown { .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("outcome is unknown") && !msg.contains("rolled back"),
        "{msg}"
    );
    let again = cluster.start_again();
    let mut c = postgres::Client::connect(&again.url(&db_name(&db)), postgres::NoTls).unwrap();
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM airlock.hlc_state WHERE node_id = 'edge-9'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the COMMIT had landed");
}

#[test]
fn a_database_holding_someone_elses_tables_is_refused_by_name_and_left_alone() {
    let url = pg_support::fresh_db();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE SCHEMA scheduler;
         CREATE TABLE scheduler.scheduler_log (id BIGSERIAL PRIMARY KEY, line TEXT);
         CREATE SCHEMA airlock;
         CREATE VIEW airlock.imports AS SELECT 1 AS id;
         CREATE TABLE public.chain_heads (x INT);",
    )
    .unwrap();
    let e = match PgStore::connect(&url) {
        Ok(_) => panic!("a database holding someone else's scheduler_log was taken"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(matches!(e, PgError::Foreign { .. }), "{msg}");
    for says in [
        &format!("database \"{}\"", db_name(&url)),
        "airlock.imports, scheduler.scheduler_log",
        "no airlock.schema_migrations record",
        "nothing was changed",
        "empty database",
    ] {
        assert!(msg.contains(says), "{says:?} missing: {msg}");
    }
    assert!(!msg.contains("already exists"), "{msg}");
    // Nothing was changed: no airlock bookkeeping was left behind.
    let left: Option<String> = c
        .query_one("SELECT to_regclass('airlock.schema_migrations')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(left, None);
    // The CLI says the same and exits non-zero.
    let dir = tempfile::tempdir().unwrap();
    let o = airlock(&url, dir.path(), "", &["chain", "tenants"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("scheduler.scheduler_log"),
        "{}",
        text(&o)
    );
    // Tables elsewhere (public) are no obstacle once airlock's schemas are free.
    c.batch_execute("DROP SCHEMA scheduler CASCADE; DROP SCHEMA airlock CASCADE")
        .unwrap();
    let s = PgStore::connect(&url).unwrap();
    assert_eq!(
        s.schema_version().unwrap(),
        airlock::core::store::postgres::latest_schema_version()
    );
}

/// The schema version of the database at `url` (its `airlock.schema_migrations`).
fn recorded_version(c: &mut postgres::Client) -> i32 {
    c.query_one(
        "SELECT COALESCE(MAX(version), 0) FROM airlock.schema_migrations",
        &[],
    )
    .unwrap()
    .get(0)
}

#[test]
fn a_pending_step_whose_objects_are_already_there_is_refused_by_name_and_changes_nothing() {
    use airlock::core::store::postgres::{latest_schema_version, migrate_database_to};
    let latest = latest_schema_version();
    // An older airlock's database (one step behind); someone then added the column the newest
    // step adds.
    let url = pg_support::fresh_db();
    migrate_database_to(&url, latest - 1).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("ALTER TABLE airlock.notify_deliveries ADD COLUMN claim_token TEXT")
        .unwrap();
    let e = match PgStore::connect(&url) {
        Ok(_) => panic!("the upgrade went ahead over someone else's column"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(matches!(e, PgError::Occupied { .. }), "{msg}");
    for says in [
        &format!("database \"{}\"", db_name(&url)),
        &format!("schema version {}", latest - 1),
        &format!("to version {latest}"),
        "column airlock.notify_deliveries.claim_token",
        "nothing was changed",
        "RENAME COLUMN",
    ] {
        assert!(msg.contains(says), "{says:?} missing: {msg}");
    }
    assert!(!msg.contains("already exists"), "{msg}");
    // Nothing was changed: still one step behind, the step's other column not added.
    assert_eq!(recorded_version(&mut c), latest as i32 - 1);
    let other_column: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.columns
             WHERE table_schema = 'airlock' AND table_name = 'notify_deliveries'
               AND column_name = 'claim_holder'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(other_column, 0);

    // Three steps behind, with a table and a view under names step 4 creates: both named.
    let url = pg_support::fresh_db();
    migrate_database_to(&url, 3).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "CREATE TABLE airlock.exports (id INT);
         CREATE VIEW airlock.audit_log AS SELECT 1 AS x;",
    )
    .unwrap();
    let e = match PgStore::connect(&url) {
        Ok(_) => panic!("the upgrade went ahead over someone else's table"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(
        msg.contains("view airlock.audit_log, table airlock.exports")
            && msg.contains("schema version 3")
            && !msg.contains("already exists"),
        "{msg}"
    );
    assert_eq!(recorded_version(&mut c), 3);
    // The CLI says the same and exits non-zero.
    let dir = tempfile::tempdir().unwrap();
    let o = airlock(&url, dir.path(), "", &["chain", "tenants"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("table airlock.exports"),
        "{}",
        text(&o)
    );
    // Moved out of the way, the upgrade goes through.
    c.batch_execute(
        "CREATE SCHEMA theirs;
         ALTER TABLE airlock.exports SET SCHEMA theirs;
         DROP VIEW airlock.audit_log;",
    )
    .unwrap();
    let s = PgStore::connect(&url).unwrap();
    assert_eq!(s.schema_version().unwrap(), latest);
}

/// Resumes a stopped process when dropped (a failing test must not leave a server frozen).
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        // SAFETY: signalling a server process this test binary started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::kill(self.0, libc::SIGCONT);
        }
    }
}

#[test]
fn a_global_confirmation_whose_standby_stops_answering_ends_at_its_deadline_unconfirmed() {
    use airlock::core::store::postgres::durability::{confirm, confirm_within, Level};
    let primary = pg_support::Cluster::init(&["wal_level=replica", "fsync=off"]);
    let url = primary.create_db();
    let store = PgStore::connect(&url).unwrap();
    let standby = primary.standby(&["hot_standby=on"]);
    primary.require_sync_standby();
    let mut c = store.client();
    let frames: Vec<&[u8]> = vec![b"before".as_slice()];
    confirm(&mut c, Level::Global, &frames).unwrap();
    // The standby stops answering (its WAL receiver frozen) while still counted as synchronous.
    let receiver: i32 = standby
        .admin()
        .query_one("SELECT pid FROM pg_stat_wal_receiver", &[])
        .unwrap()
        .get(0);
    let frozen = Stopped::stop(receiver);
    let frames: Vec<&[u8]> = vec![b"during".as_slice()];
    let start = Instant::now();
    let e =
        confirm_within(&mut c, Level::Global, &frames, Some(Duration::from_secs(1))).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(60));
    let msg = e.to_string();
    assert!(matches!(e, PgError::CommitNotReplicated { .. }), "{msg}");
    assert!(msg.contains("no synchronous standby confirmed it"), "{msg}");
    // The standby answers again: GLOBAL confirmations go on (on a new connection: a late cancel
    // request could hit the old one's next statement).
    drop(frozen);
    drop(c);
    let mut c = store.client();
    let frames: Vec<&[u8]> = vec![b"after".as_slice()];
    confirm_within(
        &mut c,
        Level::Global,
        &frames,
        Some(Duration::from_secs(60)),
    )
    .unwrap();
}
