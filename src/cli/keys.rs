//! `airlock keys ...`: generate ed25519 key pairs, print key ids, manage the trust store and the
//! default signing key.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::text::{shell_word, visible_path as shown};
use crate::core::trust::key_dir::local_keys;
use crate::core::trust::{
    self, check_default_key_path, clear_default_signing_key, default_keys_dir, default_signing_key,
    key_id, load_signing_key, load_verifying_key, public_key_pem, set_default_signing_key,
    DefaultKeySource, TrustStore, SIGNING_KEY_ENV,
};
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Generate an ed25519 key pair: NAME.pem (private, PKCS#8, mode 0600) and NAME.pub.pem (public).
    Generate(GenerateArgs),
    /// Print the key id of a public key file (lowercase hex SHA-256 of the raw key).
    Id(IdArgs),
    /// Write the public key (SPKI PEM) of a private key file, to hand to the receiving side.
    Public(PublicArgs),
    /// List local key pairs, the default signing key and how many keys are trusted.
    List(ListArgs),
    /// Show, set (KEY.pem) or --clear the default signing key used by `jobs export --sign` and `jobs sign`.
    Default(DefaultArgs),
    /// Trusted public keys: bundles signed by them verify (`add`, `list`, `remove`).
    #[command(subcommand)]
    Trust(TrustCommand),
    /// Show or set the persistent signature policy (`requireSignature` in the trust store).
    Policy(PolicyArgs),
}

#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// `on`: every verify and import requires a signature by a trusted key; `off`: only when asked.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub require_signature: Option<String>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Name of the key pair (letters, digits, '.', '_', '-'); the files are NAME.pem and NAME.pub.pem.
    #[arg(long)]
    pub name: String,
    /// Directory to write to (default: the data directory's keys/ folder).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also make the new key the default signing key.
    #[arg(long = "default")]
    pub make_default: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IdArgs {
    /// Public key file (SPKI PEM, -----BEGIN PUBLIC KEY-----).
    pub public_key: PathBuf,
}

