//! The fast path of the bundle reader for the common shape of an entry: one pass over the entry's
//! bytes as they sit in the scanner's buffer finds its end and every member, borrows the values,
//! and writes the entry's canonical (RFC 8785) text for the manifest digest by copying the values'
//! raw text, which for the accepted shape already is their canonical text.
//!
//! The shape: an object whose keys are the entry's nine known keys written without escapes, each
//! at most once, in any order; every required key present; every value a string except `prevLink`,
//! which may be `null`; no control byte inside a string; the only escapes `\"` and `\\`, and those
//! only in `payload` (so its raw text is its canonical text, and only the payload is unescaped,
//! into a reused buffer); valid UTF-8; JSON whitespace anywhere between tokens. Anything else —
//! an unknown or repeated key, a non-string value, `partitionKey: null`, a missing `prevLink`, any
//! other escape, an entry not wholly in the buffer — makes [`scan_fast`] decline (`None`) and the
//! reader's exact path (capture, `serde_json`, re-escaping) handles the entry, so what the reader
//! reports never depends on which path ran.

use super::model::EntryRef;
use std::borrow::Cow;

/// The members of an entry, in canonical (UTF-16 code unit) order.
const KEYS: [&[u8]; 9] = [
    b"enqueuedAt",
    b"jobId",
    b"link",
    b"nodeId",
    b"partitionKey",
    b"payload",
    b"payloadHash",
    b"prevLink",
    b"tHlc",
];
const ENQUEUED_AT: usize = 0;
const JOB_ID: usize = 1;
const LINK: usize = 2;
const NODE_ID: usize = 3;
const PARTITION_KEY: usize = 4;
const PAYLOAD: usize = 5;
const PAYLOAD_HASH: usize = 6;
const PREV_LINK: usize = 7;
const T_HLC: usize = 8;
/// Every key but `partitionKey` must be present.
const REQUIRED: u16 = 0b1_1110_1111;

/// One member's value: the byte range of its quoted text, or `null`.
#[derive(Debug, Clone, Copy, Default)]
struct Value {
    start: usize,
    end: usize,
    escaped: bool,
    null: bool,
}

/// An entry of the common shape found at the start of a window: where its members are.
pub struct FastEntry<'a> {
    text: &'a str,
    values: [Value; 9],
}

/// Where the members of a [`FastEntry`] are in its text: with a copy of the text, the entry again
/// ([`FastEntry::with_text`]), e.g. on another thread.
#[derive(Debug, Clone, Copy)]
pub struct FastLayout([Value; 9]);

/// Finds the entry at the start of `window` (the scanner's unread bytes, starting at the entry's
/// `{`) if it has the common shape (module text) and ends within `window` and within `limit`
/// bytes. `None`: use the exact path.
pub fn scan_fast(window: &[u8], limit: usize) -> Option<FastEntry<'_>> {
    let (len, values) = scan_members(window)?;
    if len > limit {
        return None;
    }
    let text = std::str::from_utf8(&window[..len]).ok()?;
    if (0..KEYS.len()).any(|k| k != PAYLOAD && values[k].escaped) {
        return None;
    }
    Some(FastEntry { text, values })
}

impl<'a> FastEntry<'a> {
    /// The entry's length in bytes.
    pub fn byte_len(&self) -> usize {
        self.text.len()
    }

    /// The entry's raw text (from its `{` to its `}`).
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Where its members are in [`FastEntry::text`].
    pub fn layout(&self) -> FastLayout {
        FastLayout(self.values)
    }

