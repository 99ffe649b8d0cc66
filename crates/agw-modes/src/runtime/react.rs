//! REACT (`docs/contract/modes.md` §4): think → call tools → observe, up to `maxSteps` steps, then one
//! forced answer turn without tools.
//!
//! Steers: every turn takes the waiting ones (`turn::model_turn`). A final answer while steers
//! wait does not end the run: the answer joins the conversation and the next step takes them;
//! an answer in step `maxSteps` with steers waiting goes to the forced final turn instead, whose
//! answer ends the run (an empty one there keeps the earlier answer).

use agw_llm::{ChatMessage, ToolChoice};
use agw_protocol::AgentDelta;
use agw_protocol::history::ResumeAt;

use crate::definition::{Stage, StageKind};

use super::calls::StreamedCall;
use super::execute::{Answers, execute_batch};
use super::tools::StageToolSet;
use super::turn::{TurnSpec, model_turn};
use super::{DeltaSink, RunContext, RunFailure, RunState, stage_prompt};

pub(super) async fn run<S: DeltaSink>(
    ctx: &RunContext,
    react: &Stage,
    max_steps: u32,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let conversation = ctx.opening();
    steps_from(ctx, react, max_steps, 1, conversation, state, sink).await
}

/// Continues a run that waited in step `step` in another process (durable waiting): the
/// waiting turn's batch is finished with its answer, then the loop goes on with step `step + 1`.
/// `conversation` is the chat's window, then this run up to that turn.
#[allow(clippy::too_many_arguments)]
pub(super) async fn resume<S: DeltaSink>(
    ctx: &RunContext,
    react: &Stage,
    max_steps: u32,
    step: u32,
    mut conversation: Vec<ChatMessage>,
    batch: (&[StreamedCall], Answers),
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let tools = StageToolSet::for_stage(ctx, StageKind::React);
    state.resume_at = ResumeAt::ReactStep(step);
    // The next step's line follows each batch at once (a sub-agent's steps are one line, written
    // when it ends: its batches keep their checkpoints).
    state.step_follows_batch = ctx.nesting.depth == 0;
    execute_batch(ctx, &tools, batch.0, batch.1, &mut conversation, state, sink).await?;
    steps_from(ctx, react, max_steps, step + 1, conversation, state, sink).await
}

/// The REACT loop from step `first` on.
pub(super) async fn steps_from<S: DeltaSink>(
    ctx: &RunContext,
    react: &Stage,
    max_steps: u32,
    first: u32,
    mut conversation: Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let model = ctx.agent.resolve_model(StageKind::React, |key| ctx.services.providers.default_model(key));
    let tools = StageToolSet::for_stage(ctx, StageKind::React);
    let system = stage_prompt(ctx, &react.system_prompt, &tools, true);
    // The next step's line follows each batch at once (a sub-agent's steps are one line, written
    // when it ends: its batches keep their checkpoints).
    state.step_follows_batch = ctx.nesting.depth == 0;
    let choice = ctx.agent.tool_choice.to_llm();
    let retries = match state.budget.budget().model.retry_count {
        0 => 1,
        n => n,
    };

    // The last step ended with a final answer, but steers were waiting, so the run went on.
    let mut answered = false;
    for step in first..=max_steps {
        // A wait in this step continues here; the position is spelled as the step's marker.
        state.resume_at = ResumeAt::ReactStep(step);
        sink.emit(AgentDelta::StageMarker(state.resume_at.to_string())).await?;
        let mut attempt = 0;
        let turn = loop {
            let name = if attempt == 0 {
                format!("agent-react-step-{step}")
            } else {
                format!("agent-react-step-{step}-retry-{attempt}")
            };
            let spec = TurnSpec {
                stage_name: &name,
                model: &model,
                system_prompt: &system,
                messages: &mut conversation,
                tools: &tools,
                tool_choice: choice,
                emit_reasoning: model.reasoning.enabled,
                answer: true,
            };
            let out = model_turn(ctx, spec, state, sink).await?;
            // Only REQUIRED retries within a step; AUTO takes whatever the turn gave.
            if out.has_calls() || choice != Some(ToolChoice::Required) || attempt >= retries {
                break out;
            }
            attempt += 1;
        };
        answered = false;
        if turn.has_calls() {
            execute_batch(
                ctx,
                &tools,
                &turn.calls,
                Answers::Live(turn.frontend_waiters),
                &mut conversation,
                state,
                sink,
            )
            .await?;
            continue;
        }
        if choice == Some(ToolChoice::Required) || turn.text.trim().is_empty() {
            continue;
        }
        conversation.push(ChatMessage::Assistant { content: turn.text, tool_calls: Vec::new() });
        if !ctx.steers.has_pending() {
            return Ok("stop".into());
        }
        // Steers arrived while the model answered: the model must see them (next step, or the
        // forced final turn after the last step).
        answered = true;
    }

    // The forced answer has no tools: nothing waits in it. It is marked as one more step.
    state.resume_at = ResumeAt::Nowhere;
    sink.emit(AgentDelta::StageMarker(ResumeAt::ReactStep(max_steps + 1).to_string())).await?;
    let spec = TurnSpec {
        stage_name: "agent-react-final",
        model: &model,
        system_prompt: &system,
        messages: &mut conversation,
        tools: &tools,
        tool_choice: None,
        emit_reasoning: model.reasoning.enabled,
        answer: true,
    };
    let last = model_turn(ctx, spec, state, sink).await?;
    if last.text.trim().is_empty() && !answered {
        return Err(RunFailure::MaxSteps(format!("no usable final answer after maxSteps={max_steps} steps")));
    }
    Ok("stop".into())
}
