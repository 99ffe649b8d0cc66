//! Tools that pause for the user (`docs/pausing-tools.md`): a backend call that answers
//! [`agw_tools::ToolOutput::NeedsUser`] instead of a result pauses the run like a frontend tool.
//! `awaiting.ask` `mode: "status"` shows the tool's status (code -1002, message, data) with the
//! choices `continue` and `cancel`; the answer comes through `POST /api/ap/submit` (key
//! `runId#callId`, the same waiters as frontend tools and approvals), and the wait is durable
//! like theirs. `continue` runs the same call again with the same arguments and
//! `ToolContext::continued` one higher; it may pause again, at most [`MAX_PAUSES`] times. `cancel`,
//! an answer that is neither, and the timeout give the model a result saying the call did not
//! run.

use std::time::Instant;

use serde_json::{Value, json};

use agw_protocol::AgentDelta;
use agw_protocol::event::{AwaitingAnswer, AwaitingAsk, AwaitingExpired, AwaitingStatus, EventPayload, StatusOption};
use agw_tools::{CONTINUE_CODE, Tool, ToolContext, UserReply, UserStatus, exec};

use super::calls::StreamedCall;
use super::execute::{Answers, BatchSoFar, TOOL_DURATION_METRIC};
use super::{DeltaSink, RunContext, RunFailure, RunState};

/// Most times one call pauses for the user; paused once more, the model is told the user could
/// not resolve it.
pub const MAX_PAUSES: u32 = 5;

/// What the user chose for a paused call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusAction {
    /// Run the call again.
    Continue,
    /// Do not run it.
    Cancel,
}

impl StatusAction {
    fn as_str(self) -> &'static str {
        match self {
            StatusAction::Continue => "continue",
            StatusAction::Cancel => "cancel",
        }
    }
}

