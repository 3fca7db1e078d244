//! airlock: an operations console for air-gapped job synchronisation.
//!
//! `core` is the engine and holds every rule of the specification; `cli`, `tui` and `relay` are thin
//! surfaces over it. `demo` builds the demo workspace (the console tests' and screenshots' fixtures
//! too) from engine calls.

pub mod cli;
pub mod core;
pub mod demo;
pub mod format;
pub mod http_server;
pub mod log_lines;
pub mod relay;
pub mod report_text;
pub mod serve;
pub mod tui;

/// Terminal-safe text lives in the engine (its error messages show untrusted text too); the
/// surfaces reach it as `crate::text`.
pub use crate::core::text;
