//! Screens and dialogs of the console on real data, rendered into ratatui's TestBackend and
//! snapshotted with insta; styles are asserted where they carry meaning.

mod tui_common;

use airlock::tui::action::ScreenId;
use airlock::tui::screens::bundles::VerifyState;
use airlock::tui::theme::Theme;
use ratatui::style::{Color, Modifier};
use tui_common::*;

/// [`tui_common::review_dir`] with a signed copy, a conflicting pair and a file that is no bundle.
fn review_dir(name: &str) -> std::path::PathBuf {
    let dir = tui_common::review_dir(name);
    copy_vector(
        &dir,
        "bundles/two-nodes-signed.json",
        "two-nodes-signed.json",
    );
    copy_vector(&dir, "conflict/d.json", "conflict-d.json");
    copy_vector(&dir, "conflict/e.json", "conflict-e.json");
    std::fs::write(dir.join("notes.txt"), "shift handover notes\n").unwrap();
    dir
}

/// The foreground colour of a slot of the dark theme (the one `Console::open` draws with).
fn slot_fg(slot: fn(&Theme) -> ratatui::style::Style) -> Color {
    slot(&Theme::builtin("dark").unwrap())
        .fg
        .expect("the slot sets a foreground")
}

/// The background colour of a slot of the dark theme.
fn slot_bg(slot: fn(&Theme) -> ratatui::style::Style) -> Color {
    slot(&Theme::builtin("dark").unwrap())
        .bg
        .expect("the slot sets a background")
}

#[test]
fn bundles_screen_lists_every_file_with_its_verification_state() {
    let dir = review_dir("bundles");
    let mut c = Console::open(&dir);
    let t = c.render(150, 14);
    insta::assert_snapshot!("bundles", t.backend());
    // Every bundle got a final state (none left pending), and the states carry glyphs.
    assert!(c
        .app
        .bundles
        .rows
        .iter()
        .all(|r| !matches!(r.verify, VerifyState::Pending | VerifyState::Running(_))));
    let buf = t.backend().buffer();
    let (x, y) = find_text(buf, "✗ 2 findings").expect("finding state shown");
    assert_eq!(
        buf[(x, y)].fg,
        slot_fg(|t| t.finding),
        "findings use the finding slot"
    );
    let (x, y) = find_text(buf, "✓ ok").expect("ok state shown");
    assert_eq!(buf[(x, y)].fg, slot_fg(|t| t.ok), "ok uses the ok slot");
    let (x, y) = find_text(buf, "⊘ not a bundle").expect("non-bundle shown");
    assert_eq!(buf[(x, y)].fg, slot_fg(|t| t.muted));
}

#[test]
fn filter_narrows_the_list_and_esc_clears_it() {
    let dir = review_dir("filter");
    let mut c = Console::open(&dir);
    c.keys("/deleted");
    let t = c.render(150, 8);
    insta::assert_snapshot!("bundles_filtered", t.backend());
    assert_eq!(c.app.bundles.view().len(), 1);
    c.keys("<Enter><Esc>");
    assert_eq!(c.app.bundles.view().len(), 7);
}

#[test]
fn chain_view_of_entries_deleted_at_its_finding() {
    let dir = fixture_dir("chain-deleted");
    copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    let mut c = Console::open(&dir);
    c.keys("<Enter>"); // a broken bundle opens at its first finding
    assert_eq!(c.app.screen, ScreenId::Chain);
    assert_eq!((c.app.chain.log, c.app.chain.selected), (1, 1));
    let t = c.render(150, 34);
    insta::assert_snapshot!("chain_entries_deleted", t.backend());
    let buf = t.backend().buffer();
    // The finding's kind is on screen in the table and the detail panel, in the finding style.
    let (x, y) = find_text(buf, "✗ FINDING entries-deleted").expect("detail shows the kind");
    assert_eq!(buf[(x, y)].fg, slot_fg(|t| t.finding));
    assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
    // The selected row is marked by a glyph and the selection style.
    let (x, y) = find_text(buf, "▶").expect("selection marker");
    assert_eq!(buf[(x, y)].bg, slot_bg(|t| t.selection));
    // The ribbon marks the finding where the selection is.
    assert!(find_text(buf, "0 ━✖━ 2").is_some());
}

