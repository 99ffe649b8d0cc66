//! The run lifecycle endpoints (`docs/run-lifecycle.md`): `GET /api/ap/attach` (resume or join a
//! run's stream), `POST /api/ap/interrupt` (cancel it) and `POST /api/ap/steer` (queue a user
//! message for its next model turn). Names and shapes follow the reference's successor protocol
//! (`docs/contract/successor-protocol.md`). Each decodes the request and calls the run service.
//!
//! With auth on, another user's run is indistinguishable from an absent one (404).

use std::collections::HashMap;

use http::Request;
use serde::Deserialize;

use super::HandlerResult;
use super::query::attached_response;
use crate::auth::Principal;
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::request::read_body;
use crate::runs::SteerRequest;
use crate::state::AppState;

/// `GET /api/ap/attach?runId=…&lastSeq=N`: every buffered event with `seq > N`, then live, ending
/// after the terminal event. `lastSeq` wins over a `Last-Event-ID` header; with neither, the
/// stream starts at the oldest event still held (a client that saw nothing wants what there is).
pub async fn attach(
    state: &AppState,
    params: &HashMap<String, String>,
    headers: &http::HeaderMap,
    principal: Option<&Principal>,
) -> HandlerResult {
    let run_id = params.get("runId").map(String::as_str).unwrap_or("");
    let header = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let requested = match (params.get("lastSeq"), header) {
        (Some(explicit), _) => Some(parse_seq("lastSeq", explicit)?),
        (None, Some(header)) => Some(parse_seq("Last-Event-ID", header)?),
        (None, None) => None,
    };
    let attached = state.runs.attach(run_id, requested, principal).await?;
    Ok(attached_response(attached, state.settings.server.heartbeat_interval))
}

fn parse_seq(name: &str, raw: &str) -> Result<u64, ApiError> {
    raw.trim().parse().map_err(|_| ApiError::bad_request(format!("{name} must be a whole number, got {raw:?}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InterruptRequest {
    run_id: String,
}

/// `POST /api/ap/interrupt {"runId"}`: cancels a running run. A finished run is not an error:
/// `accepted:false` and `status` says how it had ended.
pub async fn interrupt(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: InterruptRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid interrupt body: {e}")))?;
    Ok(success(&state.runs.interrupt(&request.run_id, principal.as_ref()).await?))
}

/// `POST /api/ap/steer {"runId","message"}`: queues a user message the run takes at its next
/// model-turn boundary (never mid-tool). 409 `run_finished` for a run that ended (or is ending);
/// 429 `steer_queue_full` past the queue's bound.
pub async fn steer(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: SteerRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid steer body: {e}")))?;
    Ok(success(&state.runs.steer(request, principal.as_ref()).await?))
}
