//! The Model Context Protocol front door (the `rmcp` crate): `/mcp` on the streamable HTTP
//! transport, and `vivarium mcp` over stdio for desktop clients.
//!
//! Tools: `execute_python` (code, optional files, stdin, limits, policy; returns the output as
//! text and every PNG the run produced — files and `plt.show()`/`display()` outputs — as image
//! content), `run_command` (a shell command line, in a fresh sandbox or an open session's
//! terminal), `check_python` (the pre-execution check), `open_session`, `run_in_session`,
//! `close_session` (a kept-alive interpreter), and `snapshot_session`, `fork_session` (a
//! session as data: stored, restored with `open_session {snapshot}`, or copied live).
//!
//! The tools only translate: each builds the same request type the HTTP API parses its body
//! into and goes through the same intake and runner (validation, admission, the workers,
//! audit, metrics), so MCP gets exactly the HTTP API's limits and behaviour. Over `/mcp` a
//! tool call carries its HTTP request's context (the API key's id, which owns the snapshots
//! it takes). Over stdio the same [`ServerState`] is built in-process without a listener, and
//! no key.
//!
//! Here: the tools and the server handler; `args.rs` the tools' arguments, `results.rs` what
//! they return, `transport.rs` `/mcp` over HTTP and its counted sessions.

mod args;
mod results;
mod transport;

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
use tracing::Instrument as _;

use super::types::{
    ExecuteRequest, ExecuteResponse, ExecutionResult, FileIn, OpenSessionRequest,
    OpenSessionResponse, TurnRequest, TurnResponse, VolumeMountRequest, check_file_path,
    media_type,
};
use crate::check::{Finding, Policy, Severity};
use crate::limits::{LimitsRequest, TurnLimitsRequest};
use crate::report::Status;
use crate::server::AppState;
use crate::server::bracket::{Bracket, outcome_of, run_outcome, turn_outcome};
use crate::server::error::{ApiError, OnWire};
use crate::server::mcp_sessions::{McpSessionLimits, McpSessions, Reservation};
use crate::server::request_context::{RequestContext, new_id};
use crate::supervisor::Executed;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::{Action, Door};
use crate::supervisor::intake;
use crate::supervisor::runner::{ForkRequest, RollbackRequest, Turned};
use crate::sync::lock;
use crate::vocabulary::Language;
use crate::vocabulary::Template;

pub use args::*;
pub use results::*;
pub use transport::*;

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
            door: Door::Mcp,
        })
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(text.into())])
}

/// Why `execute_python` refuses `tools`.
const CODE_MODE_OVER_MCP: &str = "execute_python takes no tools: MCP has no request by which \
    a server calls its client's tools, so code mode (a program calling your tools as \
    functions) is not offered over MCP. Use the HTTP API (POST /v1/execute with \"tools\", \
    docs/guides/code-mode.md) or a client that drives it for you (invalid_request)";

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

/// What a program's tool arguments share with the HTTP bodies: its files and the policy
/// named (a wrong one is a tool error naming it). The tools build the HTTP doors' own request
/// types from them (`ExecuteRequest`, `TurnRequest`), checked by the same code. The tool
/// error is boxed: it is the rare path, and a `CallToolResult` is large.
fn program_parts(
    files: Vec<McpFile>,
    policy: Option<String>,
) -> Result<(Vec<FileIn>, Policy), Box<CallToolResult>> {
    let files = files_in(files).map_err(|e| Box::new(tool_error(e)))?;
    Ok((files, parse(policy)?))
}

