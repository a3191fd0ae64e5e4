//! What the API shows of a user template.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::template::Template;
use crate::vivarium::StepLog;

/// Where a template's build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TemplateStatus {
    /// Its build runs.
    Building,
    /// Built: runs and sessions may start from it.
    Ready,
    /// Its build failed (`error` names the step).
    Failed,
}

/// Where and why a build failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildFailure {
    /// The step: `packages`, `files`, `workdir`, `commands[N]`, `setup`, `imports`, or
    /// `build` (the build as a whole: its sandbox, its capture, the template quotas).
    pub step: String,
    /// What went wrong (an exception, an exit status, a limit).
    pub reason: String,
}

/// A template: a built-in one, or one of the caller's.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TemplateInfo {
    /// Its name (`python`, `scientific`, or the caller's).
    pub name: String,
    /// `building`, `ready` or `failed`.
    pub status: TemplateStatus,
    /// Built in (`python`, `scientific`), not the caller's.
    pub builtin: bool,
    /// A SHA-256 of every input of its build (with its tenant): identical inputs give the
    /// same id and reuse the build. Empty for a built-in template.
    pub id: String,
    /// 1 for its first build; each rebuild of the name with other inputs adds one.
    pub version: u32,
    /// What it was built from (a built-in template or another of the caller's).
    pub from: String,
    /// The built-in template under it.
    pub base: Template,
    /// Bytes of its image (memory pages and files), counted against `template_bytes`.
    pub bytes: u64,
    /// When its build started (seconds since the epoch).
    pub created_at: u64,
    /// How long its build took, when it ended.
    pub build_ms: Option<u64>,
    /// The names of its environment variables (their values are not shown).
    pub env: Vec<String>,
    /// Where its sandboxes start, when its build said (`workdir`, E2B's WORKDIR).
    pub workdir: Option<String>,
    /// Its packages, pinned as the build resolved them (`name==version`).
    pub packages: Vec<String>,
    /// Why its build failed.
    pub error: Option<BuildFailure>,
    /// What each step printed (each stream cut at 16 KiB).
    pub log: Vec<StepLog>,
}
