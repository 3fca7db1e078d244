//! Import and merge: the shared vectors, order independence, conflicts, idempotency, --force,
//! clock skew, atomicity under an injected failure, and usage errors; every store test runs its
//! one body against SQLite and PostgreSQL (`both_stores!`).

mod chain_support;
mod pg_support;
mod stores;

use airlock::core::chain::verify::verify_chain;
use airlock::core::import::{self, BundleStatus, ImportError, ImportStatus, Refusal};
use airlock::core::store::backend::TxKind;
use airlock::core::store::rules::{chain_entries, chain_head};
use chain_support::*;
use serde_json::Value;
use stores::{Kind, TestStore};

fn expected(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(vector(rel)).unwrap()).unwrap()
}

fn permutations(items: &[std::path::PathBuf]) -> Vec<Vec<std::path::PathBuf>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            out.push(p);
        }
    }
    out
}

fn assert_order_independent(kind: Kind, files: &[std::path::PathBuf], batch_size: u64) {
    let mut first: Option<String> = None;
    let perms = permutations(files);
    assert_eq!(perms.len(), (1..=files.len()).product::<usize>());
    for p in perms {
        let mut s = TestStore::new(kind);
        let mut o = opts();
        o.batch_size = batch_size;
        let r = s.import(&p, &o);
        assert_eq!(r.status, ImportStatus::Imported);
        let d = s.dump();
        match &first {
            None => first = Some(d),
            Some(f) => assert_eq!(&d, f, "order {p:?} gave another store"),
        }
    }
}

