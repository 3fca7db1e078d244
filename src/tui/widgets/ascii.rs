//! Linux VT and serial consoles (`TERM=linux`, `vt100…`, or `--ascii`): every frame is brought
//! down to what they show — ASCII glyphs (box drawing, ribbons, bars, status marks) and the 16
//! ANSI colours. Done once on the finished buffer, so no screen can forget a glyph.

use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// The ASCII stand-in of a console glyph; `?` for any other non-ASCII character.
fn ascii_of(c: char) -> char {
    match c {
        '─' | '━' | '═' | '╌' | '┄' => '-',
        '│' | '┃' | '║' | '╎' | '┆' => '|',
        '┌' | '┐' | '└' | '┘' | '├' | '┤' | '┬' | '┴' | '┼' | '╭' | '╮' | '╯' | '╰' | '╔' | '╗'
        | '╚' | '╝' => '+',
        '█' | '▉' | '▊' | '▋' | '▌' | '▍' | '▎' | '▏' | '▇' | '▆' | '▅' | '▄' | '▃' | '▂' | '▁'
        | '■' => '#',
        '░' | '▒' | '▓' => ':',
        '▶' | '►' | '→' | '›' => '>',
        '◀' | '←' | '‹' => '<',
        '↑' => '^',
        '↓' => 'v',
        '✓' | '✔' => '+',
        '✗' | '✘' | '✖' => 'x',
        '◉' | '●' | '•' => '*',
        '○' | '◌' => 'o',
        '◔' | '◑' | '◕' => '~',
        '◆' | '◇' => '@',
        '⊘' | '∅' => '0',
        '≠' => '!',
        '·' | '…' => '.',
        '—' | '–' => '-',
        '⚠' => '!',
        c if c.is_ascii() => c,
        _ => '?',
    }
}

/// The 16 ANSI colours with xterm's default RGB values.
const ANSI16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

fn nearest(r: u8, g: u8, b: u8) -> Color {
    let d = |(x, y, z): (u8, u8, u8)| {
        let (dr, dg, db) = (
            r as i32 - x as i32,
            g as i32 - y as i32,
            b as i32 - z as i32,
        );
        dr * dr + dg * dg + db * db
    };
    ANSI16
        .iter()
        .min_by_key(|(_, rgb)| d(*rgb))
        .map(|(c, _)| *c)
        .unwrap_or(Color::Reset)
}

/// A colour as one of the 16 (Reset stays: the terminal's own default).
pub fn to_16(c: Color) -> Color {
    match c {
        Color::Rgb(r, g, b) => nearest(r, g, b),
        Color::Indexed(i) if i < 16 => ANSI16[i as usize].0,
        Color::Indexed(i) if i >= 232 => {
            let v = 8 + (i - 232) * 10;
            nearest(v, v, v)
        }
        Color::Indexed(i) => {
            let i = i - 16;
            let level = |n: u8| if n == 0 { 0 } else { 55 + n * 40 };
            nearest(level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        other => other,
    }
}

/// Rewrites a finished frame for a VT or serial console.
pub fn downgrade(buf: &mut Buffer) {
    for cell in buf.content.iter_mut() {
        let sym = cell.symbol();
        if !sym.is_ascii() {
            let mapped: String = sym.chars().map(ascii_of).collect();
            cell.set_symbol(&mapped);
        }
        cell.fg = to_16(cell.fg);
        cell.bg = to_16(cell.bg);
    }
}

/// Whether the terminal wants ASCII: `TERM=linux` (the Linux VT) or a `vt100`-family or
/// `vt220` serial terminal, or `dumb`.
pub fn term_wants_ascii(term: Option<&str>) -> bool {
    term.is_some_and(|t| {
        t == "linux" || t.starts_with("vt1") || t.starts_with("vt2") || t == "dumb"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_and_colours_come_down() {
        assert_eq!(ascii_of('┌'), '+');
        assert_eq!(ascii_of('✓'), '+');
        assert_eq!(ascii_of('é'), '?');
        assert_eq!(to_16(Color::Rgb(0xfb, 0x49, 0x34)), Color::LightRed);
        assert_eq!(to_16(Color::Indexed(9)), Color::LightRed);
        assert_eq!(to_16(Color::Reset), Color::Reset);
        assert!(term_wants_ascii(Some("linux")));
        assert!(term_wants_ascii(Some("vt100")));
        assert!(!term_wants_ascii(Some("xterm-256color")));
        assert!(!term_wants_ascii(None));
    }
}
