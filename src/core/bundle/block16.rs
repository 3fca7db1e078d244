//! Sixteen bytes of text at a time as bit masks (bit k for byte k): the bytes that end a run of
//! JSON string text (quote, backslash, C0 control), the bytes that are not plain printable ASCII
//! string text, and the bytes that are not JSON whitespace. On
//! x86-64 these are SSE2 compares and one `movemask` each (SSE2 is part of the x86-64 baseline);
//! elsewhere two eight-byte words tested bit-parallel ([`stops`], [`byte_bits`]). The scanners in
//! `fast_entry` are written over these masks, so both give the same answers (the tests compare
//! each with the byte loop it replaced).

/// Bytes per block.
pub const WIDTH: usize = 16;

/// The stop bytes of one block: bit k is set when byte k is `"`, `\` or below 0x20 respectively;
/// `high`: bit k set when byte k is 0x80 or above (not ASCII).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stops {
    pub quote: u32,
    pub backslash: u32,
    pub control: u32,
    pub high: u32,
}

/// The block at `b[i..i + WIDTH]` (`None` when fewer bytes remain).
fn block(b: &[u8], i: usize) -> Option<&[u8; WIDTH]> {
    b.get(i..i.checked_add(WIDTH)?)?.try_into().ok()
}

/// The stop bytes of the block at `b[i..]`; `None` when fewer than [`WIDTH`] bytes remain.
#[inline]
pub fn stops_at(b: &[u8], i: usize) -> Option<Stops> {
    block(b, i).map(stops_of)
}

/// Bit k set when byte k of the block at `b[i..]` is not JSON whitespace (space, tab, line feed,
/// carriage return); `None` when fewer than [`WIDTH`] bytes remain.
#[inline]
pub fn non_ws_at(b: &[u8], i: usize) -> Option<u32> {
    block(b, i).map(non_ws_of)
}

// SAFETY (every `unsafe` block of this module): SSE2 is part of the x86-64 baseline, so its
// intrinsics are available on every x86-64 CPU; the one load reads the 16 bytes of `block`.
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use super::{Stops, WIDTH};
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_min_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };

    pub fn stops_of(block: &[u8; WIDTH]) -> Stops {
        // SAFETY: see the module comment.
        unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            let eq = |c: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8))) as u32;
            // Below 0x20 (unsigned): the byte is its own minimum with 0x1f.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
            Stops {
                quote: eq(b'"'),
                backslash: eq(b'\\'),
                control: _mm_movemask_epi8(control) as u32,
                // The movemask of the bytes themselves is their high bits.
                high: _mm_movemask_epi8(x) as u32,
            }
        }
    }

    pub fn not_plain_of(block: &[u8; WIDTH]) -> u32 {
        let s = stops_of(block);
        // SAFETY: see the module comment.
        let high = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            // 0x7f and above (unsigned): the byte is its own maximum with 0x7f.
            _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x7f)), x)) as u32
        };
        s.quote | s.backslash | s.control | high
    }

    pub fn non_ws_of(block: &[u8; WIDTH]) -> u32 {
        // SAFETY: see the module comment.
        unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            let eq = |c: u8| _mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8));
            let ws = _mm_or_si128(
                _mm_or_si128(eq(b' '), eq(b'\n')),
                _mm_or_si128(eq(b'\t'), eq(b'\r')),
            );
            !(_mm_movemask_epi8(ws) as u32) & 0xffff
        }
    }
}

/// Bit k set when byte k of the block at `b[i..]` is not plain string text: not printable ASCII
/// (below 0x20, or 0x7f and above), or a quote or a backslash; `None` when fewer than [`WIDTH`]
/// bytes remain.
#[inline]
pub fn not_plain_at(b: &[u8], i: usize) -> Option<u32> {
    block(b, i).map(not_plain_of)
}

/// The index of the first non-whitespace byte at or after `i` (`None`: none in `b`), sixteen bytes
/// at a time (a pretty-printed bundle's line break and indentation are one block).
pub fn skip_ws(b: &[u8], mut i: usize) -> Option<usize> {
    while let Some(non_ws) = non_ws_at(b, i) {
        if non_ws != 0 {
            return Some(i + non_ws.trailing_zeros() as usize);
        }
        i += WIDTH;
    }
    loop {
        match *b.get(i)? {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => return Some(i),
        }
    }
}

#[cfg(target_arch = "x86_64")]
use sse2::{non_ws_of, not_plain_of, stops_of};

#[cfg(not(target_arch = "x86_64"))]
use words::{non_ws_of, not_plain_of, stops_of};

/// The same masks from two eight-byte words (used off x86-64; tested everywhere).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
mod words {
    use super::{byte_bits, stops, zero_bytes, Stops, LOW7, ONES, WIDTH};

    pub fn stops_of(block: &[u8; WIDTH]) -> Stops {
        let (lo, hi) = words(block);
        let (q0, b0, c0) = stops(lo);
        let (q1, b1, c1) = stops(hi);
        let join = |a: u64, b: u64| byte_bits(a) | byte_bits(b) << 8;
        Stops {
            quote: join(q0, q1),
            backslash: join(b0, b1),
            control: join(c0, c1),
            high: join(lo & !LOW7, hi & !LOW7),
        }
    }

