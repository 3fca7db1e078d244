//! Sync bundles (SPEC section 5): the document model, streaming reader, writer and manifest digest.

pub(crate) mod block16;
pub mod catalog;
pub mod digest;
pub mod dupkeys;
pub mod fast_entry;
pub mod index;
pub mod model;
pub mod reader;
pub mod scan;
pub mod synth;
mod unescape;
pub mod writer;

pub use digest::{manifest_digest, ManifestHasher};
pub use model::{Bundle, BundleHeader, Entry, EntryRef, JobLog, RelinkError, BUNDLE_PAYLOAD_TYPE};
pub use reader::{
    load_bundle, read_bundle, read_bundle_file, BundleFileError, BundleVisitor, EntryView,
    LogFields, ReadError, ReadSummary, SchemaProblem, SchemaProblemKind,
};
pub use writer::{bundle_to_vec, write_bundle, BundleWriter};
