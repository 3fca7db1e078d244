//! The console's bug fixes and daily-user features (issue 9), each driven through the real app
//! on a real runtime and drawn with ratatui's TestBackend.

mod tui_common;

use airlock::tui::screens::outbox::ReplayRun;
use std::sync::{Arc, Mutex};
use tui_common::{review_dir, shows_cut, Console};

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
            damaged_snapshots: Vec::new(),
        }],
        loaded: true,
        selected: 299_999,
        ..Default::default()
    };
    let theme = airlock::tui::theme::Theme::default();
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 20)).unwrap();
    t.draw(|f| s.render(f, f.area(), &theme, None)).unwrap();
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
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
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
    assert_eq!(
        action::lookup(ScreenId::Outbox, action::Mode::READ_ONLY, &e),
        None
    );
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
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let hint = airlock::cli::console::reopen_command(&ws.root);
    let argv: Vec<&str> = hint.split(' ').collect();
    let cli = airlock::cli::Cli::try_parse_from(&argv).unwrap();
    let airlock::cli::Command::Console(args) = cli.command else {
        panic!("{hint} is not a console command")
    };
    let ctx = airlock::cli::Ctx {
        db: cli.db,
        config: cli.config,
    };
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

fn key(c: crossterm::event::KeyCode) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(c, crossterm::event::KeyModifiers::NONE)
}

/// End/G on the Plan tab shows the plan's last page, not a blank area past it.
#[test]
fn plan_tab_end_shows_the_last_page() {
    let dir = tui_common::fixture_dir("plan-end");
    tui_common::copy_vector(&dir, "merge/a.json", "a.json");
    let mut c = Console::open(&dir);
    c.app.config.db = Some(tui_common::fixture_dir("plan-end-store").join("airlock.db"));
    c.keys("m");
    c.app
        .merge
        .show_tab(airlock::tui::screens::merge::MergeTab::Plan);
    c.keys("G");
    let last = c.app.merge.lines.last().unwrap().clone();
    let first = c.app.merge.lines.first().unwrap().clone();
    let text = c.screen_text(160, 24);
    assert!(text.contains(last.trim_end()), "{text}");
    // The page is full: the body shows more than the last line alone.
    let shown = c
        .app
        .merge
        .lines
        .iter()
        .filter(|l| !l.trim().is_empty() && text.contains(l.trim_end()))
        .count();
    assert!(shown >= 4 || text.contains(first.trim_end()), "{text}");
}

/// R before the outbox counts are loaded says so instead of asking about "0 of 0".
#[test]
fn replay_waits_for_the_counts() {
    let mut c = Console::open(&review_dir("replay-counts"));
    c.keys("5");
    assert!(c.app.outbox.counts.is_none());
    c.keys("R");
    assert!(c.app.overlay.is_none());
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("still loading"), "{msg}");
}

/// A half-copied file is "truncated", an unreadable one "unreadable" — not "not a bundle".
#[test]
fn truncated_and_unreadable_files_say_so() {
    let dir = review_dir("truncated");
    let whole = std::fs::read(dir.join("two-nodes.json")).unwrap();
    std::fs::write(dir.join("half.json"), &whole[..whole.len() / 2]).unwrap();
    std::fs::write(dir.join("notes.txt"), "just text\n").unwrap();
    let mut c = Console::open(&dir);
    let text = c.screen_text(160, 20);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("half.json").contains("truncated"), "{text}");
    assert!(line("notes.txt").contains("not a bundle"), "{text}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let locked = dir.join("locked.json");
        std::fs::write(&locked, &whole).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        let mut c = Console::open(&dir);
        let text = c.screen_text(160, 20);
        let l = text.lines().find(|l| l.contains("locked.json")).unwrap();
        assert!(l.contains("unreadable"), "{text}");
    }
}

/// Clearing a filter keeps the selected file selected.
#[test]
fn clearing_the_filter_keeps_the_selection() {
    let mut c = Console::open(&review_dir("filter-keep"));
    c.keys("/pay<Enter>");
    let sel = c.app.bundles.selected_row().unwrap().path.clone();
    assert!(sel.ends_with("payload-modified.json"));
    c.keys("<Esc>");
    assert_eq!(c.app.bundles.selected_row().unwrap().path, sel);
}

/// Keys typed while a bundle is indexed are queued and run when it is ready; a broken bundle
/// opens at its first finding.
#[test]
fn keys_typed_while_indexing_are_kept_and_broken_bundles_open_at_a_finding() {
    let mut c = Console::open(&review_dir("index-queue"));
    c.keys("/payload<Enter>");
    // The Bundles pass kept its index: opening reads nothing again.
    c.app.handle_key(key(crossterm::event::KeyCode::Enter));
    assert!(c.app.chain.index().is_some(), "opened from the kept index");
    c.keys("<Esc>");
    // A bundle past the kept-index budget is indexed when opened: keys typed meanwhile wait.
    for r in &mut c.app.bundles.rows {
        r.index = None;
    }
    c.app.handle_key(key(crossterm::event::KeyCode::Enter));
    assert!(c.app.chain.is_loading());
    c.app.handle_key(key(crossterm::event::KeyCode::Char('G')));
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("queued"), "{msg}");
    c.settle();
    assert!(!c.app.chain.is_loading());
    let idx = c.app.chain.index().unwrap();
    let last = idx.logs[c.app.chain.log].entries.len() - 1;
    assert_eq!(c.app.chain.selected, last, "G ran after indexing");

    let mut c = Console::open(&review_dir("open-at-finding"));
    c.keys("/payload<Enter><Enter>");
    assert_eq!(c.app.chain.finding_cursor, Some(0));
}

/// The help box follows the screen width and `q` closes it; an exact palette name wins; the
/// active tab shows at 80 columns; a long file name does not
/// hide the Chain verdict.
#[test]
fn small_comforts() {
    use airlock::tui::action::ScreenId;
    use airlock::tui::widgets::overlay::palette_rows;
    let dir = review_dir("comforts");
    let long = format!("{}.json", "very-long-bundle-file-name-".repeat(6));
    std::fs::copy(dir.join("payload-modified.json"), dir.join(&long)).unwrap();
    let mut c = Console::open(&dir);
    c.keys("5?");
    let text = c.screen_text(180, 40);
    assert!(text.contains("idempotency key)"), "{text}");
    c.keys("q");
    assert!(c.app.overlay.is_none(), "q closes help");
    assert_eq!(
        palette_rows(
            ScreenId::Keys,
            airlock::tui::action::Mode::default(),
            "trust"
        )[0]
        .name,
        "trust"
    );
    c.keys("6");
    let text = c.screen_text(80, 24);
    assert!(text.lines().next().unwrap().contains("[6 Keys"), "{text}");
    c.keys("1/very-long<Enter><Enter>");
    let text = c.screen_text(100, 24);
    assert!(text.contains("2 findings"), "{text}");
}

