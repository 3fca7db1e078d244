//! Reading the command line. Clap names only the flag when a value it cannot take came from the
//! flag's environment variable (`invalid value 'soon' for '--peer-timeout <SECS>'` when the operator
//! typed no such flag); the error then also names the variable.

use super::Cli;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};
use std::ffi::OsString;

/// The parsed command line; on a usage error prints clap's message (with the variable named, see
/// the module) and exits 2.
pub fn parse_args() -> Cli {
    let args: Vec<OsString> = std::env::args_os().collect();
    Cli::try_parse_from(&args)
        .unwrap_or_else(|e| name_environment_source(values_made_visible(e), &args).exit())
}

/// The error with every value it quotes from the command line or the environment (an unknown
/// subcommand or argument, a rejected value) shown with its control characters made visible
/// (`\x1b`, `\n`, ...): clap prints them as they came, and on a terminal an escape sequence in a
/// mistyped argument would move the cursor, clear the screen or set the window title.
fn values_made_visible(mut e: clap::Error) -> clap::Error {
    use crate::core::text::visible;
    let changed: Vec<(ContextKind, ContextValue)> = e
        .context()
        .filter_map(|(kind, value)| match value {
            ContextValue::String(s) if visible(s) != s.as_str() => {
                Some((kind, ContextValue::String(visible(s).into_owned())))
            }
            ContextValue::Strings(v) if v.iter().any(|s| visible(s) != s.as_str()) => Some((
                kind,
                ContextValue::Strings(v.iter().map(|s| visible(s).into_owned()).collect()),
            )),
            _ => None,
        })
        .collect();
    for (kind, value) in changed {
        e.insert(kind, value);
    }
    e
}

/// Adds a tip naming the environment variable a rejected value came from: the flag's variable is
/// set and the flag is not on the command line.
fn name_environment_source(mut e: clap::Error, args: &[OsString]) -> clap::Error {
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let Some(long) = arg
        .split_whitespace()
        .next()
        .and_then(|f| f.strip_prefix("--"))
    else {
        return e;
    };
    let typed = args.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        a == format!("--{long}") || a.starts_with(&format!("--{long}="))
    });
    if typed {
        return e;
    }
    let Some(var) = env_of(&Cli::command(), long) else {
        return e;
    };
    let tip = format!(
        "the value came from the environment variable {var}: correct or unset it, or pass --{long}"
    );
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    e
}

/// The environment variable of the flag `--long` that is set now, in `cmd` or any subcommand.
fn env_of(cmd: &clap::Command, long: &str) -> Option<String> {
    let here = cmd.get_arguments().find_map(|a| {
        let var = a.get_env()?;
        (a.get_long() == Some(long) && std::env::var_os(var).is_some())
            .then(|| var.to_string_lossy().into_owned())
    });
    here.or_else(|| cmd.get_subcommands().find_map(|c| env_of(c, long)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_for(args: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let e = Cli::try_parse_from(&args).expect_err("a usage error");
        name_environment_source(e, &args).to_string()
    }

    #[test]
    fn a_bad_value_from_the_environment_names_the_variable_and_a_typed_one_does_not() {
        // One test owns the variable (tests in this binary run on threads of one process).
        std::env::set_var("AIRLOCK_PEER_TIMEOUT", "soon");
        let from_env = error_for(&["airlock", "ledger", "diff", "a.alwl", "--peer", "http://x"]);
        let typed = error_for(&[
            "airlock",
            "ledger",
            "diff",
            "a.alwl",
            "--peer",
            "http://x",
            "--peer-timeout=later",
        ]);
        std::env::remove_var("AIRLOCK_PEER_TIMEOUT");
        assert!(
            from_env.contains("invalid value 'soon'")
                && from_env.contains("environment variable AIRLOCK_PEER_TIMEOUT"),
            "{from_env}"
        );
        assert!(typed.contains("invalid value 'later'"), "{typed}");
        assert!(!typed.contains("environment variable"), "{typed}");
    }
}
