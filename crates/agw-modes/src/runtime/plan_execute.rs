//! PLAN_EXECUTE (`docs/contract/modes.md` §5): plan with `_plan_add_tasks_`, run the tasks one by one
//! until each is updated with `_plan_update_task_`, then summarise.
//!
//! Failures end the run with `run.error` (README decision table) instead of the reference's
//! content text + `run.complete`:
//! * toolChoice NONE, or no `_plan_add_tasks_` in the plan stage → `internal` (the agent cannot
//!   run PLAN_EXECUTE at all);
//! * the plan stage did not call `_plan_add_tasks_`, or the plan is still empty → `plan_stalled`;
//! * a task never updated (work rounds, update and repair rounds spent) →
//!   `task.fail {"code":"task_execution_error"}`, then `plan_stalled`;
//! * a task marked `failed` → `task.fail {"code":"task_failed"}`, then `plan_stalled`;
//! * a blank summary → `plan_stalled`;
//! * provider errors, budgets, frontend timeouts inside a task → the assembler's `fail` emits
//!   `task.fail` (the run error's code and message) for the active task, then `run.error`.
//!
//! Steers: every turn (plan draft, plan generate, each task round, the summary) takes the
//! waiting ones (`turn::model_turn`), so a steer reaches the model at its next turn — inside a
//! task its `request.steer` carries the `taskId`. A steer taken by a plan turn is also added to
//! the execute list, so the tasks and the summary keep it. The run ends with its summary even if
//! more steers arrived meanwhile (they come back from `SteerQueue::close`).

use agw_llm::{ChatMessage, ReasoningSetting, ToolCallMessage, ToolChoice};
use agw_protocol::history::{RecoveredStep, ResumeAt};
use agw_protocol::{AgentDelta, ChildEnd, PlanTask, TaskError, TaskStatus};
use serde_json::json;
use tracing::Instrument;

use crate::definition::{ResolvedModel, Stage, StageKind};

use super::calls::StreamedCall;
use super::execute::{Answers, execute_batch};
use super::plan::{PLAN_ADD_TASKS, PLAN_UPDATE_TASK, render_template};
use super::tools::StageToolSet;
use super::turn::{TurnOutput, TurnSpec, model_turn};
use super::{DeltaSink, RunContext, RunFailure, RunState, prompt, stage_prompt};

/// Work rounds per task before the forced update rounds (`MAX_WORK_ROUNDS_PER_TASK`).
pub const MAX_WORK_ROUNDS_PER_TASK: u32 = 6;
/// Forced update attempts when `budget.model.retryCount` is 0.
const DEFAULT_UPDATE_ATTEMPTS: u32 = 2;

/// Reason given to the model for the calls of a round that were not executed.
pub const NOT_EXECUTED_REASON: &str = "only the first tool call of a round is executed";

/// Heading of the execute-stage tools in the plan prompt (reference only).
pub const EXECUTE_TOOLS_REFERENCE_HEADER: &str =
    "Tools available in the execution stage (for reference only: this is the planning stage, do not call them):";
/// Heading of the tools the plan stage may call.
pub const PLAN_CALLABLE_HEADER: &str =
    "Tools callable in the planning stage (you must call _plan_add_tasks_ to create the plan):";

/// The stage blocks of the agent's PLAN_EXECUTE mode.
pub(super) struct Stages<'a> {
    pub plan: &'a Stage,
    pub deep_thinking: bool,
    pub execute: &'a Stage,
    pub summary: &'a Stage,
    /// Tasks run at once (`planExecute.parallel`); 1: one by one.
    pub parallel: u32,
}

