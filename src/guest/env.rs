//! The guest's environment: the base every sandbox gets, with the caller's variables on top.

use super::HOME;

pub use crate::vocabulary::{EnvError, check_env};

/// The guest's environment: the base the reference host gives, then the caller's on top.
pub fn guest_env(extra: &[(String, String)]) -> Result<Vec<(String, String)>, EnvError> {
    check_env(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    let mut env: std::collections::BTreeMap<String, String> = [
        ("TMPDIR", "/tmp"),
        ("HOME", HOME),
        // Empty: zoneinfo then uses the tzdata package inside the stdlib zip.
        ("PYTHONTZPATH", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(extra.iter().cloned());
    Ok(env.into_iter().collect())
}
