//! The Model Context Protocol front door (the `rmcp` crate): `/mcp` on the streamable HTTP
//! transport, and `vivarium mcp` over stdio for desktop clients.
//!
//! Tools: `execute_python` (code, optional files, stdin, limits, policy; returns the output as
//! text and every PNG the run produced — files and `plt.show()`/`display()` outputs — as image
//! content), `check_python` (the pre-execution check), `open_session`, `run_in_session`,
//! `close_session` (a kept-alive interpreter), and `snapshot_session`, `fork_session` (a
//! session as data: stored, restored with `open_session {snapshot}`, or copied live).
//!
//! The tools only translate: each builds the same JSON request the HTTP API takes and goes
//! through the same handlers' insides (validation, admission, guest threads, audit, metrics),
//! so MCP gets exactly the HTTP API's limits and behaviour. Over `/mcp` a tool call carries
//! its HTTP request's context (the API key's id, which owns the snapshots it takes). Over
//! stdio the same [`ServerState`] is built in-process without a listener, and no key.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::Stream;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, Extensions, Implementation, ServerCapabilities,
    ServerConfig,
};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::types::{
    ExecuteRequest, ExecuteResponse, ExecutionResult, FileIn, OpenSessionRequest,
    OpenSessionResponse, TurnRequest, TurnResponse, check_file_path, execute_request, media_type,
    open_session_request, run_outcome, turn_outcome, turn_request,
};
use crate::check::{Finding, Policy, Severity};
use crate::limits::LimitsRequest;
use crate::report::Status;
use crate::server::AppState;
use crate::server::error::{ApiError, OnWire, outcome_of};
use crate::server::mcp_sessions::{McpSessionLimits, McpSessions, Reservation};
use crate::server::request_context::{RequestContext, new_id};
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::runner::Turned;
use crate::sync::lock;
use crate::template::Template;
use crate::vivarium::Executed;

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

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteArgs {
    /// Python 3.15 source, run as a program in a fresh sandbox (numpy, pandas, scipy,
    /// scikit-learn and matplotlib are available; no network, no processes).
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

/// `/mcp` in the OpenAPI document: the transport is JSON-RPC, described by MCP itself; this
/// function only carries the annotation (the route is `router`'s service).
#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    description = "The Model Context Protocol's streamable HTTP transport (JSON-RPC 2.0; GET opens the server-sent event stream, DELETE ends the MCP session). Tools: execute_python, check_python, open_session, run_in_session, close_session, snapshot_session, fork_session. `Host` must be a loopback name or the listen address.",
    responses((status = 200, description = "A JSON-RPC response, or an event stream of them")),
    security((), ("bearer" = []))
)]
#[allow(dead_code)]
pub(super) fn mcp_transport() {}

/// The MCP server: one per MCP session, all sharing the server's state.
#[derive(Clone)]
pub struct VivariumMcp {
    state: AppState,
}

/// Who is calling: over `/mcp`, the context of the HTTP request that carried the tool call
/// (its request id, client and API key's id; rmcp keeps the request's parts in the call's
/// extensions); over stdio, a context of its own with no key.
fn ctx(extensions: &Extensions) -> RequestContext {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RequestContext>())
        .cloned()
        .unwrap_or_else(|| RequestContext {
            request_id: new_id(),
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            key_id: None,
        })
}

/// A tool's files as the HTTP body's: text is sent as its bytes in base64.
fn files_in(files: Vec<McpFile>) -> Result<Vec<FileIn>, String> {
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

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(text.into())])
}

fn api_error(e: impl Into<ApiError>, scrub: impl Fn(&str) -> Option<String>) -> CallToolResult {
    let e: ApiError = e.into();
    let message = e.to_string();
    // As every JSON error of the HTTP API is (error_scrub.rs): no secret in its words.
    let message = scrub(&message).unwrap_or(message);
    tool_error(format!("{message} ({})", e.code().as_str()))
}

