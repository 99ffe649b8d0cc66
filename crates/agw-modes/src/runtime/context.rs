//! Context compaction: before every model call the run checks the request against the model's
//! usable context and, from 80 % of it on, shrinks the conversation, cheapest level first
//! (`docs/context.md`, seed 001 after opencode):
//!
//! 1. **prune** — walking back from the newest message, past the newest `keepUserTurns` user
//!    turns, the newest `pruneProtectTokens` of tool output stay and older tool results become
//!    `[tool output pruned: N tokens]`, only when that frees at least `pruneMinimumTokens`;
//!    protected tools are never pruned. No model call.
//! 2. **summary** — still over: the chat's stored runs but the newest `keepUserTurns` (this run
//!    counts as one) are summarised by a model, no tools, and replaced by the summary; the
//!    summary is recorded as the chat's checkpoint. If that is not possible or the call fails,
//!    **truncate**: the turns before the newest `keepUserTurns` user turns are dropped with a
//!    marker. Compaction never fails a run — but a summary is a model call, so the run's budget
//!    and shared quotas are checked before it, and a refusal there ends the run as it would have
//!    ended at the turn's own call.
//!
//! If the request is still over the whole usable context after that, tool outputs inside the
//! kept turns are pruned too (the newest `pruneProtectTokens` still stay): a single run whose
//! tools returned more than the model can read keeps working.
//!
//! Every cut is at a user message and pruning only replaces a result's text, so a tool call is
//! never separated from its result and the newest user message is never dropped. Each level
//! applied is shown as a `context.compact` event before the model call.

use std::time::{Duration, Instant};

use agw_llm::tokens::{estimate_messages, estimate_text, estimate_tools, reported_input_tokens};
use agw_llm::{CallOptions, ChatMessage, ChatRequest, LlmDelta, ProviderRegistry, ToolSpec};
use agw_protocol::chat::{HistoryRun, SUMMARY_REQUEST, summary_turn};
use agw_protocol::event::{CompactLevel, ContextCompact};
use agw_protocol::{AgentDelta, CallUsage};
use futures::StreamExt;
use serde_json::Value;

use agw_llm::ReasonSet;

use crate::definition::{AgentDefinition, AgentMode, ContextPolicy, ModelRef, ResolvedModel, StageKind};

use super::fallback::Fallbacks;

use super::{DeltaSink, RunContext, RunFailure, RunServices, RunState};

/// Context window assumed for a model nobody declared one for.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 128_000;
/// Longest answer assumed for a model nobody declared one for.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4_096;
/// At most this much of the window is reserved for the answer.
pub const OUTPUT_RESERVE_CAP: u32 = 8_192;
/// `x-agw-stage` of a summary call.
pub const SUMMARY_STAGE: &str = "context-summary";

/// What a summary is asked to keep (seed 001).
const SUMMARY_PROMPT: &str = "You compact conversations for an AI agent that must continue the work. Summarise \
the conversation you are given so that the agent can carry on without it. Keep: the user's goals and requests; \
decisions made and why; constraints and preferences; open items and next steps; names that matter (people, \
files, ids, URLs, numbers); errors met and how they were handled. Write plain text, concise, without addressing \
the user.";

/// The run's token accounting across its model calls.
#[derive(Debug)]
pub(crate) struct ContextState {
    /// Reported input tokens / agw's estimate, from the last call whose usage said: later
    /// estimates of this run are scaled by it.
    ratio: f64,
}

impl Default for ContextState {
    fn default() -> Self {
        Self { ratio: 1.0 }
    }
}

impl ContextState {
    fn scaled(&self, raw: u64) -> u64 {
        (raw as f64 * self.ratio).ceil() as u64
    }

    /// A call estimated at `raw` tokens was answered with `usage`: what the provider counted
    /// corrects the run's later estimates.
    pub(crate) fn calibrate(&mut self, raw: u64, usage: &Value) {
        if let Some(real) = reported_input_tokens(usage).filter(|n| *n > 0)
            && raw > 0
        {
            self.ratio = (real as f64 / raw as f64).clamp(0.25, 4.0);
        }
    }
}

/// Tokens a request may hold: the context window minus what is reserved for the answer.
pub fn usable_tokens(context_window: u32, max_output_tokens: u32) -> u64 {
    u64::from(context_window.saturating_sub(max_output_tokens.min(OUTPUT_RESERVE_CAP)))
}

