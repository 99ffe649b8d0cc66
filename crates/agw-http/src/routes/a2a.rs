//! A2A 1.0 (issue 38, the server; `docs/protocols.md` "A2A"): every agent is an A2A agent.
//!
//! - Discovery: `GET /.well-known/agent-card.json` (the default agent) and
//!   `GET /a2a/{agentKey}/.well-known/agent-card.json`, public like any card: built from the
//!   agent's definition, naming its JSON-RPC endpoint, agw's seq extension and, with auth on, a
//!   bearer scheme.
//! - `POST /a2a/{agentKey}`: the JSON-RPC 2.0 binding. `SendMessage` (blocking unless
//!   `configuration.returnImmediately`), `SendStreamingMessage` (SSE), `GetTask`, `ListTasks`,
//!   `CancelTask` and `SubscribeToTask`; the methods of capabilities the card does not claim
//!   answer the protocol's errors for them (push notifications, the extended card).
//! - A task that waits for a person is `INPUT_REQUIRED`; its next message (same `taskId`) is the
//!   submit that answers it. A quota refusal is a `REJECTED` task.
//! - Stream frames carry the run's seq as their SSE id; `SubscribeToTask` with `Last-Event-ID`
//!   goes on right after it ([`SEQ_EXTENSION`]).
//! - The request must name protocol version 1.0 (`A2A-Version` header or query parameter; none
//!   means 0.3): anything else is `VersionNotSupportedError`.
//!
//! A task is a run ([`A2aMapper`]): the task id is the run id, `contextId` the chat — a UUID
//! continues that chat, another string names a stable chat derived from it and the caller, as
//! the AI SDK's `id` does. Behind the same door as every route: Host check, CORS, body limit,
//! JWT, and a task of another user is not found.

mod push;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};

use agw_protocol::Event;
use agw_protocol::adapters::a2a::{A2aMapper, PROTOCOL_VERSION, sse_frame};
use agw_protocol::request::{QueryRequest, SubmitRequest};

use super::HandlerResult;
use super::ai_sdk::chat_id_for;
use super::query::sse_body_response;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, SseBody};
use crate::envelope::{ApiError, json_response};
use crate::request::read_body;
use crate::runs::{NewRun, RunError};
use crate::state::AppState;

/// agw's A2A extension: stream responses carry the run's seq as their SSE `id`, and
/// `SubscribeToTask` with `Last-Event-ID` goes on right after that event (declared in the card).
pub const SEQ_EXTENSION: &str = "https://agw.dev/a2a/extensions/seq-resume/v1";

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

    /// The HTTP+JSON binding's error: the status and `google.rpc.Status` A2A maps the code to,
    /// its reason in an `ErrorInfo` (agw's own code in its metadata).
    fn rest_response(&self) -> http::Response<BoxBody> {
        let (status, name, reason) = match self.code {
            code::TASK_NOT_FOUND => (StatusCode::NOT_FOUND, "NOT_FOUND", "TASK_NOT_FOUND"),
            code::METHOD_NOT_FOUND => (StatusCode::NOT_FOUND, "NOT_FOUND", "METHOD_NOT_FOUND"),
            code::TASK_NOT_CANCELABLE => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
            code::PUSH_NOT_SUPPORTED => {
                (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")
            }
            code::UNSUPPORTED_OPERATION => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
            code::CONTENT_TYPE_NOT_SUPPORTED => {
                (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
            }
            code::EXTENDED_CARD_NOT_CONFIGURED => {
                (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED")
            }
            code::VERSION_NOT_SUPPORTED => (StatusCode::BAD_REQUEST, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"),
            code::INVALID_PARAMS => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "INVALID_PARAMS"),
            code::INVALID_REQUEST | code::PARSE => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "INVALID_REQUEST"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "INTERNAL_ERROR"),
        };
        let mut info = json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
            "domain": "a2a-protocol.org"});
        if let Some(agw) = &self.agw_code {
            info["metadata"] = json!({"agwCode": agw});
        }
        let body =
            json!({"error": {"code": status.as_u16(), "status": name, "message": self.message, "details": [info]}});
        json_response(status, &body)
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
    Ok(json_response(StatusCode::OK, &card_json(state, &agent, host_of(headers))))
}

