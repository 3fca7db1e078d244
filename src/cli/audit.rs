//! `airlock audit`: the store's hash-chained audit log of operator changes.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::audit;
use clap::{Args, Subcommand};
use color_eyre::Result;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The newest records, newest first: time, operator, action, inputs.
    List(ListArgs),
    /// Check the hash chain of every record (exit 1 when it is broken).
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// How many records (1 or more).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, cmd: AuditCommand) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    match cmd {
        AuditCommand::List(a) => {
            let records = audit::recent(&store, a.limit)?;
            if a.json {
                print_json(&records)?;
                return Ok(Exit::Ok);
            }
            if records.is_empty() {
                println!("the audit log is empty");
            }
            for r in &records {
                println!(
                    "#{:<6} {}  {:<12} {:<13} {}",
                    r.seq,
                    safe(&r.at),
                    safe(&r.operator),
                    safe(&r.action),
                    safe(&r.inputs.to_string())
                );
            }
            Ok(Exit::Ok)
        }
        AuditCommand::Verify(a) => {
            let v = audit::verify(&store)?;
            if a.json {
                print_json(&v)?;
            } else if let Some(b) = &v.first_break {
                println!(
                    "BROKEN: audit record {} of {}: {}",
                    b.seq,
                    v.records,
                    safe(&b.reason)
                );
            } else {
                println!(
                    "OK: {} audit record(s) chain{}",
                    v.records,
                    v.head
                        .as_deref()
                        .map(|h| format!(", head {h}"))
                        .unwrap_or_default()
                );
            }
            Ok(if v.ok { Exit::Ok } else { Exit::Failed })
        }
    }
}
