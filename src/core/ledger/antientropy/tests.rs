//! Anti-entropy: bounded, counted exchanges; exact first divergent LSN and missing sets; sync
//! converges to the union and never overwrites a divergent frame.

use super::*;
use crate::core::hlc::Hlc;
use crate::core::ledger::{source::fold_ledger, Event};
use crate::core::wal::{encode_frame_into, file_header, FrameState, FrameType, WalHlc};
use proptest::prelude::*;
use std::path::Path;

/// Frame `i` (LSN i + 1) of node `node`'s log; `variant` changes the event, not its LSN or HLC.
pub(super) fn frame(i: u64, node: &str, variant: u64) -> Vec<u8> {
    let hlc = Hlc::new(1_700_000_000_000 + i, 0, node);
    let job = format!("use1-1700000000000-{}-{:05}", "gate1", i % 1000);
    // JCS text of the event's fields (keys in order), written directly: this runs 10^5 times.
    let payload = format!(
        r#"{{"completed":{},"dc_id":"use1","failed":0,"hlc":"{hlc}","job_id":"{job}"}}"#,
        i + variant * 1_000_000
    );
    let mut out = Vec::new();
    let ty = FrameType::from_byte(3).unwrap();
    let wh = WalHlc::from_hlc(&hlc).unwrap();
    encode_frame_into(
        &mut out,
        i + 1,
        wh,
        FrameState::Pending,
        ty,
        &[payload.as_bytes()],
    );
    out
}

/// Writes a log of `n` frames; `change` maps an index to a variant (0 = the common frame).
pub(super) fn write_log(path: &Path, n: u64, change: impl Fn(u64) -> u64) {
    let mut bytes = file_header().to_vec();
    for i in 0..n {
        bytes.extend_from_slice(&frame(i, "gate-a", change(i)));
    }
    std::fs::write(path, bytes).unwrap();
}

pub(super) fn lsns(v: &[FrameInfo]) -> Vec<u64> {
    v.iter().map(|f| f.lsn).collect()
}

#[test]
fn identical_ledgers_need_one_exchange() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.alwl"), d.path().join("b.alwl"));
    write_log(&a, 300, |_| 0);
    write_log(&b, 300, |_| 0);
    let r = between_files(&a, &b, false).unwrap();
    assert_eq!((r.first_divergent_lsn, r.exchanges), (None, 1));
    assert!(r.missing_in_a.is_empty() && r.missing_in_b.is_empty());
}

#[test]
fn one_differing_frame_among_66000_takes_four_exchanges() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.alwl"), d.path().join("b.alwl"));
    let n = 66_000; // more than 256^2 frames: a three-level search
    write_log(&a, n, |_| 0);
    write_log(&b, n, |i| u64::from(i == 40_000));
    let r = between_files(&a, &b, false).unwrap();
    assert_eq!(r.first_divergent_lsn, Some(40_001));
    assert_eq!(r.exchanges, 4, "{r:?}");
    // Divergent, not missing: both hold LSN 40,001.
    assert!(
        r.missing_in_a.is_empty() && r.missing_in_b.is_empty(),
        "{r:?}"
    );
    assert_eq!(r.divergent, vec![40_001]);
}

#[test]
fn test_frames_are_valid_events() {
    let f = frame(7, "gate-a", 0);
    let payload = &f[crate::core::wal::FRAME_HEADER_LEN..];
    let e = Event::from_payload(crate::core::ledger::EventType::JobProgressReported, payload);
    assert_eq!(e.unwrap().payload_text().as_bytes(), payload);
}

#[test]
fn logs_of_different_nodes_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.alwl"), d.path().join("b.alwl"));
    write_log(&a, 3, |_| 0);
    let mut bytes = file_header().to_vec();
    bytes.extend_from_slice(&frame(0, "gate-b", 0));
    std::fs::write(&b, bytes).unwrap();
    let e = between_files(&a, &b, false).unwrap_err().to_string();
    assert!(e.contains("copies of one node's log"), "{e}");
}

#[test]
fn a_compacted_replica_is_compared_above_its_floor() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.alwl"), d.path().join("b.alwl"));
    write_log(&a, 600, |_| 0);
    let mut bytes = file_header().to_vec();
    for i in 100..650 {
        bytes.extend_from_slice(&frame(i, "gate-a", 0));
    }
    std::fs::write(&b, bytes).unwrap();
    let r = between_files(&a, &b, true).unwrap();
    assert_eq!(r.first_divergent_lsn, Some(601));
    assert_eq!(lsns(&r.missing_in_a), (601..=650).collect::<Vec<_>>());
    assert_eq!(r.copied_to_a, (601..=650).collect::<Vec<_>>());
    assert!(r.missing_in_b.is_empty());
    assert!(between_files(&a, &b, false).unwrap().in_sync());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// Two copies of a log cut at random lengths (either side ahead, across 256-frame blocks), with
    /// or without a divergent frame: diff names exactly the missing frames and the first divergent
    /// LSN; sync copies the missing ones unless the logs diverged first, and then both fold alike.
    #[test]
    fn diff_and_sync_of_random_divergence(
        len_a in 0u64..700, len_b in 0u64..700, diverge in prop::option::of(0u64..700),
    ) {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.alwl"), d.path().join("b.alwl"));
        let common = len_a.min(len_b);
        let diverge = diverge.filter(|k| *k < common);
        write_log(&a, len_a, |_| 0);
        write_log(&b, len_b, |i| u64::from(Some(i) == diverge));
        let r = between_files(&a, &b, false).unwrap();
        let first = match diverge {
            Some(k) => Some(k + 1),
            None if len_a != len_b => Some(common + 1),
            None => None,
        };
        prop_assert_eq!(r.first_divergent_lsn, first);
        // Missing: the LSNs one side holds and the other not; the divergent one only there.
        let extra = |n: u64| ((common + 1)..=n).collect::<Vec<u64>>();
        prop_assert_eq!(lsns(&r.missing_in_a), extra(len_b));
        prop_assert_eq!(lsns(&r.missing_in_b), extra(len_a));
        prop_assert_eq!(r.divergent.clone(), diverge.map(|k| k + 1).into_iter().collect::<Vec<_>>());
        prop_assert!(r.exchanges <= 5, "{} exchanges", r.exchanges);
        let before_a = std::fs::read(&a).ok();
        let s = between_files(&a, &b, true).unwrap();
        if diverge.is_some() {
            prop_assert!(s.copied_to_a.is_empty() && s.copied_to_b.is_empty());
            prop_assert_eq!(std::fs::read(&a).ok(), before_a);
        } else {
            let after = between_files(&a, &b, false).unwrap();
            prop_assert!(after.in_sync(), "{:?}", after);
            prop_assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            if len_a.max(len_b) > 0 {
                let fa = fold_ledger(&a, "x").unwrap();
                let fb = fold_ledger(&b, "x").unwrap();
                prop_assert_eq!(fa.views(), fb.views());
                prop_assert_eq!(fa.events_applied(), len_a.max(len_b));
            }
        }
    }
}
