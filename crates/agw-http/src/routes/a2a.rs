//! A2A 1.0 (issue 38, first part; `docs/protocols.md` "A2A"): every agent is an A2A agent.
//!
//! - Discovery: `GET /.well-known/agent-card.json` (the default agent) and
//!   `GET /a2a/{agentKey}/.well-known/agent-card.json`, public like any card: built from the
//!   agent's definition, naming its JSON-RPC endpoint and, with auth on, a bearer scheme.
//! - `POST /a2a/{agentKey}`: the JSON-RPC 2.0 binding. `SendMessage` (blocking unless
//!   `configuration.returnImmediately`), `SendStreamingMessage` (SSE), `GetTask`, `CancelTask`
//!   and `SubscribeToTask`; the methods of capabilities the card does not claim answer the
//!   protocol's errors for them (push notifications, the extended card), `ListTasks` answers
//!   `UnsupportedOperationError` in this part.
//! - The request must name protocol version 1.0 (`A2A-Version` header or query parameter; none
//!   means 0.3): anything else is `VersionNotSupportedError`.
//!
//! A task is a run ([`A2aMapper`]): the task id is the run id, `contextId` the chat — a UUID
//! continues that chat, another string names a stable chat derived from it and the caller, as
//! the AI SDK's `id` does. Behind the same door as every route: Host check, CORS, body limit,
//! JWT, and a task of another user is not found.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};

use agw_protocol::Event;
use agw_protocol::adapters::a2a::{A2aMapper, PROTOCOL_VERSION, sse_frame};
use agw_protocol::request::QueryRequest;

use super::HandlerResult;
use super::ai_sdk::chat_id_for;
use super::query::sse_body_response;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, SseBody};
use crate::envelope::{ApiError, json_response};
use crate::request::read_body;
use crate::runs::{NewRun, RunError};
use crate::state::AppState;

/// Where an agent card is published, under the site and under each agent's endpoint.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The prefix of the agents' JSON-RPC endpoints.
pub const PREFIX: &str = "/a2a/";

/// JSON-RPC 2.0 and A2A error codes (A2A 1.0 §5.4, §9.5).
mod code {
    pub const PARSE: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A JSON-RPC error: its code, message and agw's own code (in `data`).
#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
    agw_code: Option<String>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), agw_code: None }
    }

    /// A run service refusal: not found is the task's absence, the rest keep agw's code.
    fn of_run(error: RunError, task_method: bool) -> Self {
        let api = ApiError::from(error);
        let agw_code = api.body.as_ref().and_then(|b| b.get("code")).and_then(Value::as_str).map(str::to_owned);
        let code = match api.status {
            StatusCode::NOT_FOUND if task_method => code::TASK_NOT_FOUND,
            StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => code::INVALID_PARAMS,
            StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS => code::UNSUPPORTED_OPERATION,
            _ => code::INTERNAL,
        };
        Self { code, message: api.msg, agw_code }
    }

    fn body(&self, id: &Value) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(agw) = &self.agw_code {
            error["data"] =
                json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": agw, "domain": "agw"}]);
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
    }
}

fn rpc_response(body: &Value) -> HandlerResult {
    Ok(json_response(StatusCode::OK, body))
}

/// `/a2a/{agentKey}` → the agent key.
pub(crate) fn agent_endpoint(path: &str) -> Option<&str> {
    let key = path.strip_prefix(PREFIX)?;
    (!key.is_empty() && !key.contains('/')).then_some(key)
}

/// `/a2a/{agentKey}/.well-known/agent-card.json` → the agent key.
pub(crate) fn agent_card_path(path: &str) -> Option<&str> {
    let key = path.strip_prefix(PREFIX)?.strip_suffix(CARD_PATH)?;
    (!key.is_empty() && !key.contains('/')).then_some(key)
}

/// The agent `agent_key` names (`None`: the default agent) when it is served over A2A: a 404
/// otherwise, as for a path that does not exist (`agw.a2a.enabled`, the agent's `a2a.enabled`).
fn served(state: &AppState, agent_key: Option<&str>) -> Result<Arc<agw_modes::definition::AgentDefinition>, ApiError> {
    let agent = state.runs.agent(agent_key)?;
    if !state.settings.a2a_enabled || !agent.a2a_enabled {
        return Err(ApiError::not_found(format!("agent {} is not served over A2A", agent.key)));
    }
    Ok(agent)
}

