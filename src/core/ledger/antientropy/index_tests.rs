//! The block index beside a log: used when it still describes the log, not trusted when it does
//! not (appended, truncated, replaced, rewritten, damaged, forged), and diff/sync stay exact either
//! way, saying which path each side took.

use super::block_index::{self, BlockIndex, ENTRY, HEAD, TRAILER};
use super::tests::{frame, lsns, write_log};
use super::tree::TreeBuilder;
use super::*;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;

fn note<'a>(r: &'a SyncReport, log: &Path) -> &'a IndexNote {
    let name = log.display().to_string();
    r.block_index
        .iter()
        .find(|n| n.path == name)
        .unwrap_or_else(|| panic!("no note for {name}: {r:?}"))
}

/// Appends frames `from..to` (LSN i + 1) to a log.
fn append(log: &Path, from: u64, to: u64, change: impl Fn(u64) -> u64) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    for i in from..to {
        f.write_all(&frame(i, "gate-a", change(i))).unwrap();
    }
}

/// Changes block `b`'s hash in the index of `log` and recomputes the index's checksum: a
/// forgery that passes every check made when the index is opened except reading that block.
fn forge(log: &Path, b: usize) {
    let p = block_index::path_of(log);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[HEAD + b * ENTRY] ^= 0xff;
    let n = bytes.len() - TRAILER;
    let sum = Sha256::digest(&bytes[..n]);
    bytes[n..].copy_from_slice(&sum);
    std::fs::write(&p, bytes).unwrap();
}

fn pair(d: &tempfile::TempDir) -> (std::path::PathBuf, std::path::PathBuf) {
    (d.path().join("a.alwl"), d.path().join("b.alwl"))
}

#[test]
fn the_index_is_written_by_a_diff_and_used_by_the_next_with_the_same_result() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&a, 1000, |_| 0);
    write_log(&b, 1000, |i| u64::from(i == 899));
    let cold = between_files(&a, &b, false).unwrap();
    assert!(!note(&cold, &a).used, "{cold:?}");
    assert!(note(&cold, &a).note.contains("no block index yet"));
    assert!(block_index::path_of(&a).exists() && block_index::path_of(&b).exists());
    let warm = between_files(&a, &b, false).unwrap();
    for log in [&a, &b] {
        let n = note(&warm, log);
        assert!(n.used, "{n:?}");
        assert_eq!((n.covered_frames, n.hashed_frames), (768, 232));
    }
    assert_eq!(warm.first_divergent_lsn, Some(900));
    assert_eq!(
        (&warm.missing_in_a, &warm.missing_in_b, warm.exchanges),
        (&cold.missing_in_a, &cold.missing_in_b, cold.exchanges)
    );
}

#[test]
fn frames_appended_after_indexing_are_hashed_fresh_and_then_indexed() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&a, 600, |_| 0);
    write_log(&b, 600, |_| 0);
    assert!(between_files(&a, &b, false).unwrap().in_sync());
    append(&a, 600, 1000, |_| 0);
    append(&b, 600, 1000, |i| u64::from(i == 950));
    let r = between_files(&a, &b, false).unwrap();
    assert_eq!(r.first_divergent_lsn, Some(951));
    assert_eq!(
        (lsns(&r.missing_in_a), r.divergent.clone()),
        (vec![], vec![951])
    );
    let n = note(&r, &a);
    assert!(n.used, "{n:?}");
    assert_eq!((n.covered_frames, n.hashed_frames), (512, 488));
    let again = between_files(&a, &b, false).unwrap();
    assert_eq!(note(&again, &a).covered_frames, 768);
    assert_eq!(again.first_divergent_lsn, Some(951));
}

