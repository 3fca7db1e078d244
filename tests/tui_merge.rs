//! The Merge preview and Scheduler chain screens on real data (TestBackend + insta), their
//! confirmation dialogs, and the merge summary against `airlock jobs import --dry-run`.

mod tui_common;

use airlock::core::import::{import, ImportOptions};
use airlock::core::store::{rules, Store};
use airlock::tui::action::ScreenId;
use airlock::tui::app::Overlay;
use airlock::tui::screens::merge::MergeTab;
use airlock::tui::theme::Theme;
use ratatui::style::Color;
use std::path::{Path, PathBuf};
use tui_common::*;

/// The dark theme's `conflict`, `finding` and `ok` foregrounds.
const CONFLICT: Color = Color::from_u32(0xd3869b);
const FINDING: Color = Color::from_u32(0xfb4934);
const OK: Color = Color::from_u32(0xb8bb26);

fn merge_console(name: &str, vectors: &[(&str, &str)]) -> (Console, PathBuf) {
    let dir = fixture_dir(name);
    for (rel, as_name) in vectors {
        copy_vector(&dir, rel, as_name);
    }
    let db = fixture_dir(&format!("{name}-store")).join("airlock.db");
    let mut c = Console::open(&dir);
    c.app.config.db = Some(db.clone());
    (c, db)
}

