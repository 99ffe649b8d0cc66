//! `agent_invoke`: an agent runs other agents as sub-agents, in parallel, and gets their answers
//! back as one tool result (docs/multi-agent.md).
//!
//! The model may only name the agents its definition lists in `toolConfig.subAgents`. Each task
//! is a whole run of its agent (any mode) inside this run: same run id and chat, its own
//! budget, its own tools, skills and code grants narrowed by the parent's (approval rules and
//! sandbox grants only narrow), no memory of the chat, and no steers. Its deltas stream into
//! the parent's stream as a child task ([`super::children`]); its messages never enter the
//! parent's conversation — only the aggregate answer does.

use std::sync::Arc;

use agw_protocol::{AgentDelta, ChildTask, ids};
use agw_tools::{ToolDef, ToolKind, exec};
use serde::Deserialize;
use serde_json::{Value, json};

use agw_protocol::history::{RecoveredTask, ResumeAt};
use agw_protocol::{ErrorCode, RunErrorInfo};

use super::calls::StreamedCall;
use super::children::{ChildReport, end_of, run_children};
use super::recover::{RecoverAt, Recovery};
use super::{DeltaSink, RunContext, RunFailure, RunOutcome, RunServices, RunState, SteerQueue, TaskPoint};
use crate::definition::{AgentDefinition, ModeDef};

/// The built-in tool's name.
pub const AGENT_INVOKE_TOOL: &str = "agent_invoke";

/// The hard cap on [`SubAgentLimits::max_depth`], whatever the settings say.
pub const MAX_DEPTH_CAP: u32 = 4;

/// How far sub-agents may go (settings `subAgentMaxTasks`, `subAgentMaxDepth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubAgentLimits {
    /// Most tasks in one `agent_invoke` call.
    pub max_tasks: usize,
    /// How many levels of sub-agents below a run (1: sub-agents cannot invoke agents
    /// themselves); capped at [`MAX_DEPTH_CAP`].
    pub max_depth: u32,
}

impl Default for SubAgentLimits {
    fn default() -> Self {
        Self { max_tasks: 5, max_depth: 1 }
    }
}

/// Where a run sits below the run its client started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nesting {
    /// 0 for a run a client started; a sub-agent's run is one deeper than its parent.
    pub depth: u32,
    /// Put before every tool-call id the run mints, so a sub-agent's calls never share an id
    /// with the rest of the stream (empty at depth 0).
    pub call_prefix: String,
}

/// `agent_invoke`'s definition for this run's agent: `None` when it lists no sub-agents or is
/// as deep as runs may go.
pub(crate) fn tool_def(ctx: &RunContext) -> Option<ToolDef> {
    if ctx.agent.sub_agents.is_empty() || ctx.nesting.depth >= depth_limit(&ctx.services) {
        return None;
    }
    let mut lines = Vec::new();
    for key in &ctx.agent.sub_agents {
        if let Some(tool) = remote_tool(ctx, key) {
            let about =
                tool.description().lines().next().unwrap_or_default().trim_start_matches("Ask a remote agent (A2A). ");
            lines.push(format!("- {key}: a remote agent. {}", about.trim()));
            continue;
        }
        match ctx.services.agents.get(key) {
            Some(agent) => lines.push(format!("- {key}: {}", agent.description.trim())),
            None => {
                tracing::warn!(agent = %ctx.agent.key, sub_agent = %key, "toolConfig.subAgents names an agent that does not exist")
            }
        }
    }
    let max_tasks = ctx.services.sub_agents.max_tasks.max(1);
    let description = format!(
        "Run tasks on other agents (sub-agents). The tasks run at the same time, each as a whole run of its agent \
         that starts with nothing but the task text, and you get every task's final answer back in input order. \
         Give each task everything it needs to know. At most {max_tasks} tasks per call. Agents:\n{}",
        lines.join("\n")
    );
    let parameters = json!({
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_tasks,
                "items": {
                    "type": "object",
                    "properties": {
                        "subAgentKey": {"type": "string", "enum": ctx.agent.sub_agents, "description": "The agent that does the task."},
                        "task": {"type": "string", "description": "What the agent is asked to do: its whole user message."},
                        "taskName": {"type": "string", "description": "A short name for people watching."}
                    },
                    "required": ["subAgentKey", "task"]
                }
            }
        },
        "required": ["tasks"]
    });
    Some(ToolDef {
        name: AGENT_INVOKE_TOOL.to_owned(),
        description,
        after_call_hint: String::new(),
        parameters,
        kind: ToolKind::Backend,
        tool_api: None,
        viewport_key: None,
        citations: None,
        idempotent: false,
    })
}

