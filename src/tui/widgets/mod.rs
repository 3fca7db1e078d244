//! Drawing pieces shared by the screens. Widgets draw; they decide nothing about the data.

pub mod ascii;
pub mod bars;
pub mod diff;
pub mod overlay;
pub mod ribbon;
pub mod swimlanes;

use ratatui::layout::Rect;

/// A human-readable byte size.
/// A table row in the selection style when `selected`, else in the base style.
pub fn styled_row<'a>(
    row: ratatui::widgets::Row<'a>,
    selected: bool,
    theme: &crate::tui::theme::Theme,
) -> ratatui::widgets::Row<'a> {
    row.style(if selected {
        theme.selection
    } else {
        theme.base
    })
}

/// The selection marker's cell, a list's first column: `▶` on the selected row (meaning never
/// rests on colour alone).
pub fn marker_cell(selected: bool) -> ratatui::widgets::Cell<'static> {
    ratatui::widgets::Cell::from(if selected { "▶" } else { " " })
}

/// A table row led by the selection marker ([`marker_cell`]), styled as [`styled_row`].
pub fn marked_row<'a>(
    selected: bool,
    cells: impl IntoIterator<Item = ratatui::widgets::Cell<'a>>,
    theme: &crate::tui::theme::Theme,
) -> ratatui::widgets::Row<'a> {
    let row = ratatui::widgets::Row::new(std::iter::once(marker_cell(selected)).chain(cells));
    styled_row(row, selected, theme)
}

/// A bordered panel of `lines`, wrapped to its width and scrolled `scroll` rows down. The scroll
/// is clamped by the rows drawn (after wrapping), so that the last row stops at the panel's bottom:
/// a long value scrolls to its end and a short one never leaves a blank panel. While rows are
/// above or below, the bottom border counts them. Returns the clamped scroll, for the screen to
/// keep (a resize clamps it again).
pub fn scrolled_panel(
    f: &mut ratatui::Frame,
    area: Rect,
    block: ratatui::widgets::Block<'_>,
    lines: Vec<ratatui::text::Line<'_>>,
    scroll: usize,
    theme: &crate::tui::theme::Theme,
) -> usize {
    use ratatui::text::Line;
    use ratatui::widgets::{Paragraph, Wrap};
    let inner = block.inner(area);
    let p = Paragraph::new(lines)
        .style(theme.base)
        .wrap(Wrap { trim: false });
    let total = p.line_count(inner.width);
    if total <= inner.height as usize {
        f.render_widget(p.block(block), area);
        return 0;
    }
    // The rows left beside the note (a block with no bottom border gives it a row).
    let height = block.clone().title_bottom("·").inner(area).height as usize;
    let scroll = scroll.min(total.saturating_sub(height));
    let below = total.saturating_sub(scroll + height);
    let mut parts = Vec::new();
    if scroll > 0 {
        parts.push(format!("↑{scroll}"));
    }
    if below > 0 {
        parts.push(format!("↓{below}"));
    }
    let note = format!(" {} more rows · J/K scroll ", parts.join(" "));
    let block = block.title_bottom(Line::styled(note, theme.muted).right_aligned());
    let at = scroll.min(u16::MAX as usize) as u16;
    f.render_widget(p.block(block).scroll((at, 0)), area);
    scroll
}

/// A detail panel's scroll ([`scrolled_panel`]), kept for the row it shows: another row (another
/// selection, another list) starts at the top.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DetailScroll {
    /// The row shown (a list and its selection).
    of: (usize, usize),
    rows: usize,
}

impl DetailScroll {
    /// J/K: `d` rows down (up when negative); clamped when drawn.
    pub fn scroll(&mut self, d: isize) {
        self.rows = self.rows.saturating_add_signed(d);
    }

    /// Draws the panel of row `of` (see [`scrolled_panel`]).
    pub fn draw(
        &mut self,
        f: &mut ratatui::Frame,
        area: Rect,
        block: ratatui::widgets::Block<'_>,
        lines: Vec<ratatui::text::Line<'_>>,
        of: (usize, usize),
        theme: &crate::tui::theme::Theme,
    ) {
        if self.of != of {
            *self = DetailScroll { of, rows: 0 };
        }
        self.rows = scrolled_panel(f, area, block, lines, self.rows, theme);
    }
}

