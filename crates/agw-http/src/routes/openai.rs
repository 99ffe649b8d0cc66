//! The OpenAI Chat Completions façade (issue 16, `docs/protocols.md`): `GET /v1/models` lists the
//! agents, `POST /v1/chat/completions` with `model` = an agent key runs that agent and answers as
//! the OpenAI API would, streaming (`chat.completion.chunk`) or not.
//!
//! The client's `messages` are the conversation (stateless: chat memory is neither read nor
//! written); with the header [`CHAT_ID_HEADER`] the run continues that agw chat instead, taking
//! only the last user message. The agent's backend tools run inside agw; only reasoning and
//! answer text reach the client. Errors are OpenAI-shaped bodies with the matching status.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use agw_llm::ChatMessage;
use agw_protocol::adapters::openai_chat::{self, ChunkMapper, CompletionAggregate};
use agw_protocol::request::{OnDisconnect, QueryRequest};

use super::HandlerResult;
use super::events;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody};
use crate::envelope::{ApiError, json_response};
use crate::request::read_body;
use crate::runs::NewRun;
use crate::runs::{Observer, RunHandle};
use crate::state::AppState;

/// Names an agw chat to continue (agw's memory) instead of the stateless conversation.
pub const CHAT_ID_HEADER: &str = "x-agw-chat-id";

/// An OpenAI-shaped error response.
fn error(status: StatusCode, message: impl Into<String>, kind: &str, code: &str) -> Response<BoxBody> {
    json_response(status, &openai_chat::error_body(&message.into(), kind, code))
}

fn invalid(message: impl Into<String>) -> Response<BoxBody> {
    error(StatusCode::BAD_REQUEST, message, "invalid_request_error", "invalid_request")
}

/// The status of an OpenAI error body for an agw error code.
fn status_of(code: &str) -> StatusCode {
    match code {
        // The model's answer broke the response format even after the repair turn.
        "provider_error" | "output_invalid" => StatusCode::BAD_GATEWAY,
        "provider_timeout" => StatusCode::GATEWAY_TIMEOUT,
        // A guard refused the question: the request's fault, as OpenAI answers a refused prompt.
        "guardrail_blocked" => StatusCode::BAD_REQUEST,
        "cancelled" => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Turns an [`ApiError`] from the shared run start into the OpenAI shape.
fn from_api(e: ApiError) -> Response<BoxBody> {
    let code = e.body.as_ref().and_then(|b| b.get("code")).and_then(Value::as_str).unwrap_or("invalid_request");
    let kind = if e.status.is_server_error() { "server_error" } else { "invalid_request_error" };
    error(e.status, e.msg.clone(), kind, code)
}

/// `GET /v1/models`: the agents, as models.
pub fn models(state: &AppState) -> HandlerResult {
    let catalog = state.catalogs().agents.load();
    let data: Vec<Value> = catalog
        .iter()
        .map(|agent| json!({"id": agent.key, "object": "model", "created": 0, "owned_by": "agw"}))
        .collect();
    Ok(json_response(StatusCode::OK, &json!({"object": "list", "data": data})))
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct CompletionRequest {
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    response_format: Option<Value>,
}

/// `response_format` as the run's output schema: `json_schema` gives its schema (named by its
/// `name` when the schema has no `title`), `json_object` any object, `text` none.
fn output_schema_of(format: Option<&Value>) -> Result<Option<Value>, &'static str> {
    let Some(format) = format.filter(|f| !f.is_null()) else { return Ok(None) };
    match format["type"].as_str() {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => {
            let spec = &format["json_schema"];
            let Some(mut schema) = spec["schema"].as_object().cloned() else {
                return Err("response_format.json_schema.schema must be a JSON Schema object");
            };
            if let Some(name) = spec["name"].as_str().filter(|_| !schema.contains_key("title")) {
                schema.insert("title".into(), Value::from(name));
            }
            Ok(Some(Value::Object(schema)))
        }
        _ => Err("response_format.type must be text, json_object or json_schema"),
    }
}

/// The text of an OpenAI message's `content`: a string, or the text parts of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
        }
        _ => String::new(),
    }
}

/// The conversation before the last user message, as agw's chat messages. `system` and
/// `developer` messages are dropped (the agent's own prompts apply); assistant tool calls and tool
/// results are kept in pairs.
fn history_of(messages: &[Value]) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let content = text_of(&m["content"]);
        match m["role"].as_str() {
            Some("user") => out.push(ChatMessage::user(content)),
            Some("assistant") => {
                let tool_calls = m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| agw_llm::ToolCallMessage {
                                id: c["id"].as_str().unwrap_or_default().to_owned(),
                                call_type: "function".into(),
                                name: c["function"]["name"].as_str().unwrap_or_default().to_owned(),
                                arguments: c["function"]["arguments"].as_str().unwrap_or("{}").to_owned(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(ChatMessage::Assistant { content, tool_calls });
            }
            Some("tool") => out.push(ChatMessage::Tool {
                tool_call_id: m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                name: m["name"].as_str().unwrap_or_default().to_owned(),
                content,
            }),
            _ => {}
        }
    }
    out
}

