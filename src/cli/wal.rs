//! `airlock wal ...`: inspect, recover, compact, append to and dump a node write-ahead log
//! (SPEC 11). Translation only: every rule is in `core::wal`.

use super::output::{human_bytes, print_json, safe};
use super::Exit;
use crate::core::ledger::AppendRequest;
use crate::core::text::visible_path as shown;
use crate::core::wal::inspect::{
    inspect, inspect_each_with, inspect_with, FrameView, InspectOptions, Inspection, LsnRange,
};
use crate::core::wal::{
    compact, recover_exclusive, CompactReport, EventType, FrameState, Outcome, Recovery,
    WalOptions, WalWriter, Watermark,
};
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum WalCommand {
    /// Show a WAL without changing it (safe while a writer runs): header, frames, LSN and HLC
    /// ranges, counts by type and state, watermarks, where recovery would stop and why.
    /// Exit 0 clean, 1 torn tail or refused, 2 usage or I/O error.
    Inspect(InspectArgs),
    /// Recover a WAL as opening it does: a torn tail is saved beside it (<log>.torn-at-OFFSET) and
    /// cut; damage followed by valid frames is refused (exit 1) and nothing is changed.
    Recover(FileArgs),
    /// Rewrite a WAL without the frames at or below its COMPACTED watermark (LSNs kept; temp file,
    /// fdatasync, rename, directory fsync). No writer may have the log open. A torn tail is cut
    /// and saved first, and reported as `wal recover` reports it.
    Compact(FileArgs),
    /// Append one event (for drills); waits until it is durable and prints its LSN and HLC. The
    /// event is validated as `ledger append` validates it (exit 2 and nothing written if refused).
    Append(AppendArgs),
    /// Record that every frame up to --lsn reached --state (a watermark frame; forward only).
    Advance(AdvanceArgs),
    /// Print every valid frame decoded (payload as JSON with --json).
    Dump(DumpArgs),
}

#[derive(Debug, Args)]
pub struct FileArgs {
    /// The WAL file.
    pub file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The WAL file.
    pub file: PathBuf,
    /// Print the SPEC 11 object (frames streamed) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only list frames with LSNs in this range: A..B (B excluded), A..=B, A.. or ..B.
    /// Without it, --json lists every frame and the text form lists none.
    #[arg(long, value_name = "A..B")]
    pub frames: Option<LsnRange>,
    /// The clock-skew warning's tolerance (a frame stamped further ahead of this machine's clock).
    #[command(flatten)]
    pub skew: super::SkewArgs,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The WAL file (created if missing; then --node is needed).
    pub file: PathBuf,
    /// Event type: JobCreated, JobAccepted, JobProgressReported, JobCancellationRequested,
    /// JobCancellationAcked, JobCompleted, JobFailed, JobTimedOut.
    #[arg(long = "type", value_name = "TYPE")]
    pub event_type: String,
    /// The event's seed fields as a JSON object, without "hlc" (the log assigns it); each key
    /// once.
    #[arg(long, value_name = "OBJECT")]
    pub json: String,
    /// The node that owns the log (default: the node named by the log's events).
    #[arg(long)]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct AdvanceArgs {
    /// The WAL file.
    pub file: PathBuf,
    /// REGIONAL, GLOBAL, APPLIED or COMPACTED.
    #[arg(long)]
    pub state: String,
    /// Every frame with an LSN up to this one reached the state.
    #[arg(long)]
    pub lsn: u64,
    /// The node that owns the log (default: the node named by the log's events).
    #[arg(long)]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The WAL file.
    pub file: PathBuf,
    /// Print the frames as a JSON array (payloads as JSON) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only frames with LSNs in this range (A..B, A..=B, A.., ..B).
    #[arg(long, value_name = "A..B")]
    pub frames: Option<LsnRange>,
}

pub fn run(ctx: &super::Ctx, cmd: WalCommand) -> Result<Exit> {
    match cmd {
        WalCommand::Inspect(a) => run_inspect(ctx, a),
        WalCommand::Recover(a) => run_recover(a),
        WalCommand::Compact(a) => run_compact(a),
        WalCommand::Append(a) => run_append(a),
        WalCommand::Advance(a) => run_advance(a),
        WalCommand::Dump(a) => run_dump(a),
    }
}