fn host_of(headers: &HeaderMap) -> &str {
    headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("127.0.0.1")
}

/// What a message to `agent` may carry: text and JSON, and the images and PDFs its model takes
/// (docs/models.md "Images and files").
fn input_modes(state: &AppState, agent: &agw_modes::definition::AgentDefinition) -> Vec<&'static str> {
    let support = state.catalogs().providers.attachments(&agent.agent_provider_key());
    let mut modes = vec!["text/plain", "application/json"];
    if support.image {
        modes.extend(agw_protocol::attachment::IMAGE_TYPES);
    }
    if support.pdf {
        modes.push("application/pdf");
    }
    modes
}

/// The public card of `agent`, reached at `host`.
fn card_json(state: &AppState, agent: &agw_modes::definition::AgentDefinition, host: &str) -> Value {
    let url = format!("http://{host}{PREFIX}{}", agent.key);
    let name = if agent.name.trim().is_empty() { agent.key.clone() } else { agent.name.clone() };
    let mut card = json!({
        "name": name,
        "description": agent.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": PROTOCOL_VERSION},
        ],
        "provider": {"organization": "agw", "url": format!("http://{host}/")},
        "capabilities": {"streaming": true, "pushNotifications": state.settings.a2a_push.enabled,
            // Only an authenticated client gets more than the public card.
            "extendedAgentCard": state.auth.is_some(),
            "extensions": [{"uri": SEQ_EXTENSION, "required": false,
                "description": "Each stream response's SSE id is the run's seq; SubscribeToTask with Last-Event-ID continues right after it, with no gap and no duplicate."}]},
        "defaultInputModes": input_modes(state, agent),
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": agent.key,
            "name": name,
            "description": if agent.description.trim().is_empty() { format!("The agent {}", agent.key) } else { agent.description.clone() },
            "tags": [agent.mode_kind().as_str().to_lowercase()],
        }],
    });
    if state.auth.is_some() {
        card["securitySchemes"] =
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}});
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// `GetExtendedAgentCard` (auth on: the caller has a valid token): the public card plus one
/// skill per tool, skill and sub-agent the agent may use. With auth off there is nobody to
/// tell apart, so there is no extended card.
fn extended_card(state: &AppState, agent_key: &str, host: &str) -> Result<Value, RpcError> {
    if state.auth.is_none() {
        return Err(RpcError::new(code::EXTENDED_CARD_NOT_CONFIGURED, "this agent has no extended agent card"));
    }
    let agent = state.runs.agent(Some(agent_key)).map_err(|e| RpcError::of_run(e, false))?;
    let mut card = card_json(state, &agent, host);
    let tools = state.catalogs().tools.load();
    let mut skills = Vec::new();
    for name in agent.tool_names() {
        let description = tools.get(&name).map(|t| t.description.clone()).filter(|d| !d.is_empty());
        skills.push(json!({"id": format!("tool:{name}"), "name": name,
            "description": description.unwrap_or_else(|| format!("The tool {name}")), "tags": ["tool"]}));
    }
    for skill in &agent.skills {
        skills.push(json!({"id": format!("skill:{skill}"), "name": skill, "description": format!("The skill {skill}"), "tags": ["skill"]}));
    }
    for sub in &agent.sub_agents {
        skills.push(json!({"id": format!("agent:{sub}"), "name": sub, "description": format!("The sub-agent {sub}"), "tags": ["sub-agent"]}));
    }
    if let Some(list) = card["skills"].as_array_mut() {
        list.extend(skills);
    }
    Ok(card)
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

/// How a request came, and how its answer goes back: A2A's JSON-RPC binding (answers and
/// errors in the JSON-RPC envelope, HTTP 200) or its HTTP+JSON binding (the bare objects;
/// errors as HTTP statuses with a `google.rpc.Status`).
#[derive(Debug, Clone)]
enum Binding {
    /// The request's `id`.
    JsonRpc(Value),
    Rest,
}

impl Binding {
    fn answer(&self, answer: Result<Value, RpcError>) -> HandlerResult {
        match (self, answer) {
            (Self::JsonRpc(id), Ok(result)) => rpc_response(&json!({"jsonrpc": "2.0", "id": id, "result": result})),
            (Self::JsonRpc(id), Err(e)) => rpc_response(&e.body(id)),
            (Self::Rest, Ok(result)) => Ok(json_response(StatusCode::OK, &result)),
            (Self::Rest, Err(e)) => Ok(e.rest_response()),
        }
    }

    fn error(&self, error: RpcError) -> HandlerResult {
        self.answer(Err(error))
    }

    /// One stream response as an SSE frame: `seq` (the run event it came from) is its id.
    fn frame(&self, result: &Value, seq: u64) -> Vec<u8> {
        match self {
            Self::JsonRpc(id) => sse_frame(id, result, Some(seq)),
            Self::Rest => format!("id: {seq}\ndata: {result}\n\n").into_bytes(),
        }
    }
}

/// What every method is called with besides its params.
struct Call<'a> {
    agent_key: &'a str,
    principal: Option<&'a Principal>,
    host: String,
    /// `Last-Event-ID`: a subscription goes on after it (agw's seq extension).
    last_event_id: Option<u64>,
    binding: Binding,
}

