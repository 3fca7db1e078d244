//! One test per tampering: each makes exactly that change to a valid bundle and checks the finding
//! kind and location (SPEC section 6).

use airlock::core::bundle::{bundle_to_vec, load_bundle, manifest_digest, Bundle, Entry};
use airlock::core::chain::{node_link, payload_hash};
use airlock::core::verify::{verify_reader, FindingKind, Report, VerifyOptions};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::path::Path;

use FindingKind::*;

fn base() -> Bundle {
    load_bundle(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json"),
    )
    .unwrap()
}

fn verify(b: &Bundle) -> Report {
    let bytes = bundle_to_vec(b);
    verify_reader(&bytes[..], &VerifyOptions::default()).unwrap()
}

fn redigest(b: &mut Bundle) {
    b.header.manifest_digest = manifest_digest(&b.job_logs);
}

/// Asserts the report holds exactly these findings (kind, node, index), in any order.
fn assert_exactly(report: &Report, want: &[(FindingKind, Option<&str>, Option<u64>)]) {
    let mut got: Vec<(FindingKind, Option<String>, Option<u64>)> = report
        .findings
        .iter()
        .map(|f| (f.kind, f.node_id.clone(), f.index))
        .collect();
    let mut want: Vec<(FindingKind, Option<String>, Option<u64>)> = want
        .iter()
        .map(|(k, n, i)| (*k, n.map(str::to_string), *i))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "findings: {:#?}", report.findings);
    assert!(!report.ok);
    for f in &report.findings {
        assert!(!f.message.is_empty());
    }
}

const M: (FindingKind, Option<&str>, Option<u64>) = (ManifestMismatch, None, None);

#[test]
fn untouched_bundle_verifies() {
    let r = verify(&base());
    assert!(r.ok, "{:#?}", r.findings);
}

#[test]
fn payload_edited() {
    let mut b = base();
    b.job_logs[0].entries[2].payload = b.job_logs[0].entries[2].payload.replace("app-2", "evil");
    let r = verify(&b);
    assert_exactly(&r, &[(PayloadModified, Some("node-a"), Some(2)), M]);
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == PayloadModified)
        .unwrap();
    assert_eq!(
        f.job_id.as_deref(),
        Some(b.job_logs[0].entries[2].job_id.as_str())
    );
    assert_eq!(
        f.expected.as_deref(),
        Some(b.job_logs[0].entries[2].payload_hash.as_str())
    );
    assert_eq!(r.checks.links, "fail");
}

#[test]
fn payload_and_hash_edited() {
    let mut b = base();
    let e = &mut b.job_logs[1].entries[1];
    e.payload = e.payload.replace("app-1", "evil");
    e.payload_hash = B64.encode(payload_hash(&e.payload));
    assert_exactly(&verify(&b), &[(EntryModified, Some("node-b"), Some(1)), M]);
}

#[test]
fn thlc_edited() {
    let mut b = base();
    b.job_logs[0].entries[1].t_hlc = "1767614400251:1:node-a".into();
    assert_exactly(&verify(&b), &[(EntryModified, Some("node-a"), Some(1)), M]);
}

#[test]
fn job_id_edited() {
    let mut b = base();
    b.job_logs[0].entries[3].job_id = "00000000-0000-5000-8000-000000000000".into();
    assert_exactly(&verify(&b), &[(EntryModified, Some("node-a"), Some(3)), M]);
}

#[test]
fn link_edited() {
    let mut b = base();
    b.job_logs[0].entries[2].link = B64.encode([7u8; 32]);
    assert_exactly(&verify(&b), &[(EntryModified, Some("node-a"), Some(2)), M]);
}

#[test]
fn last_link_edited_is_not_a_truncation() {
    let mut b = base();
    b.job_logs[1].entries[3].link = B64.encode([7u8; 32]);
    assert_exactly(&verify(&b), &[(EntryModified, Some("node-b"), Some(3)), M]);
}

#[test]
fn one_entry_deleted_in_the_middle() {
    let mut b = base();
    b.job_logs[0].entries.remove(2);
    assert_exactly(&verify(&b), &[(EntriesDeleted, Some("node-a"), Some(2)), M]);
}

