//! Durable waiting: runs that wait for a person survive a restart of agw.
//!
//! While a run waits for a frontend tool's submit, a tool approval or the user's `continue` to a
//! paused backend call (`docs/pausing-tools.md`), its chat's history ends
//! with an `awaiting` line for it and the chat store marks the run (`RunSink` writes both when
//! the wait begins). At start, [`restore_waiting_runs`] finds the marked runs whose last line is
//! still `awaiting` and registers each again under its id: `GET /api/ap/attach` shows the wait
//! (`awaiting.ask`, numbered after the last event the run streamed), `POST /api/ap/submit`
//! answers it through the same waiters as a live run, `POST /api/ap/interrupt` cancels it, and
//! the submit timeout counts from when the wait began. Once answered (or timed out) the run
//! continues in this process from its history ([`agw_modes::runtime::resume`]): its next model
//! turn runs here, its events go on from the same seq, its history is written as if it had
//! never stopped. `docs/run-lifecycle.md` (durable waiting) says what the client sees.

use std::sync::Arc;
use std::time::Duration;

use agw_memory::WaitingRun;
use agw_modes::runtime::{self, DeltaSink, Resume, RunContext, WaitPoint};
use agw_protocol::event::EventPayload;
use agw_protocol::history::{AwaitingCall, StreamedAs};
use agw_protocol::{AgentDelta, Assembler, ErrorCode, RunErrorInfo, SystemClock};
use agw_tools::ToolKind;
use tracing::Instrument;

use crate::drive::{Ended, Entry, ForgetAnswers, LiveRun, RunGuards, end_run};
use crate::principal::anonymous;
use crate::service::{Core, RunService};
use crate::sink::{Persistence, RunSink, now_ms};
use crate::{ChatSlot, DisconnectPolicy, RunHandle};

impl RunService {
    /// Registers every run that was waiting for a person when the server last stopped, and
    /// starts waiting for its answer again. Returns how many were restored. Marks of runs that
    /// no longer wait are removed; a chat that cannot be read is logged and skipped. Call it
    /// after joining the cluster (if any) and before serving requests.
    pub async fn restore_waiting_runs(&self) -> usize {
        restore_waiting_runs(self).await
    }
}

async fn restore_waiting_runs(service: &RunService) -> usize {
    let core = &service.core;
    if !core.settings.memory {
        return 0;
    }
    if core.cluster.get().is_some() {
        // Replicas share the chats: a waiting run is adopted by the replica its answer
        // reaches (`crate::cluster::adopt`), never by every replica that starts.
        return 0;
    }
    let store = core.chats.clone();
    let found = tokio::task::spawn_blocking(move || {
        let marked = store.waiting_runs()?;
        let mut waiting = Vec::new();
        for (run_id, chat_id) in marked {
            match store.waiting_run(&chat_id, &run_id) {
                Ok(Some(run)) => {
                    let owner = store.chat_owner(&chat_id).ok().flatten().flatten();
                    waiting.push((run, owner));
                }
                Ok(None) => {
                    tracing::info!(runId = %run_id, chatId = %chat_id, "a marked run no longer waits; mark removed");
                    let _ = store.clear_waiting(&run_id);
                }
                Err(e) => tracing::warn!(runId = %run_id, chatId = %chat_id, error = %e, "waiting run not restored"),
            }
        }
        Ok::<_, agw_memory::MemoryError>(waiting)
    })
    .await;
    let Some(waiting) = listed(found, "waiting runs") else { return 0 };
    let mut restored = 0;
    for (run, owner) in waiting {
        let line = &run.awaiting;
        let (run_id, chat_id) = (line.run_id.clone(), line.chat_id.clone());
        if core.tracker.get(&run_id).is_some() {
            continue;
        }
        let Ok(slot) = core.tracker.chats().try_acquire(&chat_id, &run_id) else {
            tracing::warn!(runId = %run_id, chatId = %chat_id, "the chat is busy; waiting run not restored");
            continue;
        };
        let agent_key = line.query.agent_key.clone().unwrap_or_default();
        // Nobody watches a restored run when it comes back; it waits for its answer however
        // long the submit timeout allows.
        let handle = core.tracker.register(&run_id, &chat_id, &agent_key, owner, DisconnectPolicy::Continue, false);
        spawn_wait_again(service, handle, slot, run, None);
        restored += 1;
    }
    if restored > 0 {
        tracing::info!(restored, "runs waiting for a person were restored");
    }
    restored
}

