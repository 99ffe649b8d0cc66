//! Executing the tool calls of one model turn as a batch (`docs/contract/sse-events.md` §6.5,
//! `docs/contract/tools-skills-viewports.md` §5).
//!
//! Order: `tool.end` for every non-action call first (so a frontend tool's end precedes the
//! wait), then the tools run sequentially in call order, then every result in call order. A
//! backend call that pauses for the user (`pause.rs`) waits in its place in that order.
//! Every executed call adds an assistant tool-call message and its tool message to the
//! conversation, so the history sent back to the provider always pairs calls with results.
//!
//! The plan tools are answered here from the run's plan, never by the registry's implementations;
//! a call that changed the plan is followed by a `plan.update` right after its result.

use std::collections::HashMap;

use agw_llm::{ChatMessage, ToolCallMessage};
use agw_protocol::event::{AwaitingAsk, EventPayload};
use agw_protocol::history::{AwaitingCall, AwaitingResult, StreamedAs, WaitKind};
use agw_protocol::{AgentDelta, PlanTask};
use agw_tools::templates::{self, RecordedCall};
use agw_tools::{ToolKind, exec};
use serde_json::{Value, json};
use tracing::Instrument;

use super::approval;
use super::calls::StreamedCall;
use super::doom::Doom;
use super::handoff;
use super::invoke::AGENT_INVOKE_TOOL;
use super::pause;
use super::plan::is_plan_tool;
use super::submit::PendingSubmit;
use super::tools::{Decoration, StageToolSet, decorate, plain_tool_meta};
use super::{BatchPoint, DeltaSink, RunContext, RunFailure, RunState, WaitPoint};

/// Backend tool execution time (seconds), labelled by tool name.
pub const TOOL_DURATION_METRIC: &str = "agw_tool_duration_seconds";

/// One executed call with its result text.
pub(crate) struct Executed {
    pub id: String,
    /// How the client was shown the call: its result is an `action.result` or a `tool.result`.
    pub shown: StreamedAs,
    pub result: String,
    /// The plan right after this call, when the call changed it.
    pub plan_after: Option<(String, Vec<PlanTask>)>,
}

/// Where the answers of a batch's waits come from.
pub(crate) enum Answers {
    /// A live turn: frontend calls wait for their submits through the waiters registered when
    /// their `tool.start` streamed (by call id).
    Live(HashMap<String, PendingSubmit>),
    /// A batch continued in a new process after it waited there (durable waiting): its ends
    /// were streamed, some of its calls ran, one waited and has its answer now.
    /// Boxed: it is rare, and the live variant is what every batch holds.
    Resumed(Box<Resumed>),
}

/// See [`Answers::Resumed`].
pub(crate) struct Resumed {
    /// Results of the calls that ran before the wait, by call id: not run again.
    pub done: HashMap<String, String>,
    /// The call that waited.
    pub awaiting_id: String,
    /// Its answer (submit `params`, approval decision, `continue`/`cancel`); `None`: the wait
    /// timed out.
    pub answer: Option<Value>,
    /// What the call waited for: its approval, a frontend tool's form, or the user after its
    /// tool paused.
    pub kind: WaitKind,
    /// A status wait: the message of the status the user was shown.
    pub status_message: String,
    /// A status wait: the status data the call paused with (its reply carries it back).
    pub status_data: Value,
    /// A batch resumed after its process stopped (crash recovery): the call that was running
    /// then. It runs again only if its tool is idempotent; else its result says it was
    /// interrupted.
    pub interrupted: Option<String>,
    /// That call's sub-agents as their checkpoints left them, when it is an `agent_invoke`
    /// call that kept them: it goes on from there instead.
    pub children: Vec<agw_protocol::history::RecoveredTask>,
}

impl Answers {
    /// A batch resumed after its process stopped (crash recovery): `results` of the calls that
    /// finished are not run again; `running` was running then.
    pub(crate) fn after_crash(
        results: Vec<AwaitingResult>,
        running: Option<String>,
        children: Vec<agw_protocol::history::RecoveredTask>,
    ) -> Self {
        Self::Resumed(Box::new(Resumed {
            done: results.into_iter().map(|r| (r.id, r.result)).collect(),
            awaiting_id: String::new(),
            answer: None,
            kind: WaitKind::Form,
            status_message: String::new(),
            status_data: Value::Null,
            interrupted: running,
            children,
        }))
    }