#[test]
fn chain_view_of_payload_modified_shows_stored_and_recomputed_hashes() {
    let dir = fixture_dir("chain-payload");
    copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    let mut c = Console::open(&dir);
    c.keys("<Enter>n");
    assert_eq!((c.app.chain.log, c.app.chain.selected), (0, 2));
    let t = c.render(150, 40);
    insta::assert_snapshot!("chain_payload_modified", t.backend());
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("(differs)"), "{text}");
    assert!(
        text.contains("manifest-mismatch"),
        "bundle-level finding in the banner"
    );
    // n past the last finding stays and says so; N goes back to it; f jumps to the first break.
    c.keys("n");
    assert_eq!((c.app.chain.log, c.app.chain.selected), (0, 2));
    assert!(c.message().contains("no finding after"));
    c.keys("<Home>Nf");
    assert_eq!((c.app.chain.log, c.app.chain.selected), (0, 2));
}

#[test]
fn node_tabs_switch_logs_and_the_narrow_layout_stacks_the_detail() {
    let dir = fixture_dir("chain-tabs");
    copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    let mut c = Console::open(&dir);
    c.keys("<Enter><Right><End>");
    assert_eq!(c.app.chain.log, 1);
    let t = c.render(100, 40);
    insta::assert_snapshot!("chain_valid_narrow", t.backend());
    c.keys("n");
    assert!(c.message().contains("no findings"));
}

#[test]
fn help_overlay_lists_every_key_of_the_screen_and_filters_as_you_type() {
    let dir = fixture_dir("help");
    copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    let mut c = Console::open(&dir);
    c.keys("<Enter>?");
    let t = c.render(120, 40);
    insta::assert_snapshot!("help_chain", t.backend());
    let text = buffer_text(t.backend().buffer());
    for b in airlock::tui::action::active(ScreenId::Chain, airlock::tui::action::Mode::default()) {
        assert!(text.contains(b.name), "help lists {}", b.name);
    }
    c.keys("finding");
    let t = c.render(120, 20);
    insta::assert_snapshot!("help_chain_filtered", t.backend());
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("next-finding") && !text.contains("page-down"));
    c.keys("<Esc><Esc>");
    assert!(c.app.overlay.is_none());
}

#[test]
fn palette_runs_actions_by_name() {
    let dir = fixture_dir("palette");
    copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    let mut c = Console::open(&dir);
    c.keys("<Enter>:next-f");
    let t = c.render(120, 16);
    insta::assert_snapshot!("palette", t.backend());
    c.keys("<Enter>");
    assert!(c.app.overlay.is_none());
    assert_eq!(c.app.chain.selected, 2, "the palette ran next-finding");
}

#[test]
fn hostile_strings_cannot_reach_the_terminal() {
    let dir = fixture_dir("hostile");
    write_hostile_bundle(&dir.join("evil\u{1b}]0;title\u{7}.json"));
    let mut c = Console::open(&dir);
    let check = |buf: &ratatui::buffer::Buffer| {
        for cell in buf.content() {
            assert!(
                !cell.symbol().chars().any(|ch| ch.is_control()
                    || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
                "a control character reached a cell: {:?}",
                cell.symbol()
            );
        }
    };
    let t = c.render(150, 10);
    check(t.backend().buffer());
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("evil\\x1b]0;title\\x07.json"), "{text}");
    c.keys("<Enter>"); // a broken bundle opens at its first finding: entry 1
    let t = c.render(150, 40);
    check(t.backend().buffer());
    let text = buffer_text(t.backend().buffer());
    assert!(
        text.contains("\\x1b]0;pwned\\x07"),
        "payload escapes shown: {text}"
    );
    assert!(
        text.contains("pk\\x1b[H\\u{202e}"),
        "partition key shown escaped"
    );
    assert!(text.contains("acme\\x1b[5m"), "tenant shown escaped");
}

