//! One model turn: build the request, stream it, forward deltas to the sink (contract
//! `docs/contract/modes.md` §2, `docs/contract/sse-events.md` §6.1–§6.2).

use std::collections::HashMap;
use std::time::Duration;

use agw_llm::{CallOptions, ChatMessage, ChatRequest, DeltaStream, LlmDelta, ToolChoice};
use agw_protocol::chat::PromptCache;
use agw_protocol::citation::Piece;
use agw_protocol::guard::{GuardStage, Revocation};
use agw_protocol::history::StreamedAs;
use agw_protocol::{AgentDelta, CallUsage};
use futures::StreamExt;

use crate::definition::{OutputSchema, ResolvedModel, ToolCalling};

use super::calls::{CallAccumulator, FragmentEffect, StreamedCall};
use super::citations::Resolved;
use super::fallback::Fallbacks;
use super::guard::checks::Classified;
use super::guard::output::OutputGuard;
use super::prompt::StagePrompt;
use super::submit::PendingSubmit;
use super::tools::{Decoration, StageToolSet, decorate};
use super::{DeltaSink, RunContext, RunFailure, RunState};
use super::{context, meter, quota};

/// What a turn needs beyond the run context.
pub(crate) struct TurnSpec<'a> {
    /// Stage name (`agent-oneshot`, …): logged and sent as `x-agw-stage`.
    pub stage_name: &'a str,
    pub model: &'a ResolvedModel,
    /// The stage's prompt; the run's skill sections are added when the turn is sent.
    pub system_prompt: &'a StagePrompt,
    /// Conversation without the system message. The turn appends the steers it takes, so the
    /// mode's list keeps them for its later turns.
    pub messages: &'a mut Vec<ChatMessage>,
    /// Tools offered to the model; `tool_choice` `None` offers none.
    pub tools: &'a StageToolSet,
    pub tool_choice: Option<ToolChoice>,
    /// Whether reasoning text is streamed (and persisted). Reasoning of a stage with reasoning
    /// off is never emitted.
    pub emit_reasoning: bool,
    /// Whether the turn's answer may be the run's (ONESHOT's and REACT's turns, PLAN_EXECUTE's
    /// summary): with an output schema it is shaped and checked (`super::output`).
    pub answer: bool,
}

/// The accumulated result of a turn.
#[derive(Default)]
pub(crate) struct TurnOutput {
    /// All content text of the turn, untrimmed (including text after a tool call, which is not
    /// streamed).
    pub text: String,
    /// Calls with a name, in first-seen order.
    pub calls: Vec<StreamedCall>,
    /// Waiters registered for frontend calls when their `tool.start` was streamed.
    pub frontend_waiters: HashMap<String, PendingSubmit>,
    pub finish_reason: Option<String>,
    /// The user messages of the steers this turn took (already appended to its messages), for
    /// modes that keep more than one conversation.
    pub steers: Vec<ChatMessage>,
}

