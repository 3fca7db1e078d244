//! Bad inputs through the real binary: FIFOs and devices where a file is expected (refused at once,
//! never waited on), and serves that never answer or answer without end (`jobs push`,
//! `ledger diff --peer`: a timeout or a size limit, said plainly), and more inputs than open files.

mod common;

use common::{assert_exit, text};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any of these runs takes when it works; reaching it means the command hung.
const HANG: Duration = Duration::from_secs(30);

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A FIFO nobody writes to: opening it for reading blocks, reading it blocks.
    fn fifo(&self, name: &str) -> PathBuf {
        let p = self.path(name);
        common::make_fifo(&p);
        p
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("AIRLOCK_DB", self.path("store.db"))
            .env("XDG_DATA_HOME", self.path("data"))
            .env("AIRLOCK_NODE_ID", "edge-1")
            .env_remove("AIRLOCK_CONFIG")
            .env_remove("AIRLOCK_TOKEN_FILE")
            .env_remove("AIRLOCK_PUSH_TIMEOUT")
            .env_remove("AIRLOCK_PEER_TIMEOUT")
            .env_remove("NO_COLOR");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        run_within(self.cmd(args), HANG)
    }
}

/// Runs `cmd`, killing it (and failing) when it has not finished `within`; returns how long it took.
fn run_timed(mut cmd: Command, within: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            let took = started.elapsed();
            return (child.wait_with_output().unwrap(), took);
        }
        if started.elapsed() > within {
            child.kill().unwrap();
            let o = child.wait_with_output().unwrap();
            panic!("{cmd:?} hung (killed after {within:?}):\n{}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_within(cmd: Command, within: Duration) -> Output {
    run_timed(cmd, within).0
}

/// Refused at once, exit 2, saying the path is not a regular file.
fn assert_not_regular(o: &Output, what: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {t}");
    assert!(t.contains("not a regular file"), "{what}: {t}");
    assert!(!t.contains("panicked"), "{what}: {t}");
}

/// A server that accepts every connection, reads what it is sent and never answers.
fn silent_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = stream;
                let mut buf = [0u8; 65536];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
                // Keep the connection open (the client gives up first).
                std::thread::sleep(Duration::from_secs(600));
            });
        }
    });
    format!("http://{addr}")
}

/// A server that answers every request with a 200 JSON head and a body that never ends.
fn endless_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || endless_answer(stream));
        }
    });
    format!("http://{addr}")
}

fn endless_answer(mut s: TcpStream) {
    // Read the request (until the client pauses), then answer without end.
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 65536];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[";
    if s.write_all(head).is_err() {
        return;
    }
    let chunk = vec![b' '; 1 << 20];
    while s.write_all(&chunk).is_ok() {}
}

/// A URL on which nothing listens.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

fn ledger_url(base: &str) -> String {
    format!("{base}/api/v1/ledger/edge-1")
}

/// `airlock jobs push b.json --to URL EXTRA...` (the bundle's content does not matter: the
/// answer, or its absence, is what these tests are about).
fn push_cmd(env: &Env, url: &str, extra: &[&str]) -> Command {
    let bundle = env.file("b.json", b"{}");
    let mut args = vec!["jobs", "push", bundle.to_str().unwrap(), "--to", url];
    args.extend_from_slice(extra);
    env.cmd(&args)
}

