//! Shared output helpers: JSON printing and terminal-safe human text.

use color_eyre::Result;
use serde::Serialize;
use std::io::Write;

/// Prints `value` as pretty JSON on stdout, written as it is serialised (a report of a million
/// findings is never held twice, once as values and once as text).
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
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