impl<'a> Call<'a> {
    fn of(agent_key: &'a str, principal: Option<&'a Principal>, headers: &HeaderMap, binding: Binding) -> Self {
        let last_event_id =
            headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
        Call { agent_key, principal, host: host_of(headers).to_owned(), last_event_id, binding }
    }
}

/// Runs one A2A method (both bindings).
async fn dispatch(state: &AppState, call: &Call<'_>, method: &str, params: Value) -> HandlerResult {
    let (agent_key, principal) = (call.agent_key, call.principal);
    let answer = match method {
        "SendMessage" => send(state, agent_key, &params, principal).await,
        "SendStreamingMessage" => return stream(state, call, &params).await,
        "GetTask" => get_task(state, task_id(&params), principal).await,
        "CancelTask" => cancel(state, task_id(&params), principal).await,
        "SubscribeToTask" => return subscribe(state, call, task_id(&params)).await,
        "ListTasks" => list_tasks(state, agent_key, &params, principal).await,
        "CreateTaskPushNotificationConfig" => push::create(state, &params, principal).await,
        "GetTaskPushNotificationConfig" => push::get(state, &params, principal),
        "ListTaskPushNotificationConfigs" => push::list(state, &params, principal),
        "DeleteTaskPushNotificationConfig" => push::delete(state, &params, principal),
        "GetExtendedAgentCard" => extended_card(state, agent_key, &call.host),
        other => Err(RpcError::new(code::METHOD_NOT_FOUND, format!("no method {other:?}"))),
    };
    call.binding.answer(answer)
}

/// `POST /a2a/{agentKey}`: one JSON-RPC request.
pub async fn rpc(state: &AppState, agent_key: &str, req: Request<RequestBody>) -> HandlerResult {
    served(state, Some(agent_key))?;
    let principal = req.extensions().get::<Principal>().cloned();
    let version = version_ok(req.headers(), &super::query_params(&req));
    let headers = req.headers().clone();
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
    let call = Call::of(agent_key, principal.as_ref(), &headers, Binding::JsonRpc(id));
    dispatch(state, &call, method, params).await
}

/// An HTTP+JSON binding path under `/a2a/{agentKey}`: the agent key and the rest
/// (`/message:send`, `/tasks/{id}`, …).
pub(crate) fn rest_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(PREFIX)?;
    let (key, tail) = rest.split_once('/')?;
    let known =
        tail.starts_with("message:") || tail == "tasks" || tail.starts_with("tasks/") || tail == "extendedAgentCard";
    (!key.is_empty() && known).then(|| (key, &path[PREFIX.len() + key.len()..]))
}

