use super::exposition::{render, Gauges};
use super::*;
use crate::core::store::Store;

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_seed_metric_is_exposed_with_its_type() {
    let store = Store::open_in_memory().unwrap();
    let text = render(&store, Gauges::default()).unwrap();
    let seed = [
        ("airgap_bundles_exported_total", "counter"),
        ("airgap_bundles_imported_total", "counter"),
        ("airgap_jobs_synced_total", "counter"),
        ("airgap_duplicates_dropped_total", "counter"),
        ("airgap_merge_conflicts_total", "counter"),
        ("airgap_offline_enqueues_total", "counter"),
        ("airgap_bundle_size_bytes", "histogram"),
        ("airgap_sync_duration_seconds", "histogram"),
        ("airgap_merge_entries_count", "histogram"),
        ("hlc_ticks_total", "counter"),
        ("hlc_clock_skew_rejections_total", "counter"),
        ("hlc_physical_offset_seconds", "gauge"),
        ("scheduler_chain_entries_total", "counter"),
        ("scheduler_chain_verifications_total", "counter"),
        ("scheduler_chain_verification_failures_total", "counter"),
        ("scheduler_batch_snapshots_total", "counter"),
    ];
    for (name, kind) in seed {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name}");
    }
    assert_eq!(
        sample(
            &text,
            "airgap_merge_conflicts_total{type=\"payload_mismatch\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "airgap_bundle_size_bytes_bucket{le=\"+Inf\"}"),
        Some(0.0)
    );
    // The tolerance gauge appears only when known.
    assert!(!text.contains("hlc_max_clock_skew_seconds"));
}

