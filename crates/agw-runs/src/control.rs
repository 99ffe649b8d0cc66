//! Acting on a run that has started: attach to its stream, interrupt it, steer it, answer what
//! it waits for, compact its chat. Each finds the run in one place ([`cluster::find_run`]): on
//! this replica, on another (the request is forwarded, signed), on one that is gone (a waiting
//! run is adopted, a running one has failed `node_lost`), or nowhere the caller may see.

use std::sync::Arc;
use std::time::Duration;

use agw_modes::runtime::{CallSpend, Steer, SteerRefused, SubmitStatus};
use agw_protocol::history::{CheckpointLine, HistoryLine};
use agw_protocol::ids;
use agw_protocol::request::SubmitRequest;
use agw_protocol::usage::TokenCounts;

use crate::calls::{Attached, ChatDeleted, Compacted, Control, Interrupted, SteerRequest, Steered, Submitted};
use crate::cluster::{self, ChatLock, Remote};
use crate::locate::{self, Located};
use crate::principal::{Principal, may_access, quota_owner};
use crate::service::{Core, RunService};
use crate::sink::now_ms;
use crate::{AttachError, CancelReason, RunError, RunHandle, RunStatus};

/// How long `interrupt` waits for the run to end before answering `cancelling`. The run stops
/// within milliseconds wherever it is; the wait lets the answer say `cancelled` for sure.
const INTERRUPT_WAIT: Duration = Duration::from_secs(2);

/// How long `delete_chat` waits for a finished run to free its chat's slot.
const SLOT_WAIT: Duration = Duration::from_secs(2);

impl RunService {
    /// Where the run is for this caller; a blank id is invalid.
    async fn find(&self, run_id: &str, principal: Option<&Principal>) -> Result<Located, RunError> {
        if run_id.trim().is_empty() {
            return Err(RunError::invalid("runId is required"));
        }
        locate::find_run(self, run_id, principal).await
    }

    /// The run's stream after `last_seq`: every buffered event with a greater seq, then live,
    /// ending after the terminal event. `None`: from the oldest event still held (a client that
    /// saw nothing wants what there is). A run held by another replica is followed through the
    /// cluster.
    pub async fn attach(
        &self,
        run_id: &str,
        last_seq: Option<u64>,
        principal: Option<&Principal>,
    ) -> Result<Attached, RunError> {
        let handle = match self.find(run_id, principal).await? {
            Located::Here(handle) => handle,
            Located::Nowhere => return Err(RunError::run_not_found(run_id)),
            Located::Elsewhere(remote) | Located::Orphaned(remote) | Located::Ended(remote) => {
                return self.attach_remote(remote, last_seq).await;
            }
        };
        let last_seq = last_seq.unwrap_or_else(|| handle.oldest_seq().saturating_sub(1));
        let latest = handle.latest_seq();
        if last_seq > latest && handle.status().is_finished() {
            return Err(RunError::SeqAhead { last_seq, latest });
        }
        match handle.observe(last_seq) {
            Ok(observer) => {
                tracing::info!(runId = %handle.run_id, last_seq, status = handle.status().as_str(), "attached");
                Ok(Attached::Here(observer))
            }
            Err(AttachError::Expired { oldest, latest }) => {
                // Clustered, the run's stream in Redis may reach further back (a run this
                // replica took over holds only what it streamed itself).
                if let Some(remote) = cluster::own_record(&self.core, &handle).await {
                    return self.attach_remote(remote, Some(last_seq)).await;
                }
                Err(RunError::SeqExpired { run_id: handle.run_id.clone(), last_seq, oldest, latest })
            }
            Err(AttachError::TooManyObservers(max)) => {
                Err(RunError::TooManyObservers { run_id: handle.run_id.clone(), max })
            }
        }
    }

