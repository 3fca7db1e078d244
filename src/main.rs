use std::process::ExitCode;

fn main() -> ExitCode {
    // An error exit prints its cause chain; its backtrace only when RUST_LIB_BACKTRACE asks for one.
    // RUST_BACKTRACE alone (panics) must not make every error capture one that is never shown
    // (seconds and ~90 MB resolving symbols). Set before any thread starts.
    let print_backtrace = lib_backtrace_requested();
    if !print_backtrace {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    // A write past the file-size limit (ulimit -f) is an EFBIG I/O error with a message, not a
    // silent kill by SIGXFSZ.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to "ignore" before any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    // An import keeps every input open: use the open-file limit the system allows, not the
    // shell's default soft limit (`core::fd_limit`).
    let _ = airlock::core::fd_limit::raise_open_file_limit();
    // Colour only on a terminal: a panic report in a service's log file holds no escape codes.
    let theme = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        color_eyre::config::Theme::dark()
    } else {
        color_eyre::config::Theme::new()
    };
    let _ = color_eyre::config::HookBuilder::default()
        .display_env_section(false)
        .theme(theme)
        .install();
    let mut cli = airlock::cli::parse_args();
    // The configuration file's values for the one-shot commands, through the variables they read.
    match airlock::cli::apply_config_environment(&cli) {
        Ok(true) => cli = airlock::cli::parse_args(),
        Ok(false) => {}
        Err(e) => {
            eprintln!("error: {}", airlock::text::visible(&format!("{e:#}")));
            return ExitCode::from(airlock::cli::Exit::Usage as u8);
        }
    }
    if cli.command.writes_to_a_pipe() {
        restore_default_sigpipe();
    }
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
            if print_backtrace {
                print_error_backtrace(&e);
            }
            ExitCode::from(airlock::cli::Exit::Usage as u8)
        }
    }
}

/// Lets `airlock jobs list | head` end quietly when the reader goes away, as Unix tools do, instead
/// of panicking on a broken pipe. Long-running servers keep Rust's default (SIGPIPE ignored).
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: resetting a signal disposition to its default at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether `RUST_LIB_BACKTRACE` asks for error backtraces (set, and not `0`).
fn lib_backtrace_requested() -> bool {
    std::env::var_os("RUST_LIB_BACKTRACE").is_some_and(|v| v != "0")
}

/// Prints the backtrace the error hook captured (asked for with `RUST_LIB_BACKTRACE`).
fn print_error_backtrace(e: &color_eyre::Report) {
    let captured = e
        .handler()
        .downcast_ref::<color_eyre::Handler>()
        .and_then(|h| h.backtrace());
    if let Some(bt) = captured {
        eprintln!("backtrace (RUST_LIB_BACKTRACE is set):");
        for line in format!("{bt:?}").lines() {
            eprintln!("{}", airlock::text::visible(line));
        }
    }
}
