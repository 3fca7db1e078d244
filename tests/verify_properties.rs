//! Properties of verification over arbitrary tampering.

use airlock::core::verify::{verify_reader, VerifyOptions};
use proptest::prelude::*;
use std::path::Path;

fn bundle_bytes() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vectors/bundles/two-nodes.json"),
    )
    .unwrap()
}

/// Byte range of the `jobLogs` array in the vector file.
fn job_logs_range(bytes: &[u8]) -> (usize, usize) {
    let text = std::str::from_utf8(bytes).unwrap();
    let start = text.find("\"jobLogs\"").unwrap();
    let open = start + text[start..].find('[').unwrap();
    let close = text.rfind(']').unwrap();
    (open, close + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any change of one non-whitespace byte inside `jobLogs` is reported: either the file no longer
    /// parses (an error with an offset) or verification finds something.
    #[test]
    fn any_single_byte_change_in_job_logs_is_reported(pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = bundle_bytes();
        let (start, end) = job_logs_range(&bytes);
        let candidates: Vec<usize> = (start..end).filter(|&i| !bytes[i].is_ascii_whitespace()).collect();
        let i = candidates[pos.index(candidates.len())];
        prop_assume!(bytes[i] != byte);
        bytes[i] = byte;
        match verify_reader(&bytes[..], &VerifyOptions::default()) {
            Err(e) => prop_assert!(e.offset as usize <= bytes.len()),
            Ok(report) => prop_assert!(!report.ok, "change at {} to {:#x} went unnoticed", i, byte),
        }
    }
}

#[test]
fn whitespace_outside_strings_does_not_matter() {
    let bytes = bundle_bytes();
    let text = String::from_utf8(bytes)
        .unwrap()
        .replace("\n      ", "\n\t");
    let report = verify_reader(text.as_bytes(), &VerifyOptions::default()).unwrap();
    assert!(report.ok, "{:#?}", report.findings);
}
