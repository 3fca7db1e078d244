//! Screen 7, Activity: the store's audit log (`core::audit`), newest first: who changed what and
//! when, with the inputs of the selected record, and whether the hash chain holds.

use crate::core::audit::{AuditRecord, AuditVerdict};
use crate::text::{visible, visible_lines};
use crate::tui::store_ref::StoreRef;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Table};
use ratatui::Frame;

/// Records the screen reads (the newest).
pub const SHOWN: u64 = 1000;

/// The records and the chain's verdict, or why they could not be read.
pub type ActivityLoad = Result<(Vec<AuditRecord>, AuditVerdict), String>;

/// Reads the newest records and verifies the whole chain (background).
pub fn load(db: &StoreRef) -> ActivityLoad {
    let store = db.open()?;
    let records = crate::core::audit::recent(&store, SHOWN).map_err(|e| e.to_string())?;
    let verdict = crate::core::audit::verify(&store).map_err(|e| e.to_string())?;
    Ok((records, verdict))
}

/// A record's text as the `/` search matches it: sequence, time, operator, action, inputs.
fn record_text(r: &AuditRecord) -> String {
    format!(
        "{} {} {} {} {}",
        r.seq, r.at, r.operator, r.action, r.inputs
    )
}

#[derive(Debug, Default)]
pub struct ActivityScreen {
    /// The record panel's scroll (J/K).
    pub detail: crate::tui::widgets::DetailScroll,
    /// Where the list was last drawn (its header line first), for mouse clicks.
    pub list_area: ratatui::layout::Rect,
    /// Newest first; shared with a background `/` search.
    pub records: std::sync::Arc<Vec<AuditRecord>>,
    /// Loads applied so far: which list a `/` search ran over (a reload replaces it).
    pub loads: u64,
    pub verdict: Option<AuditVerdict>,
    pub error: Option<String>,
    pub selected: usize,
    pub offset: usize,
    pub page: usize,
}

impl ActivityScreen {
    pub fn set(&mut self, load: ActivityLoad) {
        match load {
            Ok((records, verdict)) => {
                self.records = std::sync::Arc::new(records);
                self.loads += 1;
                self.verdict = Some(verdict);
                self.error = None;
                self.selected = self.selected.min(self.records.len().saturating_sub(1));
            }
            Err(e) => self.error = Some(e),
        }
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.records.len();
        if n > 0 {
            self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
        }
    }

    pub fn selected_record(&self) -> Option<&AuditRecord> {
        self.records.get(self.selected)
    }

    pub fn context_line(&self) -> String {
        let Some(v) = &self.verdict else {
            return String::new();
        };
        let records = crate::format::plural(v.records, "record");
        match self.selected_record() {
            Some(r) => format!("{records} in the audit log · record {} selected", r.seq),
            None => format!("{records} in the audit log"),
        }
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let [head, body] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
        let verdict = match (&self.error, &self.verdict) {
            (Some(e), _) => Line::from(Span::styled(format!(" ! {}", visible(e)), theme.warning)),
            (None, Some(v)) if v.ok => Line::from(vec![
                Span::styled(" ✓ audit chain intact", theme.ok),
                Span::styled(
                    format!(
                        " · {} record(s){}",
                        v.records,
                        v.head
                            .as_deref()
                            .map(|h| format!(" · head {}", clip(h, 16)))
                            .unwrap_or_default()
                    ),
                    theme.muted,
                ),
            ]),
            (None, Some(v)) => Line::from(Span::styled(
                format!(
                    " ✗ audit chain BROKEN at record {}: {}",
                    v.first_break.as_ref().map(|b| b.seq).unwrap_or(0),
                    v.first_break
                        .as_ref()
                        .map(|b| visible(&b.reason).into_owned())
                        .unwrap_or_default()
                ),
                theme.finding,
            )),
            (None, None) => Line::from(Span::styled(" reading the audit log…", theme.muted)),
        };
        // A long break reason ends with `…` at the edge, never cut there in silence.
        let verdict = Line::from(crate::tui::widgets::clip_spans(
            verdict.spans,
            head.width as usize,
        ));
        f.render_widget(Paragraph::new(verdict), head);
        let (list, detail) = if body.width >= 120 {
            let [l, d] =
                Layout::horizontal([Constraint::Min(60), Constraint::Length(56)]).areas(body);
            (l, d)
        } else {
            let [l, d] = Layout::vertical([Constraint::Min(5), Constraint::Length(8)]).areas(body);
            (l, d)
        };
        self.draw_list(f, list, theme);
        self.draw_detail(f, detail, theme);
    }

