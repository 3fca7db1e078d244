//! Where notifications go: the configuration keys `notifications.webhooks: [{url, secretFile,
//! caFile}]` and `notifications.nats: {url}` as a plain struct (filled by the flags of `notify run`
//! or the YAML file). Webhooks are off unless configured (air gap), each with its own secret file.
//!
//! TLS (`https://` endpoints): with `caFile`, that PEM bundle is the only trust anchor of the
//! endpoint (a private CA on an air-gapped network; the system roots are not consulted); without
//! it, the system's roots (`rustls-native-certs`: `SSL_CERT_FILE`/`SSL_CERT_DIR` or the OS store).
//! Both are loaded when the settings are loaded, so a bad or empty bundle stops the run at start.

use super::store::TargetKey;
use crate::core::text::hide_url_passwords;
use std::path::{Path, PathBuf};

/// One webhook endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebhookSettings {
    /// `http://` or `https://` URL that receives the POST.
    pub url: String,
    /// File holding the HMAC secret (surrounding whitespace and the final newline are ignored).
    pub secret_file: PathBuf,
    /// PEM CA bundle trusted (alone) for an `https://` URL; `None`: the system roots.
    pub ca_file: Option<PathBuf>,
}

/// The NATS server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NatsSettings {
    /// e.g. `nats://127.0.0.1:4222`.
    pub url: String,
}

/// Every notification target (config keys under `notifications`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotifySettings {
    pub webhooks: Vec<WebhookSettings>,
    pub nats: Option<NatsSettings>,
    /// `notifications.maxInFlight`: sends in flight at once; `None`: [`DEFAULT_MAX_IN_FLIGHT`].
    pub max_in_flight: Option<u64>,
}

/// The most sends one runner has in flight at once unless configured otherwise
/// (`notifications.maxInFlight`, `notify run --max-in-flight`). After a long outage thousands of
/// deliveries fall due together; each send holds a connection (and a webhook receiver may hold it
/// for the whole attempt timeout), so starting them all at once would open thousands of
/// connections from one process to a few receivers. The rest stay due in the store (unclaimed, so
/// another runner may take them) and are started as sends finish; a receiver that hangs takes one
/// slot for at most the attempt timeout, so it holds back the others only when it holds every
/// slot.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 32;

/// The largest `notifications.maxInFlight` accepted: past it the cap would no longer keep one
/// process from opening a flood of connections (and descriptors) after an outage.
pub const MAX_IN_FLIGHT_LIMIT: u64 = 1024;

/// The trust anchors of an `https://` webhook.
#[derive(Clone)]
pub struct TlsRoots {
    /// What they are, for failure reasons: `CA file /etc/airlock/ca.pem` or `the system roots`.
    pub source: String,
    pub certs: Vec<reqwest::Certificate>,
}

impl std::fmt::Debug for TlsRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} certificate(s))", self.source, self.certs.len())
    }
}

/// A webhook with its secret (and, for https, its trust anchors) loaded.
#[derive(Clone)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: Vec<u8>,
    /// `Some` for an `https://` URL.
    pub tls: Option<TlsRoots>,
}

impl std::fmt::Debug for WebhookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookTarget")
            .field("url", &self.url)
            .field("secret", &"[redacted]")
            .field("tls", &self.tls)
            .finish()
    }
}

/// Targets ready to deliver to.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    pub webhooks: Vec<WebhookTarget>,
    pub nats: Option<String>,
    /// Sends in flight at once (at least 1; [`DEFAULT_MAX_IN_FLIGHT`] unless configured).
    pub max_in_flight: usize,
}

impl Targets {
    /// The store keys of every target.
    pub fn keys(&self) -> Vec<TargetKey> {
        let mut keys: Vec<TargetKey> = self
            .webhooks
            .iter()
            .map(|w| TargetKey::webhook(&w.url))
            .collect();
        if let Some(n) = &self.nats {
            keys.push(TargetKey::nats(n));
        }
        keys
    }

    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.nats.is_none()
    }

    pub fn webhook(&self, url: &str) -> Option<&WebhookTarget> {
        self.webhooks.iter().find(|w| w.url == url)
    }
}

