//! Snapshot signatures and proof files through the real binary: `chain verify` checks each stored
//! snapshot's signature against the trust store (with the function `chain verify-proof` uses), an
//! envelope with `"signatures": []` is malformed rather than unsigned, `chain prove -o` never
//! replaces a file without `--force`, and `chain verify-proof` reads a proof from standard input
//! (`-`, `/dev/stdin`), bounded. `airlock serve`'s chain API and its own chain verification judge
//! snapshot signatures as `chain verify` does.

mod common;

use airlock::core::trust::{key_id, private_key_pem, public_key_pem, SigningKey};
use common::{assert_exit, text};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A data directory (trust store), a store and a work directory of its own.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        Sandbox { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("work").join(name)
    }
    fn db(&self) -> PathBuf {
        self.dir.path().join("airlock.db")
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(args)
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("AIRLOCK_DB", self.db())
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
            .env_remove("AIRLOCK_CONFIG")
            .current_dir(self.path(""));
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).stdin(Stdio::null()).output().unwrap()
    }
    /// Runs with `input` on a pipe as standard input (written from a thread: the child may stop
    /// reading early, which is then no error here).
    fn run_stdin(&self, args: &[&str], input: Vec<u8>) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    }
    fn json(&self, args: &[&str]) -> (i32, Value) {
        let o = self.run(args);
        let v = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o)));
        (o.status.code().unwrap_or(-1), v)
    }
    /// `chain verify --tenant acme --json` with `extra` arguments: the exit code and the report.
    fn verify_json(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["chain", "verify", "--tenant", "acme", "--json"];
        args.extend_from_slice(extra);
        self.json(&args)
    }
    /// The stored envelope of the tenant's only snapshot.
    fn envelope(&self) -> Value {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        let text: String = conn
            .query_row("SELECT dsse_envelope FROM batch_snapshot", [], |r| r.get(0))
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
    /// Replaces the stored snapshot's signature with another key's signature of the same
    /// statement, under the same key id (the envelope still states this snapshot, but its
    /// signature does not verify); returns the forged signature.
    fn forge_signature(&self) -> String {
        use base64::Engine as _;
        let mut env = self.envelope();
        let statement = base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap();
        let other = SigningKey::from_bytes(&[10u8; 32]);
        let (forged, _) = airlock::core::trust::sign_statement(
            &other,
            env["payloadType"].as_str().unwrap(),
            &String::from_utf8(statement).unwrap(),
        );
        env["signatures"][0]["sig"] = Value::from(forged.clone());
        self.set_envelope(&env);
        forged
    }
    fn set_envelope(&self, env: &Value) {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        conn.execute(
            "UPDATE batch_snapshot SET dsse_envelope = ?1",
            [serde_json::to_string(env).unwrap()],
        )
        .unwrap();
    }
    /// `chain prove` of the first entry's job to `out` (`-o`), with `extra` arguments.
    fn prove_to(&self, out: &Path, extra: &[&str]) -> Output {
        let job = self.job_at(1);
        let mut args = vec![
            "chain",
            "prove",
            "--tenant",
            "acme",
            "--job-id",
            &job,
            "-o",
            s(out),
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
    /// The first entry's inclusion proof written to `name` in the work directory; its path.
    fn prove_first(&self, name: &str) -> PathBuf {
        let proof = self.path(name);
        let o = self.prove_to(&proof, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        proof
    }
    fn job_at(&self, seq: u64) -> String {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        conn.query_row(
            "SELECT job_id FROM scheduler_log WHERE seq = ?1",
            [seq as i64],
            |r| r.get(0),
        )
        .unwrap()
    }
}

fn merge_vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/vectors/merge")
        .join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes `key`'s private and public PEM files as `NAME.pem` and `NAME.pub.pem`.
fn key_files(sb: &Sandbox, name: &str, key: &SigningKey) -> (PathBuf, PathBuf) {
    let private = sb.path(&format!("{name}.pem"));
    let public = sb.path(&format!("{name}.pub.pem"));
    std::fs::write(&private, private_key_pem(key)).unwrap();
    std::fs::write(&public, public_key_pem(&key.verifying_key())).unwrap();
    (private, public)
}

/// A store with tenant acme (merge vector a.json, 6 entries) and one unsigned snapshot of it.
fn snapshotted() -> Sandbox {
    let sb = Sandbox::new();
    let o = sb.run(&["jobs", "import", s(&merge_vector("a.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&["chain", "snapshot", "--tenant", "acme"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    sb
}

/// The same, its snapshot signed with `key` (not trusted); returns the key's public PEM file too.
fn signed_snapshot(key: &SigningKey) -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    let (private, public) = key_files(&sb, "ops", key);
    let o = sb.run(&["jobs", "import", s(&merge_vector("a.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&[
        "chain",
        "snapshot",
        "--tenant",
        "acme",
        "--sign",
        "--key",
        s(&private),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    (sb, public)
}

/// `chain verify` used to check that a signed snapshot's envelope states the snapshot, not who
/// signed it. A snapshot signed by a key outside the trust store is `signer-untrusted`, one whose
/// signature does not verify `signature-invalid` (whatever `chain verify-proof` says of the same
/// snapshot, `chain verify` says too), each with the tenant and the snapshot it is about.
#[test]
fn chain_verify_checks_each_snapshot_signature_against_the_trust_store() {
    let key = SigningKey::from_bytes(&[9u8; 32]);
    let id = key_id(&key.verifying_key());
    let (sb, public) = signed_snapshot(&key);

    // Signed by a key the trust store does not hold: a finding, exit 1, text and JSON.
    let o = sb.run(&["chain", "verify", "--tenant", "acme"]);
    assert_exit(&o, 1, "signer-untrusted");
    assert!(
        text(&o).contains("snapshot #1 (entries 0..6) of tenant \"acme\""),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains(&id), "{}", text(&o));
    // Why is said once, in the finding; the snapshot's line points at it.
    assert_eq!(
        text(&o).matches("not in the trust store").count(),
        1,
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains(
            "x snapshot #1 (entries 0..6): its signer is not trusted (see the signer-untrusted finding)"
        ),
        "{}",
        text(&o)
    );
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(v["tenantId"], "acme");
    let f = &v["findings"].as_array().unwrap()[..];
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["kind"], "signer-untrusted");
    assert_eq!(f[0]["actual"], id.as_str());
    assert!(
        f[0]["message"].as_str().unwrap().contains("snapshot #1"),
        "{v}"
    );
    assert_eq!(v["snapshots"][0]["id"], 1);
    assert_eq!(v["snapshots"][0]["fromSeq"], 0);
    assert_eq!(v["snapshots"][0]["ok"], false);
    assert_eq!(v["snapshots"][0]["signature"], "untrusted");
    assert_eq!(v["snapshots"][0]["signedBy"], id.as_str());

    // Trusted for the run, or in the trust store: it verifies.
    let (code, v) = sb.verify_json(&["--trusted-key", s(&public)]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["snapshots"][0]["signature"], "pass");
    let o = sb.run(&["keys", "trust", "add", "--name", "ops", s(&public)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&["chain", "verify", "--tenant", "acme"]);
    assert_exit(&o, 0, "1 signed by a trusted key");

    // The same statement signed by another key under the trusted key's id: the envelope still
    // states this snapshot, but its signature does not verify.
    let forged = sb.forge_signature();
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 1, "{v}");
    let f = &v["findings"].as_array().unwrap()[..];
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["kind"], "signature-invalid");
    assert_eq!(f[0]["actual"], forged.as_str());
    assert_eq!(v["snapshots"][0]["signature"], "fail");
    // chain verify-proof judges the same snapshot the same way.
    let proof = sb.prove_first("proof.json");
    let (code, v) = sb.json(&["chain", "verify-proof", s(&proof), "--json"]);
    assert_eq!((code, &v["signature"]), (1, &Value::from("fail")), "{v}");
}

/// An unsigned snapshot is a finding only when a signature is required (`signature-missing`).
#[test]
fn chain_verify_requires_signed_snapshots_only_when_asked() {
    let sb = snapshotted();
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["snapshots"][0]["signature"], "absent");
    let (code, v) = sb.verify_json(&["--require-signature"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["findings"][0]["kind"], "signature-missing");
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("snapshot #1 (entries 0..6) of tenant \"acme\""),
        "{v}"
    );
    let o = sb
        .cmd(&["chain", "verify", "--tenant", "acme"])
        .env("AIRLOCK_REQUIRE_SIGNATURE", "1")
        .output()
        .unwrap();
    assert_exit(&o, 1, "signature-missing");
}

/// SPEC sections 5 and 8 sign a statement as a DSSE envelope, and an unsigned snapshot
/// has no envelope; an envelope whose `signatures` list is empty is malformed, not "unsigned"
/// (else emptying the list would downgrade a signed snapshot to an unsigned one that a proof check
/// accepts).
#[test]
fn an_envelope_with_no_signatures_is_malformed_not_unsigned() {
    let (sb, public) = signed_snapshot(&SigningKey::from_bytes(&[9u8; 32]));
    let mut env = sb.envelope();
    env["signatures"] = serde_json::json!([]);
    sb.set_envelope(&env);

    // The proof check refuses it, with or without a signature required, and says why.
    let proof = sb.prove_first("proof.json");
    let o = sb.run(&[
        "chain",
        "verify-proof",
        s(&proof),
        "--trusted-key",
        s(&public),
    ]);
    assert_exit(&o, 1, "\"signatures\" list is empty");
    assert!(text(&o).contains("malformed DSSE envelope"), "{}", text(&o));
    let (code, v) = sb.json(&["chain", "verify-proof", s(&proof), "--json"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["signature"], "fail");

    // chain verify: the snapshot fails (even without trusted keys) and the signature is invalid.
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["findings"][0]["kind"], "signature-invalid", "{v}");
    assert_eq!(v["snapshots"][0]["ok"], false);
    assert!(
        v["snapshots"][0]["message"]
            .as_str()
            .unwrap()
            .contains("malformed"),
        "{v}"
    );
}

/// A stored envelope that is not JSON at all is damage, not "unsigned" (which would downgrade a
/// signed snapshot). It used to stop every chain command of the tenant with a store error (exit 2,
/// "Conversion error from type Integer at index: 5"): `chain verify` now reports it as a
/// `signature-invalid` finding naming the row and the column (exit 1) and still checks the rest;
/// `chain tenants` lists the tenant naming the damaged row; an import into the tenant (which needs
/// the snapshot's positions, not its envelope) works; `chain prove` of a job the snapshot covers
/// is refused naming the row and `chain verify`.
#[test]
fn an_envelope_that_is_not_json_is_damage_not_unsigned() {
    let (sb, public) = signed_snapshot(&SigningKey::from_bytes(&[9u8; 32]));
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute("UPDATE batch_snapshot SET dsse_envelope = '{not json'", [])
        .unwrap();
    drop(conn);
    let verify = ["chain", "verify", "--tenant", "acme"];
    let o = sb.run(&[&verify[..], &["--trusted-key", s(&public)]].concat());
    assert_exit(&o, 1, "signature-invalid");
    for said in [
        "batch_snapshot row 1",
        "dsse_envelope is not JSON",
        "entries 0..6",
    ] {
        assert!(text(&o).contains(said), "{said}: {}", text(&o));
    }
    assert!(!text(&o).contains("unsigned"), "{}", text(&o));
    assert!(!text(&o).contains("Conversion error"), "{}", text(&o));
    // The damage is said once, in the finding; the snapshot's line points at it (it used to
    // repeat the finding's whole message).
    assert_eq!(
        text(&o).matches("dsse_envelope is not JSON").count(),
        1,
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains(
            "x snapshot #1 (entries 0..6): its dsse_envelope does not read (see the signature-invalid finding)"
        ),
        "{}",
        text(&o)
    );
    // Without trusted keys too; one finding, the snapshot's check failed (root still checked).
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["findings"][0]["kind"], "signature-invalid", "{v}");
    assert_eq!(v["findings"][0]["index"], Value::Null, "{v}");
    assert_eq!(v["snapshots"][0]["ok"], false, "{v}");
    assert_eq!(v["snapshots"][0]["signature"], "fail", "{v}");
    assert_eq!(
        v["snapshots"][0]["message"],
        "its dsse_envelope does not read (see the signature-invalid finding)",
        "{v}"
    );
    assert_eq!(
        v["snapshots"][0]["expectedRoot"],
        v["snapshots"][0]["computedRoot"]
    );

    let o = sb.run(&["chain", "tenants"]);
    assert_exit(&o, 0, "acme");
    assert!(
        text(&o).contains("damaged snapshot row(s) #1"),
        "{}",
        text(&o)
    );
    let (code, v) = sb.json(&["chain", "tenants", "--json"]);
    assert_eq!(
        (code, &v[0]["damagedSnapshots"]),
        (0, &serde_json::json!([1]))
    );

    let o = sb.run(&[
        "chain",
        "prove",
        "--tenant",
        "acme",
        "--job-id",
        &sb.job_at(1),
    ]);
    assert_exit(&o, 2, "batch_snapshot row 1");
    assert!(
        text(&o).contains("dsse_envelope is not JSON"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("airlock chain verify --tenant"),
        "{}",
        text(&o)
    );

    let o = sb.run(&["jobs", "import", s(&merge_vector("b.json"))]);
    assert_exit(&o, 0, "");
    let o = sb.run(&["chain", "snapshot", "--tenant", "acme"]);
    assert_exit(&o, 0, "snapshot #2");
}

/// A `batch_snapshot` row whose positions do not read (a negative `from_seq`, an `entry_count`
/// of 0, text in an integer column) is a `schema-invalid` finding of `chain verify` naming the row
/// and the column (it used to be a store error naming "type Integer at index: 5"); `chain
/// tenants` still lists the tenant; an import into the tenant or `chain snapshot` (which need to
/// know where the snapshots end) is refused naming the row and how to see it.
#[test]
fn a_snapshot_row_with_unreadable_positions_is_a_finding_and_refuses_appends() {
    for (set, column, says) in [
        ("from_seq = -5", "from_seq", "from_seq is -5"),
        ("entry_count = 0", "entry_count", "entry_count is 0"),
        (
            "entry_count = 'x'",
            "entry_count",
            "entry_count holds a value of type Text",
        ),
    ] {
        let sb = snapshotted();
        let conn = rusqlite::Connection::open(sb.db()).unwrap();
        conn.execute_batch(&format!("UPDATE batch_snapshot SET {set}"))
            .unwrap();
        drop(conn);
        let (code, v) = sb.verify_json(&[]);
        assert_eq!(code, 1, "{set}: {v}");
        let f = &v["findings"][0];
        assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{set}: {v}");
        assert_eq!(f["kind"], "schema-invalid", "{set}: {v}");
        let message = f["message"].as_str().unwrap();
        assert!(message.contains("batch_snapshot row 1"), "{set}: {message}");
        assert!(
            message.contains(says) && message.contains(column),
            "{set}: {message}"
        );
        let o = sb.run(&["chain", "tenants"]);
        assert_exit(&o, 0, "damaged snapshot row(s) #1");
        for args in [
            vec!["jobs", "import", s(&merge_vector("b.json"))],
            vec!["chain", "snapshot", "--tenant", "acme"],
        ] {
            let o = sb.run(&args);
            assert_exit(&o, 2, says);
            assert!(
                text(&o).contains("batch_snapshot row 1"),
                "{args:?}: {}",
                text(&o)
            );
            assert!(
                text(&o).contains("airlock chain verify --tenant \"acme\""),
                "{args:?}: {}",
                text(&o)
            );
            assert!(!text(&o).contains("Conversion error"), "{}", text(&o));
        }
    }
}

/// `chain prove -o FILE` used to replace an existing FILE without a word. It is refused (exit 2,
/// the file named, `--force` offered) and left as it was; `--force` replaces it.
#[test]
fn chain_prove_never_replaces_a_file_without_force() {
    let sb = snapshotted();
    let job = sb.job_at(1);
    let out = sb.path("keep.json");
    std::fs::write(&out, b"precious").unwrap();
    let prove = |extra: &[&str]| sb.prove_to(&out, extra);
    let o = prove(&[]);
    assert_exit(&o, 2, "keep.json already exists");
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    // --json prints nothing when the file is refused.
    let o = prove(&["--json"]);
    assert_exit(&o, 2, "already exists");
    assert!(o.stdout.is_empty(), "{}", text(&o));
    // A dangling symlink is an existing name too (the rename would replace it).
    let link = sb.path("link.json");
    std::os::unix::fs::symlink(sb.path("nowhere"), &link).unwrap();
    let o = sb.prove_to(&link, &[]);
    assert_exit(&o, 2, "link.json already exists");

    let o = prove(&["--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["entry"]["jobId"], job.as_str());
    let o = sb.run(&["chain", "verify-proof", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A new name needs no --force; no temporary file is left beside it.
    let fresh = sb.path("fresh.json");
    let o = sb.prove_to(&fresh, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(sb.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// `chain verify-proof` reads a proof from standard input as `-` or `/dev/stdin` (a
/// pipe), at most 16 MiB of it; a FIFO named by its path is still refused.
#[test]
fn chain_verify_proof_reads_standard_input_bounded() {
    let sb = snapshotted();
    let job = sb.job_at(1);
    let o = sb.run(&[
        "chain", "prove", "--tenant", "acme", "--job-id", &job, "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let proof = o.stdout;
    for name in ["-", "/dev/stdin"] {
        let o = sb.run_stdin(&["chain", "verify-proof", name], proof.clone());
        assert_exit(&o, 0, "OK  ");
        assert!(text(&o).contains(&job), "{}", text(&o));
        let o = sb.run_stdin(&["chain", "verify-proof", name, "--json"], proof.clone());
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((o.status.code(), &v["ok"]), (Some(0), &Value::from(true)));
        // Not a proof: exit 1 or 2 with what was wrong, never a panic.
        let o = sb.run_stdin(&["chain", "verify-proof", name], b"{\"x\":".to_vec());
        assert_exit(&o, 2, "not an inclusion proof");
        // More than the limit: refused once the limit is passed, not read to the end.
        let o = sb.run_stdin(
            &["chain", "verify-proof", name],
            vec![b' '; (16 << 20) + 4096],
        );
        assert_exit(&o, 2, "16 MiB limit");
    }
    // A FIFO passed as an ordinary path is still refused without waiting on it.
    let fifo = sb.path("fifo");
    common::make_fifo(&fifo);
    let o = sb.run(&["chain", "verify-proof", s(&fifo)]);
    assert_exit(&o, 2, "not a regular file");
}

/// `airlock serve` on the sandbox's store and trust store (with `extra` arguments), on a free
/// loopback port, once its start-up chain verification has finished; killed when dropped.
struct Served(common::Server);

impl Served {
    fn start(sb: &Sandbox, extra: &[&str]) -> Served {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Served(common::Server::spawn(
            sb.cmd(&args)
                .env_remove("AIRLOCK_LISTEN")
                .env_remove("AIRLOCK_TOKEN_FILE")
                .env("XDG_CONFIG_HOME", sb.path("config"))
                .stderr(Stdio::null()),
        ))
    }
    /// The status and JSON body of a GET of `path`.
    fn get(&self, path: &str) -> (u16, Value) {
        match common::http_client()
            .get(format!("{}{path}", self.0.url))
            .send()
        {
            Ok(r) => (r.status().as_u16(), r.json().unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        }
    }
    /// The chain verification of tenant acme over HTTP, with `extra` query parameters.
    fn verify(&self, extra: &str) -> (u16, Value) {
        self.get(&format!(
            "/api/v1/scheduler/chain/verify?tenantId=acme{extra}"
        ))
    }
    fn stop(self) {
        assert_eq!(self.0.stop(), 0);
    }
}

/// serve's chain API used to run the pass without trusted keys: a snapshot signed by a key outside
/// the trust store, or with a signature that does not verify, passed there while `chain verify`
/// failed it. It answers what `chain verify --json` prints under serve's trust store and
/// `--trusted-key` files (`signer-untrusted`, `signature-invalid`, `signature` and `signedBy` per
/// snapshot), and serve's own start-up verification counts such a tenant as failing (`/readyz`,
/// `airlock_chains_failing`).
#[test]
fn serve_judges_snapshot_signatures_as_chain_verify_does() {
    let key = SigningKey::from_bytes(&[9u8; 32]);
    let id = key_id(&key.verifying_key());
    let (sb, public) = signed_snapshot(&key);

    // Signed by a key serve does not trust.
    let served = Served::start(&sb, &[]);
    let (status, api) = served.verify("");
    assert_eq!(status, 200, "{api}");
    assert_eq!(api["ok"], false, "{api}");
    let f = api["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{api}");
    assert_eq!(f[0]["kind"], "signer-untrusted");
    assert_eq!(f[0]["actual"], id.as_str());
    assert_eq!(api["snapshots"][0]["signature"], "untrusted");
    assert_eq!(api["snapshots"][0]["signedBy"], id.as_str());
    let (code, cli) = sb.verify_json(&[]);
    assert_eq!((code, &api), (1, &cli));
    // The start-up verification judged it the same way.
    let (_, ready) = served.get("/readyz");
    assert_eq!(
        ready["failingTenants"],
        serde_json::json!(["acme"]),
        "{ready}"
    );
    // requireSignature is true or false; an unknown parameter is refused, not ignored.
    let (status, e) = served.verify("&requireSignature=yes");
    assert_eq!((status, &e["error"]), (400, &Value::from("bad-request")));
    let (status, e) = served.verify("&require_signature=true");
    assert_eq!(
        (status, &e["error"]),
        (400, &Value::from("unknown-parameter"))
    );
    served.stop();

    // Trusted with --trusted-key: it passes, in the API and in serve's own verification.
    let served = Served::start(&sb, &["--trusted-key", s(&public)]);
    let (status, api) = served.verify("");
    assert_eq!((status, &api["ok"]), (200, &Value::from(true)), "{api}");
    assert_eq!(api["snapshots"][0]["signature"], "pass");
    assert_eq!(api["snapshots"][0]["signedBy"], id.as_str());
    let (_, ready) = served.get("/readyz");
    assert_eq!(ready["failingTenants"], serde_json::json!([]), "{ready}");

    // Another key's signature under the trusted key's id: signature-invalid.
    let forged = sb.forge_signature();
    let (status, api) = served.verify("");
    assert_eq!((status, &api["ok"]), (200, &Value::from(false)), "{api}");
    let f = api["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{api}");
    assert_eq!(f[0]["kind"], "signature-invalid");
    assert_eq!(f[0]["actual"], forged.as_str());
    assert_eq!(api["snapshots"][0]["signature"], "fail");
    assert_eq!(api["snapshots"][0]["ok"], false);
    let (_, cli) = sb.verify_json(&["--trusted-key", s(&public)]);
    assert_eq!(api, cli);
    served.stop();
}

/// An unsigned snapshot fails serve's chain API only when a signature is required: by the request
/// (`requireSignature=true`, as `--require-signature`) or by serve's own policy, which a request
/// cannot waive (`requireSignature=false`).
#[test]
fn serve_requires_signed_snapshots_when_asked_or_by_policy() {
    let sb = snapshotted();
    let served = Served::start(&sb, &[]);
    let (status, api) = served.verify("");
    assert_eq!((status, &api["ok"]), (200, &Value::from(true)), "{api}");
    assert_eq!(api["snapshots"][0]["signature"], "absent");
    let (status, api) = served.verify("&requireSignature=true");
    assert_eq!((status, &api["ok"]), (200, &Value::from(false)), "{api}");
    assert_eq!(api["findings"][0]["kind"], "signature-missing", "{api}");
    let (_, cli) = sb.verify_json(&["--require-signature"]);
    assert_eq!(api, cli);
    served.stop();

    let served = Served::start(&sb, &["--require-signature"]);
    let (_, api) = served.verify("&requireSignature=false");
    assert_eq!(api["findings"][0]["kind"], "signature-missing", "{api}");
    let (_, ready) = served.get("/readyz");
    assert_eq!(
        ready["failingTenants"],
        serde_json::json!(["acme"]),
        "{ready}"
    );
    served.stop();
}

/// A `batch_snapshot` row whose positions do not read (a negative `from_seq`, an `entry_count` of
/// 0) was named by a finding but left out of `chain verify`'s "N of M snapshot(s) fail" count
/// ("0 of 1" beside a failing row): it is counted, in text and `--json`, as a failed check with
/// `unreadable` naming the column.
#[test]
fn a_snapshot_row_whose_positions_do_not_read_is_counted_as_failing() {
    let sb = Sandbox::new();
    let o = sb.run(&["jobs", "import", s(&merge_vector("a.json"))]);
    assert_exit(&o, 0, "");
    let o = sb.run(&["chain", "snapshot", "--tenant", "acme", "--batch-size", "3"]);
    assert_exit(&o, 0, "snapshot #2");
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute("UPDATE batch_snapshot SET entry_count = 0 WHERE id = 2", [])
        .unwrap();
    drop(conn);
    let o = sb.run(&["chain", "verify", "--tenant", "acme"]);
    assert_exit(&o, 1, "1 finding(s), 1 of 2 snapshot(s) fail");
    for said in [
        "x schema-invalid: batch_snapshot row 2 of tenant \"acme\": entry_count is 0",
        "x snapshot #2 (positions do not read): its entry_count does not read (see the schema-invalid finding)",
    ] {
        assert!(text(&o).contains(said), "{said}: {}", text(&o));
    }
    let (code, v) = sb.verify_json(&[]);
    assert_eq!(code, 1, "{v}");
    let snaps = v["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2, "{v}");
    assert_eq!(
        (&snaps[0]["id"], &snaps[0]["ok"]),
        (&1.into(), &true.into())
    );
    assert_eq!(snaps[0].get("unreadable"), None, "{v}");
    assert_eq!(
        (&snaps[1]["id"], &snaps[1]["ok"]),
        (&2.into(), &false.into())
    );
    assert_eq!(snaps[1]["unreadable"], "entry_count", "{v}");
    assert_eq!(snaps[1]["entryCount"], 0, "{v}");
}
