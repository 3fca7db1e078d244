//! The WAL vectors of `../shared/vectors/wal/`, matched exactly.

use super::inspect::{inspect, LsnRange};
use super::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn vector(name: &str) -> PathBuf {
    Path::new("../shared/vectors/wal").join(name)
}

fn json(name: &str) -> Value {
    let text = std::fs::read_to_string(vector(name)).expect("vector present");
    serde_json::from_str(&text).expect("vector JSON")
}

fn copy_to_temp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node.alwl");
    std::fs::copy(vector(name), &path).expect("copy vector");
    (dir, path)
}

#[test]
fn basic_decodes_exactly_to_expected_json() {
    let expected = json("basic.expected.json");
    let got = inspect(&vector("basic.alwl"), LsnRange::ALL).expect("inspect");
    let got = serde_json::to_value(&got).expect("serialize");
    for key in ["node", "nodeHash", "fileSize", "outcome", "offset"] {
        assert_eq!(got[key], expected[key], "{key}");
    }
    let want = expected["frames"].as_array().expect("frames");
    let have = got["frames"].as_array().expect("frames");
    assert_eq!(have.len(), want.len());
    for (h, w) in have.iter().zip(want) {
        assert_eq!(h, w, "frame at offset {}", w["offset"]);
    }
    assert_eq!(got["validFrames"], 10);
    assert_eq!(got["stop"]["kind"], "end-of-file");
}

#[test]
fn basic_frames_round_trip_through_the_encoder() {
    let bytes = std::fs::read(vector("basic.alwl")).expect("vector");
    let mut out = file_header().to_vec();
    for f in WalReader::from_bytes(bytes.clone()).expect("reader") {
        out.extend(f.expect("frame").encode());
    }
    assert_eq!(out, bytes);
}

#[test]
fn recovery_vectors_give_the_expected_outcome_offset_and_cut() {
    let expected = json("recovery.expected.json");
    for (name, want) in expected.as_object().expect("object") {
        let r = examine(&vector(&format!("{name}.alwl"))).expect("examine");
        assert_eq!(r.outcome.name(), want["outcome"], "{name}");
        assert_eq!(
            r.offset.map(Value::from).unwrap_or(Value::Null),
            want["offset"],
            "{name}"
        );
        assert_eq!(r.valid_frames, want["validFrames"], "{name}");
        assert_eq!(
            r.cut_bytes.map(Value::from).unwrap_or(Value::Null),
            want["cutBytes"],
            "{name}"
        );
        let shown = inspect(&vector(&format!("{name}.alwl")), LsnRange::ALL).expect("inspect");
        assert_eq!(shown.outcome, want["outcome"], "{name}");
        assert_eq!(shown.valid_frames, want["validFrames"], "{name}");
        // The counted examination (raw frames) agrees with a walk over the decoded frames (what
        // recovery reads), and its counter ends where the frames do.
        let read = std::sync::atomic::AtomicU64::new(0);
        let counted =
            super::examine_counted(&vector(&format!("{name}.alwl")), &read).expect("examine");
        let walked = super::recovery::scan(
            super::WalReader::open(&vector(&format!("{name}.alwl"))).expect("open"),
            |_| {},
        )
        .expect("scan");
        assert_eq!(counted, walked, "{name}");
        assert_eq!(counted, r, "{name}");
        assert_eq!(read.into_inner(), r.end, "{name}");
    }
}

#[test]
fn recover_saves_the_torn_tail_byte_for_byte_and_cuts_it() {
    let original = std::fs::read(vector("torn-tail.alwl")).expect("vector");
    let (_dir, path) = copy_to_temp("torn-tail.alwl");
    let r = recover(&path).expect("recover");
    assert_eq!(r.outcome, Outcome::TornTail);
    assert_eq!(r.offset, Some(1358));
    let saved = r.saved_tail.clone().expect("saved");
    assert_eq!(saved, torn_tail_path(&path, 1358));
    assert!(saved.to_string_lossy().ends_with("node.alwl.torn-at-1358"));
    assert_eq!(
        std::fs::read(&saved).expect("saved tail"),
        &original[1358..]
    );
    assert_eq!(std::fs::read(&path).expect("log"), &original[..1358]);
    let again = recover(&path).expect("second recovery");
    assert_eq!(again.outcome, Outcome::Clean);
    assert_eq!(again.valid_frames, 10);
}

