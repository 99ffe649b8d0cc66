//! agw-llm — streaming chat completions from model providers, as [`LlmDelta`]s.
//!
//! Owns: the provider-neutral request ([`ChatRequest`]), the [`ChatProvider`] trait, the
//! OpenAI-compatible streaming client ([`OpenAiCompatibleProvider`]: reqwest, agw's SSE decoder
//! and a lean typed chunk view, so `reasoning_content` and friends survive), retries *only before
//! the response body started*, inactivity timeouts, the provider registry built from configuration
//! ([`ProviderRegistry`]). The offline demo model lives in `agw-demo`, the scripted fixture
//! provider for tests in `agw-testkit`.
//!
//! The `ANTHROPIC` protocol is served by [`AnthropicProvider`] (Messages API streaming on
//! reqwest, mapped onto the same [`LlmDelta`]s, with the same retry/timeout guarantees).
//!
//! Features (both on by default): `openai` — the OpenAI-compatible provider (it still brings
//! async-openai, for the temporary `AGW_OPENAI_STREAM=async-openai` comparison path);
//! `anthropic` — the Anthropic provider. Without one, configuring that protocol is a clear error
//! when the registry is built, never a silent fallback.
//!
//! ```
//! use agw_llm::{CallOptions, ChatMessage, ChatRequest, LlmDelta, ProviderConfig, ProviderRegistry};
//! use futures::StreamExt;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! # let model = agw_testkit::FixtureServer::with_default(agw_testkit::Transcript::openai_text(&["Hi", "!"]))
//! #     .await
//! #     .unwrap();
//! # let base_url = model.base_url();
//! // Providers come from configuration: the variables an operator would set.
//! let vars = [
//!     ("AGENT_PROVIDERS_LAB_BASE_URL", base_url.as_str()), // e.g. https://api.deepseek.com
//!     ("AGENT_PROVIDERS_LAB_API_KEY", "sk-…"),
//!     ("AGENT_PROVIDERS_LAB_MODEL", "deepseek-chat"),
//! ];
//! let configs = ProviderConfig::from_env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
//! let provider = ProviderRegistry::new(configs).get("lab").unwrap();
//! let request = ChatRequest {
//!     provider_key: "lab".into(),
//!     model: String::new(), // the provider's default model
//!     messages: vec![ChatMessage::user("Hello")],
//!     tools: vec![],
//!     tool_choice: None,
//!     reasoning: Default::default(),
//!     temperature: None,
//!     top_p: None,
//!     max_tokens: None,
//!     prompt_cache: Default::default(),
//!     response_format: None,
//! };
//! // One upstream chunk, one delta, as soon as it arrives.
//! let mut stream = provider.stream(request, CallOptions::default()).await.unwrap();
//! let mut answer = String::new();
//! while let Some(delta) = stream.next().await {
//!     if let LlmDelta::Content { text } = delta.unwrap() {
//!         answer.push_str(&text);
//!     }
//! }
//! assert_eq!(answer, "Hi!");
//! # });
//! ```
//!
//! Must never: replay a stream that already produced output, buffer or merge upstream chunks
//! (each chunk is parsed and yielded as soon as it arrives), panic on malformed input, put the
//! API key in an error or a log line, or know about SSE events, agents or HTTP serving.

#![forbid(unsafe_code)]
// Without any provider feature only the registry and the shared types remain; the shared
// transport then has no user, which is expected.
#![cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]

#[cfg(feature = "anthropic")]
pub mod anthropic;
pub mod attachments;
pub mod error;
pub mod interaction;
#[cfg(feature = "openai")]
pub mod openai;
pub mod prompted;
pub mod provider;
pub mod reason;
pub mod registry;
pub mod structured;
pub mod tokens;
mod transport;

/// The provider-neutral request types, defined in `agw-protocol` so that crates that only store or
/// replay conversations need no provider client.
pub use agw_protocol::chat as request;
pub use agw_protocol::chat::{
    ChatMessage, ChatRequest, ReasoningEffort, ReasoningSetting, ToolCallMessage, ToolChoice, ToolSpec,
};
pub use agw_protocol::delta::{LlmDelta, ToolCallFragment};
#[cfg(feature = "anthropic")]
pub use anthropic::AnthropicProvider;
pub use attachments::AttachmentSupport;
pub use error::{LlmError, TimeoutPhase};
#[cfg(feature = "openai")]
pub use openai::OpenAiCompatibleProvider;
pub use provider::{CallOptions, ChatProvider, DeltaStream};
pub use reason::{FallbackReason, ReasonSet};
pub use registry::{ModelLimits, ProviderConfig, ProviderProtocol, ProviderRegistry};
pub use structured::StructuredOutput;
pub use transport::{FIRST_TOKEN_METRIC, RUN_ID_HEADER, ResponseLimits, ResponseMeter, STAGE_HEADER};
