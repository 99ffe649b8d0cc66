//! `POST /api/ap/query`: validate, resolve, then stream the run as SSE (contract `http-api.md` §5).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tracing::Instrument;

use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{self, RunContext, RunOutcome};
use agw_protocol::event::{ChatStart, RequestQuery};
use agw_protocol::request::QueryRequest;
use agw_protocol::{Assembler, SystemClock, ids};

use super::HandlerResult;
use crate::body::SseBody;
use crate::envelope::ApiError;
use crate::sink::SseSink;
use crate::state::AppState;

/// Frames buffered between the run task and the socket. Small on purpose: when the client
/// reads slowly the run waits (and with it the provider stream) instead of queueing output.
const FRAME_CHANNEL_CAPACITY: usize = 16;

/// Reads the whole body, refusing more than `limit` bytes (413) before reading it all.
pub async fn read_body(req: Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(ApiError::payload_too_large(limit))
        }
        Err(e) => Err(ApiError::bad_request(format!("could not read request body: {e}"))),
    }
}

fn resolve_agent(state: &AppState, requested: Option<&str>) -> Result<Arc<AgentDefinition>, ApiError> {
    let catalog = state.agents.load();
    let key = requested.map(str::trim).unwrap_or("");
    if key.is_empty() || key.eq_ignore_ascii_case("auto") || key.eq_ignore_ascii_case("default") {
        return catalog.iter().next().cloned().ok_or_else(|| ApiError::bad_request("No agents available"));
    }
    catalog.get(key).ok_or_else(|| ApiError::not_found(format!("agent not found: {key}")))
}

pub async fn query(state: AppState, req: Request<Incoming>) -> HandlerResult {
    let body = read_body(req, state.settings.max_request_bytes).await?;
    let request = QueryRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    request.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    let agent = resolve_agent(&state, request.agent_key.as_deref())?;

    let chat_id =
        request.canonical_chat_id().map_err(|e| ApiError::bad_request(e.to_string()))?.unwrap_or_else(ids::new_chat_id);
    let run_id = ids::new_run_id();
    let message = request.message.clone().unwrap_or_default();
    let chat_start = state
        .chats
        .insert(chat_id.clone())
        .then(|| ChatStart { chat_id: chat_id.clone(), chat_name: ids::chat_name(&message) });
    let query_event = request.to_event(&run_id, &chat_id);

    let ctx = RunContext {
        run_id: run_id.clone(),
        chat_id: chat_id.clone(),
        agent: agent.clone(),
        user_message: message,
        history: Vec::new(),
        providers: state.providers.clone(),
    };
    let (tx, rx) = mpsc::channel(FRAME_CHANNEL_CAPACITY);
    let sink = SseSink::new(Assembler::new(&run_id, &chat_id, Box::new(SystemClock)), tx);
    let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %agent.key);
    tokio::spawn(drive_run(ctx, sink, query_event, chat_start).instrument(span));

    let mut resp = Response::new(BodyExt::boxed_unsync(SseBody::new(rx, state.settings.heartbeat_interval)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    Ok(resp)
}

/// The run task: bootstrap events, the mode, the terminal event. Ends early (dropping the
/// provider stream) as soon as the client is gone.
async fn drive_run(ctx: RunContext, mut sink: SseSink, query: RequestQuery, chat_start: Option<ChatStart>) {
    tracing::info!("run started");
    if sink.bootstrap(query, chat_start).await.is_err() {
        tracing::info!("client gone before the run started");
        return;
    }
    let watcher = sink.watch_closed();
    let outcome = tokio::select! {
        outcome = runtime::execute(ctx, &mut sink) => outcome,
        // The run may be waiting on a quiet provider; do not wait for its next delta to notice.
        () = watcher.closed() => RunOutcome::Disconnected,
    };
    let delivered = match &outcome {
        RunOutcome::Completed { finish_reason } => sink.complete(finish_reason).await,
        RunOutcome::Failed(error) => sink.fail(error.clone()).await,
        RunOutcome::Disconnected => {
            tracing::info!("client disconnected; run cancelled");
            return;
        }
    };
    match (outcome, delivered) {
        (_, Err(_)) => tracing::info!("client disconnected before the terminal event"),
        (RunOutcome::Completed { finish_reason }, Ok(())) => tracing::info!(%finish_reason, "run completed"),
        (RunOutcome::Failed(e), Ok(())) => {
            tracing::warn!(code = ?e.code, message = %e.message, "run ended with run.error")
        }
        (RunOutcome::Disconnected, Ok(())) => {}
    }
}
