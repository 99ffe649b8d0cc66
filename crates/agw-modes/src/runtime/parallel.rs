//! PLAN_EXECUTE with `planExecute.parallel` (docs/multi-agent.md): the tasks whose `dependsOn`
//! tasks have ended run at once, up to `parallel` of them, each in its own executor context
//! cloned from the shared one; their messages are merged back in plan order, the planner looks
//! at the round's results (and may add, update or cancel tasks), and the next round starts.
//!
//! A round of one task runs exactly like the sequential mode (`task.start` … `task.complete`);
//! a round of several streams each task as a child task ([`super::children`]): their events
//! interleave, each tagged with its `taskId`. Each task works on a fork of the run's state
//! ([`RunState::fork`]): its own call ids and usage, a copy of the plan; the copies are joined
//! back after the round, in plan order, and the merged plan is shown once.

use agw_llm::ChatMessage;
use agw_protocol::history::{RecoveredStep, RecoveredTask};
use agw_protocol::{AgentDelta, ChildEnd, ChildTask, PlanTask, TaskStatus};

use super::calls::StreamedCall;
use super::children::run_children;
use super::execute::{Answers, execute_batch};
use super::plan::{PLAN_ADD_TASKS, PLAN_UPDATE_TASK};
use super::plan_execute::{TaskLoop, model_for, plan_system_prompt, push_text};
use super::tools::StageToolSet;
use super::turn::{TurnSpec, model_turn};
use super::{DeltaSink, RunContext, RunFailure, RunState, TaskPoint, prompt};
use crate::definition::{ResolvedModel, Stage, StageKind};

/// What the planner is asked after a round.
pub const REPLAN_PROMPT: &str = "A round of tasks has ended; their results are above. The plan now:\n{{task_list}}\n\
     If the results call for it, add tasks with _plan_add_tasks_, or update or cancel open tasks with \
     _plan_update_task_. Otherwise answer in one short sentence and call no tool.";

/// The planner's turn after each round: the plan stage's model and prompt, both plan tools.
pub(super) struct Replan {
    model: ResolvedModel,
    system: prompt::StagePrompt,
    tools: StageToolSet,
}

impl Replan {
    pub(super) fn new(ctx: &RunContext, plan: &Stage, plan_tools: &StageToolSet, execute_tools: &StageToolSet) -> Self {
        Replan {
            model: model_for(ctx, StageKind::Plan),
            system: plan_system_prompt(ctx, plan, plan_tools, execute_tools),
            tools: plan_tools.only(PLAN_ADD_TASKS).with(&execute_tools.only(PLAN_UPDATE_TASK)),
        }
    }

    /// One planner turn over the execute context; its calls (plan tools only) and their
    /// results join the context, so later tasks and the summary see them.
    async fn turn<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        round: u32,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<(), RunFailure> {
        sink.emit(AgentDelta::StageMarker(format!("plan-replan-{round}"))).await?;
        let mut messages = execute.clone();
        let prompt = REPLAN_PROMPT.replace("{{task_list}}", &state.plan.task_list_text());
        messages.push(ChatMessage::user(prompt));
        let name = format!("agent-plan-replan-{round}");
        let spec = TurnSpec {
            stage_name: &name,
            model: &self.model,
            system_prompt: &self.system,
            messages: &mut messages,
            tools: &self.tools,
            tool_choice: Some(agw_llm::ToolChoice::Auto),
            emit_reasoning: self.model.reasoning.enabled,
            answer: false,
        };
        let out = model_turn(ctx, spec, state, sink).await?;
        execute.extend(out.steers.iter().cloned());
        if out.calls.is_empty() {
            return Ok(());
        }
        push_text(execute, &out);
        execute_batch(ctx, &self.tools, &out.calls, Answers::Live(out.frontend_waiters), execute, state, sink).await?;
        Ok(())
    }
}

