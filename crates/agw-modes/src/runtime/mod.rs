//! Running an agent: the sealed mode state machines and what they share.
//!
//! A run is `execute(ctx, sink)`: it dispatches on the agent's [`ModeDef`] (a sealed enum, so a
//! new mode is a compile error everywhere it matters), enforces the run budget, and reports a
//! [`RunOutcome`]. Modes talk to providers only through [`agw_llm::ChatProvider`], to tools only
//! through the run's tool registry, and to the outside world only through a [`DeltaSink`] — and
//! take steered user messages from the run's [`SteerQueue`] at every model-turn boundary (see
//! the [`SteerQueue`] docs for the semantics). Quotas shared with other runs are asked before
//! every model call and told its usage through the context's [`QuotaGate`].

mod approval;
mod budget;
mod calls;
mod children;
mod citations;
mod context;
mod doom;
mod execute;
mod failure;
mod fallback;
mod guard;
mod handoff;
mod invoke;
mod meter;
mod oneshot;
mod output;
mod parallel;
mod pause;
mod plan;
mod plan_execute;
mod progress;
mod prompt;
mod quota;
mod react;
mod recover;
mod sink;
mod skills;
mod steer;
mod submit;
mod tools;
mod trace;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use agw_llm::{ChatMessage, ProviderRegistry};
use agw_protocol::RunErrorInfo;
use agw_protocol::history::{PlanSnapshot, ResumeAt};
use agw_skills::SkillRegistry;
use agw_tools::ToolRegistry;
use agw_tools::templates::RecordedCall;
use agw_tools::viewport::ViewportRegistry;

use crate::definition::{AgentDefinition, ModeDef};

pub use budget::BudgetTracker;
pub use citations::{CITATIONS_METRIC, UNKNOWN_CITATIONS_METRIC};
pub use context::{
    DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS, HistoryCompaction, OUTPUT_RESERVE_CAP, SUMMARY_STAGE,
    SummaryError, compact_history, pruned_marker, usable_tokens,
};
pub use failure::RunFailure;
pub use fallback::{
    CooldownStore, Cooldowns, DEFAULT_COOLDOWN, DEFAULT_MAX_COOLDOWN, FALLBACKS_METRIC, LocalCooldowns, cooldown_key,
};
pub use guard::{
    ClassifyError, ClassifyRequest, FailMode, GUARD_CHECK_DURATION_METRIC, GUARD_VERDICTS_METRIC, GuardClassifier,
    GuardServices, missing_rule_sets,
};
pub use handoff::{HandedOff, MAX_HANDOFFS};
pub use invoke::{AGENT_INVOKE_TOOL, MAX_DEPTH_CAP, Nesting, SubAgentLimits};
pub use meter::{COST_METRIC, MODEL_CALL_DURATION_METRIC, TOKENS_METRIC};
pub use pause::MAX_PAUSES;
pub use quota::{CallSpend, QuotaGate, QuotaRefused};
pub use recover::{RecoverAt, RecoveredHandoff, Recovery, recover};
pub use sink::{BatchPoint, CollectingSink, DeltaSink, EmitError, TaskPoint, WaitPoint};
pub use steer::{DEFAULT_STEER_CAPACITY, Steer, SteerQueue, SteerRefused};
pub use submit::{FrontendSubmits, PendingSubmit, SubmitStatus};
pub use trace::{Propagate, RunTracing, TRACE_TARGET};

/// Default cap on one tool result handed to the model (50 KiB).
pub const DEFAULT_TOOL_OUTPUT_LIMIT: usize = 50 * 1024;

/// Default cap on the MCP tool definitions offered in one model request (2 MiB).
pub const DEFAULT_MCP_REQUEST_TOOL_BYTES: usize = 2 * 1024 * 1024;

