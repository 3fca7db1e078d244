//! A store the operator can only read: a copy brought in for review on a read-only medium, or in
//! a folder they may not write. The reading commands open it read-only and answer; they create
//! nothing beside it (no `-wal`, no `-shm`) and change nothing in it. Commands that write, and a
//! store that cannot be read without writing (an older schema, commits still in its `-wal`), are
//! refused with what to do. As root (which ignores file modes) the commands run as `nobody`.

#![cfg(unix)]

mod common;

use common::{assert_exit, text};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_airlock");

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn mode(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// A demo workspace's store (a tenant chain with snapshots, an audit log, notifications), copied
/// into a folder `ro/` that the user running the commands can read but not write.
struct ReadOnlyStore {
    dir: tempfile::TempDir,
}

impl ReadOnlyStore {
    fn new() -> ReadOnlyStore {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let o = Command::new(BIN)
            .args(["demo", "--no-console", "--dir"])
            .arg(&ws)
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env_remove("AIRLOCK_DB")
            .env_remove("AIRLOCK_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::copy(ws.join("airlock.db"), ro.join("airlock.db")).unwrap();
        let s = ReadOnlyStore { dir };
        s.lock();
        s
    }
    fn folder(&self) -> PathBuf {
        self.dir.path().join("ro")
    }
    fn db(&self) -> PathBuf {
        self.folder().join("airlock.db")
    }
    /// The folder and the store: readable, not writable, by whoever runs the commands.
    fn lock(&self) {
        mode(self.dir.path(), 0o755);
        if root() {
            mode(&self.folder(), 0o755);
            mode(&self.db(), 0o644);
        } else {
            mode(&self.db(), 0o444);
            mode(&self.folder(), 0o555);
        }
    }
    /// Lets the test (root or the owner) change the folder again.
    fn unlock(&self) {
        mode(&self.folder(), 0o755);
        mode(&self.db(), 0o644);
    }
    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("AIRLOCK_DB", self.db())
            .env("XDG_DATA_HOME", self.dir.path().join("nowhere"))
            .env("HOME", "/")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .current_dir("/")
            .stdin(Stdio::null());
        if root() {
            c.uid(65534).gid(65534);
        }
        c.output().unwrap()
    }
    /// Runs `args`: exit 2 saying `needle`, nothing made beside the store, the store unchanged.
    /// Returns what it printed.
    fn refuses(&self, args: &[&str], needle: &str) -> String {
        let before = self.digest();
        let o = self.run(args);
        assert_exit(&o, 2, needle);
        assert_eq!(
            self.names(),
            ["airlock.db"],
            "nothing made beside the store"
        );
        assert_eq!(self.digest(), before, "the store is unchanged");
        text(&o)
    }
    fn digest(&self) -> Vec<u8> {
        Sha256::digest(std::fs::read(self.db()).unwrap()).to_vec()
    }
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.folder())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

#[test]
fn the_reading_commands_answer_on_a_store_the_user_cannot_write_and_leave_it_untouched() {
    let s = ReadOnlyStore::new();
    let before = s.digest();
    let tenants = s.run(&["chain", "tenants"]);
    assert_exit(&tenants, 0, "acme");
    let show = s.run(&["chain", "show", "--tenant", "acme", "--limit", "3"]);
    assert_exit(&show, 0, "tenant acme:");
    // The trust store is not there for `nobody`: the report says so; it is a report, not an
    // open error.
    let verify = s.run(&["chain", "verify", "--tenant", "acme", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&verify.stdout)
        .unwrap_or_else(|e| panic!("not a report ({e}): {}", text(&verify)));
    assert!(report["length"].as_u64().unwrap() > 0, "{report}");
    assert_exit(&s.run(&["audit", "verify"]), 0, "OK");
    assert_exit(&s.run(&["audit", "list"]), 0, "");
    assert_exit(&s.run(&["metrics"]), 0, "# TYPE");
    // The demo's notification queue: a delivered, a pending and a dead delivery.
    assert_exit(&s.run(&["notify", "list"]), 0, "dead");
    assert_exit(&s.run(&["notify", "emissions"]), 0, "acme");
    let export = s.dir.path().join("dlq.json");
    mode(s.dir.path(), 0o777);
    assert_exit(
        &s.run(&["notify", "export", "--output", export.to_str().unwrap()]),
        0,
        "",
    );
    mode(s.dir.path(), 0o755);
    let listing = s.run(&["chain", "show", "--tenant", "acme", "--json"]);
    assert_eq!(listing.status.code(), Some(0), "{}", text(&listing));
    for o in [&tenants, &show, &verify] {
        assert!(!text(o).contains("cannot write"), "{}", text(o));
    }
    assert_eq!(s.names(), ["airlock.db"], "nothing made beside the store");
    assert_eq!(s.digest(), before, "the store is unchanged");
}

#[test]
fn a_command_that_writes_says_the_store_cannot_be_written_and_what_reads_it() {
    let s = ReadOnlyStore::new();
    let t = s.refuses(
        &[
            "jobs",
            "enqueue",
            "--tenant",
            "acme",
            "--node",
            "n1",
            r#"{"task":"x"}"#,
        ],
        "cannot write the store or its directory",
    );
    assert!(t.contains("open it read-only"), "{t}");
    assert!(!t.contains("not a usable"), "{t}");
}

/// A dry run writes nothing (docs/import.md), so it plans against a store the user cannot write,
/// as `--verify-only` verifies; the import itself is refused.
#[test]
fn an_import_dry_run_plans_against_a_store_the_user_cannot_write() {
    let s = ReadOnlyStore::new();
    let bundle = s.dir.path().join("bundle.json");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json"),
        &bundle,
    )
    .unwrap();
    let before = s.digest();
    let file = bundle.to_str().unwrap();
    let plan = s.run(&["jobs", "import", "--dry-run", file]);
    assert_exit(&plan, 0, "PLAN (dry run, nothing written)");
    assert!(!text(&plan).contains("cannot write"), "{}", text(&plan));
    assert_exit(&s.run(&["jobs", "import", "--verify-only", file]), 0, "");
    assert_eq!(s.names(), ["airlock.db"], "nothing made beside the store");
    assert_eq!(s.digest(), before, "the store is unchanged");
    s.refuses(
        &["jobs", "import", file],
        "cannot write the store or its directory",
    );
}

#[test]
fn an_older_store_the_user_cannot_write_is_refused_with_what_to_do() {
    let s = ReadOnlyStore::new();
    s.unlock();
    {
        let c = rusqlite::Connection::open(s.db()).unwrap();
        c.execute_batch(
            "DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)",
        )
        .unwrap();
    }
    s.lock();
    let t = s.refuses(&["chain", "tenants"], "older than this airlock's");
    assert!(t.contains("copy it somewhere writable"), "{t}");
}

/// Commits still in the `-wal` beside the store (copied from a machine whose writer never closed
/// it): reading the main file alone would show an older store, and the `-shm` needed to read
/// the `-wal` cannot be made, so the read is refused, saying why.
#[test]
fn a_store_with_commits_left_in_its_wal_is_not_read_without_them() {
    let s = ReadOnlyStore::new();
    s.unlock();
    let source = s.dir.path().join("ws").join("airlock.db");
    let writer = rusqlite::Connection::open(&source).unwrap();
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint=0; CREATE TABLE later_commit (x); INSERT INTO later_commit VALUES (1);",
        )
        .unwrap();
    let mut wal = source.as_os_str().to_owned();
    wal.push("-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    std::fs::copy(&source, s.db()).unwrap();
    std::fs::copy(&wal, s.folder().join("airlock.db-wal")).unwrap();
    drop(writer);
    s.lock();
    mode(&s.folder().join("airlock.db-wal"), 0o644);
    let o = s.run(&["chain", "tenants"]);
    assert_exit(&o, 2, "-wal file holds commits not yet in the main file");
    assert_eq!(s.names(), ["airlock.db", "airlock.db-wal"]);
}