    async fn attach_remote(&self, remote: Remote, requested: Option<u64>) -> Result<Attached, RunError> {
        let run_id = remote.record.run_id.clone();
        let (oldest, latest) = cluster::stream_bounds(&self.core, &run_id).await?;
        let last_seq = requested.unwrap_or(oldest.saturating_sub(1));
        if last_seq > latest && remote.finished() {
            return Err(RunError::SeqAhead { last_seq, latest });
        }
        if last_seq < latest && last_seq + 1 < oldest {
            return Err(RunError::SeqExpired { run_id, last_seq, oldest, latest });
        }
        tracing::info!(runId = %run_id, last_seq, node = %remote.record.node_id, status = %remote.record.status, "attached to a run of another replica");
        Ok(Attached::Elsewhere(locate::follow(self, remote, last_seq)))
    }

    /// Cancels a running run. A finished run is not an error: `accepted: false`, and `status`
    /// says how it had ended.
    pub async fn interrupt(&self, run_id: &str, principal: Option<&Principal>) -> Result<Interrupted, RunError> {
        let handle = match self.find(run_id, principal).await? {
            Located::Here(handle) => handle,
            Located::Nowhere => return Err(RunError::run_not_found(run_id)),
            Located::Orphaned(remote) => cluster::adopt(self, &remote).await?,
            Located::Ended(remote) => {
                let status = remote.status().to_owned();
                return Ok(Interrupted {
                    accepted: false,
                    detail: format!("the run had already finished ({status})"),
                    status,
                    run_id: remote.record.run_id,
                });
            }
            Located::Elsewhere(remote) => {
                return cluster::forward(&self.core, &remote, Control::Interrupt, principal).await;
            }
        };
        Ok(interrupt_handle(&handle).await)
    }

