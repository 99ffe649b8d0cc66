//! agw's agents as MCP tools (issue 17, `docs/mcp.md` "Serving agents over MCP"): an rmcp
//! [`ServerHandler`] over the gateway's state, served over streamable HTTP at [`PATH`] (through
//! [`crate::routes`], after the Host check, CORS and auth) and over stdio by `agw mcp-stdio`
//! ([`serve_stdio`]).
//!
//! `tools/list` offers one tool per agent of the current catalog; `tools/call` starts a run of it
//! exactly as `POST /api/ap/query` would (same principal, quotas, chat ownership: the shared
//! `RunService::start`), reads the run's events to its terminal event and answers with the text of its
//! content deltas. The streamed text goes to the host as `notifications/progress` when the call
//! carries a progress token; a cancelled call interrupts the run like `POST /api/ap/interrupt`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    MetaObject, PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

use agw_memory::Owner;
use agw_modes::definition::{AgentCatalog, AgentDefinition};
use agw_protocol::request::{OnDisconnect, QueryRequest};
use agw_protocol::{EventPayload, RunErrorInfo};

use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, full};
use crate::envelope::ApiError;
use crate::request::read_body;
use crate::runs::NewRun;
use crate::runs::{CancelReason, Observer, RunHandle};
use crate::state::{AppState, Inner};

/// Where the streamable HTTP transport is served.
pub const PATH: &str = "/mcp";

/// MCP tool names: at most this many characters of `[A-Za-z0-9_-]`.
pub const MAX_TOOL_NAME: usize = 64;

/// The header rmcp's sessions are named by.
const SESSION_HEADER: &str = "mcp-session-id";
/// The session header as the transport spells it (for `Access-Control-Expose-Headers`).
pub const SESSION_HEADER_NAME: &str = "Mcp-Session-Id";

/// How long a finished call waits for its last progress notification to leave before it answers
/// (progress after the result is ignored by hosts; a host that reads nothing must not hold the
/// call forever).
const PROGRESS_FLUSH: Duration = Duration::from_secs(5);

/// How long a cancelled call waits for its run to end (`run.cancel`) before it returns; the run
/// stops within milliseconds wherever it is, like after `POST /api/ap/interrupt`.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// An idle session (no request, no message to the host) is closed after this long. Longer than
/// rmcp's 5 minutes: a long, silent agent run (a slow tool, no text yet) must not lose its
/// session, which would cancel the call.
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Whether a request to `path` needs the bearer token when auth is configured: `/mcp` starts
/// runs like `/api/ap/query`, so it is protected like it (preflights excepted, as there).
pub fn protects(method: &Method, path: &str) -> bool {
    path == PATH && method != Method::OPTIONS
}

/// Why `agw mcp-stdio` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The host never completed the MCP handshake (or stdio closed during it). Boxed: rmcp's
    /// error carries the unexpected message whole.
    #[error("MCP handshake failed: {0}")]
    Handshake(Box<ServerInitializeError>),
    /// The MCP service task failed.
    #[error("MCP service task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

// ------------------------------------------------------------------------------------- handler

/// The rmcp handler: the agents of one gateway as tools.
///
/// Holds the state weakly: sessions live in rmcp's session manager, which must not keep a
/// stopped gateway (and its stores) alive.
#[derive(Clone)]
pub struct AgentTools {
    state: Weak<Inner>,
    /// Over HTTP with auth configured every call must carry the principal `routes` verified; a
    /// call without one is refused rather than run as nobody's.
    require_principal: bool,
}

impl AgentTools {
    /// The handler for `agw mcp-stdio`: the host is the local user who started the process, so
    /// runs belong to no principal (like every run without auth). The caller keeps `state`
    /// alive while it serves (the handler holds it weakly).
    pub fn stdio(state: &AppState) -> Self {
        Self { state: Arc::downgrade(&state.inner), require_principal: false }
    }

    /// The handler behind `/mcp`.
    fn http(state: &AppState) -> Self {
        Self { state: Arc::downgrade(&state.inner), require_principal: state.auth.is_some() }
    }

    fn state(&self) -> Result<AppState, ErrorData> {
        self.state
            .upgrade()
            .map(|inner| AppState { inner })
            .ok_or_else(|| ErrorData::internal_error("the gateway is shutting down", None))
    }

