//! Import audit: what names a bundle (its id and the digest its logs recompute to, never the
//! header's claim alone), re-imports after a forced partial import, the clock's skew, hostile
//! field sizes in the dropped list, and order independence of everything an import records.

mod chain_support;
mod pg_support;
mod stores;

use airlock::core::bundle::{bundle_to_vec, load_bundle, manifest_digest, Bundle};
use airlock::core::import::{self, BundleStatus, ImportError, ImportState, ImportStatus};
use chain_support::*;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stores::TestStore;

/// [`dump`] plus what it leaves out: the file each import row names and the provenance of each
/// chain entry (its import row, source node, original link).
fn full_dump(store: &airlock::core::store::Store) -> String {
    let mut out = dump(store);
    let q = "SELECT id, bundle_id, manifest_digest, file_name, entries, new_entries, duplicates, dropped, forced FROM imports ORDER BY id";
    let mut stmt = store.conn().prepare(q).unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        for i in 0..9 {
            let v: rusqlite::types::Value = r.get(i).unwrap();
            out.push_str(&format!("{v:?}|"));
        }
        out.push('\n');
    }
    out
}

fn write(path: &Path, b: &Bundle) -> PathBuf {
    std::fs::write(path, bundle_to_vec(b)).unwrap();
    path.to_path_buf()
}

fn forced() -> import::ImportOptions<'static> {
    let mut o = opts();
    o.force = true;
    o
}

fn chain_len(store: &airlock::core::store::Store) -> u64 {
    airlock::core::store::rules::chain_head(store, "acme")
        .unwrap()
        .map_or(0, |h| h.length)
}

/// The two public tamper vectors share a bundle id and claim the same manifest digest, but their
/// logs differ (each was damaged elsewhere). Neither is "the same bundle given twice": each
/// contributes its verified prefix, and the store and the report are the same in either order.
#[test]
fn two_tampered_copies_claiming_one_digest_both_take_part_in_either_order() {
    let files = [
        vector("tamper/entries-deleted.json"),
        vector("tamper/payload-modified.json"),
    ];
    let mut results = Vec::new();
    for order in [[0, 1], [1, 0]] {
        let (_dir, _path, mut store) = temp_store();
        let inputs: Vec<PathBuf> = order.iter().map(|&i| files[i].clone()).collect();
        let r = import_files(&mut store, &inputs, &forced());
        assert_eq!(r.status, ImportStatus::Imported);
        for b in &r.bundles {
            assert_eq!(b.status, BundleStatus::New, "{}", b.file);
        }
        // node-a: entries-deleted's five; node-b: payload-modified's four.
        assert_eq!(chain_len(&store), 9);
        let dropped: Vec<String> = r
            .dropped
            .iter()
            .map(|d| format!("{} {} {}", d.origin.file, d.origin.node_id, d.origin.index))
            .collect();
        results.push((full_dump(&store), dropped));
    }
    assert_eq!(
        results[0], results[1],
        "the argument order changed the result"
    );
}

/// A copy of `merge/a.json` whose node log lost its last entry (lastHlc and chainHead moved back
/// with it) but which still claims the original manifest digest: only `manifest-mismatch`.
fn cut_copy(dir: &Path) -> PathBuf {
    let mut b = load_bundle(&vector("merge/a.json")).unwrap();
    let log = &mut b.job_logs[0];
    log.entries.pop();
    let last = log.entries.last().unwrap().clone();
    log.last_hlc = last.t_hlc;
    log.chain_head = last.link;
    write(&dir.join("a-cut.json"), &b)
}

