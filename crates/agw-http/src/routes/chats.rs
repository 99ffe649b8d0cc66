//! `GET /api/ap/chats`, `GET /api/ap/chat`, `DELETE /api/ap/chat` and `POST /api/ap/chat/fork`
//! (`docs/contract/http-api.md` §3–§4b, replay per `docs/contract/sse-events.md` §9 with the ids
//! the live stream used).
//!
//! With auth on, a caller lists, reads, deletes and forks only the chats [`may_access`] allows;
//! another user's chat answers exactly like a chat that does not exist (404 `chat not found`).

use std::collections::HashMap;

use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use agw_protocol::Event;
use agw_protocol::ids;
use agw_protocol::replay::{chat_references, raw_messages, replay_chat};
use agw_protocol::request::Reference;
use agw_protocol::usage::{Cost, RunUsage};

use super::HandlerResult;
use crate::auth::{Principal, may_access};
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::request::read_body;
use crate::runs::ForkRequest;
use crate::state::AppState;

fn memory_error(e: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %e, "chat memory read failed");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "chat memory unavailable")
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(memory_error)
}

pub async fn list(state: &AppState, principal: Option<&Principal>) -> HandlerResult {
    let store = state.runs.chat_store().clone();
    let mut chats = blocking(move || store.list_chats()).await?.map_err(memory_error)?;
    chats.retain(|chat| may_access(principal, chat.owner.as_ref()));
    Ok(success(&chats))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChatDetail {
    chat_id: String,
    chat_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_messages: Option<Vec<Value>>,
    events: Vec<Event>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    references: Vec<Reference>,
    /// agw: the chat's usage, summed over its runs (as their last step lines recorded it).
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<RunUsage>,
    /// agw: what the chat cost, when every run that used tokens was priced in one currency.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<Cost>,
}

/// The chat's totals: every run's `_runUsage` merged, and their `_runCost` summed when each run
/// with usage has one (in one currency).
fn chat_totals(lines: &[agw_protocol::HistoryLine]) -> (Option<RunUsage>, Option<Cost>) {
    let mut usage = RunUsage::default();
    let mut cost: Option<Cost> = None;
    let mut priced = true;
    for step in lines.iter().filter_map(agw_protocol::HistoryLine::as_step) {
        let Some(run) = &step.run_usage else { continue };
        usage.merge(run);
        match (&step.run_cost, &mut cost) {
            (Some(run_cost), None) => cost = Some(run_cost.clone()),
            (Some(run_cost), Some(total)) => priced &= total.add(run_cost),
            (None, _) => priced = false,
        }
    }
    if usage.is_empty() {
        return (None, None);
    }
    (Some(usage), cost.filter(|_| priced))
}

fn parse_bool(name: &str, value: &str) -> Result<bool, ApiError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ApiError::bad_request(format!("{name} must be true or false"))),
    }
}

/// `DELETE /api/ap/chat?chatId=…`: the run service deletes it (`RunService::delete_chat`).
pub async fn delete(
    state: &AppState,
    params: &HashMap<String, String>,
    principal: Option<&Principal>,
) -> HandlerResult {
    let raw_id = params.get("chatId").ok_or_else(|| ApiError::bad_request("chatId is required"))?;
    let deleted = state.runs.delete_chat(raw_id, principal).await?;
    Ok(success(&deleted))
}

/// `POST /api/ap/chat/fork {chatId, runId?, position?, stepSeq?}`: the run service forks it
/// (`RunService::fork_chat`) into a chat the caller owns.
pub async fn fork(state: &AppState, req: http::Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: ForkRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid fork body: {e}")))?;
    let forked = state.runs.fork_chat(request, principal.as_ref()).await?;
    Ok(success(&forked))
}

pub async fn detail(
    state: &AppState,
    params: &HashMap<String, String>,
    principal: Option<&Principal>,
) -> HandlerResult {
    if params.contains_key("includeEvents") {
        return Err(ApiError::bad_request(
            "includeEvents is deprecated; use includeRawMessages=true to include messages",
        ));
    }
    let raw_id = params.get("chatId").ok_or_else(|| ApiError::bad_request("chatId is required"))?;
    let chat_id = ids::canonical_uuid(raw_id).ok_or_else(|| ApiError::bad_request("chatId must be a valid UUID"))?;
    let include_raw = match params.get("includeRawMessages") {
        Some(v) => parse_bool("includeRawMessages", v)?,
        None => false,
    };
    let store = state.runs.chat_store().clone();
    let id = chat_id.clone();
    let caller = principal.cloned();
    let (summary, exists, lines) = blocking(move || {
        let summary = store.get_chat(&id)?;
        let exists = summary.is_some() || store.chat_exists(&id)?;
        // A chat known only by its history file has no owner.
        let owner = summary.as_ref().and_then(|s| s.owner.as_ref());
        let visible = exists && may_access(caller.as_ref(), owner);
        // Another user's history is not even read.
        let lines = if visible { store.read_lines(&id)? } else { Vec::new() };
        Ok::<_, agw_memory::MemoryError>((summary, visible, lines))
    })
    .await?
    .map_err(memory_error)?;
    if !exists {
        return Err(ApiError::not_found(format!("chat not found: {raw_id}")));
    }
    let chat_name = summary.map_or_else(|| chat_id.clone(), |s| s.chat_name);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let events = replay_chat(&chat_id, Some(&chat_name), &lines, now);
    let (usage, cost) = chat_totals(&lines);
    Ok(success(&ChatDetail {
        usage,
        cost,
        raw_messages: include_raw.then(|| raw_messages(&lines)),
        references: chat_references(&lines),
        events,
        chat_id,
        chat_name,
    }))
}
