//! ONESHOT (`docs/contract/modes.md` §3): one answer turn, or one tool round then the answer.
//!
//! Steers: each turn takes the waiting ones (`turn::model_turn`); the run ends with its answer
//! even if more arrived meanwhile (they come back from `SteerQueue::close`).

use agw_llm::{ChatMessage, ToolChoice};
use agw_protocol::AgentDelta;
use agw_protocol::history::ResumeAt;

use crate::definition::{ResolvedModel, Stage, StageKind};

use super::calls::StreamedCall;
use super::execute::{Answers, execute_batch};
use super::prompt::StagePrompt;
use super::tools::StageToolSet;
use super::turn::{TurnSpec, model_turn};
use super::{DeltaSink, RunContext, RunFailure, RunState, stage_prompt};

/// Runs the plain stage; returns the finish reason for `run.complete`.
pub(super) async fn run<S: DeltaSink>(
    ctx: &RunContext,
    plain: &Stage,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    sink.emit(AgentDelta::StageMarker(ResumeAt::Oneshot.to_string())).await?;
    let model = ctx.agent.resolve_model(StageKind::Plain, |key| ctx.services.providers.default_model(key));
    let tools = StageToolSet::for_stage(ctx, StageKind::Plain);
    let system = stage_prompt(ctx, &plain.system_prompt, &tools, true);
    let mut conversation = ctx.opening();
    let choice = ctx.agent.tool_choice.to_llm();
    let turns = Turns { model: &model, system: &system, tools: &tools };

    if tools.is_empty() || choice.is_none() {
        model_turn(ctx, turns.spec("agent-oneshot", None, &mut conversation), state, sink).await?;
        return Ok("stop".into());
    }

    let mut first =
        model_turn(ctx, turns.spec("agent-oneshot-tool-first", choice, &mut conversation), state, sink).await?;
    if !first.has_calls() && choice == Some(ToolChoice::Required) {
        let repairs = match state.budget.budget().model.retry_count {
            0 => 2,
            n => n,
        };
        for attempt in 1..=repairs {
            let name = if attempt == 1 {
                "agent-oneshot-tool-first-repair".to_string()
            } else {
                format!("agent-oneshot-tool-first-repair-{attempt}")
            };
            let spec = turns.spec(&name, Some(ToolChoice::Required), &mut conversation);
            first = model_turn(ctx, spec, state, sink).await?;
            if first.has_calls() {
                break;
            }
        }
        if !first.has_calls() {
            return Err(RunFailure::ToolRequired("toolChoice REQUIRED, but the model did not call a tool".into()));
        }
    }
    if !first.has_calls() {
        // AUTO and no tool: the streamed text was the answer.
        return Ok("stop".into());
    }
    state.resume_at = ResumeAt::Oneshot;
    execute_batch(ctx, &tools, &first.calls, Answers::Live(first.frontend_waiters), &mut conversation, state, sink)
        .await?;
    model_turn(ctx, turns.spec("agent-oneshot-tool-final", None, &mut conversation), state, sink).await?;
    Ok("stop".into())
}

/// Continues a run that waited in its tool round in another process (durable waiting): the
/// round is finished with its answer, then the final answer turn runs. `conversation` is the
/// chat's window, then this run up to the tool round.
pub(super) async fn resume<S: DeltaSink>(
    ctx: &RunContext,
    plain: &Stage,
    mut conversation: Vec<ChatMessage>,
    batch: (&[StreamedCall], Answers),
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let tools = StageToolSet::for_stage(ctx, StageKind::Plain);
    state.resume_at = ResumeAt::Oneshot;
    execute_batch(ctx, &tools, batch.0, batch.1, &mut conversation, state, sink).await?;
    final_turn(ctx, plain, conversation, state, sink).await
}

/// Continues a run whose tool round finished (every result streamed) in a process that
/// stopped before its answer (crash recovery): the final answer turn runs. `conversation` is
/// the chat's window, then this run up to and with the tool round.
pub(super) async fn final_turn<S: DeltaSink>(
    ctx: &RunContext,
    plain: &Stage,
    mut conversation: Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let model = ctx.agent.resolve_model(StageKind::Plain, |key| ctx.services.providers.default_model(key));
    let tools = StageToolSet::for_stage(ctx, StageKind::Plain);
    let system = stage_prompt(ctx, &plain.system_prompt, &tools, true);
    let turns = Turns { model: &model, system: &system, tools: &tools };
    state.resume_at = ResumeAt::Oneshot;
    model_turn(ctx, turns.spec("agent-oneshot-tool-final", None, &mut conversation), state, sink).await?;
    Ok("stop".into())
}

/// What every turn of the plain stage shares.
struct Turns<'a> {
    model: &'a ResolvedModel,
    system: &'a StagePrompt,
    tools: &'a StageToolSet,
}

impl Turns<'_> {
    fn spec<'b>(
        &'b self,
        stage_name: &'b str,
        tool_choice: Option<ToolChoice>,
        messages: &'b mut Vec<ChatMessage>,
    ) -> TurnSpec<'b> {
        TurnSpec {
            stage_name,
            model: self.model,
            system_prompt: self.system,
            messages,
            tools: self.tools,
            tool_choice,
            emit_reasoning: self.model.reasoning.enabled,
            answer: true,
        }
    }
}