fn depth_limit(services: &RunServices) -> u32 {
    services.sub_agents.max_depth.min(MAX_DEPTH_CAP)
}

/// One entry of `tasks`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskArg {
    sub_agent_key: String,
    task: String,
    #[serde(default)]
    task_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InvokeArgs {
    tasks: Vec<TaskArg>,
}

/// A task that passed the checks.
struct Planned {
    task_id: String,
    arg: TaskArg,
    doer: Doer,
}

/// Who does a task: an agent of this server, or a remote A2A agent (`a2a:<name>` in
/// `subAgents`, docs/a2a.md), called through its tool.
enum Doer {
    Local(Arc<AgentDefinition>),
    Remote(Arc<dyn agw_tools::Tool>),
}

/// The prefix of a remote A2A agent in `toolConfig.subAgents`.
const REMOTE_PREFIX: &str = "a2a:";

/// The tool of the remote agent `key` names (`a2a:<name>`), when it is declared.
fn remote_tool(ctx: &RunContext, key: &str) -> Option<Arc<dyn agw_tools::Tool>> {
    let name = key.strip_prefix(REMOTE_PREFIX)?;
    ctx.services.tools.implementation(&agw_tools::a2a_tool_name(name))
}

/// Runs an `agent_invoke` call: the tasks' children stream into `sink`; the result is the
/// aggregate the model reads (or an error result naming what was wrong with the call, with
/// nothing run). The children's usage becomes this run's (budgets). `resumed`: the call was
/// running when its process stopped and its children kept checkpoints (crash recovery) — those
/// that ended stand, the others go on from their checkpoints.
pub(crate) async fn invoke<S: DeltaSink>(
    ctx: &RunContext,
    call_id: &str,
    args: &Value,
    resumed: Option<Vec<RecoveredTask>>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let planned = match plan(ctx, call_id, args) {
        Ok(planned) => planned,
        Err(message) => return Ok(exec::error_result(AGENT_INVOKE_TOOL, &message)),
    };
    let resumed = resumed.unwrap_or_default();
    let found = |task: &Planned| resumed.iter().find(|r| r.task_id == task.task_id);
    if resumed.is_empty() && sink.checkpoints() {
        let tasks = planned.iter().map(|t| t.task_id.clone()).collect();
        sink.task_checkpoint(TaskPoint::Round { tasks, call: Some(call_id.to_owned()) }).await;
    }
    let mut reports: Vec<Option<(ChildReport, RunOutcome)>> =
        planned.iter().map(|t| found(t).filter(|r| r.ended).map(ended_report)).collect();
    for (task, _) in planned.iter().zip(&reports).filter(|(_, ended)| ended.is_none()) {
        let child = ChildTask {
            task_id: task.task_id.clone(),
            task_name: task.arg.task_name.clone(),
            description: Some(task.arg.task.clone()),
            sub_agent_key: Some(task.arg.sub_agent_key.clone()),
            tool_id: Some(call_id.to_owned()),
        };
        sink.emit(AgentDelta::ChildStart(child)).await?;
    }
    let children = planned
        .iter()
        .enumerate()
        .filter(|(at, _)| reports[*at].is_none())
        .map(|(at, t)| (t.task_id.clone(), (at, t, found(t).cloned())))
        .collect();
    let checkpoints = sink.checkpoints();
    let ran = run_children(sink, children, checkpoints, |(at, task, before), mut child_sink| {
        let local = match &task.doer {
            Doer::Local(agent) => Ok(child_context(ctx, &task.arg, &task.task_id, agent)),
            Doer::Remote(tool) => Err(tool.clone()),
        };
        async move {
            // Boxed: a run that invokes runs is a recursive future.
            let outcome = match (local, before) {
                (Ok(child_ctx), None) => Box::pin(super::execute(child_ctx, &mut child_sink)).await,
                (Ok(child_ctx), Some(before)) => resume_child(child_ctx, before, &mut child_sink).await,
                (Err(tool), None) => remote_child(ctx, tool.as_ref(), &task.task_id, &task.arg, &mut child_sink).await,
                (Err(_), Some(_)) => {
                    let message = "agw stopped while the remote agent worked on this task; the message was not sent \
                                   again";
                    RunOutcome::Failed(RunErrorInfo::new(ErrorCode::RecoveryExhausted, message, false))
                }
            };
            (child_sink, end_of(&outcome), (at, outcome))
        }
    })
    .await?;
    for (report, (at, outcome)) in ran {
        for call in &report.usage {
            let tokens = agw_protocol::usage::TokenCounts::from_usage(&call.usage);
            state.usage.add_counts(&call.provider, &call.model, &tokens, 1);
        }
        reports[at] = Some((report, outcome));
    }
    let reports: Vec<(ChildReport, RunOutcome)> = reports.into_iter().flatten().collect();
    Ok(aggregate(&planned, &reports))
}

