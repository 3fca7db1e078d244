//! Screen 7, Notifications: export-ready emissions with their export, deliveries per target with
//! attempts and next retry, and the dead-letter queue with reasons; retry (confirmed) puts a dead
//! letter back in the queue. Every value comes from `core::notify::store`.

use crate::core::notify::store::{
    self as nstore, DamagedDelivery, DecodedDeliveries, DeliveryRow, EmissionRow,
};
use crate::core::time::rfc3339_millis;
use crate::text::{hide_url_passwords, visible};
use crate::tui::store_ref::StoreRef;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Table};
use ratatui::Frame;

/// The three lists, cycled with `v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotifyView {
    #[default]
    Emissions,
    Deliveries,
    DeadLetters,
}

impl NotifyView {
    pub fn next(self) -> Self {
        match self {
            NotifyView::Emissions => NotifyView::Deliveries,
            NotifyView::Deliveries => NotifyView::DeadLetters,
            NotifyView::DeadLetters => NotifyView::Emissions,
        }
    }
    fn title(self) -> &'static str {
        match self {
            NotifyView::Emissions => "emissions",
            NotifyView::Deliveries => "deliveries",
            NotifyView::DeadLetters => "dead letters",
        }
    }
}

#[derive(Debug, Default)]
pub struct NotificationsScreen {
    /// The detail panel's scroll (J/K).
    pub detail: crate::tui::widgets::DetailScroll,
    /// Where the list was last drawn (its header line first), for mouse clicks.
    pub list_area: ratatui::layout::Rect,
    pub view: NotifyView,
    pub emissions: Vec<EmissionRow>,
    pub deliveries: Vec<DeliveryRow>,
    /// Delivery rows that cannot be decoded (a damaged store): named in the head line, the
    /// readable rows shown as usual (one bad row does not hide the queue).
    pub damaged: Vec<DamagedDelivery>,
    pub selected: usize,
    pub offset: usize,
    pub page: usize,
    pub error: Option<String>,
    /// The store is being read in the background (on entry and on `g`).
    pub loading: bool,
    /// The latest read's token: an earlier read that finishes later is dropped.
    load_token: u64,
}

/// Emissions and deliveries (each row decoded on its own) as read from the store, or why not.
pub type Loaded = Result<(Vec<EmissionRow>, DecodedDeliveries), String>;

/// Reads emissions and deliveries from the store (small queries; run on entry and on `g`).
pub fn read(db: &StoreRef) -> Loaded {
    let s = db.open()?;
    let read = || {
        Ok::<_, crate::core::store::StoreError>((
            nstore::emissions(&s)?,
            nstore::deliveries_decoded(&s, None)?,
        ))
    };
    read().map_err(|e| e.to_string())
}

impl NotificationsScreen {
    /// Starts a read of the store; returns its token for [`NotificationsScreen::set_loaded`].
    pub fn begin_load(&mut self) -> u64 {
        self.loading = true;
        self.load_token += 1;
        self.load_token
    }

