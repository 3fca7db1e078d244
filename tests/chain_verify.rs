//! The tenant scheduler chain: link vector, tampering found by `chain verify` at the right position,
//! snapshots, inclusion proofs and lifecycle actions; every store test runs its one body against
//! SQLite and PostgreSQL (`both_stores!`).

mod chain_support;
mod pg_support;
mod stores;

use airlock::core::chain::verify::verify_chain;
use airlock::core::chain::{scheduler_chain_link, Action};
use airlock::core::hlc::SystemWallClock;
use airlock::core::store::rules::{
    self, append_action, chain_entries, prove, snapshot_now, tenants,
};
use airlock::core::store::scheduler::{
    self, check_proof, verify_proof, ProofRejection, SchedulerError,
};
use chain_support::*;
use serde_json::Value;
use stores::{imported, kinds_at};

#[test]
fn scheduler_chain_vector_links() {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(vector("scheduler-chain.json")).unwrap())
            .unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let action: Action = c["action"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            scheduler_chain_link(
                c["tHlc"].as_str().unwrap(),
                c["jobId"].as_str().unwrap(),
                action,
                c["prevChainLink"].as_str(),
                c["payloadDigest"].as_str().unwrap(),
            ),
            c["chainLink"].as_str().unwrap()
        );
    }
}

both_stores! {
fn an_intact_chain_verifies_with_its_snapshots(kind: Kind) {
    let s = imported(kind, 4);
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert!(r.ok, "{:?}", r.findings);
    assert_eq!(r.length, 14);
    assert_eq!(r.snapshots.len(), 3);
    assert!(r.snapshots.iter().all(|s| s.ok));
}

fn an_edited_payload_is_payload_modified_at_its_position(kind: Kind) {
    let s = imported(kind, 1000);
    s.exec(
        "UPDATE scheduler_log SET payload = '{\"kind\":\"evil\"}' WHERE tenant_id = 'acme' AND seq = 4",
        "UPDATE airlock.chain_entry SET payload_text = '{\"kind\":\"evil\"}' WHERE tenant_id = 'acme' AND seq = 4",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert!(!r.ok);
    assert_eq!(kinds_at(&r), vec![("payload-modified".into(), Some(4))]);
}

fn an_edited_link_is_entry_modified_at_its_position(kind: Kind) {
    let s = imported(kind, 1000);
    s.edit_log_row(7, "chain_link = '00' || substr(chain_link, 3)");
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entry-modified".into(), Some(7))]);
}

// An edited prevChainLink (pointing at an earlier entry, or at nothing) is one entry-modified
// at that entry (SPEC 6), not a reordering or deletion that would cut the chain short before it.
fn an_edited_prev_chain_link_is_entry_modified_there(kind: Kind) {
    let s = imported(kind, 1000);
    let all = chain_entries(s.b(), "acme", 0, u64::MAX).unwrap();
    let (first, at) = (&all[0], all[3].seq);
    s.edit_log_row(at, &format!("prev_chain_link = '{}'", first.chain_link));
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entry-modified".into(), Some(at))]);
    let s = imported(kind, 1000);
    s.edit_log_row(at, "prev_chain_link = NULL");
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entry-modified".into(), Some(at))]);
}

fn an_edited_job_id_or_hlc_is_entry_modified(kind: Kind) {
    let s = imported(kind, 1000);
    s.edit_log_row(6, "t_hlc = '1767614402000:5:node-a'");
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entry-modified".into(), Some(6))]);
}

fn a_deleted_entry_is_entries_deleted_and_a_cut_tail_is_tail_truncated(kind: Kind) {
    let s = imported(kind, 1000);
    s.exec(
        "DELETE FROM scheduler_log WHERE tenant_id = 'acme' AND seq = 5",
        "WITH d AS (DELETE FROM airlock.chain_entry WHERE tenant_id = 'acme' AND seq = 5 RETURNING log_id)
         DELETE FROM scheduler.scheduler_log WHERE id IN (SELECT log_id FROM d)",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entries-deleted".into(), Some(5))]);

    let s2 = imported(kind, 1000);
    s2.exec(
        "DELETE FROM scheduler_log WHERE tenant_id = 'acme' AND seq >= 12",
        "WITH d AS (DELETE FROM airlock.chain_entry WHERE tenant_id = 'acme' AND seq >= 12 RETURNING log_id)
         DELETE FROM scheduler.scheduler_log WHERE id IN (SELECT log_id FROM d)",
    );
    let r = verify_chain(s2.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("tail-truncated".into(), Some(11))]);
    // On PostgreSQL, positions cut while their log rows stay are also those rows, outside the chain.
    if s2.is_pg() {
        let s3 = imported(kind, 1000);
        s3.exec("", "DELETE FROM airlock.chain_entry WHERE tenant_id = 'acme' AND seq >= 12");
        let r = verify_chain(s3.b(), "acme", None).unwrap();
        assert_eq!(
            kinds_at(&r),
            vec![("tail-truncated".into(), Some(11)), ("entry-inserted".into(), None)]
        );
    }
}