/// A task of a remote A2A agent: its tool called with the task as the message, the remote
/// answer streamed into the child's lane as it arrives (the remote task's progress in this run's
/// stream), its end the remote task's. A remote question (`INPUT_REQUIRED`, with the declaration's
/// default `inputRequired: "ask"`) asks the run's user like a paused tool of a local child:
/// `awaiting.ask` in the child's lane, answered through the root run, the answer sent to the
/// remote task, which goes on (it may ask again, at most [`super::pause::MAX_PAUSES`] times).
async fn remote_child<S: DeltaSink>(
    ctx: &RunContext,
    tool: &dyn agw_tools::Tool,
    task_id: &str,
    arg: &TaskArg,
    sink: &mut S,
) -> RunOutcome {
    let args = json!({"message": arg.task});
    let mut continued = 0;
    let mut reply = None;
    let output = loop {
        let tool_ctx = agw_tools::ToolContext::new(ctx.run_id.clone(), ctx.chat_id.clone())
            .with_continued(continued)
            .with_reply(reply.take());
        let Some(output) = remote_call(tool, &args, &tool_ctx, sink).await else {
            return RunOutcome::Disconnected;
        };
        let status = match output {
            Ok(agw_tools::ToolOutput::NeedsUser(status)) if continued < super::pause::MAX_PAUSES => status,
            other => break other,
        };
        // Unique in the run: a child's ids carry its task id.
        let awaiting_id = format!("{task_id}_ask_{continued}");
        match super::pause::ask_child_user(ctx, &awaiting_id, tool.name(), &args, &status, sink).await {
            Err(_) => return RunOutcome::Disconnected,
            Ok(Ok(answer)) => {
                continued += 1;
                reply = answer.map(|answer| agw_tools::UserReply { answer, paused_with: status.data.clone() });
            }
            Ok(Err(not_run)) => {
                let message = format!("the remote agent asked for input and got none: {not_run}");
                return RunOutcome::Failed(RunErrorInfo::new(ErrorCode::ProviderError, message, false));
            }
        }
    };
    let result = match output {
        Ok(agw_tools::ToolOutput::Json(value)) => value,
        Ok(agw_tools::ToolOutput::NeedsUser(status)) => {
            json!({"state": "input_required", "question": format!("still asking after {continued} answers: {}", status.message)})
        }
        Ok(other) => json!({"state": "failed", "error": format!("{other:?}")}),
        Err(error) => json!({"state": "failed", "error": error.to_string()}),
    };
    let state = result["state"].as_str().unwrap_or("failed");
    if state == "completed" {
        return RunOutcome::Completed { finish_reason: "stop".into() };
    }
    let why = result["question"].as_str().or(result["error"].as_str()).unwrap_or_default();
    let message = format!("the remote agent's task ended {state}: {why}");
    RunOutcome::Failed(RunErrorInfo::new(ErrorCode::ProviderError, message, false))
}

/// One call of a remote agent's tool, its streamed text emitted into the child's lane as it
/// arrives; `None` when the sink is gone.
async fn remote_call<S: DeltaSink>(
    tool: &dyn agw_tools::Tool,
    args: &Value,
    tool_ctx: &agw_tools::ToolContext,
    sink: &mut S,
) -> Option<Result<agw_tools::ToolOutput, agw_tools::ToolError>> {
    let (text, texts) = futures::channel::mpsc::unbounded::<String>();
    let call = tool.call_streaming(args.clone(), tool_ctx, text);
    super::progress::forward(call, texts, sink, AgentDelta::Content).await.ok()
}

