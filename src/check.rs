//! Pre-execution checks, the domain behind `POST /v1/check`, the `policy` of executions and
//! session turns, and `vivarium check FILE` (the HTTP side is `server::api::check`).
//!
//! Syntax is validated by the guest's own parser: the checker (`python-wasi/guest/check.py`,
//! loaded into every template) runs in the hidden set-up turn of a fresh sandbox, before any
//! of the submitted code runs. An execution checks in the very sandbox that then runs the
//! program; `/v1/check`, the CLI and session turns ask an interpreter the host keeps for
//! checking alone, which never runs a caller's code (`sandbox::Checkers`; a session turn's
//! check in the turn's own job, on the session's worker, before the turn). The checker
//! `ast.parse`s and compiles the source (never runs it), walks the tree for the static rules,
//! and sends one JSON object through the host door. The host trusts that only as data: it
//! must fit in [`MAX_CHECKER_OUTPUT`], parse into the fixed types below (unknown fields
//! refused), and every string is cut to a bound. Anything else is a checker failure (HTTP 500
//! with a clear message), never a verdict.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::limits::Limits;
use crate::report::Status;
use crate::sandbox::SandboxError;

/// The most checker output the host reads; more is a checker failure.
pub const MAX_CHECKER_OUTPUT: u64 = 1 << 20;
/// The most syntax errors kept.
pub const MAX_SYNTAX_ERRORS: usize = 16;
/// The most findings kept (the checker stops at the same number).
pub const MAX_FINDINGS: usize = 200;
const MAX_TEXT: usize = 1_000;
/// The memory of a sandbox that only checks. Its time and fuel are the set-up turn's, in
/// which the checker runs (`template::SETUP_LIMITS`): parsing and walking even a large
/// program takes well under that.
const CHECKER_MEMORY: u64 = 256 << 20;

/// Whether and how an execution is checked before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[derive(Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// No check, no extra cost.
    Off,
    /// Check first; the findings come back in the result as `findings`. The default.
    #[default]
    Warn,
    /// Check first; any finding refuses the execution with 422 `policy_denied`.
    Deny,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Policy::Off),
            "warn" => Ok(Policy::Warn),
            "deny" => Ok(Policy::Deny),
            other => Err(format!(
                "policy {other:?} is not one of \"off\", \"warn\", \"deny\""
            )),
        }
    }
}

/// A syntax error the guest's parser (or compiler) reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyntaxIssue {
    /// 1-based.
    pub line: u32,
    /// 1-based.
    pub col: u32,
    #[schema(example = "SyntaxError: invalid syntax")]
    pub message: String,
}

/// The syntax verdict of the guest's own parser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyntaxCheck {
    /// The source parses and compiles.
    pub ok: bool,
    /// What the parser or compiler reported (at most 16); empty when `ok`.
    pub errors: Vec<SyntaxIssue>,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Cannot work in the sandbox, or is dangerous.
    Error,
    /// Probably not what was meant.
    Warning,
}

/// The checker's rule for code that needs the network (`python-wasi/guest/check.py`).
pub const NETWORK_RULE: &str = "network";

/// The checker's rule for a write to an absolute path (which lands in the working directory).
pub const WRITE_OUTSIDE_RULE: &str = "write_outside_workdir";

/// What a run or turn has that the checker, reading its code alone, cannot know.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts<'a> {
    /// Its code, as the checker read it.
    pub code: &'a str,
    /// It was granted network.
    pub networked: bool,
    /// The volumes mounted in its sandbox.
    pub mounts: &'a [crate::guest::Lent],
}

/// What the check's `findings` mean for a run or turn under `policy`, the one rule every
/// path follows: one granted network reaches its hosts, so the checker's [`NETWORK_RULE`]
/// finding is not true of it and is dropped, and a write to an absolute path below a mounted
/// volume lands in the volume, not the working directory ([`WRITE_OUTSIDE_RULE`]'s warning
/// is dropped); under `deny` any finding left refuses it (`Err` with them); else the
/// findings go with the result.
pub fn judge(
    mut findings: Vec<Finding>,
    policy: Policy,
    facts: RunFacts<'_>,
) -> Result<Vec<Finding>, Vec<Finding>> {
    if facts.networked {
        findings.retain(|f| f.rule != NETWORK_RULE);
    }
    if !facts.mounts.is_empty() {
        findings.retain(|f| {
            f.rule != WRITE_OUTSIDE_RULE
                || f.severity != Severity::Warning
                || !literal_at(facts.code, f.line, f.col).is_some_and(|path| {
                    facts.mounts.iter().any(|m| {
                        path.strip_prefix('/')
                            .is_some_and(|rel| m.at.holds_relative(rel.trim_end_matches('/')))
                    })
                })
        });
    }
    if policy == Policy::Deny && !findings.is_empty() {
        return Err(findings);
    }
    Ok(findings)
}

/// The string literal starting at `line`, `col` (1-based, the column in UTF-8 bytes as
/// Python's parser counts it) of `code`: a quote, text without escapes, the same quote.
/// `None` for anything else.
fn literal_at(code: &str, line: u32, col: u32) -> Option<&str> {
    let text = code.lines().nth((line as usize).checked_sub(1)?)?;
    let rest = text.get((col as usize).checked_sub(1)?..)?;
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &rest[1..];
    let end = body.find(quote)?;
    let path = &body[..end];
    (!path.contains('\\')).then_some(path)
}

/// One static-analysis finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// `os_system`, `subprocess`, `eval_exec`, `network`, `ctypes`, `fork`,
    /// `infinite_loop`, `write_outside_workdir`.
    #[schema(example = "os_system")]
    pub rule: String,
    /// `error`: cannot work in the sandbox, or is dangerous; `warning`: probably not what was
    /// meant.
    pub severity: Severity,
    /// 1-based.
    pub line: u32,
    /// 1-based.
    pub col: u32,
    /// What was found and why it fails or misleads here, for a person to read.
    pub message: String,
}

