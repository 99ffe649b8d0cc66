//! Guardrails at run time (issue 36, docs/guardrails.md): the guards of an agent (its
//! `guardrails` plus the server's defaults) check the user's message before any model call, the
//! answer while it streams, and each backend call's arguments and result.
//!
//! Three kinds of guard: rule sets (`agw_guard`, synchronous, at every delta), the server's
//! classifier webhook ([`GuardClassifier`], implemented by the run service) and judge agents (an
//! agent of the catalog run on the text; its answer is the verdict). Classifiers are slow, so a
//! streaming answer is not held for them: they see the text shown so far at each boundary of
//! the agent's granularity (and once at the end), one check in flight at a time, and a `block`
//! verdict that comes back revokes what was shown ([`output`]).

pub(crate) mod checks;
pub(crate) mod output;

use std::sync::Arc;
use std::time::Duration;

use agw_guard::{Granularity, RuleSet, Verdict};
use agw_protocol::guard::{GuardNotice, GuardStage};
use agw_protocol::{AgentDelta, CallUsage};
use futures::future::BoxFuture;

use crate::definition::GuardLists;
use crate::definition::GuardRef;

use super::{DeltaSink, RunContext, RunFailure, RunState};

pub use checks::missing_rule_sets;
pub(crate) use checks::{Admitted, tool_input, tool_output};

/// Guard verdicts, labelled by stage, guard (`rules:<set>`, `webhook`, `judge:<agent>`) and
/// action (`allow`, `warn`, `redact`, `block`).
pub const GUARD_VERDICTS_METRIC: &str = "agw_guard_verdicts_total";
/// How long a classifier check took (seconds), labelled by kind (`webhook`, `judge`) and
/// outcome (`ok`, `timeout`, `error`).
pub const GUARD_CHECK_DURATION_METRIC: &str = "agw_guard_check_duration_seconds";

/// What to do when a classifier (the webhook or a judge) gives no verdict in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// The text passes.
    Open,
    /// The text is blocked (the default: a guard that cannot answer must not let text through).
    #[default]
    Closed,
}

/// One text a classifier is asked about.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifyRequest {
    /// What is checked.
    pub stage: GuardStage,
    /// The text: the user's message, the answer shown so far, a call's arguments or result.
    pub text: String,
    /// False while an answer still streams; true for the whole answer and the other stages.
    pub complete: bool,
    /// The run.
    pub run_id: String,
    /// Its chat.
    pub chat_id: String,
    /// The agent whose guard asks.
    pub agent_key: String,
    /// The tool, for the tool stages.
    pub tool: Option<String>,
}

/// Why a classifier gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyError {
    /// No answer within the timeout.
    #[error("no verdict within {0} ms")]
    Timeout(u64),
    /// The call failed or the answer was not a verdict.
    #[error("{0}")]
    Failed(String),
}

/// The server's classifier webhook, as the runtime sees it (agw-runs implements it over HTTP
/// with the outbound safeguards of its other webhook).
pub trait GuardClassifier: Send + Sync {
    /// Asks for a verdict on one text; the implementation enforces its own timeout.
    fn classify(&self, request: ClassifyRequest) -> BoxFuture<'static, Result<Verdict, ClassifyError>>;
}

/// How a server's runs are guarded besides the rule sets (which reload, and so are a run's
/// snapshot: [`super::RunServices::guard_rules`]).
#[derive(Clone, Default)]
pub struct GuardServices {
    /// The server's guards, added to every agent's (`agw.guardrails.*`).
    pub defaults: GuardLists,
    /// The classifier behind `webhook`; `None`: not configured (a `webhook` guard then fails
    /// like a classifier that does not answer, see [`FailMode`]).
    pub classifier: Option<Arc<dyn GuardClassifier>>,
    /// How often classifiers see a streaming answer, unless the agent says.
    pub classify_every: Granularity,
    /// How long a judge agent may take.
    pub judge_timeout: Duration,
    /// What a classifier that gives no verdict means.
    pub fail: FailMode,
}

impl std::fmt::Debug for GuardServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardServices")
            .field("defaults", &self.defaults)
            .field("classifier", &self.classifier.is_some())
            .field("classify_every", &self.classify_every)
            .field("fail", &self.fail)
            .finish()
    }
}

/// One guard's finding that the run acts on (allow verdicts are not findings).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub action: agw_guard::Action,
    /// `rules:<set>`, `webhook`, `judge:<agent>`.
    pub guard: String,
    /// The rule's id (rule sets only).
    pub rule: Option<String>,
    pub reason: String,
}

impl Finding {
    fn of_hit(hit: &agw_guard::Hit) -> Finding {
        Finding {
            action: hit.action,
            guard: format!("rules:{}", hit.set),
            rule: Some(hit.rule.clone()),
            reason: if hit.message.is_empty() { format!("rule {} matched", hit.rule) } else { hit.message.clone() },
        }
    }

    pub(crate) fn is_block(&self) -> bool {
        self.action == agw_guard::Action::Block
    }

    fn notice(&self, stage: GuardStage, tool_id: Option<&str>) -> GuardNotice {
        GuardNotice {
            stage,
            guard: self.guard.clone(),
            rule: self.rule.clone(),
            message: self.reason.clone(),
            tool_id: tool_id.map(str::to_owned),
        }
    }

    /// The run's failure when this block ends it.
    pub(crate) fn failure(&self, stage: GuardStage) -> RunFailure {
        let rule = self.rule.as_deref().map(|r| format!(" (rule {r})")).unwrap_or_default();
        RunFailure::Guarded(format!("{stage} blocked by guard {}{rule}: {}", self.guard, self.reason))
    }
}

