//! `POST /api/ap/compact {chatId, agentKey?}` (agw): compacts a chat's history on demand
//! (`docs/context.md`) — the stored runs but the newest `keepUserTurns - 1` are summarised with
//! the chat's agent's model and policy, and the summary is written as the chat's checkpoint, so
//! the next run starts from it. The history itself stays whole (chat API, replay). The summary
//! is a model call like a run's: the caller's and the agent's daily quotas are checked before
//! it (429 `quota_exceeded`) and count what it used.

use serde::Deserialize;

use super::HandlerResult;
use crate::auth::Principal;
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::request::read_body;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactRequest {
    chat_id: String,
    #[serde(default)]
    agent_key: Option<String>,
}

pub async fn compact(state: &AppState, req: http::Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: CompactRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid compact body: {e}")))?;
    let compacted = state.runs.compact(&request.chat_id, request.agent_key.as_deref(), principal.as_ref()).await?;
    Ok(success(&compacted))
}
