//! `POST /api/ap/query`: validate, resolve, then stream the run as SSE (`docs/contract/http-api.md` §5).
//!
//! With auth on, a query into an existing chat the caller may not access answers 404 `chat not
//! found` before anything streams; a new chat and its runs belong to the caller.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use tracing::Instrument;

use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{self, RunContext, RunOutcome};
use agw_protocol::event::ChatStart;
use agw_protocol::history::{PlanSnapshot, SystemSnapshot, SystemTool};
use agw_protocol::request::{OnDisconnect, QueryRequest};
use agw_protocol::{Assembler, ErrorCode, RunErrorInfo, SystemClock, ids};

use super::HandlerResult;
use crate::auth::{Principal, may_access};
use crate::body::{BoxBody, RequestBody, SseBody};
use crate::config::ChatConcurrency;
use crate::envelope::ApiError;
use crate::runs::{CancelReason, ChatSlot, DisconnectPolicy, Observer, RunHandle};
use crate::sink::{Persistence, SseSink, now_ms};
use crate::state::AppState;
use crate::webhook::RunTrigger;

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

pub(crate) fn resolve_agent(state: &AppState, requested: Option<&str>) -> Result<Arc<AgentDefinition>, ApiError> {
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
    let heartbeat = state.settings.server.heartbeat_interval;
    let (_, observer) = start_run(
        &state,
        NewRun { agent, request, principal, history: None, client_tools: Vec::new(), regenerate: false },
    )
    .await?;
    Ok(sse_response(observer, heartbeat))
}

/// A run to start, as every query endpoint (the native one and the other protocols') describes it.
pub struct NewRun {
    /// The agent, resolved from the catalog.
    pub agent: Arc<AgentDefinition>,
    /// The query as the native endpoint reads it (validated): message, chatId, onDisconnect, …
    pub request: QueryRequest,
    /// The verified caller; the run and a new chat belong to it.
    pub principal: Option<Principal>,
    /// `Some`: a stateless run whose earlier turns are these messages (chat memory is neither
    /// read nor written), as the OpenAI façade's clients send their whole conversation.
    pub history: Option<Vec<agw_llm::ChatMessage>>,
    /// Frontend tools the client declares for this run (AG-UI `tools`), offered to the model
    /// besides the agent's own.
    pub client_tools: Vec<agw_tools::ToolDef>,
    /// The run answers the chat's last message again (AI SDK `regenerate-message`): the chat's
    /// last run is left out of what the model sees.
    pub regenerate: bool,
}