    /// The entry again from a copy of its text and its layout; `None` when `text` cannot be that
    /// entry's text (too short for the layout, or a member range that does not fall on its
    /// quotes).
    pub fn with_text(text: &'a str, layout: FastLayout) -> Option<FastEntry<'a>> {
        let b = text.as_bytes();
        let quoted = |v: &Value| {
            v.end >= v.start + 2
                && b.get(v.start) == Some(&QUOTE)
                && b.get(v.end - 1) == Some(&QUOTE)
        };
        let fits = layout.0.iter().all(|v| v.null || v.end == 0 || quoted(v));
        (fits && b.first() == Some(&OPEN)).then_some(FastEntry {
            text,
            values: layout.0,
        })
    }

    /// Appends the entry's canonical text to `out`: its members in key order, each value's raw text.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        let b = self.text.as_bytes();
        out.push(0x7b);
        let mut first = true;
        for (k, key) in KEYS.iter().enumerate() {
            let v = self.values[k];
            if k == PARTITION_KEY && v.end == 0 {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":");
            if v.null {
                out.extend_from_slice(b"null");
            } else {
                out.extend_from_slice(&b[v.start..v.end]);
            }
        }
        out.push(0x7d);
    }

    /// The entry's fields, borrowed from the window and, for an escaped payload, from `payload`
    /// (cleared and refilled with the unescaped payload).
    pub fn entry<'p>(&self, payload: &'p mut String) -> EntryRef<'p>
    where
        'a: 'p,
    {
        let text = self.text;
        let values = self.values;
        let inner = |k: usize| &text[values[k].start + 1..values[k].end - 1];
        let str_of = |k: usize| Cow::Borrowed(inner(k));
        let payload_text: &'p str = if values[PAYLOAD].escaped {
            unescape_into(payload, inner(PAYLOAD));
            let payload: &'p String = payload;
            payload
        } else {
            inner(PAYLOAD)
        };
        EntryRef {
            node_id: str_of(NODE_ID),
            t_hlc: str_of(T_HLC),
            job_id: str_of(JOB_ID),
            partition_key: (values[PARTITION_KEY].end != 0).then(|| str_of(PARTITION_KEY)),
            payload: Cow::Borrowed(payload_text),
            payload_hash: str_of(PAYLOAD_HASH),
            prev_link: (!values[PREV_LINK].null).then(|| str_of(PREV_LINK)),
            link: str_of(LINK),
            enqueued_at: str_of(ENQUEUED_AT),
        }
    }
}

/// `"`, `{` and `}` as bytes.
const QUOTE: u8 = 0x22;
const OPEN: u8 = 0x7b;
const CLOSE: u8 = 0x7d;

/// Finds every member of the entry at the start of `b` and the entry's length; `None` when the
/// entry is not of the common shape or does not end within `b`.
fn scan_members(b: &[u8]) -> Option<(usize, [Value; 9])> {
    let mut values = [Value::default(); 9];
    let mut seen = 0u16;
    if b.first() != Some(&OPEN) {
        return None;
    }
    let mut i = 1;
    loop {
        i = skip_ws(b, i)?;
        if b[i] != QUOTE {
            return None;
        }
        // A key with an escape matches no known key and is declined.
        let key_end = i + 1 + memchr::memchr(QUOTE, &b[i + 1..])?;
        let k = key_index(&b[i + 1..key_end])?;
        if seen & (1 << k) != 0 {
            return None;
        }
        seen |= 1 << k;
        i = skip_ws(b, key_end + 1)?;
        if b[i] != b':' {
            return None;
        }
        i = skip_ws(b, i + 1)?;
        if b[i] == QUOTE {
            let (end, escaped) = string_end(b, i)?;
            values[k] = Value {
                start: i,
                end,
                escaped,
                null: false,
            };
            i = end;
        } else if k == PREV_LINK && b[i..].starts_with(b"null") {
            values[k] = Value {
                null: true,
                ..Value::default()
            };
            i += 4;
        } else {
            return None;
        }
        i = skip_ws(b, i)?;
        match b[i] {
            b',' => i += 1,
            CLOSE => break,
            _ => return None,
        }
    }
    (seen & REQUIRED == REQUIRED).then_some((i + 1, values))
}

/// The index of the first non-whitespace byte at or after `i` (`None`: none in `b`). Runs of
/// spaces (a pretty-printed bundle's indentation) are skipped eight bytes at a time.
fn skip_ws(b: &[u8], mut i: usize) -> Option<usize> {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    loop {
        if let Some(w) = word_at(b, i) {
            let x = w ^ SPACES;
            if x == 0 {
                i += 8;
                continue;
            }
            // The first byte that is not a space (little-endian: the lowest nonzero byte).
            i += (x.trailing_zeros() / 8) as usize;
        }
        match *b.get(i)? {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => return Some(i),
        }
    }
}

