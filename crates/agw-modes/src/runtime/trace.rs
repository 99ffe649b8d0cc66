//! A run's distributed-tracing spans, after the OpenTelemetry GenAI semantic conventions
//! (`docs/observability.md`): `invoke_agent {agentKey}` per run, `chat {model}` per model call,
//! `execute_tool {name}` per tool call, `execute_task {taskId}` per plan task.
//!
//! They are plain `tracing` spans with the target [`TRACE_TARGET`]; whoever installs a subscriber
//! decides where they go (agw's server exports them over OTLP when configured and keeps them out
//! of its log lines). With no subscriber interested, each costs one cached interest check: the
//! span is disabled and nothing is formatted or recorded.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use agw_llm::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta, LlmError};
use agw_protocol::usage::{RunUsage, TokenCounts};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::{RunContext, RunOutcome, RunServices};

/// The `tracing` target of every span of this module.
pub const TRACE_TARGET: &str = "gen_ai";

/// Writes the current trace context as headers of an outgoing request (W3C `traceparent`,
/// `tracestate`); called with the model call's span entered.
pub type Propagate = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// How a run reports to distributed tracing.
#[derive(Clone, Default)]
pub struct RunTracing {
    /// Gives every provider request the trace context of its `chat` span; `None`: no trace
    /// headers are sent.
    pub propagate: Option<Propagate>,
    /// Records message contents, tool arguments and results on the spans, masked like the log
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). Off by default.
    pub capture_content: bool,
}

impl std::fmt::Debug for RunTracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTracing")
            .field("propagate", &self.propagate.is_some())
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

/// The run's span. Its parent is the caller's current span (or OpenTelemetry context).
pub(crate) fn invoke_agent(ctx: &RunContext) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "invoke_agent",
        otel.name = %format!("invoke_agent {}", ctx.agent.key),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %ctx.agent.key,
        gen_ai.agent.name = %ctx.agent.name,
        gen_ai.conversation.id = %ctx.chat_id,
        agw.run.id = %ctx.run_id,
        agw.agent.mode = ctx.agent.mode.kind().as_str(),
        agw.run.outcome = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_message = Empty,
    )
}

/// Records how the run ended and what it used.
pub(crate) fn run_ended(span: &Span, outcome: &RunOutcome, usage: &RunUsage) {
    if span.is_disabled() {
        return;
    }
    if usage.totals.total() > 0 {
        span.record("gen_ai.usage.input_tokens", int(usage.totals.input_tokens));
        span.record("gen_ai.usage.output_tokens", int(usage.totals.output_tokens));
    }
    match outcome {
        RunOutcome::Completed { .. } => {
            span.record("agw.run.outcome", "complete");
        }
        RunOutcome::Failed(info) => {
            span.record("agw.run.outcome", "error");
            failed(span, info.code.as_str(), &info.message);
        }
        RunOutcome::Disconnected => {
            span.record("agw.run.outcome", "disconnected");
        }
    }
}

/// `tracing-opentelemetry` exports a `u64` field as its debug string; counts go out as integers.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn failed(span: &Span, error_type: &str, message: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_message", message);
}

/// Opens one model call in its `chat {model}` span: the provider request carries the span's
/// trace context, and the returned stream records time to first chunk, finish reason, usage and
/// the error (if any) as they pass. The span ends when the stream is dropped.
pub(crate) async fn open_chat(
    services: &RunServices,
    provider: Arc<dyn ChatProvider>,
    request: ChatRequest,
    mut options: CallOptions,
) -> Result<DeltaStream, LlmError> {
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "chat",
        otel.name = %format!("chat {}", request.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = %services.providers.provider_name(&request.provider_key),
        gen_ai.request.model = %request.model,
        gen_ai.request.temperature = Empty,
        gen_ai.request.top_p = Empty,
        gen_ai.request.max_tokens = Empty,
        agw.provider.key = %request.provider_key,
        agw.stage = %options.stage,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        agw.usage.reasoning_tokens = Empty,
        agw.response.time_to_first_chunk_ms = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_message = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
    );
    if span.is_disabled() {
        return provider.stream(request, options).await;
    }
    if let Some(t) = request.temperature {
        span.record("gen_ai.request.temperature", t);
    }
    if let Some(p) = request.top_p {
        span.record("gen_ai.request.top_p", p);
    }
    if let Some(n) = request.max_tokens {
        span.record("gen_ai.request.max_tokens", i64::from(n));
    }
    let capture = services.tracing.capture_content;
    if capture {
        let messages = serde_json::to_value(&request.messages).unwrap_or(Value::Null);
        span.record("gen_ai.input.messages", agw_llm::interaction::mask_value(&messages).to_string());
    }
    if let Some(propagate) = &services.tracing.propagate {
        let _entered = span.enter();
        options.headers.extend(propagate());
    }
    let started = Instant::now();
    match provider.stream(request, options).instrument(span.clone()).await {
        Ok(inner) => {
            Ok(Box::pin(TracedStream { inner, span, started, first: true, output: capture.then(String::new) }))
        }
        Err(e) => {
            failed(&span, e.code(), &e.to_string());
            Err(e)
        }
    }
}

