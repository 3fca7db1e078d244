//! The route table (SPEC section 9, seed statehub-offline-write-buffer): which requests the relay may
//! queue while the upstream is down. This is the one place the three tables live; everything else
//! (relay, docs, tests) reads [`ROUTES`] or calls [`classify`].

use serde::Serialize;

/// What the relay may do with a request while the upstream is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum RouteClass {
    /// Append-only writes: queued, replayed with their Idempotency-Key.
    #[serde(rename = "append-only")]
    AppendOnly,
    /// Replace-style writes: queued; a replay conflict (409/422) is kept for review, never overwritten.
    #[serde(rename = "replace-style")]
    ReplaceStyle,
    /// Everything else: forwarded while the upstream answers, `503` during an outage.
    #[serde(rename = "online-only")]
    OnlineOnly,
}

impl RouteClass {
    /// The wire name stored in the outbox and sent in receipts (`append-only`, `replace-style`,
    /// `online-only`).
    pub fn as_str(self) -> &'static str {
        match self {
            RouteClass::AppendOnly => "append-only",
            RouteClass::ReplaceStyle => "replace-style",
            RouteClass::OnlineOnly => "online-only",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<RouteClass> {
        match s {
            "append-only" => Some(RouteClass::AppendOnly),
            "replace-style" => Some(RouteClass::ReplaceStyle),
            "online-only" => Some(RouteClass::OnlineOnly),
            _ => None,
        }
    }

    /// Whether writes of this class may be queued during an outage.
    pub fn is_queueable(self) -> bool {
        !matches!(self, RouteClass::OnlineOnly)
    }
}

impl std::fmt::Display for RouteClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One queueable route: method, path pattern (`{id}` matches one non-empty path segment), class.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RouteRule {
    pub method: &'static str,
    pub pattern: &'static str,
    #[serde(rename = "routeClass")]
    pub class: RouteClass,
    pub note: &'static str,
}

const fn rule(
    method: &'static str,
    pattern: &'static str,
    class: RouteClass,
    note: &'static str,
) -> RouteRule {
    RouteRule {
        method,
        pattern,
        class,
        note,
    }
}

/// The seed's queueable routes. A request that matches none of them is online-only (this covers
/// the seed's third table: DELETE endpoints, sync/import/ingest, sweeps, exports, admin, reads).
pub const ROUTES: &[RouteRule] = &[
    rule(
        "POST",
        "/progress/",
        RouteClass::AppendOnly,
        "Session-close progress events.",
    ),
    rule(
        "POST",
        "/messages/",
        RouteClass::AppendOnly,
        "Agent coordination messages.",
    ),
    rule(
        "PATCH",
        "/messages/{id}/read",
        RouteClass::AppendOnly,
        "Safe only when the message id is already known.",
    ),
    rule(
        "POST",
        "/token-events/",
        RouteClass::AppendOnly,
        "Token accounting events.",
    ),
    rule(
        "POST",
        "/token-events/upsert",
        RouteClass::AppendOnly,
        "Source-id based token upsert.",
    ),
    rule(
        "POST",
        "/decisions/",
        RouteClass::AppendOnly,
        "Queue only when the caller does not need the generated id immediately.",
    ),
    rule(
        "PATCH",
        "/tasks/{id}",
        RouteClass::ReplaceStyle,
        "Task status and metadata updates.",
    ),
    rule(
        "POST",
        "/tasks/bulk-status-sync",
        RouteClass::ReplaceStyle,
        "Ordered batch; future coalescing may decompose by task.",
    ),
    rule(
        "PATCH",
        "/decisions/{id}",
        RouteClass::ReplaceStyle,
        "Decision field update.",
    ),
    rule(
        "POST",
        "/decisions/{id}/resolve",
        RouteClass::ReplaceStyle,
        "Decision resolution.",
    ),
    rule(
        "PATCH",
        "/workplans/{id}",
        RouteClass::ReplaceStyle,
        "Workplan lifecycle/status updates.",
    ),
    rule(
        "PATCH",
        "/workstreams/{id}",
        RouteClass::ReplaceStyle,
        "Legacy alias for workplan update.",
    ),
];

/// The result of classifying one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    pub class: RouteClass,
    /// The matching pattern, `None` for online-only requests that match no rule.
    pub pattern: Option<&'static str>,
    /// The resource the request writes, used for per-resource replay ordering: for a pattern with
    /// `{id}`, the path up to and including the id (`/decisions/7/resolve` -> `/decisions/7`);
    /// otherwise the request path itself.
    pub resource_path: String,
}

/// The path without its query string.
pub fn path_only(path_and_query: &str) -> &str {
    path_and_query
        .split_once('?')
        .map(|(p, _)| p)
        .unwrap_or(path_and_query)
}

