//! Overlays drawn over a screen: the help overlay and the command palette, both generated from the
//! action table.

use crate::tui::action::{self, Binding, Mode, ScreenId};
use crate::tui::theme::Theme;
use crate::tui::widgets::centered;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table};
use ratatui::Frame;

/// The bindings the help overlay lists for `screen` and `filter`.
pub fn help_rows(screen: ScreenId, mode: Mode, filter: &str) -> Vec<&'static Binding> {
    action::active(screen, mode)
        .filter(|b| action::matches_filter(b, filter))
        .collect()
}

/// The bindings the palette offers, by name.
pub fn palette_rows(screen: ScreenId, mode: Mode, input: &str) -> Vec<&'static Binding> {
    let f = input.trim().to_lowercase();
    let mut rows: Vec<&'static Binding> = action::active(screen, mode)
        .filter(|b| f.is_empty() || b.name.contains(&f) || b.help.to_lowercase().contains(&f))
        .collect();
    // An exact name first, then name matches, then help-text matches; otherwise the table's
    // order (`:trust` runs trust, not another command whose name or help contains it).
    rows.sort_by_key(|b| {
        if !f.is_empty() && b.name == f {
            0
        } else if f.is_empty() || b.name.contains(&f) {
            1
        } else {
            2
        }
    });
    rows.dedup_by_key(|b| b.name);
    rows
}

/// A title that fits on the top border of a box `width` columns wide (the corners take two):
/// whole when it fits, else cut with `…` so that a cut word does not read as a whole one.
fn fit_title(title: &str, width: u16) -> String {
    crate::tui::widgets::clip(title, (width as usize).saturating_sub(2))
}

/// The width of a box whose top border holds `title` whole.
fn title_width(title: &str) -> u16 {
    (crate::tui::widgets::text_width(title) + 2).min(u16::MAX as usize) as u16
}

fn frame_box<'a>(title: String, width: u16, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent)
        .title(Span::styled(fit_title(&title, width), theme.header))
        .style(theme.base)
}

