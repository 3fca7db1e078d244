//! The console's bug fixes and daily-user features (issue 9), each driven through the real app
//! on a real runtime and drawn with ratatui's TestBackend.

mod tui_common;

use airlock::tui::screens::outbox::ReplayRun;
use std::sync::{Arc, Mutex};
use tui_common::Console;

fn review_dir(name: &str) -> std::path::PathBuf {
    let dir = tui_common::fixture_dir(name);
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    tui_common::copy_vector(&dir, "tamper/entries-deleted.json", "entries-deleted.json");
    tui_common::copy_vector(
        &dir,
        "tamper/payload-modified.json",
        "payload-modified.json",
    );
    dir
}

/// A running replay's progress is redrawn as it moves (counts and elapsed time).
#[test]
fn live_replay_progress_moves() {
    let mut c = Console::open(&review_dir("replay-progress"));
    let progress = Arc::new(Mutex::new(Default::default()));
    c.app.outbox.replay = Some(ReplayRun {
        progress: progress.clone(),
        started: std::time::Instant::now(),
        upstream: "http://127.0.0.1:9".into(),
    });
    assert!(c.app.busy());
    c.app.on_tick();
    {
        let mut p = progress.lock().unwrap();
        p.total = 400;
        p.attempted = 37;
        p.delivered = 37;
    }
    assert!(c.app.on_tick(), "the replay's counts moved: redraw");
}

/// A status message goes away when the screen changes or after a few seconds, so the key hints
/// come back.
#[test]
fn stale_status_messages_clear() {
    let mut c = Console::open(&review_dir("stale-message"));
    c.keys("3");
    c.app.message = Some(airlock::tui::widgets::bars::StatusMessage {
        level: airlock::tui::widgets::bars::Level::Info,
        text: "old news".into(),
        at: std::time::Instant::now(),
    });
    c.keys("1");
    assert!(c.app.message.is_none(), "cleared on screen change");
    c.app.message = Some(airlock::tui::widgets::bars::StatusMessage {
        level: airlock::tui::widgets::bars::Level::Info,
        text: "old news".into(),
        at: std::time::Instant::now(),
    });
    let later = std::time::Instant::now() + airlock::tui::app::MESSAGE_TTL;
    assert!(c.app.expire_message(later));
    assert!(c.app.message.is_none());
}

/// Number columns fit their largest value: seq 299 999 is drawn whole, not `29999`.
#[test]
fn scheduler_sequence_numbers_are_not_cut() {
    use airlock::tui::screens::scheduler::SchedulerScreen;
    let mut s = SchedulerScreen {
        tenants: vec![airlock::core::store::scheduler::TenantSummary {
            tenant: "acme".into(),
            head: String::new(),
            head_hlc: String::new(),
            length: 300_000,
            last_snapshot: None,
            unsnapshotted: 0,
        }],
        loaded: true,
        selected: 299_999,
        ..Default::default()
    };
    let theme = airlock::tui::theme::Theme::default();
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 20)).unwrap();
    t.draw(|f| s.draw(f, f.area(), &theme, None)).unwrap();
    let text = tui_common::buffer_text(t.backend().buffer());
    assert!(text.contains("▶ 299999 "), "{text}");
}

/// `--read-only` opens the store and outbox read-only (a file the user can only read opens), never
/// creates a store file, removes export too, and `App::apply` refuses state changes whatever
/// path they come by.
#[test]
fn read_only_opens_read_only_and_creates_nothing() {
    use airlock::tui::action::{self, Action, ScreenId};
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::cli::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let theme = airlock::tui::theme::Theme::default();
    let empty = airlock::core::trust::TrustSet::empty;

    // No store there: nothing is created, and the screen says why.
    let missing = tmp.path().join("nowhere/store.sqlite3");
    let mut c = Console::with_trust(&ws.bundles, theme.clone(), true, empty());
    c.app.config.db = Some(missing.clone());
    c.keys("4");
    assert!(!missing.exists() && !missing.parent().unwrap().exists());
    let err = c.app.scheduler.error.clone().expect("an error");
    assert!(err.contains("read-only"), "{err}");

    // A store and outbox the user may only read open and show their contents.
    for f in [&ws.db, &ws.outbox] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let mut c = Console::with_trust(&ws.bundles, theme, true, empty());
    c.app.config.db = Some(ws.db.clone());
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("4");
    assert!(
        c.app.scheduler.error.is_none(),
        "{:?}",
        c.app.scheduler.error
    );
    assert!(!c.app.scheduler.tenants.is_empty());
    c.keys("5");
    assert_eq!(c.app.outbox.counts.clone().expect("counts").queued, 5);
    // Export is gone from the keymap and refused by apply.
    let e = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('e'),
        crossterm::event::KeyModifiers::NONE,
    );
    assert_eq!(action::lookup(ScreenId::Outbox, true, &e), None);
    let before: Vec<_> = std::fs::read_dir(ws.outbox.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for a in [
        Action::ExportOutbox,
        Action::Replay,
        Action::Import,
        Action::TrustKey,
    ] {
        c.app.apply(a);
        c.settle();
        assert!(c.app.overlay.is_none(), "{a:?} asked for confirmation");
        let msg = c.app.message.clone().unwrap().text;
        assert!(msg.contains("read-only"), "{a:?}: {msg}");
    }
    let after: Vec<_> = std::fs::read_dir(ws.outbox.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before.len(), after.len(), "no export file written");
}

