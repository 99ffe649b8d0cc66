//! Crash recovery: runs that were in flight when the server last stopped are resumed from
//! their last completed step (`docs/run-lifecycle.md`).
//!
//! Every recorded run keeps a *run mark* in the chat store while it is in flight (`RunSink`
//! writes it at bootstrap and before each tool call with effects, and removes it when the run
//! ends) and notes its stream position in this process's *seq ledger* at every publish. At
//! start, [`RunService::recover_runs`] reads both: each marked run is registered again under
//! its id and continued here — its events numbered on from the last seq the stopped process
//! gave (`run.resume` first, naming what is superseded), its history written as if it had never
//! stopped. What completed is not done again: written steps are the conversation, a tool batch
//! goes on from its checkpoint, and a call that was running then runs again only if its tool
//! is idempotent.

use std::collections::HashMap;
use std::sync::Arc;

use agw_memory::{FoundRun, InFlightRun, LedgerEntry, SeqLedger};
use agw_modes::runtime::{self, RecoverAt, Recovery, RunContext};
use agw_protocol::history::{Stage, StreamedAs};
use agw_protocol::{Assembler, BlockCounts, ErrorCode, RunErrorInfo, SystemClock};
use tracing::Instrument;

use crate::drive::{Ended, Entry, ForgetAnswers, LiveRun, RunGuards, end_run};
use crate::principal::anonymous;
use crate::service::{Core, RunService};
use crate::sink::{Persistence, Recovering, RunSink, now_ms, now_us};
use crate::{ChatSlot, DisconnectPolicy, RunHandle};

/// The seq ledger's file, beside the run marks in the chat memory directory.
const LEDGER_FILE: &str = "_waiting/runs.ledger";

/// Counter: runs found in flight at start, by `outcome` (`resumed`, `exhausted`, `ended`,
/// `skipped`).
pub const RECOVERED_RUNS: &str = "agw_runs_recovered_total";

/// Resumes this process's own runs in flight (single node), see [`RunService::recover_runs`].
pub(crate) async fn recover_local(service: &RunService) -> usize {
    let core = &service.core;
    let settings = core.settings.recovery;
    if !core.recovers() {
        if settings.enabled && core.settings.memory && core.cluster.get().is_some() {
            tracing::warn!(
                "crash recovery is off: the replicas of a cluster keep chats in files, where no other replica finds a lost one's runs (use PostgreSQL)"
            );
        }
        return 0;
    }
    let path = core.chats.config().dir.join(LEDGER_FILE);
    let noted = match tokio::task::spawn_blocking(move || SeqLedger::open(&path)).await {
        Ok(Ok((ledger, found))) => {
            let _ = core.ledger.set(ledger);
            found
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "seq ledger unusable; resumed runs number on from their marks");
            HashMap::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "seq ledger unusable; resumed runs number on from their marks");
            HashMap::new()
        }
    };
    let store = core.chats.clone();
    let listed = tokio::task::spawn_blocking(move || {
        let marks = store.running_runs()?;
        let mut runs = Vec::new();
        for mark in marks {
            let (run_id, chat_id) = (mark.run_id.clone(), mark.chat_id.clone());
            if !store.chat_exists(&chat_id).unwrap_or(true) {
                tracing::info!(runId = %run_id, chatId = %chat_id, "the chat of a marked run is gone; mark removed");
                let _ = store.clear_running(&run_id);
                continue;
            }
            match store.found_run(mark) {
                Ok(found) => runs.push((found, store.chat_owner(&chat_id).ok().flatten().flatten(), run_id)),
                Err(e) => tracing::warn!(runId = %run_id, chatId = %chat_id, error = %e, "run in flight not resumed"),
            }
        }
        Ok::<_, agw_memory::MemoryError>(runs)
    })
    .await;
    let Some(runs) = crate::durable::listed(listed, "runs in flight") else { return 0 };
    let mut resumed = 0;
    for (found, owner, run_id) in runs {
        let run = match found {
            FoundRun::InFlight(run) => run,
            FoundRun::Waiting => {
                // Durable waiting restores it; its run mark goes when it ends.
                count("skipped");
                continue;
            }
            FoundRun::Ended => {
                tracing::info!(runId = %run_id, "a marked run had ended; mark removed");
                let store = core.chats.clone();
                let _ = tokio::task::spawn_blocking(move || store.clear_running(&run_id)).await;
                count("ended");
                continue;
            }
        };
        let chat_id = run.mark.chat_id.clone();
        if core.tracker.get(&run_id).is_some() {
            continue;
        }
        let Ok(slot) = core.tracker.chats().try_acquire(&chat_id, &run_id) else {
            tracing::warn!(runId = %run_id, chatId = %chat_id, "the chat is busy; run in flight not resumed");
            continue;
        };
        let agent_key = run.mark.query.agent_key.clone().unwrap_or_default();
        let handle = core.tracker.register(&run_id, &chat_id, &agent_key, owner, DisconnectPolicy::Continue, false);
        let entry = numbering(noted.get(&run_id).copied(), &run);
        let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %agent_key);
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        tokio::spawn(resume_run(service.clone(), handle, slot, run, entry, ready_tx).instrument(span));
        // Registered and numbered before the next: the ledger's old slots are freed below.
        let _ = ready.await;
        resumed += 1;
    }
    if let Some(ledger) = core.ledger.get() {
        ledger.release_found();
    }
    if resumed > 0 {
        tracing::info!(resumed, "runs in flight when the server stopped were resumed");
    }
    resumed
}