    /// The verified caller: `routes` put it into the HTTP request's extensions, which rmcp hands
    /// over as `http::request::Parts` in the request context. Over stdio there are no parts.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Result<Option<Principal>, ErrorData> {
        let principal = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned();
        if self.require_principal && principal.is_none() {
            return Err(ErrorData::invalid_request("unauthorized: no verified caller", None));
        }
        Ok(principal)
    }
}

impl ServerHandler for AgentTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agw", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs one agw agent on `message` and answers with the agent's final text. \
                 Pass the `chatId` of an earlier result to continue that conversation.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let state = self.state()?;
        self.principal(&context)?;
        let catalog = state.catalogs().agents.load();
        let input = Arc::new(object(input_schema()));
        let output = Arc::new(object(output_schema()));
        let tools = agent_tools(&catalog, true)
            .into_iter()
            .map(|(name, agent)| {
                let description = if agent.description.trim().is_empty() { &agent.name } else { &agent.description };
                Tool::new(name, description.clone(), input.clone())
                    .with_title(agent.name.clone())
                    .with_raw_output_schema(output.clone())
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let state = self.state()?;
        let principal = self.principal(&context)?;
        let agent = agent_tools(&state.catalogs().agents.load(), false)
            .into_iter()
            .find_map(|(name, agent)| (name == request.name).then_some(agent))
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("unknown tool `{}`: no such agent", request.name), None)
            })?;
        let arguments = Arguments::parse(request.arguments.as_ref())?;
        let query = QueryRequest {
            agent_key: Some(agent.key.clone()),
            chat_id: arguments.chat_id,
            message: Some(arguments.message),
            stream: Some(true),
            // An MCP call cannot be re-attached to: if the call goes away, so does the run.
            on_disconnect: Some(OnDisconnect::Cancel),
            ..QueryRequest::default()
        };
        query.validate().map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let new = NewRun { keep_events: true, ..NewRun::new(agent, query, principal) };
        let (handle, observer) = match state.runs.start(new).await {
            Ok(started) => started,
            Err(e) => return refused(e.into()).map(Into::into),
        };
        tracing::info!(runId = %handle.run_id, chatId = %handle.chat_id, agentKey = %handle.agent_key, "MCP tools/call started a run");
        let progress = context.meta.get_progress_token().map(|token| ProgressFeed::start(context.peer.clone(), token));
        let outcome = follow(&handle, observer, progress.as_ref(), &context).await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        Ok(outcome.into_result(&handle).into())
    }
}

/// A JSON object from a `json!` literal that is one.
fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// What every agent tool takes.
fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "message": {"type": "string"},
            "chatId": {"type": "string", "description": "continue this chat"},
        },
        "required": ["message"],
    })
}

/// What a successful call's `structuredContent` holds.
fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "the agent's answer text"},
            "chatId": {"type": "string", "description": "pass it back as chatId to continue the chat"},
            "runId": {"type": "string"},
            "citations": {"type": "array", "items": {"type": "object"},
                "description": "the records the answer cites (docs/citations.md), each with its offset into answer in UTF-16 units; present only when it cites"},
        },
        "required": ["answer", "chatId", "runId"],
    })
}

/// Whether `name` is usable as an MCP tool name as it is.
fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The tool name of an agent key: characters outside `[A-Za-z0-9_-]` become `_`, cut to
/// [`MAX_TOOL_NAME`]. `None` when nothing of the key survives (a name of only `_` says nothing).
pub fn tool_name(key: &str) -> Option<String> {
    let name: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(MAX_TOOL_NAME)
        .collect();
    name.bytes().any(|b| b.is_ascii_alphanumeric()).then_some(name)
}

/// The catalog's agents with their tool names, in key order. A key that is a valid name keeps
/// it; a sanitised name that another agent already has is skipped (deterministically: valid keys
/// first, then key order), as is a key with nothing usable. `log`: say so (on `tools/list`, not
/// on every call).
fn agent_tools(catalog: &AgentCatalog, log: bool) -> Vec<(String, Arc<AgentDefinition>)> {
    let taken: HashSet<&str> = catalog.keys().filter(|k| is_tool_name(k)).collect();
    let mut sanitised: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(catalog.len());
    for agent in catalog.iter() {
        if is_tool_name(&agent.key) {
            out.push((agent.key.clone(), agent.clone()));
            continue;
        }
        match tool_name(&agent.key) {
            Some(name) if !taken.contains(name.as_str()) && sanitised.insert(name.clone()) => {
                out.push((name, agent.clone()))
            }
            Some(name) if log => tracing::warn!(
                agentKey = %agent.key, tool = %name,
                "agent not offered as an MCP tool: its sanitised name is another agent's"
            ),
            None if log => tracing::warn!(
                agentKey = %agent.key,
                "agent not offered as an MCP tool: its key has no character usable in a tool name"
            ),
            _ => {}
        }
    }
    out
}

