//! Shared output helpers: JSON printing and terminal-safe human text.

use color_eyre::Result;
use serde::Serialize;

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    println!("{text}");
    Ok(())
}

/// Untrusted text made safe for the terminal.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    crate::text::visible(s)
}

/// A human-readable byte size (shared with the console: `crate::format`).
pub use crate::format::human_bytes;