#[derive(Debug, Args)]
pub struct PublicArgs {
    /// Private key file (PKCS#8 PEM).
    pub private_key: PathBuf,
    /// Write the public key here (default: stdout).
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Directory of key pairs (default: the data directory's keys/ folder).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DefaultArgs {
    /// The private key to sign with by default; without it, show the current setting.
    #[arg(value_name = "KEY.pem", conflicts_with = "clear")]
    pub key: Option<PathBuf>,
    /// Forget the configured default signing key.
    #[arg(long)]
    pub clear: bool,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust a public key under a name.
    Add(TrustAddArgs),
    /// List trusted keys.
    List(TrustListArgs),
    /// Stop trusting a key, by name or key id.
    Remove(TrustRemoveArgs),
}

#[derive(Debug, Args)]
pub struct TrustAddArgs {
    /// Public key file (SPKI PEM) of the signer.
    pub public_key: PathBuf,
    /// Name shown when a bundle verifies with this key (e.g. the site or operator).
    #[arg(long)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct TrustListArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrustRemoveArgs {
    /// Name or key id of the trusted key.
    #[arg(value_name = "NAME|KEYID")]
    pub key: String,
}

pub fn run(_ctx: &Ctx, cmd: KeysCommand) -> Result<Exit> {
    match cmd {
        KeysCommand::Generate(a) => generate(a),
        KeysCommand::Id(a) => {
            let key = load_verifying_key(&a.public_key)?;
            println!("{}", key_id(&key));
            Ok(Exit::Ok)
        }
        KeysCommand::Public(a) => public(a),
        KeysCommand::List(a) => list(a),
        KeysCommand::Default(a) => default(a),
        KeysCommand::Trust(TrustCommand::Add(a)) => trust_add(a),
        KeysCommand::Trust(TrustCommand::List(a)) => trust_list(a),
        KeysCommand::Trust(TrustCommand::Remove(a)) => trust_remove(a),
        KeysCommand::Policy(a) => policy(a),
    }
}

fn policy(a: PolicyArgs) -> Result<Exit> {
    let mut store = TrustStore::open_default()?;
    if let Some(v) = a.require_signature {
        store.set_require_signature(v == "on")?;
    }
    let effective = trust::policy::effective_policy(false)?;
    println!(
        "requireSignature: {} (trust store {}); in effect for this environment: {}",
        if store.require_signature() {
            "on"
        } else {
            "off"
        },
        shown(store.path()),
        if effective.require_signature {
            "signatures required"
        } else {
            "signatures checked when present"
        }
    );
    Ok(Exit::Ok)
}

fn generate(a: GenerateArgs) -> Result<Exit> {
    let dir = a.out.clone().unwrap_or_else(default_keys_dir);
    if a.make_default {
        // Refused before any file is written: a key the setting could not store.
        trust::validate_name(&a.name)?;
        check_default_key_path(&trust::keys::key_pair_paths(&dir, &a.name).0)?;
    }
    let g = trust::generate_key(&a.name, &dir)?;
    if a.make_default {
        set_default_signing_key(&g.private_path)
            .wrap_err("the key pair was written, but setting it as the default failed")?;
    }
    if a.json {
        print_json(&serde_json::json!({
            "name": g.name,
            "keyId": g.key_id,
            "privateKey": shown(&g.private_path),
            "publicKey": shown(&g.public_path),
            "default": a.make_default,
        }))?;
        return Ok(Exit::Ok);
    }
    println!("generated ed25519 key pair {}", safe(&g.name));
    println!("  key id       {}", g.key_id);
    println!(
        "  private key  {}  (keep it on this side; mode 0600)",
        shown(&g.private_path)
    );
    println!(
        "  public key   {}  (carry it to the receiving side: `airlock keys trust add {} --name {}`)",
        shown(&g.public_path),
        shell_word(
            g.public_path
                .file_name()
                .map(Path::new)
                .unwrap_or(&g.public_path)
        ),
        safe(&g.name)
    );
    if a.make_default {
        println!("  set as the default signing key");
    }
    Ok(Exit::Ok)
}

fn public(a: PublicArgs) -> Result<Exit> {
    let (key, warnings) = load_signing_key(&a.private_key)?;
    for w in warnings {
        eprintln!("warning: {}", safe(&w));
    }
    let pem = public_key_pem(&key.verifying_key());
    match &a.output {
        Some(out) => {
            // Never replaces a name (a dangling symlink or one made meanwhile included).
            match crate::core::file_output::write_new(out, pem.as_bytes()) {
                Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(eyre!(
                        "{} already exists; choose another output file",
                        shown(out)
                    ));
                }
                r => r?,
            }
            eprintln!(
                "public key {} (key id {}) -> {}",
                shown(&a.private_key),
                key_id(&key.verifying_key()),
                shown(out)
            );
        }
        None => print!("{pem}"),
    }
    Ok(Exit::Ok)
}

/// The default signing key: its path, its key id (or why it cannot be loaded) and where the setting
/// comes from.
type DefaultKeyView = (PathBuf, Result<String, String>, String);

fn describe_default() -> Result<Option<DefaultKeyView>> {
    let Some(d) = default_signing_key()? else {
        return Ok(None);
    };
    let id = d
        .load()
        .map(|(k, _)| key_id(&k.verifying_key()))
        .map_err(|e| e.to_string());
    let origin = match d.source {
        DefaultKeySource::Env => format!("from ${SIGNING_KEY_ENV}"),
        DefaultKeySource::Config(_) => "set with `airlock keys default`".to_string(),
    };
    Ok(Some((d.path, id, origin)))
}