#[test]
fn monochrome_carries_meaning_without_colour() {
    let dir = review_dir("mono");
    let mut c = Console::with_theme(&dir, Theme::builtin("monochrome").unwrap(), true);
    c.keys("/deleted<Enter><Enter>n");
    let t = c.render(150, 30);
    let buf = t.backend().buffer();
    for cell in buf.content() {
        assert!(matches!(cell.fg, Color::Reset), "fg colour {:?}", cell.fg);
        assert!(matches!(cell.bg, Color::Reset), "bg colour {:?}", cell.bg);
    }
    let (x, y) = find_text(buf, "✗ FINDING").unwrap();
    assert!(buf[(x, y)].modifier.contains(Modifier::UNDERLINED));
    let (x, y) = find_text(buf, "▶").unwrap();
    assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
    insta::assert_snapshot!("chain_monochrome_read_only", t.backend());
    assert!(buffer_text(buf).contains("READ-ONLY"));
}

#[test]
fn new_files_appear_on_the_next_poll_and_non_bundles_do_not_open() {
    let dir = fixture_dir("poll");
    copy_vector(&dir, "bundles/two-nodes.json", "a.json");
    let mut c = Console::open(&dir);
    assert_eq!(c.app.bundles.rows.len(), 1);
    copy_vector(&dir, "tamper/entries-deleted.json", "b.json");
    std::fs::write(dir.join("c.txt"), "not json").unwrap();
    c.app.poll_dir();
    c.settle();
    assert_eq!(c.app.bundles.rows.len(), 3);
    c.keys("G<Enter>");
    assert_eq!(c.app.screen, ScreenId::Bundles);
    assert!(c.message().contains("not a bundle"));
    std::fs::remove_file(dir.join("a.json")).unwrap();
    c.keys("r");
    assert_eq!(c.app.bundles.rows.len(), 2);
}

#[test]
fn a_large_bundle_reads_only_the_visible_rows() {
    let dir = fixture_dir("large");
    let path = dir.join("large.json");
    let spec = airlock::core::bundle::synth::SynthSpec {
        tenant: "acme".into(),
        nodes: 2,
        entries_per_node: 5_000,
        start_ms: 1_767_600_000_000,
        seed: 7,
    };
    let raw = dir.join("raw.bin");
    airlock::core::bundle::synth::write_synthetic_bundle(
        &spec,
        std::fs::File::create(&raw).unwrap(),
    )
    .unwrap();
    // Tamper with one payload deep in the first log (the digest then no longer matches either).
    let mut b = airlock::core::bundle::load_bundle(&raw).unwrap();
    std::fs::remove_file(&raw).unwrap();
    b.job_logs[0].entries[4_321].payload.push(' ');
    airlock::core::bundle::write_bundle(std::fs::File::create(&path).unwrap(), &b).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Enter>");
    let index = c.app.chain.index().unwrap();
    assert_eq!(index.entry_count(), 10_000);
    assert_eq!(
        index.report.findings.len(),
        2,
        "{:?}",
        index.report.findings
    );
    c.keys("n");
    assert_eq!((c.app.chain.log, c.app.chain.selected), (0, 4_321));
    c.keys("<End>");
    let text = c.screen_text(150, 30);
    assert!(text.contains("▶ 4999"), "{text}");
    assert!(
        c.app.chain.cached_rows() < 200,
        "only visible rows were read"
    );
}

fn keys_fixture(name: &str) -> std::path::PathBuf {
    let dir = fixture_dir(name);
    copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    copy_vector(
        &dir,
        "bundles/two-nodes-signed.json",
        "two-nodes-signed.json",
    );
    std::fs::create_dir_all(dir.join(".keys")).unwrap();
    for f in [
        "test-signer.pem",
        "test-signer.pub.pem",
        "untrusted-signer.pem",
        "untrusted-signer.pub.pem",
    ] {
        copy_vector(&dir.join(".keys"), &format!("keys/{f}"), f);
    }
    dir
}