/// The parts of a request compaction does not change.
pub(crate) struct Fixed<'a> {
    pub system: &'a str,
    pub tools: &'a [ToolSpec],
}

/// Makes `messages` fit (see the module docs); returns the raw estimate of the request as it
/// will be sent, for [`ContextState::calibrate`].
pub(crate) async fn fit<S: DeltaSink>(
    ctx: &RunContext,
    model: &ResolvedModel,
    fixed: Fixed<'_>,
    messages: &mut Vec<ChatMessage>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<u64, RunFailure> {
    let fixed_tokens = estimate_text(fixed.system) + estimate_tools(fixed.tools);
    let raw = |messages: &[ChatMessage]| fixed_tokens + estimate_messages(messages);
    let policy = &ctx.agent.context;
    let budget = usable(ctx, model);
    let trigger = (budget as f64 * policy.compact_at) as u64;
    let before = state.context.scaled(raw(messages));
    if !policy.enabled || before < trigger {
        return Ok(raw(messages));
    }
    tracing::info!(run_id = %ctx.run_id, tokens = before, budget, "compacting the conversation");
    let event = |level, tokens_before, tokens_after, started: Instant| ContextCompact {
        run_id: ctx.run_id.clone(),
        level,
        tokens_before,
        tokens_after,
        budget,
        duration_ms: started.elapsed().as_millis() as u64,
        pruned_results: 0,
        replaced_messages: 0,
        summary: None,
        through_run_id: None,
        reason: None,
    };

    // 1. Prune old tool outputs.
    let mut current = before;
    let started = Instant::now();
    if let Some(pruned) = prune(messages, policy, policy.keep_user_turns, policy.prune_minimum_tokens) {
        let after = state.context.scaled(raw(messages));
        let compact = ContextCompact { pruned_results: pruned, ..event(CompactLevel::Prune, current, after, started) };
        sink.emit(AgentDelta::Compact(compact)).await?;
        current = after;
    }
    if current < trigger {
        return Ok(raw(messages));
    }

    // 2. Summarise the older runs (or drop the older turns).
    let started = Instant::now();
    let mut summary_called = false;
    let reason = match summary_cut(&ctx.history, &ctx.history_runs, messages, policy.keep_user_turns) {
        None => "nothing older than the kept turns could be summarised".to_owned(),
        Some((cut, through)) => {
            // A summary is a model call like any other: budgets and quotas allow it first, and
            // again before the turn's own call that follows it (end of this function).
            super::quota::before_call(ctx, state).await?;
            summary_called = true;
            let call = SummaryCall {
                services: &ctx.services,
                policy,
                model,
                budget,
                timeout: Duration::from_millis(state.budget.budget().model.timeout_ms),
                run_id: &ctx.run_id,
            };
            let Summarised { result, usages, fallbacks } = summarise(call, &messages[..cut]).await;
            for fallback in fallbacks {
                sink.emit(fallback).await?;
            }
            // What the summary cost counts like any model call's usage.
            for call in usages {
                let spend = super::meter::usage(ctx, state, &call);
                super::quota::spent(ctx, spend).await;
                sink.emit(AgentDelta::Usage(call)).await?;
            }
            match result {
                Ok(summary) => {
                    messages.splice(..cut, summary_turn(&summary));
                    let after = state.context.scaled(raw(messages));
                    let compact = ContextCompact {
                        replaced_messages: cut as u64,
                        summary: Some(summary),
                        through_run_id: Some(through),
                        ..event(CompactLevel::Summary, current, after, started)
                    };
                    sink.emit(AgentDelta::Compact(compact)).await?;
                    current = after;
                    String::new()
                }
                Err(reason) => {
                    tracing::warn!(run_id = %ctx.run_id, %reason, "summary failed; dropping older turns instead");
                    reason.to_string()
                }
            }
        }
    };
    if !reason.is_empty()
        && let Some(dropped) = truncate(messages, policy.keep_user_turns)
    {
        let after = state.context.scaled(raw(messages));
        let compact = ContextCompact {
            replaced_messages: dropped as u64,
            reason: Some(reason),
            ..event(CompactLevel::Truncate, current, after, started)
        };
        sink.emit(AgentDelta::Compact(compact)).await?;
        current = after;
    }

    // Still more than the model can read: prune inside the kept turns too.
    if current > budget {
        let started = Instant::now();
        if let Some(pruned) = prune(messages, policy, 0, 0) {
            let after = state.context.scaled(raw(messages));
            let compact = ContextCompact {
                pruned_results: pruned,
                reason: Some("still over the usable context: tool outputs of the kept turns pruned too".into()),
                ..event(CompactLevel::Prune, current, after, started)
            };
            sink.emit(AgentDelta::Compact(compact)).await?;
        }
    }
    if summary_called {
        super::quota::before_call(ctx, state).await?;
    }
    Ok(raw(messages))
}

/// The usable tokens of `model`'s calls: its `modelConfig`, else its provider's configuration,
/// else the defaults.
fn usable(ctx: &RunContext, model: &ResolvedModel) -> u64 {
    usable_of(&ctx.services.providers, model)
}

fn usable_of(providers: &ProviderRegistry, model: &ResolvedModel) -> u64 {
    let configured = providers.limits(&model.provider_key);
    let window = model.context_window.or(configured.context_window).unwrap_or(DEFAULT_CONTEXT_WINDOW);
    let output = model.max_output_tokens.or(configured.max_output_tokens).unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    usable_tokens(window, output)
}

/// The text that replaces a pruned tool result.
pub fn pruned_marker(tokens: u64) -> String {
    format!("[tool output pruned: {tokens} tokens]")
}

fn is_pruned(content: &str) -> bool {
    content.starts_with("[tool output pruned: ")
}

/// Level 1: past the newest `keep_turns` user turns and the newest
/// `policy.prune_protect_tokens` of tool output, tool results become markers — if that frees at
/// least `minimum` tokens. Returns how many results were replaced.
pub(crate) fn prune(
    messages: &mut [ChatMessage],
    policy: &ContextPolicy,
    keep_turns: usize,
    minimum: u64,
) -> Option<u64> {
    let mut user_turns = 0;
    let mut seen = 0u64;
    let mut freed = 0u64;
    let mut chosen: Vec<(usize, u64)> = Vec::new();
    for (index, message) in messages.iter().enumerate().rev() {
        match message {
            ChatMessage::User { .. } => user_turns += 1,
            ChatMessage::Tool { name, content, .. } if user_turns >= keep_turns => {
                if is_pruned(content) || policy.protected_tools.iter().any(|t| t.eq_ignore_ascii_case(name)) {
                    continue;
                }
                let tokens = estimate_text(content);
                seen += tokens;
                let marker = estimate_text(&pruned_marker(tokens));
                if seen > policy.prune_protect_tokens && tokens > marker {
                    freed += tokens - marker;
                    chosen.push((index, tokens));
                }
            }
            _ => {}
        }
    }
    if chosen.is_empty() || freed < minimum {
        return None;
    }
    for (index, tokens) in &chosen {
        if let ChatMessage::Tool { content, .. } = &mut messages[*index] {
            *content = pruned_marker(*tokens);
        }
    }
    Some(chosen.len() as u64)
}

/// Where a summary may cut: `messages` must begin with `history` (pruning aside) and hold more
/// stored runs than it keeps (`keep_turns`, the run that sends them counting as one). Returns
/// the index of the first kept message and the last run the summary covers.
fn summary_cut(
    history: &[ChatMessage],
    runs: &[HistoryRun],
    messages: &[ChatMessage],
    keep_turns: usize,
) -> Option<(usize, String)> {
    if history.is_empty() || messages.len() < history.len() {
        return None;
    }
    if !messages.iter().zip(history).all(|(a, b)| same_message(a, b)) {
        return None;
    }
    let keep_stored = keep_turns.saturating_sub(1);
    let first_kept = runs.len().checked_sub(keep_stored).filter(|i| *i > 0)?;
    let cut = runs.get(first_kept).map_or(history.len(), |run| run.start);
    // Only an earlier summary before the cut: nothing new to summarise.
    if cut == 0 || (cut <= 2 && is_summary_request(&messages[0])) {
        return None;
    }
    Some((cut, runs[first_kept - 1].run_id.clone()))
}

/// Equal, except that a tool result may have been pruned since.
fn same_message(a: &ChatMessage, b: &ChatMessage) -> bool {
    match (a, b) {
        (ChatMessage::Tool { tool_call_id: x, .. }, ChatMessage::Tool { tool_call_id: y, .. }) => x == y,
        _ => a == b,
    }
}

fn is_summary_request(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::User { content, .. } if content == SUMMARY_REQUEST)
}

