//! Screen 3, Keys & trust: local signing keys and trusted keys with their ids; generate a key,
//! trust or untrust one, sign the bundle selected on the Bundles screen, check its signature.
//! Every operation is a `core::trust` call.

use crate::core::trust::key_dir::{local_keys, LocalKey};
use crate::core::trust::{self, TrustedKey};
use crate::text::{visible, visible_path};
use crate::tui::theme::Theme;
use crate::tui::widgets::bars::Level;
use crate::tui::widgets::{clip, table_column_widths, table_window};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Which list has the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeysPane {
    #[default]
    Local,
    Trusted,
}

#[derive(Debug, Default)]
pub struct KeysScreen {
    pub local: Vec<LocalKey>,
    pub trusted: Vec<TrustedKey>,
    pub pane: KeysPane,
    pub sel_local: usize,
    pub sel_trusted: usize,
    pub error: Option<String>,
    /// Each list's first shown row and where it was last drawn (inside its border, header line
    /// first): a long list scrolls to its selection, and a click selects in the list it hits.
    pub shown_local: (usize, Rect),
    pub shown_trusted: (usize, Rect),
}

impl KeysScreen {
    /// Re-reads the keys directory and the trust store.
    pub fn reload(&mut self, keys_dir: &Path, trust_store: &Path) {
        self.error = None;
        match local_keys(keys_dir) {
            Ok(k) => self.local = k,
            Err(e) => self.error = Some(e.to_string()),
        }
        match trust::TrustStore::open(trust_store) {
            Ok(s) => self.trusted = s.keys().to_vec(),
            Err(e) => self.error = Some(e.to_string()),
        }
        self.sel_local = self.sel_local.min(self.local.len().saturating_sub(1));
        self.sel_trusted = self.sel_trusted.min(self.trusted.len().saturating_sub(1));
    }

    pub fn move_by(&mut self, d: isize) {
        let (sel, n) = match self.pane {
            KeysPane::Local => (&mut self.sel_local, self.local.len()),
            KeysPane::Trusted => (&mut self.sel_trusted, self.trusted.len()),
        };
        if n > 0 {
            *sel = (*sel as isize + d).clamp(0, n as isize - 1) as usize;
        }
    }

    pub fn selected_local(&self) -> Option<&LocalKey> {
        self.local.get(self.sel_local)
    }

    pub fn selected_trusted(&self) -> Option<&TrustedKey> {
        self.trusted.get(self.sel_trusted)
    }

    /// A name for a new key that no local key uses yet.
    pub fn fresh_name(&self) -> String {
        (1..)
            .map(|i| format!("console-key-{i}"))
            .find(|n| self.local.iter().all(|k| &k.name != n))
            .expect("an unused name exists")
    }

