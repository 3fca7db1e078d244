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
    let ws = airlock::cli::demo::build_workspace(&tmp.path().join("demo")).unwrap();
    let trust = TrustStore::open(&ws.trust_store).unwrap().trust_set();
    let mut c = Console::with_trust(&ws.bundles, Theme::default(), false, trust);
    assert_eq!(c.app.bundles.rows.len(), 7);
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