/// `airlock jobs import --dry-run` on the same files and store, its stdout as lines.
fn cli_dry_run(db: &Path, files: &[PathBuf]) -> Vec<String> {
    // The CLI's home is never shown, so it is a temporary folder of its own per run.
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .env("XDG_DATA_HOME", home.path())
        .env("HOME", home.path())
        .arg("--db")
        .arg(db)
        .args(["jobs", "import", "--dry-run", "--trusted-key"])
        .arg(Path::new(VECTORS).join("keys/test-signer.pub.pem"))
        .args(files)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn style_at(t: &ratatui::Terminal<ratatui::backend::TestBackend>, text: &str) -> Color {
    let buf = t.backend().buffer();
    let (x, y) = find_text(buf, text).unwrap_or_else(|| panic!("{text:?} on screen"));
    buf[(x, y)].fg
}

#[test]
fn conflict_vectors_show_lanes_conflict_and_a_side_by_side_diff() {
    let (mut c, _) = merge_console(
        "merge-conflict",
        &[("conflict/d.json", "d.json"), ("conflict/e.json", "e.json")],
    );
    // Space marks both (the selection moves down after each mark), m previews.
    c.keys("  m");
    assert_eq!(c.app.screen, ScreenId::Merge);
    assert_eq!(c.app.merge.inputs.len(), 2);
    // A plan with conflicts opens on the Conflicts list.
    assert_eq!(c.app.merge.current_tab(), MergeTab::Conflicts);
    let t = c.render(130, 22);
    insta::assert_snapshot!("merge_conflict", t.backend());
    assert_eq!(style_at(&t, "✗ a05120fc"), CONFLICT, "conflict glyph slot");
    c.keys("<Enter>");
    assert_eq!(c.app.merge.diff, Some(0));
    let t = c.render(130, 26);
    insta::assert_snapshot!("merge_conflict_diff", t.backend());
    let text = buffer_text(t.backend().buffer());
    for provenance in [
        "00000000-0000-4000-8000-00000000000d",
        "00000000-0000-4000-8000-00000000000e",
        "node     node-d  index 0",
        "node     node-e  index 0",
        "tHlc     1767614400000:0:node-d",
        "payloadHash ZgBG/BZ1PXQbJlDWoR8vS+4moPEk6LnZk0RaDnxS0n0=",
        "d.json",
        "e.json",
    ] {
        assert!(text.contains(provenance), "{provenance}\n{text}");
    }
    assert_eq!(style_at(&t, "≠   \"scope\": \"all\""), CONFLICT);
    assert_eq!(style_at(&t, "≠   \"scope\": \"delta\""), CONFLICT);
    // Unchanged lines are not marked.
    assert!(text.contains("│    \"job\": \"rebuild\","), "{text}");
    // A payload that fits does not scroll away: J leaves every row in the panes.
    c.keys("JJJJ");
    let text = c.screen_text(130, 26);
    assert!(
        text.contains("│  {") && text.contains("≠   \"scope\": \"all\""),
        "{text}"
    );
    c.keys("<Esc>");
    assert_eq!(c.app.merge.diff, None);
    assert_eq!(c.app.screen, ScreenId::Merge);
    // Conflicts refuse the import, with or without --force: neither dialog opens.
    c.keys("i");
    assert!(c.app.overlay.is_none());
    assert!(c.message().contains("conflict"));
    c.keys("F");
    assert!(c.app.overlay.is_none());
    assert!(c.message().contains("even with --force"));
}

#[test]
fn merge_vectors_plan_lanes_order_and_duplicates() {
    let (mut c, _) = merge_console(
        "merge-abc",
        &[
            ("merge/a.json", "a.json"),
            ("merge/b.json", "b.json"),
            ("merge/c.json", "c.json"),
        ],
    );
    c.keys("   m");
    let t = c.render(130, 34);
    insta::assert_snapshot!("merge_abc_plan", t.backend());
    assert_eq!(style_at(&t, "PLAN (dry run"), OK);
    c.keys("<Right>jjj");
    let t = c.render(130, 24);
    insta::assert_snapshot!("merge_abc_merged_order", t.backend());
    // The selected entry is marked in its lane.
    assert!(buffer_text(t.backend().buffer()).contains('◆'));
    c.keys("<Right>");
    let text = c.screen_text(130, 24);
    assert!(
        text.contains("○ 87fd56fc-bea4-5868-aa29-cb49abd695b5"),
        "{text}"
    );
    assert!(text.contains("(kept 1767614401000:1:node-a from node node-a)"));
}

/// The console's plan summary is the CLI's `--dry-run` output, line for line.
#[test]
fn merge_summary_equals_the_cli_dry_run() {
    for (name, vectors) in [
        (
            "same-abc",
            vec![
                ("merge/a.json", "a.json"),
                ("merge/b.json", "b.json"),
                ("merge/c.json", "c.json"),
            ],
        ),
        (
            "same-conflict",
            vec![("conflict/d.json", "d.json"), ("conflict/e.json", "e.json")],
        ),
        (
            "same-broken",
            vec![
                ("merge/a.json", "a.json"),
                ("tamper/entries-deleted.json", "b-deleted.json"),
                ("bundles/two-nodes-signed.json", "c-signed.json"),
            ],
        ),
    ] {
        let (mut c, db) = merge_console(name, &vectors);
        c.keys(&" ".repeat(vectors.len()));
        c.keys("m");
        let files = c.app.merge.inputs.clone();
        assert_eq!(files.len(), vectors.len());
        let cli = cli_dry_run(&db, &files);
        assert!(cli.len() > 2, "{cli:?}");
        assert_eq!(*c.app.merge.lines, cli, "{name}");
        // And the screen draws those lines.
        c.app.merge.show_tab(MergeTab::Plan);
        let text = c.screen_text(250, 80);
        assert!(text.contains(&cli[0]), "{name}: {text}");
    }
}

#[test]
fn import_and_force_import_confirm_with_the_plan_and_read_only_removes_them() {
    let (mut c, db) = merge_console(
        "merge-import",
        &[
            ("merge/a.json", "a.json"),
            ("tamper/entries-deleted.json", "b-deleted.json"),
        ],
    );
    c.keys("  m");
    // Findings refuse a plain import; it says why and points at F.
    c.keys("i");
    assert!(c.app.overlay.is_none());
    assert!(c.message().contains("F imports"));
    // F plans with --force and spells out what is dropped.
    c.keys("F");
    let Some(Overlay::Confirm { lines, .. }) = &c.app.overlay else {
        panic!("force confirmation expected: {:?}", c.app.message);
    };
    let all = lines.join("\n");
    assert!(
        all.contains("b-deleted.json node node-b: entries 1..=2 (2) — entries-deleted"),
        "{all}"
    );
    assert!(all.contains("Conflicts would still refuse"), "{all}");
    let t = c.render(130, 30);
    insta::assert_snapshot!("merge_confirm_force", t.backend());
    assert_eq!(style_at(&t, "⚠ Force import"), Color::from_u32(0xfe8019));
    c.keys("n");
    assert!(c.app.overlay.is_none());
    assert_eq!(
        rules::tenants(&Store::open(&db).unwrap()).unwrap().len(),
        0,
        "cancelled: nothing written"
    );
    c.keys("F");
    c.keys("y");
    let tenants = rules::tenants(&Store::open(&db).unwrap()).unwrap();
    assert_eq!(tenants.len(), 1);
    let msg = c.app.message.clone().unwrap();
    assert!(msg.text.starts_with("IMPORTED"), "{msg:?}");

    // A clean plan: the confirmation shows the plan's own lines.
    let (mut c, db) = merge_console("merge-import-clean", &[("merge/a.json", "a.json")]);
    c.keys("m");
    c.keys("i");
    let t = c.render(130, 24);
    insta::assert_snapshot!("merge_confirm_import", t.backend());
    c.keys("y");
    assert!(c.app.message.as_ref().unwrap().text.starts_with("IMPORTED"));
    assert_eq!(
        rules::tenants(&Store::open(&db).unwrap()).unwrap()[0].length,
        6
    );
    // The plan was made again: everything is now already imported.
    assert!(c.app.merge.lines[0].starts_with("NOTHING TO DO"));

    // Read-only: neither action exists.
    let dir = fixture_dir("merge-ro");
    copy_vector(&dir, "merge/a.json", "a.json");
    let mut c = Console::with_theme(&dir, Theme::builtin("dark").unwrap(), true);
    c.app.config.db = Some(fixture_dir("merge-ro-store").join("airlock.db"));
    c.keys("m");
    c.keys("iF");
    assert!(c.app.overlay.is_none());
    let text = c.screen_text(160, 30);
    assert!(
        !text.contains("force-import") && !text.contains("i import"),
        "{text}"
    );
}

/// A store holding the merge vectors' chain (batch size 4: three snapshots). Deterministic: the
/// links depend only on the vectors (the demo test covers lifecycle actions).
fn scheduler_store(name: &str) -> (Console, PathBuf) {
    let dir = fixture_dir(name);
    let db = fixture_dir(&format!("{name}-store")).join("airlock.db");
    let mut store = Store::open(&db).unwrap();
    let mut opts = ImportOptions::new("relay-01");
    opts.batch_size = 4;
    let inputs: Vec<PathBuf> = ["a", "b", "c"]
        .iter()
        .map(|n| Path::new(VECTORS).join(format!("merge/{n}.json")))
        .collect();
    import(&mut store, &inputs, &opts).unwrap();
    drop(store);
    let mut c = Console::open(&dir);
    c.app.config.db = Some(db.clone());
    (c, db)
}

#[test]
fn scheduler_screen_shows_tenants_entries_verify_and_proof() {
    let (mut c, db) = scheduler_store("sched");
    c.keys("4");
    assert_eq!(c.app.screen, ScreenId::Scheduler);
    assert_eq!(c.app.scheduler.tenants.len(), 1);
    assert_eq!(c.app.scheduler.length(), 14);
    c.keys("jjjjj");
    let t = c.render(150, 40);
    insta::assert_snapshot!(
        "scheduler_entries",
        redact(&buffer_text(t.backend().buffer()))
    );
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("Provenance"), "{text}");
    assert!(text.contains("source node node-b"), "{text}");
    assert!(
        text.contains("file        ../shared/vectors/merge/"),
        "{text}"
    );

    // Verify in the background: every row gets ✓.
    c.keys("v");
    assert!(c.app.scheduler.report.as_ref().unwrap().ok);
    let t = c.render(150, 40);
    assert_eq!(style_at(&t, "✓ chain verified"), OK);

    // The proof of the selected job (position 5, in snapshot #2), checked by verify_proof.
    c.keys("p");
    let t = c.render(150, 44);
    insta::assert_snapshot!(
        "scheduler_proof",
        redact(&buffer_text(t.backend().buffer()))
    );
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("✓ verify_proof"), "{text}");
    assert!(text.contains("leaf        1 of 4"), "{text}");
    assert_eq!(style_at(&t, "✓ verify_proof"), OK);

    // Snapshots with their roots and signature state.
    c.keys("s");
    let t = c.render(150, 30);
    insta::assert_snapshot!(
        "scheduler_snapshots",
        redact(&buffer_text(t.backend().buffer()))
    );
    assert!(buffer_text(t.backend().buffer()).contains("✓ verified · unsigned"));

    // A payload edited in the store: verify reports it at its position.
    let store = Store::open(&db).unwrap();
    store
        .conn()
        .execute(
            "UPDATE scheduler_log SET payload = '{\"tampered\":true}' WHERE tenant_id = 'acme' AND seq = 3",
            [],
        )
        .unwrap();
    drop(store);
    c.keys("sv");
    let r = c.app.scheduler.report.as_ref().unwrap();
    assert!(!r.ok);
    assert_eq!(r.findings[0].index, Some(3));
    assert_eq!(c.app.scheduler.selected, 3, "jumps to the first finding");
    let t = c.render(150, 40);
    assert_eq!(style_at(&t, "✗ payload-modified"), FINDING);
    let text = buffer_text(t.backend().buffer());
    assert!(text.contains("✗ FINDING payload-modified"), "{text}");
}

