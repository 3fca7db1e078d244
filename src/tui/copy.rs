//! `y`: copying a value to the user's clipboard through the terminal (OSC 52, which works over
//! SSH and in tmux with `set-clipboard on`) and, because a terminal may ignore it, to a file.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::io::Write;
use std::path::Path;

/// Largest value sent as OSC 52 (terminals cap the sequence; a proof fits).
pub const OSC52_MAX: usize = 64 * 1024;

/// Writes `text` as an OSC 52 "set clipboard" sequence. Control characters never reach the
/// terminal raw: the payload is base64.
pub fn send_osc52(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    if text.len() > OSC52_MAX {
        return Ok(());
    }
    write!(out, "\x1b]52;c;{}\x07", B64.encode(text.as_bytes()))?;
    out.flush()
}

/// Writes `text` to the fallback file (created with its directory; replaced whole).
pub fn write_fallback(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_is_base64_in_one_sequence() {
        let mut out = Vec::new();
        send_osc52(&mut out, "job\x1b[2J").unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s, format!("\x1b]52;c;{}\x07", B64.encode("job\x1b[2J")));
        assert_eq!(s.matches('\x1b').count(), 1);
    }
}
