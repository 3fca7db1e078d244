//! Export-ready notifications (SPEC section 10, seed export-airgap-58-001).
//!
//! * [`archive`]: deterministic `.tgz` writing, bounded flat `.tgz` reading;
//! * [`checksums`]: `checksums.txt` and `root_hash`;
//! * [`event`]: `export_id`, the `export.airgap.ready.v1` payload and body, the DLQ message;
//! * [`signature`]: webhook headers, HMAC signature, retry schedule;
//! * [`portable`]: opening a portable export with every check (what `jobs verify/import` call);
//! * [`export`]: writing a portable export and recording its emission;
//! * [`holder`]: who holds a delivery's claim, and whether that process is provably gone;
//! * [`store`]: migrations 5 and 6, the emission and delivery tables, operator actions, counts;
//! * [`settings`]: targets (webhooks with secret files, NATS);
//! * [`deliver`]: the delivery runner (webhooks over HTTP, NATS with JetStream acks);
//! * [`metrics`]: the queue's metric samples for `/metrics` and `airlock metrics`;
//! * [`check`]: the receiver's offline check of an event against the artifact.

pub mod archive;
pub mod check;
pub mod checksums;
pub mod deliver;
pub mod event;
pub mod export;
pub mod holder;
pub mod metrics;
pub mod portable;
pub mod settings;
pub mod signature;
pub mod store;

pub use portable::{is_portable_file, open_bundle_source};
pub use settings::{NatsSettings, NotifySettings, WebhookSettings};
pub use store::{counts, NotifyCounts};
