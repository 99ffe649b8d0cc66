//! Tool approvals at run time (`toolConfig.approvals`, `docs/approvals.md`): before any call the
//! model makes runs — a backend or MCP tool, a frontend tool, an action — its rule decides:
//! allow, deny, or ask a person. Asking pauses the run like a frontend tool: `awaiting.ask` names
//! the call, its exact arguments and the choices; the answer comes through `POST /api/ap/submit`
//! (key `runId#callId`, the same waiters as frontend tools); `awaiting.answer` echoes it before
//! the call's result. The approval is bound to that call id and the arguments shown: they are
//! exactly what runs.
//!
//! A client acts on a frontend tool's `tool.start` (it renders the form) and on an action's
//! `action.start` (it performs it), so a frontend tool or action whose rule denies it, or asks
//! and has no remembered answer, is withheld from the stream until it is decided
//! ([`withholds`]): allowed, it streams as it would have; refused, it is shown as a tool call
//! with its refusal. `always` is remembered for the agent, the tool and the rule together.

use serde_json::{Value, json};

use agw_protocol::AgentDelta;
use agw_protocol::event::{
    ApprovalOption, ApprovalRequest, AwaitingAnswer, AwaitingAsk, AwaitingExpired, EventPayload,
};
use agw_tools::ToolKind;

use crate::definition::{ApprovalDecision, ApprovalRule};

use super::execute::BatchSoFar;
use super::{DeltaSink, RunContext, RunFailure, RunState};

/// What happens to a call after its approval check.
pub(super) enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; this is the call's result for the model.
    Refused(String),
}

fn refused(reason: &str, detail: String) -> Verdict {
    Verdict::Refused(json!({"executed": false, "reason": reason, "detail": detail}).to_string())
}

/// Whether this agent's call of `tool` under `rule` was answered `always` (in this chat, or
/// earlier in this run).
fn remembered(state: &RunState, tool: &str, rule: &ApprovalRule) -> bool {
    state.approved.contains(&(tool.to_owned(), rule.pattern.clone()))
}

/// Whether a call of `name` (normalized), seen as its name streams, must be held back from the
/// client: a frontend tool or action that a rule denies, or asks about without a remembered
/// answer. Backend tools stream as always (the client does nothing with them).
pub(super) fn withholds(ctx: &RunContext, state: &RunState, name: &str) -> bool {
    if ctx.agent.approvals.is_empty() || ctx.services.tools.kind_of(name) == ToolKind::Backend {
        return false;
    }
    match ctx.agent.approvals.decide_by_name(name) {
        Some(rule) => match rule.decision {
            ApprovalDecision::Allow => false,
            ApprovalDecision::Deny => true,
            ApprovalDecision::Ask => !remembered(state, name, rule),
        },
        None => false,
    }
}

/// The decision a submit's `params` carries: `"once"`, `{"decision":"once"}`, or the successor's
/// `{"approvals":[{"id","decision"}]}` (the entry for this call, else the first).
fn decision_of(params: &Value, call_id: &str) -> Option<String> {
    let raw = match params {
        Value::String(s) => Some(s.as_str()),
        Value::Object(map) => match map.get("approvals").and_then(Value::as_array) {
            Some(list) => {
                list.iter().find(|a| a["id"] == call_id).or_else(|| list.first()).and_then(|a| a["decision"].as_str())
            }
            None => map.get("decision").and_then(Value::as_str),
        },
        _ => None,
    }?;
    let decision = raw.trim().to_ascii_lowercase();
    matches!(decision.as_str(), "once" | "always" | "reject").then_some(decision)
}

fn options() -> Vec<ApprovalOption> {
    let option = |label: &str, decision: &str, description: &str| ApprovalOption {
        label: label.into(),
        decision: decision.into(),
        description: description.into(),
    };
    vec![
        option("Allow once", "once", "run this call"),
        option(
            "Always allow",
            "always",
            "run this call and, in this chat, every call of this tool by this agent that this rule would ask about",
        ),
        option("Reject", "reject", "do not run it; the model is told you rejected it"),
    ]
}

/// The call an approval is about.
pub(super) struct Asked<'a> {
    pub call_id: &'a str,
    pub name: &'a str,
    pub args: &'a Value,
}