#[test]
fn demo_store_has_an_imported_chain_and_the_preview_shows_new_duplicates_and_the_conflict() {
    let ws = airlock::demo::build_workspace(&fixture_dir("demo-merge")).unwrap();
    let trust = airlock::core::trust::TrustStore::open(&ws.trust_store)
        .unwrap()
        .trust_set();
    let mut c = Console::with_trust(&ws.bundles, Theme::default(), false, trust);
    c.app.config.db = Some(ws.db.clone());
    c.keys("4");
    let t = &c.app.scheduler.tenants[0];
    assert!(t.length > 15 && t.last_snapshot.is_some(), "{t:?}");
    c.keys("s");
    assert!(c.app.scheduler.snapshots.len() >= 3);
    assert!(c.screen_text(150, 40).contains("✓ signed by demo-signer"));
    // Preview bundles 1, 4 and 5: new entries, duplicates of the chain, the conflicting pair.
    c.keys("1");
    c.keys(" jj  m");
    let p = c.app.merge.plan().unwrap();
    assert!(p.totals.new > 0 && p.totals.duplicates > 0 && p.totals.conflicts == 1);
}

/// Enter on a Scheduler entry opens its source bundle at the node and entry (from the
/// provenance); Esc comes back to where the jump started, then to Bundles.
#[test]
fn scheduler_entry_opens_its_source_bundle_and_esc_comes_back() {
    let (mut c, _) = scheduler_store("jump-sched");
    c.keys("4jjjjj");
    let e = c.app.scheduler.selected_entry().unwrap().clone();
    let p = e.provenance.clone().unwrap();
    c.keys("<Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain);
    let index = c.app.chain.index().unwrap();
    assert_eq!(index.logs[c.app.chain.log].node_id, p.source_node);
    let row = index.read_row(c.app.chain.log, c.app.chain.selected);
    assert_eq!(row.entry.job_id, e.job_id);
    assert_eq!(row.entry.t_hlc, p.original_t_hlc);
    assert!(index.path.ends_with(&p.file_name), "{:?}", index.path);
    c.keys("<Esc>");
    assert_eq!(c.app.screen, ScreenId::Scheduler);
    assert_eq!(c.app.scheduler.selected, 5);
    c.keys("<Esc>");
    assert_eq!(c.app.screen, ScreenId::Bundles);
}

/// On a conflict, `o` and `O` open each side's bundle at its entry; Esc returns to the preview.
#[test]
fn conflict_sides_open_their_bundles() {
    let (mut c, _) = merge_console(
        "jump-conflict",
        &[("conflict/d.json", "d.json"), ("conflict/e.json", "e.json")],
    );
    c.keys("  m");
    assert_eq!(c.app.merge.current_tab(), MergeTab::Conflicts);
    let job = c.app.merge.plan().unwrap().conflicts[0].job_id.clone();
    for (key, file, node) in [("o", "d.json", "node-d"), ("O", "e.json", "node-e")] {
        c.keys(key);
        assert_eq!(c.app.screen, ScreenId::Chain, "{key}");
        let index = c.app.chain.index().unwrap();
        assert!(index.path.ends_with(file), "{:?}", index.path);
        assert_eq!(index.logs[c.app.chain.log].node_id, node);
        let row = index.read_row(c.app.chain.log, c.app.chain.selected);
        assert_eq!(row.entry.job_id, job);
        c.keys("<Esc>");
        assert_eq!(c.app.screen, ScreenId::Merge, "{key}");
    }
}

/// The Bundles screen's STORE column says, from the store, whether each bundle is imported,
/// partly (a forced import dropped entries) or not; the marked count shows on every screen.
#[test]
fn bundles_show_imported_partly_or_not_and_the_marked_count_stays() {
    let (mut c, _) = merge_console(
        "store-column",
        &[
            ("merge/a.json", "a.json"),
            ("tamper/entries-deleted.json", "b-deleted.json"),
        ],
    );
    // The store was configured after the first pass: a rescan asks it.
    c.keys("r");
    let text = c.screen_text(170, 10);
    assert!(text.contains("STORE"), "{text}");
    assert_eq!(text.matches("· not").count(), 2, "{text}");
    c.keys(" ");
    assert!(c.screen_text(170, 10).contains("◉ 1 marked"));
    c.keys("4");
    assert!(
        c.screen_text(170, 10).contains("◉ 1 marked"),
        "marks stay visible"
    );
    c.keys("1 mF");
    assert!(matches!(c.app.overlay, Some(Overlay::Confirm { .. })));
    c.keys("y");
    c.keys("1");
    let text = c.screen_text(170, 10);
    assert!(text.contains("✓ imported"), "{text}");
    assert!(text.contains("◑ partly"), "{text}");
}

/// `E` on the Merge preview asks for the decision and writes a triage report signed with the
/// local key (JSON + Markdown, with the conflict's sides); `airlock triage verify` accepts both
/// and finds an edited Markdown file.
#[test]
fn triage_report_from_a_conflict_is_signed_and_verifies() {
    let (mut c, db) = merge_console(
        "triage-conflict",
        &[("conflict/d.json", "d.json"), ("conflict/e.json", "e.json")],
    );
    let key = airlock::core::trust::generate_key("ops", &c.app.config.keys_dir).unwrap();
    c.keys("  m");
    c.keys("E");
    assert!(matches!(c.app.overlay, Some(Overlay::Decision { .. })));
    c.keys("reject two payloads for one job<Enter>");
    let msg = c.app.message.clone().unwrap().text;
    assert!(msg.contains("signed by key"), "{msg}");
    let dir = db.parent().unwrap();
    let json = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a report");
    let md = json.with_extension("md");
    let text = std::fs::read_to_string(&md).unwrap();
    for want in [
        "decision: **`reject`**",
        "note: `two payloads for one job`",
        "verdict: **`conflicts`**",
        "bundle `00000000-0000-4000-8000-00000000000d`",
        "node `node-e`, index 0",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let verify = |file: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["triage", "verify"])
            .arg(file)
            .arg("--trusted-key")
            .arg(&key.public_path)
            .arg("--trust-store")
            .arg(dir.join("no-trust.json"))
            .output()
            .unwrap()
    };
    for f in [&json, &md] {
        let out = verify(f);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("OK: triage report of merge-plan"));
    }
    std::fs::write(&md, text.replace("reject", "import")).unwrap();
    let out = verify(&md);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("it was edited"));
}