    /// The sub-agents of `agent_invoke` call `id`, which was running when its process stopped
    /// and kept their checkpoints, once: the call goes on with them.
    fn children(&mut self, id: &str) -> Option<Vec<agw_protocol::history::RecoveredTask>> {
        match self {
            Self::Resumed(resumed) if resumed.interrupted.as_deref() == Some(id) && !resumed.children.is_empty() => {
                resumed.interrupted = None;
                Some(std::mem::take(&mut resumed.children))
            }
            _ => None,
        }
    }

    fn done(&mut self, id: &str) -> Option<String> {
        match self {
            Self::Resumed(resumed) => resumed.done.remove(id),
            Self::Live(_) => None,
        }
    }

    /// The result of a call that was running when its process stopped and may not run again
    /// (its tool is not idempotent), once.
    fn interrupted(&mut self, id: &str, name: &str, idempotent: bool) -> Option<String> {
        match self {
            Self::Resumed(resumed) if resumed.interrupted.as_deref() == Some(id) => {
                resumed.interrupted = None;
                (!idempotent).then(|| interrupted_result(name))
            }
            _ => None,
        }
    }

    /// The answer of the call that waited for what `wanted` accepts, once: `Some(None)` = it
    /// timed out.
    fn answered(&mut self, id: &str, wanted: fn(WaitKind) -> bool) -> Option<Option<Value>> {
        match self {
            Self::Resumed(resumed) if resumed.awaiting_id == id && wanted(resumed.kind) => {
                resumed.awaiting_id.clear();
                Some(resumed.answer.take())
            }
            _ => None,
        }
    }

    /// The answer of a backend call that paused for the user in the process that stopped, once:
    /// how often it had been continued before, the status message shown, and the answer
    /// (`None`: the wait timed out).
    pub(super) fn answered_status(&mut self, id: &str) -> Option<(u32, agw_tools::UserStatus, Option<Value>)> {
        match self {
            Self::Resumed(resumed) if resumed.awaiting_id == id => {
                let WaitKind::Status { continued } = resumed.kind else { return None };
                resumed.awaiting_id.clear();
                let mut status = agw_tools::UserStatus::new(std::mem::take(&mut resumed.status_message));
                status.data = std::mem::take(&mut resumed.status_data);
                Some((continued, status, resumed.answer.take()))
            }
            _ => None,
        }
    }

    /// The call waited in the process that stopped for something after its approval (its form,
    /// or the user after its tool paused): the approval, if it had to have one, was given there.
    fn waited_past_approval(&self, id: &str) -> bool {
        matches!(self, Self::Resumed(resumed) if resumed.awaiting_id == id && resumed.kind != WaitKind::Approval)
    }
}

/// The batch as far as it got, for a [`WaitPoint`].
#[derive(Clone, Copy)]
pub(super) struct BatchSoFar<'a> {
    pub calls: &'a [StreamedCall],
    /// How each call has been shown to the client so far.
    pub shown: &'a [StreamedAs],
    pub executed: &'a [Executed],
}

impl BatchSoFar<'_> {
    /// The run waits for `ask` now.
    pub(super) fn wait_point(&self, ctx: &RunContext, state: &RunState, ask: AwaitingAsk) -> WaitPoint {
        WaitPoint {
            ask,
            timeout: ctx.services.frontend_timeout,
            resume_at: state.resume_at.clone(),
            calls: self.calls(),
            results: self.results(),
            continued: 0,
        }
    }

    /// The batch as a crash-recovery checkpoint: `running` is about to run, or (`done`) every
    /// result streamed.
    pub(super) fn batch_point(&self, state: &RunState, running: Option<&str>, done: bool) -> BatchPoint {
        BatchPoint {
            resume_at: state.resume_at.clone(),
            calls: self.calls(),
            results: self.results(),
            running: running.map(str::to_owned),
            done,
            forked_plan: (!state.shows_plan).then(|| state.plan.tasks.clone()),
        }
    }

    fn calls(&self) -> Vec<AwaitingCall> {
        self.calls
            .iter()
            .zip(self.shown)
            .map(|(c, shown)| AwaitingCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
                streamed_as: Some(*shown),
            })
            .collect()
    }

    fn results(&self) -> Vec<AwaitingResult> {
        self.executed.iter().map(|e| AwaitingResult { id: e.id.clone(), result: e.result.clone() }).collect()
    }
}

