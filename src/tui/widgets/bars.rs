//! The title bar (screen tabs) and the status bar (message + key hints from the action table).

use crate::tui::action::{self, ScreenId};
use crate::tui::theme::Theme;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// The severity of a status message (shown with a glyph and a word, not only a colour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Ok,
    Warning,
    Error,
}

/// A message in the status area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMessage {
    pub level: Level,
    pub text: String,
    /// When it was said (messages expire, see `App::expire_message`).
    pub at: std::time::Instant,
}

/// The tab labels at a level of detail: 0 full titles, 1 short titles, 2 numbers only (except the
/// active tab, which always shows its title).
fn tab_spans(theme: &Theme, current: ScreenId, detail: u8) -> Vec<Span<'static>> {
    let mut spans = vec![Span::styled(" airlock ", theme.title), Span::raw(" ")];
    for s in ScreenId::ALL {
        let title = match detail {
            0 => s.title(),
            _ if s == current => s.short_title(),
            1 => s.short_title(),
            _ => "",
        };
        let label = if title.is_empty() {
            s.number().to_string()
        } else {
            format!("{} {}", s.number(), title)
        };
        if s == current {
            spans.push(Span::styled(format!("[{label}]"), theme.tab_active));
        } else {
            spans.push(Span::styled(format!(" {label} "), theme.tab));
        }
        if detail < 2 {
            spans.push(Span::raw(" "));
        }
    }
    spans
}

/// The title bar: the screen tabs (shortened until they fit, so the active tab is never cut off)
/// and, on the right, what the screen shows.
pub fn title_bar(f: &mut Frame, area: Rect, theme: &Theme, current: ScreenId, right: &str) {
    let width = area.width as usize;
    let mut spans = tab_spans(theme, current, 0);
    for detail in 1..=2 {
        if spans.iter().map(|s| s.width()).sum::<usize>() + 12 <= width {
            break;
        }
        spans = tab_spans(theme, current, detail);
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let right = crate::tui::widgets::clip(right, width.saturating_sub(used + 1));
    let pad = width.saturating_sub(used + crate::tui::widgets::text_width(&right));
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(right, theme.muted));
    f.render_widget(Paragraph::new(Line::from(spans)).style(theme.base), area);
}

/// How the console runs, as the status bar shows it.
#[derive(Debug, Clone, Copy, Default)]
pub struct BarMode<'a> {
    /// Which keys exist (`--read-only`: also a READ-ONLY badge; `--inbox`: the decision keys).
    pub keys: action::Mode,
    /// Actions of the screen that do not apply now (the screen's `hint_applies`): not hinted.
    pub hidden: &'a [action::Action],
}

/// The status bar: the message (or the screen's context) on the left, the screen's key hints,
/// taken from the action table, on the right.
pub fn status_bar(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    screen: ScreenId,
    mode: BarMode<'_>,
    message: Option<&StatusMessage>,
    context: &str,
) {
    let BarMode { keys, hidden } = mode;
    let mut left: Vec<Span> = Vec::new();
    if keys.read_only {
        left.push(Span::styled(
            " READ-ONLY ",
            theme.warning.patch(theme.status),
        ));
    }
    // The message (or the context) is added once the hints it leaves room for are known.
    let text = match message {
        Some(m) => {
            let (glyph, style) = match m.level {
                Level::Info => ("ℹ", theme.status),
                Level::Ok => ("✓", theme.ok),
                Level::Warning => ("⚠", theme.warning),
                Level::Error => ("✗ error:", theme.finding),
            };
            left.push(Span::styled(
                format!(" {glyph} "),
                style.patch(theme.status).patch(style),
            ));
            crate::text::visible(&m.text).into_owned()
        }
        None => format!(" {context}"),
    };
    let mut hints: Vec<Span> = Vec::new();
    let shown = |b: &&action::Binding| b.in_bar && !hidden.contains(&b.action);
    for b in action::active(screen, keys).filter(shown) {
        let key = b.keys.first().map(|k| k.label()).unwrap_or_default();
        hints.push(Span::styled(
            key,
            theme.key.patch(theme.status).patch(theme.key),
        ));
        hints.push(Span::styled(format!(" {}  ", b.name), theme.status));
    }
    let width = area.width as usize;
    let lead_w: usize = left.iter().map(|s| s.width()).sum();
    let left_w = lead_w + crate::tui::widgets::text_width(&text);
    let mut hint_w: usize = hints.iter().map(|s| s.width()).sum();
    // Drop hints from the end until they fit beside the message: the message comes first.
    while left_w + hint_w + 2 > width && hints.len() >= 2 {
        hints.truncate(hints.len() - 2);
        hint_w = hints.iter().map(|s| s.width()).sum();
    }
    // A message longer than the bar loses its middle, marked (never its end, silently).
    let room = width.saturating_sub(lead_w + if hints.is_empty() { 0 } else { hint_w + 2 });
    let text = crate::tui::widgets::clip_middle(&text, room);
    let left_w = lead_w + crate::tui::widgets::text_width(&text);
    left.push(Span::styled(text, theme.status));
    let pad = width.saturating_sub(left_w + hint_w).max(2);
    let mut spans = left;
    spans.push(Span::styled(" ".repeat(pad), theme.status));
    spans.extend(hints);
    f.render_widget(Paragraph::new(Line::from(spans)).style(theme.status), area);
}