/// The shared services a run uses. A run holds the snapshots it started with: reloading a
/// registry swaps the server's copy, not the run's.
#[derive(Clone)]
pub struct RunServices {
    /// Model providers by key.
    pub providers: Arc<ProviderRegistry>,
    /// Tools the agents' tool names resolve against.
    pub tools: Arc<ToolRegistry>,
    /// Gives a frontend tool's `tool.start` its `toolType` (`html` when its viewport is unknown).
    pub viewports: Arc<ViewportRegistry>,
    /// Where frontend tool calls wait for `POST /api/ap/submit`; shared with the HTTP layer.
    pub submits: Arc<FrontendSubmits>,
    /// How long a frontend tool waits for `POST /api/ap/submit`.
    pub frontend_timeout: Duration,
    /// Tool results longer than this (bytes) are cut with a notice to the model.
    pub tool_output_limit: usize,
    /// Skills the agents may list in their prompts and run through `_skill_run_script_`.
    pub skills: Arc<SkillRegistry>,
    /// Skill instructions longer than this are truncated when disclosed (0 = unlimited).
    pub skill_max_prompt_chars: usize,
    /// Prices of the providers' models: `budget.maxCost` is checked with them.
    pub prices: Arc<agw_protocol::usage::PriceTable>,
    /// Frontend tools the client declared for this run (in `tools`, see
    /// `ToolRegistry::with_client_tools`): offered in every stage but the planning stages.
    pub client_tools: Vec<String>,
    /// Trace-context propagation and content capture of the run's spans.
    pub tracing: RunTracing,
    /// The tools of each MCP server, for `toolConfig.mcpServers` (empty: no MCP servers).
    pub mcp_tools: Arc<McpToolIndex>,
    /// Most bytes of MCP tool definitions (name, description, schema) offered in one model
    /// request: MCP servers write their own definitions, and every request carries them.
    pub mcp_request_tool_bytes: usize,
    /// The agents `agent_invoke` may run, as of the run's start (docs/multi-agent.md).
    pub agents: Arc<crate::definition::AgentCatalog>,
    /// How many sub-agent tasks one call may start, and how deep they may nest.
    pub sub_agents: SubAgentLimits,
    /// The server's default guards, the classifier webhook, judge and failure settings
    /// (docs/guardrails.md).
    pub guards: Arc<GuardServices>,
    /// The guardrails catalog's rule sets (`rules:<set>`), as of the run's start.
    pub guard_rules: Arc<agw_guard::GuardCatalog>,
    /// Models that failed recently and how long a failure keeps a model aside
    /// (`modelConfig.fallbacks`, docs/models.md); shared by every run of the process, or of a
    /// cluster.
    pub cooldowns: Cooldowns,
}

impl RunServices {
    /// Services with these providers and tools and the rest at its default: no viewports,
    /// skills, MCP servers, sub-agents, guards or prices; a frontend tool waits 5 minutes (the
    /// server's default); results are cut at [`DEFAULT_TOOL_OUTPUT_LIMIT`]; model cool-downs are
    /// kept in a store of their own. For embedders and
    /// tests (the run service builds its own from the settings); change a field with
    /// `RunServices { frontend_timeout, ..RunServices::new(providers, tools) }`.
    pub fn new(providers: Arc<ProviderRegistry>, tools: Arc<ToolRegistry>) -> Self {
        RunServices {
            providers,
            tools,
            viewports: Arc::default(),
            submits: Arc::default(),
            frontend_timeout: Duration::from_secs(300),
            tool_output_limit: DEFAULT_TOOL_OUTPUT_LIMIT,
            skills: Arc::default(),
            skill_max_prompt_chars: 8000,
            prices: Arc::default(),
            client_tools: Vec::new(),
            tracing: RunTracing::default(),
            mcp_tools: Arc::default(),
            mcp_request_tool_bytes: DEFAULT_MCP_REQUEST_TOOL_BYTES,
            agents: Arc::default(),
            sub_agents: SubAgentLimits::default(),
            guards: Arc::default(),
            guard_rules: Arc::default(),
            cooldowns: Cooldowns::local(),
        }
    }
}

/// MCP server name → its tools as `(name on the server, name in the tool registry)`.
pub type McpToolIndex = std::collections::BTreeMap<String, Vec<(String, String)>>;