/// Starts a run: checks access to an existing chat (404 like an absent one), takes the chat's
/// slot (409 `chat_busy`, or queued), registers the run and spawns its task. Returns the handle
/// and the run's first observer, attached before the run can publish anything.
pub async fn start_run(state: &AppState, new: NewRun) -> Result<(Arc<RunHandle>, Observer), ApiError> {
    let NewRun { agent, request, principal, history, client_tools, regenerate } = new;
    let given = request.canonical_chat_id().map_err(|e| ApiError::bad_request(e.to_string()))?;
    if let Some(chat_id) = &given {
        check_chat_access(state, principal.as_ref(), chat_id).await?;
    }
    let chat_id = given.unwrap_or_else(ids::new_chat_id);
    let run_id = ids::new_run_id();
    let settings = state.runs.settings();
    // One run per chat at a time: refused here, before anything streams, or queued in the task.
    let slot = match settings.chat_concurrency {
        ChatConcurrency::Reject => match state.runs.chats().try_acquire(&chat_id, &run_id) {
            Ok(slot) => Some(slot),
            Err(busy) => return Err(chat_busy(&chat_id, &busy.run_id)),
        },
        ChatConcurrency::Queue => None,
    };
    // Quotas before anything streams or any provider is called; the chat's slot (taken above)
    // is released when this returns early. A user's quotas are its owner's: subject and tenant.
    let owner = principal.as_ref().map_or_else(crate::quotas::anonymous, Principal::owner);
    let quota = crate::quotas::admit_run(state, &owner, &agent.key, &run_id).await.map_err(quota_exceeded)?;
    let policy = match request.on_disconnect {
        Some(OnDisconnect::Cancel) => DisconnectPolicy::Cancel,
        Some(OnDisconnect::Continue) => DisconnectPolicy::Continue,
        None if settings.detach_grace.is_zero() => DisconnectPolicy::Cancel,
        None => DisconnectPolicy::Grace(settings.detach_grace),
    };
    // Across replicas too (`crate::cluster`): the chat's lock in Redis, next to the local slot.
    if slot.is_some() {
        match crate::cluster::lock_chat(state, &chat_id, &run_id).await {
            Ok(()) => {}
            Err(crate::cluster::ChatLock::Busy(holder)) => return Err(chat_busy(&chat_id, &holder)),
            Err(crate::cluster::ChatLock::Unavailable(e)) => {
                tracing::error!(error = %e, "chat lock unavailable");
                return Err(ApiError::with_fields(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the cluster's shared state (Redis) is unavailable; retry shortly",
                    serde_json::json!({"code": "cluster_unavailable"}),
                ));
            }
        }
    }
    let handle = state.runs.register(&run_id, &chat_id, &agent.key, principal.as_ref().map(Principal::owner), policy);
    let observer = handle.observe(0).map_err(|_| ApiError::internal())?;
    if let Err(e) = crate::cluster::announce(state, &handle, "running").await {
        // Not started: the handle is forgotten with its observer, the chat's lock released.
        handle.finish_abruptly();
        crate::cluster::unlock_chat(state, &chat_id, &run_id).await;
        return Err(e);
    }

    let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %agent.key);
    let run = Box::new(RunStart {
        agent,
        request,
        principal,
        handle: handle.clone(),
        slot,
        history,
        client_tools,
        regenerate,
        quota,
    });
    let drive = drive_run(state.clone(), run).instrument(span);
    if crate::telemetry::enabled() {
        // The run's spans continue the trace of the request that started it.
        let cx = opentelemetry::Context::current();
        tokio::spawn(opentelemetry::context::FutureExt::with_context(drive, cx));
    } else {
        tokio::spawn(drive);
    }
    Ok((handle, observer))
}

/// The SSE response of one observer of a run (`/query`, `/attach`).
pub fn sse_response(observer: Observer, heartbeat: std::time::Duration) -> Response<BoxBody> {
    sse_body_response(SseBody::new(observer, heartbeat))
}

/// The SSE response of frames read elsewhere (a run of another replica, `crate::cluster`).
pub fn sse_stream_response(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    heartbeat: std::time::Duration,
) -> Response<BoxBody> {
    sse_body_response(SseBody::from_stream(frames, heartbeat))
}

fn sse_body_response(body: SseBody) -> Response<BoxBody> {
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    resp
}

/// 409 for a query into a chat whose run is still going, naming that run (attach to it, or
/// interrupt it, then ask again).
fn chat_busy(chat_id: &str, run_id: &str) -> ApiError {
    ApiError::conflict(
        format!("chat {chat_id} has a run in progress ({run_id}); attach to it or interrupt it first"),
        serde_json::json!({"code": "chat_busy", "chatId": chat_id, "runId": run_id}),
    )
}

/// The subject of every unauthenticated caller, for quotas.
pub const ANONYMOUS_SUBJECT: &str = "anonymous";

/// 429 `quota_exceeded` naming the quota, with `Retry-After`.
pub(crate) fn quota_exceeded(e: crate::quotas::QuotaExceeded) -> ApiError {
    tracing::info!(quota = %e.quota, key = %e.key, limit = %e.limit, "run refused by a quota");
    let retry_after = e.retry_after_secs();
    ApiError::with_fields(
        StatusCode::TOO_MANY_REQUESTS,
        e.message(),
        serde_json::json!({"code": "quota_exceeded", "quota": e.quota, "limit": e.limit, "retryAfter": retry_after}),
    )
    .with_retry_after(e.retry_after)
}

