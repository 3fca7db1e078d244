//! How to verify.

use crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW;
use crate::core::trust::TrustSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// How to verify.
#[derive(Clone)]
pub struct VerifyOptions<'a> {
    /// Report `signature-missing` for an unsigned bundle.
    pub require_signature: bool,
    /// Trusted keys for the signature check (`None`: no key is trusted).
    pub trust: Option<&'a TrustSet>,
    /// Report entries more than this far ahead of `now_ms` (`None`: no clock-skew check).
    pub max_clock_skew: Option<Duration>,
    /// The verifying machine's clock, Unix ms.
    pub now_ms: u64,
    /// Bytes read so far (for progress displays).
    pub progress: Option<Arc<AtomicU64>>,
}

impl Default for VerifyOptions<'_> {
    fn default() -> Self {
        VerifyOptions {
            require_signature: false,
            trust: None,
            max_clock_skew: Some(DEFAULT_MAX_CLOCK_SKEW),
            now_ms: crate::core::hlc::unix_ms_now(),
            progress: None,
        }
    }
}

impl<'a> VerifyOptions<'a> {
    /// The options every surface opens a bundle with: this trust set, a signature required or not,
    /// the default clock-skew tolerance against this machine's clock.
    pub fn trusting(trust: &'a TrustSet, require_signature: bool) -> Self {
        VerifyOptions {
            require_signature,
            trust: Some(trust),
            ..VerifyOptions::default()
        }
    }
}
