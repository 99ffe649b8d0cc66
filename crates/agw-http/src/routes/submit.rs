//! `POST /api/ap/submit`: a person answers a waiting frontend tool (contract `http-api.md` §6).

use http::Request;
use serde_json::json;

use agw_modes::runtime::SubmitStatus;
use agw_protocol::request::SubmitRequest;

use super::HandlerResult;
use super::query::read_body;
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::state::AppState;

pub async fn submit(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let body = read_body(req, state.settings.server.max_request_bytes).await?;
    let submit = SubmitRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    submit.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    let status = state.submits.submit(&submit.run_id, &submit.tool_id, submit.params.clone());
    let (run_id, tool_id) = (&submit.run_id, &submit.tool_id);
    let data = match status {
        SubmitStatus::Accepted => json!({
            "accepted": true,
            "status": "accepted",
            "runId": run_id,
            "toolId": tool_id,
            "detail": format!("Frontend submit accepted for runId={run_id}, toolId={tool_id}"),
        }),
        SubmitStatus::Unmatched => json!({
            "accepted": false,
            "status": "unmatched",
            "runId": run_id,
            "toolId": tool_id,
            "detail": format!("No pending frontend tool found for runId={run_id}, toolId={tool_id}"),
        }),
    };
    tracing::info!(runId = %run_id, toolId = %tool_id, accepted = status == SubmitStatus::Accepted, "frontend submit");
    Ok(success(&data))
}
