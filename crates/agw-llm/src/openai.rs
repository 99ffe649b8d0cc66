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
use std::time::Instant;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::traits::RequestOptionsBuilder;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use http::header::HeaderValue;
use serde_json::Value;

pub use body::{chat_completions_url, request_body};
pub use chunk::parse_chunk;

use crate::error::LlmError;
use crate::interaction;
use crate::transport::{
    CallSite, ResponseLimits, ResponseMeter, StreamLog, call_headers, http_client, millis, open_with_retries,
};
pub use crate::transport::{FIRST_TOKEN_METRIC, RUN_ID_HEADER, STAGE_HEADER};
use crate::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta};
use transport::{SingleAttempt, from_openai};

type ChunkStream = std::pin::Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>;

/// A provider speaking the OpenAI chat-completions streaming protocol.
#[derive(Clone)]
pub struct OpenAiCompatibleProvider {
    key: String,
    default_model: String,
    url: String,
    client: Client<OpenAIConfig>,
    limits: ResponseLimits,
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
        let http = http_client()?;
        // Every field is set explicitly: OpenAIConfig's defaults read OPENAI_* environment
        // variables, which must not leak into requests to another provider.
        let config = OpenAIConfig::new()
            .with_api_base(body::api_base(base_url))
            .with_api_key(api_key)
            .with_org_id("")
            .with_project_id("");
        let client = Client::with_config(config).with_http_service(SingleAttempt::new(http));
        let limits = ResponseLimits::default();
        Ok(Self { key: key.to_owned(), default_model: default_model.to_owned(), url, client, limits })
    }

    /// The same provider with other caps on what one response may hold.
    pub fn with_limits(mut self, limits: ResponseLimits) -> Self {
        self.limits = limits;
        self
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
            let started = Instant::now();
            let (chunks, gate) = this.open(&body, &options).await?;
            let meter = ResponseMeter::new(this.limits);
            Ok(delta_stream(Upstream::new(chunks, gate, meter, StreamLog::new(this.key, options, started))))
        })
    }
}

impl OpenAiCompatibleProvider {
    /// Sends the request until it gets a 2xx response or a non-retriable failure.
    async fn open(&self, body: &Value, options: &CallOptions) -> Result<(ChunkStream, Arc<gate::BodyGate>), LlmError> {
        let headers = call_headers(options);
        let site = CallSite { provider: &self.key, url: &self.url, options };
        open_with_retries(site, body, || {
            // The transport puts the response body behind this gate: it is read only as fast as
            // the run takes chunks (async-openai would otherwise read it all into memory).
            let gate = Arc::new(gate::BodyGate::new(self.limits));
            let headers = headers.clone();
            let send = gate::CURRENT.scope(gate.clone(), async move {
                self.client.chat().headers(headers).create_stream_byot::<_, Value>(body).await.map_err(from_openai)
            });
            async move {
                let chunks = send.await?;
                Ok((Box::pin(gate::Demand::new(chunks, gate.clone())) as ChunkStream, gate))
            }
        })
        .await
    }
}

/// The open upstream response, turned into deltas one chunk at a time.
struct Upstream {
    chunks: ChunkStream,
    /// Deltas of the chunk being delivered (one chunk may carry e.g. content and finish).
    pending: VecDeque<LlmDelta>,
    saw_finish: bool,
    done: bool,
    /// Knows which response limit the body broke, if any.
    gate: Arc<gate::BodyGate>,
    /// Counts the turn's tool calls.
    meter: ResponseMeter,
    log: StreamLog,
}

impl Upstream {
    fn new(chunks: ChunkStream, gate: Arc<gate::BodyGate>, meter: ResponseMeter, log: StreamLog) -> Self {
        Self { chunks, pending: VecDeque::new(), saw_finish: false, done: false, gate, meter, log }
    }

    async fn next_item(&mut self) -> Option<Result<LlmDelta, LlmError>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                return Some(Ok(delta));
            }
            if self.done {
                return None;
            }
            let timeout = self.log.options().inactivity_timeout;
            match tokio::time::timeout(timeout, self.chunks.next()).await {
                Err(_) => {
                    let phase = self.log.timeout_phase();
                    return self.fail(LlmError::Timeout { phase, ms: millis(timeout) });
                }
                Ok(None) if self.saw_finish => {
                    self.done = true;
                    self.log.complete();
                    return None;
                }
                Ok(None) => return self.fail(LlmError::EndedWithoutFinish),
                Ok(Some(Err(error))) => {
                    let error = self.gate.take_violation().unwrap_or_else(|| from_openai(error));
                    return self.fail(error);
                }
                Ok(Some(Ok(chunk))) => {
                    self.log.chunk("", || interaction::render(&chunk));
                    match parse_chunk(&chunk).and_then(|deltas| self.meter.deltas(&deltas).map(|()| deltas)) {
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
        self.log.failed(&error);
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
}