/// The rows `lines` take when wrapped to `width` columns (as [`scrolled_panel`] draws them).
pub fn wrapped_rows(lines: &[ratatui::text::Line<'_>], width: u16) -> usize {
    ratatui::widgets::Paragraph::new(lines.to_vec())
        .wrap(ratatui::widgets::Wrap { trim: false })
        .line_count(width)
}

/// A screen's error in place of its body: ` ! message`, escaped, wrapped, in the warning style.
pub fn error_note(
    message: &str,
    theme: &crate::tui::theme::Theme,
) -> ratatui::widgets::Paragraph<'static> {
    ratatui::widgets::Paragraph::new(format!(" ! {}", crate::text::visible(message)))
        .style(theme.warning)
        .wrap(ratatui::widgets::Wrap { trim: false })
}

/// The title bar's right side for a screen showing one file: its path (escaped), or nothing.
pub fn path_title(path: Option<impl AsRef<std::path::Path>>) -> String {
    path.map(|p| format!("{} ", crate::text::visible_path(p.as_ref())))
        .unwrap_or_default()
}

/// A one-line tab bar: `lead`, then the items (label, style) that fit in `width` columns around
/// the selected one, which is bracketed; the items left off are counted (`‹N` before, `N›` after).
/// With many tabs (a bundle of many nodes, a store of many tenants) the selected one stays on the
/// line instead of running off its right edge.
pub fn tab_spans(
    lead: ratatui::text::Span<'static>,
    items: &[(String, ratatui::style::Style)],
    selected: usize,
    width: u16,
    muted: ratatui::style::Style,
) -> Vec<ratatui::text::Span<'static>> {
    use ratatui::text::Span;
    let widths: Vec<usize> = items.iter().map(|(l, _)| text_width(l) + 3).collect();
    // Less the lead and the two markers (`‹N ` and `N› `).
    let room = (width as usize).saturating_sub(lead.width() + 12);
    let (first, end) = tab_window(&widths, selected, room);
    // A label wider than the whole line (a long node id) is cut with `…`, not by the line's edge
    // (its brackets or spaces and the gap after it take three columns).
    let room = room.saturating_sub(3);
    let mut spans = vec![lead];
    if first > 0 {
        spans.push(Span::styled(format!("‹{first} "), muted));
    }
    for (i, (label, style)) in items.iter().enumerate().take(end).skip(first) {
        let label = clip(label, room);
        spans.push(if i == selected {
            Span::styled(format!("[{label}]"), *style)
        } else {
            Span::styled(format!(" {label} "), *style)
        });
        spans.push(Span::raw(" "));
    }
    if end < items.len() {
        spans.push(Span::styled(format!("{}› ", items.len() - end), muted));
    }
    spans
}

/// The items of a one-line tab bar to show so that the selected one is on it: `widths` are the
/// items' widths, `room` the columns for them. Returns the first item shown and one past the
/// last: the selected item and as many after it as fit, then as many before it as fit.
pub fn tab_window(widths: &[usize], selected: usize, room: usize) -> (usize, usize) {
    if widths.is_empty() {
        return (0, 0);
    }
    let selected = selected.min(widths.len() - 1);
    let (mut first, mut end) = (selected, selected + 1);
    let mut used = widths[selected];
    // From the start when everything up to the selected item fits, as a plain tab bar would.
    let upto: usize = widths[..=selected].iter().sum();
    if upto <= room {
        first = 0;
        used = upto;
    }
    while end < widths.len() && used + widths[end] <= room {
        used += widths[end];
        end += 1;
    }
    while first > 0 && used + widths[first - 1] <= room {
        first -= 1;
        used += widths[first];
    }
    (first, end)
}

/// Where a click at (`col`, `row`) lands in a bordered table drawn in `area` whose first shown row
/// is `offset`: `None` outside the table, `Some(None)` on its top line (border or header),
/// `Some(Some(i))` on row `i`.
pub fn table_click(area: Rect, offset: usize, col: u16, row: u16) -> Option<Option<usize>> {
    if !area.contains(ratatui::layout::Position::new(col, row)) {
        return None;
    }
    let r = (row - area.y) as usize;
    Some((r >= 1).then(|| offset + r - 1))
}

