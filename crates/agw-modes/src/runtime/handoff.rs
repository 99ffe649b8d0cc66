//! Handoffs (docs/multi-agent.md, "Handoffs"): an agent hands the conversation to another agent
//! it lists in `toolConfig.handoffs`, through one `transfer_to_<agentKey>` tool per target.
//!
//! The transfer call is answered like any tool call; once its batch is done the handing agent's
//! mode ends ([`RunFailure::HandedOff`] unwinds it from wherever the batch ran) and [`execute`]
//! continues the same run with the target agent: same run id, sink and chat, the target's own
//! definition (tools, approvals, budget), the conversation so far (through the handoff's input
//! filter) as its history. Handoffs are offered to runs a client started only (not to
//! sub-agents), in the ONESHOT and REACT stages, at most [`MAX_HANDOFFS`] per run.
//!
//! [`execute`]: super::execute

use std::sync::Arc;

use agw_llm::ChatMessage;
use agw_protocol::AgentDelta;
use agw_tools::{ToolDef, ToolKind, exec};
use serde_json::json;

use super::{DeltaSink, RunContext, RunFailure, RunState};
use crate::definition::{AgentDefinition, InputFilter, TRANSFER_TOOL_PREFIX};

/// Most handoffs in one run: a chain (or a ping-pong) of agents ends there; a transfer past it
/// is answered with an error and the agent has to answer itself.
pub const MAX_HANDOFFS: u32 = 5;

/// A handoff the running agent made: carried out of its mode by [`RunFailure::HandedOff`].
#[derive(Debug)]
pub struct HandedOff {
    /// The agent that continues, as the catalog snapshot of the run has it.
    pub to: Arc<AgentDefinition>,
    /// What of `conversation` it receives.
    pub filter: InputFilter,
    /// The transfer call.
    pub tool_id: String,
    /// The handing agent's conversation when it handed over: the chat's window, this run's user
    /// message, everything since (the transfer call and its result last).
    pub conversation: Vec<ChatMessage>,
}

/// Whether `name` (normalised) is a transfer tool's name.
pub(crate) fn is_transfer(name: &str) -> bool {
    name.starts_with(TRANSFER_TOOL_PREFIX)
}

/// The transfer tools of this run's agent: one per listed handoff whose target is loaded;
/// none for a sub-agent (its task is its own agent's).
pub(crate) fn tool_defs(ctx: &RunContext) -> Vec<ToolDef> {
    if ctx.nesting.depth > 0 {
        return Vec::new();
    }
    let mut defs = Vec::new();
    for handoff in &ctx.agent.handoffs {
        let Some(target) = ctx.services.agents.get(&handoff.agent_key) else {
            tracing::warn!(agent = %ctx.agent.key, handoff = %handoff.agent_key, "toolConfig.handoffs names an agent that does not exist");
            continue;
        };
        let when = handoff.description.as_deref().unwrap_or_else(|| target.description.trim());
        defs.push(ToolDef {
            name: handoff.tool_name(),
            description: format!(
                "Hand the conversation over to the agent {} ({}). It continues the conversation with the user; \
                 you stop here. {when}",
                target.key, target.name
            ),
            after_call_hint: String::new(),
            parameters: json!({"type": "object", "properties": {}}),
            kind: ToolKind::Backend,
            tool_api: None,
            viewport_key: None,
            citations: None,
            idempotent: false,
        });
    }
    defs
}

/// The answer to a transfer call that was not offered to the agent.
pub(crate) fn not_offered(ctx: &RunContext, name: &str) -> String {
    let listed: Vec<&str> = ctx.agent.handoffs.iter().map(|h| h.agent_key.as_str()).collect();
    let message = if listed.is_empty() || ctx.nesting.depth > 0 {
        format!("{name}: this agent cannot hand the conversation to other agents")
    } else {
        format!("{name}: not an agent this agent may hand off to (it may hand off to: {})", listed.join(", "))
    };
    exec::error_result(name, &message)
}

/// The answer to a call after a transfer in the same batch: not run, the conversation moved on.
pub(crate) fn not_executed() -> String {
    json!({"executed": false, "reason": "handed off"}).to_string()
}

/// How a transfer call is answered.
pub(crate) enum Transfer {
    /// The handoff happens once the batch is done; `result` answers the call.
    Made { result: String, handed: HandedOff },
    /// Not possible: the error result says why, and the agent goes on.
    Refused(String),
}

