//! Findings in bounded memory: a bundle with a finding at every entry gives, through the temporary
//! file, exactly the report (JSON and text) that holding every finding in memory gives.

use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
use airlock::core::verify::{
    verify_reader, verify_reader_bounded, BoundedReport, FindingKind, Report, VerifyOptions,
};
use airlock::report_text::{each_bounded_verify_line, verify_lines};
use std::process::{Command, Output};

/// A generated bundle of `nodes` x `per_node` entries with its payloads edited (all of them, or
/// every third) and, unless `payloads_only`, every fifth link edited (entry-modified) and every
/// seventh prevLink edited with its entry's link (an entry-modified, and an entries-deleted made at
/// the log's end: out of entry order; a prevLink edited alone is that entry's entry-modified).
fn damaged_bundle(nodes: usize, per_node: usize, payloads_only: bool) -> Vec<u8> {
    let spec = SynthSpec {
        tenant: "spill".into(),
        nodes,
        entries_per_node: per_node,
        start_ms: 1_767_614_400_000,
        seed: 7,
    };
    let mut bytes = Vec::new();
    write_synthetic_bundle(&spec, &mut bytes).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let (mut payloads, mut links, mut prevs) = (0usize, 0usize, 0usize);
    let mut link_too = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let edited = if t.starts_with("\"payload\": ") {
            payloads += 1;
            (payloads_only || payloads.is_multiple_of(3))
                .then(|| line.replace("\\\"scan\\\"", "\\\"scam\\\""))
        } else if t.starts_with("\"link\": \"") && !payloads_only {
            links += 1;
            (links.is_multiple_of(5) || std::mem::take(&mut link_too))
                .then(|| flip_first(line, "\"link\": \""))
        } else if t.starts_with("\"prevLink\": \"") && !payloads_only {
            prevs += 1;
            link_too = prevs.is_multiple_of(7);
            link_too.then(|| flip_first(line, "\"prevLink\": \""))
        } else {
            None
        };
        out.push_str(edited.as_deref().unwrap_or(line));
    }
    out.into_bytes()
}

/// `line` with the first character after `field` changed (another valid base64 digest).
fn flip_first(line: &str, field: &str) -> String {
    let at = line.find(field).unwrap() + field.len();
    let new = if &line[at..at + 1] == "A" { "B" } else { "A" };
    format!("{}{new}{}", &line[..at], &line[at + 1..])
}

fn bounded_lines(file: &str, r: &BoundedReport) -> Vec<String> {
    let mut lines = Vec::new();
    each_bounded_verify_line(file, r, &mut |l| lines.push(l)).unwrap();
    lines
}

