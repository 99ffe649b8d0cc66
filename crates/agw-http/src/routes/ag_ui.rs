//! The AG-UI endpoint (issue 16, `docs/protocols.md`): `POST /api/ag-ui/{agentKey}` takes a
//! `RunAgentInput` and answers with AG-UI events as data-only SSE frames, in the order AG-UI's
//! client verifies.
//!
//! `threadId` is the chat (a non-UUID id maps to a stable UUID, as for the AI SDK, scoped to the
//! caller with auth on: `ai_sdk::chat_id_for`). agw keeps the
//! history: the last `user` message starts a run; trailing `tool` messages answer the frontend
//! calls the chat's waiting run ended its previous stream with (`RUN_FINISHED` with
//! `pendingToolCallIds`), and the stream continues that run. Tools the client declares in
//! `tools` are offered to the model as frontend tools of that run. A backend call that pauses
//! for the user (`docs/pausing-tools.md`) ends the stream with `RUN_FINISHED` outcome
//! `interrupt`; `resume` entries of the next input answer it (`resolved`: continue,
//! `cancelled`: cancel) and the stream continues the run.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use serde::Deserialize;
use serde_json::Value;

use agw_protocol::EventPayload;
use agw_protocol::adapters::ag_ui::{self, AgUiMapper};
use agw_protocol::request::{OnDisconnect, QueryRequest};

use super::HandlerResult;
use super::ai_sdk::chat_id_for;
use super::continuation::{Continuation, Next, next_batch};
use super::events;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody};
use crate::envelope::ApiError;
use crate::request::read_body;
use crate::runs::NewRun;
use crate::runs::{Observer, RunHandle};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunAgentInput {
    thread_id: String,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    tools: Vec<Value>,
    /// Answers to the interrupts the previous stream ended with: `{interruptId, status, payload?}`.
    #[serde(default)]
    resume: Vec<ResumeEntry>,
    /// `forwardedProps.outputSchema` (agw): the answer's JSON Schema for this run.
    #[serde(default)]
    forwarded_props: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeEntry {
    interrupt_id: String,
    /// `resolved` or `cancelled`.
    status: String,
}

/// A message's text: a string `content`, or the text parts of an array (AG-UI's and the phase
/// stream's messages).
pub(super) fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str()).collect()
        }
        _ => String::new(),
    }
}

/// `POST /api/ag-ui/{agentKey}`.
pub async fn run(state: &AppState, agent_key: &str, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let input: RunAgentInput =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid RunAgentInput: {e}")))?;
    let agent = state.runs.agent(Some(agent_key))?;
    // Tools the client declares are frontend tools of this run: the stream ends at their calls
    // and the client answers with tool messages.
    let client_tools: Vec<agw_tools::ToolDef> = input
        .tools
        .iter()
        .filter_map(|t| {
            Some(agw_tools::ToolDef {
                name: t["name"].as_str()?.to_owned(),
                description: t["description"].as_str().unwrap_or_default().trim().to_owned(),
                after_call_hint: String::new(),
                parameters: t.get("parameters").cloned().unwrap_or_else(agw_tools::default_parameters),
                kind: agw_tools::ToolKind::Frontend,
                tool_api: None,
                viewport_key: None,
                citations: None,
                idempotent: false,
            })
        })
        .collect();
    let chat_id = chat_id_for(&input.thread_id, principal.as_ref());
    let heartbeat = state.settings.server.heartbeat_interval;
    let last = input.messages.last();
    if last.is_none() && input.resume.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty"));
    }

    let tool_results = last.is_some_and(|m| m["role"] == "tool");
    if tool_results || !input.resume.is_empty() {
        // Results of the frontend calls the chat's waiting run asked for, answers to the
        // interrupts of its paused calls.
        let waiting = state
            .runs
            .tracker()
            .chats()
            .holder(&chat_id)
            .and_then(|run_id| state.runs.local_run(&run_id, principal.as_ref()))
            .filter(|h| !h.status().is_finished());
        let Some(handle) = waiting else {
            return Err(ApiError::not_found(format!("no run of thread {} waits for tool results", input.thread_id)));
        };
        // From the oldest held event: see `continuation`.
        let latest = handle.latest_seq();
        let observer = handle.observe(handle.oldest_seq().saturating_sub(1)).map_err(|_| ApiError::internal())?;
        let mut calls = Vec::new();
        let mut answered = 0;
        for entry in &input.resume {
            calls.push(entry.interrupt_id.clone());
            let action = if entry.status.trim().eq_ignore_ascii_case("cancelled") { "cancel" } else { "continue" };
            if state.runs.submits().submit(&handle.run_id, &entry.interrupt_id, Value::from(action))
                == agw_modes::runtime::SubmitStatus::Accepted
            {
                answered += 1;
            }
        }
        let results = input.messages.iter().rev().take_while(|m| tool_results && m["role"] == "tool");
        for message in results {
            let Some(call_id) = message["toolCallId"].as_str() else { continue };
            calls.push(call_id.to_owned());
            let text = text_of(message);
            let params = serde_json::from_str(&text).unwrap_or(Value::String(text));
            if state.runs.submits().submit(&handle.run_id, call_id, params)
                == agw_modes::runtime::SubmitStatus::Accepted
            {
                answered += 1;
            }
        }
        if answered == 0 {
            return Err(ApiError::conflict(
                "the run is not waiting for these tool results or interrupts",
                serde_json::json!({"code": "not_waiting", "runId": handle.run_id}),
            ));
        }
        let mapper = AgUiMapper::new(&chat_id, &handle.run_id);
        let resume = Some(Continuation::new(latest, calls));
        return Ok(stream_response(handle, observer, mapper, resume, heartbeat));
    }

    let Some(last) = last else { return Err(ApiError::bad_request("messages must not be empty")) };
    let message = text_of(last);
    if last["role"] != "user" || message.trim().is_empty() {
        return Err(ApiError::bad_request("the last message must be a user message with text, or tool results"));
    }
    let query = QueryRequest {
        agent_key: Some(agent.key.clone()),
        chat_id: Some(chat_id.clone()),
        message: Some(message),
        on_disconnect: Some(OnDisconnect::Continue),
        output_schema: input.forwarded_props.as_ref().map(|p| p["outputSchema"].clone()).filter(|s| !s.is_null()),
        references: Some(super::files::ag_ui(last)).filter(|r| !r.is_empty()),
        ..QueryRequest::default()
    };
    let (handle, observer) =
        state.runs.start(NewRun { client_tools, keep_events: true, ..NewRun::new(agent, query, principal) }).await?;
    let mapper = AgUiMapper::new(&chat_id, &handle.run_id);
    Ok(stream_response(handle, observer, mapper, None, heartbeat))
}

