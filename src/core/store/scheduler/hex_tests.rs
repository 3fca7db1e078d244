//! The scheduler chain's lowercase hex digests against the `hex` crate (the reference).

use super::{hex32, unhex32};
use crate::core::chain::Digest32;
use proptest::prelude::*;

/// The hex rule through the `hex` crate: the reference for the table decoder.
fn unhex_by_crate(s: &str) -> Option<Digest32> {
    if !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

#[test]
fn round_trips_and_matches_the_hex_crate() {
    let d: Digest32 = std::array::from_fn(|i| (i * 37 + 5) as u8);
    let mut buf = [0u8; 64];
    let text = hex32(&d, &mut buf);
    assert_eq!(text, hex::encode(d));
    assert_eq!(unhex32(text), Some(d));
}

#[test]
fn rejects_what_the_hex_rule_rejects() {
    let good = "ab".repeat(32);
    assert!(unhex32(&good).is_some());
    for bad in [
        "AB".repeat(32),
        "ab".repeat(31),
        "ab".repeat(33),
        format!("{}g", &good[1..]),
        format!("{} ", &good[1..]),
        String::new(),
    ] {
        assert_eq!(unhex32(&bad), None, "{bad:?}");
        assert_eq!(unhex_by_crate(&bad), None, "{bad:?}");
    }
}

proptest! {
    #[test]
    fn hex_agrees_with_the_hex_crate(s in "[0-9a-fA-Gz ]{62,66}", d in proptest::array::uniform32(any::<u8>())) {
        prop_assert_eq!(unhex32(&s), unhex_by_crate(&s));
        let mut buf = [0u8; 64];
        let hexed = hex32(&d, &mut buf).to_string();
        prop_assert_eq!(&hexed, &hex::encode(d));
        prop_assert_eq!(unhex32(&hexed), Some(d));
    }
}