/// What a sub-agent that ended before its process stopped left: its answer (the text of its
/// last answer) and how it ended, from its step line.
fn ended_report(task: &RecoveredTask) -> (ChildReport, RunOutcome) {
    let answer = task
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            agw_llm::ChatMessage::Assistant { content, .. } if !content.is_empty() => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let frame = task.sub_agent.as_deref();
    let outcome = match frame.map(|f| f.status.as_str()) {
        Some("failed") => {
            let error = frame
                .and_then(|f| f.error.clone())
                .unwrap_or_else(|| agw_protocol::TaskError::new("internal", "the sub-agent failed"));
            RunOutcome::Failed(RunErrorInfo::new(ErrorCode::from_wire(&error.code), error.message, false))
        }
        Some("cancelled") => RunOutcome::Disconnected,
        _ => RunOutcome::Completed { finish_reason: "stop".into() },
    };
    (ChildReport { answer, usage: Vec::new() }, outcome)
}

/// A sub-agent that was running when its process stopped goes on from its last checkpoint: the
/// calls of an interrupted batch are shown again and the batch is finished (a call with effects
/// that was running is answered "interrupted"), then its mode goes on — a PLAN_EXECUTE sub-agent
/// from its stages (plan, tasks) as its step recorded where each began. Its type erased: the
/// resumed mode may invoke sub-agents in turn, so the future types would contain themselves.
fn resume_child<S: DeltaSink>(
    ctx: RunContext,
    before: RecoveredTask,
    sink: &mut S,
) -> futures::future::BoxFuture<'_, RunOutcome> {
    Box::pin(resume_child_from(ctx, before, sink))
}

async fn resume_child_from<S: DeltaSink>(ctx: RunContext, before: RecoveredTask, sink: &mut S) -> RunOutcome {
    let RecoveredTask { messages, batch, mut stages, .. } = before;
    // A batch the mode cannot go on from (a plan stage's) is as good as none.
    let batch = batch.filter(|b| b.resume_at != ResumeAt::Nowhere);
    let plan_execute = matches!(ctx.agent.mode, ModeDef::PlanExecute { .. });
    if plan_execute && stages.is_empty() && !messages.is_empty() {
        // Recorded before its stages were: where it was is unknown, so it starts over when that
        // is harmless.
        if agent_rerunnable(&ctx) {
            return super::execute(ctx, sink).await;
        }
        let message = "agw stopped while this sub-agent was running; its tools may have taken effect, so it was not \
                       run again";
        return RunOutcome::Failed(RunErrorInfo::new(ErrorCode::RecoveryExhausted, message, false));
    }
    let open: Vec<StreamedCall> =
        batch.iter().filter(|b| !b.done).flat_map(|b| b.calls.iter().map(StreamedCall::restored)).collect();
    if let Err(failure) = super::children::show_again(&ctx, &open, sink).await {
        return RunOutcome::Failed(failure.to_error_info());
    }
    // The open stage: what its step holds so far, unless it is a plan stage that had run its
    // batch (the plan was made) — then it is a written stage like the others.
    let mut pending = Vec::new();
    if let Some(last) = stages.pop() {
        if last.stage == "plan" && batch.is_none() {
            stages.push(last);
        } else {
            pending = last.messages;
        }
    }
    let at = match batch {
        Some(b) => RecoverAt::Batch {
            resume_at: b.resume_at,
            calls: b.calls,
            results: b.results,
            running: b.running,
            done: b.done,
        },
        // REACT: the steps it went through are done (its open one is asked again).
        None => RecoverAt::NextTurn { steps_done: stages.iter().filter(|s| s.stage == "react").count() as u32 },
    };
    let mut conversation = vec![agw_llm::ChatMessage::user(ctx.user_message.clone())];
    conversation.extend(messages);
    let recovery = Recovery {
        conversation,
        at,
        steps: if plan_execute { stages } else { Vec::new() },
        pending,
        handoff: None,
        round: Vec::new(),
        sub_agents: Vec::new(),
    };
    super::recover::recover(ctx, recovery, sink).await
}

