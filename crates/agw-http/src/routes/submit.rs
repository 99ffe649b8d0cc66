//! `POST /api/ap/submit`: a person answers a waiting frontend tool (`docs/contract/http-api.md` §6).
//!
//! With auth on, only the run's owner (or the operator) can answer it. Anyone else gets the
//! answer of a key nothing waits under — `unmatched`, the same as for a run that does not exist —
//! and the waiting tool is not touched.

use http::Request;
use serde_json::json;

use agw_cluster::ControlKind;
use agw_modes::runtime::SubmitStatus;
use agw_protocol::request::SubmitRequest;

use super::HandlerResult;
use super::query::read_body;
use crate::auth::{Principal, may_access};
use crate::body::RequestBody;
use crate::cluster::{self, Located};
use crate::envelope::{ApiError, success};
use crate::state::AppState;

pub async fn submit(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    submit_local(state, &body, principal.as_ref()).await.map(|data| success(&data))
}

/// Submit with the request's body; the answer's `data`. A run another replica holds gets the
/// submit forwarded; one that waited on a replica that is gone is adopted here first.
pub(crate) async fn submit_local(
    state: &AppState,
    body: &[u8],
    principal: Option<&Principal>,
) -> Result<serde_json::Value, ApiError> {
    let submit = SubmitRequest::from_json(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    submit.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    // A run held here decides by its owner below, whoever asks; only a run this replica does not
    // hold is looked for in the cluster.
    let mut owner = state.runs.owner(&submit.run_id);
    if owner.is_none() {
        match cluster::find_run(state, &submit.run_id, principal).await? {
            Located::Orphaned(remote) => owner = Some(cluster::adopt(state, &remote).await?.owner.clone()),
            Located::Elsewhere(remote) => {
                let body: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
                return match cluster::forward(state, &remote, ControlKind::Submit, body, principal).await? {
                    cluster::Forwarded::Answer(data) => Ok(data),
                    cluster::Forwarded::Refused(error) => Err(error),
                };
            }
            Located::Here(_) | Located::Ended(_) | Located::Nowhere => {}
        }
    }
    // No such run: nothing can be waiting, but without auth the waiters alone decide (as before).
    let permitted = match owner {
        Some(owner) => may_access(principal, owner.as_ref()),
        None => principal.is_none(),
    };
    let status = if permitted {
        state.submits.submit(&submit.run_id, &submit.tool_id, submit.params.clone())
    } else {
        SubmitStatus::Unmatched
    };
    // The run's handle remembers what was answered for as long as the run is attachable, so a
    // late second answer is told so after the run ended too.
    let handle = if permitted { state.runs.get(&submit.run_id) } else { None };
    let status = match (status, handle) {
        (SubmitStatus::Accepted, Some(handle)) => {
            handle.note_answered(&submit.tool_id);
            SubmitStatus::Accepted
        }
        (SubmitStatus::Unmatched, Some(handle)) if handle.was_answered(&submit.tool_id) => {
            SubmitStatus::AlreadyAnswered
        }
        (status, _) => status,
    };
    let (run_id, tool_id) = (&submit.run_id, &submit.tool_id);
    let data = match status {
        SubmitStatus::Accepted => json!({
            "accepted": true,
            "status": "accepted",
            "runId": run_id,
            "toolId": tool_id,
            "detail": format!("Frontend submit accepted for runId={run_id}, toolId={tool_id}"),
        }),
        SubmitStatus::AlreadyAnswered => json!({
            "accepted": false,
            "status": "already_answered",
            "runId": run_id,
            "toolId": tool_id,
            "detail": format!("runId={run_id}, toolId={tool_id} was already answered"),
        }),
        SubmitStatus::Unmatched => json!({
            "accepted": false,
            "status": "unmatched",
            "runId": run_id,
            "toolId": tool_id,
            "detail": format!("No pending frontend tool found for runId={run_id}, toolId={tool_id}"),
        }),
    };
    let mut data = data;
    if let Some(awaiting_id) = &submit.awaiting_id {
        data["awaitingId"] = json!(awaiting_id);
    }
    tracing::info!(runId = %run_id, toolId = %tool_id, accepted = status == SubmitStatus::Accepted, "frontend submit");
    Ok(data)
}
