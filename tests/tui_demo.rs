//! The demo workspace: built by engine calls, and the console shows each scenario as intended.

mod tui_common;

use airlock::core::trust::TrustStore;
use airlock::core::verify::FindingKind;
use airlock::tui::screens::bundles::VerifyState;
use airlock::tui::theme::Theme;
use tui_common::Console;

fn kinds(c: &Console, file: &str) -> Vec<FindingKind> {
    let row = c
        .app
        .bundles
        .rows
        .iter()
        .find(|r| r.file_name() == file)
        .unwrap_or_else(|| panic!("{file} listed"));
    match &row.verify {
        VerifyState::Done(r) => r.findings.iter().map(|f| f.kind).collect(),
        other => panic!("{file}: {other:?}"),
    }
}

#[test]
fn demo_workspace_shows_every_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, _ws) = Console::trusted_demo(tmp.path());
    assert_eq!(c.app.bundles.rows.len(), 9);
    assert!(kinds(&c, "01-edge-ab.signed.json").is_empty());
    assert_eq!(
        kinds(&c, "02-edge-c.chain-break.json"),
        vec![FindingKind::EntriesDeleted]
    );
    assert_eq!(
        kinds(&c, "03-edge-d.forged.json"),
        vec![FindingKind::SignatureInvalid],
        "the forgery is caught only by the signature"
    );
    assert!(kinds(&c, "04-edge-e.conflict.json").is_empty());
    assert!(kinds(&c, "05-edge-f.conflict.json").is_empty());
    assert_eq!(
        kinds(&c, "06-edge-g.untrusted.json"),
        vec![FindingKind::SignerUntrusted]
    );
    let text = c.screen_text(160, 14);
    assert!(text.contains("✓ demo-signer"), "{text}");
    assert!(text.contains("⊘ not a bundle"), "{text}");
    // The chain break opens at its finding; the bidi override is shown escaped.
    c.keys("/chain-break<Enter><Enter>n");
    assert_eq!(c.app.chain.selected, 11);
    assert!(c.screen_text(160, 40).contains("✗ FINDING entries-deleted"));
    c.keys("<Esc>/edge-ab<Enter><Enter><Right><End>");
    assert!(c.screen_text(160, 50).contains("\\u{202e}"));
}

