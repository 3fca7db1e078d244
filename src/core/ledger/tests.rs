//! Fold rules: the SPEC 12 vector (from its event list), each conflict rule, and the order
//! independence property over permutations, WAL splits and merges.

use super::*;
use crate::core::hlc::Hlc;
use proptest::prelude::*;
use serde_json::{json, Value};

fn vector() -> Value {
    let text = std::fs::read_to_string("../shared/vectors/ledger/expected.json").unwrap();
    serde_json::from_str(&text).unwrap()
}

fn records_of(events: &[Value], source: &str) -> Vec<LedgerRecord> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let event = Event::from_json(&e.to_string()).unwrap();
            let at = Occurrence {
                source: source.into(),
                lsn: i as u64 + 1,
            };
            LedgerRecord::new(event, at)
        })
        .collect()
}

fn fold_all(records: impl IntoIterator<Item = LedgerRecord>) -> Fold {
    let mut f = Fold::default();
    for r in records {
        f.apply(r);
    }
    f
}

#[test]
fn vector_event_list_folds_to_the_expected_views() {
    let v = vector();
    let events = v["events"].as_array().unwrap();
    let fold = fold_all(records_of(events, "all"));
    let got = serde_json::to_value(fold.views()).unwrap();
    assert_eq!(got["jobs"], v["jobs"]);
    let mut reversed = records_of(events, "all");
    reversed.reverse();
    assert_eq!(fold_all(reversed).views(), fold.views());
}

#[test]
fn vector_job_id_format() {
    let v = vector();
    let f = &v["jobIdFormat"];
    let id = JobId::parse(f["text"].as_str().unwrap()).unwrap();
    assert_eq!(serde_json::to_value(id.parts()).unwrap(), *f);
}

#[test]
fn vector_conflicts_name_winner_losers_and_rule() {
    let v = vector();
    let fold = fold_all(records_of(v["events"].as_array().unwrap(), "all"));
    let got: Vec<(String, String, Rule, String, Vec<String>)> = fold
        .decisions()
        .into_iter()
        .map(|d| {
            let losers = d.losers.iter().map(|l| l.event.hlc.clone()).collect();
            (d.job_id, d.subject, d.rule, d.winner.hlc, losers)
        })
        .collect();
    let want = vec![
        (
            "euw1-1767614400050-gate7-00001",
            "creation",
            Rule::Fence,
            "1767614400051:0:gate-b",
            vec!["1767614400050:0:gate-b"],
        ),
        (
            "use1-1767614400000-gate42-00001",
            "outcome",
            Rule::CancelWins,
            "1767614400020:0:gate-b",
            vec!["1767614400045:0:gate-b"],
        ),
        (
            "use1-1767614400005-gate42-00003",
            "outcome",
            Rule::Hlc,
            "1767614400031:0:gate-b",
            vec!["1767614400030:0:gate-b"],
        ),
    ];
    let want: Vec<_> = want
        .into_iter()
        .map(|(j, s, r, w, l)| {
            let l = l.into_iter().map(String::from).collect();
            (j.to_string(), s.to_string(), r, w.to_string(), l)
        })
        .collect();
    assert_eq!(got, want);
}

const JOB: &str = "use1-1-g1-00001";

fn ev(v: Value) -> Event {
    Event::from_json(&v.to_string()).unwrap()
}

fn rec(v: Value, source: &str, lsn: u64) -> LedgerRecord {
    let at = Occurrence {
        source: source.into(),
        lsn,
    };
    LedgerRecord::new(ev(v), at)
}

fn created(hlc: &str, fence: u64, dcs: &[&str]) -> Value {
    json!({"type": "JobCreated", "job_id": JOB, "spec": {}, "assigned_dcs": dcs, "fence_token": fence, "hlc": hlc})
}

fn accepted(hlc: &str, dc: &str, fence: u64) -> Value {
    json!({"type": "JobAccepted", "job_id": JOB, "dc_id": dc, "worker_count": 1, "fence_token": fence, "hlc": hlc})
}

fn view_of(values: Vec<Value>) -> (JobView, Vec<Decision>) {
    let fold = fold_all(
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| rec(v, "w", i as u64 + 1)),
    );
    let r = fold.resolution(JOB).unwrap();
    (r.view, r.decisions)
}

