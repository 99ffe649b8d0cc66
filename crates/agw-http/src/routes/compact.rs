//! `POST /api/ap/compact {chatId, agentKey?}` (agw): compacts a chat's history on demand
//! (`docs/context.md`) — the stored runs but the newest `keepUserTurns - 1` are summarised with
//! the chat's agent's model and policy, and the summary is written as the chat's checkpoint, so
//! the next run starts from it. The history itself stays whole (chat API, replay). The summary
//! is a model call like a run's: the caller's and the agent's daily quotas are checked before
//! it (429 `quota_exceeded`) and count what it used.

use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use agw_modes::runtime::CallSpend;
use agw_protocol::history::{CheckpointLine, HistoryLine};
use agw_protocol::ids;
use agw_protocol::usage::TokenCounts;

use super::HandlerResult;
use super::query::{quota_exceeded, read_body, resolve_agent};
use crate::auth::{Principal, may_access};
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::sink::now_ms;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactRequest {
    chat_id: String,
    #[serde(default)]
    agent_key: Option<String>,
}

fn memory_error(e: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %e, "chat memory failed");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "chat memory unavailable")
}

pub async fn compact(state: &AppState, req: http::Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let owner = principal.as_ref().map_or_else(crate::quotas::anonymous, Principal::owner);
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: CompactRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid compact body: {e}")))?;
    let chat_id =
        ids::canonical_uuid(&request.chat_id).ok_or_else(|| ApiError::bad_request("chatId must be a valid UUID"))?;
    if !state.settings.memory.enabled {
        return Err(ApiError::conflict(
            "chat memory is off: there is no stored history to compact",
            json!({"code": "memory_disabled"}),
        ));
    }
    let store = state.chats.clone();
    let id = chat_id.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        let summary = store.get_chat(&id)?;
        let exists = summary.is_some() || store.chat_exists(&id)?;
        let owner = summary.as_ref().and_then(|s| s.owner.as_ref());
        if !exists || !may_access(principal.as_ref(), owner) {
            return Ok(None);
        }
        let context = store.chat_context(&id)?;
        Ok::<_, agw_memory::MemoryError>(Some((summary.and_then(|s| s.first_agent_key), context)))
    })
    .await
    .map_err(memory_error)?
    .map_err(memory_error)?;
    // Another user's chat answers like one that does not exist.
    let Some((chat_agent, context)) = loaded else {
        return Err(ApiError::not_found(format!("chat not found: {}", request.chat_id)));
    };
    let agent = resolve_agent(state, request.agent_key.as_deref().or(chat_agent.as_deref()))?;
    let run_id = ids::new_run_id();
    // The summary is a model call: the caller's and the agent's daily quotas allow it first
    // (429 like a query) and count what it used.
    let quota = crate::quotas::continue_run(state, &owner, &agent.key, &run_id);
    quota.may_call().await.map_err(quota_exceeded)?;
    let services = state.run_services();
    let made = agw_modes::runtime::compact_history(&services, &agent, &context.history, &context.history_runs, &run_id)
        .await
        .map_err(|reason| {
            tracing::warn!(chatId = %chat_id, %reason, "on-demand compaction failed");
            ApiError::with_fields(
                StatusCode::BAD_GATEWAY,
                format!("the summary call failed: {reason}"),
                json!({"code": "summary_failed"}),
            )
        })?;
    if let Some(made) = &made {
        for call in &made.usage {
            let tokens = TokenCounts::from_usage(&call.usage);
            let cost = state.settings.prices.find(&call.provider, &call.model).map(|price| price.charge(&tokens));
            quota.spent(CallSpend { tokens: tokens.input_tokens.saturating_add(tokens.output_tokens), cost }).await;
        }
    }
    let Some(made) = made else {
        return Ok(success(&json!({
            "chatId": chat_id,
            "compacted": false,
            "detail": "nothing to compact: the chat has no stored runs older than the ones kept",
        })));
    };
    let line = HistoryLine::Checkpoint(CheckpointLine {
        chat_id: chat_id.clone(),
        run_id,
        updated_at: now_ms(),
        through_run_id: made.through_run_id.clone(),
        summary: made.summary.clone(),
        tokens_before: made.tokens_before,
        tokens_after: made.tokens_after,
    });
    let store = state.chats.clone();
    let id = chat_id.clone();
    tokio::task::spawn_blocking(move || store.append(&id, &[line]))
        .await
        .map_err(memory_error)?
        .map_err(memory_error)?;
    tracing::info!(chatId = %chat_id, through = %made.through_run_id, before = made.tokens_before, after = made.tokens_after, "chat compacted on demand");
    Ok(success(&json!({
        "chatId": chat_id,
        "compacted": true,
        "throughRunId": made.through_run_id,
        "replacedMessages": made.replaced_messages,
        "tokensBefore": made.tokens_before,
        "tokensAfter": made.tokens_after,
        "summary": made.summary,
    })))
}