impl TurnOutput {
    pub fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// Runs one model turn ([`stream_turn`]); an answer turn of a run with an output schema is
/// then checked, and repaired once when it does not match (`super::output`).
pub(crate) async fn model_turn<S: DeltaSink>(
    ctx: &RunContext,
    mut spec: TurnSpec<'_>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<TurnOutput, RunFailure> {
    let schema = if spec.answer { ctx.agent.output_schema.as_ref() } else { None };
    let out = stream_turn(ctx, &mut spec, schema, state, sink).await?;
    match schema {
        None => Ok(out),
        Some(schema) => super::output::checked(ctx, spec, schema, out, state, sink).await,
    }
}

/// Streams one model turn. Every upstream chunk is forwarded to the sink the moment it arrives —
/// the sink's `emit` is awaited before the next chunk is read, so a slow client slows the
/// provider stream instead of growing a buffer. `schema`: the answer's output schema, sent the
/// way the answering provider takes it.
pub(super) async fn stream_turn<S: DeltaSink>(
    ctx: &RunContext,
    spec: &mut TurnSpec<'_>,
    schema: Option<&OutputSchema>,
    state: &mut RunState,
    sink: &mut S,
) -> Result<TurnOutput, RunFailure> {
    state.budget.begin_model_call()?;
    quota::before_call(ctx, state).await?;
    // The models this turn may try: the first is the one the request is fitted to.
    let cooldowns = &ctx.services.cooldowns;
    let mut models = Fallbacks::plan(cooldowns, spec.model).await;
    let first = models.resolved(spec.model);
    let mut provider = ctx.services.providers.get(&first.provider_key)?;
    // The model-turn boundary: steers pushed so far join the conversation now (never mid-tool).
    let steers = take_steers(ctx, state, spec.messages, sink).await?;

    // A disclosure that is due goes into this turn only (docs/contract/modes.md §6.3).
    let disclosure = state.skills.take_disclosure(ctx);
    let mut system_prompt = spec.system_prompt.effective(state.skills.catalog(), &disclosure);
    // A model without function calling gets its tools and transcript as text (docs/models.md).
    let prompted = spec.model.tool_calling == ToolCalling::Prompted;
    if prompted && let Some(schema) = schema {
        system_prompt.push_str(&super::output::prompted_instruction(schema));
    }
    let offer_tools = spec.tool_choice.is_some() && !spec.tools.is_empty();
    let tools = if offer_tools { spec.tools.specs() } else { Vec::new() };
    // The mode keeps the compacted conversation for its later turns.
    let fixed = context::Fixed { system: &system_prompt, tools: &tools };
    let estimate = context::fit(ctx, &first, fixed, spec.messages, state, sink).await?;
    let mut messages = Vec::with_capacity(spec.messages.len() + 1);
    if !system_prompt.is_empty() {
        messages.push(ChatMessage::System { content: system_prompt });
    }
    messages.extend_from_slice(spec.messages.as_slice());
    let mut tools = Some(tools);
    let cache = prompt_cache(spec.model, &ctx.chat_id, &mut state.prompt_cache_key);
    tracing::debug!(stage = spec.stage_name, model = %first.model, provider = %first.provider_key, tools = offer_tools, "model turn");
    // A prompted model must stay free to write its calls where tools are offered.
    let format = schema.filter(|_| !(prompted && offer_tools)).map(OutputSchema::response_format);

    // An agent with output guards: each delta passes its rules before anything else sees it.
    let mut guard = OutputGuard::for_turn(ctx)?;
    // Each model in turn until one opens a stream whose first item is not a failure the
    // agent falls back on: until then nothing of this turn reached the client, so the next
    // model gets the very same request and nothing is sent twice.
    let (mut stream, started) = loop {
        let model = models.current().clone();
        // The last model tried takes the request itself; the others a copy.
        let last = !models.has_next();
        let request = ChatRequest {
            provider_key: model.provider_key.clone(),
            model: model.model.clone(),
            messages: if last { std::mem::take(&mut messages) } else { messages.clone() },
            tools: if last { tools.take().unwrap_or_default() } else { tools.clone().unwrap_or_default() },
            tool_choice: if offer_tools { spec.tool_choice } else { None },
            reasoning: spec.model.reasoning,
            temperature: spec.model.temperature,
            top_p: spec.model.top_p,
            max_tokens: spec.model.max_tokens,
            prompt_cache: cache.clone(),
            response_format: format.clone(),
        };
        // Images or files this model cannot take (earlier turns', a fallback's) become a note.
        let request = if agw_llm::attachments::any(&request) {
            agw_llm::attachments::fit(request, ctx.services.providers.attachments(&model.provider_key))
        } else {
            request
        };
        let request = if prompted {
            agw_llm::prompted::prompt_request(request)
        } else if answers_by_tool(ctx, &model.provider_key, schema) {
            agw_llm::structured::answer_tool_request(request)
        } else {
            request
        };
        let options = CallOptions {
            inactivity_timeout: Duration::from_millis(state.budget.budget().model.timeout_ms),
            stage: spec.stage_name.to_string(),
            run_id: ctx.run_id.clone(),
            fail_fast: models.fail_fast(),
            ..CallOptions::default()
        };
        let started = std::time::Instant::now();
        let error = match super::trace::open_chat(&ctx.services, provider, request, options).await {
            Ok(mut stream) => match stream.next().await {
                Some(Err(error)) => error,
                // The first item is not a failure: it is processed below like every later one.
                first => break (replay_first(first, stream), started),
            },
            Err(error) => error,
        };
        meter::call_duration(&model.provider_key, &model.model, false, started.elapsed());
        match models.next(cooldowns, &ctx.run_id, &error).await {
            Some(fallback) => sink.emit(fallback).await?,
            None => return Err(error.into()),
        }
        provider = ctx.services.providers.get(&models.current().provider_key)?;
    };
    // Usage, metrics and failures name the model that answers.
    let answering = models.current().clone();
    let (provider_key, model_name) = (answering.provider_key.as_str(), answering.model.as_str());
    if !prompted && answers_by_tool(ctx, provider_key, schema) {
        // The answer tool's arguments are the answer's text.
        stream = agw_llm::structured::answer_from_tool(stream);
    } else if prompted && offer_tools {
        // The calls are parsed out of the text; numbered by the run's model call, their ids
        // stay apart from other turns' without renaming.
        let ids = format!("call_prompted_{}_", state.budget.model_calls());
        stream = agw_llm::prompted::parse_calls(stream, ids);
    } else if prompted {
        // Markers still never reach the client, and a call nothing could answer is not shown.
        stream = agw_llm::prompted::strip_calls(stream);
    }
    let mut out = TurnOutput { steers, ..TurnOutput::default() };
    let mut calls = CallAccumulator::default();
    // An agent with citable tools: `[cite:<id>]` markers leave the text as it streams.
    let mut cites = super::citations::filter(ctx);
    let mut pieces = Vec::new();
    loop {
        let next = match guard.as_mut() {
            // A classifier's verdict is taken as soon as it comes, between deltas.
            Some(g) if g.waiting() => tokio::select! {
                biased;
                classified = g.verdict() => Next::Verdict(classified),
                item = stream.next() => Next::Item(item),
            },
            _ => Next::Item(stream.next().await),
        };
        let item = match next {
            Next::Item(Some(item)) => item,
            Next::Item(None) => break,
            Next::Verdict(classified) => {
                guarded(ctx, state, classified, sink).await?;
                continue;
            }
        };
        let item = match item {
            Ok(item) => item,
            Err(e) => {
                // Output has started: the run ends here (nothing streamed is sent again), but
                // later calls give this model a rest.
                models.failed(cooldowns, &e).await;
                meter::call_duration(provider_key, model_name, false, started.elapsed());
                return Err(e.into());
            }
        };
        match item {
            LlmDelta::Reasoning { text } => {
                // After a tool-call chunk, the turn's text is kept but no longer streamed.
                if spec.emit_reasoning && calls.is_empty() {
                    sink.emit(AgentDelta::Reasoning(text)).await?;
                }
            }
            LlmDelta::Content { text } => {
                let text = match guard.as_mut() {
                    None => text,
                    Some(g) => {
                        let released = g.push(text);
                        guarded(ctx, state, Classified { findings: released.findings, usage: Vec::new() }, sink)
                            .await?;
                        released.text
                    }
                };
                if text.is_empty() {
                    continue;
                }
                match cites.as_mut() {
                    None => {
                        out.text.push_str(&text);
                        if calls.is_empty() {
                            sink.emit(AgentDelta::Content(text)).await?;
                        }
                    }
                    Some(filter) => {
                        filter.push_owned(text, &mut pieces);
                        cited_text(ctx, state, &mut pieces, calls.is_empty(), &mut out, sink).await?;
                    }
                }
            }
            LlmDelta::ToolCall(fragment) => match calls.on_fragment(fragment, &mut state.call_ids) {
                FragmentEffect::None => {}
                FragmentEffect::Start { index, delta } => {
                    let name = calls.calls()[index].normalized_name();
                    if super::approval::withholds(ctx, state, &name) {
                        // Nothing of it reaches the client before it is decided.
                        calls.withhold(index);
                        continue;
                    }
                    let call = &calls.calls()[index];
                    let delta = match decorate(ctx, &call.name) {
                        Decoration::Action(meta) => AgentDelta::ActionArgs { action_id: call.id.clone(), meta, delta },
                        Decoration::Tool(meta) => {
                            if meta.frontend.is_some() {
                                // Registered before the client can learn the id, so an early
                                // submit is matched.
                                match ctx.services.submits.register(&ctx.run_id, &call.id) {
                                    Some(waiter) => {
                                        out.frontend_waiters.insert(call.id.clone(), waiter);
                                    }
                                    None => tracing::warn!(tool_id = %call.id, "frontend waiter already registered"),
                                }
                            }
                            AgentDelta::ToolArgs { tool_id: call.id.clone(), meta, delta }
                        }
                    };
                    sink.emit(delta).await?;
                }
                FragmentEffect::Args { index, delta } => {
                    let call = &calls.calls()[index];
                    if call.streamed_as == Some(StreamedAs::Withheld) {
                        continue;
                    }
                    let delta = match ctx.services.tools.kind_of(&call.normalized_name()) {
                        agw_tools::ToolKind::Action => {
                            AgentDelta::ActionArgs { action_id: call.id.clone(), meta: Default::default(), delta }
                        }
                        _ => AgentDelta::ToolArgs { tool_id: call.id.clone(), meta: Default::default(), delta },
                    };
                    sink.emit(delta).await?;
                }
            },
            LlmDelta::Finish { reason } => out.finish_reason = Some(reason),
            LlmDelta::Usage { usage } => {
                state.context.calibrate(estimate, &usage);
                let call = CallUsage { provider: provider_key.to_owned(), model: model_name.to_owned(), usage };
                let spend = meter::usage(ctx, state, &call);
                // Counted where other runs see it before this run goes on.
                quota::spent(ctx, spend).await;
                sink.emit(AgentDelta::Usage(call)).await?;
            }
        }
    }
    if let Some(g) = guard.as_mut() {
        // What the rules held back, then the classifiers' word on the whole answer.
        let released = g.finish();
        guarded(ctx, state, Classified { findings: released.findings, usage: Vec::new() }, sink).await?;
        if !released.text.is_empty() {
            match cites.as_mut() {
                None => {
                    out.text.push_str(&released.text);
                    if calls.is_empty() {
                        sink.emit(AgentDelta::Content(released.text)).await?;
                    }
                }
                Some(filter) => {
                    filter.push_owned(released.text, &mut pieces);
                    cited_text(ctx, state, &mut pieces, calls.is_empty(), &mut out, sink).await?;
                }
            }
        }
    }
    if let Some(filter) = cites.as_mut() {
        // What was held back for a marker that never closed is text after all.
        filter.finish(&mut pieces);
        cited_text(ctx, state, &mut pieces, calls.is_empty(), &mut out, sink).await?;
    }
    if let Some(g) = guard.as_mut() {
        let classified = g.settle().await;
        guarded(ctx, state, classified, sink).await?;
    }
    meter::call_duration(provider_key, model_name, true, started.elapsed());
    out.calls = calls.into_calls().into_iter().filter(|c| !c.name.trim().is_empty()).collect();
    if prompted {
        // A call the model wrote wrong is answered with what is wrong, so it can correct it.
        for call in &mut out.calls {
            call.problem = agw_llm::prompted::check_call(&call.name, &call.arguments).err();
        }
    }
    Ok(out)
}

/// Whether a turn with `schema` sent to `provider_key` gets its answer as a tool call
/// (`agw_llm::structured`), the provider having no JSON-schema mode of its own.
fn answers_by_tool(ctx: &RunContext, provider_key: &str, schema: Option<&OutputSchema>) -> bool {
    schema.is_some() && ctx.services.providers.structured_output(provider_key) == agw_llm::StructuredOutput::Tool
}

/// The turn's prompt caching: on unless the stage's model says `"promptCache": false`, keyed by
/// a digest of the chat (the provider learns nothing of its id), worked out once per run into
/// `key`.
fn prompt_cache(model: &ResolvedModel, chat_id: &str, key: &mut Option<String>) -> PromptCache {
    if !model.prompt_cache {
        return PromptCache::default();
    }
    let key = key.get_or_insert_with(|| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("agw-prompt-cache\0{chat_id}"));
        format!("agw-{}", hex::encode(&digest[..16]))
    });
    PromptCache { enabled: true, key: Some(key.clone()) }
}

