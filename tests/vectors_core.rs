//! The shared reference vectors for the core engine (SPEC sections 2-6), matched exactly.

use airlock::core::bundle::{load_bundle, manifest_digest};
use airlock::core::canonical::canonicalize_text;
use airlock::core::chain::{node_link, payload_hash};
use airlock::core::hlc::Hlc;
use airlock::core::ids::job_id;
use airlock::core::verify::{verify_file, FindingKind, VerifyOptions};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors")
}

fn json(rel: &str) -> Value {
    let text = std::fs::read_to_string(vectors().join(rel)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn hlc_valid_forms_parse_to_their_parts_and_format_back() {
    let v = json("hlc.json");
    for case in v["valid"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let h = Hlc::parse(text).unwrap();
        assert_eq!(h.physical, case["physical"].as_u64().unwrap());
        assert_eq!(h.logical as u64, case["logical"].as_u64().unwrap());
        assert_eq!(h.node, case["node"].as_str().unwrap());
        assert_eq!(h.to_string(), text);
    }
}

#[test]
fn hlc_invalid_forms_are_rejected() {
    let v = json("hlc.json");
    for case in v["invalid"].as_array().unwrap() {
        let text = case.as_str().unwrap();
        assert!(Hlc::parse(text).is_err(), "{text:?} must be rejected");
    }
}

#[test]
fn hlc_order_is_the_tuple_order_not_the_text_order() {
    let v = json("hlc.json");
    let list: Vec<Hlc> = v["ordered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Hlc::parse(t.as_str().unwrap()).unwrap())
        .collect();
    for w in list.windows(2) {
        assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
    }
    let mut shuffled = list.clone();
    shuffled.reverse();
    shuffled.sort();
    assert_eq!(shuffled, list);
}

#[test]
fn job_ids_match_with_and_without_idempotency_keys() {
    let v = json("job-id.json");
    for case in v.as_array().unwrap() {
        let canonical = canonicalize_text(&case["payload"].to_string()).unwrap();
        if let Some(c) = case.get("canonical") {
            assert_eq!(canonical, c.as_str().unwrap());
        }
        let key = case.get("idempotencyKey").and_then(|k| k.as_str());
        assert_eq!(
            job_id(&canonical, key).to_string(),
            case["jobId"].as_str().unwrap()
        );
    }
}

#[test]
fn jcs_fixtures_all_six() {
    let dir = vectors().join("third-party/jcs");
    let mut n = 0;
    for entry in std::fs::read_dir(dir.join("input")).unwrap() {
        let path = entry.unwrap().path();
        let input = std::fs::read_to_string(&path).unwrap();
        let expected =
            std::fs::read_to_string(dir.join("output").join(path.file_name().unwrap())).unwrap();
        assert_eq!(
            canonicalize_text(&input).unwrap(),
            expected.trim_end_matches('\n'),
            "{}",
            path.display()
        );
        n += 1;
    }
    assert_eq!(n, 6);
}

#[test]
fn two_nodes_bundle_digest_links_and_heads() {
    let expected = json("bundles/two-nodes.expected.json");
    let b = load_bundle(&vectors().join("bundles/two-nodes.json")).unwrap();
    assert_eq!(
        manifest_digest(&b.job_logs),
        expected["manifestDigest"].as_str().unwrap()
    );
    assert_eq!(
        b.header.manifest_digest,
        expected["manifestDigest"].as_str().unwrap()
    );
    assert_eq!(
        b.entry_count() as u64,
        expected["entryCount"].as_u64().unwrap()
    );
    for log in &b.job_logs {
        assert_eq!(
            log.chain_head,
            expected["chainHeads"][&log.node_id].as_str().unwrap()
        );
        let mut prev: Option<[u8; 32]> = None;
        for e in &log.entries {
            let hash = payload_hash(&e.payload);
            assert_eq!(B64.encode(hash), e.payload_hash);
            let id = uuid::Uuid::parse_str(&e.job_id).unwrap();
            let link = node_link(prev.as_ref(), &id, &e.t_hlc, &hash);
            assert_eq!(B64.encode(link), e.link);
            assert_eq!(e.prev_link, prev.map(|p| B64.encode(p)));
            prev = Some(link);
        }
        assert_eq!(B64.encode(prev.unwrap()), log.chain_head);
    }
    let report = verify_file(
        &vectors().join("bundles/two-nodes.json"),
        &VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.ok, "{:?}", report.findings);
    assert_eq!(report.checks.signature, "absent");
}

#[test]
fn tamper_vectors_report_the_expected_findings() {
    let expected = json("tamper/expected.json");
    for (file, spec) in expected.as_object().unwrap() {
        let report = verify_file(
            &vectors().join("tamper").join(file),
            &VerifyOptions::default(),
        )
        .unwrap();
        assert_eq!(report.ok, spec["ok"].as_bool().unwrap(), "{file}");
        for must in spec["must_find"].as_array().unwrap() {
            let kind = FindingKind::parse(must["kind"].as_str().unwrap()).unwrap();
            let found = report.findings.iter().any(|f| {
                f.kind == kind
                    && must
                        .get("nodeId")
                        .map(|n| f.node_id.as_deref() == n.as_str())
                        .unwrap_or(true)
                    && must
                        .get("index")
                        .map(|i| f.index == i.as_u64())
                        .unwrap_or(true)
            });
            assert!(found, "{file}: missing {must} in {:#?}", report.findings);
        }
        // and nothing else: every finding is one of the expected ones
        assert_eq!(
            report.findings.len(),
            spec["must_find"].as_array().unwrap().len(),
            "{file}: {:#?}",
            report.findings
        );
    }
}
