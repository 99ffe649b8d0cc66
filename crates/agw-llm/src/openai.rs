//! The OpenAI-compatible streaming provider (OpenAI, DeepSeek, DashScope/Qwen compatible mode,
//! SiliconFlow, vLLM, …), on async-openai's bring-your-own-types streaming API so provider
//! extensions such as `reasoning_content` survive.
//!
//! One call = one `POST …/chat/completions` with `stream: true`. Retries (429 honouring
//! `Retry-After`, 5xx, connection failures) happen only while opening the stream — once the
//! response body started, a failure is reported, never replayed. An inactivity timeout bounds
//! the wait for the response headers and for every next chunk.

mod body;
mod chunk;
mod gate;
mod transport;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::traits::RequestOptionsBuilder;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use http::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

pub use body::{chat_completions_url, request_body};
pub use chunk::parse_chunk;

use crate::error::{LlmError, TimeoutPhase};
use crate::interaction;
use crate::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta};
use transport::{SingleAttempt, from_openai};
pub(crate) use transport::{error_chain, transport_error};

/// Header carrying [`CallOptions::stage`].
pub const STAGE_HEADER: &str = "x-agw-stage";
/// Header carrying [`CallOptions::run_id`].
pub const RUN_ID_HEADER: &str = "x-agw-run-id";

/// First retry waits this long, doubling per attempt.
const BASE_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A provider asking for a longer `Retry-After` is still retried after this long: the user is
/// waiting on a live stream.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

type ChunkStream = std::pin::Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>;

/// A provider speaking the OpenAI chat-completions streaming protocol.
#[derive(Clone)]
pub struct OpenAiCompatibleProvider {
    key: String,
    default_model: String,
    url: String,
    client: Client<OpenAIConfig>,
}

impl std::fmt::Debug for OpenAiCompatibleProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client holds the API key; it is never printed.
        f.debug_struct("OpenAiCompatibleProvider")
            .field("key", &self.key)
            .field("default_model", &self.default_model)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatibleProvider {
    /// A provider named `key` at `base_url` (with or without the trailing `/v1`).
    /// `default_model` is used when a request names no model.
    pub fn new(key: &str, base_url: &str, api_key: &str, default_model: &str) -> Result<Self, LlmError> {
        let url = chat_completions_url(base_url);
        reqwest::Url::parse(&url)
            .map_err(|e| LlmError::InvalidRequest { message: format!("invalid base URL for provider {key}: {e}") })?;
        let api_key = api_key.trim();
        interaction::register_secret(api_key);
        // async-openai builds the Authorization header with `unwrap()`; refuse such keys here
        // instead of panicking later (and never echo the key).
        HeaderValue::from_str(&format!("Bearer {api_key}")).map_err(|_| LlmError::InvalidRequest {
            message: format!("the API key of provider {key} contains characters not allowed in an HTTP header"),
        })?;
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .map_err(|e| LlmError::InvalidRequest { message: transport::error_chain(&e) })?;
        // Every field is set explicitly: OpenAIConfig's defaults read OPENAI_* environment
        // variables, which must not leak into requests to another provider.
        let config = OpenAIConfig::new()
            .with_api_base(body::api_base(base_url))
            .with_api_key(api_key)
            .with_org_id("")
            .with_project_id("");
        let client = Client::with_config(config).with_http_service(SingleAttempt::new(http));
        Ok(Self { key: key.to_owned(), default_model: default_model.to_owned(), url, client })
    }

    /// The full `chat/completions` URL this provider posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The provider key it was registered under.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl ChatProvider for OpenAiCompatibleProvider {
    fn stream(&self, request: ChatRequest, options: CallOptions) -> BoxFuture<'static, Result<DeltaStream, LlmError>> {
        let body = request_body(&request, &self.default_model);
        let this = self.clone();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let chunks = this.open(&body, &options).await?;
            tracing::debug!(
                provider = %this.key, stage = %options.stage, run_id = %options.run_id,
                "provider stream opened"
            );
            Ok(delta_stream(Upstream::new(chunks, this.key, options, started)))
        })
    }
}

