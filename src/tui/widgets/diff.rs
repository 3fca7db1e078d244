//! A side-by-side line diff of two texts (pretty-printed payloads): lines aligned by their longest
//! common subsequence; a changed line is marked `≠` (left) / `≠` (right), a missing one `∅`.

use crate::tui::theme::Theme;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// One aligned row: the left and right line (None where that side has no line), and whether the
/// row differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    pub left: Option<String>,
    pub right: Option<String>,
    pub changed: bool,
}

/// Pretty-printed JSON when the text parses as JSON, else the text as it is; every line made
/// terminal-safe.
pub fn pretty_lines(text: &str) -> Vec<String> {
    let pretty = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string());
    crate::text::visible_lines(&pretty)
}

/// Aligns two line lists (LCS); long inputs fall back to aligning by position.
pub fn align(a: &[String], b: &[String]) -> Vec<DiffRow> {
    const MAX: usize = 2000;
    if a.len() > MAX || b.len() > MAX {
        return (0..a.len().max(b.len()))
            .map(|i| {
                let (l, r) = (a.get(i).cloned(), b.get(i).cloned());
                DiffRow {
                    changed: l != r,
                    left: l,
                    right: r,
                }
            })
            .collect();
    }
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u16; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut rows: Vec<DiffRow> = Vec::new();
    let mut pending_left: Vec<String> = Vec::new();
    let mut pending_right: Vec<String> = Vec::new();
    let flush = |rows: &mut Vec<DiffRow>, l: &mut Vec<String>, r: &mut Vec<String>| {
        let k = l.len().max(r.len());
        let (mut li, mut ri) = (l.drain(..), r.drain(..));
        for _ in 0..k {
            rows.push(DiffRow {
                left: li.next(),
                right: ri.next(),
                changed: true,
            });
        }
    };
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            flush(&mut rows, &mut pending_left, &mut pending_right);
            rows.push(DiffRow {
                left: Some(a[i].clone()),
                right: Some(b[j].clone()),
                changed: false,
            });
            i += 1;
            j += 1;
        } else if j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
            pending_left.push(a[i].clone());
            i += 1;
        } else {
            pending_right.push(b[j].clone());
            j += 1;
        }
    }
    flush(&mut rows, &mut pending_left, &mut pending_right);
    rows
}

/// Draws two panes: each a header (provenance lines) and the aligned payload lines from `scroll`,
/// clamped so that the last line stops at the panes' bottom (never blank panes past the end).
/// Returns the clamped scroll.
pub fn draw(
    f: &mut Frame,
    area: Rect,
    theme: &Theme,
    titles: [&str; 2],
    headers: [&[String]; 2],
    rows: &[DiffRow],
    scroll: usize,
) -> usize {
    let halves =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).split(area);
    // Inside the borders, below the longer header and the `payload:` line.
    let header = headers.iter().map(|h| h.len()).max().unwrap_or(0) + 1;
    let shown = (area.height as usize).saturating_sub(2 + header).max(1);
    let scroll = scroll.min(rows.len().saturating_sub(shown));
    for side in 0..2 {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.conflict)
            .title(Span::styled(format!(" {} ", titles[side]), theme.conflict));
        let mut lines: Vec<Line> = headers[side]
            .iter()
            .map(|h| Line::from(Span::styled(h.clone(), theme.header)))
            .collect();
        lines.push(Line::from(Span::styled("payload:", theme.muted)));
        for row in rows.iter().skip(scroll) {
            let text = if side == 0 { &row.left } else { &row.right };
            let (mark, style) = match (row.changed, text) {
                (false, _) => ("  ", theme.base),
                (true, Some(_)) => ("≠ ", theme.conflict),
                (true, None) => ("∅ ", theme.muted),
            };
            lines.push(Line::from(vec![
                Span::styled(mark, style),
                Span::styled(text.clone().unwrap_or_default(), style),
            ]));
        }
        f.render_widget(
            Paragraph::new(lines).block(block).style(theme.base),
            halves[side],
        );
    }
    scroll
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn changed_lines_pair_up_and_equal_lines_align() {
        let rows = align(&l(&["{", "a", "b", "}"]), &l(&["{", "a", "c", "x", "}"]));
        let changed: Vec<bool> = rows.iter().map(|r| r.changed).collect();
        assert_eq!(changed, vec![false, false, true, true, false]);
        assert_eq!(rows[2].left.as_deref(), Some("b"));
        assert_eq!(rows[2].right.as_deref(), Some("c"));
        assert_eq!(rows[3].left, None);
        assert_eq!(
            pretty_lines("{\"b\":1,\"a\":\"\u{202e}\"}")[1],
            r#"  "a": "\u{202e}","#
        );
        assert_eq!(
            pretty_lines("not json \u{1b}[2J"),
            vec![r"not json \x1b[2J"]
        );
    }
}