/// `POST /v1/chat/completions`.
pub async fn completions(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    Ok(match completions_inner(state, req).await {
        Ok(resp) | Err(resp) => resp,
    })
}

async fn completions_inner(
    state: &AppState,
    req: Request<RequestBody>,
) -> Result<Response<BoxBody>, Response<BoxBody>> {
    let principal = req.extensions().get::<Principal>().cloned();
    let chat_id = req.headers().get(CHAT_ID_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await.map_err(from_api)?;
    let request: CompletionRequest =
        serde_json::from_slice(&body).map_err(|e| invalid(format!("invalid request body: {e}")))?;
    let agent = state.catalogs().agents.load().get(request.model.trim()).ok_or_else(|| {
        error(
            StatusCode::NOT_FOUND,
            format!("The model `{}` does not exist", request.model),
            "invalid_request_error",
            "model_not_found",
        )
    })?;
    let Some(last_user) = request.messages.iter().rposition(|m| m["role"] == "user") else {
        return Err(invalid("messages must contain a user message"));
    };
    let message = text_of(&request.messages[last_user]["content"]);
    if message.trim().is_empty() {
        return Err(invalid("the last user message is empty"));
    }
    let history = match chat_id {
        Some(_) => None,
        None => Some(history_of(&request.messages[..last_user])),
    };
    let output_schema = output_schema_of(request.response_format.as_ref()).map_err(invalid)?;
    let query = QueryRequest {
        agent_key: Some(agent.key.clone()),
        chat_id,
        message: Some(message),
        stream: Some(request.stream),
        // An OpenAI client cannot re-attach: when it goes away the run stops.
        on_disconnect: Some(OnDisconnect::Cancel),
        output_schema,
        references: Some(super::files::openai(&request.messages[last_user])).filter(|r| !r.is_empty()),
        ..QueryRequest::default()
    };
    query.validate().map_err(|e| invalid(e.to_string()))?;
    let model = agent.key.clone();
    let (handle, observer) = state
        .runs
        .start(NewRun { history, keep_events: true, ..NewRun::new(agent, query, principal) })
        .await
        .map_err(|e| from_api(e.into()))?;
    let created = now_secs();
    if request.stream {
        let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
        return Ok(stream_response(handle, observer, model, created, include_usage, state));
    }
    Ok(complete(handle, observer, &model, created).await)
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

async fn complete(handle: Arc<RunHandle>, observer: Observer, model: &str, created: i64) -> Response<BoxBody> {
    let mut aggregate = CompletionAggregate::new(&handle.run_id, model, created);
    let mut events = observer;
    while let Some(batch) = events.next_events().await {
        for event in &batch {
            aggregate.push(event);
        }
    }
    let (prompt, completion) = handle.usage();
    match aggregate.finish(prompt, completion) {
        Some(Ok(body)) => json_response(StatusCode::OK, &body),
        Some(Err(body)) => {
            let code = body["error"]["code"].as_str().unwrap_or_default().to_owned();
            json_response(status_of(&code), &body)
        }
        None => error(StatusCode::INTERNAL_SERVER_ERROR, "the run ended without a result", "server_error", "internal"),
    }
}

fn stream_response(
    handle: Arc<RunHandle>,
    observer: Observer,
    model: String,
    created: i64,
    include_usage: bool,
    state: &AppState,
) -> Response<BoxBody> {
    struct State {
        events: Observer,
        mapper: ChunkMapper,
        handle: Arc<RunHandle>,
        include_usage: bool,
        done: bool,
    }
    let mapper = ChunkMapper::new(&handle.run_id, &model, created);
    let start = State { events: observer, mapper, handle, include_usage, done: false };
    let frames = futures::stream::unfold(start, |mut st| async move {
        if st.done {
            return None;
        }
        match st.events.next_events().await {
            Some(batch) => {
                let mut chunks = Vec::new();
                for event in &batch {
                    st.mapper.map(event, &mut chunks);
                }
                let mut out = Vec::new();
                for chunk in &chunks {
                    out.extend_from_slice(&openai_chat::frame(chunk));
                }
                Some((Bytes::from(out), st))
            }
            None => {
                st.done = true;
                let mut out = Vec::new();
                if st.include_usage && matches!(st.mapper.ending(), Some(openai_chat::Ending::Finished(_))) {
                    let (prompt, completion) = st.handle.usage();
                    out.extend_from_slice(&openai_chat::frame(&st.mapper.usage_chunk(prompt, completion)));
                }
                out.extend_from_slice(openai_chat::DONE_FRAME);
                Some((Bytes::from(out), st))
            }
        }
    });
    events::frames_response(frames, state.settings.server.heartbeat_interval)
}