/// What the run task starts with.
struct RunStart {
    agent: Arc<AgentDefinition>,
    request: QueryRequest,
    principal: Option<Principal>,
    handle: Arc<RunHandle>,
    /// The chat, when already held (`reject` policy); `None`: queue for it in the task.
    slot: Option<ChatSlot>,
    /// See [`NewRun::history`].
    history: Option<Vec<agw_llm::ChatMessage>>,
    /// See [`NewRun::client_tools`].
    client_tools: Vec<agw_tools::ToolDef>,
    /// See [`NewRun::regenerate`].
    regenerate: bool,
    /// The run's place in its owner's and agent's quotas, held until it ends; its model calls
    /// are checked and counted through the permit's gate.
    quota: crate::quotas::QuotaPermit,
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
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("chat memory task failed: {e}")))?
        .map_err(|e| {
            tracing::error!(error = %e, "chat memory read failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "chat memory unavailable")
        })?;
    match owner {
        Some(owner) if !may_access(principal, owner.as_ref()) => {
            Err(ApiError::not_found(format!("chat not found: {chat_id}")))
        }
        _ => Ok(()),
    }
}

pub(crate) fn count_outcome(outcome: &'static str, code: &str) {
    metrics::counter!(crate::metrics::RUNS_TOTAL, "outcome" => outcome, "code" => code.to_string()).increment(1);
}

/// The memory side of a run start: the chat index record and the history for the model.
struct Prepared {
    chat_name: String,
    chat_start: Option<ChatStart>,
    history: Vec<agw_llm::ChatMessage>,
    /// Where each stored run begins in `history`.
    history_runs: Vec<agw_protocol::chat::HistoryRun>,
    plan: Option<PlanSnapshot>,
    /// The chat's remembered approvals.
    remembered_approvals: Vec<agw_protocol::history::ApprovalLine>,
}

async fn prepare(
    state: &AppState,
    agent: &AgentDefinition,
    chat_id: &str,
    message: &str,
    principal: Option<&Principal>,
    regenerate: bool,
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
        let context = if regenerate { store.chat_context_regenerating(&chat)? } else { store.chat_context(&chat)? };
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
            history_runs: context.history_runs,
            plan: context.plan,
            remembered_approvals: context.remembered_approvals,
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
        history_runs: Vec::new(),
        plan: None,
        remembered_approvals: Vec::new(),
    }
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

/// Forgets the run's answered submits when its task ends, however it ends: a second answer is
/// told `already_answered` while the run lasts, and nothing is kept after it.
pub(crate) struct ForgetAnswers(pub Arc<agw_modes::runtime::FrontendSubmits>, pub String);

impl Drop for ForgetAnswers {
    fn drop(&mut self) {
        self.0.forget_run(&self.1);
    }
}

/// How the mode's part of a run ended, from the run task's point of view.
pub(crate) enum Ended {
    Mode(RunOutcome),
    Cancelled(CancelReason),
    Shutdown,
}

/// The run task: chat memory, bootstrap events, the mode, the terminal event. Publishes into the
/// run's handle whether or not anyone watches; ends early (dropping the provider stream, killing
/// tool processes) when the run is cancelled.
async fn drive_run(state: AppState, run: Box<RunStart>) {
    // Two boxed phases: the run task's own future stays small, the start's states are freed once
    // the run streams, and a streaming run holds only what streaming needs. One `async fn` for
    // both held the largest state of either (8.7 KB, a third of it layout padding) for the run's
    // whole life (docs/performance.md, memory per stream).
    let live = Box::pin(start_phase(&state, *run)).await;
    if let Some(live) = live {
        Box::pin(live.stream(&state)).await;
    }
}

/// A run that has started streaming: what the rest of it needs, and what it holds until it ends.
struct LiveRun {
    // Fields drop in this order, as the locals of the one `async fn` this was did: the sink
    // first, then the chat's slot, the frontend answers, the registry's count (`RunGuards`), the
    // quota last (released earlier, when the mode ended).
    ctx: RunContext,
    sink: SseSink,
    steers: Arc<agw_modes::runtime::SteerQueue>,
    _guards: RunGuards,
    handle: Arc<RunHandle>,
    /// The run's place in its quotas (in flight, its token reservation), released when the
    /// mode ended.
    quota: crate::quotas::QuotaPermit,
}

