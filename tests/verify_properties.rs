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

/// Hands out the bytes in small chunks of varying size, so every refill path of the scanner runs.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    n: usize,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let want = self.sizes[self.n % self.sizes.len()]
            .min(out.len())
            .min(self.data.len());
        self.n += 1;
        out[..want].copy_from_slice(&self.data[..want]);
        self.data = &self.data[want..];
        Ok(want)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Reading in arbitrary small chunks gives exactly the report (or error) of reading at once.
    #[test]
    fn chunked_reading_is_equivalent(sizes in prop::collection::vec(1usize..9, 1..16), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = bundle_bytes();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        // One clock for both readings: a changed digit can put an entry far ahead of it, and a
        // clock-skew finding names the verifying machine's time.
        let opts = VerifyOptions::default();
        let whole = verify_reader(&bytes[..], &opts);
        let chunked = verify_reader(Chunked { data: &bytes, sizes, n: 0 }, &opts);
        match (whole, chunked) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "whole {:?} vs chunked {:?}", a.map(|r| r.ok), b.map(|r| r.ok)),
        }
    }
}
