//! A small pull scanner over JSON bytes from any reader: it walks the structure the bundle reader
//! needs (objects, arrays, keys) and captures whole values as byte slices with their absolute offsets,
//! so a bundle of any size is read in one pass with memory bounded by its largest single entry.

use std::io::Read;

/// Largest single JSON value (one entry, one field) the scanner will capture.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;
const CHUNK: usize = 1 << 20;

/// A syntax-level problem at an absolute byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub offset: u64,
    pub message: String,
}

impl ScanError {
    pub fn new(offset: u64, message: impl Into<String>) -> Self {
        ScanError {
            offset,
            message: message.into(),
        }
    }
}

pub struct Scanner<R> {
    reader: R,
    buf: Vec<u8>,
    /// Position of the next unread byte in `buf`.
    pos: usize,
    /// Absolute file offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// Largest value [`Scanner::capture`] returns.
    limit: usize,
}

impl<R: Read> Scanner<R> {
    pub fn new(reader: R) -> Self {
        Scanner {
            reader,
            buf: Vec::with_capacity(CHUNK),
            pos: 0,
            base: 0,
            eof: false,
            limit: MAX_VALUE_BYTES,
        }
    }

    /// A scanner whose largest value is `limit` bytes instead of [`MAX_VALUE_BYTES`].
    pub fn with_limit(reader: R, limit: usize) -> Self {
        Scanner {
            limit,
            ..Scanner::new(reader)
        }
    }

    /// Absolute offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes at least `n` unread bytes available unless the input ends first; returns whether they are.
    fn fill(&mut self, n: usize) -> Result<bool, ScanError> {
        while self.buf.len() - self.pos < n {
            if self.eof {
                return Ok(false);
            }
            if self.pos > 0 && self.pos >= self.buf.len() / 2 {
                self.buf.drain(..self.pos);
                self.base += self.pos as u64;
                self.pos = 0;
            }
            let want = CHUNK.max(n);
            // read_to_end fills spare capacity without re-zeroing it on every call, which matters
            // for readers that hand out a few bytes at a time (pipes, sockets).
            let got = (&mut self.reader)
                .take(want as u64)
                .read_to_end(&mut self.buf)
                .map_err(|e| ScanError::new(self.offset(), format!("read failed: {e}")))?;
            if got < want {
                self.eof = true;
            }
        }
        Ok(true)
    }