/// What the model is told of a call that was running when agw stopped and is not run again: it
/// may or may not have taken effect.
pub(crate) fn interrupted_result(name: &str) -> String {
    json!({
        "tool": name,
        "ok": false,
        "code": "interrupted",
        "error": "agw stopped while this call was running. Whether it took effect is unknown; it was not run again. Check before repeating it."
    })
    .to_string()
}

/// `awaiting.ask` `form` for a frontend call (what a client needs to render it and submit).
pub(super) fn form_ask(ctx: &RunContext, call: &StreamedCall, args: &Value) -> AwaitingAsk {
    let (viewport_type, viewport_key) = match decorate(ctx, &call.name) {
        Decoration::Tool(meta) => (Some(meta.tool_type), meta.frontend.map(|f| f.tool_key)),
        Decoration::Action(_) => (None, None),
    };
    AwaitingAsk {
        awaiting_id: call.id.clone(),
        run_id: ctx.run_id.clone(),
        mode: "form".into(),
        timeout: (ctx.services.frontend_timeout.as_millis() as u64).max(1),
        approvals: Vec::new(),
        tool_name: Some(call.name.trim().to_owned()),
        arguments: Some(args.clone()),
        viewport_type,
        viewport_key,
        status: None,
        options: Box::default(),
    }
}

