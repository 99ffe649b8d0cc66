//! One model turn: build the request, stream it, forward deltas to the sink.

use std::time::Duration;

use agw_llm::{CallOptions, ChatMessage, ChatRequest, LlmDelta, ToolChoice, ToolSpec};
use agw_protocol::AgentDelta;
use futures::StreamExt;

use crate::definition::ResolvedModel;

use super::{BudgetTracker, DeltaSink, RunContext, RunFailure};

/// What a turn needs beyond the run context.
pub(crate) struct TurnSpec<'a> {
    /// Stage name (`agent-oneshot`, …): logged and sent as `x-agw-stage`.
    pub stage_name: &'a str,
    pub model: &'a ResolvedModel,
    pub system_prompt: &'a str,
    /// Conversation without the system message.
    pub messages: &'a [ChatMessage],
    pub tools: Vec<ToolSpec>,
    pub tool_choice: Option<ToolChoice>,
}

/// The accumulated result of a turn.
#[derive(Debug, Default)]
pub(crate) struct TurnOutput {
    /// All content text of the turn, untrimmed.
    pub text: String,
    pub finish_reason: Option<String>,
}

/// Streams one model turn. Every upstream text chunk is forwarded to the sink the moment it
/// arrives — the sink's `emit` is awaited before the next chunk is read, so a slow client slows
/// the provider stream instead of growing a buffer.
pub(crate) async fn model_turn<S: DeltaSink>(
    ctx: &RunContext,
    spec: TurnSpec<'_>,
    budget: &mut BudgetTracker,
    sink: &mut S,
) -> Result<TurnOutput, RunFailure> {
    budget.begin_model_call()?;
    let provider = ctx.providers.get(&spec.model.provider_key)?;

    let mut messages = Vec::with_capacity(spec.messages.len() + 1);
    if !spec.system_prompt.trim().is_empty() {
        messages.push(ChatMessage::System { content: spec.system_prompt.to_string() });
    }
    messages.extend_from_slice(spec.messages);
    let request = ChatRequest {
        provider_key: spec.model.provider_key.clone(),
        model: spec.model.model.clone(),
        messages,
        tool_choice: if spec.tools.is_empty() { None } else { spec.tool_choice },
        tools: spec.tools,
        reasoning: spec.model.reasoning,
        temperature: spec.model.temperature,
        top_p: spec.model.top_p,
        max_tokens: spec.model.max_tokens,
    };
    let options = CallOptions {
        inactivity_timeout: Duration::from_millis(budget.budget().model.timeout_ms),
        stage: spec.stage_name.to_string(),
        run_id: ctx.run_id.clone(),
        ..CallOptions::default()
    };
    let emit_reasoning = spec.model.reasoning.enabled;
    tracing::debug!(stage = spec.stage_name, model = %request.model, provider = %request.provider_key, "model turn");

    let mut stream = provider.stream(request, options).await?;
    let mut out = TurnOutput::default();
    while let Some(item) = stream.next().await {
        match item? {
            LlmDelta::Reasoning { text } => {
                // Reasoning of a stage with reasoning off is neither streamed nor kept.
                if emit_reasoning {
                    sink.emit(AgentDelta::Reasoning(text)).await?;
                }
            }
            LlmDelta::Content { text } => {
                out.text.push_str(&text);
                sink.emit(AgentDelta::Content(text)).await?;
            }
            LlmDelta::ToolCall(_) => {
                // No tools are offered in this build's modes; a provider that calls one anyway
                // is ignored rather than trusted.
                tracing::warn!(stage = spec.stage_name, "provider sent a tool call although no tools were offered");
            }
            LlmDelta::Finish { reason } => out.finish_reason = Some(reason),
            LlmDelta::Usage { usage } => sink.emit(AgentDelta::Usage(usage)).await?,
        }
    }
    Ok(out)
}
