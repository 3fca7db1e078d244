//! Hostile input (issue 10): duplicate keys, the `--force` and signature policy, crafted ids and
//! inputs that would be quadratic, damaged stores and files that are not files. Through the real
//! binary where the user meets it; counts, never times.

mod common;

use airlock::core::bundle::{bundle_to_vec, manifest_digest, Bundle, BundleHeader, Entry, JobLog};
use airlock::core::chain::{node_link, payload_hash};
use airlock::core::ids::job_id;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use common::{assert_exit, text};
use proptest::prelude::*;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$(std::ffi::OsString::from(AsRef::<OsStr>::as_ref(&$a))),*]
    };
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors")
}
fn signed_vector() -> PathBuf {
    vectors().join("bundles/two-nodes-signed.json")
}
fn unsigned_vector() -> PathBuf {
    vectors().join("bundles/two-nodes.json")
}
fn test_signer_pub() -> PathBuf {
    vectors().join("keys/test-signer.pub.pem")
}

/// A data directory, a store and a work directory of its own.
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
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("AIRLOCK_DB", self.db())
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
            .current_dir(self.path(""));
        c
    }
    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
    fn json<S: AsRef<OsStr>>(&self, args: &[S]) -> (i32, Value) {
        let o = self.run(args);
        let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (o.status.code().unwrap_or(-1), v)
    }
    fn chain_rows(&self) -> i64 {
        if !self.db().exists() {
            return 0;
        }
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        conn.query_row("SELECT COUNT(*) FROM scheduler_log", [], |r| r.get(0))
            .unwrap()
    }
    /// Writes `text` into the work directory.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn kinds(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The signed vector with entry 1 of node-a carrying `enqueuedAt` twice (same value).
fn repeated_enqueued_at() -> String {
    let doc = std::fs::read_to_string(signed_vector()).unwrap();
    let line = "\"enqueuedAt\": \"2026-01-05T12:00:00.253Z\"";
    assert_eq!(doc.matches(line).count(), 1);
    doc.replacen(line, &format!("{line},\n          {line}"), 1)
}

#[test]
fn a_repeated_key_in_a_signed_entry_is_schema_invalid_and_the_job_is_never_lost() {
    let sb = Sandbox::new();
    let tampered = sb.write("tampered.json", &repeated_enqueued_at());
    let trust = args!["--require-signature", "--trusted-key", test_signer_pub()];
    let mut verify = args!["jobs", "verify", &tampered, "--json"].to_vec();
    verify.extend(trust.clone());
    let (code, report) = sb.json(&verify);
    assert_eq!(code, 1, "{report}");
    let f = &report["findings"][0];
    assert_eq!(f["kind"], "schema-invalid");
    assert_eq!(f["index"], 1);
    assert_eq!(f["nodeId"], "node-a");
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("$.jobLogs[0].entries[1].enqueuedAt: duplicate key"));
    assert_eq!(report["checks"]["signature"], "pass");

    let mut import = args!["jobs", "import", &tampered].to_vec();
    import.extend(trust.clone());
    let o = sb.run(&import);
    assert_exit(&o, 1, "duplicate key");
    assert_eq!(sb.chain_rows(), 0);

    // Forced: the broken log is cut at entry 1 and every dropped entry is listed ...
    import.push("--force".into());
    import.push("--json".into());
    let (code, r) = sb.json(&import);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["totals"]["dropped"], 4, "{r}");
    assert!(r["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["reason"] == "schema-invalid" && d["nodeId"] == "node-a"));
    // ... and the genuine bundle still brings them in afterwards.
    let mut genuine = args!["jobs", "import", signed_vector(), "--json"].to_vec();
    genuine.extend(trust);
    let (code, r) = sb.json(&genuine);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["totals"]["new"], 4, "{r}");
    assert_eq!(sb.chain_rows(), 9);
}

