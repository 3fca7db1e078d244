//! Several WALs of one node given to one fold: copies and prefixes of one log fold each event once;
//! copies that hold different frames at one LSN are refused, naming both files, the node and the
//! first differing LSN (what `ledger diff` reports as the first divergent LSN).

use super::append::{drill_event, LedgerLog};
use super::append_tests::opts;
use super::parallel::fold_ledgers;
use super::source::fold_ledger;
use std::path::{Path, PathBuf};

/// Appends drill events `events` to the ledger at `path` (node `node`, created if missing).
fn append(path: &Path, node: &str, events: impl IntoIterator<Item = u64>) {
    let mut log = LedgerLog::open(path, Some(node), opts()).expect("open");
    for i in events {
        log.append(&drill_event(i)).expect("append");
    }
    log.close().expect("close");
}

/// A ledger of node `gate-x` with drill events 0..n.
fn ledger(dir: &Path, name: &str, n: u64) -> PathBuf {
    let path = dir.join(name);
    append(&path, "gate-x", 0..n);
    path
}

fn copy(from: &Path, to: PathBuf) -> PathBuf {
    std::fs::copy(from, &to).expect("copy");
    to
}

#[test]
fn an_exact_copy_of_a_wal_folds_each_event_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = ledger(d.path(), "a.alwl", 12);
    let b = copy(&a, d.path().join("b.alwl"));
    let alone = fold_ledgers(std::slice::from_ref(&a)).expect("fold");
    assert_eq!(alone.events_applied(), 12);
    for paths in [
        vec![a.clone(), b.clone()],
        vec![b.clone(), a.clone()],
        vec![a.clone(), a.clone()],
    ] {
        let both = fold_ledgers(&paths).expect("copies of one log fold");
        assert_eq!(both.events_applied(), 12, "{paths:?}: each event once");
        assert_eq!(both.views(), alone.views(), "{paths:?}");
        assert!(both.findings().is_empty(), "{:?}", both.findings());
    }
    // The decisions name the first copy by path whatever the order.
    let ab = fold_ledgers(&[a.clone(), b.clone()]).expect("fold");
    let ba = fold_ledgers(&[b, a]).expect("fold");
    assert_eq!(ab.decisions(), ba.decisions());
}

#[test]
fn a_prefix_copy_folds_each_event_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let short = ledger(d.path(), "short.alwl", 7);
    let long = copy(&short, d.path().join("long.alwl"));
    append(&long, "gate-x", 7..15);
    let alone = fold_ledger(&long, "long").expect("fold");
    for paths in [
        vec![short.clone(), long.clone()],
        vec![long.clone(), short.clone()],
    ] {
        let both = fold_ledgers(&paths).expect("a prefix folds");
        assert_eq!(both.events_applied(), 15, "{paths:?}: each event once");
        assert_eq!(both.views(), alone.views(), "{paths:?}");
    }
}

/// `a` and `b` share drill events 0..4 (LSN 1..=4), then hold different events at LSN 5.
fn divergent_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let a = ledger(dir, "a.alwl", 4);
    let b = copy(&a, dir.join("b.alwl"));
    append(&a, "gate-x", 4..9);
    // Another job's completion at LSN 5: a different payload whatever the clock says.
    append(&b, "gate-x", [10, 11]);
    (a, b)
}

#[test]
fn copies_that_differ_at_an_lsn_are_refused_naming_both_files_the_node_and_the_lsn() {
    let d = tempfile::tempdir().expect("tempdir");
    let (a, b) = divergent_pair(d.path());
    // What anti-entropy says about the same pair.
    let diff = super::antientropy::between_files(&a, &b, false).expect("diff");
    assert_eq!(diff.first_divergent_lsn, Some(5));
    for paths in [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]] {
        let Err(e) = fold_ledgers(&paths) else {
            panic!("{paths:?}: divergent copies were folded");
        };
        let msg = e.to_string();
        for want in [
            a.display().to_string(),
            b.display().to_string(),
            "gate-x".into(),
            "LSN 5".into(),
            "airlock ledger diff".into(),
        ] {
            assert!(msg.contains(&want), "{paths:?}: {want:?} not in {msg}");
        }
    }
}

#[test]
fn a_prefix_does_not_hide_two_copies_that_diverge_after_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let (a, b) = divergent_pair(d.path());
    // A copy of the first three frames: a prefix of both, so only a and b disagree.
    // Its name sorts first: the copy the others are compared with.
    let p = d.path().join("0-prefix.alwl");
    let kept = std::fs::read(&a).expect("read");
    std::fs::write(&p, &kept[..third_frame_end(&kept)]).expect("write");
    let Err(e) = fold_ledgers(&[p.clone(), a.clone(), b.clone()]) else {
        panic!("divergent copies were folded");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("LSN 5") && msg.contains(&a.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains(&b.display().to_string()), "{msg}");
    assert!(!msg.contains(&p.display().to_string()), "{msg}");
}

/// The byte offset just past the third frame of a WAL.
fn third_frame_end(bytes: &[u8]) -> usize {
    let mut at = crate::core::wal::FILE_HEADER_LEN as usize;
    for _ in 0..3 {
        let len = u32::from_be_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        at += len as usize;
    }
    at
}

#[test]
fn distinct_nodes_are_not_compared() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = ledger(d.path(), "a.alwl", 6);
    let b = d.path().join("b.alwl");
    // Node gate-y holds other frames at the same LSNs: another node's log, not a copy.
    append(&b, "gate-y", [10, 11, 12]);
    let fold = fold_ledgers(&[a, b]).expect("two nodes fold");
    assert_eq!(fold.events_applied(), 9);
}

/// A copy whose frame carries a later state (as compaction writes it) is the same frame; one
/// whose frame carries another HLC is not. `basic.alwl`'s LSN 3 is at byte offset 363.
#[test]
fn a_frame_with_a_later_state_byte_is_the_same_frame_another_hlc_is_not() {
    use crate::core::wal::frame::{edit_frame, set_physical};
    let d = tempfile::tempdir().expect("tempdir");
    let basic = std::fs::read("../shared/vectors/wal/basic.alwl").expect("vector");
    let full = d.path().join("full.alwl");
    std::fs::write(&full, &basic).expect("write");
    let mut raised = basic.clone();
    edit_frame(&mut raised, 363, |f| f[32] = 3); // APPLIED
    let applied = d.path().join("applied.alwl");
    std::fs::write(&applied, &raised).expect("write");
    let alone = fold_ledger(&full, "full").expect("fold");
    let both = fold_ledgers(&[full.clone(), applied]).expect("the same frames");
    assert_eq!(both.events_applied(), alone.events_applied());
    assert_eq!(both.views(), alone.views());
    let mut moved = basic;
    set_physical(&mut moved, 363, 1_767_614_399_999);
    let other = d.path().join("other.alwl");
    std::fs::write(&other, &moved).expect("write");
    let Err(e) = fold_ledgers(&[full, other]) else {
        panic!("a frame with another HLC was folded as a copy");
    };
    assert!(e.to_string().contains("LSN 3"), "{e}");
}
