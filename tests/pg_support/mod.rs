//! Real PostgreSQL 15 clusters for tests: `initdb` and `postgres` run as the `postgres` user (initdb
//! refuses root) in a temporary directory, listening on a Unix socket in that directory only (no
//! port races). One shared cluster per test binary ([`shared`]), a fresh database per test
//! ([`fresh_db`]). Servers stop when the test binary exits (an exit hook, and the parent-death
//! signal as a safety net). Missing binaries fail the test saying what to install.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where the PostgreSQL 15 programs are: `$AIRLOCK_PG_BIN`, else Debian's directory.
pub fn bin_dir() -> PathBuf {
    let dir = std::env::var_os("AIRLOCK_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    for prog in ["initdb", "postgres", "pg_basebackup", "pg_ctl"] {
        assert!(
            dir.join(prog).is_file(),
            "{} not found: install postgresql (Debian: `apt-get install postgresql`, or run scripts/setup.sh), or point AIRLOCK_PG_BIN at its bin directory",
            dir.join(prog).display()
        );
    }
    dir
}

/// (uid, gid) to run the server programs as: the `postgres` user when we are root.
fn server_user() -> Option<(u32, u32)> {
    // SAFETY: plain libc calls; getpwnam's result is read at once.
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        let pw = libc::getpwnam(c"postgres".as_ptr());
        assert!(
            !pw.is_null(),
            "running as root but there is no `postgres` user: install postgresql (it creates the user)"
        );
        Some(((*pw).pw_uid, (*pw).pw_gid))
    }
}

