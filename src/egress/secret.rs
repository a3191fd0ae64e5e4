//! Secrets a program can use but never read. The guest sees a placeholder, unique to its run
//! (in `os.environ[NAME]`); the host puts the real value in place of the placeholder in the
//! target, headers (a `Basic` credential decoded first) and body of a request to one of the
//! secret's hosts, and nowhere else; and puts the placeholder back in place of the value in
//! every response before the guest reads it. The values never enter a worker.

use std::sync::Arc;

use aho_corasick::AhoCorasick;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::mask::{Masker, replace};
use super::message::EgressRequest;
use super::rule::{AllowList, RuleError};

/// The longest value a secret may have.
pub const MAX_SECRET_BYTES: usize = 8 << 10;
/// Secrets a run may carry at most.
pub const MAX_SECRETS: usize = 32;

/// One secret of a run.
#[derive(Clone)]
pub struct Secret {
    /// The environment variable the guest reads its placeholder from.
    pub name: String,
    value: String,
    hosts: AllowList,
    /// What the guest sees instead of the value.
    pub placeholder: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

/// Why a secret is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Its name is not an environment variable's.
    #[error("secret name {0:?} is not a valid environment variable name")]
    BadName(String),
    /// Its value is empty, too long or holds a line break.
    #[error("secret {0}: the value must be 1 to {MAX_SECRET_BYTES} bytes without line breaks")]
    BadValue(String),
    /// It names no host, or a host rule that does not parse.
    #[error("secret {name}: {why}")]
    BadHosts {
        /// The secret.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// More than [`MAX_SECRETS`].
    #[error("at most {MAX_SECRETS} secrets a run")]
    TooMany,
}

/// Where a request's secret comes from.
#[derive(Clone)]
pub enum SecretSource {
    /// The request sends the value and its hosts.
    Given {
        /// The value.
        value: String,
        /// Where it may go.
        hosts: Vec<String>,
    },
    /// The operator defines it (`--egress-secrets-file`), by this name.
    Operator(String),
}

/// A run's secrets, with what finds their placeholders in a request (built with them: 32
/// patterns of ~40 bytes) and what finds their values in a response (built at its first use).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    list: Vec<Secret>,
    placeholders: Option<AhoCorasick>,
    masker: Arc<Masker>,
}

/// What substituting a request did: the secrets put in, and those whose placeholder went to
/// a host not theirs (sent as the placeholder; the audit line names them).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Substituted {
    /// Secrets whose value went to their own host.
    pub used: Vec<String>,
    /// Secrets whose placeholder was sent to another host.
    pub misdirected: Vec<String>,
}

/// A request that would be larger than its bound once the values were put in (a value may
/// be 8 KiB, its placeholder ~40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLargeWithValues;

impl Secrets {
    /// The secrets `(name, value, hosts)`, each with a fresh placeholder.
    pub fn new(items: Vec<(String, String, Vec<String>)>) -> Result<Secrets, SecretError> {
        if items.len() > MAX_SECRETS {
            return Err(SecretError::TooMany);
        }
        let mut out = Vec::with_capacity(items.len());
        for (name, value, hosts) in items {
            let valid = !name.is_empty()
                && !name.as_bytes()[0].is_ascii_digit()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(SecretError::BadName(name));
            }
            if value.is_empty() || value.len() > MAX_SECRET_BYTES || value.contains(['\r', '\n']) {
                return Err(SecretError::BadValue(name));
            }
            if hosts.is_empty() {
                return Err(SecretError::BadHosts {
                    name,
                    why: "`hosts` names no host".into(),
                });
            }
            let hosts = AllowList::parse(&hosts).map_err(|e: RuleError| SecretError::BadHosts {
                name: name.clone(),
                why: e.to_string(),
            })?;
            let placeholder = format!(
                "VIVARIUM_SECRET_{}",
                hex::encode(rand::random::<[u8; 12]>())
            );
            out.push(Secret {
                name,
                value,
                hosts,
                placeholder,
            });
        }
        // Placeholders are one length, random, and never overlap: any match kind finds them.
        let placeholders = (!out.is_empty())
            .then(|| AhoCorasick::new(out.iter().map(|s| &s.placeholder)).ok())
            .flatten();
        let masker = Masker::new(
            out.iter()
                .map(|s| {
                    (
                        s.value.clone().into_bytes(),
                        s.placeholder.clone().into_bytes(),
                    )
                })
                .collect(),
        );
        Ok(Secrets {
            list: out,
            placeholders,
            masker: Arc::new(masker),
        })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `NAME=placeholder` for each.
    pub fn env(&self) -> Vec<(String, String)> {
        self.list
            .iter()
            .map(|s| (s.name.clone(), s.placeholder.clone()))
            .collect()
    }