    /// Queues a user message the run takes at its next model-turn boundary (never mid-tool).
    /// [`RunError::RunFinished`] for a run that ended (or is ending: its queue closes before its
    /// terminal event); [`RunError::SteerQueueFull`] past the queue's bound. A run another
    /// replica holds gets the steer forwarded.
    pub async fn steer(&self, request: SteerRequest, principal: Option<&Principal>) -> Result<Steered, RunError> {
        if request.message.trim().is_empty() {
            return Err(RunError::invalid("message must not be blank"));
        }
        let handle = match self.find(&request.run_id, principal).await? {
            Located::Here(handle) => handle,
            Located::Nowhere => return Err(RunError::run_not_found(&request.run_id)),
            // A run waiting on a replica that is gone takes no steer: only an answer adopts it.
            Located::Ended(remote) | Located::Orphaned(remote) => {
                return Err(RunError::RunFinished { status: remote.status().to_owned(), run_id: remote.record.run_id });
            }
            Located::Elsewhere(remote) => {
                return cluster::forward(&self.core, &remote, Control::Steer(request), principal).await;
            }
        };
        let run_id = handle.run_id.clone();
        let finished = || RunError::RunFinished { run_id: run_id.clone(), status: handle.status().as_str().to_owned() };
        if handle.status().is_finished() {
            return Err(finished());
        }
        let steer_id = request
            .steer_id
            .map(|id| id.trim().to_string())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("steer_{}", &ids::new_run_id().replace('-', "")[..16]));
        let steer = Steer {
            steer_id: steer_id.clone(),
            message: request.message,
            request_id: request.request_id.filter(|r| !r.trim().is_empty()),
        };
        match handle.steers.push(steer) {
            Ok(()) => {
                tracing::info!(runId = %run_id, %steer_id, "steer queued");
                Ok(Steered {
                    accepted: true,
                    status: "queued".into(),
                    run_id: run_id.clone(),
                    steer_id,
                    detail: "queued for the run's next model turn".into(),
                })
            }
            Err(SteerRefused::Closed(_)) => Err(finished()),
            Err(SteerRefused::Full { capacity, .. }) => {
                Err(RunError::SteerQueueFull { run_id: run_id.clone(), capacity })
            }
        }
    }

    /// A person answers a waiting frontend tool or approval. Only the run's owner (or the
    /// operator) can: anyone else gets the answer of a key nothing waits under — `unmatched`,
    /// the same as for a run that does not exist — and the waiting call is not touched. A run
    /// another replica holds gets the submit forwarded; one that waited on a replica that is
    /// gone is adopted here first. `submit` must be validated.
    pub async fn submit(&self, submit: SubmitRequest, principal: Option<&Principal>) -> Result<Submitted, RunError> {
        let core = &self.core;
        // A run held here decides by its owner below, whoever asks; only a run this replica does
        // not hold is looked for in the cluster.
        let mut owner = core.tracker.owner(&submit.run_id);
        if owner.is_none() {
            match locate::find_run(self, &submit.run_id, principal).await? {
                Located::Orphaned(remote) => owner = Some(cluster::adopt(self, &remote).await?.owner.clone()),
                Located::Elsewhere(remote) => {
                    return cluster::forward(core, &remote, Control::Submit(submit), principal).await;
                }
                Located::Here(_) | Located::Ended(_) | Located::Nowhere => {}
            }
        }
        // No such run: nothing can be waiting, but without auth the waiters alone decide.
        let permitted = match owner {
            Some(owner) => may_access(principal, owner.as_ref()),
            None => principal.is_none(),
        };
        let status = if permitted {
            core.submits.submit(&submit.run_id, &submit.tool_id, submit.params.clone())
        } else {
            SubmitStatus::Unmatched
        };
        // The run's handle remembers what was answered for as long as the run is attachable, so
        // a late second answer is told so after the run ended too.
        let handle = if permitted { core.tracker.get(&submit.run_id) } else { None };
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
        let (run_id, tool_id) = (submit.run_id, submit.tool_id);
        let (name, detail) = match status {
            SubmitStatus::Accepted => {
                ("accepted", format!("Frontend submit accepted for runId={run_id}, toolId={tool_id}"))
            }
            SubmitStatus::AlreadyAnswered => {
                ("already_answered", format!("runId={run_id}, toolId={tool_id} was already answered"))
            }
            SubmitStatus::Unmatched => {
                ("unmatched", format!("No pending frontend tool found for runId={run_id}, toolId={tool_id}"))
            }
        };
        let accepted = status == SubmitStatus::Accepted;
        tracing::info!(runId = %run_id, toolId = %tool_id, accepted, "frontend submit");
        Ok(Submitted { accepted, status: name.into(), run_id, tool_id, detail, awaiting_id: submit.awaiting_id })
    }

    /// Compacts a chat's history on demand: the stored runs but the newest ones kept are
    /// summarised with the agent's model and policy (`agent_key`, else the chat's own agent),
    /// and the summary is written as the chat's checkpoint, so the next run starts from it. The
    /// summary is a model call like a run's: the caller's and the agent's daily quotas are
    /// checked before it and count what it used.
    pub async fn compact(
        &self,
        chat_id: &str,
        agent_key: Option<&str>,
        principal: Option<&Principal>,
    ) -> Result<Compacted, RunError> {
        let core = &self.core;
        let asked = chat_id;
        let chat_id = ids::canonical_uuid(chat_id).ok_or_else(|| RunError::invalid("chatId must be a valid UUID"))?;
        if !core.settings.memory {
            return Err(RunError::MemoryDisabled);
        }
        let (store, id, caller) = (core.chats.clone(), chat_id.clone(), principal.cloned());
        let loaded = tokio::task::spawn_blocking(move || {
            let summary = store.get_chat(&id)?;
            let exists = summary.is_some() || store.chat_exists(&id)?;
            let owner = summary.as_ref().and_then(|s| s.owner.as_ref());
            if !exists || !may_access(caller.as_ref(), owner) {
                return Ok(None);
            }
            let context = store.chat_context(&id)?;
            Ok::<_, agw_memory::MemoryError>(Some((summary.and_then(|s| s.first_agent_key), context)))
        })
        .await
        .map_err(RunError::memory)?
        .map_err(RunError::memory)?;
        // Another user's chat answers like one that does not exist.
        let Some((chat_agent, context)) = loaded else {
            return Err(RunError::ChatNotFound { chat_id: asked.to_owned() });
        };
        let agent = core.agent(agent_key.or(chat_agent.as_deref()))?;
        let run_id = ids::new_run_id();
        let quota = core.quotas.continue_run(core.cluster(), &quota_owner(principal), &agent.key, &run_id);
        quota.may_call().await?;
        let services = core.run_services(Vec::new());
        let made =
            agw_modes::runtime::compact_history(&services, &agent, &context.history, &context.history_runs, &run_id)
                .await
                .map_err(|reason| {
                    tracing::warn!(chatId = %chat_id, %reason, "on-demand compaction failed");
                    RunError::SummaryFailed { reason: reason.to_string() }
                })?;
        if let Some(made) = &made {
            for call in &made.usage {
                let tokens = TokenCounts::from_usage(&call.usage);
                let cost = core.settings.prices.find(&call.provider, &call.model).map(|price| price.charge(&tokens));
                quota.spent(CallSpend { tokens: tokens.input_tokens.saturating_add(tokens.output_tokens), cost }).await;
            }
        }
        let Some(made) = made else {
            return Ok(Compacted {
                chat_id,
                compacted: false,
                detail: Some("nothing to compact: the chat has no stored runs older than the ones kept".into()),
                through_run_id: None,
                replaced_messages: None,
                tokens_before: None,
                tokens_after: None,
                summary: None,
            });
        };
        let line = HistoryLine::Checkpoint(CheckpointLine {
            chat_id: chat_id.clone(),
            run_id,
            updated_at: now_ms(),
            through_run_id: made.through_run_id.clone(),
            summary: made.summary.clone(),
            tokens_before: made.tokens_before,
            tokens_after: made.tokens_after,
        });
        let (store, id) = (core.chats.clone(), chat_id.clone());
        tokio::task::spawn_blocking(move || store.append(&id, &[line]))
            .await
            .map_err(RunError::memory)?
            .map_err(RunError::memory)?;
        tracing::info!(chatId = %chat_id, through = %made.through_run_id, before = made.tokens_before, after = made.tokens_after, "chat compacted on demand");
        Ok(Compacted {
            chat_id,
            compacted: true,
            detail: None,
            through_run_id: Some(made.through_run_id),
            replaced_messages: Some(made.replaced_messages),
            tokens_before: Some(made.tokens_before),
            tokens_after: Some(made.tokens_after),
            summary: Some(made.summary),
        })
    }

    /// Deletes a chat for its owner (or the operator; anyone without auth): its history, index
    /// record and waiting marks in the chat store, and this replica's retained runs of it (no
    /// longer attachable). [`RunError::ChatNotFound`] for a chat that does not exist or is not
    /// the caller's (the same answer: existence is not revealed); [`RunError::ChatBusy`] naming
    /// the run when one of the chat's runs is in flight, queued or waiting for a person, here or
    /// (clustered) on another replica. The chat's slot, and in a cluster its lock, are held
    /// while it is deleted, so no run can start in it meanwhile. Afterwards a query with the same
    /// id starts a new chat.
    ///
    /// Not deleted: the run records and frame streams another replica mirrored to Redis for the
    /// chat's finished runs, which expire on their own.
    pub async fn delete_chat(&self, chat_id: &str, principal: Option<&Principal>) -> Result<ChatDeleted, RunError> {
        let core = &self.core;
        let asked = chat_id;
        let chat_id = ids::canonical_uuid(chat_id).ok_or_else(|| RunError::invalid("chatId must be a valid UUID"))?;
        let not_found = || RunError::ChatNotFound { chat_id: asked.to_owned() };
        let (store, id) = (core.chats.clone(), chat_id.clone());
        let owner = tokio::task::spawn_blocking(move || store.chat_owner(&id))
            .await
            .map_err(RunError::memory)?
            .map_err(RunError::memory)?;
        // Another user's chat answers like one that does not exist, before anything says busy.
        let Some(owner) = owner.filter(|owner| may_access(principal, owner.as_ref())) else {
            return Err(not_found());
        };
        let (store, id) = (core.chats.clone(), chat_id.clone());
        hold_chat(core, &chat_id, "delete", true, move || store.delete_chat(&id)).await?.map_err(RunError::memory)?;
        let forgotten = core.tracker.forget_chat(&chat_id);
        let owner = owner.map(|o| o.sub);
        tracing::info!(chatId = %chat_id, owner = owner.as_deref().unwrap_or("-"), forgotten_runs = forgotten, "chat deleted");
        Ok(ChatDeleted { chat_id, deleted: true })
    }

    /// A run this replica holds, for a caller that may see it (the protocol façades continue a
    /// run they started: answers to its frontend tools come with the next request).
    pub fn local_run(&self, run_id: &str, principal: Option<&Principal>) -> Option<Arc<RunHandle>> {
        self.core.tracker.get(run_id).filter(|h| may_access(principal, h.owner.as_ref()))
    }

    /// The runs this replica holds (running, waiting, or ended within the retention window)
    /// that the caller may see.
    pub fn local_runs(&self, principal: Option<&Principal>) -> Vec<Arc<RunHandle>> {
        self.core.tracker.ids().iter().filter_map(|id| self.local_run(id, principal)).collect()
    }
}