/// The pieces of the task loop with rounds: the tasks, the planner after each round, and the
/// bounds (`parallel` tasks at once, `max_steps` tasks run).
pub(super) struct Rounds<'a> {
    pub tasks: &'a TaskLoop<'a>,
    pub replan: &'a Replan,
    pub parallel: u32,
    pub max_steps: u32,
}

/// The task loop with up to `parallel` tasks at once, then the planner after every round;
/// `max_steps` bounds the tasks run, as in the sequential loop. `step` tasks ran and `round`
/// rounds ended before (a resumed run).
pub(super) async fn run<S: DeltaSink>(
    ctx: &RunContext,
    rounds: &Rounds<'_>,
    mut step: u32,
    mut round: u32,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let Rounds { tasks, replan, parallel, max_steps } = *rounds;
    while step < max_steps {
        let Some(first_open) = state.plan.first_open() else {
            break;
        };
        let mut batch = state.plan.ready();
        if batch.is_empty() {
            // Every open task waits on another open one: run them in plan order.
            batch.push(first_open);
        }
        batch.truncate(parallel.min(max_steps - step).max(1) as usize);
        round += 1;
        if let [index] = batch[..] {
            step += 1;
            tasks.one(ctx, step, index, execute, state, sink).await?;
        } else {
            let ran = parallel_round(ctx, tasks, step, &batch, &[], execute, state, sink).await;
            step += batch.len() as u32;
            ran?;
        }
        replan.turn(ctx, round, execute, state, sink).await?;
    }
    Ok(())
}

/// A round of one task that was inside its tool batch when its process stopped: the task's
/// rounds so far and the batch.
pub(super) struct InTask<'a> {
    pub pending: Vec<ChatMessage>,
    pub batch: Option<(&'a [StreamedCall], Answers)>,
}

/// The task a round of one runs: the first ready task, else the first open one.
fn single_task(plan: &super::plan::PlanState) -> Option<usize> {
    plan.ready().first().copied().or_else(|| plan.first_open())
}

/// Where a plan with rounds stopped (crash recovery, [`recover`]).
pub(super) struct Stopped<'a> {
    /// Its step lines after the plan's.
    pub written: &'a [RecoveredStep],
    /// A round of one task that was inside its tool batch.
    pub current: Option<InTask<'a>>,
    /// A round of several tasks that was running (not on record until it ended), each task as
    /// far as it got.
    pub round: &'a [RecoveredTask],
}

/// A plan with rounds resumed after its process stopped (crash recovery). `written`: its step
/// lines after the plan's — each task of a round (its `taskId` set; the round's last carries the
/// merged plan), a round of one task as the run's own `execute` step, each planner turn after a
/// round as a `plan` step. The execute conversation is rebuilt from them as the rounds built it
/// (each task's prompt rendered with the plan its round began with). A round of several tasks
/// that was running goes on from its checkpoints (`round`): its ended tasks stand, the others go
/// on from their last completed step; a round of one task that was inside its tool batch
/// (`current`: its rounds so far and the batch) goes on there; a round whose planner turn was
/// not written gets it now; then the loop goes on.
pub(super) async fn recover<S: DeltaSink>(
    ctx: &RunContext,
    rounds: &Rounds<'_>,
    stopped: Stopped<'_>,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let Stopped { written, current, round: running } = stopped;
    let (mut step, mut round, mut replan_pending) = (0u32, 0u32, false);
    for line in written {
        if line.stage == "plan" {
            // The planner's turn after a round: its plan-tool calls and results joined the
            // context; an answer without calls did not.
            round += 1;
            replan_pending = false;
            let called = line
                .messages
                .iter()
                .any(|m| matches!(m, ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty()));
            if called {
                execute.extend(line.messages.iter().cloned());
            }
        } else if line.stage == "execute" {
            let index = match &line.task_id {
                Some(id) => state.plan.tasks.iter().position(|t| &t.task_id == id),
                None => single_task(&state.plan),
            };
            if let Some(index) = index {
                let task = state.plan.tasks[index].clone();
                execute.push(ChatMessage::user(rounds.tasks.prompt(&state.plan, &task)));
            }
            execute.extend(line.messages.iter().cloned());
            step += 1;
            replan_pending = true;
        }
        if let Some(snapshot) = &line.plan {
            state.plan = super::plan::PlanState::restored(snapshot, &ctx.chat_id);
        }
    }
    let batch: Vec<usize> =
        running.iter().filter_map(|t| state.plan.tasks.iter().position(|p| p.task_id == t.task_id)).collect();
    if !batch.is_empty() {
        round += 1;
        let ran = parallel_round(ctx, rounds.tasks, step, &batch, running, execute, state, sink).await;
        step += batch.len() as u32;
        ran?;
        replan_pending = true;
    } else if let Some(InTask { pending, batch }) = current
        && let Some(index) = single_task(&state.plan).filter(|_| step < rounds.max_steps)
    {
        step += 1;
        let task = state.plan.tasks[index].clone();
        execute.push(ChatMessage::user(rounds.tasks.prompt(&state.plan, &task)));
        execute.extend(pending);
        rounds.tasks.resume(ctx, step, index, batch, execute, state, sink).await?;
        replan_pending = true;
    }
    if replan_pending {
        round += 1;
        rounds.replan.turn(ctx, round, execute, state, sink).await?;
    }
    run(ctx, rounds, step, round, execute, state, sink).await
}