fn stream_response(
    handle: Arc<RunHandle>,
    observer: Observer,
    mapper: AgUiMapper,
    resume: Option<Continuation>,
    heartbeat: std::time::Duration,
) -> Response<BoxBody> {
    struct St {
        events: Observer,
        mapper: AgUiMapper,
        resume: Option<Continuation>,
        done: bool,
        handle: Arc<RunHandle>,
    }
    let start = St { events: observer, mapper, resume, done: false, handle };
    let frames = futures::stream::unfold(start, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::new();
        let mut values = Vec::new();
        let batch = match next_batch(&mut st.events, st.resume.as_mut()).await {
            None => None,
            Some(Next::Live(batch)) => Some(batch),
            Some(Next::Split { primed, rest }) => {
                // What the client has: mapped silently, up to the previous stream's end.
                let mut shown = Vec::new();
                for event in &primed {
                    st.mapper.map(event, &mut shown);
                }
                st.mapper.suspend(&mut shown);
                for id in st.resume.as_ref().map(Continuation::calls).unwrap_or_default() {
                    st.mapper.answered(id);
                }
                st.mapper.resume(&mut values);
                Some(rest)
            }
        };
        match batch {
            Some(batch) => {
                for event in &batch {
                    st.mapper.map(event, &mut values);
                    // A frontend call is complete, or a paused call's interrupt is due: the client
                    // answers it in its next input.
                    let client_turn = match &event.payload {
                        EventPayload::ToolEnd(e) => st.mapper.pending_tool_calls().contains(&e.tool_id),
                        EventPayload::AwaitingAsk(e) => {
                            st.mapper.pending_interrupts().contains(&e.awaiting_id.as_str())
                        }
                        _ => false,
                    };
                    if client_turn {
                        st.mapper.suspend(&mut values);
                    }
                }
                for value in &mut values {
                    // RUN_FINISHED carries the run's usage when the provider reported any.
                    if value["type"] == "RUN_FINISHED" {
                        let (input, output) = st.handle.usage();
                        if input + output > 0 {
                            value["usage"] = serde_json::json!([{"inputTokens": input, "outputTokens": output,
                                "totalTokens": input + output}]);
                        }
                    }
                    out.extend_from_slice(&ag_ui::frame(value));
                }
                st.done = st.mapper.is_finished();
            }
            None => st.done = true,
        }
        Some((Bytes::from(out), st))
    });
    events::frames_response(frames, heartbeat)
}