/// A Merge console (fixture `name`) showing its Merged tab with `n` made-up rows, the one at
/// `target` with job id `needle-job`.
fn merge_list_of(name: &str, n: usize, target: usize) -> Console {
    use airlock::tui::screens::merge::MergeState;
    let (mut c, _) = merge_console(name, &[("bundles/two-nodes.json", "two-nodes.json")]);
    c.keys("m");
    assert_eq!(c.app.screen, ScreenId::Merge);
    let mut plan = c.app.merge.plan().expect("a plan").clone();
    let first = plan.new_entries.as_ref().unwrap()[0].clone();
    let rows = (0..n)
        .map(|i| {
            let mut e = first.clone();
            e.seq = i as u64;
            e.job_id = if i == target {
                "needle-job".into()
            } else {
                format!("job-{i}")
            };
            e
        })
        .collect();
    plan.new_entries = Some(rows);
    c.app.merge.state = MergeState::Ready(plan.into());
    c.app.merge.show_tab(MergeTab::Merged);
    c
}

/// `/` on a Merge list searches in the background (the Scheduler screen's mechanism): with
/// 210,000 rows in the merged order, the key that starts a search returns before the search lands
/// (the selection has not moved, a frame draws, `j` moves), and then the search selects the match.
#[test]
fn merge_search_runs_in_the_background() {
    let target = 190_000;
    let mut c = merge_list_of("merge-search-big", 210_000, target);
    assert_eq!(c.app.merge.selected, 0);
    c.keys_now("/needle-job<Enter>");
    assert_eq!(
        c.app.merge.selected, 0,
        "the key returned before the search landed"
    );
    assert!(c.message().contains("searching"), "{}", c.message());
    let text = c.screen_text(140, 30);
    assert!(
        text.contains("searching"),
        "a frame draws meanwhile:\n{text}"
    );
    c.keys_now("j");
    assert_eq!(c.app.merge.selected, 1, "j moves while the search runs");
    c.settle();
    assert_eq!(c.app.merge.selected, target, "{}", c.message());
    assert!(
        c.message().contains(&format!("row {target}")),
        "{}",
        c.message()
    );
}