pub(super) async fn run<S: DeltaSink>(
    ctx: &RunContext,
    stages: Stages<'_>,
    max_steps: u32,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let Some(choice) = ctx.agent.tool_choice.to_llm() else {
        return Err(RunFailure::Internal("PLAN_EXECUTE does not support toolChoice NONE".into()));
    };
    let plan_tools = StageToolSet::for_stage(ctx, StageKind::Plan);
    if !plan_tools.contains(PLAN_ADD_TASKS) {
        return Err(RunFailure::Internal(format!(
            "PLAN_EXECUTE needs the tool {PLAN_ADD_TASKS} in its plan stage, but it is not available"
        )));
    }
    let execute_tools = StageToolSet::for_stage(ctx, StageKind::Execute);

    // `execute`: the list the task rounds and the summary see; it gets the plan tool call and
    // its result, every task prompt, the execute texts and the tool round trips.
    let mut execute = ctx.opening();

    plan_stage(ctx, &stages, &plan_tools, &execute_tools, &mut execute, state, sink).await?;
    if stages.parallel > 1 {
        let replan = super::parallel::Replan::new(ctx, stages.plan, &plan_tools, &execute_tools);
        let tasks = TaskLoop::new(ctx, stages.execute, &execute_tools, choice);
        let rounds = super::parallel::Rounds { tasks: &tasks, replan: &replan, parallel: stages.parallel, max_steps };
        super::parallel::run(ctx, &rounds, 0, 0, &mut execute, state, sink).await?;
    } else {
        task_loop(ctx, stages.execute, &execute_tools, choice, max_steps, &mut execute, state, sink).await?;
    }
    summary_stage(ctx, stages.summary, &mut execute, state, sink).await
}

/// What a resumed plan had written ([`recover`]).
pub(super) struct Written<'a> {
    /// Its step lines, in order.
    pub steps: &'a [RecoveredStep],
    /// The current task's step as far as its checkpoint recorded it.
    pub pending: Vec<ChatMessage>,
    /// A checkpoint of the current task is current: the recorder goes on in its step.
    pub in_step: bool,
    /// The round of parallel tasks that was running, each task as far as it got.
    pub round: &'a [agw_protocol::history::RecoveredTask],
}