fn swapped_entries_are_entries_reordered(kind: Kind) {
    let s = imported(kind, 1000);
    s.exec(
        "UPDATE scheduler_log SET seq = -1 WHERE tenant_id = 'acme' AND seq = 3;
         UPDATE scheduler_log SET seq = 3 WHERE tenant_id = 'acme' AND seq = 4;
         UPDATE scheduler_log SET seq = 4 WHERE tenant_id = 'acme' AND seq = -1;",
        "UPDATE airlock.chain_entry SET seq = -1 WHERE tenant_id = 'acme' AND seq = 3;
         UPDATE airlock.chain_entry SET seq = 3 WHERE tenant_id = 'acme' AND seq = 4;
         UPDATE airlock.chain_entry SET seq = 4 WHERE tenant_id = 'acme' AND seq = -1;",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entries-reordered".into(), Some(3))]);
}

fn an_edited_head_or_snapshot_root_is_reported(kind: Kind) {
    let s = imported(kind, 4);
    s.exec(
        "UPDATE chain_heads SET head_chain_link = (SELECT chain_link FROM scheduler_log WHERE tenant_id = 'acme' AND seq = 9) WHERE tenant_id = 'acme';
         UPDATE batch_snapshot SET merkle_root = '00' || substr(merkle_root, 3) WHERE tenant_id = 'acme' AND from_seq = 4",
        "UPDATE scheduler.chain_heads SET head_chain_link = (SELECT l.chain_link FROM scheduler.scheduler_log l
             JOIN airlock.chain_entry e ON e.log_id = l.id WHERE e.tenant_id = 'acme' AND e.seq = 9)
         WHERE tenant_id = 'acme';
         UPDATE scheduler.batch_snapshot b SET merkle_root = '00' || substr(b.merkle_root, 3)
         FROM airlock.snapshot_range r WHERE r.snapshot_id = b.id AND r.tenant_id = 'acme' AND r.from_seq = 4",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("head-mismatch".into(), Some(9))]);
    let bad: Vec<u64> = r
        .snapshots
        .iter()
        .filter(|s| !s.ok)
        .map(|s| s.from_seq)
        .collect();
    assert_eq!(bad, vec![4]);
}

fn snapshots_prove_inclusion_and_tampered_proofs_fail(kind: Kind) {
    let s = imported(kind, 4);
    let entries = chain_entries(s.b(), "acme", 0, 100).unwrap();
    // Entries 12 and 13 are not covered until an on-demand snapshot.
    let last = &entries[13].job_id;
    assert!(matches!(
        prove(s.b(), "acme", last),
        Err(SchedulerError::NotSnapshotted { seq: 13, .. })
    ));
    let taken = snapshot_now(s.b(), "acme", 4, None).unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].from_seq, taken[0].entry_count), (12, 2));
    assert_eq!(taken[0].snapshot_hlc, entries[13].t_hlc);
    assert!(matches!(
        snapshot_now(s.b(), "acme", 4, None),
        Err(SchedulerError::NothingToSnapshot(_))
    ));
    for e in &entries {
        let p = prove(s.b(), "acme", &e.job_id).unwrap();
        assert_eq!(p.entry.seq, e.seq);
        verify_proof(&p).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        let back: scheduler::InclusionProof = serde_json::from_str(&text).unwrap();
        verify_proof(&back).unwrap();
    }
    let mut p = prove(s.b(), "acme", &entries[5].job_id).unwrap();
    let repl = if p.proof[0].starts_with("00") {
        "11"
    } else {
        "00"
    };
    p.proof[0].replace_range(0..2, repl);
    assert!(verify_proof(&p).is_err());
    let mut p = prove(s.b(), "acme", &entries[5].job_id).unwrap();
    p.entry.payload_digest = "00".repeat(32);
    assert!(verify_proof(&p).is_err());
    let mut p = prove(s.b(), "acme", &entries[5].job_id).unwrap();
    p.leaf_index += 1;
    assert!(verify_proof(&p).is_err());
    let ts = tenants(s.b()).unwrap();
    assert_eq!(ts.len(), 1);
    assert_eq!(ts[0].unsnapshotted, 0);
    assert_eq!(ts[0].length, 14);
}