/// Held for a run's whole life; fields drop in order.
struct RunGuards {
    _slot: ChatSlot,
    _answers: ForgetAnswers,
    _guard: crate::runs::RunGuard,
}

/// From the task's start to the run's first events: the chat's slot, chat memory, the sink, the
/// mode's context. `None`: the run ended here (cancelled while queued, memory unusable), its
/// terminal event sent.
async fn start_phase(state: &AppState, run: RunStart) -> Option<Box<LiveRun>> {
    let RunStart { agent, request, principal, handle, slot, history, client_tools, regenerate, quota } = run;
    let (run_id, chat_id) = (handle.run_id.clone(), handle.chat_id.clone());
    // Counted for the run's whole life: graceful shutdown waits for it; when it ends the handle
    // stays attachable for the retention window.
    let guard = state.runs.enter_run(&handle);
    let answers = ForgetAnswers(state.submits.clone(), run_id.clone());
    let slot = match slot {
        Some(slot) => slot,
        None => {
            let queued = async {
                let slot = state.runs.chats().acquire(&chat_id, &run_id).await;
                crate::cluster::wait_chat(state, &chat_id, &run_id).await;
                slot
            };
            tokio::select! {
                slot = queued => slot,
                reason = async { tokio::select! { r = handle.cancelled() => r, () = handle.abandoned() => CancelReason::Detached } } => {
                    tracing::info!(?reason, "cancelled while queued behind another run of the chat");
                    let mut sink = SseSink::new(Assembler::new(&run_id, &chat_id, Box::new(SystemClock)), handle.clone(), None);
                    let _ = sink.bootstrap(request.to_event(&run_id, &chat_id), None).await;
                    let _ = sink.cancel().await;
                    return None;
                }
            }
        }
    };
    tracing::info!("run started");
    let message = request.message.clone().unwrap_or_default();
    let memory = state.settings.memory.enabled && history.is_none();
    let prepared = if memory {
        Box::pin(prepare(state, &agent, &chat_id, &message, principal.as_ref(), regenerate)).await
    } else {
        let mut prepared = stateless(&request, &chat_id, &message);
        prepared.history = history.unwrap_or_default();
        Ok(prepared)
    };
    let query_event = request.to_event(&run_id, &chat_id);
    let mut stored_query = request.clone();
    stored_query.request_id = Some(request.effective_request_id(&run_id));
    stored_query.chat_id = Some(chat_id.clone());
    stored_query.role = Some(request.effective_role());
    stored_query.agent_key = request.agent_key.as_deref().map(str::trim).map(str::to_string);
    let persistence = memory.then(|| {
        let recorder =
            state.chats.recorder(&chat_id, &run_id, stored_query, Some(system_snapshot(state, &agent, request.stream)));
        Persistence { store: state.chats.clone(), chat_id: chat_id.clone(), recorder }
    });
    let assembler = Assembler::new(&run_id, &chat_id, Box::new(SystemClock)).with_prices(state.settings.prices.clone());
    let mut sink = SseSink::new(assembler, handle.clone(), persistence);

    let prepared = match prepared {
        Ok(p) => p,
        Err(message) => {
            // Memory is unusable (disk full, read-only, …): say so in the stream, keep serving.
            let _ = sink.bootstrap(query_event, None).await;
            let _ = sink.fail(RunErrorInfo::new(ErrorCode::Internal, message, false)).await;
            count_outcome("failed", "internal");
            return None;
        }
    };
    let chat_name = prepared.chat_name.clone();
    let mut sink = sink
        .with_webhook(state.webhook.clone().map(|w| RunTrigger::new(w, chat_id.clone(), run_id.clone(), chat_name)));
    let _ = sink.bootstrap(query_event, prepared.chat_start).await;
    // The run's steers (POST /api/ap/steer pushes into the handle's queue): every model turn
    // takes what is waiting; closed once the run returned.
    let steers = handle.steers.clone();
    // A lazy MCP server the agent uses starts now, so this run is offered its tools.
    if let Some(mcp) = &state.mcp {
        mcp.ensure_for(state, &agent).await;
    }
    let ctx = RunContext {
        run_id,
        chat_id,
        agent,
        user_message: message,
        history: prepared.history,
        history_runs: prepared.history_runs,
        // The runtime shows a stored plan first (any mode) and continues it.
        initial_plan: prepared.plan,
        services: state.run_services_with(client_tools),
        steers: steers.clone(),
        remembered_approvals: prepared.remembered_approvals,
        quota: quota.gate(),
    };
    Some(Box::new(LiveRun {
        ctx,
        sink,
        steers,
        _guards: RunGuards { _slot: slot, _answers: answers, _guard: guard },
        handle,
        quota,
    }))
}