/// Whether a POST to an HTTP+JSON path carries no body (a subscription): the one POST that
/// needs no JSON content type (it changes nothing, and its answer is the caller's own task).
pub(crate) fn bodiless_post(path: &str) -> bool {
    rest_path(path).is_some_and(|(_, tail)| tail.ends_with(":subscribe"))
}

/// The method and params an HTTP+JSON request maps to.
fn rest_method(
    method: &http::Method,
    tail: &str,
    query: &std::collections::HashMap<String, String>,
    body: Value,
) -> Option<(&'static str, Value)> {
    use http::Method;
    let with = |mut body: Value, key: &str, value: &str| {
        if !body.is_object() {
            body = json!({});
        }
        body[key] = json!(value);
        body
    };
    let segments: Vec<&str> = tail.split('/').collect();
    let post_or_get = *method == Method::POST || *method == Method::GET;
    Some(match (method, segments.as_slice()) {
        (&Method::POST, ["message:send"]) => ("SendMessage", body),
        (&Method::POST, ["message:stream"]) => ("SendStreamingMessage", body),
        (&Method::GET, ["extendedAgentCard"]) => ("GetExtendedAgentCard", json!({})),
        (&Method::GET, ["tasks"]) => {
            let mut params = json!({});
            for (key, value) in query {
                params[key.as_str()] = match key.as_str() {
                    "pageSize" | "historyLength" => value.parse::<u64>().map_or_else(|_| json!(value), |n| json!(n)),
                    "includeArtifacts" => json!(value == "true"),
                    _ => json!(value),
                };
            }
            ("ListTasks", params)
        }
        (&Method::POST, ["tasks", task]) if task.ends_with(":cancel") => {
            ("CancelTask", with(body, "id", task.trim_end_matches(":cancel")))
        }
        (_, ["tasks", task]) if task.ends_with(":subscribe") && post_or_get => {
            ("SubscribeToTask", json!({"id": task.trim_end_matches(":subscribe")}))
        }
        (&Method::GET, ["tasks", task]) => ("GetTask", json!({"id": task})),
        (&Method::POST, ["tasks", task, "pushNotificationConfigs"]) => {
            ("CreateTaskPushNotificationConfig", with(body, "taskId", task))
        }
        (&Method::GET, ["tasks", task, "pushNotificationConfigs"]) => {
            ("ListTaskPushNotificationConfigs", json!({"taskId": task}))
        }
        (&Method::GET, ["tasks", task, "pushNotificationConfigs", id]) => {
            ("GetTaskPushNotificationConfig", json!({"taskId": task, "id": id}))
        }
        (&Method::DELETE, ["tasks", task, "pushNotificationConfigs", id]) => {
            ("DeleteTaskPushNotificationConfig", json!({"taskId": task, "id": id}))
        }
        _ => return None,
    })
}

/// A request of the HTTP+JSON binding (`/a2a/{agentKey}/message:send`, `/tasks/{id}`, …).
pub async fn rest(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let path = req.uri().path().to_owned();
    let Some((agent_key, tail)) = rest_path(&path) else {
        return Err(ApiError::not_found(format!("no route for {path}")));
    };
    served(state, Some(agent_key))?;
    let principal = req.extensions().get::<Principal>().cloned();
    let query = super::query_params(&req);
    let version = version_ok(req.headers(), &query);
    let (method, headers) = (req.method().clone(), req.headers().clone());
    let body = if method == http::Method::POST && !bodiless_post(&path) {
        let server = &state.settings.server;
        let bytes = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => v,
            Err(e) => return Binding::Rest.error(RpcError::new(code::PARSE, format!("invalid JSON: {e}"))),
        }
    } else {
        json!({})
    };
    if let Err(message) = version {
        return Binding::Rest.error(RpcError::new(code::VERSION_NOT_SUPPORTED, message));
    }
    let Some((name, params)) = rest_method(&method, tail.trim_start_matches('/'), &query, body) else {
        return Binding::Rest.error(RpcError::new(code::METHOD_NOT_FOUND, format!("no A2A method at {method} {tail}")));
    };
    let call = Call::of(agent_key, principal.as_ref(), &headers, Binding::Rest);
    dispatch(state, &call, name, params).await
}