#[test]
fn several_entries_deleted_in_the_middle() {
    let mut b = base();
    b.job_logs[0].entries.drain(1..3);
    assert_exactly(&verify(&b), &[(EntriesDeleted, Some("node-a"), Some(1)), M]);
}

#[test]
fn head_entry_deleted() {
    let mut b = base();
    b.job_logs[1].entries.remove(0);
    let r = verify(&b);
    assert_exactly(&r, &[(EntriesDeleted, Some("node-b"), Some(0)), M]);
    assert!(r.findings.iter().any(|f| f.message.contains("head")));
}

#[test]
fn forged_entry_inserted_with_a_consistent_link() {
    let mut b = base();
    let prev = b.job_logs[0].entries[1].clone();
    let payload = "{\"kind\":\"forged\"}".to_string();
    let hash = payload_hash(&payload);
    let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, b"forged");
    let t = "1767614400300:0:node-a".to_string();
    let prev_link: [u8; 32] = B64.decode(&prev.link).unwrap().try_into().unwrap();
    let link = node_link(Some(&prev_link), &id, &t, &hash);
    let forged = Entry {
        node_id: "node-a".into(),
        t_hlc: t,
        job_id: id.to_string(),
        partition_key: None,
        payload,
        payload_hash: B64.encode(hash),
        prev_link: Some(prev.link.clone()),
        link: B64.encode(link),
        enqueued_at: "2026-01-05T12:00:00.300Z".into(),
    };
    b.job_logs[0].entries.insert(2, forged);
    assert_exactly(&verify(&b), &[(EntryInserted, Some("node-a"), Some(2)), M]);
}

#[test]
fn forged_entry_inserted_at_the_head() {
    let mut b = base();
    let payload = "{}".to_string();
    let hash = payload_hash(&payload);
    let id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, b"forged-head");
    let t = "1767614399000:0:node-b".to_string();
    let link = node_link(None, &id, &t, &hash);
    let forged = Entry {
        node_id: "node-b".into(),
        t_hlc: t,
        job_id: id.to_string(),
        partition_key: None,
        payload,
        payload_hash: B64.encode(hash),
        prev_link: None,
        link: B64.encode(link),
        enqueued_at: "2026-01-05T11:59:59.000Z".into(),
    };
    b.job_logs[1].entries.insert(0, forged);
    assert_exactly(&verify(&b), &[(EntryInserted, Some("node-b"), Some(0)), M]);
}

#[test]
fn two_adjacent_entries_swapped() {
    let mut b = base();
    b.job_logs[0].entries.swap(1, 2);
    assert_exactly(
        &verify(&b),
        &[(EntriesReordered, Some("node-a"), Some(1)), M],
    );
}

#[test]
fn two_distant_entries_swapped() {
    let mut b = base();
    b.job_logs[0].entries.swap(1, 4);
    assert_exactly(
        &verify(&b),
        &[(EntriesReordered, Some("node-a"), Some(1)), M],
    );
}

#[test]
fn head_swapped_with_its_successor() {
    let mut b = base();
    b.job_logs[1].entries.swap(0, 1);
    assert_exactly(
        &verify(&b),
        &[(EntriesReordered, Some("node-b"), Some(0)), M],
    );
}

#[test]
fn tail_removed() {
    let mut b = base();
    b.job_logs[0].entries.truncate(3);
    assert_exactly(&verify(&b), &[(TailTruncated, Some("node-a"), Some(2)), M]);
}

#[test]
fn head_edited_to_point_at_an_earlier_entry() {
    let mut b = base();
    b.job_logs[0].chain_head = b.job_logs[0].entries[1].link.clone();
    let r = verify(&b);
    assert_exactly(&r, &[(HeadMismatch, Some("node-a"), Some(1)), M]);
    assert_eq!(r.checks.chain_head, "fail");
}

#[test]
fn last_hlc_edited_to_an_earlier_entry() {
    let mut b = base();
    b.job_logs[1].last_hlc = b.job_logs[1].entries[2].t_hlc.clone();
    assert_exactly(&verify(&b), &[(HeadMismatch, Some("node-b"), Some(2)), M]);
}