/// Why the settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "notifications.webhooks[{index}].url {:?}: {why}",
        hide_url_passwords(url)
    )]
    BadUrl {
        index: usize,
        url: String,
        why: String,
    },
    #[error("notifications.webhooks[{index}].secretFile {path}: {why}")]
    Secret {
        index: usize,
        path: String,
        why: String,
    },
    #[error("notifications.webhooks[{index}].caFile {path}: {why}")]
    CaFile {
        index: usize,
        path: String,
        why: String,
    },
    #[error("notifications.webhooks[{index}].url {:?}: no system CA certificates to verify it with ({why}); give caFile with the receiver's CA bundle (PEM)", hide_url_passwords(url))]
    NoSystemRoots {
        index: usize,
        url: String,
        why: String,
    },
    #[error("notifications.nats.url {:?}: {why}", hide_url_passwords(url))]
    BadNatsUrl { url: String, why: String },
    #[error(
        "notifications.webhooks: {:?} is configured twice",
        hide_url_passwords(url)
    )]
    DuplicateWebhook { url: String },
    #[error("notifications.maxInFlight {given}: give 1 to {MAX_IN_FLIGHT_LIMIT} sends in flight at once (--max-in-flight, or the configuration file)")]
    BadMaxInFlight { given: u64 },
}

/// The largest secret file read.
const SECRET_LIMIT: u64 = 4096;

/// The largest CA bundle read (a bundle of a few private CAs is a few KiB; the Mozilla set ~220 KiB).
const CA_FILE_LIMIT: u64 = 1 << 20;

impl NotifySettings {
    /// The targets the configuration names (`notifications.webhooks`, `notifications.nats.url`).
    pub fn from_config(cfg: &crate::core::config::Config) -> NotifySettings {
        NotifySettings {
            webhooks: cfg
                .webhooks()
                .iter()
                .map(|w| WebhookSettings {
                    url: w.url.clone(),
                    secret_file: PathBuf::from(&w.secret_file),
                    ca_file: w.ca_file.as_ref().map(PathBuf::from),
                })
                .collect(),
            nats: cfg
                .text(crate::core::config::NATS_URL)
                .map(|url| NatsSettings {
                    url: url.to_string(),
                }),
            max_in_flight: cfg.number(crate::core::config::NOTIFY_MAX_IN_FLIGHT),
        }
    }

    /// Fills each target kind the flags left out from `configured` (flags win per kind).
    pub fn or_configured(mut self, configured: NotifySettings) -> NotifySettings {
        if self.webhooks.is_empty() {
            self.webhooks = configured.webhooks;
        }
        if self.nats.is_none() {
            self.nats = configured.nats;
        }
        if self.max_in_flight.is_none() {
            self.max_in_flight = configured.max_in_flight;
        }
        self
    }

    /// Checks the URLs and reads every secret file and CA bundle.
    pub fn load(&self) -> Result<Targets, SettingsError> {
        let max_in_flight = match self.max_in_flight {
            None => DEFAULT_MAX_IN_FLIGHT,
            Some(n @ 1..=MAX_IN_FLIGHT_LIMIT) => n as usize,
            Some(given) => return Err(SettingsError::BadMaxInFlight { given }),
        };
        let mut webhooks: Vec<WebhookTarget> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut system: Option<Result<TlsRoots, String>> = None;
        for (index, w) in self.webhooks.iter().enumerate() {
            if !seen.insert(w.url.as_str()) {
                return Err(SettingsError::DuplicateWebhook { url: w.url.clone() });
            }
            webhooks.push(load_webhook(index, w, &mut system)?);
        }
        let nats = match &self.nats {
            None => None,
            Some(n) => {
                let ok = ["nats://", "tls://", "ws://", "wss://"]
                    .iter()
                    .any(|p| n.url.starts_with(p))
                    || (!n.url.contains("://") && n.url.contains(':'));
                if !ok
                    || !nats_hosts_given(&n.url)
                    || n.url.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(SettingsError::BadNatsUrl {
                        url: n.url.clone(),
                        why: "give nats://HOST:PORT".into(),
                    });
                }
                Some(n.url.clone())
            }
        };
        Ok(Targets {
            webhooks,
            nats,
            max_in_flight,
        })
    }
}

/// Every server of a NATS URL (`nats://HOST:PORT`, `HOST:PORT`, or a comma-separated list of
/// them) names a host: `nats://` or `:4222` alone is refused at start, not found out at each
/// attempt.
fn nats_hosts_given(url: &str) -> bool {
    url.split(',').all(|server| {
        let rest = server.split_once("://").map_or(server, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        !host.is_empty() && !host.starts_with(':')
    })
}

/// Why a webhook URL's own text names no host, when it does not. The URL parser forgives such text
/// for http and https (`http:///x` and `http:x` both become `http://x/`), so the text is checked
/// before it is trusted: `scheme://` must be followed by a host (after any `user@`, before any
/// `:port`, path, query or fragment). The text is first read as the parser reads it: without
/// leading and trailing spaces and control characters, and without any tab or line break (`http://`,
/// a tab and `/x` is `http:///x`, sent to host `x`).
fn hostless(raw: &str) -> Option<String> {
    let fix = "give the receiver's address as http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH \
               (--webhook, or url in notifications.webhooks of the configuration file)";
    let url: String = raw
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!("no \"//\" after the scheme, so no host; {fix}"));
    };
    if scheme.contains(['/', '\\', '?', '#']) {
        return Some(format!("no \"//\" after the scheme, so no host; {fix}"));
    }
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        let read_as = reqwest::Url::parse(raw)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| format!(" (it would be sent to host {h:?})"))
            })
            .unwrap_or_default();
        return Some(format!(
            "no host between \"{scheme}://\" and the path{read_as}; {fix}"
        ));
    }
    None
}

