//! The WAL screen as an incident responder drives it: keys through the real app on a real
//! runtime, drawn with ratatui's TestBackend.

mod tui_common;

use airlock::tui::action::{self, Action, Mode, ScreenId};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tui_common::Console;

/// A console on a folder holding one vector WAL, opened on the WAL screen and read to its end.
fn opened(fixture: &str, name: &str) -> Console {
    let dir = tui_common::fixture_dir(fixture);
    tui_common::copy_vector(&dir, &format!("wal/{name}"), name);
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Wal);
    read_to_end(&c);
    c
}

/// Waits (up to 10 s) until the open log is indexed to its end.
fn read_to_end(c: &Console) {
    let start = std::time::Instant::now();
    while c.app.wal.is_indexing() && start.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// `/` searches the frames (LSN, HLC, type, state, payload text) in the background and selects
/// the match, `n` goes on (wrapping), and the damage row is found by its offset or kind; the help
/// overlay and the status bar list the keys (one table drives them).
#[test]
fn slash_searches_the_frames_and_the_damage_row() {
    let mut c = opened("wal-search", "torn-tail.alwl");
    // A job id that only LSN 8's payload names.
    c.keys("/use1-1767614400005<Enter>");
    assert_eq!(c.app.wal.selected, 7, "{}", c.message());
    let text = c.screen_text(140, 40);
    assert!(text.contains("\"workflow\": \"spike\""), "{text}");
    // Every JobAccepted: LSN 2, then 3, then wrapping to 2 (Esc clears the last search, which
    // `/` would offer again).
    c.keys("<Esc>/jobaccepted<Enter>");
    assert_eq!(c.app.wal.selected, 1);
    c.keys("n");
    assert_eq!(c.app.wal.selected, 2);
    c.keys("n");
    assert_eq!(c.app.wal.selected, 1);
    assert!(c.message().contains("wrapped"), "{}", c.message());
    c.keys("N");
    assert_eq!(c.app.wal.selected, 2);
    // The damage row: by its offset, then by what recovery would do.
    c.keys("<Esc><Home>/offset 1358<Enter>");
    assert_eq!(c.app.wal.selected, 10, "{}", c.message());
    c.keys("<Esc><Home>/torn-tail<Enter>");
    assert_eq!(c.app.wal.selected, 10);

    let key = |ch| KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE);
    for (ch, a) in [
        ('/', Action::Search),
        ('n', Action::SearchNext),
        ('N', Action::SearchPrev),
    ] {
        assert_eq!(
            action::lookup(ScreenId::Wal, Mode::READ_ONLY, &key(ch)),
            Some(a)
        );
    }
    c.keys("?");
    let help = c.screen_text(160, 48);
    assert!(help.contains("search the frames"), "{help}");
}

/// A payload longer than its panel: J/K scroll the panel (the help lists them), and another row
/// starts at its top again.
#[test]
fn j_and_k_scroll_a_long_payload() {
    let mut c = opened("wal-detail-scroll", "basic.alwl");
    // At 100x20 the panel shows the head of LSN 1's pretty JSON, not its spec.
    let before = c.screen_text(100, 20);
    assert!(before.contains("│LSN 1  offset 8 "), "{before}");
    assert!(!before.contains("load-test"), "{before}");
    c.keys("JJJ");
    let after = c.screen_text(100, 20);
    assert!(after.contains("\"workflow\": \"load-test\""), "{after}");
    assert!(!after.contains("│LSN 1  offset 8 "), "{after}");
    c.keys("KKK");
    let back = c.screen_text(100, 20);
    assert!(back.contains("│LSN 1  offset 8 "), "{back}");
    c.keys("JJj");
    let next = c.screen_text(100, 20);
    assert!(
        next.contains("│LSN 2  offset 206 "),
        "another row starts at the top: {next}"
    );
    c.keys("?");
    let help = c.screen_text(160, 48);
    assert!(help.contains("scroll the payload panel down"), "{help}");
}

