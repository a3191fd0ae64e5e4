//! The Model Context Protocol front door (the `rmcp` crate): `/mcp` on the streamable HTTP
//! transport, and `vivarium mcp` over stdio for desktop clients.
//!
//! Tools: `execute_python` (code, optional files, stdin, limits, policy; returns the output as
//! text and every PNG the run produced — files and `plt.show()`/`display()` outputs — as image
//! content), `check_python` (the pre-execution check), and `open_session`,
//! `run_in_session`, `close_session` (a kept-alive interpreter).
//!
//! The tools only translate: each builds the same JSON request the HTTP API takes and goes
//! through the same handlers' insides (validation, admission, guest threads, audit, metrics),
//! so MCP gets exactly the HTTP API's limits and behaviour. Over stdio the same
//! [`ServerState`] is built in-process without a listener.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::Admission;
use super::audit::{Audit, AuditRecord};
use super::error::ApiError;
use super::execute::{Executed, ExecutionResult, prepare_execute, run_prepared};
use super::guest::GuestThreads;
use super::metrics::Metrics;
use super::request_context::{RequestContext, new_id};
use super::sessions::Registry;
use super::{AppState, ServeArgs, ServerState};
use crate::host::{Vivarium, VivariumOptions};

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

/// Limits; any left out get the server's default.
#[derive(Debug, Default, Deserialize, JsonSchema, serde::Serialize)]
pub struct McpLimits {
    /// Wall-clock deadline in milliseconds (default 30000).
    pub timeout_ms: Option<u64>,
    /// Wasmtime fuel (~10 G per CPU second; default 300 G).
    pub fuel: Option<u64>,
    /// Memory cap in bytes (default 512 MiB).
    pub memory_bytes: Option<u64>,
    /// Bytes kept of stdout and of stderr (default 1 MiB).
    pub output_bytes: Option<u64>,
    /// Bytes the program may keep on disk (default 100 MiB).
    pub disk_bytes: Option<u64>,
    /// Descriptors open at once (default 256).
    pub open_files: Option<u32>,
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
    pub limits: Option<McpLimits>,
    /// Pre-execution check: "warn" (default: findings reported), "deny" (refuse code with
    /// findings), "off".
    #[serde(default)]
    pub policy: Option<String>,
    /// "python" (default) or "scientific": numpy, pandas and matplotlib already imported,
    /// so data work starts in milliseconds instead of seconds.
    #[serde(default)]
    pub template: Option<String>,
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
    pub limits: Option<McpLimits>,
    /// "python" (default) or "scientific" (numpy, pandas and matplotlib already imported).
    #[serde(default)]
    pub template: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunInSessionArgs {
    /// The id `open_session` returned.
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
    pub policy: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CloseSessionArgs {
    pub session_id: String,
}

/// `/mcp` in the OpenAPI document: the transport is JSON-RPC, described by MCP itself; this
/// function only carries the annotation (the route is `router`'s service).
#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    description = "The Model Context Protocol's streamable HTTP transport (JSON-RPC 2.0; GET opens the server-sent event stream, DELETE ends the MCP session). Tools: execute_python, check_python, open_session, run_in_session, close_session. `Host` must be a loopback name or the listen address.",
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

fn ctx() -> RequestContext {
    RequestContext {
        request_id: new_id(),
        client: SocketAddr::from(([0, 0, 0, 0], 0)),
        key_id: None,
    }
}

fn files_json(files: Vec<McpFile>) -> Result<Vec<Value>, String> {
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
            Ok(json!({"path": f.path, "content": content}))
        })
        .collect()
}

fn body(v: &Value) -> Result<Bytes, std::convert::Infallible> {
    Ok(Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(text.into())])
}

fn api_error(e: ApiError) -> CallToolResult {
    tool_error(format!("{} ({})", e, e.code()))
}