/// A sequential plan resumed after its process stopped (crash recovery): its written steps
/// (`steps`: the plan, the tasks done), the task it was in — from its start, or inside its tool
/// batch (`batch`, with `pending`, the task's rounds so far) — then the remaining tasks and the
/// summary. Its plan (`state.plan`) is the one its last step recorded. Before any plan was
/// written, the plan stage runs again. The conversation of the tasks is rebuilt from the steps,
/// each task's prompt rendered again with the plan as it stood when the task began.
pub(super) async fn recover<S: DeltaSink>(
    ctx: &RunContext,
    stages: Stages<'_>,
    max_steps: u32,
    written: Written<'_>,
    batch: Option<(&[StreamedCall], Answers)>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let Written { steps, pending, in_step, round } = written;
    let Some(choice) = ctx.agent.tool_choice.to_llm() else {
        return Err(RunFailure::Internal("PLAN_EXECUTE does not support toolChoice NONE".into()));
    };
    let Some(plan_step) = steps.iter().find(|s| s.stage == "plan") else {
        // Nothing of the plan was written: it is made again (the plan tools have no effects).
        return run(ctx, stages, max_steps, state, sink).await;
    };
    let execute_tools = StageToolSet::for_stage(ctx, StageKind::Execute);
    let tasks = TaskLoop::new(ctx, stages.execute, &execute_tools, choice);

    // `execute` as the plan stage left it: the request, steers, the plan call and its result.
    let mut execute = ctx.opening();
    let skip_request = if ctx.handed_from.is_some() { 0 } else { 1 };
    execute.extend(
        plan_step
            .messages
            .iter()
            .skip(skip_request)
            .filter(|m| match m {
                ChatMessage::Assistant { tool_calls, .. } => !tool_calls.is_empty(),
                _ => true,
            })
            .cloned(),
    );
    let mut plan = super::plan::PlanState::for_chat(&ctx.chat_id);
    if let Some(snapshot) = &plan_step.plan {
        plan = super::plan::PlanState::restored(snapshot, &ctx.chat_id);
    }
    if stages.parallel > 1 {
        state.plan = plan;
        let first = steps.iter().position(|s| s.stage == "plan").unwrap_or(0);
        let plan_tools = StageToolSet::for_stage(ctx, StageKind::Plan);
        let replan = super::parallel::Replan::new(ctx, stages.plan, &plan_tools, &execute_tools);
        let rounds = super::parallel::Rounds { tasks: &tasks, replan: &replan, parallel: stages.parallel, max_steps };
        let current = in_step.then_some(super::parallel::InTask { pending, batch });
        let at = super::parallel::Stopped { written: &steps[first + 1..], current, round };
        super::parallel::recover(ctx, &rounds, at, &mut execute, state, sink).await?;
        return summary_stage(ctx, stages.summary, &mut execute, state, sink).await;
    }
    let mut done = 0;
    for step in steps.iter().filter(|s| s.stage == "execute") {
        let Some(index) = plan.first_open() else { break };
        done += 1;
        execute.push(ChatMessage::user(tasks.prompt(&plan, &plan.tasks[index])));
        execute.extend(step.messages.iter().cloned());
        if let Some(snapshot) = &step.plan {
            plan = super::plan::PlanState::restored(snapshot, &ctx.chat_id);
        }
    }
    state.plan = plan;
    if let Some(index) = state.plan.first_open().filter(|_| done < max_steps) {
        let step = done + 1;
        let task = state.plan.tasks[index].clone();
        if !in_step {
            // The task's step is begun again (nothing of it was recorded).
            sink.emit(AgentDelta::StageMarker(format!("execute-task-{step}"))).await?;
        }
        execute.push(ChatMessage::user(tasks.prompt(&state.plan, &task)));
        execute.extend(pending);
        tasks.resume(ctx, step, index, batch, &mut execute, state, sink).await?;
        done = step;
    }
    tasks_from(ctx, &tasks, done, max_steps, &mut execute, state, sink).await?;
    summary_stage(ctx, stages.summary, &mut execute, state, sink).await
}

/// The plan stage prompt (§5.2): the stage prompt, the execute tools for reference, the callable
/// plan tool; then the tool appendix of the plan stage without after-call hints.
pub(super) fn plan_system_prompt(
    ctx: &RunContext,
    stage: &Stage,
    plan_tools: &StageToolSet,
    execute_tools: &StageToolSet,
) -> prompt::StagePrompt {
    let reference = execute_tools.backend_description_lines();
    let callable = match plan_tools.get(PLAN_ADD_TASKS).map(|d| d.description.trim()).filter(|d| !d.is_empty()) {
        Some(description) => format!("- {PLAN_ADD_TASKS}: {description}"),
        None => format!("- {PLAN_ADD_TASKS}"),
    };
    let reference = if reference.is_empty() {
        String::new()
    } else {
        format!("{EXECUTE_TOOLS_REFERENCE_HEADER}\n{}", reference.join("\n"))
    };
    let base = prompt::assemble(&[&stage.system_prompt, &reference, &format!("{PLAN_CALLABLE_HEADER}\n{callable}")]);
    stage_prompt(ctx, &base, plan_tools, false)
}

fn with_reasoning(model: &ResolvedModel, enabled: bool) -> ResolvedModel {
    ResolvedModel { reasoning: ReasoningSetting { enabled, ..model.reasoning }, ..model.clone() }
}

pub(super) fn model_for(ctx: &RunContext, kind: StageKind) -> ResolvedModel {
    ctx.agent.resolve_model(kind, |key| ctx.services.providers.default_model(key))
}

/// Non-blank text of a turn, trimmed, as an assistant message.
pub(super) fn push_text(messages: &mut Vec<ChatMessage>, out: &TurnOutput) {
    let text = out.text.trim();
    if !text.is_empty() {
        messages.push(ChatMessage::Assistant { content: text.to_owned(), tool_calls: Vec::new() });
    }
}