/// The text of a drawn buffer, one line per row, as a terminal shows it: a wide character's
/// second cell (hidden behind it) is left out (for tests of what a screen draws).
#[cfg(test)]
pub fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    (0..buf.area.height)
        .map(|y| {
            let mut line = String::new();
            let mut x = 0;
            while x < buf.area.width {
                let symbol = buf[(x, y)].symbol();
                line.push_str(symbol);
                x += (text_width(symbol) as u16).max(1);
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// True when drawn `text` shows `value` cut: a start of it (a whole grapheme or more) right
/// before `…`, and the whole value nowhere (for tests of squeezed table cells).
#[cfg(test)]
pub fn shows_cut(text: &str, value: &str) -> bool {
    use unicode_segmentation::UnicodeSegmentation;
    let mut starts = value
        .grapheme_indices(true)
        .skip(1)
        .map(|(at, _)| &value[..at]);
    starts.any(|head| text.contains(&format!("{head}…"))) && !text.contains(value)
}

pub use crate::format::{count, human_bytes, percent, plural};

/// The first row to show so that `selected` stays visible in a window of `height` rows out of
/// `total`, moving the window as little as possible from `offset`.
pub fn table_window(offset: usize, selected: usize, height: usize, total: usize) -> usize {
    if height == 0 || total == 0 {
        return 0;
    }
    let mut off = offset.min(total.saturating_sub(1));
    if selected < off {
        off = selected;
    } else if selected >= off + height {
        off = selected + 1 - height;
    }
    off.min(total.saturating_sub(height))
}

/// A rectangle of at most `w` x `h` centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Hands memory freed by a large drop (a merge plan) back to the system, where the allocator
/// supports it (glibc keeps freed small blocks in its arenas otherwise).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap memory; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The width of a number column whose largest value is `max` (every digit fits, at least the
/// header's `min` columns).
pub fn number_width(max: u64, min: u16) -> u16 {
    (max.checked_ilog10().unwrap_or(0) as u16 + 1).max(min)
}

/// The columns a grapheme (a character and the marks combined with it) takes on a terminal, as
/// ratatui's buffer draws it: a wide character (CJK, most emoji) two, a zero-width or combining
/// one none. A control character (which `crate::text::visible` escapes first) draws nothing.
fn grapheme_width(g: &str) -> usize {
    use ratatui::buffer::CellWidth;
    if g.contains(char::is_control) {
        return 0;
    }
    g.cell_width() as usize
}

/// The columns `s` takes on a terminal (not its characters: see `grapheme_width`).
pub fn text_width(s: &str) -> usize {
    use unicode_segmentation::UnicodeSegmentation;
    s.graphemes(true).map(grapheme_width).sum()
}

/// The longest start of `s` that takes at most `width` columns, and its width: cut between
/// graphemes, so a wide character is never split and a combining mark stays on its base.
pub(crate) fn head_within(s: &str, width: usize) -> (&str, usize) {
    use unicode_segmentation::UnicodeSegmentation;
    let mut used = 0;
    for (at, g) in s.grapheme_indices(true) {
        let w = grapheme_width(g);
        if used + w > width {
            return (&s[..at], used);
        }
        used += w;
    }
    (s, used)
}

/// The longest end of `s` that takes at most `width` columns (see `head_within`).
fn tail_within(s: &str, width: usize) -> &str {
    use unicode_segmentation::UnicodeSegmentation;
    let mut used = 0;
    let mut start = s.len();
    for (at, g) in s.grapheme_indices(true).rev() {
        let w = grapheme_width(g);
        if used + w > width {
            break;
        }
        used += w;
        start = at;
    }
    &s[start..]
}

/// What an input field shows of its `text` in `width` columns: all of it when it fits, else its
/// end led by `…` (the end is where typing happens: a field cut at its right edge hid what was
/// being typed, and the cursor with it).
pub fn input_tail(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    format!("…{}", tail_within(text, width - 1))
}

/// Truncates `s` to `width` terminal columns, with an ellipsis when cut. Measured in columns
/// (`text_width`), not characters: a wide character counts two and is never split (the cut
/// value is a column short instead), a combining mark counts none.
pub fn clip(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let (head, _) = head_within(s, width - 1);
    let mut out = head.to_string();
    out.push('…');
    out
}

/// Shortens `s` to `width` terminal columns by cutting its middle, marked with `…`: its start
/// (what happened) and its end (often a file name or a number, where a cut one reads as another)
/// both stay. Measured in columns as [`clip`].
pub fn clip_middle(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let (head, used) = head_within(s, (width - 1) / 2);
    let tail = tail_within(s, width - 1 - used);
    let mut out = head.to_string();
    out.push('…');
    out.push_str(tail);
    out
}

/// `s` in exactly `width` terminal columns: cut with `…` ([`clip`]) or padded with spaces on the
/// right (a fixed-width column of a line, which `format!`'s padding counts in characters).
pub fn fit(s: &str, width: usize) -> String {
    let mut out = clip(s, width);
    let pad = width.saturating_sub(text_width(&out));
    out.extend(std::iter::repeat_n(' ', pad));
    out
}

/// The widths ratatui's [`ratatui::widgets::Table`] gives columns of `constraints` in `width`
/// columns with its defaults (one column between columns, `Flex::Start`, no selection column), so
/// that a screen can cut each cell to what its column really gets ([`clip`], with `…`) instead
/// of letting the table cut it in silence when the columns are squeezed.
pub fn table_column_widths(width: u16, constraints: &[ratatui::layout::Constraint]) -> Vec<usize> {
    ratatui::layout::Layout::horizontal(constraints.iter().copied())
        .flex(ratatui::layout::Flex::Start)
        .spacing(1)
        .split(Rect::new(0, 0, width, 1))
        .iter()
        .map(|r| r.width as usize)
        .collect()
}

/// `spans` cut to `width` terminal columns as one line: whole when they fit, else the span at the
/// cut ends with `…` (in its style) and those after it are left off, so that a one-line
/// paragraph never loses its end in silence at the terminal's edge.
pub fn clip_spans(
    spans: Vec<ratatui::text::Span<'static>>,
    width: usize,
) -> Vec<ratatui::text::Span<'static>> {
    use ratatui::text::Span;
    if spans.iter().map(|s| text_width(&s.content)).sum::<usize>() <= width {
        return spans;
    }
    let mut room = width.saturating_sub(1);
    let mut out = Vec::new();
    for s in spans {
        let w = text_width(&s.content);
        if w <= room {
            room -= w;
            out.push(s);
            continue;
        }
        if width > 0 {
            let (head, _) = head_within(&s.content, room);
            out.push(Span::styled(format!("{head}…"), s.style));
        }
        break;
    }
    out
}

/// A list's head line in `width` columns: `lead` (a label), `path` cut in its middle to the room
/// `rest` leaves it (at least 12 columns), then `rest` (the list's state, its `/` filter); cut
/// with `…` when even that does not fit. A long directory or store path no longer pushes the
/// filter being typed off the line's end.
pub fn head_line(
    lead: ratatui::text::Span<'static>,
    path: ratatui::text::Span<'static>,
    rest: Vec<ratatui::text::Span<'static>>,
    width: usize,
) -> ratatui::text::Line<'static> {
    let used =
        text_width(&lead.content) + rest.iter().map(|s| text_width(&s.content)).sum::<usize>();
    let room = width.saturating_sub(used).max(12);
    let path = ratatui::text::Span::styled(clip_middle(&path.content, room), path.style);
    let spans = [vec![lead, path], rest].concat();
    ratatui::text::Line::from(clip_spans(spans, width))
}

/// A table's header row: `labels` cut to their columns' widths `w` (`table_column_widths`).
pub fn header_row(
    labels: &[&str],
    w: &[usize],
    style: ratatui::style::Style,
) -> ratatui::widgets::Row<'static> {
    ratatui::widgets::Row::new(labels.iter().zip(w).map(|(h, w)| clip(h, *w))).style(style)
}