    pub fn not_plain_of(block: &[u8; WIDTH]) -> u32 {
        let (lo, hi) = words(block);
        let not_plain = |w: u64| {
            let (q, b, c) = stops(w);
            // The high bit set, or 0x7f.
            q | b | c | (w & !LOW7) | zero_bytes(w ^ (ONES * 0x7f))
        };
        byte_bits(not_plain(lo)) | byte_bits(not_plain(hi)) << 8
    }

    pub fn non_ws_of(block: &[u8; WIDTH]) -> u32 {
        let (lo, hi) = words(block);
        let ws = |w: u64| {
            [b' ', b'\n', b'\t', b'\r']
                .iter()
                .fold(0, |m, &c| m | zero_bytes(w ^ (ONES * u64::from(c))))
        };
        !(byte_bits(ws(lo)) | byte_bits(ws(hi)) << 8) & 0xffff
    }

    fn words(block: &[u8; WIDTH]) -> (u64, u64) {
        let (lo, hi) = block.split_at(8);
        let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
        (word(lo), word(hi))
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The high bit of every zero byte of `x`: `(x & 0x7f) + 0x7f` reaches bit 7 unless the low seven
/// bits are zero; `| x` adds bytes whose own bit 7 is set.
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Per-byte tests of a little-endian word: a mask with the high bit of every byte that is a quote,
/// a backslash, or below 0x20, and no other bit. Each byte is tested on its own (the sums below
/// never carry into the next byte), so every set bit is exact, not only the lowest.
fn stops(w: u64) -> (u64, u64, u64) {
    let quote = zero_bytes(w ^ (ONES * b'"' as u64));
    let backslash = zero_bytes(w ^ (ONES * b'\\' as u64));
    // Below 0x20: `(b & 0x7f) + 0x60` reaches bit 7 exactly when `b & 0x7f >= 0x20`.
    let control = !(((w & LOW7) + ONES * 0x60) | w | LOW7);
    (quote, backslash, control)
}

/// The high bits of a [`stops`] mask as eight bits, bit k for byte k. (The multiplier's terms move
/// byte k's bit 8k to bit 56 + k; no two terms land on the same bit, so nothing carries.)
fn byte_bits(m: u64) -> u32 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytewise(b: &[u8; WIDTH], test: impl Fn(u8) -> bool) -> u32 {
        b.iter()
            .enumerate()
            .filter(|(_, &c)| test(c))
            .fold(0, |m, (k, _)| m | 1 << k)
    }

    /// Both implementations against the byte tests.
    fn check(b: [u8; WIDTH]) {
        let want = Stops {
            quote: bytewise(&b, |c| c == b'"'),
            backslash: bytewise(&b, |c| c == b'\\'),
            control: bytewise(&b, |c| c < 0x20),
            high: bytewise(&b, |c| c >= 0x80),
        };
        let ws = |c: u8| matches!(c, b' ' | b'\n' | b'\t' | b'\r');
        let non_ws = bytewise(&b, |c| !ws(c));
        assert_eq!(stops_of(&b), want, "{b:?}");
        assert_eq!(words::stops_of(&b), want, "{b:?}");
        assert_eq!(non_ws_of(&b), non_ws, "{b:?}");
        assert_eq!(words::non_ws_of(&b), non_ws, "{b:?}");
        let plain = |c: u8| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\';
        let not_plain = bytewise(&b, |c| !plain(c));
        assert_eq!(not_plain_of(&b), not_plain, "{b:?}");
        assert_eq!(words::not_plain_of(&b), not_plain, "{b:?}");
    }

    /// Every byte value at every position, beside every other byte value.
    #[test]
    fn the_masks_mark_exactly_their_bytes_for_every_byte_pair() {
        for c in 0..=255u8 {
            for d in 0..=255u8 {
                for k in [0, 6, 7, 14] {
                    let mut b = [b'a'; WIDTH];
                    b[k] = c;
                    b[k + 1] = d;
                    check(b);
                }
            }
        }
    }

    /// The word test used off x86-64 (and its bit gather) against the byte loop, on every target.
    #[test]
    fn the_word_test_marks_every_stop_exactly() {
        let is_stop = |c: u8| c == b'"' || c == b'\\' || c < 0x20;
        for c in 0..=255u8 {
            for d in 0..=255u8 {
                for k in 0..7 {
                    let mut w = [b'a'; 8];
                    w[k] = c;
                    w[k + 1] = d;
                    let (q, bs, ctl) = stops(u64::from_le_bytes(w));
                    let want = w
                        .iter()
                        .enumerate()
                        .filter(|(_, &c)| is_stop(c))
                        .fold(0u32, |m, (k, _)| m | 1 << k);
                    assert_eq!(byte_bits(q | bs | ctl), want, "{c:#x} {d:#x} at {k}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn the_masks_agree_with_the_byte_tests(b in any::<[u8; WIDTH]>()) {
            check(b);
        }

        #[test]
        fn byte_bits_takes_each_high_bit_to_its_byte_index(word in any::<[u8; 8]>()) {
            let m = u64::from_le_bytes(word) & 0x8080_8080_8080_8080;
            let want = (0..8).filter(|k| word[*k] & 0x80 != 0).fold(0u32, |acc, k| acc | 1 << k);
            prop_assert_eq!(byte_bits(m), want);
        }
    }
}
