//! Hostile field sizes (SPEC section 6): a bundle whose nodeId, jobId, tHlc, links or head are far
//! longer than any valid value gets findings of bounded size: each carries at most a prefix of
//! such text and its full length, still naming the kind and where it is. Valid values are carried
//! whole.

use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
use airlock::core::verify::{verify_reader, Finding, FindingKind, Report, VerifyOptions};
use serde_json::Value;
use std::process::{Command, Output};

/// A valid generated bundle of one node's `entries` entries, as JSON to edit.
fn bundle(entries: usize) -> Value {
    let spec = SynthSpec {
        tenant: "hostile".into(),
        nodes: 1,
        entries_per_node: entries,
        start_ms: 1_767_614_400_000,
        seed: 3,
    };
    let mut bytes = Vec::new();
    write_synthetic_bundle(&spec, &mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// `doc` as a file, each log's nodeId first (so its entries are checked against it as they are
/// read; a map of `serde_json` would write it last).
fn to_bytes(doc: &Value) -> Vec<u8> {
    let mut doc = doc.clone();
    let logs = std::mem::take(doc["jobLogs"].as_array_mut().unwrap());
    let logs: Vec<String> = logs
        .into_iter()
        .map(|mut log| {
            let node = log.as_object_mut().unwrap().remove("nodeId").unwrap();
            let rest = serde_json::to_string(&log).unwrap();
            format!("{{\"nodeId\":{node},{}", &rest[1..])
        })
        .collect();
    let text = serde_json::to_string(&doc).unwrap();
    text.replace(
        "\"jobLogs\":[]",
        &format!("\"jobLogs\":[{}]", logs.join(",")),
    )
    .into_bytes()
}

fn verify(doc: &Value) -> Report {
    let bytes = to_bytes(doc);
    verify_reader(&bytes[..], &VerifyOptions::default()).unwrap()
}

/// The most a finding may weigh as JSON: a message clipped to 1024 characters and four values of
/// at most 160 characters and their length note, with room to spare.
const FINDING_BYTES: usize = 4096;

fn assert_bounded(f: &Finding) {
    let json = serde_json::to_string(f).unwrap();
    assert!(
        json.len() <= FINDING_BYTES,
        "a finding of {} bytes: {}…",
        json.len(),
        &json[..json.len().min(600)]
    );
}

fn airlock(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env("AIRLOCK_DB", dir.join("store.db"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("AIRLOCK_NODE_ID", "edge-1")
        .output()
        .unwrap()
}

/// The audit's bundle, scaled down: a log whose nodeId is 256 KiB of text and whose 100 entries
/// claim their own node. Every entry is a `node-mismatch`, which used to carry the log's nodeId
/// three times (100 MB of JSON); each now carries 160 characters of it and its length.
#[test]
fn a_huge_log_node_id_gives_findings_of_bounded_size() {
    const NODE_BYTES: usize = 256 << 10;
    const ENTRIES: usize = 100;
    let mut doc = bundle(ENTRIES);
    let huge = "a".repeat(NODE_BYTES);
    doc["jobLogs"][0]["nodeId"] = Value::String(huge.clone());
    let r = verify(&doc);
    let mismatches: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::NodeMismatch)
        .collect();
    assert_eq!(mismatches.len(), ENTRIES);
    let note = format!("… ({NODE_BYTES} bytes in all)");
    let clipped = format!("{}{note}", &huge[..160]);
    for (i, f) in mismatches.iter().enumerate() {
        assert_eq!(f.index, Some(i as u64));
        assert_eq!(f.node_id.as_deref(), Some(clipped.as_str()));
        assert_eq!(f.expected.as_deref(), Some(clipped.as_str()));
        assert_eq!(f.actual.as_deref(), Some("node-00"));
        assert!(f.message.contains(&note), "{}", f.message);
    }
    let schema = r
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::SchemaInvalid && f.message.contains(".nodeId"))
        .expect("the log's nodeId is reported");
    assert!(schema.message.contains(&note), "{}", schema.message);
    for f in &r.findings {
        assert_bounded(f);
    }

    // Through the binary: the JSON report and the text report stay small.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hostile.json");
    std::fs::write(&file, to_bytes(&doc)).unwrap();
    let path = file.to_str().unwrap();
    let json = airlock(dir.path(), &["jobs", "verify", path, "--json"]);
    assert_eq!(json.status.code(), Some(1));
    assert!(
        json.stdout.len() < (ENTRIES + 10) * FINDING_BYTES,
        "{} bytes of JSON",
        json.stdout.len()
    );
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let first = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "node-mismatch")
        .unwrap();
    assert_eq!(first["index"], 0);
    assert_eq!(first["nodeId"], clipped.as_str());
    let text = airlock(dir.path(), &["jobs", "verify", path]);
    assert_eq!(text.status.code(), Some(1));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.len() < (ENTRIES + 10) * FINDING_BYTES,
        "{} bytes of text",
        out.len()
    );
    assert!(
        out.contains("[0] node-mismatch"),
        "{}",
        &out[..out.len().min(2000)]
    );
    // The per-log heading names the node clipped too, not its 256 KiB.
    assert!(
        !out.contains(&"a".repeat(1000)),
        "the heading carries the whole nodeId"
    );
}

/// Every field of every entry far too long (and the log's head and last HLC): every finding stays
/// small, and the entries are still named by index.
#[test]
fn huge_entry_fields_give_findings_of_bounded_size() {
    const FIELD_BYTES: usize = 16 << 10;
    const ENTRIES: usize = 30;
    let mut doc = bundle(ENTRIES);
    let long = |c: char| Value::String(c.to_string().repeat(FIELD_BYTES));
    let log = &mut doc["jobLogs"][0];
    log["chainHead"] = long('h');
    log["lastHlc"] = long('l');
    for (i, e) in log["entries"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        let field = [
            "nodeId",
            "tHlc",
            "jobId",
            "payloadHash",
            "prevLink",
            "link",
            "enqueuedAt",
        ][i % 7];
        e[field] = long('x');
        if i % 2 == 0 {
            e["tHlc"] = Value::String(format!("1767614400000:0:{}", "n".repeat(FIELD_BYTES)));
        }
    }
    let r = verify(&doc);
    assert!(!r.ok);
    for f in &r.findings {
        assert_bounded(f);
    }
    for i in 0..ENTRIES as u64 {
        assert!(
            r.findings
                .iter()
                .any(|f| f.index == Some(i) && f.kind == FindingKind::SchemaInvalid),
            "entry {i} has a schema finding: {:#?}",
            r.findings
        );
    }
    let note = format!("({FIELD_BYTES} bytes in all)");
    for name in ["chainHead", "lastHlc"] {
        assert!(
            r.findings
                .iter()
                .any(|f| f.message.contains(name) && f.message.contains(&note)),
            "{name}"
        );
    }
}

/// Values of every valid size are carried whole: a 128-character log nodeId (the longest valid)
/// is the node-mismatch's nodeId and expected value, quoted whole in its message.
#[test]
fn valid_values_are_carried_whole() {
    let mut doc = bundle(3);
    let node = "b".repeat(128);
    doc["jobLogs"][0]["nodeId"] = Value::String(node.clone());
    let r = verify(&doc);
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::NodeMismatch)
        .unwrap();
    assert_eq!(f.node_id.as_deref(), Some(node.as_str()));
    assert_eq!(f.expected.as_deref(), Some(node.as_str()));
    assert_eq!(
        f.message,
        format!("entry 0 claims node \"node-00\" but sits in the log of node {node:?}")
    );
    assert!(!r
        .findings
        .iter()
        .any(|f| f.message.contains("bytes in all")));
}
