//! The phase stream (issue 35, `docs/protocols.md` "The phase stream"): `POST
//! /api/phase/{agentKey}` and, for the default agent, `POST /chat` take `{chatId?, messages,
//! options?, language?}` and answer with one JSON object `{type, phase, data}` per line
//! ([`PhaseMapper`]); `GET /api/phase/attach?runId=…` replays a run's phase stream from its start
//! and follows it live.
//!
//! The body is line-delimited JSON under `Content-Type: text/event-stream` (the design's
//! framing; its client splits on `\n`); the heartbeat is an empty line. `?framing=sse` sends each
//! line as an SSE frame `data: <json>\n\n` instead (heartbeat `: keep-alive`), for SSE readers.
//!
//! agw keeps the chat: the last message (a user message) starts the run; earlier messages are
//! not read. `chatId` is an agw chat id (a UUID: a chat of any protocol continues here) or any
//! other string (a stable chat id derived from it, as for the AI SDK). The run's id and chat id
//! come back as `x-agw-run-id` / `x-agw-chat-id`: the client interrupts with the native
//! `POST /api/ap/interrupt` and answers `input_required` with `POST /api/ap/submit`.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, header};
use serde::Deserialize;
use serde_json::{Map, Value};

use agw_protocol::adapters::phase::{PhaseMapper, PhaseMessages, PhaseOptions};
use agw_protocol::request::QueryRequest;
use agw_protocol::{Event, EventPayload};

use super::HandlerResult;
use super::ag_ui::text_of;
use super::ai_sdk::chat_id_for;
use super::query::sse_body_response;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, SseBody};
use crate::envelope::ApiError;
use crate::request::read_body;
use crate::runs::NewRun;
use crate::state::AppState;

/// The response header naming the run.
pub const RUN_ID_HEADER: &str = "x-agw-run-id";
/// The response header naming the chat.
pub const CHAT_ID_HEADER: &str = "x-agw-chat-id";
/// The longest `user-id` / `device-id` header value taken.
pub const MAX_CLIENT_ID_LEN: usize = 128;

/// How the lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `<json>\n`; heartbeat `\n`.
    Lines,
    /// `data: <json>\n\n`; heartbeat `: keep-alive\n\n`.
    Sse,
}

impl Framing {
    fn of(params: &std::collections::HashMap<String, String>) -> Result<Self, ApiError> {
        match params.get("framing").map(String::as_str) {
            None | Some("") | Some("lines") => Ok(Self::Lines),
            Some("sse") => Ok(Self::Sse),
            Some(other) => Err(ApiError::bad_request(format!("framing must be lines or sse, got {other:?}"))),
        }
    }

    fn write(self, line: &Value, out: &mut Vec<u8>) {
        if self == Self::Sse {
            out.extend_from_slice(b"data: ");
        }
        out.extend_from_slice(line.to_string().as_bytes());
        out.extend_from_slice(if self == Self::Sse { b"\n\n" } else { b"\n" });
    }

    fn heartbeat(self) -> &'static [u8] {
        match self {
            Self::Lines => b"\n",
            Self::Sse => b": keep-alive\n\n",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PhaseRequest {
    #[serde(default)]
    chat_id: Option<String>,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    options: Option<Map<String, Value>>,
    #[serde(default)]
    language: Option<String>,
}

/// A `user-id` / `device-id` header: absent, or 1–128 visible ASCII characters.
fn client_id(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else { return Ok(None) };
    let bytes = value.as_bytes();
    if values.next().is_some()
        || bytes.is_empty()
        || bytes.len() > MAX_CLIENT_ID_LEN
        || !bytes.iter().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::bad_request(format!(
            "the {name} header must be one value of 1 to {MAX_CLIENT_ID_LEN} visible ASCII characters"
        )));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// The first language tag of `Accept-Language` (`*` and blank ignored).
fn accept_language(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::ACCEPT_LANGUAGE)?.to_str().ok()?;
    let first = value.split(',').next()?.split(';').next()?.trim();
    (!first.is_empty() && first != "*" && first.len() <= 35).then(|| first.to_owned())
}

/// A language tag as sent (`options.language`, …): trimmed, at most 35 characters.
fn language_tag(raw: Option<&str>, field: &str) -> Result<Option<String>, ApiError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(tag) if tag.len() <= 35 && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') => {
            Ok(Some(tag.to_owned()))
        }
        Some(other) => Err(ApiError::bad_request(format!("{field} is not a language tag: {other:?}"))),
    }
}