/// A call's arguments, checked against [`input_schema`].
struct Arguments {
    message: String,
    chat_id: Option<String>,
}

impl Arguments {
    fn parse(arguments: Option<&JsonObject>) -> Result<Self, ErrorData> {
        let invalid = |msg: &str| ErrorData::invalid_params(msg.to_owned(), None);
        let empty = JsonObject::new();
        let arguments = arguments.unwrap_or(&empty);
        let message = match arguments.get("message") {
            Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
            Some(Value::String(_)) => return Err(invalid("`message` must not be blank")),
            Some(_) => return Err(invalid("`message` must be a string")),
            None => return Err(invalid("`message` is required: what to ask the agent")),
        };
        let chat_id = match arguments.get("chatId") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(_) => return Err(invalid("`chatId` must be a string (the chatId of an earlier result)")),
        };
        Ok(Self { message, chat_id })
    }
}

/// A run that could not start: a malformed request is an MCP error; a refusal the caller can act
/// on (chat busy, quota, a chat that is not theirs) is a tool error result they can read.
fn refused(e: ApiError) -> Result<CallToolResult, ErrorData> {
    tracing::info!(status = e.status.as_u16(), msg = %e.msg, "MCP tools/call refused");
    match e.status {
        StatusCode::BAD_REQUEST => Err(ErrorData::invalid_params(e.msg, None)),
        s if s.is_server_error() => Err(ErrorData::internal_error(e.msg, None)),
        _ => Ok(CallToolResult::error(vec![ContentBlock::text(e.msg)])),
    }
}

// -------------------------------------------------------------------------------- one call

/// How a call's run ended, and the answer text it streamed with its citations.
struct Outcome {
    answer: String,
    citations: Vec<Value>,
    end: End,
}

enum End {
    Completed,
    Failed(RunErrorInfo),
    Cancelled,
    /// The observer fell out of the run's event buffer (or the stream ended without a terminal
    /// event): the run goes on, but this call cannot tell its end.
    Lost,
}

impl Outcome {
    fn into_result(self, handle: &RunHandle) -> CallToolResult {
        let ids = json!({"chatId": handle.chat_id, "runId": handle.run_id});
        let mut result = match self.end {
            End::Completed => {
                let mut ok = CallToolResult::success(vec![ContentBlock::text(self.answer.clone())]);
                let mut structured = json!({"answer": self.answer, "chatId": handle.chat_id, "runId": handle.run_id});
                if !self.citations.is_empty() {
                    structured["citations"] = Value::Array(self.citations);
                }
                ok.structured_content = Some(structured);
                ok
            }
            End::Failed(e) => error_text(format!("the run failed ({}): {}", e.code.as_str(), e.message)),
            End::Cancelled => error_text("the run was cancelled".to_owned()),
            End::Lost => error_text(format!(
                "lost track of the run (it may still finish); its answer will be in chat {}",
                handle.chat_id
            )),
        };
        // On every result, error or not, so a host can continue or inspect the chat.
        result.meta = Some(MetaObject(object(ids)));
        result
    }
}