/// The gates' WALs: listed as WALs with what recovery would do (gate-b crashed mid-write), folded
/// on the Ledger screen (both conflict rules decide a job), and gate-b's torn tail on the WAL
/// screen; the portable export's notification: delivered to the receiver, refused by the upstream
/// that is down (pending, the real connection error as its reason).
#[test]
fn demo_gates_ledger_wal_and_notifications() {
    use airlock::core::ledger::Status;
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    assert_eq!(ws.wals.len(), 2);
    assert!(ws.exports.join("export-portable-bundle-v1.tgz").is_file());
    let mut c = Console::with_trust(&ws.bundles, Theme::default(), false, Default::default());
    c.app.config.db = Some(ws.db.clone());
    let state = |c: &Console, file: &str| {
        let row = c.app.bundles.rows.iter().find(|r| r.file_name() == file);
        row.map(|r| r.state_label(&Theme::default()).0)
    };
    assert_eq!(state(&c, "gate-a.alwl").as_deref(), Some("◇ WAL clean"));
    assert_eq!(state(&c, "gate-b.alwl").as_deref(), Some("◔ WAL torn tail"));
    let text = c.screen_text(160, 14);
    assert!(text.contains("node WAL"), "{text}");
    assert!(text.contains("stops at byte "), "{text}");
    assert!(
        c.app.bundles.summary().contains("2 WAL(s), 1 to recover"),
        "{}",
        c.app.bundles.summary()
    );

    c.keys("0");
    let jobs = &c.app.ledger.jobs;
    assert_eq!(jobs.len(), 4, "{jobs:?}");
    let status = |gate: &str, seq: &str| {
        let r = jobs
            .iter()
            .find(|r| r.job_id.contains(gate) && r.job_id.ends_with(seq))
            .unwrap();
        (r.view.status, !r.decisions.is_empty())
    };
    assert_eq!(status("gatea", "00001"), (Status::Completed, false));
    assert_eq!(status("gatea", "00002"), (Status::Cancelled, true));
    assert_eq!(status("gateb", "00001"), (Status::TimedOut, true));
    assert_eq!(status("gateb", "00002"), (Status::Running, false));
    assert_eq!(c.app.ledger.findings.len(), 1, "gate-b's torn tail");
    let text = c.screen_text(160, 30);
    assert!(text.contains("⚑ conflict"), "{text}");
    // The frame that could not be folded is listed where it is and why.
    assert!(text.contains("frames that could not be folded"), "{text}");
    assert!(text.contains("gate-b.alwl LSN 13 (byte offset "), "{text}");
    assert!(text.contains("torn-tail"), "{text}");

    c.keys("1/gate-b<Enter><Enter>");
    assert!(c.app.wal.path().is_some_and(|p| p.ends_with("gate-b.alwl")));
    c.keys("<End>");
    let text = c.screen_text(160, 40);
    assert!(text.contains("torn"), "{text}");

    c.keys("8");
    let n = &c.app.notifications;
    assert_eq!(n.emissions.len(), 1);
    let by_status = |s: &str| n.deliveries.iter().filter(|d| d.status == s).count();
    assert_eq!(
        (
            by_status("delivered"),
            by_status("pending"),
            by_status("dead")
        ),
        (1, 1, 1)
    );
    let refused = n.deliveries.iter().find(|d| d.status == "pending").unwrap();
    assert!(
        refused
            .last_reason
            .as_deref()
            .is_some_and(|r| r.contains("Connection refused")),
        "{refused:?}"
    );
    // The receiver that answered 503 to each of the six attempts (at the pinned schedule: the
    // last one 31 s after the first) is a dead letter.
    let dead = n
        .deliveries
        .iter()
        .find(|d| d.status == "dead")
        .unwrap()
        .clone();
    assert_eq!(
        (dead.attempts, dead.last_status),
        (6, Some(503)),
        "{dead:?}"
    );
    let store = airlock::core::store::any::AnyStore::open_db(&ws.db).unwrap();
    let sent: Vec<i64> = airlock::core::notify::store::attempts(&store, dead.delivery_id)
        .unwrap()
        .iter()
        .map(|a| airlock::core::time::parse_rfc3339_ms(&a.sent_at).unwrap())
        .collect();
    let gaps: Vec<i64> = sent.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [1000, 2000, 4000, 8000, 16000], "{sent:?}");
    drop(store);
    let text = c.screen_text(160, 20);
    assert!(
        text.contains("emissions 1  deliveries 3  dead letters 1"),
        "{text}"
    );
    // The dead-letter queue, and its retry behind a confirmation.
    c.keys("vv");
    let text = c.screen_text(160, 30);
    assert!(text.contains("/hooks/broken"), "{text}");
    c.keys("r");
    let text = c.screen_text(160, 30);
    assert!(text.contains("Retry this dead letter?"), "{text}");
    assert!(text.contains("dead after 6 attempts"), "{text}");
    c.keys("y");
    let n = &c.app.notifications;
    assert!(n.deliveries.iter().all(|d| d.status != "dead"), "{n:?}");
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("is pending again"), "{msg}");
    // Both changes are in the audit log, as every change made from the console is: the retry,
    // then recovering gate-b's torn tail.
    let newest = |db: &std::path::Path| {
        let store = airlock::core::store::any::AnyStore::open_db(db).unwrap();
        airlock::core::audit::recent(&store, 1).unwrap().remove(0)
    };
    let r = newest(&ws.db);
    assert_eq!(r.action, "notify-retry");
    assert_eq!(r.inputs["delivery"], dead.delivery_id);
    c.keys("1/gate-b<Enter><Enter>Ry");
    assert!(c.message().starts_with("cut "), "{}", c.message());
    let r = newest(&ws.db);
    assert_eq!(r.action, "wal-recover", "{r:?}");
    assert!(
        r.inputs["wal"].as_str().unwrap().ends_with("gate-b.alwl")
            && r.inputs["savedTail"].as_str().unwrap().contains("torn-at-"),
        "{r:?}"
    );
}