/// One webhook: URL checked, secret read, trust anchors loaded for https (the system roots once
/// per load, in `system`).
fn load_webhook(
    index: usize,
    w: &WebhookSettings,
    system: &mut Option<Result<TlsRoots, String>>,
) -> Result<WebhookTarget, SettingsError> {
    let bad = |why: &str| SettingsError::BadUrl {
        index,
        url: w.url.clone(),
        why: why.into(),
    };
    if let Some(why) = hostless(&w.url) {
        return Err(bad(&why));
    }
    if let Some((at, c)) = w.url.char_indices().find(|(_, c)| c.is_control()) {
        // The URL parser drops tabs and line breaks and percent-encodes the rest: the address
        // used would not be the text configured (and two texts of one address two targets).
        return Err(bad(&format!(
            "holds the control character {:?} at byte {at}; give the URL as printable text \
             (percent-encode what must be sent, e.g. %1B)",
            c
        )));
    }
    let parsed = reqwest::Url::parse(&w.url).map_err(|e| bad(&e.to_string()))?;
    let https = match parsed.scheme() {
        "https" => true,
        "http" => false,
        _ => return Err(bad("give an http:// or https:// URL with a host")),
    };
    if parsed.host().is_none() {
        return Err(bad("give an http:// or https:// URL with a host"));
    }
    let shown = |p: &Path| crate::core::text::visible_path(p);
    let secret = read_secret(&w.secret_file).map_err(|why| SettingsError::Secret {
        index,
        path: shown(&w.secret_file),
        why,
    })?;
    let tls =
        match (&w.ca_file, https) {
            (Some(ca), false) => {
                return Err(SettingsError::CaFile {
                    index,
                    path: shown(ca),
                    why: "caFile applies to an https:// url only (this one is http://)".into(),
                })
            }
            (Some(ca), true) => Some(read_ca_file(ca).map_err(|why| SettingsError::CaFile {
                index,
                path: shown(ca),
                why,
            })?),
            (None, true) => Some(system.get_or_insert_with(system_roots).clone().map_err(
                |why| SettingsError::NoSystemRoots {
                    index,
                    url: w.url.clone(),
                    why,
                },
            )?),
            (None, false) => None,
        };
    Ok(WebhookTarget {
        url: w.url.clone(),
        secret,
        tls,
    })
}

