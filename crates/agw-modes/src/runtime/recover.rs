//! Resuming a run whose process stopped while it was in flight (crash recovery,
//! `docs/run-lifecycle.md`): from its last completed step, repeating no completed model turn
//! and no tool call that may not run twice.

use agw_llm::ChatMessage;
use agw_protocol::history::{AwaitingCall, AwaitingResult, ResumeAt};

use super::calls::StreamedCall;
use super::execute::Answers;
use super::{
    DeltaSink, RunContext, RunFailure, RunOutcome, continue_handoffs, finish, new_state, oneshot, plan_execute, react,
    restore_calls, trace,
};
use crate::definition::ModeDef;

/// A run in flight when its process stopped, as its history and run mark left it.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// The run's messages so far (its user message first; a tool batch's calls are not in it);
    /// the chat's earlier turns are the context's `history`.
    pub conversation: Vec<ChatMessage>,
    /// Where the run goes on.
    pub at: RecoverAt,
    /// The run's written step lines, in order (PLAN_EXECUTE rebuilds its task conversation
    /// from them).
    pub steps: Vec<agw_protocol::history::RecoveredStep>,
    /// The current batch's step as far as it was recorded (at the end of `conversation` too).
    pub pending: Vec<ChatMessage>,
    /// The conversation was handed over to another agent in the run: `conversation` and `steps`
    /// are then the continuing agent's part only.
    pub handoff: Option<RecoveredHandoff>,
    /// The round of parallel plan tasks that was running (not on record yet), each task as far
    /// as it got; empty when none was.
    pub round: Vec<agw_protocol::history::RecoveredTask>,
    /// The sub-agents of the batch's running `agent_invoke` call, each as far as it got; empty
    /// when they kept no checkpoints.
    pub sub_agents: Vec<agw_protocol::history::RecoveredTask>,
}

/// The last handoff of a run being resumed: which agent continues, and what it was handed.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredHandoff {
    /// The agent that handed the conversation over.
    pub from_agent_key: String,
    /// The agent that continues it (the one the run resumes with).
    pub to_agent_key: String,
    /// The run's messages up to and with the handoff's step (its user message first).
    pub handing: Vec<ChatMessage>,
    /// Handoffs the run had made.
    pub count: u32,
}

/// Where a resumed run goes on.
#[derive(Debug, Clone, PartialEq)]
pub enum RecoverAt {
    /// With the model turn after its written steps: the first turn again when none was
    /// written, else REACT step `steps_done + 1`.
    NextTurn {
        /// REACT steps written whole.
        steps_done: u32,
    },
    /// Inside the tool batch of step `resume_at`.
    Batch {
        /// The batch's step.
        resume_at: ResumeAt,
        /// Its calls, in call order.
        calls: Vec<AwaitingCall>,
        /// Results of those that finished.
        results: Vec<AwaitingResult>,
        /// The call that was running: run again only when idempotent.
        running: Option<String>,
        /// Every result had streamed: the run goes on with its next model turn.
        done: bool,
    },
}

