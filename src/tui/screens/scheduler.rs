//! Screen 4, Scheduler chain: the store's tenant chains (`core::store::scheduler::tenants`), their
//! entries read a page at a time (`chain_entries`) with provenance, the batch snapshots with their
//! Merkle roots and signature state, a background `chain verify` (`verify_existing_chain_trusting`
//! under the console's trusted keys and signature policy) with its findings at their chain
//! positions (a snapshot's signature findings, at none, with the snapshots), and the RFC 9162
//! inclusion proof of the selected job (`prove`, checked with `verify_proof`). Everything shown is
//! what the engine returned.

use crate::core::chain::verify::ChainReport;
use crate::core::store::scheduler::{InclusionProof, Snapshot, StoredEntry, TenantSummary};
use crate::core::trust::SignatureCheck;
use crate::core::verify::Finding;
use crate::text::visible;
use crate::tui::theme::Theme;
use crate::tui::widgets::{clip, diff, scrolled_panel, table_window, wrapped_rows};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Table};
use ratatui::Frame;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Entries read per page.
pub const PAGE: u64 = 256;

/// What `/` matches in a stored entry: its position, jobId, action, tHlc and payload.
pub fn search_text(e: &StoredEntry) -> String {
    format!(
        "{} {} {} {} {}",
        e.seq, e.job_id, e.action, e.t_hlc, e.payload
    )
}

/// A proof as the engine built it, and the engine's acceptance verdict on it
/// ([`scheduler::check_proof`]: the proof checks, the snapshot signature, the signature policy).
#[derive(Debug, Clone)]
pub struct CheckedProof {
    pub proof: Box<InclusionProof>,
    pub verdict: crate::core::store::scheduler::ProofVerdict,
}

/// A proof of one job, as the engine built and checked it.
#[derive(Debug, Clone)]
pub struct ProofView {
    pub job_id: String,
    /// The proof and the engine's verdict on it; or why there is none.
    pub result: Result<CheckedProof, String>,
}

/// The snapshots the Scheduler lists, with their signature verdicts, and the rows left out.
#[derive(Debug)]
pub struct SnapshotList {
    pub listed: Vec<(Snapshot, SignatureCheck)>,
    /// Rows whose positions do not read (they cover nothing known), described: row, column, why.
    pub damaged: Vec<String>,
}

/// Results of the screen's background work.
#[derive(Debug)]
pub enum SchedMsg {
    Tenants(Result<Vec<TenantSummary>, String>),
    Page {
        tenant: String,
        from: u64,
        result: Result<Vec<StoredEntry>, String>,
    },
    Snapshots {
        tenant: String,
        result: Result<SnapshotList, String>,
    },
    Verified {
        tenant: String,
        result: Result<Box<ChainReport>, String>,
    },
    Proof {
        tenant: String,
        proof: ProofView,
    },
    /// A console snapshot finished: what it did, or why not.
    Snapshotted(Result<String, String>),
    /// Where `:goto job ID` found the job (or not).
    JobFound {
        tenant: String,
        job_id: String,
        result: Result<Option<u64>, String>,
    },
}

/// A verification in flight.
#[derive(Debug, Clone)]
pub struct VerifyRun {
    pub tenant: String,
    pub checked: Arc<AtomicU64>,
    pub total: u64,
}

/// The Scheduler chain screen's state.
#[derive(Debug, Default)]
pub struct SchedulerScreen {
    /// Where the list was last drawn (its header line first), for mouse clicks.
    pub list_area: ratatui::layout::Rect,
    pub tenants: Vec<TenantSummary>,
    pub loaded: bool,
    pub error: Option<String>,
    pub tenant: usize,
    /// The cached page of entries and its first chain position.
    pub entries: Vec<StoredEntry>,
    pub entries_from: u64,
    pub entries_tenant: String,
    pub requested: Option<(String, u64)>,
    pub selected: u64,
    pub offset: u64,
    pub page: usize,
    pub snapshots: Vec<(Snapshot, SignatureCheck)>,
    pub show_snapshots: bool,
    pub verify: Option<VerifyRun>,
    pub report: Option<Box<ChainReport>>,
    pub proof: Option<ProofView>,
    pub detail_scroll: usize,
    /// The snapshot list scrolls to the snapshot covering the selected entry at its next draw
    /// (the selection moved); J/K hand the scroll to the user.
    pub follow_snapshot: bool,
}

