//! ONESHOT (contract `modes.md` §3): one answer turn, or one tool round then the answer.

use agw_llm::{ChatMessage, ToolChoice};
use agw_protocol::AgentDelta;

use crate::definition::{Stage, StageKind};

use super::execute::execute_batch;
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
    sink.emit(AgentDelta::StageMarker("oneshot".into())).await?;
    let model = ctx.agent.resolve_model(StageKind::Plain, |key| ctx.services.providers.default_model(key));
    let tools = StageToolSet::for_stage(ctx, StageKind::Plain);
    let system = stage_prompt(ctx, &plain.system_prompt, &tools, true);
    let mut conversation = ctx.history.clone();
    conversation.push(ChatMessage::User { content: ctx.user_message.clone() });
    let choice = ctx.agent.tool_choice.to_llm();
    let turn = |name: &'static str, choice: Option<ToolChoice>| TurnSpec {
        stage_name: name,
        model: &model,
        system_prompt: &system,
        messages: &[],
        tools: &tools,
        tool_choice: choice,
        emit_reasoning: model.reasoning.enabled,
    };

    if tools.is_empty() || choice.is_none() {
        model_turn(ctx, TurnSpec { messages: &conversation, ..turn("agent-oneshot", None) }, state, sink).await?;
        return Ok("stop".into());
    }

    let mut first =
        model_turn(ctx, TurnSpec { messages: &conversation, ..turn("agent-oneshot-tool-first", choice) }, state, sink)
            .await?;
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
            let spec = TurnSpec { stage_name: &name, messages: &conversation, ..turn("", Some(ToolChoice::Required)) };
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
    execute_batch(ctx, &tools, &first.calls, first.frontend_waiters, &mut conversation, state, sink).await?;
    model_turn(ctx, TurnSpec { messages: &conversation, ..turn("agent-oneshot-tool-final", None) }, state, sink)
        .await?;
    Ok("stop".into())
}