/// `POST /api/phase/{agentKey}`, and `POST /chat` (`agent_key` `None`: the default agent).
pub async fn run(state: &AppState, agent_key: Option<&str>, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let framing = Framing::of(&super::query_params(&req))?;
    let user_id = client_id(req.headers(), "user-id")?;
    let device_id = client_id(req.headers(), "device-id")?;
    let header_language = accept_language(req.headers());
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: PhaseRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid phase request: {e}")))?;
    let options_map = request.options.unwrap_or_default();
    let options: PhaseOptions = serde_json::from_value(Value::Object(options_map.clone()))
        .map_err(|e| ApiError::bad_request(format!("options: {e}")))?;
    let language = match options_map.get("language") {
        Some(Value::String(tag)) => language_tag(Some(tag.as_str()), "options.language")?,
        Some(Value::Null) | None => None,
        Some(_) => return Err(ApiError::bad_request("options.language must be a string")),
    };
    let language = match language {
        Some(tag) => Some(tag),
        None => language_tag(request.language.as_deref(), "language")?.or(header_language),
    };
    let Some(last) = request.messages.last() else {
        return Err(ApiError::bad_request("messages must hold at least one message (the last one a user message)"));
    };
    let message = text_of(last);
    if last["role"] != "user" || message.trim().is_empty() {
        return Err(ApiError::bad_request("messages: the last message must be a user message with text content"));
    }
    let agent = state.runs.agent(agent_key)?;
    let chat_id = match request.chat_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(id) => Some(chat_id_for(id, principal.as_ref())),
    };
    let mut params = Map::new();
    if let Some(id) = &user_id {
        params.insert("userId".into(), Value::from(id.as_str()));
    }
    if let Some(id) = &device_id {
        params.insert("deviceId".into(), Value::from(id.as_str()));
    }
    let query = QueryRequest {
        agent_key: Some(agent.key.clone()),
        chat_id,
        message: Some(message),
        params: (!params.is_empty()).then_some(params),
        ..QueryRequest::default()
    };
    let messages = agent.phase_messages.clone();
    let (handle, observer) =
        state.runs.start(NewRun { keep_events: true, ..NewRun::new(agent, query, principal) }).await?;
    tracing::info!(runId = %handle.run_id, chatId = %handle.chat_id, agentKey = %handle.agent_key,
        userId = user_id.as_deref().unwrap_or("-"), deviceId = device_id.as_deref().unwrap_or("-"),
        "phase stream started");
    let mapper = PhaseMapper::new(options, language, messages);
    let mut resp = stream_response(state, super::events::observed(observer), mapper, None, framing);
    set_ids(&mut resp, &handle.run_id, &handle.chat_id);
    Ok(resp)
}

/// `GET /api/phase/attach?runId=…`: the run's phase stream from its start (as far as the run
/// still holds its events), then live. The same switches as query parameters (`showThinking`,
/// `showToolCalls`, `detailedCitations`: `true`/`false`), `language`, `framing`. Who may attach
/// and what a missing run answers is the native attach's.
pub async fn attach(
    state: &AppState,
    params: &std::collections::HashMap<String, String>,
    headers: &HeaderMap,
    principal: Option<&Principal>,
) -> HandlerResult {
    let framing = Framing::of(params)?;
    let mut options = PhaseOptions::default();
    for (name, slot) in [
        ("showThinking", &mut options.show_thinking),
        ("showToolCalls", &mut options.show_tool_calls),
        ("detailedCitations", &mut options.detailed_citations),
    ] {
        match params.get(name).map(String::as_str) {
            None => {}
            Some("true") | Some("1") => *slot = true,
            Some("false") | Some("0") => *slot = false,
            Some(other) => return Err(ApiError::bad_request(format!("{name} must be true or false, got {other:?}"))),
        }
    }
    let language = language_tag(params.get("language").map(String::as_str), "language")?.or(accept_language(headers));
    let run_id = params.get("runId").map(String::as_str).unwrap_or("").trim();
    if run_id.is_empty() {
        return Err(ApiError::bad_request("runId is required"));
    }
    // The agent's messages, when the run is held here; else from its `request.query`.
    let local = state.runs.local_run(run_id, principal);
    let messages =
        local.as_ref().and_then(|h| state.runs.agent(Some(&h.agent_key)).ok()).map(|a| a.phase_messages.clone());
    let chat_id = local.as_ref().map(|h| h.chat_id.clone());
    let attached = state.runs.attach(run_id, None, principal).await?;
    let events = super::events::attached_events(attached);
    let resolve = messages.is_none().then(|| state.clone());
    let mapper = PhaseMapper::new(options, language, messages.unwrap_or_default());
    let mut resp = stream_response(state, events, mapper, resolve, framing);
    set_ids(&mut resp, run_id, chat_id.as_deref().unwrap_or(""));
    Ok(resp)
}

