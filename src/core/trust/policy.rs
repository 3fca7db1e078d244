//! The signature policy: whether verify and import require a signature by a trusted key.
//!
//! Three sources can require it: the command's `--require-signature`, the environment
//! (`AIRLOCK_REQUIRE_SIGNATURE`) and the trust store's persistent `requireSignature` setting
//! (`airlock keys policy --require-signature on`). Any one of them requiring a signature makes it
//! required; none of them can waive another's requirement, so stripping a bundle's signature is never
//! a way around the policy. A service configuration can feed its own setting in as `configured`.

use super::TrustError;

/// Environment variable that requires signatures (`1`, `true`, `yes`, `on`; `0`, `false`, `no`,
/// `off` or empty leave the other sources in charge).
pub const REQUIRE_SIGNATURE_ENV: &str = "AIRLOCK_REQUIRE_SIGNATURE";

/// What requires a signature (the strongest source wins; listed for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicySource {
    Flag,
    Environment,
    Configured,
    Default,
}

/// The effective signature policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignaturePolicy {
    pub require_signature: bool,
    pub source: PolicySource,
}

/// Parses a boolean setting value as the environment gives it.
pub fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "" | "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Combines the sources: `flag` (the command line), `env` (the value of
/// [`REQUIRE_SIGNATURE_ENV`], if set) and `configured` (the trust store's or a config file's
/// `requireSignature`). A value of the variable that is not a switch is an error, never a silent "no".
pub fn policy(
    flag: bool,
    env: Option<&str>,
    configured: bool,
) -> Result<SignaturePolicy, TrustError> {
    let from_env = match env {
        None => false,
        Some(v) => parse_switch(v).ok_or_else(|| TrustError::BadPolicy {
            setting: REQUIRE_SIGNATURE_ENV.to_string(),
            value: v.to_string(),
        })?,
    };
    let (require_signature, source) = if flag {
        (true, PolicySource::Flag)
    } else if from_env {
        (true, PolicySource::Environment)
    } else if configured {
        (true, PolicySource::Configured)
    } else {
        (false, PolicySource::Default)
    };
    Ok(SignaturePolicy {
        require_signature,
        source,
    })
}

/// The policy of this process: `flag`, the environment and the default trust store's setting.
pub fn effective_policy(flag: bool) -> Result<SignaturePolicy, TrustError> {
    effective_policy_in(flag, &super::trust_store_path())
}

/// [`effective_policy`] with the trust store at `store` (a console given `--trust-store` or a
/// workspace takes its policy from that store, as it takes its keys).
pub fn effective_policy_in(
    flag: bool,
    store: &std::path::Path,
) -> Result<SignaturePolicy, TrustError> {
    let env = std::env::var(REQUIRE_SIGNATURE_ENV).ok();
    let configured = super::TrustStore::open(store)?.require_signature();
    policy(flag, env.as_deref(), configured)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_source_requires_and_none_waives() {
        let p = |f, e, c| policy(f, e, c).unwrap().require_signature;
        assert!(!p(false, None, false));
        assert!(p(true, None, false));
        assert!(p(false, Some("1"), false));
        assert!(p(false, Some("on"), false));
        assert!(p(false, None, true));
        // "0" in the environment does not waive the stored policy, nor the flag.
        assert!(p(false, Some("0"), true));
        assert!(p(true, Some("off"), false));
        assert!(policy(false, Some("maybe"), false).is_err());
    }
}