/// The choice a submit's `params` carries: `"continue"` / `"cancel"`, `{"action": …}`, or
/// `{"code": -2001}` (the source document's resume code: continue). An approval's answer means
/// the same to a client that shows every wait as one (the AI SDK's tool approval): `once` and
/// `always` continue, `reject` cancels. Case and surrounding blanks do not matter; anything else
/// is `None`.
pub(crate) fn action_of(params: &Value) -> Option<StatusAction> {
    let word = |text: &str| match text.trim().to_ascii_lowercase().as_str() {
        "continue" | "once" | "always" => Some(StatusAction::Continue),
        "cancel" | "reject" => Some(StatusAction::Cancel),
        _ => None,
    };
    match params {
        Value::String(text) => word(text),
        Value::Object(map) => {
            if let Some(action) = map.get("action").or_else(|| map.get("decision")) {
                return action.as_str().and_then(word);
            }
            let code = match map.get("code")? {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            (code == Some(CONTINUE_CODE)).then_some(StatusAction::Continue)
        }
        _ => None,
    }
}

fn options() -> Vec<StatusOption> {
    let option = |label: &str, action: &str, description: &str| StatusOption {
        label: label.into(),
        action: action.into(),
        description: description.into(),
    };
    vec![
        option("Continue", "continue", "run the same call again (after you did what the status asks)"),
        option("Cancel", "cancel", "do not run it; the model is told you declined"),
    ]
}

/// The `awaiting.ask` `status` for a paused call; also what a restarted server shows again.
pub(super) fn ask(ctx: &RunContext, call_id: &str, name: &str, args: &Value, status: &UserStatus) -> AwaitingAsk {
    AwaitingAsk {
        awaiting_id: call_id.to_owned(),
        run_id: ctx.run_id.clone(),
        mode: "status".into(),
        timeout: (ctx.services.frontend_timeout.as_millis() as u64).max(1),
        approvals: Vec::new(),
        tool_name: Some(name.to_owned()),
        arguments: Some(args.clone()),
        viewport_type: None,
        viewport_key: None,
        status: Some(Box::new(AwaitingStatus {
            code: status.code,
            message: status.message.clone(),
            data: status.data.clone(),
        })),
        options: options().into(),
    }
}

fn not_run(reason: &str, detail: String) -> String {
    json!({"executed": false, "reason": reason, "detail": detail}).to_string()
}

/// Runs backend call `call` (`name(args)` on `tool`) to its result text, pausing for the user
/// each time the tool asks for them. A call that paused in a process that stopped takes the
/// answer `answers` brought for it first.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_backend<S: DeltaSink>(
    ctx: &RunContext,
    call: &StreamedCall,
    name: &str,
    tool: &dyn Tool,
    args: &Value,
    answers: &mut Answers,
    batch: BatchSoFar<'_>,
    state: &RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let mut continued = 0;
    // The user's reply to the last pause, with what the call paused with.
    let mut reply = None;
    if let Some((before, paused, answer)) = answers.answered_status(&call.id) {
        match settle(ctx, &call.id, &paused.message, answer, sink).await? {
            Ok(answer) => {
                continued = before + 1;
                reply = answer.map(|answer| UserReply { answer, paused_with: paused.data });
            }
            Err(result) => return Ok(result),
        }
    }
    let scope = state.budget.budget().tool;
    loop {
        let tool_ctx = ToolContext::new(ctx.run_id.clone(), ctx.chat_id.clone())
            .with_grants(ctx.agent.code_grants())
            .with_continued(continued)
            .with_reply(reply.take());
        let started = Instant::now();
        let (progress, texts) = futures::channel::mpsc::unbounded();
        let execution = exec::execute_backend_streaming(
            tool,
            args.clone(),
            &tool_ctx,
            std::time::Duration::from_millis(scope.timeout_ms),
            scope.retry_count,
            progress,
        );
        let tool_id = &call.id;
        let outcome = super::progress::forward(execution, texts, sink, |delta| AgentDelta::ToolProgress {
            tool_id: tool_id.clone(),
            delta,
        })
        .await?;
        tracing::debug!(tool = %name, ms = started.elapsed().as_millis() as u64, continued, "backend tool ran");
        metrics::histogram!(TOOL_DURATION_METRIC, "tool" => name.to_owned()).record(started.elapsed().as_secs_f64());
        let status = match outcome {
            exec::BackendOutcome::Result(text) => return Ok(text),
            exec::BackendOutcome::NeedsUser(status) => status,
        };
        if continued >= MAX_PAUSES {
            tracing::info!(run_id = %ctx.run_id, tool = %name, pauses = continued, "a call still needs the user; not paused again");
            let detail = format!(
                "the tool still needs the user after {MAX_PAUSES} pauses, the user could not resolve it: {}",
                status.message
            );
            return Ok(not_run("needs_user_unresolved", detail));
        }
        let Some(waiter) = ctx.services.submits.register(&ctx.run_id, &call.id) else {
            return Ok(exec::error_result(name, &format!("a wait for call {} is already pending", call.id)));
        };
        tracing::info!(run_id = %ctx.run_id, tool = %name, call_id = %call.id, code = status.code, continued, "a call pauses for the user");
        let ask = ask(ctx, &call.id, name, args, &status);
        sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask.clone()))).await?;
        let mut point = batch.wait_point(ctx, state, ask);
        point.continued = continued;
        sink.waiting(&point).await?;
        let answer = waiter.wait(ctx.services.frontend_timeout).await;
        sink.wait_over();
        match settle(ctx, &call.id, &status.message, answer, sink).await? {
            Ok(answer) => {
                continued += 1;
                reply = answer.map(|answer| UserReply { answer, paused_with: status.data.clone() });
            }
            Err(result) => return Ok(result),
        }
    }
}

