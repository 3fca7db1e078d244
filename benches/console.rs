//! Console benchmark: a 1,000,000-entry bundle in the chain view.
//!
//! `cargo bench --bench console` (optionally `-- ENTRIES`). Measures, and prints:
//! - time from "open" to the first frame (the index runs in the background),
//! - time until the index + verification pass is complete,
//! - one frame of the chain view: while paging through unread rows and on a redraw,
//! - peak resident memory against the file size.
//!
//! Figures are recorded in docs/benchmarks/console.md; nothing here asserts a time.

use airlock::core::bundle::synth::{write_synthetic_bundle, SynthSpec};
use airlock::tui::app::{settle, App, ConsoleConfig};
use airlock::tui::tasks::Tasks;
use airlock::tui::theme::Theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::{Duration, Instant};

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let entries: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let nodes = 4;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.json");
    let t = Instant::now();
    let spec = SynthSpec {
        tenant: "acme".into(),
        nodes,
        entries_per_node: entries / nodes,
        start_ms: 1_767_600_000_000,
        seed: 1,
    };
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    write_synthetic_bundle(&spec, file).expect("write bundle");
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "bundle: {} entries in {} node logs, {:.1} MiB, written in {:.1} s",
        entries,
        nodes,
        size as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    // Reset the peak-RSS mark so it measures the console, not the generator.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_before = status_kib("VmRSS:");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tasks, mut inbox) = Tasks::new(rt.handle().clone());
    let config = ConsoleConfig {
        dir: dir.path().to_path_buf(),
        db: None,
        outbox: None,
        read_only: true,
        read_only_because: None,
        mouse: false,
        keys_dir: dir.path().join("keys"),
        trust_store: dir.path().join("trust.json"),
        upstream: "http://127.0.0.1:9".into(),
        wal: None,
        max_clock_skew: airlock::core::hlc::DEFAULT_MAX_CLOCK_SKEW,
    };
    let mut app = App::new(
        config,
        Theme::default(),
        tasks,
        std::sync::Arc::new(airlock::core::trust::TrustSet::empty()),
    );
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();

    // Open: the first frame (with indexing progress) is drawn while the index runs.
    let t = Instant::now();
    app.open_chain(path.clone());
    term.draw(|f| app.draw(f)).unwrap();
    let first_frame = t.elapsed();
    settle(&mut app, &mut inbox);
    let indexed = t.elapsed();
    term.draw(|f| app.draw(f)).unwrap();
    let first_rows = t.elapsed();
    let index = app.chain.index().expect("indexed");
    assert_eq!(index.entry_count(), entries / nodes * nodes);
    println!(
        "open -> first frame (indexing progress): {:.2} ms",
        first_frame.as_secs_f64() * 1e3
    );
    println!(
        "open -> index + verification complete:   {:.0} ms",
        indexed.as_secs_f64() * 1e3
    );
    println!(
        "open -> first frame with rows:           {:.0} ms",
        first_rows.as_secs_f64() * 1e3
    );

    // Frames while paging through rows never read before (each frame reads its rows from disk).
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
    app.handle_key(key(KeyCode::Char('l')));
    let mut paging = Vec::new();
    for _ in 0..300 {
        app.handle_key(key(KeyCode::PageDown));
        let t = Instant::now();
        term.draw(|f| app.draw(f)).unwrap();
        paging.push(t.elapsed());
    }
    // Jumps far away (cold rows at random places).
    let mut jumps = Vec::new();
    for i in 0..100u64 {
        let target = (i.wrapping_mul(2_654_435_761) % (entries as u64 / nodes as u64)) as isize;
        let delta = target - app.chain.selected as isize;
        app.chain.move_by(delta);
        let t = Instant::now();
        term.draw(|f| app.draw(f)).unwrap();
        jumps.push(t.elapsed());
    }
    // Redraws of the same position (rows cached).
    let mut steady = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        term.draw(|f| app.draw(f)).unwrap();
        steady.push(t.elapsed());
    }
    for (name, v) in [
        ("frame, paging (cold rows)", &mut paging),
        ("frame, random jump (cold rows)", &mut jumps),
        ("frame, redraw (cached rows)", &mut steady),
    ] {
        v.sort();
        let mean = v.iter().sum::<Duration>() / v.len() as u32;
        println!(
            "{name:<32} mean {:.3} ms  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            mean.as_secs_f64() * 1e3,
            percentile(v, 0.5).as_secs_f64() * 1e3,
            percentile(v, 0.99).as_secs_f64() * 1e3,
            v.last().unwrap().as_secs_f64() * 1e3
        );
    }
    let hwm = status_kib("VmHWM:");
    let rss = status_kib("VmRSS:");
    println!(
        "memory: peak RSS {:.1} MiB, RSS {:.1} MiB (before opening {:.1} MiB) = {:.2}x the file size ({:.1} MiB)",
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        hwm as f64 * 1024.0 / size as f64,
        size as f64 / 1048576.0
    );
}