#[test]
fn keys_repeated_at_the_header_and_log_level_are_schema_invalid_and_force_does_not_waive_the_header(
) {
    let sb = Sandbox::new();
    let doc = std::fs::read_to_string(unsigned_vector()).unwrap();
    let header = sb.write(
        "header.json",
        &doc.replacen(
            "\"tenantId\": \"acme\",",
            "\"tenantId\": \"acme\", \"tenantId\": \"other\",",
            1,
        ),
    );
    let (code, report) = sb.json(&args!["jobs", "verify", &header, "--json"]);
    assert_eq!(code, 1);
    assert!(report["findings"][0]["message"]
        .as_str()
        .unwrap()
        .starts_with("$.tenantId: duplicate key"));
    let o = sb.run(&args!["jobs", "import", &header, "--force"]);
    assert_exit(&o, 1, "--force never waives this");
    // The advice is for a damaged header (export it again), not for a signature: the bundle is
    // unsigned and no signature is required.
    let t = text(&o);
    let refusal = t.lines().find(|l| l.starts_with("refused: ")).unwrap();
    assert!(refusal.contains("the bundle header is damaged"), "{t}");
    assert!(refusal.contains("export the bundle again"), "{t}");
    assert!(
        !refusal.contains("signature") && !refusal.contains("keys trust add"),
        "{t}"
    );
    assert_eq!(sb.chain_rows(), 0);

    let log = sb.write(
        "log.json",
        &doc.replacen(
            "\"nodeId\": \"node-b\",\n      \"lastHlc\"",
            "\"nodeId\": \"node-b\", \"nodeId\": \"node-b\",\n      \"lastHlc\"",
            1,
        ),
    );
    let (code, report) = sb.json(&args!["jobs", "verify", &log, "--json"]);
    assert_eq!(code, 1, "{report}");
    assert!(report["findings"][0]["message"]
        .as_str()
        .unwrap()
        .starts_with("$.jobLogs[1].nodeId: duplicate key"));
}

/// A copy of the signed vector whose createdAt was edited (the signature no longer verifies).
fn invalid_signature(sb: &Sandbox) -> PathBuf {
    let doc = std::fs::read_to_string(signed_vector()).unwrap();
    sb.write(
        "invalid-sig.json",
        &doc.replacen("2026-01-05T12:01:00.000Z", "2026-01-05T12:01:00.001Z", 1),
    )
}

#[test]
fn force_never_waives_a_missing_invalid_or_untrusted_signature() {
    let sb = Sandbox::new();
    let invalid = invalid_signature(&sb);
    for (file, trusted, kind) in [
        (unsigned_vector(), true, "signature-missing"),
        (signed_vector(), false, "signer-untrusted"),
        (invalid, true, "signature-invalid"),
    ] {
        for require in [true, false] {
            if !require && kind == "signature-missing" {
                continue; // an unsigned bundle without a policy is fine
            }
            let mut a = args!["jobs", "import", &file, "--force", "--json"].to_vec();
            if require {
                a.push("--require-signature".into());
            }
            if trusted {
                a.push("--trusted-key".into());
                a.push(test_signer_pub().into());
            }
            let (code, r) = sb.json(&a);
            assert_eq!(code, 1, "{kind} require={require}: {r}");
            assert_eq!(r["status"], "refused");
            assert!(kinds(&r["bundles"][0]["verification"]).contains(&kind.to_string()));
            assert_eq!(sb.chain_rows(), 0, "{kind} imported with --force");
            // The text gives a signature's remedy, and says nothing of a damaged header.
            a.retain(|x| x != "--json");
            let t = text(&sb.run(&a));
            let refusal = t.lines().find(|l| l.starts_with("refused: ")).unwrap();
            assert!(
                refusal.contains("keys trust add") && !refusal.contains("header"),
                "{t}"
            );
        }
    }
}