#[test]
fn outbox_screen_filters_retries_cancels_and_replays_with_confirmation() {
    let ws = airlock::demo::build_workspace(&tui_common::fixture_dir("demo-outbox")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let standin = rt
        .block_on(airlock::relay::standin::StandIn::start(
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let trust = TrustStore::open(&ws.trust_store).unwrap().trust_set();
    let mut c = Console::with_trust(&ws.bundles, Theme::default(), false, trust);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.app.config.upstream = standin.url();
    c.keys("5");
    let counts = c.app.outbox.counts.clone().expect("counts loaded");
    assert_eq!(
        (
            counts.queued,
            counts.delivered,
            counts.conflict,
            counts.failed
        ),
        (5, 7, 1, 2)
    );
    let text = c.screen_text(160, 40);
    assert!(
        text.contains("◔ queued 5") && text.contains("≠ conflict 1"),
        "{text}"
    );
    // Secrets were scrubbed before they were stored; the detail shows the scrubbed body.
    assert!(
        !text.contains("tok-live-7f3a") && !text.contains("hunter2"),
        "{text}"
    );
    // The `/` text filter narrows the list; Esc clears it.
    let all = c.app.outbox.envelopes.len();
    let needle = c.app.outbox.envelopes[all - 1].request.path.clone();
    c.keys(&format!("/{needle}<Enter>"));
    let shown = c.app.outbox.envelopes.len();
    assert!(shown >= 1 && shown < all, "{shown} of {all} for {needle}");
    assert!(c
        .app
        .outbox
        .envelopes
        .iter()
        .all(|e| e.request.path.contains(&needle)));
    assert!(c
        .screen_text(160, 40)
        .contains(&format!("filter /{needle}")));
    c.keys("<Esc>");
    assert_eq!(c.app.outbox.envelopes.len(), all);
    // Filter to conflicts and look at the one there.
    c.keys("ff");
    assert_eq!(c.app.outbox.envelopes.len(), 1);
    let text = c.screen_text(160, 40);
    assert!(
        text.contains("already marked read"),
        "response summary shown: {text}"
    );
    // The engine refuses to resend a conflict: the reason is shown, nothing asked.
    c.keys("r");
    assert!(c.app.overlay.is_none());
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("never resent"), "{msg}");
    // Cancel asks first; n leaves it alone; y cancels.
    c.keys("x");
    let text = c.screen_text(160, 40);
    insta::assert_snapshot!("outbox_confirm_cancel", tui_common::redact(&text));
    assert!(text.contains("retry (r) queues it again"));
    c.keys("n");
    assert_eq!(c.app.outbox.envelopes.len(), 1);
    c.keys("xy");
    assert!(c.app.outbox.envelopes.is_empty(), "no conflict left");
    // Retry a failed one, with confirmation.
    c.keys("f");
    assert_eq!(c.app.outbox.envelopes.len(), 2);
    c.keys("r");
    assert!(c.screen_text(160, 40).contains("Retry this envelope?"));
    c.keys("y");
    assert_eq!(c.app.outbox.envelopes.len(), 1);
    // Replay everything queued (5 + the retried one) to the stand-in.
    c.keys("fffR");
    let text = c.screen_text(160, 40);
    insta::assert_snapshot!("outbox_confirm_replay", tui_common::redact(&text));
    assert!(text.contains("Replay the outbox?"));
    c.keys("y");
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("6 delivered"), "{msg}");
    let counts = c.app.outbox.counts.clone().unwrap();
    assert_eq!(
        (
            counts.queued,
            counts.delivered,
            counts.cancelled,
            counts.failed
        ),
        (0, 13, 1, 1)
    );
    // Export writes the envelopes beside the outbox (confirmed first).
    c.keys("ey");
    assert!(c.message().contains("exported 15 envelope(s)"));
    rt.block_on(standin.stop());
}

#[test]
fn read_only_outbox_offers_no_replay_retry_or_cancel() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), true);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.keys("5Rrx");
    assert!(c.app.overlay.is_none());
    assert_eq!(c.app.outbox.counts.clone().unwrap().queued, 5);
}

/// The STORE column is filled once every file of a pass is examined, whichever kind finished
/// last: here a WAL (gate-c.alwl, a copy of gate-b's, appears after the bundles were read and is
/// the only file of the next pass), and each demo bundle is then shown as not imported.
#[test]
fn store_column_is_asked_when_a_wal_is_examined_last() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.db = Some(ws.db.clone());
    std::fs::copy(
        ws.bundles.join("gate-b.alwl"),
        ws.bundles.join("gate-c.alwl"),
    )
    .unwrap();
    c.app.poll_dir();
    c.settle();
    let theme = Theme::default();
    let bundles: Vec<_> = c
        .app
        .bundles
        .rows
        .iter()
        .filter(|r| r.is_bundle())
        .collect();
    assert_eq!(bundles.len(), 6);
    for r in &bundles {
        assert_eq!(
            r.import_label(&theme).0,
            "· not",
            "{}: {:?}",
            r.file_name(),
            r.imported
        );
    }
    let text = c.screen_text(200, 16);
    assert!(text.contains("STORE"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("01-edge-ab.signed.json"))
        .unwrap();
    assert!(line.contains("· not"), "{text}");
}

