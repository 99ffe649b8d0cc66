//! Starting a run: access to the chat, its slot (here and across replicas), quotas, the
//! registry, then the run's task — chat memory, the first events, and the run loop
//! ([`crate::drive`]).

use std::sync::Arc;

use tracing::Instrument;

use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::RunContext;
use agw_protocol::event::ChatStart;
use agw_protocol::history::{PlanSnapshot, SystemSnapshot, SystemTool};
use agw_protocol::request::{OnDisconnect, QueryRequest};
use agw_protocol::{Assembler, ErrorCode, RunErrorInfo, SystemClock, ids};

use crate::cluster::{self, ChatLock};
use crate::drive::{Entry, ForgetAnswers, LiveRun, RunGuards, count_outcome};
use crate::principal::{Principal, may_access, quota_owner};
use crate::quotas::QuotaPermit;
use crate::service::{Core, RunService};
use crate::sink::{Persistence, RunSink, now_ms};
use crate::webhook::RunTrigger;
use crate::{CancelReason, ChatConcurrency, ChatSlot, DisconnectPolicy, Observer, RunError, RunHandle};

/// A run to start, as every query endpoint (the native one and the other protocols') describes it.
pub struct NewRun {
    /// The agent, resolved from the catalog ([`RunService::agent`]).
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
    /// The caller reads the run as typed events ([`crate::Observer::next_events`]) to map them
    /// to another protocol: the run keeps each event next to its frame instead of having them
    /// decoded back from its SSE bytes.
    pub keep_events: bool,
}

impl NewRun {
    /// A run of `agent` for `request`, with no history of its own, no client tools.
    pub fn new(agent: Arc<AgentDefinition>, request: QueryRequest, principal: Option<Principal>) -> Self {
        Self {
            agent,
            request,
            principal,
            history: None,
            client_tools: Vec::new(),
            regenerate: false,
            keep_events: false,
        }
    }
}

impl RunService {
    /// Starts a run: checks access to an existing chat (not found, like an absent one), takes
    /// the chat's slot ([`RunError::ChatBusy`], or queued), admits it to its quotas, registers
    /// it and spawns its task. Returns the handle and the run's first observer, attached before
    /// the run can publish anything.
    pub async fn start(&self, new: NewRun) -> Result<(Arc<RunHandle>, Observer), RunError> {
        let core = &self.core;
        let NewRun { mut agent, request, principal, history, client_tools, regenerate, keep_events } = new;
        let given = request.canonical_chat_id().map_err(|e| RunError::invalid(e.to_string()))?;
        let mut chat_tracks_agent = false;
        if let Some(chat_id) = &given {
            check_chat_access(core, principal.as_ref(), chat_id).await?;
            if history.is_none() && core.settings.memory {
                let last = last_agent(core, chat_id).await?;
                chat_tracks_agent = last.is_some();
                if let Some(continuing) = last.and_then(|last| continuing_agent(core, &request, &agent, &last)) {
                    agent = continuing;
                }
            }
        }
        let agent = crate::output::with_output_schema(agent, &request)
            .map_err(|e| RunError::invalid(format!("outputSchema {e}")))?;
        // Images and files are checked, and the agent's models asked whether they take them,
        // before anything runs.
        let attachments = crate::attachments::for_run(core, &agent, &request)?;
        let chat_id = given.unwrap_or_else(ids::new_chat_id);
        let run_id = ids::new_run_id();
        let settings = core.tracker.settings();
        // One run per chat at a time: refused here, before anything streams, or queued in the task.
        let slot = match settings.chat_concurrency {
            ChatConcurrency::Reject => match core.tracker.chats().try_acquire(&chat_id, &run_id) {
                Ok(slot) => Some(slot),
                Err(busy) => return Err(RunError::ChatBusy { chat_id, run_id: busy.run_id }),
            },
            ChatConcurrency::Queue => None,
        };
        // Quotas before anything streams or any provider is called; the chat's slot (taken above)
        // is released when this returns early. A user's quotas are its owner's: subject and tenant.
        let owner = quota_owner(principal.as_ref());
        let quota = core.quotas.admit_run(core.cluster(), &owner, &agent.key, &run_id).await?;
        let policy = match request.on_disconnect {
            Some(OnDisconnect::Cancel) => DisconnectPolicy::Cancel,
            Some(OnDisconnect::Continue) => DisconnectPolicy::Continue,
            None if settings.detach_grace.is_zero() => DisconnectPolicy::Cancel,
            None => DisconnectPolicy::Grace(settings.detach_grace),
        };
        // Across replicas too (`crate::cluster`): the chat's lock in Redis, next to the local slot.
        if slot.is_some() {
            match cluster::lock_chat(core, &chat_id, &run_id).await {
                Ok(()) => {}
                Err(ChatLock::Busy(holder)) => return Err(RunError::ChatBusy { chat_id, run_id: holder }),
                Err(ChatLock::Unavailable(e)) => return Err(RunError::cluster(e)),
            }
        }
        let owner = principal.as_ref().map(Principal::owner);
        let handle = core.tracker.register(&run_id, &chat_id, &agent.key, owner, policy, keep_events);
        let observer = handle.observe(0).map_err(|e| RunError::internal(format!("the run's first observer: {e:?}")))?;
        if let Err(e) = cluster::announce(core, &handle, "running").await {
            // Not started: the handle is forgotten with its observer, the chat's lock released.
            handle.finish_abruptly();
            cluster::unlock_chat(core, &chat_id, &run_id).await;
            return Err(e);
        }

        let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %agent.key);
        let run = Box::new(RunStart {
            agent,
            request,
            attachments,
            principal,
            handle: handle.clone(),
            slot,
            history,
            client_tools,
            regenerate,
            quota,
            chat_tracks_agent,
        });
        // The run's spans continue the trace of the request that started it.
        let drive = core.telemetry.carry(Box::pin(drive_run(self.clone(), run).instrument(span)));
        tokio::spawn(drive);
        Ok((handle, observer))
    }
}

