//! The engine: every rule of SPEC.md lives here. No terminal, HTTP-server or CLI-parsing code.

pub mod audit;
pub mod bundle;
pub mod canonical;
pub mod chain;
pub mod fsutil;
pub mod hlc;
pub mod ids;
pub mod import;
pub mod merge;
pub mod merkle;
pub mod outbox;
pub mod paths;
pub mod store;
pub mod time;
pub mod trust;
pub mod verify;
