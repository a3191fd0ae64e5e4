//! Allow-list rules: `host[:port]`, where host is a name (`api.example.com`), a wildcard for
//! every name below one (`*.example.com`, not `example.com` itself), an IP literal
//! (`203.0.113.7`, `[2001:db8::1]`), or `*` for any host. Names compare case-insensitively
//! and without a trailing dot; without a port, any port matches.

use serde::{Deserialize, Serialize};

/// What a rule's host part matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum HostPattern {
    /// Any host.
    Any,
    /// Exactly this host (lower case, no trailing dot; an IP literal without brackets).
    Exact(String),
    /// Every name ending in `.` + this (lower case).
    Below(String),
}

/// One `host[:port]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRule {
    host: HostPattern,
    port: Option<u16>,
}

/// Why a rule does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("egress rule {rule:?}: {why}")]
pub struct RuleError {
    /// The rule as given.
    pub rule: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// A host as rules compare it: lower case, no trailing dot, no IPv6 brackets.
pub fn normalize_host(host: &str) -> String {
    let h = host.trim_end_matches('.');
    let h = h
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h);
    h.to_ascii_lowercase()
}

/// Whether `host` (normalised) is a host name or an IP literal: what a request may name
/// (a `@`, `/`, `#` or space in it would let a URL built from it point elsewhere).
pub fn valid_host(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok() || valid_name(host)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl HostRule {
    /// Parses one rule.
    pub fn parse(text: &str) -> Result<HostRule, RuleError> {
        let err = |why| RuleError {
            rule: text.to_string(),
            why,
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(err("it is empty"));
        }
        if t.contains("://") || t.contains('/') {
            return Err(err("give a host and an optional port, not a URL"));
        }
        // `[v6]:port`, `[v6]`, `host:port`, `host`; a bare v6 literal has several colons.
        let (host, port) = if let Some(rest) = t.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| err("an unclosed `[`"))?;
            match after.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None if after.is_empty() => (h, None),
                None => return Err(err("text after `]` that is not `:port`")),
            }
        } else if t.matches(':').count() > 1 {
            (t, None)
        } else {
            match t.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (t, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| err("the port is not a number from 1 to 65535"))?,
            ),
        };
        if host.ends_with('.') {
            return Err(err("the host ends with a dot"));
        }
        let host = normalize_host(host);
        let pattern = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if !valid_name(suffix) {
                return Err(err("the name after `*.` is not a host name"));
            }
            HostPattern::Below(suffix.to_string())
        } else if host.parse::<std::net::IpAddr>().is_ok() || valid_name(&host) {
            HostPattern::Exact(host)
        } else {
            return Err(err(
                "the host is not a name, an IP address, `*` or `*.name`",
            ));
        };
        Ok(HostRule {
            host: pattern,
            port,
        })
    }

    /// Whether `host:port` (normalised) matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(h) => h == host,
            HostPattern::Below(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = match &self.host {
            HostPattern::Any => "*".to_string(),
            HostPattern::Exact(h) if h.contains(':') => format!("[{h}]"),
            HostPattern::Exact(h) => h.clone(),
            HostPattern::Below(s) => format!("*.{s}"),
        };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => f.write_str(&host),
        }
    }
}

/// A list of rules: a host is allowed when any matches. Empty allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowList(Vec<HostRule>);

impl AllowList {
    /// The rules of `items` (each one rule), or the first that does not parse.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<AllowList, RuleError> {
        items
            .iter()
            .map(|s| HostRule::parse(s.as_ref()))
            .collect::<Result<_, _>>()
            .map(AllowList)
    }

    /// A comma-separated list (`--egress-allow`).
    pub fn parse_csv(text: &str) -> Result<AllowList, RuleError> {
        let items: Vec<&str> = text.split(',').filter(|s| !s.trim().is_empty()).collect();
        AllowList::parse(&items)
    }

    /// Whether any rule matches `host:port` (`host` as the request names it).
    pub fn permits(&self, host: &str, port: u16) -> bool {
        let host = normalize_host(host);
        self.0.iter().any(|r| r.matches(&host, port))
    }

    /// Whether it allows nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Its rules.
    pub fn rules(&self) -> &[HostRule] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> AllowList {
        AllowList::parse_csv(s).unwrap()
    }

    #[test]
    fn names_wildcards_ports_and_literals_match_as_documented() {
        let l = list("api.example.com, *.data.test:443, 203.0.113.7:8080, [2001:db8::1]");
        assert!(l.permits("API.Example.com.", 80));
        assert!(!l.permits("example.com", 80));
        assert!(l.permits("a.data.test", 443));
        assert!(l.permits("x.y.data.test", 443));
        assert!(!l.permits("a.data.test", 80));
        assert!(!l.permits("data.test", 443));
        assert!(!l.permits("evildata.test", 443));
        assert!(l.permits("203.0.113.7", 8080));
        assert!(!l.permits("203.0.113.7", 80));
        assert!(l.permits("[2001:db8::1]", 443));
        assert!(list("*").permits("anything.org", 1));
        assert!(!AllowList::default().permits("a.test", 80));
        assert_eq!(list("*.a.test:443").rules()[0].to_string(), "*.a.test:443");
    }

    #[test]
    fn a_host_is_a_name_or_an_address_and_nothing_that_reshapes_a_url() {
        for ok in ["api.test", "a-b.c_d.test", "127.0.0.1", "::1"] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in [
            "x@evil.test",
            "evil.test#.a.test",
            "a.test/x",
            "a b",
            "",
            "a..b",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    #[test]
    fn bad_rules_are_named() {
        for bad in [
            "https://a.test",
            "a.test:0",
            "a.test:99999",
            "*.",
            "a b",
            "[::1",
            "a.*.test",
        ] {
            assert!(HostRule::parse(bad).is_err(), "{bad}");
        }
    }
}