/// A plan refused for a conflict says so everywhere: the Merged order tab counts no rows it does
/// not have, its list says why it is empty, the context line names the refusal, and the bar
/// hints no import. A plan refused for findings (no trusted signer) did not merge at all: no
/// merged order, duplicates or conflicts are counted, and Enter says there is no conflict to diff.
#[test]
fn a_refused_merge_preview_says_so_in_its_tabs_list_and_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::trusted_demo(tmp.path());
    c.app.config.db = Some(ws.db.clone());
    // 04 and 05 (Space marks and moves down), then the preview.
    c.keys("jjj  m");
    let marked: Vec<String> = c
        .app
        .bundles
        .marked
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        marked,
        ["04-edge-e.conflict.json", "05-edge-f.conflict.json"]
    );
    let plan = c.app.merge.plan().expect("a plan");
    assert_eq!(plan.totals.conflicts, 1);
    assert!(
        plan.new_entries.is_none(),
        "a refused plan has no merged order"
    );
    // The plan opens at its conflict; two lists to the left is the merged order.
    c.keys("hh");
    let text = c.screen_text(120, 30);
    assert!(text.contains("[Merged order —]"), "{text}");
    assert!(!text.contains("Merged order 13"), "{text}");
    assert!(
        text.contains("refused: 1 conflict — no merged order"),
        "{text}"
    );
    assert!(!text.contains("no new entries"), "{text}");
    // Without a message the status line is the context (the refusal, not "13 new") and the
    // hints: a diff, no import.
    c.app.message = None;
    let bar = c.screen_text(160, 30).lines().last().unwrap().to_string();
    assert!(
        bar.contains("refused: 1 conflict — no merged order"),
        "{bar}"
    );
    assert!(
        !bar.contains("i import") && !bar.contains("force-import"),
        "{bar}"
    );
    assert!(
        bar.contains("Enter diff"),
        "there is a conflict to diff: {bar}"
    );

    // Refused for findings: nothing was merged.
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.db = Some(ws.db.clone());
    c.keys("jjj  m");
    c.app.message = None;
    let text = c.screen_text(160, 30);
    assert!(
        text.contains("Merged order —")
            && text.contains("Duplicates —")
            && text.contains("Conflicts —"),
        "{text}"
    );
    let bar = text.lines().last().unwrap();
    assert!(
        !bar.contains("Enter diff") && !bar.contains("i import"),
        "{bar}"
    );
    c.keys("lll<Enter>");
    assert!(
        c.message()
            .starts_with("no conflict to diff (refused: 2 verification findings"),
        "{}",
        c.message()
    );
    assert!(c.app.merge.diff.is_none());
}

/// Export on the Outbox screen is a write: it asks first, saying what it writes where; `n`
/// writes nothing, `y` writes the export beside the outbox.
#[test]
fn outbox_export_asks_first() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.outbox = Some(ws.outbox.clone());
    let dir = ws.outbox.parent().unwrap().to_path_buf();
    let exports = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("outbox-export-")
            })
            .collect()
    };
    c.keys("5e");
    let text = c.screen_text(160, 40);
    assert!(text.contains("Export the outbox?"), "{text}");
    assert!(
        text.contains("Write the outbox's 15 envelopes (every status"),
        "{text}"
    );
    assert!(text.contains("outbox-export-"), "{text}");
    assert!(text.contains("The outbox itself is not changed."), "{text}");
    c.keys("n");
    assert!(c.app.overlay.is_none());
    assert!(exports().is_empty(), "n writes nothing: {:?}", exports());
    c.keys("e<Enter>");
    assert!(exports().is_empty(), "only y confirms");
    c.keys("<Esc>ey");
    let written = exports();
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(
        c.message().contains("exported 15 envelope(s)"),
        "{}",
        c.message()
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&written[0]).unwrap()).unwrap();
    assert_eq!(doc["envelopes"].as_array().unwrap().len(), 15);
}