/// The command `airlock demo` prints on exit opens the same store, outbox, trust store, keys and
/// bundles as the demo session (so signed bundles show trusted, not untrusted).
#[test]
fn demo_exit_hint_reopens_the_same_workspace() {
    use clap::Parser;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::cli::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let hint = airlock::cli::console::reopen_command(&ws.root);
    let argv: Vec<&str> = hint.split(' ').collect();
    let cli = airlock::cli::Cli::try_parse_from(&argv).unwrap();
    let airlock::cli::Command::Console(args) = cli.command else {
        panic!("{hint} is not a console command")
    };
    let ctx = airlock::cli::Ctx { db: cli.db };
    let config = airlock::cli::console::config_for(&ctx, &args).unwrap();
    assert_eq!(config.dir, ws.bundles);
    assert_eq!(config.db.as_deref(), Some(ws.db.as_path()));
    assert_eq!(config.outbox.as_deref(), Some(ws.outbox.as_path()));
    assert_eq!(config.trust_store, ws.trust_store);
    assert_eq!(config.keys_dir, ws.keys);
    // Its trust is the workspace's: the demo signer is trusted.
    let trust = airlock::cli::console::console_trust(Some(&config.trust_store)).unwrap();
    let mut c = Console::with_trust(
        &config.dir,
        airlock::tui::theme::Theme::default(),
        true,
        (*trust).clone(),
    );
    let text = c.screen_text(160, 30);
    assert!(text.contains("demo-signer"), "{text}");
}

/// A long confirmation at 80x24 and 60x20 keeps its key line on screen, its last line is reached
/// by scrolling, and only `y` confirms (Enter does not).
#[test]
fn confirmations_fit_small_terminals_and_take_y_only() {
    use airlock::tui::app::Overlay;
    let dir = tui_common::fixture_dir("confirm-small");
    tui_common::copy_vector(&dir, "merge/a.json", "a.json");
    tui_common::copy_vector(&dir, "tamper/entries-deleted.json", "b-deleted.json");
    let mut c = Console::open(&dir);
    let db = tui_common::fixture_dir("confirm-small-store").join("airlock.db");
    c.app.config.db = Some(db);
    c.keys("  mF");
    let Some(Overlay::Confirm { lines, .. }) = c.app.overlay.clone() else {
        panic!("force confirmation expected: {:?}", c.app.message);
    };
    let last = lines.last().unwrap().clone();
    for (w, h) in [(80u16, 24u16), (60, 20)] {
        let text = c.screen_text(w, h);
        assert!(text.contains("y: do it"), "{w}x{h}:\n{text}");
        assert!(text.contains("n/Esc: cancel"), "{w}x{h}:\n{text}");
        let mut seen = text.contains(&last[..20.min(last.len())]);
        for _ in 0..60 {
            if seen {
                break;
            }
            c.keys("j");
            seen = c.screen_text(w, h).contains(&last[..20.min(last.len())]);
        }
        assert!(seen, "{w}x{h}: the last line {last:?} is reachable");
        assert!(c.screen_text(w, h).contains("y: do it"));
        c.keys("<Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up><Up>");
    }
    c.keys("<Enter>");
    assert!(
        matches!(c.app.overlay, Some(Overlay::Confirm { .. })),
        "Enter does not confirm"
    );
    c.keys("n");
    assert!(c.app.overlay.is_none());
}

/// A merge plan's long lists are bounded (the totals still count everything) and the plan is
/// freed when the screen is left; coming back plans again.
#[test]
fn merge_preview_is_bounded_and_freed_on_leave() {
    use airlock::tui::screens::merge::MergeState;
    let dir = tui_common::fixture_dir("merge-bound");
    tui_common::copy_vector(&dir, "merge/a.json", "a.json");
    let mut c = Console::open(&dir);
    c.app.config.db = Some(tui_common::fixture_dir("merge-bound-store").join("airlock.db"));
    c.app.merge.keep_rows = 3;
    c.keys("m");
    let plan = c.app.merge.plan().expect("planned");
    assert_eq!(plan.totals.new, 6);
    assert_eq!(plan.new_entries.as_ref().unwrap().len(), 3);
    let text = c.screen_text(160, 30);
    assert!(text.contains("Merged order 6"), "{text}");
    assert!(c.app.merge.cut_note().unwrap().contains("first 3 rows"));
    c.keys("1");
    assert!(
        matches!(c.app.merge.state, MergeState::Empty),
        "freed on leave"
    );
    c.keys("3");
    assert_eq!(c.app.merge.plan().expect("planned again").totals.new, 6);
}