both_stores! {
// A forced import of a copy that claims the original's digest does not stand for the original:
// the original, imported afterwards, adds the entry the copy lacked.
fn the_original_imports_after_a_forced_import_of_a_cut_copy_claiming_its_digest(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = TestStore::new(kind);
    let cut = cut_copy(dir.path());
    let r = s.import(&[cut], &forced());
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!(r.chain.length, 5);
    let r = s.import(&[vector("merge/a.json")], &opts());
    assert_eq!(r.bundles[0].status, BundleStatus::New);
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!((r.totals.new, r.totals.duplicates), (1, 5));
    assert_eq!(r.chain.length, 6);
    let again = s.import(&[vector("merge/a.json")], &opts());
    assert_eq!(again.status, ImportStatus::NothingToDo);
    assert_eq!(again.bundles[0].status, BundleStatus::AlreadyImported);
}

// A bundle whose later entries were `clock-skew` findings when it was force-imported, imported
// whole once its time has come: a further import is "nothing to do" (nothing written) and the
// bundle's state is "imported", not "partly".
fn a_bundle_completed_after_a_forced_partial_import_is_then_already_imported(kind: Kind) {
    let mut s = TestStore::new(kind);
    let a = vec![vector("merge/a.json")];
    let mut early = forced();
    // "Now" is just after the third entry: the last three are ahead by more than the skew.
    early.now_ms = 1_767_614_402_000;
    early.max_clock_skew = Duration::from_millis(500);
    let r = s.import(&a, &early);
    assert_eq!((r.totals.new, r.totals.dropped), (3, 3));
    let r = s.import(&a, &opts());
    assert_eq!((r.status, r.totals.new), (ImportStatus::Imported, 3));
    let again = s.import(&a, &opts());
    assert_eq!(again.status, ImportStatus::NothingToDo, "recorded another import");
    assert_eq!(again.bundles[0].status, BundleStatus::AlreadyImported);
    let header = load_bundle(&a[0]).unwrap().header;
    let states = import::import_states(s.b(), &[&header]).unwrap();
    assert!(
        matches!(states[0], ImportState::Imported { .. }),
        "{states:?}"
    );
}
}

/// The same bundle under two names in one call: which copy is recorded (the file name in the
/// import row and in every entry's provenance) does not depend on the argument order.
#[test]
fn two_copies_of_one_bundle_record_the_same_file_in_either_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a-first.json");
    let z = dir.path().join("z-second.json");
    std::fs::copy(vector("merge/a.json"), &a).unwrap();
    std::fs::copy(vector("merge/a.json"), &z).unwrap();
    let mut dumps = Vec::new();
    for inputs in [vec![a.clone(), z.clone()], vec![z.clone(), a.clone()]] {
        let (_d, _p, mut store) = temp_store();
        let r = import_files(&mut store, &inputs, &opts());
        let statuses: Vec<(String, BundleStatus)> = r
            .bundles
            .iter()
            .map(|b| (b.file.clone(), b.status))
            .collect();
        assert!(
            statuses.contains(&(a.display().to_string(), BundleStatus::New)),
            "{statuses:?}"
        );
        dumps.push(full_dump(&store));
    }
    assert_eq!(dumps[0], dumps[1]);
}

/// `--max-clock-skew-ms` governs the whole import: an entry verification accepted within the
/// configured skew is witnessed by the local clock, not refused by its default 5 s.
#[test]
fn an_entry_within_the_configured_skew_is_imported_not_refused_by_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load_bundle(&vector("merge/a.json")).unwrap();
    let ahead = airlock::core::hlc::unix_ms_now() + 60_000;
    let log = &mut b.job_logs[0];
    log.entries.last_mut().unwrap().t_hlc = format!("{ahead}:0:node-a");
    log.relink(0).unwrap();
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    let file = write(&dir.path().join("ahead.json"), &b);
    let (_d, _p, mut store) = temp_store();
    let mut o = opts();
    o.max_clock_skew = Duration::from_secs(600);
    let r = import::import(&mut store, &[file], &o);
    let r = match r {
        Ok(r) => r,
        Err(e @ ImportError::Clock(_)) => panic!("verified, then refused by the clock: {e}"),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!(r.totals.new, 6);
    let clock = r.clock.unwrap();
    let physical: u64 = clock.split(':').next().unwrap().parse().unwrap();
    assert!(physical >= ahead, "{clock}");
}

/// A hostile jobId or node id of 100,000 characters: each dropped entry keeps a bounded piece of
/// it that says how long it was (not 100 KB per entry, nor per line on a terminal).
#[test]
fn a_dropped_entry_keeps_at_most_a_line_of_a_hostile_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = load_bundle(&vector("merge/a.json")).unwrap();
    b.job_logs[0].entries[1].job_id = "x".repeat(100_000);
    let long_job = write(&dir.path().join("long-job.json"), &b);
    let mut b = load_bundle(&vector("merge/b.json")).unwrap();
    b.job_logs[0].node_id = "N".repeat(100_000);
    let long_node = write(&dir.path().join("long-node.json"), &b);
    let (_d, _p, mut store) = temp_store();
    let r = import_files(&mut store, &[long_job, long_node], &forced());
    assert_eq!(r.status, ImportStatus::Imported);
    assert!(r.dropped.len() >= 5 + 5, "{}", r.dropped.len());
    for d in &r.dropped {
        for field in [&d.origin.job_id, &d.origin.node_id, &d.origin.t_hlc] {
            assert!(field.len() <= 200, "{} bytes kept", field.len());
        }
    }
    let cut = r.dropped.iter().find(|d| d.origin.job_id.starts_with('x'));
    let cut = cut.expect("the long jobId's entry is dropped");
    assert!(
        cut.origin.job_id.contains("100000 bytes"),
        "{}",
        cut.origin.job_id
    );
    assert!(r
        .dropped
        .iter()
        .any(|d| d.origin.node_id.contains("100000 bytes")));
}