/// Counts agree with their nouns: the Ledger summary of the demo gates counts one finding (the
/// torn tail), the Chain verdict of an untrusted bundle one finding, the WAL head its frames.
#[test]
fn counts_read_in_the_singular_for_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, _ws) = Console::demo(tmp.path(), false);
    c.keys("0");
    let summary = c.app.ledger.summary();
    assert!(
        summary.starts_with("2 ledgers · 4 jobs · 2 decided by conflict · 1 finding"),
        "{summary}"
    );
    assert!(!summary.contains("1 findings"), "{summary}");
    c.keys("1/06-edge<Enter><Enter>");
    let text = c.screen_text(160, 12);
    assert!(text.contains(" ✗ 1 finding 06-edge-g"), "{text}");
    assert!(text.contains("· 1 node log ·"), "{text}");
    assert!(!text.contains("finding(s)"), "{text}");
}

/// At 80x24 the WAL screen's HLC column shows each HLC whole (without the log's own node, which
/// its header names) or cut with `…`, never a shorter number; a cut TYPE ends with `…`; the
/// recovery box shows all of its text.
#[test]
fn wal_columns_at_80_columns_are_whole_or_marked_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, _ws) = Console::demo(tmp.path(), false);
    c.keys("/gate-b<Enter><Enter>");
    let start = std::time::Instant::now();
    while c.app.wal.is_indexing() && start.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let text = c.screen_text(80, 24);
    // The full HLC of frame 1, from the payload panel.
    let full = text
        .lines()
        .find_map(|l| l.split("│HLC ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("the selected frame's HLC: {text}"))
        .to_string();
    assert!(full.ends_with(":gate-b"), "{full}");
    let short = full.strip_suffix(":gate-b").unwrap();
    let row = text
        .lines()
        .find(|l| l.starts_with("│▶ 1 "))
        .unwrap_or_else(|| panic!("frame 1's row, selected and marked: {text}"));
    // The border with the selection marker, the LSN, the HLC, the TYPE.
    let hlc_cell = row.split_whitespace().nth(2).unwrap();
    assert!(
        hlc_cell == full || hlc_cell == short || hlc_cell.ends_with('…'),
        "HLC cell {hlc_cell:?} of {full:?}: {text}"
    );
    assert!(text.contains("HLC (…:gate-b)"), "{text}");
    for row in text.lines().filter(|l| l.contains(" PENDING ")) {
        let kind = row.split_whitespace().nth(3).unwrap();
        assert!(
            kind.ends_with('…')
                || [
                    "JobAccepted",
                    "JobCreated",
                    "JobTimedOut",
                    "JobCompleted",
                    "JobCancellationAcked",
                ]
                .contains(&kind),
            "TYPE {kind:?}: {text}"
        );
    }
    assert!(text.contains("cut the log there"), "{text}");
}

/// One damaged delivery row (a value of the wrong type, written past the table's checks) does not
/// blank the Notifications screen: the readable deliveries are listed, and the head line names the
/// damaged row by its id and column.
#[test]
fn a_damaged_delivery_row_is_named_and_the_others_still_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = airlock::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let db = rusqlite::Connection::open(&ws.db).unwrap();
    let damaged: i64 = db
        .query_row(
            "SELECT delivery_id FROM notify_deliveries WHERE status = 'pending'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    db.execute(
        "UPDATE notify_deliveries SET attempts = 'many' WHERE delivery_id = ?1",
        [damaged],
    )
    .unwrap();
    drop(db);
    let mut c = Console::with_trust(&ws.bundles, Theme::default(), false, Default::default());
    c.app.config.db = Some(ws.db.clone());
    c.keys("8");
    let n = &c.app.notifications;
    assert!(n.error.is_none(), "{:?}", n.error);
    assert_eq!(n.deliveries.len(), 2, "the two readable deliveries");
    assert_eq!(n.damaged.len(), 1);
    let text = c.screen_text(200, 12);
    assert!(
        text.contains(&format!(
            "1 damaged delivery row(s) skipped: notify_deliveries row delivery_id {damaged}, attempts"
        )),
        "{text}"
    );
    assert!(text.contains("deliveries 2"), "{text}");
}

