//! Checking one whole text: rule sets first (synchronous; a rule's block spares the
//! classifiers), then the webhook and the judges at once, each bounded by its timeout.

use std::sync::Arc;
use std::time::Instant;

use agw_guard::{Action, Hit, RuleSet, Verdict};
use agw_protocol::guard::GuardStage;
use agw_protocol::{AgentDelta, CallUsage};
use futures::future::join_all;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::definition::GuardLists;
use crate::runtime::invoke::Nesting;
use crate::runtime::{CollectingSink, RunContext, RunFailure, RunOutcome, RunServices, RunState};

use super::{ClassifyError, ClassifyRequest, DeltaSink, FailMode, Finding, GuardServices, StageGuards, charge, report};

/// The text with every redact match of `rules` replaced (`None`: nothing to redact), and every hit.
pub(crate) fn redact(rules: &[Arc<RuleSet>], text: &str) -> (Option<String>, Vec<Hit>) {
    if rules.is_empty() {
        return (None, Vec::new());
    }
    let redacted = agw_guard::redact_all(rules, text);
    let changed = redacted.hits.iter().any(|h| h.action == Action::Redact);
    (changed.then_some(redacted.text), redacted.hits)
}

/// What the rules' `hits` and then — unless one of them blocks — the classifiers say of
/// `shown` (the text as the rules left it); a judge's usage is charged to the run.
#[allow(clippy::too_many_arguments)]
async fn decide<S: DeltaSink>(
    ctx: &RunContext,
    guards: &StageGuards,
    stage: GuardStage,
    tool: Option<&str>,
    hits: &[Hit],
    shown: &str,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Vec<Finding>, RunFailure> {
    let mut findings: Vec<Finding> = hits.iter().map(Finding::of_hit).collect();
    for finding in &findings {
        super::found(stage, finding);
    }
    if guards.classifies() && !findings.iter().any(Finding::is_block) {
        let classified = classify(ctx, guards, request(ctx, stage, tool, shown.to_owned(), true)).await;
        findings.extend(classified.findings);
        charge(classified.usage, state, ctx, sink).await?;
    }
    Ok(findings)
}

/// Streams the findings' warnings and, for a block, `guard.block` (naming the call at the tool
/// stages); returns the block.
async fn settle<S: DeltaSink>(
    stage: GuardStage,
    call_id: Option<&str>,
    findings: &[Finding],
    sink: &mut S,
) -> Result<Option<Finding>, RunFailure> {
    let block = report(stage, call_id, findings, sink).await?;
    if let Some(block) = &block {
        sink.emit(AgentDelta::GuardBlock(block.notice(stage, call_id))).await?;
    }
    Ok(block)
}

/// `input`: checks a user's text (the run's message, a steer). A block ends the run; `Some` is
/// the text with the rules' redactions.
pub(crate) async fn user_text<S: DeltaSink>(
    ctx: &RunContext,
    guards: &StageGuards,
    text: &str,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Option<String>, RunFailure> {
    let stage = GuardStage::Input;
    let (redacted, hits) = redact(&guards.rules, text);
    let shown = redacted.as_deref().unwrap_or(text);
    let findings = decide(ctx, guards, stage, None, &hits, shown, state, sink).await?;
    match settle(stage, None, &findings, sink).await? {
        Some(block) => Err(block.failure(stage)),
        None => Ok(redacted),
    }
}

pub(crate) fn request(
    ctx: &RunContext,
    stage: GuardStage,
    tool: Option<&str>,
    text: String,
    complete: bool,
) -> ClassifyRequest {
    ClassifyRequest {
        stage,
        text,
        complete,
        run_id: ctx.run_id.clone(),
        chat_id: ctx.chat_id.clone(),
        agent_key: ctx.agent.key.clone(),
        tool: tool.map(str::to_owned),
    }
}

/// What the classifiers said about one text.
#[derive(Default)]
pub(crate) struct Classified {
    pub findings: Vec<Finding>,
    pub usage: Vec<CallUsage>,
}

/// Asks the webhook and every judge at once.
pub(crate) async fn classify(ctx: &RunContext, guards: &StageGuards, request: ClassifyRequest) -> Classified {
    let services = &ctx.services.guards;
    let mut asks = Vec::new();
    if guards.webhook {
        let request = request.clone();
        let span = crate::runtime::trace::guard(request.stage.as_str(), "webhook");
        asks.push(Box::pin(
            async move {
                let started = Instant::now();
                let verdict = match &services.classifier {
                    Some(classifier) => classifier.classify(request).await,
                    None => Err(ClassifyError::Failed(
                        "no classifier webhook is configured (agw.guardrails.webhook.url)".into(),
                    )),
                };
                ("webhook".to_owned(), "webhook", verdict, Vec::new(), started, tracing::Span::current())
            }
            .instrument(span),
        ) as futures::future::BoxFuture<'_, _>);
    }
    for agent in &guards.judges {
        let request = request.clone();
        let span = crate::runtime::trace::guard(request.stage.as_str(), &format!("judge:{agent}"));
        asks.push(Box::pin(
            async move {
                let started = Instant::now();
                let (verdict, usage) = judge(ctx, agent, &request).await;
                (format!("judge:{agent}"), "judge", verdict, usage, started, tracing::Span::current())
            }
            .instrument(span),
        ));
    }
    let mut classified = Classified::default();
    for (guard, kind, verdict, usage, started, span) in join_all(asks).await {
        classified.usage.extend(usage);
        let outcome = match &verdict {
            Ok(_) => "ok",
            Err(ClassifyError::Timeout(_)) => "timeout",
            Err(ClassifyError::Failed(_)) => "error",
        };
        metrics::histogram!(super::GUARD_CHECK_DURATION_METRIC, "kind" => kind, "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        let finding = match verdict {
            Ok(verdict) => {
                super::count(request.stage, &guard, verdict.action);
                crate::runtime::trace::guard_decided(&span, verdict.action.as_str(), None, &verdict.reason);
                log(ctx, &request, &guard, verdict.action.as_str(), &verdict.reason, started);
                (verdict.action != Action::Allow).then_some(Finding {
                    action: verdict.action,
                    guard,
                    rule: None,
                    reason: verdict.reason,
                })
            }
            Err(error) => {
                tracing::warn!(run_id = %ctx.run_id, guard = %guard, stage = %request.stage, %error, "guard gave no verdict");
                crate::runtime::trace::guard_decided(&span, "none", None, &error.to_string());
                log(ctx, &request, &guard, "none", &error.to_string(), started);
                match services.fail {
                    FailMode::Open => None,
                    FailMode::Closed => {
                        super::count(request.stage, &guard, Action::Block);
                        Some(Finding {
                            action: Action::Block,
                            guard,
                            rule: None,
                            reason: format!("the guard gave no verdict ({error}) and guards fail closed"),
                        })
                    }
                }
            }
        };
        classified.findings.extend(finding);
    }
    classified
}

/// The interaction log (`agw::llm` at debug) records every classifier verdict with the run.
fn log(ctx: &RunContext, request: &ClassifyRequest, guard: &str, action: &str, reason: &str, started: Instant) {
    if agw_llm::interaction::active() {
        tracing::debug!(
            target: agw_llm::interaction::TARGET,
            run_id = %ctx.run_id,
            stage = %request.stage,
            guard,
            action,
            reason,
            complete = request.complete,
            ms = started.elapsed().as_millis() as u64,
            "guard verdict"
        );
    }
}

/// What a judge agent is asked: its own system prompt says what it guards against.
fn judge_prompt(request: &ClassifyRequest) -> String {
    let what = match (request.stage, request.complete) {
        (GuardStage::Input, _) => "a user's message to an assistant",
        (GuardStage::Output, true) => "an assistant's answer",
        (GuardStage::Output, false) => "the beginning of an assistant's answer, still being written",
        (GuardStage::ToolInput, _) => "the arguments of a tool call an assistant is about to make",
        (GuardStage::ToolOutput, _) => "what a tool returned to an assistant",
    };
    format!(
        "Judge {what} against your policy.\n\n<text>\n{}\n</text>\n\nAnswer with one word, ALLOW, WARN or BLOCK, \
         then a short reason; or with JSON {{\"action\": \"allow|warn|block\", \"reason\": \"…\"}}.",
        request.text
    )
}

/// Runs judge `agent` on the request's text: a run of that agent, guards off, that streams
/// nowhere; its answer is the verdict.
async fn judge(
    ctx: &RunContext,
    agent: &str,
    request: &ClassifyRequest,
) -> (Result<Verdict, ClassifyError>, Vec<CallUsage>) {
    let Some(definition) = ctx.services.agents.get(agent) else {
        return (Err(ClassifyError::Failed(format!("judge agent {agent} does not exist"))), Vec::new());
    };
    let timeout = ctx.services.guards.judge_timeout;
    // A judge's own guards would judge the judge: it runs with none.
    let services = Arc::new(RunServices {
        guards: Arc::new(GuardServices::default()),
        client_tools: Vec::new(),
        ..(*ctx.services).clone()
    });
    let mut definition = (*definition).clone();
    definition.guardrails = Default::default();
    let judge_ctx = RunContext {
        quota: ctx.quota.clone(),
        nesting: Nesting { depth: ctx.nesting.depth + 1, call_prefix: format!("{}judge_", ctx.nesting.call_prefix) },
        ..RunContext::new(
            ctx.run_id.clone(),
            ctx.chat_id.clone(),
            Arc::new(definition),
            judge_prompt(request),
            services,
        )
    };
    let mut sink = CollectingSink::default();
    let ran = tokio::time::timeout(timeout, run_judge(judge_ctx, &mut sink)).await;
    let usage: Vec<CallUsage> = sink
        .deltas
        .iter()
        .filter_map(|d| if let AgentDelta::Usage(call) = d { Some(call.clone()) } else { None })
        .collect();
    let verdict = match ran {
        Err(_) => Err(ClassifyError::Timeout(timeout.as_millis() as u64)),
        Ok(RunOutcome::Completed { .. }) => {
            let answer = final_answer(&sink.deltas);
            Verdict::parse_answer(&answer)
                .ok_or_else(|| ClassifyError::Failed(format!("judge {agent} answered no verdict: {}", clip(&answer))))
        }
        Ok(RunOutcome::Failed(info)) => Err(ClassifyError::Failed(format!("judge {agent} failed: {}", info.message))),
        Ok(RunOutcome::Disconnected) => Err(ClassifyError::Failed(format!("judge {agent} stopped"))),
    };
    (verdict, usage)
}

/// The judge's run, its type erased: a run checks its guards, a guard may run a judge, so the
/// future types would contain themselves (the compiler cannot prove such a type `Send`).
fn run_judge(ctx: RunContext, sink: &mut CollectingSink) -> futures::future::BoxFuture<'_, RunOutcome> {
    Box::pin(crate::runtime::execute(ctx, sink))
}

/// The text of the judge run's last stage.
fn final_answer(deltas: &[AgentDelta]) -> String {
    let mut answer = String::new();
    for delta in deltas {
        match delta {
            AgentDelta::StageMarker(_) => answer.clear(),
            AgentDelta::Content(text) => answer.push_str(text),
            _ => {}
        }
    }
    answer
}

fn clip(text: &str) -> String {
    let mut end = text.len().min(120);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// What a backend call's guards decided on its arguments.
pub(crate) enum Admitted {
    /// Run it (with the arguments as the guards left them).
    Run,
    /// Do not run it; this is its result for the model.
    Refused(String),
}

/// `toolInput`: checks a backend call's arguments before it runs. Redact rules change string
/// values of `args` (what the tool receives); a block refuses the call with `guard.block`.
pub(crate) async fn tool_input<S: DeltaSink>(
    ctx: &RunContext,
    call_id: &str,
    tool: &str,
    args: &mut Value,
    state: &mut RunState,
    sink: &mut S,
) -> Result<Admitted, RunFailure> {
    let guards = super::stage_guards(ctx, GuardStage::ToolInput)?;
    if guards.is_empty() {
        return Ok(Admitted::Run);
    }
    let hits = agw_guard::redact_json(&guards.rules, args);
    let (stage, call) = (GuardStage::ToolInput, Some(call_id));
    let findings = decide(ctx, &guards, stage, Some(tool), &hits, &args.to_string(), state, sink).await?;
    Ok(match settle(stage, call, &findings, sink).await? {
        Some(block) => Admitted::Refused(
            json!({"executed": false, "reason": "guardrail", "detail": format!("blocked by guard {}: {}", block.guard, block.reason)})
                .to_string(),
        ),
        None => Admitted::Run,
    })
}

/// `toolOutput`: checks a call's result before the model (and the client) sees it. Redact
/// rules change it (string values of a JSON result, else the text); a block withholds it.
pub(crate) async fn tool_output<S: DeltaSink>(
    ctx: &RunContext,
    call_id: &str,
    tool: &str,
    result: String,
    state: &mut RunState,
    sink: &mut S,
) -> Result<String, RunFailure> {
    let guards = super::stage_guards(ctx, GuardStage::ToolOutput)?;
    if guards.is_empty() {
        return Ok(result);
    }
    let (result, hits) = match serde_json::from_str::<Value>(&result) {
        Ok(mut value) if value.is_object() || value.is_array() => {
            let hits = agw_guard::redact_json(&guards.rules, &mut value);
            let changed = hits.iter().any(|h| h.action == Action::Redact);
            (if changed { value.to_string() } else { result }, hits)
        }
        _ => {
            let (redacted, hits) = redact(&guards.rules, &result);
            (redacted.unwrap_or(result), hits)
        }
    };
    let (stage, call) = (GuardStage::ToolOutput, Some(call_id));
    let findings = decide(ctx, &guards, stage, Some(tool), &hits, &result, state, sink).await?;
    Ok(match settle(stage, call, &findings, sink).await? {
        Some(block) => json!({"executed": true, "withheld": true, "reason": "guardrail", "detail": format!("the result was blocked by guard {}: {}", block.guard, block.reason)})
            .to_string(),
        None => result,
    })
}

/// The rule sets named anywhere in `lists` that `catalog` lacks (sorted, once each): for
/// checks when catalogs load, since a run fails on them.
pub fn missing_rule_sets<'a>(lists: &'a GuardLists, catalog: &agw_guard::GuardCatalog) -> Vec<&'a str> {
    let mut missing: Vec<&str> = lists
        .all()
        .filter_map(|g| match g {
            crate::definition::GuardRef::Rules(name) if catalog.get(name).is_none() => Some(name.as_str()),
            _ => None,
        })
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing
}
