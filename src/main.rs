use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let _ = color_eyre::config::HookBuilder::default()
        .display_env_section(false)
        .install();
    let cli = airlock::cli::Cli::parse();
    match airlock::cli::run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            // Print the chain once: skip causes whose text the message already contains.
            let mut msg = String::new();
            for cause in e.chain() {
                let text = cause.to_string();
                if !msg.contains(&text) {
                    if !msg.is_empty() {
                        msg.push_str(": ");
                    }
                    msg.push_str(&text);
                }
            }
            eprintln!("error: {}", airlock::text::visible(&msg));
            ExitCode::from(airlock::cli::Exit::Usage as u8)
        }
    }
}