/// A tool argument that names one of a closed set (a policy, a template), or its default: the
/// JSON schema lists the names; a wrong one is a tool error naming it, as the HTTP API's 400.
fn parse<T: std::str::FromStr<Err = String> + Default>(
    name: Option<String>,
) -> Result<T, Box<CallToolResult>> {
    name.map_or(Ok(T::default()), |n| {
        n.parse().map_err(|e| Box::new(tool_error(e)))
    })
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
        description = "Run Python 3.15 code in a fresh, isolated sandbox (CPython on WebAssembly; built in: numpy, pandas, scipy, scikit-learn, statsmodels, matplotlib, seaborn, sympy, networkx, pillow, lxml, beautifulsoup4, openpyxl, pypdf, pyyaml, jinja2, tabulate and their dependencies; other pure-Python packages can be added with `packages`, e.g. [\"plotly\"], but nothing with native code; no processes, and no network unless the server allows hosts, which urllib, requests and pandas then reach). Returns stdout, stderr, the uncaught exception if any, and every PNG produced (plt.show(), display(fig), or .png files written) as images."
    )]
    async fn execute_python(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<ExecuteArgs>,
    ) -> Result<CallToolResult, McpError> {
        if args.tools.is_some() {
            // Never ignored: a program counting on tools would fail in a way that hides why.
            return Ok(tool_error(CODE_MODE_OVER_MCP));
        }
        let (files, policy) = match program_parts(args.files, args.policy) {
            Ok(parts) => parts,
            Err(e) => return Ok(*e),
        };
        let template = args.template;
        let req = ExecuteRequest {
            code: args.code,
            stdin: args.stdin,
            files,
            limits: args.limits,
            policy,
            template,
            packages: args.packages,
            volumes: args.volumes.into_iter().map(McpVolume::request).collect(),
            ..ExecuteRequest::default()
        };
        Ok(self.fresh_run(&ctx(&extensions), req).await)
    }

    /// A run in a fresh sandbox as `execute_python` and `run_command` return it: the run's
    /// bracket, the run, its result rendered.
    async fn fresh_run(&self, ctx: &RequestContext, req: ExecuteRequest) -> CallToolResult {
        let state = &self.state;
        let (mut bracket, id) = Bracket::run(state, ctx);
        let result = intake::execute(&state.runner, req, bracket.record()).await;
        bracket.close(run_outcome(&result));
        match result {
            Ok(Executed::Ran { report, findings }) => render_result(
                &ExecuteResponse::new(&id, *report, findings).result,
                &[],
                None,
                FilesOf::Execution(&id),
            ),
            Ok(Executed::Denied(findings)) => denied(&findings),
            Err(e) => self.api_error(e),
        }
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
        let mut bracket = Bracket::open(&self.state, &ctx(&extensions), Action::Check);
        bracket.record().set_code(&args.code);
        let key = bracket.record().key_id.clone();
        let result = self.state.runner.check(args.code, key.as_deref()).await;
        bracket.close(outcome_of(&result, 200));
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
        let template = args.template;
        let req = OpenSessionRequest {
            limits: args.limits,
            template,
            leakage: None,
            snapshot: args.snapshot,
            durable: args.durable,
            packages: args.packages,
            // The operator's list as it is, as for `execute_python`; no secrets over MCP.
            network: None,
            secrets: Default::default(),
            volumes: args.volumes.into_iter().map(McpVolume::request).collect(),
            keep_turns: None,
        };
        let result = Bracket::open(&self.state, &ctx(&extensions), Action::SessionOpen)
            .around(201, async |record| {
                intake::open(&self.state.runner, req, record).await
            })
            .await;
        Ok(match result {
            Ok(session) => session_opened(&OpenSessionResponse::of(&session)),
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
            Err(e) => return Ok(*e),
        };
        let req = TurnRequest {
            code: args.code,
            stdin: args.stdin,
            files,
            policy,
            ..TurnRequest::default()
        };
        Ok(self
            .session_turn(&ctx(&extensions), &args.session_id, req)
            .await)
    }

    /// A turn of an open session as `run_in_session` and `run_command` return it: the turn's
    /// bracket, the turn, its result rendered.
    async fn session_turn(
        &self,
        ctx: &RequestContext,
        session_id: &str,
        req: TurnRequest,
    ) -> CallToolResult {
        let key = ctx.key_id.as_deref();
        let (mut bracket, turn_id) = Bracket::turn(&self.state, ctx, session_id);
        let result =
            intake::run_turn_ask(&self.state.runner, session_id, key, req, bracket.record()).await;
        bracket.close(turn_outcome(&result));
        match result {
            Ok(Turned::Ran(done)) => self.turn_result(&turn_id, session_id, key, *done).await,
            Ok(Turned::Denied(findings)) => denied(&findings),
            Err(e) => self.api_error(e),
        }
    }

    /// A session turn's result as `run_in_session` and `run_command` return it.
    async fn turn_result(
        &self,
        turn_id: &str,
        session_id: &str,
        key: Option<&str>,
        done: crate::supervisor::runner::TurnDone,
    ) -> CallToolResult {
        let t = TurnResponse::new(turn_id, session_id, done);
        let mut extra = vec![format!("turn: {}", t.turn)];
        if let Some(r) = &t.result {
            extra.push(format!("result: {r}"));
        }
        if let Some(end) = &t.ended {
            extra.push(format!("session ended: {}", end.message));
        }
        if t.rolled_back {
            extra.push("rolled back: the session is at its state before this turn".to_string());
        }
        let turn = RunTurn {
            turn: t.turn,
            result: t.result.clone(),
            rolled_back: t.rolled_back,
            ended: t.ended.as_ref().map(|e| e.message.clone()),
        };
        let mut result = render_result(&t.report, &extra, Some(turn), FilesOf::Session(session_id));
        // The session's files, as links its client can read (`resources/read`).
        if t.ended.is_none()
            && let Ok(listing) = self.state.runner.list_files(session_id, key).await
        {
            result
                .content
                .extend(session_file_links(session_id, &listing.files));
        }
        result
    }

    #[tool(
        output_schema = rmcp::handler::server::tool::schema_for_output::<RunResult>(),
        description = "Run a shell command line in the sandbox (a POSIX shell that runs inside it, over its own files: pipelines, redirections, &&/||, variables, globbing, loops; ls, cat, grep, find, sed, awk, sort, head, wc, mkdir, cp, mv, rm and the other coreutils-style tools, python/python3, pip install, curl/wget under the egress policy; no background jobs or other programs). With `session_id`, it runs in that open session, where the working directory and exported variables persist from one command to the next as in a terminal, beside the session's Python state and files; without, in a fresh sandbox. Returns stdout, stderr and the exit status (bash's: 127 for a command not found), as execute_python does."
    )]
    async fn run_command(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<RunCommandArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let Some(session_id) = args.session_id else {
            let req = ExecuteRequest {
                code: args.command,
                language: Language::Bash,
                limits: args.timeout_ms.map(|t| LimitsRequest {
                    timeout_ms: Some(t),
                    ..LimitsRequest::default()
                }),
                policy: Policy::Off,
                ..ExecuteRequest::default()
            };
            return Ok(self.fresh_run(&ctx, req).await);
        };
        let req = TurnRequest {
            code: args.command,
            language: Language::Bash,
            limits: args.timeout_ms.map(|t| TurnLimitsRequest {
                timeout_ms: Some(t),
                ..TurnLimitsRequest::default()
            }),
            policy: Policy::Off,
            ..TurnRequest::default()
        };
        Ok(self.session_turn(&ctx, &session_id, req).await)
    }

    #[tool(description = "Close a Python session and remove its files.")]
    async fn close_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<CloseSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let (id, key) = (&args.session_id, ctx.key_id.as_deref());
        let result = Bracket::open(&self.state, &ctx, Action::SessionClose)
            .session(id)
            .around(204, async |_| {
                self.state.runner.close_session(id, key).await
            })
            .await;
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
        let (id, owner) = (&args.session_id, ctx.key_id.clone());
        let result = Bracket::open(&self.state, &ctx, Action::SessionSnapshot)
            .session(id)
            .around(201, async |record| {
                self.state.runner.snapshot_session(id, owner, record).await
            })
            .await;
        Ok(match result {
            Ok(info) => CallToolResult::success(vec![Content::text(
                serde_json::to_string(&info).unwrap_or_default(),
            )]),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Fork an open session: a new, independent session with the same variables, imports and files, whose session_id is returned (as open_session returns one). Use it to try something risky or explore an alternative in the copy while the original stays exactly as it was; the two diverge from here, and each is closed on its own. With `turn`, the fork starts from the session's state just after that earlier turn (one of its last 16). Refused like snapshot_session while the session holds a file open or has ended."
    )]
    async fn fork_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<ForkSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let (id, key) = (&args.session_id, ctx.key_id.as_deref());
        let ask = ForkRequest {
            turn: args.turn,
            count: None,
        };
        let result = Bracket::open(&self.state, &ctx, Action::SessionFork)
            .session(id)
            .around(201, async |record| {
                self.state.runner.fork_sessions(id, key, ask, record).await
            })
            .await;
        Ok(match result.map(|mut made| made.pop()) {
            Ok(Some(session)) => session_opened(&OpenSessionResponse::of(&session)),
            Ok(None) => self.api_error(SupervisorError::Internal("no fork was made".into())),
            Err(e) => self.api_error(e),
        })
    }

    #[tool(
        description = "Undo turns: put an open session back in its state just after an earlier turn (variables, imports, files, the shell's folder and environment as they were then); the turns after it are dropped and the next turn is numbered turn + 1. A session keeps its last 16 turns by default; turn 0 is the session as it was opened. Errors with turn_not_kept for a turn it no longer keeps."
    )]
    async fn rollback_session(
        &self,
        extensions: Extensions,
        Parameters(args): Parameters<RollbackSessionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let ctx = ctx(&extensions);
        let (id, key) = (&args.session_id, ctx.key_id.as_deref());
        let ask = RollbackRequest {
            turn: args.turn,
            branch: false,
        };
        let result = Bracket::open(&self.state, &ctx, Action::SessionRollback)
            .session(id)
            .around(200, async |record| {
                self.state
                    .runner
                    .rollback_session(id, key, ask, record)
                    .await
            })
            .await;
        Ok(match result {
            Ok(_) => CallToolResult::success(vec![Content::text(format!(
                "session {id} is back in its state after turn {}; its next turn is {}",
                args.turn,
                args.turn + 1
            ))]),
            Err(e) => self.api_error(e),
        })
    }
}