/// Checks a call `name(args)` with id `call_id` against the agent's approval rules, asking a
/// person when a rule says so — unless `given` already holds the answer (a run that waited for
/// it in another process; `Some(None)`: that wait timed out).
pub(super) async fn check<S: DeltaSink>(
    ctx: &RunContext,
    asked: Asked<'_>,
    given: Option<Option<Value>>,
    batch: BatchSoFar<'_>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Verdict, RunFailure> {
    let Asked { call_id, name, args } = asked;
    let rule = match ctx.agent.approvals.decide(name, args) {
        Ok(Some(rule)) => rule,
        Ok(None) => return Ok(Verdict::Run),
        Err(unreadable) => {
            // `_bash_` would refuse it too; no rule is asked, nobody is shown a command that
            // reads differently from what would run.
            tracing::warn!(run_id = %ctx.run_id, tool = %name, call_id, error = %unreadable, "command refused before the approval rules");
            return Ok(refused("invalid_command", unreadable.to_string()));
        }
    };
    match rule.decision {
        ApprovalDecision::Allow => return Ok(Verdict::Run),
        ApprovalDecision::Deny => {
            tracing::info!(run_id = %ctx.run_id, tool = %name, call_id, rule = %rule.pattern, "call denied by an approval rule");
            return Ok(refused("denied", format!("denied by policy {}", rule.pattern)));
        }
        ApprovalDecision::Ask if remembered(state, name, rule) => return Ok(Verdict::Run),
        ApprovalDecision::Ask => {}
    }
    let timeout = ctx.services.frontend_timeout;
    let answer = match given {
        Some(answer) => answer,
        None => {
            let Some(waiter) = ctx.services.submits.register(&ctx.run_id, call_id) else {
                return Ok(refused("rejected", "an approval for this call is already pending".into()));
            };
            let ask = ask(ctx, call_id, name, args, &rule.pattern);
            sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask.clone()))).await?;
            sink.waiting(&batch.wait_point(ctx, state, ask)).await?;
            let answer = waiter.wait(timeout).await;
            sink.wait_over();
            answer
        }
    };
    let Some(params) = answer else {
        let expired = AwaitingExpired { awaiting_id: call_id.to_owned() };
        sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingExpired(expired))).await?;
        return Ok(refused("approval_expired", format!("nobody approved within {} ms", timeout.as_millis())));
    };
    let decision = decision_of(&params, call_id);
    let echoed = decision.clone().unwrap_or_else(|| "reject".into());
    let answer = AwaitingAnswer {
        awaiting_id: call_id.to_owned(),
        answer: json!({"mode": "approval", "status": "answered", "approvals": [{"id": call_id, "decision": echoed}]}),
    };
    sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAnswer(answer))).await?;
    Ok(match decision.as_deref() {
        Some("once") => Verdict::Run,
        Some("always") => {
            state.approved.insert((name.to_owned(), rule.pattern.clone()));
            Verdict::Run
        }
        Some(_) => refused("rejected", "the user rejected this call".into()),
        None => refused("invalid_decision", format!("the answer {params} is not once, always or reject")),
    })
}

/// The `awaiting.ask` `approval` for a call; also what a restarted server shows again.
pub(super) fn ask(ctx: &RunContext, call_id: &str, name: &str, args: &Value, rule: &str) -> AwaitingAsk {
    let command = match args.get("command").and_then(Value::as_str) {
        Some(command) if name == "_bash_" => command.to_owned(),
        _ => name.to_owned(),
    };
    let description = ctx.services.tools.get(name).map(|d| d.description.clone()).filter(|d| !d.is_empty());
    AwaitingAsk {
        awaiting_id: call_id.to_owned(),
        run_id: ctx.run_id.clone(),
        mode: "approval".into(),
        timeout: (ctx.services.frontend_timeout.as_millis() as u64).max(1),
        approvals: vec![ApprovalRequest {
            id: call_id.to_owned(),
            command,
            description,
            options: options(),
            allow_free_text: false,
            tool_name: name.to_owned(),
            arguments: args.clone(),
            rule: rule.to_owned(),
            agent_key: ctx.agent.key.clone(),
        }],
        tool_name: None,
        arguments: None,
        viewport_type: None,
        viewport_key: None,
        status: None,
        options: Box::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_read_in_every_accepted_shape() {
        assert_eq!(decision_of(&json!("once"), "c"), Some("once".into()));
        assert_eq!(decision_of(&json!({"decision": " Always "}), "c"), Some("always".into()));
        let successor = json!({"approvals": [{"id": "x", "decision": "once"}, {"id": "c", "decision": "reject"}]});
        assert_eq!(decision_of(&successor, "c"), Some("reject".into()));
        assert_eq!(decision_of(&json!({"decision": "sure"}), "c"), None);
        assert_eq!(decision_of(&json!(true), "c"), None);
    }
}
