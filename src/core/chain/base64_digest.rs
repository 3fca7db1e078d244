//! The one shape a valid digest's text has (43 standard base64 digits, `=`, the last digit's two
//! unused bits zero), decoded without a general decoder: every bundle entry carries two or three
//! of them. On x86-64 with SSSE3 the first 32 digits are decoded sixteen at a time (the lookup,
//! check and packing of Muła and Lemire, "Faster Base64 Encoding and Decoding Using AVX2
//! Instructions", 2018, in 128-bit registers); the last twelve, and everything elsewhere, through a
//! table. Both give the same answer for every input (the tests compare them).

use super::Digest32;

/// The value of a standard base64 digit, or 0xff.
const B64_VALUE: [u8; 256] = {
    let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 64 {
        t[digits[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The digest `s` holds when it has the one valid shape; `None` for anything else (the general
/// decoder then accepts or refuses it with its reason).
pub(super) fn decode_quick(s: &[u8]) -> Option<Digest32> {
    let s: &[u8; 44] = s.try_into().ok()?;
    if s[43] != b'=' {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    if ssse3::available() {
        let mut out = [0u8; 32];
        // SAFETY: SSSE3 is available (checked above).
        unsafe { ssse3::decode_32_digits(s[..32].try_into().ok()?, &mut out)? };
        decode_tail(s, &mut out)?;
        return Some(out);
    }
    by_table(s)
}

/// [`decode_quick`] through the table alone (digit 43 already checked).
fn by_table(s: &[u8; 44]) -> Option<Digest32> {
    let mut out = [0u8; 32];
    for g in 0..8 {
        decode_group(s, g, &mut out)?;
    }
    decode_tail(s, &mut out)?;
    Some(out)
}

/// Digits `4g..4g + 4` into bytes `3g..3g + 3`.
fn decode_group(s: &[u8; 44], g: usize, out: &mut Digest32) -> Option<()> {
    let v = |i: usize| u32::from(B64_VALUE[s[i] as usize]);
    let (a, b, c, d) = (v(4 * g), v(4 * g + 1), v(4 * g + 2), v(4 * g + 3));
    if (a | b | c | d) > 63 {
        return None;
    }
    let n = (a << 18) | (b << 12) | (c << 6) | d;
    out[3 * g..3 * g + 3].copy_from_slice(&n.to_be_bytes()[1..]);
    Some(())
}

/// Digits 32..43 into bytes 24..32 (the last digit's two unused bits must be zero).
fn decode_tail(s: &[u8; 44], out: &mut Digest32) -> Option<()> {
    decode_group(s, 8, out)?;
    decode_group(s, 9, out)?;
    let v = |i: usize| u32::from(B64_VALUE[s[i] as usize]);
    let (a, b, c) = (v(40), v(41), v(42));
    if (a | b | c) > 63 || c & 3 != 0 {
        return None;
    }
    let n = (a << 10) | (b << 4) | (c >> 2);
    out[30..].copy_from_slice(&(n as u16).to_be_bytes());
    Some(())
}

#[cfg(target_arch = "x86_64")]
mod ssse3 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi8, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_madd_epi16,
        _mm_maddubs_epi16, _mm_movemask_epi8, _mm_set1_epi32, _mm_set1_epi8, _mm_setr_epi8,
        _mm_shuffle_epi8, _mm_srli_epi32, _mm_storeu_si128,
    };

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("ssse3")
    }

    /// 32 digits into bytes 0..24 of `out`; `None` when one is not a standard base64 digit.
    ///
    /// # Safety
    /// The CPU must support SSSE3.
    #[target_feature(enable = "ssse3")]
    pub unsafe fn decode_32_digits(digits: &[u8; 32], out: &mut [u8; 32]) -> Option<()> {
        // SAFETY: the loads read 16 bytes of `digits` each; the stores write 16 bytes of `out` at
        // 0 and at 12 (the second overwrites the first's four zero bytes).
        unsafe {
            let a = sixteen(_mm_loadu_si128(digits.as_ptr().cast()))?;
            let b = sixteen(_mm_loadu_si128(digits.as_ptr().add(16).cast()))?;
            _mm_storeu_si128(out.as_mut_ptr().cast(), a);
            _mm_storeu_si128(out.as_mut_ptr().add(12).cast(), b);
        }
        Some(())
    }

    /// Sixteen digits into twelve bytes (the register's first twelve; the rest zero).
    #[target_feature(enable = "ssse3")]
    fn sixteen(x: __m128i) -> Option<__m128i> {
        let hi = _mm_and_si128(_mm_srli_epi32::<4>(x), _mm_set1_epi8(0x0f));
        let lo = _mm_and_si128(x, _mm_set1_epi8(0x0f));
        // A byte is a digit exactly when its low-nibble class and high-nibble class share no bit
        // (a high nibble of 8 and above, bytes 0x80 and over, shares 0x10 with every class).
        let lut_lo = _mm_setr_epi8(
            0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1a, 0x1b, 0x1b,
            0x1b, 0x1a,
        );
        let lut_hi = _mm_setr_epi8(
            0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
            0x10, 0x10,
        );
        let class = _mm_and_si128(_mm_shuffle_epi8(lut_lo, lo), _mm_shuffle_epi8(lut_hi, hi));
        if _mm_movemask_epi8(_mm_cmpeq_epi8(class, _mm_set1_epi8(0))) != 0xffff {
            return None;
        }
        // The offset from a digit's byte to its value: by high nibble, with `/` (high nibble 2,
        // like `+`) moved to its own entry.
        let slash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'/' as i8));
        let lut_roll = _mm_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
        let values = _mm_add_epi8(x, _mm_shuffle_epi8(lut_roll, _mm_add_epi8(slash, hi)));
        // Four 6-bit values into 24 bits per 32-bit lane, then the lanes' bytes in order.
        let pairs = _mm_maddubs_epi16(values, _mm_set1_epi32(0x0140_0140));
        let lanes = _mm_madd_epi16(pairs, _mm_set1_epi32(0x0001_1000));
        let order = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
        Some(_mm_shuffle_epi8(lanes, order))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// The table path alone.
    fn table(s: &[u8]) -> Option<Digest32> {
        let s: &[u8; 44] = s.try_into().ok()?;
        (s[43] == b'=').then(|| by_table(s))?
    }

    /// The `base64` crate's strict answer for a 44-byte text.
    fn reference(s: &[u8]) -> Option<Digest32> {
        let mut out = [0u8; 32];
        let n = base64::engine::general_purpose::STANDARD
            .decode_slice(s, &mut out)
            .ok()?;
        (n == 32).then_some(out)
    }

    #[test]
    fn both_paths_decode_exactly_what_the_base64_crate_accepts() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let probes = b"AZaz09+/=-_ .\x00\xff";
        for seed in 0..64u8 {
            let d = super::super::sha256(&[seed]);
            let text = b64.encode(d);
            assert_eq!(decode_quick(text.as_bytes()), Some(d));
            // Every position changed to every probe: accepted exactly when the crate accepts it
            // as 32 bytes, and then to the same bytes.
            for i in 0..text.len() {
                for &p in probes {
                    let mut t = text.clone().into_bytes();
                    t[i] = p;
                    let want = reference(&t);
                    let shown = String::from_utf8_lossy(&t).into_owned();
                    assert_eq!(decode_quick(&t), want, "{shown:?}");
                    assert_eq!(table(&t), want, "{shown:?}");
                }
            }
        }
    }

    #[test]
    fn every_byte_in_every_simd_position_is_judged_like_the_table() {
        let d = [0x5au8; 32];
        let text = base64::engine::general_purpose::STANDARD
            .encode(d)
            .into_bytes();
        for at in 0..32 {
            for byte in 0..=255u8 {
                let mut t = text.clone();
                t[at] = byte;
                assert_eq!(decode_quick(&t), table(&t), "byte {byte:#x} at {at}");
            }
        }
    }
}