/// With `--mouse`, a click on a list row selects it on every list screen of the demo (Bundles,
/// Chain, Scheduler, Outbox, Activity, Notifications, Ledger, the Merge preview's lists): the row
/// below the selected one is selected by a click on it, a click on the header line selects
/// nothing, and a click outside the list is not taken.
#[test]
fn a_click_selects_a_row_on_every_list_screen() {
    use airlock::tui::action::ScreenId;
    use crossterm::event::{Event, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let tmp = tempfile::tempdir().unwrap();
    // The workspace's own trust, so that the merge preview plans (untrusted signers refuse it).
    let (mut c, ws) = Console::trusted_demo(tmp.path());
    c.app.config.mouse = true;
    c.app.config.outbox = Some(ws.outbox.clone());
    c.app.config.db = Some(ws.db.clone());
    // Two changes in the store's audit log, for the Activity list.
    let store = airlock::core::store::any::AnyStore::open_db(&ws.db).unwrap();
    for n in 0..2 {
        airlock::core::audit::append(&store, "test-click", serde_json::json!({ "n": n })).unwrap();
    }
    drop(store);
    let click = |c: &mut Console, x: u16, y: u16| {
        c.app.handle_event(Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        }))
    };
    // Bundles first, then the first bundle's chain (Enter), then the other screens.
    for (keys, screen) in [
        ("1", ScreenId::Bundles),
        ("<Enter>", ScreenId::Chain),
        ("4", ScreenId::Scheduler),
        ("5", ScreenId::Outbox),
        ("7", ScreenId::Activity),
        ("8v", ScreenId::Notifications),
        ("0", ScreenId::Ledger),
        // Bundles 1, 4 and 5 marked and previewed, on the Duplicates tab.
        ("1<Home> <Down><Down>  m<Left>", ScreenId::Merge),
    ] {
        c.keys(keys);
        assert_eq!(c.app.screen, screen);
        let text = c.screen_text(160, 48);
        let at = c
            .app
            .current()
            .click_rows()
            .unwrap_or_else(|| panic!("{screen:?}: a list\n{text}"));
        assert!(at.len >= 2, "{screen:?}: {} rows\n{text}", at.len);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            !lines[at.area.y as usize].trim().is_empty(),
            "{screen:?}: the header line is drawn where clicks expect it\n{text}"
        );
        let was = at.selected;
        let target = if was + 1 < at.len { was + 1 } else { was - 1 };
        let y = at.area.y + 1 + (target - at.offset) as u16;
        assert!(click(&mut c, at.area.x + 1, y), "{screen:?}");
        let now = c.app.current().click_rows().unwrap().selected;
        assert_eq!(now, target, "{screen:?}");
        assert!(click(&mut c, at.area.x + 1, at.area.y), "{screen:?}");
        assert_eq!(c.app.current().click_rows().unwrap().selected, target);
        assert!(
            !click(&mut c, at.area.x + 1, 0),
            "{screen:?}: the title bar"
        );
    }
}

/// `v` on Keys reports the engine's verdict at its level: a forged signature is an error, an
/// untrusted signer or no signature a warning, only a valid signature a success (a forgery was
/// shown green with `✓`).
#[test]
fn a_signature_check_is_shown_at_the_level_of_its_verdict() {
    use airlock::tui::widgets::bars::Level;
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, _ws) = Console::trusted_demo(tmp.path());
    let mut check = |file: &str| {
        c.keys(&format!("1/{file}<Enter>6v"));
        let m = c.app.message.clone().expect("a verdict");
        assert!(m.text.contains(file), "{m:?}");
        m.level
    };
    assert_eq!(check("03-edge-d.forged"), Level::Error);
    assert_eq!(check("06-edge-g.untrusted"), Level::Warning);
    assert_eq!(check("02-edge-c.chain-break"), Level::Warning);
    assert_eq!(check("01-edge-ab.signed"), Level::Ok);
}

/// At 80x24 a detail panel that holds more than it shows says so and scrolls with J/K (an
/// envelope's body and last error, an audit record's inputs, a delivery's reason were below the
/// fold with no way to reach them); another row starts at the top of its panel.
#[test]
fn detail_panels_at_80x24_scroll_to_what_is_below_the_fold() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut c, ws) = Console::demo(tmp.path(), false);
    c.app.config.outbox = Some(ws.outbox.clone());
    c.app.config.db = Some(ws.db.clone());
    c.keys("5");
    // The conflict: its response body is below the fold.
    let at = c
        .app
        .outbox
        .envelopes
        .iter()
        .position(|e| e.status.as_str() == "conflict")
        .expect("the demo's conflict");
    c.app.outbox.selected = at;
    let answer = "already marked read by another agent";
    let text = c.screen_text(80, 24);
    assert!(
        !text.contains(answer) && text.contains("more rows · J/K scroll"),
        "{text}"
    );
    for _ in 0..40 {
        c.keys("J");
    }
    let text = c.screen_text(80, 24);
    assert!(text.contains(answer) && text.contains(" ↑"), "{text}");
    // Another envelope starts at the top of its panel.
    c.keys("k");
    let text = c.screen_text(80, 24);
    assert!(!text.contains(" ↑"), "{text}");
}
