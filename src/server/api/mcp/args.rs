//! The tools' arguments, as their JSON schemas describe them to clients, and what they share
//! with the HTTP bodies.

use super::*;

/// A file to place in the working directory before the code runs.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct McpFile {
    /// Relative to the working directory, e.g. `data.csv`.
    pub path: String,
    /// The content as text (UTF-8).
    #[serde(default)]
    pub content: Option<String>,
    /// The content as base64, for binary files (instead of `content`).
    #[serde(default)]
    pub content_base64: Option<String>,
}

/// A volume (made over HTTP, `POST /v1/volumes`) mounted into the sandbox.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct McpVolume {
    /// The volume's name.
    pub name: String,
    /// Where the code sees it, an absolute folder such as `/mnt/data`.
    pub path: String,
    /// Refuse writes (`OSError` EROFS).
    #[serde(default)]
    pub read_only: bool,
}

impl McpVolume {
    /// As the intake takes it (which checks it, for every door alike).
    pub fn request(self) -> VolumeMountRequest {
        VolumeMountRequest {
            name: self.name,
            path: self.path,
            read_only: self.read_only,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteArgs {
    /// Python 3.15 source, run as a program in a fresh sandbox (numpy, pandas, scipy,
    /// scikit-learn and matplotlib are available; no processes; no network unless the server
    /// allows hosts).
    pub code: String,
    /// Files to place in the working directory first.
    #[serde(default)]
    pub files: Vec<McpFile>,
    /// Text the program reads on stdin.
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// Pre-execution check: "warn" (default: findings reported), "deny" (refuse code with
    /// findings), "off".
    #[serde(default)]
    #[schemars(with = "Option<Policy>")]
    pub policy: Option<String>,
    /// "scientific" (default: numpy, pandas, matplotlib, scipy, scikit-learn, statsmodels
    /// and seaborn already imported, so data work starts in milliseconds) or "python"
    /// (minimal).
    #[serde(default)]
    #[schemars(with = "Option<Template>")]
    pub template: Option<String>,
    /// Extra pure-Python packages to install first, as pip requirement specifiers (e.g.
    /// ["plotly>=6", "tabulate"]); packages with native code cannot be added.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Volumes to mount, e.g. [{"name": "data", "path": "/mnt/data", "read_only": true}]:
    /// files kept between runs and sessions.
    #[serde(default)]
    pub volumes: Vec<McpVolume>,
    /// Not offered: code mode needs the HTTP API (read only to refuse it with a clear error).
    #[serde(default)]
    #[schemars(skip)]
    pub tools: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckArgs {
    /// Python source to check without running it.
    pub code: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct OpenSessionArgs {
    /// Memory and disk for the whole session; timeout, fuel and output per turn.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// "scientific" (default: the scientific stack already imported) or "python" (minimal).
    #[serde(default)]
    #[schemars(with = "Option<Template>")]
    pub template: Option<String>,
    /// A snapshot id (`snap-…`) from `snapshot_session`: the new session starts with that
    /// snapshot's variables, imports, files, limits and template (leave `limits` and
    /// `template` out).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Keep the session through a server crash or restart: every completed turn is saved,
    /// and the session comes back at its last one.
    #[serde(default)]
    pub durable: bool,
    /// Extra pure-Python packages for the session, as pip requirement specifiers.
    #[serde(default)]
    pub packages: Vec<String>,
    /// Volumes mounted for the session's life, e.g. [{"name": "work", "path": "/mnt/work"}].
    #[serde(default)]
    pub volumes: Vec<McpVolume>,
}

/// The header a client copies a session argument into (`x-mcp-header`), so that a proxy can
/// route every call of one session to one node by hashing it.
pub const SESSION_HEADER: &str = "Vivarium-Session";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunInSessionArgs {
    /// The id `open_session` returned.
    #[schemars(extend("x-mcp-header" = SESSION_HEADER))]
    pub session_id: String,
    /// Python source; variables, imports and files persist between turns, and a final
    /// expression's value is returned as the turn's result.
    pub code: String,
    #[serde(default)]
    pub files: Vec<McpFile>,
    #[serde(default)]
    pub stdin: Option<String>,
    /// "warn" (default), "deny" or "off".
    #[serde(default)]
    #[schemars(with = "Option<Policy>")]
    pub policy: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// A shell command line or script (POSIX shell as bash runs it: pipelines, `;` `&&`
    /// `||`, redirections, here-documents, quoting, variables, `$(…)`, globbing, `if`/`for`/
    /// `while`/`case`, functions), e.g. `ls -la | grep csv` or `python3 train.py > log.txt
    /// 2>&1; tail -5 log.txt`. Commands: coreutils-style file and text tools (ls cat head
    /// tail wc grep find sort uniq cut tr sed awk xargs tee mkdir rm cp mv …), `python`/
    /// `python3`, `pip install`, `curl`/`wget` (through the egress policy); no background
    /// jobs (`&`) and no other programs.
    pub command: String,
    /// Run it in this open session (the id `open_session` returned): its files, and a
    /// working directory and exported variables that persist from one command to the next,
    /// as in a terminal, shared with its Python turns. Without it, the command runs in a
    /// fresh sandbox that is discarded after.
    ///
    /// Typed `string` in the schema (optional by not being required, not by `null`): the MCP
    /// revision of 2026-07-28 allows `x-mcp-header` only on a property of a single scalar type,
    /// and its clients drop a tool whose annotation breaks that.
    #[serde(default)]
    #[schemars(extend("x-mcp-header" = SESSION_HEADER, "type" = "string"))]
    pub session_id: Option<String>,
    /// Wall-clock deadline in milliseconds (the server's default when left out).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CloseSessionArgs {
    /// The id `open_session` returned.
    #[schemars(extend("x-mcp-header" = SESSION_HEADER))]
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionArgs {
    /// The id `open_session` (or `fork_session`) returned.
    #[schemars(extend("x-mcp-header" = SESSION_HEADER))]
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ForkSessionArgs {
    /// The id `open_session` (or `fork_session`) returned.
    #[schemars(extend("x-mcp-header" = SESSION_HEADER))]
    pub session_id: String,
    /// Fork the state just after this earlier turn (one the session still keeps: its last
    /// 16 by default) instead of the state it is in.
    #[serde(default)]
    pub turn: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RollbackSessionArgs {
    /// The id `open_session` (or `fork_session`) returned.
    #[schemars(extend("x-mcp-header" = SESSION_HEADER))]
    pub session_id: String,
    /// The turn to go back to: the session is put in its state just after it, and its next
    /// turn is `turn + 1`. 0 is the session as it was opened.
    pub turn: u64,
}

/// A tool's files as the HTTP body's: text is sent as its bytes in base64.
pub(super) fn files_in(files: Vec<McpFile>) -> Result<Vec<FileIn>, String> {
    use base64::Engine as _;
    files
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let content = match (f.content, f.content_base64) {
                (Some(text), None) => base64::engine::general_purpose::STANDARD.encode(text),
                (None, Some(b64)) => b64,
                (None, None) => String::new(),
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "files[{i}]: give `content` or `content_base64`, not both"
                    ));
                }
            };
            Ok(FileIn {
                path: f.path,
                content,
            })
        })
        .collect()
}
