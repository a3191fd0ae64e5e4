//! What a caller can ask for, as the `/v1` bodies say it: the serde types a door parses its
//! body into (or builds, when its own wire format differs) and hands to an entry of the
//! intake. They are the wire bodies themselves, so `/openapi.json` documents them here.

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::check::Policy;
use crate::guest::Language;
use crate::leakage::LeakPolicy;
use crate::limits::LimitsRequest;
use crate::template::Template;

/// A file to place in the sandbox's working directory before the code runs.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileIn {
    /// Relative to the working directory, `/`-separated; no `..`, no NUL.
    #[schema(example = "data.csv")]
    pub path: String,
    /// The bytes, base64 (standard alphabet, padded).
    #[schema(example = "YSxiCjEsMgo=")]
    pub content: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteRequest {
    /// Python source, run as `python -c` would (or a shell script, with `language: "bash"`).
    #[schema(example = "print('hello')")]
    pub code: String,
    /// What `code` is written in: `python` (the default; IPython's magics, `!cmd` and
    /// `var = !cmd` lines are translated as a notebook does) or `bash` (`sh` is the same): a
    /// POSIX shell script run by the sandbox's own shell, over its files, under the same
    /// limits (see `docs/guides/shell.md`). Another value is a 400.
    #[serde(default)]
    pub language: Language,
    /// Text the program reads on stdin.
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub files: Vec<FileIn>,
    /// Any limit left out gets the server's default; one above the maximum is a 400.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// Environment variables laid over the guest's base environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Pre-execution check: `warn` (default) returns `findings` with the result, `deny`
    /// refuses code with any finding (422, nothing runs), `off` skips the check.
    #[serde(default)]
    pub policy: Policy,
    /// The snapshot the sandbox starts from: `scientific` (the default: numpy, pandas,
    /// matplotlib, scipy, scikit-learn, statsmodels and seaborn already imported) or `python`
    /// (the minimal one). `limits.memory_bytes` counts beyond the template's own image.
    #[serde(default)]
    pub template: Option<Template>,
    /// Output leakage control: `off`, `report`, `redact` or `deny`; left out, the server's
    /// default (`redact` unless configured). The values of `env` are redacted as secrets.
    #[serde(default)]
    pub leakage: Option<LeakPolicy>,
    /// Names of `env` variables whose values are not secrets (not redacted).
    #[serde(default)]
    pub leakage_allow_env: Vec<String>,
    /// Extra pure-Python packages, as requirement specifiers (`"tabulate"`,
    /// `"plotly>=6"`): resolved on the host with the built-in set as installed, cached, and
    /// put on the sandbox's `sys.path` read-only. See `GET /v1/packages`.
    #[serde(default)]
    #[schema(example = json!(["plotly>=6"]))]
    pub packages: Vec<String>,
    /// Code mode: tools the program may call, each `{name, description, parameters}` with
    /// `parameters` a JSON Schema of an object. In the guest each is `tools.<name>(...)` (a
    /// name that is not an identifier maps by `docs/guides/code-mode.md`'s rule) with an awaitable
    /// twin `tools.aio.<name>(...)`, and top-level `await` is allowed. Each call suspends
    /// the program: with `Accept: text/event-stream` it is a `tool_call` event answered at
    /// `POST /v1/executions/{id}/tool-results`; without, the response is `status:
    /// "suspended"` with `pending_calls`, answered at `POST /v1/executions/{id}/resume`.
    #[serde(default)]
    pub tools: Vec<crate::tools::ToolSpec>,
    /// Code mode's limits: calls, bytes of arguments and of results, waits.
    #[serde(default)]
    pub tool_limits: Option<crate::tools::ToolLimitsRequest>,
    /// Network by exception: narrows the operator's `--egress-allow` (`{"allow":
    /// ["api.example.com"]}`; `[]`: no network). Absent: the operator's list as it is. The
    /// program's `urllib`, `http.client`, `requests` and `pandas.read_csv(url)` go through
    /// the host, which checks every request.
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    /// Secrets the program can use but never read: `os.environ[NAME]` holds a placeholder,
    /// which the host replaces with `value` in requests to `hosts` only.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub secrets: BTreeMap<String, SecretRequest>,
}

/// A request's narrowing of the operator's allow list.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkRequest {
    /// `host[:port]` rules, each also within `--egress-allow` (a host must match both).
    #[schema(example = json!(["api.example.com", "*.example.org:443"]))]
    pub allow: Vec<String>,
}

/// One secret: its value and the hosts it may be sent to, or the name of one the operator
/// defines (`--egress-secrets-file`).
#[derive(Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRequest {
    /// The real value: never in the sandbox.
    #[serde(default)]
    pub value: Option<String>,
    /// `host[:port]` rules: only requests to these get the value.
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    /// The operator's secret of this name instead (its value and hosts are the operator's).
    #[serde(default)]
    pub operator: Option<String>,
}

impl std::fmt::Debug for SecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRequest")
            .field("hosts", &self.hosts)
            .field("operator", &self.operator)
            .finish_non_exhaustive()
    }
}
