//! The second pass reads back exactly what the first verified: an input changed in between is
//! refused and nothing is written.

use super::*;
use crate::core::store::Store;
use crate::core::verify::spill::SharedSpill;
use std::path::Path;

const VECTORS: &str = "../shared/vectors";

fn copy_of(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name.replace('/', "-"));
    std::fs::copy(Path::new(VECTORS).join(name), &to).unwrap();
    to
}

/// Changes one letter of the first payload in place (same length, still valid JSON).
fn edit_first_payload(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(b"\\\"scan\\\"".len())
        .position(|w| w == b"\\\"scan\\\"")
        .unwrap();
    bytes[at + 5] = b'm';
    std::fs::write(path, bytes).unwrap();
}

fn set_hook(f: impl FnOnce() + 'static) {
    BETWEEN_PASSES.with(|h| *h.borrow_mut() = Some(Box::new(f)));
}

fn chain_length(store: &Store) -> u64 {
    let mut tx = store.begin(TxKind::Read).unwrap();
    tx.chain_head("acme").unwrap().map_or(0, |h| h.length)
}

#[test]
fn an_input_changed_between_the_passes_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let inputs = vec![
        copy_of(tmp.path(), "merge/a.json"),
        copy_of(tmp.path(), "merge/b.json"),
    ];
    let changed = inputs[0].clone();
    set_hook(move || edit_first_payload(&changed));
    let err = import(&mut store, &inputs, &ImportOptions::new("relay-01")).unwrap_err();
    let ImportError::InputChanged { file, offset } = &err else {
        panic!("{err}");
    };
    assert_eq!(file, &inputs[0].display().to_string());
    assert!(*offset > 0);
    assert!(
        err.to_string().contains("changed during the import"),
        "{err}"
    );
    assert_eq!(chain_length(&store), 0);
    // The changed file, verified again, is refused for what it now is.
    let again = import(&mut store, &inputs, &ImportOptions::new("relay-01")).unwrap();
    assert_eq!(again.status, ImportStatus::Refused);
    assert_eq!(chain_length(&store), 0);
}

#[test]
fn an_input_truncated_between_the_passes_is_refused_by_the_dry_run_too() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let inputs = vec![copy_of(tmp.path(), "merge/a.json")];
    let cut = inputs[0].clone();
    set_hook(move || {
        let f = std::fs::OpenOptions::new().write(true).open(&cut).unwrap();
        f.set_len(f.metadata().unwrap().len() / 2).unwrap();
    });
    let err = plan_import(&store, &inputs, &ImportOptions::new("relay-01")).unwrap_err();
    assert!(matches!(err, ImportError::InputChanged { .. }), "{err}");
    // Unchanged inputs plan as before.
    let fresh = vec![copy_of(tmp.path(), "merge/b.json")];
    let plan = plan_import(&store, &fresh, &ImportOptions::new("relay-01")).unwrap();
    assert_eq!(plan.status, ImportStatus::Planned);
}

#[test]
fn a_windowed_preview_lists_the_first_entries_with_the_full_plans_head_and_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let inputs: Vec<PathBuf> = ["merge/a.json", "merge/b.json", "merge/c.json"]
        .iter()
        .map(|n| Path::new(VECTORS).join(n))
        .collect();
    let full = plan_import(&store, &inputs, &ImportOptions::new("relay-01")).unwrap();
    let mut opts = ImportOptions::new("relay-01");
    opts.preview_window = Some(2);
    let windowed = plan_import(&store, &inputs, &opts).unwrap();
    let all = full.new_entries.clone().unwrap();
    assert!(all.len() > 2);
    assert_eq!(windowed.new_entries.unwrap(), all[..2].to_vec());
    assert_eq!(windowed.chain, full.chain);
    assert_eq!(windowed.totals, full.totals);
    let (lanes, full_lanes) = (windowed.lanes.unwrap(), full.lanes.unwrap());
    assert_eq!(lanes.len(), full_lanes.len());
    for (l, f) in lanes.iter().zip(&full_lanes) {
        assert_eq!(l.entries, f.entries[..f.entries.len().min(2)].to_vec());
    }
}

