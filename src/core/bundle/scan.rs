//! A small pull scanner over JSON bytes from any reader: it walks the structure the bundle reader
//! needs (objects, arrays, keys) and captures whole values as byte slices with their absolute offsets,
//! so a bundle of any size is read in one pass with memory bounded by its largest single entry.

use super::block16::skip_ws;
use std::io::Read;

/// Largest single JSON value (one entry, one field) the scanner will capture.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;
const CHUNK: usize = 1 << 20;

/// JSON's structural bytes (named: a brace in a byte literal reads as a block to line counters).
pub const OBJECT_OPEN: u8 = 0x7b;
pub const OBJECT_CLOSE: u8 = 0x7d;
pub const ARRAY_OPEN: u8 = 0x5b;
pub const ARRAY_CLOSE: u8 = 0x5d;

/// Position of the first quote, bracket or brace in `bytes`.
fn structural(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| {
        matches!(
            b,
            b'"' | OBJECT_OPEN | ARRAY_OPEN | OBJECT_CLOSE | ARRAY_CLOSE
        )
    })
}

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

/// Reads until `out` is full or the input ends; the number of bytes read.
fn read_full(r: &mut impl Read, out: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < out.len() {
        match r.read(&mut out[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

pub struct Scanner<R> {
    reader: R,
    /// Zeroed once and reused: `buf[..end]` holds the bytes read, the rest is room for the next
    /// read (so no read zeroes or moves more than it must).
    buf: Vec<u8>,
    /// End of the bytes read in `buf`.
    end: usize,
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
            buf: Vec::new(),
            end: 0,
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
        while self.end - self.pos < n {
            if self.eof {
                return Ok(false);
            }
            let want = CHUNK.max(n);
            if self.buf.len() - self.end < want {
                // Out of room: move the unread bytes (fewer than `n`) to the front, then grow the
                // buffer if that is not enough (only for a value larger than a chunk).
                self.buf.copy_within(self.pos..self.end, 0);
                self.base += self.pos as u64;
                self.end -= self.pos;
                self.pos = 0;
                if self.buf.len() - self.end < want {
                    self.buf.resize(self.end + want, 0);
                }
            }
            let got = read_full(&mut self.reader, &mut self.buf[self.end..self.end + want])
                .map_err(|e| ScanError::new(self.offset(), format!("read failed: {e}")))?;
            self.end += got;
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
            // The unread bytes at hand, sixteen at a time (a pretty-printed bundle has a line
            // break and indentation before every entry).
            match skip_ws(&self.buf[self.pos..self.end], 0) {
                Some(i) => {
                    self.pos += i;
                    return Ok(Some(self.buf[self.pos]));
                }
                None => self.pos = self.end,
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

    /// The unread bytes already in the buffer (after [`Scanner::peek`], at least one unless the
    /// input ended); they may end anywhere, even inside a value.
    pub fn window(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Consumes `n` bytes of [`Scanner::window`].
    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.end);
    }

    /// The largest value [`Scanner::capture`] returns.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Makes the bytes up to `buf[*i + need - 1]` available, refilling the buffer (which may move its
    /// start: `*i` is adjusted to keep pointing at the same byte); returns false at end of input.
    fn ensure(&mut self, i: &mut usize, need: usize) -> Result<bool, ScanError> {
        let before = self.pos;
        if !self.fill(*i - self.pos + need)? {
            return Ok(false);
        }
        *i = self.pos + (*i - before);
        Ok(true)
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
        let end = match first {
            OBJECT_OPEN | ARRAY_OPEN => self.container_end(start)?,
            b'"' => self.string_end(start)?,
            _ => self.scalar_end(start, first)?,
        };
        if end - self.pos > self.limit {
            return Err(ScanError::new(
                start,
                format!(
                    "a single value is larger than the {} limit",
                    crate::core::file_input::human_limit(self.limit as u64)
                ),
            ));
        }
        let begin = self.pos;
        self.pos = end;
        Ok((start, &self.buf[begin..end]))
    }

    /// The end of the object or array starting at `self.pos`.
    fn container_end(&mut self, start: u64) -> Result<usize, ScanError> {
        let mut i = self.pos;
        let mut depth: u32 = 0;
        let mut in_string = false;
        loop {
            if i >= self.end {
                if i - self.pos > self.limit {
                    return Err(ScanError::new(
                        start,
                        "a single value is larger than 256 MiB",
                    ));
                }
                let abs = self.base + i as u64;
                if !self.ensure(&mut i, 1)? {
                    return Err(ScanError::new(
                        abs,
                        "the file ends inside a value (truncated?)",
                    ));
                }
            }
            if in_string {
                match memchr::memchr2(b'"', b'\\', &self.buf[i..self.end]) {
                    Some(p) if self.buf[i + p] == b'\\' => {
                        // skip the escaped byte (may need a refill)
                        i += p;
                        if i + 1 >= self.end {
                            let abs = self.base + i as u64;
                            if !self.ensure(&mut i, 2)? {
                                return Err(ScanError::new(
                                    abs,
                                    "the file ends inside a string (truncated?)",
                                ));
                            }
                        }
                        i += 2;
                    }
                    Some(p) => {
                        in_string = false;
                        i += p + 1;
                    }
                    None => i = self.end,
                }
                continue;
            }
            match structural(&self.buf[i..self.end]) {
                Some(p) => {
                    match self.buf[i + p] {
                        b'"' => in_string = true,
                        OBJECT_OPEN | ARRAY_OPEN => depth += 1,
                        _ => depth -= 1,
                    }
                    i += p + 1;
                    if depth == 0 {
                        return Ok(i);
                    }
                }
                None => i = self.end,
            }
        }
    }

    /// The end of the string starting at `self.pos`.
    fn string_end(&mut self, start: u64) -> Result<usize, ScanError> {
        let mut i = self.pos + 1;
        loop {
            if i >= self.end {
                if i - self.pos > self.limit {
                    return Err(ScanError::new(
                        start,
                        "a single string is larger than 256 MiB",
                    ));
                }
                let abs = self.base + i as u64;
                if !self.ensure(&mut i, 1)? {
                    return Err(ScanError::new(
                        abs,
                        "the file ends inside a string (truncated?)",
                    ));
                }
            }
            match memchr::memchr2(b'"', b'\\', &self.buf[i..self.end]) {
                Some(p) if self.buf[i + p] == b'\\' => i += p + 2,
                Some(p) => return Ok(i + p + 1),
                None => i = self.end,
            }
        }
    }

    /// The end of the number or literal starting at `self.pos` (up to the next delimiter).
    fn scalar_end(&mut self, start: u64, first: u8) -> Result<usize, ScanError> {
        let mut i = self.pos;
        loop {
            if i >= self.end {
                if i - self.pos > 4096 {
                    return Err(ScanError::new(
                        start,
                        "a number or literal is implausibly long",
                    ));
                }
                if !self.ensure(&mut i, 1)? {
                    i = self.end;
                    break;
                }
            }
            match self.buf[i] {
                b',' | OBJECT_CLOSE | ARRAY_CLOSE | b' ' | b'\t' | b'\n' | b'\r' | b':' => break,
                _ => i += 1,
            }
        }
        if i == self.pos {
            return Err(ScanError::new(
                start,
                format!("expected a value but found {}", describe_byte(first)),
            ));
        }
        Ok(i)
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
    fn whitespace_runs_of_any_length_are_skipped_across_refills() {
        // Runs shorter and longer than a block, and one across the end of the first chunk.
        for (lead, run) in [
            (0, 3),
            (0, 40),
            (CHUNK - 1, 2),
            (CHUNK - 20, 45),
            (CHUNK - 3, 1),
        ] {
            let ws: String = " \t\n\r".chars().cycle().take(run).collect();
            let doc = format!("[\"{}\",{ws}7{ws}]", "a".repeat(lead));
            let mut s = Scanner::new(doc.as_bytes());
            s.expect(b'[', "[").unwrap();
            s.capture().unwrap();
            assert!(s.next_or_close(b']', "array").unwrap());
            assert_eq!(s.peek().unwrap(), Some(b'7'));
            assert_eq!(
                s.offset() as usize,
                lead + 4 + run,
                "run {run} after {lead}"
            );
            assert_eq!(s.capture().unwrap().1, b"7");
            assert!(!s.next_or_close(b']', "array").unwrap());
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