fn pretty(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

/// Every budget, down to none at all (every finding through the file), gives the in-memory report
/// byte for byte: JSON, text, verified prefixes, and the report read back whole.
#[test]
fn verify_findings_through_the_temporary_file_equal_the_in_memory_report() {
    let bytes = damaged_bundle(3, 1500, false);
    let opts = VerifyOptions::default();
    let whole = verify_reader(&bytes[..], &opts).unwrap();
    let kinds = |k: FindingKind| whole.findings.iter().filter(|f| f.kind == k).count();
    assert_eq!(kinds(FindingKind::PayloadModified), 1500);
    assert!(kinds(FindingKind::EntryModified) > 1000, "{whole:?}");
    assert!(kinds(FindingKind::EntriesDeleted) > 500);
    assert_eq!(kinds(FindingKind::ManifestMismatch), 1);
    let json = pretty(&whole);
    let text = verify_lines("b.json", &whole);
    for budget in [0, 4096, 256 << 10, 1 << 30] {
        let r = verify_reader_bounded(&bytes[..], &opts, budget).unwrap();
        assert_eq!(r.spilled() > 0, budget < 1 << 30, "budget {budget}");
        assert_eq!(r.len(), whole.findings.len(), "budget {budget}");
        assert_eq!(r.ok(), whole.ok);
        assert!(
            serde_json::to_string_pretty(&r).unwrap() == json,
            "budget {budget}: JSON differs"
        );
        assert!(
            bounded_lines("b.json", &r) == text,
            "budget {budget}: text differs"
        );
        assert_eq!(r.verified_prefixes(), whole.verified_prefixes());
        assert!(
            r.into_report().unwrap() == whole,
            "budget {budget}: report differs"
        );
    }
}

/// An intact bundle and a lightly damaged one never touch the file.
#[test]
fn verify_a_small_report_stays_in_memory() {
    let opts = VerifyOptions::default();
    let spec = SynthSpec {
        tenant: "spill".into(),
        nodes: 2,
        entries_per_node: 300,
        start_ms: 1_767_614_400_000,
        seed: 1,
    };
    let mut intact = Vec::new();
    write_synthetic_bundle(&spec, &mut intact).unwrap();
    let damaged = damaged_bundle(2, 300, false);
    for bytes in [intact, damaged] {
        let whole = verify_reader(&bytes[..], &opts).unwrap();
        let r = verify_reader_bounded(&bytes[..], &opts, airlock::core::verify::FINDINGS_MEMORY)
            .unwrap();
        assert_eq!(r.spilled(), 0);
        assert_eq!(serde_json::to_string_pretty(&r).unwrap(), pretty(&whole));
        assert_eq!(bounded_lines("x", &r), verify_lines("x", &whole));
    }
}

fn airlock(dir: &std::path::Path, args: &[&str], tmpdir: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.args(args)
        .env("AIRLOCK_DB", dir.join("store.db"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_NODE_ID", "edge-1");
    if let Some(t) = tmpdir {
        c.env("TMPDIR", t);
    }
    c.output().unwrap()
}

/// `jobs verify` of a bundle whose findings exceed the default budget: the same bytes as the
/// in-memory report, in both forms; with `$TMPDIR` unusable, a clear error (exit 2), no panic.
#[test]
fn verify_cli_report_past_the_memory_budget_is_the_in_memory_report() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = damaged_bundle(2, 16_000, true);
    let file = dir.path().join("every-payload.json");
    std::fs::write(&file, &bytes).unwrap();
    let opts = VerifyOptions::default();
    let whole = verify_reader(&bytes[..], &opts).unwrap();
    assert_eq!(whole.findings.len(), 32_001);
    // The budget is exceeded: the CLI's report goes through the file.
    let bounded =
        verify_reader_bounded(&bytes[..], &opts, airlock::core::verify::FINDINGS_MEMORY).unwrap();
    assert!(bounded.spilled() > 0);
    let path = file.to_str().unwrap();
    let json = airlock(dir.path(), &["jobs", "verify", path, "--json"], None);
    assert_eq!(json.status.code(), Some(1), "{json:?}");
    assert!(String::from_utf8(json.stdout).unwrap() == pretty(&whole) + "\n");
    let human = airlock(dir.path(), &["jobs", "verify", path], None);
    assert_eq!(human.status.code(), Some(1));
    let mut want = verify_lines(path, &whole).join("\n");
    want.push('\n');
    assert!(String::from_utf8(human.stdout).unwrap() == want);
    let missing = dir.path().join("no-such-dir");
    for args in [
        vec!["jobs", "verify", path, "--json"],
        vec!["jobs", "verify", path],
    ] {
        let o = airlock(dir.path(), &args, missing.to_str());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(o.stdout.is_empty(), "{err}");
        for needle in [
            "temporary file",
            "no-such-dir",
            "$TMPDIR",
            "point TMPDIR at",
        ] {
            assert!(err.contains(needle), "{needle:?} in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

fn vector(rel: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/vectors")
            .join(rel),
    )
    .unwrap()
}

/// With no memory budget at all (every finding of every log through the file), `bytes` verifies
/// to the in-memory report: the same JSON and text. Unreadable input fails the same way.
fn assert_same_through_the_file(bytes: &[u8]) {
    let opts = VerifyOptions::default();
    let Ok(whole) = verify_reader(bytes, &opts) else {
        assert!(verify_reader_bounded(bytes, &opts, 0).is_err());
        return;
    };
    let r = verify_reader_bounded(bytes, &opts, 0).unwrap();
    // Every finding after the bundle's own went through the file.
    assert_eq!(r.spilled(), r.len() - r.front().len());
    assert_eq!(serde_json::to_string_pretty(&r).unwrap(), pretty(&whole));
    assert_eq!(bounded_lines("v", &r), verify_lines("v", &whole));
}

#[test]
fn verify_every_vector_reads_the_same_through_the_file() {
    for v in [
        "tamper/entries-deleted.json",
        "tamper/payload-modified.json",
        "bundles/two-nodes.json",
        "bundles/two-nodes-signed.json",
        "merge/a.json",
        "merge/b.json",
        "merge/c.json",
    ] {
        assert_same_through_the_file(&vector(v));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 192, ..Default::default() })]

    /// Any one byte of the two-node vector changed (schema problems, node mismatches, broken
    /// links, bad heads...): the report through the file is the in-memory one.
    #[test]
    fn verify_any_single_byte_change_reads_the_same_through_the_file(
        pos in proptest::prelude::any::<proptest::sample::Index>(),
        byte in proptest::prelude::any::<u8>(),
    ) {
        let mut bytes = vector("bundles/two-nodes.json");
        let start = bytes.windows(9).position(|w| w == b"\"jobLogs\"").unwrap();
        let i = start + pos.index(bytes.len() - start);
        bytes[i] = byte;
        assert_same_through_the_file(&bytes);
    }
}