/// On the Plan tab, `n` goes on past the line the search found even when the plan text fits the
/// screen (drawing puts its scroll back to 0; `n` used to find the same line again).
#[test]
fn n_on_a_plan_that_fits_the_screen_finds_the_next_line() {
    let (mut c, _) = merge_console(
        "merge-plan-n",
        &[("merge/a.json", "a.json"), ("merge/b.json", "b.json")],
    );
    c.keys("m");
    assert_eq!(c.app.merge.current_tab(), MergeTab::Plan);
    let lines = c.app.merge.lines.clone();
    let hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("node node-a"))
        .map(|(i, _)| i)
        .collect();
    assert!(hits.len() >= 2, "{lines:?}");
    assert!(lines.len() < 40, "the plan fits a 140x60 screen");
    c.keys("/node node-a<Enter>");
    c.screen_text(140, 60);
    assert!(
        c.message().contains(&format!("row {}", hits[0])),
        "{}",
        c.message()
    );
    c.keys("n");
    c.screen_text(140, 60);
    assert!(
        c.message().contains(&format!("row {}", hits[1])),
        "{}",
        c.message()
    );
}

/// `--read-only` writes nothing: `P` (proof file) and `E` (triage report) are refused with a
/// message saying what was not written and are absent from help and palette; `y` still copies
/// through OSC 52 but writes no `clipboard.txt`.
#[test]
fn read_only_writes_no_proof_triage_report_or_clipboard_file() {
    use airlock::tui::action::{self, Action, Mode};
    let (_, db) = scheduler_store("sched-ro");
    let dir = fixture_dir("sched-ro-bundles");
    let mut c = Console::with_theme(&dir, Theme::builtin("dark").unwrap(), true);
    c.app.config.db = Some(db.clone());
    let clipboard = fixture_dir("sched-ro-clipboard").join("clipboard.txt");
    c.app.clipboard_file = clipboard.clone();
    // SQLite's own -wal/-shm beside a WAL-mode store (its read-only open keeps them) are the
    // store's business, not a file this console writes.
    let listing = |d: &Path| -> Vec<std::ffi::OsString> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| {
                let n = n.to_string_lossy();
                !n.ends_with("-wal") && !n.ends_with("-shm")
            })
            .collect();
        v.sort();
        v
    };
    let store_dir = db.parent().unwrap().to_path_buf();
    let before = listing(&store_dir);
    c.keys("4");
    assert_eq!(c.app.scheduler.length(), 14);
    c.keys("vjp");
    assert!(c.app.scheduler.report.is_some(), "verified");
    // P: refused, says so, no proof file.
    c.keys("P");
    let msg = c.message().to_string();
    assert!(
        msg.contains("read-only") && msg.contains("proof") && msg.contains("not written"),
        "{msg}"
    );
    assert!(msg.contains("run without --read-only"), "{msg}");
    // E: refused before the decision prompt, and by apply whatever path it comes by.
    c.keys("E");
    assert!(c.app.overlay.is_none(), "no decision prompt");
    let msg = c.message().to_string();
    assert!(
        msg.contains("read-only") && msg.contains("triage report") && msg.contains("not written"),
        "{msg}"
    );
    c.app.apply(Action::TriageReport);
    c.settle();
    assert!(c.app.overlay.is_none());
    // y: the value goes to the terminal (OSC 52), not to the fallback file.
    c.keys("y");
    let msg = c.message().to_string();
    assert!(c.app.osc52.is_some(), "copied via OSC 52: {msg}");
    assert!(!clipboard.exists(), "clipboard file written: {msg}");
    assert!(
        msg.contains("read-only") && msg.contains("not written"),
        "{msg}"
    );
    assert_eq!(
        listing(&store_dir),
        before,
        "nothing written beside the store"
    );
    assert!(
        listing(&dir).is_empty(),
        "nothing written in the bundles directory"
    );
    // The file-writing keys are not offered with --read-only (as import or recover are not).
    let names = |mode: Mode| -> Vec<&str> {
        airlock::tui::widgets::overlay::help_rows(ScreenId::Scheduler, mode, "")
            .iter()
            .map(|b| b.name)
            .collect()
    };
    for name in ["write-proof", "triage-report"] {
        assert!(names(Mode::default()).contains(&name), "{name}");
        assert!(!names(Mode::READ_ONLY).contains(&name), "{name} offered");
    }
    let p = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('P'),
        crossterm::event::KeyModifiers::NONE,
    );
    assert_eq!(
        action::lookup(ScreenId::Scheduler, Mode::READ_ONLY, &p),
        None
    );
    assert!(names(Mode::READ_ONLY).contains(&"copy"));
}

