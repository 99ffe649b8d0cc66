//! The Vercel AI SDK endpoints (issue 16, `docs/protocols.md`): `useChat` /
//! `DefaultChatTransport` work against agw unmodified.
//!
//! - `POST /api/ai-sdk/{agentKey}/chat` takes what the transport sends (`id`, `messages` as
//!   UIMessages, `trigger`, `messageId`) and answers with the UI message stream v1. agw keeps the
//!   chat's history, so only the request's new part is taken: the last user message starts a run;
//!   an assistant message whose client-side tool calls now have outputs (`addToolResult`) answers
//!   the waiting run (its message id is the run id) and streams the rest of it.
//! - A run that reaches a frontend tool ends its stream with `finish` after
//!   `tool-input-available`, and waits for that answer (the frontend submit timeout applies); a
//!   tool approval (`toolConfig.approvals`) ends it after `tool-approval-request`, and the
//!   client's `addToolApprovalResponse` (a part in state `approval-responded`) answers it.
//! - `GET /api/ai-sdk/{agentKey}/chat/{id}/stream` resumes the chat's running run (204 when none).
//!
//! The AI SDK's chat ids are free-form; a non-UUID id maps to a stable UUID (a SHA-256 name
//! hash), so the same `id` is always the same agw chat — with auth on, the same caller's: the
//! hash includes the caller ([`chat_id_for`]).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use sha2::Digest;

use agw_protocol::EventPayload;
use agw_protocol::adapters::ai_sdk::{self, UiMessageMapper};
use agw_protocol::request::{OnDisconnect, QueryRequest};

use super::HandlerResult;
use super::continuation::{Continuation, Next, next_batch};
use super::events;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, full};
use crate::envelope::ApiError;
use crate::request::read_body;
use crate::runs::NewRun;
use crate::runs::{Observer, RunHandle};
use crate::state::AppState;

