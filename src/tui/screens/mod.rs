//! One file per screen: each holds its state and draws itself; the app routes actions to it.

pub mod activity;
pub mod bundles;
pub mod chain;
pub mod keys;
pub mod ledger;
pub mod merge;
pub mod notifications;
pub mod outbox;
pub mod scheduler;
pub mod wal;
pub mod wal_picker;
