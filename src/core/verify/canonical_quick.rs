//! A quick, allocation-free recognizer of payloads that are certainly their own canonical (RFC 8785)
//! text, so the common payload skips the full parse-and-reserialise check. It is conservative: it
//! answers `true` only for objects with printable-ASCII keys in strictly increasing order, arrays,
//! strings of printable ASCII without escapes, integers of at most 15 digits (not `-0`), `true`,
//! `false` and `null`, with no whitespace outside strings. Anything else gets `false`, and the full
//! check ([`crate::core::canonical::check_canonical`]) decides.

use crate::core::bundle::block16::{not_plain_at, WIDTH};

/// Nesting deeper than this is left to the full check.
const MAX_DEPTH: u32 = 64;

/// Whether `text` is certainly canonical JSON (see the module text); `false` means "check fully".
pub(super) fn plainly_canonical(text: &str) -> bool {
    let mut p = Quick {
        b: text.as_bytes(),
        i: 0,
    };
    p.value(0) && p.i == p.b.len()
}

/// Bytes a plain string holds: printable ASCII but `"` and `\\`.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x7f {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

struct Quick<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Quick<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match self.peek() {
            Some(0x7b) => self.object(depth),
            Some(0x5b) => self.array(depth),
            Some(b'"') => self.string().is_some(),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            _ => false,
        }
    }

    fn object(&mut self, depth: u32) -> bool {
        self.i += 1;
        if self.eat(0x7d) {
            return true;
        }
        let mut last: Option<&[u8]> = None;
        loop {
            let Some(key) = self.string() else {
                return false;
            };
            // Bytewise order is UTF-16 order for ASCII keys; strictly increasing means no repeats.
            if last.is_some_and(|l| !before(l, key)) {
                return false;
            }
            last = Some(key);
            if !self.eat(b':') || !self.value(depth + 1) {
                return false;
            }
            if self.eat(0x7d) {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    fn array(&mut self, depth: u32) -> bool {
        self.i += 1;
        if self.eat(0x5d) {
            return true;
        }
        loop {
            if !self.value(depth + 1) {
                return false;
            }
            if self.eat(0x5d) {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    /// A string of printable ASCII without escapes; returns its content.
    fn string(&mut self) -> Option<&'a [u8]> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.i;
        let mut p = start;
        // Sixteen bytes at a time; the last few one by one.
        self.i = loop {
            match not_plain_at(self.b, p) {
                Some(0) => p += WIDTH,
                Some(stops) => break p + stops.trailing_zeros() as usize,
                None => break p + self.b[p..].iter().position(|&c| !PLAIN[c as usize])?,
            }
        };
        let len = self.i - start;
        self.eat(b'"').then(|| &self.b[start..start + len])
    }

    fn integer(&mut self) -> bool {
        let negative = self.eat(b'-');
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        let plain = match digits {
            [] => false,
            [b'0'] => !negative,
            [b'0', ..] => false,
            _ => digits.len() <= 15,
        };
        plain && !matches!(self.peek(), Some(b'.' | b'e' | b'E'))
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }
}

/// Whether `a` sorts strictly before `b`, bytewise: a byte loop (keys are a few bytes; a `memcmp`
/// call cost more than the comparison).
fn before(a: &[u8], b: &[u8]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    a.len() < b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::canonical::check_canonical;

    #[test]
    fn says_yes_only_where_the_full_check_does() {
        let yes = [
            r#"{"attempt":0,"kind":"scan","node":"node-00","seq":12,"target":"registry.local/app-0:1.0"}"#,
            r#"{}"#,
            r#"[]"#,
            r#"{"a":[1,-2,true,false,null,{"b":"x"}],"b":{}}"#,
            r#""text""#,
            r#"0"#,
            r#"999999999999999"#,
        ];
        for s in yes {
            assert!(plainly_canonical(s), "{s}");
            assert!(check_canonical(s).is_ok(), "{s}");
        }
        let undecided = [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":1}"#,
            r#"{"a": 1}"#,
            r#" {}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":1234567890123456}"#,
            r#"{"a":"x\"y"}"#,
            r#"{"a":"\u00e9"}"#,
            "{\"a\":\"é\"}",
            "{\"é\":1}",
            r#"{"a":tru}"#,
            r#"{"a":1,}"#,
            r#"[1,]"#,
            r#"{"a":1}x"#,
            r#""#,
        ];
        for s in undecided {
            assert!(!plainly_canonical(s), "{s}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(!plainly_canonical(&deep));
    }

    proptest::proptest! {
        #[test]
        fn before_is_the_slice_order(a in "[a-c]{0,4}", b in "[a-c]{0,4}") {
            proptest::prop_assert_eq!(before(a.as_bytes(), b.as_bytes()), a.as_bytes() < b.as_bytes());
        }

        /// Objects with string values long and short, holding any byte now and then: a yes is
        /// always the full check's yes, and plain values are recognised.
        #[test]
        fn a_yes_is_always_canonical(
            values in proptest::collection::vec("[ -~]{0,40}|[a-z]{0,20}[\\x00-\\x1f\\x7f-\\u{ff}é\"\\\\][a-z]{0,20}", 1..6)
        ) {
            let members: Vec<String> = values
                .iter()
                .enumerate()
                .map(|(k, v)| format!("\"k{k}\":\"{v}\""))
                .collect();
            let text = format!("{{{}}}", members.join(","));
            let plain = values.iter().all(|v| {
                v.bytes().all(|c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\')
            });
            proptest::prop_assert_eq!(plainly_canonical(&text), plain, "{:?}", text);
            if plain {
                proptest::prop_assert!(check_canonical(&text).is_ok(), "{:?}", text);
            }
        }
    }
}