/// A triage report signed with a key file other users can read says so, with the engine's
/// warning (the CLI prints the same one), instead of dropping it.
#[test]
fn triage_report_shows_the_signing_key_permission_warning() {
    use std::os::unix::fs::PermissionsExt;
    let (mut c, _) = merge_console(
        "triage-open-key",
        &[("conflict/d.json", "d.json"), ("conflict/e.json", "e.json")],
    );
    let key = airlock::core::trust::generate_key("ops", &c.app.config.keys_dir).unwrap();
    std::fs::set_permissions(&key.private_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, warnings) = airlock::core::trust::load_signing_key(&key.private_path).unwrap();
    let want = warnings
        .first()
        .expect("the engine warns about mode 0644")
        .clone();
    c.keys("  m");
    c.keys("E");
    c.keys("reject<Enter>");
    let msg = c.app.message.clone().unwrap();
    assert!(msg.text.contains(&want), "{msg:?}");
    assert_eq!(msg.level, airlock::tui::widgets::bars::Level::Warning);
}

/// `F` (force import) plans with --force in the background beside the shown plan: a `/` search
/// running on the Merge list goes on and lands, and the force confirmation still comes.
#[test]
fn force_import_does_not_stop_a_running_search() {
    let target = 40_000;
    let mut c = merge_list_of("merge-search-force", 50_000, target);
    // The search's result is applied only when pumped: F comes before it whatever the timing.
    c.keys_now("/needle-job<Enter>F");
    c.settle();
    assert_eq!(c.app.merge.selected, target, "{}", c.message());
    assert!(
        matches!(&c.app.overlay, Some(Overlay::Confirm { title, .. }) if title.contains("Force")),
        "{:?}",
        c.app.message
    );
}