/// What `open_session` and `fork_session` return: the new session's id as JSON text.
fn session_opened(r: &OpenSessionResponse) -> CallToolResult {
    CallToolResult::success(vec![Content::text(
        json!({"session_id": r.id, "expires_at": r.expires_at}).to_string(),
    )])
}

/// What `execute_python` and `run_in_session` return as `structuredContent` (checked by
/// clients against the tools' `outputSchema`), beside the text and images that clients of
/// older revisions read. Images are in `content`; here, each output's type and size.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunResult {
    /// How the run ended: `ok`, `error` (uncaught exception or non-zero exit), or the host
    /// limit that stopped it (`timeout`, `fuel_exhausted`, `memory_exceeded`,
    /// `host_memory_exceeded`, `stack_overflow`, `trap`, `cancelled`).
    pub status: String,
    /// The program's exit status; null when a limit stopped it first.
    pub exit_code: Option<i32>,
    /// Its standard output (secrets redacted under the server's leakage policy).
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Whether stdout or stderr was cut at the output limit.
    pub truncated: bool,
    /// The uncaught exception, if any.
    pub error: Option<RunError>,
    /// Which host limit stopped the run, with its value.
    pub detail: Option<String>,
    /// Rich outputs in order (`display()`, `plt.show()`): type and size.
    pub outputs: Vec<RunOutput>,
    /// Files the run created or changed.
    pub files: Vec<RunFile>,
    /// Rules of the secrets found in the output (and redacted), if any.
    pub leak_rules: Vec<String>,
    /// For a session turn: which turn, its final value, and what became of the session.
    pub turn: Option<RunTurn>,
}

/// An uncaught Python exception.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunError {
    /// The exception class, e.g. `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its message.
    pub message: String,
    /// The line of the code where it was raised.
    pub line: Option<u32>,
    /// For a `ModuleNotFoundError`: what to do about it.
    pub hint: Option<String>,
}

/// One rich output's type and size.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunOutput {
    /// `image/png`, `text/html`, `image/svg+xml` or `text/plain`.
    pub mime: String,
    /// Bytes of its data (decoded, for images).
    pub bytes: u64,
}

/// A file the run left in its working directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunFile {
    /// Relative to the working directory.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
}

/// What a session turn adds.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunTurn {
    /// 1 for the session's first turn.
    pub turn: u64,
    /// `repr` of the final expression's value, when there was one.
    pub result: Option<String>,
    /// A host limit stopped the turn and the session went back to its state before it.
    pub rolled_back: bool,
    /// Set when this turn ended the session, with why.
    pub ended: Option<String>,
}

