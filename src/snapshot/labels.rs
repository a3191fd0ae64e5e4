//! What a session carries besides its state: the names and settings a door gave it when it
//! was opened (E2B's `templateID`, `metadata` and `envVars`, its extra code contexts). Kept
//! with the session, written into its own snapshot ([`super::SessionRecord::labels`]) and
//! kept while it hibernates, so they survive a hibernation, a restart and a failover to
//! another node as its state does. Bounded: checked when a door sets them and again when a
//! snapshot is decoded (a snapshot is hostile data).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Metadata entries a session may carry, and the bytes of each key and of each value.
pub const MAX_METADATA: usize = 64;
pub const MAX_METADATA_BYTES: usize = 1024;
/// Extra contexts (sessions of their own, tied to this one) a session may have.
pub const MAX_CONTEXTS: usize = 16;
/// The bytes of a context's working directory.
pub const MAX_CWD_BYTES: usize = 1024;
/// The bytes of the name its template was asked for by.
pub const MAX_TEMPLATE_ID_BYTES: usize = 256;
/// What labels take in a snapshot's header at most, serialised (the bounds above, with room).
pub const MAX_LABELS_BYTES: usize = 256 << 10;

/// A session's labels (see the module's header). The default is none, which is also what
/// a session opened by a door that sets none carries, and what its snapshot leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    /// The name the caller asked for its template by (an alias such as E2B's
    /// `code-interpreter-v1`), when it was not the template's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<String>,
    /// The caller's key-value pairs (listed and filtered on, never interpreted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Variables its interpreter starts with, set again when the interpreter restarts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its extra contexts, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<Context>,
    /// Set on a context: the session it belongs to (it is not listed as one of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_of: Option<String>,
}

/// One extra context of a session: a session of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Its session id.
    pub id: String,
    /// Made for the shell: its cells are command lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bash: bool,
    /// The working directory it was made in (and is set up in again when it restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// Why labels were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LabelsError(pub String);

impl Labels {
    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        *self == Labels::default()
    }

    /// Every bound of this module, and the environment's as every door takes one
    /// (`guest::check_env`).
    pub fn check(&self) -> Result<(), LabelsError> {
        if self.metadata.len() > MAX_METADATA
            || self
                .metadata
                .iter()
                .any(|(k, v)| k.len() > MAX_METADATA_BYTES || v.len() > MAX_METADATA_BYTES)
        {
            return Err(LabelsError(format!(
                "metadata holds at most {MAX_METADATA} entries of {MAX_METADATA_BYTES} bytes each"
            )));
        }
        crate::guest::check_env(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| LabelsError(e.to_string()))?;
        if self.contexts.len() > MAX_CONTEXTS {
            return Err(LabelsError(format!(
                "a session has at most {MAX_CONTEXTS} contexts"
            )));
        }
        let is_id =
            |id: &str| id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        let cwd_ok = |c: &Context| {
            c.cwd
                .as_deref()
                .is_none_or(|d| d.starts_with('/') && d.len() <= MAX_CWD_BYTES && !d.contains('\0'))
        };
        if !self.contexts.iter().all(cwd_ok) {
            return Err(LabelsError(format!(
                "a context's cwd is an absolute path of at most {MAX_CWD_BYTES} bytes"
            )));
        }
        if !self.contexts.iter().all(|c| is_id(&c.id))
            || !self.context_of.as_deref().is_none_or(is_id)
        {
            return Err(LabelsError("a context is named by a session id".into()));
        }
        if self
            .template_id
            .as_ref()
            .is_some_and(|t| t.len() > MAX_TEMPLATE_ID_BYTES)
        {
            return Err(LabelsError(format!(
                "a template is named in at most {MAX_TEMPLATE_ID_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// Adds context `id` (a shell one when `bash`, made in `cwd`); refused past
    /// [`MAX_CONTEXTS`].
    pub fn add_context(&mut self, id: &str, bash: bool, cwd: &str) -> Result<(), LabelsError> {
        if self.contexts.len() >= MAX_CONTEXTS {
            return Err(LabelsError(format!(
                "a session has at most {MAX_CONTEXTS} contexts"
            )));
        }
        self.contexts.push(Context {
            id: id.to_string(),
            bash,
            cwd: Some(cwd.to_string()),
        });
        Ok(())
    }

    /// Context `id`, when it is one of these.
    pub fn context(&self, id: &str) -> Option<&Context> {
        self.contexts.iter().find(|c| c.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_hold_and_fit_in_a_header() {
        let mut l = Labels {
            template_id: Some("t".repeat(MAX_TEMPLATE_ID_BYTES)),
            ..Labels::default()
        };
        for i in 0..MAX_METADATA {
            let k = format!("{i:0width$}", width = MAX_METADATA_BYTES);
            l.metadata.insert(k, "v".repeat(MAX_METADATA_BYTES));
        }
        for i in 0..MAX_CONTEXTS {
            let cwd = format!("/{}", "d".repeat(MAX_CWD_BYTES - 1));
            l.add_context(&format!("{i:064}"), i % 2 == 0, &cwd)
                .unwrap();
        }
        // The environment's own bound (`guest::check_env`) is 64 KiB.
        l.env.insert("K".into(), "v".repeat((64 << 10) - 1));
        l.check().unwrap();
        let bytes = serde_json::to_vec(&l).unwrap().len();
        assert!(bytes <= MAX_LABELS_BYTES, "{bytes}");
        assert!(l.add_context("x", false, "/").is_err());
        let mut relative = Labels::default();
        relative.add_context("c", false, "sub").unwrap();
        assert!(relative.check().is_err(), "a cwd is absolute");

        let mut more = l.clone();
        more.metadata.insert("k".into(), "v".into());
        assert!(more.check().is_err());
        let mut long = Labels::default();
        long.metadata
            .insert("k".into(), "v".repeat(MAX_METADATA_BYTES + 1));
        assert!(long.check().is_err());
        let bad = Labels {
            context_of: Some("../x".into()),
            ..Labels::default()
        };
        assert!(bad.check().is_err());
        assert!(Labels::default().is_empty() && !l.is_empty());
    }
}
