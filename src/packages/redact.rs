//! The package index's credentials never leave: wherever an index URL (or any URL pip or the
//! index printed) is shown, in a response, an error or a log line, its userinfo and query
//! (where index tokens and signed-URL signatures live) are replaced by `***`; the host and
//! path stay, so an operator still sees which index answered.

use std::sync::LazyLock;

use regex::Regex;

use super::PackageSource;

/// A URL in free text: scheme, optional userinfo, host and path, optional query.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"([a-zA-Z][a-zA-Z0-9+.-]*://)",
        r#"([^ \t\r\n"'<>/?#@]*@)?"#,
        r#"([^ \t\r\n"'<>?#]*)"#,
        r#"(\?[^ \t\r\n"'<>#]*)?"#
    ))
    .expect("a valid pattern")
});

/// Secrets shorter than this are not replaced as plain text (a one-letter user name would
/// garble every message); they are still removed from the URLs they are part of.
const MIN_SECRET_CHARS: usize = 4;

/// `url` as it may be shown: `scheme://***@host/path?***`, the userinfo and the query
/// replaced (each only when there was one).
pub fn shown_url(url: &str) -> String {
    URL.replace_all(url, replace_url).into_owned()
}

fn replace_url(c: &regex::Captures<'_>) -> String {
    let mut out = c[1].to_string();
    if c.get(2).is_some() {
        out.push_str("***@");
    }
    out.push_str(&c[3]);
    if c.get(4).is_some() {
        out.push_str("?***");
    }
    out
}

/// `text` (a message or a log line from the resolver, pip or the index) with every URL's
/// userinfo and query replaced, and the configured index's own secrets (its user, password
/// and query values, as written and percent-decoded) wherever they still appear.
pub(super) fn scrub(text: &str, source: &PackageSource) -> String {
    let mut out = shown_url(text);
    for secret in secrets(source) {
        if out.contains(&secret) {
            out = out.replace(&secret, "***");
        }
    }
    out
}

/// The parts of the configured index URL that are secret.
fn secrets(source: &PackageSource) -> Vec<String> {
    let PackageSource::Index(url) = source else {
        return Vec::new();
    };
    let mut raw = Vec::new();
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        raw.extend(userinfo.split(':').map(str::to_string));
    }
    if let Some((_, query)) = rest.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        for pair in query.split('&') {
            raw.push(pair.split_once('=').map_or(pair, |(_, v)| v).to_string());
        }
    }
    let mut all: Vec<String> = Vec::new();
    for s in raw {
        let decoded = percent_encoding::percent_decode_str(&s)
            .decode_utf8_lossy()
            .into_owned();
        all.push(s);
        all.push(decoded);
    }
    all.retain(|s| s.chars().count() >= MIN_SECRET_CHARS);
    // Longest first, so that a secret containing another is replaced whole.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_queries_are_replaced_and_the_host_kept() {
        assert_eq!(
            shown_url("https://user:tok%40en@mirror.example:8443/simple/?token=abc#frag"),
            "https://***@mirror.example:8443/simple/?***#frag"
        );
        assert_eq!(
            shown_url("https://mirror.example/simple"),
            "https://mirror.example/simple"
        );
        let source = PackageSource::Index("https://user1:s3cr%2Ft@mirror/simple/?k=qsecret".into());
        let line = "Looking in indexes: https://user1:****@mirror/simple/?k=qsecret; \
                    user1 with s3cr/t and s3cr%2Ft failed at https://files/x.whl?sig=zzz";
        let out = scrub(line, &source);
        for secret in ["user1", "s3cr/t", "s3cr%2Ft", "qsecret", "zzz"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("https://***@mirror/simple/?***"), "{out}");
    }
}