/// A long import computes the snapshot roots of full batches while it appends (the links do not
/// wait in memory): every snapshot is still contiguous, of the batch size, and verifies.
#[test]
fn snapshots_folded_during_a_long_append_verify() {
    use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("long.json");
    let spec = SynthSpec::acme(2, 700, 7);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let mut opts = ImportOptions::new("relay-01");
    opts.batch_size = 3;
    let r = import(&mut store, &[path], &opts).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!(r.snapshots.len(), 1400 / 3);
    for (k, s) in r.snapshots.iter().enumerate() {
        assert_eq!((s.from_seq, s.entry_count), (3 * k as u64, 3));
    }
    let v = crate::core::chain::verify::verify_chain(&store, "acme", None).unwrap();
    assert!(v.ok, "{:?}", v.findings);
    assert_eq!(chain_length(&store), 1400);
}

#[test]
fn one_thread_and_two_load_the_same_keys_findings_and_drops() {
    let tmp = tempfile::tempdir().unwrap();
    // A bundle with an entry the reader cannot parse strictly (its log keeps nothing after it).
    let bad_job = tmp.path().join("bad-job.json");
    let text = std::fs::read_to_string(Path::new(VECTORS).join("bundles/two-nodes.json")).unwrap();
    std::fs::write(
        &bad_job,
        text.replacen("\"jobId\": \"", "\"jobId\": \"x", 2),
    )
    .unwrap();
    let inputs = [
        Path::new(VECTORS).join("merge/a.json"),
        Path::new(VECTORS).join("tamper/payload-modified.json"),
        Path::new(VECTORS).join("tamper/entries-deleted.json"),
        Path::new(VECTORS).join("bundles/two-nodes-signed.json"),
        bad_job,
    ];
    let opts = ImportOptions::new("relay-01");
    let keys = |l: &load::Loaded| -> Vec<_> {
        l.keys
            .iter()
            .map(|k| (k.physical, k.logical, k.job_id, k.offset, k.len))
            .collect()
    };
    let mut dropped_somewhere = false;
    for p in &inputs {
        let one = load_budget(p, &opts, usize::MAX);
        // The dropped entries all in the temporary file, read back as they were listed.
        let two = load::load(p, "f".into(), &opts, true, (0, &SharedSpill::new())).unwrap();
        let name = p.display();
        assert!(!keys(&one).is_empty(), "{name}");
        assert_eq!(keys(&one), keys(&two), "{name}");
        assert_eq!(one.log_starts, two.log_starts, "{name}");
        assert_eq!(one.log_nodes, two.log_nodes, "{name}");
        assert_eq!(dropped(&one), dropped(&two), "{name}");
        assert_eq!(two.dropped.in_file(), two.dropped.len(), "{name}");
        let report = |l: &load::Loaded| serde_json::to_value(&l.report).unwrap();
        assert_eq!(report(&one), report(&two), "{name}");
        dropped_somewhere |= one.dropped.len() > 0;
    }
    assert!(dropped_somewhere, "some input must drop entries");
}

/// `path` loaded on one thread with `budget` bytes for its dropped entries (a spill file of its
/// own).
fn load_budget(path: &Path, opts: &ImportOptions<'_>, budget: usize) -> load::Loaded {
    load::load(path, "f".into(), opts, false, (budget, &SharedSpill::new())).unwrap()
}

fn dropped(l: &load::Loaded) -> Vec<DroppedEntry> {
    l.dropped.iter().map(Result::unwrap).collect()
}

/// A log broken at its second entry drops the other 2,998: past a small budget they are in the
/// temporary file (what stays in memory is bounded, whatever the count), and they read back as
/// the list held all in memory, in report order.
#[test]
fn dropped_entries_past_the_budget_go_to_the_temporary_file() {
    use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("broken.json");
    let spec = SynthSpec::acme(2, 1500, 3);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    // The second entry's payload of each log edited (same length, still valid JSON).
    std::fs::write(&path, text.replace("\\\"seq\\\":1,", "\\\"seq\\\":7,")).unwrap();
    let opts = ImportOptions::new("relay-01");
    let all = load_budget(&path, &opts, usize::MAX);
    assert_eq!((all.dropped.len(), all.dropped.in_file()), (2998, 0));
    let want = dropped(&all);
    assert_eq!((want[0].origin.index, want[1].origin.index), (1, 2));
    assert_eq!(want[0].reason, "payload-modified");
    for budget in [0, 4096, 64 << 10] {
        let l = load_budget(&path, &opts, budget);
        // At most `budget` bytes of them in memory, each costing more than its fixed size.
        let in_memory = l.dropped.len() - l.dropped.in_file();
        assert!(
            in_memory <= budget / std::mem::size_of::<dropped::Dropped>(),
            "budget {budget}: {in_memory} in memory"
        );
        assert!(l.dropped.in_file() > 2000, "budget {budget}");
        assert!(dropped(&l) == want, "budget {budget}");
    }
}