/// The certificates of a PEM bundle (at least one; bounded read).
fn read_ca_file(path: &Path) -> Result<TlsRoots, String> {
    use std::io::Read;
    let f = crate::core::file_input::open_regular(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(CA_FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > CA_FILE_LIMIT {
        return Err(format!(
            "larger than {CA_FILE_LIMIT} bytes; give the PEM bundle of the CA(s) that sign the receiver's certificate"
        ));
    }
    let certs = reqwest::Certificate::from_pem_bundle(&bytes)
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certs.is_empty() {
        return Err(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the receiver's CA bundle"
                .into(),
        );
    }
    Ok(TlsRoots {
        source: format!("CA file {}", crate::core::text::visible_path(path)),
        certs,
    })
}

/// The system's roots (`SSL_CERT_FILE`/`SSL_CERT_DIR`, else the OS store), at least one.
fn system_roots() -> Result<TlsRoots, String> {
    let found = rustls_native_certs::load_native_certs().map_err(|e| e.to_string())?;
    let certs: Vec<reqwest::Certificate> = found
        .iter()
        .filter_map(|c| reqwest::Certificate::from_der(c.as_ref()).ok())
        .collect();
    if certs.is_empty() {
        return Err("the system store is empty".into());
    }
    Ok(TlsRoots {
        source: "the system roots".into(),
        certs,
    })
}

fn read_secret(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = crate::core::file_input::open_regular(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(SECRET_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > SECRET_LIMIT {
        return Err(format!(
            "larger than {SECRET_LIMIT} bytes; a secret file holds one secret"
        ));
    }
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() {
        return Err("is empty; put the shared webhook secret in it".into());
    }
    Ok(trimmed.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_trimmed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        std::fs::write(&f, "whsec-1\n").unwrap();
        let s = NotifySettings {
            webhooks: vec![WebhookSettings {
                url: "http://127.0.0.1:9/hook".into(),
                secret_file: f.clone(),
                ca_file: None,
            }],
            nats: Some(NatsSettings {
                url: "nats://127.0.0.1:4222".into(),
            }),
            max_in_flight: None,
        };
        let t = s.load().unwrap();
        assert_eq!(t.webhooks[0].secret, b"whsec-1");
        assert_eq!(t.keys().len(), 2);
        assert!(!format!("{:?}", t).contains("whsec"));
        std::fs::write(&f, "\n").unwrap();
        assert!(s.load().unwrap_err().to_string().contains("is empty"));
        let mut bad = s.clone();
        bad.webhooks[0].url = "ftp://x/".into();
        assert!(bad
            .load()
            .unwrap_err()
            .to_string()
            .contains("webhooks[0].url"));
        std::fs::write(&f, "whsec-1\n").unwrap();
        for url in ["nats://", "nats://:4222", ":4222", "nats://h:4222,nats://"] {
            let mut bad = s.clone();
            bad.nats = Some(NatsSettings { url: url.into() });
            let e = bad.load().unwrap_err().to_string();
            assert!(e.contains("notifications.nats.url"), "{url}: {e}");
        }
        for url in [
            "nats://h:4222",
            "h:4222",
            "nats://u:p@h:4222",
            "tls://a:1,tls://b:2",
        ] {
            let mut good = s.clone();
            good.nats = Some(NatsSettings { url: url.into() });
            assert!(good.load().is_ok(), "{url}");
        }
        // A URL whose text names no host is refused, though the parser would read a host into it.
        for url in [
            "http:///x",
            "https:///x/y",
            "http:x",
            "http:/x",
            "http://@/x",
            "http://:8080/x",
            "http://\\x/",
            "http://?q",
            // The parser drops tabs and line breaks: these are http:///x, sent to host "x".
            "http://\t/x",
            "http://\n/x",
            "http://\r\n/x",
        ] {
            let mut bad = s.clone();
            bad.webhooks[0].url = url.into();
            let e = bad.load().unwrap_err().to_string();
            assert!(
                e.contains("webhooks[0].url") && e.contains("host") && e.contains("HOST[:PORT]"),
                "{url}: {e}"
            );
        }
        let mut bad = s.clone();
        bad.webhooks[0].url = "http:///x".into();
        let e = bad.load().unwrap_err().to_string();
        assert!(
            e.contains("no host between \"http://\" and the path"),
            "{e}"
        );
        for url in [
            "http://h/x",
            "http://u:p@h:8080/x?q#f",
            "HTTP://H",
            "http://[::1]:9/x",
        ] {
            let mut good = s.clone();
            good.webhooks[0].url = url.into();
            assert!(good.load().is_ok(), "{url}");
        }
        let mut bad = s.clone();
        bad.webhooks[0].secret_file = dir.path().join("missing");
        assert!(bad.load().unwrap_err().to_string().contains("secretFile"));
    }

    #[test]
    fn ca_files_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("s");
        std::fs::write(&secret, "whsec-1").unwrap();
        let ca = dir.path().join("ca.pem");
        let hook = |url: &str, ca_file: Option<&Path>| NotifySettings {
            webhooks: vec![WebhookSettings {
                url: url.into(),
                secret_file: secret.clone(),
                ca_file: ca_file.map(Path::to_path_buf),
            }],
            nats: None,
            max_in_flight: None,
        };
        let err = |s: NotifySettings| s.load().unwrap_err().to_string();
        // caFile on http:// is a mistake, not ignored.
        std::fs::write(&ca, "not pem\n").unwrap();
        assert!(err(hook("http://h/x", Some(&ca))).contains("https:// url only"));
        // A file without a certificate, a missing one, one too large.
        let e = err(hook("https://h/x", Some(&ca)));
        assert!(
            e.contains("webhooks[0].caFile") && e.contains("no PEM certificate"),
            "{e}"
        );
        assert!(err(hook("https://h/x", Some(&dir.path().join("none")))).contains("caFile"));
        std::fs::write(&ca, vec![b'A'; (CA_FILE_LIMIT + 1) as usize]).unwrap();
        assert!(err(hook("https://h/x", Some(&ca))).contains("larger than"));
        // A damaged certificate block.
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(err(hook("https://h/x", Some(&ca))).contains("caFile"));
        // A real one loads as the only anchor of that endpoint.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        std::fs::write(&ca, params.self_signed(&key).unwrap().pem()).unwrap();
        let t = hook("https://h/x", Some(&ca)).load().unwrap();
        let tls = t.webhooks[0].tls.as_ref().unwrap();
        assert_eq!(tls.certs.len(), 1);
        assert!(tls.source.contains("ca.pem"), "{}", tls.source);
        assert!(hook("http://h/x", None).load().unwrap().webhooks[0]
            .tls
            .is_none());
        assert!(err(hook("gopher://h/x", None)).contains("https://"));
    }
}
