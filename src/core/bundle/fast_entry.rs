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

use super::block16::{skip_ws, stops_at, Stops, WIDTH};
use super::model::EntryRef;
use super::unescape::unescape_into;
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
/// What comes before each member's value in the canonical text: the first member (`enqueuedAt`,
/// always present) opens the object, the others follow a comma.
const MEMBER_PREFIXES: [&[u8]; 9] = [
    b"{\"enqueuedAt\":",
    b",\"jobId\":",
    b",\"link\":",
    b",\"nodeId\":",
    b",\"partitionKey\":",
    b",\"payload\":",
    b",\"payloadHash\":",
    b",\"prevLink\":",
    b",\"tHlc\":",
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

/// Finds the entry at the start of `window` (the scanner's unread bytes, starting at the entry's
/// `{`) if it has the common shape (module text) and ends within `window` and within `limit`
/// bytes. `None`: use the exact path.
pub fn scan_fast(window: &[u8], limit: usize) -> Option<FastEntry<'_>> {
    let (len, values, ascii) = scan_members(window)?;
    if len > limit {
        return None;
    }
    let bytes = &window[..len];
    let text = if ascii {
        debug_assert!(bytes.is_ascii());
        // SAFETY: `scan_members` answers `ascii` only when every byte of the entry is below 0x80:
        // the bytes outside its strings were each matched against ASCII (whitespace, keys, quotes,
        // `:`, `,`, braces, `null`) and those inside against the 0x80 bit. ASCII is UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    } else {
        std::str::from_utf8(bytes).ok()?
    };
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

    /// Appends the entry's canonical text to `out`: its members in key order, each value's raw text.
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        let b = self.text.as_bytes();
        out.reserve(self.text.len() + 2);
        for (k, prefix) in MEMBER_PREFIXES.iter().enumerate() {
            let v = self.values[k];
            if k == PARTITION_KEY && v.end == 0 {
                continue;
            }
            out.extend_from_slice(prefix);
            if v.null {
                out.extend_from_slice(b"null");
            } else {
                out.extend_from_slice(&b[v.start..v.end]);
            }
        }
        out.push(CLOSE);
    }

    /// The entry's fields, borrowed from the window and, for an escaped payload, from `payload`
    /// (cleared and refilled with the unescaped payload).
    pub fn entry<'p>(&self, payload: &'p mut String) -> EntryRef<'p>
    where
        'a: 'p,
    {
        if self.unescape_payload(payload) {
            let payload: &'p String = payload;
            self.entry_with_payload(payload)
        } else {
            self.entry_with_payload(self.inner(PAYLOAD))
        }
    }

    /// For a payload written with escapes: `out` cleared and refilled with it unescaped (`true`).
    /// `false`: the payload's raw text is the payload, and `out` is left alone.
    pub fn unescape_payload(&self, out: &mut String) -> bool {
        let escaped = self.values[PAYLOAD].escaped;
        if escaped {
            unescape_into(out, self.inner(PAYLOAD));
        }
        escaped
    }

    /// The entry's fields with `payload` as the payload's value (what [`FastEntry::unescape_payload`]
    /// gave, or the raw text when it had no escapes); the rest borrowed from the window.
    pub fn entry_with_payload<'p>(&self, payload: &'p str) -> EntryRef<'p>
    where
        'a: 'p,
    {
        let values = self.values;
        let str_of = |k: usize| Cow::Borrowed(self.inner(k));
        EntryRef {
            node_id: str_of(NODE_ID),
            t_hlc: str_of(T_HLC),
            job_id: str_of(JOB_ID),
            partition_key: (values[PARTITION_KEY].end != 0).then(|| str_of(PARTITION_KEY)),
            payload: Cow::Borrowed(payload),
            payload_hash: str_of(PAYLOAD_HASH),
            prev_link: (!values[PREV_LINK].null).then(|| str_of(PREV_LINK)),
            link: str_of(LINK),
            enqueued_at: str_of(ENQUEUED_AT),
        }
    }

    /// Member `k`'s raw text between its quotes.
    fn inner(&self, k: usize) -> &'a str {
        let v = self.values[k];
        &self.text[v.start + 1..v.end - 1]
    }
}

/// `"`, `{` and `}` as bytes.
const QUOTE: u8 = 0x22;
const OPEN: u8 = 0x7b;
const CLOSE: u8 = 0x7d;