/// `--verify-only` lists what `--force` would drop: a broken bundle given twice (under two names)
/// is imported once, so its dropped entries are listed once, as the refused import lists them.
#[test]
fn verify_only_lists_the_dropped_entries_of_a_repeated_bundle_once() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.json");
    std::fs::copy(vector("tamper/entries-deleted.json"), &copy).unwrap();
    let inputs = vec![vector("tamper/entries-deleted.json"), copy];
    let verified = import::verify_inputs(&inputs, &opts()).unwrap();
    let (_d, _p, mut store) = temp_store();
    let refused = import_files(&mut store, &inputs, &opts());
    assert_eq!(refused.status, ImportStatus::Refused);
    assert_eq!(refused.totals.dropped, 2);
    assert_eq!(verified.totals.dropped, refused.totals.dropped);
    assert_eq!(verified.dropped, refused.dropped);
}

/// `jobs import` into a store that is not there makes it only when it imports something: a
/// refused import (conflicts, findings) or an unreadable input leaves no file, like a dry run; an
/// import that writes makes the store, with what an import into an existing empty store makes.
#[test]
fn an_import_that_writes_nothing_leaves_no_new_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("--db")
            .arg(&db)
            .args(["jobs", "import"])
            .args(args)
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("AIRLOCK_NODE_ID", "importer-test")
            .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
            .output()
            .unwrap()
    };
    let (d, e) = (vector("conflict/d.json"), vector("conflict/e.json"));
    let deleted = vector("tamper/entries-deleted.json");
    let missing = dir.path().join("missing.json");
    let cases: [(&[&std::ffi::OsStr], i32); 3] = [
        (&[d.as_os_str(), e.as_os_str()], 1),
        (&[deleted.as_os_str()], 1),
        (&[missing.as_os_str()], 2),
    ];
    for (args, code) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {o:?}");
        assert!(!db.exists(), "{args:?} made a store");
    }
    // The engine call behind it: refused, nothing made; then an import that writes.
    let r = import::import_to_new_store(&db, &[d.clone(), e.clone()], &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::Refused);
    assert!(!db.exists());
    let r = import::import_to_new_store(&db, &merge_inputs(), &opts()).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    let made = airlock::core::store::Store::open(&db).unwrap();
    let (_d2, _p2, mut existing) = temp_store();
    import_files(&mut existing, &merge_inputs(), &opts());
    assert_eq!(dump(&made), dump(&existing));
}

/// `jobs import` with the binary, a store `db` under `dir`; returns the output.
fn run_import(dir: &Path, db: &Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("AIRLOCK_NODE_ID", "importer-test")
        .env_remove("AIRLOCK_REQUIRE_SIGNATURE")
        .output()
        .unwrap()
}

fn out_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of `merge/a.json` whose every log breaks at its first entry (its jobId edited): `--force`
/// keeps an empty prefix of each, so every entry is dropped.
fn broken_at_first_entry(dir: &Path) -> PathBuf {
    let mut b = load_bundle(&vector("merge/a.json")).unwrap();
    for log in &mut b.job_logs {
        log.entries[0].job_id = "00000000-0000-4000-8000-000000000000".into();
    }
    write(&dir.join("all-dropped.json"), &b)
}

/// `merge/a.json` without its logs (the digest recomputed: a bundle that verifies, with no entries).
fn no_entries(dir: &Path) -> PathBuf {
    let mut b = load_bundle(&vector("merge/a.json")).unwrap();
    b.job_logs.clear();
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    write(&dir.join("empty.json"), &b)
}