    /// Skips whitespace and returns the next byte without consuming it (`None` at end of input).
    pub fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            if !self.fill(1)? {
                return Ok(None);
            }
            match self.buf[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b => return Ok(Some(b)),
            }
        }
    }

    /// Consumes `expected` after optional whitespace.
    pub fn expect(&mut self, expected: u8, what: &str) -> Result<(), ScanError> {
        match self.peek()? {
            Some(b) if b == expected => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(ScanError::new(
                self.offset(),
                format!("expected {what} but found {}", describe_byte(b)),
            )),
            None => Err(ScanError::new(
                self.offset(),
                format!("expected {what} but the file ends (truncated?)"),
            )),
        }
    }

    /// Consumes `b` if it is the next non-whitespace byte.
    pub fn eat(&mut self, b: u8) -> Result<bool, ScanError> {
        if self.peek()? == Some(b) {
            self.pos += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// After a member or element: consumes `,` (returns true) or the closing byte (returns false).
    pub fn next_or_close(&mut self, close: u8, what: &str) -> Result<bool, ScanError> {
        match self.peek()? {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            Some(b) => Err(ScanError::new(
                self.offset(),
                format!(
                    "expected ',' or '{}' in {what} but found {}",
                    close as char,
                    describe_byte(b)
                ),
            )),
            None => Err(ScanError::new(
                self.offset(),
                format!("the file ends inside {what} (truncated?)"),
            )),
        }
    }

    /// Reads an object key and the following `:`.
    pub fn key(&mut self) -> Result<String, ScanError> {
        let (start, raw) = self.capture()?;
        if raw.first() != Some(&b'"') {
            return Err(ScanError::new(start, "expected an object key (a string)"));
        }
        let key: String = serde_json::from_slice(raw).map_err(|e| json_error(start, raw, &e))?;
        self.expect(b':', "':' after an object key")?;
        Ok(key)
    }

    /// Captures the next complete JSON value and returns its absolute start offset and its bytes.
    /// The value's inner syntax is only checked as far as finding its end; parse it to validate.
    pub fn capture(&mut self) -> Result<(u64, &[u8]), ScanError> {
        let Some(first) = self.peek()? else {
            return Err(ScanError::new(
                self.offset(),
                "expected a value but the file ends (truncated?)",
            ));
        };
        let start = self.offset();
        let mut i = self.pos;
        match first {
            b'{' | b'[' => {
                let mut depth: u32 = 0;
                let mut in_string = false;
                loop {
                    if i >= self.buf.len() {
                        let consumed = i - self.pos;
                        if consumed > self.limit {
                            return Err(ScanError::new(
                                start,
                                "a single value is larger than 256 MiB",
                            ));
                        }
                        let before = self.pos;
                        let abs = self.base + i as u64;
                        if !self.fill(consumed + 1)? {
                            return Err(ScanError::new(
                                abs,
                                "the file ends inside a value (truncated?)",
                            ));
                        }
                        // `fill` may have moved the buffer start.
                        i = self.pos + (i - before);
                    }
                    let rest = &self.buf[i..];
                    if in_string {
                        match memchr::memchr2(b'"', b'\\', rest) {
                            Some(p) => {
                                let at = i + p;
                                if self.buf[at] == b'\\' {
                                    // skip the escaped byte (may need a refill)
                                    if at + 1 >= self.buf.len() {
                                        i = at;
                                        let consumed = i - self.pos;
                                        let before = self.pos;
                                        let abs = self.base + i as u64;
                                        if !self.fill(consumed + 2)? {
                                            return Err(ScanError::new(
                                                abs,
                                                "the file ends inside a string (truncated?)",
                                            ));
                                        }
                                        i = self.pos + (i - before) + 2;
                                    } else {
                                        i = at + 2;
                                    }
                                } else {
                                    in_string = false;
                                    i = at + 1;
                                }
                            }
                            None => i = self.buf.len(),
                        }
                        continue;
                    }
                    match rest
                        .iter()
                        .position(|&b| matches!(b, b'"' | b'{' | b'[' | b'}' | b']'))
                    {
                        Some(p) => {
                            let at = i + p;
                            match self.buf[at] {
                                b'"' => in_string = true,
                                b'{' | b'[' => depth += 1,
                                _ => depth -= 1,
                            }
                            i = at + 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        None => i = self.buf.len(),
                    }
                }
            }
            b'"' => {
                i += 1;
                loop {
                    if i >= self.buf.len() {
                        let consumed = i - self.pos;
                        if consumed > self.limit {
                            return Err(ScanError::new(
                                start,
                                "a single string is larger than 256 MiB",
                            ));
                        }
                        let before = self.pos;
                        let abs = self.base + i as u64;
                        if !self.fill(consumed + 1)? {
                            return Err(ScanError::new(
                                abs,
                                "the file ends inside a string (truncated?)",
                            ));
                        }
                        i = self.pos + (i - before);
                    }
                    match memchr::memchr2(b'"', b'\\', &self.buf[i..]) {
                        Some(p) => {
                            let at = i + p;
                            if self.buf[at] == b'\\' {
                                i = at + 2;
                            } else {
                                i = at + 1;
                                break;
                            }
                        }
                        None => i = self.buf.len(),
                    }
                }
            }
            _ => {
                // number or literal: up to the next delimiter
                loop {
                    if i >= self.buf.len() {
                        let consumed = i - self.pos;
                        if consumed > 4096 {
                            return Err(ScanError::new(
                                start,
                                "a number or literal is implausibly long",
                            ));
                        }
                        let before = self.pos;
                        if !self.fill(consumed + 1)? {
                            i = self.buf.len();
                            break;
                        }
                        i = self.pos + (i - before);
                    }
                    match self.buf[i] {
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b':' => break,
                        _ => i += 1,
                    }
                }
                if i == self.pos {
                    return Err(ScanError::new(
                        start,
                        format!("expected a value but found {}", describe_byte(first)),
                    ));
                }
            }
        }
        if i - self.pos > self.limit {
            return Err(ScanError::new(
                start,
                format!(
                    "a single value is larger than the {} limit",
                    crate::core::file_input::human_limit(self.limit as u64)
                ),
            ));
        }
        let begin = self.pos;
        self.pos = i;
        Ok((start, &self.buf[begin..i]))
    }

    /// Fails unless only whitespace remains.
    pub fn expect_end(&mut self) -> Result<(), ScanError> {
        match self.peek()? {
            None => Ok(()),
            Some(b) => Err(ScanError::new(
                self.offset(),
                format!(
                    "unexpected {} after the end of the document",
                    describe_byte(b)
                ),
            )),
        }
    }
}

/// Describes a byte for an error message without echoing control characters.
pub fn describe_byte(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

/// Converts a serde_json error inside `raw` (which starts at absolute `start`) to an absolute offset.
pub fn json_error(start: u64, raw: &[u8], e: &serde_json::Error) -> ScanError {
    let offset = start + line_col_to_offset(raw, e.line(), e.column()) as u64;
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    ScanError::new(offset, msg)
}

fn line_col_to_offset(raw: &[u8], line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let mut cur_line = 1;
    let mut line_start = 0;
    for (i, &b) in raw.iter().enumerate() {
        if cur_line == line {
            break;
        }
        if b == b'\n' {
            cur_line += 1;
            line_start = i + 1;
        }
    }
    (line_start + column.saturating_sub(1)).min(raw.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns one byte at a time, to exercise every refill path.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() || out.is_empty() {
                return Ok(0);
            }
            out[0] = self.0[0];
            self.0 = &self.0[1..];
            Ok(1)
        }
    }

    #[test]
    fn captures_nested_values_with_escapes_across_refills() {
        let doc = br#" {"a\"}": [1, {"b": "x\\\"]"}], "c": -1.5e3, "d": null} "#;
        for trickle in [false, true] {
            let mut s: Scanner<Box<dyn Read>> = if trickle {
                Scanner::new(Box::new(Trickle(doc)))
            } else {
                Scanner::new(Box::new(&doc[..]))
            };
            s.expect(b'{', "{").unwrap();
            assert_eq!(s.key().unwrap(), "a\"}");
            let (off, v) = s.capture().unwrap();
            assert_eq!(off, 10);
            assert_eq!(v, br#"[1, {"b": "x\\\"]"}]"#);
            assert!(s.next_or_close(b'}', "object").unwrap());
            assert_eq!(s.key().unwrap(), "c");
            assert_eq!(s.capture().unwrap().1, b"-1.5e3");
            assert!(s.next_or_close(b'}', "object").unwrap());
            assert_eq!(s.key().unwrap(), "d");
            assert_eq!(s.capture().unwrap().1, b"null");
            assert!(!s.next_or_close(b'}', "object").unwrap());
            s.expect_end().unwrap();
        }
    }

    #[test]
    fn a_value_over_the_limit_is_refused_whatever_the_buffering() {
        let long = format!("\"{}\"", "a".repeat(1500));
        for doc in [long.clone(), format!("[{long}]")] {
            let mut s = Scanner::with_limit(doc.as_bytes(), 1024);
            let err = s.capture().unwrap_err();
            assert!(err.message.contains("1 KiB limit"), "{err:?}");
            let mut s = Scanner::with_limit(doc.as_bytes(), 2048);
            assert_eq!(s.capture().unwrap().1.len(), doc.len());
        }
    }

    #[test]
    fn truncation_is_reported_with_an_offset() {
        let mut s = Scanner::new(&br#"{"a": [1, 2"#[..]);
        s.expect(b'{', "{").unwrap();
        s.key().unwrap();
        let err = s.capture().unwrap_err();
        assert!(err.message.contains("truncated"), "{err:?}");
    }
}