fn short(s: &str, n: usize) -> String {
    clip(&visible(s), n)
}

pub fn signature_label(c: &SignatureCheck, theme: &Theme) -> (String, Style) {
    match c {
        SignatureCheck::Absent => ("unsigned".into(), theme.muted),
        SignatureCheck::Valid { signer, .. } => {
            (format!("✓ signed by {}", visible(signer)), theme.ok)
        }
        SignatureCheck::Invalid { reason, .. } => (
            format!("✗ signature invalid: {}", visible(reason)),
            theme.finding,
        ),
        SignatureCheck::Untrusted { key_id } => (
            format!("? signed by untrusted key {}", short(key_id, 12)),
            theme.warning,
        ),
    }
}

impl SchedulerScreen {
    pub fn current(&self) -> Option<&TenantSummary> {
        self.tenants.get(self.tenant)
    }

    pub fn tenant_id(&self) -> Option<String> {
        self.current().map(|t| t.tenant.clone())
    }

    pub fn length(&self) -> u64 {
        self.current().map_or(0, |t| t.length)
    }

    pub fn entry(&self, seq: u64) -> Option<&StoredEntry> {
        if self.current().map(|t| &t.tenant) != Some(&self.entries_tenant) {
            return None;
        }
        seq.checked_sub(self.entries_from)
            .and_then(|i| self.entries.get(i as usize))
    }

    pub fn selected_entry(&self) -> Option<&StoredEntry> {
        self.entry(self.selected)
    }

    /// The first position of a page that should be read for the visible window, if not cached.
    pub fn wanted_page(&self) -> Option<(String, u64)> {
        let tenant = self.tenant_id()?;
        let len = self.length();
        if len == 0 {
            return None;
        }
        // The window the next draw shows (it scrolls to the selection): after a jump the old
        // offset and the selection can be further apart than a page, and asking for the rows
        // between them would never be satisfied by one page.
        let height = self.page.clamp(1, (PAGE / 2) as usize);
        let lo = table_window(
            self.offset as usize,
            self.selected as usize,
            height,
            len as usize,
        ) as u64;
        let hi = (lo + height as u64).min(len);
        let cached = tenant == self.entries_tenant
            && lo >= self.entries_from
            && hi <= self.entries_from + self.entries.len() as u64;
        if cached {
            return None;
        }
        let from = lo.saturating_sub(PAGE / 4);
        let want = (tenant, from);
        if self.requested.as_ref() == Some(&want) {
            return None;
        }
        Some(want)
    }

    pub fn set_tenants(&mut self, tenants: Vec<TenantSummary>) {
        let keep = self.tenant_id();
        self.tenants = tenants;
        self.loaded = true;
        self.error = None;
        if let Some(k) = keep {
            if let Some(i) = self.tenants.iter().position(|t| t.tenant == k) {
                self.tenant = i;
            }
        }
        if self.tenant >= self.tenants.len() {
            self.tenant = 0;
        }
        self.selected = self.selected.min(self.length().saturating_sub(1));
        // A reload rereads the pages.
        self.entries_tenant.clear();
        self.requested = None;
    }

    pub fn switch_tenant(&mut self, d: isize) {
        let n = self.tenants.len() as isize;
        if n == 0 {
            return;
        }
        self.tenant = (self.tenant as isize + d).rem_euclid(n) as usize;
        self.selected = 0;
        self.offset = 0;
        self.report = None;
        self.proof = None;
        self.snapshots.clear();
        self.detail_scroll = 0;
    }

    pub fn move_by(&mut self, d: isize) {
        let len = self.length();
        if len == 0 {
            return;
        }
        self.selected = (self.selected as i128 + d as i128).clamp(0, len as i128 - 1) as u64;
        self.detail_scroll = 0;
        self.follow_snapshot = true;
    }

    fn finding_at(&self, seq: u64) -> Option<&Finding> {
        self.report
            .as_ref()?
            .findings
            .iter()
            .find(|f| f.index == Some(seq))
    }

