//! The kinds of configuration values and their strict parsers: the seed's `hh:mm:ss` durations,
//! booleans, counts, node ids, listen addresses, URLs, paths and the webhook list.

use super::yaml::{Node, NodeValue};
use serde::Serialize;
use std::time::Duration;

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `hh:mm:ss`; `nonzero` refuses `00:00:00` (intervals).
    Duration {
        nonzero: bool,
    },
    Bool,
    /// A whole number of at least 1.
    Count,
    NodeId,
    /// Free text (a key name or id).
    Text,
    Path,
    /// `host:port` with a literal IP address.
    Listen,
    /// An `http://` or `https://` URL (or `nats://` for NATS).
    Url,
    /// A list of `{url, secretFile, caFile}` mappings (`caFile` optional, https only).
    Webhooks,
    /// A ledger durability level: `local`, `regional` or `global`.
    Durability,
}

/// One webhook endpoint of `notifications.webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub url: String,
    pub secret_file: String,
    /// PEM CA bundle that alone is trusted for this `https://` endpoint (else the system roots).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Duration(Duration),
    Bool(bool),
    Number(u64),
    Text(String),
    Webhooks(Vec<Webhook>),
}

impl Value {
    /// The value as the configuration file would spell it.
    pub fn display(&self) -> String {
        match self {
            Value::Duration(d) => format_duration(*d),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Text(t) => t.clone(),
            Value::Webhooks(w) if w.is_empty() => "[]".into(),
            Value::Webhooks(w) => w
                .iter()
                .map(|h| match &h.ca_file {
                    Some(ca) => format!("{} (secret {}, CA {ca})", h.url, h.secret_file),
                    None => format!("{} (secret {})", h.url, h.secret_file),
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => serde_json::Value::from(*n),
            Value::Webhooks(w) => serde_json::to_value(w).unwrap_or_default(),
            other => serde_json::Value::String(other.display()),
        }
    }
}

/// Parses the seed's duration form `hh:mm:ss` (two digits each; minutes and seconds below 60).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration in the hh:mm:ss form (two digits each, e.g. \"00:00:05\")"
        )
    };
    let b = text.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return Err(bad());
    }
    let two = |i: usize| -> Result<u64, String> {
        let (h, l) = (b[i], b[i + 1]);
        if !h.is_ascii_digit() || !l.is_ascii_digit() {
            return Err(bad());
        }
        Ok(u64::from(h - b'0') * 10 + u64::from(l - b'0'))
    };
    let (h, m, s) = (two(0)?, two(3)?, two(6)?);
    if m > 59 || s > 59 {
        return Err(format!(
            "{text:?}: minutes and seconds must be below 60 (hh:mm:ss)"
        ));
    }
    Ok(Duration::from_secs(h * 3600 + m * 60 + s))
}

/// `hh:mm:ss` of a duration (whole seconds; hours past 99 keep their digits).
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Parses text from an environment variable, a flag or a built-in default.
pub fn parse_text(kind: Kind, text: &str) -> Result<Value, String> {
    match kind {
        Kind::Duration { nonzero } => {
            let d = parse_duration(text)?;
            if nonzero && d.is_zero() {
                return Err(
                    "an interval of 00:00:00 would never run; give at least 00:00:01".into(),
                );
            }
            Ok(Value::Duration(d))
        }
        Kind::Bool => match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("{text:?} is not a boolean; write true or false")),
        },
        Kind::Count => {
            let n = (!text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()))
                .then(|| text.parse::<u64>().ok())
                .flatten()
                .filter(|n| *n >= 1);
            n.map(Value::Number)
                .ok_or_else(|| format!("{text:?} is not a whole number of at least 1"))
        }
        Kind::NodeId => crate::core::hlc::validate_node_id(text)
            .map(|_| Value::Text(text.into()))
            .map_err(|e| e.to_string()),
        Kind::Text | Kind::Path if text.is_empty() => {
            Err("an empty value; give a value or leave the key out".into())
        }
        Kind::Text | Kind::Path => Ok(Value::Text(text.into())),
        Kind::Listen => text
            .parse::<std::net::SocketAddr>()
            .map(|_| Value::Text(text.into()))
            .map_err(|_| {
                format!("{text:?} is not an address:port such as 127.0.0.1:8443 or [::1]:8443")
            }),
        Kind::Durability => match text {
            "local" | "regional" | "global" => Ok(Value::Text(text.into())),
            _ => Err(format!("{text:?}: give local, regional or global")),
        },
        Kind::Url => {
            let ok = ["http://", "https://", "nats://", "tls://"]
                .iter()
                .any(|p| text.starts_with(p) && text.len() > p.len());
            if ok && !text.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Ok(Value::Text(text.into()))
            } else {
                Err(format!("{text:?} is not an http(s):// or nats:// URL"))
            }
        }
        Kind::Webhooks => Err("webhooks are configured in the file only".into()),
    }
}