pub(crate) fn count(outcome: &'static str) {
    metrics::counter!(RECOVERED_RUNS, "outcome" => outcome).increment(1);
}

/// The resumed run's task: its new attempt on record, `run.resume`, then the mode from where
/// it stopped. `ready` is told once the run has its ledger slot.
pub(crate) async fn resume_run(
    service: RunService,
    handle: Arc<RunHandle>,
    slot: ChatSlot,
    run: Box<InFlightRun>,
    entry: LedgerEntry,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let core: &Core = &service.core;
    let settings = core.settings.recovery;
    let (run_id, chat_id) = (handle.run_id.clone(), handle.chat_id.clone());
    let mut mark = run.mark.clone();
    mark.node = core.node_id().map(str::to_owned);
    mark.attempts += 1;
    mark.updated_at = now_ms();
    mark.next_revision(now_us());
    let attempt = mark.attempts;
    let store = core.chats.clone();
    let rewritten = {
        let mark = mark.clone();
        tokio::task::spawn_blocking(move || store.mark_running(&mark)).await
    };
    if !matches!(rewritten, Ok(Ok(()))) {
        tracing::warn!("the resumed run's new attempt is not on record");
    }

    let batch = run.batch.as_ref();
    // The batch's calls were shown as tools (ended) or actions (open) before it ran.
    let shown = |kind: StreamedAs| -> Vec<String> {
        batch
            .into_iter()
            .flat_map(|b| b.calls.iter())
            .filter(|c| c.streamed_as.unwrap_or(StreamedAs::Tool) == kind)
            .map(|c| c.id.clone())
            .collect()
    };
    let assembler = Assembler::resumed(
        &run_id,
        &chat_id,
        Box::new(SystemClock),
        entry.last_seq + 1,
        &shown(StreamedAs::Tool),
        &shown(StreamedAs::Action),
    )
    .with_block_counts(entry.shown)
    .with_prices(core.settings.prices.clone());
    let recorder = core.chats.recovered_recorder(&run);
    let persistence = Persistence { store: core.chats.clone(), chat_id: chat_id.clone(), recorder };
    let recovering = Recovering::resumed(core.ledger.get(), mark.clone(), entry, true);
    let mut sink = RunSink::new(assembler, handle.clone(), Some(persistence)).recoverable(Some(recovering));
    handle.resumed_after(entry.durable_seq, entry.last_seq + 1);
    let _ = ready.send(());
    let guard = core.tracker.enter_run(&handle);
    // Child tasks that kept checkpoints and had not ended start again in the stream; without
    // checkpoints, a running `agent_invoke` call's tasks all do.
    let mut superseded: Vec<String> = run.tasks.iter().filter(|t| !t.ended).map(|t| t.task_id.clone()).collect();
    if run.tasks.is_empty() {
        superseded = superseded_tasks(batch);
    }
    sink.resumed(attempt, &entry, entry.shown, superseded).await;
    tracing::info!(attempt, lastSeq = entry.last_seq, "run resumed after the server stopped");

    let fail = |message: String| Ended::Mode(runtime::RunOutcome::Failed(unrecoverable(message)));
    let age_ms = now_ms().saturating_sub(mark.started_at);
    if attempt > settings.max_attempts {
        let message = format!(
            "the server stopped {} times while this run was in flight (agw.recovery.max-attempts={})",
            attempt, settings.max_attempts
        );
        count("exhausted");
        end_run(&mut sink, fail(message), &handle.steers).await;
        return;
    }
    if u128::try_from(age_ms).unwrap_or(0) > settings.max_age.as_millis() {
        let message = format!("the run started {} s ago, longer than agw.recovery.max-age allows", age_ms / 1000);
        count("exhausted");
        end_run(&mut sink, fail(message), &handle.steers).await;
        return;
    }
    let Ok(agent) = core.agent(mark.query.agent_key.as_deref()) else {
        let message = format!(
            "agent {} is no longer loaded; the run cannot be resumed",
            mark.query.agent_key.as_deref().unwrap_or("(default)")
        );
        count("exhausted");
        end_run(&mut sink, fail(message), &handle.steers).await;
        return;
    };
    count("resumed");
    let agent = crate::output::continued_agent(agent, &mark.query);
    // The MCP servers the agent uses start now, as for a new run.
    if let Some(sources) = &core.tool_sources {
        sources.prepare(&agent, &core.catalogs.tools).await;
    }
    // The checkpoints of child tasks: a parallel plan round's, or the running call's sub-agents'.
    let of_call = run.mark.round.as_ref().is_some_and(|r| r.call_id.is_some());
    let InFlightRun { mut conversation, context, steps, pending, batch, plan, tasks, .. } = *run;
    // The run's message takes its images and files back.
    agw_memory::restore_attachments(&mut conversation, &mark.query);
    let (round, sub_agents) = if of_call { (Vec::new(), tasks) } else { (tasks, Vec::new()) };
    let (conversation, steps, handoff) =
        crate::continued::continued_part(core, &mut sink, conversation, steps, &pending).await;
    let at = match batch {
        Some(b) => RecoverAt::Batch {
            resume_at: b.resume_at,
            calls: b.calls,
            results: b.results,
            running: b.running,
            done: b.done,
        },
        None => RecoverAt::NextTurn { steps_done: react_steps(&steps) },
    };
    let owner = handle.owner.clone().unwrap_or_else(anonymous);
    let quota = core.quotas.continue_run(core.cluster(), &owner, &agent.key, &run_id);
    let steers = handle.steers.clone();
    let ctx = RunContext {
        user_message: mark.query.message.clone().unwrap_or_default(),
        user_attachments: crate::attachments::of_stored(&mark.query),
        history: context.history,
        history_runs: context.history_runs,
        // The plan as the run's own steps last recorded it, else the chat's.
        initial_plan: plan.or(context.plan),
        remembered_approvals: context.remembered_approvals,
        steers: steers.clone(),
        quota: quota.gate(),
        ..RunContext::new(run_id.clone(), chat_id, agent, String::new(), core.run_services(Vec::new()))
    };
    let answers = ForgetAnswers(core.submits.clone(), run_id);
    let live = Box::new(LiveRun {
        ctx,
        entry: Entry::Recover(Box::new(Recovery { conversation, at, steps, pending, handoff, round, sub_agents })),
        sink,
        steers,
        _guards: RunGuards { _slot: slot, _answers: answers, _guard: guard },
        handle,
        quota,
    });
    Box::pin(live.run(core)).await;
}

