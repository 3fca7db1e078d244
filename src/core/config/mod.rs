//! The configuration file (SPEC section 13): YAML with the seed's `scheduler.*` keys (seed
//! hlc-ordering, `etc/scheduler.yaml`) and airlock's own sections. Every key has one kind, one
//! default and at most one environment variable; values come from, in order of precedence, a
//! command-line flag, the environment, the file, the default, and each remembers where it came from
//! (`airlock config show`).
//!
//! The file: `--config FILE`, else `$AIRLOCK_CONFIG`, else `etc/airlock.yaml` beside the store
//! (`<dir of the store>/etc/airlock.yaml`; a missing default file is no error). An unknown key, a
//! repeated key or a bad value is an error naming the file, the line and the key.

mod value;
mod yaml;

pub use value::{format_duration, parse_duration, Kind, Value, Webhook};

use crate::core::text::ShowPath;
use std::path::{Path, PathBuf};
use std::time::Duration;
use yaml::{Node, NodeValue};

/// One configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    pub key: &'static str,
    pub kind: Kind,
    pub env: Option<&'static str>,
    /// Built-in default as text (parsed like an environment value); `None`: unset or derived.
    pub default: Option<&'static str>,
    pub help: &'static str,
}

const fn k(
    key: &'static str,
    kind: Kind,
    env: Option<&'static str>,
    default: Option<&'static str>,
    help: &'static str,
) -> KeySpec {
    KeySpec {
        key,
        kind,
        env,
        default,
        help,
    }
}

const INTERVAL: Kind = Kind::Duration { nonzero: true };