#[test]
fn keys_screen_trusts_signs_and_checks_with_confirmation() {
    let dir = keys_fixture("keys");
    let trust = airlock::core::trust::TrustSet::empty();
    let mut c = Console::with_trust(&dir, Theme::default(), false, trust);
    c.keys("6");
    assert_eq!(c.app.screen, ScreenId::Keys);
    assert_eq!(c.app.keys.local.len(), 2);
    let t = c.render(130, 12);
    insta::assert_snapshot!("keys", t.backend());
    // Trust test-signer: a confirmation first, then the trust store changes and the signed
    // bundle verifies as trusted.
    c.keys("t");
    let t = c.render(130, 16);
    insta::assert_snapshot!("keys_confirm_trust", t.backend());
    c.keys("y");
    assert_eq!(c.app.keys.trusted.len(), 1);
    assert!(c.message().contains("trusted test-signer"));
    c.keys("1g");
    assert!(c.screen_text(150, 8).contains("✓ test-signer"));
    c.keys("6v");
    assert!(
        c.message().contains("✓ signature valid"),
        "{:?}",
        c.app.message
    );
    // Re-signing an already signed bundle spells out the overwrite; n cancels and changes nothing.
    let before = std::fs::read(dir.join("two-nodes-signed.json")).unwrap();
    c.keys("s");
    let text = c.screen_text(130, 16);
    assert!(text.contains("will be OVERWRITTEN"), "{text}");
    c.keys("n");
    assert_eq!(
        std::fs::read(dir.join("two-nodes-signed.json")).unwrap(),
        before
    );
    // Untrust with confirmation.
    c.keys("<Right>u");
    assert!(c.screen_text(130, 16).contains("Untrust this key?"));
    c.keys("y");
    assert!(c.app.keys.trusted.is_empty());
}

#[test]
fn read_only_removes_every_state_changing_action() {
    let dir = keys_fixture("keys-ro");
    let trust = airlock::core::trust::TrustSet::empty();
    let mut c = Console::with_trust(&dir, Theme::default(), true, trust);
    c.keys("6tcsu");
    assert!(c.app.overlay.is_none(), "no confirmation, no prompt");
    assert!(!dir.join(".trust.json").exists());
    c.keys("?");
    let text = c.screen_text(130, 40);
    assert!(!text.contains("generate-key"), "{text}");
    let names: Vec<&str> = airlock::tui::widgets::overlay::help_rows(
        ScreenId::Keys,
        airlock::tui::action::Mode::READ_ONLY,
        "",
    )
    .iter()
    .map(|b| b.name)
    .collect();
    for name in ["generate-key", "trust", "untrust", "sign"] {
        assert!(!names.contains(&name), "{name} offered in read-only mode");
    }
    assert!(names.contains(&"check-signature"));
    assert!(text.contains("check-signature"));
    assert!(text.contains("READ-ONLY"));
}

/// `--ascii` (TERM=linux / vt100): every glyph on screen is ASCII (borders, ribbon, marks, bars)
/// and every colour is one of the 16 ANSI colours.
#[test]
fn ascii_mode_draws_ascii_in_sixteen_colours() {
    let dir = fixture_dir("ascii");
    copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    let mut theme = Theme::builtin("dark").unwrap();
    theme.ascii = true;
    let mut c = Console::with_theme(&dir, theme, false);
    let sixteen = |col: Color| !matches!(col, Color::Rgb(..) | Color::Indexed(_));
    for keys in ["", "<Enter>"] {
        c.keys(keys);
        let t = c.render(120, 30);
        let buf = t.backend().buffer();
        for cell in buf.content() {
            assert!(cell.symbol().is_ascii(), "{:?}", cell.symbol());
            assert!(
                sixteen(cell.fg) && sixteen(cell.bg),
                "{:?}/{:?}",
                cell.fg,
                cell.bg
            );
        }
        if keys.is_empty() {
            insta::assert_snapshot!("ascii_bundles", t.backend());
        } else {
            insta::assert_snapshot!("ascii_chain", t.backend());
            assert!(find_text(buf, "x FINDING entries-deleted").is_some());
            assert!(find_text(buf, "+-").is_some(), "box corners");
        }
    }
}