/// The stream of an open call whose first item was already read: that item, then the rest.
/// A stream that ended at once is not polled again (some streams panic when polled after
/// their end).
fn replay_first(first: Option<Result<LlmDelta, agw_llm::LlmError>>, rest: DeltaStream) -> DeltaStream {
    match first {
        Some(item) => Box::pin(futures::stream::once(async move { item }).chain(rest)),
        None => Box::pin(futures::stream::empty()),
    }
}

/// What the turn's loop waits for next.
enum Next {
    Item(Option<Result<LlmDelta, agw_llm::LlmError>>),
    Verdict(Classified),
}

/// Acts on the output guards' findings: judges' usage is charged, a warning streams as
/// `guard.warning`, a block revokes the turn's text (`content.revoke`) and ends the run — the
/// caller returns, which drops the provider's stream and so closes its connection.
async fn guarded<S: DeltaSink>(
    ctx: &RunContext,
    state: &mut RunState,
    classified: Classified,
    sink: &mut S,
) -> Result<(), RunFailure> {
    let Classified { findings, usage } = classified;
    super::guard::charge(usage, state, ctx, sink).await?;
    if let Some(block) = super::guard::report(GuardStage::Output, None, &findings, sink).await? {
        tracing::info!(run_id = %ctx.run_id, guard = %block.guard, "output blocked: the answer is revoked");
        sink.emit(AgentDelta::Revoke(Revocation {
            guard: block.guard.clone(),
            rule: block.rule.clone(),
            reason: block.reason.clone(),
        }))
        .await?;
        return Err(block.failure(GuardStage::Output));
    }
    Ok(())
}