/// `/` search with n/N (wrapping, with a message) on Chain and Merge, `:goto seq N` and
/// `:goto job ID` on Chain and Scheduler, Ctrl-d/Ctrl-u half pages.
#[test]
fn search_goto_and_half_pages() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let dir = review_dir("search");
    let mut c = Console::open(&dir);
    c.keys("/two<Enter><Enter>");
    let index = c.app.chain.index().unwrap();
    let job3 = index.read_row(0, 3).entry.job_id.clone();
    let job1 = index.read_row(0, 1).entry.job_id.clone();
    c.keys(&format!("/{}<Enter>", &job3[..13]));
    assert_eq!(c.app.chain.selected, 3);
    c.keys("n");
    assert_eq!(c.app.chain.selected, 3, "the only match: wraps to itself");
    assert!(c.app.message.clone().unwrap().text.contains("wrapped"));
    c.keys("<Esc>");
    assert!(c.app.search.is_none());
    assert_eq!(c.app.screen, airlock::tui::action::ScreenId::Chain);
    c.keys(&format!(":goto job {}<Enter>", job1.to_uppercase()));
    assert_eq!((c.app.chain.log, c.app.chain.selected), (0, 1));
    c.keys(":goto seq 4<Enter>");
    assert_eq!(c.app.chain.selected, 4);
    c.keys(":goto seq 99<Enter>");
    assert!(c
        .app
        .message
        .clone()
        .unwrap()
        .text
        .contains("no position 99"));
    c.keys("g");
    c.render(120, 30); // sets the page height
    let page = c.app.chain.page;
    c.app
        .handle_key(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL));
    assert_eq!(c.app.chain.selected, (page / 2).clamp(1, 4));
    c.app
        .handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    assert_eq!(c.app.chain.selected, 0);

    // Scheduler: goto by position and by job id, from the demo store.
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.db = Some(ws.db.clone());
    c.keys("4");
    c.render(140, 40);
    c.keys(":goto seq 7<Enter>");
    assert_eq!(c.app.scheduler.selected, 7);
    c.settle();
    let job = c.app.scheduler.entry(2).unwrap().job_id.clone();
    c.keys(&format!(":goto job {job}<Enter>"));
    assert_eq!(c.app.scheduler.selected, 2);
    let action = c.app.scheduler.entry(5).unwrap().t_hlc.clone();
    c.keys(&format!("/{action}<Enter>"));
    assert_eq!(c.app.scheduler.selected, 5);

    // Merge: search the plan's lists.
    let dir = tui_common::fixture_dir("search-merge");
    tui_common::copy_vector(&dir, "merge/a.json", "a.json");
    let mut c = Console::open(&dir);
    c.app.config.db = Some(tui_common::fixture_dir("search-merge-store").join("airlock.db"));
    c.keys("m");
    c.app
        .merge
        .show_tab(airlock::tui::screens::merge::MergeTab::Merged);
    let target = c
        .app
        .merge
        .row_text(airlock::tui::screens::merge::MergeTab::Merged, 4)
        .unwrap();
    let job = target.split(' ').nth(2).unwrap().to_string();
    c.keys(&format!("/{job}<Enter>"));
    assert_eq!(c.app.merge.selected, 4);
}

/// `y` copies the selected value (OSC 52 queued for the terminal, and the fallback file); Keys
/// shows the full key id and its fingerprint; `P` writes the shown proof for `chain verify-proof`;
/// `S` snapshots after a `y`-only confirmation.
#[test]
fn copy_keys_fingerprint_proof_file_and_snapshot() {
    use airlock::core::store::{rules, scheduler};
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.db = Some(ws.db.clone());
    c.app.config.keys_dir = ws.keys.clone();
    c.app.config.trust_store = ws.trust_store.clone();
    c.app.clipboard_file = tmp.path().join("clip/clipboard.txt");
    c.keys("6");
    let (_, id) = c.app.keys.selected_key().expect("a local key");
    let text = c.screen_text(160, 30);
    assert!(text.contains(&id), "full key id shown: {text}");
    assert!(
        text.contains(&airlock::core::trust::fingerprint(&id)),
        "{text}"
    );
    c.keys("y");
    assert_eq!(std::fs::read_to_string(&c.app.clipboard_file).unwrap(), id);
    assert_eq!(c.app.osc52.as_deref(), Some(id.as_str()));

    c.keys("4");
    c.render(160, 40);
    c.keys("p");
    c.keys("P");
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("verify-proof"), "{msg}");
    let file = std::fs::read_dir(ws.db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("proof-")
        })
        .expect("a proof file");
    let proof: scheduler::InclusionProof =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    scheduler::verify_proof(&proof).unwrap();

    // A store whose chain has entries after its last snapshot: S snapshots them.
    let db = tmp.path().join("fresh.db");
    {
        let mut store = airlock::core::store::Store::open(&db).unwrap();
        let mut opts = airlock::core::import::ImportOptions::new("console-test");
        opts.batch_size = 1_000_000;
        let input = std::path::Path::new(tui_common::VECTORS).join("merge/a.json");
        airlock::core::import::import(&mut store, &[input], &opts).unwrap();
    }
    c.app.config.db = Some(db.clone());
    c.keys("1");
    c.keys("4");
    let store = airlock::core::store::Store::open(&db).unwrap();
    let before = rules::snapshots(&store, "acme").unwrap().len();
    let pending = c.app.scheduler.current().unwrap().unsnapshotted;
    assert!(pending > 0, "entries after the last snapshot");
    c.keys("S<Enter>");
    assert!(c.app.overlay.is_some(), "Enter does not confirm");
    c.keys("y");
    let after = rules::snapshots(&store, "acme").unwrap().len();
    assert!(after > before, "{before} -> {after}");
}