#[test]
fn the_persistent_policy_requires_signatures_from_the_environment_or_the_trust_store() {
    let sb = Sandbox::new();
    let unsigned = unsigned_vector();
    let o = sb.run(&args!["jobs", "verify", &unsigned]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb
        .cmd()
        .args(args!["jobs", "import", &unsigned, "--force"])
        .env("AIRLOCK_REQUIRE_SIGNATURE", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("signature-missing"));
    let o = sb
        .cmd()
        .args(args!["jobs", "verify", &unsigned])
        .env("AIRLOCK_REQUIRE_SIGNATURE", "perhaps")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("AIRLOCK_REQUIRE_SIGNATURE"));

    let o = sb.run(&args!["keys", "policy", "--require-signature", "on"]);
    assert!(o.status.success(), "{}", text(&o));
    let trust_json: Value = serde_json::from_slice(
        &std::fs::read(sb.dir.path().join("data/airlock/trust.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(trust_json["requireSignature"], true);
    // Now an unsigned bundle is refused without any flag, and "0" in the environment does not waive it.
    for env in [None, Some("0")] {
        let mut c = sb.cmd();
        c.args(args!["jobs", "import", &unsigned, "--force"]);
        if let Some(v) = env {
            c.env("AIRLOCK_REQUIRE_SIGNATURE", v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    }
    assert_eq!(sb.chain_rows(), 0);
    let o = sb.run(&args![
        "jobs",
        "import",
        signed_vector(),
        "--trusted-key",
        test_signer_pub()
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(sb.chain_rows(), 9);
}

#[test]
fn a_tampered_copy_of_an_imported_bundle_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run(&args!["jobs", "import", unsigned_vector()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = std::fs::read_to_string(unsigned_vector()).unwrap();
    let tampered = sb.write(
        "tampered.json",
        &doc.replacen("\\\"priority\\\":1", "\\\"priority\\\":9", 1),
    );
    let o = sb.run(&args!["jobs", "import", &tampered]);
    assert_exit(&o, 1, "payload-modified");
}

/// A valid unsigned bundle with `logs` node logs of one entry each, nodes `n000000`, ...
fn many_logs(path: &Path, logs: usize) {
    let payloads: Vec<String> = (0..logs).map(|i| format!("{{\"i\":{i}}}")).collect();
    forged(path, "acme", &payloads);
}

/// An unsigned bundle of tenant `tenant` with one node log of one entry per payload, every hash,
/// link and digest computed over the payload text as given (canonical or not).
fn forged(path: &Path, tenant: &str, payloads: &[String]) {
    let start = 1_767_000_000_000u64;
    let job_logs: Vec<JobLog> = payloads
        .iter()
        .enumerate()
        .map(|(i, payload)| {
            let node = format!("n{i:06}");
            let t = format!("{}:0:{node}", start + i as u64);
            let hash = payload_hash(payload);
            let id = job_id(payload, None);
            let link = B64.encode(node_link(None, &id, &t, &hash));
            JobLog {
                node_id: node.clone(),
                last_hlc: t.clone(),
                chain_head: link.clone(),
                entries: vec![Entry {
                    node_id: node,
                    t_hlc: t,
                    job_id: id.to_string(),
                    partition_key: None,
                    payload: payload.clone(),
                    payload_hash: B64.encode(hash),
                    prev_link: None,
                    link,
                    enqueued_at: "2026-01-01T00:00:00.000Z".into(),
                }],
            }
        })
        .collect();
    let bundle = Bundle {
        header: BundleHeader {
            bundle_id: uuid::Uuid::new_v4().to_string(),
            tenant_id: tenant.into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            created_by_node_id: "n000000".into(),
            manifest_digest: manifest_digest(&job_logs),
            signature: None,
            signed_by: None,
        },
        job_logs,
    };
    std::fs::write(path, bundle_to_vec(&bundle)).unwrap();
}

/// The test signer's private key, copied with mode 0600 (no permission warning).
fn signer_key(sb: &Sandbox) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let key = sb.path("signer.pem");
    std::fs::copy(vectors().join("keys/test-signer.pem"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    key
}

#[test]
fn one_tenant_rule_for_enqueue_verify_import_and_sign() {
    let sb = Sandbox::new();
    let key = signer_key(&sb);
    let long = "t".repeat(300);
    for tenant in [
        "a\0b",
        "a\u{1b}[2J",
        "a\nb",
        "evil\u{202e}gpj",
        "ben\u{61c}ch",
        "a\u{200f}b",
        long.as_str(),
        "cafe\u{301}",
    ] {
        // (A NUL cannot travel in an argument at all.)
        if !tenant.contains('\0') {
            let o = sb.run(&args!["jobs", "enqueue", "--tenant", tenant, "{}"]);
            assert_eq!(o.status.code(), Some(2), "{tenant:?}: {}", text(&o));
        }
        let file = sb.path("tenant.json");
        forged(&file, tenant, &["{\"a\":1}".to_string()]);
        let (code, report) = sb.json(&args!["jobs", "verify", "--json", &file]);
        assert_eq!(code, 1, "{tenant:?}: {report}");
        assert!(
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["kind"] == "schema-invalid"
                    && f["message"].as_str().unwrap().contains("$.tenantId")),
            "{tenant:?}: {report}"
        );
        let o = sb.run(&args!["jobs", "import", &file]);
        assert_eq!(o.status.code(), Some(1), "{tenant:?}: {}", text(&o));
        assert_eq!(sb.chain_rows(), 0, "{tenant:?}");
        let before = std::fs::read(&file).unwrap();
        let o = sb.run(&args!["jobs", "sign", "--key", &key, &file]);
        assert_eq!(o.status.code(), Some(2), "{tenant:?}: {}", text(&o));
        assert!(
            text(&o).contains("schema-invalid"),
            "{tenant:?}: {}",
            text(&o)
        );
        assert_eq!(std::fs::read(&file).unwrap(), before, "{tenant:?}");
        assert!(!text(&o).contains('\u{1b}'), "{tenant:?}: {}", text(&o));
    }
    // The same bundle with a good tenant id signs, verifies and imports.
    let file = sb.path("good.json");
    forged(&file, "caf\u{e9}", &["{\"a\":1}".to_string()]);
    let o = sb.run(&args!["jobs", "sign", "--key", &key, &file]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&args![
        "keys",
        "trust",
        "add",
        test_signer_pub(),
        "--name",
        "signer"
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&args!["jobs", "import", &file]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(sb.chain_rows(), 1);
}

#[test]
fn non_canonical_or_non_json_payloads_are_schema_invalid_and_never_imported() {
    let sb = Sandbox::new();
    for payload in [
        "{\"b\":1,\"a\":2}",
        "{\"a\": 1}",
        "{\"a\":1.0}",
        "not json",
        "",
    ] {
        let file = sb.path("p.json");
        forged(&file, "acme", &[payload.to_string()]);
        let (code, report) = sb.json(&args!["jobs", "verify", "--json", &file]);
        assert_eq!(code, 1, "{payload:?}: {report}");
        assert!(
            kinds(&report).contains(&"schema-invalid".to_string()),
            "{payload:?}: {report}"
        );
        let o = sb.run(&args!["jobs", "import", &file]);
        assert_eq!(o.status.code(), Some(1), "{payload:?}: {}", text(&o));
        // --force cuts the log to its verified prefix: nothing of it.
        let o = sb.run(&args!["jobs", "import", "--force", &file]);
        assert!(o.status.code() != Some(2), "{payload:?}: {}", text(&o));
        assert_eq!(sb.chain_rows(), 0, "{payload:?}");
    }
}

#[test]
fn jobs_sign_in_place_follows_a_symlink_and_refuses_a_dangling_one() {
    let sb = Sandbox::new();
    let key = signer_key(&sb);
    let real = sb.path("real.json");
    std::fs::copy(unsigned_vector(), &real).unwrap();
    let link = sb.path("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = sb.run(&args!["jobs", "sign", "--key", &key, &link]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_link(&link).unwrap(), real);
    let signed = std::fs::read_to_string(&real).unwrap();
    assert!(signed.contains("\"signedBy\""), "{signed}");
    let dangling = sb.path("dangling.json");
    std::os::unix::fs::symlink(sb.path("gone.json"), &dangling).unwrap();
    let o = sb.run(&args![
        "jobs", "sign", "--key", &key, "-o", &dangling, &real
    ]);
    assert_exit(&o, 2, "symbolic link");
    assert!(!sb.path("gone.json").exists());
    assert!(std::fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn messages_name_a_bom_the_bad_byte_an_unknown_job_and_a_dangling_demo_dir() {
    let sb = Sandbox::new();
    let doc = std::fs::read(unsigned_vector()).unwrap();
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(&doc);
    let file = sb.path("bom.json");
    std::fs::write(&file, &bom).unwrap();
    let o = sb.run(&args!["jobs", "verify", &file]);
    assert_exit(&o, 2, "byte order mark");

    // A UTF-16 surrogate encoded as UTF-8 (ED A0 80) inside the node id: reported at its byte.
    let at = doc.windows(6).position(|w| w == b"node-a").unwrap();
    let mut bad = doc[..at].to_vec();
    bad.extend_from_slice(b"\xED\xA0\x80");
    bad.extend_from_slice(&doc[at..]);
    let file = sb.path("codepoint.json");
    std::fs::write(&file, &bad).unwrap();
    let o = sb.run(&args!["jobs", "verify", &file]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("byte {at} ")),
        "{at}: {}",
        text(&o)
    );

    imported_and_snapshotted(&sb);
    let o = sb.run(&args![
        "chain",
        "prove",
        "--tenant",
        "acme",
        "--job-id",
        "00000000-34b7-50bf-965d-3404c4c09232"
    ]);
    assert_exit(&o, 2, "is not in the chain");
    assert!(!text(&o).contains("lifecycle"), "{}", text(&o));

    let dir = sb.path("demo-link");
    std::os::unix::fs::symlink(sb.path("no/such/dir"), &dir).unwrap();
    let o = sb.run(&args!["demo", "--dir", &dir]);
    assert_exit(&o, 2, &dir.display().to_string());
    assert!(text(&o).contains("does not exist"), "{}", text(&o));
}

#[test]
fn an_error_exit_prints_a_backtrace_only_when_one_is_asked_for() {
    let sb = Sandbox::new();
    let missing = sb.path("missing.json");
    let o = sb
        .cmd()
        .env("RUST_BACKTRACE", "1")
        .env_remove("RUST_LIB_BACKTRACE")
        .args(args!["jobs", "verify", &missing])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!text(&o).contains("backtrace"), "{}", text(&o));
    let o = sb
        .cmd()
        .env("RUST_LIB_BACKTRACE", "1")
        .args(args!["jobs", "verify", &missing])
        .output()
        .unwrap();
    assert_exit(&o, 2, "backtrace (RUST_LIB_BACKTRACE is set)");
}

/// End to end over many logs (the per-node lookup itself is counted at 100,000 nodes in
/// `core::import::load`'s unit tests; a debug build verifies some 2,000 entries a second).
#[test]
fn ten_thousand_one_entry_logs_plan_through_the_binary() {
    let sb = Sandbox::new();
    let file = sb.path("many.json");
    many_logs(&file, 10_000);
    let o = sb.run(&args!["jobs", "import", &file, "--dry-run", "--show", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("10000 new"), "{}", &out[..2000.min(out.len())]);
}

#[test]
fn two_hundred_thousand_unknown_keys_verify_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let doc = std::fs::read_to_string(unsigned_vector()).unwrap();
    let mut extra = String::new();
    for i in 0..200_000 {
        extra.push_str(&format!("\"x{i}\": 0, "));
    }
    extra.push_str("\"x7\": 1, ");
    let file = dir.path().join("keys.json");
    std::fs::write(
        &file,
        doc.replacen("\"tenantId\"", &format!("{extra}\"tenantId\""), 1),
    )
    .unwrap();
    let opts = airlock::core::verify::VerifyOptions {
        max_clock_skew: None,
        ..Default::default()
    };
    let r = airlock::core::verify::verify_file(&file, &opts).unwrap();
    let unknown = r
        .findings
        .iter()
        .filter(|f| f.message.ends_with("unknown field"))
        .count();
    let repeated = r
        .findings
        .iter()
        .filter(|f| f.message.starts_with("$.x7: duplicate key"))
        .count();
    assert_eq!((unknown, repeated), (200_001, 1));
}

// ---- import never drops an entry that verify did not report ----

/// Ways to damage one entry of the vector's text (each keeps the file valid JSON).
fn mutate(doc: &str, entry: usize, how: u8) -> String {
    // Entries are the objects that start with `"nodeId"` at 10 spaces of indentation.
    let marker = "        {\n          \"nodeId\"";
    let starts: Vec<usize> = doc.match_indices(marker).map(|(i, _)| i).collect();
    let at = starts[entry % starts.len()] + "        {\n".len();
    let (head, tail) = doc.split_at(at);
    let insert = match how % 8 {
        0 => "          \"enqueuedAt\": \"2026-01-05T12:00:00.000Z\",\n".to_string(),
        1 => "          \"link\": \"AAAA\",\n".to_string(),
        2 => "          \"surprise\": {\"a\": 1, \"a\": 2},\n".to_string(),
        3 => "          \"payload\": 7,\n".to_string(),
        4 => "          \"prevLink\": null,\n".to_string(),
        5 => "          \"tHlc\": \"1:0:x\",\n".to_string(),
        6 => "          \"jobId\": \"9CD8A807-34B7-50BF-965D-3404C4C09232\",\n".to_string(),
        _ => "          \"partitionKey\": \"p\",\n          \"partitionKey\": \"p\",\n".to_string(),
    };
    format!("{head}{insert}{tail}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn import_never_drops_an_entry_that_verify_did_not_report(
        damage in proptest::collection::vec((0usize..11, 0u8..8), 0..4)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut doc = std::fs::read_to_string(unsigned_vector()).unwrap();
        for (entry, how) in &damage {
            doc = mutate(&doc, *entry, *how);
        }
        let file = dir.path().join("b.json");
        std::fs::write(&file, &doc).unwrap();
        let store_path = dir.path().join("s.db");
        let store = airlock::core::store::Store::open(&store_path).unwrap();
        let mut opts = airlock::core::import::ImportOptions::new("prop");
        opts.force = true;
        let plan = airlock::core::import::plan_import(&store, &[file], &opts).unwrap();
        let report = &plan.bundles[0].verification;
        prop_assert_eq!(
            plan.totals.new + plan.totals.duplicates + plan.totals.dropped,
            plan.totals.entries
        );
        for d in &plan.dropped {
            let log = report.log_nodes.iter().position(|n| *n == d.origin.node_id);
            let covered = report.findings.iter().any(|f| {
                f.log.is_some() && f.log == log && f.index.is_none_or(|i| i <= d.origin.index)
            });
            prop_assert!(covered, "entry {} of {} dropped without a finding: {:?}", d.origin.index, d.origin.node_id, report.findings);
        }
        if damage.is_empty() {
            prop_assert!(report.ok && plan.dropped.is_empty());
        }
    }
}

// ---- damaged stores, locks and the clock ----

fn merge_vector(name: &str) -> PathBuf {
    vectors().join("merge").join(name)
}

fn sql(sb: &Sandbox, statement: &str) {
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute_batch(statement).unwrap();
}

#[test]
fn an_import_onto_a_damaged_chain_is_refused_and_changes_nothing() {
    for damage in [
        // the head entry's payload edited
        "UPDATE scheduler_log SET payload = '{\"x\":1}' WHERE seq = (SELECT length - 1 FROM chain_heads)",
        // the head moved back
        "UPDATE chain_heads SET length = length - 1",
        // the last snapshot's root edited
        "UPDATE batch_snapshot SET merkle_root = replace(merkle_root, substr(merkle_root, 1, 1), 'f')",
    ] {
        let sb = Sandbox::new();
        let o = sb.run(&args!["jobs", "import", merge_vector("a.json")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = sb.run(&args!["chain", "snapshot", "--tenant", "acme"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        sql(&sb, damage);
        let before = sb.chain_rows();
        let o = sb.run(&args!["jobs", "import", merge_vector("b.json")]);
        assert_eq!(o.status.code(), Some(2), "{damage}: {}", text(&o));
        assert!(text(&o).contains("is damaged"), "{}", text(&o));
        assert!(text(&o).contains("backup"), "{}", text(&o));
        assert_eq!(sb.chain_rows(), before);
    }
}

#[test]
fn a_corrupt_b_tree_is_found_by_quick_check_before_an_import() {
    let sb = Sandbox::new();
    let o = sb.run(&args!["jobs", "import", merge_vector("a.json")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (root, page): (i64, i64) = {
        let conn = rusqlite::Connection::open(sb.db()).unwrap();
        (
            conn.query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 'scheduler_jobs'",
                [],
                |r| r.get(0),
            )
            .unwrap(),
            conn.query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap(),
        )
    };
    // Every connection closed: the WAL is checkpointed into the file. Break the page type byte.
    let mut bytes = std::fs::read(sb.db()).unwrap();
    bytes[((root - 1) * page) as usize] = 0x07;
    std::fs::write(sb.db(), &bytes).unwrap();
    let o = sb.run(&args!["jobs", "import", merge_vector("b.json")]);
    assert_exit(&o, 2, "quick_check of scheduler_jobs");
}

#[test]
fn a_corrupt_stored_link_is_an_error_naming_table_and_row_not_zeros() {
    let sb = Sandbox::new();
    let o = sb.run(&args!["jobs", "import", merge_vector("a.json")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    sql(
        &sb,
        "UPDATE scheduler_log SET chain_link = 'not-hex' WHERE seq = 1",
    );
    let o = sb.run(&args!["chain", "snapshot", "--tenant", "acme"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("scheduler_log row tenant \"acme\" seq 1"),
        "{}",
        text(&o)
    );
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    let snaps: i64 = conn
        .query_row("SELECT COUNT(*) FROM batch_snapshot", [], |r| r.get(0))
        .unwrap();
    assert_eq!(snaps, 0);
}

#[test]
fn two_processes_enqueue_ten_thousand_jobs_each_into_one_log() {
    let sb = Sandbox::new();
    let batches = 20;
    let per = 500;
    for p in 0..2 {
        for b in 0..batches {
            let lines: String = (0..per)
                .map(|i| format!("{{\"p\":{p},\"b\":{b},\"i\":{i}}}\n"))
                .collect();
            sb.write(&format!("p{p}-{b}.jsonl"), &lines);
        }
    }
    // Open the store once so both enqueuers meet an existing schema as well as a fresh lock.
    let workers: Vec<_> = (0..2)
        .map(|p| {
            let files: Vec<PathBuf> = (0..batches)
                .map(|b| sb.path(&format!("p{p}-{b}.jsonl")))
                .collect();
            let cmds: Vec<Command> = files
                .iter()
                .map(|f| {
                    let mut c = sb.cmd();
                    c.args(args!["jobs", "enqueue", "--tenant", "acme", "--jsonl", f]);
                    c
                })
                .collect();
            std::thread::spawn(move || {
                for mut c in cmds {
                    let o = c.output().unwrap();
                    assert!(o.status.success(), "{}", text(&o));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let out = sb.path("all.json");
    let o = sb.run(&args!["jobs", "export", "--tenant", "acme", "-o", &out]);
    assert!(o.status.success(), "{}", text(&o));
    let (code, report) = sb.json(&args!["jobs", "verify", &out, "--json"]);
    assert_eq!(code, 0, "{}", &report["findings"]);
    assert_eq!(report["stats"]["entries"], 20_000);
    assert_eq!(report["stats"]["nodes"], 1);
}

#[test]
fn a_store_that_cannot_switch_to_wal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let holder = rusqlite::Connection::open(&path).unwrap();
    // A store (its schema table) held in rollback-journal mode by a reader.
    holder
        .execute_batch(
            "PRAGMA journal_mode=DELETE; CREATE TABLE schema_migrations(version INTEGER PRIMARY KEY);
             BEGIN; SELECT * FROM schema_migrations;",
        )
        .unwrap();
    let mut stmt = holder.prepare("SELECT * FROM schema_migrations").unwrap();
    let _rows = stmt.query([]).unwrap();
    let err = match airlock::core::store::Store::open(&path) {
        Ok(_) => panic!("opened a store that is not in WAL mode"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("not in WAL journal mode") || err.contains("locked by another writer"),
        "{err}"
    );
    assert!(err.contains(&path.display().to_string()), "{err}");
}

// ---- files that are not files, sizes, arithmetic, untrusted store text ----

/// Runs `c`, killing it after 30 s (a read that blocks on a FIFO would otherwise hang the test).
fn run_bounded(mut c: Command) -> Output {
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the command blocked");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn fifos_and_devices_are_refused_without_blocking_or_reading_forever() {
    let sb = Sandbox::new();
    let fifo = sb.path("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let at_fifo = format!("@{}", fifo.display());
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        args!["jobs", "verify", &fifo].to_vec(),
        args!["jobs", "import", &fifo].to_vec(),
        args!["jobs", "enqueue", "--tenant", "t", &at_fifo].to_vec(),
        args!["jobs", "enqueue", "--tenant", "t", "@/dev/zero"].to_vec(),
        args!["jobs", "enqueue", "--tenant", "t", "--jsonl", "/dev/zero"].to_vec(),
        args!["jobs", "enqueue", "--tenant", "t", "--jsonl", &fifo].to_vec(),
        args!["chain", "verify-proof", "/dev/zero"].to_vec(),
        args!["chain", "verify-proof", &fifo].to_vec(),
        args!["jobs", "verify", "--trusted-key", &fifo, unsigned_vector()].to_vec(),
    ];
    for a in cases {
        let mut c = sb.cmd();
        c.args(&a);
        let o = run_bounded(c);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", text(&o));
        assert!(
            text(&o).contains("not a regular file"),
            "{a:?}: {}",
            text(&o)
        );
    }
    let o = sb.run(&args!["outbox", "--outbox", "/dev/null", "status"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!Path::new("/dev/null-wal").exists());
}

#[test]
fn inputs_over_their_limits_are_refused_and_sparse_files_allocate_nothing() {
    let sb = Sandbox::new();
    let big = sb.path("big.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 << 20).unwrap();
    let o = sb.run(&args![
        "jobs",
        "enqueue",
        "--tenant",
        "t",
        format!("@{}", big.display())
    ]);
    assert_exit(&o, 2, "16 MiB limit");
    let mut line = vec![b'1'; (16 << 20) + 10];
    line.push(b'\n');
    std::fs::write(sb.path("long.jsonl"), &line).unwrap();
    let o = sb.run(&args![
        "jobs",
        "enqueue",
        "--tenant",
        "t",
        "--jsonl",
        sb.path("long.jsonl")
    ]);
    assert_exit(&o, 2, "line 1");
    // A sparse 100 GiB "bundle": read, not pre-sized from its length.
    let sparse = sb.path("sparse.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(100 << 30)
        .unwrap();
    let o = sb.run(&args!["jobs", "import", &sparse]);
    assert_exit(&o, 2, "byte 0");
}

/// The job id of the tenant chain's entry at `seq`, read from the store.
fn job_at(sb: &Sandbox, seq: u64) -> String {
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.query_row(
        "SELECT job_id FROM scheduler_log WHERE seq = ?1",
        [seq as i64],
        |r| r.get(0),
    )
    .unwrap()
}

fn imported_and_snapshotted(sb: &Sandbox) {
    let o = sb.run(&args!["jobs", "import", merge_vector("a.json")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&args!["chain", "snapshot", "--tenant", "acme"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn u64_fields_of_proofs_and_positions_never_wrap() {
    let sb = Sandbox::new();
    imported_and_snapshotted(&sb);
    let job = job_at(&sb, 2);
    let proof = sb.path("proof.json");
    let o = sb.run(&args![
        "chain", "prove", "--tenant", "acme", "--job-id", &job, "-o", &proof
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&args!["chain", "verify-proof", &proof]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&proof).unwrap()).unwrap();
    doc["snapshot"]["fromSeq"] = Value::from(u64::MAX);
    std::fs::write(&proof, serde_json::to_vec(&doc).unwrap()).unwrap();
    let o = sb.run(&args!["chain", "verify-proof", &proof]);
    assert_exit(&o, 1, "fromSeq");

    let o = sb.run(&args![
        "chain",
        "show",
        "--tenant",
        "acme",
        "--from",
        u64::MAX.to_string()
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("#0 "),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains(&format!("--from {} is past the chain's end", u64::MAX)),
        "{}",
        text(&o)
    );

    // A tampered row: -1 reads as 2^64-1 and would wrap when the covered range is added up. It
    // is a finding naming the row and the column, never a wrapped number.
    sql(&sb, "UPDATE batch_snapshot SET from_seq = -1");
    let o = sb.run(&args!["chain", "verify", "--tenant", "acme"]);
    assert_exit(
        &o,
        1,
        "batch_snapshot row 1 of tenant \"acme\": from_seq is -1",
    );
}

#[test]
fn raw_store_text_reaches_the_terminal_escaped() {
    let sb = Sandbox::new();
    imported_and_snapshotted(&sb);
    let job = job_at(&sb, 2);
    sql(
        &sb,
        "UPDATE chain_heads SET head_chain_link = head_chain_link || char(27) || '[2J';
         UPDATE batch_snapshot SET merkle_root = merkle_root || char(27) || ']0;pwned' || char(7);",
    );
    for a in [
        args!["chain", "show", "--tenant", "acme"].to_vec(),
        args!["chain", "tenants"].to_vec(),
        args!["chain", "verify", "--tenant", "acme"].to_vec(),
        args!["chain", "snapshot", "--tenant", "acme"].to_vec(),
        args!["chain", "prove", "--tenant", "acme", "--job-id", &job].to_vec(),
    ] {
        let o = sb.run(&a);
        let out = text(&o);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{a:?}: {out:?}"
        );
        assert!(
            out.contains("\\x1b") || out.contains("\\u{1b}"),
            "{a:?}: {out:?}"
        );
    }
}

#[test]
fn stores_and_trust_files_are_private_and_a_file_size_limit_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let o = sb.run(&args!["jobs", "import", unsigned_vector()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = sb.run(&args!["keys", "policy", "--require-signature", "off"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let key = signer_key(&sb);
    let o = sb.run(&args!["keys", "default", &key]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let outbox = sb.path("o.sqlite3");
    airlock::core::outbox::Outbox::open(&outbox).unwrap();
    let export = sb.path("outbox-export.json");
    let o = sb.run(&args![
        "outbox", "--outbox", &outbox, "export", "--output", &export
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for f in [
        sb.db(),
        sb.dir.path().join("data/airlock/trust.json"),
        sb.dir.path().join("data/airlock/signing.json"),
        outbox.clone(),
        export,
    ] {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    // Under `ulimit -f 1` (512-byte blocks) an export larger than the limit fails with a message.
    let o = sb.run(&args![
        "jobs",
        "enqueue",
        "--tenant",
        "big",
        r#"{"pad":"0123456789012345678901234567890123456789012345678901234567890123456789"}"#
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = sb.path("big.json");
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "ulimit -f 1; exec {} jobs export --tenant big -o {}",
            env!("CARGO_BIN_EXE_airlock"),
            out.display()
        ))
        .env("XDG_DATA_HOME", sb.dir.path().join("data"))
        .env("AIRLOCK_DB", sb.db())
        .env("AIRLOCK_NODE_ID", "site-a");
    let o = c.output().unwrap();
    // Not killed by SIGXFSZ: an error exit that says what failed.
    assert_eq!(o.status.code(), Some(2), "{:?} {}", o.status, text(&o));
    assert!(text(&o).starts_with("error: "), "{}", text(&o));
}

/// `--db DB` then `args`.
fn with_db(db: &Path, args: &[&str]) -> Vec<std::ffi::OsString> {
    let mut all = args!["--db", db].to_vec();
    all.extend(args.iter().map(std::ffi::OsString::from));
    all
}

/// Someone else's SQLite database given as the store (or the store given as the relay's
/// outbox) is refused before anything is changed: no tables added, the journal mode kept. A
/// mistyped store path is an error for the commands that read the store: no file or folder made.
#[test]
fn a_foreign_database_or_a_missing_store_is_refused_and_left_as_it_was() {
    let sb = Sandbox::new();
    let foreign = sb.path("customers.db");
    let schema = |p: &Path| -> (Vec<String>, String) {
        let c = rusqlite::Connection::open(p).unwrap();
        let mut s = c
            .prepare("SELECT name FROM sqlite_master ORDER BY name")
            .unwrap();
        let names = s
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mode = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        (names, mode)
    };
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE customers (id INTEGER)")
        .unwrap();
    let before = schema(&foreign);
    for cmd in [
        &["chain", "tenants"][..],
        &["audit", "verify"],
        &["jobs", "enqueue", "-t", "acme", "{\"a\":1}"],
    ] {
        let o = sb.run(&with_db(&foreign, cmd));
        assert_exit(&o, 2, "not an airlock store (its tables: customers)");
        assert_eq!(schema(&foreign), before, "{cmd:?}");
    }

    // The store itself is not an outbox.
    let o = sb.run(&["jobs", "enqueue", "-t", "acme", "{\"a\":1}"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let store = schema(&sb.db());
    let o = sb.run(&args!["outbox", "list", "--outbox", sb.db()]);
    assert_exit(&o, 2, "not an outbox");
    assert_eq!(schema(&sb.db()), store);

    // A mistyped store path: refused by reading commands, nothing made.
    let typo = sb.path("typo/airlock.db");
    for cmd in [
        &["chain", "tenants"][..],
        &["chain", "verify", "-t", "acme"],
        &["audit", "verify"],
        &["jobs", "export", "-t", "acme"],
        &["notify", "list"],
    ] {
        let o = sb.run(&with_db(&typo, cmd));
        assert_exit(&o, 2, "no store at");
        assert!(!sb.path("typo").exists(), "{cmd:?}");
    }
}
