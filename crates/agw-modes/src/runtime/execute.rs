//! Executing the tool calls of one model turn as a batch (contract `sse-events.md` §6.5,
//! `tools-skills-viewports.md` §5).
//!
//! Order: `tool.end` for every non-action call first (so a frontend tool's end precedes the
//! wait), then the tools run sequentially in call order, then every result in call order.
//! Every executed call adds an assistant tool-call message and its tool message to the
//! conversation, so the history sent back to the provider always pairs calls with results.
//!
//! The plan tools are answered here from the run's plan, never by the registry's implementations;
//! a call that changed the plan is followed by a `plan.update` right after its result.

use std::collections::HashMap;

use agw_llm::{ChatMessage, ToolCallMessage};
use agw_protocol::{AgentDelta, PlanTask};
use agw_tools::templates::{self, RecordedCall};
use agw_tools::{ToolContext, ToolKind, exec};
use serde_json::{Value, json};

use super::approval;
use super::calls::StreamedCall;
use super::plan::is_plan_tool;
use super::submit::PendingSubmit;
use super::tools::StageToolSet;
use super::{DeltaSink, RunContext, RunFailure, RunState};

/// Backend tool execution time (seconds), labelled by tool name.
pub const TOOL_DURATION_METRIC: &str = "agw_tool_duration_seconds";

/// One executed call with its result text.
pub(crate) struct Executed {
    pub id: String,
    pub kind: ToolKind,
    pub result: String,
    /// The plan right after this call, when the call changed it.
    pub plan_after: Option<(String, Vec<PlanTask>)>,
}

/// Runs `calls` (all of them) and streams their ends and results.
pub(crate) async fn execute_batch<S: DeltaSink>(
    ctx: &RunContext,
    tools: &StageToolSet,
    calls: &[StreamedCall],
    mut waiters: HashMap<String, PendingSubmit>,
    conversation: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Vec<Executed>, RunFailure> {
    let kinds: Vec<ToolKind> = calls.iter().map(|c| ctx.services.tools.kind_of(&c.normalized_name())).collect();
    for (call, kind) in calls.iter().zip(&kinds) {
        if *kind != ToolKind::Action {
            sink.emit(AgentDelta::ToolEnd { tool_id: call.id.clone() }).await?;
        }
    }

    let mut executed = Vec::with_capacity(calls.len());
    let mut frontend_timeout = None;
    for (call, kind) in calls.iter().zip(kinds) {
        let name = call.normalized_name();
        let args = templates::resolve(&call.arguments_object(), &state.recorded);
        let mut plan_after = None;
        let result = if !tools.contains(&name) {
            exec::error_result(&name, &format!("Tool is not enabled for this agent: {name}"))
        } else if is_plan_tool(&name)
            && let Some(answer) = state.plan.call(&name, &args)
        {
            if answer.changed {
                plan_after = Some((state.plan.plan_id.clone(), state.plan.tasks.clone()));
            }
            answer.text
        } else {
            match kind {
                ToolKind::Action => "OK".to_string(),
                ToolKind::Frontend => match waiters.remove(&call.id) {
                    Some(waiter) => match waiter.wait(ctx.services.frontend_timeout).await {
                        Some(params) => {
                            if params.is_null() {
                                "{}".into()
                            } else {
                                params.to_string()
                            }
                        }
                        None => {
                            let message =
                                format!("Frontend tool submit timeout runId={}, toolId={}", ctx.run_id, call.id);
                            frontend_timeout = Some(message.clone());
                            json!({"tool": name, "ok": false, "code": "frontend_submit_timeout", "error": message})
                                .to_string()
                        }
                    },
                    None => exec::error_result(
                        &name,
                        &format!("Pending frontend submit already exists: {}#{}", ctx.run_id, call.id),
                    ),
                },
                ToolKind::Backend => match ctx.services.tools.implementation(&name) {
                    Some(_)
                        if !ctx.agent.approvals.is_empty()
                            && let approval::Verdict::Refused(text) =
                                approval::check(ctx, &call.id, &name, &args, state, sink).await? =>
                    {
                        text
                    }
                    Some(tool) => {
                        let scope = state.budget.budget().tool;
                        let tool_ctx = ToolContext::new(ctx.run_id.clone(), ctx.chat_id.clone())
                            .with_grants(ctx.agent.code_grants());
                        let started = std::time::Instant::now();
                        let text = exec::execute_backend(
                            tool.as_ref(),
                            args.clone(),
                            &tool_ctx,
                            std::time::Duration::from_millis(scope.timeout_ms),
                            scope.retry_count,
                        )
                        .await;
                        tracing::debug!(tool = %name, ms = started.elapsed().as_millis() as u64, "backend tool ran");
                        metrics::histogram!(TOOL_DURATION_METRIC, "tool" => name.clone())
                            .record(started.elapsed().as_secs_f64());
                        text
                    }
                    None => exec::error_result(&name, &format!("Unknown tool: {name}")),
                },
            }
        };
        let result = exec::truncate_output(&result, ctx.services.tool_output_limit);
        if tools.contains(&name) {
            // A skill script run discloses the skill's instructions in the next turn.
            state.skills.note_call(ctx, &name, &args);
        }
        state
            .recorded
            .push(RecordedCall { name: name.clone(), result_json: serde_json::from_str::<Value>(&result).ok() });
        conversation.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: call.id.clone(),
                call_type: "function".into(),
                name: name.clone(),
                arguments: args.to_string(),
            }],
        });
        conversation.push(ChatMessage::Tool {
            tool_call_id: call.id.clone(),
            name: name.clone(),
            content: result.clone(),
        });
        executed.push(Executed { id: call.id.clone(), kind, result, plan_after });
    }

    for done in &executed {
        match done.kind {
            ToolKind::Action => {
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
    if let Some(message) = frontend_timeout {
        // The batch that timed out is not charged to the tool budget.
        return Err(RunFailure::FrontendTimeout(message));
    }
    state.budget.add_tool_calls(executed.len() as u32)?;
    Ok(executed)
}