fn error_text(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Reads the run's events to its end, feeding the text to `progress`; interrupts the run when
/// the host cancels the call (`notifications/cancelled`, or its session or connection ends).
async fn follow(
    handle: &Arc<RunHandle>,
    observer: Observer,
    progress: Option<&ProgressFeed>,
    context: &RequestContext<RoleServer>,
) -> Outcome {
    let mut events = observer;
    let mut answer = String::new();
    let mut citations = Vec::new();
    // A content block began: its first delta of the run's own text is set apart.
    let mut new_block = false;
    // Where the current block starts in `answer`, in UTF-16 units (citation offsets count from it).
    let mut block_base = 0u64;
    // The current block's id and where it starts in `answer` (bytes, before its separator): a
    // revoked block leaves the result.
    let mut block: Option<(String, usize)> = None;
    let mut opened = String::new();
    let mut cancel_deadline: Option<tokio::time::Instant> = None;
    loop {
        let batch = match cancel_deadline {
            None => tokio::select! {
                batch = events.next_events() => batch,
                () = context.ct.cancelled() => {
                    tracing::info!(runId = %handle.run_id, "the MCP host cancelled the call; interrupting the run");
                    // As `POST /api/ap/interrupt` does; then keep reading to the run's end.
                    handle.cancel(CancelReason::Interrupted);
                    cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_WAIT);
                    continue;
                }
            },
            // The result of a cancelled call is not sent; this wait only keeps the call from
            // ending before its run does.
            Some(deadline) => match tokio::time::timeout_at(deadline, events.next_events()).await {
                Ok(batch) => batch,
                Err(_) => return Outcome { answer, citations, end: End::Cancelled },
            },
        };
        let Some(batch) = batch else {
            return Outcome { answer, citations, end: End::Lost };
        };
        for event in batch {
            match &event.payload {
                EventPayload::ContentStart(e) => {
                    new_block = true;
                    opened.clone_from(&e.content_id);
                }
                // A child task's text (a sub-agent's, a parallel plan task's) is its parent's
                // business: the answer is the run's own text.
                EventPayload::ContentDelta(_) if event.task_id.is_some() => {}
                EventPayload::ContentDelta(d) => {
                    if std::mem::take(&mut new_block) {
                        block = Some((opened.clone(), answer.len()));
                        block_base = begin_block(&mut answer, progress);
                    }
                    answer.push_str(&d.delta);
                    if let Some(p) = progress {
                        p.push(&d.delta, true);
                    }
                }
                EventPayload::ContentCitation(_) if event.task_id.is_some() => {}
                EventPayload::ContentCitation(c) => {
                    if std::mem::take(&mut new_block) {
                        block = Some((opened.clone(), answer.len()));
                        block_base = begin_block(&mut answer, progress);
                    }
                    let mut fields = agw_protocol::adapters::citation_fields(c);
                    fields.remove("contentId");
                    fields.insert("offset".into(), json!(block_base + c.offset));
                    citations.push(Value::Object(fields));
                }
                // A withdrawn answer (a guard's, or one that broke the output schema before its
                // repair) is not part of the result; progress already sent cannot be taken back.
                EventPayload::ContentRevoke(r) if event.task_id.is_none() => {
                    if let Some((_, start)) = block.take_if(|(id, _)| *id == r.content_id) {
                        answer.truncate(start);
                        citations.retain(|c| c["offset"].as_u64().is_some_and(|offset| offset < block_base));
                    }
                }
                EventPayload::RunComplete(_) => return Outcome { answer, citations, end: End::Completed },
                EventPayload::RunError(e) => return Outcome { answer, citations, end: End::Failed(e.error.clone()) },
                EventPayload::RunCancel(_) => return Outcome { answer, citations, end: End::Cancelled },
                _ => {}
            }
        }
    }
}

/// A new content block of the run's own text starts in `answer`: set apart from the text before
/// it (blocks of different model turns would otherwise run into one another). Returns where it
/// starts, in UTF-16 units.
fn begin_block(answer: &mut String, progress: Option<&ProgressFeed>) -> u64 {
    if !answer.is_empty() && !answer.ends_with('\n') {
        answer.push_str("\n\n");
        if let Some(p) = progress {
            p.push("\n\n", false);
        }
    }
    answer.encode_utf16().count() as u64
}

/// Sends a call's streamed text as `notifications/progress` (`progress` = deltas so far,
/// `message` = the text since the previous notification) from a task of its own, so a host that
/// reads slowly never holds up reading the run's events (the run would drop a lagging reader).
/// While the host keeps up that is one notification per delta; behind, the waiting deltas go out
/// together in the next one. Concatenated, the messages are the answer.
struct ProgressFeed {
    shared: Arc<ProgressShared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct ProgressShared {
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    text: String,
    deltas: u64,
    closed: bool,
}

impl ProgressShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ProgressFeed {
    fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let shared = Arc::new(ProgressShared::default());
        let feed = shared.clone();
        let task = tokio::spawn(async move {
            let mut sent = 0;
            loop {
                let (batch, closed) = {
                    let mut pending = feed.lock();
                    // Only with a new delta: `progress` must grow with every notification, and a
                    // block separator alone is no progress (it leaves with the next delta).
                    let batch = (pending.deltas > sent).then(|| (std::mem::take(&mut pending.text), pending.deltas));
                    (batch, pending.closed)
                };
                if let Some((text, deltas)) = batch {
                    sent = deltas;
                    let param = ProgressNotificationParam::new(token.clone(), deltas as f64).with_message(text);
                    if peer.notify_progress(param).await.is_err() {
                        // The host's transport is gone; the call ends through its cancellation.
                        return;
                    }
                    continue;
                }
                if closed {
                    return;
                }
                // A `notify_one` before this wait leaves a permit, so no push is missed.
                feed.wake.notified().await;
            }
        });
        Self { shared, task }
    }