impl LiveRun {
    /// The mode, until it returns or the run is stopped, then the terminal event. Boxed, and
    /// its fields used in place: an `async fn` keeps its arguments' slots and `mut self` gets a
    /// second one, so a `LiveRun` by value (2 KB) would be held twice; the fields drop in
    /// declaration order.
    async fn stream(mut self: Box<Self>, state: &AppState) {
        // Dropping the mode's future stops it wherever it is: the provider request is aborted, a
        // tool's processes are killed, a frontend wait is unregistered.
        let ended = tokio::select! {
            // Boxed: the mode's states are only paid for while it runs.
            outcome = Box::pin(runtime::execute(self.ctx, &mut self.sink)) => Ended::Mode(outcome),
            reason = self.handle.cancelled() => Ended::Cancelled(reason),
            () = self.handle.abandoned() => Ended::Cancelled(CancelReason::Detached),
            () = state.runs.stopped() => Ended::Shutdown,
        };
        // Before the terminal event: a client that asks again the moment it sees it is not
        // refused by this run's place or reservation.
        self.quota.release();
        end_run(&mut self.sink, ended, &self.steers).await;
    }
}

/// Ends a run whose mode returned (or was stopped): closes its steers, then the terminal
/// event the way it ended says — unless the server stops while the run waits durably for a
/// person: then nothing is written, and a restart continues it (`crate::durable`).
pub(crate) async fn end_run(sink: &mut SseSink, ended: Ended, steers: &agw_modes::runtime::SteerQueue) {
    if matches!(ended, Ended::Shutdown) && sink.waits_durably() {
        steers.close();
        tracing::info!("the server stops while the run waits; it continues after a restart");
        return;
    }
    // Before the terminal event: a steer into a finished run is refused from here on.
    let untaken = steers.close();
    if !untaken.is_empty() {
        let steer_ids: Vec<&str> = untaken.iter().map(|s| s.steer_id.as_str()).collect();
        tracing::info!(?steer_ids, "the run ended before taking these steers");
    }
    match ended {
        Ended::Mode(RunOutcome::Completed { finish_reason }) => {
            count_outcome("completed", "");
            let _ = sink.complete(&finish_reason).await;
            tracing::info!(%finish_reason, "run completed");
        }
        Ended::Mode(RunOutcome::Failed(e)) => {
            count_outcome("failed", e.code.as_str());
            tracing::warn!(code = ?e.code, message = %e.message, "run ended with run.error");
            let _ = sink.fail(e).await;
        }
        Ended::Mode(RunOutcome::Disconnected) => {
            // The sink never reports a closed consumer (observers come and go); kept for
            // completeness: what was streamed is persisted.
            count_outcome("disconnected", "");
            sink.abandon().await;
        }
        Ended::Cancelled(reason) => {
            count_outcome("cancelled", if reason == CancelReason::Interrupted { "interrupted" } else { "detached" });
            tracing::info!(?reason, "run cancelled");
            let _ = sink.cancel().await;
        }
        Ended::Shutdown => {
            count_outcome("failed", "internal");
            // Shutdown grace period over: end with run.error (what was streamed stays recorded).
            let error =
                RunErrorInfo::new(ErrorCode::Internal, "the server is shutting down; the run was stopped", true);
            let _ = sink.fail(error).await;
        }
    }
}