fn task_id(params: &Value) -> Result<String, RpcError> {
    match params.get("id").and_then(Value::as_str).map(str::trim) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(RpcError::new(code::INVALID_PARAMS, "params.id (the task id) is required")),
    }
}

/// What a `SendMessageRequest` asks for.
enum Sent {
    /// A new task, with a push-notification webhook when the request registers one.
    New { query: Box<QueryRequest>, return_immediately: bool, push: Option<Box<push::PushConfig>> },
    /// The next message of a task that waits for input (`taskId`): its answer.
    Answer { task_id: String, params: Value, return_immediately: bool },
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
    let parts =
        message.get("parts").and_then(Value::as_array).ok_or_else(|| invalid("params.message.parts is required"))?;
    let mut texts: Vec<String> = Vec::new();
    let mut data = None;
    let mut files = Vec::new();
    for part in parts {
        match (part.get("text").and_then(Value::as_str), part.get("data")) {
            (Some(text), _) => texts.push(text.to_owned()),
            (None, Some(value)) => {
                // A new task's model reads it as JSON; a waiting task's answer is the first one.
                texts.push(format!("```json\n{value}\n```"));
                data.get_or_insert_with(|| value.clone());
            }
            // A file (`raw` or `url`): an image or file of the message (docs/models.md).
            _ => match super::files::a2a(part) {
                Some(file) => files.push(file),
                None => {
                    return Err(RpcError::new(
                        code::CONTENT_TYPE_NOT_SUPPORTED,
                        "a part must hold text, data, or a file (raw or url)",
                    ));
                }
            },
        }
    }
    let text = texts.join("\n");
    let return_immediately =
        params.pointer("/configuration/returnImmediately").and_then(Value::as_bool).unwrap_or(false);
    if let Some(task_id) = message.get("taskId").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty()) {
        // The answer: a form's values as a data part, or a word (`once`, `continue`, …).
        let params = match data {
            Some(value) => value,
            None if !text.trim().is_empty() => Value::String(text.trim().to_owned()),
            None => return Err(invalid("params.message answers nothing: give a text or a data part")),
        };
        return Ok(Sent::Answer { task_id: task_id.to_owned(), params, return_immediately });
    }
    if text.trim().is_empty() {
        return Err(invalid("params.message has no text"));
    }
    let chat_id = match message.get("contextId").and_then(Value::as_str).map(str::trim) {
        None | Some("") => None,
        Some(context) => Some(chat_id_for(context, principal)),
    };
    let agent = state.runs.agent(Some(agent_key)).map_err(|e| RpcError::of_run(e, false))?;
    let query = QueryRequest {
        agent_key: Some(agent.key.clone()),
        chat_id,
        message: Some(text),
        references: Some(files).filter(|f| !f.is_empty()),
        ..QueryRequest::default()
    };
    // Checked before the task starts; it gets the task's id once there is one.
    let push = match params.pointer("/configuration/taskPushNotificationConfig").filter(|c| c.is_object()) {
        Some(config) => Some(Box::new(push::PushConfig::parse(config, "")?)),
        None => None,
    };
    Ok(Sent::New { query: Box::new(query), return_immediately, push })
}

/// How a new task began: its run, or its refusal (a quota): a `REJECTED` task.
enum Began {
    Run(Arc<crate::runs::RunHandle>, crate::runs::Observer),
    Rejected(Box<A2aMapper>),
}

