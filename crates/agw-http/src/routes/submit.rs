//! `POST /api/ap/submit`: a person answers a waiting frontend tool (`docs/contract/http-api.md` §6).
//!
//! With auth on, only the run's owner (or the operator) can answer it. Anyone else gets the
//! answer of a key nothing waits under — `unmatched`, the same as for a run that does not exist —
//! and the waiting tool is not touched.

use http::Request;

use agw_protocol::request::SubmitRequest;

use super::HandlerResult;
use crate::auth::Principal;
use crate::body::RequestBody;
use crate::envelope::{ApiError, success};
use crate::request::read_body;
use crate::state::AppState;

pub async fn submit(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let submit = SubmitRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    submit.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(success(&state.runs.submit(submit, principal.as_ref()).await?))
}