/// Every key airlock reads, in the order `config show` prints them.
pub const KEYS: &[KeySpec] = &[
    k(
        HLC_ENABLED,
        Kind::Bool,
        None,
        Some("true"),
        "persist the HLC state on an interval (serve)",
    ),
    k(
        NODE_ID,
        Kind::NodeId,
        Some("AIRLOCK_NODE_ID"),
        None,
        "this node's id (default: the host name)",
    ),
    k(
        MAX_CLOCK_SKEW,
        Kind::Duration { nonzero: false },
        Some("AIRLOCK_MAX_CLOCK_SKEW"),
        Some("00:00:05"),
        "largest tolerated clock skew",
    ),
    k(
        PERSISTENCE_INTERVAL,
        INTERVAL,
        None,
        Some("00:01:00"),
        "HLC state persistence interval",
    ),
    k(
        CHAIN_ENABLED,
        Kind::Bool,
        None,
        Some("true"),
        "periodic batch snapshots and chain verification (serve)",
    ),
    k(
        BATCH_SIZE,
        Kind::Count,
        Some("AIRLOCK_BATCH_SIZE"),
        Some("1000"),
        "entries per batch snapshot",
    ),
    k(
        BATCH_INTERVAL,
        INTERVAL,
        None,
        Some("00:05:00"),
        "batch snapshot interval (serve)",
    ),
    k(
        SIGN_SNAPSHOTS,
        Kind::Bool,
        None,
        Some("false"),
        "DSSE-sign batch snapshots",
    ),
    k(
        KEY_ID,
        Kind::Text,
        None,
        None,
        "signing key (name or key id in the key directory; default: `airlock keys default`)",
    ),
    k(
        STORE_PATH,
        Kind::Path,
        Some("AIRLOCK_DB"),
        None,
        "the store (default: $XDG_DATA_HOME/airlock/airlock.db)",
    ),
    k(
        OUTBOX_PATH,
        Kind::Path,
        Some("STATEHUB_OUTBOX_PATH"),
        None,
        "the relay's outbox (default: ~/.statehub/edge-outbox.sqlite3)",
    ),
    k(
        RELAY_LISTEN,
        Kind::Listen,
        None,
        Some("127.0.0.1:18080"),
        "relay listen address",
    ),
    k(
        RELAY_UPSTREAM,
        Kind::Url,
        Some("STATEHUB_UPSTREAM_URL"),
        Some("http://127.0.0.1:8000"),
        "relay upstream",
    ),
    k(
        SERVE_LISTEN,
        Kind::Listen,
        Some("AIRLOCK_LISTEN"),
        Some("127.0.0.1:8443"),
        "serve listen address (loopback unless a token file is set)",
    ),
    k(
        SERVE_TOKEN_FILE,
        Kind::Path,
        Some("AIRLOCK_TOKEN_FILE"),
        None,
        "file holding the bearer token serve requires",
    ),
    k(
        SERVE_MAX_BUNDLE,
        Kind::Count,
        None,
        Some("268435456"),
        "largest bundle serve accepts, in bytes",
    ),
    k(
        SERVE_VERIFY_INTERVAL,
        INTERVAL,
        None,
        Some("01:00:00"),
        "periodic chain verification interval (serve)",
    ),
    k(
        REQUIRE_SIGNATURE,
        Kind::Bool,
        None,
        Some("false"),
        "imports require a signature by a trusted key",
    ),
    k(
        WEBHOOKS,
        Kind::Webhooks,
        None,
        Some(""),
        "export-ready webhooks: a list of {url, secretFile, caFile} (caFile: PEM CA bundle for an https url)",
    ),
    k(
        NATS_URL,
        Kind::Url,
        None,
        None,
        "NATS server for export-ready events",
    ),
    k(
        NOTIFY_POLL,
        INTERVAL,
        None,
        Some("00:00:05"),
        "how often serve looks for new emissions to deliver",
    ),
    k(
        NOTIFY_MAX_IN_FLIGHT,
        Kind::Count,
        None,
        Some("32"),
        "sends one notification runner has in flight at once (notify run, serve), 1 to 1024",
    ),
    k(
        LEDGER_DIR,
        Kind::Path,
        Some("AIRLOCK_LEDGER_DIR"),
        None,
        "directory of the node ledgers serve offers (<node>.alwl); unset: no ledger endpoints",
    ),
    k(
        LEDGER_DURABILITY,
        Kind::Durability,
        None,
        Some("local"),
        "what a ledger append waits for: local (fdatasync), regional or global (PostgreSQL)",
    ),
    k(
        LEDGER_POSTGRES,
        Kind::Text,
        Some("AIRLOCK_LEDGER_POSTGRES"),
        None,
        "PostgreSQL URL that confirms REGIONAL/GLOBAL ledger durability",
    ),
];

pub const HLC_ENABLED: &str = "scheduler.hlc.enabled";
pub const NODE_ID: &str = "scheduler.hlc.nodeId";
pub const MAX_CLOCK_SKEW: &str = "scheduler.hlc.maxClockSkew";
pub const PERSISTENCE_INTERVAL: &str = "scheduler.hlc.persistenceInterval";
pub const CHAIN_ENABLED: &str = "scheduler.chain.enabled";
pub const BATCH_SIZE: &str = "scheduler.chain.batchSize";
pub const BATCH_INTERVAL: &str = "scheduler.chain.batchInterval";
pub const SIGN_SNAPSHOTS: &str = "scheduler.chain.signSnapshots";
pub const KEY_ID: &str = "scheduler.chain.keyId";
pub const STORE_PATH: &str = "store.path";
pub const OUTBOX_PATH: &str = "outbox.path";
pub const RELAY_LISTEN: &str = "relay.listen";
pub const RELAY_UPSTREAM: &str = "relay.upstreamUrl";
pub const SERVE_LISTEN: &str = "serve.listen";
pub const SERVE_TOKEN_FILE: &str = "serve.tokenFile";
pub const SERVE_MAX_BUNDLE: &str = "serve.maxBundleBytes";
pub const SERVE_VERIFY_INTERVAL: &str = "serve.verifyInterval";
pub const REQUIRE_SIGNATURE: &str = "trust.requireSignature";
pub const WEBHOOKS: &str = "notifications.webhooks";
pub const NATS_URL: &str = "notifications.nats.url";
pub const NOTIFY_POLL: &str = "notifications.pollInterval";
pub const NOTIFY_MAX_IN_FLIGHT: &str = "notifications.maxInFlight";
pub const LEDGER_DIR: &str = "ledger.dir";
pub const LEDGER_DURABILITY: &str = "ledger.durability";
pub const LEDGER_POSTGRES: &str = "ledger.postgresUrl";

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(String),
    Env(&'static str),
    File {
        path: PathBuf,
        line: usize,
    },
    /// The trust store's persistent policy (`airlock keys policy`), for `trust.requireSignature`.
    TrustStore(PathBuf),
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(var) => write!(f, "environment {var}"),
            Source::File { path, line } => write!(f, "{} line {line}", path.shown()),
            Source::TrustStore(path) => {
                write!(f, "trust store {} (airlock keys policy)", path.shown())
            }
            Source::Default => f.write_str("default"),
        }
    }
}

