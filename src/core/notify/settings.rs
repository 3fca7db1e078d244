//! Where notifications go: the configuration keys `notifications.webhooks: [{url, secretFile}]` and
//! `notifications.nats: {url}` as a plain struct (filled by flags now, by the YAML file later).
//! Webhooks are off unless configured (air gap), each with its own secret file.

use super::store::TargetKey;
use std::path::{Path, PathBuf};

/// One webhook endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebhookSettings {
    /// `http://` URL that receives the POST (this build has no TLS client).
    pub url: String,
    /// File holding the HMAC secret (surrounding whitespace and the final newline are ignored).
    pub secret_file: PathBuf,
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
}

/// A webhook with its secret loaded.
#[derive(Clone)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for WebhookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookTarget")
            .field("url", &self.url)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// Targets ready to deliver to.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    pub webhooks: Vec<WebhookTarget>,
    pub nats: Option<String>,
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
    #[error("notifications.webhooks[{index}].url {url:?}: {why}")]
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
    #[error("notifications.nats.url {url:?}: {why}")]
    BadNatsUrl { url: String, why: String },
    #[error("notifications.webhooks: {url:?} is configured twice")]
    DuplicateWebhook { url: String },
}

/// The largest secret file read.
const SECRET_LIMIT: u64 = 4096;

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
                })
                .collect(),
            nats: cfg
                .text(crate::core::config::NATS_URL)
                .map(|url| NatsSettings {
                    url: url.to_string(),
                }),
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
        self
    }

    /// Checks the URLs and reads every secret file.
    pub fn load(&self) -> Result<Targets, SettingsError> {
        let mut webhooks: Vec<WebhookTarget> = Vec::new();
        for (index, w) in self.webhooks.iter().enumerate() {
            let bad = |why: &str| SettingsError::BadUrl {
                index,
                url: w.url.clone(),
                why: why.into(),
            };
            let parsed = reqwest::Url::parse(&w.url).map_err(|e| bad(&e.to_string()))?;
            if parsed.scheme() == "https" {
                return Err(bad("this build has no TLS client: give an http:// URL (put a local TLS terminator in front of an https receiver)"));
            }
            if parsed.scheme() != "http" || parsed.host().is_none() {
                return Err(bad("give an http:// URL with a host"));
            }
            if webhooks.iter().any(|x| x.url == w.url) {
                return Err(SettingsError::DuplicateWebhook { url: w.url.clone() });
            }
            let secret = read_secret(&w.secret_file).map_err(|why| SettingsError::Secret {
                index,
                path: crate::core::text::visible(&w.secret_file.display().to_string()).into_owned(),
                why,
            })?;
            webhooks.push(WebhookTarget {
                url: w.url.clone(),
                secret,
            });
        }
        let nats = match &self.nats {
            None => None,
            Some(n) => {
                let ok = ["nats://", "tls://", "ws://", "wss://"]
                    .iter()
                    .any(|p| n.url.starts_with(p))
                    || (!n.url.contains("://") && n.url.contains(':'));
                if !ok || n.url.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(SettingsError::BadNatsUrl {
                        url: n.url.clone(),
                        why: "give nats://HOST:PORT".into(),
                    });
                }
                Some(n.url.clone())
            }
        };
        Ok(Targets { webhooks, nats })
    }
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
            }],
            nats: Some(NatsSettings {
                url: "nats://127.0.0.1:4222".into(),
            }),
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
        let mut bad = s.clone();
        bad.webhooks[0].secret_file = dir.path().join("missing");
        assert!(bad.load().unwrap_err().to_string().contains("secretFile"));
    }
}