/// Whether an `agent_invoke` call that was running when its process stopped may run again
/// (crash recovery, `docs/run-lifecycle.md`): nothing of it was recorded (its children's lines
/// are written when the last one ends), so all its tasks start over — which is only safe when
/// their agents can do nothing that must not happen twice: in every stage, every tool they are
/// offered is idempotent, a plan tool or a question for a person (an MCP server whose tools are
/// not listed yet counts as having effects), and so are their own sub-agents'. A call that
/// would be refused runs again as well (it ran nothing).
pub(crate) fn rerunnable(ctx: &RunContext, call_id: &str, args: &Value) -> bool {
    let Ok(planned) = plan(ctx, call_id, args) else { return true };
    planned.iter().all(|task| match &task.doer {
        Doer::Local(agent) => agent_rerunnable(&child_context(ctx, &task.arg, &task.task_id, agent)),
        // A remote agent may have acted on the message.
        Doer::Remote(_) => false,
    })
}

fn agent_rerunnable(ctx: &RunContext) -> bool {
    use crate::definition::StageKind;
    [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary]
        .into_iter()
        .all(|kind| stage_rerunnable(ctx, kind))
}

/// Whether what a stage of `ctx`'s agent may call can all happen twice (see [`rerunnable`]).
pub(crate) fn stage_rerunnable(ctx: &RunContext, kind: crate::definition::StageKind) -> bool {
    // An MCP server whose tools are not known yet may offer anything.
    let servers_known =
        ctx.agent.stage_tools(kind).mcp_servers.iter().all(|s| ctx.services.mcp_tools.contains_key(&s.server));
    let tools = super::tools::StageToolSet::for_stage(ctx, kind);
    servers_known
        && tools.defs().iter().all(|def| match def.kind {
            ToolKind::Frontend => true,
            ToolKind::Action => false,
            ToolKind::Backend if def.name == AGENT_INVOKE_TOOL => ctx.agent.sub_agents.iter().all(|key| {
                !key.starts_with(REMOTE_PREFIX)
                    && ctx.services.agents.get(key).is_none_or(|agent| {
                        let arg = TaskArg { sub_agent_key: key.clone(), task: String::new(), task_name: None };
                        agent_rerunnable(&child_context(ctx, &arg, "", &agent))
                    })
            }),
            ToolKind::Backend => super::plan::is_plan_tool(&def.name) || ctx.services.tools.is_idempotent(&def.name),
        })
}

/// Checks the call against the agent's `subAgents`, the catalog and the limits.
fn plan(ctx: &RunContext, call_id: &str, args: &Value) -> Result<Vec<Planned>, String> {
    if ctx.nesting.depth >= depth_limit(&ctx.services) {
        return Err("sub-agents cannot invoke agents at this depth".to_owned());
    }
    let parsed: InvokeArgs = serde_json::from_value(args.clone())
        .map_err(|e| format!("arguments must be {{\"tasks\": [{{\"subAgentKey\", \"task\", \"taskName\"?}}]}}: {e}"))?;
    let max_tasks = ctx.services.sub_agents.max_tasks.max(1);
    if parsed.tasks.is_empty() || parsed.tasks.len() > max_tasks {
        return Err(format!("give 1 to {max_tasks} tasks, not {}", parsed.tasks.len()));
    }
    let mut planned = Vec::with_capacity(parsed.tasks.len());
    for (index, arg) in parsed.tasks.into_iter().enumerate() {
        let key = arg.sub_agent_key.trim();
        if !ctx.agent.sub_agents.iter().any(|k| k == key) {
            return Err(format!(
                "`{key}` is not an agent this agent may invoke (it may invoke: {})",
                ctx.agent.sub_agents.join(", ")
            ));
        }
        let doer = match remote_tool(ctx, key) {
            Some(tool) => Doer::Remote(tool),
            None if key.starts_with(REMOTE_PREFIX) => return Err(format!("no remote agent `{key}` is declared")),
            None => Doer::Local(ctx.services.agents.get(key).ok_or_else(|| format!("no agent `{key}` is loaded"))?),
        };
        if arg.task.trim().is_empty() {
            return Err(format!("the task for `{key}` is empty"));
        }
        planned.push(Planned { task_id: ids::task_id_for_call(call_id, index), arg, doer });
    }
    Ok(planned)
}