async fn plan_stage<S: DeltaSink>(
    ctx: &RunContext,
    stages: &Stages<'_>,
    plan_tools: &StageToolSet,
    execute_tools: &StageToolSet,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let model = model_for(ctx, StageKind::Plan);
    let system = plan_system_prompt(ctx, stages.plan, plan_tools, execute_tools);
    let callable = plan_tools.only(PLAN_ADD_TASKS);
    // `plan`: what the plan turns see (history, the request, the draft).
    let mut plan = ctx.opening();

    if stages.deep_thinking {
        sink.emit(AgentDelta::StageMarker("plan-draft".into())).await?;
        let draft_model = with_reasoning(&model, true);
        let spec = TurnSpec {
            stage_name: "agent-plan-draft",
            model: &draft_model,
            system_prompt: &system,
            messages: &mut plan,
            tools: &callable,
            tool_choice: None,
            emit_reasoning: true,
            answer: false,
        };
        let draft = model_turn(ctx, spec, state, sink).await?;
        execute.extend(draft.steers.iter().cloned());
        push_text(&mut plan, &draft);
    }

    sink.emit(AgentDelta::StageMarker("plan-generate".into())).await?;
    let generate_model = with_reasoning(&model, false);
    let spec = TurnSpec {
        stage_name: "agent-plan-generate",
        model: &generate_model,
        system_prompt: &system,
        messages: &mut plan,
        tools: &callable,
        tool_choice: Some(ToolChoice::Required),
        emit_reasoning: false,
        answer: false,
    };
    let generated = model_turn(ctx, spec, state, sink).await?;
    // A steer the plan saw stays in the conversation of the tasks and the summary.
    execute.extend(generated.steers.iter().cloned());
    if !generated.calls.iter().any(|c| c.normalized_name() == PLAN_ADD_TASKS) {
        return Err(RunFailure::PlanStalled(format!("the planning turn did not call {PLAN_ADD_TASKS}")));
    }
    // Every call of the turn runs, against the plan tool alone; call and result go to `execute`.
    execute_batch(ctx, &callable, &generated.calls, Answers::Live(generated.frontend_waiters), execute, state, sink)
        .await?;
    if state.plan.tasks.is_empty() {
        return Err(RunFailure::PlanStalled(format!("{PLAN_ADD_TASKS} created no valid task")));
    }
    Ok(())
}

/// How one task ended.
enum TaskEnd {
    /// A `_plan_update_task_` for the task changed its status.
    Updated,
    /// Work, update and repair rounds all passed without that.
    Stalled { attempts: u32 },
}

/// What every task of a plan runs with: the execute stage's model, prompt, tools and template.
pub(super) struct TaskLoop<'a> {
    model: ResolvedModel,
    system: prompt::StagePrompt,
    tools: &'a StageToolSet,
    choice: ToolChoice,
    template: &'a str,
}

impl<'a> TaskLoop<'a> {
    pub(super) fn new(ctx: &'a RunContext, stage: &Stage, tools: &'a StageToolSet, choice: ToolChoice) -> Self {
        TaskLoop {
            model: model_for(ctx, StageKind::Execute),
            system: stage_prompt(ctx, &stage.system_prompt, tools, true),
            tools,
            choice,
            template: &ctx.agent.runtime_prompts.task_execution_prompt_template,
        }
    }

    /// The task prompt of `task`, with the plan as it stands.
    pub(super) fn prompt(&self, plan: &super::plan::PlanState, task: &PlanTask) -> String {
        let task_list = plan.task_list_text();
        render_template(
            self.template,
            &[("task_list", &task_list), ("task_id", &task.task_id), ("task_description", &task.description)],
        )
    }

