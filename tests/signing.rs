//! Signing and trust (SPEC section 5): vectors, tampering, openssl interop both ways, key-file
//! errors, and the `keys` / `jobs sign` / `jobs export --sign` commands run as the real binary.

use airlock::core::bundle::{bundle_to_vec, load_bundle, manifest_digest, Bundle, BundleHeader};
use airlock::core::trust::{
    bundle_statement, check_bundle_signature, key_id, load_signing_key, load_verifying_key, pae,
    sign_header, DsseEnvelope, SignatureCheck, TrustError, TrustSet, TrustStore,
};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PAYLOAD_TYPE: &str = "application/vnd.airlock.job-sync-bundle.v1+json";

/// Command-line arguments from string literals and paths alike.
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$(std::ffi::OsString::from(AsRef::<OsStr>::as_ref(&$a))),*]
    };
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors")
}
fn vector_bundle(name: &str) -> PathBuf {
    vectors().join("bundles").join(name)
}
fn vector_key(name: &str) -> PathBuf {
    vectors().join("keys").join(name)
}
fn expected() -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(vector_bundle("two-nodes.expected.json")).unwrap(),
    )
    .unwrap()
}
fn key_ids() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(vector_key("key-ids.json")).unwrap()).unwrap()
}

/// A private copy of a vector key with mode 0600 (the vector files are read-only for everyone).
fn private_copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::write(&to, std::fs::read(vector_key(name)).unwrap()).unwrap();
    chmod(&to, 0o600);
    to
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn trusting(pub_file: &str) -> TrustSet {
    let mut t = TrustSet::empty();
    t.add_key_file(&vector_key(pub_file)).unwrap();
    t
}

/// Separate data directory and store for each CLI test.
struct Sandbox {
    data: tempfile::TempDir,
    db: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            data: tempfile::tempdir().unwrap(),
            db: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.env("XDG_DATA_HOME", self.data.path())
            .env("AIRLOCK_DB", self.db.path().join("airlock.db"))
            .env("AIRLOCK_NODE_ID", "site-a")
            .env_remove("AIRLOCK_SIGNING_KEY")
            .current_dir(self.work.path());
        c
    }
    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
    fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "airlock {:?} failed: {}",
            args.iter()
                .map(|a| a.as_ref().to_owned())
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
    /// Runs a command that must fail with exit status 2; returns its stderr.
    fn usage_error<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "stdout: {} stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    }
}

fn openssl<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new("openssl").args(args).output().unwrap()
}