/// `GET` an agent card (`agent_key` `None`: the default agent).
pub fn card(state: &AppState, agent_key: Option<&str>, headers: &HeaderMap) -> HandlerResult {
    let agent = served(state, agent_key)?;
    let host = headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("127.0.0.1");
    let url = format!("http://{host}{PREFIX}{}", agent.key);
    let mut card = json!({
        "name": if agent.name.trim().is_empty() { agent.key.clone() } else { agent.name.clone() },
        "description": agent.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}],
        "provider": {"organization": "agw", "url": format!("http://{host}/")},
        "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": agent.key,
            "name": if agent.name.trim().is_empty() { agent.key.clone() } else { agent.name.clone() },
            "description": if agent.description.trim().is_empty() { format!("The agent {}", agent.key) } else { agent.description.clone() },
            "tags": [agent.mode_kind().as_str().to_lowercase()],
        }],
    });
    if state.auth.is_some() {
        card["securitySchemes"] =
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}});
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    Ok(json_response(StatusCode::OK, &card))
}

/// Whether the request names A2A 1.0 (patch numbers ignored; none means 0.3).
fn version_ok(headers: &HeaderMap, query: &std::collections::HashMap<String, String>) -> Result<(), String> {
    let named = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("A2A-Version").cloned())
        .unwrap_or_default();
    let named = named.trim();
    let mut parts = named.split('.');
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or("0"));
    if major == "1" && minor == "0" {
        return Ok(());
    }
    let shown = if named.is_empty() { "0.3 (no A2A-Version)" } else { named };
    Err(format!("A2A version {shown} is not supported; this agent speaks {PROTOCOL_VERSION}"))
}

/// `POST /a2a/{agentKey}`: one JSON-RPC request.
pub async fn rpc(state: &AppState, agent_key: &str, req: Request<RequestBody>) -> HandlerResult {
    served(state, Some(agent_key))?;
    let principal = req.extensions().get::<Principal>().cloned();
    let version = version_ok(req.headers(), &super::query_params(&req));
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return rpc_response(&RpcError::new(code::PARSE, format!("invalid JSON: {e}")).body(&Value::Null)),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str);
    let (Some(method), Some("2.0")) = (method, request.get("jsonrpc").and_then(Value::as_str)) else {
        let message = "a JSON-RPC 2.0 request object with a method is required";
        return rpc_response(&RpcError::new(code::INVALID_REQUEST, message).body(&id));
    };
    if let Err(message) = version {
        return rpc_response(&RpcError::new(code::VERSION_NOT_SUPPORTED, message).body(&id));
    }
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    let principal = principal.as_ref();
    let answer = match method {
        "SendMessage" => send(state, agent_key, &params, principal).await,
        "SendStreamingMessage" => return stream(state, agent_key, &params, id, principal).await,
        "GetTask" => get_task(state, task_id(&params), principal).await,
        "CancelTask" => cancel(state, task_id(&params), principal).await,
        "SubscribeToTask" => return subscribe(state, task_id(&params), id, principal).await,
        "ListTasks" => Err(RpcError::new(code::UNSUPPORTED_OPERATION, "ListTasks is not offered yet")),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => {
            Err(RpcError::new(code::PUSH_NOT_SUPPORTED, "this agent does not send push notifications"))
        }
        "GetExtendedAgentCard" => {
            Err(RpcError::new(code::EXTENDED_CARD_NOT_CONFIGURED, "this agent has no extended agent card"))
        }
        other => Err(RpcError::new(code::METHOD_NOT_FOUND, format!("no method {other:?}"))),
    };
    rpc_response(&match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => e.body(&id),
    })
}

fn task_id(params: &Value) -> Result<String, RpcError> {
    match params.get("id").and_then(Value::as_str).map(str::trim) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(RpcError::new(code::INVALID_PARAMS, "params.id (the task id) is required")),
    }
}

/// What a `SendMessageRequest` asks for.
struct Sent {
    query: QueryRequest,
    return_immediately: bool,
}

