//! `POST /api/ap/query`: validate, resolve, start the run, stream it as SSE
//! (`docs/contract/http-api.md` §5); and the request-body and SSE-response helpers every route uses.
//!
//! With auth on, a query into an existing chat the caller may not access answers 404 `chat not
//! found` before anything streams; a new chat and its runs belong to the caller.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;

use agw_protocol::request::QueryRequest;

use super::HandlerResult;
use crate::auth::Principal;
use crate::body::{BoxBody, RequestBody, SseBody};
use crate::envelope::ApiError;
use crate::request::read_body;
use crate::runs::{Attached, NewRun, Observer};
use crate::state::AppState;

pub async fn query(state: AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request = QueryRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    request.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    let agent = state.runs.agent(request.agent_key.as_deref())?;
    let (_, observer) = state.runs.start(NewRun::new(agent, request, principal)).await?;
    Ok(sse_response(observer, state.settings.server.heartbeat_interval))
}

/// The SSE response of one observer of a run (`/query`, `/attach`).
pub fn sse_response(observer: Observer, heartbeat: std::time::Duration) -> Response<BoxBody> {
    sse_body_response(SseBody::new(observer, heartbeat))
}

/// The SSE response of an attach: the run's observer here, or its frames from the cluster.
pub fn attached_response(attached: Attached, heartbeat: std::time::Duration) -> Response<BoxBody> {
    match attached {
        Attached::Here(observer) => sse_response(observer, heartbeat),
        Attached::Elsewhere(frames) => sse_stream_response(frames, heartbeat),
    }
}

/// The SSE response of frames read elsewhere (a run of another replica).
fn sse_stream_response(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    heartbeat: std::time::Duration,
) -> Response<BoxBody> {
    sse_body_response(SseBody::from_stream(frames, heartbeat))
}

/// An SSE response around `body`: the headers every stream of agw sends (no caching, no proxy
/// buffering).
pub(super) fn sse_body_response(body: SseBody) -> Response<BoxBody> {
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    resp
}