#[tool_handler]
impl ServerHandler for VivariumMcp {
    /// A tool call, in a span of its own whose parent is the caller's trace context when the
    /// call's `_meta` carries one (`traceparent`, `tracestate`: MCP's SEP-414).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let span = tracing::info_span!("mcp.tool", tool = %request.name, otel.kind = "server");
        // rmcp moves a request's `_meta` to its context; the params may keep one too.
        let meta = request.meta.as_ref().unwrap_or(&context.meta);
        crate::server::telemetry::follow(&span, meta.get_traceparent(), meta.get_tracestate());
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        Self::tool_router().call(call).instrument(span).await
    }

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
        let mut bracket = Bracket::open(&self.state, &ctx, Action::FileDownload).session(&id);
        let read = self
            .state
            .runner
            .read_file(&id, ctx.key_id.as_deref(), path.clone(), bracket.record())
            .await;
        let size = read.as_ref().map_or(0, |b| b.len() as u64);
        bracket.record().set_path(&path, size);
        bracket.close(outcome_of(&read, 200));
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
                 execute_python for one-off code (plots come back as images), run_command for \
                 a shell command line (alone, or in a session's terminal), check_python to \
                 validate code without running it, and open_session/run_in_session/\
                 close_session to keep state between runs; snapshot_session saves a \
                 session's state to restore later (open_session with `snapshot`), and \
                 fork_session copies a session to try something without losing the original.",
        )
    }
}