/// Continues the run described by `recovery`, streaming into `sink` (whose numbering and
/// recording continue the run's), with the agent it was handed over to when it was. REACT,
/// ONESHOT and PLAN_EXECUTE runs continue; any other position ends the run with `run.error`
/// `recovery_exhausted` saying it cannot be resumed.
pub async fn recover<S: DeltaSink>(ctx: RunContext, recovery: Recovery, sink: &mut S) -> RunOutcome {
    let Recovery { conversation: so_far, at, steps, pending, handoff, round, sub_agents } = recovery;
    let (ctx, handoffs) = match handoff {
        None => (ctx, 0),
        Some(handoff) => match continued_context(ctx, handoff) {
            Ok(continued) => continued,
            Err(failure) => return RunOutcome::Failed(failure.to_error_info()),
        },
    };
    let span = trace::invoke_agent(&ctx);
    let mut state = new_state(&ctx);
    state.handoffs = handoffs;
    // `steps_done` of a next turn; for a batch, 1 when it was done.
    let (calls, answers, resume_at, steps_done) = match at {
        RecoverAt::Batch { resume_at, calls, results, running, done } => {
            let calls: Vec<StreamedCall> = calls.iter().map(StreamedCall::restored).collect();
            let answers = Answers::after_crash(results, running, sub_agents);
            (calls, Some(answers), Some(resume_at), if done { 1 } else { 0 })
        }
        RecoverAt::NextTurn { steps_done } => (Vec::new(), None, None, steps_done),
    };
    restore_calls(&ctx, &mut state, &so_far, &calls);
    let mut conversation = ctx.history.clone();
    conversation.extend(so_far);
    let fut = async {
        let ended = match (&ctx.agent.mode, resume_at, answers) {
            (ModeDef::React { react, max_steps }, Some(ResumeAt::ReactStep(step)), Some(answers))
                if steps_done == 0 =>
            {
                let batch = (calls.as_slice(), answers);
                react::resume(&ctx, react, *max_steps, step, conversation, batch, &mut state, sink).await
            }
            (ModeDef::React { react, max_steps }, Some(ResumeAt::ReactStep(step)), _) => {
                react::steps_from(&ctx, react, *max_steps, step + 1, conversation, &mut state, sink).await
            }
            (ModeDef::React { react, max_steps }, None, _) => {
                react::steps_from(&ctx, react, *max_steps, steps_done + 1, conversation, &mut state, sink).await
            }
            (ModeDef::Oneshot { plain }, Some(ResumeAt::Oneshot), Some(answers)) if steps_done == 0 => {
                oneshot::resume(&ctx, plain, conversation, (calls.as_slice(), answers), &mut state, sink).await
            }
            (ModeDef::Oneshot { plain }, Some(ResumeAt::Oneshot), _) => {
                oneshot::final_turn(&ctx, plain, conversation, &mut state, sink).await
            }
            (ModeDef::Oneshot { plain }, None, _) if steps_done == 0 => {
                oneshot::run(&ctx, plain, &mut state, sink).await
            }
            (ModeDef::PlanExecute { plan, deep_thinking, execute, summary, max_steps, parallel }, at, answers)
                if matches!(at, None | Some(ResumeAt::ExecuteTask(_))) =>
            {
                let stages =
                    plan_execute::Stages { plan, deep_thinking: *deep_thinking, execute, summary, parallel: *parallel };
                // Inside a task's batch the recorder holds the task's step; a batch that had
                // streamed all its results is finished: the task's rounds go on.
                let in_step = at.is_some();
                let batch = answers.filter(|_| steps_done == 0).map(|answers| (calls.as_slice(), answers));
                let written = plan_execute::Written { steps: &steps, pending, in_step, round: &round };
                plan_execute::recover(&ctx, stages, *max_steps, written, batch, &mut state, sink).await
            }
            (_, at, _) => Err(RunFailure::Unrecoverable(format!(
                "this run of agent {} stopped at {:?}, where its mode cannot be resumed",
                ctx.agent.key,
                at.map(|at| at.to_string()).unwrap_or_else(|| format!("step {}", steps_done + 1))
            ))),
        };
        continue_handoffs(&ctx, ended, &mut state, sink).await
    };
    let outcome = finish(&ctx, &span, fut).await;
    trace::run_ended(&span, &outcome, &state.usage);
    outcome
}

/// The context of the agent a run was handed over to, as [`super::handoff::hand_over`] built it
/// in the process that stopped (crash recovery, durable waiting): its definition, the handing conversation through the handoff's
/// input filter as its history, the handing agent named.
pub(super) fn continued_context(ctx: RunContext, handoff: RecoveredHandoff) -> Result<(RunContext, u32), RunFailure> {
    let RecoveredHandoff { from_agent_key, to_agent_key, handing, count } = handoff;
    let Some(to) = ctx.services.agents.get(&to_agent_key) else {
        return Err(RunFailure::Unrecoverable(format!(
            "agent {to_agent_key}, which the run was handed over to, is no longer loaded"
        )));
    };
    let filter = ctx
        .services
        .agents
        .get(&from_agent_key)
        .and_then(|from| from.handoffs.iter().find(|h| h.agent_key == to_agent_key).map(|h| h.input_filter))
        .unwrap_or_default();
    let mut conversation = ctx.history.clone();
    conversation.extend(handing);
    let history_runs = match filter {
        crate::definition::InputFilter::All => ctx.history_runs.clone(),
        _ => Vec::new(),
    };
    let continued = RunContext {
        agent: to,
        history: super::handoff::filtered(conversation, filter),
        history_runs,
        initial_plan: None,
        handed_from: Some(from_agent_key),
        ..ctx
    };
    Ok((continued, count))
}