fn as_server_user(cmd: &mut Command) -> &mut Command {
    if let Some((uid, gid)) = server_user() {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn chown_to_server(path: &Path) {
    if let Some((uid, gid)) = server_user() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

/// A new directory for a server (owned by its user, kept: the cluster removes it when dropped)
/// and the data directory inside it.
fn server_dir(prefix: &str) -> (PathBuf, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .unwrap()
        .keep();
    chown_to_server(&dir);
    let data = dir.join("data");
    (dir, data)
}

fn run(cmd: &mut Command, what: &str) {
    let out = as_server_user(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running PostgreSQL server in its own directory.
pub struct Cluster {
    pub dir: PathBuf,
    pub data: PathBuf,
    pub socket_dir: PathBuf,
    child: Mutex<Option<Child>>,
}

/// Every server this binary started, stopped at exit.
static RUNNING: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

extern "C" fn stop_all_at_exit() {
    let list = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    for (pid, dir) in list {
        // SAFETY: signalling our own child processes.
        unsafe {
            libc::kill(pid as i32, libc::SIGQUIT);
        }
        let start = Instant::now();
        // SAFETY: kill(pid, 0) only probes.
        while unsafe { libc::kill(pid as i32, 0) } == 0 && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn register(pid: u32, dir: &Path) {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::atexit(stop_all_at_exit);
        }
    });
    RUNNING.lock().unwrap().push((pid, dir.to_path_buf()));
}

impl Cluster {
    /// `initdb` a new cluster in a new temporary directory and start it with `conf` lines added.
    pub fn init(conf: &[&str]) -> Cluster {
        let bin = bin_dir();
        let (dir, data) = server_dir("airlock-pg-");
        run(
            Command::new(bin.join("initdb"))
                .args([
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "-D",
                ])
                .arg(&data),
            "initdb",
        );
        Cluster::start_in(dir, data, conf)
    }

    /// Starts a server on an existing data directory (`dir/data`).
    fn start_in(dir: PathBuf, data: PathBuf, conf: &[&str]) -> Cluster {
        let socket_dir = dir.join("sock");
        std::fs::create_dir_all(&socket_dir).unwrap();
        chown_to_server(&socket_dir);
        let mut settings = vec![
            "listen_addresses=''".to_string(),
            format!("unix_socket_directories='{}'", socket_dir.display()),
            "max_connections=60".into(),
            "shared_buffers=64MB".into(),
        ];
        settings.extend(conf.iter().map(|s| s.to_string()));
        let mut auto =
            std::fs::read_to_string(data.join("postgresql.auto.conf")).unwrap_or_default();
        for s in &settings {
            auto.push_str(s);
            auto.push('\n');
        }
        std::fs::write(data.join("postgresql.auto.conf"), auto).unwrap();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        chown_to_server(&dir.join("server.log"));
        let mut cmd = Command::new(bin_dir().join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        as_server_user(&mut cmd);
        // SAFETY: prctl in the child before exec; stops the server if this process dies.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT);
                Ok(())
            });
        }
        // Spawned from a thread that lives as long as the process: the parent-death signal is sent
        // when the spawning *thread* ends, and test threads end after each test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(cmd.spawn());
            loop {
                std::thread::park();
            }
        });
        let child = rx.recv().unwrap().unwrap();
        register(child.id(), &dir);
        let c = Cluster {
            dir,
            data,
            socket_dir,
            child: Mutex::new(Some(child)),
        };
        c.wait_ready();
        c
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        loop {
            if postgres::Client::connect(&self.url("postgres"), postgres::NoTls).is_ok() {
                return;
            }
            if let Some(c) = self.child.lock().unwrap().as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("postgres exited ({status}): {}", self.log());
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "postgres did not accept connections within 60 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// `postgresql://postgres@<socket dir, percent-encoded>/<db>`.
    pub fn url(&self, db: &str) -> String {
        let host = self.socket_dir.display().to_string().replace('/', "%2F");
        format!("postgresql://postgres@{host}/{db}")
    }

    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap()
    }

    /// A new empty database; returns its URL.
    pub fn create_db(&self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        self.url(&name)
    }

    /// A streaming standby of this cluster made with `pg_basebackup -R`, started with `conf`.
    pub fn standby(&self, conf: &[&str]) -> Cluster {
        let (dir, data) = server_dir("airlock-pg-standby-");
        run(
            Command::new(bin_dir().join("pg_basebackup"))
                .arg("-h")
                .arg(&self.socket_dir)
                // A fast checkpoint: the default spreads it over most of checkpoint_timeout
                // (about 100 s here) before the copy starts.
                .args([
                    "-U",
                    "postgres",
                    "-X",
                    "stream",
                    "-R",
                    "--no-sync",
                    "--checkpoint=fast",
                    "-D",
                ])
                .arg(&data),
            "pg_basebackup",
        );
        Cluster::start_in(dir, data, conf)
    }

    /// SIGKILL to the server's postmaster (a crash; its backends exit when they notice).
    /// Makes every standby synchronous (`synchronous_standby_names = '*'`) and waits until one
    /// streams synchronously (at most 60 s).
    pub fn require_sync_standby(&self) {
        let mut admin = self.admin();
        admin
            .batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            .unwrap();
        admin.batch_execute("SELECT pg_reload_conf()").unwrap();
        let start = std::time::Instant::now();
        while admin
            .query_one(
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            == 0
        {
            assert!(
                start.elapsed().as_secs() < 60,
                "the standby never became synchronous"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn kill9(&self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Stops the server cleanly (a fast shutdown: every page is on disk when it returns).
    pub fn stop(&self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            // SAFETY: signalling our own child process by its id.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGINT);
            }
            c.wait().unwrap();
        }
    }

    /// Starts a stopped server again on the same data directory.
    pub fn start_again(&self) -> Cluster {
        Cluster::start_in(self.dir.clone(), self.data.clone(), &[])
    }

    /// The data directory (for tests that damage files of a stopped server).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Promotes a standby and waits until it accepts writes.
    pub fn promote(&self) {
        let mut c = self.admin();
        c.batch_execute("SELECT pg_promote(true, 60)").unwrap();
        let start = Instant::now();
        while c
            .query_one("SELECT pg_is_in_recovery()", &[])
            .unwrap()
            .get::<_, bool>(0)
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "promotion timed out"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The one cluster of this test binary.
pub fn shared() -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(|| {
        Cluster::init(&[
            "fsync=off",
            "synchronous_commit=off",
            "full_page_writes=off",
        ])
    })
}

/// A fresh database in the shared cluster; returns its URL.
pub fn fresh_db() -> String {
    shared().create_db()
}
