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