/// Logs sharing one node id, each broken by an entry that does not parse (the rest of each log is
/// dropped unparsed, one segment per log): their dropped entries merge by index, read back
/// segment by segment (each read no further than its own segment, so that thousands of one-entry
/// logs do not cost a read buffer each) whether they are in memory, in the file or both.
#[test]
fn unparsed_segments_under_one_node_id_merge_the_same_whatever_the_budget() {
    use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("shared.json");
    let spec = SynthSpec::acme(4, 60, 5);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let mut bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let logs = bundle["jobLogs"].as_array_mut().unwrap();
    for (i, log) in logs.iter_mut().enumerate() {
        log["nodeId"] = "node-shared".into();
        // Unparsed from entry 3 + 5 * i on: segments of different lengths.
        let entries = log["entries"].as_array_mut().unwrap();
        entries[3 + 5 * i].as_object_mut().unwrap().remove("jobId");
    }
    std::fs::write(&path, serde_json::to_vec(&bundle).unwrap()).unwrap();
    let opts = ImportOptions::new("relay-01");
    let all = load_budget(&path, &opts, usize::MAX);
    let want = dropped(&all);
    // The logs' node id no longer matches their entries': every entry is dropped, those before
    // the unparsed one parsed, the rest not.
    assert_eq!(want.len(), 4 * 60);
    let order: Vec<(&str, u64)> = want
        .iter()
        .map(|d| (d.origin.node_id.as_str(), d.origin.index))
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted);
    for budget in [0, 2048, 8192] {
        let l = load_budget(&path, &opts, budget);
        assert!(l.dropped.in_file() > 0, "budget {budget}");
        assert!(dropped(&l) == want, "budget {budget}");
    }
}

#[test]
fn a_new_store_written_by_another_importer_meanwhile_is_planned_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        copy_of(tmp.path(), "merge/a.json"),
        copy_of(tmp.path(), "merge/b.json"),
    );
    let db = tmp.path().join("new.db");
    // Between the plan against an empty store and the write, another importer makes the store
    // and imports `a` into it.
    let (other_db, other_a) = (db.clone(), a.clone());
    set_hook(move || {
        let mut other = Store::open(&other_db).unwrap();
        let r = import(&mut other, &[other_a], &ImportOptions::new("relay-02")).unwrap();
        assert_eq!(r.status, ImportStatus::Imported);
    });
    let inputs = [a.clone(), b.clone()];
    let r = import_to_new_store(&db, &inputs, &ImportOptions::new("relay-01")).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!(r.bundles[0].status, BundleStatus::AlreadyImported);
    assert_eq!(r.bundles[1].status, BundleStatus::New);
    // The chain is the one of importing `a`, then `a` and `b`, one after the other.
    let mut reference = Store::open(&tmp.path().join("reference.db")).unwrap();
    import(&mut reference, &[a], &ImportOptions::new("relay-02")).unwrap();
    import(&mut reference, &inputs, &ImportOptions::new("relay-01")).unwrap();
    let head = |s: &Store| {
        let mut tx = s.begin(TxKind::Read).unwrap();
        let h = tx.chain_head("acme").unwrap().unwrap();
        (h.length, h.head_chain_link)
    };
    assert_eq!(head(&Store::open(&db).unwrap()), head(&reference));
}

/// A copy of a synthetic bundle (`logs` logs of `entries` entries) whose every log breaks at its
/// second entry (its payload edited): `--force` drops all the others.
fn broken_synthetic(dir: &Path, name: &str, logs: usize, entries: usize, seed: u64) -> PathBuf {
    use crate::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
    let path = dir.join(name);
    let spec = SynthSpec::acme(logs, entries, seed);
    write_synthetic_bundle(&spec, std::fs::File::create(&path).unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\\\"seq\\\":1,", "\\\"seq\\\":7,")).unwrap();
    path
}

/// Options of a forced import whose report reads the dropped entries back, all from the file.
fn forced_streaming() -> ImportOptions<'static> {
    let mut opts = ImportOptions::new("relay-01");
    opts.force = true;
    opts.stream_dropped = true;
    opts.dropped_memory = 0;
    opts
}