    pub fn render(
        &mut self,
        f: &mut Frame,
        area: Rect,
        theme: &Theme,
        keys_dir: &Path,
        trust_store: &Path,
        bundle: Option<(&PathBuf, String)>,
    ) {
        let [paths, bundle_line, lists] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(3),
        ])
        .areas(area);
        f.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(" keys ", theme.header),
                Span::styled(crate::text::visible_path(keys_dir), theme.base),
                Span::styled("   trust store ", theme.header),
                Span::styled(crate::text::visible_path(trust_store), theme.base),
            ])),
            paths,
        );
        // A long file name is cut in its middle: the signature state after it stays in view.
        let bl = match &bundle {
            Some((p, sig)) => crate::tui::widgets::head_line(
                Span::styled(" bundle (from Bundles) ", theme.header),
                Span::styled(
                    visible_path(Path::new(p.file_name().unwrap_or_default())),
                    theme.base,
                ),
                vec![Span::styled(format!("  {sig}"), theme.muted)],
                bundle_line.width as usize,
            ),
            None => Line::from(Span::styled(
                " no bundle selected on the Bundles screen (s signs it, v checks its signature)",
                theme.muted,
            )),
        };
        f.render_widget(Paragraph::new(bl), bundle_line);
        if let Some(e) = &self.error {
            f.render_widget(
                Paragraph::new(format!(" ! {}", visible(e))).style(theme.warning),
                lists,
            );
            return;
        }
        // The detail shows the key id and fingerprint whole, wrapped onto as many rows as they
        // need (a fingerprint is read out to compare: it is never cut).
        let detail_lines = self.detail_lines(lists.width.saturating_sub(2) as usize, theme);
        let [lists, detail] = Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(detail_lines.len() as u16 + 2),
        ])
        .areas(lists);
        self.draw_detail(f, detail, detail_lines, theme);
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(lists);
        // Rows a list shows: inside its border, below its header line.
        let height = |a: Rect| a.height.saturating_sub(3) as usize;
        let off_local = table_window(
            self.shown_local.0,
            self.sel_local,
            height(left),
            self.local.len(),
        );
        let off_trusted = table_window(
            self.shown_trusted.0,
            self.sel_trusted,
            height(right),
            self.trusted.len(),
        );
        self.shown_local = (off_local, inner(left));
        self.shown_trusted = (off_trusted, inner(right));
        let trusted_ids: HashSet<&str> = self.trusted.iter().map(|k| k.key_id.as_str()).collect();
        // What each column really gets (the selection mark's first): cells are cut to it with `…`.
        let extra = [("FILES", 14), ("TRUST", 14)];
        let w = table_column_widths(inner(left).width, &key_constraints(&extra));
        let rows = self.local.iter().enumerate().skip(off_local).map(|(i, k)| {
            let sel = self.pane == KeysPane::Local && i == self.sel_local;
            let id = k.key_id.as_deref().unwrap_or("—");
            let (state, style) = if let Some(p) = &k.problem {
                (format!("! {}", visible(p)), theme.warning)
            } else if k
                .key_id
                .as_deref()
                .is_some_and(|id| trusted_ids.contains(id))
            {
                ("✓ trusted".to_string(), theme.ok)
            } else {
                ("○ not trusted".to_string(), theme.muted)
            };
            crate::tui::widgets::marked_row(
                sel,
                [
                    Cell::from(clip(&visible(&k.name), w[1])),
                    Cell::from(clip(id, w[2])),
                    Cell::from(clip(
                        if k.private_path.is_some() {
                            "private+public"
                        } else {
                            "public only"
                        },
                        w[3],
                    )),
                    Cell::from(clip(&state, w[4])).style(style),
                ],
                theme,
            )
        });
        let focus = self.pane == KeysPane::Local;
        let table = key_table(rows, &extra, &w, "local keys", focus, theme);
        f.render_widget(table, left);

        let extra = [("ADDED", 24)];
        let w = table_column_widths(inner(right).width, &key_constraints(&extra));

        let rows = self
            .trusted
            .iter()
            .enumerate()
            .skip(off_trusted)
            .map(|(i, k)| {
                let sel = self.pane == KeysPane::Trusted && i == self.sel_trusted;
                crate::tui::widgets::marked_row(
                    sel,
                    [
                        Cell::from(clip(&visible(&k.name), w[1])),
                        Cell::from(clip(&k.key_id, w[2])),
                        Cell::from(clip(
                            &visible(k.added_at.as_deref().unwrap_or("this run")),
                            w[3],
                        )),
                    ],
                    theme,
                )
            });
        let focus = self.pane == KeysPane::Trusted;
        let table = key_table(rows, &extra, &w, "trusted keys", focus, theme);
        f.render_widget(table, right);
    }
}

/// Inside a key list's border.
fn inner(area: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(area)
}

/// A key list's columns: the selection mark, NAME, KEY ID, then the `extra` ones (header, width).
fn key_constraints(extra: &[(&str, u16)]) -> Vec<Constraint> {
    [
        Constraint::Length(1),
        Constraint::Min(12),
        Constraint::Length(16),
    ]
    .into_iter()
    .chain(extra.iter().map(|&(_, w)| Constraint::Length(w)))
    .collect()
}

/// A list of keys ([`key_constraints`]; headers cut to the columns' widths `w`), in a titled
/// block marked when it has the focus.
fn key_table<'a>(
    rows: impl IntoIterator<Item = Row<'a>>,
    extra: &[(&'a str, u16)],
    w: &[usize],
    title: &str,
    focus: bool,
    theme: &Theme,
) -> Table<'a> {
    let header = ["", "NAME", "KEY ID"]
        .into_iter()
        .chain(extra.iter().map(|&(h, _)| h))
        .zip(w)
        .map(|(h, w)| clip(h, *w));
    Table::new(rows, key_constraints(extra))
        .header(Row::new(header).style(theme.header))
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(if focus { theme.accent } else { theme.border })
                .title(Span::styled(
                    format!(" {title}{} ", if focus { " ◀" } else { "" }),
                    theme.header,
                )),
        )
}