#[test]
fn push_to_a_serve_that_never_answers_times_out_and_says_so() {
    let env = Env::new();
    let url = silent_server();
    let mut cmd = push_cmd(&env, &url, &[]);
    cmd.env("AIRLOCK_PUSH_TIMEOUT", "1");
    let (o, took) = run_timed(cmd, HANG);
    assert_exit(
        &o,
        2,
        &format!("timed out after 1 s waiting for {url}/api/v1/airgap/bundles"),
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    // The flag says the same as the variable.
    let o = run_within(push_cmd(&env, &url, &["--push-timeout", "1"]), HANG);
    assert_exit(&o, 2, "timed out after 1 s waiting for");
}

#[test]
fn push_to_a_serve_that_answers_without_end_stops_at_the_limit() {
    let env = Env::new();
    let o = run_within(push_cmd(&env, &endless_server(), &[]), HANG);
    assert_exit(&o, 2, "sent a response larger than 268435456 bytes");
}

#[test]
fn push_to_a_closed_port_names_the_cause() {
    let env = Env::new();
    let o = run_within(push_cmd(&env, &closed_port(), &[]), HANG);
    assert_exit(&o, 2, "Connection refused");
}

#[test]
fn push_timeout_must_be_whole_seconds() {
    let env = Env::new();
    let o = run_within(
        push_cmd(&env, &closed_port(), &["--push-timeout", "0"]),
        HANG,
    );
    assert_exit(&o, 2, "invalid value '0' for '--push-timeout <SECS>'");
}

#[test]
fn ledger_diff_with_a_peer_that_never_answers_times_out_and_says_so() {
    let env = Env::new();
    let peer = ledger_url(&silent_server());
    let mut cmd = env.cmd(&["ledger", "diff", "a.alwl", "--peer", &peer]);
    cmd.env("AIRLOCK_PEER_TIMEOUT", "1");
    let (o, took) = run_timed(cmd, HANG);
    assert_exit(
        &o,
        2,
        &format!("timed out after 1 s waiting for {peer}/sync"),
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let mut cmd = env.cmd(&["ledger", "diff", "a.alwl", "--peer", &peer]);
    cmd.env("AIRLOCK_PEER_TIMEOUT", "soon");
    assert_exit(
        &run_within(cmd, HANG),
        2,
        "invalid value 'soon' for '--peer-timeout",
    );
    // The flag, as --help shows it, does the same as the variable.
    let mut cmd = env.cmd(&[
        "ledger",
        "diff",
        "a.alwl",
        "--peer",
        &peer,
        "--peer-timeout",
        "1",
    ]);
    cmd.env_remove("AIRLOCK_PEER_TIMEOUT");
    assert_exit(
        &run_timed(cmd, HANG).0,
        2,
        &format!("timed out after 1 s waiting for {peer}/sync"),
    );
}

#[test]
fn ledger_diff_with_a_refused_peer_names_the_cause() {
    let env = Env::new();
    let o = env.run(&[
        "ledger",
        "diff",
        "a.alwl",
        "--peer",
        &ledger_url(&closed_port()),
    ]);
    assert_exit(&o, 2, "Connection refused");
}

#[test]
fn ledger_diff_with_a_peer_that_answers_without_end_stops_at_the_limit() {
    let env = Env::new();
    let peer = ledger_url(&endless_server());
    let o = env.run(&["ledger", "diff", "a.alwl", "--peer", &peer]);
    assert_exit(&o, 2, "response larger than 268435456 bytes");
}

#[test]
fn wal_and_ledger_commands_refuse_a_fifo() {
    let env = Env::new();
    let f = env.fifo("log.alwl");
    let f = f.to_str().unwrap();
    // A real log for the two-log commands: copied from the vectors.
    let other = env.path("other.alwl");
    std::fs::copy("../shared/vectors/wal/basic.alwl", &other).unwrap();
    let other = other.to_str().unwrap().to_string();
    for args in [
        vec!["wal", "inspect", f],
        vec!["wal", "dump", f],
        vec!["wal", "recover", f],
        vec!["wal", "compact", f],
        vec![
            "wal",
            "append",
            f,
            "--node",
            "edge-1",
            "--type",
            "JobCreated",
            "--json",
            r#"{"job_id":"use1-1-gate-00001","spec":{},"assigned_dcs":["use1"],"fence_token":1}"#,
        ],
        vec!["ledger", "fold", f],
        vec!["ledger", "conflicts", f],
        vec!["ledger", "diff", f, &other],
        vec!["ledger", "diff", &other, f],
        vec!["ledger", "sync", &other, f],
    ] {
        assert_not_regular(&env.run(&args), &args.join(" "));
    }
}

#[test]
fn a_device_is_not_a_regular_file_rather_than_an_empty_log() {
    let env = Env::new();
    for args in [
        ["wal", "inspect", "/dev/zero"],
        ["ledger", "fold", "/dev/zero"],
    ] {
        let o = env.run(&args);
        assert_not_regular(&o, &args.join(" "));
        assert!(!text(&o).contains("0 bytes"), "{}", text(&o));
    }
}

#[test]
fn a_fifo_configuration_file_is_refused() {
    let env = Env::new();
    let f = env.fifo("airlock.yaml");
    let o = env.run(&["--config", f.to_str().unwrap(), "config", "show"]);
    assert_not_regular(&o, "--config FIFO config show");
    assert!(text(&o).contains("configuration file"), "{}", text(&o));
}

#[test]
fn notify_check_refuses_a_fifo_event_or_artifact() {
    let env = Env::new();
    let fifo = env.fifo("event.json");
    let artifact = env.file("export.tgz", b"not an archive");
    let o = env.run(&[
        "notify",
        "check",
        fifo.to_str().unwrap(),
        "--artifact",
        artifact.to_str().unwrap(),
    ]);
    assert_not_regular(&o, "notify check FIFO");
    let event = serde_json::json!({
        "type": "export.airgap.ready.v1",
        "export_id": "e1",
        "bundle_id": "b1",
        "tenant_id": "acme",
        "profile_id": "p1",
        "portable_version": "1",
        "root_hash": "r",
        "artifact_uri": "u",
        "artifact_sha256": "s",
        "created_at": "2026-01-01T00:00:00Z",
        "metadata": {"source_uri": "s", "portable_size_bytes": 1, "export_size_bytes": 1},
    });
    let event = env.file("ev.json", event.to_string().as_bytes());
    let fifo_artifact = env.fifo("artifact.tgz");
    let o = env.run(&[
        "notify",
        "check",
        event.to_str().unwrap(),
        "--artifact",
        fifo_artifact.to_str().unwrap(),
    ]);
    // An artifact that cannot be read is unreadable input (exit 2, docs/notifications.md), said
    // as such.
    assert_exit(&o, 2, "cannot read");
    assert!(text(&o).contains("not a regular file"), "{}", text(&o));
}

#[test]
fn push_refuses_a_fifo_bundle_or_token_file() {
    let env = Env::new();
    let fifo = env.fifo("fifo");
    let fifo = fifo.to_str().unwrap();
    let bundle = env.file("b.json", b"{}");
    let url = silent_server();
    let o = env.run(&["jobs", "push", fifo, "--to", &url]);
    assert_not_regular(&o, "jobs push FIFO");
    let o = env.run(&[
        "jobs",
        "push",
        bundle.to_str().unwrap(),
        "--to",
        &url,
        "--token-file",
        fifo,
    ]);
    assert_not_regular(&o, "jobs push --token-file FIFO");
    assert!(text(&o).contains("token file"), "{}", text(&o));
    let o = env.run(&[
        "ledger",
        "diff",
        "a.alwl",
        "--peer",
        &ledger_url(&url),
        "--token-file",
        fifo,
    ]);
    assert_not_regular(&o, "ledger diff --token-file FIFO");
}

#[test]
fn triage_verify_says_a_fifo_or_device_is_not_a_regular_file_not_too_large() {
    let env = Env::new();
    let fifo = env.fifo("report.json");
    for path in [fifo.as_path(), Path::new("/dev/zero")] {
        let o = env.run(&["triage", "verify", path.to_str().unwrap()]);
        assert_not_regular(&o, &format!("triage verify {}", path.display()));
        assert!(!text(&o).contains("larger than"), "{}", text(&o));
    }
    // A regular file over the limit is still "too large".
    let big = std::fs::File::create(env.path("big.json")).unwrap();
    big.set_len(65 << 20).unwrap();
    let o = env.run(&["triage", "verify", "big.json"]);
    assert_exit(&o, 2, "larger than 67108864 bytes");
}

/// Runs the binary with the open-file limit `ulimit` set first (`-Sn 64`: soft only; `-n 64`: soft
/// and hard).
fn with_open_file_limit(env: &Env, ulimit: &str, args: &[&str]) -> Output {
    let c = env.cmd(&[]);
    let script = format!("ulimit {ulimit} && exec \"$0\" \"$@\"");
    let mut wrapped = Command::new("bash");
    wrapped
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .current_dir(env.dir.path());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    run_within(wrapped, HANG)
}

#[test]
fn an_import_of_more_inputs_than_open_files_raises_the_limit_or_says_what_to_do() {
    let env = Env::new();
    let mut names = Vec::new();
    for i in 0..80 {
        let name = format!("b{i:02}.json");
        let o = env.run(&[
            "dev",
            "gen-bundle",
            "--tenant",
            "acme",
            "--nodes",
            "1",
            "--entries",
            "2",
            "--seed",
            &i.to_string(),
            "--output",
            &name,
        ]);
        assert_exit(&o, 0, "");
        names.push(name);
    }
    let mut args = vec!["jobs", "import"];
    args.extend(names.iter().map(String::as_str));
    // 80 inputs held open under a hard limit of 64 descriptors: refused, saying why and what to
    // do, and no store is made.
    let o = with_open_file_limit(&env, "-n 64", &args);
    assert_exit(&o, 2, "Too many open files");
    for needle in ["ulimit -n", "now 64", "smaller groups"] {
        assert!(text(&o).contains(needle), "{needle}: {}", text(&o));
    }
    assert!(!env.path("store.db").exists());
    // Only the soft limit at 64 (the hard one allows more): raised at start-up, the import runs.
    let o = with_open_file_limit(&env, "-Sn 64", &args);
    assert_exit(&o, 0, "160 entries");
}