/// Everything a run needs besides its sink.
#[derive(Clone)]
pub struct RunContext {
    /// The run's id, as in its events.
    pub run_id: String,
    /// The chat the run belongs to.
    pub chat_id: String,
    /// The definition the run started with; later catalog reloads do not affect it.
    pub agent: Arc<AgentDefinition>,
    /// The user's message, sent verbatim as the last user turn.
    pub user_message: String,
    /// The images and files sent with it, checked (`agw_protocol::attachment`).
    pub user_attachments: Vec<agw_llm::request::Attachment>,
    /// Earlier turns of this chat (already windowed), inserted between system prompt and message.
    pub history: Vec<ChatMessage>,
    /// Where each stored run begins in `history` (context compaction summarises whole runs);
    /// empty: unknown, no summary of stored runs (the fallback applies).
    pub history_runs: Vec<agw_protocol::chat::HistoryRun>,
    /// The chat's latest stored plan. A non-empty one is shown first (`plan.update`, any mode)
    /// and seeds the run's plan, keeping its `planId`.
    pub initial_plan: Option<PlanSnapshot>,
    /// Registries and limits, as of the run's start.
    pub services: Arc<RunServices>,
    /// The chat's remembered approvals (its approval lines): a call whose agent, tool and rule
    /// one of them names is not asked about again; the others are ignored.
    pub remembered_approvals: Vec<agw_protocol::history::ApprovalLine>,
    /// Steered user messages for this run, shared with whoever accepts `POST /api/ap/steer`.
    /// Every model turn takes what is waiting; the run never closes it — the caller of
    /// [`execute`] calls [`SteerQueue::close`] once it returned (semantics: [`SteerQueue`]).
    pub steers: Arc<SteerQueue>,
    /// Quotas shared with other runs (the user's, the agent's), asked before every model call
    /// and told each call's usage; `None`: none.
    pub quota: Option<Arc<dyn QuotaGate>>,
    /// Where the run sits below the run its client started (sub-agents, docs/multi-agent.md).
    pub nesting: Nesting,
    /// `Some(agent key)`: this agent continues the run after that agent handed the conversation
    /// over (docs/multi-agent.md, "Handoffs"); `history` then already holds the run's
    /// conversation so far, its user message included, so the modes do not add it again.
    pub handed_from: Option<String>,
}

impl RunContext {
    /// A run a client started in a new chat: no history, stored plan, remembered approvals,
    /// quotas or steers (push into [`RunContext::steers`] to steer it).
    pub fn new(
        run_id: impl Into<String>,
        chat_id: impl Into<String>,
        agent: Arc<AgentDefinition>,
        user_message: impl Into<String>,
        services: Arc<RunServices>,
    ) -> Self {
        RunContext {
            run_id: run_id.into(),
            chat_id: chat_id.into(),
            agent,
            user_message: user_message.into(),
            user_attachments: Vec::new(),
            history: Vec::new(),
            history_runs: Vec::new(),
            initial_plan: None,
            services,
            remembered_approvals: Vec::new(),
            steers: Arc::default(),
            quota: None,
            nesting: Nesting::default(),
            handed_from: None,
        }
    }

