//! Shared output helpers: JSON printing and terminal-safe human text.

use color_eyre::Result;
use serde::Serialize;
use std::io::Write;

/// Standard input for `-`: a pipe or a redirected file. A terminal is refused rather than waited
/// on (nothing would say that the command is reading it): the error names `what` is read and says
/// how to give it (`hint`).
pub fn piped_stdin(what: &str, hint: &str) -> Result<std::io::Stdin> {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(color_eyre::eyre::eyre!(
            "{what}: standard input is a terminal; {hint}"
        ));
    }
    Ok(stdin)
}

/// Prints `value` as pretty JSON on stdout, written as it is serialised (a report of a million
/// findings is never held twice, once as values and once as text).
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, TerminalSafe::default());
    value.serialize(&mut ser)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Prints lines on stdout through one buffer as `each` produces them; the first write error is
/// returned (later lines are dropped).
pub fn print_lines(each: impl FnOnce(&mut dyn FnMut(String))) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    each(&mut |line: String| {
        if failed.is_none() {
            if let Err(e) = writeln!(out, "{line}") {
                failed = Some(e);
            }
        }
    });
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(out.flush()?),
    }
}

/// Untrusted text made safe for the terminal.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    crate::text::visible(s)
}

/// A human-readable byte size (shared with the console: `crate::format`).
pub use crate::format::human_bytes;

/// Prints the human report of one verification (`jobs verify`, a portable export's bundle).
pub fn print_verify_report(file: &str, r: &crate::core::verify::Report) -> Result<()> {
    print_lines(|emit| crate::report_text::each_verify_line(file, r, emit))
}

/// serde_json's pretty output with every character that must not reach a terminal raw written as
/// a `\uXXXX` escape: serde_json escapes C0 controls itself, but writes DEL, the C1 controls
/// (U+0080-U+009F: U+009B is a CSI to some terminals) and bidi/invisible formatting characters as
/// they are. The JSON value is the same; only its spelling differs.
#[derive(Default)]
struct TerminalSafe<'a>(serde_json::ser::PrettyFormatter<'a>);

impl serde_json::ser::Formatter for TerminalSafe<'_> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((i, c)) = rest
            .char_indices()
            .find(|&(_, c)| crate::core::text::needs_escape(c))
        {
            w.write_all(&rest.as_bytes()[..i])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(w, "\\u{u:04x}")?;
            }
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::TerminalSafe;
    use serde::Serialize;

    fn pretty(v: &serde_json::Value) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, TerminalSafe::default());
        v.serialize(&mut ser).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_for_a_terminal_escapes_c1_del_and_bidi_and_means_the_same() {
        let v = serde_json::json!({"ua": "a\u{9b}31mX\u{9d}0;t\u{9c}\u{7f}\u{202e}é\u{1b}", "n": [1, 2]});
        let text = pretty(&v);
        // Nothing but the printer's own newlines needs escaping.
        let unsafe_char = |c: char| c != '\n' && crate::core::text::needs_escape(c);
        assert!(!text.chars().any(unsafe_char), "{text:?}");
        assert!(
            text.contains("a\\u009b31mX\\u009d0;t\\u009c\\u007f\\u202eé\\u001b"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        // Plain values print exactly as serde_json's pretty printer prints them.
        let plain = serde_json::json!({"a": [1, {"b": "c d"}], "e": null});
        assert_eq!(
            pretty(&plain),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }
}