impl OpenAiCompatibleProvider {
    /// Sends the request until it gets a 2xx response or a non-retriable failure.
    async fn open(&self, body: &Value, options: &CallOptions) -> Result<ChunkStream, LlmError> {
        let headers = request_headers(options);
        if interaction::active() {
            tracing::debug!(
                target: interaction::TARGET,
                provider = %self.key, stage = %options.stage, run_id = %options.run_id, url = %self.url,
                body = %interaction::render(body), "llm request"
            );
        }
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(
                provider = %self.key, stage = %options.stage, run_id = %options.run_id,
                url = %self.url, attempt, "calling provider"
            );
            // The transport puts the response body behind this gate: it is read only as fast as
            // the run takes chunks (async-openai would otherwise read it all into memory).
            let gate = Arc::new(gate::BodyGate::default());
            let send = gate::CURRENT.scope(gate.clone(), async {
                self.client
                    .chat()
                    .headers(headers.clone())
                    .create_stream_byot::<_, Value>(body)
                    .await
                    .map_err(from_openai)
            });
            let error = match tokio::time::timeout(options.inactivity_timeout, send).await {
                Ok(Ok(chunks)) => return Ok(Box::pin(gate::Demand::new(chunks, gate))),
                Ok(Err(error)) => error,
                Err(_) => {
                    LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: millis(options.inactivity_timeout) }
                }
            };
            if attempt >= options.max_retries || !error.auto_retry() {
                tracing::debug!(
                    provider = %self.key, stage = %options.stage, run_id = %options.run_id,
                    attempt, error = %error, "provider call failed"
                );
                return Err(error);
            }
            let delay = retry_delay(&error, attempt);
            tracing::debug!(
                provider = %self.key, stage = %options.stage, run_id = %options.run_id,
                attempt, delay_ms = millis(delay), error = %error, "retrying provider call"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

/// `Accept`, stage and run-id headers of one call (`Authorization` comes from the config).
/// Values that are not valid header text are left out rather than failing the call.
fn request_headers(options: &CallOptions) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    for (name, value) in [(STAGE_HEADER, &options.stage), (RUN_ID_HEADER, &options.run_id)] {
        if value.is_empty() {
            continue;
        }
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

/// Backoff before retry `attempt + 1`: `Retry-After` (capped), else 100 ms doubling up to 2 s.
/// Shared with the Anthropic provider.
pub(crate) fn retry_delay(error: &LlmError, attempt: u32) -> Duration {
    error.retry_after().map(|d| d.min(MAX_RETRY_AFTER)).unwrap_or_else(|| {
        let factor = 2u32.saturating_pow(attempt.min(16));
        BASE_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
    })
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The open upstream response, turned into deltas one chunk at a time.
struct Upstream {
    chunks: ChunkStream,
    /// Deltas of the chunk being delivered (one chunk may carry e.g. content and finish).
    pending: VecDeque<LlmDelta>,
    saw_finish: bool,
    done: bool,
    chunk_count: u64,
    provider: String,
    options: CallOptions,
    /// When the request was sent, for the time-to-first-chunk metric.
    started: std::time::Instant,
}

/// Provider latency from request to first chunk (seconds), labelled by provider key.
pub const FIRST_TOKEN_METRIC: &str = "agw_provider_first_token_seconds";

impl Upstream {
    fn new(chunks: ChunkStream, provider: String, options: CallOptions, started: std::time::Instant) -> Self {
        Self {
            chunks,
            pending: VecDeque::new(),
            saw_finish: false,
            done: false,
            chunk_count: 0,
            provider,
            options,
            started,
        }
    }

    async fn next_item(&mut self) -> Option<Result<LlmDelta, LlmError>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                return Some(Ok(delta));
            }
            if self.done {
                return None;
            }
            let timeout = self.options.inactivity_timeout;
            match tokio::time::timeout(timeout, self.chunks.next()).await {
                Err(_) => {
                    let phase = if self.chunk_count == 0 {
                        TimeoutPhase::BeforeFirstChunk
                    } else {
                        TimeoutPhase::BetweenChunks
                    };
                    return self.fail(LlmError::Timeout { phase, ms: millis(timeout) });
                }
                Ok(None) if self.saw_finish => {
                    self.done = true;
                    if interaction::active() {
                        tracing::debug!(
                            target: interaction::TARGET,
                            provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                            chunks = self.chunk_count, "llm response complete"
                        );
                    }
                    tracing::debug!(
                        provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                        chunks = self.chunk_count, "provider stream finished"
                    );
                    return None;
                }
                Ok(None) => return self.fail(LlmError::EndedWithoutFinish),
                Ok(Some(Err(error))) => return self.fail(from_openai(error)),
                Ok(Some(Ok(chunk))) => {
                    self.chunk_count += 1;
                    if self.chunk_count == 1 {
                        metrics::histogram!(FIRST_TOKEN_METRIC, "provider" => self.provider.clone())
                            .record(self.started.elapsed().as_secs_f64());
                    }
                    if interaction::active() {
                        tracing::debug!(
                            target: interaction::TARGET,
                            provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                            chunk = %interaction::render(&chunk), "llm delta"
                        );
                    }
                    match parse_chunk(&chunk) {
                        Ok(deltas) => {
                            self.saw_finish |= deltas.iter().any(|d| matches!(d, LlmDelta::Finish { .. }));
                            self.pending.extend(deltas);
                        }
                        Err(error) => return self.fail(error),
                    }
                }
            }
        }
    }

    /// Ends the stream with `error` as its last item.
    fn fail(&mut self, error: LlmError) -> Option<Result<LlmDelta, LlmError>> {
        self.done = true;
        self.pending.clear();
        if interaction::active() {
            tracing::debug!(
                target: interaction::TARGET,
                provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                chunks = self.chunk_count, error = %interaction::mask_text(&error.to_string()), "llm response failed"
            );
        }
        tracing::debug!(
            provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
            chunks = self.chunk_count, error = %error, "provider stream failed"
        );
        Some(Err(error))
    }
}

/// Dropping the returned stream drops the async-openai reader, whose task then drops the
/// response: the upstream connection closes without waiting for another chunk.
fn delta_stream(upstream: Upstream) -> DeltaStream {
    Box::pin(futures::stream::unfold(upstream, |mut upstream| async move {
        let item = upstream.next_item().await?;
        Some((item, upstream))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let e = LlmError::Connection { message: String::new() };
        assert_eq!(retry_delay(&e, 0), Duration::from_millis(100));
        assert_eq!(retry_delay(&e, 1), Duration::from_millis(200));
        assert_eq!(retry_delay(&e, 30), MAX_BACKOFF);
        let e = LlmError::Http { status: 429, retry_after: Some(Duration::from_secs(99)), body: String::new() };
        assert_eq!(retry_delay(&e, 0), MAX_RETRY_AFTER);
    }

    #[test]
    fn invalid_configuration_is_an_error_not_a_panic() {
        assert!(matches!(
            OpenAiCompatibleProvider::new("p", "not a url", "k", "m"),
            Err(LlmError::InvalidRequest { .. })
        ));
        let err = OpenAiCompatibleProvider::new("p", "http://127.0.0.1:1", "bad\nkey", "m").unwrap_err();
        assert!(!err.to_string().contains("bad\nkey"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let provider = OpenAiCompatibleProvider::new("p", "http://127.0.0.1:1", "sk-very-secret", "m").unwrap();
        let text = format!("{provider:?}");
        assert!(!text.contains("sk-very-secret") && text.contains("http://127.0.0.1:1/v1/chat/completions"));
    }

    #[test]
    fn headers_skip_blank_and_invalid_values() {
        let options = CallOptions { stage: "react-step-1".into(), run_id: "bad\nid".into(), ..Default::default() };
        let headers = request_headers(&options);
        assert_eq!(headers.get(STAGE_HEADER).unwrap(), "react-step-1");
        assert!(headers.get(RUN_ID_HEADER).is_none());
        assert_eq!(headers.get(ACCEPT).unwrap(), "text/event-stream");
    }
}
