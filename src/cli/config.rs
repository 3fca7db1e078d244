//! `airlock config show`: the effective configuration and where each value came from.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::text::visible_path;
use clap::{Args, Subcommand};
use color_eyre::Result;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every key's effective value and its source (flag, environment, file line, default).
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Print JSON: {file, fileOrigin, fileFound, settings: [{key, value, source}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, cmd: ConfigCommand) -> Result<Exit> {
    match cmd {
        ConfigCommand::Show(a) => show(ctx, a),
    }
}

fn show(ctx: &Ctx, a: ShowArgs) -> Result<Exit> {
    let config = ctx.load_config_with_policy(Vec::new())?;
    if a.json {
        print_json(&config.to_json())?;
        return Ok(Exit::Ok);
    }
    let file = visible_path(&config.file);
    if config.file_found {
        println!("# file {file} ({})", config.file_origin);
    } else {
        println!(
            "# no file at {file} ({}); defaults apply",
            config.file_origin
        );
    }
    let width = config
        .settings()
        .iter()
        .map(|s| s.spec.key.len())
        .max()
        .unwrap_or(0);
    for s in config.settings() {
        let value = s
            .shown()
            .map(|v| v.display())
            .unwrap_or_else(|| "(unset)".into());
        println!(
            "{:<width$}  {}  # {}",
            s.spec.key,
            safe(&value),
            safe(&s.source.to_string())
        );
    }
    Ok(Exit::Ok)
}