/// Runs `calls` (all of them) and streams their ends and results.
pub(crate) async fn execute_batch<S: DeltaSink>(
    ctx: &RunContext,
    tools: &StageToolSet,
    calls: &[StreamedCall],
    mut answers: Answers,
    conversation: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Vec<Executed>, RunFailure> {
    let kinds: Vec<ToolKind> = calls.iter().map(|c| ctx.services.tools.kind_of(&c.normalized_name())).collect();
    let mut shown: Vec<StreamedAs> = calls
        .iter()
        .zip(&kinds)
        .map(|(call, kind)| match (call.streamed_as, kind) {
            (Some(shown), _) => shown,
            (None, ToolKind::Action) => StreamedAs::Action,
            (None, _) => StreamedAs::Tool,
        })
        .collect();
    // A resumed batch streamed its ends before it waited; a withheld call streams its own.
    if matches!(answers, Answers::Live(_)) {
        for (call, shown) in calls.iter().zip(&shown) {
            if *shown == StreamedAs::Tool {
                sink.emit(AgentDelta::ToolEnd { tool_id: call.id.clone() }).await?;
            }
        }
    }

    let mut executed: Vec<Executed> = Vec::with_capacity(calls.len());
    // A transfer call's handoff: it takes effect once this batch is done; later calls do not run.
    let mut handed: Option<super::HandedOff> = None;
    let mut frontend_timeout = None;
    let mut doom_loop: Option<String> = None;
    for (at, (call, kind)) in calls.iter().zip(kinds).enumerate() {
        let name = call.normalized_name();
        let mut args = templates::resolve(&call.arguments_object(), &state.recorded);
        let mut plan_after = None;
        let is_invoke = name == AGENT_INVOKE_TOOL;
        let is_transfer = handoff::is_transfer(&name);
        // Sub-agents that kept checkpoints go on from them.
        let mut children = if is_invoke { answers.children(&call.id) } else { None };
        let done = answers.done(&call.id).or_else(|| {
            if children.is_some() {
                return None;
            }
            // Sub-agents that can only repeat what is harmless start over.
            let idempotent = if is_invoke {
                super::invoke::rerunnable(ctx, &call.id, &args)
            } else {
                ctx.services.tools.is_idempotent(&name)
            };
            answers.interrupted(&call.id, &name, idempotent)
        });
        // A call that ran before a restart was counted in the process that ran it.
        let doom = match &done {
            Some(_) => Doom::Fine,
            None => state.doom.observe(ctx.agent.context.doom_loop_threshold, &name, &call.arguments_object()),
        };
        let span = super::trace::execute_tool(&call.id, &name, kind);
        let result = async {
            Ok::<String, RunFailure>(if let Some(done) = done {
                done
            } else if handed.is_some() {
                handoff::not_executed()
            } else if let Some(problem) = &call.problem {
                tracing::debug!(run_id = %ctx.run_id, tool = %name, %problem, "prompted call not run");
                exec::error_result(&name, &format!("Invalid tool call: {problem}"))
            } else if let Doom::Refused(text) | Doom::Stop(text) = &doom {
                tracing::warn!(run_id = %ctx.run_id, tool = %name, "doom loop: the same call again, not executed");
                if matches!(doom, Doom::Stop(_)) {
                    doom_loop.get_or_insert_with(|| name.clone());
                }
                text.clone()
            } else if is_transfer && !tools.contains(&name) {
                handoff::not_offered(ctx, &name)
            } else if !tools.contains(&name) {
                exec::error_result(&name, &format!("Tool is not enabled for this agent: {name}"))
            } else if is_plan_tool(&name)
                && let Some(answer) = state.plan.call(&name, &args)
            {
                // A task running beside others changes its own copy of the plan: the run shows the
                // plan once their round ended and the copies were merged.
                if answer.changed && state.shows_plan {
                    plan_after = Some((state.plan.plan_id.clone(), state.plan.tasks.clone()));
                }
                answer.text
            } else if kind == ToolKind::Backend
                && !is_invoke
                && !is_transfer
                && ctx.services.tools.implementation(&name).is_none()
            {
                exec::error_result(&name, &format!("Unknown tool: {name}"))
            } else if let approval::Verdict::Refused(text) = approve(
                ctx,
                approval::Asked { call_id: &call.id, name: &name, args: &args },
                &mut answers,
                BatchSoFar { calls, shown: &shown, executed: &executed },
                state,
                sink,
            )
            .await?
            {
                text
            } else if kind == ToolKind::Backend
                && let super::guard::Admitted::Refused(text) =
                    super::guard::tool_input(ctx, &call.id, &name, &mut args, state, sink).await?
            {
                text
            } else {
                match kind {
                    ToolKind::Action => {
                        if shown[at] == StreamedAs::Withheld {
                            // Allowed now: the client may perform it.
                            let meta = match decorate(ctx, &call.name) {
                                Decoration::Action(meta) => meta,
                                Decoration::Tool(_) => Default::default(),
                            };
                            let delta = call.arguments.clone();
                            sink.emit(AgentDelta::ActionArgs { action_id: call.id.clone(), meta, delta }).await?;
                            shown[at] = StreamedAs::Action;
                        }
                        "OK".to_string()
                    }
                    ToolKind::Frontend => {
                        let reveal = shown[at] == StreamedAs::Withheld;
                        shown[at] = StreamedAs::Tool;
                        let batch = BatchSoFar { calls, shown: &shown, executed: &executed };
                        match frontend_answer(ctx, call, &args, reveal, &mut answers, batch, state, sink).await? {
                            Ok(Some(params)) => {
                                if params.is_null() {
                                    "{}".into()
                                } else {
                                    params.to_string()
                                }
                            }
                            Ok(None) => {
                                let message =
                                    format!("Frontend tool submit timeout runId={}, toolId={}", ctx.run_id, call.id);
                                frontend_timeout = Some(message.clone());
                                json!({"tool": name, "ok": false, "code": "frontend_submit_timeout", "error": message})
                                    .to_string()
                            }
                            Err(()) => {
                                if reveal {
                                    // Nothing was shown after all.
                                    shown[at] = StreamedAs::Withheld;
                                }
                                exec::error_result(
                                    &name,
                                    &format!("Pending frontend submit already exists: {}#{}", ctx.run_id, call.id),
                                )
                            }
                        }
                    }
                    ToolKind::Backend if is_invoke => {
                        checkpoint(BatchSoFar { calls, shown: &shown, executed: &executed }, &call.id, state, sink)
                            .await;
                        let answer = super::invoke::invoke(ctx, &call.id, &args, children.take(), state, sink).await?;
                        super::guard::tool_output(ctx, &call.id, &name, answer, state, sink).await?
                    }
                    ToolKind::Backend if is_transfer => match handoff::transfer(ctx, state, &name, &call.id) {
                        handoff::Transfer::Made { result, handed: handoff } => {
                            handed = Some(handoff);
                            result
                        }
                        handoff::Transfer::Refused(text) => text,
                    },
                    ToolKind::Backend => match ctx.services.tools.implementation(&name) {
                        Some(tool) => {
                            let batch = BatchSoFar { calls, shown: &shown, executed: &executed };
                            checkpoint(batch, &call.id, state, sink).await;
                            // It may pause for the user (`docs/pausing-tools.md`) before it answers.
                            // Boxed: the pause's states (the ask, the wait point) stay out of
                            // every run's future; a backend call costs far more than one
                            // allocation.
                            let batch = BatchSoFar { calls, shown: &shown, executed: &executed };
                            let answers = &mut answers;
                            let tool = tool.as_ref();
                            let result = Box::pin(pause::run_backend(
                                ctx, call, &name, tool, &args, answers, batch, state, sink,
                            ))
                            .await?;
                            super::guard::tool_output(ctx, &call.id, &name, result, state, sink).await?
                        }
                        None => exec::error_result(&name, &format!("Unknown tool: {name}")),
                    },
                }
            })
        }
        .instrument(span.clone())
        .await?;
        if shown[at] == StreamedAs::Withheld {
            // Not run (refused, or never reached a tool): the client sees a call that did
            // nothing — never an action to perform or a form to fill.
            let meta = plain_tool_meta(ctx, &call.name);
            sink.emit(AgentDelta::ToolArgs { tool_id: call.id.clone(), meta, delta: call.arguments.clone() }).await?;
            sink.emit(AgentDelta::ToolEnd { tool_id: call.id.clone() }).await?;
            shown[at] = StreamedAs::Tool;
        }
        super::trace::tool_ended(&span, ctx.services.tracing.capture_content, &args, &result);
        if let Some(fields) = super::citations::fields_of(ctx, &name)
            && let Ok(value) = serde_json::from_str::<Value>(&result)
        {
            // Read before the output limit cuts the JSON.
            state.citations.collect(fields, &value, &call.id);
        }
        let result = exec::truncate_output(&result, ctx.services.tool_output_limit);
        if tools.contains(&name) {
            // A skill script run discloses the skill's instructions in the next turn.
            state.skills.note_call(ctx, &name, &args);
        }
        state
            .recorded
            .push(RecordedCall { name: name.clone(), result_json: serde_json::from_str::<Value>(&result).ok() });
        // A call that was not run for its arguments goes back as the model wrote it, so it sees
        // what its error is about.
        let arguments = if call.problem.is_some() { call.arguments.clone() } else { args.to_string() };
        conversation.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: call.id.clone(),
                call_type: "function".into(),
                name: name.clone(),
                arguments,
            }],
        });
        conversation.push(ChatMessage::Tool {
            tool_call_id: call.id.clone(),
            name: name.clone(),
            content: result.clone(),
        });
        executed.push(Executed { id: call.id.clone(), shown: shown[at], result, plan_after });
    }

    for done in &executed {
        match done.shown {
            StreamedAs::Action => {
                sink.emit(AgentDelta::ActionEnd { action_id: done.id.clone() }).await?;
                let value = serde_json::from_str(&done.result).unwrap_or_else(|_| Value::String(done.result.clone()));
                sink.emit(AgentDelta::ActionResult { action_id: done.id.clone(), result: value }).await?;
            }
            _ => sink.emit(AgentDelta::ToolResult { tool_id: done.id.clone(), result: done.result.clone() }).await?,
        }
        if let Some((plan_id, plan)) = &done.plan_after {
            sink.emit(AgentDelta::PlanUpdate { plan_id: plan_id.clone(), plan: plan.clone() }).await?;
        }
    }
    if sink.checkpoints() && !state.step_follows_batch {
        let batch = BatchSoFar { calls, shown: &shown, executed: &executed };
        sink.checkpoint(&batch.batch_point(state, None, true)).await;
    }
    if let Some(message) = frontend_timeout {
        // The batch that timed out is not charged to the tool budget.
        return Err(RunFailure::FrontendTimeout(message));
    }
    if let Some(tool) = doom_loop {
        return Err(RunFailure::DoomLoop(tool));
    }
    state.budget.add_tool_calls(executed.len() as u32)?;
    if let Some(mut handed) = handed {
        handed.conversation = conversation.clone();
        return Err(RunFailure::HandedOff(Box::new(handed)));
    }
    Ok(executed)
}

