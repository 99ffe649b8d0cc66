//! `POST /api/ap/query`: validate, resolve, then stream the run as SSE (contract `http-api.md` §5).
//!
//! With auth on, a query into an existing chat the caller may not access answers 404 `chat not
//! found` before anything streams; a new chat and its runs belong to the caller.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use tokio::sync::mpsc;
use tracing::Instrument;

use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{self, RunContext, RunOutcome, SteerQueue};
use agw_protocol::event::ChatStart;
use agw_protocol::history::{PlanSnapshot, SystemSnapshot, SystemTool};
use agw_protocol::request::QueryRequest;
use agw_protocol::{Assembler, ErrorCode, RunErrorInfo, SystemClock, ids};

use super::HandlerResult;
use crate::auth::{Principal, may_access};
use crate::body::{RequestBody, SseBody};
use crate::envelope::ApiError;
use crate::sink::{Persistence, SseSink};
use crate::state::AppState;
use crate::webhook::RunTrigger;

/// Frames buffered between the run task and the socket. Small on purpose: when the client
/// reads slowly the run waits (and with it the provider stream) instead of queueing output.
const FRAME_CHANNEL_CAPACITY: usize = 16;

/// Reads the whole body, refusing more than `limit` bytes (413) before reading it all, and a body
/// that takes longer than `timeout` to arrive (408: a slow or never-ending body must not hold a
/// connection and a task forever).
pub async fn read_body(
    req: Request<RequestBody>,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, ApiError> {
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    let Ok(read) = tokio::time::timeout(timeout, Limited::new(req.into_body(), limit).collect()).await else {
        return Err(ApiError::request_timeout(timeout));
    };
    match read {
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

pub async fn query(state: AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request = QueryRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    request.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    let agent = resolve_agent(&state, request.agent_key.as_deref())?;
    let given = request.canonical_chat_id().map_err(|e| ApiError::bad_request(e.to_string()))?;
    if let Some(chat_id) = &given {
        check_chat_access(&state, principal.as_ref(), chat_id).await?;
    }
    let chat_id = given.unwrap_or_else(ids::new_chat_id);
    let run_id = ids::new_run_id();

    let (tx, rx) = mpsc::channel(FRAME_CHANNEL_CAPACITY);
    let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %agent.key);
    let heartbeat = state.settings.server.heartbeat_interval;
    tokio::spawn(drive_run(state, agent, request, run_id, chat_id, principal, tx).instrument(span));

    let mut resp = Response::new(BodyExt::boxed_unsync(SseBody::new(rx, heartbeat)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    Ok(resp)
}

/// An existing chat the caller may not access is answered like a missing one would be on
/// `GET /api/ap/chat` (404), before the stream starts. The upsert of the run re-checks under the
/// index lock, so a chat created meanwhile is not taken over either.
async fn check_chat_access(state: &AppState, principal: Option<&Principal>, chat_id: &str) -> Result<(), ApiError> {
    if principal.is_none() || !state.settings.memory.enabled {
        return Ok(());
    }
    let store = state.chats.clone();
    let id = chat_id.to_string();
    let owner = tokio::task::spawn_blocking(move || store.chat_owner(&id))
        .await
        .map_err(|e| ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            msg: format!("chat memory task failed: {e}"),
        })?
        .map_err(|e| {
            tracing::error!(error = %e, "chat memory read failed");
            ApiError { status: StatusCode::INTERNAL_SERVER_ERROR, msg: "chat memory unavailable".into() }
        })?;
    match owner {
        Some(owner) if !may_access(principal, owner.as_ref()) => {
            Err(ApiError::not_found(format!("chat not found: {chat_id}")))
        }
        _ => Ok(()),
    }
}

fn count_outcome(outcome: &'static str, code: &str) {
    metrics::counter!(crate::metrics::RUNS_TOTAL, "outcome" => outcome, "code" => code.to_string()).increment(1);
}

/// The memory side of a run start: the chat index record and the history for the model.
struct Prepared {
    chat_name: String,
    chat_start: Option<ChatStart>,
    history: Vec<agw_llm::ChatMessage>,
    plan: Option<PlanSnapshot>,
}

async fn prepare(
    state: &AppState,
    agent: &AgentDefinition,
    chat_id: &str,
    message: &str,
    principal: Option<&Principal>,
) -> Result<Prepared, String> {
    let store = state.chats.clone();
    let (chat, message, key, name) = (chat_id.to_string(), message.to_string(), agent.key.clone(), agent.name.clone());
    let caller = principal.cloned();
    let now = now_ms();
    let result = tokio::task::spawn_blocking(move || {
        let owner = caller.as_ref().map(Principal::owner);
        let permit = |chat_owner: Option<&agw_memory::Owner>| may_access(caller.as_ref(), chat_owner);
        let Some(upsert) =
            store.upsert_owned_chat(&chat, &message, Some(&key), Some(&name), owner.as_ref(), &permit, now)?
        else {
            return Ok(None);
        };
        let context = store.run_context(&chat)?;
        Ok::<_, agw_memory::MemoryError>(Some((upsert, context, chat)))
    })
    .await
    .map_err(|e| format!("chat memory task failed: {e}"))?;
    match result {
        // Taken between the check of the request and this upsert: still not the caller's.
        Ok(None) => Err(format!("chat not found: {chat_id}")),
        Ok(Some((upsert, context, chat_id))) => Ok(Prepared {
            chat_name: upsert.chat_name.clone(),
            chat_start: upsert.created.then_some(ChatStart { chat_id, chat_name: upsert.chat_name }),
            history: context.history,
            plan: context.plan,
        }),
        Err(e) => {
            tracing::error!(error = %e, "chat memory unavailable");
            Err(format!("chat memory unavailable: {e}"))
        }
    }
}

/// Memory off (`AGW_MEMORY_ENABLED=false`): no history, no stored plan; a query without a
/// `chatId` still starts a chat (`chat.start`), so the stream looks the same as with memory on.
fn stateless(request: &QueryRequest, chat_id: &str, message: &str) -> Prepared {
    let new_chat = request.chat_id.as_deref().is_none_or(|c| c.trim().is_empty());
    let chat_name = ids::chat_name(message);
    Prepared {
        chat_start: new_chat.then(|| ChatStart { chat_id: chat_id.to_string(), chat_name: chat_name.clone() }),
        chat_name,
        history: Vec::new(),
        plan: None,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The system snapshot persisted with the first step of every run.
fn system_snapshot(state: &AppState, agent: &AgentDefinition, stream: Option<bool>) -> SystemSnapshot {
    let tools = state.tools.load();
    let system_tools = agent
        .tool_names()
        .iter()
        .filter_map(|name| tools.get(name))
        .map(|def| SystemTool {
            tool_type: def.kind.call_type().to_string(),
            name: def.name.clone(),
            description: Some(def.description.clone()),
            parameters: Some(def.parameters.clone()),
        })
        .collect();
    let model = agent.agent_model(state.providers.default_model(&agent.agent_provider_key()).as_deref());
    SystemSnapshot::new(Some(model), agent.primary_system_prompt(), system_tools, stream)
}

/// The run task: chat memory, bootstrap events, the mode, the terminal event. Ends early
/// (dropping the provider stream) as soon as the client is gone.
async fn drive_run(
    state: AppState,
    agent: Arc<AgentDefinition>,
    request: QueryRequest,
    run_id: String,
    chat_id: String,
    principal: Option<Principal>,
    tx: mpsc::Sender<Bytes>,
) {
    // Registered for the run's whole life, with its owner: graceful shutdown waits for it, and
    // submits (later attach/steer/interrupt) are checked against the owner.
    let _guard = state.runs.enter_run(&run_id, principal.as_ref().map(Principal::owner));
    tracing::info!("run started");
    let message = request.message.clone().unwrap_or_default();
    let memory = state.settings.memory.enabled;
    let prepared = if memory {
        prepare(&state, &agent, &chat_id, &message, principal.as_ref()).await
    } else {
        Ok(stateless(&request, &chat_id, &message))
    };
    let query_event = request.to_event(&run_id, &chat_id);
    let mut stored_query = request.clone();
    stored_query.request_id = Some(request.effective_request_id(&run_id));
    stored_query.chat_id = Some(chat_id.clone());
    stored_query.role = Some(request.effective_role());
    stored_query.agent_key = request.agent_key.as_deref().map(str::trim).map(str::to_string);
    let persistence = memory.then(|| {
        let recorder = state.chats.recorder(
            &chat_id,
            &run_id,
            stored_query,
            Some(system_snapshot(&state, &agent, request.stream)),
        );
        Persistence { store: state.chats.clone(), chat_id: chat_id.clone(), recorder }
    });
    let mut sink = SseSink::new(Assembler::new(&run_id, &chat_id, Box::new(SystemClock)), tx, persistence);

    let prepared = match prepared {
        Ok(p) => p,
        Err(message) => {
            // Memory is unusable (disk full, read-only, …): say so in the stream, keep serving.
            let _ = sink.bootstrap(query_event, None).await;
            let _ = sink.fail(RunErrorInfo::new(ErrorCode::Internal, message, false)).await;
            count_outcome("failed", "internal");
            return;
        }
    };
    let chat_name = prepared.chat_name.clone();
    let mut sink = sink
        .with_webhook(state.webhook.clone().map(|w| RunTrigger::new(w, chat_id.clone(), run_id.clone(), chat_name)));
    if sink.bootstrap(query_event, prepared.chat_start).await.is_err() {
        tracing::info!("client gone before the run started");
        sink.abandon().await;
        return;
    }
    // The run's steers: every model turn takes what is waiting; closed once the run returned.
    let steers = Arc::new(SteerQueue::default());
    let ctx = RunContext {
        run_id,
        chat_id,
        agent,
        user_message: message,
        history: prepared.history,
        // The runtime shows a stored plan first (any mode) and continues it.
        initial_plan: prepared.plan,
        services: state.run_services(),
        steers: steers.clone(),
    };
    let watcher = sink.watch_closed();
    let outcome = tokio::select! {
        outcome = runtime::execute(ctx, &mut sink) => outcome,
        // The run may be waiting on a quiet provider; do not wait for its next delta to notice.
        () = watcher.closed() => RunOutcome::Disconnected,
        // Shutdown grace period over: end with run.error (what was streamed stays recorded).
        () = state.runs.stopped() => RunOutcome::Failed(RunErrorInfo::new(
            ErrorCode::Internal,
            "the server is shutting down; the run was stopped",
            true,
        )),
    };
    // Before the terminal event: a steer into a finished run is refused from here on.
    let untaken = steers.close();
    if !untaken.is_empty() {
        let steer_ids: Vec<&str> = untaken.iter().map(|s| s.steer_id.as_str()).collect();
        tracing::info!(?steer_ids, "the run ended before taking these steers");
    }
    match &outcome {
        RunOutcome::Completed { .. } => count_outcome("completed", ""),
        RunOutcome::Failed(e) => count_outcome("failed", e.code.as_str()),
        RunOutcome::Disconnected => count_outcome("disconnected", ""),
    }
    let delivered = match &outcome {
        RunOutcome::Completed { finish_reason } => sink.complete(finish_reason).await,
        RunOutcome::Failed(error) => sink.fail(error.clone()).await,
        RunOutcome::Disconnected => {
            tracing::info!("client disconnected; run cancelled");
            sink.abandon().await;
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