/// What the checker found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    /// Whether the code parses and compiles, with the errors when it does not.
    pub syntax: SyntaxCheck,
    /// Static findings, at most 200; empty when the code does not parse.
    pub findings: Vec<Finding>,
}

impl CheckResult {
    /// Syntax fine and no error-severity finding (what `vivarium check` exits 0 on).
    pub fn passes(&self) -> bool {
        self.syntax.ok && !self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Why the checker gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("the checker could not start: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("the checker did not finish ({}): {detail}", status.as_str())]
    Failed {
        /// How its set-up turn ended.
        status: Status,
        /// What stopped it, or its stderr.
        detail: String,
    },
    #[error("the checker did not finish (panic): {0}")]
    Panicked(String),
    #[error("the checker's output was larger than {MAX_CHECKER_OUTPUT} bytes")]
    TooLarge,
    #[error("the checker's output was not the expected JSON: {0}")]
    BadOutput(String),
}

/// The limits of a sandbox that only checks: its own small budget, never above what this host
/// allows (`d`: its defaults, `max`: its maxima).
pub fn checker_limits(d: &Limits, max: &Limits) -> Limits {
    let setup = crate::guest::SETUP_LIMITS;
    Limits {
        timeout_ms: setup.timeout_ms.min(max.timeout_ms),
        fuel: setup.fuel.min(max.fuel),
        memory_bytes: CHECKER_MEMORY.min(max.memory_bytes),
        output_bytes: MAX_CHECKER_OUTPUT.min(max.output_bytes),
        disk_bytes: d.disk_bytes,
        open_files: d.open_files,
    }
}

impl CheckError {
    /// A set-up turn that failed was the checker failing; anything else kept the sandbox
    /// from starting.
    pub fn from_setup(e: SandboxError) -> Self {
        match e {
            SandboxError::Setup { status, detail } => CheckError::Failed {
                status,
                detail: cut(detail),
            },
            other => CheckError::Sandbox(other),
        }
    }
}

/// Turns the checker's verdict (sent through the host door by a fresh sandbox's set-up turn
/// or by a kept checker) into a result, trusting it only as bounded data.
pub fn interpret(verdict: Option<&str>) -> Result<CheckResult, CheckError> {
    let text =
        verdict.ok_or_else(|| CheckError::BadOutput("the checker sent no verdict".into()))?;
    if text.len() as u64 > MAX_CHECKER_OUTPUT {
        return Err(CheckError::TooLarge);
    }
    let mut result: CheckResult =
        serde_json::from_str(text.trim()).map_err(|e| CheckError::BadOutput(e.to_string()))?;
    result.syntax.errors.truncate(MAX_SYNTAX_ERRORS);
    for e in &mut result.syntax.errors {
        e.message = cut(std::mem::take(&mut e.message));
    }
    if result.syntax.ok != result.syntax.errors.is_empty() {
        return Err(CheckError::BadOutput(
            "syntax.ok disagrees with syntax.errors".into(),
        ));
    }
    result.findings.truncate(MAX_FINDINGS);
    for f in &mut result.findings {
        f.rule = cut_to(std::mem::take(&mut f.rule), 64);
        f.message = cut(std::mem::take(&mut f.message));
    }
    Ok(result)
}

fn cut(s: String) -> String {
    cut_to(s, MAX_TEXT)
}

fn cut_to(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &str, severity: Severity, line: u32, col: u32) -> Finding {
        Finding {
            rule: rule.into(),
            severity,
            line,
            col,
            message: String::new(),
        }
    }

    #[test]
    fn a_write_below_a_mount_point_is_not_a_write_outside() {
        let code = "x = 1\nopen('/mnt/data/out.csv', 'w')\nopen(\"/etc/x\", 'w')\nopen('/mnt/database', 'w')";
        let lent = crate::guest::Lent {
            name: "data".into(),
            at: crate::guest::MountPoint::parse("/mnt/data").unwrap(),
            files: "/nowhere".into(),
            incoming: None,
            room_bytes: 0,
            room_entries: 0,
        };
        let findings = vec![
            finding(WRITE_OUTSIDE_RULE, Severity::Warning, 2, 6),
            finding(WRITE_OUTSIDE_RULE, Severity::Warning, 3, 6),
            finding(WRITE_OUTSIDE_RULE, Severity::Warning, 4, 6),
            finding("eval_exec", Severity::Warning, 2, 6),
        ];
        let facts = |mounts| RunFacts {
            code,
            networked: false,
            mounts,
        };
        let kept = judge(
            findings.clone(),
            Policy::Warn,
            facts(std::slice::from_ref(&lent)),
        )
        .unwrap();
        assert_eq!(
            kept.iter()
                .map(|f| (f.rule.as_str(), f.line))
                .collect::<Vec<_>>(),
            [
                (WRITE_OUTSIDE_RULE, 3),
                (WRITE_OUTSIDE_RULE, 4),
                ("eval_exec", 2)
            ]
        );
        // Without the mount, every finding stands (and under deny refuses).
        assert_eq!(
            judge(findings.clone(), Policy::Warn, facts(&[]))
                .unwrap()
                .len(),
            4
        );
        assert!(judge(findings, Policy::Deny, facts(&[])).is_err());
        assert_eq!(literal_at(code, 2, 6), Some("/mnt/data/out.csv"));
        assert_eq!(literal_at(code, 2, 1), None);
        assert_eq!(literal_at(code, 9, 1), None);
        assert_eq!(literal_at("open('a\\\\b')", 1, 6), None);
    }
}
