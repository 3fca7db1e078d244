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

/// What a verification checks besides the trusted keys: whether a signature is required and how
/// far ahead of this machine's clock an entry may be. A surface builds it once from its flags, the
/// environment, the configuration and the trust store, and hands it to every verify and import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyPolicy {
    pub require_signature: bool,
    pub max_clock_skew: Duration,
}

impl Default for VerifyPolicy {
    fn default() -> Self {
        VerifyPolicy {
            require_signature: false,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
        }
    }
}

impl<'a> VerifyOptions<'a> {
    /// The options of a surface that verifies with `trust` under `policy`.
    pub fn under(trust: &'a TrustSet, policy: VerifyPolicy) -> Self {
        VerifyOptions {
            require_signature: policy.require_signature,
            trust: Some(trust),
            max_clock_skew: Some(policy.max_clock_skew),
            ..VerifyOptions::default()
        }
    }

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