/// One round of several tasks at once (see the module docs). The first failure in plan order
/// ends the run, once every task of the round has ended. `resumed`: the round began in a process
/// that stopped (crash recovery) — its ended tasks do not run again, the others go on from their
/// checkpoints.
#[expect(clippy::too_many_arguments, reason = "the round's tasks, where it stopped and the run state")]
async fn parallel_round<S: DeltaSink>(
    ctx: &RunContext,
    tasks: &TaskLoop<'_>,
    step: u32,
    batch: &[usize],
    resumed: &[RecoveredTask],
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let chosen: Vec<PlanTask> = batch.iter().map(|&i| state.plan.tasks[i].clone()).collect();
    let found = |task: &PlanTask| resumed.iter().find(|r| r.task_id == task.task_id);
    if resumed.is_empty() {
        // The run's own step of this round stays empty: each task is recorded as its own step.
        sink.emit(AgentDelta::StageMarker(format!("execute-task-{}", step + 1))).await?;
        if sink.checkpoints() {
            let tasks = chosen.iter().map(|t| t.task_id.clone()).collect();
            sink.task_checkpoint(TaskPoint::Round { tasks, call: None }).await;
        }
    }
    for task in chosen.iter().filter(|t| !found(t).is_some_and(|r| r.ended)) {
        let child = ChildTask {
            task_id: task.task_id.clone(),
            task_name: None,
            description: Some(task.description.clone()),
            sub_agent_key: None,
            tool_id: None,
        };
        sink.emit(AgentDelta::ChildStart(child)).await?;
    }
    let forked_at = state.budget.clone();
    let base = execute.len();
    let mut results: Vec<Option<TaskResult>> = Vec::with_capacity(chosen.len());
    let mut children = Vec::new();
    for (offset, task) in chosen.iter().enumerate() {
        let mut context = execute.clone();
        context.push(ChatMessage::user(tasks.prompt(&state.plan, task)));
        let mut fork = state.fork(ctx, &format!("{}_", task.task_id));
        let mut calls = Vec::new();
        let mut answers = None;
        if let Some(before) = found(task) {
            context.extend(before.messages.iter().cloned());
            if let Some(own) = &before.task
                && let Some(mine) = fork.plan.tasks.iter_mut().find(|t| t.task_id == own.task_id)
            {
                mine.clone_from(own);
            }
            if let Some(b) = before.batch.as_ref().filter(|b| !b.done) {
                calls = b.calls.iter().map(StreamedCall::restored).collect();
                answers = Some(Answers::after_crash(b.results.clone(), b.running.clone(), Vec::new()));
            }
            super::restore_calls(ctx, &mut fork, &before.messages, &calls);
            if before.ended {
                // Ended open, it failed (the run ended with the round): it fails again.
                let end = settled(&fork, &task.task_id).unwrap_or_else(|| {
                    let message = format!("task [{}] was not updated to completed/canceled/failed", task.task_id);
                    let error = agw_protocol::TaskError::new("task_execution_error", &message);
                    (ChildEnd::Fail(error), Some(RunFailure::PlanStalled(message)))
                });
                results.push(Some((context, fork, Ok(end))));
                continue;
            }
        }
        results.push(None);
        let work = TaskWork { step: step + 1 + offset as u32, task, context, fork, calls, answers };
        children.push((task.task_id.clone(), (offset, work)));
    }
    let checkpoints = sink.checkpoints();
    let ended = run_children(sink, children, checkpoints, |(offset, work), mut child_sink| async move {
        let TaskWork { step, task, mut context, mut fork, calls, answers } = work;
        let worked = match super::children::show_again(ctx, &calls, &mut child_sink).await {
            Ok(()) => {
                let batch = answers.map(|answers| (calls.as_slice(), answers));
                tasks.work(ctx, step, task, batch, &mut context, &mut fork, &mut child_sink).await
            }
            Err(failure) => Err(failure),
        };
        child_sink.ended_as(fork.plan.tasks.iter().find(|t| t.task_id == task.task_id).cloned());
        let end = match &worked {
            Ok((end, _)) => end.clone(),
            Err(failure) => {
                let info = failure.to_error_info();
                ChildEnd::Fail(agw_protocol::TaskError::new(info.code.as_str(), info.message))
            }
        };
        (child_sink, end, (offset, context, fork, worked))
    })
    .await?;
    for (_, (offset, context, fork, worked)) in ended {
        results[offset] = Some((context, fork, worked));
    }

    let mut first_failure = None;
    for (result, task) in results.into_iter().zip(&chosen) {
        let Some((context, fork, worked)) = result else { continue };
        execute.extend(context.into_iter().skip(base));
        let joined = state.join(&forked_at, fork, &task.task_id);
        let failure = match worked {
            Ok((_, failure)) => failure,
            Err(failure) => Some(failure),
        };
        if first_failure.is_none() {
            first_failure = failure.or(joined.err());
        }
    }
    sink.emit(state.plan.update_delta()).await?;
    first_failure.map_or(Ok(()), Err)
}