/// The first `.` or `..` segment of a request path (its query ignored), written out or
/// percent-encoded in any case (`%2e`, `%2E`, `.%2e`, ...), if it has one. A URL parser resolves
/// such segments (RFC 3986 5.2.4), so a request path joined to the upstream's base URL
/// (`http://h/base` + `/../x`) would leave the base path: the relay refuses such paths and
/// `replay::join_url` never joins one. A backslash counts as a separator
/// too (URL parsers treat it as one in `http` URLs).
pub fn dot_segment(path_and_query: &str) -> Option<&str> {
    path_only(path_and_query).split(['/', '\\']).find(|seg| {
        let decoded = seg.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// Classifies `method` + `path` (a query string is ignored). Methods compare case-sensitively as
/// HTTP requires; paths match exactly, segment by segment (a trailing slash matters, as in the
/// seed's table).
pub fn classify(method: &str, path: &str) -> RouteMatch {
    let path = path_only(path);
    for r in ROUTES {
        if r.method != method {
            continue;
        }
        if let Some(resource) = match_pattern(r.pattern, path) {
            return RouteMatch {
                class: r.class,
                pattern: Some(r.pattern),
                resource_path: resource,
            };
        }
    }
    RouteMatch {
        class: RouteClass::OnlineOnly,
        pattern: None,
        resource_path: path.to_string(),
    }
}

/// Matches `path` against `pattern`; on success returns the resource path.
fn match_pattern(pattern: &str, path: &str) -> Option<String> {
    let pat: Vec<&str> = pattern.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    if pat.len() != segs.len() {
        return None;
    }
    let mut resource_end = None;
    for (i, (p, s)) in pat.iter().zip(&segs).enumerate() {
        if *p == "{id}" {
            if s.is_empty() || dot_segment(s).is_some() {
                return None;
            }
            resource_end = Some(i);
        } else if p != s {
            return None;
        }
    }
    Some(match resource_end {
        Some(end) => segs[..=end].join("/"),
        None => path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_route_matches_with_its_class() {
        let cases = [
            ("POST", "/progress/", RouteClass::AppendOnly, "/progress/"),
            ("POST", "/messages/", RouteClass::AppendOnly, "/messages/"),
            (
                "PATCH",
                "/messages/m-1/read",
                RouteClass::AppendOnly,
                "/messages/m-1",
            ),
            (
                "POST",
                "/token-events/",
                RouteClass::AppendOnly,
                "/token-events/",
            ),
            (
                "POST",
                "/token-events/upsert",
                RouteClass::AppendOnly,
                "/token-events/upsert",
            ),
            ("POST", "/decisions/", RouteClass::AppendOnly, "/decisions/"),
            ("PATCH", "/tasks/42", RouteClass::ReplaceStyle, "/tasks/42"),
            (
                "POST",
                "/tasks/bulk-status-sync",
                RouteClass::ReplaceStyle,
                "/tasks/bulk-status-sync",
            ),
            (
                "PATCH",
                "/decisions/d7",
                RouteClass::ReplaceStyle,
                "/decisions/d7",
            ),
            (
                "POST",
                "/decisions/d7/resolve",
                RouteClass::ReplaceStyle,
                "/decisions/d7",
            ),
            (
                "PATCH",
                "/workplans/wp-1",
                RouteClass::ReplaceStyle,
                "/workplans/wp-1",
            ),
            (
                "PATCH",
                "/workstreams/ws-1",
                RouteClass::ReplaceStyle,
                "/workstreams/ws-1",
            ),
        ];
        assert_eq!(cases.len(), ROUTES.len());
        for (m, p, class, resource) in cases {
            let r = classify(m, p);
            assert_eq!(r.class, class, "{m} {p}");
            assert_eq!(r.resource_path, resource, "{m} {p}");
            assert!(r.pattern.is_some());
        }
        // The query string is ignored for matching and resource paths.
        assert_eq!(
            classify("PATCH", "/tasks/42?x=1").resource_path,
            "/tasks/42"
        );
    }

    #[test]
    fn unlisted_requests_are_online_only() {
        for (m, p) in [
            ("DELETE", "/tasks/42"),
            ("DELETE", "/messages/m-1"),
            ("GET", "/progress/"),
            ("PUT", "/tasks/42"),
            ("POST", "/repos/sync"),
            ("POST", "/import/"),
            ("POST", "/consistency/sweep"),
            ("POST", "/admin/bootstrap"),
            ("POST", "/progress"),
            ("PATCH", "/tasks/"),
            ("PATCH", "/tasks/1/2"),
            ("PATCH", "/messages//read"),
            ("PATCH", "/messages/../read"),
            ("post", "/progress/"),
        ] {
            let r = classify(m, p);
            assert_eq!(r.class, RouteClass::OnlineOnly, "{m} {p}");
            assert_eq!(r.pattern, None);
        }
    }
}