/// Cancels a run this replica holds.
pub(crate) async fn interrupt_handle(handle: &RunHandle) -> Interrupted {
    let run_id = handle.run_id.clone();
    if !handle.cancel(CancelReason::Interrupted) {
        let status = handle.status();
        return Interrupted {
            accepted: false,
            status: status.as_str().into(),
            run_id,
            detail: format!("the run had already finished ({})", status.as_str()),
        };
    }
    let status = handle.wait_finished(INTERRUPT_WAIT).await;
    let (status, detail) = match status {
        RunStatus::Running => ("cancelling", "cancel requested; the run is still stopping"),
        RunStatus::Cancelled => ("cancelled", "the run was cancelled"),
        // It ended on its own between the request and the cancellation.
        other => (other.as_str(), "the run finished before it could be cancelled"),
    };
    tracing::info!(runId = %run_id, status, "interrupt");
    Interrupted { accepted: true, status: status.into(), run_id, detail: detail.into() }
}

/// Holds the chat for a change of the whole chat (deleting it, expiring it) and makes the
/// change, `change` (blocking, on a blocking thread), while no run can start in it: this
/// replica's slot of the chat, and in a cluster the chat's lock, are held meanwhile.
/// [`RunError::ChatBusy`] naming the run when one of the chat's runs is in flight, queued or
/// waiting for a person, here or (clustered) on another replica. `wait_finished`: a run that
/// has sent its terminal event but not yet freed the slot is waited for (a client that deletes
/// the moment it read `run.complete`), instead of answering busy.
pub(crate) async fn hold_chat<T: Send + 'static>(
    core: &Core,
    chat_id: &str,
    purpose: &str,
    wait_finished: bool,
    change: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunError> {
    let holder = format!("{purpose}-{}", ids::new_run_id());
    let _slot = match core.tracker.chats().try_acquire(chat_id, &holder) {
        Ok(slot) => slot,
        Err(busy)
            if wait_finished
                && core.tracker.get(&busy.run_id).is_some_and(|h| h.status().is_finished() && !h.is_waiting()) =>
        {
            tokio::time::timeout(SLOT_WAIT, core.tracker.chats().acquire(chat_id, &holder))
                .await
                .map_err(|_| RunError::ChatBusy { chat_id: chat_id.to_owned(), run_id: busy.run_id })?
        }
        Err(busy) => return Err(RunError::ChatBusy { chat_id: chat_id.to_owned(), run_id: busy.run_id }),
    };
    // A run queued for the slot, or one waiting for a person without holding it.
    if let Some(run) = live_run(core, chat_id) {
        return Err(RunError::ChatBusy { chat_id: chat_id.to_owned(), run_id: run.run_id.clone() });
    }
    match cluster::lock_chat(core, chat_id, &holder).await {
        Ok(()) => {}
        Err(ChatLock::Busy(run_id)) => return Err(RunError::ChatBusy { chat_id: chat_id.to_owned(), run_id }),
        Err(ChatLock::Unavailable(e)) => return Err(RunError::cluster(e)),
    }
    let changed = tokio::task::spawn_blocking(change).await.map_err(RunError::memory);
    cluster::unlock_chat(core, chat_id, &holder).await;
    changed
}

/// A run of the chat on this replica that is in flight, queued or waiting for a person.
pub(crate) fn live_run(core: &Core, chat_id: &str) -> Option<Arc<RunHandle>> {
    core.tracker
        .ids()
        .into_iter()
        .filter_map(|id| core.tracker.get(&id))
        .find(|h| h.chat_id == chat_id && (!h.status().is_finished() || h.is_waiting()))
}
