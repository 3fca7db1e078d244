//! What the notification tests share: an environment that runs the real binary on a private
//! store, and a `nats-server -js` on a free loopback port with a temp store directory.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The webhook secret every test environment writes to `secret`.
pub const SECRET: &str = "whsec-test-0123456789abcdef";

/// A private directory: the store, XDG directories and the webhook secret file.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::write(env.path("secret"), format!("{SECRET}\n")).unwrap();
        env
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .env("AIRLOCK_DB", self.path("store.db"))
            .env("XDG_DATA_HOME", self.path("data"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("AIRLOCK_NODE_ID", "edge-1");
        for v in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
        ] {
            c.env_remove(v);
        }
        c
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// A store with one portable export of tenant acme (two jobs, one emission).
    pub fn with_export() -> Env {
        let env = Env::new();
        let ok = |o: Output| assert!(o.status.success(), "{o:?}");
        for p in ["{\"a\":1}", "{\"a\":2}"] {
            ok(env.run(&["jobs", "enqueue", "-t", "acme", p]));
        }
        let out = env.path("out");
        let out = out.to_str().unwrap();
        ok(env.run(&[
            "jobs",
            "export",
            "--tenant",
            "acme",
            "--portable",
            "-o",
            out,
        ]));
        env
    }

    /// `n` more emissions of the export (copies of the first one's event, each its own artifact
    /// digest), written with SQL: a queue of `n + 1` deliveries per webhook once enrolled.
    pub fn more_emissions(&self, n: usize) {
        let db = rusqlite::Connection::open(self.path("store.db")).unwrap();
        db.execute(
            "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1)
             INSERT INTO notify_emissions (export_id, artifact_sha256, event_type, body, created_at)
             SELECT m.export_id, m.artifact_sha256 || '-' || k.i, m.event_type, m.body, m.created_at
             FROM notify_emissions m, k WHERE m.emission_id = 1",
            [n as i64],
        )
        .unwrap();
    }

    /// `notify run [--once] --webhook URL --webhook-secret-file secret` for each URL, `--nats`.
    /// Starts the binary with `args` in the background, its output discarded.
    pub fn spawn_quiet(&self, args: &[String]) -> std::process::Child {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.cmd(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start airlock")
    }

    pub fn notify_args(&self, once: bool, hooks: &[&str], nats: Option<&str>) -> Vec<String> {
        let mut a: Vec<String> = vec!["notify".into(), "run".into()];
        if once {
            a.push("--once".into());
        }
        for h in hooks {
            a.extend(["--webhook".into(), h.to_string()]);
            a.extend([
                "--webhook-secret-file".into(),
                self.path("secret").display().to_string(),
            ]);
        }
        if let Some(n) = nats {
            a.extend(["--nats".into(), n.to_string()]);
        }
        a
    }
}

// ---------------------------------------------------------------- nats-server

pub struct Nats {
    child: Child,
    pub url: String,
    bin: &'static str,
    port: u16,
    dir: tempfile::TempDir,
}

/// `nats-server -js` on `port` with its store in `dir`, its output discarded.
fn spawn_nats(bin: &str, port: u16, dir: &std::path::Path) -> Child {
    Command::new(bin)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Whether the nats-server `child` listens on `port`: it is still running and a connection there
/// gets NATS's `INFO` greeting (within 15 s).
fn greets(child: &mut std::process::Child, port: u16) -> bool {
    use std::io::Read;
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut head = [0u8; 4];
            return s.read_exact(&mut head).is_ok()
                && &head == b"INFO"
                && child.try_wait().ok().flatten().is_none();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Nats {
    pub fn start() -> Nats {
        let bin = ["nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|b| {
                Command::new(b)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .expect("nats-server is not installed: install the Debian package nats-server (scripts/setup.sh)");
        // A free port can be taken again before nats-server binds it (another test's listener):
        // a start counts only once this nats-server is running and greets with its INFO line.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let dir = tempfile::tempdir().unwrap();
            let mut child = spawn_nats(bin, port, dir.path());
            if greets(&mut child, port) {
                return Nats {
                    child,
                    url: format!("nats://127.0.0.1:{port}"),
                    bin,
                    port,
                    dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nats-server did not start on a free port in 5 tries");
    }

    /// Kills the server (its clients see the connection drop); its store stays for
    /// [`Nats::restart`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on its port with its store (streams and messages kept).
    pub fn restart(&mut self) {
        self.child = spawn_nats(self.bin, self.port, self.dir.path());
        assert!(
            greets(&mut self.child, self.port),
            "nats-server did not start again on port {}",
            self.port
        );
    }

    /// A stream `EXPORTS` over `subjects` (created once JetStream answers).
    pub async fn stream(&self, subjects: &[&str]) -> async_nats::jetstream::stream::Stream {
        let client = async_nats::connect(self.url.as_str()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let config = async_nats::jetstream::stream::Config {
                name: "EXPORTS".into(),
                subjects: subjects.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            };
            match js.get_or_create_stream(config).await {
                Ok(s) => return s,
                Err(e) => {
                    assert!(Instant::now() < deadline, "JetStream not ready: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
