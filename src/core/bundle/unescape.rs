//! Unescaping a payload whose only escapes are `\"` and `\\` (what the fast path of the bundle
//! reader accepts): the payload's JSON string text between its quotes back to the payload.
//!
//! Two ways, the same answer (the tests compare both with `serde_json`): when no backslash follows
//! another (every backslash then escapes the byte after it, which is kept), the text is the input
//! without its backslashes, packed sixteen bytes at a time with SSSE3's byte shuffle where the CPU
//! has it; otherwise the runs of text between escaping backslashes are copied one by one.

use super::block16::{stops_at, Stops, WIDTH};

/// `raw` unescaped into `out` (cleared first).
pub(crate) fn unescape_into(out: &mut String, raw: &str) {
    let src = raw.as_bytes();
    let mut bytes = std::mem::take(out).into_bytes();
    bytes.clear();
    bytes.resize(src.len(), 0);
    let len = match drop_backslashes(src, &mut bytes) {
        Some(len) => len,
        None => by_runs(src, &mut bytes),
    };
    bytes.truncate(len);
    debug_assert!(std::str::from_utf8(&bytes).is_ok());
    // SAFETY: `bytes` is `raw`, which is UTF-8, with some of its backslashes left out and nothing
    // else changed (both ways keep every other byte, in order: the tests compare them with
    // `serde_json`). A backslash is ASCII, never part of a multi-byte sequence, so what is left
    // is UTF-8.
    *out = unsafe { String::from_utf8_unchecked(bytes) };
}

/// `src` without its backslashes into `dst` (as long as `src`), its length; `None` (nothing to
/// rely on in `dst`) when a backslash follows another or ends the text, or the CPU lacks SSSE3.
fn drop_backslashes(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3, checked just above.
        return unsafe { ssse3::drop_backslashes(src, dst) };
    }
    let _ = (src, dst);
    None
}

#[cfg(target_arch = "x86_64")]
mod ssse3 {
    use super::WIDTH;
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_cmpeq_epi8, _mm_cvtsi128_si64, _mm_loadl_epi64, _mm_loadu_si128,
        _mm_movemask_epi8, _mm_set1_epi8, _mm_shuffle_epi8,
    };

    /// For each set of bytes dropped from an eight-byte group (bit k: byte k): the indices of the
    /// bytes kept, in order, then 0x80 (the shuffle writes zero there).
    const PACK: [[u8; 8]; 256] = {
        let mut t = [[0x80u8; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let (mut k, mut j) = (0, 0);
            while k < 8 {
                if m & (1 << k) == 0 {
                    t[m][j] = k as u8;
                    j += 1;
                }
                k += 1;
            }
            m += 1;
        }
        t
    };

    /// [`super::drop_backslashes`] sixteen bytes at a time: each half block's kept bytes are
    /// packed to its front by one shuffle and stored as eight bytes, and the output advances by
    /// how many were kept. The output never runs ahead of the input, so every eight-byte store
    /// fits `dst` (checked all the same).
    #[target_feature(enable = "ssse3")]
    pub(super) fn drop_backslashes(src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let (mut p, mut j) = (0usize, 0usize);
        // 1 when the previous block ended with a backslash.
        let mut carry = 0u32;
        let backslash = _mm_set1_epi8(b'\\' as i8);
        while let Some(block) = src.get(p..p + WIDTH) {
            // SAFETY: `block` is sixteen readable bytes; the load is unaligned.
            let x = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
            let bs = _mm_movemask_epi8(_mm_cmpeq_epi8(x, backslash)) as u32;
            if bs & (bs >> 1) != 0 || bs & carry != 0 {
                return None;
            }
            carry = bs >> (WIDTH - 1);
            for (half, dropped) in [(0i8, bs & 0xff), (8, bs >> 8)] {
                let row = &PACK[dropped as usize];
                // SAFETY: `row` is eight readable bytes (`loadl` reads eight).
                let idx = unsafe { _mm_loadl_epi64(row.as_ptr().cast()) };
                let packed = _mm_shuffle_epi8(x, _mm_add_epi8(idx, _mm_set1_epi8(half)));
                let word = _mm_cvtsi128_si64(packed).to_le_bytes();
                dst.get_mut(j..j + 8)?.copy_from_slice(&word);
                j += 8 - dropped.count_ones() as usize;
            }
            p += WIDTH;
        }
        let mut after_backslash = carry != 0;
        for &c in &src[p..] {
            if c == b'\\' {
                if after_backslash {
                    return None;
                }
                after_backslash = true;
                continue;
            }
            after_backslash = false;
            *dst.get_mut(j)? = c;
            j += 1;
        }
        // A backslash that escapes nothing: the general path decides.
        (!after_backslash).then_some(j)
    }
}

