//! HLC swimlanes: one lane per node on a shared physical-time axis, each entry a mark whose glyph
//! says its fate (the engine's `Fate`), so meaning never rests on colour alone.

use crate::core::import::{Fate, Lane};
use crate::text::visible;
use crate::tui::theme::Theme;
use crate::tui::widgets::fit;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// The glyph, word and theme slot of a fate.
pub fn fate_mark(fate: Fate, theme: &Theme) -> (char, &'static str, Style) {
    match fate {
        Fate::New => ('•', "new", theme.ok),
        Fate::Duplicate => ('○', "duplicate", theme.muted),
        Fate::Conflict => ('✗', "conflict", theme.conflict),
        Fate::Dropped => ('⊘', "dropped", theme.finding),
        Fate::Skipped => ('·', "skipped", theme.muted),
    }
}

/// When several entries share one cell, the most important fate is drawn.
fn rank(f: Fate) -> u8 {
    match f {
        Fate::Conflict => 4,
        Fate::Dropped => 3,
        Fate::Duplicate => 2,
        Fate::New => 1,
        Fate::Skipped => 0,
    }
}

/// The column of physical time `t` on a track of `width` cells spanning `min..=max`.
pub fn column(t: u64, min: u64, max: u64, width: usize) -> usize {
    if width <= 1 || max <= min {
        return 0;
    }
    let span = (max - min) as u128;
    (((t.saturating_sub(min)) as u128 * (width as u128 - 1) + span / 2) / span) as usize
}

/// The legend line.
pub fn legend(theme: &Theme) -> Line<'static> {
    let mut spans = vec![Span::styled(" ", theme.base)];
    for fate in [
        Fate::New,
        Fate::Duplicate,
        Fate::Conflict,
        Fate::Dropped,
        Fate::Skipped,
    ] {
        let (g, word, style) = fate_mark(fate, theme);
        spans.push(Span::styled(g.to_string(), style));
        spans.push(Span::styled(format!(" {word}  "), theme.muted));
    }
    spans.push(Span::styled("◆", theme.accent));
    spans.push(Span::styled(" selected", theme.muted));
    Line::from(spans)
}