/// The help overlay: the filter line, then the screen's keys from row `scroll` (clamped to the
/// last page), with which rows are shown and whether there are more above or below. Returns the
/// furthest useful scroll and the rows a page shows.
#[allow(clippy::too_many_arguments)]
pub fn draw_help(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    screen: ScreenId,
    mode: Mode,
    filter: &str,
    scroll: usize,
) -> (usize, usize) {
    let rows = help_rows(screen, mode, filter);
    // As wide as the longest help line needs, within the screen.
    let need = rows
        .iter()
        .map(|b| b.help.chars().count())
        .max()
        .unwrap_or(20)
        + 14
        + 17
        + 11
        + 3
        + 2;
    let title = format!(
        " Help · {} screen · type to filter · Esc/q closes ",
        screen.title()
    );
    // At least 60 columns (and the title) when the screen has them; never wider than the screen,
    // down to 1x1 (`centered` cuts to the area).
    let width = (need.min(u16::MAX as usize) as u16)
        .max(title_width(&title))
        .max(60);
    let height = (rows.len().min(u16::MAX as usize - 5) as u16 + 5).max(8);
    let rect = centered(area, width, height);
    f.render_widget(Clear, rect);
    let block = frame_box(title, rect.width, theme);
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let [filter_line, table_area] =
        ratatui::layout::Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    // Rows below the table's header line; the scroll stops at the last page.
    let shown = (table_area.height as usize).saturating_sub(1).max(1);
    let last = rows.len().saturating_sub(shown);
    let scroll = scroll.min(last);
    let end = (scroll + shown).min(rows.len());
    let more = if rows.len() <= shown {
        String::new()
    } else {
        let up = if scroll > 0 { "↑" } else { " " };
        let down = if end < rows.len() { "↓" } else { " " };
        format!("{}–{end} of {} {up}{down} more ", scroll + 1, rows.len())
    };
    // The filter's end stays in view beside the row count (its start gives way, marked `…`).
    let room =
        (filter_line.width as usize).saturating_sub(9 + crate::tui::widgets::text_width(&more));
    let typed = crate::tui::widgets::input_tail(&crate::text::visible(filter), room);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("filter: ", theme.muted),
            Span::styled(typed, theme.accent),
            Span::styled("▏", theme.accent),
        ])),
        filter_line,
    );
    f.render_widget(
        Paragraph::new(Span::styled(more, theme.muted)).right_aligned(),
        filter_line,
    );
    if rows.is_empty() {
        f.render_widget(
            Paragraph::new("no key matches the filter").style(theme.muted),
            table_area,
        );
        return (0, shown);
    }
    // All four columns where they fit with 20 columns of help text; on a narrower screen only the
    // keys and what they do. Cells are cut to their columns with `…`, never mid-word in silence.
    let wide = table_area.width as usize >= 14 + 17 + 20 + 11 + 3;
    let constraints: Vec<Constraint> = if wide {
        vec![
            Constraint::Length(14),
            Constraint::Length(17),
            Constraint::Min(20),
            Constraint::Length(11),
        ]
    } else {
        vec![Constraint::Length(10), Constraint::Min(1)]
    };
    let widths = crate::tui::widgets::table_column_widths(table_area.width, &constraints);
    let fit = |texts: Vec<&str>| -> Vec<Cell<'static>> {
        texts
            .into_iter()
            .zip(&widths)
            .map(|(t, w)| Cell::from(crate::tui::widgets::clip(t, *w)))
            .collect()
    };
    let table_rows = rows.iter().skip(scroll).map(|b| {
        let scope = match b.scope {
            action::Scope::Global => "all screens",
            action::Scope::Screen(_) => "this screen",
        };
        let keys = action::keys_label(b);
        let texts = if wide {
            vec![keys.as_str(), b.name, b.help, scope]
        } else {
            vec![keys.as_str(), b.help]
        };
        let styles = if wide {
            vec![theme.key, theme.accent, Style::default(), theme.muted]
        } else {
            vec![theme.key, Style::default()]
        };
        Row::new(
            fit(texts)
                .into_iter()
                .zip(styles)
                .map(|(c, st)| c.style(st))
                .collect::<Vec<_>>(),
        )
    });
    let header = if wide {
        vec!["KEYS", "COMMAND", "WHAT IT DOES", "WHERE"]
    } else {
        vec!["KEYS", "WHAT IT DOES"]
    };
    let table = Table::new(table_rows, constraints)
        .header(Row::new(fit(header)).style(theme.header))
        .style(theme.base);
    f.render_widget(table, table_area);
    (last, shown)
}

pub fn draw_palette(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    screen: ScreenId,
    mode: Mode,
    input: &str,
    selected: usize,
) {
    let rows = palette_rows(screen, mode, input);
    let title = " Command palette · Enter runs · goto seq N / goto job ID · Esc closes ";
    let rect = centered(
        area,
        title_width(title).max(70),
        (rows.len().min(14) as u16 + 4).max(6),
    );
    f.render_widget(Clear, rect);
    let block = frame_box(title.into(), rect.width, theme);
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let [input_line, list] =
        ratatui::layout::Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    let room = (input_line.width as usize).saturating_sub(3);
    let shown = crate::tui::widgets::input_tail(&crate::text::visible(input), room);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(": ", theme.key),
            Span::styled(shown, theme.accent),
            Span::styled("▏", theme.accent),
        ])),
        input_line,
    );
    if rows.is_empty() {
        f.render_widget(
            Paragraph::new("no command matches").style(theme.muted),
            list,
        );
        return;
    }
    let height = list.height as usize;
    // What the marker (2), the name (18) and the keys (12) leave for the help text.
    let help_width = (list.width as usize).saturating_sub(32);
    let offset = crate::tui::widgets::table_window(0, selected, height, rows.len());
    let lines: Vec<Line> = rows
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(i, b)| {
            let sel = i == selected;
            let style = if sel { theme.selection } else { theme.base };
            Line::from(vec![
                Span::styled(if sel { "▶ " } else { "  " }, style),
                Span::styled(
                    format!("{:<18}", b.name),
                    style.patch(theme.accent).patch(style),
                ),
                Span::styled(format!("{:<12}", action::keys_label(b)), theme.key),
                Span::styled(crate::tui::widgets::clip(b.help, help_width), theme.muted),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines), list);
}