/// `R` asks first, and the question says what recovery would do to this log as the screen read
/// it (a torn tail: how many bytes are saved and cut where; damage: refused, where); with
/// `--read-only` there is no `R` and nothing is asked or changed.
#[test]
fn recover_asks_first_saying_what_recovery_would_do() {
    let mut c = opened("wal-recover-ask", "torn-tail.alwl");
    c.keys("R");
    let text = c.screen_text(160, 48);
    assert!(
        text.contains("Now: torn-tail at offset 1358: copy the 20 torn bytes"),
        "{text}"
    );
    c.keys("n");
    assert!(c.app.overlay.is_none());

    let mut c = opened("wal-recover-ask-damage", "mid-damage.alwl");
    c.keys("R");
    let text = c.screen_text(160, 48);
    assert!(
        text.contains("Now: refused at offset 520: refuse to open"),
        "{text}"
    );

    let dir = tui_common::fixture_dir("wal-recover-ask-ro");
    tui_common::copy_vector(&dir, "wal/torn-tail.alwl", "torn-tail.alwl");
    let before = std::fs::read(dir.join("torn-tail.alwl")).unwrap();
    let mut c = Console::with_theme(
        &dir,
        airlock::tui::theme::Theme::builtin("dark").unwrap(),
        true,
    );
    c.keys("<Home><Enter>R");
    assert!(c.app.overlay.is_none(), "nothing asked with --read-only");
    assert!(c.message().starts_with("read-only"), "{}", c.message());
    assert_eq!(std::fs::read(dir.join("torn-tail.alwl")).unwrap(), before);
}

/// A log refused for damage at offset 520 with valid frames after it: `/` finds the damaged
/// span's row in its place (between LSN 3 and LSN 5) and the frames read past it (marked `*`),
/// and `R` still says that recovery refuses the log and does not skip the damage.
#[test]
fn damage_rows_are_found_in_place_and_recovery_still_refuses() {
    let mut c = opened("wal-damage-in-place", "mid-damage.alwl");
    c.keys("/crc-mismatch<Enter>");
    assert_eq!(c.app.wal.selected, 3, "{}", c.message());
    let text = c.screen_text(140, 40);
    assert!(text.contains("LSN 4 lost"), "{text}");
    // LSN 9, the 8th frame: row 8 with the damage row before it.
    c.keys("<Esc><Home>/JobCompleted<Enter>");
    assert_eq!(c.app.wal.selected, 8, "{}", c.message());
    let text = c.screen_text(140, 40);
    assert!(text.contains("│▶ 9* "), "{text}");
    assert!(
        text.contains("* read past the damage at offset 520"),
        "{text}"
    );
    c.keys("<Esc>R");
    let text = c.screen_text(160, 48);
    assert!(
        text.contains("Now: refused at offset 520: refuse to open"),
        "{text}"
    );
    assert!(text.contains("recovery does not skip"), "{text}");
}

/// With no log open the WAL screen lists the workspace's logs (name, size, what recovery would
/// do), never a link named like one; Enter opens the selected log, `o` lists them again over it
/// (on the open one), Esc goes back to it, and Enter on another opens that one.
#[test]
fn the_wal_screen_lists_the_workspace_logs_to_open() {
    let dir = tui_common::fixture_dir("wal-picker");
    tui_common::copy_vector(&dir, "wal/basic.alwl", "a-basic.alwl");
    tui_common::copy_vector(&dir, "wal/torn-tail.alwl", "b-torn.alwl");
    std::os::unix::fs::symlink(dir.join("a-basic.alwl"), dir.join("c-link.alwl")).unwrap();
    tui_common::copy_vector(&dir, "wal/basic.alwl", "d-evil\u{1b}[31m.alwl");
    let mut c = Console::open(&dir);
    c.keys("9");
    assert_eq!(c.app.screen, ScreenId::Wal);
    assert!(c.app.wal.path().is_none());
    let text = c.screen_text(140, 30);
    assert!(text.contains("No WAL open. Enter opens"), "{text}");
    assert!(
        text.contains("a-basic.alwl") && text.contains("b-torn.alwl"),
        "{text}"
    );
    assert!(text.contains("torn tail"), "{text}");
    assert!(text.contains("10 frames, stops at 1358"), "{text}");
    assert!(
        !text.contains("c-link.alwl"),
        "a link is not offered: {text}"
    );
    // A name's control characters are shown escaped, never sent to the terminal.
    assert!(
        text.contains("d-evil\\x1b[31m.alwl") && !text.contains('\u{1b}'),
        "{text}"
    );
    assert!(text.contains("1 of 3 WAL files"), "{text}");
    // The selected log is marked, not only coloured.
    assert!(text.contains("│▶ a-basic.alwl"), "{text}");
    // At 80 columns the names and what recovery would do still show whole.
    let narrow = c.screen_text(80, 24);
    assert!(
        narrow.contains("b-torn.alwl") && narrow.contains("stops at 1358"),
        "{narrow}"
    );
    // Enter on the second: the torn log opens and is indexed.
    c.keys("<Down><Enter>");
    let open = |c: &Console| c.app.wal.path().map(|p| p.file_name().unwrap().to_owned());
    assert_eq!(open(&c).as_deref(), Some("b-torn.alwl".as_ref()));
    assert!(!c.app.wal.picker_shown());
    // `o`: the list again, on the open log; Esc goes back to it unchanged.
    c.keys("o");
    assert!(c.app.wal.picker_shown());
    let text = c.screen_text(140, 30);
    assert!(text.contains("b-torn.alwl is open"), "{text}");
    assert!(text.contains("2 of 3 WAL files"), "{text}");
    c.keys("<Esc>");
    assert!(!c.app.wal.picker_shown());
    assert_eq!(c.app.screen, ScreenId::Wal);
    assert_eq!(open(&c).as_deref(), Some("b-torn.alwl".as_ref()));
    // `o`, Up, Enter: the other log opens.
    c.keys("o<Up><Enter>");
    assert_eq!(open(&c).as_deref(), Some("a-basic.alwl".as_ref()));
    // R over the list does not recover the log behind it.
    c.keys("o");
    let key = |ch| KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE);
    assert_eq!(
        action::lookup(ScreenId::Wal, Mode::ALL_KEYS, &key('o')),
        Some(Action::PickWal)
    );
    c.keys("R");
    assert!(
        c.message().contains("Esc goes back to the open log"),
        "{}",
        c.message()
    );
    assert!(c.app.overlay.is_none());
    // `:goto lsn 3` over the list shows that frame of the open log (once it is read).
    read_to_end(&c);
    c.keys(":goto lsn 3<Enter>");
    assert!(!c.app.wal.picker_shown(), "{}", c.message());
    assert_eq!(c.app.wal.selected, 2);
}