/// Parses a node of the configuration file. Errors carry the line of the offending node.
pub fn parse_node(kind: Kind, node: &Node) -> Result<Value, (usize, String)> {
    if kind == Kind::Webhooks {
        return parse_webhooks(node);
    }
    let NodeValue::Scalar { text, quoted } = &node.value else {
        return Err((
            node.line,
            "expects a single value, not a list or a mapping".into(),
        ));
    };
    // Booleans and counts must be plain YAML (`true`, `1000`): a quoted "true" is text.
    if matches!(kind, Kind::Bool | Kind::Count) && *quoted {
        return Err((
            node.line,
            format!("{text:?} is quoted; write it without quotes"),
        ));
    }
    if !quoted && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
        return Err((
            node.line,
            "has no value; give one or leave the key out".into(),
        ));
    }
    parse_text(kind, text).map_err(|m| (node.line, m))
}

fn parse_webhooks(node: &Node) -> Result<Value, (usize, String)> {
    let NodeValue::Seq(items) = &node.value else {
        return Err((
            node.line,
            "expects a list of {url, secretFile, caFile} mappings".into(),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let NodeValue::Map(entries) = &item.value else {
            return Err((
                item.line,
                "each webhook is a mapping with url and secretFile".into(),
            ));
        };
        let (mut url, mut secret, mut ca) = (None, None, None);
        for (key, line, value) in entries {
            let kind = match key.as_str() {
                "url" => Kind::Url,
                "secretFile" | "caFile" => Kind::Path,
                other => {
                    return Err((
                        *line,
                        format!("unknown webhook key {other:?}; a webhook has url, secretFile and (for https) caFile"),
                    ))
                }
            };
            let Value::Text(t) = parse_node(kind, value)? else {
                continue;
            };
            match key.as_str() {
                "url" => url = Some(t),
                "secretFile" => secret = Some(t),
                _ => ca = Some(t),
            }
        }
        match (url, secret) {
            (Some(url), Some(secret_file)) => out.push(Webhook {
                url,
                secret_file,
                ca_file: ca,
            }),
            _ => return Err((
                item.line,
                "a webhook needs both url and secretFile (webhooks are signed; SPEC section 10)"
                    .into(),
            )),
        }
    }
    Ok(Value::Webhooks(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_strict_hh_mm_ss() {
        assert_eq!(parse_duration("00:00:05"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("01:02:03"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("99:59:59"), Ok(Duration::from_secs(359_999)));
        for bad in [
            "5s",
            "0:00:05",
            "00:00:5",
            "00:60:00",
            "00:00:60",
            "00:00:05 ",
            "-0:00:05",
            "aa:bb:cc",
            "",
            "00:00:0５",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(format_duration(Duration::from_secs(300)), "00:05:00");
        assert!(parse_text(Kind::Duration { nonzero: true }, "00:00:00").is_err());
        assert!(parse_text(Kind::Duration { nonzero: false }, "00:00:00").is_ok());
    }

    #[test]
    fn scalars_are_strict() {
        assert_eq!(parse_text(Kind::Bool, "true"), Ok(Value::Bool(true)));
        assert!(parse_text(Kind::Bool, "yes").is_err());
        assert_eq!(parse_text(Kind::Count, "1000"), Ok(Value::Number(1000)));
        for bad in ["0", "-1", "+5", "1e3", "", "99999999999999999999999"] {
            assert!(parse_text(Kind::Count, bad).is_err(), "{bad:?}");
        }
        assert!(parse_text(Kind::NodeId, "bad node").is_err());
        assert!(parse_text(Kind::Listen, "localhost:80").is_err());
        assert!(parse_text(Kind::Listen, "[::1]:8443").is_ok());
        assert!(parse_text(Kind::Url, "ftp://x").is_err());
        assert!(parse_text(Kind::Url, "nats://127.0.0.1:4222").is_ok());
    }

    #[test]
    fn webhooks_need_url_and_secret() {
        let t = "- url: https://h/x\n  secretFile: /s\n- url: http://b\n";
        let n = super::super::yaml::parse(t).unwrap().unwrap();
        let (line, msg) = parse_node(Kind::Webhooks, &n).unwrap_err();
        assert_eq!(line, 3);
        assert!(msg.contains("secretFile"));
        let t = "- url: https://h/x\n  secretFile: /s\n- url: https://h/y\n  secretFile: /s\n  caFile: /ca.pem\n";
        let n = super::super::yaml::parse(t).unwrap().unwrap();
        let parsed = parse_node(Kind::Webhooks, &n).unwrap();
        assert_eq!(
            parsed,
            Value::Webhooks(vec![
                Webhook {
                    url: "https://h/x".into(),
                    secret_file: "/s".into(),
                    ca_file: None,
                },
                Webhook {
                    url: "https://h/y".into(),
                    secret_file: "/s".into(),
                    ca_file: Some("/ca.pem".into()),
                }
            ])
        );
        assert_eq!(
            parsed.display(),
            "https://h/x (secret /s), https://h/y (secret /s, CA /ca.pem)"
        );
        assert_eq!(parsed.to_json()[1]["caFile"], "/ca.pem");
        assert!(parsed.to_json()[0].get("caFile").is_none());
        let t = "- url: https://h/x\n  secretFile: /s\n  ca: /c\n";
        let n = super::super::yaml::parse(t).unwrap().unwrap();
        assert!(parse_node(Kind::Webhooks, &n)
            .unwrap_err()
            .1
            .contains("caFile"));
    }
}
