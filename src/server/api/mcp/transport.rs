//! `/mcp` over HTTP: rmcp's streamable transport, its sessions counted against each tenant's
//! quota and the server's cap before rmcp makes them, the body bounds, and the OpenAPI
//! annotation.

use super::*;

/// `/mcp` in the OpenAPI document: the transport is JSON-RPC, described by MCP itself; this
/// function only carries the annotation (the route is `router`'s service).
#[utoipa::path(
    post, path = "/mcp", tag = "mcp",
    description = "The Model Context Protocol's streamable HTTP transport (JSON-RPC 2.0; GET opens the server-sent event stream, DELETE ends the MCP session). Tools: execute_python, run_command, check_python, open_session, run_in_session, close_session, snapshot_session, fork_session. `Host` must be a loopback name or the listen address.",
    responses((status = 200, description = "A JSON-RPC response, or an event stream of them")),
    security((), ("bearer" = []))
)]
#[allow(dead_code)]
pub(super) fn mcp_transport() {}

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