/// The effective value of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub spec: KeySpec,
    pub value: Option<Value>,
    pub source: Source,
}

impl Setting {
    /// The value as shown (`config show`): a store or ledger URL without its password.
    pub fn shown(&self) -> Option<Value> {
        match (&self.value, self.spec.key) {
            (Some(Value::Text(t)), STORE_PATH | LEDGER_POSTGRES) => {
                Some(Value::Text(crate::core::store::postgres::redact(t)))
            }
            (v, _) => v.clone(),
        }
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path} line {line}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{origin}: {key}: {message}")]
    Value {
        origin: String,
        key: String,
        message: String,
    },
    #[error("{path} line {line}: unknown key {key:?}{hint}")]
    UnknownKey {
        path: PathBuf,
        line: usize,
        key: String,
        hint: String,
    },
}

/// What the configuration is made from (the caller collects flags and the environment).
pub struct ConfigInputs<'a> {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// Flags that set keys: (key, value text, flag name).
    pub flags: Vec<(&'static str, String, &'static str)>,
    /// Reads an environment variable (tests pass their own).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The process environment, for [`ConfigInputs::env`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    settings: Vec<Setting>,
    /// The file read (or looked for) and why that one.
    pub file: PathBuf,
    pub file_origin: String,
    pub file_found: bool,
}

/// Largest configuration file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

impl Config {
    /// Layers defaults, the file, the environment and the flags.
    pub fn load(inputs: &ConfigInputs<'_>) -> Result<Config, ConfigError> {
        let mut settings: Vec<Setting> = KEYS
            .iter()
            .map(|spec| default_setting(*spec))
            .collect::<Result<_, _>>()?;
        let (file, file_origin, explicit) = locate_file(inputs, &settings);
        let text = read_file(&file, explicit)?;
        if let Some(text) = &text {
            apply_file(&mut settings, &file, text)?;
        }
        for s in settings.iter_mut() {
            if let Some(var) = s.spec.env {
                if let Some(raw) = (inputs.env)(var) {
                    s.value = Some(parse_from(s.spec, &raw, &format!("environment {var}"))?);
                    s.source = Source::Env(var);
                }
            }
        }
        for (key, raw, flag) in &inputs.flags {
            if let Some(s) = settings.iter_mut().find(|s| s.spec.key == *key) {
                s.value = Some(parse_from(s.spec, raw, &format!("flag {flag}"))?);
                s.source = Source::Flag(flag.to_string());
            }
        }
        derive_defaults(&mut settings);
        Ok(Config {
            settings,
            file,
            file_origin,
            file_found: text.is_some(),
        })
    }

