//! `airlock dev wal-crash-drill`: start `airlock dev wal-drill` (this same binary) again and again,
//! SIGKILL it at a random moment each time, and check the log after every kill with
//! `core::wal::drill::check_round`: every acknowledged append present with its exact bytes, no
//! gap, recovery not refusing. Process handling only; the checks are the engine's.

use super::output::print_json;
use super::Exit;
use crate::core::wal::drill::{check_round, DrillAck};
use clap::Args;
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use rand_core::{OsRng, RngCore};
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct WalCrashDrillArgs {
    #[arg(long, default_value_t = 8)]
    pub appenders: usize,
    #[arg(long, default_value_t = 100)]
    pub rounds: usize,
    /// Kill at a random moment up to this many milliseconds after the first acknowledgement.
    #[arg(long, default_value_t = 40)]
    pub max_wait_ms: u64,
    /// Directory for the drill logs (default: a fresh temporary directory, removed after).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// The drill's figures (`--json`).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrashDrillReport {
    pub appenders: usize,
    pub rounds: usize,
    /// Acknowledged appends checked after the kills, in all.
    pub acked: usize,
    /// Rounds in which recovery found a torn tail to cut.
    pub torn_tails: usize,
    pub seconds: f64,
    /// What was lost or changed (empty when the drill passed).
    pub problems: Vec<String>,
}

/// A fresh log every 5 rounds keeps the files small; within one, each kill is recovered by the
/// next round's open.
const ROUNDS_PER_LOG: usize = 5;

pub fn crash_drill(a: WalCrashDrillArgs) -> Result<Exit> {
    if a.appenders == 0 || a.rounds == 0 {
        return Err(eyre!("--appenders and --rounds must be at least 1"));
    }
    let exe = std::env::current_exe().wrap_err("finding this program to start the drill")?;
    let scratch = match &a.dir {
        Some(_) => None,
        None => Some(tempfile::tempdir().wrap_err("making a temporary directory")?),
    };
    let dir = a
        .dir
        .clone()
        .or_else(|| scratch.as_ref().map(|d| d.path().to_path_buf()))
        .ok_or_else(|| eyre!("no directory for the drill logs"))?;
    let mut report = CrashDrillReport {
        appenders: a.appenders,
        rounds: a.rounds,
        ..CrashDrillReport::default()
    };
    let started = Instant::now();
    for round in 0..a.rounds {
        let log = dir.join(format!("crash-drill-{}.alwl", round / ROUNDS_PER_LOG));
        let wait = Duration::from_millis(random_wait_ms(a.max_wait_ms));
        let acks = run_and_kill(&exe, &log, a.appenders, wait)?;
        let check = check_round(&log, &acks)?;
        report.acked += check.acked;
        report.torn_tails += usize::from(check.torn_tail);
        for p in check.problems {
            report.problems.push(format!("round {}: {p}", round + 1));
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    if a.json {
        print_json(&report)?;
    } else {
        println!(
            "{} rounds with {} appenders in {:.1} s: {} acknowledged appends checked after the kills, {} torn tails cut, {} problems",
            report.rounds, report.appenders, report.seconds, report.acked, report.torn_tails,
            report.problems.len()
        );
        for p in &report.problems {
            println!("  {p}");
        }
    }
    Ok(if report.problems.is_empty() && report.acked > 0 {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

/// Starts a drill on `log`, kills it with SIGKILL `wait` after its first acknowledgement (or
/// after 20 s without one) and returns the acknowledgements it printed.
fn run_and_kill(exe: &Path, log: &Path, appenders: usize, wait: Duration) -> Result<Vec<DrillAck>> {
    let mut child = Command::new(exe)
        .args(["dev", "wal-drill", "--appenders", &appenders.to_string()])
        .arg("--file")
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .wrap_err("starting the drill process")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| eyre!("the drill process has no output pipe"))?;
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = DrillAck::parse_line(&line) {
                let _ = first_tx.send(());
                acks.push(ack);
            }
        }
        acks
    });
    let _ = first_rx.recv_timeout(Duration::from_secs(20));
    std::thread::sleep(wait);
    // SAFETY: signalling our own child by its pid; kill has no memory effects.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    reader
        .join()
        .map_err(|_| eyre!("the drill's output reader panicked"))
}

/// A uniformly chosen wait in `0..=max` milliseconds from the OS generator.
fn random_wait_ms(max: u64) -> u64 {
    let r = OsRng.next_u64();
    match max.checked_add(1) {
        Some(m) => r % m,
        None => r,
    }
}