/// Why the memory side of a start failed.
enum StartFailure {
    /// The chat store failed; the message goes into the run's `run.error`.
    Memory(String),
    /// Taken by another owner between the request's check and the upsert.
    ChatTaken(String),
}

/// What the run task starts with.
struct RunStart {
    agent: Arc<AgentDefinition>,
    request: QueryRequest,
    /// The images and files of the request, checked.
    attachments: Vec<agw_llm::request::Attachment>,
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
    quota: QuotaPermit,
    /// The chat's index record names the agent its conversation was last handed to: the run
    /// updates it with the agent it ends with.
    chat_tracks_agent: bool,
}

/// The chat's index record: what it says of the agent the conversation ended with (handoffs,
/// docs/multi-agent.md), with the chat's first agent.
struct LastAgent {
    key: String,
    first_agent_key: Option<String>,
}

async fn last_agent(core: &Core, chat_id: &str) -> Result<Option<LastAgent>, RunError> {
    let id = chat_id.to_string();
    let summary = read_chat_store(core, move |store| store.get_chat(&id)).await?;
    Ok(summary.and_then(|s| Some(LastAgent { key: s.last_agent_key?, first_agent_key: s.first_agent_key })))
}

/// One read of the chat store, on a blocking thread (file and database I/O must not stall the
/// runtime's workers).
async fn read_chat_store<T: Send + 'static>(
    core: &Core,
    read: impl FnOnce(&agw_memory::ChatStore) -> Result<T, agw_memory::MemoryError> + Send + 'static,
) -> Result<T, RunError> {
    let store = core.chats.clone();
    tokio::task::spawn_blocking(move || read(&store)).await.map_err(RunError::memory)?.map_err(RunError::memory)
}

