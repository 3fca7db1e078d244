//! Bundle verification and break diagnosis (SPEC section 6): every check, every finding, in one
//! streaming pass.
//!
//! * [`Verifier`] (`verifier`): the visitor the reader streams a bundle to; per entry `entry`, at
//!   the end of each log `log_checks`, at the end `bundle_checks`;
//! * `diagnose`: classifies the breaks of one hash chain (also used for the scheduler chain);
//! * `report`: the [`Report`] and its [`Checks`]; `finding`: [`Finding`]s and their text;
//! * `spill`, `bounded`: findings in bounded memory (past a budget in a temporary file) and the
//!   [`BoundedReport`] that reads them back as it is printed (`jobs verify`);
//! * `pipeline`: reading and checking on two threads ([`read_two_threads`], for any visitor);
//! * `chain_rows`: the per-row checks of a stored scheduler chain (run on `chain verify`'s second
//!   thread);
//! * `options`: [`VerifyOptions`]; the strict field decoders are `chain::decode_digest` and
//!   `ids::parse_job_id`.

mod bounded;
mod bundle_checks;
mod canonical_quick;
pub mod chain_rows;
pub mod diagnose;
mod entry;
pub mod finding;
mod link_records;
mod log_checks;
mod options;
mod pipeline;
mod report;
pub(crate) mod spill;
mod verifier;

pub use crate::core::chain::decode_digest;
pub use crate::core::ids::parse_job_id;
pub use bounded::BoundedReport;
pub use diagnose::{ChainDiagnosis, ChainEntry, HeadClaim, LinkText, Prev};
pub use entry::{entry_flags, CheckedEntry, ParsedEntry};
pub use finding::{Check, Finding, FindingKind};
pub use options::{VerifyOptions, VerifyPolicy};
pub use pipeline::read_two_threads;
pub use report::{CheckState, Checks, LogTally, Report, SignatureState, Stats, Unwaivable};
pub use spill::{SpillError, FINDINGS_MEMORY};
pub use verifier::Verifier;

pub use crate::core::trust::SignatureCheck;

use crate::core::bundle::{BundleFileError, ReadError};
use std::io::Read;
use std::path::Path;

/// Verifies a bundle file (a portable export opens, after its checksums, as its bundle.json).
pub fn verify_file(path: &Path, opts: &VerifyOptions<'_>) -> Result<Report, BundleFileError> {
    let file = crate::core::notify::open_bundle_source(path)
        .map_err(|e| BundleFileError::opening(path, e))?;
    verify_reader(file, opts).map_err(BundleFileError::Syntax)
}

/// [`verify_file`] with the findings in bounded memory: past [`FINDINGS_MEMORY`] they go to an
/// unnamed temporary file (in `$TMPDIR`) and are read back as the report is printed. Failing to
/// write that file is an error ([`BundleFileError::Io`], saying where and what to do).
pub fn verify_file_bounded(
    path: &Path,
    opts: &VerifyOptions<'_>,
) -> Result<BoundedReport, BundleFileError> {
    let file = crate::core::notify::open_bundle_source(path)
        .map_err(|e| BundleFileError::opening(path, e))?;
    verify_reader_bounded(file, opts, FINDINGS_MEMORY)
}

/// [`verify_reader`] keeping about `findings_memory` bytes of findings in memory (twice: the log
/// being read's and the report's), the rest in a temporary file.
pub fn verify_reader_bounded<R: Read>(
    reader: R,
    opts: &VerifyOptions<'_>,
    findings_memory: usize,
) -> Result<BoundedReport, BundleFileError> {
    let reader = ProgressReader::new(reader, opts.progress.as_deref());
    pipeline::verify_two_threads_bounded(reader, opts, findings_memory)
}

/// Verifies a bundle from any byte source.
/// The entries are checked on a second thread while this one reads (`pipeline`).
pub fn verify_reader<R: Read>(reader: R, opts: &VerifyOptions<'_>) -> Result<Report, ReadError> {
    let reader = ProgressReader::new(reader, opts.progress.as_deref());
    pipeline::verify_two_threads(reader, opts)
}

pub use crate::core::file_input::ProgressReader;