    /// What the mode's first turn sees before its own messages: the history, then the user's
    /// message — unless the run was handed over and the history already has it.
    pub(crate) fn opening(&self) -> Vec<ChatMessage> {
        let mut conversation = Vec::with_capacity(self.history.len() + 1);
        conversation.extend_from_slice(&self.history);
        if self.handed_from.is_none() {
            conversation.push(ChatMessage::User {
                content: self.user_message.clone(),
                attachments: self.user_attachments.clone(),
            });
        }
        conversation
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// Normal end: `run.complete` with this finish reason.
    Completed {
        /// The last model turn's finish reason, e.g. `stop`.
        finish_reason: String,
    },
    /// `run.error` with this payload.
    Failed(RunErrorInfo),
    /// The consumer disconnected; no terminal event can be delivered.
    Disconnected,
}

/// Mutable state of one run shared by its turns.
pub(crate) struct RunState {
    pub budget: BudgetTracker,
    /// Tool-call ids used so far: ids are unique per run, never reused across turns.
    pub call_ids: calls::RunCallIds,
    /// Executed calls with their results, for argument templates.
    pub recorded: Vec<RecordedCall>,
    /// The run's plan, changed only by the plan tools.
    pub plan: plan::PlanState,
    /// The skill catalog and which skills are due for (or already had) their disclosure.
    pub skills: skills::SkillPrompts,
    /// `(tool, rule)` of this agent's calls answered `always` (in this chat, or earlier in
    /// this run): not asked about again.
    pub approved: std::collections::HashSet<(String, String)>,
    /// Where a wait that begins now would continue in another process: the current step
    /// (`react-step-2`, `oneshot`), or nowhere where that is not possible.
    pub resume_at: ResumeAt,
    /// Token estimates corrected by what the provider reported (context compaction).
    pub context: context::ContextState,
    /// The run's latest repeated tool calls (doom-loop detection).
    pub doom: doom::DoomWatch,
    /// Every model call's usage so far (`budget.maxTokens` / `maxCost`).
    pub usage: agw_protocol::usage::RunUsage,
    /// Plan changes stream as `plan.update`; false in a task running beside others, whose plan
    /// is a copy merged back after its round ([`RunState::fork`]).
    pub shows_plan: bool,
    /// Handoffs so far in this run (at most [`MAX_HANDOFFS`]).
    pub handoffs: u32,
    /// The records the run's citable tools returned, and how many citations streamed.
    pub citations: citations::CitationBook,
    /// The mode writes a step line right after each tool batch (REACT: the next step begins):
    /// a batch needs no crash-recovery checkpoint once its results streamed.
    pub step_follows_batch: bool,
    /// The chat's prompt-cache key, worked out at the run's first cached call (a digest: not per
    /// turn).
    pub prompt_cache_key: Option<String>,
}

impl RunState {
    /// The state of a plan task run beside others: the run's budget (counting on from here),
    /// plan, recorded calls and approvals as they are now; its own call ids (prefixed with
    /// `call_prefix`), usage and context accounting. [`Self::join`] merges it back.
    pub(crate) fn fork(&self, ctx: &RunContext, call_prefix: &str) -> RunState {
        RunState {
            budget: self.budget.fork(),
            call_ids: calls::RunCallIds::with_prefix(call_prefix),
            recorded: self.recorded.clone(),
            plan: self.plan.clone(),
            skills: skills::SkillPrompts::for_run(ctx),
            approved: self.approved.clone(),
            resume_at: ResumeAt::Nowhere,
            context: Default::default(),
            doom: Default::default(),
            usage: Default::default(),
            shows_plan: false,
            citations: self.citations.clone(),
            handoffs: self.handoffs,
            step_follows_batch: false,
            prompt_cache_key: self.prompt_cache_key.clone(),
        }
    }

    /// Takes back what forked task `task_id` did: its budget use and usage, its task's status
    /// and description, its recorded calls and remembered approvals. Fails when the run's
    /// budget is now spent.
    pub(crate) fn join(&mut self, forked_at: &BudgetTracker, task: RunState, task_id: &str) -> Result<(), RunFailure> {
        self.usage.merge(&task.usage);
        if let Some(done) = task.plan.tasks.iter().find(|t| t.task_id == task_id)
            && let Some(mine) = self.plan.tasks.iter_mut().find(|t| t.task_id == task_id)
        {
            mine.clone_from(done);
        }
        let known = self.recorded.len().min(task.recorded.len());
        self.recorded.extend(task.recorded.into_iter().skip(known));
        self.approved.extend(task.approved);
        self.citations.absorb(task.citations);
        self.budget.absorb(forked_at, &task.budget)
    }
}

/// The fixed parts of a stage's system prompt: the stage prompt and the tool appendix (after-call
/// hints only `with_hints`). Each turn adds the run's skill sections in between
/// ([`prompt::StagePrompt::effective`], called by `turn::model_turn`).
pub(crate) fn stage_prompt(
    ctx: &RunContext,
    stage_prompt: &str,
    tools: &tools::StageToolSet,
    with_hints: bool,
) -> prompt::StagePrompt {
    let (tool_descriptions, after_call_hints) = tools.appendix(&ctx.agent.runtime_prompts, with_hints);
    prompt::StagePrompt {
        stage: stage_prompt.to_owned(),
        tool_descriptions,
        after_call_hints,
        citations: citations::instruction(ctx),
    }
}

fn new_state(ctx: &RunContext) -> RunState {
    let restored = ctx.initial_plan.as_ref().filter(|p| !p.is_empty());
    RunState {
        budget: BudgetTracker::new(ctx.agent.budget),
        call_ids: calls::RunCallIds::with_prefix(&ctx.nesting.call_prefix),
        recorded: Vec::new(),
        plan: match restored {
            Some(snapshot) => plan::PlanState::restored(snapshot, &ctx.chat_id),
            None => plan::PlanState::for_chat(&ctx.chat_id),
        },
        skills: skills::SkillPrompts::for_run(ctx),
        approved: ctx
            .remembered_approvals
            .iter()
            .filter_map(|line| line.remembered_for(&ctx.agent.key))
            .map(|(tool, rule)| (tool.to_owned(), rule.to_owned()))
            .collect(),
        resume_at: ResumeAt::Nowhere,
        context: Default::default(),
        doom: Default::default(),
        usage: Default::default(),
        shows_plan: true,
        handoffs: 0,
        citations: Default::default(),
        step_follows_batch: false,
        prompt_cache_key: None,
    }
}

/// Runs `fut` (the mode) under the run timeout, inside the run's span, and turns its result into
/// the outcome.
///
/// A combinator, not an `async fn`: an `async fn` keeps its argument's slot for its whole life
/// and moves the future into a second slot to await it, so the run's state machine held the
/// mode's future twice (~4.4 KiB per run, the largest single item of a streaming run's
/// memory; docs/performance.md, round two).
fn finish<'a, F>(ctx: &'a RunContext, span: &tracing::Span, fut: F) -> impl Future<Output = RunOutcome> + 'a
where
    F: Future<Output = Result<String, RunFailure>> + 'a,
{
    timed_outcome(Duration::from_millis(ctx.agent.budget.run_timeout_ms), &ctx.run_id, span, fut)
}