/// Every overlay fits any terminal, down to one cell: the help overlay, the palette, a
/// confirmation and a prompt are drawn at 59x20, 40x10, 20x5, 2x2 and 1x1 without a panic (the
/// help overlay asked for at least 60 columns and panicked below), and a title that does not fit
/// ends with `…`.
#[test]
fn overlays_draw_on_any_terminal_size() {
    use airlock::tui::app::Overlay;
    let dir = keys_fixture("overlays-tiny");
    let mut c = Console::with_trust(
        &dir,
        Theme::default(),
        false,
        airlock::core::trust::TrustSet::empty(),
    );
    let sizes = [(59, 20), (40, 10), (20, 5), (2, 2), (1, 1)];
    let draw_all = |c: &mut Console, what: &str| {
        for (w, h) in sizes {
            let text = c.screen_text(w, h);
            assert_eq!(text.lines().count(), h as usize, "{what} at {w}x{h}");
        }
    };
    c.keys("?");
    assert!(matches!(c.app.overlay, Some(Overlay::Help { .. })));
    draw_all(&mut c, "help");
    let text = c.screen_text(40, 10);
    assert!(
        text.contains("┌ Help · Bundles screen · type to filt…┐"),
        "{text}"
    );
    // Too narrow for four columns: the keys and what they do, cut with `…`.
    assert!(text.contains("│KEYS       WHAT IT DOES"), "{text}");
    assert!(
        text.contains("│/          filter the list by text (f…│"),
        "{text}"
    );
    c.keys("<Esc>:");
    assert!(matches!(c.app.overlay, Some(Overlay::Palette { .. })));
    draw_all(&mut c, "palette");
    c.keys("<Esc>6t");
    assert!(matches!(c.app.overlay, Some(Overlay::Confirm { .. })));
    draw_all(&mut c, "confirmation");
    c.keys("n");
    c.keys("c");
    assert!(matches!(c.app.overlay, Some(Overlay::KeyName { .. })));
    draw_all(&mut c, "prompt");
}

/// Signing a bundle on the Keys screen with a key file other users can read (the vectors' keys are
/// mode 0444) signs and shows the engine's warning, as `airlock sign` prints it.
#[test]
fn sign_shows_the_key_permission_warning() {
    let dir = keys_fixture("keys-sign-open");
    let private = dir.join(".keys/test-signer.pem");
    let (_, warnings) = airlock::core::trust::load_signing_key(&private).unwrap();
    let want = warnings
        .first()
        .expect("the engine warns about mode 0444")
        .clone();
    let trust = airlock::core::trust::TrustSet::empty();
    let mut c = Console::with_trust(&dir, Theme::default(), false, trust);
    c.keys("1g6");
    assert_eq!(c.app.screen, ScreenId::Keys);
    c.keys("gs");
    assert!(c.screen_text(130, 16).contains("Sign this bundle?"));
    c.keys("y");
    let msg = c.app.message.clone().unwrap();
    assert!(msg.text.contains("signed"), "{msg:?}");
    assert!(msg.text.contains(&want), "{msg:?}");
    assert_eq!(msg.level, airlock::tui::widgets::bars::Level::Warning);
}

/// A bundle of more nodes than the Chain screen's tab line holds: the selected node's tab stays
/// on the line as `]` walks to the last node (it used to run off the right edge), the others
/// counted on either side.
#[test]
fn the_selected_node_tab_stays_on_the_line() {
    use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let dir = fixture_dir("many-nodes");
    let file = std::fs::File::create(dir.join("forty.json")).unwrap();
    write_synthetic_bundle(&SynthSpec::acme(40, 2, 7), std::io::BufWriter::new(file)).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    let nodes_line = |c: &mut Console| {
        let text = c.screen_text(120, 30);
        let line = text
            .lines()
            .find(|l| l.contains("nodes:"))
            .map(str::to_string);
        line.unwrap_or_else(|| panic!("no node tabs:\n{text}"))
    };
    let first = nodes_line(&mut c);
    assert!(
        first.contains("[node-00 (2)]") && first.contains('›'),
        "{first}"
    );
    for _ in 0..39 {
        c.keys("]");
    }
    let last = nodes_line(&mut c);
    assert!(last.contains("[node-39 (2)]"), "{last}");
    assert!(last.contains('‹') && !last.contains("node-00"), "{last}");
}

