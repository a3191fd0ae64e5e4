//! What a caller can ask for, as the `/v1` bodies say it: the serde types a door parses its
//! body into (or builds, when its own wire format differs) and hands to an entry of the
//! intake. They are the wire bodies themselves, so `/openapi.json` documents them here.

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::check::Policy;
use crate::guest::Language;
use crate::leakage::LeakPolicy;
use crate::limits::{LimitsRequest, TurnLimitsRequest};

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
    /// matplotlib, scipy, scikit-learn, statsmodels and seaborn already imported), `python`
    /// (the minimal one), or one of the caller's templates (`POST /v1/templates`: its
    /// packages, files, variables and state). `limits.memory_bytes` counts beyond the
    /// template's own image. An unknown name is a 404 `template_not_found`.
    #[serde(default)]
    #[schema(example = "scientific")]
    pub template: Option<String>,
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
    /// Volumes mounted into the sandbox (at most 8): `[{"name": "data", "path":
    /// "/mnt/data", "read_only": true}]`. The guest sees each at its path; a file written
    /// there is kept in the volume when it is closed (`docs/guides/volumes.md`).
    #[serde(default)]
    pub volumes: Vec<VolumeMountRequest>,
}

/// One volume to mount.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeMountRequest {
    /// The volume's name (one of the caller's).
    #[schema(example = "data")]
    pub name: String,
    /// Where the guest sees it: an absolute folder path, not `/`, not below
    /// `/usr/local/lib`, not `/tmp` or HOME themselves.
    #[schema(example = "/mnt/data")]
    pub path: String,
    /// Writes are refused (`EROFS`, Python's `OSError`).
    #[serde(default)]
    pub read_only: bool,
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

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSessionRequest {
    /// Memory and disk hold for the session's life; timeout, fuel and output are the
    /// defaults of each turn.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// The snapshot the interpreter starts from: `scientific` (the default), `python`
    /// (minimal), or one of the caller's templates. `limits.memory_bytes` counts beyond the
    /// template's own image.
    #[serde(default)]
    #[schema(example = "scientific")]
    pub template: Option<String>,
    /// Output leakage control of the session's turns and file reads (a turn may name its
    /// own): `off`, `report`, `redact` or `deny`; left out, the server's default.
    #[serde(default)]
    pub leakage: Option<LeakPolicy>,
    /// Restore this snapshot (`snap-…`, from `POST /v1/sessions/{id}/snapshot`): the new
    /// session starts with its state, limits and template (so `limits` and `template` must
    /// be left out).
    #[serde(default)]
    #[schema(example = "snap-0a1b2c3d4e5f60718293a4b5")]
    pub snapshot: Option<String>,
    /// Snapshot every completed turn to the store, so that after a crash (even `kill -9`)
    /// the session comes back at its last completed turn on its next request. Every
    /// session, durable or not, is kept over a graceful restart.
    #[serde(default)]
    pub durable: bool,
    /// Extra pure-Python packages for the session (requirement specifiers); more can be
    /// added between turns (`POST /v1/sessions/{id}/packages`).
    #[serde(default)]
    pub packages: Vec<String>,
    /// Network by exception for every turn, as for `POST /v1/execute`: narrows the
    /// operator's `--egress-allow` (absent: the operator's list as it is).
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    /// Secrets the session's turns can use but never read, as for `POST /v1/execute`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub secrets: BTreeMap<String, SecretRequest>,
    /// Volumes mounted into the session's sandbox, for its life (at most 8): `[{"name": "data", "path":
    /// "/mnt/data", "read_only": true}]`. The guest sees each at its path; a file written
    /// there is kept in the volume when it is closed (`docs/guides/volumes.md`).
    #[serde(default)]
    pub volumes: Vec<VolumeMountRequest>,
    /// How many states, after its last turns, the session keeps to roll back or fork to
    /// (the one it is in counted: 1 keeps none before it; 1 to 64); left out, the server's
    /// `--keep-turns` (16).
    #[serde(default)]
    #[schema(example = 16)]
    pub keep_turns: Option<u32>,
}