/// Before a call with effects runs: a run resumed after a crash knows it started.
async fn checkpoint<S: DeltaSink>(batch: BatchSoFar<'_>, id: &str, state: &RunState, sink: &mut S) {
    if sink.checkpoints() {
        sink.checkpoint(&batch.batch_point(state, Some(id), false)).await;
    }
}

/// The agent's approval rules on a call of any kind about to run (`approval::check`), with the
/// answer a resumed batch brought for it. A frontend call that waited for its form before a
/// restart had its approval (if it needed one) in the process that stopped.
async fn approve<S: DeltaSink>(
    ctx: &RunContext,
    asked: approval::Asked<'_>,
    answers: &mut Answers,
    batch: BatchSoFar<'_>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<approval::Verdict, RunFailure> {
    if ctx.agent.approvals.is_empty() || answers.waited_past_approval(asked.call_id) {
        return Ok(approval::Verdict::Run);
    }
    let given = answers.answered(asked.call_id, |kind| kind == WaitKind::Approval);
    approval::check(ctx, asked, given, batch, state, sink).await
}

/// The submit of a frontend call: the answer a resumed batch brought, else (after making the
/// wait durable) the live waiter's. `reveal`: the call was withheld until its approval, so its
/// `tool.start` streams now — after its waiter is registered, so an early submit is matched.
/// `Ok(None)`: timed out; `Err(())`: no waiter could be had.
#[allow(clippy::too_many_arguments)]
async fn frontend_answer<S: DeltaSink>(
    ctx: &RunContext,
    call: &StreamedCall,
    args: &Value,
    reveal: bool,
    answers: &mut Answers,
    batch: BatchSoFar<'_>,
    state: &RunState,
    sink: &mut S,
) -> Result<Result<Option<Value>, ()>, RunFailure> {
    if let Some(answer) = answers.answered(&call.id, |kind| kind == WaitKind::Form) {
        return Ok(Ok(answer));
    }
    let registered = match answers {
        Answers::Live(waiters) if !reveal => waiters.remove(&call.id),
        // Withheld until now, or a later frontend call of a resumed batch.
        _ => ctx.services.submits.register(&ctx.run_id, &call.id),
    };
    let Some(waiter) = registered else { return Ok(Err(())) };
    if reveal {
        let meta = match decorate(ctx, &call.name) {
            Decoration::Tool(meta) => meta,
            Decoration::Action(_) => plain_tool_meta(ctx, &call.name),
        };
        sink.emit(AgentDelta::ToolArgs { tool_id: call.id.clone(), meta, delta: call.arguments.clone() }).await?;
        sink.emit(AgentDelta::ToolEnd { tool_id: call.id.clone() }).await?;
    } else if matches!(answers, Answers::Resumed(_)) {
        // Its tool.start streamed in the process that stopped: the wait is announced here.
        let ask = form_ask(ctx, call, args);
        sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask))).await?;
    }
    sink.waiting(&batch.wait_point(ctx, state, form_ask(ctx, call, args))).await?;
    let answer = waiter.wait(ctx.services.frontend_timeout).await;
    sink.wait_over();
    Ok(Ok(answer))
}