impl RunResult {
    fn of(r: &ExecutionResult, turn: Option<RunTurn>) -> Self {
        RunResult {
            status: r.status.as_str().to_string(),
            exit_code: r.exit_code,
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            truncated: r.truncated.stdout || r.truncated.stderr,
            error: r.error.as_ref().map(|e| RunError {
                kind: e.kind.clone(),
                message: e.message.clone(),
                line: e.line,
                hint: e.hint.clone(),
            }),
            detail: r.detail.clone(),
            outputs: r
                .outputs
                .iter()
                .map(|o| RunOutput {
                    mime: o.mime.clone(),
                    bytes: if o.mime == "image/png" {
                        (o.data.len() as u64 / 4) * 3
                    } else {
                        o.data.len() as u64
                    },
                })
                .collect(),
            files: r
                .files
                .iter()
                .map(|f| RunFile {
                    path: f.path.clone(),
                    size: f.size,
                    media_type: f.media_type.to_string(),
                })
                .collect(),
            leak_rules: r
                .leaks
                .as_deref()
                .map(|l| {
                    crate::leakage::rule_names(l)
                        .into_iter()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            turn,
        }
    }
}

/// Where a run's files are named from: `vivarium://executions/{id}/files/{path}` (gone with
/// the sandbox, so always embedded) or `vivarium://sessions/{id}/files/{path}` (kept with the
/// session: a file too large to embed is linked, and `GET /v1/sessions/{id}/files/{path}`
/// serves it).
pub enum FilesOf<'a> {
    Execution(&'a str),
    Session(&'a str),
}

/// What a path segment of a file's URI escapes: everything but RFC 3986's unreserved
/// characters.
const URI_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl FilesOf<'_> {
    fn uri(&self, path: &str) -> String {
        let path: String = path
            .split('/')
            .map(|seg| percent_encoding::utf8_percent_encode(seg, URI_SEGMENT).to_string())
            .collect::<Vec<_>>()
            .join("/");
        match self {
            FilesOf::Execution(id) => format!("vivarium://executions/{id}/files/{path}"),
            FilesOf::Session(id) => format!("vivarium://sessions/{id}/files/{path}"),
        }
    }
}

/// The files a run produced, as MCP resources: each one that came back embedded (as text
/// when it is UTF-8 text, else as a base64 blob), and, for a session, a `resource_link` for
/// each that was too large to return. PNGs are image content already.
fn file_resources(r: &ExecutionResult, of: &FilesOf<'_>) -> Vec<Content> {
    use rmcp::model::Resource;
    let mut out = Vec::new();
    for f in &r.files {
        let uri = of.uri(&f.path);
        match &f.content {
            Some(_) if f.media_type == "image/png" => {}
            Some(b64) => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap_or_default();
                out.push(Content::resource(file_contents(uri, &f.path, bytes)));
            }
            None => {
                if let FilesOf::Session(_) = of {
                    let mut link = Resource::new(uri, f.path.clone()).with_description(
                        "too large to return here; GET /v1/sessions/{id}/files/{path}",
                    );
                    link.mime_type = Some(f.media_type.to_string());
                    link.size = Some(f.size);
                    out.push(Content::resource_link(link));
                }
            }
        }
    }
    out
}

/// The most session files linked after a turn.
const MAX_FILE_LINKS: usize = 100;

/// A `resource_link` for each of a session's files (the first [`MAX_FILE_LINKS`]).
fn session_file_links(id: &str, files: &[(String, u64)]) -> Vec<Content> {
    let of = FilesOf::Session(id);
    files
        .iter()
        .take(MAX_FILE_LINKS)
        .map(|(path, size)| {
            let mut link = rmcp::model::Resource::new(of.uri(path), path.clone());
            link.mime_type = Some(media_type(path).to_string());
            link.size = Some(*size);
            Content::resource_link(link)
        })
        .collect()
}

/// A session file's URI back to its session and path; `None` for any other URI.
fn parse_file_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("vivarium://sessions/")?;
    let (id, path) = rest.split_once("/files/")?;
    let path = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?
        .into_owned();
    Some((id.to_string(), path))
}

/// A file's bytes as resource contents: text when it is UTF-8 of a textual type, else a
/// base64 blob.
fn file_contents(uri: String, path: &str, bytes: Vec<u8>) -> rmcp::model::ResourceContents {
    use base64::Engine as _;
    use rmcp::model::ResourceContents;
    let mime = media_type(path);
    let textual = mime.starts_with("text/") || matches!(mime, "application/json" | "image/svg+xml");
    let bytes = match String::from_utf8(bytes) {
        Ok(text) if textual => {
            return ResourceContents::TextResourceContents {
                uri,
                mime_type: Some(mime.to_string()),
                text,
                meta: None,
            };
        }
        Ok(text) => text.into_bytes(),
        Err(e) => e.into_bytes(),
    };
    ResourceContents::BlobResourceContents {
        uri,
        mime_type: Some(mime.to_string()),
        blob: base64::engine::general_purpose::STANDARD.encode(bytes),
        meta: None,
    }
}

/// The text an assistant reads back, image content for every PNG produced, the other files
/// as resources, and the result as structured content (`turn` for a session turn).
pub fn render_result(
    r: &ExecutionResult,
    extra: &[String],
    turn: Option<RunTurn>,
    files: FilesOf<'_>,
) -> CallToolResult {
    let mut result = render_content(r, extra);
    result.content.extend(file_resources(r, &files));
    result.structured_content = serde_json::to_value(RunResult::of(r, turn)).ok();
    result
}