/// A forced import that drops every entry, or of a bundle with no entries, imports nothing: it is
/// refused (exit 1) and says what and why, with no chain or clock line, writes nothing (no store is
/// made, no `imports` row), and the chain of an existing store still verifies.
#[test]
fn an_import_with_no_entry_left_is_refused_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    let dropped = broken_at_first_entry(dir.path());
    let empty = no_entries(dir.path());
    let import = |file: &Path, extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = vec!["jobs".as_ref(), "import".as_ref()];
        args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
        args.push(file.as_os_str());
        run_import(dir.path(), &db, &args)
    };
    let cases: [(&Path, &[&str], &str); 3] = [
        (&dropped, &["--force"], "every entry of"),
        (&empty, &["--force"], "has no entries"),
        (&empty, &[], "has no entries"),
    ];
    for (file, extra, why) in cases {
        let o = import(file, extra);
        let t = out_text(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?} {file:?}: {t}");
        assert!(t.contains("REFUSED"), "{t}");
        assert!(t.contains("nothing to import") && t.contains(why), "{t}");
        assert!(
            !t.contains("IMPORTED") && !t.contains("local clock") && !t.contains("chain: "),
            "{t}"
        );
        assert!(!db.exists(), "{extra:?} {file:?} made a store");
        // With --force the entries were dropped, not "would be dropped with --force".
        assert!(!t.contains("would be dropped with --force"), "{t}");
        let json = run_import(
            dir.path(),
            &db,
            &[
                "jobs".as_ref(),
                "import".as_ref(),
                "--json".as_ref(),
                file.as_os_str(),
            ]
            .into_iter()
            .chain(extra.iter().map(|a| std::ffi::OsStr::new(*a)))
            .collect::<Vec<_>>(),
        );
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v["status"], "refused", "{v}");
        assert_eq!(v["refusal"], "nothing-to-import", "{v}");
        assert!(v["clock"].is_null(), "{v}");
    }
    // Into a store that holds a chain: refused the same, nothing recorded, the chain verifies.
    let b = vector("merge/b.json");
    let o = run_import(
        dir.path(),
        &db,
        &["jobs".as_ref(), "import".as_ref(), b.as_os_str()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o));
    let before = full_dump(&airlock::core::store::Store::open(&db).unwrap());
    let o = import(&dropped, &["--force"]);
    assert_eq!(o.status.code(), Some(1), "{}", out_text(&o));
    assert_eq!(
        full_dump(&airlock::core::store::Store::open(&db).unwrap()),
        before
    );
    let o = run_import(
        dir.path(),
        &db,
        &[
            "chain".as_ref(),
            "verify".as_ref(),
            "--tenant".as_ref(),
            "acme".as_ref(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o));
    // The engine: the same refusal, for a dry run too.
    let (_d, _p, mut store) = temp_store();
    let r = import_files(&mut store, std::slice::from_ref(&dropped), &forced());
    assert_eq!(r.status, ImportStatus::Refused);
    assert_eq!(r.refusal, Some(import::Refusal::NothingToImport));
    assert!(r.clock.is_none());
    let plan = import::plan_import(&store, &[dropped], &forced()).unwrap();
    assert_eq!(plan.refusal, Some(import::Refusal::NothingToImport));
    assert_eq!(chain_len(&store), 0);
}

/// An unreadable input is named once ("FILE: cannot read it: ..."), not twice.
#[test]
fn an_unreadable_input_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nosuch.json");
    let (_d, _p, mut store) = temp_store();
    let e = import::import(&mut store, std::slice::from_ref(&missing), &opts()).unwrap_err();
    let text = e.to_string();
    let name = missing.display().to_string();
    assert_eq!(text.matches(&name).count(), 1, "{text}");
    assert!(
        text.starts_with(&format!("{name}: cannot read it: ")),
        "{text}"
    );
}

/// A file name that is not UTF-8 shows its bytes (`\xff`) in the report and the provenance, not
/// U+FFFD.
#[cfg(unix)]
#[test]
fn a_non_utf8_file_name_keeps_its_bytes_visible() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"a-\xff.json");
    let path = dir.path().join(name);
    std::fs::copy(vector("merge/a.json"), &path).unwrap();
    let (_d, _p, mut store) = temp_store();
    let r = import_files(&mut store, std::slice::from_ref(&path), &opts());
    assert_eq!(r.status, ImportStatus::Imported);
    assert!(
        r.bundles[0].file.ends_with("a-\\xff.json"),
        "{}",
        r.bundles[0].file
    );
    assert!(!r.bundles[0].file.contains('\u{fffd}'));
    let recorded: String = store
        .conn()
        .query_row("SELECT file_name FROM imports", [], |row| row.get(0))
        .unwrap();
    assert!(recorded.ends_with("a-\\xff.json"), "{recorded}");
}