#[test]
fn stale_acceptance_does_not_count_and_is_explained() {
    let (view, decisions) = view_of(vec![
        created("1:0:g", 1, &["a", "b"]),
        created("2:0:g", 2, &["a", "b"]),
        accepted("3:0:g", "a", 1),
        accepted("4:0:g", "b", 2),
    ]);
    assert_eq!(view.status, Status::Accepted);
    assert_eq!(view.fence_token, Some(2));
    assert_eq!(view.accepted_dcs, vec!["b"]);
    let stale = decisions
        .iter()
        .find(|d| d.subject == "acceptance a")
        .unwrap();
    assert_eq!(
        (stale.rule, stale.winner.hlc.as_str()),
        (Rule::Fence, "2:0:g")
    );
    assert_eq!(stale.losers[0].event.hlc, "3:0:g");
}

#[test]
fn higher_fence_beats_later_hlc_between_two_creations() {
    let (view, decisions) = view_of(vec![
        created("1:0:g", 5, &["a"]),
        created("9:0:g", 2, &["b"]),
    ]);
    assert_eq!(
        (view.fence_token, view.assigned_dcs),
        (Some(5), vec!["a".to_string()])
    );
    assert_eq!(decisions[0].rule, Rule::Fence);
}

#[test]
fn cancelling_until_every_assigned_dc_acknowledged() {
    let cancel = json!({"type": "JobCancellationRequested", "job_id": JOB, "reason": "r", "requestor": "ops", "fence_token": 1, "hlc": "5:0:g"});
    let ack = |hlc: &str, dc: &str| json!({"type": "JobCancellationAcked", "job_id": JOB, "dc_id": dc, "workflows_cancelled": 0, "hlc": hlc});
    let base = vec![created("1:0:g", 1, &["a", "b"]), cancel];
    let (view, _) = view_of([base.clone(), vec![ack("6:0:g", "a")]].concat());
    assert_eq!(
        (view.status, view.decided_by.as_deref()),
        (Status::Cancelling, Some("5:0:g"))
    );
    let (view, _) = view_of([base, vec![ack("6:0:g", "a"), ack("7:0:g", "b")]].concat());
    assert_eq!(view.status, Status::Cancelled);
    assert_eq!(view.cancel_acked_dcs, vec!["a", "b"]);
}

#[test]
fn equal_hlc_distinct_events_are_a_tie_break_and_duplicates_are_one_event() {
    let c = created("1:0:g", 1, &["a"]);
    let other = created("1:0:g", 1, &["b"]);
    let fold = fold_all([rec(c.clone(), "y", 9), rec(c, "x", 4), rec(other, "x", 5)]);
    let r = fold.resolution(JOB).unwrap();
    assert_eq!(r.decisions.len(), 1);
    assert_eq!(r.decisions[0].rule, Rule::TieBreak);
    let all: Vec<(String, u64)> = std::iter::once(&r.decisions[0].winner)
        .chain(r.decisions[0].losers.iter().map(|l| &l.event))
        .map(|e| (e.source.clone(), e.lsn))
        .collect();
    assert!(all.contains(&("x".to_string(), 4)), "{all:?}");
    assert_eq!(all.len(), 2);
}

#[test]
fn progress_is_the_latest_report_per_dc() {
    let p = |hlc: &str, done: u64| json!({"type": "JobProgressReported", "job_id": JOB, "dc_id": "a", "completed": done, "failed": 0, "hlc": hlc});
    let (view, _) = view_of(vec![
        created("1:0:g", 1, &["a"]),
        p("3:0:g", 30),
        p("2:0:g", 20),
    ]);
    assert_eq!(view.status, Status::Running);
    assert_eq!(view.progress["a"].completed, 30);
}