async fn start(
    state: &AppState,
    agent_key: &str,
    sent: (QueryRequest, bool, Option<Box<push::PushConfig>>),
    principal: Option<&Principal>,
) -> Result<Began, RpcError> {
    let (mut query, return_immediately, push) = sent;
    if let Some(config) = &push {
        push::check(state, config).await?;
    }
    if return_immediately {
        // Nobody watches a task it returned at once: it runs to its end.
        query.on_disconnect = Some(agw_protocol::OnDisconnect::Continue);
    }
    let context = query.chat_id.clone().unwrap_or_default();
    let agent = state.runs.agent(Some(agent_key)).map_err(|e| RpcError::of_run(e, false))?;
    let new = NewRun { keep_events: true, ..NewRun::new(agent, query, principal.cloned()) };
    let (handle, observer) = match state.runs.start(new).await {
        Ok(started) => started,
        Err(error @ crate::runs::RunError::QuotaExceeded { .. }) => {
            let reason = ApiError::from(error).msg;
            tracing::info!(agentKey = %agent_key, %reason, "A2A task rejected");
            let mapper = A2aMapper::rejected(agw_protocol::ids::new_run_id(), context, &reason, now_ms());
            return Ok(Began::Rejected(Box::new(mapper)));
        }
        Err(e) => return Err(RpcError::of_run(e, false)),
    };
    tracing::info!(runId = %handle.run_id, chatId = %handle.chat_id, agentKey = %handle.agent_key, "A2A task started");
    if let Some(config) = push {
        push::register(state, config.for_task(&handle.run_id), principal).await?;
    }
    Ok(Began::Run(handle, observer))
}