    /// Shows what [`read`] found for read `token` (the app reads in the background: the store
    /// may be a PostgreSQL server across the network); an earlier read is dropped.
    pub fn set_loaded(&mut self, token: u64, loaded: Loaded) -> bool {
        if token != self.load_token {
            return false;
        }
        self.loading = false;
        match loaded {
            Ok((e, d)) => {
                self.emissions = e;
                self.deliveries = d.rows;
                self.damaged = d.damaged;
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
        self.selected = self.selected.min(self.len().saturating_sub(1));
        true
    }

    fn dead(&self) -> impl Iterator<Item = &DeliveryRow> {
        self.deliveries.iter().filter(|d| d.status == "dead")
    }

    fn len(&self) -> usize {
        match self.view {
            NotifyView::Emissions => self.emissions.len(),
            NotifyView::Deliveries => self.deliveries.len(),
            NotifyView::DeadLetters => self.dead().count(),
        }
    }

    pub fn cycle_view(&mut self) {
        self.view = self.view.next();
        self.selected = 0;
        self.offset = 0;
    }

    pub fn move_by(&mut self, d: isize) {
        let n = self.len();
        if n == 0 {
            self.selected = 0;
            return;
        }
        self.selected = self.selected.saturating_add_signed(d).min(n - 1);
    }

    /// The selected dead letter (what `r` retries).
    /// The export id of the selected row, whichever list is shown (what `y` copies).
    pub fn selected_export_id(&self) -> Option<String> {
        match self.view {
            NotifyView::Emissions => self
                .emissions
                .get(self.selected)
                .map(|e| e.export_id.clone()),
            NotifyView::Deliveries => self
                .deliveries
                .get(self.selected)
                .map(|d| d.export_id.clone()),
            NotifyView::DeadLetters => self.dead().nth(self.selected).map(|d| d.export_id.clone()),
        }
    }

    pub fn selected_dead(&self) -> Option<&DeliveryRow> {
        match self.view {
            NotifyView::DeadLetters => self.dead().nth(self.selected),
            NotifyView::Deliveries => self
                .deliveries
                .get(self.selected)
                .filter(|d| d.status == "dead"),
            NotifyView::Emissions => None,
        }
    }

    /// The status-bar context line.
    pub fn summary(&self) -> String {
        let pending = self
            .deliveries
            .iter()
            .filter(|d| d.status == "pending")
            .count();
        format!(
            "{} emission(s) · {} delivery(ies): {} pending, {} dead{}",
            self.emissions.len(),
            self.deliveries.len(),
            pending,
            self.dead().count(),
            if self.loading {
                " · reading the store…"
            } else {
                ""
            }
        )
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let [head, body, detail] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(5),
        ])
        .areas(area);
        let mut spans = vec![Span::styled(" Notifications ", theme.header)];
        for v in [
            NotifyView::Emissions,
            NotifyView::Deliveries,
            NotifyView::DeadLetters,
        ] {
            let n = match v {
                NotifyView::Emissions => self.emissions.len(),
                NotifyView::Deliveries => self.deliveries.len(),
                NotifyView::DeadLetters => self.dead().count(),
            };
            let style = if v == self.view {
                theme.tab_active
            } else {
                theme.tab
            };
            spans.push(Span::styled(format!(" {} {n} ", v.title()), style));
        }
        spans.push(Span::styled("  (v cycles)", theme.muted));
        if let Some(first) = self.damaged.first() {
            // Stored text: made visible. `notify list` names every damaged row.
            spans.push(Span::styled(
                format!(
                    "  ⚠ {} damaged delivery row(s) skipped: {}{}",
                    self.damaged.len(),
                    visible(&first.to_string()),
                    if self.damaged.len() > 1 {
                        "; `airlock notify list` names all"
                    } else {
                        ""
                    }
                ),
                theme.finding,
            ));
        }
        f.render_widget(Paragraph::new(Line::from(spans)), head);
        if let Some(e) = &self.error {
            f.render_widget(crate::tui::widgets::error_note(e, theme), body);
            return;
        }
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(
                format!(" {} ", self.view.title()),
                theme.header,
            ));
        let inner = block.inner(body);
        f.render_widget(block, body);
        let height = inner.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        let n = self.len();
        if n == 0 {
            let empty = match self.view {
                NotifyView::Emissions => " no emissions: `airlock jobs export --portable -o DIR` emits one per new artifact",
                NotifyView::Deliveries => " no deliveries: `airlock notify run --webhook URL ... --nats URL` creates and sends them",
                NotifyView::DeadLetters => " the dead-letter queue is empty",
            };
            f.render_widget(Paragraph::new(empty).style(theme.muted), inner);
        } else {
            self.selected = self.selected.min(n - 1);
            self.offset = table_window(self.offset, self.selected, height, n);
            self.list_area = inner;
            match self.view {
                NotifyView::Emissions => self.draw_emissions(f, inner, theme, height),
                _ => self.draw_deliveries(f, inner, theme, height),
            }
        }
        self.draw_detail(f, detail, theme);
    }

    fn draw_emissions(&self, f: &mut Frame, area: Rect, theme: &Theme, height: usize) {
        let widths = [
            Constraint::Length(1),
            Constraint::Length(4),
            Constraint::Length(24),
            Constraint::Length(16),
            Constraint::Length(36),
            Constraint::Min(10),
        ];
        // What each column really gets: a value cut to it ends with `…`, never silently.
        let w = crate::tui::widgets::table_column_widths(area.width, &widths);
        let rows = self
            .emissions
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(height)
            .map(|(i, m)| {
                let sel = i == self.selected;
                crate::tui::widgets::marked_row(
                    sel,
                    [
                        Cell::from(clip(&m.emission_id.to_string(), w[1])),
                        Cell::from(clip(&visible(&m.created_at), w[2])),
                        Cell::from(clip(&visible(&m.tenant_id), w[3])),
                        Cell::from(clip(&visible(&m.export_id), w[4])),
                        Cell::from(clip(&visible(&m.file_path), w[5])),
                    ],
                    theme,
                )
            });
        let labels = ["", "#", "EMITTED", "TENANT", "EXPORT", "FILE"];
        let header = crate::tui::widgets::header_row(&labels, &w, theme.header);
        f.render_widget(Table::new(rows, widths).header(header), area);
    }

    fn draw_deliveries(&self, f: &mut Frame, area: Rect, theme: &Theme, height: usize) {
        let list: Vec<&DeliveryRow> = match self.view {
            NotifyView::DeadLetters => self.dead().collect(),
            _ => self.deliveries.iter().collect(),
        };
        let widths = [
            Constraint::Length(1),
            Constraint::Length(4),
            Constraint::Length(11),
            Constraint::Length(8),
            Constraint::Length(32),
            Constraint::Length(3),
            Constraint::Length(30),
            Constraint::Min(10),
        ];
        // What each column really gets: a value cut to it ends with `…`, never silently.
        let w = crate::tui::widgets::table_column_widths(area.width, &widths);
        let rows = list
            .iter()
            .enumerate()
            .skip(self.offset)
            .take(height)
            .map(|(i, d)| {
                let sel = i == self.selected;
                let (glyph, style) = match d.status.as_str() {
                    "delivered" => ("✓", theme.ok),
                    "dead" => ("✗", theme.finding),
                    _ => ("◔", theme.pending),
                };
                let when = match d.status.as_str() {
                    "pending" => format!("next {}", rfc3339_millis(d.next_attempt_at)),
                    _ => d.done_at.map(rfc3339_millis).unwrap_or_default(),
                };
                crate::tui::widgets::marked_row(
                    sel,
                    [
                        Cell::from(clip(&d.delivery_id.to_string(), w[1])),
                        Cell::from(clip(&format!("{glyph} {}", visible(&d.status)), w[2]))
                            .style(style),
                        Cell::from(clip(&visible(&d.target_kind), w[3])),
                        Cell::from(clip(&visible(&hide_url_passwords(&d.target)), w[4])),
                        Cell::from(clip(&d.attempts.to_string(), w[5])),
                        Cell::from(clip(&when, w[6])),
                        Cell::from(clip(&visible(d.last_reason.as_deref().unwrap_or("")), w[7])),
                    ],
                    theme,
                )
            });
        let labels = ["", "#", "STATUS", "TARGET", "URL", "TRY", "WHEN", "REASON"];
        let header = crate::tui::widgets::header_row(&labels, &w, theme.header);
        f.render_widget(Table::new(rows, widths).header(header), area);
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let lines: Vec<Line> = match self.view {
            NotifyView::Emissions => match self.emissions.get(self.selected) {
                Some(m) => vec![
                    Line::from(format!(
                        " export {} · bundle {}",
                        visible(&m.export_id),
                        visible(&m.bundle_id)
                    )),
                    Line::from(format!(" artifact_sha256 {}", visible(&m.artifact_sha256))),
                    Line::from(format!(
                        " deliveries: {}",
                        self.deliveries
                            .iter()
                            .filter(|d| d.emission_id == m.emission_id)
                            .map(|d| format!("{} {}", visible(&d.target_kind), visible(&d.status)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                ],
                None => Vec::new(),
            },
            _ => {
                let list: Vec<&DeliveryRow> = match self.view {
                    NotifyView::DeadLetters => self.dead().collect(),
                    _ => self.deliveries.iter().collect(),
                };
                match list.get(self.selected) {
                    Some(d) => vec![
                        Line::from(format!(
                            " delivery {} of export {} to {} {}",
                            d.delivery_id,
                            visible(&d.export_id),
                            visible(&d.target_kind),
                            visible(&hide_url_passwords(&d.target))
                        )),
                        Line::from(format!(
                            " {} attempt(s) of 6 · last status {} · {}",
                            d.attempts,
                            d.last_status
                                .map(|s| s.to_string())
                                .unwrap_or_else(|| "-".into()),
                            visible(d.last_reason.as_deref().unwrap_or("no failure"))
                        )),
                        Line::from(Span::styled(
                            if d.status == "dead" {
                                " r: retry this dead letter (asks first)"
                            } else {
                                " `airlock notify run` delivers pending deliveries"
                            },
                            theme.muted,
                        )),
                    ],
                    None => Vec::new(),
                }
            }
        };
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(theme.border);
        let of = (self.view as usize, self.selected);
        self.detail.draw(f, area, block, lines, of, theme);
    }
}

impl crate::tui::screen::Screen for NotificationsScreen {
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.list_area,
            offset: self.offset,
            selected: self.selected,
            len: self.len(),
        })
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme);
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        ctx.store_label()
    }

    fn context_line(&self) -> String {
        self.summary()
    }

    fn busy(&self) -> bool {
        self.loading
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        NotificationsScreen::move_by(self, d)
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail.scroll(d)
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        self.selected_export_id().map(|id| ("export id", id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn row(id: i64, status: &str, reason: Option<&str>) -> DeliveryRow {
        DeliveryRow {
            delivery_id: id,
            emission_id: 1,
            export_id: "3c13c420-b506-5361-83ff-6afe85e87981".into(),
            tenant_id: "acme".into(),
            target_kind: "webhook".into(),
            target: "http://127.0.0.1:9/hook\u{1b}[2J".into(),
            status: status.into(),
            attempts: if status == "dead" { 6 } else { 1 },
            next_attempt_at: 1_767_614_401_000,
            in_flight_since: None,
            last_status: reason.map(|_| 503),
            last_reason: reason.map(String::from),
            last_attempt_at: None,
            done_at: Some(1_767_614_431_000),
            dlq_published: false,
            body: "{}".into(),
        }
    }

    fn render(s: &mut NotificationsScreen) -> String {
        render_at(s, 140, 16)
    }

    fn render_at(s: &mut NotificationsScreen, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let theme = Theme::default();
        t.draw(|f| s.render(f, f.area(), &theme)).unwrap();
        crate::tui::widgets::buffer_text(t.backend().buffer())
    }

    /// Reads finish in the background in any order: only the latest one is shown.
    #[test]
    fn an_earlier_read_that_finishes_later_is_dropped() {
        let mut s = NotificationsScreen::default();
        let first = s.begin_load();
        let second = s.begin_load();
        assert!(s.loading && s.summary().ends_with(" · reading the store…"));
        let decoded = |rows| DecodedDeliveries {
            rows,
            damaged: Vec::new(),
        };
        let one = decoded(vec![row(1, "dead", Some("410"))]);
        assert!(s.set_loaded(second, Ok((Vec::new(), one))));
        assert!(!s.loading);
        assert!(
            !s.set_loaded(first, Ok((Vec::new(), decoded(Vec::new())))),
            "stale"
        );
        assert_eq!(s.deliveries.len(), 1);
        let third = s.begin_load();
        assert!(s.set_loaded(third, Err("store is locked".into())));
        assert_eq!(s.error.as_deref(), Some("store is locked"));
    }

    #[test]
    fn dead_letters_show_reasons_and_retry_targets_only_dead_ones() {
        let mut s = NotificationsScreen {
            deliveries: vec![
                row(1, "delivered", None),
                row(2, "dead", Some("HTTP 503 Service Unavailable")),
            ],
            ..Default::default()
        };
        let text = render(&mut s);
        assert!(text.contains("no emissions"), "{text}");
        s.cycle_view();
        let text = render(&mut s);
        assert!(text.contains("deliveries 2"), "{text}");
        assert!(!text.contains('\u{1b}'), "untrusted text is escaped");
        assert!(
            s.selected_dead().is_none(),
            "a delivered row cannot be retried"
        );
        s.cycle_view();
        let text = render(&mut s);
        assert!(text.contains("HTTP 503 Service Unavailable"), "{text}");
        assert!(text.contains("6 attempt(s) of 6"), "{text}");
        assert_eq!(s.selected_dead().map(|d| d.delivery_id), Some(2));
        assert!(s.summary().contains("1 dead"));
    }

    /// A stored row whose status or target kind holds control characters (written past the
    /// table's checks) is drawn with them made visible, in the list and the detail (ratatui
    /// alone would drop them silently).
    #[test]
    fn stored_status_and_target_kind_are_drawn_visible() {
        let mut kind = row(1, "dead", Some("x"));
        kind.target_kind = "web\u{1b}]0;t\u{7}hook".into();
        let mut s = NotificationsScreen {
            deliveries: vec![kind, row(2, "dead\u{1b}[31m", Some("x"))],
            ..Default::default()
        };
        // The terminal layer drops control characters on its own; the screen shows them.
        s.cycle_view();
        let text = render(&mut s);
        assert!(text.contains("dead\\x1b"), "{text}");
        assert!(text.contains("web\\x1b"), "{text}");
        s.cycle_view();
        let text = render(&mut s);
        assert!(text.contains("web\\x1b]0;t\\x07hook"), "{text}");
    }

    /// A value longer than its column (a file name, a tenant, a URL, a reason) ends with `…` in
    /// the lists at 80 and 120 columns: ratatui alone cuts it in silence, and a cut URL or file
    /// name reads as another.
    #[test]
    fn squeezed_cells_are_marked_cut() {
        let file = "/var/spool/airlock/exports/acme-production/日本語-bundle-2026-11-27.alwl";
        let tenant = "tenant-with-a-very-long-name";
        let mut s = NotificationsScreen {
            emissions: vec![EmissionRow {
                emission_id: 7,
                export_id: "3c13c420-b506-5361-83ff-6afe85e87981".into(),
                artifact_sha256: "ab".repeat(32),
                tenant_id: tenant.into(),
                bundle_id: "b".into(),
                file_path: file.into(),
                created_at: "2026-11-27T11:00:00.000Z".into(),
            }],
            ..Default::default()
        };
        let url = "https://hooks.example.internal/airlock/deliveries/acme-production/v2";
        let reason = "HTTP 503 Service Unavailable: upstream connect error or disconnect/reset";
        let mut d = row(1, "dead", Some(reason));
        d.target = url.into();
        s.deliveries = vec![d];
        // The list (the upper half of the screen) shows each value cut with `…`; the narrow
        // values are cut only at 80 columns.
        let lists_cut = |s: &mut NotificationsScreen, w: u16, h: u16, wide: &str, narrow: &str| {
            let text = render_at(s, w, h);
            let list: String = text
                .lines()
                .take(h as usize / 2)
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                crate::tui::widgets::shows_cut(&list, wide),
                "{w}x{h}:\n{text}"
            );
            assert!(
                w != 80 || crate::tui::widgets::shows_cut(&list, narrow),
                "{w}x{h}:\n{text}"
            );
        };
        for (w, h) in [(80, 24), (120, 40)] {
            lists_cut(&mut s, w, h, file, tenant);
            s.cycle_view();
            lists_cut(&mut s, w, h, reason, url);
            s.cycle_view();
            s.cycle_view();
        }
    }
}
