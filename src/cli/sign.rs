//! `airlock jobs sign BUNDLE`, and the signing-key plumbing shared with `jobs export --sign`.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::bundle::{BundleHeader, BUNDLE_PAYLOAD_TYPE};
use crate::core::trust::{
    self, bundle_statement, default_signing_key, dsse_envelope, key_id, load_signing_key,
    sign_header, DefaultKeySource, SigningKey, TrustError, TrustSet, SIGNING_KEY_ENV,
};
use clap::Args;
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::cell::RefCell;
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

fn shown(p: &Path) -> String {
    safe(&p.display().to_string()).into_owned()
}

/// Loads the signing key: `explicit` (`--key`), else `$AIRLOCK_SIGNING_KEY`, else the configured
/// default. Warnings about the key file (e.g. readable by others) go to stderr.
pub fn load_key_for_signing(explicit: Option<&Path>) -> Result<LoadedSigningKey> {
    let (path, origin) = match explicit {
        Some(p) => (p.to_path_buf(), "--key".to_string()),
        None => match default_signing_key()? {
            Some(d) => {
                let origin = match d.source {
                    DefaultKeySource::Env => SIGNING_KEY_ENV.to_string(),
                    DefaultKeySource::Config(_) => "the default signing key".to_string(),
                };
                (d.path, origin)
            }
            None => {
                return Err(TrustError::NoSigningKey {
                    env: SIGNING_KEY_ENV,
                }
                .into())
            }
        },
    };
    let (key, warnings) = load_signing_key(&path)
        .wrap_err_with(|| format!("loading the signing key given by {origin}"))?;
    for w in warnings {
        eprintln!("warning: {}", safe(&w));
    }
    Ok(LoadedSigningKey {
        key_id: key_id(&key.verifying_key()),
        key,
        path,
    })
}

/// Signs bundle headers for `nodelog::export` and remembers the last header it signed (for
/// `--dsse-out`).
pub struct HeaderSigning {
    pub key: LoadedSigningKey,
    last: RefCell<Option<BundleHeader>>,
}

impl HeaderSigning {
    pub fn new(key: LoadedSigningKey) -> Self {
        HeaderSigning {
            key,
            last: RefCell::new(None),
        }
    }

    /// A closure usable as `nodelog::HeaderSigner` (`&signing.signer()`).
    pub fn signer(&self) -> impl Fn(&BundleHeader) -> Result<(String, String), String> + '_ {
        move |h: &BundleHeader| {
            let mut unsigned = h.clone();
            unsigned.signature = None;
            unsigned.signed_by = None;
            let (sig, by) = sign_header(&self.key.key, &unsigned);
            unsigned.signature = Some(sig.clone());
            unsigned.signed_by = Some(by.clone());
            *self.last.borrow_mut() = Some(unsigned);
            Ok((sig, by))
        }
    }

    /// The last header signed, signature included.
    pub fn signed_header(&self) -> Option<BundleHeader> {
        self.last.borrow().clone()
    }
}

/// Turns a loaded key into a `HeaderSigner` closure (without `--dsse-out` bookkeeping).
pub fn header_signer(
    key: &SigningKey,
) -> impl Fn(&BundleHeader) -> Result<(String, String), String> + '_ {
    move |h: &BundleHeader| Ok(sign_header(key, h))
}

/// Writes the DSSE envelope of a signed bundle header to `path` atomically.
pub fn write_dsse_for_header(path: &Path, header: &BundleHeader) -> Result<()> {
    let (Some(sig), Some(by)) = (&header.signature, &header.signed_by) else {
        return Err(eyre!(
            "the bundle was not signed; no DSSE envelope to write"
        ));
    };
    let env = dsse_envelope(BUNDLE_PAYLOAD_TYPE, &bundle_statement(header), sig, by);
    let mut text = serde_json::to_string_pretty(&env)?;
    text.push('\n');
    crate::core::file_output::write_atomic(path, text.as_bytes())
        .wrap_err("writing the DSSE envelope (the bundle itself was written)")?;
    Ok(())
}

/// Refuses a `--dsse-out` that would overwrite the bundle.
pub fn check_dsse_target(dsse_out: Option<&Path>, bundle: Option<&Path>) -> Result<()> {
    if let (Some(d), Some(b)) = (dsse_out, bundle) {
        let same = d == b
            || match (std::fs::canonicalize(d), std::fs::canonicalize(b)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            };
        if same {
            return Err(eyre!(
                "--dsse-out {} is the bundle file itself; write the envelope beside it, e.g. BUNDLE.dsse.json",
                shown(d)
            ));
        }
    }
    Ok(())
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
    check_dsse_target(a.dsse_out.as_deref(), Some(&output))?;
    check_dsse_target(a.dsse_out.as_deref(), Some(&a.bundle))?;
    let key = load_key_for_signing(a.key.as_deref())?;
    let outcome = trust::sign_bundle_file(&a.bundle, &output, &key.key)?;
    if let Some(d) = &a.dsse_out {
        write_dsse_for_header(d, &outcome.header)?;
    }
    if a.json {
        print_json(&serde_json::json!({
            "bundleId": outcome.header.bundle_id,
            "tenantId": outcome.header.tenant_id,
            "output": output.display().to_string(),
            "signature": outcome.signature,
            "signedBy": outcome.key_id,
            "replacedSignedBy": outcome.replaced,
            "entries": outcome.entries,
            "bytes": outcome.bytes,
            "dsseOut": a.dsse_out.as_ref().map(|p| p.display().to_string()),
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