    /// One task, framed by `task.start` and its end: the contract's sequential execution.
    pub(super) async fn one<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        step: u32,
        index: usize,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<(), RunFailure> {
        let task = state.plan.tasks[index].clone();
        sink.emit(AgentDelta::TaskStart { task_id: task.task_id.clone(), description: Some(task.description.clone()) })
            .await?;
        sink.emit(AgentDelta::StageMarker(format!("execute-task-{step}"))).await?;
        execute.push(ChatMessage::user(self.prompt(&state.plan, &task)));
        self.finish(ctx, step, &task, None, execute, state, sink).await
    }

    /// The rest of a task begun in a process that stopped (crash recovery): its `task.start`
    /// streamed there, its prompt (and rounds so far) are in `execute`; `batch` is the tool
    /// batch it was running, to finish first.
    #[expect(clippy::too_many_arguments, reason = "the task, its interrupted batch and the run state")]
    pub(super) async fn resume<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        step: u32,
        index: usize,
        batch: Option<(&[StreamedCall], Answers)>,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<(), RunFailure> {
        let task = state.plan.tasks[index].clone();
        sink.emit(AgentDelta::TaskResume { task_id: task.task_id.clone() }).await?;
        self.finish(ctx, step, &task, batch, execute, state, sink).await
    }

    /// The task's rounds, then its end frame. A batch that pauses or waits here is resumed at
    /// `execute-task-<step>` after a crash.
    #[expect(clippy::too_many_arguments, reason = "the task, its interrupted batch and the run state")]
    async fn finish<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        step: u32,
        task: &PlanTask,
        batch: Option<(&[StreamedCall], Answers)>,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<(), RunFailure> {
        state.resume_at = ResumeAt::ExecuteTask(step);
        let worked = self.work(ctx, step, task, batch, execute, state, sink).await;
        state.resume_at = ResumeAt::Nowhere;
        let (end, failure) = worked?;
        let task_id = task.task_id.clone();
        let frame = match end {
            ChildEnd::Complete => AgentDelta::TaskComplete { task_id },
            ChildEnd::Cancel => AgentDelta::TaskCancel { task_id },
            ChildEnd::Fail(error) => AgentDelta::TaskFail { task_id, error },
        };
        sink.emit(frame).await?;
        failure.map_or(Ok(()), Err)
    }

    /// The rounds of one task (its prompt already in `execute`), traced, finishing an
    /// interrupted `batch` first (crash recovery): how its frame ends and, when the plan must
    /// stop, why. `Err`: the run failed inside the task (a provider error, a budget) — the
    /// caller ends the task with that error.
    #[expect(clippy::too_many_arguments, reason = "the task, its interrupted batch and the run state")]
    pub(super) async fn work<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        step: u32,
        task: &PlanTask,
        batch: Option<(&[StreamedCall], Answers)>,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<(ChildEnd, Option<RunFailure>), RunFailure> {
        let task_id = task.task_id.as_str();
        let rounds = TaskRounds { model: &self.model, system: &self.system, tools: self.tools, choice: self.choice };
        let span = super::trace::task(task_id, &task.description);
        // A task resumed after its process stopped may have settled its status there, after its
        // last batch: it ends now, with no further round.
        let settled = batch.is_none() && state.plan.status_of(task_id).is_some_and(|s| s != TaskStatus::Init);
        let worked = if settled {
            Ok(TaskEnd::Updated)
        } else {
            rounds.run(ctx, step, task_id, batch, execute, state, sink).instrument(span.clone()).await
        };
        let end = match worked {
            Ok(end) => end,
            Err(failure) => {
                let info = failure.to_error_info();
                super::trace::task_ended(&span, "failed", Some((info.code.as_str(), &info.message)));
                return Err(failure);
            }
        };
        let fail = |code: &str, message: &str| ChildEnd::Fail(TaskError::new(code, message));
        if let TaskEnd::Stalled { attempts } = end {
            let message = format!(
                "task [{task_id}] was never updated: no valid {PLAN_UPDATE_TASK} call after \
                 {MAX_WORK_ROUNDS_PER_TASK} work rounds and {attempts} update attempts"
            );
            super::trace::task_ended(&span, "failed", Some(("task_execution_error", &message)));
            return Ok((fail("task_execution_error", &message), Some(RunFailure::PlanStalled(message))));
        }
        let status = state.plan.status_of(task_id).unwrap_or_default();
        let failure = match status {
            TaskStatus::Failed => Some(("task_failed", "Task status updated to failed")),
            TaskStatus::Init => Some(("task_execution_error", "the task was not updated")),
            TaskStatus::Completed | TaskStatus::Canceled => None,
        };
        super::trace::task_ended(&span, status.as_str(), failure);
        Ok(match status {
            TaskStatus::Completed => (ChildEnd::Complete, None),
            TaskStatus::Canceled => (ChildEnd::Cancel, None),
            TaskStatus::Failed => (
                fail("task_failed", "Task status updated to failed"),
                Some(RunFailure::PlanStalled(format!("task [{task_id}] was marked failed; the plan was stopped"))),
            ),
            TaskStatus::Init => {
                let message = format!("task [{task_id}] was not updated to completed/canceled/failed");
                (fail("task_execution_error", &message), Some(RunFailure::PlanStalled(message)))
            }
        })
    }
}