impl KeysScreen {
    /// The selected key's full id and fingerprint (to read out and compare over a second
    /// channel before trusting it).
    pub fn selected_key(&self) -> Option<(String, String)> {
        match self.pane {
            KeysPane::Local => self
                .selected_local()
                .and_then(|k| Some((k.name.clone(), k.key_id.clone()?))),
            KeysPane::Trusted => self
                .selected_trusted()
                .map(|k| (k.name.clone(), k.key_id.clone())),
        }
    }

    /// The detail's lines in `width` columns: the key id, its name, and the fingerprint, each
    /// wrapped whole (the fingerprint between its groups) under its label.
    fn detail_lines(&self, width: usize, theme: &Theme) -> Vec<Line<'static>> {
        const LABEL: usize = 13;
        let Some((name, id)) = self.selected_key() else {
            return vec![Line::from(Span::styled(" no key selected", theme.muted))];
        };
        let room = width.saturating_sub(LABEL).max(4);
        let labelled = |label: &str, text: &str, style| {
            crate::tui::widgets::wrap_words(text, room)
                .into_iter()
                .enumerate()
                .map(move |(i, row)| {
                    let label = if i == 0 { label } else { "" };
                    Line::from(vec![
                        Span::styled(format!("{label:<LABEL$}"), theme.muted),
                        Span::styled(row, style),
                    ])
                })
                .collect::<Vec<_>>()
        };
        let mut lines = labelled(" key id", &visible(&id), theme.accent);
        let name = format!("({})", visible(&name));
        let last = lines.last_mut().expect("a key id row");
        if last.width() + 2 + crate::tui::widgets::text_width(&name) <= width {
            last.push_span(Span::styled(format!("  {name}"), theme.muted));
        } else {
            lines.extend(labelled("", &name, theme.muted));
        }
        lines.extend(labelled(
            " fingerprint",
            &visible(&trust::fingerprint(&id)),
            theme.base,
        ));
        lines
    }

    fn draw_detail(&self, f: &mut Frame, area: Rect, lines: Vec<Line<'static>>, theme: &Theme) {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border)
            .title(Span::styled(
                " selected key · y copies its id · read the fingerprint out to compare ",
                theme.header,
            ));
        f.render_widget(Paragraph::new(lines).block(block), area);
    }
}

/// What a keys-and-trust operation did: the message for the status bar and its level (a
/// signature check's follows the engine's verdict: only a valid signature is a success), whether
/// the trust store changed, and the engine's warnings about it (e.g. a private key file other
/// users can read), shown with the message as the CLI prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOpDone {
    pub text: String,
    pub level: Level,
    pub trust_changed: bool,
    pub warnings: Vec<String>,
}

impl KeyOpDone {
    fn said(text: String, trust_changed: bool) -> KeyOpDone {
        KeyOpDone {
            text,
            level: Level::Ok,
            trust_changed,
            warnings: Vec::new(),
        }
    }
}

/// A keys-and-trust operation, run in the background by the app (all engine calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOp {
    Generate {
        name: String,
    },
    Trust {
        public_path: PathBuf,
        name: String,
    },
    Untrust {
        name: String,
    },
    Sign {
        bundle: PathBuf,
        private_path: PathBuf,
    },
    Check {
        bundle: PathBuf,
    },
}