/// The text an assistant reads back, and image content for every PNG produced.
pub fn render_result(r: &ExecutionResult, extra: &[String]) -> CallToolResult {
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
    if let Some(findings) = &r.findings {
        for f in findings {
            let _ = writeln!(
                text,
                "check {} {} (line {}): {}",
                match f.severity {
                    super::check::Severity::Error => "error",
                    super::check::Severity::Warning => "warning",
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
    let ok = r.status == crate::report::Status::Ok;
    if ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    }
}

/// The JSON body both code-running tools send through the HTTP handlers: code, files,
/// stdin and policy checked the same way.
fn program_request(
    code: String,
    files: Vec<McpFile>,
    stdin: Option<String>,
    policy: Option<String>,
) -> Result<Value, CallToolResult> {
    let files = files_json(files).map_err(tool_error)?;
    let mut req = json!({"code": code, "files": files, "policy": parse_policy(policy)?});
    if let Some(stdin) = stdin {
        req["stdin"] = json!(stdin);
    }
    Ok(req)
}

fn parse_policy(p: Option<String>) -> Result<Value, CallToolResult> {
    match p.as_deref() {
        None => Ok(json!("warn")),
        Some(s @ ("off" | "warn" | "deny")) => Ok(json!(s)),
        Some(other) => Err(tool_error(format!(
            "policy {other:?} is not one of \"off\", \"warn\", \"deny\""
        ))),
    }
}

fn denied(findings: &[super::check::Finding]) -> CallToolResult {
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

    #[tool(
        description = "Run Python 3.15 code in a fresh, isolated sandbox (CPython on WebAssembly; numpy, pandas, scipy, scikit-learn, matplotlib available; no network, no processes). Returns stdout, stderr, the uncaught exception if any, and every PNG produced (plt.show(), display(fig), or .png files written) as images."
    )]
    async fn execute_python(
        &self,
        Parameters(args): Parameters<ExecuteArgs>,
    ) -> Result<CallToolResult, McpError> {
        let mut req = match program_request(args.code, args.files, args.stdin, args.policy) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Some(limits) = args.limits {
            req["limits"] = json!(limits);
        }
        if let Some(template) = args.template {
            req["template"] = json!(template);
        }
        let state = &self.state;
        let id = format!("ex-{}", new_id());
        let mut record = AuditRecord::new(&ctx(), "mcp_execute").execution(&id);
        let result = match prepare_execute(state, body(&req).map_err(|e| match e {}), &mut record) {
            Ok(p) => run_prepared(state, &id, p, None, &mut record).await,
            Err(e) => Err(e),
        };
        Ok(match result {
            Ok(Executed::Ran(response)) => {
                state.audit.write(record);
                render_result(&response.result, &[])
            }
            Ok(Executed::Denied(findings)) => {
                state.audit.write(record.http(422).error("policy_denied"));
                denied(&findings)
            }
            Err(e) => {
                state
                    .audit
                    .write(record.http(e.status().as_u16()).error(e.code()));
                api_error(e)
            }
        })
    }

    #[tool(
        description = "Check Python code without running it: syntax by the sandbox's own Python 3.15 parser, and static findings (os.system, subprocess, eval/exec of input, network use, ctypes, fork, `while True` with no exit, writes outside the working directory). Returns JSON {syntax: {ok, errors}, findings}."
    )]
    async fn check_python(
        &self,
        Parameters(args): Parameters<CheckArgs>,
    ) -> Result<CallToolResult, McpError> {
        let host = match self.state.host() {
            Ok(h) => h,
            Err(e) => return Ok(api_error(e)),
        };
        let mut record = AuditRecord::new(&ctx(), "mcp_check");
        record.set_code(&args.code);
        let result = super::check::check_code(&self.state, host, args.code).await;
        self.state.audit.write(match &result {
            Ok(_) => record,
            Err(e) => record.http(e.status().as_u16()).error(e.code()),
        });
        Ok(match result {
            Ok(c) => {
                let text = serde_json::to_string_pretty(&c).unwrap_or_default();
                if c.passes() {
                    CallToolResult::success(vec![Content::text(text)])
                } else {
                    CallToolResult::error(vec![Content::text(text)])
                }
            }
            Err(e) => api_error(e),
        })
    }

    #[tool(
        description = "Open a Python session: a kept-alive interpreter whose turns share variables, imports and files, like a notebook kernel. Returns the session id for run_in_session and close_session."
    )]
    async fn open_session(
        &self,
        Parameters(args): Parameters<OpenSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let mut req = json!({});
        if let Some(limits) = args.limits {
            req["limits"] = json!(limits);
        }
        if let Some(template) = args.template {
            req["template"] = json!(template);
        }
        let mut record = AuditRecord::new(&ctx(), "mcp_session_open");
        let result = super::session_api::open_inner(
            &self.state,
            body(&req).map_err(|e| match e {}),
            &mut record,
        )
        .await;
        self.state.audit.write(match &result {
            Ok(_) => record.http(201),
            Err(e) => record.http(e.status().as_u16()).error(e.code()),
        });
        Ok(match result {
            Ok(r) => CallToolResult::success(vec![Content::text(
                json!({"session_id": r.id, "expires_at": r.expires_at}).to_string(),
            )]),
            Err(e) => api_error(e),
        })
    }

    #[tool(
        description = "Run Python code in an open session. Variables, imports and files persist; a final expression's value is returned as `result`. Returns the output as text and plots as images."
    )]
    async fn run_in_session(
        &self,
        Parameters(args): Parameters<RunInSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let req = match program_request(args.code, args.files, args.stdin, args.policy) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        let turn_id = format!("turn-{}", new_id());
        let mut record = AuditRecord::new(&ctx(), "mcp_session_turn")
            .session(&args.session_id)
            .execution(&turn_id);
        let result = super::session_api::turn_inner(
            &self.state,
            &args.session_id,
            &turn_id,
            body(&req).map_err(|e| match e {}),
            &mut record,
        )
        .await;
        Ok(match result {
            Ok(Ok(t)) => {
                self.state.audit.write(record);
                let mut extra = vec![format!("turn: {}", t.turn)];
                if let Some(r) = &t.result {
                    extra.push(format!("result: {r}"));
                }
                if let Some(end) = &t.ended {
                    extra.push(format!("session ended: {}", end.message));
                }
                render_result(&t.report, &extra)
            }
            Ok(Err(findings)) => {
                self.state
                    .audit
                    .write(record.http(422).error("policy_denied"));
                denied(&findings)
            }
            Err(e) => {
                self.state
                    .audit
                    .write(record.http(e.status().as_u16()).error(e.code()));
                api_error(e)
            }
        })
    }

    #[tool(description = "Close a Python session and remove its files.")]
    async fn close_session(
        &self,
        Parameters(args): Parameters<CloseSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let record = AuditRecord::new(&ctx(), "mcp_session_close").session(&args.session_id);
        let state = &self.state;
        let result = state.sessions.remove(&args.session_id).map(|s| {
            s.close().release();
            state.metrics.session_closed("deleted");
        });
        state.audit.write(match &result {
            Ok(_) => record.http(204),
            Err(e) => record.http(e.status().as_u16()).error(e.code()),
        });
        Ok(match result {
            Ok(()) => CallToolResult::success(vec![Content::text(format!(
                "session {} closed",
                args.session_id
            ))]),
            Err(e) => api_error(e),
        })
    }
}