    /// `env` with each secret's placeholder laid over it: the program sees a placeholder,
    /// never a value, and a caller's variable of a secret's name gives way to it. The one
    /// rule of an execution's environment and a session turn's own variables.
    pub fn lay_over(&self, mut env: Vec<(String, String)>) -> Vec<(String, String)> {
        let placeholders = self.env();
        env.retain(|(k, _)| !placeholders.iter().any(|(n, _)| n == k));
        env.extend(placeholders);
        env
    }

    /// `(secret:NAME, value)` for each: literal secrets of the leakage scan.
    pub fn literals(&self) -> Vec<(String, String)> {
        self.list
            .iter()
            .map(|s| (format!("secret:{}", s.name), s.value.clone()))
            .collect()
    }

    /// What puts each placeholder back in place of its value in a response: shared by every
    /// clone, its automaton built once, at its first use.
    pub fn masker(&self) -> Arc<Masker> {
        self.masker.clone()
    }

    /// Puts each secret's value in place of its placeholder in `req`, when `req` goes to one
    /// of the secret's hosts: one pass over each part. Refused, and `req` left as it was,
    /// when the request could then be larger than `limit` bytes.
    pub fn substitute(
        &self,
        req: &mut EgressRequest,
        limit: u64,
    ) -> Result<Substituted, TooLargeWithValues> {
        let mut done = Substituted::default();
        let Some(ac) = &self.placeholders else {
            return Ok(done);
        };
        // How many times each placeholder is present (one in a `Basic` credential counts
        // twice: its value grows by 4/3 once encoded again).
        let mut counts = vec![0u64; self.list.len()];
        let mut found = |hay: &[u8], weight: u64| {
            for m in ac.find_iter(hay) {
                counts[m.pattern().as_usize()] += weight;
            }
        };
        found(req.target.as_bytes(), 1);
        found(&req.body, 1);
        for (_, v) in &req.headers {
            found(v.as_bytes(), 1);
            if let Some(d) = basic(v) {
                found(&d, 2);
            }
        }
        let permitted: Vec<bool> = self
            .list
            .iter()
            .zip(&counts)
            .map(|(s, n)| *n > 0 && s.hosts.permits(&req.host, req.port))
            .collect();
        let mut grown = 0u64;
        for (s, (n, ok)) in self.list.iter().zip(counts.iter().zip(&permitted)) {
            if *ok {
                done.used.push(s.name.clone());
                grown = grown.saturating_add(n.saturating_mul(s.value.len() as u64));
            } else if *n > 0 {
                done.misdirected.push(s.name.clone());
            }
        }
        if done.used.is_empty() {
            return Ok(done);
        }
        // Bounded before anything is built.
        if req.size().saturating_add(grown) > limit {
            return Err(TooLargeWithValues);
        }
        let with = |i: usize| permitted[i].then(|| self.list[i].value.as_bytes());
        req.target = text(replace(ac, req.target.as_bytes(), with));
        req.body = replace(ac, &req.body, with);
        for (_, value) in req.headers.iter_mut() {
            if let Some(decoded) = basic(value).filter(|d| ac.is_match(d)) {
                *value = format!("Basic {}", STANDARD.encode(replace(ac, &decoded, with)));
            } else {
                *value = text(replace(ac, value.as_bytes(), with));
            }
        }
        Ok(done)
    }
}