fn snapshot_roots_match_the_merkle_roots_vector(kind: Kind) {
    // merkle-roots.json is computed over the merge vector's chain links: 1, 2, 3, 5 and 8 leaves.
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(vector("merkle-roots.json")).unwrap())
            .unwrap();
    for case in v.as_array().unwrap() {
        let n = case["leaves"].as_array().unwrap().len() as u64;
        if n == 0 || n > 14 {
            continue;
        }
        let s = imported(kind, n);
        let snaps = rules::snapshots(s.b(), "acme").unwrap();
        assert_eq!(snaps[0].entry_count, n);
        assert_eq!(
            snaps[0].merkle_root,
            case["root"].as_str().unwrap(),
            "{n} leaves"
        );
    }
}

fn lifecycle_actions_extend_the_chain_for_known_jobs_only(kind: Kind) {
    let mut s = imported(kind, 1000);
    let job = chain_entries(s.b(), "acme", 0, 1).unwrap()[0]
        .job_id
        .clone();
    let node = "scheduler-test";
    for action in [
        Action::Dequeue,
        Action::Execute,
        Action::Fail,
        Action::Dequeue,
        Action::Execute,
        Action::Complete,
    ] {
        let r = append_action(s.b(), "acme", &job, action, node, SystemWallClock, 1000).unwrap();
        assert_eq!(r.action, action);
        assert!(r.t_hlc.ends_with(":scheduler-test"));
    }
    let entries = chain_entries(s.b(), "acme", 14, 100).unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| e.action.as_str())
            .collect::<Vec<_>>(),
        ["DEQUEUE", "EXECUTE", "FAIL", "DEQUEUE", "EXECUTE", "COMPLETE"]
    );
    assert!(entries.iter().all(|e| e.provenance.is_none()));
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
    // Completed: no further action.
    let err = append_action(
        s.b(),
        "acme",
        &job,
        Action::Dequeue,
        node,
        SystemWallClock,
        1000,
    )
    .unwrap_err();
    assert!(matches!(err, SchedulerError::BadTransition { .. }), "{err}");
    // Unknown job.
    let err = append_action(
        s.b(),
        "acme",
        "00000000-0000-5000-8000-000000000000",
        Action::Dequeue,
        node,
        SystemWallClock,
        1000,
    )
    .unwrap_err();
    assert!(matches!(err, SchedulerError::UnknownJob { .. }), "{err}");
    assert!(err
        .to_string()
        .contains("00000000-0000-5000-8000-000000000000"));
    // Out of order and ENQUEUE.
    let other = chain_entries(s.b(), "acme", 1, 1).unwrap()[0]
        .job_id
        .clone();
    assert!(matches!(
        append_action(
            s.b(),
            "acme",
            &other,
            Action::Complete,
            node,
            SystemWallClock,
            1000
        ),
        Err(SchedulerError::BadTransition { .. })
    ));
    assert!(matches!(
        append_action(
            s.b(),
            "acme",
            &other,
            Action::Enqueue,
            node,
            SystemWallClock,
            1000
        ),
        Err(SchedulerError::NotLifecycle(_))
    ));
    // Later imports of the same job are duplicates of the chain, whatever its state.
    let r = s.import(&[vector("merge/a.json")], &opts());
    assert_eq!(r.status, airlock::core::import::ImportStatus::NothingToDo);
}