/// The eight bytes at `b[i..]` as a little-endian word (`None` when fewer remain).
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(i..i.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// Which of [`KEYS`] `key` is (one comparison: the keys differ in length or first byte).
fn key_index(key: &[u8]) -> Option<usize> {
    let k = match (key.len(), key.first()?) {
        (10, _) => ENQUEUED_AT,
        (5, _) => JOB_ID,
        (4, b'l') => LINK,
        (4, _) => T_HLC,
        (6, _) => NODE_ID,
        (12, _) => PARTITION_KEY,
        (7, _) => PAYLOAD,
        (11, _) => PAYLOAD_HASH,
        (8, _) => PREV_LINK,
        _ => return None,
    };
    (KEYS[k] == key).then_some(k)
}

/// Bytes that end a run of plain string text: `"`, `\` and the C0 controls.
const STOPS: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// A mask with the high bit of every stop byte of `w` (`"`, `\\` or below 0x20) set, and no other
/// bit. Each byte is tested on its own (the sums below never carry into the next byte), so every
/// set bit is exact, not only the lowest.
fn stop_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Zero bytes: `(x & 0x7f) + 0x7f` reaches bit 7 unless the low seven bits are zero; `| x`
    // adds bytes whose own bit 7 is set.
    let zero_in = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
    let quote = zero_in(w ^ (ONES * b'"' as u64));
    let backslash = zero_in(w ^ (ONES * b'\\' as u64));
    // Below 0x20: `(b & 0x7f) + 0x60` reaches bit 7 exactly when `b & 0x7f >= 0x20`.
    let control = !(((w & LOW7) + ONES * 0x60) | w | LOW7);
    quote | backslash | control
}

/// The end (one past the closing quote) of the string whose opening quote is at `b[i]`, and
/// whether it holds escapes; `None` for a control byte, an escape other than `\"` and `\\`, or a
/// string that does not end within `b`. Eight bytes at a time, every stop of a word taken from
/// its mask (a payload's `\"` escapes come every few bytes), the last few bytes one at a time.
fn string_end(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut p = i + 1;
    let mut escaped = false;
    'words: while let Some(w) = word_at(b, p) {
        let mut m = stop_mask(w);
        while m != 0 {
            let q = p + (m.trailing_zeros() / 8) as usize;
            match b[q] {
                b'"' => return Some((q + 1, escaped)),
                b'\\' if matches!(b.get(q + 1)?, b'"' | b'\\') => {
                    escaped = true;
                    // Go on after the escaped byte: drop this word's stops up to it.
                    let next = q + 2;
                    if next >= p + 8 {
                        p = next;
                        continue 'words;
                    }
                    m &= !0u64 << ((next - p) * 8);
                }
                _ => return None,
            }
        }
        p += 8;
    }
    loop {
        match *b.get(p)? {
            b'"' => return Some((p + 1, escaped)),
            b'\\' if matches!(b.get(p + 1)?, b'"' | b'\\') => {
                escaped = true;
                p += 2;
            }
            c if STOPS[c as usize] => return None,
            _ => p += 1,
        }
    }
}

/// `raw` (a string's text between its quotes, whose only escapes are `\"` and `\\`) unescaped.
/// A plain byte loop: payload escapes come every few bytes, too close for `memchr` to pay off.
fn unescape_into(out: &mut String, raw: &str) {
    out.clear();
    let b = raw.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if b[i] == b'\\' {
            // Keep the escaped character (the byte after the backslash), drop the backslash.
            out.push_str(&raw[start..i]);
            start = i + 1;
            i += 2;
        } else {
            i += 1;
        }
    }
    out.push_str(&raw[start..]);
}

#[cfg(test)]
#[path = "fast_entry_tests.rs"]
mod tests;
