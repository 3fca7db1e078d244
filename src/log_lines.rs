//! Log output no text can garble: every log line of every crate (airlock's own, and those of the
//! libraries it uses, such as async_nats quoting a NATS server's `-ERR` text) is written with its
//! control and invisible formatting characters escaped ([`crate::text::visible_bytes`]), so a
//! peer's bytes can neither move the terminal's cursor, colour it, nor forge a log line. Airlock's
//! own lines escape untrusted text already; escaping is idempotent (a backslash is kept as it is).

use std::io::Write;
use tracing_subscriber::fmt::MakeWriter;

/// A [`MakeWriter`] whose writers escape each log record before passing it on.
pub struct EscapedLines<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapedLines<M> {
    type Writer = Escaping<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Escaping(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        Escaping(self.0.make_writer_for(meta))
    }
}

/// A writer of log records (the formatter writes each event with one `write_all`): everything but
/// the record's final line break is escaped.
pub struct Escaping<W>(W);

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&escape_record(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `record` with every control or invisible character escaped, its one final line break kept.
pub fn escape_record(record: &[u8]) -> Vec<u8> {
    let (body, end) = match record.strip_suffix(b"\n") {
        Some(body) => (body, "\n"),
        None => (record, ""),
    };
    let mut out = crate::text::visible_bytes(body);
    out.push_str(end);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_one_line_and_no_control_character() {
        let raw = b"ERROR server error: -ERR 'x\x1b[2J\x07\r\nINFO forged\xff'\n";
        let out = String::from_utf8(escape_record(raw)).unwrap();
        assert_eq!(
            out,
            "ERROR server error: -ERR 'x\\x1b[2J\\x07\\r\\nINFO forged\\xff'\n"
        );
        // Already escaped text is left as it is.
        assert_eq!(escape_record(out.as_bytes()), out.as_bytes());
        let mut sink = Vec::new();
        Escaping(&mut sink).write_all(b"a\tb\n").unwrap();
        assert_eq!(sink, b"a\\tb\n");
    }
}