/// A model call's stream inside its span.
struct TracedStream {
    inner: DeltaStream,
    span: Span,
    started: Instant,
    first: bool,
    /// The answer's text, when contents are captured.
    output: Option<String>,
}

impl Stream for TracedStream {
    type Item = Result<LlmDelta, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        let polled = this.inner.poll_next_unpin(cx);
        let span = &this.span;
        match &polled {
            Poll::Ready(Some(Ok(delta))) => {
                if std::mem::take(&mut this.first) {
                    span.record("agw.response.time_to_first_chunk_ms", int(this.started.elapsed().as_millis() as u64));
                }
                match delta {
                    LlmDelta::Finish { reason } => {
                        span.record("gen_ai.response.finish_reasons", reason.as_str());
                    }
                    LlmDelta::Usage { usage } => {
                        let counts = TokenCounts::from_usage(usage);
                        span.record("gen_ai.usage.input_tokens", int(counts.input_tokens));
                        span.record("gen_ai.usage.output_tokens", int(counts.output_tokens));
                        span.record("gen_ai.usage.cache_read.input_tokens", int(counts.cached_input_tokens));
                        span.record("gen_ai.usage.cache_creation.input_tokens", int(counts.cache_write_input_tokens));
                        span.record("agw.usage.reasoning_tokens", int(counts.reasoning_tokens));
                    }
                    LlmDelta::Content { text } => {
                        if let Some(output) = &mut this.output {
                            output.push_str(text);
                        }
                    }
                    _ => {}
                }
            }
            Poll::Ready(Some(Err(e))) => failed(span, e.code(), &e.to_string()),
            Poll::Ready(None) => {
                if let Some(output) = this.output.take() {
                    span.record("gen_ai.output.messages", agw_llm::interaction::mask_text(&output).as_str());
                }
            }
            Poll::Pending => {}
        }
        polled
    }
}

/// Which side runs a tool (`gen_ai.tool.type`): `extension` for agw's backend tools,
/// `function` for the client's (frontend tools, actions).
pub(crate) fn execute_tool(call_id: &str, name: &str, kind: agw_tools::ToolKind) -> Span {
    let (tool_type, agw_kind) = match kind {
        agw_tools::ToolKind::Backend => ("extension", "backend"),
        agw_tools::ToolKind::Frontend => ("function", "frontend"),
        agw_tools::ToolKind::Action => ("function", "action"),
    };
    tracing::info_span!(
        target: TRACE_TARGET,
        "execute_tool",
        otel.name = %format!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %name,
        gen_ai.tool.call.id = %call_id,
        gen_ai.tool.type = tool_type,
        agw.tool.kind = agw_kind,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_message = Empty,
    )
}

/// Records a tool call's result: a result saying `"ok": false` marks the span failed (its
/// `code`, else `tool_error`).
pub(crate) fn tool_ended(span: &Span, capture: bool, args: &Value, result: &str) {
    if span.is_disabled() {
        return;
    }
    if capture {
        span.record("gen_ai.tool.call.arguments", agw_llm::interaction::mask_value(args).to_string());
        span.record("gen_ai.tool.call.result", agw_llm::interaction::mask_text(result).as_str());
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(result) else {
        return;
    };
    if object.get("ok") == Some(&Value::Bool(false)) {
        let code = object.get("code").and_then(Value::as_str).unwrap_or("tool_error");
        let message = object.get("error").and_then(Value::as_str).unwrap_or("the tool failed");
        failed(span, code, message);
    }
}

/// A guard's decision (docs/guardrails.md): a classifier's check spans its call (webhook or
/// judge, whose run is its child); a rule's finding is a span of its own, at once. Both under
/// the span current where the text was checked (the run, a model call, a tool call).
pub(crate) fn guard(stage: &str, guard: &str) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "guard",
        otel.name = %format!("guard {guard}"),
        agw.guard.stage = stage,
        agw.guard.name = %guard,
        agw.guard.rule = Empty,
        agw.guard.action = Empty,
        agw.guard.reason = Empty,
    )
}

/// Records a guard's verdict (`allow`, `warn`, `redact`, `block`, or `none` when a classifier
/// gave none).
pub(crate) fn guard_decided(span: &Span, action: &str, rule: Option<&str>, reason: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("agw.guard.action", action);
    if let Some(rule) = rule {
        span.record("agw.guard.rule", rule);
    }
    span.record("agw.guard.reason", reason);
}

/// A plan task's span: its model calls and tool calls are its children.
pub(crate) fn task(task_id: &str, description: &str) -> Span {
    tracing::info_span!(
        target: TRACE_TARGET,
        "execute_task",
        otel.name = %format!("execute_task {task_id}"),
        agw.task.id = %task_id,
        agw.task.description = %description,
        agw.task.status = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_message = Empty,
    )
}

/// Records how a task ended (`completed`, `failed`, …; a failure code marks the span failed).
pub(crate) fn task_ended(span: &Span, status: &str, failure: Option<(&str, &str)>) {
    span.record("agw.task.status", status);
    if let Some((code, message)) = failure {
        failed(span, code, message);
    }
}