/// The decoded credential of a `Basic` authorization value.
fn basic(value: &str) -> Option<Vec<u8>> {
    let b64 = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    STANDARD.decode(b64.trim()).ok()
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::super::Scheme;
    use super::*;

    fn req(host: &str, target: &str, headers: &[(&str, &str)], body: &str) -> EgressRequest {
        EgressRequest {
            scheme: Scheme::Https,
            host: host.into(),
            port: 443,
            method: "POST".into(),
            target: target.into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_value_goes_only_to_its_hosts_and_comes_back_masked() {
        let s = Secrets::new(vec![(
            "TOKEN".into(),
            "s3cr3t-value".into(),
            vec!["api.test".into()],
        )])
        .unwrap();
        let p = s.env()[0].1.clone();
        let basic = format!("Basic {}", STANDARD.encode(format!("me:{p}")));
        let mut r = req(
            "api.test",
            &format!("/q?k={p}"),
            &[("Authorization", &format!("Bearer {p}")), ("X-B", &basic)],
            &format!("{{\"t\":\"{p}\"}}"),
        );
        let done = s.substitute(&mut r, 1 << 20).unwrap();
        assert_eq!(done.used, vec!["TOKEN"]);
        assert_eq!(r.target, "/q?k=s3cr3t-value");
        assert_eq!(r.headers[0].1, "Bearer s3cr3t-value");
        assert_eq!(
            r.headers[1].1,
            format!("Basic {}", STANDARD.encode("me:s3cr3t-value"))
        );
        assert_eq!(r.body, b"{\"t\":\"s3cr3t-value\"}");

        let mut elsewhere = req("evil.test", "/", &[("Authorization", &p)], "");
        let done = s.substitute(&mut elsewhere, 1 << 20).unwrap();
        assert_eq!(done.misdirected, vec!["TOKEN"]);
        assert_eq!(elsewhere.headers[0].1, p);

        let mut room = |_| true;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut b = super::super::mask::Bounds::new(1000, deadline, &mut room);
        let mut out = Vec::new();
        s.masker()
            .mask(b"echo: s3cr3t-value!", &mut out, &mut b)
            .unwrap();
        assert_eq!(out, format!("echo: {p}!").into_bytes());
    }

    #[test]
    fn values_put_in_are_bounded_before_they_are_built() {
        let value = "v".repeat(MAX_SECRET_BYTES);
        let s = Secrets::new(vec![
            ("BIG".into(), value.clone(), vec!["api.test".into()]),
            (
                "SMALL".into(),
                "tiny-value".into(),
                vec!["other.test".into()],
            ),
        ])
        .unwrap();
        let (big, small) = (s.env()[0].1.clone(), s.env()[1].1.clone());
        // 100 placeholders of ~40 bytes: ~4 KB as written, ~800 KiB with the values in.
        let body = format!("{big}{small}").repeat(100);
        let mut r = req("api.test", "/", &[], &body);
        assert_eq!(s.substitute(&mut r, 64 << 10), Err(TooLargeWithValues));
        assert_eq!(r.body, body.as_bytes());
        let done = s.substitute(&mut r, 1 << 20).unwrap();
        assert_eq!(done.used, vec!["BIG"]);
        assert_eq!(done.misdirected, vec!["SMALL"]);
        assert_eq!(r.body, format!("{value}{small}").repeat(100).as_bytes());
    }

    #[test]
    fn bad_secrets_are_named() {
        let one = |n: &str, v: &str, h: &[&str]| {
            Secrets::new(vec![(
                n.into(),
                v.into(),
                h.iter().map(|s| s.to_string()).collect(),
            )])
        };
        assert!(matches!(
            one("1A", "v", &["a.test"]),
            Err(SecretError::BadName(_))
        ));
        assert!(matches!(
            one("A", "", &["a.test"]),
            Err(SecretError::BadValue(_))
        ));
        assert!(matches!(
            one("A", "x\r\ny", &["a.test"]),
            Err(SecretError::BadValue(_))
        ));
        assert!(matches!(
            one("A", "v", &[]),
            Err(SecretError::BadHosts { .. })
        ));
        assert!(matches!(
            one("A", "v", &["http://a"]),
            Err(SecretError::BadHosts { .. })
        ));
    }
}