/// The fallback: everything before the newest `keep_turns` user turns becomes a marker. Returns
/// how many messages were dropped; `None` when nothing (but an earlier summary) is before them.
pub(crate) fn truncate(messages: &mut Vec<ChatMessage>, keep_turns: usize) -> Option<usize> {
    let mut turns = 0;
    let cut = messages.iter().enumerate().rev().find_map(|(index, message)| {
        if matches!(message, ChatMessage::User { .. }) {
            turns += 1;
        }
        (turns >= keep_turns.max(1)).then_some(index)
    })?;
    if cut == 0 || (cut <= 2 && is_summary_request(&messages[0])) {
        return None;
    }
    let marker = format!("[{cut} earlier messages of this conversation were dropped to fit the context window]");
    messages.splice(..cut, summary_turn(&marker));
    Some(cut)
}

/// What a summary call needs.
struct SummaryCall<'a> {
    services: &'a RunServices,
    policy: &'a ContextPolicy,
    /// The model of the stage that compacts (used unless `summaryModel` names another).
    model: &'a ResolvedModel,
    /// Usable tokens: the transcript is cut to fit the summary call too.
    budget: u64,
    /// Longest gap in the summary's stream.
    timeout: Duration,
    run_id: &'a str,
}

/// Why a summary call produced no summary. The display text is the reason the compaction event
/// and `POST /api/ap/compact`'s error give.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SummaryError {
    /// The summary model's provider is unknown, or the call or its stream failed.
    #[error(transparent)]
    Call(#[from] agw_llm::LlmError),
    /// The model answered with nothing but whitespace.
    #[error("the summary came back empty")]
    Empty,
}