/// The text and images of [`render_result`].
fn render_content(r: &ExecutionResult, extra: &[String]) -> CallToolResult {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = write!(text, "status: {}", r.status.as_str());
    if let Some(code) = r.exit_code {
        let _ = write!(text, " (exit code {code})");
    }
    text.push('\n');
    for line in extra {
        let _ = writeln!(text, "{line}");
    }
    if let Some(detail) = &r.detail {
        let _ = writeln!(text, "stopped by: {detail}");
    }
    if !r.stdout.is_empty() {
        let _ = write!(text, "--- stdout ---\n{}", r.stdout);
        if !r.stdout.ends_with('\n') {
            text.push('\n');
        }
    }
    if !r.stderr.is_empty() {
        let _ = write!(text, "--- stderr ---\n{}", r.stderr);
        if !r.stderr.ends_with('\n') {
            text.push('\n');
        }
    }
    if r.truncated.stdout || r.truncated.stderr {
        let _ = writeln!(text, "(output truncated at the output limit)");
    }
    if let Some(e) = &r.error {
        let line = e.line.map(|l| format!(" at line {l}")).unwrap_or_default();
        let _ = writeln!(text, "error: {}: {}{line}", e.kind, e.message);
    }
    if let Some(leaks) = r.leaks.as_ref().filter(|l| !l.is_empty()) {
        let _ = writeln!(
            text,
            "output leakage: {} finding{} ({}), shown as [REDACTED:rule] unless the server's policy is report",
            leaks.len(),
            if leaks.len() == 1 { "" } else { "s" },
            crate::leakage::rule_names(leaks).join(", ")
        );
    }
    if let Some(findings) = &r.findings {
        for f in findings {
            let _ = writeln!(
                text,
                "check {} {} (line {}): {}",
                match f.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                },
                f.rule,
                f.line,
                f.message
            );
        }
    }
    for f in &r.files {
        let _ = writeln!(
            text,
            "file: {} ({}, {} bytes)",
            f.path, f.media_type, f.size
        );
    }
    let mut content = vec![Content::text(text)];
    for o in &r.outputs {
        match o.mime.as_str() {
            "image/png" => content.push(Content::image(o.data.clone(), "image/png")),
            mime => content.push(Content::text(format!("[{mime}]\n{}", o.data))),
        }
    }
    for f in &r.files {
        if f.media_type == "image/png"
            && let Some(data) = &f.content
        {
            content.push(Content::image(data.clone(), "image/png"));
        }
    }
    let ok = r.status == Status::Ok;
    if ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    }
}

/// What a program's tool arguments share with the HTTP bodies: its files and the policy
/// named (a wrong one is a tool error naming it). The tools build the HTTP doors' own request
/// types from them (`ExecuteRequest`, `TurnRequest`), checked by the same code.
fn program_parts(
    files: Vec<McpFile>,
    policy: Option<String>,
) -> Result<(Vec<FileIn>, Policy), CallToolResult> {
    let files = files_in(files).map_err(tool_error)?;
    Ok((files, parse(policy)?))
}

/// A tool argument that names one of a closed set (a policy, a template), or its default: the
/// JSON schema lists the names; a wrong one is a tool error naming it, as the HTTP API's 400.
fn parse<T: std::str::FromStr<Err = String> + Default>(
    name: Option<String>,
) -> Result<T, CallToolResult> {
    name.map_or(Ok(T::default()), |n| n.parse().map_err(tool_error))
}

fn denied(findings: &[Finding]) -> CallToolResult {
    let mut text = String::from(
        "refused by the pre-execution check (policy \"deny\"); nothing ran. Findings:\n",
    );
    for f in findings {
        text.push_str(&format!(
            "- {} (line {}, col {}): {}\n",
            f.rule, f.line, f.col, f.message
        ));
    }
    tool_error(text)
}

#[tool_router]
impl VivariumMcp {
    pub fn new(state: AppState) -> Self {
        VivariumMcp { state }
    }