/// Finds every member of the entry at the start of `b`, the entry's length and whether it is all
/// ASCII (its text then needs no UTF-8 check); `None` when the entry is not of the common shape or
/// does not end within `b`.
fn scan_members(b: &[u8]) -> Option<(usize, [Value; 9], bool)> {
    let mut values = [Value::default(); 9];
    let mut seen = 0u16;
    // Bytes of 0x80 and above seen inside strings (every byte outside them is matched as ASCII).
    let mut high = 0u32;
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
        let (k, key_end) = match_key(b, i + 1)?;
        if seen & (1 << k) != 0 {
            return None;
        }
        seen |= 1 << k;
        i = match b.get(key_end + 1..key_end + 4) {
            // The writer's `": "` before a string value, without the general whitespace steps.
            Some([b':', b' ', QUOTE]) => key_end + 3,
            _ => {
                let colon = skip_ws(b, key_end + 1)?;
                if b[colon] != b':' {
                    return None;
                }
                skip_ws(b, colon + 1)?
            }
        };
        if b[i] == QUOTE {
            let (end, escaped) = string_end_in(b, i, &mut high)?;
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
    (seen & REQUIRED == REQUIRED).then_some((i + 1, values, high == 0))
}

/// Which of [`KEYS`] the key whose text starts at `b[at]` is, and the index of its closing quote
/// (`None`: not one of them, or not closed within `b`). The key's first bytes name the one
/// candidate; its text and the closing quote are compared in place (a key holds no quote, so this
/// is the same answer as comparing the text up to the first quote).
fn match_key(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let k = match (*b.get(at)?, *b.get(at + 1)?) {
        (b'e', _) => ENQUEUED_AT,
        (b'j', _) => JOB_ID,
        (b'l', _) => LINK,
        (b'n', _) => NODE_ID,
        (b't', _) => T_HLC,
        (b'p', b'r') => PREV_LINK,
        (b'p', _) => match *b.get(at + 2)? {
            b'r' => PARTITION_KEY,
            _ if b.get(at + 7) == Some(&b'H') => PAYLOAD_HASH,
            _ => PAYLOAD,
        },
        _ => return None,
    };
    let end = at + KEYS[k].len();
    // Sixteen bytes compared at once against the key and its closing quote (a `memcmp` call cost
    // more); the slices near the end of `b`.
    let same = match b.get(at..at + 16) {
        Some(w) => {
            let w = u128::from_le_bytes(w.try_into().ok()?);
            let (pattern, mask) = KEY_WORDS[k];
            (w ^ pattern) & mask == 0
        }
        None => b.get(at..end)? == KEYS[k] && *b.get(end)? == QUOTE,
    };
    same.then_some((k, end))
}

/// Each of [`KEYS`] with its closing quote as a little-endian word of sixteen bytes, and the mask
/// of those bytes (every key is shorter than fifteen bytes).
const KEY_WORDS: [(u128, u128); 9] = {
    let mut out = [(0u128, 0u128); 9];
    let mut k = 0;
    while k < KEYS.len() {
        let key = KEYS[k];
        let mut i = 0;
        while i <= key.len() {
            let byte = if i < key.len() { key[i] } else { QUOTE };
            out[k].0 |= (byte as u128) << (8 * i);
            out[k].1 |= 0xff << (8 * i);
            i += 1;
        }
        k += 1;
    }
    out
};

/// The end (one past the closing quote) of the string whose opening quote is at `b[i]`, and
/// whether it holds escapes; `None` for a control byte, an escape other than `\"` and `\\`, or a
/// string that does not end within `b`. Sixteen bytes at a time ([`block16`]) without a branch per
/// escape (a payload's `\"` escapes come every few bytes): a backslash escapes the byte after it,
/// which must be a quote, and the first quote not escaped ends the string. A run of backslashes
/// (`\\`) and the last few bytes go byte by byte.
#[cfg(test)]
fn string_end(b: &[u8], i: usize) -> Option<(usize, bool)> {
    string_end_in(b, i, &mut 0)
}

/// [`string_end`], also or-ing into `high` a nonzero mask when a byte of the string is 0x80 or
/// above.
fn string_end_in(b: &[u8], i: usize, high: &mut u32) -> Option<(usize, bool)> {
    const ALL: u32 = (1 << WIDTH) - 1;
    let mut p = i + 1;
    let mut escaped = false;
    // 1 when `b[p]` is escaped by a backslash that ended the previous block.
    let mut carry = 0u32;
    while let Some(Stops {
        quote: q,
        backslash: bs,
        control: ctl,
        high: hi,
    }) = stops_at(b, p)
    {
        if q | bs | ctl == 0 && carry == 0 {
            *high |= hi;
            p += WIDTH;
            continue;
        }
        // The bytes escaped by the byte before them, as long as no backslash is escaped itself.
        let esc = (bs << 1) | carry;
        if bs & esc != 0 {
            return string_tail(b, p, carry != 0, escaped, high);
        }
        let ends = q & !esc & ALL;
        // The bytes of this block inside the string.
        let inside = if ends == 0 {
            ALL
        } else {
            (1u32 << ends.trailing_zeros()) - 1
        };
        // Inside: no control byte, and every escaped byte a quote (no backslash is escaped here).
        if ctl & inside != 0 || esc & inside & !q != 0 {
            return None;
        }
        escaped |= bs & inside != 0;
        *high |= hi & inside;
        if ends != 0 {
            return Some((p + ends.trailing_zeros() as usize + 1, escaped));
        }
        carry = esc >> WIDTH;
        p += WIDTH;
    }
    string_tail(b, p, carry != 0, escaped, high)
}

/// [`string_end`] byte by byte from `b[p]` (inside the string; escaped by the byte before it
/// when `carry`).
fn string_tail(
    b: &[u8],
    mut p: usize,
    carry: bool,
    mut escaped: bool,
    high: &mut u32,
) -> Option<(usize, bool)> {
    if carry {
        if !matches!(b.get(p)?, b'"' | b'\\') {
            return None;
        }
        p += 1;
    }
    loop {
        match *b.get(p)? {
            b'"' => return Some((p + 1, escaped)),
            b'\\' if matches!(b.get(p + 1)?, b'"' | b'\\') => {
                escaped = true;
                p += 2;
            }
            c if c < 0x20 || c == b'\\' => return None,
            c => {
                *high |= u32::from(c >> 7);
                p += 1;
            }
        }
    }
}

#[cfg(test)]
#[path = "fast_entry_tests.rs"]
mod tests;