/// What a blocking listing of marked runs (`what`) found; `None` (logged) when it failed.
pub(crate) fn listed<T>(
    found: Result<Result<Vec<T>, agw_memory::MemoryError>, tokio::task::JoinError>,
    what: &str,
) -> Option<Vec<T>> {
    match found {
        Ok(Ok(found)) => Some(found),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "{what} could not be listed");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "{what} could not be listed");
            None
        }
    }
}

/// Starts the task of a registered run that waits again (restored at start, or adopted from a
/// lost replica). `ready` is told once the run's waiter is registered.
pub(crate) fn spawn_wait_again(
    service: &RunService,
    handle: Arc<RunHandle>,
    slot: ChatSlot,
    run: WaitingRun,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
) {
    let span =
        tracing::info_span!("run", runId = %handle.run_id, chatId = %handle.chat_id, agentKey = %handle.agent_key);
    tokio::spawn(wait_again(service.clone(), handle, slot, run, ready).instrument(span));
}

/// The restored run's task: show the wait, wait for the answer (or the timeout, or a cancel),
/// then continue the run.
async fn wait_again(
    service: RunService,
    handle: Arc<RunHandle>,
    slot: ChatSlot,
    run: WaitingRun,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
) {
    let core: &Core = &service.core;
    let WaitingRun { awaiting, mut conversation, steps, pending, context, blocks } = run;
    // The run's message takes its images and files back.
    agw_memory::restore_attachments(&mut conversation, &awaiting.query);
    let (run_id, chat_id) = (handle.run_id.clone(), handle.chat_id.clone());
    let tools = core.catalogs.tools.load();
    // How the client had been shown each call; a call withheld until its approval is neither.
    let streamed_as = |call: &AwaitingCall| {
        call.streamed_as.unwrap_or(match tools.kind_of(&call.name.trim().to_lowercase()) {
            ToolKind::Action => StreamedAs::Action,
            _ => StreamedAs::Tool,
        })
    };
    let shown = |kind: StreamedAs| -> Vec<String> {
        awaiting.calls.iter().filter(|c| streamed_as(c) == kind).map(|c| c.id.clone()).collect()
    };
    let (ended_tools, open_actions) = (shown(StreamedAs::Tool), shown(StreamedAs::Action));
    let assembler = Assembler::resumed(
        &run_id,
        &chat_id,
        Box::new(SystemClock),
        awaiting.last_seq + 1,
        &ended_tools,
        &open_actions,
    )
    // New blocks never reuse an id the client was shown before the restart.
    .with_block_counts(blocks)
    // Usage from before the restart is not carried over (docs/observability.md).
    .with_prices(core.settings.prices.clone());
    let recorder = core.chats.resumed_recorder(&awaiting);
    let persistence = Persistence { store: core.chats.clone(), chat_id: chat_id.clone(), recorder };
    // Its run mark (crash recovery) is still in the store from before the wait: the run goes
    // on resumable and removes it when it ends.
    let mark = agw_protocol::history::RunMark {
        query: awaiting.query.clone(),
        system: awaiting.system.clone(),
        last_seq: awaiting.last_seq,
        ..agw_protocol::history::RunMark::new(&chat_id, &run_id, awaiting.updated_at)
    };
    let entry = agw_memory::LedgerEntry {
        last_seq: awaiting.last_seq,
        durable_seq: awaiting.last_seq,
        shown: blocks,
        durable: blocks,
    };
    let mut sink =
        RunSink::new(assembler, handle.clone(), Some(persistence)).recoverable(core.recovering_from(mark, entry));
    sink.adopt_mark();

    // Registered before the wait is shown, so an early submit is matched.
    let remaining = Duration::from_millis(u64::try_from(awaiting.timeout_at - now_ms()).unwrap_or(0));
    let mut ask = awaiting.ask.clone();
    ask.timeout = u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX).max(1);
    let waiter = core.submits.register(&run_id, &awaiting.awaiting_id);
    if let Some(ready) = ready {
        let _ = ready.send(());
    }
    // Shown again, and recorded again: a second restart numbers its events after this one.
    let shown = sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask.clone()))).await;
    let (Some(waiter), Ok(())) = (waiter, shown) else {
        // Neither should happen (one task per restored run); end it rather than leave it hanging.
        let _guard = core.tracker.enter_run(&handle);
        let failed = fail(format!("the wait for {} could not be restored", awaiting.awaiting_id));
        end_run(&mut sink, Ended::Mode(runtime::RunOutcome::Failed(failed)), &handle.steers).await;
        return;
    };
    let wait = WaitPoint {
        ask,
        timeout: remaining,
        resume_at: awaiting.resume_at.clone(),
        calls: awaiting.calls.clone(),
        results: awaiting.results.clone(),
        continued: awaiting.continued,
    };
    let _ = sink.waiting(&wait).await;
    tracing::info!(awaitingId = %awaiting.awaiting_id, remaining_ms = remaining.as_millis() as u64, "waiting again");

    let answer = tokio::select! {
        answer = waiter.wait(remaining) => answer,
        reason = handle.cancelled() => {
            let _guard = core.tracker.enter_run(&handle);
            end_run(&mut sink, Ended::Cancelled(reason), &handle.steers).await;
            return;
        }
        // Still waiting when this server stops: the next start restores it again.
        () = core.tracker.stopped() => return,
    };
    sink.wait_over();
    // From here the run is in flight again: counted, and finished (then retained) on return.
    let guard = core.tracker.enter_run(&handle);
    let answers = ForgetAnswers(core.submits.clone(), run_id.clone());
    if answer.is_none() {
        tracing::info!(awaitingId = %awaiting.awaiting_id, "the wait timed out");
    }
    let Ok(agent) = core.agent(awaiting.query.agent_key.as_deref()) else {
        let message = format!(
            "agent {} is no longer loaded; the run cannot continue",
            awaiting.query.agent_key.as_deref().unwrap_or("(default)")
        );
        end_run(&mut sink, Ended::Mode(runtime::RunOutcome::Failed(fail(message))), &handle.steers).await;
        return;
    };
    let agent = crate::output::continued_agent(agent, &awaiting.query);
    // An agent the run was handed over to waited: it goes on, from its own part of the run.
    let (conversation, steps, handoff) =
        crate::continued::continued_part(core, &mut sink, conversation, steps, &pending).await;
    let steers = handle.steers.clone();
    // Not admitted again (it was, before the wait), but every model call from here on is
    // checked against and counted in its owner's and agent's daily quotas like any run's.
    let owner = handle.owner.clone().unwrap_or_else(anonymous);
    let quota = core.quotas.continue_run(core.cluster(), &owner, &agent.key, &run_id);
    let ctx = RunContext {
        run_id,
        chat_id,
        agent,
        user_message: awaiting.query.message.clone().unwrap_or_default(),
        user_attachments: crate::attachments::of_stored(&awaiting.query),
        history: context.history,
        history_runs: context.history_runs,
        initial_plan: context.plan,
        services: core.run_services(Vec::new()),
        steers: steers.clone(),
        remembered_approvals: context.remembered_approvals,
        quota: quota.gate(),
        nesting: Default::default(),
        handed_from: None,
    };
    let resume = Resume {
        wait: awaiting.kind(),
        status: awaiting.ask.status.as_deref().cloned(),
        conversation,
        resume_at: awaiting.resume_at,
        calls: awaiting.calls,
        results: awaiting.results,
        awaiting_id: awaiting.awaiting_id,
        answer,
        handoff,
        steps,
        pending,
    };
    tracing::info!("run continues after the wait");
    let live = Box::new(LiveRun {
        ctx,
        entry: Entry::Resume(Box::new(resume)),
        sink,
        steers,
        _guards: RunGuards { _slot: slot, _answers: answers, _guard: guard },
        handle,
        quota,
    });
    Box::pin(live.run(core)).await;
}

fn fail(message: String) -> RunErrorInfo {
    RunErrorInfo::new(ErrorCode::Internal, message, false)
}