    /// Folds the other sources of the signature policy into `trust.requireSignature`, so the
    /// value shown is the one verify and import apply: any of the environment's
    /// `AIRLOCK_REQUIRE_SIGNATURE` (`env`), this configuration and the trust store's policy
    /// (`store`: its path, when it requires signatures) requiring one makes it required, and the
    /// source is the first that does (none waives another, `core::trust::policy`).
    pub fn fold_signature_policy(
        &mut self,
        env: Option<&str>,
        store: Option<PathBuf>,
    ) -> Result<(), crate::core::trust::TrustError> {
        let env_requires = crate::core::trust::policy::policy(false, env, false)?.require_signature;
        let Some(s) = self
            .settings
            .iter_mut()
            .find(|s| s.spec.key == REQUIRE_SIGNATURE)
        else {
            return Ok(());
        };
        let configured = s.value == Some(Value::Bool(true));
        if env_requires {
            s.source = Source::Env(crate::core::trust::policy::REQUIRE_SIGNATURE_ENV);
        } else if configured {
            return Ok(());
        } else if let Some(path) = store {
            s.source = Source::TrustStore(path);
        } else {
            return Ok(());
        }
        s.value = Some(Value::Bool(true));
        Ok(())
    }

    pub fn settings(&self) -> &[Setting] {
        &self.settings
    }

    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.spec.key == key)
    }

    pub fn duration(&self, key: &str) -> Option<Duration> {
        match self.get(key)?.value {
            Some(Value::Duration(d)) => Some(d),
            _ => None,
        }
    }

    pub fn flag(&self, key: &str) -> Option<bool> {
        match self.get(key)?.value {
            Some(Value::Bool(b)) => Some(b),
            _ => None,
        }
    }

    pub fn number(&self, key: &str) -> Option<u64> {
        match self.get(key)?.value {
            Some(Value::Number(n)) => Some(n),
            _ => None,
        }
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        match &self.get(key)?.value {
            Some(Value::Text(t)) => Some(t),
            _ => None,
        }
    }

    pub fn webhooks(&self) -> &[Webhook] {
        match self.get(WEBHOOKS).and_then(|s| s.value.as_ref()) {
            Some(Value::Webhooks(w)) => w,
            _ => &[],
        }
    }

    /// `config show --json`: `{file, fileFound, settings: [{key, value, source}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let settings: Vec<serde_json::Value> = self
            .settings
            .iter()
            .map(|s| {
                serde_json::json!({
                    "key": s.spec.key,
                    "value": s.shown().map(|v| v.to_json()),
                    "source": s.source.to_string(),
                })
            })
            .collect();
        serde_json::json!({
            "file": crate::core::text::visible_path(&self.file),
            "fileOrigin": self.file_origin,
            "fileFound": self.file_found,
            "settings": settings,
        })
    }
}

fn parse_from(spec: KeySpec, raw: &str, origin: &str) -> Result<Value, ConfigError> {
    value::parse_text(spec.kind, raw).map_err(|message| ConfigError::Value {
        origin: origin.to_string(),
        key: spec.key.to_string(),
        message,
    })
}

fn default_setting(spec: KeySpec) -> Result<Setting, ConfigError> {
    let value = match (spec.default, spec.kind) {
        (Some(_), Kind::Webhooks) => Some(Value::Webhooks(Vec::new())),
        (Some(d), _) => Some(parse_from(spec, d, "built-in default")?),
        (None, _) => None,
    };
    Ok(Setting {
        spec,
        value,
        source: Source::Default,
    })
}

/// Defaults that depend on the machine: the node id (host name) and the store and outbox paths.
fn derive_defaults(settings: &mut [Setting]) {
    for s in settings.iter_mut().filter(|s| s.value.is_none()) {
        s.value = match s.spec.key {
            NODE_ID => Some(Value::Text(crate::core::paths::node_id(None))),
            STORE_PATH => Some(Value::Text(
                crate::core::paths::db_path(None).display().to_string(),
            )),
            OUTBOX_PATH => Some(Value::Text(
                crate::core::paths::home_dir()
                    .join(".statehub/edge-outbox.sqlite3")
                    .display()
                    .to_string(),
            )),
            _ => None,
        };
    }
}