/// The report lists the dropped entries after the commit: a list that does not read back before
/// the commit refuses the import, and nothing is written (it used to commit, then print a
/// truncated JSON report and exit 2).
#[test]
fn dropped_entries_that_do_not_read_back_refuse_the_import_before_its_commit() {
    use crate::core::verify::spill::failing::fail_reads_after;
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let inputs = [broken_synthetic(tmp.path(), "broken.json", 2, 1500, 3)];
    let opts = forced_streaming();
    // Reads of the temporary file fail from the transaction on (the load read none on this
    // thread).
    set_hook(|| fail_reads_after(Some(0)));
    let r = import(&mut store, &inputs, &opts);
    fail_reads_after(None);
    let Err(err) = r else {
        panic!("imported although its dropped entries did not read back");
    };
    assert!(matches!(err, ImportError::DroppedList(_)), "{err}");
    for what in ["injected read failure", "nothing was imported"] {
        assert!(err.to_string().contains(what), "{what}: {err}");
    }
    assert_eq!(chain_length(&store), 0);
    // Once they read back, the import runs and its report lists every one.
    let r = import(&mut store, &inputs, &opts).unwrap();
    assert_eq!(r.status, ImportStatus::Imported);
    assert_eq!((chain_length(&store), r.dropped_count()), (2, 2998));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["dropped"].as_array().unwrap().len(), 2998);
    assert!(json.get("droppedUnreadable").is_none());
}

/// Should the dropped entries still fail to read back after the commit (they read back just
/// before it), the report stays one valid JSON document: the entries read, and
/// `droppedUnreadable` saying how many of how many and why; the text says so too (the JSON used
/// to fail half-written).
#[test]
fn a_report_whose_dropped_entries_fail_to_read_back_is_complete_and_says_so() {
    use crate::core::verify::spill::failing::fail_reads_after;
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(&tmp.path().join("airlock.db")).unwrap();
    let inputs = [broken_synthetic(tmp.path(), "broken.json", 2, 1500, 3)];
    let r = import(&mut store, &inputs, &forced_streaming()).unwrap();
    assert_eq!(
        (r.status, chain_length(&store)),
        (ImportStatus::Imported, 2)
    );
    assert!(r.dropped_unreadable().is_none());
    // The first read (64 KiB) succeeds, the next fails.
    fail_reads_after(Some(1));
    let json = serde_json::to_vec(&r);
    fail_reads_after(None);
    let json: serde_json::Value = serde_json::from_slice(&json.unwrap()).unwrap();
    assert_eq!(json["status"], "imported");
    let listed = json["dropped"].as_array().unwrap().len();
    assert!(listed > 0 && listed < 2998, "{listed}");
    let u = &json["droppedUnreadable"];
    assert_eq!(
        (u["count"].as_u64(), u["listed"].as_u64()),
        (Some(2998), Some(listed as u64))
    );
    assert!(
        u["error"]
            .as_str()
            .unwrap()
            .contains("injected read failure"),
        "{u}"
    );
    assert!(r
        .dropped_unreadable()
        .unwrap()
        .contains("injected read failure"));
    // The text lists the first ones and the failure.
    fail_reads_after(Some(0));
    let lines = crate::report_text::import_lines(&r, 50);
    fail_reads_after(None);
    assert!(
        lines.iter().any(|l| l.contains("injected read failure")),
        "{lines:?}"
    );
}

/// The dropped entries of every input of a call that go to a temporary file share one: a call of
/// hundreds of broken inputs holds one descriptor for them, not one per input.
#[test]
fn the_dropped_entries_of_every_input_share_one_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs: Vec<PathBuf> = (0..6)
        .map(|i| broken_synthetic(tmp.path(), &format!("b{i}.json"), 1, 300, 20 + i))
        .collect();
    let mut opts = forced_streaming();
    opts.dropped_memory = 6 * 4096;
    let loaded = load::load_all(&inputs, &opts).unwrap();
    let files: Vec<_> = loaded.iter().map(|l| l.dropped.file_id()).collect();
    for l in &loaded {
        assert!(
            l.dropped.in_file() > 0 && l.dropped.in_file() < 299,
            "{}",
            l.file
        );
    }
    assert!(files[0].is_some());
    assert!(files.iter().all(|f| *f == files[0]), "{files:?}");
    // Each reads back its own entries, in order.
    for l in &loaded {
        let back: Vec<_> = l.dropped.iter().map(Result::unwrap).collect();
        let index: Vec<u64> = back.iter().map(|d| d.origin.index).collect();
        assert_eq!(index, (1..300).collect::<Vec<u64>>());
        assert!(back.iter().all(|d| d.origin.file == l.file));
    }
}