/// A task's context, state and what it worked to: how its frame ended and why the plan stops.
type TaskResult = (Vec<ChatMessage>, RunState, Result<(ChildEnd, Option<RunFailure>), RunFailure>);

/// What a task of a round runs with.
struct TaskWork<'t> {
    step: u32,
    task: &'t PlanTask,
    context: Vec<ChatMessage>,
    fork: RunState,
    /// The tool batch it was in when its process stopped, with its answers so far.
    calls: Vec<StreamedCall>,
    answers: Option<Answers>,
}

/// How a task resumed after its process stopped ends when it had settled its status there (its
/// copy of the plan says so): its frame, and why the plan stops, as [`TaskLoop::work`] said.
/// `None` while the task is open.
fn settled(fork: &RunState, task_id: &str) -> Option<(ChildEnd, Option<RunFailure>)> {
    match fork.plan.status_of(task_id)? {
        TaskStatus::Completed => Some((ChildEnd::Complete, None)),
        TaskStatus::Canceled => Some((ChildEnd::Cancel, None)),
        TaskStatus::Failed => Some((
            ChildEnd::Fail(agw_protocol::TaskError::new("task_failed", "Task status updated to failed")),
            Some(RunFailure::PlanStalled(format!("task [{task_id}] was marked failed; the plan was stopped"))),
        )),
        TaskStatus::Init => None,
    }
}
