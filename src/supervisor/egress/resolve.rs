//! The performer's resolver: names resolved by the host, every address checked against the
//! server's [`AddressRules`], and only the checked addresses handed to the connector, so the
//! connection goes where the check looked (no window for DNS rebinding between the two).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::egress::AddressRules;
use crate::sync::lock;

/// A name that resolved to an address the server does not connect to, or not at all: found
/// again in reqwest's error chain to name the refusal.
#[derive(Debug, thiserror::Error)]
pub enum AddressRefused {
    /// Resolved to `addr`, which the rules refuse.
    #[error("{name} resolves to {addr}, which this server does not connect to")]
    NotAllowed {
        /// The name.
        name: String,
        /// The refused address.
        addr: IpAddr,
    },
    /// Did not resolve.
    #[error("{name} does not resolve")]
    Unresolved {
        /// The name.
        name: String,
    },
}

/// `--egress-test-resolve`: answers for names, for tests that stand real servers on
/// 127.0.0.1 in for the outside. Each name has a list of answers, taken in turn (the last
/// one repeats): a test of DNS rebinding gives a second answer the first lookup must not
/// let through.
#[derive(Debug, Default)]
pub struct TestAnswers(Mutex<HashMap<String, Answers>>);

/// A name's answers, and which is next.
#[derive(Debug)]
struct Answers {
    each: Vec<Vec<IpAddr>>,
    next: usize,
}

impl TestAnswers {
    /// Parses `name=addr[+addr...][/next answer...],...`.
    pub fn parse(text: &str) -> Result<TestAnswers, String> {
        let mut map = HashMap::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, answers) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not name=address"))?;
            let answers = answers
                .split('/')
                .map(|a| {
                    a.split('+')
                        .map(|ip| {
                            ip.trim()
                                .parse::<IpAddr>()
                                .map_err(|_| format!("{ip:?} is not an IP address"))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            map.insert(
                name.trim().to_ascii_lowercase(),
                Answers {
                    each: answers,
                    next: 0,
                },
            );
        }
        Ok(TestAnswers(Mutex::new(map)))
    }

    fn answer(&self, name: &str) -> Option<Vec<IpAddr>> {
        let mut map = lock(&self.0);
        let a = map.get_mut(name)?;
        let i = a.next.min(a.each.len().saturating_sub(1));
        a.next += 1;
        a.each.get(i).cloned()
    }
}

/// Resolves and checks.
pub struct CheckedResolver {
    pub rules: AddressRules,
    /// With `--egress-test-resolve`: these names are answered from it, no other.
    pub test: Option<TestAnswers>,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let name = name.as_str().to_ascii_lowercase();
        let rules = self.rules.clone();
        let test = self
            .test
            .as_ref()
            .map(|t| t.answer(&name).unwrap_or_default());
        Box::pin(async move {
            let addrs: Vec<IpAddr> = match test {
                Some(a) => a,
                None => tokio::net::lookup_host((name.as_str(), 0))
                    .await
                    .map(|it| it.map(|sa| sa.ip()).collect())
                    .unwrap_or_default(),
            };
            if addrs.is_empty() {
                return Err(Box::new(AddressRefused::Unresolved { name }) as _);
            }
            // One refused address refuses the name: a name that mixes public and private
            // answers is a rebinding attempt, not a choice.
            if let Some(bad) = addrs.iter().find(|a| !rules.permits(**a)) {
                return Err(Box::new(AddressRefused::NotAllowed { name, addr: *bad }) as _);
            }
            let addrs: Addrs = Box::new(addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