    /// A tool's error, its message scrubbed of secrets.
    fn api_error(&self, e: impl Into<ApiError>) -> CallToolResult {
        api_error(e, |m| self.state.runner.scrub_error_message(m))
    }

    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<RunResult>(),
        description = "Run Python 3.15 code in a fresh, isolated sandbox (CPython on WebAssembly; built in: numpy, pandas, scipy, scikit-learn, statsmodels, matplotlib, seaborn, sympy, networkx, pillow, lxml, beautifulsoup4, openpyxl, pypdf, pyyaml, jinja2, tabulate and their dependencies; other pure-Python packages can be added with `packages`, e.g. [\"plotly\"], but nothing with native code; no network, no processes). Returns stdout, stderr, the uncaught exception if any, and every PNG produced (plt.show(), display(fig), or .png files written) as images."
    )]
    async fn execute_python(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<ExecuteArgs>,
    ) -> Result<CallToolResult, McpError> {
        let (files, policy) = match program_parts(args.files, args.policy) {
            Ok(parts) => parts,
            Err(e) => return Ok(e),
        };
        let template = match args.template.map(|t| t.parse::<Template>()).transpose() {
            Ok(template) => template,
            Err(e) => return Ok(tool_error(e)),
        };
        let req = ExecuteRequest {
            code: args.code,
            stdin: args.stdin,
            files,
            limits: args.limits,
            policy,
            template,
            packages: args.packages,
            ..ExecuteRequest::default()
        };
        let state = &self.state;
        let id = format!("ex-{}", new_id());
        let mut record = AuditRecord::new(&ctx(&extensions), Action::McpExecute).execution(&id);
        let result = execute_request(state, req, &mut record).await;
        state.runner.finish(record, run_outcome(&result));
        Ok(match result {
            Ok(Executed::Ran { report, findings }) => render_result(
                &ExecuteResponse::new(&id, *report, findings).result,
                &[],
                None,
                FilesOf::Execution(&id),
            ),
            Ok(Executed::Denied(findings)) => denied(&findings),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Check Python code without running it: syntax by the sandbox's own Python 3.15 parser, and static findings (os.system, subprocess, eval/exec of input, network use, ctypes, fork, `while True` with no exit, writes outside the working directory). Returns JSON {syntax: {ok, errors}, findings}."
    )]
    async fn check_python(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<CheckArgs>,
    ) -> Result<CallToolResult, McpError> {
        if let Err(e) = self.state.runner.host() {
            return Ok(self.api_error(e));
        }
        let mut record = AuditRecord::new(&ctx(&extensions), Action::McpCheck);
        record.set_code(&args.code);
        let key = record.key_id.clone();
        let result = self.state.runner.check(args.code, key.as_deref()).await;
        self.state.runner.finish(record, outcome_of(&result, 200));
        Ok(match result {
            Ok(c) => {
                let text = serde_json::to_string_pretty(&c).unwrap_or_default();
                if c.passes() {
                    CallToolResult::success(vec![Content::text(text)])
                } else {
                    CallToolResult::error(vec![Content::text(text)])
                }
            }
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Open a Python session: a kept-alive interpreter whose turns share variables, imports and files, like a notebook kernel. Returns the session id for run_in_session, snapshot_session, fork_session and close_session. With `snapshot` (an id snapshot_session returned), the new session is restored from that snapshot instead: it starts with the saved variables, imports, files, limits and template (then give neither `limits` nor `template`); a snapshot can be restored any number of times."
    )]
    async fn open_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<OpenSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let template = match args.template.map(|t| t.parse::<Template>()).transpose() {
            Ok(template) => template,
            Err(e) => return Ok(tool_error(e)),
        };
        let req = OpenSessionRequest {
            limits: args.limits,
            template,
            leakage: None,
            snapshot: args.snapshot,
            durable: args.durable,
            packages: args.packages,
        };
        let mut record = AuditRecord::new(&ctx(&extensions), Action::McpSessionOpen);
        let result = open_session_request(&self.state, req, &mut record).await;
        // A restore is recorded as the HTTP door's; here it is MCP's.
        if record.action == Action::SessionRestore {
            record.action = Action::McpSessionRestore;
        }
        self.state.runner.finish(record, outcome_of(&result, 201));
        Ok(match result {
            Ok(r) => session_opened(&r),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<RunResult>(),
        description = "Run Python code in an open session. Variables, imports and files persist; a final expression's value is returned as `result`. Returns the output as text and plots as images."
    )]
    async fn run_in_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<RunInSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let (files, policy) = match program_parts(args.files, args.policy) {
            Ok(parts) => parts,
            Err(e) => return Ok(e),
        };
        let req = TurnRequest {
            code: args.code,
            stdin: args.stdin,
            files,
            policy,
            ..TurnRequest::default()
        };
        let turn_id = format!("turn-{}", new_id());
        let ctx = ctx(&extensions);
        let key = ctx.key_id.as_deref();
        let mut record = AuditRecord::new(&ctx, Action::McpSessionTurn)
            .session(&args.session_id)
            .execution(&turn_id);
        let result = turn_request(&self.state, &args.session_id, key, req, &mut record).await;
        self.state.runner.finish(record, turn_outcome(&result));
        Ok(match result {
            Ok(Turned::Ran(done)) => {
                let t = TurnResponse::new(&turn_id, &args.session_id, *done);
                let mut extra = vec![format!("turn: {}", t.turn)];
                if let Some(r) = &t.result {
                    extra.push(format!("result: {r}"));
                }
                if let Some(end) = &t.ended {
                    extra.push(format!("session ended: {}", end.message));
                }
                if t.rolled_back {
                    extra.push(
                        "rolled back: the session is at its state before this turn".to_string(),
                    );
                }
                let turn = RunTurn {
                    turn: t.turn,
                    result: t.result.clone(),
                    rolled_back: t.rolled_back,
                    ended: t.ended.as_ref().map(|e| e.message.clone()),
                };
                let mut result = render_result(
                    &t.report,
                    &extra,
                    Some(turn),
                    FilesOf::Session(&args.session_id),
                );
                // The session's files, as links its client can read (`resources/read`).
                if t.ended.is_none()
                    && let Ok(listing) = self.state.runner.list_files(&args.session_id, key).await
                {
                    result
                        .content
                        .extend(session_file_links(&args.session_id, &listing.files));
                }
                result
            }
            Ok(Turned::Denied(findings)) => denied(&findings),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(description = "Close a Python session and remove its files.")]
    async fn close_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<CloseSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let record = AuditRecord::new(&ctx, Action::McpSessionClose).session(&args.session_id);
        let result = self
            .state
            .runner
            .close_session(&args.session_id, ctx.key_id.as_deref())
            .await;
        self.state.runner.finish(record, outcome_of(&result, 204));
        Ok(match result {
            Ok(()) => CallToolResult::success(vec![Content::text(format!(
                "session {} closed",
                args.session_id
            ))]),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Save an open session's state (variables, imports and the files in its working directory) as a snapshot, and return its snapshot_id (`snap-…`), size_bytes, template and turns as JSON. The session itself goes on unchanged. Restore it later, any number of times and even after the session is closed, with open_session {\"snapshot\": snapshot_id}: a checkpoint to come back to. Refused (snapshot_refused) while the session holds a folder open between turns (an os.scandir in progress: close it first) or has ended; session_busy while a turn runs."
    )]
    async fn snapshot_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<SessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let mut record =
            AuditRecord::new(&ctx, Action::McpSessionSnapshot).session(&args.session_id);
        let result = self
            .state
            .runner
            .snapshot_session(&args.session_id, ctx.key_id.clone(), &mut record)
            .await;
        self.state.runner.finish(record, outcome_of(&result, 201));
        Ok(match result {
            Ok(info) => CallToolResult::success(vec![Content::text(
                serde_json::to_string(&info).unwrap_or_default(),
            )]),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Fork an open session: a new, independent session with the same variables, imports and files, whose session_id is returned (as open_session returns one). Use it to try something risky or explore an alternative in the copy while the original stays exactly as it was; the two diverge from here, and each is closed on its own. Refused like snapshot_session while the session holds a file open or has ended."
    )]
    async fn fork_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<SessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let mut record = AuditRecord::new(&ctx, Action::McpSessionFork).session(&args.session_id);
        let result = self
            .state
            .runner
            .fork_session(&args.session_id, ctx.key_id.as_deref(), &mut record)
            .await;
        self.state.runner.finish(record, outcome_of(&result, 201));
        Ok(match result {
            Ok(session) => session_opened(&OpenSessionResponse::of(&session)),
            Err(e) => self.api_error(e),
        })
    }
}

#[tool_handler]
impl ServerHandler for VivariumMcp {
    /// `resources/read` of a session file (`vivarium://sessions/{id}/files/{path}`, as the
    /// links a turn returns name them): the same read, limits, leakage policy and audit
    /// record as `GET /v1/sessions/{id}/files/{path}`.
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let Some((id, path)) = parse_file_uri(&request.uri) else {
            return Err(McpError::resource_not_found(
                format!(
                    "no such resource: {} (session files are vivarium://sessions/{{id}}/files/{{path}})",
                    request.uri
                ),
                None,
            ));
        };
        if let Err(e) = check_file_path(&path) {
            return Err(McpError::invalid_params(e.to_string(), None));
        }
        let ctx = ctx(&context.extensions);
        let mut record = AuditRecord::new(&ctx, Action::FileDownload).session(&id);
        let read = self
            .state
            .runner
            .read_file(&id, ctx.key_id.as_deref(), path.clone(), &mut record)
            .await;
        let size = read.as_ref().map_or(0, |b| b.len() as u64);
        self.state
            .runner
            .finish(record.path(&path, size), outcome_of(&read, 200));
        match read {
            Ok(bytes) => Ok(rmcp::model::ReadResourceResult::new(vec![file_contents(
                request.uri,
                &path,
                bytes,
            )])
            .into()),
            Err(e) => Err(McpError::resource_not_found(
                format!("{}: {e}", e.code().as_str()),
                None,
            )),
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("vivarium", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Vivarium runs untrusted Python 3.15 in a WebAssembly sandbox. Call \
                 execute_python for one-off code (plots come back as images), check_python to \
                 validate code without running it, and open_session/run_in_session/\
                 close_session to keep state between runs; snapshot_session saves a \
                 session's state to restore later (open_session with `snapshot`), and \
                 fork_session copies a session to try something without losing the original.",
        )
    }
}

/// What one MCP session may buffer: messages queued toward its client on each stream (and
/// kept there for a client that reconnects with `Last-Event-ID`). rmcp's default is 16;
/// with a request's reply never more than a handful of messages (progress, then the result),
/// 8 keeps a slow reader's backlog, and so a session's cost, small and fixed.
const SESSION_CHANNEL_CAPACITY: usize = 8;

/// The largest `/mcp` request body rmcp reads (its own default, 4 MiB); the sessionless
/// POSTs [`admit`] reads to see whether they are an `initialize` are held to it too.
const MAX_MCP_BODY_BYTES: usize = 4 << 20;

/// The header naming a request's MCP session (the streamable HTTP transport's).
const MCP_SESSION_ID: &str = "mcp-session-id";

/// rmcp's in-memory sessions, counted: each session's place is reserved (by [`admit`],
/// before rmcp runs) against its tenant's `mcp_sessions` quota and the server's cap, bound
/// to the session's id when rmcp makes it, and given back when rmcp ends it (a DELETE, or
/// its keep-alive: the idle expiry). Every other call passes through.
pub struct CountedSessions {
    local: LocalSessionManager,
    count: McpSessions,
}

tokio::task_local! {
    /// The place [`admit`] reserved for the session the request being served may make.
    static RESERVED: std::sync::Mutex<Option<Reservation>>;
}

/// Why a session could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CountedError {
    /// A session was asked for with no place reserved (a request [`admit`] did not take for
    /// an `initialize`): refused rather than made uncounted.
    #[error("no MCP session place was reserved for this request")]
    Unreserved,
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl CountedSessions {
    fn new(limits: McpSessionLimits) -> CountedSessions {
        let mut local = LocalSessionManager::default();
        let config = &mut local.session_config;
        config.keep_alive = Some(limits.idle);
        config.channel_capacity = SESSION_CHANNEL_CAPACITY;
        // A finished request's replies are dropped at once rather than kept a minute for a
        // late resume: kept, they would add up without bound on a busy session.
        config.completed_cache_ttl = std::time::Duration::ZERO;
        CountedSessions {
            local,
            count: McpSessions::new(limits),
        }
    }
}

impl SessionManager for CountedSessions {
    type Error = CountedError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let reservation = RESERVED
            .try_with(|r| lock(r).take())
            .ok()
            .flatten()
            .ok_or(CountedError::Unreserved)?;
        let (id, transport) = self.local.create_session().await?;
        reservation.bind(&id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.local.close_session(id).await;
        self.count.release(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.count.touch(id);
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.count.touch(id);
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.count.touch(id);
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.count.touch(id);
        Ok(self.local.resume(id, last_event_id).await?)
    }
}

/// The `/mcp` service (streamable HTTP), for the router, over `sessions`. Host-header
/// validation accepts loopback names and the address the server listens on.
fn http_service(
    state: AppState,
    sessions: Arc<CountedSessions>,
) -> StreamableHttpService<VivariumMcp, CountedSessions> {
    let listen = state.config.listen;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.push(listen.ip().to_string());
    hosts.push(listen.to_string());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)))
        .with_max_request_body_bytes(MAX_MCP_BODY_BYTES);
    StreamableHttpService::new(
        move || Ok(VivariumMcp::new(state.clone())),
        sessions,
        config,
    )
}

