//! Secrets the operator defines (`--egress-secrets-file`), which a request names instead of
//! sending a value: `"secrets": {"GH_TOKEN": {"operator": "github"}}`. The file is TOML, one
//! table a secret:
//!
//! ```toml
//! [github]
//! value_env = "GITHUB_TOKEN"      # the value, from the server's environment (or `value = "…"`)
//! hosts = ["api.github.com"]      # where it may be sent
//! keys = ["key-a", "key-b"]       # the API keys that may use it; left out, every key
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// One secret of the operator's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    value: Option<String>,
    value_env: Option<String>,
    hosts: Vec<String>,
    keys: Option<Vec<String>>,
}

/// The operator's secrets, by name.
#[derive(Default)]
pub struct OperatorSecrets(BTreeMap<String, Defined>);

struct Defined {
    value: String,
    hosts: Vec<String>,
    keys: Option<Vec<String>>,
}

impl std::fmt::Debug for OperatorSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl OperatorSecrets {
    /// Reads `path`; each secret's value is checked as a request's would be.
    pub fn load(path: &Path) -> anyhow::Result<OperatorSecrets> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let entries: BTreeMap<String, Entry> =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let mut out = BTreeMap::new();
        for (name, e) in entries {
            let value = match (e.value, e.value_env) {
                (Some(v), None) => v,
                (None, Some(var)) => std::env::var(&var)
                    .with_context(|| format!("secret {name}: the environment has no {var}"))?,
                _ => bail!("secret {name}: give one of `value` and `value_env`"),
            };
            // The same checks as a request's secret (a throwaway placeholder).
            crate::egress::Secrets::new(vec![("CHECK".into(), value.clone(), e.hosts.clone())])
                .map_err(|err| anyhow::anyhow!("secret {name}: {err}"))?;
            out.insert(
                name,
                Defined {
                    value,
                    hosts: e.hosts,
                    keys: e.keys,
                },
            );
        }
        Ok(OperatorSecrets(out))
    }

    /// The value and hosts of secret `name` for the caller holding `key` (`None` without API
    /// keys), if it may use it.
    pub fn get(&self, name: &str, key: Option<&str>) -> Option<(String, Vec<String>)> {
        let d = self.0.get(name)?;
        let allowed = match (&d.keys, key) {
            (None, _) => true,
            (Some(keys), Some(k)) => keys.iter().any(|x| x == k),
            (Some(_), None) => false,
        };
        allowed.then(|| (d.value.clone(), d.hosts.clone()))
    }
}