/// Streams what the citation filter released: text as content (kept in the turn's text, the
/// marker-free answer the conversation goes on with), markers as citations. `streams`: false
/// after a tool call began, when the turn's text is kept but no longer streamed.
async fn cited_text<S: DeltaSink>(
    ctx: &RunContext,
    state: &mut RunState,
    pieces: &mut Vec<Piece>,
    streams: bool,
    out: &mut TurnOutput,
    sink: &mut S,
) -> Result<(), RunFailure> {
    for piece in pieces.drain(..) {
        if !streams && matches!(piece, Piece::Cite(_)) {
            // Not shown, so not numbered either.
            continue;
        }
        match super::citations::resolve(ctx, &mut state.citations, piece) {
            Resolved::Text(text) => {
                out.text.push_str(&text);
                if streams {
                    sink.emit(AgentDelta::Content(text)).await?;
                }
            }
            Resolved::Cited(citations) => {
                for citation in citations {
                    sink.emit(AgentDelta::Citation(citation)).await?;
                }
            }
        }
    }
    Ok(())
}

/// Takes the steers waiting when the turn starts, oldest first: for each, `request.steer` is
/// emitted (ending an open text block), then its message is appended to `messages` as a user
/// message — after the input guards, like the run's first message (a block ends the run).
/// Returns the appended messages. A steer leaves the queue only once its delta was delivered,
/// so one the sink refused (or whose delivery was cancelled) stays for `close`.
async fn take_steers<S: DeltaSink>(
    ctx: &RunContext,
    state: &mut RunState,
    messages: &mut Vec<ChatMessage>,
    sink: &mut S,
) -> Result<Vec<ChatMessage>, RunFailure> {
    let mut taken = Vec::new();
    // Only those already waiting: steady pushes cannot hold the turn back.
    for _ in 0..ctx.steers.pending() {
        let Some(steer) = ctx.steers.peek() else { break };
        sink.emit(steer.to_delta()).await?;
        ctx.steers.confirm(&steer.steer_id);
        tracing::debug!(run_id = %ctx.run_id, steer_id = %steer.steer_id, "steer taken");
        let content = super::guard::steered(ctx, state, steer.message, sink).await?;
        let message = ChatMessage::user(content);
        messages.push(message.clone());
        taken.push(message);
    }
    Ok(taken)
}