/// Asks the run's user what a child's paused work (a remote agent's question) needs and waits
/// for the answer: `Ok` to go on (with the user's answer, when they gave one), else why it does
/// not. A child's wait is not durable (its sink keeps no wait point): it lasts as long as this
/// process, like a local child's.
pub(super) async fn ask_child_user<S: DeltaSink>(
    ctx: &RunContext,
    awaiting_id: &str,
    name: &str,
    args: &Value,
    status: &UserStatus,
    sink: &mut S,
) -> Result<Result<Option<Value>, NotAnswered>, RunFailure> {
    let Some(waiter) = ctx.services.submits.register(&ctx.run_id, awaiting_id) else {
        return Ok(Err(NotAnswered(format!("a wait for {awaiting_id} is already pending"))));
    };
    tracing::info!(run_id = %ctx.run_id, tool = %name, awaiting_id, "a child pauses for the user");
    let ask = ask(ctx, awaiting_id, name, args, status);
    sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask))).await?;
    let answer = waiter.wait(ctx.services.frontend_timeout).await;
    Ok(settle(ctx, awaiting_id, &status.message, answer, sink).await?.map_err(NotAnswered))
}

/// Why a child's question got no answer to go on with (declined, expired, not understood): the
/// text of the result a paused call would have given.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct NotAnswered(String);

/// What the answer to a pause means: `Ok` to run the call again (with the `answer` the user
/// gave, when they gave one), else the call's result (after `awaiting.answer` or
/// `awaiting.expired`). `message` is the status the user was shown.
async fn settle<S: DeltaSink>(
    ctx: &RunContext,
    call_id: &str,
    message: &str,
    answer: Option<Value>,
    sink: &mut S,
) -> Result<Result<Option<Value>, String>, RunFailure> {
    let Some(params) = answer else {
        let expired = AwaitingExpired { awaiting_id: call_id.to_owned() };
        sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingExpired(expired))).await?;
        let detail = format!(
            "nobody answered within {} ms; the call did not run: {message}",
            ctx.services.frontend_timeout.as_millis()
        );
        return Ok(Err(not_run("status_expired", detail)));
    };
    let action = action_of(&params);
    let echoed = action.unwrap_or(StatusAction::Cancel);
    let answer = AwaitingAnswer {
        awaiting_id: call_id.to_owned(),
        answer: json!({"mode": "status", "action": echoed.as_str()}),
    };
    sink.emit(AgentDelta::Awaiting(EventPayload::AwaitingAnswer(answer))).await?;
    Ok(match action {
        Some(StatusAction::Continue) => Ok(params.get("answer").filter(|a| !a.is_null()).cloned()),
        Some(StatusAction::Cancel) => Err(not_run("declined", format!("the user declined: {message}"))),
        None => Err(not_run(
            "invalid_answer",
            format!("the answer {params} is not continue or cancel; the call did not run"),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_in_every_accepted_shape() {
        use StatusAction::{Cancel, Continue};
        let cases = [
            (json!("continue"), Some(Continue)),
            (json!(" Cancel "), Some(Cancel)),
            (json!({"action": "continue"}), Some(Continue)),
            (json!({"action": "CANCEL"}), Some(Cancel)),
            (json!({"code": -2001}), Some(Continue)),
            (json!({"code": "-2001"}), Some(Continue)),
            (json!({"code": -1002}), None),
            // An approval's answers (the AI SDK's tool approval).
            (json!("once"), Some(Continue)),
            (json!({"decision": "always"}), Some(Continue)),
            (json!({"decision": "reject"}), Some(Cancel)),
            // Neither.
            (json!({"action": "maybe"}), None),
            (json!({"action": 1, "code": -2001}), None),
            (json!("yes"), None),
            (json!(true), None),
            (json!(null), None),
            (json!({}), None),
            (json!([{"action": "continue"}]), None),
        ];
        for (params, expected) in cases {
            assert_eq!(action_of(&params), expected, "{params}");
        }
    }

    #[test]
    fn the_choices_are_continue_and_cancel() {
        let actions: Vec<String> = options().into_iter().map(|o| o.action).collect();
        assert_eq!(actions, ["continue", "cancel"]);
        for option in options() {
            assert_eq!(action_of(&json!(option.action)).map(StatusAction::as_str), Some(option.action.as_str()));
        }
    }
}