fn timed_outcome<'a, F>(
    run_timeout: Duration,
    run_id: &'a str,
    span: &tracing::Span,
    fut: F,
) -> impl Future<Output = RunOutcome> + 'a
where
    F: Future<Output = Result<String, RunFailure>> + 'a,
{
    use futures::FutureExt;
    use tracing::Instrument;
    tokio::time::timeout(run_timeout, fut.instrument(span.clone())).map(move |timed| {
        let result =
            timed.unwrap_or_else(|_| Err(RunFailure::Budget(format!("runTimeoutMs={}", run_timeout.as_millis()))));
        outcome_of(result, run_id)
    })
}

fn outcome_of(result: Result<String, RunFailure>, run_id: &str) -> RunOutcome {
    match result {
        Ok(finish_reason) => RunOutcome::Completed { finish_reason },
        Err(RunFailure::Disconnected) => RunOutcome::Disconnected,
        Err(failure) => {
            tracing::warn!(run_id, error = %failure, "run failed");
            RunOutcome::Failed(failure.to_error_info())
        }
    }
}

#[cfg(test)]
mod finish_tests {
    use super::*;

    #[tokio::test]
    async fn the_run_holds_the_mode_future_once_and_a_timeout_is_a_budget_failure() {
        let mode = async {
            let scratch = [7u8; 4096];
            tokio::task::yield_now().await;
            Ok::<_, RunFailure>(scratch.iter().map(|b| b.to_string()).next().unwrap_or_default())
        };
        let mode_size = std::mem::size_of_val(&mode);
        let finished = timed_outcome(Duration::from_secs(5), "r1", &tracing::Span::none(), mode);
        // An `async fn` here would keep the argument's slot and a second copy to await.
        assert!(
            std::mem::size_of_val(&finished) < mode_size + 512,
            "{} vs {mode_size}",
            std::mem::size_of_val(&finished)
        );
        assert!(matches!(finished.await, RunOutcome::Completed { finish_reason } if finish_reason == "7"));

        let stuck = std::future::pending::<Result<String, RunFailure>>();
        let outcome = timed_outcome(Duration::from_millis(5), "r2", &tracing::Span::none(), stuck).await;
        assert!(
            matches!(outcome, RunOutcome::Failed(info) if info.message.contains("runTimeoutMs=5")),
            "budget failure"
        );
    }
}