/// The selected key's id and fingerprint are shown whole at any width: they wrap onto more rows
/// of the detail (a fingerprint is read out over a second channel; a cut one reads as another).
#[test]
fn the_key_fingerprint_wraps_instead_of_being_cut() {
    let dir = keys_fixture("keys-fingerprint");
    let trust = airlock::core::trust::TrustSet::empty();
    let mut c = Console::with_trust(&dir, Theme::default(), false, trust);
    c.keys("6");
    let (_, id) = c.app.keys.selected_key().expect("a local key");
    for (w, h) in [(80, 24), (60, 20), (130, 16)] {
        let text = c.screen_text(w, h);
        let rows: Vec<&str> = text.lines().collect();
        let at = |label: &str| rows.iter().position(|l| l.contains(label)).unwrap();
        let (id_at, fp_at) = (at("│ key id"), at("│ fingerprint"));
        let end = fp_at + rows[fp_at..].iter().position(|l| l.contains('└')).unwrap();
        // The rows' text inside the border, less the labels and the key's name.
        let words = |from: usize, to: usize| -> Vec<String> {
            rows[from..to]
                .iter()
                .flat_map(|l| l.trim_matches(|c| c == '│' || c == ' ').split_whitespace())
                .filter(|w| !["key", "id", "fingerprint"].contains(w) && !w.starts_with('('))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(words(id_at, fp_at).concat(), id, "{w}x{h}:\n{text}");
        // The lists' squeezed cells end with `…` (a cut key id read as a whole one).
        let row = rows.iter().find(|l| l.contains("▶ test-signer")).unwrap();
        let local = row.split("││").next().unwrap();
        let id_cell = local.split_whitespace().nth(2).unwrap();
        assert!(
            id_cell.ends_with('…') && id.starts_with(id_cell.trim_end_matches('…')),
            "{w}x{h}: {local}"
        );
        assert_eq!(
            words(fp_at, end).join(" "),
            airlock::core::trust::fingerprint(&id),
            "{w}x{h}:\n{text}"
        );
    }
}

/// The help overlay at 80x24 says which of its rows are shown and that there are more; scrolling
/// stops at the last row (28 Downs used to leave three rows in an empty box); `Ctrl-d`/`Ctrl-u`
/// scroll instead of typing `d`/`u` into the filter, as in every text field.
#[test]
fn the_help_overlay_scrolls_to_its_last_row_and_says_there_is_more() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let dir = fixture_dir("help-scroll");
    copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    let mut c = Console::open(&dir);
    c.keys("<Enter>?");
    let rows = airlock::tui::widgets::overlay::help_rows(
        ScreenId::Chain,
        airlock::tui::action::Mode::default(),
        "",
    );
    let n = rows.len();
    let text = c.screen_text(80, 24);
    assert!(text.contains(&format!(" of {n}  ↓ more")), "{text}");
    for _ in 0..n + 5 {
        c.keys("<Down>");
    }
    let text = c.screen_text(80, 24);
    // The last row is on the last line of the box, nothing after it.
    let last = rows.last().unwrap().name;
    let at = text.lines().position(|l| l.contains(last)).expect(last);
    assert!(text.lines().nth(at + 1).unwrap().contains('└'), "{text}");
    assert!(text.contains(&format!("–{n} of {n} ↑  more")), "{text}");
    // One Up shows one more row at the top again.
    c.keys("<Up>");
    assert!(c
        .screen_text(80, 24)
        .contains(&format!("–{} of {n} ↑↓", n - 1)));
    let ctrl = |c: &mut Console, ch| {
        c.app
            .handle_key(KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL));
    };
    ctrl(&mut c, 'u');
    ctrl(&mut c, 'd');
    match &c.app.overlay {
        Some(airlock::tui::app::Overlay::Help { filter, .. }) => assert_eq!(filter, ""),
        other => panic!("{other:?}"),
    }
    ctrl(&mut c, 'u');
    ctrl(&mut c, 'u');
    ctrl(&mut c, 'u');
    assert!(c
        .screen_text(80, 24)
        .contains(" of {n}  ↓ more".replace("{n}", &n.to_string()).as_str()));
}

