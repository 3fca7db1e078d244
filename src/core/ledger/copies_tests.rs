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

/// Takes a checkpoint of the ledger at `path` (its fold state up to its last LSN; the WAL then
/// holds two watermark frames after it).
fn checkpoint(path: &Path) {
    let mut log = LedgerLog::open(path, None, opts()).expect("open");
    log.checkpoint().expect("checkpoint");
    log.close().expect("close");
}

/// Checkpoints and compacts the ledger at `path`: its event frames are dropped.
fn checkpoint_and_compact(path: &Path) {
    checkpoint(path);
    let r = super::append::compact(path).expect("compact");
    assert!(r.first_lsn_after.is_some_and(|l| l > 1), "{r:?}");
}

/// A checkpoint holds events as frames do: the first copy holding an LSN, by frame or by the
/// checkpoint, folds it, whichever copy sorts first.
#[test]
fn a_compacted_copy_and_an_uncompacted_copy_fold_each_event_once() {
    let d = tempfile::tempdir().expect("tempdir");
    for (compacted, full) in [("a.alwl", "b.alwl"), ("b.alwl", "a.alwl")] {
        let c = ledger(d.path(), compacted, 12);
        let f = copy(&c, d.path().join(full));
        checkpoint_and_compact(&c);
        append(&c, "gate-x", 12..15);
        // The full copy holds the checkpointed LSNs as frames, and is behind by three events.
        let alone = fold_ledger(&c, "c").expect("fold");
        assert_eq!(alone.events_applied(), 15);
        for paths in [vec![c.clone(), f.clone()], vec![f.clone(), c.clone()]] {
            let both = fold_ledgers(&paths).expect("copies fold");
            assert_eq!(both.events_applied(), 15, "{paths:?}: each event once");
            assert_eq!(both.views(), alone.views(), "{paths:?}");
            assert_eq!(both.findings(), vec![], "{paths:?}");
        }
        for p in [&c, &f, &super::append::checkpoint_path(&c)] {
            std::fs::remove_file(p).expect("remove");
        }
    }
}

#[test]
fn copies_with_the_same_checkpoint_count_it_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = ledger(d.path(), "a.alwl", 12);
    checkpoint(&a);
    append(&a, "gate-x", 12..14);
    let b = copy(&a, d.path().join("b.alwl"));
    let cp = |p: &Path| super::append::checkpoint_path(p);
    copy(&cp(&a), cp(&b));
    let alone = fold_ledger(&a, "a").expect("fold");
    assert_eq!(alone.events_applied(), 14);
    let both = fold_ledgers(&[a.clone(), b.clone()]).expect("copies fold");
    assert_eq!(both.events_applied(), 14, "the checkpoint once");
    assert_eq!(both.views(), alone.views());
    // Both compacted: only the checkpoints hold LSN 1..=12.
    checkpoint_and_compact(&a);
    copy(&a, b.clone());
    copy(&cp(&a), cp(&b));
    let both = fold_ledgers(&[b, a]).expect("copies fold");
    assert_eq!(both.events_applied(), 14, "the checkpoint once");
    assert_eq!(both.views(), alone.views());
}

/// A copy checkpointed later holds more LSNs: its checkpoint is folded, the earlier one (a fold
/// of fewer events, which cannot be folded in part) is left out.
#[test]
fn of_two_checkpoints_of_a_log_the_one_holding_more_lsns_is_folded() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = ledger(d.path(), "a.alwl", 6);
    checkpoint(&a);
    let b = copy(&a, d.path().join("b.alwl"));
    let cp = |p: &Path| super::append::checkpoint_path(p);
    copy(&cp(&a), cp(&b));
    append(&b, "gate-x", 6..12);
    checkpoint_and_compact(&b);
    let alone = fold_ledger(&b, "b").expect("fold");
    assert_eq!(alone.events_applied(), 12);
    for paths in [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]] {
        let both = fold_ledgers(&paths).expect("copies fold");
        assert_eq!(both.events_applied(), 12, "{paths:?}: each event once");
        assert_eq!(both.views(), alone.views(), "{paths:?}");
        assert_eq!(both.findings(), vec![], "{paths:?}");
    }
}

/// Two checkpoints that both claim LSN 1..=12 of one log but hold different fold states are
/// refused like frames that differ: folding one for both would hide the other.
#[test]
fn checkpoints_of_copies_that_differ_at_one_applied_lsn_are_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = ledger(d.path(), "a.alwl", 12);
    let b = copy(&a, d.path().join("b.alwl"));
    checkpoint(&a);
    // Another log of gate-x (other events at LSN 1..=12) checkpointed, its checkpoint put beside b.
    let other = d.path().join("other.alwl");
    append(&other, "gate-x", 100..112);
    checkpoint(&other);
    let cp = |p: &Path| super::append::checkpoint_path(p);
    copy(&cp(&other), cp(&b));
    for paths in [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]] {
        let Err(e) = fold_ledgers(&paths) else {
            panic!("{paths:?}: divergent checkpoints were folded");
        };
        let msg = e.to_string();
        for want in [
            cp(&a).display().to_string(),
            cp(&b).display().to_string(),
            "gate-x".into(),
            "LSN 12".into(),
        ] {
            assert!(msg.contains(&want), "{paths:?}: {want:?} not in {msg}");
        }
    }
    // The same state under another label (as a checkpoint taken beside the copy has) is the same.
    let text = std::fs::read_to_string(cp(&a)).expect("read");
    let (from, to) = (a.display().to_string(), b.display().to_string());
    assert!(text.contains(&from), "the label is the log's path");
    std::fs::write(cp(&b), text.replace(&from, &to)).expect("write");
    let both = fold_ledgers(&[a.clone(), b]).expect("the same checkpoint");
    assert_eq!(both.events_applied(), 12);
}

/// A compacted copy whose checkpoint is gone starts above LSN 1: not a finding when another copy
/// given holds those LSNs (the set is complete), a finding naming only the LSNs no copy holds.
#[test]
fn a_compacted_copy_without_checkpoint_misses_only_what_no_other_copy_holds() {
    let d = tempfile::tempdir().expect("tempdir");
    let c = ledger(d.path(), "c.alwl", 6);
    let prefix = copy(&c, d.path().join("prefix.alwl"));
    append(&c, "gate-x", 6..12);
    let full = copy(&c, d.path().join("full.alwl"));
    checkpoint_and_compact(&c);
    std::fs::remove_file(super::append::checkpoint_path(&c)).expect("remove");
    append(&c, "gate-x", 12..15);
    let missing = |paths: &[PathBuf]| {
        let f = fold_ledgers(paths).expect("fold").findings();
        assert!(f.len() <= 1, "{f:?}");
        f.first().map(|f| (f.lsn, f.message.clone()))
    };
    // Alone, LSN 1..=12 are missing.
    let (lsn, msg) = missing(std::slice::from_ref(&c)).expect("a finding");
    assert_eq!(lsn, Some(1));
    assert!(msg.contains("1..=12"), "{msg}");
    // With the full copy, nothing is.
    for paths in [vec![c.clone(), full.clone()], vec![full.clone(), c.clone()]] {
        assert_eq!(missing(&paths), None, "{paths:?}");
        assert_eq!(fold_ledgers(&paths).expect("fold").events_applied(), 15);
    }
    // With the prefix (LSN 1..=6), LSN 7..=12 are.
    let (lsn, msg) = missing(&[prefix, c]).expect("a finding");
    assert_eq!(lsn, Some(7));
    assert!(msg.contains("7..=12") && !msg.contains("1..="), "{msg}");
}