fn read_message(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    principal: Option<&Principal>,
) -> Result<Sent, RpcError> {
    let invalid = |m: &str| RpcError::new(code::INVALID_PARAMS, m);
    let message =
        params.get("message").filter(|m| m.is_object()).ok_or_else(|| invalid("params.message is required"))?;
    if message.get("role").and_then(Value::as_str) != Some("ROLE_USER") {
        return Err(invalid("params.message.role must be ROLE_USER"));
    }
    if message.get("taskId").and_then(Value::as_str).is_some_and(|t| !t.trim().is_empty()) {
        return Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            "continuing a task with a message is not offered yet: send it without taskId, with the task's contextId",
        ));
    }
    let parts =
        message.get("parts").and_then(Value::as_array).ok_or_else(|| invalid("params.message.parts is required"))?;
    let mut texts = Vec::new();
    for part in parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => texts.push(text),
            None => {
                return Err(RpcError::new(
                    code::CONTENT_TYPE_NOT_SUPPORTED,
                    "only text parts are accepted (files and data parts are not offered yet)",
                ));
            }
        }
    }
    let text = texts.join("\n");
    if text.trim().is_empty() {
        return Err(invalid("params.message has no text"));
    }
    let chat_id = match message.get("contextId").and_then(Value::as_str).map(str::trim) {
        None | Some("") => None,
        Some(context) => Some(chat_id_for(context, principal)),
    };
    let agent = state.runs.agent(Some(agent_key)).map_err(|e| RpcError::of_run(e, false))?;
    let query =
        QueryRequest { agent_key: Some(agent.key.clone()), chat_id, message: Some(text), ..QueryRequest::default() };
    let return_immediately =
        params.pointer("/configuration/returnImmediately").and_then(Value::as_bool).unwrap_or(false);
    Ok(Sent { query, return_immediately })
}

async fn start(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    principal: Option<&Principal>,
) -> Result<(bool, Arc<crate::runs::RunHandle>, crate::runs::Observer), RpcError> {
    let Sent { mut query, return_immediately } = read_message(state, agent_key, params, principal)?;
    if return_immediately {
        // Nobody watches a task it returned at once: it runs to its end.
        query.on_disconnect = Some(agw_protocol::OnDisconnect::Continue);
    }
    let agent = state.runs.agent(Some(agent_key)).map_err(|e| RpcError::of_run(e, false))?;
    let new = NewRun { keep_events: true, ..NewRun::new(agent, query, principal.cloned()) };
    let (handle, observer) = state.runs.start(new).await.map_err(|e| RpcError::of_run(e, false))?;
    tracing::info!(runId = %handle.run_id, chatId = %handle.chat_id, agentKey = %handle.agent_key, "A2A task started");
    Ok((return_immediately, handle, observer))
}

/// `SendMessage`: the task when it ends (or at once with `returnImmediately`).
async fn send(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let (immediately, handle, mut observer) = start(state, agent_key, params, principal).await?;
    let mut mapper = A2aMapper::new(&handle.run_id, &handle.chat_id);
    let mut sink = Vec::new();
    if immediately {
        while let Some(Some(batch)) = observer.next_events().now_or_never() {
            feed(&mut mapper, &batch, &mut sink);
        }
        return Ok(json!({"task": mapper.task()}));
    }
    while !mapper.is_finished() {
        let Some(batch) = observer.next_events().await else { break };
        feed(&mut mapper, &batch, &mut sink);
        sink.clear();
    }
    Ok(json!({"task": mapper.task()}))
}

fn feed(mapper: &mut A2aMapper, batch: &[Arc<Event>], out: &mut Vec<Value>) {
    for event in batch {
        mapper.map(event, out);
    }
}

/// The events of a run that has started, however far it got: from its oldest held event.
async fn run_events(
    state: &AppState,
    task_id: &str,
    principal: Option<&Principal>,
) -> Result<futures::stream::BoxStream<'static, Vec<Arc<Event>>>, RpcError> {
    let attached = state.runs.attach(task_id, None, principal).await.map_err(|e| RpcError::of_run(e, true))?;
    Ok(super::events::attached_events(attached))
}