#[test]
fn manifest_edited() {
    let mut b = base();
    b.header.manifest_digest = format!("sha256:{}", "0".repeat(64));
    let r = verify(&b);
    assert_exactly(&r, &[M]);
    assert_eq!(r.checks.manifest_digest, "fail");
    assert_eq!(r.checks.chain, "pass");
}

#[test]
fn hlc_order_broken_in_a_relinked_log() {
    let mut b = base();
    b.job_logs[0].entries[3].t_hlc = "1767614400100:0:node-a".into();
    b.job_logs[0].relink(3).unwrap();
    assert_exactly(
        &verify(&b),
        &[(HlcNotIncreasing, Some("node-a"), Some(3)), M],
    );
    redigest(&mut b);
    assert_exactly(&verify(&b), &[(HlcNotIncreasing, Some("node-a"), Some(3))]);
}

#[test]
fn entry_claiming_another_node() {
    let mut b = base();
    b.job_logs[1].entries[2].node_id = "node-a".into();
    let r = verify(&b);
    assert_exactly(&r, &[(NodeMismatch, Some("node-b"), Some(2)), M]);
    let f = r.findings.iter().find(|f| f.kind == NodeMismatch).unwrap();
    assert_eq!(f.expected.as_deref(), Some("node-b"));
    assert_eq!(f.actual.as_deref(), Some("node-a"));
}

#[test]
fn relinked_entry_with_another_nodes_hlc() {
    let mut b = base();
    b.job_logs[1].entries[3].t_hlc = "1767614400900:0:node-z".into();
    b.job_logs[1].relink(3).unwrap();
    b.job_logs[1].last_hlc = b.job_logs[1].entries[3].t_hlc.clone();
    redigest(&mut b);
    assert_exactly(&verify(&b), &[(NodeMismatch, Some("node-b"), Some(3))]);
}

#[test]
fn entry_from_the_future_is_clock_skew() {
    let mut b = base();
    let future = airlock::core::hlc::unix_ms_now() + 3_600_000;
    b.job_logs[0].entries[4].t_hlc = format!("{future}:0:node-a");
    b.job_logs[0].relink(4).unwrap();
    redigest(&mut b);
    let r = verify(&b);
    assert_exactly(&r, &[(ClockSkew, Some("node-a"), Some(4))]);
}

#[test]
fn a_full_forgery_is_invisible_without_a_signature() {
    let mut b = base();
    b.job_logs[0].entries[1].payload = b.job_logs[0].entries[1].payload.replace("app-1", "evil");
    b.job_logs[0].relink(1).unwrap();
    redigest(&mut b);
    assert!(verify(&b).ok);
    let bytes = bundle_to_vec(&b);
    let opts = VerifyOptions {
        require_signature: true,
        ..VerifyOptions::default()
    };
    let r = verify_reader(&bytes[..], &opts).unwrap();
    assert_exactly(&r, &[(SignatureMissing, None, None)]);
    assert_eq!(r.checks.signature, "absent");
}

#[test]
fn schema_problems_name_the_json_path() {
    let mut b = base();
    b.job_logs[0].entries[1].payload_hash = "not base64!".into();
    b.job_logs[1].entries[0].t_hlc = "01767614400100:0:node-b".into();
    redigest(&mut b);
    let r = verify(&b);
    let schema: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == SchemaInvalid)
        .collect();
    assert!(
        schema
            .iter()
            .any(|f| f.index == Some(1) && f.message.contains("payloadHash")),
        "{schema:#?}"
    );
    assert!(
        schema
            .iter()
            .any(|f| f.index == Some(0) && f.message.contains("tHlc")),
        "{schema:#?}"
    );
    assert_eq!(r.checks.schema, "fail");
}

#[test]
fn a_duplicate_job_in_one_log_is_not_a_finding() {
    let mut b = base();
    let mut dup = b.job_logs[0].entries[0].clone();
    dup.t_hlc = "1767614401500:0:node-a".into();
    dup.enqueued_at = "2026-01-05T12:00:01.500Z".into();
    b.job_logs[0].entries.push(dup);
    b.job_logs[0].relink(5).unwrap();
    redigest(&mut b);
    assert!(verify(&b).ok);
}