/// Runs the agent to completion, streaming into `sink`. When the agent hands the conversation
/// over (docs/multi-agent.md, "Handoffs"), the next agent continues the same run until one
/// answers; the run timeout is the first agent's and covers them all.
pub async fn execute<S: DeltaSink>(mut ctx: RunContext, sink: &mut S) -> RunOutcome {
    use tracing::Instrument;
    let span = trace::invoke_agent(&ctx);
    let mut state = new_state(&ctx);
    // The input guards decide before any model call (and may redact what the model is sent).
    if let Err(failure) = guard::input(&mut ctx, &mut state, sink).instrument(span.clone()).await {
        let outcome = outcome_of(Err(failure), &ctx.run_id);
        trace::run_ended(&span, &outcome, &state.usage);
        return outcome;
    }
    let restored = ctx.initial_plan.as_ref().is_some_and(|p| !p.is_empty());
    let fut = async {
        // A chat with a plan starts every run by showing it (any mode).
        if restored {
            sink.emit(state.plan.update_delta()).await?;
        }
        let ended = run_mode(&ctx, &mut state, sink).await;
        continue_handoffs(&ctx, ended, &mut state, sink).await
    };
    let outcome = finish(&ctx, &span, fut).await;
    trace::run_ended(&span, &outcome, &state.usage);
    outcome
}

/// The agent's mode from its start.
async fn run_mode<S: DeltaSink>(ctx: &RunContext, state: &mut RunState, sink: &mut S) -> Result<String, RunFailure> {
    match &ctx.agent.mode {
        ModeDef::Oneshot { plain } => oneshot::run(ctx, plain, state, sink).await,
        ModeDef::React { react, max_steps } => react::run(ctx, react, *max_steps, state, sink).await,
        ModeDef::PlanExecute { plan, deep_thinking, execute, summary, max_steps, parallel } => {
            let stages =
                plan_execute::Stages { plan, deep_thinking: *deep_thinking, execute, summary, parallel: *parallel };
            plan_execute::run(ctx, stages, *max_steps, state, sink).await
        }
    }
}

/// While a mode ended with a handoff, the next agent's mode runs (boxed: it is the same future
/// type again, and only runs that hand over pay for it).
async fn continue_handoffs<S: DeltaSink>(
    first: &RunContext,
    mut ended: Result<String, RunFailure>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let mut current: Option<RunContext> = None;
    while let Err(RunFailure::HandedOff(handed)) = ended {
        let ctx = current.as_ref().unwrap_or(first);
        let next = handoff::hand_over(ctx, *handed, state, sink).await?;
        state.step_follows_batch = false;
        ended = Box::pin(run_mode(&next, state, sink)).await;
        current = Some(next);
    }
    ended
}

/// A run that waited for a person in a process that stopped, as its history left it
/// (durable waiting, `docs/run-lifecycle.md`): continued by [`resume`] once the answer came
/// (or the wait timed out).
#[derive(Debug, Clone)]
pub struct Resume {
    /// This run's messages up to the model turn that waited (its user message first); the
    /// chat's earlier turns are the context's `history`.
    pub conversation: Vec<ChatMessage>,
    /// [`WaitPoint::resume_at`] of the wait.
    pub resume_at: ResumeAt,
    /// The tool calls of the turn that waited, in call order.
    pub calls: Vec<agw_protocol::history::AwaitingCall>,
    /// Results of the calls of that turn that ran before the wait.
    pub results: Vec<agw_protocol::history::AwaitingResult>,
    /// The call that waited.
    pub awaiting_id: String,
    /// Its answer (the submit's `params`); `None`: the wait timed out.
    pub answer: Option<serde_json::Value>,
    /// What the call waited for (`AwaitingLine::kind`): its tool approval (a frontend tool or
    /// paused backend tool with an `ask` rule waits for that first), a frontend tool's form, or
    /// the user after its backend tool paused (how often they had continued it: a `continue`
    /// runs it with one more).
    pub wait: agw_protocol::history::WaitKind,
    /// A status wait: the status it showed (the declined result quotes its message).
    pub status: Option<agw_protocol::event::AwaitingStatus>,
    /// The conversation had been handed over to another agent, which waited: `conversation`
    /// is then that agent's part only, and it goes on.
    pub handoff: Option<RecoveredHandoff>,
    /// The run's written step lines (a plan rebuilds its task conversation from them), after
    /// the handoff when there was one.
    pub steps: Vec<agw_protocol::history::RecoveredStep>,
    /// The waiting step as far as it was recorded (at the end of `conversation` too).
    pub pending: Vec<ChatMessage>,
}

