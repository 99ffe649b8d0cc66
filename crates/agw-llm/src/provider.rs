//! The provider abstraction every mode calls.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;

use crate::{ChatRequest, LlmDelta, LlmError};

/// The stream of one model turn. Items arrive as soon as the upstream chunk is parsed.
/// The stream ends (`None`) after the upstream end; an `Err` item is terminal.
pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<LlmDelta, LlmError>> + Send>>;

/// Per-call settings that are not part of the request body.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Inactivity timeout: max wait for the first chunk and between chunks
    /// (`budget.model.timeoutMs`).
    pub inactivity_timeout: Duration,
    /// Retries on 429 / 5xx / connection failure, only before any byte of the body arrived.
    pub max_retries: u32,
    /// Stage name of the turn (`agent-oneshot`, …): sent as header `x-agw-stage`, logged.
    pub stage: String,
    /// Run id: sent as header `x-agw-run-id`, logged.
    pub run_id: String,
    /// Failures with these reasons are returned at once instead of retried: the caller has
    /// another model to go to (`modelConfig.fallbacks`). Empty by default.
    pub fail_fast: crate::ReasonSet,
    /// Extra request headers: the caller's trace context (W3C `traceparent`, `tracestate`).
    /// A name or value that is not valid header text is left out rather than failing the call.
    pub headers: Vec<(String, String)>,
}

impl Default for CallOptions {
    fn default() -> Self {
        Self {
            inactivity_timeout: Duration::from_secs(60),
            max_retries: 2,
            stage: String::new(),
            run_id: String::new(),
            fail_fast: crate::ReasonSet::EMPTY,
            headers: Vec::new(),
        }
    }
}

/// A streaming chat-completion backend. Implemented by the OpenAI-compatible client, the
/// embedded demo model and test doubles. Dropping the returned stream cancels the upstream
/// request (closes its connection).
pub trait ChatProvider: Send + Sync + 'static {
    /// Starts one model turn. The future resolves when the response has started (for HTTP
    /// providers: a 2xx status, after any retries); an error there means no delta was produced.
    /// Later failures arrive as the stream's terminal `Err` item.
    fn stream(&self, request: ChatRequest, options: CallOptions) -> BoxFuture<'static, Result<DeltaStream, LlmError>>;
}
