//! `airlock jobs ...` end to end through the real binary: round trip, exit statuses and bad input.

mod common;

use common::{assert_exit, text};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn db(&self) -> PathBuf {
        self.dir.path().join("store.db")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .env("AIRLOCK_DB", self.db())
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("AIRLOCK_NODE_ID", "edge-1")
            .env_remove("NO_COLOR");
        c
    }
    /// `airlock jobs enqueue ARGS...`
    fn enqueue(&self, args: &[&str]) -> Output {
        self.run(&[&["jobs", "enqueue"], args].concat())
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
    fn node_log_rows(&self) -> i64 {
        if !self.db().exists() {
            return 0;
        }
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        conn.query_row("SELECT COUNT(*) FROM node_log", [], |r| r.get(0))
            .unwrap()
    }
}

fn vector(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/vectors")
        .join(rel)
}

#[test]
fn enqueue_export_verify_round_trip() {
    let env = Env::new();
    let o = env.enqueue(&[
        "--tenant",
        "acme",
        "--partition-key",
        "p1",
        r#"{"b":2,"a":1}"#,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.enqueue(&[
        "--tenant",
        "acme",
        "--idempotency-key",
        "k-1",
        r#"{"x":[1,2]}"#,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let jsonl = env.path("jobs.jsonl");
    std::fs::write(&jsonl, "{\"n\":1}\n\n{\"n\":2}\n{\"n\":3}\n").unwrap();
    let o = env.enqueue(&[
        "--tenant",
        "acme",
        "--node",
        "edge-2",
        "--jsonl",
        jsonl.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run_stdin(
        &["jobs", "enqueue", "--tenant", "acme", "-"],
        br#"{"from":"stdin"}"#,
    );
    assert!(o.status.success(), "{}", text(&o));
    // re-enqueueing the same payload is a duplicate, not a new entry
    let o = env.enqueue(&["--tenant", "acme", "--json", r#"{"a":1,"b":2}"#]);
    assert!(o.status.success());
    assert!(
        text(&o).contains("\"outcome\": \"duplicate\""),
        "{}",
        text(&o)
    );
    assert_eq!(env.node_log_rows(), 6);
    // a reused idempotency key with another payload is a conflict
    let o = env.enqueue(&[
        "--tenant",
        "acme",
        "--idempotency-key",
        "k-1",
        r#"{"x":[3]}"#,
    ]);
    assert_exit(&o, 2, "different payload");
    assert_eq!(env.node_log_rows(), 6);

    let bundle = env.path("out.json");
    let o = env.run(&[
        "jobs",
        "export",
        "--tenant",
        "acme",
        "-o",
        bundle.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["entries"], 6);
    let o = env.run(&["jobs", "verify", bundle.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["stats"]["nodes"], 2);
    assert_eq!(report["stats"]["entries"], 6);
    for key in ["bundleId", "tenantId", "ok", "checks", "findings", "stats"] {
        assert!(report.get(key).is_some(), "{key}");
    }
    // export of one node only
    let one = env.path("one.json");
    let o = env.run(&[
        "jobs",
        "export",
        "--tenant",
        "acme",
        "--node",
        "edge-2",
        "-o",
        one.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run(&["jobs", "verify", one.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["stats"]["entries"], 3);
    // list shows both bundles and marks the stray file
    let o = env.run(&[
        "jobs",
        "list",
        "--source",
        env.dir.path().to_str().unwrap(),
        "--json",
    ]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let types: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["file"].as_str().unwrap().to_string(),
                l["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        types.contains(&("out.json".into(), "bundle".into())),
        "{types:?}"
    );
    assert!(
        types.contains(&("jobs.jsonl".into(), "notBundle".into())),
        "{types:?}"
    );
}

#[test]
fn hlc_never_goes_backwards_across_restarts() {
    let env = Env::new();
    // A persisted clock far in the future (as if the wall clock jumped back since).
    {
        let o = env.enqueue(&["--tenant", "t", "{}"]);
        assert!(o.status.success());
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        conn.execute("UPDATE hlc_state SET physical = physical + 86400000", [])
            .unwrap();
    }
    let o = env.enqueue(&["--tenant", "t", "--json", r#"{"n":1}"#]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = v["results"][0]["tHlc"].as_str().unwrap();
    let physical: u64 = t.split(':').next().unwrap().parse().unwrap();
    assert!(
        physical > airlock::core::hlc::unix_ms_now() + 86_000_000,
        "{t}"
    );
}

#[test]
fn verify_exit_statuses_and_human_output() {
    let env = Env::new();
    let ok = env.run(&[
        "jobs",
        "verify",
        vector("bundles/two-nodes.json").to_str().unwrap(),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    let bad = env.run(&[
        "jobs",
        "verify",
        vector("tamper/entries-deleted.json").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let out = text(&bad);
    assert!(out.contains("node node-b"), "{out}");
    assert!(
        out.contains("first break at entry 1 (entries-deleted)"),
        "{out}"
    );
    let usage = env.run(&["jobs", "verify"]);
    assert_eq!(usage.status.code(), Some(2));
}

/// A report that cannot be written (stdout on a full device) is an I/O error: exit 2 with the
/// reason, never a panic, in both the human and the JSON form.
#[test]
fn verify_report_to_a_full_device_is_an_error_not_a_panic() {
    let env = Env::new();
    let bundle = vector("tamper/entries-deleted.json");
    for json in [false, true] {
        let mut args = vec!["jobs", "verify", bundle.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = env.cmd(&args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "json {json}: {err}");
        assert!(
            err.contains("No space left on device"),
            "json {json}: {err}"
        );
        assert!(!err.contains("panicked"), "json {json}: {err}");
    }
}

/// Bad input: a clear message naming the file and the JSON path or byte offset, exit 2, no panic.
fn assert_unreadable(env: &Env, file: &Path, needle: &str) {
    let o = env.run(&["jobs", "verify", file.to_str().unwrap()]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains(file.file_name().unwrap().to_str().unwrap()),
        "{out}"
    );
    assert!(out.contains(needle), "expected {needle:?} in {out}");
    assert!(!out.contains("panicked"), "{out}");
}

#[test]
fn truncated_bundle() {
    let env = Env::new();
    let bytes = std::fs::read(vector("bundles/two-nodes.json")).unwrap();
    let f = env.path("truncated.json");
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    assert_unreadable(&env, &f, "truncated");
}

#[test]
fn invalid_json() {
    let env = Env::new();
    let src = std::fs::read_to_string(vector("bundles/two-nodes.json")).unwrap();
    let f = env.path("invalid.json");
    std::fs::write(&f, src.replacen("\"tHlc\":", "\"tHlc\" ", 3)).unwrap();
    assert_unreadable(&env, &f, "byte ");
    assert_unreadable(&env, &f, "$.jobLogs[0].entries[0]");
}

#[test]
fn invalid_utf8() {
    let env = Env::new();
    let mut bytes = std::fs::read(vector("bundles/two-nodes.json")).unwrap();
    let at = String::from_utf8_lossy(&bytes)
        .find("registry.local/app-3")
        .unwrap();
    bytes[at] = 0xff;
    let f = env.path("latin1.json");
    std::fs::write(&f, &bytes).unwrap();
    assert_unreadable(&env, &f, "byte ");
}

#[test]
fn directory_instead_of_a_file() {
    let env = Env::new();
    let d = env.path("adir");
    std::fs::create_dir(&d).unwrap();
    assert_unreadable(&env, &d, "directory");
}

#[test]
fn two_gigabyte_file() {
    let env = Env::new();
    let f = env.path("huge.json");
    let file = std::fs::File::create(&f).unwrap();
    file.set_len(2 << 30).unwrap(); // sparse: 2 GiB of zero bytes
    assert_unreadable(&env, &f, "byte 0");
    // a plausible start followed by garbage
    let f2 = env.path("huge2.json");
    let mut file = std::fs::File::create(&f2).unwrap();
    file.write_all(b"{\"bundleId\": \"x\", \"jobLogs\": [")
        .unwrap();
    file.set_len(2 << 30).unwrap();
    assert_unreadable(&env, &f2, "$.jobLogs");
}

#[test]
fn payload_nested_ten_thousand_levels() {
    let env = Env::new();
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    // in a bundle
    let src = std::fs::read_to_string(vector("bundles/two-nodes.json")).unwrap();
    let f = env.path("deep.json");
    std::fs::write(
        &f,
        src.replacen(
            "\"payload\":",
            &format!("\"extra\": {deep}, \"payload\":"),
            1,
        ),
    )
    .unwrap();
    assert_unreadable(&env, &f, "recursion limit");
    // as an enqueued payload: refused, nothing stored
    let o = env.enqueue(&["--tenant", "t", &deep]);
    assert_exit(&o, 2, "recursion limit");
    assert_eq!(env.node_log_rows(), 0);
}

#[test]
fn wrong_types_and_missing_fields_are_schema_findings_with_paths() {
    let env = Env::new();
    let src = std::fs::read_to_string(vector("bundles/two-nodes.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    v["jobLogs"][0]["entries"][1]["tHlc"] = serde_json::json!(1767614400250u64);
    v["jobLogs"][1]["entries"][0]
        .as_object_mut()
        .unwrap()
        .remove("link");
    v["jobLogs"][1]["entries"][2]["tHlc"] = serde_json::json!("1767614400600:00:node-b");
    let f = env.path("types.json");
    std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = env.run(&["jobs", "verify", f.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let msgs: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "schema-invalid")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m.contains("$.jobLogs[0].entries[1].tHlc") && m.contains("number")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains("$.jobLogs[1].entries[0].link") && m.contains("missing")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.contains("tHlc") && m.contains("leading zeros")),
        "{msgs:?}"
    );
    assert_eq!(r["checks"]["schema"], "fail");
}

#[test]
fn bad_enqueue_input_changes_nothing() {
    let env = Env::new();
    let o = env.enqueue(&["--tenant", "t", "{}"]);
    assert!(o.status.success());
    let jsonl = env.path("bad.jsonl");
    std::fs::write(&jsonl, "{\"ok\":1}\n{\"broken\":\n{\"ok\":2}\n").unwrap();
    let o = env.enqueue(&["--tenant", "t", "--jsonl", jsonl.to_str().unwrap()]);
    assert_exit(&o, 2, "line 2 of");
    let bin = env.path("bin.json");
    std::fs::write(&bin, [0x7b, 0xff, 0x7d]).unwrap();
    let o = env.enqueue(&["--tenant", "t", &format!("@{}", bin.display())]);
    assert_exit(&o, 2, "not UTF-8");
    let o = env.run(&[
        "jobs", "enqueue", "--tenant", "t", "--node", "bad node", "{}",
    ]);
    assert_exit(&o, 2, "node id");
    assert_eq!(env.node_log_rows(), 1);
}

#[test]
fn store_is_wal_with_full_sync_and_versioned() {
    let env = Env::new();
    assert!(env
        .run(&["jobs", "enqueue", "--tenant", "t", "{}"])
        .status
        .success());
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(version >= 1);
    let store = airlock::core::store::Store::open(&env.db()).unwrap();
    let sync: i64 = store
        .conn()
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 2, "synchronous=FULL");
}

#[test]
fn untrusted_text_never_reaches_the_terminal_raw() {
    let env = Env::new();
    let o = env.enqueue(&["--tenant", "evil\u{1b}]0;pwned\u{7}", "{}"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !o.stderr.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    let f = env.path("evil\u{1b}[31m.json");
    std::fs::write(&f, "not json").unwrap();
    let o = env.run(&["jobs", "list", "--source", env.dir.path().to_str().unwrap()]);
    assert!(
        !o.stdout.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("\\x1b[31m"));
}

#[test]
fn verify_checks_signatures_against_the_trust_store() {
    let env = Env::new();
    let signed = vector("bundles/two-nodes-signed.json");
    let signed = signed.to_str().unwrap();
    let trusted = vector("keys/test-signer.pub.pem");
    let other = vector("keys/untrusted-signer.pub.pem");
    // trusted for this run
    let o = env.run(&[
        "jobs",
        "verify",
        signed,
        "--json",
        "--require-signature",
        "--trusted-key",
        trusted.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["checks"]["signature"], "pass");
    // not trusted
    let o = env.run(&[
        "jobs",
        "verify",
        signed,
        "--json",
        "--trusted-key",
        other.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["checks"]["signature"], "untrusted");
    assert_eq!(r["findings"][0]["kind"], "signer-untrusted");
    // trusted through the trust store
    let o = env.run(&[
        "keys",
        "trust",
        "add",
        trusted.to_str().unwrap(),
        "--name",
        "hq",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = env.run(&["jobs", "verify", signed]);
    assert_exit(&o, 0, "signed by hq");
    // a switched tenant breaks the signature
    let src = std::fs::read_to_string(vector("bundles/two-nodes-signed.json")).unwrap();
    let f = env.path("switched.json");
    std::fs::write(
        &f,
        src.replace("\"tenantId\": \"acme\"", "\"tenantId\": \"other\""),
    )
    .unwrap();
    let o = env.run(&["jobs", "verify", f.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["checks"]["signature"], "fail");
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == "signature-invalid"));
    // unsigned under --require-signature
    let o = env.run(&[
        "jobs",
        "verify",
        vector("bundles/two-nodes.json").to_str().unwrap(),
        "--json",
        "--require-signature",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["checks"]["signature"], "absent");
    assert_eq!(r["findings"][0]["kind"], "signature-missing");
}

/// The clock-skew tolerance of `jobs verify` and `jobs import` is `scheduler.hlc.maxClockSkew`
/// like everywhere else (SPEC sections 2 and 13): the flag, then $AIRLOCK_MAX_CLOCK_SKEW, then the
/// configuration file, then 5 s.
#[test]
fn clock_skew_tolerance_follows_flag_environment_and_file() {
    use airlock::core::bundle::{bundle_to_vec, load_bundle, manifest_digest};
    let env = Env::new();
    let mut b = load_bundle(&vector("bundles/two-nodes.json")).unwrap();
    let ahead = airlock::core::hlc::unix_ms_now() + 60_000;
    let last = b.job_logs[0].entries.len() - 1;
    b.job_logs[0].entries[last].t_hlc = format!("{ahead}:0:node-a");
    b.job_logs[0].relink(last).unwrap();
    b.job_logs[0].last_hlc = b.job_logs[0].entries[last].t_hlc.clone();
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    let file = env.path("ahead.json");
    std::fs::write(&file, bundle_to_vec(&b)).unwrap();
    let file = file.to_str().unwrap();
    let cfg = env.path("airlock.yaml");
    std::fs::write(&cfg, "scheduler:\n  hlc:\n    maxClockSkew: \"00:05:00\"\n").unwrap();
    let cfg = cfg.to_str().unwrap();
    let status = |args: &[&str], vars: &[(&str, &str)]| {
        let mut c = env.cmd(args);
        c.env_remove("AIRLOCK_MAX_CLOCK_SKEW");
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (o.status.code(), text(&o))
    };
    // The default: 60 s ahead is more than 5 s.
    let (code, out) = status(&["jobs", "verify", file], &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("clock-skew"), "{out}");
    // The environment and the file raise it; the flag wins over both.
    let skew = [("AIRLOCK_MAX_CLOCK_SKEW", "00:05:00")];
    assert_eq!(status(&["jobs", "verify", file], &skew).0, Some(0));
    assert_eq!(
        status(&["--config", cfg, "jobs", "verify", file], &[]).0,
        Some(0)
    );
    let flag = ["jobs", "verify", file, "--max-clock-skew-ms", "1000"];
    assert_eq!(status(&flag, &skew).0, Some(1));
    // jobs import verifies with the same tolerance.
    let import = ["jobs", "import", file, "--verify-only"];
    assert_eq!(status(&import, &[]).0, Some(1));
    assert_eq!(status(&import, &skew).0, Some(0));
    let (code, out) = status(&[&["--config", cfg][..], &import[..]].concat(), &[]);
    assert_eq!(code, Some(0), "{out}");
}

/// Commands that write nothing create nothing: `jobs import --dry-run` against a store that is
/// not there plans against an empty one (same plan as a new store would get) and leaves no file;
/// `chain append` needs a tenant's chain, so a missing store is an error, not a new empty store.
#[test]
fn a_dry_run_or_a_refused_append_leaves_no_new_store() {
    let env = Env::new();
    let bundle = vector("merge/a.json");
    let bundle = bundle.to_str().unwrap();
    let o = env.run(&["jobs", "import", bundle, "--dry-run", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["status"], "planned", "{plan}");
    assert!(!env.db().exists(), "the dry run made a store");
    let o = env.run(&[
        "chain",
        "append",
        "--tenant",
        "acme",
        "--job-id",
        "00000000-0000-4000-8000-000000000000",
        "--action",
        "DEQUEUE",
    ]);
    assert_exit(&o, 2, "no store at");
    assert!(!env.db().exists(), "the refused append made a store");
    // The real import makes it, with what the dry run planned.
    let o = env.run(&["jobs", "import", bundle, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let done: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(done["totals"], plan["totals"], "{done}");
}

/// An input that cannot be opened is named once: `nosuch.json: cannot read it: ...`.
#[test]
fn an_unreadable_bundle_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nosuch.json");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["jobs", "verify"])
        .arg(&missing)
        .env("AIRLOCK_DB", dir.path().join("store.db"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("nosuch.json").count(), 1, "{err}");
    assert!(err.contains("cannot read it"), "{err}");
}