/// Cut anywhere, the saved tail is exactly the bytes cut (zero bytes of the torn frame itself
/// included); after a torn frame, preallocated zeros are left out of the copy.
#[test]
fn every_truncation_saves_exactly_the_bytes_it_cuts() {
    let original = std::fs::read(vector("basic.alwl")).expect("vector");
    let dir = tempfile::tempdir().expect("tempdir");
    for cut_at in (9..original.len()).step_by(7) {
        let path = dir.path().join(format!("t{cut_at}.alwl"));
        std::fs::write(&path, &original[..cut_at]).expect("write");
        let r = recover(&path).expect("recover");
        let Some(saved) = r.saved_tail.clone() else {
            continue;
        };
        let x = r.end as usize;
        assert_eq!(r.cut_bytes, Some((cut_at - x) as u64), "at {cut_at}");
        assert_eq!(
            std::fs::read(&saved).expect("saved"),
            &original[x..cut_at],
            "at {cut_at}"
        );
    }
    // A torn frame followed by a preallocated chunk: the frame's bytes, not the zeros.
    let x = 8 + 100;
    let mut torn = original[..x + 20].to_vec();
    torn.resize(x + 20 + 4096, 0);
    let path = dir.path().join("prealloc.alwl");
    std::fs::write(&path, &torn).expect("write");
    let r = recover(&path).expect("recover");
    let saved = std::fs::read(r.saved_tail.expect("saved")).expect("saved");
    let frame_end = r.end as usize + saved.len();
    assert!(
        saved.len() < 4096 && frame_end <= x + 20 + 4096,
        "{}",
        saved.len()
    );
    assert_eq!(saved, &torn[r.end as usize..frame_end]);
}

#[test]
fn mid_damage_is_refused_naming_the_offset_and_left_untouched() {
    let original = std::fs::read(vector("mid-damage.alwl")).expect("vector");
    let (_dir, path) = copy_to_temp("mid-damage.alwl");
    let err = recover(&path).expect_err("refused");
    match &err {
        WalError::Refused {
            offset, next_valid, ..
        } => {
            assert_eq!(*offset, 520);
            assert_eq!(*next_valid, Some(563));
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert!(err.to_string().contains("offset 520"), "{err}");
    assert_eq!(std::fs::read(&path).expect("log"), original);
}

#[test]
fn zero_tail_is_a_clean_end_and_is_left_alone() {
    let original = std::fs::read(vector("zero-tail.alwl")).expect("vector");
    let (_dir, path) = copy_to_temp("zero-tail.alwl");
    let r = recover(&path).expect("recover");
    assert_eq!(r.outcome, Outcome::Clean);
    assert!(r.zero_tail);
    assert_eq!(r.end, 1358);
    assert_eq!(std::fs::read(&path).expect("log"), original);
}

#[test]
fn a_bad_file_header_is_refused_at_offset_zero() {
    for bytes in [
        b"ALWX\0\0\0\x01".to_vec(),
        b"ALWL\0\0\0\x02".to_vec(),
        b"ALW".to_vec(),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.alwl");
        std::fs::write(&path, &bytes).expect("write");
        let r = examine(&path).expect("examine");
        assert_eq!(r.outcome, Outcome::Refused);
        assert_eq!(r.offset, Some(0));
        assert!(matches!(
            recover(&path),
            Err(WalError::Refused { offset: 0, .. })
        ));
    }
}

#[test]
fn a_header_only_log_is_clean_and_empty() {
    let r = super::recovery::scan(
        WalReader::from_bytes(file_header().to_vec()).expect("reader"),
        |_| {},
    )
    .expect("scan");
    assert_eq!((r.outcome, r.valid_frames, r.end), (Outcome::Clean, 0, 8));
}