/// Random events over few jobs, DCs, nodes and clock values, so that every rule and every kind of
/// collision (equal HLCs, equal fence tokens, duplicates) happens.
fn arb_event() -> impl Strategy<Value = Value> {
    let job = prop_oneof![
        Just("r-1-g-00001"),
        Just("r-1-g-00002"),
        Just("r-2-h-00001")
    ];
    let dc = prop_oneof![Just("a"), Just("b"), Just("c")];
    let hlc = (1u64..6, 0u32..2, prop_oneof![Just("n1"), Just("n2")])
        .prop_map(|(p, l, n)| Hlc::new(p, l, n).to_string());
    (0u8..8, job, dc, hlc, 1u64..4, 0u64..3).prop_map(|(kind, job, dc, hlc, fence, n)| {
        let dcs: Vec<&str> = ["a", "b", "c"][..(n as usize + 1)].to_vec();
        match kind {
            0 => json!({"type": "JobCreated", "job_id": job, "spec": {"n": n}, "assigned_dcs": dcs, "fence_token": fence, "hlc": hlc}),
            1 => json!({"type": "JobAccepted", "job_id": job, "dc_id": dc, "worker_count": n, "fence_token": fence, "hlc": hlc}),
            2 => json!({"type": "JobProgressReported", "job_id": job, "dc_id": dc, "completed": n, "failed": fence, "hlc": hlc}),
            3 => json!({"type": "JobCancellationRequested", "job_id": job, "reason": "r", "requestor": "o", "fence_token": fence, "hlc": hlc}),
            4 => json!({"type": "JobCancellationAcked", "job_id": job, "dc_id": dc, "workflows_cancelled": n, "hlc": hlc}),
            5 => json!({"type": "JobCompleted", "job_id": job, "final_status": "passed", "aggregate_metrics": {"n": n}, "hlc": hlc}),
            6 => json!({"type": "JobFailed", "job_id": job, "error": "e", "failed_dc": dc, "hlc": hlc}),
            _ => json!({"type": "JobTimedOut", "job_id": job, "timeout_type": "global", "last_progress_hlc": null, "hlc": hlc}),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Events spread over WALs in any way, read in any order, folded per WAL and merged in any
    /// order: the same views and the same decisions (winners, losers, rules, occurrences).
    #[test]
    fn fold_is_independent_of_order_and_of_wal_split(
        events in prop::collection::vec((arb_event(), 0usize..4), 1..40),
        seed in any::<u64>(),
    ) {
        use rand::{seq::SliceRandom, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let recs: Vec<LedgerRecord> = events
            .iter()
            .enumerate()
            .map(|(i, (v, wal))| rec(v.clone(), &format!("w{wal}"), i as u64 + 1))
            .collect();
        let reference = fold_all(recs.clone());
        let mut shuffled = recs.clone();
        shuffled.shuffle(&mut rng);
        let one_pass = fold_all(shuffled.clone());
        prop_assert_eq!(one_pass.views(), reference.views());
        prop_assert_eq!(one_pass.decisions(), reference.decisions());
        // Per-WAL folds merged in a random order, each WAL read in its own shuffled order.
        let mut parts: Vec<Fold> = (0..4)
            .map(|w| fold_all(shuffled.iter().filter(|r| *r.at.source == *format!("w{w}")).cloned()))
            .collect();
        parts.shuffle(&mut rng);
        let mut merged = Fold::default();
        for p in parts {
            merged.merge(p);
        }
        prop_assert_eq!(merged.views(), reference.views());
        prop_assert_eq!(merged.decisions(), reference.decisions());
    }
}

fn vector_paths() -> Vec<std::path::PathBuf> {
    ["gate-a.alwl", "gate-b.alwl"]
        .iter()
        .map(|n| std::path::Path::new("../shared/vectors/ledger").join(n))
        .collect()
}

#[test]
fn vector_wals_decode_to_the_event_list_and_fold_to_the_views_exactly() {
    let v = vector();
    let mut decoded = Vec::new();
    for p in vector_paths() {
        let reader = crate::core::wal::WalReader::open(&p).unwrap();
        let rec = crate::core::wal::recovery::scan(reader, |f| {
            if let Some(e) = source::decode_frame(f).unwrap() {
                decoded.push(serde_json::to_value(e).unwrap());
            }
        })
        .unwrap();
        assert_eq!(rec.outcome, crate::core::wal::Outcome::Clean);
    }
    assert_eq!(Value::Array(decoded), v["events"]);
    let mut paths = vector_paths();
    let fold = parallel::fold_ledgers(&paths).unwrap();
    assert!(fold.findings().is_empty());
    let got = serde_json::to_value(fold.views()).unwrap();
    assert_eq!(got, json!({"jobs": v["jobs"]}));
    paths.reverse();
    assert_eq!(
        parallel::fold_ledgers(&paths).unwrap().views(),
        fold.views()
    );
}

#[test]
fn a_bad_event_is_a_finding_with_its_lsn_not_a_crash() {
    use crate::core::wal::{encode_frame_into, file_header, FrameState, FrameType, WalHlc};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.alwl");
    let mut bytes = file_header().to_vec();
    let good = ev(created("1:0:g", 1, &["a"]));
    let h = |p, l| WalHlc::from_hlc(&Hlc::new(p, l, "g")).unwrap();
    let ty = |c| FrameType::from_byte(c).unwrap();
    encode_frame_into(
        &mut bytes,
        1,
        h(1, 0),
        FrameState::Pending,
        ty(1),
        &[good.payload_text().as_bytes()],
    );
    // LSN 2: an HLC text that disagrees with the header; LSN 3: a job id of the wrong shape.
    encode_frame_into(
        &mut bytes,
        2,
        h(2, 0),
        FrameState::Pending,
        ty(1),
        &[good.payload_text().as_bytes()],
    );
    let bad_id = good
        .payload_text()
        .replace("00001", "1")
        .replace("1:0:g", "3:0:g");
    encode_frame_into(
        &mut bytes,
        3,
        h(3, 0),
        FrameState::Pending,
        ty(1),
        &[bad_id.as_bytes()],
    );
    bytes.extend_from_slice(&[0xff; 7]); // a torn tail
    std::fs::write(&path, &bytes).unwrap();
    let fold = source::fold_ledger(&path, "bad").unwrap();
    assert_eq!(fold.views().jobs.len(), 1);
    let f = fold.findings();
    let lsns: Vec<Option<u64>> = f.iter().map(|x| x.lsn).collect();
    assert_eq!(lsns, vec![Some(2), Some(3), Some(4)], "{f:?}");
    assert!(f[0].message.contains("does not agree"), "{}", f[0].message);
    assert!(f[1].message.contains("sequence"), "{}", f[1].message);
    assert!(f[2].message.contains("torn-tail"), "{}", f[2].message);
}

/// A fold keeps the first [`KEPT_FINDINGS`] findings by (source, LSN) and counts the rest: the
/// same ones whatever the order they are read in or the folds they are merged from.
#[test]
fn findings_past_the_kept_ones_are_counted_and_the_kept_ones_do_not_depend_on_order() {
    use super::fold::KEPT_FINDINGS;
    let finding = |lsn: u64| Finding {
        source: "gate-x.alwl".into(),
        lsn: Some(lsn),
        offset: Some(8 + lsn * 100),
        message: "not a ledger event".into(),
        torn_tail: false,
    };
    let n = KEPT_FINDINGS as u64 + 37;
    let mut forward = Fold::default();
    (1..=n).for_each(|l| forward.add_finding(finding(l)));
    let mut backward = Fold::default();
    (1..=n).rev().for_each(|l| backward.add_finding(finding(l)));
    let (mut odd, mut even) = (Fold::default(), Fold::default());
    for l in 1..=n {
        if l % 2 == 1 { &mut odd } else { &mut even }.add_finding(finding(l));
    }
    even.merge(odd);
    for fold in [&forward, &backward, &even] {
        let kept = fold.findings();
        assert_eq!(kept.len(), KEPT_FINDINGS);
        assert_eq!(kept.first(), Some(&finding(1)));
        assert_eq!(kept.last(), Some(&finding(KEPT_FINDINGS as u64)));
        assert_eq!(fold.findings_not_kept(), 37);
    }
    // A checkpoint keeps the count.
    let state = super::checkpoint::FoldState::of(&forward, "gate-x.alwl");
    assert_eq!(state.findings_not_kept, 37);
    let restored = state.into_fold("gate-x.alwl");
    assert_eq!(restored.findings_not_kept(), 37);
    assert_eq!(restored.findings(), forward.findings());
}
