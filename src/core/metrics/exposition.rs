//! The Prometheus text exposition format (version 0.0.4) of the persisted metrics, for `/metrics`
//! and for node_exporter's textfile collector (`airlock metrics --textfile DIR`).
//!
//! Storage layout of `metric_samples(name, labels, value)`: a counter's row has its label text
//! (`type="payload_mismatch"`, or empty); a histogram has one row per cumulative bucket
//! (`le="1024"`, `le="+Inf"`) and the rows `sum` and `count`.

use super::{label_text, MetricKind, MetricsError, CATALOG, CONFLICT_PAYLOAD_MISMATCH};
use super::{MAX_CLOCK_SKEW, MERGE_CONFLICTS, PHYSICAL_OFFSET};
use super::{SERVE_JOB_FAILURES, SERVE_JOB_RUNS, WAL_RECOVERIES};
use crate::core::store::backend::{Backend, TxKind};
use std::collections::HashMap;
use std::fmt::Write;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Values computed at exposition time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// [`physical_offset_seconds`].
    pub physical_offset_seconds: f64,
    /// The configured tolerance, when known.
    pub max_clock_skew_seconds: Option<f64>,
    /// Samples of metrics computed from other tables (the notification queue): (metric, label
    /// text, value). A catalogue metric named here is rendered from these samples only.
    pub computed: Vec<(&'static str, String, f64)>,
}

/// How far the store's HLC (the largest persisted timestamp) is ahead of the wall clock `now_ms`,
/// in seconds; 0 when it is not ahead.
pub fn physical_offset_seconds(store: &dyn Backend, now_ms: u64) -> Result<f64, MetricsError> {
    let last = store.begin(TxKind::Read)?.load_clock_state()?;
    let ahead = last.map(|(p, _)| p.saturating_sub(now_ms)).unwrap_or(0);
    Ok(ahead as f64 / 1000.0)
}

/// A sample value: integers without a fraction, `+Inf` for infinity.
pub fn number(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The label sets a labelled counter is rendered with: those counted, plus the ones known before
/// anything happened, at 0, so that a first failure is an increase from 0 that `increase()` and
/// the alert rules see, never a series that appears at 1: the conflict type, both WAL recovery
/// outcomes, and a failure series for every serve job that has run.
fn label_sets(name: &str, labelled: &HashMap<String, Vec<String>>) -> Vec<String> {
    let mut sets = labelled.get(name).cloned().unwrap_or_default();
    let known: Vec<String> = match name {
        MERGE_CONFLICTS => vec![label_text(&[("type", CONFLICT_PAYLOAD_MISMATCH)])],
        WAL_RECOVERIES => ["clean", "torn-tail"]
            .iter()
            .map(|o| label_text(&[("outcome", o)]))
            .collect(),
        SERVE_JOB_FAILURES => labelled.get(SERVE_JOB_RUNS).cloned().unwrap_or_default(),
        _ => Vec::new(),
    };
    for k in known {
        if !sets.contains(&k) {
            sets.push(k);
        }
    }
    sets.sort();
    sets
}

/// Renders every metric of the catalogue: HELP, TYPE and samples (zero where nothing was counted).
pub fn render(store: &dyn Backend, gauges: Gauges) -> Result<String, MetricsError> {
    let mut stored: HashMap<(String, String), f64> = HashMap::new();
    let mut labelled: HashMap<String, Vec<String>> = HashMap::new();
    let samples = super::samples(store)?;
    for (name, labels, value) in samples.rows {
        if !labels.is_empty() && !labels.starts_with("le=") && labels != "sum" && labels != "count"
        {
            labelled
                .entry(name.clone())
                .or_default()
                .push(labels.clone());
        }
        stored.insert((name, labels), value);
    }
    let get = |name: &str, labels: &str| {
        stored
            .get(&(name.to_string(), labels.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    let mut out = String::new();
    // A damaged row is named in a comment (the format ignores it) and in the log, not a failure.
    for d in &samples.damaged {
        tracing::warn!("{d}");
        let _ = writeln!(out, "# {d}");
    }
    for spec in CATALOG {
        let kind = match spec.kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram(_) => "histogram",
        };
        let gauge = match spec.name {
            PHYSICAL_OFFSET => Some(gauges.physical_offset_seconds),
            MAX_CLOCK_SKEW => gauges.max_clock_skew_seconds,
            _ => None,
        };
        let computed: Vec<&(&'static str, String, f64)> = gauges
            .computed
            .iter()
            .filter(|c| c.0 == spec.name)
            .collect();
        if spec.kind == MetricKind::Gauge && gauge.is_none() && computed.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", spec.name, spec.help);
        let _ = writeln!(out, "# TYPE {} {kind}", spec.name);
        if !computed.is_empty() {
            for (name, labels, value) in computed {
                let labels = if labels.is_empty() {
                    String::new()
                } else {
                    format!("{{{labels}}}")
                };
                let _ = writeln!(out, "{name}{labels} {}", number(*value));
            }
            continue;
        }
        match spec.kind {
            MetricKind::Gauge => {
                let _ = writeln!(out, "{} {}", spec.name, number(gauge.unwrap_or(0.0)));
            }
            MetricKind::Counter if spec.labels.is_empty() => {
                let _ = writeln!(out, "{} {}", spec.name, number(get(spec.name, "")));
            }
            MetricKind::Counter => {
                for labels in label_sets(spec.name, &labelled) {
                    let _ = writeln!(
                        out,
                        "{}{{{labels}}} {}",
                        spec.name,
                        number(get(spec.name, &labels))
                    );
                }
            }
            MetricKind::Histogram(bounds) => {
                let les = bounds
                    .iter()
                    .map(|b| number(*b))
                    .chain(["+Inf".to_string()]);
                for le in les {
                    let labels = label_text(&[("le", &le)]);
                    let _ = writeln!(
                        out,
                        "{}_bucket{{{labels}}} {}",
                        spec.name,
                        number(get(spec.name, &labels))
                    );
                }
                let _ = writeln!(out, "{}_sum {}", spec.name, number(get(spec.name, "sum")));
                let _ = writeln!(
                    out,
                    "{}_count {}",
                    spec.name,
                    number(get(spec.name, "count"))
                );
            }
        }
    }
    Ok(out)
}