/// Where a run resumed on the node that ran it numbers on: after the last seq its ledger noted
/// (without a note — lost or unusable — after its mark), never below what its history names.
fn numbering(noted: Option<LedgerEntry>, run: &InFlightRun) -> LedgerEntry {
    let from_mark = LedgerEntry {
        last_seq: run.mark.last_seq,
        durable_seq: run.mark.last_seq,
        shown: run.blocks,
        durable: run.blocks,
    };
    let mut entry = noted.unwrap_or(from_mark);
    entry.last_seq = entry.last_seq.max(run.mark.last_seq);
    covering_history(entry, run)
}

/// `entry` with block counts never below those the run's history names.
pub(crate) fn covering_history(mut entry: LedgerEntry, run: &InFlightRun) -> LedgerEntry {
    entry.shown = max_counts(entry.shown, run.blocks);
    entry.durable = max_counts(entry.durable, run.blocks);
    entry
}

/// The child tasks of the `agent_invoke` call that was running, when they kept no checkpoints
/// (a mark written before they did): none of them was recorded (a call's children are written
/// when the last one ends), so they are superseded whole. Their ids derive from the call
/// ([`agw_protocol::ids::task_id_for_call`]).
fn superseded_tasks(batch: Option<&agw_protocol::history::BatchCheckpoint>) -> Vec<String> {
    let Some(running) = batch.and_then(|b| {
        let id = b.running.as_deref()?;
        b.calls.iter().find(|c| c.id == id && c.name == agw_modes::runtime::AGENT_INVOKE_TOOL)
    }) else {
        return Vec::new();
    };
    let tasks = serde_json::from_str::<serde_json::Value>(&running.arguments)
        .ok()
        .and_then(|args| args.get("tasks").and_then(serde_json::Value::as_array).map(Vec::len))
        .unwrap_or(0);
    (0..tasks).map(|index| agw_protocol::ids::task_id_for_call(&running.id, index)).collect()
}

/// REACT steps a run wrote whole.
fn react_steps(steps: &[agw_protocol::history::RecoveredStep]) -> u32 {
    steps.iter().filter(|s| s.stage == Stage::React.as_str()).count() as u32
}

fn max_counts(a: BlockCounts, b: BlockCounts) -> BlockCounts {
    BlockCounts { reasoning: a.reasoning.max(b.reasoning), content: a.content.max(b.content) }
}

fn unrecoverable(message: String) -> RunErrorInfo {
    RunErrorInfo::new(ErrorCode::RecoveryExhausted, message, false)
}