#[expect(clippy::too_many_arguments, reason = "the stage pieces and the run's mutable state, passed once")]
async fn task_loop<S: DeltaSink>(
    ctx: &RunContext,
    stage: &Stage,
    tools: &StageToolSet,
    choice: ToolChoice,
    max_steps: u32,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let tasks = TaskLoop::new(ctx, stage, tools, choice);
    tasks_from(ctx, &tasks, 0, max_steps, execute, state, sink).await
}

/// The plan's open tasks one by one, after `done` were executed.
async fn tasks_from<S: DeltaSink>(
    ctx: &RunContext,
    tasks: &TaskLoop<'_>,
    done: u32,
    max_steps: u32,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let mut step = done;
    while step < max_steps {
        let Some(index) = state.plan.first_open() else {
            break;
        };
        step += 1;
        tasks.one(ctx, step, index, execute, state, sink).await?;
    }
    Ok(())
}

/// The model rounds of one task (§5.3 steps 4–5).
pub(super) struct TaskRounds<'a> {
    model: &'a ResolvedModel,
    system: &'a prompt::StagePrompt,
    tools: &'a StageToolSet,
    choice: ToolChoice,
}

impl TaskRounds<'_> {
    #[expect(clippy::too_many_arguments, reason = "the task, its interrupted batch and the run state")]
    async fn run<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        step: u32,
        task_id: &str,
        batch: Option<(&[StreamedCall], Answers)>,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<TaskEnd, RunFailure> {
        if let Some((calls, answers)) = batch
            && self.settle(ctx, task_id, calls, answers, &[], execute, state, sink).await?
        {
            return Ok(TaskEnd::Updated);
        }
        for round in 1..=MAX_WORK_ROUNDS_PER_TASK {
            let name = if round == 1 {
                format!("agent-plan-execute-step-{step}")
            } else {
                format!("agent-plan-execute-step-{step}-work-{round}")
            };
            if self.round(ctx, &name, self.choice, task_id, execute, state, sink).await? {
                return Ok(TaskEnd::Updated);
            }
        }
        let attempts = match state.budget.budget().model.retry_count {
            0 => DEFAULT_UPDATE_ATTEMPTS,
            n => n,
        };
        for attempt in 1..=attempts {
            let name = if attempt == 1 {
                format!("agent-plan-execute-step-{step}-update")
            } else {
                format!("agent-plan-execute-step-{step}-update-repair")
            };
            if self.round(ctx, &name, ToolChoice::Required, task_id, execute, state, sink).await? {
                return Ok(TaskEnd::Updated);
            }
        }
        Ok(TaskEnd::Stalled { attempts })
    }

    /// One model turn of a task; only its first call runs. True when that call was a
    /// `_plan_update_task_` for this task that changed the task's status.
    #[expect(clippy::too_many_arguments, reason = "one round needs the task, the messages and the run state")]
    async fn round<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        name: &str,
        choice: ToolChoice,
        task_id: &str,
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<bool, RunFailure> {
        let spec = TurnSpec {
            stage_name: name,
            model: self.model,
            system_prompt: self.system,
            messages: &mut *execute,
            tools: self.tools,
            tool_choice: Some(choice),
            emit_reasoning: self.model.reasoning.enabled,
            answer: false,
        };
        let out = model_turn(ctx, spec, state, sink).await?;
        push_text(execute, &out);
        let Some((first, rest)) = out.calls.split_first() else {
            return Ok(false);
        };
        let answers = Answers::Live(out.frontend_waiters);
        self.settle(ctx, task_id, std::slice::from_ref(first), answers, rest, execute, state, sink).await
    }

    /// Runs a round's first call (`first`, one call) and answers the others unexecuted. True
    /// when the call was a `_plan_update_task_` for this task that changed the task's status.
    #[expect(clippy::too_many_arguments, reason = "one round needs the task, the messages and the run state")]
    async fn settle<S: DeltaSink>(
        &self,
        ctx: &RunContext,
        task_id: &str,
        first: &[StreamedCall],
        answers: Answers,
        rest: &[StreamedCall],
        execute: &mut Vec<ChatMessage>,
        state: &mut RunState,
        sink: &mut S,
    ) -> Result<bool, RunFailure> {
        let Some(call) = first.first() else { return Ok(false) };
        let before = state.plan.status_of(task_id);
        execute_batch(ctx, self.tools, first, answers, execute, state, sink).await?;
        // The other calls were streamed and stay open until the task ends; they never run, but
        // the provider history still answers each of them.
        for call in rest {
            answer_unexecuted(execute, call);
        }
        let targets_task = call.normalized_name() == PLAN_UPDATE_TASK
            && call.arguments_object().get("taskId").and_then(|v| v.as_str()).map(str::trim) == Some(task_id);
        Ok(targets_task && state.plan.status_of(task_id) != before)
    }
}

