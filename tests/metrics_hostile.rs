//! The metrics exposition against a damaged or edited `metric_samples` table, on both stores: a
//! stored label text was copied into the exposition as it was, so a newline in it added series of
//! its own (`airlock_fake_total 99`) and a control character reached the terminal of `airlock
//! metrics`; one row whose value was not a number failed the whole exposition (`airlock metrics`
//! exit 2, serve's `/metrics` 500). Such a row is now left out and named in a comment line, every
//! other series still rendered.

mod chain_support;
mod common;
mod pg_support;
mod stores;

use common::text;
use stores::TestStore;

fn has_series(t: &str, series: &str) -> bool {
    t.lines().any(|l| l.starts_with(series))
}

both_stores! {
fn a_stored_label_text_cannot_add_series_or_control_characters(kind: Kind) {
    use airlock::core::metrics::{record, Event};
    let s = TestStore::new(kind);
    record(s.b(), &[Event::ServeJob { job: "verify", ok: true }]).unwrap();
    let evil = "'job=\"x\"} 5' || chr(10) || 'airlock_fake_total 99' || chr(10) || '# ' || chr(27) || ']0;pwned' || chr(7)";
    s.exec(
        &format!(
            "INSERT INTO metric_samples VALUES ('airlock_serve_job_runs_total', {}, 1)",
            evil.replace("chr(", "char(")
        ),
        &format!(
            "INSERT INTO airlock.metric_samples VALUES ('airlock_serve_job_runs_total', {evil}, 1)"
        ),
    );
    let t = airlock::core::service::metrics_text(s.b(), None, None).unwrap();
    assert!(!has_series(&t, "airlock_fake_total"), "{t}");
    assert!(!t.contains('\u{1b}') && !t.contains('\u{7}'), "{t}");
    // The readable rows are all there; the damaged one is named in a comment.
    assert!(t.contains("airlock_serve_job_runs_total{job=\"verify\"} 1\n"), "{t}");
    assert!(t.contains("\n# HELP airgap_bundles_imported_total "), "{t}");
    let named = t
        .lines()
        .find(|l| l.starts_with("# metric_samples row name \"airlock_serve_job_runs_total\""))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(named.contains("\\x1b]0;pwned\\x07"), "{named}");
    assert!(named.contains("left out: the labels are not a label set"), "{named}");
}
}

/// `airlock metrics` over a SQLite store with a row whose value is not a number (SQLite keeps the
/// text a REAL column is given when it does not read as a number): it failed with exit 2 and a
/// store error naming no row; it now prints the exposition and names the row.
#[test]
fn a_value_that_is_not_a_number_no_longer_fails_airlock_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("airlock.db");
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
            .args(["--db"])
            .arg(&db)
            .arg("metrics")
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env_remove("AIRLOCK_CONFIG")
            .output()
            .unwrap()
    };
    drop(airlock::core::store::Store::open(&db).unwrap());
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO metric_samples VALUES ('airgap_jobs_synced_total', '', 'abc')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO metric_samples VALUES ('airgap_bundles_imported_total', '', 3)",
        [],
    )
    .unwrap();
    drop(conn);
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains("\nairgap_bundles_imported_total 3\n"), "{t}");
    assert!(t.contains("\nairgap_jobs_synced_total 0\n"), "{t}");
    assert!(
        t.starts_with(
            "# metric_samples row name \"airgap_jobs_synced_total\" labels \"\" left out: "
        ),
        "{t}"
    );
}

/// `airlock metrics --textfile DIR` writes `DIR/airlock.prom`, a name it chooses in a folder that
/// others (node_exporter's group) may write: a symbolic link planted there had the exposition
/// written through it, over whatever it named (as root, any file). The link is replaced now; the
/// file it named is untouched.
#[cfg(unix)]
#[test]
fn metrics_textfile_never_writes_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("airlock.db");
    drop(airlock::core::store::Store::open(&db).unwrap());
    let textfile = dir.path().join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let victim = dir.path().join("victim.conf");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, textfile.join("airlock.prom")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("--db")
        .arg(&db)
        .args(["metrics", "--textfile"])
        .arg(&textfile)
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env_remove("AIRLOCK_CONFIG")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    let written = textfile.join("airlock.prom");
    assert!(!std::fs::symlink_metadata(&written).unwrap().is_symlink());
    let t = std::fs::read_to_string(&written).unwrap();
    assert!(
        t.contains("# TYPE airgap_bundles_imported_total counter"),
        "{t}"
    );
}