#[tool_handler]
impl ServerHandler for VivariumMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("vivarium", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Vivarium runs untrusted Python 3.15 in a WebAssembly sandbox. Call \
                 execute_python for one-off code (plots come back as images), check_python to \
                 validate code without running it, and open_session/run_in_session/\
                 close_session to keep state between runs.",
            )
    }
}

/// The `/mcp` service (streamable HTTP), for the router. Host-header validation accepts
/// loopback names and the address the server listens on.
pub fn http_service(
    state: AppState,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    VivariumMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let listen = state.config.listen;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.push(listen.ip().to_string());
    hosts.push(listen.to_string());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
    StreamableHttpService::new(
        move || Ok(VivariumMcp::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// `/mcp`: the streamable HTTP service, with DELETE answered 204 (see below).
pub fn router(state: AppState) -> axum::Router {
    axum::Router::new()
        .fallback_service(http_service(state))
        .layer(axum::middleware::from_fn(delete_is_no_content))
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

/// `vivarium mcp`: the same tools over stdio. The server's state is built in-process (no
/// listener); logs and the audit log go to stderr, stdout carries only the protocol.
pub fn stdio_main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vivarium-mcp")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vivarium: starting the async runtime: {e}");
            return std::process::ExitCode::from(crate::cli::EXIT_HOST_FAILURE);
        }
    };
    let result = runtime.block_on(async {
        let state = local_state()?;
        let service = VivariumMcp::new(state.clone())
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("starting the MCP service: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("the MCP service failed: {e}"))?;
        state.guests.cancel_all();
        for s in state.sessions.drain() {
            s.close().release();
        }
        state
            .guests
            .wait_idle(std::time::Duration::from_secs(10))
            .await;
        if let Some(host) = state.host.get() {
            let _ = std::fs::remove_dir_all(host.scratch_root());
        }
        anyhow::Ok(())
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vivarium: {e:#}");
            std::process::ExitCode::from(crate::cli::EXIT_HOST_FAILURE)
        }
    }
}

/// The server's state without a listener, with the runtime loaded (settings from the
/// `VIVARIUM_*` variables, as `serve` reads them).
fn local_state() -> anyhow::Result<AppState> {
    let config = ServeArgs::defaults().resolve()?;
    let metrics = Arc::new(Metrics::new());
    let mut opts = VivariumOptions::from_env();
    if let Some(dir) = &config.scratch_dir {
        opts.scratch_base = dir.clone();
    }
    opts.maximum = config.maximum;
    opts.engine.max_instances = (config.max_sessions + config.max_concurrency + 32) as u32;
    let host = Vivarium::open(opts)?;
    let state = Arc::new(ServerState {
        admission: Admission::new(
            config.max_concurrency,
            config.queue_depth,
            config.queue_timeout,
            config.memory_budget_bytes,
            metrics.clone(),
        ),
        sessions: Registry::new(
            config.max_sessions,
            config.session_idle,
            config.session_lifetime,
        ),
        guests: GuestThreads::default(),
        metrics,
        audit: Audit::open(config.audit_log.as_deref())?,
        keys: None,
        shutting_down: AtomicBool::new(false),
        load_error: Mutex::new(None),
        host: OnceLock::new(),
        openapi: String::new(),
        config,
    });
    let _ = state.host.set(host);
    Ok(state)
}