    fn draw_list(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" Activity (newest first) ", theme.header));
        let inner = block.inner(area);
        f.render_widget(block, area);
        if self.records.is_empty() {
            f.render_widget(
                Paragraph::new(" no change recorded yet: imports, trust, signing, snapshots and outbox operations appear here")
                    .style(theme.muted)
                    .wrap(ratatui::widgets::Wrap { trim: false }),
                inner,
            );
            return;
        }
        let height = inner.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        self.offset = table_window(self.offset, self.selected, height, self.records.len());
        self.list_area = inner;
        let num_w =
            crate::tui::widgets::number_width(self.records.first().map(|r| r.seq).unwrap_or(0), 1);
        let widths = [
            Constraint::Length(1),
            Constraint::Length(num_w),
            Constraint::Length(24),
            Constraint::Length(12),
            Constraint::Length(13),
            Constraint::Min(10),
        ];
        // What each column really gets: a value cut to it ends with `…`, never silently (a cut
        // operator or action reads as another).
        let w = crate::tui::widgets::table_column_widths(inner.width, &widths);
        let rows = self
            .records
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(height)
            .map(|(i, r)| {
                let sel = i == self.selected;
                let inputs = visible(&r.inputs.to_string()).into_owned();
                crate::tui::widgets::marked_row(
                    sel,
                    [
                        Cell::from(clip(&r.seq.to_string(), w[1])),
                        Cell::from(clip(&visible(&r.at), w[2])),
                        Cell::from(clip(&visible(&r.operator), w[3])),
                        Cell::from(clip(&visible(&r.action), w[4])).style(theme.accent),
                        Cell::from(clip(&inputs, w[5])).style(theme.muted),
                    ],
                    theme,
                )
            });
        let labels = ["", "#", "TIME", "OPERATOR", "ACTION", "INPUTS"];
        let table = Table::new(rows, widths)
            .header(crate::tui::widgets::header_row(&labels, &w, theme.header))
            .column_spacing(1);
        f.render_widget(table, inner);
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" record ", theme.header));
        let Some(r) = self.selected_record() else {
            f.render_widget(block, area);
            return;
        };
        let kv = |k: &str, v: String| {
            Line::from(vec![
                Span::styled(format!("{k:<9}"), theme.muted),
                Span::styled(v, theme.base),
            ])
        };
        let mut lines = vec![
            kv("record", r.seq.to_string()),
            kv("at", visible(&r.at).into_owned()),
            kv("operator", visible(&r.operator).into_owned()),
            kv("action", visible(&r.action).into_owned()),
            kv("hash", r.hash.clone()),
            kv("prev", r.prev_hash.clone()),
            Line::from(Span::styled("inputs", theme.header)),
        ];
        let pretty = serde_json::to_string_pretty(&r.inputs).unwrap_or_default();
        lines.extend(
            visible_lines(&pretty)
                .into_iter()
                .map(|l| Line::from(Span::styled(format!("  {l}"), theme.base))),
        );
        let of = (0, self.selected);
        self.detail.draw(f, area, block, lines, of, theme);
    }
}

impl crate::tui::screen::Screen for ActivityScreen {
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.list_area,
            offset: self.offset,
            selected: self.selected,
            len: self.records.len(),
        })
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        ctx.store_label()
    }

    fn context_line(&self) -> String {
        ActivityScreen::context_line(self)
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        ActivityScreen::move_by(self, d)
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail.scroll(d)
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        self.selected_record()
            .map(|r| ("audit record hash", r.hash.clone()))
    }

    fn search_span(&self) -> (usize, usize) {
        (self.records.len(), self.selected)
    }

    fn search_list(&self) -> (u64, usize) {
        (self.loads, 0)
    }

    fn search_rows(&self) -> Option<crate::tui::search::RowText> {
        let records = self.records.clone();
        Some(Box::new(move |i| records.get(i).map(record_text)))
    }

    fn search_select(&mut self, at: usize) {
        self.selected = at;
    }
}
