//! The OpenAI-compatible streaming provider (OpenAI, DeepSeek, DashScope/Qwen compatible mode,
//! SiliconFlow, vLLM, …).
//!
//! One call = one `POST …/chat/completions` with `stream: true`. Retries (429 honouring
//! `Retry-After`, 5xx, connection failures) happen only while opening the stream — once the
//! response body started, a failure is reported, never replayed. An inactivity timeout bounds
//! the wait for the response headers and for every next read of the body.
//!
//! The stream is read directly (`direct`): reqwest's body, one network read at a time and only
//! when the run asks for the next delta, SSE frames decoded by `agw_protocol::sse`, each `data:`
//! payload decoded into a lean typed view ([`parse_chunk_str`]) — no task, channel or
//! `serde_json::Value` per chunk, and provider extensions such as `reasoning_content` survive.
//!
//! The previous path on async-openai's bring-your-own-types streaming API (`byot`, with the
//! backpressure `gate` it needs) is still selectable with `AGW_OPENAI_STREAM=async-openai`: a
//! fallback while the direct path meets providers in the field, and the second arm of the
//! interleaved A/B in docs/performance.md (round two). Removing it (with `byot`, `gate`,
//! `transport` and the `async-openai` dependency) is the planned next step.

mod body;
mod byot;
mod chunk;
mod direct;
mod gate;
mod transport;

use std::collections::VecDeque;
use std::time::Instant;

use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

pub use body::{chat_completions_url, request_body};
pub use chunk::{parse_chunk, parse_chunk_str};

use crate::error::LlmError;
use crate::interaction;
use crate::transport::{
    CallSite, DeltaSource, ResponseLimits, StreamLog, UpstreamSse, call_headers, delta_stream, http_client, post_json,
};
pub use crate::transport::{FIRST_TOKEN_METRIC, RUN_ID_HEADER, STAGE_HEADER};
use crate::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta};

/// The environment variable that selects the streaming path when a provider is built:
/// `async-openai` for the old path, anything else (or unset) for the direct one (see the module
/// documentation).
const STREAM_PATH_VAR: &str = "AGW_OPENAI_STREAM";

/// A provider speaking the OpenAI chat-completions streaming protocol.
#[derive(Clone)]
pub struct OpenAiCompatibleProvider {
    key: String,
    default_model: String,
    url: String,
    /// `Bearer <API key>`, marked sensitive; only ever written into the `Authorization` header.
    authorization: HeaderValue,
    http: reqwest::Client,
    path: StreamPath,
    limits: ResponseLimits,
    /// Whether calls carry `prompt_cache_key`.
    cache_key: bool,
}

/// How responses are read (see the module documentation).
#[derive(Clone)]
enum StreamPath {
    Direct,
    /// TEMPORARY (A/B benchmark): async-openai's client, which holds the API key.
    AsyncOpenAi(Box<byot::Client>),
}

impl std::fmt::Debug for OpenAiCompatibleProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key is never printed.
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
        // Refuse keys that cannot be a header value here (async-openai would even panic on them),
        // and never echo the key.
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {api_key}")).map_err(|_| LlmError::InvalidRequest {
                message: format!("the API key of provider {key} contains characters not allowed in an HTTP header"),
            })?;
        authorization.set_sensitive(true);
        let http = http_client()?;
        let async_openai = std::env::var(STREAM_PATH_VAR).is_ok_and(|v| v.trim().eq_ignore_ascii_case("async-openai"));
        let path = if async_openai {
            StreamPath::AsyncOpenAi(Box::new(byot::client(base_url, api_key, http.clone())))
        } else {
            StreamPath::Direct
        };
        // OpenAI's own API takes the key; another server may reject a field it does not know.
        let cache_key = reqwest::Url::parse(&url).is_ok_and(|u| u.host_str() == Some("api.openai.com"));
        Ok(Self {
            key: key.to_owned(),
            default_model: default_model.to_owned(),
            url,
            authorization,
            http,
            path,
            limits: ResponseLimits::default(),
            cache_key,
        })
    }

    /// The same provider, sending `prompt_cache_key` with calls that cache (`true`) or never
    /// (`false`), whatever its host.
    pub fn with_prompt_cache_key(mut self, send: bool) -> Self {
        self.cache_key = send;
        self
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

    /// The same provider on the async-openai path (`true`) or the direct one, whatever
    /// [`STREAM_PATH_VAR`] says: lets tests compare both in one process.
    #[cfg(test)]
    fn on_async_openai(mut self, async_openai: bool) -> Self {
        self.path = if async_openai {
            let api_base = self.url.strip_suffix("/chat/completions").unwrap_or_default().to_owned();
            StreamPath::AsyncOpenAi(Box::new(byot::client(&api_base, self.api_key(), self.http.clone())))
        } else {
            StreamPath::Direct
        };
        self
    }
}