fn signed_snapshots_check_against_trusted_keys(kind: Kind) {
    use airlock::core::trust::{DsseEnvelope, SignatureCheck, SigningKey, TrustSet};
    let s = imported(kind, 1000);
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let signer = |pt: &str, stmt: &[u8]| {
        Ok(DsseEnvelope::sign(&key, pt, std::str::from_utf8(stmt).unwrap()).to_json())
    };
    let snaps = snapshot_now(s.b(), "acme", 1000, Some(&signer)).unwrap();
    assert_eq!(snaps.len(), 1);
    let env = snaps[0].dsse_envelope.as_ref().unwrap();
    assert_eq!(
        env["payloadType"].as_str().unwrap(),
        "application/vnd.airlock.batch-snapshot.v1+json"
    );
    let mut trust = TrustSet::empty();
    assert!(matches!(
        scheduler::check_snapshot_signature(&snaps[0], &trust),
        SignatureCheck::Untrusted { .. }
    ));
    trust.add_key("scheduler", key.verifying_key(), "test");
    assert!(scheduler::check_snapshot_signature(&snaps[0], &trust).is_valid());
    // The proof carries the signed snapshot.
    let job = chain_entries(s.b(), "acme", 3, 1).unwrap()[0]
        .job_id
        .clone();
    let p = prove(s.b(), "acme", &job).unwrap();
    verify_proof(&p).unwrap();
    assert!(scheduler::check_snapshot_signature(&p.snapshot, &trust).is_valid());
    // The acceptance policy: a trusted signature passes with or without the requirement.
    for required in [false, true] {
        let v = check_proof(&p, &trust, required);
        assert!(v.is_accepted() && v.signature.is_valid(), "{v:?}");
    }
    // Signed by a key not trusted: accepted only when no signature is required.
    let nobody = TrustSet::empty();
    assert!(check_proof(&p, &nobody, false).is_accepted());
    assert_eq!(
        check_proof(&p, &nobody, true).outcome,
        Err(ProofRejection::NotTrusted("untrusted"))
    );
    // Unsigned: the same.
    let mut unsigned = p.clone();
    unsigned.snapshot.dsse_envelope = None;
    assert!(check_proof(&unsigned, &trust, false).is_accepted());
    assert_eq!(
        check_proof(&unsigned, &trust, true).outcome,
        Err(ProofRejection::NotTrusted("absent"))
    );
    // A root changed after signing no longer matches the signed statement.
    let mut forged = snaps[0].clone();
    forged.merkle_root = "00".repeat(32);
    assert!(matches!(
        scheduler::check_snapshot_signature(&forged, &trust),
        SignatureCheck::Invalid { .. }
    ));
    // A proof whose path no longer leads to the root is rejected whatever the signature.
    let mut broken = p.clone();
    broken.leaf_hash = "00".repeat(32);
    assert!(matches!(
        check_proof(&broken, &trust, false).outcome,
        Err(ProofRejection::Proof(_))
    ));
    // A proof that disagrees with its own snapshot says which fields do.
    let mut moved = p.clone();
    moved.tree_size += 1;
    moved.tenant_id = "other".into();
    let err = verify_proof(&moved).unwrap_err().to_string();
    assert!(
        err.contains("treeSize") && err.contains("tenantId other") && !err.contains("merkleRoot"),
        "{err}"
    );
    // A signature that does not verify is rejected even when none is required.
    let mut bad_sig = p.clone();
    bad_sig.snapshot.snapshot_hlc = "1:0:x".into();
    assert!(matches!(
        check_proof(&bad_sig, &trust, false).outcome,
        Err(ProofRejection::BadSignature(_))
    ));
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
    s.exec(
        "UPDATE batch_snapshot SET snapshot_hlc = '1:0:x' WHERE tenant_id = 'acme'",
        "UPDATE scheduler.batch_snapshot SET snapshot_hlc = '1:0:x'",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert!(!r.ok && !r.snapshots[0].ok);
}
}