/// Continues a run from where it waited (see [`Resume`]): the waiting turn's calls are
/// finished — those that ran keep their results, the one that waited takes the answer, the
/// rest run now — and the mode goes on from the next turn, streaming into `sink` (whose
/// numbering continues the run's). REACT, ONESHOT and PLAN_EXECUTE runs (waiting in a task)
/// continue; a wait recorded without a position ends with `run.error` saying it cannot.
pub async fn resume<S: DeltaSink>(ctx: RunContext, resume: Resume, sink: &mut S) -> RunOutcome {
    let Resume {
        conversation: so_far,
        resume_at,
        calls,
        results,
        awaiting_id,
        answer,
        wait,
        status,
        handoff,
        steps,
        pending,
    } = resume;
    let (ctx, handoffs) = match handoff {
        None => (ctx, 0),
        Some(handoff) => match recover::continued_context(ctx, handoff) {
            Ok(continued) => continued,
            Err(failure) => return RunOutcome::Failed(failure.to_error_info()),
        },
    };
    let span = trace::invoke_agent(&ctx);
    let mut state = new_state(&ctx);
    state.handoffs = handoffs;
    let calls: Vec<calls::StreamedCall> = calls.iter().map(calls::StreamedCall::restored).collect();
    restore_calls(&ctx, &mut state, &so_far, &calls);
    let answers = execute::Answers::Resumed(Box::new(execute::Resumed {
        done: results.into_iter().map(|r| (r.id, r.result)).collect(),
        awaiting_id,
        answer,
        kind: wait,
        status_message: status.as_ref().map(|s| s.message.clone()).unwrap_or_default(),
        status_data: status.map(|s| s.data).unwrap_or_default(),
        interrupted: None,
        children: Vec::new(),
    }));
    let mut conversation = ctx.history.clone();
    conversation.extend(so_far);
    let fut = async {
        let ended = match (&ctx.agent.mode, &resume_at) {
            (ModeDef::React { react, max_steps }, ResumeAt::ReactStep(step)) => {
                let batch = (calls.as_slice(), answers);
                react::resume(&ctx, react, *max_steps, *step, conversation, batch, &mut state, sink).await
            }
            (ModeDef::Oneshot { plain }, ResumeAt::Oneshot) => {
                oneshot::resume(&ctx, plain, conversation, (calls.as_slice(), answers), &mut state, sink).await
            }
            (
                ModeDef::PlanExecute { plan, deep_thinking, execute, summary, max_steps, parallel },
                ResumeAt::ExecuteTask(_),
            ) => {
                // The task's conversation is rebuilt from the written steps, as after a crash.
                let stages =
                    plan_execute::Stages { plan, deep_thinking: *deep_thinking, execute, summary, parallel: *parallel };
                let written = plan_execute::Written { steps: &steps, pending, in_step: true, round: &[] };
                let batch = Some((calls.as_slice(), answers));
                plan_execute::recover(&ctx, stages, *max_steps, written, batch, &mut state, sink).await
            }
            _ => Err(RunFailure::Internal(format!(
                "this run of agent {} waited at {:?} and cannot continue after a restart",
                ctx.agent.key,
                resume_at.to_string()
            ))),
        };
        continue_handoffs(&ctx, ended, &mut state, sink).await
    };
    let outcome = finish(&ctx, &span, fut).await;
    trace::run_ended(&span, &outcome, &state.usage);
    outcome
}

/// What a run continued in a new process takes back from its conversation so far: its call
/// ids (unique across the whole run), and the records its citable tools returned (kept in
/// memory only), read again from the stored results.
fn restore_calls(ctx: &RunContext, state: &mut RunState, so_far: &[ChatMessage], calls: &[calls::StreamedCall]) {
    for call in calls {
        state.call_ids.claim(&call.id);
    }
    for message in so_far {
        match message {
            ChatMessage::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    state.call_ids.claim(&call.id);
                }
            }
            ChatMessage::Tool { tool_call_id, name, content } => {
                if let Some(fields) = citations::fields_of(ctx, name)
                    && let Ok(value) = serde_json::from_str::<serde_json::Value>(content)
                {
                    state.citations.collect(fields, &value, tool_call_id);
                }
            }
            _ => {}
        }
    }
}