/// The task as its run stands now: the events it holds, read without waiting for more.
async fn snapshot(state: &AppState, task_id: &str, principal: Option<&Principal>) -> Result<A2aMapper, RpcError> {
    let chat_id = state.runs.local_run(task_id, principal).map(|h| h.chat_id.clone()).unwrap_or_default();
    let mut events = run_events(state, task_id, principal).await?;
    let mut mapper = A2aMapper::new(task_id, chat_id);
    let mut out = Vec::new();
    // What is there arrives at once; a quiet moment means the run has nothing more yet.
    while let Ok(Some(batch)) = tokio::time::timeout(Duration::from_millis(100), events.next()).await {
        feed(&mut mapper, &batch, &mut out);
        if mapper.is_finished() {
            break;
        }
    }
    Ok(mapper)
}

/// `GetTask`.
async fn get_task(
    state: &AppState,
    task_id: Result<String, RpcError>,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let task_id = task_id?;
    Ok(snapshot(state, &task_id, principal).await?.task())
}

/// `CancelTask`: interrupts the run; a task that had ended is not cancelable.
async fn cancel(
    state: &AppState,
    task_id: Result<String, RpcError>,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let task_id = task_id?;
    let interrupted = state.runs.interrupt(&task_id, principal).await.map_err(|e| RpcError::of_run(e, true))?;
    if !interrupted.accepted {
        return Err(RpcError::new(
            code::TASK_NOT_CANCELABLE,
            format!("the task had already ended ({})", interrupted.status),
        ));
    }
    Ok(snapshot(state, &task_id, principal).await?.task())
}

/// `SendStreamingMessage`: the task, then one stream response per event that maps to one, until
/// the task ends.
async fn stream(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    id: Value,
    principal: Option<&Principal>,
) -> HandlerResult {
    let (_, handle, observer) = match start(state, agent_key, params, principal).await {
        Ok(started) => started,
        Err(e) => return rpc_response(&e.body(&id)),
    };
    let mut mapper = A2aMapper::new(&handle.run_id, &handle.chat_id);
    let mut first = Vec::new();
    mapper.start(now_ms(), &mut first);
    Ok(sse(state, id, mapper, first, super::events::observed(observer)))
}

/// `SubscribeToTask`: the task's stream from its start (as far as the run holds its events),
/// then live; a task that has ended is `UnsupportedOperationError`.
async fn subscribe(
    state: &AppState,
    task_id: Result<String, RpcError>,
    id: Value,
    principal: Option<&Principal>,
) -> HandlerResult {
    let task_id = match task_id {
        Ok(t) => t,
        Err(e) => return rpc_response(&e.body(&id)),
    };
    if let Some(handle) = state.runs.local_run(&task_id, principal)
        && handle.status().is_finished()
        && !handle.is_waiting()
    {
        let message = "the task has ended: read it with GetTask";
        return rpc_response(&RpcError::new(code::UNSUPPORTED_OPERATION, message).body(&id));
    }
    let events = match run_events(state, &task_id, principal).await {
        Ok(events) => events,
        Err(e) => return rpc_response(&e.body(&id)),
    };
    let mapper = A2aMapper::new(&task_id, "");
    Ok(sse(state, id, mapper, Vec::new(), events))
}

fn sse(
    state: &AppState,
    id: Value,
    mapper: A2aMapper,
    first: Vec<Value>,
    events: futures::stream::BoxStream<'static, Vec<Arc<Event>>>,
) -> http::Response<BoxBody> {
    struct St {
        events: futures::stream::BoxStream<'static, Vec<Arc<Event>>>,
        mapper: A2aMapper,
        first: Vec<Value>,
        id: Value,
    }
    let start = St { events, mapper, first, id };
    let frames = futures::stream::unfold(start, |mut st| async move {
        let mut out = std::mem::take(&mut st.first);
        if out.is_empty() {
            if st.mapper.is_finished() {
                return None;
            }
            let batch = st.events.next().await?;
            for event in &batch {
                // A subscriber's stream begins with the task, at the run's start.
                if let agw_protocol::EventPayload::RunStart(e) = &event.payload
                    && !st.mapper.started()
                {
                    st.mapper.adopt_context(&e.chat_id);
                    st.mapper.start(event.timestamp, &mut out);
                }
                st.mapper.map(event, &mut out);
            }
        }
        let mut bytes = Vec::new();
        for result in &out {
            bytes.extend_from_slice(&sse_frame(&st.id, result));
        }
        Some((Bytes::from(bytes), st))
    });
    sse_body_response(SseBody::from_stream(frames, state.settings.server.heartbeat_interval))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