impl KeyOp {
    /// Runs the operation; returns the message for the status bar, whether the trust store
    /// changed and the engine's warnings.
    pub fn run(
        self,
        keys_dir: &Path,
        trust_store: &Path,
        trust_set: &trust::TrustSet,
    ) -> Result<KeyOpDone, String> {
        let shown = |p: &Path| crate::text::visible_path(p);
        match self {
            KeyOp::Generate { name } => {
                let k = trust::generate_key(&name, keys_dir).map_err(|e| e.to_string())?;
                Ok(KeyOpDone::said(
                    format!(
                        "generated key {} ({}), private key {}",
                        visible(&k.name),
                        k.key_id,
                        shown(&k.private_path)
                    ),
                    false,
                ))
            }
            KeyOp::Trust { public_path, name } => {
                let mut store = trust::TrustStore::open(trust_store).map_err(|e| e.to_string())?;
                let k = store
                    .add_file(&public_path, &name)
                    .map_err(|e| e.to_string())?;
                Ok(KeyOpDone::said(
                    format!("trusted {} ({})", visible(&k.name), k.key_id),
                    true,
                ))
            }
            KeyOp::Untrust { name } => {
                let mut store = trust::TrustStore::open(trust_store).map_err(|e| e.to_string())?;
                let k = store.remove(&name).map_err(|e| e.to_string())?;
                Ok(KeyOpDone::said(
                    format!(
                        "removed {} ({}) from the trust store: bundles it signed now report signer-untrusted",
                        visible(&k.name),
                        k.key_id
                    ),
                    true,
                ))
            }
            KeyOp::Sign {
                bundle,
                private_path,
            } => {
                // The engine's warnings about the key file (readable by other users, ...) go
                // with the result, as `airlock sign` prints them.
                let (key, warnings) =
                    trust::load_signing_key(&private_path).map_err(|e| e.to_string())?;
                let out =
                    trust::sign_bundle_file(&bundle, &bundle, &key).map_err(|e| e.to_string())?;
                Ok(KeyOpDone {
                    level: Level::Ok,
                    text: format!(
                        "signed {} with {}{}",
                        shown(&bundle),
                        out.key_id,
                        match out.replaced {
                            Some(old) => format!(" (replaced the signature by {old})"),
                            None => String::new(),
                        }
                    ),
                    trust_changed: false,
                    warnings,
                })
            }
            KeyOp::Check { bundle } => {
                let summary = crate::core::bundle::read_bundle_file(
                    &bundle,
                    &mut crate::core::bundle::reader::NoVisitor,
                )
                .map_err(|e| format!("{}: {e}", shown(&bundle)))?;
                let check = trust::check_bundle_signature(&summary.header, trust_set);
                use crate::core::verify::SignatureCheck as S;
                let level = match &check {
                    S::Valid { .. } => Level::Ok,
                    S::Invalid { .. } => Level::Error,
                    S::Absent | S::Untrusted { .. } => Level::Warning,
                };
                let said = KeyOpDone::said(
                    match check {
                        S::Absent => format!("{}: unsigned", shown(&bundle)),
                        S::Valid { key_id, signer } => format!(
                            "{}: ✓ signature valid, signed by {} ({key_id})",
                            shown(&bundle),
                            visible(&signer)
                        ),
                        S::Invalid { key_id, reason } => format!(
                            "{}: ✗ signature INVALID for key {key_id}: {}",
                            shown(&bundle),
                            visible(&reason)
                        ),
                        S::Untrusted { key_id } => format!(
                            "{}: ? signed by {key_id}, which is not in the trust store",
                            shown(&bundle)
                        ),
                    },
                    false,
                );
                Ok(KeyOpDone { level, ..said })
            }
        }
    }
}

impl crate::tui::screen::Screen for KeysScreen {
    fn draw(&mut self, f: &mut Frame, area: Rect, ctx: &crate::tui::screen::Ctx) {
        let bundle = ctx.bundle.as_ref().map(|(p, s)| (p, s.clone()));
        self.render(
            f,
            area,
            ctx.theme,
            &ctx.config.keys_dir,
            &ctx.config.trust_store,
            bundle,
        );
    }

    fn context_line(&self) -> String {
        format!(
            "{} local key(s), {} trusted",
            self.local.len(),
            self.trusted.len()
        )
    }

    /// The focused list's rows, as last drawn.
    fn page(&self) -> usize {
        let shown = match self.pane {
            KeysPane::Local => self.shown_local.1,
            KeysPane::Trusted => self.shown_trusted.1,
        };
        (shown.height as usize).saturating_sub(1).max(1)
    }

    fn move_by(&mut self, d: isize) {
        KeysScreen::move_by(self, d)
    }

    /// A click in either list gives it the focus and selects the key under it.
    fn click(&mut self, col: u16, row: u16) -> bool {
        use crate::tui::widgets::table_click;
        let (pane, hit, len) = if let Some(hit) =
            table_click(self.shown_local.1, self.shown_local.0, col, row)
        {
            (KeysPane::Local, hit, self.local.len())
        } else if let Some(hit) = table_click(self.shown_trusted.1, self.shown_trusted.0, col, row)
        {
            (KeysPane::Trusted, hit, self.trusted.len())
        } else {
            return false;
        };
        self.pane = pane;
        if let Some(t) = hit.filter(|&t| t < len) {
            match pane {
                KeysPane::Local => self.sel_local = t,
                KeysPane::Trusted => self.sel_trusted = t,
            }
        }
        true
    }

    fn copy_value(&self) -> Option<(&'static str, String)> {
        let (_, id) = self.selected_key()?;
        let what = if self.pane == KeysPane::Local {
            "local key id"
        } else {
            "trusted key id"
        };
        Some((what, id))
    }
}