/// Splits `text` into rows of at most `width` terminal columns between words, keeping its spacing
/// (an indented or aligned line stays so; a word longer than a row is split between graphemes).
/// Measured in columns: a wide character (a file or key name in CJK) counts two, so no row runs
/// past the dialog's edge. The dialog wraps by hand so that it knows how many rows there are to
/// scroll.
fn wrap_rows(text: &str, width: usize) -> Vec<String> {
    use crate::tui::widgets::{head_within, text_width};
    use unicode_segmentation::UnicodeSegmentation;
    let width = width.max(1);
    let mut rows: Vec<String> = Vec::new();
    let mut row = String::new();
    let mut row_w = 0;
    // Each word with the spaces after it; a row never starts with the spaces of a break.
    for mut token in text.split_inclusive(' ') {
        let word = text_width(token.trim_end_matches(' '));
        if !row.is_empty() && row_w + word > width {
            rows.push(std::mem::take(&mut row).trim_end().to_string());
            row_w = 0;
        }
        if row.is_empty() && !rows.is_empty() && word == 0 {
            continue;
        }
        while row.is_empty() && text_width(token.trim_end_matches(' ')) > width {
            let (mut head, _) = head_within(token, width);
            if head.is_empty() {
                head = token.graphemes(true).next().unwrap_or(token);
            }
            rows.push(head.to_string());
            token = &token[head.len()..];
        }
        row.push_str(token);
        row_w += text_width(token);
    }
    if !row.is_empty() || rows.is_empty() {
        rows.push(row.trim_end().to_string());
    }
    rows
}

/// The confirmation dialog for every state-changing action: what will happen, then the keys.
/// The key line is pinned to the dialog's last row; when the text does not fit (80x24, 60x20) it
/// scrolls (`scroll` rows down, clamped) and the key line says so.
pub fn draw_confirm(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    title: &str,
    lines: &[String],
    scroll: usize,
) {
    let title = format!(" ⚠ {title} ");
    let width = (lines
        .iter()
        .map(|l| crate::tui::widgets::text_width(l))
        .max()
        .unwrap_or(20)
        .clamp(40, 100) as u16
        + 4)
    .max(title_width(&title).min(104))
    .min(area.width);
    let inner_w = (width as usize).saturating_sub(2).max(1);
    let rows: Vec<String> = lines
        .iter()
        .flat_map(|l| wrap_rows(&crate::text::visible(l), inner_w))
        .collect();
    // Borders (2) + text + a blank row + the key line.
    let rect = centered(area, width, (rows.len() + 4).min(u16::MAX as usize) as u16);
    f.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.warning)
        .title(Span::styled(fit_title(&title, rect.width), theme.warning))
        .style(theme.base);
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let [body, keys] =
        ratatui::layout::Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    let fits = rows.len() < body.height as usize + 1;
    let visible_rows = body.height as usize;
    let top = scroll.min(rows.len().saturating_sub(visible_rows));
    let text: Vec<Line> = rows
        .iter()
        .skip(top)
        .take(visible_rows)
        .map(|r| Line::from(Span::styled(r.clone(), theme.base)))
        .collect();
    f.render_widget(Paragraph::new(text), body);
    let mut key_line = vec![
        Span::styled("y", theme.key),
        Span::styled(": do it   ", theme.base),
        Span::styled("n", theme.key),
        Span::styled("/", theme.base),
        Span::styled("Esc", theme.key),
        Span::styled(": cancel", theme.base),
    ];
    if !fits {
        let below = rows.len().saturating_sub(top + visible_rows);
        key_line.push(Span::styled("   ↑/↓", theme.key));
        key_line.push(Span::styled(
            format!(": scroll ({below} more row(s) below)"),
            theme.muted,
        ));
    }
    f.render_widget(Paragraph::new(Line::from(key_line)), keys);
}

