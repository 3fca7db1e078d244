//! `airlock jobs verify FILE.tgz` (a portable export, SPEC section 10, whose bundle is verified as
//! SPEC section 6 says): its findings are held in bounded memory like `jobs verify FILE`'s, and
//! its output is the report it always printed (JSON with the `portable` member, keys sorted, and
//! the text report after the archive's line).

use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
use airlock::core::notify::export::build_archives;
use airlock::core::verify::{verify_reader, VerifyOptions};
use airlock::report_text::verify_lines;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn airlock(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.args(args)
        .env("AIRLOCK_DB", dir.join("store.db"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_NODE_ID", "edge-1");
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    airlock(dir, args).output().unwrap()
}

/// `bundle` packed as a portable export at `dir/name`.
fn portable(dir: &Path, name: &str, bundle: &[u8]) -> std::path::PathBuf {
    let files = build_archives(&[("bundle.json", bundle)]).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, files.outer).unwrap();
    path
}

/// A generated bundle of `nodes` x `per_node` entries with every payload edited: a
/// `payload-modified` at every entry.
fn every_payload_edited(nodes: usize, per_node: usize) -> Vec<u8> {
    let spec = SynthSpec {
        tenant: "portable".into(),
        nodes,
        entries_per_node: per_node,
        start_ms: 1_767_614_400_000,
        seed: 5,
    };
    let mut bytes = Vec::new();
    write_synthetic_bundle(&spec, &mut bytes).unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .replace("\\\"scan\\\"", "\\\"scam\\\"")
        .into_bytes()
}

/// The JSON and the text are what they were when every finding was held: the report as one
/// `serde_json::Value` with `portable` added, and the text report after the archive's line.
#[test]
fn portable_verify_prints_the_report_it_always_printed() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bundle) in [
        (
            "tampered.tgz",
            std::fs::read(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../shared/vectors/tamper/payload-modified.json"),
            )
            .unwrap(),
        ),
        ("every-payload.tgz", every_payload_edited(2, 300)),
    ] {
        let file = portable(dir.path(), name, &bundle);
        let path = file.to_str().unwrap();
        let whole = verify_reader(&bundle[..], &VerifyOptions::default()).unwrap();
        assert!(!whole.ok);
        let json = run(dir.path(), &["jobs", "verify", path, "--json"]);
        assert_eq!(json.status.code(), Some(1), "{json:?}");
        let printed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let mut want = serde_json::to_value(&whole).unwrap();
        want.as_object_mut()
            .unwrap()
            .insert("portable".into(), printed["portable"].clone());
        assert_eq!(printed["portable"]["ok"], true);
        let want = serde_json::to_string_pretty(&want).unwrap() + "\n";
        assert!(
            String::from_utf8(json.stdout).unwrap() == want,
            "{name}: JSON differs"
        );
        let text = run(dir.path(), &["jobs", "verify", path]);
        assert_eq!(text.status.code(), Some(1));
        let out = String::from_utf8(text.stdout).unwrap();
        let (first, rest) = out.split_once('\n').unwrap();
        assert!(
            first.starts_with(&format!("portable export {path}: "))
                && first.contains(" match checksums.txt, root_hash "),
            "{first}"
        );
        let mut lines = verify_lines(&format!("{path} (bundle.json)"), &whole).join("\n");
        lines.push('\n');
        assert!(rest == lines, "{name}: text differs");
    }
}

/// The peak resident memory of `cmd` run to its end (its own, from `wait4`), in KiB.
// The child is reaped by `wait4` (which `Child::wait` cannot give the usage of).
#[allow(clippy::zombie_processes)]
fn peak_kib(mut cmd: Command) -> (i32, i64) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child, with valid out-pointers.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as i32, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as i32);
        usage
    };
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

/// A portable export with a finding at every one of its 80 000 entries (some 27 MB of findings
/// held whole): verified in about the memory `jobs verify` of its bundle.json takes, as its
/// findings past the budget wait in a temporary file.
#[test]
fn portable_verify_holds_its_findings_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = every_payload_edited(2, 40_000);
    let plain = dir.path().join("bundle.json");
    std::fs::write(&plain, &bundle).unwrap();
    let packed = portable(dir.path(), "big.tgz", &bundle);
    let whole = verify_reader(&bundle[..], &VerifyOptions::default()).unwrap();
    let held: usize = whole
        .findings
        .iter()
        .map(|f| serde_json::to_string(f).unwrap().len())
        .sum();
    drop(whole);
    assert!(held > 20 << 20, "{held} bytes of findings");
    for json in [true, false] {
        let with = |p: &Path| {
            let mut args = vec!["jobs", "verify", p.to_str().unwrap()];
            if json {
                args.push("--json");
            }
            peak_kib(airlock(dir.path(), &args))
        };
        let (code, plain_kib) = with(&plain);
        assert_eq!(code, 1);
        let (code, portable_kib) = with(&packed);
        assert_eq!(code, 1);
        eprintln!("json {json}: portable {portable_kib} KiB, plain {plain_kib} KiB");
        assert!(
            portable_kib < plain_kib + 12 * 1024,
            "json {json}: {portable_kib} KiB for the portable export, {plain_kib} KiB for its bundle"
        );
    }
}

/// A refused portable export (its `checksums.txt` does not match its `bundle.json`) prints the
/// SPEC 6 object like any other (`docs/notifications.md`): every member, what does not apply
/// null, no findings, `ok` false, and `portable` saying why it was refused. Exit 1.
#[test]
fn a_refused_portable_export_prints_the_spec_6_object() {
    use airlock::core::notify::archive::tgz_bytes;
    let dir = tempfile::tempdir().unwrap();
    let bundle = every_payload_edited(1, 3);
    // checksums.txt of another bundle.json beside this one.
    let other = build_archives(&[("bundle.json", &b"{}"[..])]).unwrap();
    let inner = tgz_bytes(&[
        ("bundle.json", &bundle[..]),
        ("checksums.txt", other.checksums_txt.as_bytes()),
    ])
    .unwrap();
    let outer = tgz_bytes(&[("portable-bundle-v1.tgz", &inner[..])]).unwrap();
    let file = dir.path().join("refused.tgz");
    std::fs::write(&file, outer).unwrap();
    let o = run(
        dir.path(),
        &["jobs", "verify", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let refused = printed["portable"]["refused"].as_str().unwrap();
    assert!(
        refused.contains("bundle.json differs from checksums.txt"),
        "{refused}"
    );
    let want = serde_json::json!({
        "bundleId": null,
        "tenantId": null,
        "ok": false,
        "checks": {
            "schema": null, "manifestDigest": null, "chain": null, "links": null,
            "chainHead": null, "signature": null,
        },
        "findings": [],
        "stats": {
            "nodes": null, "entries": null, "bytes": null, "signedBy": null, "signer": null,
            "computedManifestDigest": null,
        },
        "portable": { "ok": false, "refused": refused },
    });
    assert_eq!(printed, want);
    // The same members as a verified bundle's report.
    let whole = verify_reader(&bundle[..], &VerifyOptions::default()).unwrap();
    let verified = serde_json::to_value(&whole).unwrap();
    for group in [None, Some("checks"), Some("stats")] {
        let keys = |v: &serde_json::Value| {
            let v = group.map_or(v, |g| &v[g]);
            v.as_object().unwrap().keys().cloned().collect::<Vec<_>>()
        };
        let mut want_keys = keys(&verified);
        if group.is_none() {
            want_keys.push("portable".into());
            want_keys.sort();
        }
        assert_eq!(keys(&printed), want_keys, "{group:?}");
    }
}