// `chain prove` through the binary: an unknown job gets prove's own answer (nothing to prove,
// where to look), not the lifecycle's; a known one prints its proof.
both_stores! {
fn chain_prove_of_an_unknown_job_says_there_is_nothing_to_prove(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let db = stores::db_arg(kind, dir.path(), "airlock.db");
    let mut store = temp_open(&db);
    store.import(&[vector("merge/a.json")], &opts()).unwrap();
    snapshot_now(&store, "acme", 1000, None).unwrap();
    drop(store);
    let run = |job: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["--db"])
            .arg(&db)
            .args(["chain", "prove", "--tenant", "acme", "--job-id", job])
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("AIRLOCK_NODE_ID", "edge-1")
            .output()
            .unwrap()
    };
    let unknown = "00000000-0000-4000-8000-000000000000";
    let out = run(unknown);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "job {unknown} is not in the chain of tenant \"acme\", so there is no inclusion proof of it"
        )),
        "{err}"
    );
    assert!(err.contains("chain show --tenant acme"), "{err}");
    assert!(!err.contains("lifecycle"), "{err}");
    let known = chain_entries(&temp_open(&db), "acme", 0, 1).unwrap()[0]
        .job_id
        .clone();
    let out = run(&known);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("job {known} is entry 0")));
    // `chain verify` of a tenant the store has no chain for (a mistyped id) is an error, exit 2,
    // not an empty chain that verifies; with --json too (serve answers 404 for it).
    // `chain show` too (it printed "has no scheduler chain" with exit 0, and `{"entries":[],
    // "head":null}`), naming where the tenants with a chain are listed.
    for (cmd, json) in [("verify", false), ("verify", true), ("show", false), ("show", true)] {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"));
        c.args(["--db"])
            .arg(&db)
            .args(["chain", cmd, "--tenant", "acme-typo"])
            .env("XDG_DATA_HOME", dir.path().join("data"));
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("tenant \"acme-typo\" has no scheduler chain"),
            "{err}"
        );
        assert!(err.contains("`airlock chain tenants` lists"), "{cmd}: {err}");
        assert!(out.stdout.is_empty());
    }
}
}

fn temp_open(db: &str) -> airlock::core::store::any::AnyStore {
    airlock::core::store::any::AnyStore::open_db(std::path::Path::new(db)).unwrap()
}

// `chain snapshot --sign` says in its text output that each snapshot was signed and by which key,
// so an operator sees the flag took effect (and with which default key).
#[test]
fn chain_snapshot_sign_names_the_signing_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("airlock.db");
    let mut store = airlock::core::store::any::AnyStore::open_db(&db).unwrap();
    store.import(&[vector("merge/a.json")], &opts()).unwrap();
    drop(store);
    let key = dir.path().join("k.pem");
    let signing = airlock::core::trust::SigningKey::from_bytes(&[9u8; 32]);
    std::fs::write(&key, airlock::core::trust::private_key_pem(&signing)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--db")
        .arg(&db)
        .args(["chain", "snapshot", "--tenant", "acme", "--sign", "--key"])
        .arg(&key)
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env_remove("AIRLOCK_SIGNING_KEY")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = airlock::core::trust::key_id(&signing.verifying_key());
    assert!(text.contains(&format!("signed by key {id}")), "{text}");
}

// SPEC section 8: a snapshot's signed statement is the JCS of exactly `tenantId`, `snapshotHlc`,
// `fromChainLink`, `toChainLink`, `entryCount` and `merkleRoot` (JCS order, entryCount a number),
// signed over DSSE PAE with payloadType `application/vnd.airlock.batch-snapshot.v1+json`.
#[test]
fn the_snapshot_statement_is_the_jcs_of_the_six_keys() {
    use airlock::core::trust::{pae, DsseEnvelope, SigningKey};
    use base64::Engine as _;
    let (from, to, root) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
    let stmt = scheduler::snapshot_statement("acmé\"", "1:0:n", &from, &to, 3, &root);
    assert_eq!(
        stmt,
        format!(
            "{{\"entryCount\":3,\"fromChainLink\":\"{from}\",\"merkleRoot\":\"{root}\",\"snapshotHlc\":\"1:0:n\",\"tenantId\":\"acmé\\\"\",\"toChainLink\":\"{to}\"}}"
        )
    );
    let pt = "application/vnd.airlock.batch-snapshot.v1+json";
    let key = SigningKey::from_bytes(&[3u8; 32]);
    let env = DsseEnvelope::sign(&key, pt, &stmt);
    let sig = airlock::core::trust::sign_statement(&key, pt, &stmt).0;
    assert_eq!(env.signatures[0].sig, sig);
    let raw: [u8; 64] = base64::engine::general_purpose::STANDARD
        .decode(&sig)
        .unwrap()
        .try_into()
        .unwrap();
    key.verifying_key()
        .verify_strict(
            &pae(pt, stmt.as_bytes()),
            &ed25519_dalek::Signature::from_bytes(&raw),
        )
        .unwrap();
}