#[test]
fn events_accumulate_in_the_store() {
    let store = Store::open_in_memory().unwrap();
    let sizes = [2000u64, 300];
    let import = ImportCounts {
        imported: true,
        bundles: 2,
        jobs: 40,
        duplicates: 3,
        conflicts: 0,
        skew_rejections: 0,
        snapshots: 1,
        input_bytes: &sizes,
        seconds: 0.2,
    };
    record(&store, &[Event::Imported(import.clone())]).unwrap();
    record(
        &store,
        &[
            Event::Imported(ImportCounts {
                imported: false,
                conflicts: 2,
                ..ImportCounts::default()
            }),
            Event::Enqueued { jobs: 5 },
            Event::ChainVerified { ok: true },
            Event::ChainVerified { ok: false },
            Event::Exported {
                bytes: 100,
                seconds: 0.001,
            },
            Event::ServeJob {
                job: "snapshot",
                ok: true,
            },
        ],
    )
    .unwrap();
    let gauges = Gauges {
        physical_offset_seconds: 1.5,
        max_clock_skew_seconds: Some(5.0),
        computed: Vec::new(),
    };
    let t = render(&store, gauges).unwrap();
    assert_eq!(sample(&t, "airgap_bundles_imported_total"), Some(2.0));
    assert_eq!(sample(&t, "airgap_jobs_synced_total"), Some(40.0));
    assert_eq!(sample(&t, "scheduler_chain_entries_total"), Some(40.0));
    assert_eq!(sample(&t, "airgap_duplicates_dropped_total"), Some(3.0));
    assert_eq!(
        sample(
            &t,
            "airgap_merge_conflicts_total{type=\"payload_mismatch\"}"
        ),
        Some(2.0)
    );
    assert_eq!(sample(&t, "airgap_offline_enqueues_total"), Some(5.0));
    assert_eq!(sample(&t, "hlc_ticks_total"), Some(5.0));
    assert_eq!(sample(&t, "scheduler_chain_verifications_total"), Some(2.0));
    assert_eq!(
        sample(&t, "scheduler_chain_verification_failures_total"),
        Some(1.0)
    );
    assert_eq!(sample(&t, "scheduler_batch_snapshots_total"), Some(1.0));
    assert_eq!(sample(&t, "airgap_bundles_exported_total"), Some(1.0));
    // Sizes 2000, 300 and 100: cumulative buckets.
    assert_eq!(
        sample(&t, "airgap_bundle_size_bytes_bucket{le=\"1024\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(&t, "airgap_bundle_size_bytes_bucket{le=\"16384\"}"),
        Some(3.0)
    );
    assert_eq!(sample(&t, "airgap_bundle_size_bytes_count"), Some(3.0));
    assert_eq!(sample(&t, "airgap_bundle_size_bytes_sum"), Some(2400.0));
    // Two syncs (0.2 s and 0 s) and one export; one merge of 40 entries.
    assert_eq!(sample(&t, "airgap_sync_duration_seconds_count"), Some(3.0));
    assert_eq!(
        sample(&t, "airgap_merge_entries_count_bucket{le=\"10\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&t, "airgap_merge_entries_count_bucket{le=\"100\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&t, "airlock_serve_job_runs_total{job=\"snapshot\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&t, "hlc_physical_offset_seconds"), Some(1.5));
    assert_eq!(sample(&t, "hlc_max_clock_skew_seconds"), Some(5.0));
}

#[test]
fn counters_survive_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    for _ in 0..2 {
        let store = Store::open(&path).unwrap();
        record(&store, &[Event::ChainVerified { ok: true }]).unwrap();
    }
    let store = Store::open(&path).unwrap();
    let t = render(&store, Gauges::default()).unwrap();
    assert_eq!(sample(&t, "scheduler_chain_verifications_total"), Some(2.0));
}

#[test]
fn physical_offset_is_how_far_the_clock_runs_ahead() {
    let store = Store::open_in_memory().unwrap();
    assert_eq!(
        exposition::physical_offset_seconds(&store, 10_000).unwrap(),
        0.0
    );
    crate::core::store::save_clock_state(store.conn(), "n", (12_500, 0)).unwrap();
    assert_eq!(
        exposition::physical_offset_seconds(&store, 10_000).unwrap(),
        2.5
    );
    assert_eq!(
        exposition::physical_offset_seconds(&store, 20_000).unwrap(),
        0.0
    );
}

#[test]
fn numbers_and_labels_use_the_exposition_syntax() {
    assert_eq!(exposition::number(1000.0), "1000");
    assert_eq!(exposition::number(0.25), "0.25");
    assert_eq!(exposition::number(f64::INFINITY), "+Inf");
    assert_eq!(
        label_text(&[("job", "a\"b\\c\nd")]),
        "job=\"a\\\"b\\\\c\\nd\""
    );
}

#[test]
fn failure_series_exist_at_zero_before_the_first_failure() {
    // A series that first appears at 1 is no increase to Prometheus: the first failure would be
    // missed by increase() and the alert rules. Known label sets are rendered from the start.
    let store = Store::open_in_memory().unwrap();
    record(
        &store,
        &[
            Event::ServeJob {
                job: "verify",
                ok: true,
            },
            wal_recovered("clean"),
        ],
    )
    .unwrap();
    let t = render(&store, Gauges::default()).unwrap();
    assert_eq!(
        sample(&t, "airlock_serve_job_runs_total{job=\"verify\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&t, "airlock_serve_job_failures_total{job=\"verify\"}"),
        Some(0.0),
        "{t}"
    );
    assert_eq!(
        sample(&t, "airlock_wal_recoveries_total{outcome=\"torn-tail\"}"),
        Some(0.0),
        "{t}"
    );
    assert_eq!(
        sample(&t, "airlock_wal_recoveries_total{outcome=\"clean\"}"),
        Some(1.0)
    );
    // Nothing ran: no job label is invented, and the recovery outcomes are there already.
    let empty = Store::open_in_memory().unwrap();
    let t = render(&empty, Gauges::default()).unwrap();
    assert!(!t.contains("airlock_serve_job_failures_total{"), "{t}");
    assert_eq!(
        sample(&t, "airlock_wal_recoveries_total{outcome=\"clean\"}"),
        Some(0.0)
    );
}

#[test]
fn a_label_value_with_a_control_character_is_written_visible() {
    // Prometheus text: `\\x1b` is a backslash and `x1b`; no raw control character is written.
    assert_eq!(
        label_text(&[("job", "a\u{1b}]0;x\u{7}\r")]),
        "job=\"a\\\\x1b]0;x\\\\x07\\\\r\""
    );
    for ok in [
        "",
        "sum",
        "count",
        "le=\"+Inf\"",
        "a=\"x\\\"y\\\\z\\n\",b_2=\"\"",
    ] {
        assert_eq!(stored_labels_problem(ok), None, "{ok}");
    }
    for bad in [
        "job=\"x\"} 5\nfake 1",
        "job=\"a\u{1b}\"",
        "job=\"x",
        "job=x",
        "1job=\"x\"",
        "job=\"\\q\"",
        "a=\"x\",",
    ] {
        assert!(stored_labels_problem(bad).is_some(), "{bad:?}");
    }
}