fn outcome_exit(outcome: &str) -> Exit {
    if outcome == Outcome::Clean.name() {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

fn run_inspect(ctx: &super::Ctx, a: InspectArgs) -> Result<Exit> {
    // The configured tolerance, as `jobs verify` and `jobs import` take it.
    let opts = InspectOptions::with_max_skew(ctx.max_clock_skew(&a.skew)?);
    let range = match (a.frames, a.json) {
        (Some(r), _) => r,
        (None, true) => LsnRange::ALL,
        (None, false) => LsnRange { start: 1, last: 0 },
    };
    if a.json {
        // Streamed: a log of millions of frames is never held in memory whole.
        let report = stream_json(
            &a.file,
            range,
            opts,
            |out, v, first| {
                write!(out, "{}  ", if first { "" } else { ",\n" })?;
                serde_json::to_writer(&mut *out, v).map_err(std::io::Error::other)
            },
            |report| {
                let mut rest = serde_json::to_value(report)?;
                if let Some(map) = rest.as_object_mut() {
                    map.remove("frames");
                }
                Ok(rest)
            },
        )?;
        return Ok(outcome_exit(report.outcome));
    }
    let report = inspect_with(&a.file, range, opts)
        .wrap_err_with(|| format!("reading {}", shown(&a.file)))?;
    print_inspection(&a.file, &report);
    Ok(outcome_exit(report.outcome))
}

/// Prints `{"frames": [...], <summary fields>}` with the frames written one by one as they are
/// read (`frame`), then the fields `summary` makes of the report.
fn stream_json(
    file: &Path,
    range: LsnRange,
    opts: InspectOptions,
    mut frame: impl FnMut(&mut dyn Write, &FrameView, bool) -> std::io::Result<()>,
    summary: impl FnOnce(&Inspection) -> Result<serde_json::Value>,
) -> Result<Inspection> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut first = true;
    let mut failed: Option<std::io::Error> = None;
    // The object opens with the first frame (or once the log is read): a log that cannot be
    // opened prints no half an object, only the error.
    let open = |out: &mut dyn Write| writeln!(out, "{{\"frames\": [");
    let report = inspect_each_with(file, range, opts, |v| {
        if failed.is_none() {
            let opened = if first { open(&mut out) } else { Ok(()) };
            failed = opened.and_then(|()| frame(&mut out, &v, first)).err();
            first = false;
        }
    })
    .wrap_err_with(|| format!("reading {}", shown(file)))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if first {
        open(&mut out)?;
    }
    // Close the array and add the summary fields to the same object.
    write!(out, "\n]")?;
    if let Some(fields) = summary(&report)?.as_object() {
        for (key, value) in fields {
            write!(out, ", {}: {}", serde_json::to_string(key)?, value)?;
        }
    }
    writeln!(out, "}}")?;
    out.flush()?;
    Ok(report)
}

fn counts(map: &std::collections::BTreeMap<&'static str, u64>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn print_inspection(path: &Path, r: &Inspection) {
    let text = |o: &Option<String>| o.as_deref().map(safe).unwrap_or("-".into()).into_owned();
    println!(
        "file         {} ({})",
        shown(path),
        human_bytes(r.file_size)
    );
    match &r.header {
        Some(h) => println!("header       {} version {}", h.magic, h.version),
        None => println!("header       not a WAL header"),
    }
    println!(
        "node         {} (hash {})",
        text(&r.node),
        text(&r.node_hash)
    );
    let lsn = |l: Option<u64>| l.map_or("-".into(), |v| v.to_string());
    println!(
        "frames       {} valid, LSN {}..{}, HLC {} .. {}",
        r.valid_frames,
        lsn(r.first_lsn),
        lsn(r.last_lsn),
        text(&r.first_hlc),
        text(&r.last_hlc)
    );
    println!("by type      {}", counts(&r.counts_by_type));
    println!("by state     {} (as written)", counts(&r.counts_by_state));
    println!("current      {}", counts(&r.counts_by_current_state));
    let marks: Vec<String> = FrameState::ALL[1..]
        .iter()
        .filter_map(|s| r.watermarks.get(s.name()).map(|l| format!("{s} <= {l}")))
        .collect();
    println!("watermarks   {}", marks.join(", "));
    println!(
        "recovery     {} at offset {}: {}",
        r.outcome,
        r.stop.offset,
        safe(&r.stop.reason)
    );
    println!("             {}", r.stop.action);
    // Content checks (bad watermark frames, HLC order, clock skew): core::wal::inspect.
    for line in r.problem_lines() {
        println!("{}", safe(&line));
    }
    if !r.frames.is_empty() {
        println!(
            "\n{:>8} {:>10} {:>6}  {:<32} {:<26} {:<9} CURRENT",
            "LSN", "OFFSET", "LEN", "HLC", "TYPE", "STATE"
        );
        for f in &r.frames {
            print_frame_row(f);
        }
    }
}

fn print_frame_row(f: &FrameView) {
    println!(
        "{:>8} {:>10} {:>6}  {:<32} {:<26} {:<9} {}",
        f.lsn,
        f.offset,
        f.length,
        safe(&f.hlc),
        f.frame_type,
        f.state,
        f.current_state.unwrap_or("-")
    );
}

fn run_recover(a: FileArgs) -> Result<Exit> {
    let r = match recover_exclusive(&a.file) {
        Ok(r) => r,
        Err(e @ crate::core::wal::WalError::Refused { .. }) => {
            if a.json {
                // The same object as for the other outcomes, read again without changing it.
                let r = crate::core::wal::recovery::examine(&a.file)?;
                print_json(&recovery_json(&r))?;
            }
            eprintln!("error: {}", safe(&e.to_string()));
            return Ok(Exit::Failed);
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        print_json(&recovery_json(&r))?;
    } else if let Some(line) = torn_tail_line(&a.file, &r) {
        println!("{line}");
    } else {
        println!(
            "{}: clean ({} valid frames, ends at offset {}{}); nothing changed",
            shown(&a.file),
            r.valid_frames,
            r.end,
            if r.zero_tail {
                ", preallocated zeros follow"
            } else {
                ""
            }
        );
    }
    Ok(Exit::Ok)
}

/// What a recovery did, as `wal recover --json` prints it (`wal compact` and `ledger compact`
/// include it as `recovery`).
pub(super) fn recovery_json(r: &Recovery) -> serde_json::Value {
    serde_json::json!({
        "outcome": r.outcome.name(),
        "offset": r.offset,
        "validFrames": r.valid_frames,
        "cutBytes": r.cut_bytes,
        "savedTail": r.saved_tail.as_ref().map(|p| shown(p)),
        "lastLsn": r.last_lsn,
        // Why recovery stops; a clean log's end (its zero tail) is no damage.
        "reason": r.damage.as_ref().filter(|_| r.outcome != Outcome::Clean).map(|d| d.to_string()),
        "nextValidFrame": r.next_valid_frame,
        "changed": r.saved_tail.is_some(),
    })
}

/// The line saying that recovery cut a torn tail from `file` and where it saved it (None when it
/// cut nothing).
pub(super) fn torn_tail_line(file: &Path, r: &Recovery) -> Option<String> {
    (r.outcome == Outcome::TornTail).then(|| {
        cut_line(
            file,
            r.cut_bytes.unwrap_or(0),
            r.end,
            r.saved_tail.as_deref(),
            r.valid_frames,
        )
    })
}

/// The line saying that recovery cut `cut_bytes` at `offset` from `file` and saved them as
/// `saved`.
pub(super) fn cut_line(
    file: &Path,
    cut_bytes: u64,
    offset: u64,
    saved: Option<&Path>,
    valid_frames: u64,
) -> String {
    format!(
        "{}: cut a torn tail of {cut_bytes} bytes at offset {offset}; saved it as {}; {valid_frames} valid frames kept",
        shown(file),
        saved.map_or("-".into(), shown),
    )
}

/// `wal compact --json` / `ledger compact --json`: the report plus what recovery did first.
pub(super) fn compact_json(r: &CompactReport) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(r)?;
    v["recovery"] = r
        .recovery
        .as_ref()
        .map_or(serde_json::Value::Null, recovery_json);
    Ok(v)
}

fn run_compact(a: FileArgs) -> Result<Exit> {
    let r = compact(&a.file)?;
    if a.json {
        print_json(&compact_json(&r)?)?;
    } else {
        if let Some(line) = r
            .recovery
            .as_ref()
            .and_then(|rec| torn_tail_line(&a.file, rec))
        {
            println!("{line}");
        }
        println!(
            "{}: compacted up to LSN {}: {} -> {} frames, {} -> {}; first LSN now {}",
            shown(&a.file),
            r.compacted_lsn,
            r.frames_before,
            r.frames_after,
            human_bytes(r.bytes_before),
            human_bytes(r.bytes_after),
            r.first_lsn_after.map_or("-".into(), |l| l.to_string())
        );
    }
    Ok(Exit::Ok)
}

/// The node: `--node`, else the one the log's events name.
fn node_for(file: &Path, node: Option<String>) -> Result<String> {
    if let Some(n) = node {
        return Ok(n);
    }
    if file.exists() {
        let r = inspect(file, LsnRange { start: 1, last: 0 })?;
        if let Some(n) = r.node {
            return Ok(n);
        }
    }
    Err(eyre!(
        "{}: no event names this log's node yet; give --node",
        shown(file)
    ))
}

fn open_writer(file: &Path, node: Option<String>) -> Result<WalWriter> {
    let node = node_for(file, node)?;
    let w = WalWriter::open(file, &node, WalOptions::default())?;
    if let Some(line) = torn_tail_line(file, w.recovery()) {
        eprintln!("note: {line}");
    }
    Ok(w)
}

fn run_append(a: AppendArgs) -> Result<Exit> {
    let t = EventType::ALL
        .into_iter()
        .find(|t| t.name() == a.event_type)
        .ok_or_else(|| {
            eyre!(
                "--type {:?} is not an event type; use one of {}",
                safe(&a.event_type),
                EventType::ALL
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    // The ledger's own validation (what `ledger fold` accepts), before the log is opened: a refused
    // event writes nothing, and whatever is written folds.
    let req = AppendRequest::from_fields_json(t, &a.json)?;
    let node = node_for(&a.file, a.node)?;
    let body = req.event_body(&node)?;
    let w = open_writer(&a.file, Some(node))?;
    let done = w.append(body)?;
    println!(
        "lsn {} hlc {}",
        done.lsn,
        safe(&done.hlc.text(Some(w.node())))
    );
    w.close()?;
    Ok(Exit::Ok)
}

fn run_advance(a: AdvanceArgs) -> Result<Exit> {
    let state = FrameState::from_name(&a.state).ok_or_else(|| {
        eyre!(
            "--state {:?}: use REGIONAL, GLOBAL, APPLIED or COMPACTED",
            safe(&a.state)
        )
    })?;
    // Watermarks advance a log that is there: a mistyped path is not a new log with a header.
    if !a.file.try_exists().unwrap_or(true) {
        return Err(eyre!(
            "no WAL at {}: nothing was made. Check the path (watermarks advance an existing log; `airlock wal append` starts a new one)",
            shown(&a.file)
        ));
    }
    let w = open_writer(&a.file, a.node)?;
    let done = w.advance(Watermark { state, lsn: a.lsn })?;
    println!(
        "lsn {} hlc {}: {} up to LSN {}",
        done.lsn,
        safe(&done.hlc.text(Some(w.node()))),
        state,
        a.lsn
    );
    w.close()?;
    Ok(Exit::Ok)
}

fn run_dump(a: DumpArgs) -> Result<Exit> {
    let range = a.frames.unwrap_or(LsnRange::ALL);
    // Dump prints no clock-skew warning, so the tolerance does not matter.
    let opts = InspectOptions::default();
    if a.json {
        let report = stream_json(&a.file, range, opts, write_json_frame, |r| {
            Ok(serde_json::json!({"outcome": r.outcome, "offset": r.offset,
                "validFrames": r.valid_frames, "node": r.node}))
        })?;
        return Ok(outcome_exit(report.outcome));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failed: Option<std::io::Error> = None;
    let report = inspect_each_with(&a.file, range, opts, |v| {
        if failed.is_none() {
            failed = writeln!(out, "{}", dump_line(&v)).err();
        }
    })
    .wrap_err_with(|| format!("reading {}", shown(&a.file)))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    writeln!(
        out,
        "# {} valid frames; recovery: {} at offset {}",
        report.valid_frames, report.outcome, report.stop.offset
    )?;
    out.flush()?;
    Ok(outcome_exit(report.outcome))
}

/// A frame with its payload parsed as JSON (payloads that are not JSON stay text).
fn write_json_frame(out: &mut dyn Write, v: &FrameView, first: bool) -> std::io::Result<()> {
    let mut value = serde_json::to_value(v).map_err(std::io::Error::other)?;
    if let Some(p) = v.payload.as_deref() {
        if let Ok(parsed) = serde_json::from_str::<serde_json::Value>(p) {
            value["payload"] = parsed;
        }
    }
    let text = serde_json::to_string(&value).map_err(std::io::Error::other)?;
    write!(out, "{}  {text}", if first { "" } else { ",\n" })
}

fn dump_line(v: &FrameView) -> String {
    safe(&v.one_line()).into_owned()
}