    pub fn render(&mut self, f: &mut Frame, area: Rect, theme: &Theme, db: Option<&Path>) {
        if let Some(e) = &self.error {
            f.render_widget(
                Paragraph::new(Line::from(vec![
                    Span::styled(" ✗ ", theme.finding),
                    Span::styled(visible(e).into_owned(), theme.base),
                ])),
                area,
            );
            return;
        }
        if !self.loaded {
            f.render_widget(
                Paragraph::new(Span::styled(" reading the store…", theme.muted)),
                area,
            );
            return;
        }
        if self.tenants.is_empty() {
            let db = db
                .map(|p| visible(&crate::core::store::any::display_db(p)).into_owned())
                .unwrap_or_default();
            f.render_widget(
                Paragraph::new(Span::styled(
                    format!(" no tenant chains in {db}: import bundles (Merge preview, i) or `airlock jobs import`"),
                    theme.muted,
                )),
                area,
            );
            return;
        }
        let [tabs, info, body] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(3),
        ])
        .areas(area);
        let items: Vec<(String, ratatui::style::Style)> = (self.tenants.iter().enumerate())
            .map(|(i, t)| {
                let label = format!("{} ({})", visible(&t.tenant), t.length);
                let style = if i == self.tenant {
                    theme.tab_active
                } else {
                    theme.tab
                };
                (label, style)
            })
            .collect();
        let lead = Span::styled(" Tenant ", theme.header);
        let mut spans =
            crate::tui::widgets::tab_spans(lead, &items, self.tenant, tabs.width, theme.muted);
        if let Some(t) = self.current() {
            spans.push(Span::styled(
                format!(
                    " head {} at {} · last snapshot {}",
                    short(&t.head, 16),
                    visible(&t.head_hlc),
                    match &t.last_snapshot {
                        Some(s) =>
                            format!("#{} ({}..{})", s.id, s.from_seq, s.from_seq + s.entry_count),
                        None => "none".into(),
                    }
                ),
                theme.muted,
            ));
        }
        // The head's facts end with `…` where the line does (never cut there in silence).
        let spans = crate::tui::widgets::clip_spans(spans, tabs.width as usize);
        f.render_widget(Paragraph::new(Line::from(spans)), tabs);
        self.draw_verify_line(f, info, theme);

        let (table_area, side) = if body.width >= 120 {
            // Wide enough for a 64-digit hash after a 12-column label.
            let side = if body.width >= 150 {
                Constraint::Length(78)
            } else {
                Constraint::Percentage(50)
            };
            let [a, b] = Layout::horizontal([Constraint::Fill(1), side]).areas(body);
            (a, b)
        } else {
            let [a, b] = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(body);
            (a, b)
        };
        self.draw_table(f, table_area, theme);
        if self.show_snapshots {
            self.draw_snapshots(f, side, theme);
        } else {
            self.draw_detail(f, side, theme);
        }
    }

    fn draw_verify_line(&self, f: &mut Frame, area: Rect, theme: &Theme) {
        if let Some(run) = &self.verify {
            let done = run.checked.load(Ordering::Relaxed);
            let ratio = if run.total == 0 {
                0.0
            } else {
                (done as f64 / run.total as f64).clamp(0.0, 1.0)
            };
            f.render_widget(
                Gauge::default()
                    .ratio(ratio)
                    .label(format!("verifying the chain: {done}/{} entries", run.total))
                    .gauge_style(theme.accent),
                area,
            );
            return;
        }
        let line = match &self.report {
            None => Line::from(Span::styled(
                " not verified in this session: v verifies every link, the head, every snapshot root and signature",
                theme.muted,
            )),
            Some(r) if r.ok => Line::from(vec![
                Span::styled(" ✓ chain verified", theme.ok),
                Span::styled(
                    format!(
                        ": {}, head matches, {} recomputed, {} signed by a trusted key",
                        crate::format::count(r.length, "entry", "entries"),
                        crate::format::plural(r.snapshots.len() as u64, "snapshot root"),
                        r.signed_by_trusted_key()
                    ),
                    theme.base,
                ),
            ]),
            Some(r) => {
                let mut kinds: Vec<&str> = r.findings.iter().map(|f| f.kind.as_str()).collect();
                kinds.dedup();
                let bad_snaps = r.snapshots.iter().filter(|s| !s.ok).count();
                let unplaced = r.findings.iter().filter(|f| f.index.is_none()).count();
                Line::from(vec![
                    Span::styled(
                        format!(" ✗ {}", crate::format::plural(r.findings.len() as u64, "finding")),
                        theme.finding,
                    ),
                    Span::styled(
                        format!(
                            ": {}; snapshots failing: {bad_snaps} of {} (marked ✗ in the list{})",
                            kinds.join(", "),
                            r.snapshots.len(),
                            if unplaced == 0 {
                                String::new()
                            } else {
                                format!("; s shows the {unplaced} at no entry")
                            }
                        ),
                        theme.base,
                    ),
                ])
            }
        };
        let line = Line::from(crate::tui::widgets::clip_spans(
            line.spans,
            area.width as usize,
        ));
        f.render_widget(Paragraph::new(line), area);
    }

    fn draw_table(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(" Entries (chain order) ", theme.header));
        let inner = block.inner(area);
        f.render_widget(block, area);
        let height = inner.height.saturating_sub(1) as usize;
        self.page = height.max(1);
        let len = self.length();
        self.offset = table_window(
            self.offset as usize,
            self.selected as usize,
            height,
            len as usize,
        ) as u64;
        self.list_area = inner;
        let widths = [
            Constraint::Length(2 + crate::tui::widgets::number_width(len.saturating_sub(1), 3)),
            Constraint::Length(8),
            Constraint::Length(24),
            Constraint::Length(9),
            // At least `✓` and a finding's start (`✗ payl…`): the tHLC keeps its 24 columns
            // first (beside the detail panel, a Min(18) cut every tHLC while it stood empty).
            Constraint::Min(10),
        ];
        // What each column really gets: a value cut to it ends with `…`, never silently (a cut
        // tHLC, action or job id reads as another).
        let w = crate::tui::widgets::table_column_widths(inner.width, &widths);
        let header = Row::new(
            ["SEQ", "ACTION", "tHLC", "JOB", "CHECK"]
                .iter()
                .zip(&w)
                .map(|(h, w)| Cell::from(clip(h, *w)).style(theme.header)),
        );
        let rows = (self.offset..(self.offset + height as u64).min(len)).map(|seq| {
            let sel = seq == self.selected;
            let mark = if sel { "▶ " } else { "  " };
            let row = match self.entry(seq) {
                Some(e) => {
                    let (check, style) = match (&self.report, self.finding_at(seq)) {
                        (_, Some(fd)) => (format!("✗ {}", fd.kind.as_str()), theme.finding),
                        (Some(_), None) => ("✓".to_string(), theme.ok),
                        (None, None) => (String::new(), theme.base),
                    };
                    Row::new(vec![
                        Cell::from(clip(&format!("{mark}{seq}"), w[0])),
                        Cell::from(short(&e.action, w[1])),
                        Cell::from(short(&e.t_hlc, w[2])),
                        Cell::from(short(&e.job_id, w[3])),
                        Cell::from(clip(&check, w[4])).style(style),
                    ])
                }
                None => Row::new(vec![
                    Cell::from(clip(&format!("{mark}{seq}"), w[0])),
                    Cell::from(clip("reading…", w[1])).style(theme.muted),
                ]),
            };
            if sel {
                row.style(theme.selection)
            } else {
                row
            }
        });
        f.render_widget(
            Table::new(rows, widths)
                .header(header)
                .column_spacing(1)
                .style(theme.base),
            inner,
        );
    }

    fn detail_lines(&self, theme: &Theme) -> Vec<Line<'static>> {
        let mut out: Vec<Line<'static>> = Vec::new();
        // Every value here is untrusted text from the store: made visible before it is drawn.
        let kv = |k: &str, v: &str| {
            Line::from(vec![
                Span::styled(format!("{k:<12}"), theme.header),
                Span::styled(visible(v).into_owned(), theme.base),
            ])
        };
        let Some(e) = self.selected_entry() else {
            out.push(Line::from(Span::styled("reading…", theme.muted)));
            return out;
        };
        if let Some(fd) = self.finding_at(e.seq) {
            out.extend(finding_lines(fd, theme));
            out.push(Line::from(""));
        }
        out.push(kv("position", &e.seq.to_string()));
        out.push(kv("action", &e.action));
        out.push(kv("tHlc", &e.t_hlc));
        out.push(kv("jobId", &e.job_id));
        out.push(kv(
            "prevLink",
            e.prev_chain_link.as_deref().unwrap_or("genesis"),
        ));
        out.push(kv("chainLink", &e.chain_link));
        out.push(kv("appended", &e.created_at));
        out.push(Line::from(""));
        match &e.provenance {
            Some(p) => {
                out.push(Line::from(Span::styled("Provenance", theme.accent)));
                out.push(kv("bundle", &p.bundle_id));
                out.push(kv("file", &p.file_name));
                out.push(kv("source node", &p.source_node));
                out.push(kv("orig. tHlc", &p.original_t_hlc));
                out.push(kv("orig. link", &p.original_link));
                out.push(kv(
                    "orig. prev",
                    p.original_prev_link
                        .as_deref()
                        .unwrap_or("none (head of the log)"),
                ));
                if let Some(k) = &p.partition_key {
                    out.push(kv("partition", k));
                }
                out.push(kv("enqueuedAt", &p.enqueued_at));
            }
            None => out.push(Line::from(Span::styled(
                "Provenance: appended on this machine (lifecycle action)",
                theme.muted,
            ))),
        }
        if let Some(pv) = self.proof.as_ref().filter(|p| p.job_id == e.job_id) {
            out.push(Line::from(""));
            out.extend(proof_lines(pv, theme));
        }
        out.push(Line::from(""));
        out.push(Line::from(Span::styled("Payload", theme.accent)));
        for l in diff::pretty_lines(&e.payload) {
            out.push(Line::from(Span::styled(l, theme.base)));
        }
        out
    }

    fn draw_detail(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(
                " Entry · p proves · J/K scroll ",
                theme.header,
            ));
        let lines = self.detail_lines(theme);
        self.detail_scroll = scrolled_panel(f, area, block, lines, self.detail_scroll, theme);
    }

    fn draw_snapshots(&mut self, f: &mut Frame, area: Rect, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(
                format!(
                    " Batch snapshots ({}) · s: entry detail ",
                    self.snapshots.len()
                ),
                theme.header,
            ));
        let mut lines: Vec<Line> = Vec::new();
        if self.snapshots.is_empty() {
            lines.push(Line::from(Span::styled(
                "no snapshots yet (`airlock chain snapshot` takes one)",
                theme.muted,
            )));
        }
        // The rows before the snapshot covering the selection (the one marked ▶).
        let mut cover_line = None;
        for (s, sig) in self.snapshots.iter() {
            let covering = s.covers(self.selected);
            if covering && cover_line.is_none() {
                cover_line = Some(lines.len());
            }
            let check = self
                .report
                .as_ref()
                .and_then(|r| r.snapshots.iter().find(|c| c.id == s.id));
            // The engine's verdict on the snapshot: its root and, under the console's trusted
            // keys and signature policy, its signature.
            let (glyph, style) = match check {
                Some(c) if c.ok => ("✓ verified · ", theme.ok),
                Some(_) => ("✗ fails · ", theme.finding),
                None => ("", theme.muted),
            };
            lines.push(Line::from(vec![
                Span::styled(if covering { "▶ " } else { "  " }, theme.accent),
                Span::styled(format!("#{}", s.id), theme.header),
                Span::styled(
                    format!(
                        "  entries {}..{} ({})  at {}",
                        s.from_seq,
                        s.from_seq + s.entry_count,
                        s.entry_count,
                        visible(&s.snapshot_hlc)
                    ),
                    theme.base,
                ),
            ]));
            let (sig_text, sig_style) = signature_label(sig, theme);
            lines.push(Line::from(vec![
                Span::raw("    "),
                Span::styled(glyph, style),
                Span::styled(sig_text, sig_style),
            ]));
            lines.push(Line::from(Span::styled(
                format!("    root {}", visible(&s.merkle_root)),
                theme.base,
            )));
            if let Some(c) = check.filter(|c| !c.ok) {
                lines.push(Line::from(Span::styled(
                    format!(
                        "    stored {} · computed {}{}",
                        visible(&c.expected_root),
                        visible(&c.computed_root),
                        c.message
                            .as_deref()
                            .map(|m| format!(" · {}", visible(m)))
                            .unwrap_or_default()
                    ),
                    theme.finding,
                )));
            }
        }
        // Findings at no chain position (a snapshot's signature, the head): listed here, as the
        // entry panel lists an entry's.
        let unplaced = self.report.iter().flat_map(|r| &r.findings);
        for fd in unplaced.filter(|f| f.index.is_none()) {
            lines.push(Line::from(""));
            lines.extend(finding_lines(fd, theme));
        }
        if std::mem::take(&mut self.follow_snapshot) {
            // The covering snapshot's first row at the top (as far as the list goes).
            let width = block.inner(area).width;
            self.detail_scroll = cover_line.map_or(0, |at| wrapped_rows(&lines[..at], width));
        }
        self.detail_scroll = scrolled_panel(f, area, block, lines, self.detail_scroll, theme);
    }
}