/// The agw chat id of a client's chat id (the AI SDK's `id`, AG-UI's `threadId`): itself when it
/// is a UUID (an agw chat id, checked like any other: another user's is absent), else a
/// name-based UUID. With auth on (`principal`) the name includes the caller's tenant and subject:
/// such strings are often predictable (`"support"`), and two users sending one must get two
/// chats, not a 404 for whoever comes second (issue 32). Deterministic, so a follow-up with the
/// same string finds the chat; without auth the name is the string alone, as before.
pub fn chat_id_for(id: &str, principal: Option<&Principal>) -> String {
    let id = id.trim();
    if let Some(uuid) = agw_protocol::ids::canonical_uuid(id) {
        return uuid;
    }
    let name = match principal {
        None => format!("agw:ai-sdk:{id}"),
        // A JSON array keeps the parts apart: no (subject, string) pair spells another's.
        Some(p) => serde_json::json!(["agw:ai-sdk:owned", p.tenant, p.subject, id]).to_string(),
    };
    let digest = sha2::Sha256::digest(name.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().hyphenated().to_string()
}

#[derive(Deserialize)]
struct ChatRequest {
    id: String,
    messages: Vec<Value>,
    #[serde(default)]
    trigger: Option<String>,
    /// agw: the answer's JSON Schema for this run (structured output; the transport's `body`
    /// option sends it).
    #[serde(default, rename = "outputSchema")]
    output_schema: Option<Value>,
}

/// The text of a UIMessage (its `text` parts).
fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .map(|parts| parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default()
}

/// The client-side tool outputs of an assistant UIMessage: `(toolCallId, toolName, output)`.
fn tool_outputs(message: &Value) -> Vec<(String, String, Value)> {
    let Some(parts) = message["parts"].as_array() else { return Vec::new() };
    parts
        .iter()
        .filter(|p| p["state"] == "output-available")
        .filter_map(|p| {
            let kind = p["type"].as_str()?;
            let name = match kind.strip_prefix("tool-") {
                Some(name) => name.to_owned(),
                None if kind == "dynamic-tool" => p["toolName"].as_str()?.to_owned(),
                None => return None,
            };
            Some((p["toolCallId"].as_str()?.to_owned(), name, p["output"].clone()))
        })
        .collect()
}

/// The approval answers of an assistant UIMessage (`addToolApprovalResponse`):
/// `(toolCallId, toolName, approved)`.
fn approval_responses(message: &Value) -> Vec<(String, String, bool)> {
    let Some(parts) = message["parts"].as_array() else { return Vec::new() };
    parts
        .iter()
        .filter(|p| p["state"] == "approval-responded")
        .filter_map(|p| {
            let name = match p["type"].as_str()? {
                "dynamic-tool" => p["toolName"].as_str()?.to_owned(),
                kind => kind.strip_prefix("tool-")?.to_owned(),
            };
            Some((p["toolCallId"].as_str()?.to_owned(), name, p["approval"]["approved"].as_bool()?))
        })
        .collect()
}

/// `POST /api/ai-sdk/{agentKey}/chat`.
pub async fn chat(state: &AppState, agent_key: &str, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: ChatRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid chat request: {e}")))?;
    let agent = state.runs.agent(Some(agent_key))?;
    let chat_id = chat_id_for(&request.id, principal.as_ref());
    let Some(last) = request.messages.last() else {
        return Err(ApiError::bad_request("messages must not be empty"));
    };
    let heartbeat = state.settings.server.heartbeat_interval;

    if last["role"] == "assistant" {
        // The client answered client-side tool calls (`addToolResult`): resume the waiting run.
        let run_id = last["id"].as_str().unwrap_or_default();
        let handle = state.runs.local_run(run_id, principal.as_ref());
        let Some(handle) = handle else {
            return Err(ApiError::not_found(format!("no waiting run for message {run_id}")));
        };
        let outputs = tool_outputs(last);
        let approvals = approval_responses(last);
        if outputs.is_empty() && approvals.is_empty() {
            return Err(ApiError::bad_request("the assistant message carries no tool output or approval to submit"));
        }
        // Read from the oldest held event: the events up to where the previous stream stopped
        // prime the mapper, the rest (children that went on meanwhile, the answers) are new.
        let latest = handle.latest_seq();
        let observer = handle.observe(handle.oldest_seq().saturating_sub(1)).map_err(|_| ApiError::internal())?;
        let mut expected = Vec::new();
        let mut answered = 0;
        for (call_id, name, approved) in approvals {
            let decision = if approved { "once" } else { "reject" };
            let params = serde_json::json!({ "decision": decision });
            if state.runs.submits().submit(&handle.run_id, &call_id, params)
                == agw_modes::runtime::SubmitStatus::Accepted
            {
                answered += 1;
            }
            expected.push((call_id, name, false));
        }
        for (call_id, name, output) in outputs {
            let params = if output.is_null() { Value::Object(Default::default()) } else { output };
            if state.runs.submits().submit(&handle.run_id, &call_id, params)
                == agw_modes::runtime::SubmitStatus::Accepted
            {
                answered += 1;
            }
            expected.push((call_id, name, true));
        }
        if answered == 0 {
            return Err(ApiError::conflict(
                "the run is not waiting for these tool calls",
                serde_json::json!({"code": "not_waiting", "runId": handle.run_id}),
            ));
        }
        let calls = expected.iter().map(|(id, _, _)| id.clone()).collect();
        let resume = Resume { continuation: Continuation::new(latest, calls), expected };
        return Ok(stream_response(handle, observer, UiMessageMapper::new(), Some(resume), heartbeat));
    }

    let message = last.get("parts").map(|_| text_of(last)).unwrap_or_default();
    if message.trim().is_empty() {
        return Err(ApiError::bad_request("the last user message has no text"));
    }
    let regenerate = request.trigger.as_deref() == Some("regenerate-message");
    let query = QueryRequest {
        agent_key: Some(agent.key.clone()),
        chat_id: Some(chat_id),
        message: Some(message),
        // The stream ends at a client-side tool call while the run waits: leaving is normal.
        on_disconnect: Some(OnDisconnect::Continue),
        output_schema: request.output_schema,
        references: Some(super::files::ai_sdk(last)).filter(|r| !r.is_empty()),
        ..QueryRequest::default()
    };
    let (handle, observer) =
        state.runs.start(NewRun { regenerate, keep_events: true, ..NewRun::new(agent, query, principal) }).await?;
    Ok(stream_response(handle, observer, UiMessageMapper::new(), None, heartbeat))
}

/// `GET /api/ai-sdk/{agentKey}/chat/{id}/stream`: the chat's running run from its start, or 204.
pub fn resume(state: &AppState, id: &str, principal: Option<&Principal>) -> HandlerResult {
    let chat_id = chat_id_for(id, principal);
    let running = state
        .runs
        .tracker()
        .chats()
        .holder(&chat_id)
        .and_then(|run_id| state.runs.local_run(&run_id, principal))
        .filter(|h| !h.status().is_finished());
    let Some(handle) = running else {
        let mut resp = Response::new(full(Bytes::new()));
        *resp.status_mut() = StatusCode::NO_CONTENT;
        return Ok(resp);
    };
    let observer = handle.observe(handle.oldest_seq().saturating_sub(1)).map_err(|_| ApiError::internal())?;
    Ok(stream_response(handle, observer, UiMessageMapper::new(), None, state.settings.server.heartbeat_interval))
}

/// A stream that continues a run after the client's answers.
struct Resume {
    continuation: Continuation,
    /// The answered calls: `(toolCallId, toolName, client-side)`.
    expected: Vec<(String, String, bool)>,
}

fn stream_response(
    handle: Arc<RunHandle>,
    observer: Observer,
    mapper: UiMessageMapper,
    resume: Option<Resume>,
    heartbeat: std::time::Duration,
) -> Response<BoxBody> {
    struct St {
        events: Observer,
        mapper: UiMessageMapper,
        resume: Option<Resume>,
        done: bool,
        _handle: Arc<RunHandle>,
    }
    let start = St { events: observer, mapper, resume, done: false, _handle: handle };
    let frames = futures::stream::unfold(start, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::new();
        let mut chunks = Vec::new();
        let batch = match next_batch(&mut st.events, st.resume.as_mut().map(|r| &mut r.continuation)).await {
            None => None,
            Some(Next::Live(batch)) => Some(batch),
            Some(Next::Split { primed, rest }) => {
                // What the client has: mapped silently, up to the previous stream's end.
                let mut shown = Vec::new();
                for event in &primed {
                    st.mapper.map(event, &mut shown);
                }
                st.mapper.suspend(&mut shown);
                for (id, name, client_side) in st.resume.iter().flat_map(|r| &r.expected) {
                    if *client_side {
                        st.mapper.expect_client_call(id, name);
                    } else {
                        st.mapper.expect_server_call(id, name);
                    }
                }
                st.mapper.resume(&mut chunks);
                Some(rest)
            }
        };
        match batch {
            Some(batch) => {
                for event in &batch {
                    st.mapper.map(event, &mut chunks);
                    // A client-side call is complete, or an approval is asked: the client takes over
                    // until it answers.
                    let client_turn = match &event.payload {
                        EventPayload::ToolEnd(e) => st.mapper.pending_client_calls().contains(&e.tool_id),
                        EventPayload::AwaitingAsk(e) => st.mapper.pending_approvals().contains(&e.awaiting_id),
                        _ => false,
                    };
                    if client_turn {
                        st.mapper.suspend(&mut chunks);
                    }
                }
                for chunk in &chunks {
                    out.extend_from_slice(&ai_sdk::frame(chunk));
                }
                if st.mapper.is_finished() {
                    st.done = true;
                    out.extend_from_slice(ai_sdk::DONE_FRAME);
                }
            }
            None => {
                st.done = true;
                out.extend_from_slice(ai_sdk::DONE_FRAME);
            }
        }
        Some((Bytes::from(out), st))
    });
    let mut resp = events::frames_response(frames, heartbeat);
    let h = resp.headers_mut();
    h.insert(ai_sdk::HEADER_NAME, HeaderValue::from_static(ai_sdk::HEADER_VALUE));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_map_to_stable_uuids() {
        let uuid = "0B8F6A52-7C1E-4D3A-9F2B-5E6D7C8B9A01";
        assert_eq!(chat_id_for(uuid, None), uuid.to_lowercase());
        let a = chat_id_for("hWbKqz8d1Q0Ymx3e", None);
        assert_eq!(a, chat_id_for("hWbKqz8d1Q0Ymx3e", None));
        assert_eq!(a, chat_id_for(" hWbKqz8d1Q0Ymx3e ", None));
        assert_ne!(a, chat_id_for("another", None));
        assert!(agw_protocol::ids::canonical_uuid(&a).is_some(), "{a}");
        // Unchanged without auth: chats made before issue 32 keep their ids.
        assert_eq!(chat_id_for("chat-1", None), "736144a2-c4f4-82a1-953e-bdae24c94a43");
    }

    #[test]
    fn with_auth_a_client_string_names_the_callers_own_chat() {
        let user = |sub: &str, tenant: Option<&str>| Principal {
            subject: sub.into(),
            tenant: tenant.map(str::to_owned),
            operator: false,
        };
        let (alice, bob) = (user("alice", None), user("bob", None));
        let mine = chat_id_for("support", Some(&alice));
        assert_eq!(mine, chat_id_for("support", Some(&alice)), "deterministic");
        assert!(agw_protocol::ids::canonical_uuid(&mine).is_some(), "{mine}");
        for other in [
            chat_id_for("support", Some(&bob)),
            chat_id_for("support", None),
            chat_id_for("support", Some(&user("alice", Some("acme")))),
            chat_id_for("support", Some(&user("alice\",\"support", None))),
        ] {
            assert_ne!(mine, other);
        }
        let uuid = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
        assert_eq!(chat_id_for(uuid, Some(&alice)), uuid, "an agw chat id stays itself");
    }

    #[test]
    fn tool_outputs_are_read_from_static_and_dynamic_parts() {
        let message = serde_json::json!({"id": "run", "role": "assistant", "parts": [
            {"type": "text", "text": "x"},
            {"type": "tool-confirm_dialog", "toolCallId": "c1", "state": "output-available", "input": {}, "output": {"ok": 1}},
            {"type": "dynamic-tool", "toolName": "w", "toolCallId": "c2", "state": "output-available", "input": {}, "output": "s"},
            {"type": "tool-other", "toolCallId": "c3", "state": "input-available", "input": {}}]});
        let outputs = tool_outputs(&message);
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0], ("c1".into(), "confirm_dialog".into(), serde_json::json!({"ok": 1})));
        assert_eq!(outputs[1].1, "w");
    }
}