/// `/mcp`: the streamable HTTP service, its sessions counted ([`admit`]), with DELETE
/// answered 204 (see below).
pub fn router(state: AppState) -> axum::Router {
    let sessions = Arc::new(CountedSessions::new(state.config.mcp_sessions));
    let admitting = (state.clone(), sessions.count.clone());
    axum::Router::new()
        .fallback_service(http_service(state, sessions))
        .layer(axum::middleware::from_fn_with_state(admitting, admit))
        .layer(axum::middleware::from_fn(delete_is_no_content))
}

/// Whether a JSON-RPC body is an `initialize` request (the only one that makes a session).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method>(body).is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

/// Before rmcp sees a POST that names no session: when it is an `initialize`, reserve the
/// new session's place against its tenant's quota and the server's cap, or refuse it here
/// with 429 (`quota_exceeded` naming `mcp_sessions`, or `too_many_mcp_sessions`) and a
/// `Retry-After`, before anything is made. rmcp's session manager takes the place while the
/// request is served ([`CountedSessions::create_session`]); when no session came of it, it
/// is given back.
pub async fn admit(
    axum::extract::State((state, count)): axum::extract::State<(AppState, McpSessions)>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if req.method() != axum::http::Method::POST || req.headers().contains_key(MCP_SESSION_ID) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_MCP_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::PayloadTooLarge(format!(
                "an MCP request body is at most {MAX_MCP_BODY_BYTES} bytes: {e}"
            ))
            .into_response();
        }
    };
    let initialize = is_initialize(&bytes);
    let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    if !initialize {
        return next.run(req).await;
    }
    let key = req
        .extensions()
        .get::<RequestContext>()
        .and_then(|ctx| ctx.key_id.clone());
    match count.reserve(&state.runner.tenant(key.as_deref())) {
        Ok(reservation) => {
            RESERVED
                .scope(std::sync::Mutex::new(Some(reservation)), next.run(req))
                .await
        }
        Err((e, wait)) => {
            let mut resp = e.into_response();
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, wait.into());
            resp
        }
    }
}

/// rmcp answers a session's DELETE with 202; MCP clients (the Python SDK) expect 200 or 204
/// and log a warning otherwise. The session is gone either way: say 204.
pub async fn delete_is_no_content(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut resp = next.run(req).await;
    if delete && resp.status() == axum::http::StatusCode::ACCEPTED {
        *resp.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    resp
}
