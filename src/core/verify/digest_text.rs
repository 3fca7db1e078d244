//! Standard padded base64 digests (bundle entries) decoded by table, for per-entry work. Same
//! results as `chain::decode_digest`, which stays the rule: [`digest_b64`] falls back to it for
//! anything the table decoder does not take. (The scheduler chain's lowercase hex is
//! `store::scheduler::{hex32, unhex32}`.)

use crate::core::chain::{decode_digest, Digest32};

/// The value of a standard base64 digit, or 0xff.
const B64: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[digits[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// A digest in standard padded base64: exactly 43 digits and `=`, the unused low two bits of the
/// last digit zero (the canonical form `decode_digest` accepts). None for anything else.
fn decode_b64_32(s: &str) -> Option<Digest32> {
    let b: &[u8; 44] = s.as_bytes().try_into().ok()?;
    if b[43] != b'=' {
        return None;
    }
    let v = |i: usize| B64[b[i] as usize] as u32;
    let mut out = [0u8; 32];
    let mut bad = 0u32;
    for (g, o) in out.chunks_exact_mut(3).enumerate() {
        let (a, b2, c, d) = (v(g * 4), v(g * 4 + 1), v(g * 4 + 2), v(g * 4 + 3));
        bad |= a | b2 | c | d;
        let n = (a << 18) | (b2 << 12) | (c << 6) | d;
        o.copy_from_slice(&n.to_be_bytes()[1..]);
    }
    let (a, b2, c) = (v(40), v(41), v(42));
    bad |= a | b2 | c;
    let n = (a << 12) | (b2 << 6) | c;
    out[30] = (n >> 10) as u8;
    out[31] = (n >> 2) as u8;
    // 0xff marks a non-digit; every digit is below 64.
    (bad < 64 && n & 3 == 0).then_some(out)
}

/// [`decode_digest`] (the rule and its error text), by table for the canonical form.
pub fn digest_b64(s: &str) -> Result<Digest32, String> {
    match decode_b64_32(s) {
        Some(d) => Ok(d),
        None => decode_digest(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::scheduler::{hex32, unhex32};
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

    #[test]
    fn base64_digests_decode_as_decode_digest_does() {
        use base64::Engine;
        let d: Digest32 = std::array::from_fn(|i| (i * 91 + 3) as u8);
        let text = base64::engine::general_purpose::STANDARD.encode(d);
        assert_eq!(decode_b64_32(&text), Some(d));
        // Non-zero unused bits, missing padding, URL-safe digits, wrong length: not by table.
        let mut odd = text.clone().into_bytes();
        odd[42] = b'B';
        let odd = String::from_utf8(odd).unwrap();
        for bad in [
            odd,
            text[..43].to_string(),
            text.replace('+', "-").replace('/', "_"),
            format!("{text}="),
        ] {
            assert_eq!(decode_b64_32(&bad), None, "{bad:?}");
            assert_eq!(digest_b64(&bad), decode_digest(&bad), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn base64_agrees_with_decode_digest(
            d in proptest::array::uniform32(any::<u8>()),
            at in 0usize..44,
            with in prop_oneof![Just(b'='), Just(b'-'), Just(b'A'), Just(b'B'), Just(b'/'), any::<u8>()],
        ) {
            use base64::Engine;
            let text = base64::engine::general_purpose::STANDARD.encode(d);
            prop_assert_eq!(digest_b64(&text), Ok(d));
            let mut bytes = text.into_bytes();
            bytes[at] = with;
            if let Ok(s) = String::from_utf8(bytes) {
                prop_assert_eq!(digest_b64(&s), decode_digest(&s), "{}", s);
                if let Some(got) = decode_b64_32(&s) {
                    prop_assert_eq!(Ok(got), decode_digest(&s), "{}", s);
                }
            }
        }

        #[test]
        fn hex_agrees_with_the_hex_crate(s in "[0-9a-fA-Gz ]{62,66}", d in proptest::array::uniform32(any::<u8>())) {
            prop_assert_eq!(unhex32(&s), unhex_by_crate(&s));
            let mut buf = [0u8; 64];
            let hexed = hex32(&d, &mut buf).to_string();
            prop_assert_eq!(&hexed, &hex::encode(d));
            prop_assert_eq!(unhex32(&hexed), Some(d));
        }
    }
}
