//! `airlock jobs sign BUNDLE`, and the signing-key plumbing shared with `jobs export --sign`.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::bundle::BundleHeader;
use crate::core::text::visible_path as shown;
use crate::core::trust::{
    self, default_signing_key, key_id, load_signing_key, sign_header, DefaultKeySource, SigningKey,
    TrustError, TrustSet, SIGNING_KEY_ENV,
};
use clap::Args;
use color_eyre::eyre::WrapErr;
use color_eyre::Result;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The bundle to sign (an already signed bundle is re-signed: its signature is replaced).
    pub bundle: PathBuf,
    /// Private key, PKCS#8 PEM (default: $AIRLOCK_SIGNING_KEY, else the key set with `airlock keys default`).
    #[arg(long, value_name = "KEY.pem")]
    pub key: Option<PathBuf>,
    /// Write the signed bundle here (default: replace BUNDLE in place, atomically).
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Also write the standard DSSE envelope JSON of the signature to FILE.
    #[arg(long, value_name = "FILE")]
    pub dsse_out: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A private key ready to sign, with where it came from.
pub struct LoadedSigningKey {
    pub key: SigningKey,
    pub key_id: String,
    pub path: PathBuf,
}

/// Loads the signing key: `explicit` (`--key`), else `$AIRLOCK_SIGNING_KEY`, else the configured
/// default. Warnings about the key file (e.g. readable by others) go to stderr.
pub fn load_key_for_signing(explicit: Option<&Path>) -> Result<LoadedSigningKey> {
    let (path, origin, loaded) = match explicit {
        Some(p) => (p.to_path_buf(), "--key".to_string(), load_signing_key(p)),
        None => match default_signing_key()? {
            Some(d) => {
                let origin = match d.source {
                    DefaultKeySource::Env => SIGNING_KEY_ENV.to_string(),
                    DefaultKeySource::Config(_) => "the default signing key".to_string(),
                };
                let loaded = d.load();
                (d.path, origin, loaded)
            }
            None => {
                return Err(TrustError::NoSigningKey {
                    env: SIGNING_KEY_ENV,
                }
                .into())
            }
        },
    };
    let (key, warnings) =
        loaded.wrap_err_with(|| format!("loading the signing key given by {origin}"))?;
    for w in warnings {
        eprintln!("warning: {}", safe(&w));
    }
    Ok(LoadedSigningKey {
        key_id: key_id(&key.verifying_key()),
        key,
        path,
    })
}

/// Turns a loaded key into a `HeaderSigner` closure (without `--dsse-out` bookkeeping).
pub fn header_signer(
    key: &SigningKey,
) -> impl Fn(&BundleHeader) -> Result<(String, String), String> + '_ {
    move |h: &BundleHeader| Ok(sign_header(key, h))
}

/// The trust-store name of a key id, for messages (empty when unknown).
fn trusted_name(id: &str) -> String {
    TrustSet::load_default()
        .ok()
        .and_then(|t| t.name_of(id).map(|n| format!(" ({})", safe(n))))
        .unwrap_or_default()
}

pub fn run(_ctx: &Ctx, a: SignArgs) -> Result<Exit> {
    let output = a.output.clone().unwrap_or_else(|| a.bundle.clone());
    trust::check_dsse_target(a.dsse_out.as_deref(), Some(&a.bundle))?;
    let key = load_key_for_signing(a.key.as_deref())?;
    // The envelope's path is checked (and its file made) before the bundle is signed in place.
    let dsse = a
        .dsse_out
        .as_deref()
        .map(|d| trust::DsseOut::prepare(d, Some(&output)))
        .transpose()?;
    let outcome = trust::sign_bundle_file(&a.bundle, &output, &key.key)?;
    if let Some(d) = dsse {
        d.write(&outcome.header)?;
    }
    if a.json {
        print_json(&serde_json::json!({
            "bundleId": outcome.header.bundle_id,
            "tenantId": outcome.header.tenant_id,
            "output": shown(&output),
            "signature": outcome.signature,
            "signedBy": outcome.key_id,
            "replacedSignedBy": outcome.replaced,
            "entries": outcome.entries,
            "bytes": outcome.bytes,
            "dsseOut": a.dsse_out.as_ref().map(|p| shown(p)),
        }))?;
        return Ok(Exit::Ok);
    }
    if let Some(old) = &outcome.replaced {
        if *old == outcome.key_id {
            println!(
                "re-signed: replaced the existing signature by the same key {}",
                safe(old)
            );
        } else {
            println!(
                "re-signed: replaced the existing signature by key {}{}",
                safe(old),
                trusted_name(old)
            );
        }
    }
    println!(
        "signed bundle {} (tenant {}, {} entries) with key {}{} -> {}",
        safe(&outcome.header.bundle_id),
        safe(&outcome.header.tenant_id),
        outcome.entries,
        outcome.key_id,
        trusted_name(&outcome.key_id),
        shown(&output)
    );
    if let Some(d) = &a.dsse_out {
        println!("DSSE envelope -> {}", shown(d));
    }
    Ok(Exit::Ok)
}
