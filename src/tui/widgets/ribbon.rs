//! The chain ribbon: a whole node log compressed into one line. Each cell stands for a run of
//! entries; a cell holding a finding shows `✗`, the cell holding the selection shows `◆`.

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

/// What one ribbon cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RibbonCell {
    Ok,
    Finding,
    Selected,
    SelectedFinding,
}

/// Maps `entries` entries onto `width` cells; `marks` are entry indexes with findings
/// (`usize::MAX` = past the end, e.g. a truncated tail).
pub fn ribbon_cells(
    entries: usize,
    width: usize,
    marks: &[usize],
    selected: Option<usize>,
) -> Vec<RibbonCell> {
    if width == 0 {
        return Vec::new();
    }
    let cells = if entries == 0 { 1 } else { entries.min(width) };
    let cell_of = |i: usize| -> usize {
        if entries == 0 || i >= entries {
            cells - 1
        } else {
            ((i as u128 * cells as u128) / entries as u128) as usize
        }
    };
    let mut out = vec![RibbonCell::Ok; cells];
    for &m in marks {
        out[cell_of(m)] = RibbonCell::Finding;
    }
    if let Some(s) = selected {
        let c = cell_of(s);
        out[c] = if out[c] == RibbonCell::Finding {
            RibbonCell::SelectedFinding
        } else {
            RibbonCell::Selected
        };
    }
    out
}

/// The ribbon widget: `0 ━━━✗━━◆━━ 999`.
pub struct Ribbon<'a> {
    pub entries: usize,
    pub marks: &'a [usize],
    pub selected: Option<usize>,
    pub theme: &'a Theme,
}

impl Widget for Ribbon<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        let left = "0 ".to_string();
        let right = format!(" {}", self.entries.saturating_sub(1));
        let width = (area.width as usize).saturating_sub(left.len() + right.len());
        let cells = ribbon_cells(self.entries, width, self.marks, self.selected);
        let mut spans = vec![Span::styled(left, t.muted)];
        for c in cells {
            spans.push(match c {
                RibbonCell::Ok => Span::styled("━", t.ok),
                RibbonCell::Finding => Span::styled("✗", t.finding),
                RibbonCell::Selected => Span::styled("◆", t.selection),
                RibbonCell::SelectedFinding => Span::styled("✖", t.finding.patch(t.selection)),
            });
        }
        spans.push(Span::styled(right, t.muted));
        Line::from(spans).render(area, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_entries_fold_into_the_width_with_every_mark_kept() {
        let cells = ribbon_cells(1_000_000, 100, &[0, 499_999, 999_999], Some(250_000));
        assert_eq!(cells.len(), 100);
        assert_eq!(cells[0], RibbonCell::Finding);
        assert_eq!(cells[49], RibbonCell::Finding);
        assert_eq!(cells[99], RibbonCell::Finding);
        assert_eq!(cells[25], RibbonCell::Selected);
        assert_eq!(
            cells.iter().filter(|c| **c == RibbonCell::Finding).count(),
            3
        );
    }

    #[test]
    fn short_logs_get_one_cell_per_entry_and_tail_marks_land_last() {
        let cells = ribbon_cells(5, 100, &[usize::MAX], Some(2));
        assert_eq!(
            cells,
            vec![
                RibbonCell::Ok,
                RibbonCell::Ok,
                RibbonCell::Selected,
                RibbonCell::Ok,
                RibbonCell::Finding
            ]
        );
    }
}