/// Later turns of a handed-over chat go to the agent the conversation ended with: a query that
/// names no agent (blank, `auto`, `default`) or the chat's first agent is run by that agent,
/// while it is loaded; a query that names any other agent gets that agent.
fn continuing_agent(
    core: &Core,
    request: &QueryRequest,
    resolved: &AgentDefinition,
    last: &LastAgent,
) -> Option<Arc<AgentDefinition>> {
    let requested = request.agent_key.as_deref().map(str::trim).unwrap_or("");
    let unnamed = crate::service::names_no_agent(requested);
    let names_first = last.first_agent_key.as_deref().is_some_and(|first| first.trim() == requested);
    if last.key == resolved.key || !(unnamed || names_first) {
        return None;
    }
    let continuing = core.agent(Some(&last.key)).ok().filter(|a| a.key == last.key);
    if continuing.is_none() {
        tracing::warn!(agent = %last.key, "the agent a chat was handed to is not loaded; the query's agent runs it");
    }
    continuing
}

/// An existing chat the caller may not access is answered like a missing one would be (not
/// found), before the stream starts. The upsert of the run re-checks under the index lock, so a
/// chat created meanwhile is not taken over either.
async fn check_chat_access(core: &Core, principal: Option<&Principal>, chat_id: &str) -> Result<(), RunError> {
    if principal.is_none() || !core.settings.memory {
        return Ok(());
    }
    let id = chat_id.to_string();
    let owner = read_chat_store(core, move |store| store.chat_owner(&id)).await?;
    match owner {
        Some(owner) if !may_access(principal, owner.as_ref()) => {
            Err(RunError::ChatNotFound { chat_id: chat_id.to_owned() })
        }
        _ => Ok(()),
    }
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
    core: &Core,
    agent: &AgentDefinition,
    chat_id: &str,
    message: &str,
    principal: Option<&Principal>,
    regenerate: bool,
) -> Result<Prepared, StartFailure> {
    let store = core.chats.clone();
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
    .map_err(|e| StartFailure::Memory(format!("chat memory task failed: {e}")))?;
    match result {
        // Taken between the check of the request and this upsert: still not the caller's.
        Ok(None) => Err(StartFailure::ChatTaken(chat_id.to_owned())),
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
            Err(StartFailure::Memory(format!("chat memory unavailable: {e}")))
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
fn system_snapshot(core: &Core, agent: &AgentDefinition, stream: Option<bool>) -> SystemSnapshot {
    let tools = core.catalogs.tools.load();
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
    let model = agent.agent_model(core.catalogs.providers.default_model(&agent.agent_provider_key()).as_deref());
    SystemSnapshot::new(Some(model), agent.primary_system_prompt(), system_tools, stream)
}

/// The run task: chat memory, bootstrap events, then the run loop. Publishes into the run's
/// handle whether or not anyone watches; ends early (dropping the provider stream, killing tool
/// processes) when the run is cancelled.
async fn drive_run(service: RunService, run: Box<RunStart>) {
    // Two boxed phases: the run task's own future stays small, the start's states are freed once
    // the run streams, and a streaming run holds only what streaming needs. One `async fn` for
    // both held the largest state of either (8.7 KB, a third of it layout padding) for the run's
    // whole life (docs/performance.md, memory per stream).
    let live = Box::pin(start_phase(&service.core, *run)).await;
    if let Some(live) = live {
        Box::pin(live.run(&service.core)).await;
    }
}

/// From the task's start to the run's first events: the chat's slot, chat memory, the sink, the
/// mode's context. `None`: the run ended here (cancelled while queued, memory unusable), its
/// terminal event sent.
async fn start_phase(core: &Core, run: RunStart) -> Option<Box<LiveRun>> {
    let RunStart {
        agent,
        request,
        attachments,
        principal,
        handle,
        slot,
        history,
        client_tools,
        regenerate,
        quota,
        chat_tracks_agent,
    } = run;
    let (run_id, chat_id) = (handle.run_id.clone(), handle.chat_id.clone());
    // Counted for the run's whole life: graceful shutdown waits for it; when it ends the handle
    // stays attachable for the retention window.
    let guard = core.tracker.enter_run(&handle);
    let answers = ForgetAnswers(core.submits.clone(), run_id.clone());
    let slot = match slot {
        Some(slot) => slot,
        None => {
            let queued = async {
                let slot = core.tracker.chats().acquire(&chat_id, &run_id).await;
                cluster::wait_chat(core, &chat_id, &run_id).await;
                slot
            };
            tokio::select! {
                slot = queued => slot,
                reason = async { tokio::select! { r = handle.cancelled() => r, () = handle.abandoned() => CancelReason::Detached } } => {
                    tracing::info!(?reason, "cancelled while queued behind another run of the chat");
                    let mut sink = RunSink::new(Assembler::new(&run_id, &chat_id, Box::new(SystemClock)), handle.clone(), None);
                    let _ = sink.bootstrap(request.to_event(&run_id, &chat_id), None).await;
                    let _ = sink.cancel().await;
                    return None;
                }
            }
        }
    };
    tracing::info!("run started");
    let message = request.message.clone().unwrap_or_default();
    let memory = core.settings.memory && history.is_none();
    let prepared = if memory {
        Box::pin(prepare(core, &agent, &chat_id, &message, principal.as_ref(), regenerate)).await
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
            core.chats.recorder(&chat_id, &run_id, stored_query, Some(system_snapshot(core, &agent, request.stream)));
        Persistence { store: core.chats.clone(), chat_id: chat_id.clone(), recorder }
    });
    let assembler = Assembler::new(&run_id, &chat_id, Box::new(SystemClock)).with_prices(core.settings.prices.clone());
    let mut sink = RunSink::new(assembler, handle.clone(), persistence)
        .tracking_agent(&agent.key, chat_tracks_agent)
        .recoverable(core.recovering(&run_id, &chat_id));

    let prepared = match prepared {
        Ok(p) => p,
        Err(failure) => {
            // Memory is unusable (disk full, read-only, …): say so in the stream, keep serving.
            let message = match failure {
                StartFailure::Memory(message) => message,
                StartFailure::ChatTaken(chat_id) => format!("chat not found: {chat_id}"),
            };
            let _ = sink.bootstrap(query_event, None).await;
            let _ = sink.fail(RunErrorInfo::new(ErrorCode::Internal, message, false)).await;
            count_outcome("failed", "internal");
            return None;
        }
    };
    let chat_name = prepared.chat_name.clone();
    let trigger = core.webhook.clone().map(|w| {
        RunTrigger::new(w, chat_id.clone(), run_id.clone(), chat_name, core.telemetry.run_tracing().propagate)
    });
    let mut sink = sink.with_webhook(trigger);
    let _ = sink.bootstrap(query_event, prepared.chat_start).await;
    // The run's steers (steer requests push into the handle's queue): every model turn takes
    // what is waiting; closed once the run returned.
    let steers = handle.steers.clone();
    // A lazy MCP server the agent uses starts now, so this run is offered its tools.
    if let Some(sources) = &core.tool_sources {
        sources.prepare(&agent, &core.catalogs.tools).await;
        // So are its sub-agents' (one level: the default depth).
        let agents = core.catalogs.agents.load_full();
        for sub_agent in agent.sub_agents.iter().filter_map(|key| agents.get(key)) {
            sources.prepare(&sub_agent, &core.catalogs.tools).await;
        }
    }
    let services = core.run_services(client_tools);
    let ctx = RunContext {
        run_id,
        chat_id,
        agent,
        user_message: message,
        user_attachments: attachments,
        history: prepared.history,
        history_runs: prepared.history_runs,
        // The runtime shows a stored plan first (any mode) and continues it.
        initial_plan: prepared.plan,
        services,
        steers: steers.clone(),
        remembered_approvals: prepared.remembered_approvals,
        quota: quota.gate(),
        nesting: Default::default(),
        handed_from: None,
    };
    Some(Box::new(LiveRun {
        ctx,
        entry: Entry::Fresh,
        sink,
        steers,
        _guards: RunGuards { _slot: slot, _answers: answers, _guard: guard },
        handle,
        quota,
    }))
}