// The engine's `chain verify` with trusted keys (`verify_existing_chain_trusting`): each snapshot's
// signature is judged by `check_snapshot_signature`, the function every proof check uses, into
// SPEC section 6's signature findings; and a stored envelope whose `signatures` list is empty is
// malformed (SPEC sections 5 and 8: an unsigned snapshot has no envelope), not unsigned.
both_stores! {
fn chain_verify_judges_snapshot_signatures_with_the_proof_checks_function(kind: Kind) {
    use airlock::core::chain::verify::{verify_existing_chain_trusting, SnapshotTrust};
    use airlock::core::trust::{DsseEnvelope, SignatureCheck, SigningKey, TrustSet};
    let s = imported(kind, 1000);
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let signer = |pt: &str, stmt: &[u8]| {
        Ok(DsseEnvelope::sign(&key, pt, std::str::from_utf8(stmt).unwrap()).to_json())
    };
    let snaps = snapshot_now(s.b(), "acme", 1000, Some(&signer)).unwrap();
    let mut trust = TrustSet::empty();
    fn policy(trust: &TrustSet, require_signature: bool) -> SnapshotTrust<'_> {
        SnapshotTrust {
            trust,
            require_signature,
        }
    }
    let r = verify_existing_chain_trusting(s.b(), "acme", None, policy(&trust, false)).unwrap();
    assert!(!r.ok);
    assert_eq!(kinds_at(&r), [("signer-untrusted".to_string(), None)]);
    assert!(r.findings[0].message.contains(&format!("snapshot #{}", snaps[0].id)));
    assert_eq!(r.snapshots[0].signature, Some("untrusted"));
    trust.add_key("scheduler", key.verifying_key(), "test");
    for required in [false, true] {
        let r =
            verify_existing_chain_trusting(s.b(), "acme", None, policy(&trust, required)).unwrap();
        assert!(r.ok, "{:?}", r.findings);
        assert_eq!(r.snapshots[0].signature, Some("pass"));
    }
    // Without trusted keys (serve, the console's background pass) nothing about signatures.
    let plain = verify_chain(s.b(), "acme", None).unwrap();
    assert!(plain.ok && plain.snapshots[0].signature.is_none());

    s.exec(
        "UPDATE batch_snapshot SET dsse_envelope = json_set(dsse_envelope, '$.signatures', json('[]'))",
        "UPDATE scheduler.batch_snapshot SET dsse_envelope = jsonb_set(dsse_envelope, '{signatures}', '[]'::jsonb)",
    );
    let stored = rules::snapshots(s.b(), "acme").unwrap();
    assert_eq!(stored[0].dsse_envelope.as_ref().unwrap()["signatures"], serde_json::json!([]));
    match scheduler::check_snapshot_signature(&stored[0], &trust) {
        SignatureCheck::Invalid { reason, .. } => {
            assert!(reason.contains("\"signatures\" list is empty"), "{reason}")
        }
        other => panic!("an envelope without signatures is malformed, not {other:?}"),
    }
    let plain = verify_chain(s.b(), "acme", None).unwrap();
    assert!(!plain.ok);
    let m = plain.snapshots[0].message.as_deref().unwrap_or_default();
    assert!(m.contains("malformed"), "{m}");
    let r = verify_existing_chain_trusting(s.b(), "acme", None, policy(&trust, false)).unwrap();
    assert_eq!(kinds_at(&r), [("signature-invalid".to_string(), None)]);
    assert_eq!(r.snapshots[0].signature, Some("fail"));
}
}

