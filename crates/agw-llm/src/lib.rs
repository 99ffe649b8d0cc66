//! agw-llm — streaming chat completions from model providers, as [`LlmDelta`]s.
//!
//! Owns: the provider-neutral request ([`ChatRequest`]), the [`ChatProvider`] trait, the
//! OpenAI-compatible streaming client ([`OpenAiCompatibleProvider`]: async-openai with `byot`,
//! so `reasoning_content` and friends survive), retries *only before the response body
//! started*, inactivity timeouts, the provider registry built from configuration
//! ([`ProviderRegistry`]), the embedded offline demo model ([`DemoProvider`]), and the
//! scripted fixture provider used by tests and benchmarks ([`fixture`]).
//!
//! The `ANTHROPIC` protocol is served by [`AnthropicProvider`] (Messages API streaming on
//! reqwest, mapped onto the same [`LlmDelta`]s, with the same retry/timeout guarantees).
//!
//! Must never: replay a stream that already produced output, buffer or merge upstream chunks
//! (each chunk is parsed and yielded as soon as it arrives), panic on malformed input, put the
//! API key in an error or a log line, or know about SSE events, agents or HTTP serving (the
//! fixture server is test support, not the gateway).

pub mod anthropic;
pub mod demo;
pub mod error;
pub mod fixture;
pub mod interaction;
pub mod openai;
pub mod provider;
pub mod registry;
pub mod request;

pub use agw_protocol::delta::{LlmDelta, ToolCallFragment};
pub use anthropic::AnthropicProvider;
pub use demo::DemoProvider;
pub use error::{LlmError, TimeoutPhase};
pub use openai::OpenAiCompatibleProvider;
pub use provider::{CallOptions, ChatProvider, DeltaStream};
pub use registry::{ProviderConfig, ProviderProtocol, ProviderRegistry};
pub use request::{ChatMessage, ChatRequest, ReasoningEffort, ReasoningSetting, ToolCallMessage, ToolChoice, ToolSpec};