/// `text` word-wrapped into rows of at most `width` terminal columns (a word longer than a row is
/// split between graphemes, so a wide character is never split).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    use unicode_segmentation::UnicodeSegmentation;
    let width = width.max(1);
    let mut rows: Vec<String> = Vec::new();
    let mut row = String::new();
    let mut row_w = 0;
    for word in text.split_whitespace() {
        let mut word = word;
        loop {
            let sep = usize::from(row_w > 0);
            let word_w = text_width(word);
            if row_w + sep + word_w <= width {
                if sep == 1 {
                    row.push(' ');
                }
                row.push_str(word);
                row_w += sep + word_w;
                break;
            }
            if row_w > 0 {
                rows.push(std::mem::take(&mut row));
                row_w = 0;
                continue;
            }
            // A word longer than a whole row: split it (at least one grapheme a row, so that a
            // character wider than the row still moves on).
            let (mut head, _) = head_within(word, width);
            if head.is_empty() {
                head = word.graphemes(true).next().unwrap_or(word);
            }
            rows.push(head.to_string());
            word = &word[head.len()..];
        }
    }
    if row_w > 0 || rows.is_empty() {
        rows.push(row);
    }
    rows
}

/// `parts` as ` · a · b · c` in at most `width` columns: as many whole parts, in order, as fit,
/// then ` · …` for the rest, so that no value is cut mid-word to read as another.
pub fn fit_parts(parts: &[String], width: usize) -> String {
    const MORE: &str = " · …";
    let mut out = String::new();
    let mut used = 0;
    for (i, p) in parts.iter().enumerate() {
        let w = 3 + text_width(p);
        // The last part needs no room for the ellipsis after it.
        let reserve = if i + 1 == parts.len() {
            0
        } else {
            MORE.chars().count()
        };
        if used + w + reserve > width {
            let room = if used + MORE.chars().count() <= width {
                MORE
            } else {
                ""
            };
            out.push_str(room);
            return out;
        }
        out.push_str(" · ");
        out.push_str(p);
        used += w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tab bar too narrow for every tab keeps the selected one on it, with its neighbours as
    /// room allows; a wide one shows them all from the first.
    #[test]
    fn a_tab_window_keeps_the_selected_tab() {
        let widths = [10; 40];
        assert_eq!(tab_window(&widths, 0, 1000), (0, 40));
        assert_eq!(tab_window(&widths, 0, 35), (0, 3));
        assert_eq!(tab_window(&widths, 39, 35), (37, 40));
        assert_eq!(tab_window(&widths, 20, 35), (20, 23));
        // A tab wider than the room is still the one shown.
        assert_eq!(tab_window(&[50, 10], 0, 20), (0, 1));
        assert_eq!(tab_window(&[], 3, 20), (0, 0));
        for selected in 0..40 {
            let (first, end) = tab_window(&widths, selected, 35);
            assert!(
                (first..end).contains(&selected),
                "{selected}: {first}..{end}"
            );
            assert!(widths[first..end].iter().sum::<usize>() <= 35);
        }
    }

    /// A tab label wider than the whole line is cut with `…` inside its brackets (the line's edge
    /// cut it in silence); labels are measured in columns (a wide character counts two).
    #[test]
    fn a_tab_wider_than_the_line_is_cut() {
        use ratatui::text::Span;
        let style = ratatui::style::Style::default();
        let label = "node-".to_string() + &"x".repeat(100);
        let items = [(label.clone(), style), ("b".to_string(), style)];
        let spans = tab_spans(Span::raw(" nodes: "), &items, 0, 40, style);
        let line: String = spans.iter().map(|s| s.content.to_string()).collect();
        assert!(text_width(&line) <= 40, "{line:?}");
        assert!(
            line.starts_with(" nodes: [node-xx") && line.contains("…]"),
            "{line:?}"
        );
        // Wide labels (eight columns, five characters): three of four fit in 47 columns.
        let wide: Vec<(String, _)> = (0..4).map(|i| (format!("日本語-{i}"), style)).collect();
        let spans = tab_spans(Span::raw(""), &wide, 3, 47, style);
        let line: String = spans.iter().map(|s| s.content.to_string()).collect();
        assert!(text_width(&line) <= 47, "{line:?}");
        assert!(line.starts_with("‹1 "), "{line:?}");
        assert!(line.contains("[日本語-3]"), "{line:?}");
    }

    /// A file name's bytes that are not UTF-8 are shown as escapes, not as U+FFFD, and its
    /// control characters are made visible.
    #[cfg(unix)]
    #[test]
    fn path_titles_show_every_byte_of_a_name() {
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/x/a\xff\x1b[31m.alwl"));
        let t = path_title(Some(p));
        assert!(!t.contains('\u{fffd}') && !t.contains('\u{1b}'), "{t:?}");
        assert!(t.contains("\\xff"), "{t:?}");
    }

    /// The widths agree with what a Table draws: cells cut to them end with `…` on screen.
    #[test]
    fn table_column_widths_match_the_table() {
        use ratatui::layout::Constraint;
        use ratatui::widgets::{Row, Table};
        let constraints = [
            Constraint::Min(20),
            Constraint::Length(15),
            Constraint::Length(13),
            Constraint::Length(9),
        ];
        for width in [80u16, 60, 40] {
            let w = table_column_widths(width, &constraints);
            let values = [
                "a-long-file-name.json",
                "✗ 2 findings",
                "not a readable bundle",
                "19.8 KiB",
            ];
            let cells: Vec<String> = values.iter().zip(&w).map(|(v, w)| clip(v, *w)).collect();
            let table = Table::new([Row::new(cells.clone())], constraints);
            let mut buf = ratatui::buffer::Buffer::empty(Rect::new(0, 0, width, 1));
            ratatui::widgets::Widget::render(table, buf.area, &mut buf);
            let drawn = buffer_text(&buf);
            for c in &cells {
                assert!(drawn.contains(c.as_str()), "{width}: {c:?} in {drawn:?}");
            }
        }
    }

    #[test]
    fn words_wrap_at_the_width() {
        assert_eq!(wrap_words("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap_words("abcdefgh ij", 3), ["abc", "def", "gh", "ij"]);
        assert_eq!(wrap_words("", 5), [""]);
        assert_eq!(wrap_words("one", 0), ["o", "n", "e"]);
        // By columns: a wide character takes two and is never split.
        assert_eq!(wrap_words("日本語 ab", 4), ["日本", "語", "ab"]);
        assert_eq!(wrap_words("日本", 1), ["日", "本"]);
        assert_eq!(
            wrap_words("e\u{301}e\u{301}e\u{301}", 2),
            ["e\u{301}e\u{301}", "e\u{301}"]
        );
    }

    #[test]
    fn parts_are_kept_whole_or_left_off() {
        let parts: Vec<String> = ["tenant acme", "2 node logs", "signature absent"]
            .map(String::from)
            .to_vec();
        let all = " · tenant acme · 2 node logs · signature absent";
        assert_eq!(fit_parts(&parts, 100), all);
        assert_eq!(fit_parts(&parts, all.chars().count()), all);
        assert_eq!(fit_parts(&parts, 40), " · tenant acme · 2 node logs · …");
        assert_eq!(fit_parts(&parts, 18), " · tenant acme · …");
        assert_eq!(fit_parts(&parts, 5), " · …");
        assert_eq!(fit_parts(&parts, 2), "");
    }

    #[test]
    fn window_follows_the_selection() {
        assert_eq!(table_window(0, 0, 10, 100), 0);
        assert_eq!(table_window(0, 15, 10, 100), 6);
        assert_eq!(table_window(6, 3, 10, 100), 3);
        assert_eq!(table_window(0, 99, 10, 100), 90);
        assert_eq!(table_window(95, 99, 10, 100), 90);
        assert_eq!(table_window(0, 2, 10, 5), 0);
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
        assert_eq!(clip_middle("abcdefgh", 5), "ab…gh");
        assert_eq!(clip_middle("abcdefgh", 6), "ab…fgh");
        assert_eq!(clip_middle("abcdefgh", 8), "abcdefgh");
        assert_eq!(clip_middle("abcdefgh", 1), "…");
        assert_eq!(clip_middle("abcdefgh", 0), "");
    }

    /// Clipping counts terminal columns: a wide character takes two and is never split, a
    /// combining mark takes none and stays on its base; what `clip` returns fits its width as
    /// ratatui draws it, and a cut value ends with `…`.
    #[test]
    fn clipping_counts_columns_not_characters() {
        // Six wide characters: twelve columns.
        let wide = "日本語の名前";
        assert_eq!(text_width(wide), 12);
        assert_eq!(clip(wide, 12), wide);
        assert_eq!(clip(wide, 6), "日本…");
        // An odd width leaves a column rather than split a character.
        assert_eq!(clip(wide, 7), "日本語…");
        assert_eq!(clip(wide, 2), "…");
        assert_eq!(clip(wide, 1), "…");
        // e + COMBINING ACUTE ACCENT: five characters, three columns; the mark stays on its e.
        let combined = "cafe\u{301}s";
        assert_eq!(text_width(combined), 5);
        assert_eq!(clip(combined, 5), combined);
        assert_eq!(clip(combined, 4), "caf…");
        assert_eq!(clip("cafe\u{301}s!", 5), "cafe\u{301}…");
        // Emoji (one with a variation selector) take two columns each.
        assert_eq!(clip("🔑🔑🔑", 5), "🔑🔑…");
        assert_eq!(clip("a❤\u{fe0f}b", 3), "a…");
        // The middle is cut by columns too: the head gets at most half, the tail the rest.
        assert_eq!(clip_middle(wide, 7), "日…名前");
        assert_eq!(clip_middle(wide, 8), "日…名前");
        assert_eq!(clip_middle(wide, 9), "日本…名前");
        assert_eq!(clip_middle("ab日本cd", 5), "ab…cd");
        assert_eq!(input_tail("abc", 3), "abc");
        assert_eq!(input_tail("abcdef", 4), "…def");
        assert_eq!(input_tail("日本語", 4), "…語");
        assert_eq!(input_tail("日本語", 0), "");
        assert_eq!(fit("日本語", 5), "日本…");
        assert_eq!(fit("日本語", 4), "日… ");
        assert_eq!(fit("日", 4), "日  ");
        assert_eq!(clip_middle("日ab本", 4), "…b本");
        assert_eq!(clip_middle(combined, 4), "c…e\u{301}s");
        for s in [wide, combined, "a日b本c語d", "🔑x🔑y", "e\u{301}\u{301}x日"] {
            for w in 0..=text_width(s) + 1 {
                for cut in [clip(s, w), clip_middle(s, w)] {
                    assert!(text_width(&cut) <= w, "{s:?} at {w}: {cut:?}");
                    let mut buf = ratatui::buffer::Buffer::empty(Rect::new(0, 0, w as u16, 1));
                    buf.set_string(0, 0, &cut, ratatui::style::Style::default());
                    let drawn = buffer_text(&buf);
                    if (1..text_width(s)).contains(&w) {
                        assert!(drawn.contains('…'), "{s:?} at {w}: {drawn:?}");
                    }
                }
            }
        }
    }

    /// A line of spans too wide for its width ends with `…` in the style of the span it cuts.
    #[test]
    fn spans_are_cut_with_an_ellipsis() {
        use ratatui::style::Style;
        use ratatui::text::Span;
        let spans = || {
            vec![
                Span::raw(" 日本.alwl"),
                Span::styled(" · node ", Style::new().dim()),
                Span::styled("clean", Style::new().bold()),
            ]
        };
        let text = |v: &[Span]| v.iter().map(|s| s.content.to_string()).collect::<String>();
        assert_eq!(text(&clip_spans(spans(), 100)), " 日本.alwl · node clean");
        assert_eq!(text(&clip_spans(spans(), 23)), " 日本.alwl · node clean");
        let cut = clip_spans(spans(), 22);
        assert_eq!(text(&cut), " 日本.alwl · node cle…");
        assert_eq!(cut[2].style, Style::new().bold());
        assert_eq!(text(&clip_spans(spans(), 5)), " 日…");
        assert_eq!(text(&clip_spans(spans(), 0)), "");
    }

    #[test]
    fn number_columns_fit_every_digit() {
        assert_eq!(number_width(0, 1), 1);
        assert_eq!(number_width(299_999, 3), 6);
        assert_eq!(number_width(1_099_999, 1), 7);
        assert_eq!(number_width(u64::MAX, 1), 20);
    }
}
