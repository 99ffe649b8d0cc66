//! The Anthropic Messages API streaming provider (`ANTHROPIC` protocol), on plain reqwest.
//!
//! One call = one `POST …/v1/messages` with `stream: true`, authenticated with `x-api-key`
//! (never `Authorization`). The SSE events are mapped onto the same [`LlmDelta`]s as the
//! OpenAI-compatible provider (see [`EventParser`]), with the same guarantees: every delta is yielded
//! as soon as the network read that completed its event is parsed, retries (429 honouring
//! `Retry-After`, 5xx including 529 "overloaded", connection failures) happen only before the
//! response body started, an inactivity timeout bounds the wait for the headers and for every
//! next read, and the API key appears in no error and no log line.

mod body;
mod event;
mod thinking;

use std::collections::VecDeque;
use std::time::Instant;

use futures::future::BoxFuture;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use agw_protocol::sse::SseFrame;

pub use body::{DEFAULT_MAX_TOKENS, messages_url, request_body, thinking_budget};
pub use event::EventParser;
pub use thinking::ThinkingCache;

use crate::error::LlmError;
use crate::interaction;
use crate::transport::{
    CallSite, DeltaSource, ResponseLimits, StreamLog, UpstreamSse, call_headers, delta_stream, http_client, post_json,
    render_data,
};
use crate::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta};

/// `anthropic-version` sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A provider speaking the Anthropic Messages API.
#[derive(Clone)]
pub struct AnthropicProvider {
    key: String,
    default_model: String,
    url: String,
    /// Marked sensitive; only ever written into the `x-api-key` header.
    api_key: HeaderValue,
    http: reqwest::Client,
    thinking: ThinkingCache,
    limits: ResponseLimits,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("key", &self.key)
            .field("default_model", &self.default_model)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// A provider named `key` at `base_url` (with or without the trailing `/v1`).
    /// `default_model` is used when a request names no model.
    pub fn new(key: &str, base_url: &str, api_key: &str, default_model: &str) -> Result<Self, LlmError> {
        let url = messages_url(base_url);
        reqwest::Url::parse(&url)
            .map_err(|e| LlmError::InvalidRequest { message: format!("invalid base URL for provider {key}: {e}") })?;
        let api_key = api_key.trim();
        interaction::register_secret(api_key);
        let mut header = HeaderValue::from_str(api_key).map_err(|_| LlmError::InvalidRequest {
            message: format!("the API key of provider {key} contains characters not allowed in an HTTP header"),
        })?;
        header.set_sensitive(true);
        let http = http_client()?;
        Ok(Self {
            key: key.to_owned(),
            default_model: default_model.to_owned(),
            url,
            api_key: header,
            http,
            thinking: ThinkingCache::default(),
            limits: ResponseLimits::default(),
        })
    }

    /// The same provider with other caps on what one response may hold.
    pub fn with_limits(mut self, limits: ResponseLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The full `messages` URL this provider posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The provider key it was registered under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The JSON body this provider would send for `request`.
    pub fn body(&self, request: &ChatRequest) -> Value {
        request_body(request, &self.default_model, &self.thinking)
    }
}

impl ChatProvider for AnthropicProvider {
    fn stream(&self, request: ChatRequest, options: CallOptions) -> BoxFuture<'static, Result<DeltaStream, LlmError>> {
        let body = self.body(&request);
        let this = self.clone();
        Box::pin(async move {
            let started = Instant::now();
            let response = this.open(&body, &options).await?;
            let upstream = Upstream {
                body: UpstreamSse::new(response, this.limits, options.inactivity_timeout),
                pending: VecDeque::new(),
                parser: EventParser::default(),
                done: false,
                thinking: this.thinking,
                log: StreamLog::new(this.key, options, started),
            };
            Ok(delta_stream(upstream))
        })
    }
}

impl AnthropicProvider {
    /// Sends the request until it gets a 2xx response or a non-retriable failure.
    async fn open(&self, body: &Value, options: &CallOptions) -> Result<reqwest::Response, LlmError> {
        let site = CallSite { provider: &self.key, url: &self.url, options };
        let key = self.api_key.to_str().unwrap_or_default();
        post_json(&self.http, site, self.request_headers(options), body, key).await
    }

    /// Every request header: key, version, content type, and the shared call headers (`Accept`,
    /// stage, run id).
    fn request_headers(&self, options: &CallOptions) -> HeaderMap {
        let mut headers = call_headers(options);
        headers.insert(HeaderName::from_static("x-api-key"), self.api_key.clone());
        headers.insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers
    }
}

/// The open response, turned into deltas one SSE event at a time.
struct Upstream {
    /// The body: read only when no parsed delta is left; metered (line length, body size, tool
    /// calls) before anything is buffered; bounded by the inactivity timeout.
    body: UpstreamSse,
    /// Deltas of the frame being delivered.
    pending: VecDeque<LlmDelta>,
    parser: EventParser,
    done: bool,
    thinking: ThinkingCache,
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
            match self.body.next_frame(&self.log).await {
                Ok(Some(frame)) => {
                    if let Err(error) = self.on_frame(&frame) {
                        return self.fail(error);
                    }
                    if self.parser.stopped() {
                        self.finish();
                    }
                }
                Ok(None) if self.parser.saw_finish() => {
                    // No `message_stop`, but the message was complete.
                    self.pending.extend(self.parser.take_usage());
                    self.finish();
                }
                Ok(None) => return self.fail(LlmError::EndedWithoutFinish),
                Err(error) => return self.fail(error),
            }
        }
    }
}

impl Upstream {
    /// Parses one SSE frame into [`Self::pending`].
    fn on_frame(&mut self, frame: &SseFrame) -> Result<(), LlmError> {
        if frame.data.trim().is_empty() {
            return Ok(());
        }
        self.log.chunk(&frame.event, || render_data(&frame.data));
        let deltas = self.parser.parse(&frame.event, &frame.data)?;
        self.body.meter().deltas(&deltas)?;
        self.pending.extend(deltas);
        Ok(())
    }

    /// The message is complete: remember its signed thinking, stop reading.
    fn finish(&mut self) {
        self.done = true;
        self.body.discard();
        if let Some((tool_use_id, blocks)) = self.parser.take_thinking() {
            self.thinking.insert(&tool_use_id, blocks);
        }
        self.log.complete();
    }

    /// Ends the stream with `error` as its last item.
    fn fail(&mut self, error: LlmError) -> Option<Result<LlmDelta, LlmError>> {
        self.done = true;
        self.pending.clear();
        self.body.discard();
        self.log.failed(&error);
        Some(Err(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_configuration_is_an_error_not_a_panic() {
        assert!(matches!(AnthropicProvider::new("p", "not a url", "k", "m"), Err(LlmError::InvalidRequest { .. })));
        let err = AnthropicProvider::new("p", "http://127.0.0.1:1", "bad\nkey", "m").unwrap_err();
        assert!(!err.to_string().contains("bad\nkey"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let provider = AnthropicProvider::new("p", "http://127.0.0.1:1/v1", "sk-ant-very-secret", "m").unwrap();
        let text = format!("{provider:?}");
        assert!(!text.contains("sk-ant-very-secret") && text.contains("http://127.0.0.1:1/v1/messages"), "{text}");
        let headers = provider.request_headers(&CallOptions { stage: "s".into(), ..Default::default() });
        assert!(!format!("{headers:?}").contains("sk-ant-very-secret"), "sensitive header value");
        assert!(headers.get(crate::RUN_ID_HEADER).is_none());
    }
}