    /// Queues `text`; `delta`: it is one of the run's deltas (counted as progress).
    fn push(&self, text: &str, delta: bool) {
        let mut pending = self.shared.lock();
        pending.text.push_str(text);
        if delta {
            pending.deltas += 1;
        }
        drop(pending);
        self.shared.wake.notify_one();
    }

    /// Lets the last notification go out before the call answers (bounded by [`PROGRESS_FLUSH`]).
    async fn finish(self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        let mut task = self.task;
        if tokio::time::timeout(PROGRESS_FLUSH, &mut task).await.is_err() {
            task.abort();
        }
    }
}

// ---------------------------------------------------------------------- streamable HTTP

/// The `/mcp` service of one gateway state, with its sessions.
pub struct Mount {
    service: StreamableHttpService<AgentTools, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    /// With auth on: who opened each session. Another caller presenting its id is answered like
    /// an unknown session, so it can neither cancel that caller's calls nor read its streams.
    owners: Mutex<HashMap<String, Owner>>,
}

/// The state's mount, made the first time `/mcp` is used (so the service exists only then); the
/// state owns it, and its handler holds the state weakly (no cycle).
fn mount(state: &AppState) -> Arc<Mount> {
    let slot = state.mcp_mount.get_or_init(|| new_mount(state)).clone();
    // Only this function fills the slot, always with a `Mount`.
    slot.downcast::<Mount>().unwrap_or_else(|_| new_mount(state))
}

fn new_mount(state: &AppState) -> Arc<Mount> {
    let mut sessions = LocalSessionManager::default();
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(SESSION_IDLE);
    sessions.session_config = session_config;
    let sessions = Arc::new(sessions);
    let server = &state.settings.server;
    // agw's own Host allow-list and CORS ran before this (routes), so rmcp's loopback-only Host
    // check would only refuse what the operator allowed.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(server.max_request_bytes)
        .with_sse_keep_alive(Some(server.heartbeat_interval));
    let handler = AgentTools::http(state);
    let service = StreamableHttpService::new(move || Ok(handler.clone()), sessions.clone(), config);
    Arc::new(Mount { service, sessions, owners: Mutex::new(HashMap::new()) })
}

impl Mount {
    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn may_use(&self, session: &str, principal: Option<&Principal>) -> bool {
        let Some(principal) = principal else { return true };
        self.owners().get(session).is_none_or(|owner| principal.can_access(Some(owner)))
    }

    /// Records who opened `session`, forgetting sessions rmcp has closed (idle, deleted).
    async fn opened(&self, session: String, owner: Owner) {
        let live: HashSet<String> = self.sessions.sessions.read().await.keys().map(|id| id.to_string()).collect();
        let mut owners = self.owners();
        owners.retain(|id, _| live.contains(id));
        owners.insert(session, owner);
    }
}

/// `/mcp`: any method; rmcp's streamable HTTP transport answers (POST messages, GET the
/// session's stream, DELETE ends the session). `routes` checked the Host, CORS and (with auth
/// configured) the bearer token first and put the principal into the request's extensions.
pub async fn handle(state: &AppState, req: Request<RequestBody>) -> Response<BoxBody> {
    let mount = mount(state);
    let principal = req.extensions().get::<Principal>().cloned();
    let session = req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(id) = &session
        && !mount.may_use(id, principal.as_ref())
    {
        tracing::info!("MCP request with another caller's session refused");
        return session_not_found();
    }
    let method = req.method().clone();
    let (parts, body) = req.into_parts();
    // agw's door limits (size, read timeout) apply to MCP messages as to every body.
    let mut limited = Request::new(body);
    if let Some(length) = parts.headers.get(header::CONTENT_LENGTH) {
        limited.headers_mut().insert(header::CONTENT_LENGTH, length.clone());
    }
    let server = &state.settings.server;
    let bytes = match read_body(limited, server.max_request_bytes, server.limits.body_read_timeout).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let mut resp = mount.service.handle(Request::from_parts(parts, Full::new(bytes))).await;
    // rmcp answers an ended session with an empty 202; clients expect 200 or 204 (the Python SDK
    // logs a failed termination otherwise), and nothing is pending after a DELETE.
    if method == Method::DELETE && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::NO_CONTENT;
    }
    if let Some(principal) = &principal {
        let opened = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        if session.is_none()
            && let Some(id) = opened
        {
            mount.opened(id, principal.owner()).await;
        }
        if method == Method::DELETE
            && resp.status().is_success()
            && let Some(id) = &session
        {
            mount.owners().remove(id);
        }
    }
    resp.map(BodyExt::boxed_unsync)
}

