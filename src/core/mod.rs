//! The engine: every rule of SPEC.md lives here. No terminal, HTTP-server or CLI-parsing code.

pub mod audit;
pub mod bundle;
pub mod canonical;
pub mod chain;
pub mod config;
pub mod exports;
pub mod file_input;
pub mod file_output;
pub mod hlc;
pub mod ids;
pub mod import;
pub mod ledger;
pub mod merge;
pub mod merkle;
pub mod metrics;
pub mod notify;
pub mod outbox;
pub mod paths;
pub mod service;
pub mod store;
pub mod tenant;
pub mod text;
pub mod time;
pub mod trust;
pub mod verify;
pub mod wal;