#[test]
fn a_truncated_replaced_or_rewritten_log_is_read_whole_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&b, 1000, |_| 0);
    let cases: [(&str, &dyn Fn()); 3] = [
        // Truncated: shorter than the prefix the index covers.
        ("shorter than", &|| write_log(&a, 300, |_| 0)),
        // Replaced by another file (as compaction does: write beside, rename over).
        ("another file", &|| {
            let other = d.path().join("new.alwl");
            write_log(&other, 1000, |i| u64::from(i == 300));
            std::fs::rename(&other, &a).unwrap();
        }),
        // Rewritten in place (same inode, same or greater length): frame 301 is another event,
        // so the frames after it moved.
        ("disagrees with the log", &|| {
            write_log(&a, 1000, |i| u64::from(i == 300))
        }),
    ];
    for (why, change) in cases {
        write_log(&a, 1000, |_| 0);
        assert!(between_files(&a, &b, false).unwrap().in_sync());
        change();
        let r = between_files(&a, &b, false).unwrap();
        let n = note(&r, &a);
        assert!(!n.used && n.note.contains(why), "{why}: {n:?}");
        assert_eq!(r.first_divergent_lsn, Some(301), "{why}");
        assert!(
            note(&between_files(&a, &b, false).unwrap(), &a).used,
            "{why}: rewritten"
        );
    }
}

#[test]
fn a_damaged_index_is_not_used() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&a, 700, |_| 0);
    write_log(&b, 700, |_| 0);
    between_files(&a, &b, false).unwrap();
    let p = block_index::path_of(&a);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[HEAD] ^= 1; // a block hash, without fixing the checksum
    std::fs::write(&p, &bytes).unwrap();
    let r = between_files(&a, &b, false).unwrap();
    assert!(r.in_sync());
    let n = note(&r, &a);
    assert!(!n.used && n.note.contains("damaged"), "{n:?}");
    std::fs::write(&p, &bytes[..bytes.len() - 1]).unwrap();
    let n = note(&between_files(&a, &b, false).unwrap(), &a).clone();
    assert!(!n.used && n.note.contains("damaged"), "{n:?}");
}

#[test]
fn a_forged_block_hash_is_caught_when_its_block_is_read() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.alwl");
    write_log(&a, 1000, |_| 0);
    let file = std::fs::File::open(&a).unwrap();
    let meta = file.metadata().unwrap();
    assert!(matches!(
        block_index::load(&a, &file, &meta),
        Err(block_index::Unusable::Absent)
    ));
    Replica::open(&a).unwrap();
    forge(&a, 1);
    let idx: BlockIndex = block_index::load(&a, &file, &meta).expect("passes the open checks");
    let tree = TreeBuilder::resume(&a, idx).finish();
    // Blocks 0 and 2 are fine; reading any frame of block 1 recomputes its hash.
    assert_eq!(tree.frames(0, 1).unwrap().len(), 1);
    assert_eq!(tree.frames(600, 700).unwrap().len(), 100);
    let e = tree.frames(300, 301).unwrap_err();
    assert!(
        matches!(
            e,
            LedgerError::IndexMismatch {
                block: 1,
                from: 257,
                to: 512,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_forged_index_never_changes_what_diff_or_sync_report_or_copy() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&a, 1000, |_| 0);
    write_log(&b, 1000, |_| 0);
    between_files(&a, &b, false).unwrap();
    for block in 0..3 {
        forge(&a, block);
        // Detected when the index is opened (the last block and blocks at random are re-read)
        // or when the search descends into the block that now looks different.
        let r = between_files(&a, &b, false).unwrap();
        assert!(r.in_sync(), "block {block}: {r:?}");
        let n = note(&r, &a);
        assert!(
            !n.used || n.note.contains("does not describe the log"),
            "{n:?}"
        );
        assert!(n.note.contains("discarded"), "block {block}: {n:?}");
        assert!(note(&between_files(&a, &b, false).unwrap(), &a).used);
    }
    // Sync copies frames from a forged side only after their block hashed as the index says.
    write_log(&b, 600, |_| 0);
    between_files(&a, &b, false).unwrap();
    forge(&a, 2);
    let s = between_files(&a, &b, true).unwrap();
    assert_eq!(s.copied_to_b, (601..=1000).collect::<Vec<_>>());
    assert!(note(&s, &a).note.contains("discarded"), "{s:?}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn a_full_check_ignores_a_good_index() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = pair(&d);
    write_log(&a, 600, |_| 0);
    write_log(&b, 600, |i| u64::from(i == 10));
    between_files(&a, &b, false).unwrap();
    let r = between_files_with(&a, &b, false, Trust::Full).unwrap();
    let n = note(&r, &a);
    assert!(!n.used && n.note.contains("full check"), "{n:?}");
    assert_eq!((n.hashed_frames, r.first_divergent_lsn), (600, Some(11)));
}