/// A one-line text prompt (e.g. the name of a new key): the title on the border, the input, and
/// the keys below it (so that a long title is not cut for them).
pub fn draw_prompt(f: &mut Frame, area: Rect, theme: &Theme, title: &str, input: &str) {
    let title = format!(" {title} ");
    let rect = centered(area, title_width(&title).max(60), 5);
    f.render_widget(Clear, rect);
    let block = frame_box(title, rect.width, theme);
    // Inside the borders, less ` > ` and the cursor: the input's end stays in view.
    let room = (rect.width as usize).saturating_sub(2 + 3 + 1);
    let shown = crate::tui::widgets::input_tail(&crate::text::visible(input), room);
    f.render_widget(
        Paragraph::new(vec![
            Line::from(""),
            Line::from(vec![
                Span::styled(" > ", theme.key),
                Span::styled(shown, theme.accent),
                Span::styled("▏", theme.accent),
            ]),
            Line::from(vec![
                Span::styled("   Enter", theme.key),
                Span::styled(" accepts · ", theme.muted),
                Span::styled("Esc", theme.key),
                Span::styled(" cancels", theme.muted),
            ]),
        ])
        .block(block),
        rect,
    );
}

#[cfg(test)]
mod wrap_tests {
    use super::wrap_rows;

    /// Rows break between words (a word cut in two read as two others), keep an indented line's
    /// indent, and split only a word longer than a row.
    #[test]
    fn dialog_rows_break_between_words() {
        assert_eq!(
            wrap_rows("Bundles signed by it will verify as trusted.", 20),
            ["Bundles signed by it", "will verify as", "trusted."]
        );
        assert_eq!(wrap_rows("  key id  abcdef", 40), ["  key id  abcdef"]);
        assert_eq!(wrap_rows("  store  /a/b/c", 9), ["  store", "/a/b/c"]);
        assert_eq!(wrap_rows("abcdefghij xy", 4), ["abcd", "efgh", "ij", "xy"]);
        assert_eq!(wrap_rows("", 5), [""]);
        for w in 1..30 {
            let text = "Remove demo-signer (5f1c2a) from the trust store: bundles it signed fail.";
            for r in wrap_rows(text, w) {
                assert!(r.chars().count() <= w, "{w}: {r:?}");
            }
        }
    }

    /// Rows are measured in columns: a wide character counts two and is never split, so a
    /// dialog naming a CJK file wraps inside its box instead of running past its edge.
    #[test]
    fn dialog_rows_count_columns() {
        use crate::tui::widgets::text_width;
        assert_eq!(
            wrap_rows("署名 日本語の名前.json", 8),
            ["署名", "日本語の", "名前.jso", "n"]
        );
        for w in 2..30 {
            let text = "Sign 日本語の非常に長いバンドル名前-夜勤.json with 鍵-key (5f1c2a)?";
            let rows = wrap_rows(text, w);
            for r in &rows {
                assert!(text_width(r) <= w, "{w}: {r:?}");
            }
            assert_eq!(rows.concat().replace(' ', ""), text.replace(' ', ""), "{w}");
        }
    }

    /// A prompt, the palette and the help filter keep the end of a long input in view, with the
    /// cursor after it (its start gives way, marked `…`): a field cut at its right edge hid what
    /// was being typed.
    #[test]
    fn long_inputs_show_their_end() {
        use crate::tui::action::{Mode, ScreenId};
        let theme = crate::tui::theme::Theme::default();
        let typed = format!("start-{}-日本語-THE-END", "x".repeat(120));
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
        let draws: [&dyn Fn(&mut ratatui::Frame); 3] = [
            &|f| super::draw_prompt(f, f.area(), &theme, "Name of the new key", &typed),
            &|f| {
                super::draw_palette(
                    f,
                    f.area(),
                    &theme,
                    ScreenId::Keys,
                    Mode::default(),
                    &typed,
                    0,
                )
            },
            &|f| {
                super::draw_help(
                    f,
                    f.area(),
                    &theme,
                    ScreenId::Keys,
                    Mode::default(),
                    &typed,
                    0,
                );
            },
        ];
        for (i, draw) in draws.iter().enumerate() {
            t.draw(|f| draw(f)).unwrap();
            let text = crate::tui::widgets::buffer_text(t.backend().buffer());
            assert!(text.contains("-日本語-THE-END▏"), "{i}:\n{text}");
            assert!(text.contains("…xxx"), "{i}:\n{text}");
        }
    }
}