fn list(a: ListArgs) -> Result<Exit> {
    let dir = a.dir.clone().unwrap_or_else(default_keys_dir);
    let keys = local_keys(&dir)?;
    let default = describe_default()?;
    let trusted = TrustStore::open_default()?;
    if a.json {
        print_json(&serde_json::json!({
            "keysDir": shown(&dir),
            "keys": keys,
            "defaultSigningKey": default.as_ref().map(|(p, id, origin)| serde_json::json!({
                "path": shown(p),
                "keyId": id.as_ref().ok(),
                "problem": id.as_ref().err(),
                "origin": origin,
            })),
            "trustedKeys": trusted.keys().len(),
        }))?;
        return Ok(Exit::Ok);
    }
    let default_id = default
        .as_ref()
        .and_then(|(_, id, _)| id.as_ref().ok().cloned());
    if keys.is_empty() {
        println!("no key pairs in {}", shown(&dir));
    } else {
        println!("key pairs in {}:", shown(&dir));
        for k in &keys {
            let mut line = format!(
                "  {:<20} {}",
                safe(&k.name),
                k.key_id.as_deref().unwrap_or("(unreadable)")
            );
            if k.private_path.is_none() {
                line.push_str("  public only");
            }
            if k.key_id.is_some() && k.key_id == default_id {
                line.push_str("  [default]");
            }
            println!("{line}");
            if let Some(p) = &k.problem {
                println!("      ! {}", safe(p));
            }
        }
    }
    match &default {
        Some((p, Ok(id), origin)) => {
            println!("default signing key: {} ({origin}), key id {id}", shown(p))
        }
        Some((p, Err(e), origin)) => println!(
            "default signing key: {} ({origin}) cannot be loaded: {}",
            shown(p),
            safe(e)
        ),
        None => println!("default signing key: none (set one with `airlock keys default KEY.pem`)"),
    }
    println!(
        "trusted keys: {} (see `airlock keys trust list`)",
        trusted.keys().len()
    );
    Ok(Exit::Ok)
}

fn default(a: DefaultArgs) -> Result<Exit> {
    if a.clear {
        if clear_default_signing_key()? {
            println!("the default signing key is no longer set");
        } else {
            println!("no default signing key was set");
        }
        if std::env::var_os(SIGNING_KEY_ENV).is_some_and(|v| !v.is_empty()) {
            println!("note: ${SIGNING_KEY_ENV} is set and still names a signing key");
        }
        return Ok(Exit::Ok);
    }
    if let Some(key) = &a.key {
        let (abs, id, warnings) = set_default_signing_key(key)?;
        for w in warnings {
            eprintln!("warning: {}", safe(&w));
        }
        println!("default signing key: {} (key id {id})", shown(&abs));
        if std::env::var_os(SIGNING_KEY_ENV).is_some_and(|v| !v.is_empty()) {
            println!("note: ${SIGNING_KEY_ENV} is set and takes precedence over this setting");
        }
        return Ok(Exit::Ok);
    }
    match describe_default()? {
        Some((p, Ok(id), origin)) => println!("{} ({origin}), key id {id}", shown(&p)),
        Some((p, Err(e), origin)) => {
            println!("{} ({origin}) cannot be loaded: {}", shown(&p), safe(&e));
            return Ok(Exit::Failed);
        }
        None => {
            println!("no default signing key; set one with `airlock keys default KEY.pem` or ${SIGNING_KEY_ENV}");
            return Ok(Exit::Failed);
        }
    }
    Ok(Exit::Ok)
}

fn trust_add(a: TrustAddArgs) -> Result<Exit> {
    let mut store = TrustStore::open_default()?;
    let k = store.add_file(&a.public_key, &a.name)?;
    println!(
        "trusted key {} as {} (trust store {})",
        k.key_id,
        safe(&k.name),
        shown(store.path())
    );
    Ok(Exit::Ok)
}

fn trust_list(a: TrustListArgs) -> Result<Exit> {
    let store = TrustStore::open_default()?;
    if a.json {
        print_json(&serde_json::json!({
            "trustStore": shown(store.path()),
            "keys": store.keys(),
        }))?;
        return Ok(Exit::Ok);
    }
    if store.keys().is_empty() {
        println!(
            "no trusted keys in {}; add one with `airlock keys trust add PUB.pem --name NAME`",
            shown(store.path())
        );
        return Ok(Exit::Ok);
    }
    let width = store
        .keys()
        .iter()
        .map(|k| safe(&k.name).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<width$}  {:<64}  {:<24}  SOURCE",
        "NAME", "KEY ID", "ADDED"
    );
    for k in store.keys() {
        println!(
            "{:<width$}  {:<64}  {:<24}  {}",
            safe(&k.name),
            k.key_id,
            safe(k.added_at.as_deref().unwrap_or("-")),
            safe(&k.source)
        );
    }
    Ok(Exit::Ok)
}

fn trust_remove(a: TrustRemoveArgs) -> Result<Exit> {
    let mut store = TrustStore::open_default()?;
    let k = store.remove(&a.key)?;
    println!("no longer trusted: {} ({})", safe(&k.name), k.key_id);
    Ok(Exit::Ok)
}