/// The child's context: its own definition with the parent's approval rules and sandbox grants
/// on top (permissions only narrow), the parent's run, chat, quotas and services, but none of
/// the chat's history, no client-declared tools and no steers.
fn child_context(ctx: &RunContext, arg: &TaskArg, task_id: &str, agent: &AgentDefinition) -> RunContext {
    let agent = narrowed(agent, &ctx.agent);
    let services = if ctx.services.client_tools.is_empty() {
        ctx.services.clone()
    } else {
        Arc::new(RunServices { client_tools: Vec::new(), ..(*ctx.services).clone() })
    };
    RunContext {
        run_id: ctx.run_id.clone(),
        chat_id: ctx.chat_id.clone(),
        agent: Arc::new(agent),
        user_message: arg.task.clone(),
        user_attachments: Vec::new(),
        history: Vec::new(),
        history_runs: Vec::new(),
        initial_plan: None,
        services,
        remembered_approvals: ctx.remembered_approvals.clone(),
        steers: Arc::new(SteerQueue::default()),
        quota: ctx.quota.clone(),
        nesting: Nesting {
            depth: ctx.nesting.depth + 1,
            call_prefix: format!("{}{}_", ctx.nesting.call_prefix, task_id),
        },
        handed_from: None,
    }
}

/// `child` as it runs under `parent`: its own definition, with the parent's approval rules on
/// top of its own and only the sandbox grants both have.
fn narrowed(child: &AgentDefinition, parent: &AgentDefinition) -> AgentDefinition {
    let mut agent = child.clone();
    agent.approvals = child.approvals.narrowed_by(&parent.approvals);
    agent.sandbox_network &= parent.sandbox_network;
    agent.sandbox_unix_sockets &= parent.sandbox_unix_sockets;
    agent.allow_inline_code &= parent.allow_inline_code;
    agent
}

/// `{"tasks": [...]}` in input order: each task's agent, name, status and answer or error.
fn aggregate(planned: &[Planned], reports: &[(ChildReport, RunOutcome)]) -> String {
    let tasks: Vec<Value> = planned
        .iter()
        .zip(reports)
        .map(|(task, (report, outcome))| {
            let mut entry = json!({
                "taskId": task.task_id,
                "subAgentKey": task.arg.sub_agent_key.trim(),
                "taskName": task.arg.task_name.clone().unwrap_or_else(|| task.task_id.clone()),
            });
            match outcome {
                RunOutcome::Completed { .. } => {
                    entry["status"] = "completed".into();
                    entry["answer"] = report.answer.clone().into();
                }
                RunOutcome::Failed(info) => {
                    entry["status"] = "failed".into();
                    entry["error"] = json!({"code": info.code.as_str(), "message": info.message});
                }
                RunOutcome::Disconnected => {
                    entry["status"] = "cancelled".into();
                    entry["error"] = json!({"code": "cancelled", "message": "the task was cancelled"});
                }
            }
            entry
        })
        .collect();
    json!({ "tasks": tasks }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::ApprovalDecision;

    fn agent(key: &str, extra: Value) -> AgentDefinition {
        let mut root = json!({"key": key, "mode": "REACT", "modelConfig": {"providerKey": "p"},
            "react": {"systemPrompt": "x"}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            root[k] = v.clone();
        }
        AgentDefinition::from_json(&format!("{key}.json"), &root.to_string()).expect("agent")
    }

    #[test]
    fn a_child_keeps_only_the_grants_both_have_and_takes_on_the_parents_rules() {
        let parent = agent(
            "lead",
            json!({"sandbox": {"network": true}, "toolConfig": {"approvals": {"_bash_": "deny", "mock_*": "allow"}}}),
        );
        let child = agent(
            "worker",
            json!({"sandbox": {"network": true, "unixSockets": true}, "skillConfig": {"allowInlineCode": true},
                "toolConfig": {"approvals": {"mock_city_weather": "ask"}}}),
        );
        let run = narrowed(&child, &parent);
        assert!(run.sandbox_network, "both grant it");
        assert!(!run.sandbox_unix_sockets && !run.allow_inline_code, "the parent grants neither");
        let decide = |tool: &str| run.approvals.decide_by_name(tool).map(|rule| rule.decision);
        assert_eq!(
            run.approvals.decide("_bash_", &json!({"command": "ls"})).unwrap().map(|r| r.decision),
            Some(ApprovalDecision::Deny)
        );
        assert_eq!(
            decide("mock_city_weather"),
            Some(ApprovalDecision::Ask),
            "a parent's allow never loosens the child's ask"
        );
        assert_eq!(decide("mock_todo_tasks"), Some(ApprovalDecision::Allow));
        assert_eq!(run.key, "worker", "the child's own definition otherwise");
    }
}