#[test]
fn prev_link_removed_from_a_head_entry_is_schema_invalid() {
    // `"prevLink": null` and no prevLink at all hash the same way if a reader fills the gap with
    // null; the field is required (null only on a log's first entry), so its absence is reported
    // where it is, and the file no longer matches the digest it was sealed with.
    let b = base();
    let mut doc: serde_json::Value = serde_json::from_slice(&bundle_to_vec(&b)).unwrap();
    let head = doc["jobLogs"][1]["entries"][0].as_object_mut().unwrap();
    assert!(head.remove("prevLink").is_some_and(|v| v.is_null()));
    // The owned model refuses it too (a missing field, not a genesis entry).
    let err = serde_json::from_value::<Entry>(serde_json::Value::Object(head.clone())).unwrap_err();
    assert!(err.to_string().contains("prevLink"), "{err}");
    let bytes = serde_json::to_vec_pretty(&doc).unwrap();
    let r = verify_reader(&bytes[..], &VerifyOptions::default()).unwrap();
    assert_exactly(&r, &[(SchemaInvalid, Some("node-b"), Some(0)), M]);
    let f = r.findings.iter().find(|f| f.kind == SchemaInvalid).unwrap();
    assert!(f.message.contains("prevLink"), "{}", f.message);
}

/// An edited prevLink is an edit of that entry (SPEC section 6: `entry-modified` covers a prevLink
/// edited), wherever it now points: at an earlier entry, at nothing, at null, or (on the head) at
/// something. No break is reported elsewhere, so nothing before the entry is doubted.
#[test]
fn prev_link_edited_is_entry_modified_there() {
    let link = |i: usize| Some(base().job_logs[0].entries[i].link.clone());
    let cases = [
        (3, link(0)),
        (3, link(4)),
        (3, Some(B64.encode([9u8; 32]))),
        (2, None),
        (0, link(2)),
    ];
    for (i, prev) in cases {
        let mut b = base();
        b.job_logs[0].entries[i].prev_link = prev;
        assert_exactly(
            &verify(&b),
            &[(EntryModified, Some("node-a"), Some(i as u64)), M],
        );
    }
}

/// An entry that is not an object (`null`, `[]`, a number, a string) has no fields: one
/// `schema-invalid` there says so, nothing about fields it does not have, and its successor's
/// prevLink names no entry left in the log (`entries-deleted`), as for an entry emptied to `{}`.
/// The entries before it still verify (`--force` keeps them).
#[test]
fn an_entry_that_is_not_an_object_breaks_the_log_there() {
    let b = base();
    let doc: serde_json::Value = serde_json::from_slice(&bundle_to_vec(&b)).unwrap();
    let deleted = (EntriesDeleted, Some("node-a"), Some(3));
    let not_objects = [
        serde_json::json!(null),
        serde_json::json!([]),
        serde_json::json!(5),
        serde_json::json!("x"),
    ];
    for value in not_objects {
        let mut doc = doc.clone();
        doc["jobLogs"][0]["entries"][2] = value.clone();
        let bytes = serde_json::to_vec(&doc).unwrap();
        let r = verify_reader(&bytes[..], &VerifyOptions::default()).unwrap();
        assert_exactly(&r, &[(SchemaInvalid, Some("node-a"), Some(2)), deleted, M]);
        let f = r.findings.iter().find(|f| f.kind == SchemaInvalid).unwrap();
        assert!(
            f.message
                .contains("$.jobLogs[0].entries[2]: must be an object"),
            "{value}: {}",
            f.message
        );
        assert_eq!(r.verified_prefixes(), vec![2, 4], "{value}");
    }
    // `{}`: each missing field is reported, and a missing nodeId claims no node.
    let mut empty = doc.clone();
    empty["jobLogs"][0]["entries"][2] = serde_json::json!({});
    let bytes = serde_json::to_vec(&empty).unwrap();
    let r = verify_reader(&bytes[..], &VerifyOptions::default()).unwrap();
    let mut want = vec![(SchemaInvalid, Some("node-a"), Some(2)); 8];
    want.extend([deleted, M]);
    assert_exactly(&r, &want);
    assert_eq!(r.verified_prefixes(), vec![2, 4]);
}