/// The file: `--config`, else `$AIRLOCK_CONFIG`, else `etc/airlock.yaml` beside the store (the store
/// as given by flag, environment or default: the file cannot move itself).
fn locate_file(inputs: &ConfigInputs<'_>, _settings: &[Setting]) -> (PathBuf, String, bool) {
    if let Some(f) = &inputs.file {
        return (f.clone(), "flag --config".into(), true);
    }
    if let Some(f) = (inputs.env)("AIRLOCK_CONFIG") {
        return (PathBuf::from(f), "environment AIRLOCK_CONFIG".into(), true);
    }
    let store = inputs
        .flags
        .iter()
        .find(|(k, _, _)| *k == STORE_PATH)
        .map(|(_, v, _)| PathBuf::from(v))
        .or_else(|| (inputs.env)("AIRLOCK_DB").map(PathBuf::from))
        .unwrap_or_else(|| crate::core::paths::db_path(None));
    (
        default_file_beside(&store),
        "beside the store".into(),
        false,
    )
}

/// `<dir of the store>/etc/airlock.yaml`; for a store given by URL (PostgreSQL), which has no
/// directory, `etc/airlock.yaml` in the working directory.
pub fn default_file_beside(store: &Path) -> PathBuf {
    if store.to_str().is_some_and(|s| s.contains("://")) {
        return PathBuf::from("etc/airlock.yaml");
    }
    store
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("etc/airlock.yaml")
}

fn read_file(path: &Path, explicit: bool) -> Result<Option<String>, ConfigError> {
    use std::io::Read;
    let read_err = |message: String| ConfigError::Read {
        path: path.to_path_buf(),
        message,
    };
    // Regular files only: a FIFO or device given as the configuration is refused, not waited on.
    let f = match crate::core::file_input::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(None),
        Err(e) => return Err(read_err(e.to_string())),
    };
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_err(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(read_err(format!(
            "larger than {MAX_FILE_BYTES} bytes; is it a configuration file?"
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        read_err(format!(
            "not UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

fn apply_file(settings: &mut [Setting], path: &Path, text: &str) -> Result<(), ConfigError> {
    let root = yaml::parse(text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: e.line,
        message: e.message,
    })?;
    let Some(root) = root else { return Ok(()) };
    let NodeValue::Map(_) = root.value else {
        return Err(ConfigError::Syntax {
            path: path.to_path_buf(),
            line: root.line,
            message: "the file must be a mapping of sections (scheduler:, serve:, ...)".into(),
        });
    };
    walk(settings, path, "", &root)
}

fn walk(
    settings: &mut [Setting],
    path: &Path,
    prefix: &str,
    node: &Node,
) -> Result<(), ConfigError> {
    let NodeValue::Map(entries) = &node.value else {
        return Err(ConfigError::Value {
            origin: format!("{} line {}", path.shown(), node.line),
            key: prefix.to_string(),
            message: "is a section: expects a mapping of keys".into(),
        });
    };
    for (name, line, child) in entries {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(s) = settings.iter_mut().find(|s| s.spec.key == key) {
            s.value = Some(
                value::parse_node(s.spec.kind, child).map_err(|(l, message)| {
                    ConfigError::Value {
                        origin: format!("{} line {l}", path.shown()),
                        key: key.clone(),
                        message,
                    }
                })?,
            );
            s.source = Source::File {
                path: path.to_path_buf(),
                line: *line,
            };
        } else if KEYS.iter().any(|s| s.key.starts_with(&format!("{key}."))) {
            walk(settings, path, &key, child)?;
        } else {
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                line: *line,
                key,
                hint: known_under(prefix),
            });
        }
    }
    Ok(())
}

/// "; known keys here: a, b" for an unknown-key message.
fn known_under(prefix: &str) -> String {
    let lead = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}.")
    };
    let mut names: Vec<&str> = KEYS
        .iter()
        .filter_map(|s| s.key.strip_prefix(lead.as_str()))
        .map(|rest| rest.split('.').next().unwrap_or(rest))
        .collect();
    names.dedup();
    format!("; known keys here: {}", names.join(", "))
}

#[cfg(test)]
mod tests;