/// The assistant call and the `{"executed":false,…}` tool message of a call that was not run.
fn answer_unexecuted(messages: &mut Vec<ChatMessage>, call: &StreamedCall) {
    let name = call.normalized_name();
    messages.push(ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCallMessage {
            id: call.id.clone(),
            call_type: "function".into(),
            name: name.clone(),
            arguments: call.arguments_object().to_string(),
        }],
    });
    messages.push(ChatMessage::Tool {
        tool_call_id: call.id.clone(),
        name,
        content: json!({"executed": false, "reason": NOT_EXECUTED_REASON}).to_string(),
    });
}

async fn summary_stage<S: DeltaSink>(
    ctx: &RunContext,
    stage: &Stage,
    execute: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    sink.emit(AgentDelta::StageMarker("summary".into())).await?;
    let model = model_for(ctx, StageKind::Summary);
    // The summary offers no tools; its own tools only feed the prompt appendix.
    let tools = StageToolSet::for_stage(ctx, StageKind::Summary);
    let system = stage_prompt(ctx, &stage.system_prompt, &tools, true);
    let spec = TurnSpec {
        stage_name: "agent-plan-final",
        model: &model,
        system_prompt: &system,
        messages: execute,
        tools: &tools,
        tool_choice: None,
        emit_reasoning: model.reasoning.enabled,
        answer: true,
    };
    let out = model_turn(ctx, spec, state, sink).await?;
    if out.text.trim().is_empty() {
        return Err(RunFailure::PlanStalled("the summary turn produced no text".into()));
    }
    Ok("stop".into())
}
