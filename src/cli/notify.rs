//! `airlock notify ...`: deliver export-ready notifications (webhooks, NATS), inspect the delivery
//! queue and the dead-letter queue, retry, export the DLQ, and check an event against its artifact.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::notify::check::{check_event, EVENT_LIMIT};
use crate::core::notify::deliver::{self, RunEvent, RunMode};
use crate::core::notify::event::event_value;
use crate::core::notify::settings::{NatsSettings, NotifySettings, WebhookSettings};
use crate::core::notify::store::{self as nstore, DamagedDelivery, DeliveryRow};
use crate::core::text::{hide_url_passwords, visible_path};
use crate::core::time::rfc3339_millis;
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::Read;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Deliver due notifications; without --once, wait for retries until nothing is pending.
    Run(RunArgs),
    /// List deliveries (per target: status, attempts, next attempt, last status and reason).
    List(ListArgs),
    /// List emissions (one per export_id and artifact_sha256) with their export.
    Emissions(JsonArg),
    /// Show one delivery: its attempts, reason, and the event body.
    Show(IdArgs),
    /// Put a dead-lettered delivery back in the queue (due now, a fresh retry schedule).
    Retry(IdArgs),
    /// Write the dead-letter queue as JSON for review.
    Export(ExportArgs),
    /// Receiver side: check an event's claims against the artifact file, offline.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Deliver what is due now and exit (do not wait for retries).
    #[arg(long)]
    pub once: bool,
    /// Webhook URL (repeatable; each needs a --webhook-secret-file, paired in order).
    #[arg(long = "webhook", value_name = "URL")]
    pub webhooks: Vec<String>,
    /// File holding the HMAC secret of the webhook at the same position.
    #[arg(long = "webhook-secret-file", value_name = "FILE")]
    pub secret_files: Vec<PathBuf>,
    /// PEM CA bundle trusted (alone) for an https:// webhook; repeatable, paired in order with the
    /// https:// --webhook URLs. Without it an https:// webhook is verified with the system roots.
    #[arg(long = "webhook-ca", value_name = "FILE")]
    pub ca_files: Vec<PathBuf>,
    /// NATS server URL (e.g. nats://127.0.0.1:4222); needs a JetStream stream on the subjects.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// Sends in flight at once, 1 to 1024 (default 32, or `notifications.maxInFlight`): the other
    /// due deliveries wait in the store and go out as sends finish.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u64>,
    /// Print a JSON summary at the end (the only thing on stdout; progress goes to stderr).
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// The settings these flags describe (the configuration file fills the same struct).
    pub fn settings(&self) -> Result<NotifySettings> {
        if self.webhooks.len() != self.secret_files.len() {
            return Err(eyre!(
                "{} --webhook URL(s) but {} --webhook-secret-file(s): give one secret file per webhook, in the same order",
                self.webhooks.len(),
                self.secret_files.len()
            ));
        }
        let https = self
            .webhooks
            .iter()
            .filter(|u| u.to_ascii_lowercase().starts_with("https://"))
            .count();
        if !self.ca_files.is_empty() && self.ca_files.len() != https {
            return Err(eyre!(
                "{} --webhook-ca file(s) but {https} https:// --webhook URL(s): give one CA bundle per https:// webhook, in the same order (or none: the system roots)",
                self.ca_files.len()
            ));
        }
        let mut cas = self.ca_files.iter();
        Ok(NotifySettings {
            webhooks: self
                .webhooks
                .iter()
                .zip(&self.secret_files)
                .map(|(url, f)| WebhookSettings {
                    url: url.clone(),
                    secret_file: f.clone(),
                    ca_file: if url.to_ascii_lowercase().starts_with("https://") {
                        cas.next().cloned()
                    } else {
                        None
                    },
                })
                .collect(),
            nats: self
                .nats
                .as_ref()
                .map(|url| NatsSettings { url: url.clone() }),
            max_in_flight: self.max_in_flight,
        })
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only deliveries with this status.
    #[arg(long, value_parser = ["pending", "delivered", "dead"])]
    pub status: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JsonArg {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// The delivery id (from `airlock notify list`).
    pub id: i64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Output file.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The event body as received (JSON).
    pub event: PathBuf,
    /// The artifact, export-portable-bundle-v1.tgz.
    #[arg(long)]
    pub artifact: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, cmd: NotifyCommand) -> Result<Exit> {
    match cmd {
        NotifyCommand::Run(a) => run_deliveries(ctx, a),
        NotifyCommand::List(a) => list(ctx, a),
        NotifyCommand::Emissions(a) => emissions(ctx, a),
        NotifyCommand::Show(a) => show(ctx, a),
        NotifyCommand::Retry(a) => retry(ctx, a),
        NotifyCommand::Export(a) => export_dlq(ctx, a),
        NotifyCommand::Check(a) => check(a),
    }
}

fn run_deliveries(ctx: &Ctx, a: RunArgs) -> Result<Exit> {
    let targets = with_configured_targets(ctx, a.settings()?)?.load()?;
    let store = ctx.open_existing_store()?;
    let mode = if a.once {
        RunMode::Once
    } else {
        RunMode::UntilIdle
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    // With --json, stdout carries only the summary object; the progress goes to stderr.
    let json = a.json;
    let mut print = |e: &RunEvent| {
        if json {
            eprintln!("{e}");
        } else {
            println!("{e}");
        }
    };
    let store = deliver::RunnerStore::new(store);
    let summary = rt.block_on(deliver::run(&store, &targets, mode, &mut print))?;
    if a.json {
        print_json(&summary)?;
    } else {
        // The clauses that only count something when it happened.
        let when = |n: usize, clause: String| if n > 0 { clause } else { String::new() };
        println!(
            "{} attempt(s): {} delivered, {} dead-lettered, {} dead letter(s) published{}; {} pending{}{}",
            summary.attempts,
            summary.delivered,
            summary.dead,
            summary.dead_letters_published,
            when(
                summary.superseded,
                format!(
                    ", {} not recorded (claim taken over by another runner after it expired; that runner's outcome stands)",
                    summary.superseded
                )
            ),
            summary.pending,
            when(
                summary.pending_elsewhere,
                format!(
                    " ({} more pending for targets not configured in this run)",
                    summary.pending_elsewhere
                )
            ),
            when(
                summary.damaged,
                format!(
                    "; {} damaged delivery row(s) skipped (see above; `airlock notify list` shows them)",
                    summary.damaged
                )
            ),
        );
    }
    // A damaged row is a notification that cannot go out until the operator repairs it: the run
    // fails (exit 1) as for a dead letter, though every other delivery went on.
    Ok(if summary.dead > 0 || summary.damaged > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn when(row: &DeliveryRow) -> String {
    match row.status.as_str() {
        "pending" => format!("next {}", rfc3339_millis(row.next_attempt_at)),
        _ => row
            .done_at
            .map(|t| format!("at {}", rfc3339_millis(t)))
            .unwrap_or_default(),
    }
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let nstore::DecodedDeliveries { rows, damaged } =
        nstore::deliveries_decoded(&store, a.status.as_deref())?;
    if a.json {
        // stdout keeps its shape (an array of deliveries); the damaged rows go to stderr.
        print_json(&rows)?;
        for d in &damaged {
            eprintln!("{}", damaged_line(d));
        }
        return Ok(damaged_exit(&damaged));
    }
    if rows.is_empty() && damaged.is_empty() {
        println!(
            "no deliveries{}",
            a.status
                .map(|s| format!(" with status {s}"))
                .unwrap_or_default()
        );
        return Ok(Exit::Ok);
    }
    if !rows.is_empty() {
        print_rows(&rows);
    }
    if !damaged.is_empty() {
        println!(
            "{} damaged delivery row(s), skipped by the runner until repaired (or the store restored from a backup):",
            damaged.len()
        );
        for d in &damaged {
            println!("{}", damaged_line(d));
        }
    }
    Ok(damaged_exit(&damaged))
}

fn print_rows(rows: &[DeliveryRow]) {
    println!(
        "{:>4} {:<9} {:<8} {:<36} {:>3} {:<30} {:>5} {:<12}",
        "ID", "STATUS", "TARGET", "EXPORT", "TRY", "WHEN", "LAST", "URL / REASON"
    );
    for r in rows {
        println!(
            "{:>4} {:<9} {:<8} {:<36} {:>3} {:<30} {:>5} {}{}",
            r.delivery_id,
            safe(&r.status),
            safe(&r.target_kind),
            safe(&r.export_id),
            r.attempts,
            when(r),
            r.last_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
            safe(&hide_url_passwords(&r.target)),
            r.last_reason
                .as_deref()
                .map(|x| format!("  ({})", safe(&hide_url_passwords(x))))
                .unwrap_or_default()
        );
    }
}

/// One damaged row: `DAMAGED delivery 7: notify_deliveries row delivery_id 7, next_attempt_at:
/// ...` (stored text made visible).
fn damaged_line(d: &DamagedDelivery) -> String {
    format!(
        "{:>4} DAMAGED   {}",
        d.delivery_id.map_or("?".to_string(), |id| id.to_string()),
        safe(&d.to_string())
    )
}

/// Exit 1 when a row could not be read: the listing is incomplete.
fn damaged_exit(damaged: &[DamagedDelivery]) -> Exit {
    if damaged.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

fn emissions(ctx: &Ctx, a: JsonArg) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let rows = nstore::emissions(&store)?;
    if a.json {
        print_json(&rows)?;
        return Ok(Exit::Ok);
    }
    if rows.is_empty() {
        println!(
            "no emissions yet: `airlock jobs export --portable -o DIR` emits one per new artifact"
        );
    }
    for m in &rows {
        println!(
            "emission {} at {}: export {} tenant {} bundle {} sha256 {} ({})",
            m.emission_id,
            m.created_at,
            safe(&m.export_id),
            safe(&m.tenant_id),
            safe(&m.bundle_id),
            safe(&m.artifact_sha256),
            safe(&m.file_path)
        );
    }
    Ok(Exit::Ok)
}

fn show(ctx: &Ctx, a: IdArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let row = nstore::delivery_by_id(&store, a.id)?
        .ok_or_else(|| eyre!("no delivery {}; `airlock notify list` shows the ids", a.id))?;
    let history = nstore::attempts(&store, a.id)?;
    if a.json {
        let event = event_value(&row.body);
        print_json(&serde_json::json!({ "delivery": row, "attempts": history, "event": event }))?;
        return Ok(Exit::Ok);
    }
    println!(
        "delivery {} ({} {}) of export {} for tenant {}: {}, {} attempt(s), {}",
        row.delivery_id,
        safe(&row.target_kind),
        safe(&hide_url_passwords(&row.target)),
        safe(&row.export_id),
        safe(&row.tenant_id),
        safe(&row.status),
        row.attempts,
        when(&row)
    );
    if let Some(r) = &row.last_reason {
        println!("  last reason: {}", safe(r));
    }
    for h in &history {
        println!(
            "  attempt {} at {}: {} {} {}",
            h.attempt,
            safe(&h.sent_at),
            safe(&h.outcome),
            h.status.map(|s| s.to_string()).unwrap_or_default(),
            safe(h.reason.as_deref().unwrap_or(""))
        );
    }
    println!("  event: {}", safe(&row.body));
    Ok(Exit::Ok)
}

fn retry(ctx: &Ctx, a: IdArgs) -> Result<Exit> {
    let store = ctx.open_existing_store()?;
    nstore::retry(&store, a.id, crate::core::hlc::unix_ms_now())?;
    println!(
        "delivery {} is pending again (due now); `airlock notify run` delivers it",
        a.id
    );
    Ok(Exit::Ok)
}

fn export_dlq(ctx: &Ctx, a: ExportArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let nstore::DecodedDeliveries {
        rows: dead,
        damaged,
    } = nstore::deliveries_decoded(&store, Some("dead"))?;
    let items: Vec<serde_json::Value> = dead
        .iter()
        .map(|d| {
            let event = event_value(&d.body);
            serde_json::json!({
                "deliveryId": d.delivery_id,
                "exportId": d.export_id,
                "tenantId": d.tenant_id,
                "targetKind": d.target_kind,
                "target": hide_url_passwords(&d.target),
                "reason": d.last_reason.as_deref().map(hide_url_passwords),
                "lastStatus": d.last_status,
                "attempts": d.attempts,
                "deadAt": d.done_at.map(rfc3339_millis),
                "event": event,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&serde_json::json!({ "deadLetters": items }))?;
    text.push('\n');
    crate::core::file_output::write_atomic(&a.output, text.as_bytes())?;
    println!(
        "{} dead letter(s) -> {}",
        items.len(),
        visible_path(&a.output)
    );
    // A dead row that cannot be read is left out of the file, and said.
    for d in &damaged {
        eprintln!(
            "delivery {} left out: its row cannot be read: {}",
            d.delivery_id.map_or("?".to_string(), |id| id.to_string()),
            safe(&d.to_string())
        );
    }
    Ok(damaged_exit(&damaged))
}

fn check(a: CheckArgs) -> Result<Exit> {
    let shown = visible_path(&a.event);
    let f = crate::core::file_input::open_regular(&a.event)
        .wrap_err_with(|| format!("opening the event file {shown}"))?;
    let mut bytes = Vec::new();
    f.take(EVENT_LIMIT as u64 + 1)
        .read_to_end(&mut bytes)
        .wrap_err_with(|| format!("reading {shown}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        eyre!(
            "{shown} is not UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let report = match check_event(&text, &a.artifact) {
        Ok(r) => r,
        Err(e) if e.is_unreadable_input() => return Err(eyre!("{}", safe(&e.to_string()))),
        Err(crate::core::notify::check::EventCheckError::Artifact(e)) => {
            println!("FAILED: the artifact is refused: {}", safe(&e.to_string()));
            return Ok(Exit::Failed);
        }
        Err(e) => return Err(eyre!("{shown}: {e}")),
    };
    if a.json {
        print_json(&report)?;
    } else {
        for c in &report.checks {
            if c.ok {
                println!("ok    {:<30} {}", c.field, safe(&c.actual));
            } else {
                println!(
                    "FAIL  {:<30} event says {}, artifact gives {}",
                    c.field,
                    safe(&c.actual),
                    safe(&c.expected)
                );
            }
        }
        println!(
            "{}: export {}",
            if report.ok { "OK" } else { "FAILED" },
            safe(&report.export_id)
        );
    }
    Ok(if report.ok { Exit::Ok } else { Exit::Failed })
}

/// Fills what the flags left out from the configuration file (`notifications.webhooks`,
/// `notifications.nats.url`): flags win per target kind, as everywhere (flag > env > file).
fn with_configured_targets(ctx: &Ctx, settings: NotifySettings) -> Result<NotifySettings> {
    let cfg = ctx.load_config(Vec::new())?;
    Ok(settings.or_configured(NotifySettings::from_config(&cfg)))
}