/// What one summary call made: the summary or why there is none, the usage the providers
/// reported (of every model tried), and a `model.fallback` delta per model that failed.
struct Summarised {
    result: Result<String, SummaryError>,
    usages: Vec<CallUsage>,
    fallbacks: Vec<AgentDelta>,
}

/// One summary: the older turns as a transcript, no tools, output capped; each model of the
/// summary's `modelConfig` in turn while they fail for a reason it falls back on.
async fn summarise(call: SummaryCall<'_>, older: &[ChatMessage]) -> Summarised {
    let policy = call.policy;
    // `summaryModel` with its own fallbacks, else the stage's model with the stage's.
    let chosen = match &policy.summary_model {
        None => call.model.clone(),
        Some(config) => {
            let primary = ModelRef {
                provider_key: config.provider_key.clone().unwrap_or_else(|| call.model.provider_key.clone()),
                model: config.model.clone().unwrap_or_else(|| call.model.model.clone()),
            };
            let fallbacks = config.fallback_models(&primary, |key| call.services.providers.default_model(key));
            ResolvedModel {
                provider_key: primary.provider_key,
                model: primary.model,
                fallbacks,
                fallback_on: config.fallback_on.unwrap_or(ReasonSet::all()),
                ..call.model.clone()
            }
        }
    };
    let cooldowns = &call.services.cooldowns;
    let mut models = Fallbacks::plan(cooldowns, &chosen).await;
    // The transcript must fit the summary call itself: its oldest part goes first.
    let room = call.budget.saturating_sub(u64::from(policy.summary_max_tokens) + estimate_text(SUMMARY_PROMPT) + 64);
    let messages = vec![
        ChatMessage::System { content: SUMMARY_PROMPT.to_owned() },
        ChatMessage::user(format!("The conversation to summarise:\n\n{}", transcript(older, room))),
    ];
    let mut out = Summarised { result: Err(SummaryError::Empty), usages: Vec::new(), fallbacks: Vec::new() };
    loop {
        // Nothing of a summary streams to the client, so even a failure mid-stream may move on.
        let error = match summary_attempt(&call, models.current(), &messages, models.fail_fast(), &mut out.usages).await
        {
            Ok(summary) => {
                let summary = summary.trim();
                out.result = if summary.is_empty() { Err(SummaryError::Empty) } else { Ok(summary.to_owned()) };
                return out;
            }
            Err(error) => error,
        };
        match models.next(cooldowns, call.run_id, &error).await {
            Some(fallback) => out.fallbacks.push(fallback),
            None => {
                out.result = Err(error.into());
                return out;
            }
        }
    }
}