/// [`unescape_into`]'s general path into `dst` (as long as `src`), its length: the runs of text
/// between escaping backslashes, found sixteen bytes at a time ([`super::block16`]), each copied
/// with one fixed sixteen-byte copy when it fits (a payload's `\"` escapes come every few bytes, so
/// a copy of the run's exact length, or a branch per byte, would cost more than the text). A
/// backslash escapes the byte after it, which is kept whatever it is.
fn by_runs(src: &[u8], dst: &mut [u8]) -> usize {
    let mut runs = Runs {
        src,
        dst,
        len: 0,
        start: 0,
    };
    let mut p = 0;
    while let Some(Stops { backslash, .. }) = stops_at(src, p) {
        let mut bits = backslash;
        while bits != 0 {
            runs.backslash_at(p + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
        p += WIDTH;
    }
    for (k, &c) in src.iter().enumerate().skip(p) {
        if c == b'\\' {
            runs.backslash_at(k);
        }
    }
    runs.finish()
}

/// The runs of an escaped text being copied out: `src[start..]` is not copied yet; `dst[..len]`
/// holds what was.
struct Runs<'a> {
    src: &'a [u8],
    dst: &'a mut [u8],
    len: usize,
    start: usize,
}

impl Runs<'_> {
    /// A backslash at `src[k]`, in order: an escaping one ends the run (the byte it escapes starts
    /// the next one). `start == k > 0` only when the backslash before it escaped this one: text.
    fn backslash_at(&mut self, k: usize) {
        if k == self.start && k > 0 {
            return;
        }
        self.copy_to(k);
        self.start = k + 1;
    }

    /// Copies `src[start..end]` to `dst[len..]`. The output never runs ahead of the input
    /// (`len <= start`), so a sixteen-byte copy fits `dst` whenever it fits `src`.
    fn copy_to(&mut self, end: usize) {
        let (from, n) = (self.start, end.saturating_sub(self.start));
        match (
            self.src.get(from..from + WIDTH),
            self.dst.get_mut(self.len..self.len + WIDTH),
        ) {
            (Some(s), Some(d)) if n <= WIDTH => d.copy_from_slice(s),
            _ => {
                let to = self.len + n;
                if let (Some(d), Some(s)) =
                    (self.dst.get_mut(self.len..to), self.src.get(from..end))
                {
                    d.copy_from_slice(s);
                }
            }
        }
        self.len += n;
    }

    /// Copies the last run; the output's length.
    fn finish(mut self) -> usize {
        self.copy_to(self.src.len());
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both paths against `serde_json`'s reading of the same text (the fast one where it applies).
    fn check(s: &str) -> Result<(), TestCaseError> {
        let json = serde_json::to_string(s).unwrap();
        let raw = &json.as_bytes()[1..json.len() - 1];
        let mut dst = vec![0; raw.len()];
        let n = by_runs(raw, &mut dst);
        prop_assert_eq!(&dst[..n], s.as_bytes());
        if let Some(n) = drop_backslashes(raw, &mut dst) {
            prop_assert_eq!(&dst[..n], s.as_bytes());
        }
        let mut out = String::from("left over");
        unescape_into(&mut out, &json[1..json.len() - 1]);
        prop_assert_eq!(out, s);
        Ok(())
    }

    proptest! {
        #[test]
        fn unescaping_gives_back_the_text(s in "[a\"\\\\é{}:,]{0,40}") {
            check(&s)?;
        }

        /// Long runs, runs of backslashes and escapes at every place of a sixteen-byte block.
        #[test]
        fn unescaping_long_and_backslash_heavy_text_gives_back_the_text(
            pieces in prop::collection::vec(prop_oneof![
                4 => "[a-z]{0,40}",
                4 => Just("\"".to_string()),
                1 => Just("\\".to_string()),
                1 => Just("\\\\\\".to_string()),
                1 => Just("é".to_string()),
            ], 0..40)
        ) {
            check(&pieces.concat())?;
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_fast_path_takes_quote_escapes_and_leaves_backslash_pairs() {
        if !std::arch::is_x86_feature_detected!("ssse3") {
            return;
        }
        let raw = br#"{\"attempt\":0,\"kind\":\"scan\",\"target\":\"registry.local/app-0:1.0\"}"#;
        let mut dst = vec![0; raw.len()];
        let n = drop_backslashes(raw, &mut dst).expect("no backslash pair");
        assert_eq!(
            &dst[..n],
            br#"{"attempt":0,"kind":"scan","target":"registry.local/app-0:1.0"}"#
        );
        let pair = br#"0123456789abcde\\x"#;
        assert_eq!(drop_backslashes(pair, &mut vec![0; pair.len()]), None);
        assert_eq!(drop_backslashes(br"ab\", &mut [0; 3]), None);
    }
}