/// What a door adds to an opening that its wire body does not carry (E2B's create, a
/// context): the session's labels, its own end, and the door's set-up, run as a query (not
/// a turn) before the session is handed over. A failed set-up closes the session.
#[derive(Debug, Default)]
pub struct OpeningExtras {
    pub labels: crate::snapshot::Labels,
    /// Its end, from now (`Session::set_deadline`).
    pub deadline: Option<std::time::Duration>,
    /// Run first, as a query: its working directory, its environment.
    pub set_up: Option<SetUp>,
}

/// A session's set-up (E2B's sandbox or context): `cwd` made and made its working
/// directory, `HOME` set to `home`, `env` laid over its environment.
#[derive(Debug, Clone, Default)]
pub struct SetUp {
    pub cwd: String,
    pub home: String,
    pub env: BTreeMap<String, String>,
}

/// What a door may ask of a session's interpreter between turns: not a turn (not numbered,
/// counted, or audited as the caller's code), answered through the host's result channel
/// (as the guest's, so hostile: the door parses and bounds it). A closed set: the guest's
/// code for each and whether it changes the session are the intake's (`query.rs`).
#[derive(Debug, Clone)]
pub enum Query {
    /// A notebook's completions at `cursor` (in code points).
    Complete { code: String, cursor: usize },
    /// What the object at `cursor` is (`detail` 0 or 1).
    Inspect {
        code: String,
        cursor: usize,
        detail: u8,
    },
    /// Whether `code` is a whole statement yet.
    IsComplete { code: String },
    /// One of E2B envd's filesystem calls, `request` its JSON message; relative paths are
    /// under `home`.
    FileOperation {
        op: FileOp,
        request: String,
        home: String,
    },
    /// A set-up again (a restarted context).
    SetUp(SetUp),
}

/// The filesystem calls a [`Query::FileOperation`] makes (E2B envd's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    Stat,
    ListDir,
    MakeDir,
    Move,
    Remove,
}

impl FileOp {
    pub const ALL: [FileOp; 5] = [
        FileOp::Stat,
        FileOp::ListDir,
        FileOp::MakeDir,
        FileOp::Move,
        FileOp::Remove,
    ];

    /// envd's name of it.
    pub fn name(self) -> &'static str {
        match self {
            FileOp::Stat => "Stat",
            FileOp::ListDir => "ListDir",
            FileOp::MakeDir => "MakeDir",
            FileOp::Move => "Move",
            FileOp::Remove => "Remove",
        }
    }

    /// The call envd's `name` is, if it is one.
    pub fn named(name: &str) -> Option<FileOp> {
        FileOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    #[schema(example = "x = 21\nx * 2")]
    pub code: String,
    /// As for `/v1/execute`: `python` (the default) or `bash` (`sh`). A shell's `cd` and
    /// `export` stay for the session's next turns, Python's included (`os.getcwd()`,
    /// `os.environ`).
    #[serde(default)]
    pub language: Language,
    #[serde(default)]
    pub stdin: Option<String>,
    /// Written into the working directory before the code runs.
    #[serde(default)]
    pub files: Vec<FileIn>,
    #[serde(default)]
    pub limits: Option<TurnLimitsRequest>,
    /// Pre-execution check, as for `/v1/execute`: `warn` (default), `deny` or `off`.
    #[serde(default)]
    pub policy: Policy,
    /// This turn's output leakage control; left out, the session's.
    #[serde(default)]
    pub leakage: Option<LeakPolicy>,
    /// Code mode, as for `/v1/execute`: tools the turn's code may call. A call suspends the
    /// turn (`status: "suspended"`, answered at `POST /v1/executions/{turn id}/resume`;
    /// the last answer's response is this turn's result). A turn's suspension stays
    /// resident (its state is the session's): it is not kept over a restart, nor forked.
    #[serde(default)]
    pub tools: Vec<crate::tools::ToolSpec>,
    /// Code mode's limits, as for `/v1/execute`.
    #[serde(default)]
    pub tool_limits: Option<crate::tools::ToolLimitsRequest>,
}