/// One summary call to `model`: the text it streamed, its usage added to `usages`.
async fn summary_attempt(
    call: &SummaryCall<'_>,
    model: &ModelRef,
    messages: &[ChatMessage],
    fail_fast: agw_llm::ReasonSet,
    usages: &mut Vec<CallUsage>,
) -> Result<String, agw_llm::LlmError> {
    let provider = call.services.providers.get(&model.provider_key)?;
    let request = ChatRequest {
        provider_key: model.provider_key.clone(),
        model: model.model.clone(),
        messages: messages.to_vec(),
        tools: Vec::new(),
        tool_choice: None,
        reasoning: Default::default(),
        temperature: None,
        top_p: None,
        max_tokens: Some(call.policy.summary_max_tokens),
        prompt_cache: Default::default(),
        response_format: None,
    };
    let options = CallOptions {
        inactivity_timeout: call.timeout,
        stage: SUMMARY_STAGE.to_owned(),
        run_id: call.run_id.to_owned(),
        fail_fast,
        ..CallOptions::default()
    };
    let mut stream = super::trace::open_chat(call.services, provider, request, options).await?;
    let mut summary = String::new();
    while let Some(item) = stream.next().await {
        match item? {
            LlmDelta::Content { text } => summary.push_str(&text),
            LlmDelta::Usage { usage } => {
                usages.push(CallUsage { provider: model.provider_key.clone(), model: model.model.clone(), usage });
            }
            _ => {}
        }
    }
    Ok(summary)
}

/// What [`compact_history`] made.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryCompaction {
    /// The summary that now stands for the covered runs.
    pub summary: String,
    /// The last run it covers.
    pub through_run_id: String,
    /// How many history messages it replaces.
    pub replaced_messages: u64,
    /// Estimated tokens of the history before and after.
    pub tokens_before: u64,
    /// See `tokens_before`.
    pub tokens_after: u64,
    /// Usage the provider reported for the summary call.
    pub usage: Vec<CallUsage>,
}

/// Compacts a chat's history on demand (`POST /api/ap/compact`), with `agent`'s policy and
/// model: every stored run but the newest `keepUserTurns - 1` is summarised (the chat's next
/// run counts as a kept one). `Ok(None)`: nothing to summarise. `Err`: the summary call failed.
pub async fn compact_history(
    services: &RunServices,
    agent: &AgentDefinition,
    history: &[ChatMessage],
    runs: &[HistoryRun],
    run_id: &str,
) -> Result<Option<HistoryCompaction>, SummaryError> {
    let kind = match agent.mode_kind() {
        AgentMode::Oneshot => StageKind::Plain,
        AgentMode::React => StageKind::React,
        AgentMode::PlanExecute => StageKind::Execute,
    };
    let model = agent.resolve_model(kind, |key| services.providers.default_model(key));
    let Some((cut, through)) = summary_cut(history, runs, history, agent.context.keep_user_turns) else {
        return Ok(None);
    };
    let budget = usable_of(&services.providers, &model);
    let call = SummaryCall {
        services,
        policy: &agent.context,
        model: &model,
        budget,
        timeout: Duration::from_millis(agent.budget.model.timeout_ms),
        run_id,
    };
    // A fallback here has no stream to be shown in: the log has it (`Fallbacks::next`).
    let Summarised { result, usages: usage, .. } = summarise(call, &history[..cut]).await;
    let summary = result?;
    let tokens_before = estimate_messages(history);
    let tokens_after = estimate_messages(&summary_turn(&summary)) + estimate_messages(&history[cut..]);
    Ok(Some(HistoryCompaction {
        summary,
        through_run_id: through,
        replaced_messages: cut as u64,
        tokens_before,
        tokens_after,
        usage,
    }))
}

/// The older turns as plain text (calls and results included), at most `room` tokens: the
/// newest part is kept when it must be cut.
fn transcript(messages: &[ChatMessage], room: u64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut used = 0u64;
    for message in messages.iter().rev() {
        let part = match message {
            ChatMessage::System { content } => format!("System: {content}"),
            ChatMessage::User { content, .. } => format!("User: {content}"),
            ChatMessage::Assistant { content, tool_calls } => {
                let mut text = if content.is_empty() { String::new() } else { format!("Assistant: {content}") };
                for call in tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("Assistant called {}({})", call.name, call.arguments));
                }
                text
            }
            ChatMessage::Tool { name, content, .. } => format!("Result of {name}: {content}"),
        };
        let tokens = estimate_text(&part);
        if used + tokens > room {
            parts.push("[older turns omitted]".to_owned());
            break;
        }
        used += tokens;
        parts.push(part);
    }
    parts.reverse();
    parts.join("\n\n")
}

#[cfg(test)]
mod tests;