/// Runs an offered transfer call: checks the run's handoff count and the catalog.
pub(crate) fn transfer(ctx: &RunContext, state: &RunState, name: &str, call_id: &str) -> Transfer {
    let Some(handoff) = ctx.agent.handoffs.iter().find(|h| h.tool_name() == name) else {
        return Transfer::Refused(not_offered(ctx, name));
    };
    if state.handoffs >= MAX_HANDOFFS {
        let message = format!(
            "this run already handed the conversation over {MAX_HANDOFFS} times, the most a run may: answer the user yourself"
        );
        return Transfer::Refused(exec::error_result(name, &message));
    }
    let Some(to) = ctx.services.agents.get(&handoff.agent_key) else {
        return Transfer::Refused(exec::error_result(name, &format!("no agent `{}` is loaded", handoff.agent_key)));
    };
    let result = json!({"transferred": true, "toAgentKey": to.key}).to_string();
    let handed = HandedOff { to, filter: handoff.input_filter, tool_id: call_id.to_owned(), conversation: Vec::new() };
    Transfer::Made { result, handed }
}

/// What the next agent receives of the conversation so far.
pub(crate) fn filtered(conversation: Vec<ChatMessage>, filter: InputFilter) -> Vec<ChatMessage> {
    match filter {
        InputFilter::All => conversation,
        InputFilter::NoToolCalls => conversation
            .into_iter()
            .filter_map(|message| match message {
                ChatMessage::Tool { .. } => None,
                ChatMessage::Assistant { content, .. } if content.trim().is_empty() => None,
                ChatMessage::Assistant { content, .. } => {
                    Some(ChatMessage::Assistant { content, tool_calls: Vec::new() })
                }
                other => Some(other),
            })
            .collect(),
        InputFilter::LastUserMessage => {
            conversation.into_iter().rev().find(|m| matches!(m, ChatMessage::User { .. })).into_iter().collect()
        }
    }
}

/// Announces the handoff and turns the run over to the next agent: its context (the same run,
/// the next agent's definition, the filtered conversation as history) and its state (the run's
/// call ids, usage, plan and recorded calls go on; budget, skills and approvals are the next
/// agent's own).
pub(crate) async fn hand_over<S: DeltaSink>(
    ctx: &RunContext,
    handed: HandedOff,
    state: &mut RunState,
    sink: &mut S,
) -> Result<RunContext, RunFailure> {
    let HandedOff { to, filter, tool_id, conversation } = handed;
    tracing::info!(run_id = %ctx.run_id, from = %ctx.agent.key, to = %to.key, "handoff");
    sink.emit(AgentDelta::Handoff { from_agent_key: ctx.agent.key.clone(), to_agent_key: to.key.clone(), tool_id })
        .await?;
    let history_runs = match filter {
        // Positions of stored runs are only known in the unfiltered conversation.
        InputFilter::All => ctx.history_runs.clone(),
        InputFilter::NoToolCalls | InputFilter::LastUserMessage => Vec::new(),
    };
    let next = RunContext {
        agent: to,
        history: filtered(conversation, filter),
        history_runs,
        // The plan was shown when the run started; the run's state keeps it.
        initial_plan: None,
        handed_from: Some(ctx.agent.key.clone()),
        ..ctx.clone()
    };
    let mut fresh = super::new_state(&next);
    fresh.call_ids = std::mem::take(&mut state.call_ids);
    fresh.recorded = std::mem::take(&mut state.recorded);
    fresh.plan = std::mem::replace(&mut state.plan, super::plan::PlanState::for_chat(&ctx.chat_id));
    fresh.usage = std::mem::take(&mut state.usage);
    fresh.handoffs = state.handoffs + 1;
    *state = fresh;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_llm::ToolCallMessage;

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::user("earlier"),
            ChatMessage::Assistant { content: "earlier answer".into(), tool_calls: Vec::new() },
            ChatMessage::user("my invoice is wrong"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCallMessage {
                    id: "t1".into(),
                    call_type: "function".into(),
                    name: "lookup".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool { tool_call_id: "t1".into(), name: "lookup".into(), content: "{}".into() },
            ChatMessage::Assistant { content: "Let me pass you on.".into(), tool_calls: Vec::new() },
        ]
    }

    #[test]
    fn all_keeps_everything() {
        assert_eq!(filtered(conversation(), InputFilter::All), conversation());
    }

    #[test]
    fn no_tool_calls_keeps_the_texts() {
        let kept = filtered(conversation(), InputFilter::NoToolCalls);
        let texts: Vec<&str> = kept
            .iter()
            .map(|m| match m {
                ChatMessage::User { content, .. } | ChatMessage::Assistant { content, .. } => content.as_str(),
                _ => panic!("no tool messages: {m:?}"),
            })
            .collect();
        assert_eq!(texts, ["earlier", "earlier answer", "my invoice is wrong", "Let me pass you on."]);
    }

    #[test]
    fn last_user_message_keeps_only_it() {
        assert_eq!(filtered(conversation(), InputFilter::LastUserMessage), [ChatMessage::user("my invoice is wrong")]);
    }
}