/// Draws the lanes (one line each), then the time axis. `mark` is (lane index, physical time) of
/// the selected entry, drawn as `◆`.
pub fn draw(f: &mut Frame, area: Rect, theme: &Theme, lanes: &[Lane], mark: Option<(usize, u64)>) {
    if area.height == 0 || area.width < 20 {
        return;
    }
    let label_w = lanes
        .iter()
        .map(|l| crate::tui::widgets::text_width(&visible(&l.node_id)))
        .max()
        .unwrap_or(4)
        .clamp(4, 16);
    let track_w = (area.width as usize).saturating_sub(label_w + 4);
    let times = lanes
        .iter()
        .flat_map(|l| l.entries.iter().map(|e| e.physical));
    let min = times.clone().min().unwrap_or(0);
    let max = times.max().unwrap_or(0);
    let mut lines: Vec<Line> = Vec::new();
    // The time axis takes the last row when there is room for it and one more; the lanes that do
    // not fit are counted on the last lane row instead of being drawn.
    let axis = area.height >= 2;
    let lane_rows = area.height as usize - usize::from(axis);
    let (shown, hidden) = if lanes.len() <= lane_rows {
        (lanes.len(), 0)
    } else {
        let shown = lane_rows.saturating_sub(1);
        (shown, lanes.len() - shown)
    };
    for (li, lane) in lanes.iter().enumerate().take(shown) {
        let mut cells: Vec<Option<Fate>> = vec![None; track_w];
        for e in &lane.entries {
            let c = column(e.physical, min, max, track_w);
            if let Some(slot) = cells.get_mut(c) {
                if slot.is_none_or(|old| rank(e.fate) > rank(old)) {
                    *slot = Some(e.fate);
                }
            }
        }
        let sel = mark
            .filter(|(l, _)| *l == li)
            .map(|(_, t)| column(t, min, max, track_w));
        let mut spans = vec![
            Span::styled(
                format!(" {} ", fit(&visible(&lane.node_id), label_w)),
                theme.header,
            ),
            Span::styled("│", theme.border),
        ];
        for (c, cell) in cells.iter().enumerate() {
            if sel == Some(c) {
                spans.push(Span::styled("◆", theme.accent));
                continue;
            }
            match cell {
                Some(fate) => {
                    let (g, _, style) = fate_mark(*fate, theme);
                    spans.push(Span::styled(g.to_string(), style));
                }
                None => spans.push(Span::styled("─", theme.muted)),
            }
        }
        spans.push(Span::styled("│", theme.border));
        lines.push(Line::from(spans));
    }
    if hidden > 0 {
        lines.push(Line::from(Span::styled(
            format!(
                " … {}",
                crate::format::count(hidden as u64, "more lane", "more lanes")
            ),
            theme.muted,
        )));
    }
    if !axis {
        f.render_widget(Paragraph::new(lines).style(theme.base), area);
        return;
    }
    let left = crate::core::time::rfc3339_millis(min);
    let right = crate::core::time::rfc3339_millis(max);
    let gap = (track_w + 2).saturating_sub(left.len() + right.len());
    lines.push(Line::from(vec![
        Span::raw(" ".repeat(label_w + 2)),
        Span::styled(format!("{left}{}{right}", " ".repeat(gap)), theme.muted),
    ]));
    f.render_widget(Paragraph::new(lines).style(theme.base), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::import::LaneEntry;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn lane(node: &str, physical: u64) -> Lane {
        Lane {
            node_id: node.into(),
            entries: vec![LaneEntry {
                t_hlc: format!("{physical}:0:{node}"),
                physical,
                logical: 0,
                job_id: "job".into(),
                bundle_id: "bundle".into(),
                fate: Fate::New,
                seq: Some(1),
            }],
        }
    }

    fn drawn(lanes: &[Lane], height: u16) -> String {
        let theme = Theme::builtin("dark").expect("theme");
        let mut term = Terminal::new(TestBackend::new(60, height)).expect("terminal");
        term.draw(|f| draw(f, f.area(), &theme, lanes, None))
            .expect("draw");
        crate::tui::widgets::buffer_text(term.backend().buffer())
    }

    /// The lanes that do not fit are counted as they are: never more than the plan has, and the
    /// note is not lost under the axis when there is room for one row only.
    #[test]
    fn lanes_that_do_not_fit_are_counted_right() {
        let two = [lane("edge-a", 1_000), lane("edge-b", 2_000)];
        // Room for no lane row beside the axis: one row, the note.
        let t = drawn(&two, 1);
        assert!(t.contains("… 2 more lanes"), "{t}");
        // Two rows: the note and the axis.
        let t = drawn(&two, 2);
        assert!(t.contains("… 2 more lanes"), "{t}");
        assert!(!t.contains("edge-a"), "{t}");
        // Three rows: both lanes and the axis, no note.
        let t = drawn(&two, 3);
        assert!(t.contains("edge-a") && t.contains("edge-b"), "{t}");
        assert!(!t.contains("more lane"), "{t}");
        // Three lanes in three rows: one lane, the note, the axis.
        let three = [two[0].clone(), two[1].clone(), lane("edge-c", 3_000)];
        let t = drawn(&three, 3);
        assert!(t.contains("edge-a") && t.contains("… 2 more lanes"), "{t}");
        let t = drawn(&three, 4);
        assert!(t.contains("edge-c") && !t.contains("more lane"), "{t}");
        // One lane too many: the note takes the last lane's row, so it counts two.
        let four = [three.to_vec(), vec![lane("edge-d", 4_000)]].concat();
        let t = drawn(&four, 4);
        assert!(t.contains("edge-b") && t.contains("… 2 more lanes"), "{t}");
        assert!(!t.contains("edge-c"), "{t}");
    }

    #[test]
    fn columns_span_the_track() {
        assert_eq!(column(0, 0, 100, 11), 0);
        assert_eq!(column(100, 0, 100, 11), 10);
        assert_eq!(column(50, 0, 100, 11), 5);
        assert_eq!(column(7, 7, 7, 11), 0);
    }
}