/// Every console state change lands in the store's hash-chained audit log with the operator, a
/// time and its inputs (a forced import lists what it dropped); the Activity screen shows it, and
/// `airlock audit list|verify` reads and checks it (exit 1 after an edit).
#[test]
fn audit_log_records_changes_and_activity_shows_them() {
    use airlock::tui::action::ScreenId;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let dir = tui_common::fixture_dir("audit");
    tui_common::copy_vector(&dir, "merge/a.json", "a.json");
    tui_common::copy_vector(&dir, "tamper/entries-deleted.json", "b-deleted.json");
    let db = tmp.path().join("audit.db");
    let mut c = Console::with_trust(
        &dir,
        airlock::tui::theme::Theme::default(),
        false,
        airlock::core::trust::TrustSet::empty(),
    );
    c.app.config.db = Some(db.clone());
    c.app.config.keys_dir = ws.keys.clone();
    c.app.config.trust_store = tmp.path().join("trust.json");
    // Trust a local key (y confirms), then force-import a broken bundle.
    c.keys("6ty");
    assert_eq!(c.app.keys.trusted.len(), 1, "{:?}", c.app.message);
    c.keys("1  mFy");
    assert!(
        c.app.message.as_ref().unwrap().text.starts_with("IMPORTED"),
        "{:?}",
        c.app.message
    );
    c.keys("7");
    assert_eq!(c.app.screen, ScreenId::Activity);
    let records = c.app.activity.records.clone();
    let actions: Vec<&str> = records.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["force-import", "trust"], "newest first");
    assert!(c.app.activity.verdict.as_ref().unwrap().ok);
    let force = &records[0];
    assert!(!force.operator.is_empty());
    assert_eq!(force.inputs["droppedCount"], 2);
    assert_eq!(force.inputs["dropped"][0]["reason"], "entries-deleted");
    let text = c.screen_text(160, 30);
    assert!(
        text.contains("✓ audit chain intact") && text.contains("force-import"),
        "{text}"
    );

    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap()
    };
    let out = cli(&["audit", "verify"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK: 2 audit record(s)"));
    let out = cli(&["audit", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[1]["action"], "trust");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE audit_log SET operator = 'mallory' WHERE seq = 0",
            [],
        )
        .unwrap();
    let out = cli(&["audit", "verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["firstBreak"]["seq"], 0);
    c.keys("r");
    assert!(c.screen_text(160, 30).contains("BROKEN at record 0"));
}

/// Pumps the app's channel until `done` holds: the inbox watcher reports from its own thread.
fn wait_until(c: &mut Console, what: &str, done: impl Fn(&airlock::tui::app::App) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        while let Ok(msg) = c.inbox.rx.try_recv() {
            c.app.handle_msg(msg);
        }
        c.settle();
        if done(&c.app) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            c.screen_text(160, 16)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A console watching a fresh inbox (`--inbox`), with a store and a local signing key.
fn inbox_console(
    name: &str,
    settle_ms: u64,
    poll: bool,
) -> (Console, std::path::PathBuf, tempfile::TempDir) {
    let dir = tui_common::fixture_dir(name);
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Console::open(&dir);
    c.app.config.db = Some(tmp.path().join("airlock.db"));
    c.app.config.keys_dir = tmp.path().join("keys");
    airlock::core::trust::generate_key("ops", &c.app.config.keys_dir).unwrap();
    c.app
        .watch_inbox(airlock::tui::inbox_watch::InboxSettings {
            dir: dir.clone(),
            settle: std::time::Duration::from_millis(settle_ms),
            poll,
        })
        .unwrap();
    wait_until(&mut c, "the inbox's first picture", |a| {
        a.bundles.listed_once
    });
    (c, dir, tmp)
}

fn row_state(app: &airlock::tui::app::App, name: &str) -> Option<String> {
    let theme = airlock::tui::theme::Theme::default();
    app.bundles
        .rows
        .iter()
        .find(|r| r.file_name() == name)
        .map(|r| r.state_label(&theme).0)
}

/// Inbox mode (inotify): a dropped file appears with a NEW badge, is verified, and `i` + `y`
/// imports it and files it to done/ with its signed triage report (JSON + Markdown) beside it.
#[test]
fn inbox_new_file_is_verified_imported_and_filed_with_its_report() {
    let (mut c, dir, _tmp) = inbox_console("inbox-import", 200, false);
    assert!(
        c.app.bundles.inbox.as_deref().unwrap().contains("inotify"),
        "{:?}",
        c.app.bundles.inbox
    );
    assert!(c.screen_text(160, 16).contains("the inbox is empty"));
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    wait_until(&mut c, "the new file verified", |a| {
        row_state(a, "two-nodes.json").as_deref() == Some("✓ ok")
    });
    let text = c.screen_text(160, 16);
    assert!(text.contains("NEW two-nodes.json"), "{text}");
    assert!(text.contains(" Inbox ") && text.contains("1 new"), "{text}");
    assert!(
        text.contains("i inbox-import"),
        "the decision keys are hinted: {text}"
    );
    // `r` has the watcher send its picture again: every file is examined again.
    c.keys("r");
    wait_until(&mut c, "the rescan examined again", |a| {
        a.bundles.rows.iter().all(|r| r.stamp.modified.is_some())
            && row_state(a, "two-nodes.json").as_deref() == Some("✓ ok")
    });
    assert!(
        c.app.bundles.rows[0].new,
        "still NEW until opened or decided"
    );

    c.keys("i");
    let text = c.screen_text(160, 24);
    assert!(text.contains("Import and file to done/?"), "{text}");
    assert!(text.contains("two-nodes.json.triage.json"), "{text}");
    c.keys("y");
    let msg = c.app.message.clone().unwrap();
    assert!(msg.text.contains("imported: "), "{msg:?}");
    assert!(msg.text.contains("filed to"), "{msg:?}");
    let done = dir.join("done");
    assert!(done.join("two-nodes.json").is_file());
    assert!(!dir.join("two-nodes.json").exists());
    let (envelope, report) =
        airlock::core::triage::read_envelope(&done.join("two-nodes.json.triage.json")).unwrap();
    assert_eq!(report.decision.action, "import");
    assert_eq!(report.verdict, "ok");
    assert!(report.decision.note.starts_with("imported: "), "{report:?}");
    assert_eq!(envelope.signatures.len(), 1, "signed with the local key");
    let md = std::fs::read_to_string(done.join("two-nodes.json.triage.md")).unwrap();
    assert!(md.contains("import"), "{md}");
    wait_until(&mut c, "the filed file to leave the list", |a| {
        a.bundles.rows.is_empty()
    });
    // The filed report verifies with the signer's public key.
    let public = c.app.config.keys_dir.join("ops.pub.pem");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["triage", "verify", "--trust-store"])
        .arg(_tmp.path().join("no-trust.json"))
        .arg("--trusted-key")
        .arg(&public)
        .arg(done.join("two-nodes.json.triage.md"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// Inbox mode with the polling fallback (`--inbox-poll`): a file written in two parts with a
/// pause stays "copying…" and is not verified until it stops growing; a file that is not a bundle
/// is rejected (`x`) to rejected/ and a bundle quarantined (`Q`), each with its report; a name
/// already taken gets a suffix.
#[test]
fn inbox_waits_for_half_written_files_and_rejects_and_quarantines() {
    use std::io::Write;
    let (mut c, dir, _tmp) = inbox_console("inbox-poll", 1500, true);
    assert!(c.app.bundles.inbox.as_deref().unwrap().contains("polling"));
    let whole =
        std::fs::read(std::path::Path::new(tui_common::VECTORS).join("bundles/two-nodes.json"))
            .unwrap();
    let path = dir.join("slow.json");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&whole[..whole.len() / 2]).unwrap();
    f.flush().unwrap();
    wait_until(&mut c, "the half-written file listed", |a| {
        row_state(a, "slow.json").is_some()
    });
    // For a while (well within the settle interval) it waits, unread.
    let pause = std::time::Instant::now();
    while pause.elapsed() < std::time::Duration::from_millis(300) {
        wait_until(&mut c, "", |_| true);
        assert_eq!(
            row_state(&c.app, "slow.json").as_deref(),
            Some("◌ copying…")
        );
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    c.app.message = None;
    assert!(c.screen_text(160, 16).contains("1 still copying"));
    f.write_all(&whole[whole.len() / 2..]).unwrap();
    drop(f);
    wait_until(&mut c, "the completed file verified", |a| {
        row_state(a, "slow.json").as_deref() == Some("✓ ok")
    });

    std::fs::write(dir.join("notes.txt"), b"not a bundle at all").unwrap();
    wait_until(&mut c, "the text file read", |a| {
        row_state(a, "notes.txt").as_deref() == Some("⊘ not a bundle")
    });
    c.app.bundles.select_path(&dir.join("notes.txt"));
    c.keys("i");
    assert!(c
        .app
        .message
        .as_ref()
        .unwrap()
        .text
        .contains("not a bundle"));
    assert!(c.app.overlay.is_none(), "no import of a non-bundle");
    std::fs::create_dir_all(dir.join("rejected")).unwrap();
    std::fs::write(dir.join("rejected/notes.txt"), b"an earlier file").unwrap();
    c.keys("x");
    c.keys("n");
    assert!(dir.join("notes.txt").exists(), "n cancels: nothing moved");
    c.keys("xy");
    assert_eq!(
        std::fs::read(dir.join("rejected/notes.txt")).unwrap(),
        b"an earlier file",
        "never replaced"
    );
    assert!(dir.join("rejected/notes-1.txt").is_file());
    let (_, report) =
        airlock::core::triage::read_envelope(&dir.join("rejected/notes-1.txt.triage.json"))
            .unwrap();
    assert_eq!(
        (report.verdict.as_str(), report.decision.action.as_str()),
        ("not-a-bundle", "reject")
    );
    assert!(dir.join("rejected/notes-1.txt.triage.md").is_file());

    c.app.bundles.select_path(&dir.join("slow.json"));
    c.keys("Qy");
    assert!(dir.join("quarantine/slow.json").is_file());
    assert!(dir.join("quarantine/slow.json.triage.json").is_file());
    assert!(!dir.join("slow.json").exists());

    // The CLI for hosts without a console sees the same inbox.
    std::fs::write(dir.join("late.txt"), b"late").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(["inbox", "scan", "--json", "--settle-ms", "50"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["filed"]["rejected"], 2);
    assert_eq!(v["filed"]["quarantine"], 1);
    assert_eq!(v["files"][0]["state"], "settled");
    assert_eq!(v["files"][0]["verdict"], "not a bundle");
}

/// Without `--inbox` the decision keys say what they need and move nothing.
#[test]
fn inbox_keys_outside_inbox_mode_move_nothing() {
    let dir = review_dir("inbox-off");
    let mut c = Console::open(&dir);
    c.keys("x");
    assert!(c.app.overlay.is_none());
    assert!(c.app.message.as_ref().unwrap().text.contains("--inbox"));
    assert!(!c.screen_text(160, 16).contains("inbox-reject"));
    // Neither the help overlay nor the palette offers keys this console does not have.
    c.keys("?");
    let help = c.screen_text(160, 60);
    assert!(help.contains("rescan"), "{help}");
    assert!(
        !help.contains("inbox-import") && !help.contains("inbox-reject"),
        "{help}"
    );
    assert!(!dir.join("rejected").exists());
}

/// The Ledger screen folds the WALs, reads a job's lanes as the selection moves and compares
/// two ledgers in the background (the keys never wait on a WAL read); the answers land on screen.
#[test]
fn ledger_lanes_load_in_the_background() {
    let dir = tui_common::fixture_dir("ledger-lanes");
    tui_common::copy_vector(&dir, "ledger/gate-a.alwl", "gate-a.alwl");
    tui_common::copy_vector(&dir, "ledger/gate-b.alwl", "gate-b.alwl");
    let mut c = Console::open(&dir);
    c.keys("0");
    assert_eq!(c.app.ledger.jobs.len(), 4);
    assert!(!c.app.ledger.lanes.is_empty(), "the first job's lanes");
    c.keys("j");
    assert!(!c.app.ledger.lanes_loading);
    let nodes: Vec<&str> = c.app.ledger.lanes.iter().map(|l| l.node.as_str()).collect();
    assert_eq!(nodes, ["gate-a", "gate-b"]);
    assert!(c
        .screen_text(120, 30)
        .contains("decided by 1767614400020:0:gate-b"));
    // The diff of the two ledgers is compared off the UI thread too, and lands on screen.
    c.keys("d");
    assert!(!c.app.ledger.diff_loading);
    assert!(c.screen_text(120, 30).contains("copies of one node's"));
}

/// The Outbox SEQ column fits its largest number: seq 299 999 is drawn whole, not `29999`.
#[test]
fn outbox_sequence_numbers_are_not_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let mut c = Console::open(&ws.bundles);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("5");
    assert!(
        !c.app.outbox.envelopes.is_empty(),
        "the demo outbox has envelopes"
    );
    c.app.outbox.envelopes[0].seq = 299_999;
    c.app.outbox.envelopes[0].attempt_count = 0;
    let text = c.screen_text(160, 30);
    assert!(text.contains(" 299999 "), "{text}");
}

/// The Outbox screen refuses to queue again a cancelled conflict before asking (the engine's own
/// rule, `Envelope::check_retry`: conflicts are never resent), not after the confirmation.
#[test]
fn outbox_retry_of_a_cancelled_conflict_is_refused_up_front() {
    use airlock::core::outbox::EnvelopeStatus;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let mut c = Console::open(&ws.bundles);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("5");
    for e in &mut c.app.outbox.envelopes {
        e.status = EnvelopeStatus::Cancelled;
        e.response_status = Some(409);
    }
    c.keys("r");
    assert!(c.app.overlay.is_none(), "refused before the confirmation");
    assert!(c.message().contains("conflict"), "{}", c.message());
}

/// Each poll of the directory matches the listing against the rows by path in one pass (a hash
/// lookup per file, not a scan of the rows per file: these three polls of 20 000 files took 200 s
/// in a debug build with the scan, 0.8 s with the lookup).
/// Unchanged files keep their rows and verification, a removed one goes, a new one is queued,
/// and the selection stays on its file.
#[test]
fn polling_a_large_directory_keeps_rows_in_one_pass() {
    use airlock::tui::screens::bundles::{BundleRow, VerifyState};
    use airlock::tui::tasks::{FileStamp, TaskMsg};
    let dir = tui_common::fixture_dir("poll-many");
    let mut c = Console::open(&dir);
    let n = 20_000;
    let stamp = FileStamp {
        size: 1,
        modified: None,
    };
    let path = |i: usize| dir.join(format!("f{i:06}.json"));
    c.app.bundles.rows = (0..n)
        .map(|i| BundleRow {
            path: path(i),
            stamp,
            listing: None,
            verify: VerifyState::Failed("kept".into()),
            index: None,
            header: None,
            imported: None,
            new: false,
        })
        .collect();
    c.app.bundles.select_path(&path(n / 2));
    let mut files: Vec<_> = (1..n).map(|i| (path(i), stamp)).collect();
    files.push((path(n), stamp));
    for _ in 0..3 {
        c.app.handle_msg(TaskMsg::Polled(Ok(files.clone())));
    }
    c.settle();
    let rows = &c.app.bundles.rows;
    assert_eq!(rows.len(), n);
    assert_eq!(rows[0].path, path(1), "the removed file's row is gone");
    assert!(rows[..n - 1]
        .iter()
        .all(|r| matches!(&r.verify, VerifyState::Failed(k) if k == "kept")));
    assert!(
        !matches!(rows[n - 1].verify, VerifyState::Failed(_)),
        "the new file was examined"
    );
    assert_eq!(c.app.bundles.selected_row().unwrap().path, path(n / 2));
}

/// Recovering a WAL from its screen: Enter on the .alwl opens it, `R` asks first, the recovery
/// runs in the background and says what it cut and where it saved it; damage followed by valid
/// frames is refused with its offset and the file is left as it was.
#[test]
fn wal_recover_from_the_console_cuts_a_torn_tail_and_refuses_damage() {
    // A console on a folder holding one vector WAL: the console, the log and its bytes.
    let open = |fixture: &str, name: &str| {
        let dir = tui_common::fixture_dir(fixture);
        tui_common::copy_vector(&dir, &format!("wal/{name}"), name);
        let log = dir.join(name);
        let before = std::fs::read(&log).unwrap();
        (Console::open(&dir), log, before)
    };
    let (mut c, log, before) = open("wal-recover", "torn-tail.alwl");
    c.keys("<Home><Enter>");
    assert_eq!(c.app.wal.path(), Some(log.as_path()));
    c.keys("R");
    assert!(c.app.overlay.is_some(), "recover asks first");
    c.keys("n");
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "declined: nothing changed"
    );
    c.keys("Ry");
    assert!(!c.app.wal.recovering);
    let saved = airlock::core::wal::torn_tail_path(&log, 1358);
    assert!(
        c.message()
            .starts_with("cut 20 torn bytes at offset 1358; saved as "),
        "{}",
        c.message()
    );
    assert_eq!(std::fs::read(&log).unwrap(), before[..1358]);
    assert_eq!(std::fs::read(&saved).unwrap(), before[1358..]);
    // Longer than the status bar: its middle is cut, marked, and the saved file's name stays
    // whole (cut at the edge, `torn-at-1358` read as `torn-at-13`, another valid name).
    let text = c.screen_text(80, 24);
    let bar = text.lines().last().unwrap().trim_end();
    assert!(
        bar.ends_with("torn-tail.alwl.torn-at-1358")
            && bar.contains("cut 20 torn bytes")
            && bar.contains('…'),
        "{bar}"
    );

    let (mut c, log, before) = open("wal-refuse", "mid-damage.alwl");
    c.keys("<Home><Enter>Ry");
    assert!(c.message().contains("520"), "{}", c.message());
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "refused: nothing changed"
    );
}

/// `console --trust-store` defaults to what its help says: the user's trust store, the same file
/// every other command opens (no command reads a trust-store variable, so the help names none);
/// `--workspace` gives the workspace's trust.json, and an explicit `--trust-store` wins over both.
#[test]
fn console_trust_store_default_is_what_its_help_says() {
    use clap::{CommandFactory, Parser};
    let cli = airlock::cli::Cli::command();
    let console = cli.find_subcommand("console").unwrap();
    let help = console
        .get_arguments()
        .find(|a| a.get_id() == "trust_store")
        .and_then(|a| a.get_help())
        .map(|h| h.to_string())
        .unwrap();
    assert!(!help.contains("AIRLOCK_TRUST_STORE"), "{help}");
    assert!(help.contains("$XDG_DATA_HOME/airlock/trust.json"), "{help}");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("bundles")).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let config = |argv: &[&str]| {
        let cli = airlock::cli::Cli::try_parse_from(argv).unwrap();
        let airlock::cli::Command::Console(args) = cli.command else {
            panic!("{argv:?} is not a console command")
        };
        let ctx = airlock::cli::Ctx {
            db: cli.db,
            config: cli.config,
        };
        airlock::cli::console::config_for(&ctx, &args).unwrap()
    };
    let db = tmp.path().join("a.db");
    let db = db.to_str().unwrap();
    let plain = config(&["airlock", "--db", db, "console", "--dir", dir]);
    assert_eq!(plain.trust_store, airlock::core::trust::trust_store_path());
    let ws = config(&["airlock", "--db", db, "console", "--workspace", dir]);
    assert_eq!(ws.trust_store, tmp.path().join("trust.json"));
    let explicit = config(&[
        "airlock",
        "--db",
        db,
        "console",
        "--workspace",
        dir,
        "--trust-store",
        "/elsewhere/t.json",
    ]);
    assert_eq!(
        explicit.trust_store,
        std::path::PathBuf::from("/elsewhere/t.json")
    );
}

/// Waits (up to a minute) until `done` holds, applying background results as they arrive.
fn pump_until(c: &mut Console, mut done: impl FnMut(&Console) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done(c) {
        assert!(
            std::time::Instant::now() < deadline,
            "still waiting; status: {:?}",
            c.app.message.as_ref().map(|m| &m.text)
        );
        if !c.pump() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// On a bundle of 200,100 entries, `:goto job` and `/` read the entries in the background: the
/// key that starts them returns at once, other keys work while they run, the status line shows
/// how far they got, Esc stops them, and the result is reported when it comes. A search that finds
/// nothing within `SEARCH_LIMIT` rows leaves the selection where it was and `n` continues from
/// where it stopped.
#[test]
fn chain_goto_and_search_run_in_the_background() {
    use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    use airlock::tui::action::ScreenId;
    use airlock::tui::search::SEARCH_LIMIT;
    use std::time::Instant;
    let dir = tui_common::fixture_dir("search-background");
    let entries = SEARCH_LIMIT + 100;
    let spec = SynthSpec {
        tenant: "acme".into(),
        nodes: 1,
        entries_per_node: entries,
        start_ms: 1_767_600_000_000,
        seed: 11,
    };
    let t0 = Instant::now();
    let out = std::fs::File::create(dir.join("big.json")).unwrap();
    write_synthetic_bundle(&spec, std::io::BufWriter::new(out)).unwrap();
    let mut c = Console::open(&dir);
    c.keys("<Enter>");
    eprintln!("written and indexed in {:?}", t0.elapsed());
    assert_eq!(c.app.screen, ScreenId::Chain);
    assert_eq!(c.app.chain.index().unwrap().entry_count(), entries);
    assert_eq!(c.app.chain.selected, 0);

    // A jobId that is not there: every entry is read, in the background.
    let missing = "00000000-0000-0000-0000-000000000000";
    let started = Instant::now();
    c.keys_now(&format!(":goto job {missing}<Enter>"));
    let took = started.elapsed();
    assert!(c.message().contains("looking for job"), "{}", c.message());
    c.keys_now("j");
    assert_eq!(c.app.chain.selected, 1, "j moves while the lookup runs");
    assert!(c.inbox.in_flight() > 0, "the lookup is still running");
    pump_until(&mut c, |c| {
        c.app
            .message
            .as_ref()
            .is_some_and(|m| !m.text.starts_with("looking for job") || m.text.contains("read"))
    });
    assert!(
        c.message().contains("entries read; Esc stops it"),
        "progress: {}",
        c.message()
    );
    c.settle();
    let lookup = started.elapsed();
    assert!(
        c.message()
            .contains(&format!("no entry with jobId {missing}")),
        "{}",
        c.message()
    );
    assert_eq!(
        c.app.chain.selected, 1,
        "nothing found: the selection stays"
    );
    eprintln!("goto job (missing): the key took {took:?}, the lookup {lookup:?}");

    // Esc stops a lookup: no result lands afterwards and the screen stays.
    c.keys_now(&format!(":goto job {missing}<Enter><Esc>"));
    assert!(c.message().contains("goto stopped"), "{}", c.message());
    c.settle();
    assert_eq!(c.app.screen, ScreenId::Chain);
    assert!(c.message().contains("goto stopped"), "{}", c.message());

    // A search whose only match is past SEARCH_LIMIT rows: the first step gives up and the
    // selection stays where it was; n continues where it stopped and finds it.
    c.keys("g");
    let target = SEARCH_LIMIT + 50;
    c.keys_now(&format!("/\"seq\":{target},<Enter>"));
    assert!(c.message().contains("searching"), "{}", c.message());
    c.settle();
    assert_eq!(c.app.chain.selected, 0, "gave up: the selection stays");
    let text = c.message().to_string();
    assert!(
        text.contains(&format!("n continues from row {SEARCH_LIMIT}")) && text.contains("stays"),
        "{text}"
    );
    c.keys("n");
    assert_eq!(c.app.chain.selected, target, "{}", c.message());

    // Esc stops a running search (the search stays: a second Esc clears it); a goto stops one
    // too, and the stopped search's result never lands.
    c.keys("g");
    c.keys_now("/no-such-text<Enter><Esc>");
    assert!(c.message().contains("search stopped"), "{}", c.message());
    c.settle();
    assert_eq!(c.app.chain.selected, 0);
    assert!(c.message().contains("search stopped"), "{}", c.message());
    assert!(c.app.search.is_some());
    c.keys_now("n:goto seq 5<Enter>");
    c.settle();
    assert_eq!(c.app.chain.selected, 5);
    assert!(c.message().contains("at position 5"), "{}", c.message());
    c.keys("<Esc>");
    assert!(c.app.search.is_none());
    assert_eq!(c.app.screen, ScreenId::Chain);
}

/// The console verifies under its trust store's signature policy: with `requireSignature` on in
/// the trust store it was given, an unsigned bundle is listed with its `signature-missing`
/// finding, not as ok (the import it would lead to is refused the same way).
#[test]
fn the_console_lists_under_its_trust_stores_signature_policy() {
    let open_with_policy = |name: &str, required: bool| {
        let dir = tui_common::fixture_dir(name);
        tui_common::copy_vector(&dir, "bundles/two-nodes.json", "unsigned.json");
        if required {
            std::fs::write(
                dir.join(".trust.json"),
                r#"{"version":1,"keys":[],"requireSignature":true}"#,
            )
            .unwrap();
        }
        Console::open(&dir)
    };
    let free = open_with_policy("policy-off", false);
    let label = row_state(&free.app, "unsigned.json").unwrap();
    assert!(label.contains("ok"), "{label}");
    let mut strict = open_with_policy("policy-on", true);
    let label = row_state(&strict.app, "unsigned.json").unwrap();
    assert!(label.contains("1 finding"), "{label}");
    let text = strict.screen_text(160, 12);
    assert!(text.contains("unsigned.json"), "{text}");
}

/// `/` on the Scheduler screen searches the whole stored chain, not only the rows the screen
/// holds: in the background, a page at a time from the store, with `n` going on from the hit.
#[test]
fn scheduler_search_reads_the_whole_stored_chain() {
    let dir = tui_common::fixture_dir("search-scheduler");
    let db = dir.join("store").join("airlock.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let bundle = dir.join("big.json");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    };
    run(&[
        "dev",
        "gen-bundle",
        "--tenant",
        "big",
        "--nodes",
        "2",
        "--entries",
        "3000",
        "-o",
        bundle.to_str().unwrap(),
    ]);
    run(&["jobs", "import", bundle.to_str().unwrap()]);
    let mut c = Console::open(&dir);
    c.app.config.db = Some(db.clone());
    c.keys("4");
    c.render(140, 40);
    c.settle();
    assert_eq!(c.app.scheduler.length(), 3000);
    let shown = c.app.scheduler.entries.len() as u64;
    assert!(shown < 2500, "the screen holds a window, not the chain");
    // The job at seq 2500: never held by the screen until the search lands there.
    let store = airlock::core::store::any::AnyStore::open_db(&db).unwrap();
    let far = airlock::core::store::rules::chain_entries(&store, "big", 2500, 1).unwrap();
    let job = far[0].job_id.clone();
    // A jump further than a page from the shown rows loads the rows it lands on (once).
    c.keys(":goto seq 2500<Enter>");
    assert_eq!(c.app.scheduler.selected_entry().unwrap().job_id, job);
    c.keys("g");
    assert_eq!(c.app.scheduler.selected, 0);
    c.keys(&format!("/{job}<Enter>"));
    assert_eq!(c.app.scheduler.selected, 2500, "{}", c.message());
    c.keys("n");
    assert_eq!(
        c.app.scheduler.selected, 2500,
        "the only match: wraps to itself"
    );
    assert!(c.message().contains("wrapped"), "{}", c.message());
    c.keys("<Esc>/no-such-job-anywhere<Enter>");
    assert!(c.message().contains("no match"), "{}", c.message());
    assert_eq!(c.app.scheduler.selected, 2500);
}

/// Inbox mode lists what `airlock inbox scan` refuses: a FIFO and symbolic links (to a valid
/// bundle outside the inbox) are rows in state `⊘ refused` with what each is and `not opened`,
/// never read (the link is not followed: its target would verify ok); Enter says why, the decision
/// keys move nothing, and a name with control characters reaches the screen made visible.
#[test]
fn inbox_lists_fifos_and_links_as_refused_and_never_opens_them() {
    use std::os::unix::ffi::OsStrExt;
    let (mut c, dir, tmp) = inbox_console("inbox-odd", 100, false);
    let outside = tmp.path().join("outside.json");
    std::fs::copy(
        std::path::Path::new(tui_common::VECTORS).join("bundles/two-nodes.json"),
        &outside,
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link.json")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("e\u{1b}[2Jx.json")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("pipe.json").as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // Copied last: the picture that lists it lists the odd entries too.
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "two-nodes.json");
    wait_until(&mut c, "the regular file verified", |a| {
        row_state(a, "two-nodes.json").as_deref() == Some("✓ ok")
    });
    for name in ["link.json", "pipe.json", "e\\x1b[2Jx.json"] {
        assert_eq!(
            row_state(&c.app, name).as_deref(),
            Some("⊘ refused"),
            "{name} is listed as refused"
        );
        let row = c.app.bundles.rows.iter().find(|r| r.file_name() == name);
        assert!(row.unwrap().listing.is_none(), "{name} was never read");
    }
    c.app.message = None;
    let text = c.screen_text(160, 16);
    for want in ["⊘ refused", "symlink", "fifo", "not opened", "3 refused"] {
        assert!(text.contains(want), "{want:?} on screen:\n{text}");
    }
    assert!(text.contains("e\\x1b[2Jx.json"), "{text}");
    assert!(!text.contains('\u{1b}'), "no raw escape reaches the screen");

    // Enter says what it is and why; nothing opens it.
    c.app.bundles.select_path(&dir.join("link.json"));
    c.keys("<Enter>");
    assert_eq!(c.app.screen, airlock::tui::action::ScreenId::Bundles);
    let msg = c.message().to_string();
    assert!(
        msg.contains("link.json is refused (symlink), not opened")
            && msg.contains("a symbolic link (to ")
            && msg.contains("not followed"),
        "{msg}"
    );
    // The decision keys file nothing away.
    c.keys("x");
    assert!(
        c.app.overlay.is_none(),
        "no confirmation for a refused entry"
    );
    assert!(
        c.message().contains("never opened, moved or filed"),
        "{}",
        c.message()
    );
    c.app.bundles.select_path(&dir.join("pipe.json"));
    c.keys("Q");
    assert!(c.app.overlay.is_none());
    c.keys("<Enter>");
    let msg = c.message().to_string();
    assert!(
        msg.contains("pipe.json is refused (fifo), not opened: a FIFO (named pipe)"),
        "{msg}"
    );
    assert!(dir.join("link.json").symlink_metadata().is_ok());
    assert!(dir.join("pipe.json").symlink_metadata().is_ok());
    assert!(!dir.join("rejected").exists() && !dir.join("quarantine").exists());
    assert_eq!(row_state(&c.app, "pipe.json").as_deref(), Some("⊘ refused"));
}

/// `/` on the Activity screen searches in the background (the Scheduler screen's mechanism): with
/// 210,000 records held, the key that starts a search returns before the search lands (the
/// selection has not moved, a frame draws, `j` moves), and then the search selects the match.
#[test]
fn activity_search_runs_in_the_background() {
    use airlock::core::audit::{AuditRecord, AuditVerdict};
    let dir = tui_common::fixture_dir("search-activity");
    let mut c = Console::open(&dir);
    c.keys("7");
    assert_eq!(c.app.screen, airlock::tui::action::ScreenId::Activity);
    let (n, target) = (210_000usize, 190_000usize);
    let records: Vec<AuditRecord> = (0..n)
        .map(|i| AuditRecord {
            seq: (n - 1 - i) as u64,
            at: "2026-11-26T21:00:00.000Z".into(),
            operator: if i == target {
                "needle-operator"
            } else {
                "ops"
            }
            .into(),
            action: "import".into(),
            inputs: serde_json::json!({ "file": format!("bundle-{i}.json") }),
            prev_hash: String::new(),
            hash: format!("{i:064x}"),
        })
        .collect();
    c.app.activity.set(Ok((
        records,
        AuditVerdict {
            ok: true,
            records: n as u64,
            head: None,
            first_break: None,
        },
    )));
    assert_eq!(c.app.activity.selected, 0);
    c.keys_now("/needle-operator<Enter>");
    assert_eq!(
        c.app.activity.selected, 0,
        "the key returned before the search landed"
    );
    assert!(c.message().contains("searching"), "{}", c.message());
    let text = c.screen_text(160, 30);
    assert!(
        text.contains("searching"),
        "a frame draws meanwhile:\n{text}"
    );
    c.keys_now("j");
    assert_eq!(c.app.activity.selected, 1, "j moves while the search runs");
    c.settle();
    assert_eq!(c.app.activity.selected, target, "{}", c.message());
    assert!(
        c.message().contains(&format!("row {target}")),
        "{}",
        c.message()
    );
}

/// A bundle previewed on the Merge screen from the inbox, then swapped for a symbolic link to a
/// bundle outside the inbox (the inbox lists it `⊘ refused … not opened`): importing it, or coming
/// back to the Merge screen (which plans its inputs again), used to follow the link and read, plan
/// and import the bundle outside the inbox under the inbox file's name. Now neither reads it.
#[test]
fn merge_never_reads_an_inbox_input_swapped_for_a_link() {
    use airlock::tui::screens::merge::MergeState;
    let (mut c, dir, tmp) = inbox_console("inbox-merge-link", 100, false);
    tui_common::copy_vector(&dir, "bundles/two-nodes.json", "a.json");
    wait_until(&mut c, "a.json verified", |a| {
        row_state(a, "a.json").as_deref() == Some("✓ ok")
    });
    c.app.bundles.select_path(&dir.join("a.json"));
    c.keys("m");
    wait_until(&mut c, "the merge plan", |a| {
        matches!(a.merge.state, MergeState::Ready(_))
    });
    let outside = tmp.path().join("outside.json");
    std::fs::copy(
        std::path::Path::new(tui_common::VECTORS).join("bundles/two-nodes-signed.json"),
        &outside,
    )
    .unwrap();
    std::fs::remove_file(dir.join("a.json")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("a.json")).unwrap();
    wait_until(&mut c, "a.json listed as refused", |a| {
        row_state(a, "a.json").as_deref() == Some("⊘ refused")
    });

    // Import from the Merge screen: refused, nothing read or imported.
    c.keys("i");
    if c.app.overlay.is_some() {
        c.keys("y");
    }
    wait_until(&mut c, "the import answered", |a| {
        a.merge.importing.is_none()
    });
    assert!(
        c.message().contains("import refused") && c.message().contains("a.json"),
        "{}",
        c.message()
    );

    // Back to the Merge screen: its inputs are planned again, but the link is not followed.
    c.keys("1");
    c.keys("3");
    wait_until(&mut c, "the plan answered", |a| {
        !matches!(a.merge.state, MergeState::Planning(_) | MergeState::Empty)
    });
    match &c.app.merge.state {
        MergeState::Failed(why) => assert!(why.contains("a.json"), "{why}"),
        MergeState::Ready(p) => panic!(
            "the link was followed: a plan of {} new entries",
            p.totals.new
        ),
        _ => unreachable!(),
    }
}

/// The Scheduler screen's verification (`v`) used to run without the console's trusted keys: a
/// snapshot signed by a key outside them verified ✓ while `chain verify` failed it. It judges each
/// snapshot's signature as `chain verify` does: the snapshot fails (✗, in the finding colour) with
/// its signature state, the `signer-untrusted` finding is listed with the snapshots (the pane
/// opens on it, the finding having no entry) with the engine's message; a console trusting the
/// key verifies it and counts it signed.
#[test]
fn scheduler_verification_judges_snapshot_signatures() {
    use airlock::core::trust::{key_id, sign_snapshot_statement, SigningKey, TrustSet};
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("signed.db");
    let key = SigningKey::from_bytes(&[9u8; 32]);
    {
        let mut store = airlock::core::store::Store::open(&db).unwrap();
        let mut opts = airlock::core::import::ImportOptions::new("console-test");
        opts.batch_size = 1_000_000;
        let input = std::path::Path::new(tui_common::VECTORS).join("merge/a.json");
        airlock::core::import::import(&mut store, &[input], &opts).unwrap();
        let sign = |payload_type: &str, statement: &[u8]| {
            sign_snapshot_statement(&key, payload_type, statement)
        };
        airlock::core::store::rules::snapshot_now(&store, "acme", 1000, Some(&sign)).unwrap();
    }
    let verify = |dir: &str, trust: TrustSet| {
        let theme = airlock::tui::theme::Theme::default();
        let mut c = Console::with_trust(&tui_common::fixture_dir(dir), theme, false, trust);
        c.app.config.db = Some(db.clone());
        c.keys("4");
        c.keys("v");
        c
    };

    let mut c = verify("scheduler-untrusted-signer", TrustSet::empty());
    let r = c.app.scheduler.report.clone().expect("verified");
    let kinds: Vec<&str> = r.findings.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!((r.ok, &kinds[..]), (false, &["signer-untrusted"][..]));
    assert_eq!(r.snapshots[0].signature, Some("untrusted"));
    assert!(c.app.scheduler.show_snapshots, "the snapshots pane opens");
    let t = c.render(160, 40);
    let text = tui_common::buffer_text(t.backend().buffer());
    assert!(
        text.contains("✗ fails · ? signed by untrusted key"),
        "{text}"
    );
    assert!(text.contains("✗ FINDING signer-untrusted"), "{text}");
    assert!(text.contains("snapshot #1 (entries 0..6)"), "{text}");
    assert!(text.contains(&key_id(&key.verifying_key())), "{text}");
    assert!(
        text.contains("signer-untrusted; snapshots failing: 1 of 1"),
        "{text}"
    );
    let (x, y) = tui_common::find_text(t.backend().buffer(), "✗ fails").unwrap();
    assert_eq!(
        t.backend().buffer()[(x, y)].fg,
        airlock::tui::theme::Theme::default().finding.fg.unwrap()
    );

    let mut trust = TrustSet::empty();
    trust.add_key("ops", key.verifying_key(), "tests");
    let mut c = verify("scheduler-trusted-signer", trust);
    let r = c.app.scheduler.report.clone().expect("verified");
    assert!(r.ok, "{:?}", r.findings);
    assert_eq!(r.snapshots[0].signature, Some("pass"));
    let text = c.screen_text(160, 40);
    assert!(text.contains("1 signed by a trusted key"), "{text}");
}

/// A keys directory longer than its list: the list scrolls to the selected key (it used to show
/// only the first rows, the selection off screen), and with `--mouse` a click in the other list
/// gives it the focus and selects the key under it.
#[test]
fn a_long_key_list_scrolls_to_its_selection_and_takes_clicks() {
    use crossterm::event::{Event, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let dir = tui_common::fixture_dir("keys-long");
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Console::open(&dir);
    c.app.config.keys_dir = tmp.path().join("keys");
    c.app.config.trust_store = tmp.path().join("trust.json");
    c.app.config.mouse = true;
    for i in 0..40 {
        airlock::core::trust::generate_key(&format!("key-{i:02}"), &c.app.config.keys_dir).unwrap();
    }
    c.keys("6");
    let text = c.screen_text(140, 30);
    assert!(
        text.contains("key-00") && !text.contains("key-39"),
        "{text}"
    );
    c.keys("<End>");
    assert_eq!(c.app.keys.sel_local, 39);
    let text = c.screen_text(140, 30);
    assert!(text.contains("key-39"), "the selection is shown: {text}");
    assert!(!text.contains("key-00"), "{text}");
    // A click on the row of key-37 selects it.
    let t = c.render(140, 30);
    let (x, y) = tui_common::find_text(t.backend().buffer(), "key-37").unwrap();
    assert!(c.app.handle_event(Event::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: x,
        row: y,
        modifiers: KeyModifiers::NONE,
    })));
    assert_eq!(c.app.keys.sel_local, 37);
    // A click in the (empty) trusted list gives it the focus.
    let (x, y) = tui_common::find_text(t.backend().buffer(), "trusted keys").unwrap();
    c.app.handle_event(Event::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: x,
        row: y + 2,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(
        c.app.keys.pane,
        airlock::tui::screens::keys::KeysPane::Trusted
    );
}

/// An empty audit log says so, selecting no record (it said `record 0 selected`); one record
/// reads in the singular.
#[test]
fn an_empty_audit_log_selects_no_record() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("empty.db");
    drop(airlock::core::store::Store::open(&db).unwrap());
    let mut c = Console::open(&review_dir("audit-empty"));
    c.app.config.db = Some(db.clone());
    c.keys("7");
    let text = c.screen_text(100, 20);
    let bar = text.lines().last().unwrap();
    assert!(bar.contains("0 records in the audit log"), "{text}");
    assert!(!bar.contains("selected"), "{text}");
    let store = airlock::core::store::any::AnyStore::open_db(&db).unwrap();
    airlock::core::audit::append(&store, "trust", serde_json::json!({"name": "k"})).unwrap();
    drop(store);
    c.keys("r");
    let text = c.screen_text(100, 20);
    let bar = text.lines().last().unwrap();
    assert!(
        bar.contains("1 record in the audit log · record 0 selected"),
        "{text}"
    );
}

/// The marks are counted in the title bar on every screen; where the screen names nothing on the
/// right (Keys, WAL, Ledger) no `·` dangles after the count.
#[test]
fn the_marked_count_has_no_dangling_separator() {
    let mut c = Console::open(&review_dir("marked-title"));
    c.keys("<Home> <Down> ");
    assert_eq!(c.app.bundles.marked.len(), 2);
    for screen in ["6", "9", "0"] {
        c.keys(screen);
        let text = c.screen_text(100, 20);
        let title = text.lines().next().unwrap().trim_end();
        assert!(title.ends_with("◉ 2 marked"), "{screen}: {title}");
    }
}

/// Esc on Chain and Merge goes back where the user came from, and their key hints and help say so
/// (they said "back to the Bundles screen" while Esc went to the Scheduler or Activity screen).
#[test]
fn esc_goes_back_where_its_hint_says() {
    use airlock::tui::action::{self, Action, ScreenId};
    let mut c = Console::open(&review_dir("esc-back"));
    c.keys("<Home><Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    c.keys("42<Esc>");
    assert_eq!(c.app.screen, ScreenId::Scheduler);
    c.keys("73<Esc>");
    assert_eq!(c.app.screen, ScreenId::Activity);
    for screen in [ScreenId::Chain, ScreenId::Merge] {
        let esc = action::active(screen, action::Mode::default())
            .find(|b| b.action == Action::Back)
            .unwrap();
        assert!(
            esc.help.contains("the screen you came from") && !esc.name.contains("bundles"),
            "{screen:?}: {} {}",
            esc.name,
            esc.help
        );
    }
    c.keys("2");
    let text = c.screen_text(160, 20);
    assert!(text.lines().last().unwrap().contains("Esc back"), "{text}");
}

/// The Activity table cuts an operator or action longer than its column with `…`, at 80 and 120
/// columns (ratatui alone cuts it in silence, and a cut operator name reads as another's).
#[test]
fn long_activity_cells_are_marked_cut() {
    use airlock::core::audit::{AuditRecord, AuditVerdict};
    let dir = tui_common::fixture_dir("activity-long-cells");
    let mut c = Console::open(&dir);
    c.keys("7");
    let operator = "night-shift-operator-on-the-gateway";
    let action = "outbox-cancel-after-review";
    let record = AuditRecord {
        seq: 0,
        at: "2026-11-26T21:00:00.000Z".into(),
        operator: operator.into(),
        action: action.into(),
        inputs: serde_json::json!({ "file": "bundle.json" }),
        prev_hash: String::new(),
        hash: format!("{:064x}", 1),
    };
    let verdict = AuditVerdict {
        ok: true,
        records: 1,
        head: None,
        first_break: None,
    };
    c.app.activity.set(Ok((vec![record], verdict)));
    for (w, h) in [(80, 24), (120, 40)] {
        let text = c.screen_text(w, h);
        let row = text.lines().find(|l| l.contains("▶ 0 ")).unwrap();
        assert!(shows_cut(row, operator), "{w}x{h}: {row}");
        assert!(shows_cut(row, action), "{w}x{h}: {row}");
    }
}

/// The Outbox table cuts a request path longer than its column with `…` at 80 and 120 columns (a
/// cut path reads as another endpoint).
#[test]
fn long_outbox_paths_are_marked_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let mut c = Console::open(&ws.bundles);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("5");
    let path = "/api/v2/tenants/acme-production/jobs/3c13c420-b506-5361-83ff-6afe85e87981/cancel";
    c.app.outbox.envelopes[0].request.path = path.into();
    for (w, h) in [(80, 24), (120, 40)] {
        let text = c.screen_text(w, h);
        let row = text.lines().find(|l| l.contains("│▶ ")).unwrap();
        assert!(shows_cut(row, path), "{w}x{h}: {row}\n{text}");
    }
}

/// The Activity screen's empty state wraps at 80 columns instead of losing its end at the edge,
/// and a broken chain's long reason ends with `…`.
#[test]
fn activity_empty_state_wraps_and_a_long_break_is_marked_cut() {
    use airlock::core::audit::{AuditBreak, AuditVerdict};
    let dir = tui_common::fixture_dir("activity-empty");
    let mut c = Console::open(&dir);
    c.keys("7");
    c.app.activity.set(Ok((
        Vec::new(),
        AuditVerdict {
            ok: true,
            records: 0,
            head: None,
            first_break: None,
        },
    )));
    let text = c.screen_text(80, 24);
    assert!(text.contains("operations appear here"), "{text}");
    let reason = "the record's hash does not match its contents: it was edited in the store after it was written";
    c.app.activity.set(Ok((
        Vec::new(),
        AuditVerdict {
            ok: false,
            records: 3,
            head: None,
            first_break: Some(AuditBreak {
                seq: 2,
                reason: reason.into(),
            }),
        },
    )));
    let text = c.screen_text(80, 24);
    let head = text.lines().nth(1).unwrap();
    assert!(
        head.contains("BROKEN at record 2") && head.ends_with('…'),
        "{head}"
    );
}

/// The `/` filter being typed stays on the Outbox's and the Bundles' head line at 80 columns: a
/// long store path or directory gives way, cut in its middle (the typed text was off the line's
/// end: `filter /p` showed for `progress`).
#[test]
fn the_typed_filter_stays_on_the_head_line() {
    let tmp = tempfile::tempdir().unwrap();
    let ws =
        airlock::demo::build_workspace(&tmp.path().join("demo-with-a-longer-folder-name")).unwrap();
    let mut c = Console::open(&ws.bundles);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("5/progress");
    let text = c.screen_text(80, 24);
    let head = text.lines().nth(1).unwrap();
    assert!(head.contains("filter /progress▏"), "{head}");
    assert!(head.contains(" Outbox /") && head.contains("…"), "{head}");
    c.keys("<Enter>1<Home> /edge");
    let text = c.screen_text(80, 24);
    let head = text.lines().nth(1).unwrap();
    assert!(head.contains("filter /edge▏"), "{head}");
    assert!(head.contains("◉ 1 marked"), "{head}");
}