// `chain verify`'s wording of an edited row or snapshot: an edited action is `entry-modified`
// naming the store's columns, `action` among them (it named the bundle's jobId, tHlc,
// payloadHash, prevLink or link); an action that is not one of the five is `entry-modified` as
// well as `schema-invalid` (as a bad tHlc or jobId is; it was only `schema-invalid`); a signed
// snapshot whose root was edited states the root mismatch, not only that the envelope no longer
// signs it. The same on both stores; with a damaged snapshot envelope on PostgreSQL (JSONB that
// is not an envelope) and a damaged position (`entry_count` 0) the verification goes on.
both_stores! {
fn verify_names_an_edited_action_and_a_root_mismatch(kind: Kind) {
    use airlock::core::trust::{DsseEnvelope, SigningKey};
    let s = imported(kind, 1000);
    s.edit_log_row(5, "action = 'DEQUEUE'");
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("entry-modified".into(), Some(5))]);
    let m = &r.findings[0].message;
    assert!(m.contains("job_id, t_hlc, action, prev_chain_link or chain_link"), "{m}");
    assert!(!m.contains("payloadHash"), "{m}");

    let s = imported(kind, 1000);
    s.edit_log_row(5, "action = 'ENQUEUEX'");
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(
        kinds_at(&r),
        vec![
            ("schema-invalid".into(), Some(5)),
            ("entry-modified".into(), Some(5))
        ]
    );

    let s = imported(kind, 1000);
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let signer = |pt: &str, stmt: &[u8]| {
        Ok(DsseEnvelope::sign(&key, pt, std::str::from_utf8(stmt).unwrap()).to_json())
    };
    snapshot_now(s.b(), "acme", 1000, Some(&signer)).unwrap();
    s.exec(
        "UPDATE batch_snapshot SET merkle_root = '00'",
        "UPDATE scheduler.batch_snapshot SET merkle_root = '00'",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    let m = r.snapshots[0].message.clone().unwrap();
    assert!(!r.ok && !r.snapshots[0].ok);
    assert!(m.contains("Merkle root") && m.contains("not the stored 00"), "{m}");
    assert!(m.contains("does not sign this snapshot's statement"), "{m}");

    s.exec(
        "UPDATE batch_snapshot SET entry_count = 0",
        "UPDATE scheduler.batch_snapshot SET entry_count = 0",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    assert_eq!(kinds_at(&r), vec![("schema-invalid".into(), None)]);
    assert!(r.findings[0].message.contains("batch_snapshot row"), "{:?}", r.findings);
    assert!(r.findings[0].message.contains("entry_count is 0"), "{:?}", r.findings);
    // The row is counted among the snapshots, failed, naming the column.
    assert_eq!(r.snapshots.len(), 1, "{:?}", r.snapshots);
    assert!(!r.snapshots[0].ok);
    assert_eq!(r.snapshots[0].unreadable, Some("entry_count"));
    assert_eq!(tenants(s.b()).unwrap()[0].damaged_snapshots.len(), 1);
}
}

// A stored head link that is not 64 hex digits (a damaged or edited `chain_heads` row) names no
// entry: `chain verify` said "every link and the head verify" (exit 0). It is a `head-mismatch`
// at the last entry, expecting that entry's link; on both stores.
both_stores! {
fn a_head_link_that_is_not_hex_is_a_head_mismatch(kind: Kind) {
    let s = imported(kind, 4);
    let before = verify_chain(s.b(), "acme", None).unwrap();
    assert!(before.ok, "{:?}", before.findings);
    s.exec(
        "UPDATE chain_heads SET head_chain_link = 'zz' WHERE tenant_id = 'acme'",
        "UPDATE scheduler.chain_heads SET head_chain_link = 'zz' WHERE tenant_id = 'acme'",
    );
    let r = verify_chain(s.b(), "acme", None).unwrap();
    let last = before.length - 1;
    assert!(!r.ok);
    assert_eq!(kinds_at(&r), vec![("head-mismatch".into(), Some(last))]);
    assert_eq!(r.findings[0].actual.as_deref(), Some("zz"));
    assert_eq!(r.findings[0].expected, before.head);
    assert!(r.findings[0].message.contains("not a chain link"), "{:?}", r.findings);
}
}