/// A finding as lines: its kind, the engine's message and details (job, expected, actual), as
/// every report prints them; untrusted text made visible.
fn finding_lines(fd: &Finding, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::from(Span::styled(
            format!("✗ FINDING {}", fd.kind.as_str()),
            theme.finding,
        )),
        Line::from(Span::styled(visible(&fd.message).into_owned(), theme.base)),
    ];
    for (label, value) in fd.details() {
        out.push(Line::from(vec![
            Span::styled(format!("{label:<12}"), theme.header),
            Span::styled(visible(value).into_owned(), theme.base),
        ]));
    }
    out
}

/// The inclusion proof of a job as lines: the engine's proof, `verify_proof`'s verdict and the
/// snapshot signature state.
pub fn proof_lines(pv: &ProofView, theme: &Theme) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled(
        "Inclusion proof (RFC 9162)",
        theme.accent,
    ))];
    match &pv.result {
        Err(e) => out.push(Line::from(Span::styled(
            format!("✗ no proof: {}", visible(e)),
            theme.warning,
        ))),
        Ok(CheckedProof { proof: p, verdict }) => {
            match &verdict.outcome {
                Ok(()) => out.push(Line::from(Span::styled(
                    "✓ verify_proof: the path leads from the entry's link to the snapshot root",
                    theme.ok,
                ))),
                Err(e) => out.push(Line::from(Span::styled(
                    format!("✗ not accepted: {}", visible(&e.to_string())),
                    theme.finding,
                ))),
            }
            let (sig_text, sig_style) = signature_label(&verdict.signature, theme);
            out.push(Line::from(vec![
                Span::styled(
                    format!(
                        "snapshot    #{} entries {}..{}  ",
                        p.snapshot.id,
                        p.snapshot.from_seq,
                        p.snapshot.from_seq + p.snapshot.entry_count
                    ),
                    theme.base,
                ),
                Span::styled(sig_text, sig_style),
            ]));
            out.push(Line::from(Span::styled(
                format!("leaf        {} of {}", p.leaf_index, p.tree_size),
                theme.base,
            )));
            out.push(Line::from(Span::styled(
                format!("leaf hash   {}", visible(&p.leaf_hash)),
                theme.base,
            )));
            for (i, h) in p.proof.iter().enumerate() {
                out.push(Line::from(Span::styled(
                    format!("{:<12}{}", format!("path[{i}]"), visible(h)),
                    theme.base,
                )));
            }
            out.push(Line::from(Span::styled(
                format!("merkle root {}", visible(&p.merkle_root)),
                theme.base,
            )));
        }
    }
    out
}