/// `SendMessage`: the task once it ends or waits for input (or at once with
/// `returnImmediately`).
async fn send(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let (immediately, mut mapper, mut events) = match read_message(state, agent_key, params, principal)? {
        Sent::New { query, return_immediately, push } => {
            match start(state, agent_key, (*query, return_immediately, push), principal).await? {
                Began::Rejected(mapper) => return Ok(json!({"task": mapper.task()})),
                Began::Run(handle, observer) => {
                    let mapper = A2aMapper::new(&handle.run_id, &handle.chat_id);
                    (return_immediately, mapper, super::events::observed(observer))
                }
            }
        }
        Sent::Answer { task_id, params, return_immediately } => {
            let (mapper, events) = answer(state, &task_id, params, principal).await?;
            (return_immediately, mapper, events)
        }
    };
    let mut sink = Vec::new();
    if immediately {
        while let Some(Some(batch)) = events.next().now_or_never() {
            feed(&mut mapper, &batch, &mut sink);
        }
        return Ok(json!({"task": mapper.task()}));
    }
    while !mapper.stops() {
        let Some(batch) = events.next().await else { break };
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

/// The task as its run stands: a mapper fed every event the run holds up to `through` (default:
/// its latest), the events of the last batch read that came after it, and the run's events from
/// there on.
async fn prime(
    state: &AppState,
    task_id: &str,
    principal: Option<&Principal>,
    through: Option<u64>,
) -> Result<(A2aMapper, Vec<Arc<Event>>, BoxStream<'static, Vec<Arc<Event>>>), RpcError> {
    let local = state.runs.local_run(task_id, principal);
    let chat_id = local.as_ref().map(|h| h.chat_id.clone()).unwrap_or_default();
    let target = through.or_else(|| local.as_ref().map(|h| h.latest_seq()));
    let attached = state.runs.attach(task_id, None, principal).await.map_err(|e| RpcError::of_run(e, true))?;
    let mut events = super::events::attached_events(attached);
    let mut mapper = A2aMapper::new(task_id, chat_id);
    let mut after = Vec::new();
    let mut out = Vec::new();
    // What the run holds arrives at once; without a known end, a quiet moment ends it.
    let quiet = Duration::from_millis(if target.is_some() { 500 } else { 100 });
    while after.is_empty() && !mapper.is_finished() && target.is_none_or(|t| mapper.last_seq() < t) {
        let Ok(Some(batch)) = tokio::time::timeout(quiet, events.next()).await else { break };
        for event in batch {
            if target.is_some_and(|t| event.seq > t) {
                after.push(event);
            } else {
                mapper.map(&event, &mut out);
            }
        }
        out.clear();
    }
    Ok((mapper, after, events))
}

/// The next message of a task that waits for input answers its wait (a submit): the task as it
/// stood, working again, and the run's events from there.
async fn answer(
    state: &AppState,
    task_id: &str,
    params: Value,
    principal: Option<&Principal>,
) -> Result<(A2aMapper, BoxStream<'static, Vec<Arc<Event>>>), RpcError> {
    let (mut mapper, after, events) = prime(state, task_id, principal, None).await?;
    let Some(awaiting) = mapper.awaiting_id().map(str::to_owned) else {
        let why = if mapper.is_finished() { "the task has ended" } else { "the task does not wait for input" };
        let message = format!("{why}: send a new message with the task's contextId instead");
        return Err(RpcError::new(code::UNSUPPORTED_OPERATION, message));
    };
    let submit = SubmitRequest { run_id: task_id.to_owned(), tool_id: awaiting, params, awaiting_id: None };
    let submitted = state.runs.submit(submit, principal).await.map_err(|e| RpcError::of_run(e, true))?;
    if !submitted.accepted {
        return Err(RpcError::new(code::INVALID_PARAMS, submitted.detail));
    }
    mapper.input_given(now_ms());
    let mut out = Vec::new();
    feed(&mut mapper, &after, &mut out);
    Ok((mapper, events))
}

/// `GetTask`.
async fn get_task(
    state: &AppState,
    task_id: Result<String, RpcError>,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let task_id = task_id?;
    Ok(prime(state, &task_id, principal, None).await?.0.task())
}

/// `ListTasks`: the caller's tasks of this agent that this server holds (running, waiting, or
/// ended within the retention window), newest first, filtered by `contextId` and `status`,
/// paged by `pageSize` (≤ 100, default 50) and `pageToken`; artifacts only with
/// `includeArtifacts`.
async fn list_tasks(
    state: &AppState,
    agent_key: &str,
    params: &Value,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    let invalid = |m: &str| RpcError::new(code::INVALID_PARAMS, m);
    let context = params.get("contextId").and_then(Value::as_str).map(str::trim).filter(|c| !c.is_empty());
    let chat = context.map(|c| chat_id_for(c, principal));
    let status =
        params.get("status").and_then(Value::as_str).filter(|s| !s.is_empty() && *s != "TASK_STATE_UNSPECIFIED");
    let page_size = match params.get("pageSize").and_then(Value::as_u64) {
        None | Some(0) => 50,
        Some(n @ 1..=100) => n as usize,
        Some(_) => return Err(invalid("pageSize must be between 1 and 100")),
    };
    let offset = match params.get("pageToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => token.parse::<usize>().map_err(|_| invalid("pageToken is not one this server gave"))?,
    };
    let artifacts = params.get("includeArtifacts").and_then(Value::as_bool).unwrap_or(false);
    let mut tasks = Vec::new();
    for handle in state.runs.local_runs(principal) {
        if handle.agent_key != agent_key || chat.as_ref().is_some_and(|c| *c != handle.chat_id) {
            continue;
        }
        let Ok((mapper, _, _)) = prime(state, &handle.run_id, principal, None).await else { continue };
        let mut task = mapper.task();
        if status.is_some_and(|s| task["status"]["state"] != s) {
            continue;
        }
        if !artifacts && let Some(task) = task.as_object_mut() {
            task.remove("artifacts");
        }
        tasks.push(task);
    }
    let key = |t: &Value| {
        (t["status"]["timestamp"].as_str().unwrap_or("").to_owned(), t["id"].as_str().unwrap_or("").to_owned())
    };
    tasks.sort_by_key(|t| std::cmp::Reverse(key(t)));
    let total = tasks.len();
    let page: Vec<Value> = tasks.into_iter().skip(offset).take(page_size).collect();
    let next = if offset + page.len() < total { (offset + page.len()).to_string() } else { String::new() };
    Ok(json!({"tasks": page, "nextPageToken": next, "pageSize": page_size, "totalSize": total}))
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
    Ok(prime(state, &task_id, principal, None).await?.0.task())
}

/// `SendStreamingMessage`: the task, then one stream response per event that maps to one, until
/// the task ends or waits for input. The next message of a waiting task streams the same way
/// from where it waited.
async fn stream(state: &AppState, call: &Call<'_>, params: &Value) -> HandlerResult {
    let (agent_key, principal) = (call.agent_key, call.principal);
    let sent = match read_message(state, agent_key, params, principal) {
        Ok(sent) => sent,
        Err(e) => return call.binding.error(e),
    };
    let (mut mapper, events) = match sent {
        Sent::New { query, return_immediately, push } => {
            match start(state, agent_key, (*query, return_immediately, push), principal).await {
                Ok(Began::Run(handle, observer)) => {
                    (A2aMapper::new(&handle.run_id, &handle.chat_id), super::events::observed(observer))
                }
                Ok(Began::Rejected(mapper)) => (*mapper, futures::stream::empty().boxed()),
                Err(e) => return call.binding.error(e),
            }
        }
        Sent::Answer { task_id, params, .. } => match answer(state, &task_id, params, principal).await {
            Ok(answered) => answered,
            Err(e) => return call.binding.error(e),
        },
    };
    let mut first = Vec::new();
    mapper.start(now_ms(), &mut first);
    let first = first.into_iter().map(|frame| (mapper.last_seq(), frame)).collect();
    Ok(sse(state, call.binding.clone(), mapper, first, events))
}

/// `SubscribeToTask`: the task as it stands now (the run's held events folded in), then its
/// updates until it ends or waits for input (a task that has ended is
/// `UnsupportedOperationError`). With `Last-Event-ID` (agw's seq extension, [`SEQ_EXTENSION`]),
/// the stream goes on right after that event instead: no task first, no gap, no duplicate.
async fn subscribe(state: &AppState, call: &Call<'_>, task_id: Result<String, RpcError>) -> HandlerResult {
    let task_id = match task_id {
        Ok(t) => t,
        Err(e) => return call.binding.error(e),
    };
    let through = call.last_event_id;
    let (mut mapper, after, events) = match prime(state, &task_id, call.principal, through).await {
        Ok(primed) => primed,
        Err(e) => return call.binding.error(e),
    };
    let mut first = Vec::new();
    match through {
        None if mapper.is_finished() => {
            let message = "the task has ended: read it with GetTask";
            return call.binding.error(RpcError::new(code::UNSUPPORTED_OPERATION, message));
        }
        None => {
            let mut out = Vec::new();
            mapper.start(now_ms(), &mut out);
            first.extend(out.into_iter().map(|frame| (mapper.last_seq(), frame)));
        }
        // Right after an event the client saw: no task first.
        Some(_) => {}
    }
    for event in &after {
        let mut out = Vec::new();
        mapper.map(event, &mut out);
        first.extend(out.into_iter().map(|frame| (event.seq, frame)));
    }
    Ok(sse(state, call.binding.clone(), mapper, first, events))
}

/// The stream responses as SSE frames, each with the seq of the event it came from as its `id`
/// (what `Last-Event-ID` resumes after), until the task ends or waits for input.
fn sse(
    state: &AppState,
    binding: Binding,
    mapper: A2aMapper,
    first: Vec<(u64, Value)>,
    events: BoxStream<'static, Vec<Arc<Event>>>,
) -> http::Response<BoxBody> {
    struct St {
        events: BoxStream<'static, Vec<Arc<Event>>>,
        mapper: A2aMapper,
        first: Vec<(u64, Value)>,
        binding: Binding,
    }
    let start = St { events, mapper, first, binding };
    let frames = futures::stream::unfold(start, |mut st| async move {
        let mut out = std::mem::take(&mut st.first);
        while out.is_empty() {
            if st.mapper.stops() {
                return None;
            }
            let batch = st.events.next().await?;
            for event in &batch {
                let mut mapped = Vec::new();
                st.mapper.map(event, &mut mapped);
                out.extend(mapped.into_iter().map(|frame| (event.seq, frame)));
            }
        }
        let mut bytes = Vec::new();
        for (seq, result) in &out {
            bytes.extend_from_slice(&st.binding.frame(result, *seq));
        }
        Some((Bytes::from(bytes), st))
    });
    sse_body_response(SseBody::from_stream(frames, state.settings.server.heartbeat_interval))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