/// The Chain detail scrolls by the rows it draws: a payload of thousands of characters (one
/// logical line, many wrapped rows) scrolls to its end, and a short one never scrolls into a blank
/// panel; the bottom border counts the rows above and below.
#[test]
fn the_chain_detail_scrolls_to_the_end_of_a_long_payload_and_no_further() {
    use airlock::core::bundle::{load_bundle, write_bundle};
    let dir = fixture_dir("chain-long-payload");
    let mut b = load_bundle(&std::path::Path::new(VECTORS).join("bundles/two-nodes.json")).unwrap();
    let long = format!("{{\"note\":\"{}THE-END\"}}", "x".repeat(3000));
    b.job_logs[0].entries[0].payload = long;
    write_bundle(std::fs::File::create(dir.join("long.json")).unwrap(), &b).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    let text = c.screen_text(80, 24);
    assert!(text.contains("more rows · J/K scroll"), "{text}");
    for _ in 0..200 {
        c.keys("J");
    }
    let text = c.screen_text(80, 24);
    assert!(text.contains("THE-END"), "{text}");
    // Down to the next (short) entry: J as often leaves its rows in the panel.
    c.keys("j");
    for _ in 0..50 {
        c.keys("J");
    }
    let text = c.screen_text(80, 24);
    assert!(text.contains("payload"), "{text}");
    assert!(text.contains("  }"), "the payload's last row: {text}");
}

/// On a narrow terminal the Chain table's squeezed columns cut their values with `…`, never in
/// silence (a cut tHlc or status reads as another value).
#[test]
fn squeezed_chain_cells_are_marked_cut() {
    let dir = fixture_dir("chain-squeezed");
    copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    let text = c.screen_text(56, 24);
    // The entry it opens at: its tHlc and its finding, whole or cut with `…`.
    let row = text
        .lines()
        .find(|l| l.contains("▶ 2 "))
        .unwrap_or_else(|| panic!("{text}"));
    let shown = |value: &str| {
        let chars: Vec<char> = value.chars().collect();
        row.contains(value)
            || (1..chars.len())
                .any(|n| row.contains(&format!("{}…", chars[..n].iter().collect::<String>())))
    };
    assert!(shown("✗ payload-modified"), "{row}");
    let hlc = row.split_whitespace().nth(3).unwrap();
    assert!(hlc.ends_with('…') || hlc.contains(":node-"), "{row}");
    assert!(text.contains("partiti… "), "{text}");
}

/// A bundle-level finding's message longer than the line ends with `…` at 80 columns (it was cut
/// by the edge in silence), and a node id longer than the tab line is cut with `…` inside its
/// brackets.
#[test]
fn long_chain_banner_and_node_tab_are_marked_cut() {
    let dir = fixture_dir("chain-long-banner");
    let src = std::path::Path::new(VECTORS).join("bundles/two-nodes.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    json["manifestDigest"] = format!("sha256:{}", "0".repeat(64)).into();
    let node = "gate-with-a-node-id-far-longer-than-any-terminal-line-is-wide-0123456789";
    json["jobLogs"][0]["nodeId"] = node.into();
    std::fs::write(dir.join("odd.json"), json.to_string()).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    let text = c.screen_text(80, 24);
    let banner = text
        .lines()
        .find(|l| l.contains("✗ manifest-mismatch"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(banner.ends_with('…'), "{banner}");
    let tabs = text.lines().find(|l| l.starts_with(" nodes: ")).unwrap();
    assert!(shows_cut(tabs, node), "{tabs}");
    assert!(tabs.contains("…] ") && tabs.chars().count() <= 80, "{tabs}");
}

/// The Keys screen's bundle line cuts a long file name in its middle so that the bundle's
/// signature state stays in view at 80 columns (the name pushed it off the line's end).
#[test]
fn the_keys_bundle_line_keeps_the_signature_state() {
    let dir = keys_fixture("keys-long-bundle");
    let name = "a-bundle-exported-by-the-night-shift-from-gate-42-after-the-incident.json";
    std::fs::rename(dir.join("two-nodes-signed.json"), dir.join(name)).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Home>6");
    assert_eq!(c.app.screen, ScreenId::Keys);
    let text = c.screen_text(80, 24);
    let line = text.lines().nth(2).unwrap();
    assert!(
        line.starts_with(" bundle (from Bundles) a-bundle-"),
        "{line}"
    );
    assert!(line.contains("…") && line.contains(".json  "), "{line}");
    assert!(line.contains("test-signer"), "{line}");
}
