//! The operations console: a terminal UI (ratatui + crossterm on tokio) over the same engine calls
//! as the CLI. It never re-implements a rule: verification, hashing and diagnosis are `core` calls.

pub mod action;
pub mod app;
pub mod config;
pub mod copy;
pub mod filter;
pub mod inbox_watch;
pub mod screen;
pub mod screens;
pub mod search;
pub mod store_ref;
pub mod tasks;
pub mod theme;
pub mod widgets;

pub use app::LoopEnd;
use app::{App, ConsoleConfig};
use color_eyre::eyre::WrapErr;
use color_eyre::Result;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use std::io::stdout;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use tasks::{SharedTrustSet, Tasks};
use theme::Theme;

static MOUSE_CAPTURED: AtomicBool = AtomicBool::new(false);

/// Leaves raw mode and the alternate screen (and mouse capture); safe to call more than once.
pub fn restore_terminal() {
    if MOUSE_CAPTURED.swap(false, Ordering::SeqCst) {
        let _ = execute!(stdout(), DisableMouseCapture);
    }
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, crossterm::cursor::Show);
}

/// Restores the terminal when dropped (normal exit, error return or unwinding panic).
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Installs a panic hook that restores the terminal before the previous hook (color-eyre's)
/// prints the report, so the report lands on a normal screen.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}

fn enter_terminal(mouse: bool) -> std::io::Result<ratatui::DefaultTerminal> {
    enable_raw_mode()?;
    execute!(stdout(), EnterAlternateScreen)?;
    if mouse {
        execute!(stdout(), EnableMouseCapture)?;
        MOUSE_CAPTURED.store(true, Ordering::SeqCst);
    }
    ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(stdout()))
}

/// Where the console's log goes: `$AIRLOCK_LOG` (a file path), else `console.log` in the data
/// directory. Never the screen.
pub fn log_path() -> PathBuf {
    std::env::var_os("AIRLOCK_LOG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::core::paths::data_dir().join("console.log"))
}

/// Creates the log file readable by its owner only (0600: it names files, keys and operators),
/// and narrows an existing one; the appender then opens it for appending.
pub fn prepare_log_file(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

fn init_logging() -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let path = log_path();
    let dir = path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    let name = path.file_name()?.to_owned();
    prepare_log_file(&path).ok()?;
    let appender = tracing_appender::rolling::never(dir, name);
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = tracing_subscriber::EnvFilter::try_from_env("AIRLOCK_LOG_LEVEL")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(crate::log_lines::EscapedLines(writer))
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}

/// Runs the console until the user quits (or a termination signal arrives: the terminal is
/// restored first, and the signal is returned so the caller exits with `128 + signal`).
pub fn run(config: ConsoleConfig, theme: Theme, trust: SharedTrustSet) -> Result<app::LoopEnd> {
    run_with_inbox(config, theme, trust, None)
}

/// [`run`], watching `inbox` as a drop directory (`console --inbox DIR`) when given.
pub fn run_with_inbox(
    config: ConsoleConfig,
    theme: Theme,
    trust: SharedTrustSet,
    drop_dir: Option<inbox_watch::InboxSettings>,
) -> Result<app::LoopEnd> {
    let _log = init_logging();
    tracing::info!(dir = %config.dir.display(), read_only = config.read_only, "console start");
    let runtime = tasks::console_runtime().wrap_err("starting the async runtime")?;
    if Theme::no_color_env() && theme.name != "monochrome" {
        // An explicit --theme overrides NO_COLOR (no-color.org); crossterm would otherwise drop
        // every colour of it, and with them the selection and verdict marks.
        crossterm::style::force_color_output(true);
    }
    let (tasks, mut inbox) = Tasks::new(runtime.handle().clone());
    let mut app = App::new(config, theme, tasks, trust);
    if let Some(settings) = drop_dir {
        app.watch_inbox(settings)
            .map_err(|e| color_eyre::eyre::eyre!(e))?;
    }
    install_panic_hook();
    let result = {
        let _guard = TerminalGuard;
        let mut terminal = enter_terminal(app.config.mouse).wrap_err("opening the terminal")?;
        app.poll_dir();
        runtime.block_on(app::run_loop(&mut terminal, &mut app, &mut inbox))
    };
    runtime.shutdown_background();
    tracing::info!(?result, "console exit");
    result.wrap_err("the console's terminal failed")
}

/// Ends the process the way the signal would have, after the terminal was restored.
pub fn exit_for(end: LoopEnd) {
    if let LoopEnd::Signal(sig) = end {
        std::process::exit(128 + sig);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// console.log is created 0600, and an existing world-readable one is narrowed.
    #[test]
    fn log_file_is_private() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub/console.log");
        super::prepare_log_file(&path).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::prepare_log_file(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
    }
}