/// With the mouse on (`console --mouse`), a click selects the frame row under it, and in the list
/// of the workspace's logs the log under it; a click on the header or outside the table selects
/// nothing.
#[test]
fn a_click_selects_a_frame_or_a_log() {
    use crossterm::event::{Event, MouseButton, MouseEvent, MouseEventKind};
    let mut c = opened("wal-click", "basic.alwl");
    c.app.config.mouse = true;
    let click = |c: &mut Console, (x, y): (u16, u16)| {
        c.app.handle_event(Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        }))
    };
    let at = |c: &mut Console, text: &str| {
        let t = c.render(140, 40);
        tui_common::find_text(t.backend().buffer(), text).expect(text)
    };
    let (x, y) = at(&mut c, "│  5 ");
    assert!(click(&mut c, (x + 1, y)));
    assert_eq!(c.app.wal.selected, 4);
    // The selected frame is marked, not only coloured.
    at(&mut c, "│▶ 5 ");
    // The header line: nothing changes.
    let (x, y) = at(&mut c, "│  LSN");
    click(&mut c, (x + 1, y));
    assert_eq!(c.app.wal.selected, 4);
    // The list: a second log of the workspace, selected by a click and opened with Enter.
    let dir = c.app.config.dir.clone();
    tui_common::copy_vector(&dir, "wal/torn-tail.alwl", "other.alwl");
    c.keys("1r9o");
    let (x, y) = at(&mut c, "other.alwl");
    assert!(click(&mut c, (x, y)));
    c.keys("<Enter>");
    let open = c.app.wal.path().and_then(|p| p.file_name()).unwrap();
    assert_eq!(open, "other.alwl");
}

/// The WAL picker cuts a log's file name longer than its column with `…` at 80 and 120 columns,
/// and on a terminal too narrow for every column (a cut name reads as another log's).
#[test]
fn long_wal_file_names_are_marked_cut() {
    let dir = tui_common::fixture_dir("wal-picker-long");
    let name = "gate-42-eu-west-primary-node-write-ahead-log-of-the-night-shift-2026-11-27.alwl";
    tui_common::copy_vector(&dir, "wal/basic.alwl", name);
    let mut c = Console::open(&dir);
    c.keys("9");
    assert!(c.app.wal.picker_shown());
    for (w, h) in [(80, 24), (120, 40), (38, 20)] {
        let text = c.screen_text(w, h);
        let row = text.lines().find(|l| l.contains("│▶ ")).unwrap();
        assert!(tui_common::shows_cut(row, name), "{w}x{h}: {row}\n{text}");
    }
}

/// A log whose file name is longer than the head line keeps its state in view: the name is cut
/// with `…`, the node, frames, bytes and outcome follow (the name used to push them off the edge).
#[test]
fn a_long_wal_name_leaves_the_head_line_its_state() {
    let dir = tui_common::fixture_dir("wal-long-head");
    let name = "ゲート-エー-長い名前の先行書き込みログ-二〇二六年十一月二十七日.alwl";
    tui_common::copy_vector(&dir, "wal/basic.alwl", name);
    let mut c = Console::open(&dir);
    c.keys("<Home><Enter>");
    read_to_end(&c);
    let text = tui_common::shown_text(c.render(80, 24).backend().buffer());
    let head = text.lines().nth(1).unwrap();
    assert!(tui_common::shows_cut(head, name), "{head}");
    assert!(head.trim_end().ends_with("bytes · clean"), "{head}");
}