/// A bundle of 3 logs x 2,000 entries with a fixed id, each log broken early: log 0 by an edited
/// payload at entry 1 (the rest parsed, then dropped), log 1 by a jobId that does not parse at
/// entry 3 (the rest never kept), log 2 by claiming log 0's node id (its dropped entries merge
/// with log 0's by index) and an unparsable jobId at entry 5.
fn early_broken_bundle(dir: &Path) -> PathBuf {
    use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let path = dir.join("synth.json");
    let spec = SynthSpec::acme(3, 2000, 11);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let mut b = load_bundle(&path).unwrap();
    b.header.bundle_id = "5d0c3a4e-8f21-4b6a-9c55-0e7d2f1a9b3c".into();
    b.header.created_at = "2026-01-05T12:00:00.000Z".into();
    b.job_logs[0].entries[1].payload.push(' ');
    let job = &mut b.job_logs[1].entries[3].job_id;
    *job = format!("x{job}");
    b.job_logs[2].node_id = b.job_logs[0].node_id.clone();
    b.job_logs[2].entries[5].job_id = "not-a-job".into();
    write(&dir.join("early-broken.json"), &b)
}

/// Everything the reports of `--verify-only`, `--dry-run --force` and a forced import of `input`
/// say, JSON and text (every dropped entry listed, and the first 50), the clock left out.
fn early_broken_reports(input: &Path, o: &import::ImportOptions<'_>) -> String {
    let names = ["early-broken.json".to_string()];
    let mut o = o.clone();
    o.force = true;
    o.input_names = Some(&names);
    let inputs = [input.to_path_buf()];
    let (_d, _p, mut store) = temp_store();
    let reports = [
        import::verify_inputs(&inputs, &o).unwrap(),
        import::plan_import(&store, &inputs, &o).unwrap(),
        import_files(&mut store, &inputs, &o),
    ];
    let mut out = String::new();
    for r in &reports {
        let mut json = serde_json::to_value(r).unwrap();
        json["clock"] = serde_json::Value::Null;
        out.push_str(&json.to_string());
        for show in [usize::MAX, 50] {
            for line in airlock::report_text::import_lines(r, show) {
                if !line.starts_with("local clock now at") {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// What the reports of [`early_broken_bundle`] were before dropped entries were kept in bounded
/// memory (the SHA-256 of [`early_broken_reports`], all in memory).
const EARLY_BROKEN_REPORTS: &str =
    "ed5141c4c504b1fa5d807ee071977e8c4c41c080c98ae698e948d1e0bba54aca";

/// A forced import whose logs break early drops nearly every entry: its reports (JSON and text of
/// the verification, the plan and the import) are byte for byte what they were when every dropped
/// entry was held in memory, whether the dropped entries are listed in the report or read back as
/// it is written, and whether none, some or all of them went to the temporary file.
#[test]
fn the_reports_of_many_dropped_entries_are_the_same_whatever_memory_they_are_kept_in() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let input = early_broken_bundle(dir.path());
    let mut seen = Vec::new();
    for (stream, memory) in [
        (false, import::DROPPED_MEMORY),
        (false, 0),
        (true, import::DROPPED_MEMORY),
        (true, 0),
        (true, 4096),
    ] {
        let mut o = opts();
        o.stream_dropped = stream;
        o.dropped_memory = memory;
        let out = early_broken_reports(&input, &o);
        assert!(out.contains("5996 dropped"), "{}", &out[..2000]);
        seen.push((stream, memory, hex::encode(Sha256::digest(out.as_bytes()))));
    }
    for (stream, memory, digest) in &seen {
        assert_eq!(
            digest, EARLY_BROKEN_REPORTS,
            "stream {stream}, {memory} bytes in memory: {seen:?}"
        );
    }
}

/// A forced import of a log whose entry 2 is not an object (`null`, `[]`, a number, a string)
/// keeps entries 0 and 1, which verify, and drops that entry and the ones after it, each listed.
#[test]
fn a_forced_import_keeps_the_entries_before_one_that_is_not_an_object() {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vector("bundles/two-nodes.json")).unwrap()).unwrap();
    for value in [
        serde_json::json!(null),
        serde_json::json!([]),
        serde_json::json!(5),
        serde_json::json!("x"),
    ] {
        let (dir, _path, mut store) = temp_store();
        let mut doc = doc.clone();
        doc["jobLogs"][0]["entries"][2] = value.clone();
        let file = dir.path().join("bundle.json");
        std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
        let r = import_files(&mut store, &[file], &forced());
        assert_eq!(r.status, ImportStatus::Imported, "{value}");
        let dropped: Vec<String> = r
            .dropped
            .iter()
            .map(|d| format!("{} {} {}", d.origin.node_id, d.origin.index, d.reason))
            .collect();
        let want = [2, 3, 4].map(|i| format!("node-a {i} schema-invalid"));
        assert_eq!(dropped, want, "{value}");
        // node-a's entries 0 and 1, node-b's four.
        assert_eq!(chain_len(&store), 6, "{value}");
    }
}