/// The guards of one stage of a run, resolved.
#[derive(Clone, Default)]
pub(crate) struct StageGuards {
    pub rules: Vec<Arc<RuleSet>>,
    pub webhook: bool,
    pub judges: Vec<String>,
}

impl StageGuards {
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty() && !self.webhook && self.judges.is_empty()
    }

    pub(crate) fn classifies(&self) -> bool {
        self.webhook || !self.judges.is_empty()
    }
}

fn list(lists: &GuardLists, stage: GuardStage) -> &[GuardRef] {
    match stage {
        GuardStage::Input => &lists.input,
        GuardStage::Output => &lists.output,
        GuardStage::ToolInput => &lists.tool_input,
        GuardStage::ToolOutput => &lists.tool_output,
    }
}

/// The server's and the agent's guards of `stage`. A rule set the catalog does not have fails
/// the run: a misspelt guard must not let everything through.
pub(crate) fn stage_guards(ctx: &RunContext, stage: GuardStage) -> Result<StageGuards, RunFailure> {
    let (defaults, own) = (list(&ctx.services.guards.defaults, stage), list(&ctx.agent.guardrails.lists, stage));
    let mut guards = StageGuards::default();
    if defaults.is_empty() && own.is_empty() {
        return Ok(guards);
    }
    for guard in defaults.iter().chain(own) {
        match guard {
            GuardRef::Rules(name) => match ctx.services.guard_rules.get(name) {
                Some(set) => {
                    if !guards.rules.iter().any(|s| Arc::ptr_eq(s, &set)) {
                        guards.rules.push(set);
                    }
                }
                None => {
                    return Err(RunFailure::Internal(format!(
                        "guard rules:{name} of agent {} is not in the guardrails catalog",
                        ctx.agent.key
                    )));
                }
            },
            GuardRef::Webhook => guards.webhook = true,
            GuardRef::Judge(agent) => {
                if !guards.judges.contains(agent) {
                    guards.judges.push(agent.clone());
                }
            }
        }
    }
    Ok(guards)
}

/// Counts one guard's verdict.
fn count(stage: GuardStage, guard: &str, action: agw_guard::Action) {
    metrics::counter!(GUARD_VERDICTS_METRIC, "stage" => stage.as_str(), "guard" => guard.to_owned(), "action" => action.as_str())
        .increment(1);
}

/// Counts a rule's finding and records it as a `guard` span.
fn found(stage: GuardStage, finding: &Finding) {
    count(stage, &finding.guard, finding.action);
    let span = super::trace::guard(stage.as_str(), &finding.guard);
    super::trace::guard_decided(&span, finding.action.as_str(), finding.rule.as_deref(), &finding.reason);
}

/// Emits what the findings say short of a block (warnings), and returns the first block.
pub(crate) async fn report<S: DeltaSink>(
    stage: GuardStage,
    tool_id: Option<&str>,
    findings: &[Finding],
    sink: &mut S,
) -> Result<Option<Finding>, RunFailure> {
    for finding in findings {
        if finding.action == agw_guard::Action::Warn {
            sink.emit(AgentDelta::GuardWarning(finding.notice(stage, tool_id))).await?;
        }
    }
    Ok(findings.iter().find(|f| f.is_block()).cloned())
}

/// Usage of judge runs: the run pays for its judges like for its own calls.
pub(crate) async fn charge<S: DeltaSink>(
    usage: Vec<CallUsage>,
    state: &mut RunState,
    ctx: &RunContext,
    sink: &mut S,
) -> Result<(), RunFailure> {
    for call in usage {
        let spend = super::meter::usage(ctx, state, &call);
        super::quota::spent(ctx, spend).await;
        sink.emit(AgentDelta::Usage(call)).await?;
    }
    Ok(())
}

/// Checks the user's message before the run's first model call. A `redact` rule changes what
/// the model is sent (this message and the user messages of the history window); a block
/// emits `guard.block` and ends the run.
pub(crate) async fn input<S: DeltaSink>(
    ctx: &mut RunContext,
    state: &mut RunState,
    sink: &mut S,
) -> Result<(), RunFailure> {
    if ctx.services.guards.defaults.is_empty() && ctx.agent.guardrails.lists.is_empty() {
        return Ok(());
    }
    // Every stage's rule sets are resolved now: a missing one fails the run before any call.
    for stage in [GuardStage::Output, GuardStage::ToolInput, GuardStage::ToolOutput] {
        stage_guards(ctx, stage)?;
    }
    let guards = stage_guards(ctx, GuardStage::Input)?;
    if guards.is_empty() || ctx.handed_from.is_some() {
        return Ok(());
    }
    if let Some(redacted) = checks::user_text(ctx, &guards, &ctx.user_message, state, sink).await? {
        ctx.user_message = redacted;
    }
    if !guards.rules.is_empty() {
        // What was redacted in an earlier run is redacted again in the window.
        for message in &mut ctx.history {
            if let agw_llm::ChatMessage::User { content, .. } = message
                && let (Some(text), _) = checks::redact(&guards.rules, content)
            {
                *content = text;
            }
        }
    }
    Ok(())
}

/// A steered user message, taken at a model-turn boundary: input like the run's first message
/// (its `request.steer` shows what the user wrote; the model is sent what the guards leave).
pub(crate) async fn steered<S: DeltaSink>(
    ctx: &RunContext,
    state: &mut RunState,
    message: String,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let guards = stage_guards(ctx, GuardStage::Input)?;
    if guards.is_empty() {
        return Ok(message);
    }
    Ok(checks::user_text(ctx, &guards, &message, state, sink).await?.unwrap_or(message))
}