fn set_ids(resp: &mut Response<BoxBody>, run_id: &str, chat_id: &str) {
    let h = resp.headers_mut();
    for (name, value) in [(RUN_ID_HEADER, run_id), (CHAT_ID_HEADER, chat_id)] {
        if let Ok(value) = HeaderValue::from_str(value)
            && !value.is_empty()
        {
            h.insert(name, value);
        }
    }
}

/// The streaming response: each batch of events the run hands over is mapped and written at
/// once. `resolve`: the agent's messages are not known yet; take them from the run's
/// `request.query`.
fn stream_response(
    state: &AppState,
    events: impl futures::Stream<Item = Vec<Arc<Event>>> + Send + 'static,
    mapper: PhaseMapper,
    resolve: Option<AppState>,
    framing: Framing,
) -> Response<BoxBody> {
    struct St<S> {
        events: std::pin::Pin<Box<S>>,
        mapper: PhaseMapper,
        resolve: Option<AppState>,
    }
    let start = St { events: Box::pin(events), mapper, resolve };
    let frames = futures::stream::unfold(start, move |mut st| async move {
        use futures::StreamExt;
        if st.mapper.is_finished() {
            return None;
        }
        let batch = st.events.next().await?;
        let mut lines = Vec::new();
        for event in &batch {
            if let (Some(state), EventPayload::RequestQuery(q)) = (&st.resolve, &event.payload) {
                let messages: PhaseMessages =
                    state.runs.agent(q.agent_key.as_deref()).map(|a| a.phase_messages.clone()).unwrap_or_default();
                st.mapper.set_messages(messages);
                st.resolve = None;
            }
            st.mapper.map(event, &mut lines);
        }
        let mut out = Vec::new();
        for line in &lines {
            framing.write(line, &mut out);
        }
        Some((Bytes::from(out), st))
    });
    let heartbeat = state.settings.server.heartbeat_interval;
    sse_body_response(SseBody::from_stream(frames, heartbeat).with_heartbeat_frame(framing.heartbeat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_short_visible_ascii() {
        let with = |value: &[u8]| {
            let mut headers = HeaderMap::new();
            headers.insert("user-id", HeaderValue::from_bytes(value).unwrap());
            client_id(&headers, "user-id")
        };
        assert_eq!(with(b"u-42").unwrap().as_deref(), Some("u-42"));
        assert_eq!(client_id(&HeaderMap::new(), "user-id").unwrap(), None);
        assert!(with(&[b'a'; 128]).is_ok());
        let long = [b'a'; 129];
        for bad in [&b"a b"[..], &long[..], &b""[..], &b"caf\xc3\xa9"[..], &b"\t"[..]] {
            let e = with(bad).unwrap_err();
            assert_eq!(e.status, http::StatusCode::BAD_REQUEST, "{bad:?}");
            assert!(e.msg.contains("user-id"), "{}", e.msg);
        }
    }

    #[test]
    fn accept_language_gives_its_first_tag() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_str(value).unwrap());
            accept_language(&headers)
        };
        assert_eq!(with("en-US,en;q=0.9,zh;q=0.8").as_deref(), Some("en-US"));
        assert_eq!(with("zh-CN;q=0.9").as_deref(), Some("zh-CN"));
        assert_eq!(with("*"), None);
    }

    #[test]
    fn framing_writes_lines_or_sse_frames() {
        let line = serde_json::json!({"type": "text", "phase": "generating", "data": {"content": "a\nb"}});
        let mut out = Vec::new();
        Framing::Lines.write(&line, &mut out);
        assert_eq!(out, b"{\"type\":\"text\",\"phase\":\"generating\",\"data\":{\"content\":\"a\\nb\"}}\n");
        let mut out = Vec::new();
        Framing::Sse.write(&line, &mut out);
        assert!(out.starts_with(b"data: {") && out.ends_with(b"}\n\n"));
    }
}