impl ChatProvider for OpenAiCompatibleProvider {
    fn stream(&self, request: ChatRequest, options: CallOptions) -> BoxFuture<'static, Result<DeltaStream, LlmError>> {
        let body = request_body(&request, &self.default_model, self.cache_key);
        let this = self.clone();
        Box::pin(async move {
            let started = Instant::now();
            let source = match &this.path {
                StreamPath::Direct => {
                    let response = this.open(&body, &options).await?;
                    Source::Direct(UpstreamSse::new(response, this.limits, options.inactivity_timeout))
                }
                StreamPath::AsyncOpenAi(client) => {
                    let site = CallSite { provider: &this.key, url: &this.url, options: &options };
                    Source::AsyncOpenAi(byot::Chunks::open(client, site, &body, this.limits).await?)
                }
            };
            let log = StreamLog::new(this.key, options, started);
            Ok(delta_stream(Upstream { source, pending: VecDeque::new(), saw_finish: false, done: false, log }))
        })
    }
}

impl OpenAiCompatibleProvider {
    /// Sends the request until it gets a 2xx response (body unread) or a non-retriable failure.
    async fn open(&self, body: &Value, options: &CallOptions) -> Result<reqwest::Response, LlmError> {
        let site = CallSite { provider: &self.key, url: &self.url, options };
        post_json(&self.http, site, self.request_headers(options), body, self.api_key()).await
    }

    /// Every request header: the shared call headers (`Accept`, stage, run id, trace context),
    /// then the key and the content type.
    fn request_headers(&self, options: &CallOptions) -> HeaderMap {
        let mut headers = call_headers(options);
        headers.insert(AUTHORIZATION, self.authorization.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers
    }

    /// The API key, to redact it from error bodies that echo it.
    fn api_key(&self) -> &str {
        self.authorization.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default()
    }
}

/// Where the chunks of an open response come from.
enum Source {
    /// The response body itself.
    Direct(UpstreamSse),
    /// TEMPORARY (A/B benchmark): async-openai's reader.
    AsyncOpenAi(byot::Chunks),
}

impl Source {
    /// The deltas of the next chunk, already counted against the limits; `None` at `[DONE]` or
    /// the end of the body.
    async fn next_chunk(&mut self, log: &mut StreamLog) -> Result<Option<Vec<LlmDelta>>, LlmError> {
        match self {
            Source::Direct(body) => direct::next_chunk(body, log).await,
            Source::AsyncOpenAi(chunks) => chunks.next_chunk(log).await,
        }
    }
}

/// The open upstream response, turned into deltas one chunk at a time.
struct Upstream {
    source: Source,
    /// Deltas of the chunk being delivered (one chunk may carry e.g. content and finish).
    pending: VecDeque<LlmDelta>,
    saw_finish: bool,
    done: bool,
    log: StreamLog,
}

impl DeltaSource for Upstream {
    async fn next_item(&mut self) -> Option<Result<LlmDelta, LlmError>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                return Some(Ok(delta));
            }
            if self.done {
                return None;
            }
            match self.source.next_chunk(&mut self.log).await {
                Ok(Some(deltas)) => {
                    self.saw_finish |= deltas.iter().any(|d| matches!(d, LlmDelta::Finish { .. }));
                    self.pending.extend(deltas);
                }
                Ok(None) if self.saw_finish => {
                    self.done = true;
                    self.log.complete();
                    return None;
                }
                Ok(None) => return self.fail(LlmError::EndedWithoutFinish),
                Err(error) => return self.fail(error),
            }
        }
    }
}

impl Upstream {
    /// Ends the stream with `error` as its last item.
    fn fail(&mut self, error: LlmError) -> Option<Result<LlmDelta, LlmError>> {
        self.done = true;
        self.pending.clear();
        self.log.failed(&error);
        Some(Err(error))
    }
}

#[cfg(test)]
mod tests;
