//! ONESHOT: one answer turn (contract `modes.md` §3). Tools arrive with the tools issue.

use agw_llm::ChatMessage;
use agw_protocol::AgentDelta;

use crate::definition::{Stage, StageKind};

use super::turn::{TurnSpec, model_turn};
use super::{BudgetTracker, DeltaSink, RunContext, RunFailure, prompt};

/// Runs the plain stage; returns the finish reason for `run.complete`.
pub(super) async fn run<S: DeltaSink>(
    ctx: &RunContext,
    plain: &Stage,
    budget: &mut BudgetTracker,
    sink: &mut S,
) -> Result<String, RunFailure> {
    sink.emit(AgentDelta::StageMarker("oneshot".into())).await?;
    let model = ctx.agent.resolve_model(StageKind::Plain, |key| ctx.providers.default_model(key));
    let system = prompt::assemble(&[&plain.system_prompt]);
    let mut conversation = ctx.history.clone();
    conversation.push(ChatMessage::User { content: ctx.user_message.clone() });
    model_turn(
        ctx,
        TurnSpec {
            stage_name: "agent-oneshot",
            model: &model,
            system_prompt: &system,
            messages: &conversation,
            tools: Vec::new(),
            tool_choice: None,
        },
        budget,
        sink,
    )
    .await?;
    Ok("stop".into())
}