/// The snapshot list scrolls by rows, no further than its last row (J scrolled three snapshots
/// at a time, into an empty panel), and the snapshot covering the selected entry is shown when
/// the selection moves (after G its ▶ was off the panel).
#[test]
fn the_snapshot_list_keeps_its_marker_and_its_last_row_in_view() {
    let (mut c, _) = scheduler_store("sched-snap-scroll");
    // The last entry a snapshot covers (13 is not in one yet).
    c.keys("4sGkk");
    let text = c.screen_text(80, 20);
    assert!(
        text.contains("▶ #3"),
        "the covering snapshot is shown: {text}"
    );
    for _ in 0..30 {
        c.keys("J");
    }
    let text = c.screen_text(80, 24);
    let snaps = c.app.scheduler.snapshots.clone();
    let last = &snaps.last().unwrap().0.merkle_root;
    assert!(
        text.contains(&last[..20]),
        "the last row stays in view: {text}"
    );
    for _ in 0..30 {
        c.keys("K");
    }
    let text = c.screen_text(80, 24);
    assert!(text.contains("#1 "), "{text}");
}

/// A damaged `batch_snapshot` row does not empty the Scheduler's snapshot list: a row whose
/// envelope is not JSON is listed with a failed signature naming the damage (never as unsigned),
/// and a row whose positions do not read is left out and named on the status line. Before, the
/// whole list was replaced by one error.
#[test]
fn a_damaged_snapshot_row_leaves_the_others_listed() {
    let (mut c, db) = scheduler_store("sched-snap-damaged");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM batch_snapshot ORDER BY from_seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(ids.len() >= 3, "{ids:?}");
        conn.execute(
            "UPDATE batch_snapshot SET dsse_envelope = '{garbage' WHERE id = ?1",
            [ids[0]],
        )
        .unwrap();
        conn.execute(
            "UPDATE batch_snapshot SET from_seq = -5 WHERE id = ?1",
            [ids[1]],
        )
        .unwrap();
    }
    c.keys("4s");
    let snaps = &c.app.scheduler.snapshots;
    assert!(!snaps.is_empty(), "the readable rows are listed");
    let (first, check) = &snaps[0];
    assert!(
        matches!(check, airlock::core::trust::SignatureCheck::Invalid { reason, .. }
            if reason.contains("dsse_envelope is not JSON")),
        "{check:?}"
    );
    assert!(first.dsse_envelope.is_none());
    let m = c.message().to_string();
    assert!(
        m.contains("1 snapshot row(s) left out") && m.contains("from_seq is -5"),
        "{m}"
    );
}

/// The Plan tab's lines longer than the panel (a long bundle file name, the per-bundle counts and
/// signature state after it) end with `…` at 80 and 120 columns, instead of being cut in silence.
#[test]
fn long_plan_lines_are_marked_cut() {
    let long = "a-bundle-file-with-a-very-long-name-from-the-night-shift.json";
    let (mut c, _) = merge_console(
        "merge-long-lines",
        &[("merge/a.json", long), ("merge/b.json", "b.json")],
    );
    c.keys("  m");
    assert_eq!(c.app.merge.current_tab(), MergeTab::Plan);
    for (w, h) in [(80, 24), (120, 40)] {
        let text = c.screen_text(w, h);
        let row = text
            .lines()
            .find(|l| l.starts_with("  target/") && l.contains("a-bundle-file"))
            .unwrap_or_else(|| panic!("{w}x{h}:\n{text}"));
        assert!(row.trim_end().ends_with('…'), "{w}x{h}: {row}");
    }
}