fn openssl_ok<S: AsRef<OsStr>>(args: &[S]) {
    let out = openssl(args);
    assert!(
        out.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The bytes between `"jobLogs": ` and the end of the jobLogs array in our layout.
fn job_logs_bytes(doc: &[u8]) -> &[u8] {
    let text = std::str::from_utf8(doc).unwrap();
    let start = text.find("\"jobLogs\": ").unwrap() + "\"jobLogs\": ".len();
    let end = text
        .rfind(",\n  \"signature\"")
        .unwrap_or_else(|| text.rfind("\n}").unwrap());
    &doc[start..end]
}

// ---------------------------------------------------------------------------------------------
// Vectors

#[test]
fn the_signed_vector_is_valid_with_the_test_signer_trusted() {
    let bundle = load_bundle(&vector_bundle("two-nodes-signed.json")).unwrap();
    let ids = key_ids();
    let id = ids["test-signer"].as_str().unwrap();
    let pub_path = vector_key("test-signer.pub.pem");
    assert_eq!(
        check_bundle_signature(&bundle.header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Valid {
            key_id: id.into(),
            signer: format!("--trusted-key {}", pub_path.display()),
        }
    );
    // Through a trust store the signer is the store's name.
    let dir = tempfile::tempdir().unwrap();
    let mut store = TrustStore::open(&dir.path().join("trust.json")).unwrap();
    store.add_file(&pub_path, "test-signer").unwrap();
    assert_eq!(
        check_bundle_signature(&bundle.header, &store.trust_set()),
        SignatureCheck::Valid {
            key_id: id.into(),
            signer: "test-signer".into()
        }
    );
    // Nobody trusted: untrusted; unsigned: absent.
    assert_eq!(
        check_bundle_signature(&bundle.header, &TrustSet::empty()),
        SignatureCheck::Untrusted { key_id: id.into() }
    );
    let unsigned = load_bundle(&vector_bundle("two-nodes.json")).unwrap();
    assert_eq!(
        check_bundle_signature(&unsigned.header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Absent
    );
}

#[test]
fn statement_pae_and_signature_equal_the_vector() {
    let exp = expected();
    let bundle = load_bundle(&vector_bundle("two-nodes.json")).unwrap();
    assert_eq!(
        bundle.header.manifest_digest,
        exp["manifestDigest"].as_str().unwrap()
    );
    assert_eq!(
        manifest_digest(&bundle.job_logs),
        exp["manifestDigest"].as_str().unwrap()
    );
    let statement = bundle_statement(&bundle.header);
    assert_eq!(statement, exp["statement"].as_str().unwrap());
    assert_eq!(
        pae(PAYLOAD_TYPE, statement.as_bytes()),
        exp["pae"].as_str().unwrap().as_bytes()
    );
    let dir = tempfile::tempdir().unwrap();
    let (key, warnings) = load_signing_key(&private_copy(dir.path(), "test-signer.pem")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let (sig, by) = sign_header(&key, &bundle.header);
    assert_eq!(sig, exp["signature"].as_str().unwrap());
    assert_eq!(by, exp["signedBy"].as_str().unwrap());
    // Signing the already signed header gives the same (the signature fields are not signed).
    let signed = load_bundle(&vector_bundle("two-nodes-signed.json")).unwrap();
    assert_eq!(sign_header(&key, &signed.header), (sig.clone(), by.clone()));
    assert_eq!(signed.header.signature.as_deref(), Some(sig.as_str()));
    assert_eq!(signed.header.signed_by.as_deref(), Some(by.as_str()));
    // And the whole signed document is the vector, byte for byte.
    let mut ours = bundle.clone();
    ours.header.signature = Some(sig);
    ours.header.signed_by = Some(by);
    assert_eq!(
        bundle_to_vec(&ours),
        std::fs::read(vector_bundle("two-nodes-signed.json")).unwrap()
    );
}

#[test]
fn key_ids_equal_the_vector() {
    let ids = key_ids();
    let dir = tempfile::tempdir().unwrap();
    for name in ["test-signer", "untrusted-signer"] {
        let expected = ids[name].as_str().unwrap();
        let public = load_verifying_key(&vector_key(&format!("{name}.pub.pem"))).unwrap();
        assert_eq!(key_id(&public), expected);
        let (private, _) =
            load_signing_key(&private_copy(dir.path(), &format!("{name}.pem"))).unwrap();
        assert_eq!(key_id(&private.verifying_key()), expected);
    }
    let sb = Sandbox::new();
    let out = sb.ok(&args!["keys", "id", vector_key("test-signer.pub.pem"),]);
    assert_eq!(out.trim(), ids["test-signer"].as_str().unwrap());
}

#[test]
fn jobs_sign_reproduces_the_signed_vector_byte_for_byte() {
    let sb = Sandbox::new();
    let key = private_copy(sb.work.path(), "test-signer.pem");
    let input = sb.path("two-nodes.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &input).unwrap();
    let vector = std::fs::read(vector_bundle("two-nodes-signed.json")).unwrap();

    // -o OUT leaves the input alone.
    let out = sb.path("signed.json");
    sb.ok(&args!["jobs", "sign", input, "--key", key, "-o", out,]);
    assert_eq!(std::fs::read(&out).unwrap(), vector);
    assert_eq!(
        std::fs::read(&input).unwrap(),
        std::fs::read(vector_bundle("two-nodes.json")).unwrap()
    );

    // Default: in place, keeping the file's permissions.
    chmod(&input, 0o640);
    let stdout = sb.ok(&args!["jobs", "sign", input, "--key", key,]);
    assert!(!stdout.contains("replaced"), "{stdout}");
    assert_eq!(std::fs::read(&input).unwrap(), vector);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&input).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
}

/// The untrusted signer's private key and a copy of the vector bundle `name` as `b.json` in the
/// sandbox, with the bundle's bytes before any command touches it.
fn key_and_bundle(sb: &Sandbox, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let key = private_copy(sb.work.path(), "untrusted-signer.pem");
    let bundle = sb.path("b.json");
    std::fs::copy(vector_bundle(name), &bundle).unwrap();
    let before = std::fs::read(&bundle).unwrap();
    (key, bundle, before)
}

/// A `--dsse-out` that cannot be written (a directory, a missing folder) refuses the command
/// before the bundle is signed in place or exported: the bundle keeps its bytes, no file appears.
#[test]
fn a_bad_dsse_path_refuses_before_the_bundle_is_written() {
    let sb = Sandbox::new();
    let (key, bundle, before) = key_and_bundle(&sb, "two-nodes.json");
    let dir = sb.path("envelopes");
    std::fs::create_dir(&dir).unwrap();
    let missing = sb.path("no-such-folder/b.dsse.json");
    for dsse in [&dir, &missing] {
        let err = sb.usage_error(&args![
            "jobs",
            "sign",
            bundle,
            "--key",
            key,
            "--dsse-out",
            dsse
        ]);
        assert!(err.contains("cannot write"), "{err}");
        assert_eq!(
            std::fs::read(&bundle).unwrap(),
            before,
            "{}",
            dsse.display()
        );
        assert!(!missing.exists());
    }
    sb.ok(&["jobs", "enqueue", "-t", "acme", "{\"kind\":\"scan\"}"]);
    let out = sb.path("export.json");
    let err = sb.usage_error(&args![
        "jobs",
        "export",
        "-t",
        "acme",
        "-o",
        out,
        "--key",
        key,
        "--dsse-out",
        dir,
    ]);
    assert!(err.contains("cannot write"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn resigning_replaces_the_signature_and_keeps_the_log_bytes() {
    let sb = Sandbox::new();
    let (other, bundle, before) = key_and_bundle(&sb, "two-nodes-signed.json");
    let dsse = sb.path("b.dsse.json");
    let stdout = sb.ok(&args![
        "jobs",
        "sign",
        bundle,
        "--key",
        other,
        "--dsse-out",
        dsse,
    ]);
    let ids = key_ids();
    assert!(
        stdout.contains("replaced the existing signature"),
        "{stdout}"
    );
    assert!(
        stdout.contains(ids["test-signer"].as_str().unwrap()),
        "{stdout}"
    );
    let after = std::fs::read(&bundle).unwrap();
    assert_eq!(job_logs_bytes(&after), job_logs_bytes(&before));
    assert_ne!(after, before);
    let resigned = load_bundle(&bundle).unwrap();
    let untrusted_id = ids["untrusted-signer"].as_str().unwrap();
    assert_eq!(resigned.header.signed_by.as_deref(), Some(untrusted_id));
    assert_eq!(
        check_bundle_signature(&resigned.header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Untrusted {
            key_id: untrusted_id.into()
        }
    );
    assert!(
        check_bundle_signature(&resigned.header, &trusting("untrusted-signer.pub.pem")).is_valid()
    );
    // The DSSE envelope carries the same statement and signature.
    let env: DsseEnvelope = serde_json::from_str(&std::fs::read_to_string(&dsse).unwrap()).unwrap();
    assert_eq!(env.payload_type, PAYLOAD_TYPE);
    assert_eq!(env.statement().unwrap(), bundle_statement(&resigned.header));
    assert_eq!(env.signatures.len(), 1);
    assert_eq!(env.signatures[0].keyid, untrusted_id);
    assert_eq!(
        Some(env.signatures[0].sig.as_str()),
        resigned.header.signature.as_deref()
    );
    assert!(env.check(&trusting("untrusted-signer.pub.pem")).is_valid());
}

#[test]
fn signing_keeps_the_log_bytes_of_any_layout() {
    let sb = Sandbox::new();
    let key = private_copy(sb.work.path(), "test-signer.pem");
    // Compact JSON with sorted keys: jobLogs in the middle, the old signature before it.
    let value: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(vector_bundle("two-nodes-signed.json")).unwrap(),
    )
    .unwrap();
    let compact = sb.path("compact.json");
    std::fs::write(&compact, serde_json::to_string(&value).unwrap()).unwrap();
    let logs = serde_json::to_string(&value["jobLogs"]).unwrap();
    let out = sb.path("out.json");
    sb.ok(&args!["jobs", "sign", compact, "--key", key, "-o", out,]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(&format!("\"jobLogs\": {logs},\n")));
    let signed = load_bundle(&out).unwrap();
    assert_eq!(
        signed.header.signature.as_deref(),
        expected()["signature"].as_str()
    );
    assert!(check_bundle_signature(&signed.header, &trusting("test-signer.pub.pem")).is_valid());
}

// ---------------------------------------------------------------------------------------------
// Tampering

fn signed_vector() -> Bundle {
    load_bundle(&vector_bundle("two-nodes-signed.json")).unwrap()
}

#[test]
fn a_switched_tenant_or_any_statement_field_invalidates_the_signature() {
    let trust = trusting("test-signer.pub.pem");
    type Edit = (&'static str, fn(&mut BundleHeader));
    let edits: [Edit; 5] = [
        ("tenantId", |h| h.tenant_id = "globex".into()),
        ("bundleId", |h| {
            h.bundle_id = "3f0c8a4e-6a43-4b8e-9c55-2b8f7a1d9e02".into()
        }),
        ("createdAt", |h| {
            h.created_at = "2026-01-05T12:01:00.001Z".into()
        }),
        ("createdByNodeId", |h| {
            h.created_by_node_id = "node-b".into()
        }),
        ("manifestDigest", |h| {
            h.manifest_digest = format!("sha256:{}", "0".repeat(64))
        }),
    ];
    for (field, edit) in edits {
        let mut header = signed_vector().header;
        edit(&mut header);
        match check_bundle_signature(&header, &trust) {
            SignatureCheck::Invalid { key_id, reason } => {
                assert_eq!(key_id, key_ids()["test-signer"].as_str().unwrap());
                assert!(reason.contains("does not verify"), "{field}: {reason}");
            }
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn malformed_signatures_are_invalid() {
    let trust = trusting("test-signer.pub.pem");
    let good = signed_vector().header;
    let mut short = good.clone();
    short.signature = Some(B64.encode([1u8; 63]));
    let mut not_b64 = good.clone();
    not_b64.signature = Some("not base64!".into());
    let mut flipped = good.clone();
    let mut raw = B64.decode(good.signature.as_deref().unwrap()).unwrap();
    raw[10] ^= 1;
    flipped.signature = Some(B64.encode(raw));
    let mut bad_id = good.clone();
    bad_id.signed_by = Some("A652".into());
    let mut half = good.clone();
    half.signed_by = None;
    for h in [short, not_b64, flipped, bad_id, half] {
        assert!(
            matches!(
                check_bundle_signature(&h, &trust),
                SignatureCheck::Invalid { .. }
            ),
            "{h:?}"
        );
    }
}

#[test]
fn a_fully_relinked_forgery_is_caught_only_by_the_signature() {
    let original = signed_vector();
    let mut forged = original.clone();
    let log = &mut forged.job_logs[0];
    let target = log.entries[1]
        .payload
        .replace("\"priority\":1", "\"priority\":9");
    assert_ne!(target, log.entries[1].payload);
    log.entries[1].payload = target;
    log.relink(0).unwrap();
    forged.header.manifest_digest = manifest_digest(&forged.job_logs);
    assert_ne!(
        forged.header.manifest_digest,
        original.header.manifest_digest
    );
    // Internally consistent: the written forgery's digest recomputes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forged.json");
    std::fs::write(&path, bundle_to_vec(&forged)).unwrap();
    let reread = load_bundle(&path).unwrap();
    assert_eq!(
        manifest_digest(&reread.job_logs),
        reread.header.manifest_digest
    );
    assert_eq!(reread.header.signature, original.header.signature);
    assert!(matches!(
        check_bundle_signature(&reread.header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Invalid { .. }
    ));
}

#[test]
fn a_bundle_signed_by_another_key_is_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let (other, _) = load_signing_key(&private_copy(dir.path(), "untrusted-signer.pem")).unwrap();
    let mut header = load_bundle(&vector_bundle("two-nodes.json"))
        .unwrap()
        .header;
    let (sig, by) = sign_header(&other, &header);
    header.signature = Some(sig);
    header.signed_by = Some(by);
    assert_eq!(
        check_bundle_signature(&header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Untrusted {
            key_id: key_ids()["untrusted-signer"].as_str().unwrap().into()
        }
    );
    // A forger who claims the trusted key id with their own signature is invalid, not valid.
    header.signed_by = Some(key_ids()["test-signer"].as_str().unwrap().into());
    assert!(matches!(
        check_bundle_signature(&header, &trusting("test-signer.pub.pem")),
        SignatureCheck::Invalid { .. }
    ));
}

// ---------------------------------------------------------------------------------------------
// openssl interop

#[test]
fn an_openssl_key_signs_bundles_that_we_verify() {
    let sb = Sandbox::new();
    let key = sb.path("ossl.pem");
    let public = sb.path("ossl.pub.pem");
    openssl_ok(&args!["genpkey", "-algorithm", "ed25519", "-out", key,]);
    chmod(&key, 0o600);
    openssl_ok(&args!["pkey", "-in", key, "-pubout", "-out", public,]);
    // Key id: SHA-256 of the raw 32 bytes, which are the last 32 bytes of the SPKI DER.
    let der = openssl(&args!["pkey", "-pubin", "-in", public, "-outform", "DER",]).stdout;
    assert_eq!(der.len(), 44);
    let expected_id = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&der[12..]))
    };
    let out = sb.ok(&args!["keys", "id", public]);
    assert_eq!(out.trim(), expected_id);

    let bundle = sb.path("b.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &bundle).unwrap();
    let run = sb.run(&args!["jobs", "sign", bundle, "--key", key,]);
    assert!(run.status.success());
    assert!(
        run.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let signed = load_bundle(&bundle).unwrap();
    let mut trust = TrustSet::empty();
    assert_eq!(trust.add_key_file(&public).unwrap(), expected_id);
    assert_eq!(
        check_bundle_signature(&signed.header, &trust),
        SignatureCheck::Valid {
            key_id: expected_id,
            signer: format!("--trusted-key {}", public.display())
        }
    );
}

#[test]
fn openssl_verifies_our_signatures() {
    let sb = Sandbox::new();
    let out = sb.ok(&["keys", "generate", "--name", "ours", "--json"]);
    let g: serde_json::Value = serde_json::from_str(&out).unwrap();
    let private = PathBuf::from(g["privateKey"].as_str().unwrap());
    let public = PathBuf::from(g["publicKey"].as_str().unwrap());
    // openssl reads both of our files.
    openssl_ok(&args!["pkey", "-in", private, "-noout",]);
    let (key, warnings) = load_signing_key(&private).unwrap();
    assert!(warnings.is_empty());
    let header = load_bundle(&vector_bundle("two-nodes.json"))
        .unwrap()
        .header;
    let (sig, by) = sign_header(&key, &header);
    assert_eq!(by, g["keyId"].as_str().unwrap());
    let pae_file = sb.path("pae.bin");
    let sig_file = sb.path("sig.bin");
    std::fs::write(
        &pae_file,
        pae(PAYLOAD_TYPE, bundle_statement(&header).as_bytes()),
    )
    .unwrap();
    std::fs::write(&sig_file, B64.decode(&sig).unwrap()).unwrap();
    let verify = |pae: &Path| {
        openssl(&args![
            "pkeyutl", "-verify", "-pubin", "-inkey", public, "-rawin", "-in", pae, "-sigfile",
            sig_file,
        ])
    };
    let ok = verify(&pae_file);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // ... and rejects it for another statement.
    let mut other = header.clone();
    other.tenant_id = "globex".into();
    let other_file = sb.path("other.bin");
    std::fs::write(
        &other_file,
        pae(PAYLOAD_TYPE, bundle_statement(&other).as_bytes()),
    )
    .unwrap();
    assert!(!verify(&other_file).status.success());
}

// ---------------------------------------------------------------------------------------------
// Key file errors

#[test]
fn foreign_encrypted_and_corrupt_keys_get_clear_errors() {
    let sb = Sandbox::new();
    let rsa = sb.path("rsa.pem");
    let ec = sb.path("ec.pem");
    let enc = sb.path("enc.pem");
    let rsa_pub = sb.path("rsa.pub.pem");
    openssl_ok(&args![
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:1024",
        "-out",
        rsa,
    ]);
    openssl_ok(&args!["pkey", "-in", rsa, "-pubout", "-out", rsa_pub,]);
    openssl_ok(&args![
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        ec,
    ]);
    openssl_ok(&args![
        "genpkey",
        "-algorithm",
        "ed25519",
        "-aes256",
        "-pass",
        "pass:x",
        "-out",
        enc,
    ]);
    let corrupt = sb.path("corrupt.pem");
    let text = std::fs::read_to_string(vector_key("test-signer.pem")).unwrap();
    std::fs::write(&corrupt, text.replace("MC4CAQAw", "MC4C*QAw")).unwrap();
    let truncated = sb.path("truncated.pem");
    std::fs::write(&truncated, &text[..50]).unwrap();
    let short_der = sb.path("short.pem");
    std::fs::write(
        &short_der,
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIIZR\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    for p in [&rsa, &ec, &enc, &corrupt, &truncated, &short_der] {
        chmod(p, 0o600);
    }

    assert!(
        matches!(load_signing_key(&rsa), Err(TrustError::WrongAlgorithm { ref algorithm, .. }) if algorithm.contains("RSA"))
    );
    assert!(
        matches!(load_verifying_key(&rsa_pub), Err(TrustError::WrongAlgorithm { ref algorithm, .. }) if algorithm.contains("RSA"))
    );
    assert!(
        matches!(load_signing_key(&ec), Err(TrustError::WrongAlgorithm { ref algorithm, .. }) if algorithm.contains("EC"))
    );
    assert!(matches!(
        load_signing_key(&enc),
        Err(TrustError::EncryptedKey { .. })
    ));
    assert!(matches!(
        load_signing_key(&corrupt),
        Err(TrustError::CorruptPem { .. })
    ));
    assert!(matches!(
        load_signing_key(&truncated),
        Err(TrustError::CorruptPem { .. })
    ));
    assert!(matches!(
        load_signing_key(&short_der),
        Err(TrustError::CorruptPem { .. })
    ));
    assert!(matches!(
        load_verifying_key(&vector_key("test-signer.pem")),
        Err(TrustError::PrivateWherePublic { .. })
    ));
    assert!(matches!(
        load_signing_key(&vector_key("test-signer.pub.pem")),
        Err(TrustError::PublicWherePrivate { .. })
    ));
    assert!(matches!(
        load_signing_key(&sb.path("missing.pem")),
        Err(TrustError::Read { .. })
    ));

    // Through the CLI: exit 2, a message that names the file and what to do, and nothing written.
    let bundle = sb.path("b.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &bundle).unwrap();
    let cases: [(&Path, &[&str]); 5] = [
        (&rsa, &["RSA", "ed25519 only", "airlock keys generate"]),
        (&ec, &["EC", "ed25519 only"]),
        (&enc, &["encrypted", "openssl pkey"]),
        (&corrupt, &["corrupt PEM"]),
        (&truncated, &["truncated"]),
    ];
    for (key, needles) in cases {
        let err = sb.usage_error(&args!["jobs", "sign", bundle, "--key", key,]);
        assert!(err.contains(&*key.display().to_string()), "{err}");
        for n in needles {
            assert!(err.contains(n), "{n:?} not in {err}");
        }
    }
    assert_eq!(
        std::fs::read(&bundle).unwrap(),
        std::fs::read(vector_bundle("two-nodes.json")).unwrap()
    );
    let err = sb.usage_error(&args![
        "keys",
        "trust",
        "add",
        vector_key("test-signer.pem"),
        "--name",
        "oops",
    ]);
    assert!(
        err.contains("private key where a public key is expected"),
        "{err}"
    );
    let err = sb.usage_error(&args!["keys", "id", vector_key("test-signer.pem"),]);
    assert!(
        err.contains("private key where a public key is expected"),
        "{err}"
    );
    assert!(!sb.data.path().join("airlock/trust.json").exists());
}

#[test]
fn a_world_readable_private_key_gives_a_warning() {
    let sb = Sandbox::new();
    let key = private_copy(sb.work.path(), "test-signer.pem");
    assert!(load_signing_key(&key).unwrap().1.is_empty());
    chmod(&key, 0o644);
    let (_, warnings) = load_signing_key(&key).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("readable by other users"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("chmod 600"), "{warnings:?}");
    let bundle = sb.path("b.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &bundle).unwrap();
    let out = sb.run(&args!["jobs", "sign", bundle, "--key", key,]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning:") && stderr.contains("mode 0644"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Commands

#[test]
fn keys_generate_writes_a_private_and_a_public_key() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let out = sb.ok(&["keys", "generate", "--name", "site-a"]);
    let dir = sb.data.path().join("airlock/keys");
    let private = dir.join("site-a.pem");
    let public = dir.join("site-a.pub.pem");
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&private)
        .unwrap()
        .starts_with("-----BEGIN PRIVATE KEY-----\n"));
    assert!(std::fs::read_to_string(&public)
        .unwrap()
        .starts_with("-----BEGIN PUBLIC KEY-----\n"));
    let id = sb.ok(&args!["keys", "id", public]);
    assert!(out.contains(id.trim()), "{out}");
    let (key, _) = load_signing_key(&private).unwrap();
    assert_eq!(key_id(&key.verifying_key()), id.trim());
    // Never overwrites; bad names are refused.
    let before = std::fs::read(&private).unwrap();
    let err = sb.usage_error(&["keys", "generate", "--name", "site-a"]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&private).unwrap(), before);
    let err = sb.usage_error(&["keys", "generate", "--name", "../evil"]);
    assert!(err.contains("invalid name"), "{err}");
    // --out DIR
    let custom = sb.path("custom");
    sb.ok(&args!["keys", "generate", "--name", "b", "--out", custom,]);
    assert!(custom.join("b.pem").exists() && custom.join("b.pub.pem").exists());
    // keys public derives the same public key.
    let derived = sb.ok(&args!["keys", "public", private,]);
    assert_eq!(derived, std::fs::read_to_string(&public).unwrap());
    // -o never replaces a name: an existing file, or a dangling symlink (whose target it would
    // have created).
    let out = sb.path("derived.pub.pem");
    sb.ok(&args!["keys", "public", private, "-o", out,]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), derived);
    let err = sb.usage_error(&args!["keys", "public", private, "-o", out,]);
    assert!(err.contains("already exists"), "{err}");
    let link = sb.path("link.pub.pem");
    std::os::unix::fs::symlink(sb.path("elsewhere.pem"), &link).unwrap();
    let err = sb.usage_error(&args!["keys", "public", private, "-o", link,]);
    assert!(err.contains("already exists"), "{err}");
    assert!(!sb.path("elsewhere.pem").exists());
    // keys list shows the local pair.
    let list = sb.ok(&["keys", "list"]);
    assert!(
        list.contains("site-a") && list.contains(id.trim()),
        "{list}"
    );
}

#[test]
fn trust_store_add_list_remove_and_duplicates() {
    let sb = Sandbox::new();
    let ids = key_ids();
    let test_id = ids["test-signer"].as_str().unwrap();
    let untrusted_id = ids["untrusted-signer"].as_str().unwrap();
    let test_pub = vector_key("test-signer.pub.pem");
    let other_pub = vector_key("untrusted-signer.pub.pem");
    let add = |p: &Path, name: &str| sb.run(&args!["keys", "trust", "add", p, "--name", name,]);
    assert!(add(&test_pub, "hq").status.success());
    let dup_key = add(&test_pub, "hq-again");
    assert_eq!(dup_key.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dup_key.stderr).contains("already has key"));
    let dup_name = add(&other_pub, "hq");
    assert_eq!(dup_name.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dup_name.stderr).contains("already has a key named"));
    assert!(add(&other_pub, "field").status.success());

    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&["keys", "trust", "list", "--json"])).unwrap();
    let keys = json["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["name"], "hq");
    assert_eq!(keys[0]["keyId"], test_id);
    assert!(keys[0]["addedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(keys[1]["keyId"], untrusted_id);
    let human = sb.ok(&["keys", "trust", "list"]);
    assert!(human.contains("hq") && human.contains(test_id), "{human}");

    // The CLI's store is what TrustSet::load_default reads (same XDG_DATA_HOME).
    let store = TrustStore::open(&sb.data.path().join("airlock/trust.json")).unwrap();
    let signed = load_bundle(&vector_bundle("two-nodes-signed.json")).unwrap();
    assert_eq!(
        check_bundle_signature(&signed.header, &store.trust_set()),
        SignatureCheck::Valid {
            key_id: test_id.into(),
            signer: "hq".into()
        }
    );

    sb.ok(&["keys", "trust", "remove", "hq"]);
    sb.ok(&["keys", "trust", "remove", untrusted_id]);
    let err = sb.usage_error(&["keys", "trust", "remove", "hq"]);
    assert!(err.contains("no trusted key"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&["keys", "trust", "list", "--json"])).unwrap();
    assert!(json["keys"].as_array().unwrap().is_empty());
}

#[test]
fn export_sign_with_key_and_with_the_default_key() {
    let sb = Sandbox::new();
    sb.ok(&["keys", "generate", "--name", "site-a"]);
    let keys = sb.data.path().join("airlock/keys");
    let private = keys.join("site-a.pem");
    let public = keys.join("site-a.pub.pem");
    sb.ok(&[
        "jobs",
        "enqueue",
        "-t",
        "acme",
        "{\"kind\":\"scan\",\"seq\":1}",
    ]);
    sb.ok(&[
        "jobs",
        "enqueue",
        "-t",
        "acme",
        "{\"kind\":\"scan\",\"seq\":2}",
    ]);
    let mut trust = TrustSet::empty();
    let id = trust.add_key_file(&public).unwrap();

    // --key, with a DSSE envelope beside the bundle.
    let bundle = sb.path("a.json");
    let dsse = sb.path("a.dsse.json");
    sb.ok(&args![
        "jobs",
        "export",
        "-t",
        "acme",
        "-o",
        bundle,
        "--key",
        private,
        "--dsse-out",
        dsse,
    ]);
    let b = load_bundle(&bundle).unwrap();
    assert_eq!(b.entry_count(), 2);
    assert_eq!(
        check_bundle_signature(&b.header, &trust),
        SignatureCheck::Valid {
            key_id: id.clone(),
            signer: format!("--trusted-key {}", public.display())
        }
    );
    let env: DsseEnvelope = serde_json::from_str(&std::fs::read_to_string(&dsse).unwrap()).unwrap();
    assert_eq!(env.statement().unwrap(), bundle_statement(&b.header));
    assert_eq!(
        Some(env.signatures[0].sig.as_str()),
        b.header.signature.as_deref()
    );
    assert!(env.check(&trust).is_valid());

    // --sign without a key or a default: a clear error, no bundle.
    let none = sb.path("none.json");
    let err = sb.usage_error(&args!["jobs", "export", "-t", "acme", "-o", none, "--sign",]);
    assert!(
        err.contains("no signing key") && err.contains("keys default"),
        "{err}"
    );
    assert!(!none.exists());
    let err = sb.usage_error(&args![
        "jobs",
        "export",
        "-t",
        "acme",
        "-o",
        none,
        "--dsse-out",
        dsse,
    ]);
    assert!(err.contains("--sign"), "{err}");

    // The default key, set once.
    let err = sb.run(&["keys", "default"]);
    assert_eq!(err.status.code(), Some(1));
    sb.ok(&args!["keys", "default", private,]);
    let shown = sb.ok(&["keys", "default"]);
    assert!(shown.contains(&id), "{shown}");
    let list = sb.ok(&["keys", "list"]);
    assert!(list.contains("[default]"), "{list}");
    let bundle2 = sb.path("b.json");
    sb.ok(&args![
        "jobs", "export", "-t", "acme", "-o", bundle2, "--sign",
    ]);
    assert!(check_bundle_signature(&load_bundle(&bundle2).unwrap().header, &trust).is_valid());

    // AIRLOCK_SIGNING_KEY wins over the configured default.
    let other = private_copy(sb.work.path(), "untrusted-signer.pem");
    let unsigned = sb.path("u.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &unsigned).unwrap();
    let out = sb
        .cmd()
        .env("AIRLOCK_SIGNING_KEY", &other)
        .args(args!["jobs", "sign", unsigned])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        load_bundle(&unsigned).unwrap().header.signed_by.as_deref(),
        key_ids()["untrusted-signer"].as_str()
    );
    sb.ok(&["keys", "default", "--clear"]);
    assert_eq!(sb.run(&["keys", "default"]).status.code(), Some(1));
}

#[test]
fn signing_a_broken_bundle_is_refused_with_exit_2() {
    let sb = Sandbox::new();
    let key = private_copy(sb.work.path(), "test-signer.pem");
    let sign = |p: &Path| sb.usage_error(&args!["jobs", "sign", p, "--key", key,]);
    let garbage = sb.path("garbage.json");
    std::fs::write(&garbage, "this is not json").unwrap();
    let err = sign(&garbage);
    assert!(err.contains("not a readable bundle"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&garbage).unwrap(),
        "this is not json"
    );

    let text = std::fs::read_to_string(vector_bundle("two-nodes.json")).unwrap();
    let truncated = sb.path("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let err = sign(&truncated);
    assert!(err.contains("truncated"), "{err}");

    // Logs edited after export: the digest no longer matches, and a signature would bless the edit.
    let edited = sb.path("edited.json");
    let edited_text = text.replace("\\\"priority\\\":1", "\\\"priority\\\":7");
    assert_ne!(edited_text, text);
    std::fs::write(&edited, edited_text).unwrap();
    let err = sign(&edited);
    assert!(err.contains("does not match its jobLogs"), "{err}");
    assert!(load_bundle(&edited).unwrap().header.signature.is_none());

    let missing = sb.path("missing.json");
    let err = sign(&missing);
    assert!(err.contains("missing.json"), "{err}");

    // Hostile file names never reach the terminal raw.
    let hostile = sb.path("evil\u{1b}]0;pwned\u{7}.json");
    std::fs::write(&hostile, "nope").unwrap();
    let err = sign(&hostile);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("\\x1b"), "{err}");

    // No temporary files were left behind.
    let leftovers: Vec<_> = std::fs::read_dir(sb.work.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `keys default` records the key id of the key it was given. When that file later holds another
/// key (regenerated under the same name, or swapped), signing with the default must refuse rather
/// than sign with a key the receiving side does not trust; `keys default` says what happened.
#[test]
fn a_default_key_file_that_now_holds_another_key_is_refused() {
    let sb = Sandbox::new();
    let private = private_copy(sb.work.path(), "test-signer.pem");
    sb.ok(&args!["keys", "default", private]);
    std::fs::write(
        &private,
        std::fs::read(vector_key("untrusted-signer.pem")).unwrap(),
    )
    .unwrap();
    let bundle = sb.path("u.json");
    std::fs::copy(vector_bundle("two-nodes.json"), &bundle).unwrap();
    let before = std::fs::read(&bundle).unwrap();
    let err = sb.usage_error(&args!["jobs", "sign", bundle]);
    let set = key_ids()["test-signer"].as_str().unwrap().to_string();
    let now = key_ids()["untrusted-signer"].as_str().unwrap().to_string();
    assert!(
        err.contains(&set) && err.contains(&now) && err.contains("airlock keys default"),
        "{err}"
    );
    assert_eq!(std::fs::read(&bundle).unwrap(), before, "nothing is signed");
    let shown = sb.run(&["keys", "default"]);
    assert_eq!(shown.status.code(), Some(1));
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(&set) && text.contains(&now), "{text}");
    let list = sb.ok(&["keys", "list"]);
    assert!(list.contains("cannot be loaded"), "{list}");
    // Setting it again on purpose accepts the new key.
    sb.ok(&args!["keys", "default", private]);
    sb.ok(&args!["jobs", "sign", bundle]);
    assert_eq!(
        load_bundle(&bundle).unwrap().header.signed_by.as_deref(),
        Some(now.as_str())
    );
}

/// SPEC section 5: signatures are checked with `verify_strict`. Under the small-order public key
/// (the identity point), the signature R = identity, S = 0 satisfies the cofactorless equation for
/// every message, so a plain `verify` accepts it; the strict check must not, for bundles and DSSE
/// envelopes alike.
#[test]
fn a_small_order_key_and_signature_do_not_verify() {
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let weak = ed25519_dalek::VerifyingKey::from_bytes(&identity).unwrap();
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&identity);
    let sig = ed25519_dalek::Signature::from_bytes(&sig);
    assert!(
        weak.verify_strict(b"any", &sig).is_err() && {
            use ed25519_dalek::Verifier as _;
            weak.verify(b"any", &sig).is_ok()
        },
        "the test signature is one only a non-strict check accepts"
    );
    let mut trust = TrustSet::empty();
    trust.add_key("weak", weak, "test");
    let mut header = signed_vector().header;
    header.signature = Some(B64.encode(sig.to_bytes()));
    header.signed_by = Some(key_id(&weak));
    assert!(
        matches!(
            check_bundle_signature(&header, &trust),
            SignatureCheck::Invalid { .. }
        ),
        "{:?}",
        check_bundle_signature(&header, &trust)
    );
    let env = DsseEnvelope {
        payload_type: PAYLOAD_TYPE.into(),
        payload: B64.encode(bundle_statement(&header)),
        signatures: vec![airlock::core::trust::DsseSignature {
            keyid: key_id(&weak),
            sig: B64.encode(sig.to_bytes()),
        }],
    };
    assert!(matches!(env.check(&trust), SignatureCheck::Invalid { .. }));
}

/// A public key file holding a small-order point (here the identity) is no signer's key: no
/// signature verifies under it with `verify_strict`. Trusting it must be refused with a reason,
/// not accepted as a key that then never verifies anything.
#[test]
fn a_small_order_public_key_is_refused() {
    let sb = Sandbox::new();
    let mut der = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00, 1,
    ];
    der.extend([0u8; 31]);
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        B64.encode(&der)
    );
    let weak = sb.path("weak.pub.pem");
    std::fs::write(&weak, pem).unwrap();
    assert!(matches!(
        load_verifying_key(&weak),
        Err(TrustError::MalformedKey { .. })
    ));
    let err = sb.usage_error(&args!["keys", "trust", "add", weak, "--name", "weak"]);
    assert!(
        err.contains("weak.pub.pem") && err.contains("small-order"),
        "{err}"
    );
    let list = sb.ok(&["keys", "trust", "list"]);
    assert!(list.contains("no trusted keys"), "{list}");
}

// ---------------------------------------------------------------------------------------------
// Key files whose names are not UTF-8, and folders that cannot be written

/// A path under `dir` whose last component is the bytes `name` (not UTF-8).
fn raw_name(dir: &Path, name: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    dir.join(OsStr::from_bytes(name))
}

/// `keys default` with a key whose path is not UTF-8 panicked ("the setting always serialises"),
/// and `keys generate --default` into such a folder wrote the pair, then panicked. Both are
/// refused now, before anything is written, saying what to do.
#[test]
fn a_default_key_path_that_is_not_utf8_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    let key = raw_name(sb.work.path(), b"k\xff.pem");
    std::fs::write(&key, std::fs::read(vector_key("test-signer.pem")).unwrap()).unwrap();
    chmod(&key, 0o600);
    let config = sb.data.path().join("airlock/signing.json");
    let err = sb.usage_error(&args!["keys", "default", key]);
    assert!(
        err.contains(r"k\xff.pem is not UTF-8") && err.contains("rename the file"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains('\u{fffd}'),
        "{err}"
    );
    assert!(!config.exists());
    let out = raw_name(&sb.path("px"), b"d\xff");
    let err = sb.usage_error(&args![
        "keys",
        "generate",
        "--name",
        "g1",
        "--out",
        out,
        "--default"
    ]);
    assert!(err.contains(r"d\xff/g1.pem is not UTF-8"), "{err}");
    assert!(!sb.path("px").exists(), "nothing written");
    assert!(!config.exists());
    // Without --default the pair is written there (the listing names it by its bytes).
    sb.ok(&args!["keys", "generate", "--name", "g1", "--out", out]);
    assert!(out.join("g1.pem").exists());
}

/// Key files whose names are not UTF-8: `keys list --json` panicked (a path serialised as JSON),
/// the text listing, the permission warning of `keys public` (whose `chmod` then named another
/// file) and the trust store's `source` showed U+FFFD. Every one keeps the bytes now, and the
/// suggested command names the very file.
#[test]
fn key_file_names_that_are_not_utf8_keep_their_bytes() {
    let sb = Sandbox::new();
    let dir = sb.path("kd");
    std::fs::create_dir(&dir).unwrap();
    let private = raw_name(&dir, b"k\xff.pem");
    let public = raw_name(&dir, b"k\xff.pub.pem");
    std::fs::write(
        &private,
        std::fs::read(vector_key("test-signer.pem")).unwrap(),
    )
    .unwrap();
    chmod(&private, 0o644);
    std::fs::copy(vector_key("test-signer.pub.pem"), &public).unwrap();
    // A second pair whose name differs in that byte only: two pairs, not one mismatched pair.
    let other = raw_name(&dir, b"k\xfe.pub.pem");
    std::fs::copy(vector_key("untrusted-signer.pub.pem"), &other).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&args!["keys", "list", "--json", "--dir", dir])).unwrap();
    let keys = json["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{json}");
    assert_eq!(keys[0]["name"], r"k\xfe", "{json}");
    assert!(keys[0]["problem"].is_null(), "{json}");
    assert_eq!(keys[1]["name"], r"k\xff", "{json}");
    let path = keys[1]["privatePath"].as_str().unwrap();
    assert!(path.ends_with(r"kd/k\xff.pem"), "{json}");
    assert!(keys[1]["publicPath"]
        .as_str()
        .unwrap()
        .ends_with(r"kd/k\xff.pub.pem"));
    let chmod_cmd = format!("chmod 600 $'{path}'");
    assert!(
        keys[1]["problem"].as_str().unwrap().contains(&chmod_cmd),
        "{json}"
    );
    let human = sb.ok(&args!["keys", "list", "--dir", dir]);
    assert!(
        human.contains(r"k\xff ") && human.contains(&chmod_cmd),
        "{human}"
    );
    assert!(!human.contains('\u{fffd}'), "{human}");
    let o = sb.run(&args!["keys", "public", private]);
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert!(
        o.status.success() && stderr.contains(&chmod_cmd),
        "{stderr}"
    );
    // The suggested command, run by a shell, restricts that very file.
    let sh = Command::new("bash")
        .args(["-c", &chmod_cmd])
        .output()
        .unwrap();
    assert!(
        sh.status.success(),
        "{}",
        String::from_utf8_lossy(&sh.stderr)
    );
    assert!(load_signing_key(&private).unwrap().1.is_empty());
    sb.ok(&args!["keys", "trust", "add", public, "--name", "kx"]);
    let store = std::fs::read_to_string(sb.data.path().join("airlock/trust.json")).unwrap();
    assert!(store.contains(r#"kd/k\\xff.pub.pem""#), "{store}");
    let list = sb.ok(&["keys", "trust", "list"]);
    assert!(
        list.contains(r"kd/k\xff.pub.pem") && !list.contains('\u{fffd}'),
        "{list}"
    );
}

/// `keys generate --out FILE` said "cannot write FILE: File exists (os error 17)".
#[test]
fn generating_into_a_file_says_it_is_not_a_folder() {
    let sb = Sandbox::new();
    let file = sb.path("b1.json");
    std::fs::write(&file, "{}").unwrap();
    for out in [file.clone(), file.join("sub")] {
        let err = sb.usage_error(&args!["keys", "generate", "--name", "b1", "--out", out]);
        assert!(err.contains("b1.json is a file, not a folder"), "{err}");
        assert!(!err.contains("os error"), "{err}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"{}");
}

/// `keys trust add|remove` with a data folder the user may not write said "cannot write
/// …/trust.json: Permission denied", pointing at a file the user may write. It now says the folder
/// is not writable and why that matters. As root (which ignores modes) the commands run as `nobody`.
#[test]
fn changing_the_trust_store_in_a_folder_that_is_not_writable_says_so() {
    use std::os::unix::process::CommandExt;
    let sb = Sandbox::new();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let public = sb.path("other.pub.pem");
    std::fs::copy(vector_key("untrusted-signer.pub.pem"), &public).unwrap();
    sb.ok(&args![
        "keys",
        "trust",
        "add",
        vector_key("test-signer.pub.pem"),
        "--name",
        "hq"
    ]);
    let folder = sb.data.path().join("airlock");
    let store = folder.join("trust.json");
    let before = std::fs::read(&store).unwrap();
    let run = |args: &[&OsStr]| {
        let mut c = sb.cmd();
        c.args(args);
        if root {
            c.uid(65534).gid(65534);
        }
        c.output().unwrap()
    };
    if root {
        for p in [sb.data.path(), sb.work.path()] {
            chmod(p, 0o755);
        }
        for p in [&folder, &store, &folder.join("trust.json.lock")] {
            std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        }
    }
    chmod(&folder, 0o555);
    let want = format!("the folder {} is not writable", folder.display());
    let add = args!["keys", "trust", "add", public, "--name", "other"];
    let remove = args!["keys", "trust", "remove", "hq"];
    for args in [&add[..], &remove[..]] {
        let o = run(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&want) && err.contains("chmod u+w"), "{err}");
    }
    // No lock file yet: the same, not "cannot write trust.json.lock: Permission denied" alone.
    chmod(&folder, 0o755);
    std::fs::remove_file(folder.join("trust.json.lock")).unwrap();
    chmod(&folder, 0o555);
    let o = run(&remove.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(2) && err.contains(&want), "{err}");
    chmod(&folder, 0o755);
    assert_eq!(std::fs::read(&store).unwrap(), before, "unchanged");
}

/// `jobs sign --json` named an output whose name is not UTF-8 with U+FFFD (a JSON consumer could
/// not tell two such files apart); it keeps the bytes as `\xNN`, as every path airlock prints.
#[test]
fn jobs_sign_json_names_an_output_that_is_not_utf8_by_its_bytes() {
    let sb = Sandbox::new();
    let key = private_copy(sb.work.path(), "test-signer.pem");
    let out = raw_name(sb.work.path(), b"s\xff.json");
    let dsse = raw_name(sb.work.path(), b"s\xfe.dsse.json");
    let json: serde_json::Value = serde_json::from_str(&sb.ok(&args![
        "jobs",
        "sign",
        vector_bundle("two-nodes.json"),
        "--key",
        key,
        "-o",
        out,
        "--dsse-out",
        dsse,
        "--json"
    ]))
    .unwrap();
    assert!(
        json["output"].as_str().unwrap().ends_with(r"s\xff.json"),
        "{json}"
    );
    assert!(
        json["dsseOut"]
            .as_str()
            .unwrap()
            .ends_with(r"s\xfe.dsse.json"),
        "{json}"
    );
    assert!(out.exists() && dsse.exists());
}