/// What rmcp answers for a session it does not know.
fn session_not_found() -> Response<BoxBody> {
    let mut resp = Response::new(full(Bytes::from_static(b"Not Found: Session not found")));
    *resp.status_mut() = StatusCode::NOT_FOUND;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

// ---------------------------------------------------------------------------------- stdio

/// Serves the agents over stdin/stdout until the host closes stdin or `shutdown` resolves
/// (`agw mcp-stdio`). Nothing else may write to stdout meanwhile: it carries the protocol.
pub async fn serve_stdio(state: &AppState, shutdown: impl Future<Output = ()>) -> Result<(), McpServeError> {
    let serve = async {
        let running = AgentTools::stdio(state)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpServeError::Handshake(Box::new(e)))?;
        tracing::info!("MCP host connected over stdio");
        let stop = running.cancellation_token();
        Ok::<_, McpServeError>((running, stop))
    };
    tokio::pin!(shutdown);
    let (running, stop) = tokio::select! {
        started = serve => started?,
        () = &mut shutdown => return Ok(()),
    };
    let waiting = running.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        quit = &mut waiting => {
            tracing::info!(reason = ?quit?, "MCP host disconnected");
        }
        () = &mut shutdown => {
            // Cancelling the service cancels every call in flight, which interrupts its run.
            stop.cancel();
            let _ = waiting.await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_keep_valid_keys_and_sanitise_the_rest() {
        assert_eq!(tool_name("weather-bot_2").as_deref(), Some("weather-bot_2"));
        assert_eq!(tool_name("a.b c/d").as_deref(), Some("a_b_c_d"));
        assert_eq!(tool_name("日本").as_deref(), None);
        assert_eq!(tool_name("").as_deref(), None);
        assert_eq!(tool_name("__").as_deref(), None);
        let long = "x".repeat(100);
        assert_eq!(tool_name(&long).map(|n| n.len()), Some(MAX_TOOL_NAME));
        assert_eq!(tool_name("é1").as_deref(), Some("_1"));
    }

    fn catalog(keys: &[&str]) -> AgentCatalog {
        AgentCatalog::from_sources(keys.iter().enumerate().map(|(i, key)| {
            let text = serde_json::json!({"key": key, "mode": "ONESHOT", "modelConfig": {"providerKey": "p", "model": "m"},
                "plain": {"systemPrompt": "x"}});
            (format!("{i:02}.json"), text.to_string())
        }))
    }

    #[test]
    fn a_sanitised_name_never_takes_a_valid_key_and_collisions_are_skipped() {
        let catalog = catalog(&["a.b", "a_b", "c d", "c?d", "ok"]);
        assert_eq!(catalog.len(), 5, "{:?}", catalog.problems());
        let names: Vec<(String, String)> =
            agent_tools(&catalog, false).into_iter().map(|(name, agent)| (name, agent.key.clone())).collect();
        assert_eq!(
            names,
            vec![
                ("a_b".to_owned(), "a_b".to_owned()),
                ("c_d".to_owned(), "c d".to_owned()),
                ("ok".to_owned(), "ok".to_owned()),
            ]
        );
    }

    #[test]
    fn arguments_are_checked() {
        let args = |v: Value| Arguments::parse(Some(&object(v)));
        assert!(args(json!({"message": "hi"})).is_ok_and(|a| a.message == "hi" && a.chat_id.is_none()));
        assert!(args(json!({"message": "hi", "chatId": null})).is_ok_and(|a| a.chat_id.is_none()));
        assert!(args(json!({"message": "hi", "chatId": "c"})).is_ok_and(|a| a.chat_id.as_deref() == Some("c")));
        assert!(args(json!({"message": " "})).is_err());
        assert!(args(json!({"message": 3})).is_err());
        assert!(args(json!({"chatId": "c"})).is_err());
        assert!(args(json!({"message": "hi", "chatId": 7})).is_err());
        assert!(Arguments::parse(None).is_err());
    }
}