/// The Scheduler's entry table cuts a tHLC or action longer than its column with `…` (a cut
/// tHLC reads as another position), at 80 and 120 columns.
#[test]
fn long_scheduler_cells_are_marked_cut() {
    let (mut c, db) = scheduler_store("sched-long-cells");
    let hlc = "1767614400000:0:node-with-a-very-long-name";
    let action = "JobSubmittedAgain";
    let store = Store::open(&db).unwrap();
    store
        .conn()
        .execute(
            "UPDATE scheduler_log SET t_hlc = ?1, action = ?2 WHERE tenant_id = 'acme' AND seq = 1",
            [hlc, action],
        )
        .unwrap();
    drop(store);
    c.keys("4");
    assert_eq!(c.app.screen, ScreenId::Scheduler);
    for (w, h) in [(80, 24), (120, 40)] {
        let text = c.screen_text(w, h);
        let row = text
            .lines()
            .find(|l| l.contains("│  1 "))
            .unwrap_or_else(|| panic!("{w}x{h}:\n{text}"));
        assert!(shows_cut(row, hlc), "{w}x{h}: {row}");
        assert!(shows_cut(row, action), "{w}x{h}: {row}");
    }
}

/// Beside the detail panel (120 columns) the Scheduler's tHLC column keeps its width: an empty
/// CHECK column used to take its room and cut every tHLC; the store line and the verify line
/// end with `…` at 80 columns instead of at the edge in silence.
#[test]
fn scheduler_thlc_stays_whole_beside_the_detail() {
    let (mut c, _) = scheduler_store("sched-thlc-whole");
    c.keys("4");
    let text = c.screen_text(120, 40);
    let row = text.lines().find(|l| l.contains("│▶ 0 ")).unwrap();
    assert!(row.contains("1767614400000:0:node-a "), "{text}");
    let text = c.screen_text(80, 24);
    let mut lines = text.lines().skip(1);
    let (head, verify) = (lines.next().unwrap(), lines.next().unwrap());
    assert!(
        head.starts_with(" Tenant [acme") && head.ends_with('…'),
        "{head}"
    );
    assert!(verify.ends_with('…'), "{verify}");
}

/// `o` on a dropped entry opens the very file it was read from: a tampered copy keeps the
/// original's bundle id, and the entry used to open in the first listed file with that id (the
/// untampered original), showing the operator the wrong bundle.
#[test]
fn a_dropped_entry_opens_in_its_own_file_not_a_namesake() {
    let (mut c, _) = merge_console(
        "jump-dropped-namesake",
        &[
            ("bundles/two-nodes.json", "a-original.json"),
            ("tamper/entries-deleted.json", "b-deleted.json"),
        ],
    );
    c.keys("<Home>jm");
    let plan = c.app.merge.plan().expect("a plan");
    assert_eq!(plan.bundles.len(), 1, "the selected bundle only");
    assert!(
        !plan.dropped.is_empty(),
        "a refused plan lists the dropped entries"
    );
    let dropped = plan.dropped[0].origin.clone();
    c.app.merge.show_tab(MergeTab::Dropped);
    c.keys("o");
    assert_eq!(c.app.screen, ScreenId::Chain, "{}", c.message());
    let index = c.app.chain.index().unwrap();
    assert!(index.path.ends_with("b-deleted.json"), "{:?}", index.path);
    let row = index.read_row(c.app.chain.log, c.app.chain.selected);
    assert_eq!(row.entry.job_id, dropped.job_id);
}

/// A refused plan's lane box says there are no lanes in one row cut with `…` at 80 columns (the
/// box's edge cut it in silence).
#[test]
fn the_no_lanes_note_is_marked_cut() {
    let (mut c, _) = merge_console(
        "merge-no-lanes",
        &[("tamper/entries-deleted.json", "b-deleted.json")],
    );
    c.keys("m");
    let text = c.screen_text(80, 24);
    let note = text
        .lines()
        .find(|l| l.contains("no lanes: the plan stopped"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(note.ends_with("…│"), "{note}");
}

/// Enter on a Scheduler entry opens the file it was imported from when a tampered copy with the
/// same bundle id is listed before it (it opened the first listed file with that id: the copy).
#[test]
fn a_scheduler_entry_opens_its_own_file_not_a_namesake() {
    let dir = fixture_dir("jump-sched-namesake");
    copy_vector(&dir, "merge/a.json", "a.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("a.json")).unwrap()).unwrap();
    json["jobLogs"][0]["entries"][0]["payload"] = "{\"tampered\":true}".into();
    std::fs::write(dir.join("0-a-tampered.json"), json.to_string()).unwrap();
    let db = fixture_dir("jump-sched-namesake-store").join("airlock.db");
    let mut store = Store::open(&db).unwrap();
    import(
        &mut store,
        &[dir.join("a.json")],
        &ImportOptions::new("relay-01"),
    )
    .unwrap();
    drop(store);
    let mut c = Console::open(&dir);
    c.app.config.db = Some(db);
    c.keys("4<Enter>");
    assert_eq!(c.app.screen, ScreenId::Chain, "{}", c.message());
    let index = c.app.chain.index().unwrap();
    assert!(index.path.ends_with("a.json"), "{:?}", index.path);
}