impl crate::tui::screen::Screen for SchedulerScreen {
    fn click_rows(&self) -> Option<crate::tui::screen::ClickRows> {
        Some(crate::tui::screen::ClickRows {
            area: self.list_area,
            offset: self.offset as usize,
            selected: self.selected as usize,
            len: self.length() as usize,
        })
    }

    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        self.render(f, area, ctx.theme, ctx.config.db.as_deref());
    }

    fn title_right(&self, ctx: &crate::tui::screen::Ctx) -> String {
        ctx.store_label()
    }

    fn context_line(&self) -> String {
        match self.current() {
            Some(t) => format!(
                "entry {} of {} · tenant {}",
                self.selected,
                t.length,
                visible(&t.tenant)
            ),
            None => String::new(),
        }
    }

    fn page(&self) -> usize {
        self.page.max(1)
    }

    fn move_by(&mut self, d: isize) {
        SchedulerScreen::move_by(self, d)
    }

    fn scroll_detail(&mut self, d: isize) {
        self.detail_scroll = self.detail_scroll.saturating_add_signed(d as _);
        self.follow_snapshot = false;
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        if let Some(Ok(CheckedProof { proof, .. })) = self.proof.as_ref().map(|p| &p.result) {
            return serde_json::to_string_pretty(proof)
                .ok()
                .map(|j| ("inclusion proof", j));
        }
        if self.show_snapshots {
            let (s, _) = self.snapshots.last()?;
            return Some(("Merkle root", s.merkle_root.clone()));
        }
        let e = self.selected_entry()?;
        Some(("jobId", e.job_id.clone()))
    }

    fn search_span(&self) -> (usize, usize) {
        (self.length() as usize, self.selected as usize)
    }

    fn search_select(&mut self, at: usize) {
        SchedulerScreen::move_by(self, at as isize - self.selected as isize);
    }

    fn busy(&self) -> bool {
        self.verify.is_some()
    }

    fn progress(&self) -> u64 {
        self.verify
            .as_ref()
            .map_or(0, |v| v.checked.load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::verify::FindingKind;

    /// A tenant of one entry and no snapshot.
    fn summary(tenant: &str) -> TenantSummary {
        TenantSummary {
            tenant: tenant.into(),
            head: String::new(),
            head_hlc: String::new(),
            length: 1,
            last_snapshot: None,
            unsnapshotted: 0,
            damaged_snapshots: Vec::new(),
        }
    }

    /// With more tenants than the tab line holds, the selected one stays on it (it used to run off
    /// the right edge), the others counted on either side.
    #[test]
    fn the_selected_tenant_stays_on_the_tab_line() {
        let mut s = SchedulerScreen {
            tenants: (0..40)
                .map(|i| summary(&format!("tenant-{i:02}")))
                .collect(),
            loaded: true,
            tenant: 39,
            ..Default::default()
        };
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 20)).unwrap();
        term.draw(|f| s.render(f, f.area(), &Theme::default(), None))
            .unwrap();
        let text = crate::tui::widgets::buffer_text(term.backend().buffer());
        let line = text.lines().next().unwrap();
        assert!(line.contains("[tenant-39 (1)]"), "{line}");
        assert!(line.contains('‹') && !line.contains("tenant-00"), "{line}");
        s.tenant = 0;
        term.draw(|f| s.render(f, f.area(), &Theme::default(), None))
            .unwrap();
        let text = crate::tui::widgets::buffer_text(term.backend().buffer());
        let line = text.lines().next().unwrap();
        assert!(
            line.contains("[tenant-00 (1)]") && line.contains('›'),
            "{line}"
        );
    }

    /// The detail panel shows every detail the engine gives a finding (`Finding::details`: job,
    /// expected, actual), not a list of its own.
    #[test]
    fn a_finding_shows_the_engines_details() {
        let finding = Finding::new(FindingKind::PayloadModified, "payload changed")
            .at(None, None, Some(0))
            .job(Some("job-7".into()))
            .values(Some("sha256:aa".into()), Some("sha256:bb".into()));
        let s = SchedulerScreen {
            tenants: vec![summary("acme")],
            loaded: true,
            entries: vec![StoredEntry {
                seq: 0,
                t_hlc: "1:0:n".into(),
                job_id: "job-7".into(),
                action: "create".into(),
                prev_chain_link: None,
                chain_link: "l".into(),
                payload: "{}".into(),
                created_at: "t".into(),
                provenance: None,
            }],
            entries_tenant: "acme".into(),
            report: Some(Box::new(ChainReport {
                tenant_id: "acme".into(),
                ok: false,
                length: 1,
                stored_length: None,
                head: None,
                findings: vec![finding.clone()],
                snapshots: Vec::new(),
            })),
            ..Default::default()
        };
        let text: Vec<String> = s
            .detail_lines(&Theme::default())
            .iter()
            .map(|l| l.to_string())
            .collect();
        let shown: Vec<String> = finding
            .details()
            .map(|(k, v)| format!("{k:<12}{v}"))
            .collect();
        assert_eq!(shown.len(), 3);
        for line in &shown {
            assert!(text.contains(line), "{line:?} missing from {text:?}");
        }
    }
}