both_stores! {
fn merge_vector_gives_the_expected_order_duplicates_and_links(kind: Kind) {
    let mut s = TestStore::new(kind);
    let want = expected("merge/expected.json");
    let r = s.import(&merge_inputs(), &opts());
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!(r.tenant_id.as_deref(), Some("acme"));
    let entries = chain_entries(s.b(), "acme", 0, 1000).unwrap();
    let order = want["mergedOrder"].as_array().unwrap();
    assert_eq!(entries.len(), order.len());
    for (e, w) in entries.iter().zip(order) {
        assert_eq!(e.job_id, w["jobId"].as_str().unwrap());
        assert_eq!(e.t_hlc, w["tHlc"].as_str().unwrap());
        assert_eq!(
            e.provenance.as_ref().unwrap().source_node,
            w["nodeId"].as_str().unwrap()
        );
    }
    let chain = want["schedulerChainFromEmptyStore"].as_array().unwrap();
    for (e, w) in entries.iter().zip(chain) {
        assert_eq!(e.action, w["action"].as_str().unwrap());
        assert_eq!(e.prev_chain_link.as_deref(), w["prevChainLink"].as_str());
        assert_eq!(e.chain_link, w["chainLink"].as_str().unwrap());
        assert_eq!(
            hex::encode(airlock::core::chain::payload_hash(&e.payload)),
            w["payloadDigest"].as_str().unwrap()
        );
    }
    let dups = want["duplicatesDropped"].as_array().unwrap();
    assert_eq!(r.duplicates.len(), dups.len());
    for (d, w) in r.duplicates.iter().zip(dups) {
        assert_eq!(d.job_id, w["jobId"].as_str().unwrap());
        assert_eq!(d.t_hlc, w["tHlc"].as_str().unwrap());
        assert_eq!(d.node_id, w["nodeId"].as_str().unwrap());
        assert_eq!(d.against, "input");
    }
    assert!(r.conflicts.is_empty());
    assert_eq!(r.totals.new, 14);
    assert_eq!(
        r.chain.head.as_deref(),
        chain.last().unwrap()["chainLink"].as_str()
    );
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
}

fn dry_run_plans_exactly_what_import_does_and_writes_nothing(kind: Kind) {
    let mut s = TestStore::new(kind);
    let before = s.dump();
    let plan = import::plan_import(s.b(), &merge_inputs(), &opts()).unwrap();
    assert_eq!(plan.status, ImportStatus::Planned);
    assert_eq!(s.dump(), before, "a dry run wrote to the store");
    let planned = plan.new_entries.clone().unwrap();
    let lanes = plan.lanes.clone().unwrap();
    assert_eq!(
        lanes.iter().map(|l| l.node_id.as_str()).collect::<Vec<_>>(),
        ["node-a", "node-b", "node-c"]
    );
    assert_eq!(lanes.iter().map(|l| l.entries.len()).sum::<usize>(), 16);
    let r = s.import(&merge_inputs(), &opts());
    let stored = chain_entries(s.b(), "acme", 0, 1000).unwrap();
    assert_eq!(planned.len(), stored.len());
    for (p, s) in planned.iter().zip(&stored) {
        assert_eq!(
            (p.seq, &p.job_id, &p.chain_link),
            (s.seq, &s.job_id, &s.chain_link)
        );
    }
    assert_eq!(plan.chain.head, r.chain.head);
}



fn every_permutation_of_the_merge_vector_gives_the_same_store(kind: Kind) {
    assert_order_independent(kind, &merge_inputs(), 4);
}

fn every_permutation_with_hlc_ties_and_a_re_exported_bundle_gives_the_same_store(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    // Two bundles with the same node ids and timestamps but other jobs: HLC ties broken by jobId.
    for seed in 0..2 {
        let path = dir.path().join(format!("g{seed}.json"));
        synth_bundle(&path, "perm", 3, 15, 1_767_614_400_000, seed);
        files.push(path);
    }
    // The same logs under another bundle id: every entry is an exact duplicate of g0's.
    let copy = dir.path().join("g0-again.json");
    copy_with_bundle_id(&files[0], &copy, "11111111-1111-4111-8111-111111111111");
    files.push(copy);
    assert_order_independent(kind, &files, 7);
    let mut s = TestStore::new(kind);
    let r = s.import(&files, &opts());
    assert_eq!(r.totals.new, 45 + 45);
    assert_eq!(r.totals.duplicates, 45);
}

fn conflict_vector_is_refused_with_and_without_force_and_changes_nothing(kind: Kind) {
    let mut s = TestStore::new(kind);
    // Some prior content so "unchanged" means something.
    s.import(&merge_inputs(), &opts());
    let before = s.dump();
    let want = expected("conflict/expected.json");
    let files = vec![vector("conflict/d.json"), vector("conflict/e.json")];
    for force in [false, true] {
        let mut o = opts();
        o.force = force;
        let r = s.store.import(&files, &o).unwrap();
        assert_eq!(r.status, ImportStatus::Refused, "force={force}");
        assert_eq!(r.refusal, Some(Refusal::Conflicts));
        assert_eq!(r.conflicts.len(), 1);
        let c = &r.conflicts[0];
        let w = &want["conflicts"][0];
        assert_eq!(c.job_id, w["jobId"].as_str().unwrap());
        let mut got = c.payload_hashes.clone();
        got.sort();
        let mut exp: Vec<String> = w["payloadHashes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        exp.sort();
        assert_eq!(got, exp);
        for s in &c.sides {
            let o = s.origin.as_ref().expect("both sides come from inputs");
            assert!(o.bundle_id.ends_with("00d") || o.bundle_id.ends_with("00e"));
            assert!(s.payload.is_some());
        }
        assert_eq!(s.dump(), before, "a refused import changed the store");
    }
}

fn a_conflict_against_the_existing_chain_shows_the_chain_side(kind: Kind) {
    let mut s = TestStore::new(kind);
    s.import(&[vector("conflict/d.json")], &opts());
    let before = s.dump();
    let r = s.store.import(&[vector("conflict/e.json")], &opts()).unwrap();
    assert_eq!(r.refusal, Some(Refusal::Conflicts));
    let sides = &r.conflicts[0].sides;
    assert_eq!(sides[0].source, "chain");
    assert_eq!(sides[0].chain_seq, Some(0));
    assert_eq!(sides[1].source, "input");
    assert_ne!(sides[0].payload_hash, sides[1].payload_hash);
    assert_eq!(s.dump(), before);
}

fn importing_again_adds_nothing_and_says_so(kind: Kind) {
    let mut s = TestStore::new(kind);
    s.import(&merge_inputs(), &opts());
    let before = s.dump();
    let r = s.import(&merge_inputs(), &opts());
    assert_eq!(r.status, ImportStatus::NothingToDo);
    assert!(r
        .bundles
        .iter()
        .all(|b| b.status == BundleStatus::AlreadyImported && b.already_imported_at.is_some()));
    assert_eq!(s.dump(), before);
    // A bundle given twice in one call is imported once.
    let mut s2 = TestStore::new(kind);
    let a = vector("merge/a.json");
    let r = s2.import(&[a.clone(), a], &opts());
    assert_eq!(r.bundles[1].status, BundleStatus::RepeatedInput);
    assert_eq!(r.totals.new, 6);
    // Entries already in the chain are duplicates of the chain.
    let mut s3 = TestStore::new(kind);
    s3.import(&[vector("merge/a.json")], &opts());
    let r = s3.import(&merge_inputs(), &opts());
    assert_eq!(r.totals.new, 8);
    assert!(r
        .duplicates
        .iter()
        .all(|d| d.against == "input" || d.against == "chain"));
    assert_eq!(r.chain.length_before, 6);
    assert!(verify_chain(s3.b(), "acme", None).unwrap().ok);
}

fn a_tampered_bundle_is_refused_and_force_imports_only_the_verified_prefix(kind: Kind) {
    let mut s = TestStore::new(kind);
    let file = vector("tamper/payload-modified.json");
    let before = s.dump();
    let r = s.store.import(std::slice::from_ref(&file), &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::Refused);
    assert_eq!(r.refusal, Some(Refusal::Findings));
    let kinds: Vec<&str> = r.bundles[0]
        .verification
        .findings
        .iter()
        .map(|f| f.kind.as_str())
        .collect();
    assert!(kinds.contains(&"payload-modified") && kinds.contains(&"manifest-mismatch"));
    assert_eq!(s.dump(), before);

    let mut o = opts();
    o.force = true;
    let r = s.store.import(&[file], &o).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    assert!(!r.dropped.is_empty());
    assert!(r
        .dropped
        .iter()
        .all(|d| d.origin.node_id == "node-a" && d.origin.index >= 2));
    assert_eq!(r.dropped[0].origin.index, 2);
    assert_eq!(r.dropped[0].reason, "payload-modified");
    assert_eq!(r.totals.new + r.totals.dropped, r.totals.entries);
    let entries = chain_entries(s.b(), "acme", 0, 1000).unwrap();
    assert_eq!(entries.len() as u64, r.totals.new);
    assert!(!entries
        .iter()
        .any(|e| r.dropped.iter().any(|d| d.origin.job_id == e.job_id)));
    let rec = s
        .b()
        .begin(TxKind::Read)
        .unwrap()
        .find_import(
            "acme",
            &r.bundles[0].bundle_id,
            &r.bundles[0].manifest_digest,
        )
        .unwrap()
        .unwrap();
    assert!(rec.forced);
    assert_eq!(rec.dropped, r.totals.dropped);
}

fn entries_from_the_future_are_clock_skew_findings(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let now = airlock::core::hlc::unix_ms_now();
    let path = dir.path().join("future.json");
    synth_bundle(&path, "skew", 1, 6, now + 3_600_000, 0);
    let mut s = TestStore::new(kind);
    let r = s.store.import(std::slice::from_ref(&path), &opts()).unwrap();
    assert_eq!(r.refusal, Some(Refusal::Findings));
    assert!(r.bundles[0]
        .verification
        .findings
        .iter()
        .any(|f| f.kind.as_str() == "clock-skew" && f.index == Some(0)));
    let mut o = opts();
    o.force = true;
    let r = s.store.import(&[path], &o).unwrap();
    assert_eq!(r.totals.new, 0);
    assert_eq!(r.totals.dropped, 6);
    assert!(r.dropped.iter().all(|d| d.reason == "clock-skew"));
}

fn the_local_clock_witnesses_the_largest_imported_hlc(kind: Kind) {
    let mut s = TestStore::new(kind);
    s.import(&merge_inputs(), &opts());
    let last = s
        .b()
        .begin(TxKind::Read)
        .unwrap()
        .load_clock_state()
        .unwrap()
        .unwrap();
    assert!(last > (1767614405000, 1));
    let mut clock =
        airlock::core::store::rules::clock(s.b(), "importer-test", airlock::core::hlc::SystemWallClock)
            .unwrap();
    assert!(clock.tick().physical >= 1767614405000);
}

fn an_import_failing_half_way_leaves_the_store_as_before(kind: Kind) {
    let mut s = TestStore::new(kind);
    s.import(&[vector("merge/a.json")], &opts());
    let before = s.dump();
    // Fail on the third chain row written by the next import.
    s.exec(
        "CREATE TRIGGER fail_half_way AFTER INSERT ON scheduler_log WHEN NEW.seq > 8
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        "CREATE FUNCTION airlock.fail_half_way() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.seq > 8 THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER fail_half_way AFTER INSERT ON airlock.chain_entry
         FOR EACH ROW EXECUTE FUNCTION airlock.fail_half_way();",
    );
    let err = s.store.import(&merge_inputs(), &opts()).unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert_eq!(s.dump(), before);
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
    s.exec(
        "DROP TRIGGER fail_half_way",
        "DROP TRIGGER fail_half_way ON airlock.chain_entry",
    );
    let r = s.import(&merge_inputs(), &opts());
    assert_eq!(r.chain.length, 14);
    assert!(verify_chain(s.b(), "acme", None).unwrap().ok);
}

fn mixed_tenants_and_unreadable_files_are_usage_errors_that_change_nothing(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-tenant.json");
    let text = std::fs::read_to_string(vector("merge/b.json")).unwrap();
    std::fs::write(
        &other,
        text.replacen("\"tenantId\": \"acme\"", "\"tenantId\": \"globex\"", 1),
    )
    .unwrap();
    let mut s = TestStore::new(kind);
    let before = s.dump();
    let err = s.store.import(&[vector("merge/a.json"), other], &opts()).unwrap_err();
    assert!(matches!(err, ImportError::MixedTenants(_)), "{err}");
    assert!(err.to_string().contains("globex"));

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, &text[..text.len() / 2]).unwrap();
    let err = s
        .store
        .import(&[vector("merge/a.json"), broken.clone()], &opts())
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("broken.json") && msg.contains("byte"), "{msg}");

    let missing = dir.path().join("missing.json");
    let err = s.store.import(&[missing], &opts()).unwrap_err();
    assert!(err.to_string().contains("missing.json"));
    assert_eq!(s.dump(), before);
}
}

#[test]
fn a_rollback_journal_import_writes_what_a_wal_import_writes_and_leaves_wal_mode() {
    let mode = |s: &airlock::core::store::Store| -> String {
        s.conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap()
    };
    let mut wal = opts();
    wal.bulk_journal_min_bytes = u64::MAX;
    let mut bulk = opts();
    bulk.bulk_journal_min_bytes = 0;
    let (_d1, _p1, mut a) = temp_store();
    let (_d2, _p2, mut b) = temp_store();
    for files in [vec![vector("merge/a.json")], merge_inputs()] {
        import_files(&mut a, &files, &wal);
        import_files(&mut b, &files, &bulk);
        assert_eq!(dump(&a), dump(&b));
        assert_eq!(mode(&b), "wal");
    }
    assert!(verify_chain(&b, "acme", None).unwrap().ok);
    // With a second connection open, the import stays in WAL mode (and still succeeds).
    let (_d3, p3, mut c) = temp_store();
    let other = airlock::core::store::Store::open(&p3).unwrap();
    import_files(&mut c, &merge_inputs(), &bulk);
    assert_eq!(mode(&other), "wal");
    assert_eq!(chain_head(&other, "acme").unwrap().unwrap().length, 14);
}
