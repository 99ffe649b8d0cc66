//! What every HTTP provider shares: the client it sends with, opening a call with retries,
//! turning failures into [`LlmError`]s, reading the SSE body of the response (on demand, metered,
//! one inactivity timer per response), and the log lines and metric of one call.
//!
//! The OpenAI-compatible and Anthropic providers differ only in their wire formats (request body,
//! auth header, stream events). Everything here is the same for both and must stay so: retries
//! only before the response body started, the inactivity timeout around every attempt, status +
//! `Retry-After` + a bounded, key-redacted body excerpt for every non-2xx answer, and never a
//! redirect to another origin (a prompt body must not be re-sent to a host nobody configured).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use agw_protocol::sse::{SseDecoder, SseFrame};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use crate::error::{BODY_EXCERPT_CHARS, LlmError, TimeoutPhase, excerpt, redact};
use crate::{CallOptions, DeltaStream, LlmDelta, interaction};

/// Header carrying [`CallOptions::stage`].
pub const STAGE_HEADER: &str = "x-agw-stage";
/// Header carrying [`CallOptions::run_id`].
pub const RUN_ID_HEADER: &str = "x-agw-run-id";
/// Provider latency from request to first chunk (seconds), labelled by provider key.
pub const FIRST_TOKEN_METRIC: &str = "agw_provider_first_token_seconds";

/// First retry waits this long, doubling per attempt.
const BASE_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A provider asking for a longer `Retry-After` is still retried after this long: the user is
/// waiting on a live stream.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);
/// Error bodies are read up to this many bytes; the rest is never needed for an excerpt.
const MAX_ERROR_BODY_BYTES: usize = 8 * 1024;
/// Same-origin redirects (e.g. a trailing-slash fix) are followed at most this often.
const MAX_REDIRECTS: usize = 5;

/// The HTTP client of one provider: `TCP_NODELAY` (each request goes out at once) and a redirect
/// policy that follows only redirects to the same origin (scheme, host, port). A redirect to
/// another origin is not followed: the 3xx answer becomes [`LlmError::Http`] and the prompt body
/// never reaches the other host.
pub(crate) fn http_client() -> Result<reqwest::Client, LlmError> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt.previous().first().is_some_and(|first| {
            let next = attempt.url();
            first.scheme() == next.scheme()
                && first.host_str() == next.host_str()
                && first.port_or_known_default() == next.port_or_known_default()
        });
        if same_origin && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            if !same_origin {
                tracing::warn!(to = %attempt.url().origin().ascii_serialization(), "provider redirect to another origin not followed");
            }
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .redirect(policy)
        .build()
        .map_err(|e| LlmError::InvalidRequest { message: error_chain(&e) })
}

/// `Accept: text/event-stream` plus the stage and run-id headers and the caller's extra headers
/// of one call. Names and values that are not valid header text are left out rather than failing
/// the call.
pub(crate) fn call_headers(options: &CallOptions) -> HeaderMap {
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
    for (name, value) in &options.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    }
    headers
}

/// Who is calling where, for the log lines of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSite<'a> {
    pub provider: &'a str,
    pub url: &'a str,
    pub options: &'a CallOptions,
}

/// Runs `attempt` until it yields a 2xx response (its `Ok`) or a failure that must not be
/// retried: each attempt is bounded by the inactivity timeout; 429 (honouring `Retry-After`),
/// 5xx and connection failures are retried up to `options.max_retries` times with backoff.
/// Nothing of a response body has been consumed when this retries.
pub(crate) async fn open_with_retries<T, F, Fut>(
    site: CallSite<'_>,
    body: &Value,
    mut attempt: F,
) -> Result<T, LlmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, LlmError>>,
{
    let CallSite { provider, url, options } = site;
    if interaction::active() {
        tracing::debug!(
            target: interaction::TARGET,
            provider = %provider, stage = %options.stage, run_id = %options.run_id, url = %url,
            body = %interaction::render(body), "llm request"
        );
    }
    let mut tries: u32 = 0;
    loop {
        tracing::debug!(
            provider = %provider, stage = %options.stage, run_id = %options.run_id,
            url = %url, attempt = tries, "calling provider"
        );
        let error = match tokio::time::timeout(options.inactivity_timeout, attempt()).await {
            Ok(Ok(opened)) => {
                tracing::debug!(
                    provider = %provider, stage = %options.stage, run_id = %options.run_id,
                    "provider stream opened"
                );
                return Ok(opened);
            }
            Ok(Err(error)) => error,
            Err(_) => {
                LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: millis(options.inactivity_timeout) }
            }
        };
        // A failure the caller has another model for goes back at once: waiting out a rate limit
        // here would only delay the fallback.
        let handed_off = error.fallback_reason().is_some_and(|r| options.fail_fast.contains(r));
        if tries >= options.max_retries || !error.auto_retry() || handed_off {
            tracing::debug!(
                provider = %provider, stage = %options.stage, run_id = %options.run_id,
                attempt = tries, error = %error, "provider call failed"
            );
            return Err(error);
        }
        let delay = retry_delay(&error, tries);
        tracing::debug!(
            provider = %provider, stage = %options.stage, run_id = %options.run_id,
            attempt = tries, delay_ms = millis(delay), error = %error, "retrying provider call"
        );
        tokio::time::sleep(delay).await;
        tries += 1;
    }
}

/// POSTs `body` as JSON with `headers` (the caller's, `Content-Type` included) until a 2xx
/// response, its body unread, or a failure that must not be retried ([`open_with_retries`]).
/// The body is serialised once; every attempt sends the same bytes. `secret` (the API key) is
/// redacted from the excerpt of an error body.
pub(crate) async fn post_json(
    http: &reqwest::Client,
    site: CallSite<'_>,
    headers: HeaderMap,
    body: &Value,
    secret: &str,
) -> Result<reqwest::Response, LlmError> {
    // Serialising a `Value` cannot fail.
    let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    open_with_retries(site, body, || {
        let send = http.post(site.url).headers(headers.clone()).body(bytes.clone()).send();
        async move {
            let response = send.await.map_err(|e| transport_error(&e))?;
            if response.status().is_success() {
                return Ok(response);
            }
            Err(http_error(response, secret).await)
        }
    })
    .await
}

/// Backoff before retry `attempt + 1`: `Retry-After` (capped), else 100 ms doubling up to 2 s.
pub(crate) fn retry_delay(error: &LlmError, attempt: u32) -> Duration {
    error.retry_after().map(|d| d.min(MAX_RETRY_AFTER)).unwrap_or_else(|| {
        let factor = 2u32.saturating_pow(attempt.min(16));
        BASE_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
    })
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A reqwest failure before any response: a connection problem, unless the request itself was
/// unbuildable.
pub(crate) fn transport_error(error: &reqwest::Error) -> LlmError {
    if error.is_builder() {
        return LlmError::InvalidRequest { message: error_chain(error) };
    }
    LlmError::Connection { message: error_chain(error) }
}

/// `error: cause: cause…` — reqwest's own Display hides the interesting root cause.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// A non-2xx answer: status, the wait the provider asked for ([`retry_after`]) and a bounded body excerpt with `secret`
/// (the API key, should the body echo it) redacted.
pub(crate) async fn http_error(mut response: reqwest::Response, secret: &str) -> LlmError {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let mut body = Vec::new();
    // A failure while reading the error body still leaves a useful status error.
    while body.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(bytes)) => body.extend_from_slice(&bytes),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&body);
    LlmError::Http { status, retry_after, body: excerpt(&redact(text.trim(), secret), BODY_EXCERPT_CHARS) }
}

/// The non-standard header some providers (OpenAI, Azure) send next to `Retry-After`, in
/// milliseconds.
const RETRY_AFTER_MS: &str = "retry-after-ms";

/// How long the provider asked to wait before the next request: `retry-after-ms` (milliseconds,
/// the more precise, when present and valid), else `Retry-After` as seconds or as an HTTP date
/// (the time left until it, relative to `now`; a date in the past is no wait at all). Fractions
/// are accepted; an invalid or negative value is ignored, as if the header were absent.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let seconds = |text: &str, scale: f64| {
        text.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
    };
    if let Some(wait) = text(RETRY_AFTER_MS).and_then(|t| seconds(t, 0.001)) {
        return Some(wait);
    }
    let value = text(RETRY_AFTER.as_str())?;
    seconds(value, 1.0).or_else(|| {
        let at = httpdate::parse_http_date(value).ok()?;
        Some(at.duration_since(now).unwrap_or(Duration::ZERO))
    })
}

/// Caps on what one provider response may make agw hold or do. A provider (or a proxy in front
/// of it) that sends an endless line, an endless body or hundreds of tool calls ends the call with
/// [`LlmError::LimitExceeded`] (`provider_error`) instead of growing agw's memory without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Longest line of the SSE body, in bytes (an SSE event is buffered until its line ends).
    pub max_line_bytes: usize,
    /// Most bytes of one response body.
    pub max_response_bytes: u64,
    /// Most distinct tool calls in one model turn.
    pub max_tool_calls: usize,
    /// Most bytes of text one response may stream: answer, reasoning and tool arguments together.
    /// This is what a run holds of a model turn (its conversation and its history step each keep
    /// the turn's text), so it bounds a run's memory however fast the provider streams and however
    /// slowly its clients read. The body cap above counts wire bytes (framing included) and is
    /// looser: a long answer of small chunks is mostly framing.
    pub max_output_bytes: u64,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: 1024 * 1024,
            max_response_bytes: 64 * 1024 * 1024,
            max_tool_calls: 64,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

/// 4 MiB of text: about a million tokens, several times the longest output any model offers.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 4 * 1024 * 1024;

/// Counts one response against its [`ResponseLimits`], before any byte is buffered. Public so
/// the fuzz bodies can check it is independent of how the bytes arrive.
#[derive(Debug, Clone, Default)]
pub struct ResponseMeter {
    limits: ResponseLimits,
    total: u64,
    /// Bytes of the line not yet ended by `\n` or `\r`.
    line: usize,
    /// Tool-call indices (or id-only calls) seen this turn.
    calls: Vec<Option<u32>>,
    /// Bytes of text (answer, reasoning, tool arguments) seen this turn.
    output: u64,
}

impl ResponseMeter {
    /// A meter for one response under `limits`.
    pub fn new(limits: ResponseLimits) -> Self {
        Self { limits, ..Self::default() }
    }

    /// Accounts for `bytes` read from the body. When a read breaks a cap, the cap broken at the
    /// earliest byte is reported, so the verdict does not depend on how the body was split into
    /// reads (checked by the `sse_chunk` fuzz body).
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<(), LlmError> {
        let (max_line, max_total) = (self.limits.max_line_bytes, self.limits.max_response_bytes);
        // Offset in `bytes` of the first byte over each cap (the meter is only used until an
        // error, so `line <= max_line` and `total <= max_total` hold on entry).
        let total_over = (self.total.saturating_add(bytes.len() as u64) > max_total)
            .then(|| usize::try_from(max_total.saturating_sub(self.total)).unwrap_or(usize::MAX));
        let mut line_over = None;
        let (mut line, mut pos) = (self.line, 0usize);
        let mut segments = bytes.split(|b| *b == b'\n' || *b == b'\r').peekable();
        while let Some(segment) = segments.next() {
            if line_over.is_none() && line + segment.len() > max_line {
                line_over = Some(pos + max_line.saturating_sub(line));
            }
            if segments.peek().is_some() {
                pos += segment.len() + 1;
                line = 0;
            } else {
                line += segment.len();
            }
        }
        let line_error = || LlmError::LimitExceeded { what: "line length (bytes)", limit: max_line as u64 };
        let total_error = || LlmError::LimitExceeded { what: "response size (bytes)", limit: max_total };
        match (line_over, total_over) {
            (Some(l), Some(t)) => return Err(if l <= t { line_error() } else { total_error() }),
            (Some(_), None) => return Err(line_error()),
            (None, Some(_)) => return Err(total_error()),
            (None, None) => {}
        }
        self.total += bytes.len() as u64;
        self.line = line;
        Ok(())
    }

    /// Accounts for one tool-call fragment: a fragment with a new index, or with an id and no
    /// index, starts a call.
    pub fn tool_call(&mut self, fragment: &agw_protocol::ToolCallFragment) -> Result<(), LlmError> {
        let new = match fragment.index {
            Some(index) => !self.calls.contains(&Some(index)),
            None => fragment.id.is_some(),
        };
        if new {
            self.calls.push(fragment.index);
            if self.calls.len() > self.limits.max_tool_calls {
                return Err(LlmError::LimitExceeded {
                    what: "tool calls per turn",
                    limit: self.limits.max_tool_calls as u64,
                });
            }
        }
        Ok(())
    }

    /// Accounts for `len` more bytes of streamed text.
    pub fn output(&mut self, len: usize) -> Result<(), LlmError> {
        self.output = self.output.saturating_add(len as u64);
        if self.output > self.limits.max_output_bytes {
            return Err(LlmError::LimitExceeded { what: "output text (bytes)", limit: self.limits.max_output_bytes });
        }
        Ok(())
    }

    /// Checks the tool calls and the text among `deltas`.
    pub(crate) fn deltas(&mut self, deltas: &[crate::LlmDelta]) -> Result<(), LlmError> {
        for delta in deltas {
            match delta {
                crate::LlmDelta::ToolCall(fragment) => {
                    self.tool_call(fragment)?;
                    self.output(fragment.arguments.len())?;
                }
                crate::LlmDelta::Content { text } | crate::LlmDelta::Reasoning { text } => self.output(text.len())?,
                crate::LlmDelta::Finish { .. } | crate::LlmDelta::Usage { .. } => {}
            }
        }
        Ok(())
    }
}

/// The log lines and the first-chunk metric of one open response, shared by the providers'
/// stream readers.
#[derive(Debug)]
pub(crate) struct StreamLog {
    provider: String,
    options: CallOptions,
    /// When the request was sent, for the time-to-first-chunk metric.
    started: Instant,
    /// Upstream chunks (SSE frames with data) received so far.
    chunks: u64,
}

impl StreamLog {
    pub(crate) fn new(provider: String, options: CallOptions, started: Instant) -> Self {
        Self { provider, options, started, chunks: 0 }
    }

    /// Which timeout phase a silence now would be.
    pub(crate) fn timeout_phase(&self) -> TimeoutPhase {
        if self.chunks == 0 { TimeoutPhase::BeforeFirstChunk } else { TimeoutPhase::BetweenChunks }
    }

    /// Counts one received chunk (records the first-chunk latency once) and logs it when the
    /// interaction log is on. `render` is only called then.
    pub(crate) fn chunk(&mut self, event: &str, render: impl FnOnce() -> String) {
        self.chunks += 1;
        if self.chunks == 1 {
            metrics::histogram!(FIRST_TOKEN_METRIC, "provider" => self.provider.clone())
                .record(self.started.elapsed().as_secs_f64());
        }
        if interaction::active() {
            tracing::debug!(
                target: interaction::TARGET,
                provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                event = %event, chunk = %render(), "llm delta"
            );
        }
    }

    /// The response ended normally.
    pub(crate) fn complete(&self) {
        if interaction::active() {
            tracing::debug!(
                target: interaction::TARGET,
                provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                chunks = self.chunks, "llm response complete"
            );
        }
        tracing::debug!(
            provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
            chunks = self.chunks, "provider stream finished"
        );
    }

    /// The response ended with `error`.
    pub(crate) fn failed(&self, error: &LlmError) {
        if interaction::active() {
            tracing::debug!(
                target: interaction::TARGET,
                provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
                chunks = self.chunks, error = %interaction::mask_text(&error.to_string()), "llm response failed"
            );
        }
        tracing::debug!(
            provider = %self.provider, stage = %self.options.stage, run_id = %self.options.run_id,
            chunks = self.chunks, error = %error, "provider stream failed"
        );
    }
}

/// The inactivity timeout of one open response: a single timer, moved to "now + timeout" before
/// every wait, instead of a new `tokio::time::timeout` (and timer registration) per read.
pub(crate) struct InactivityTimer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
}

impl InactivityTimer {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { sleep: Box::pin(tokio::time::sleep(timeout)), timeout }
    }

    /// `future`'s output, or [`LlmError::Timeout`] (in the phase `log` is in) when it takes longer
    /// than the inactivity timeout from now. Like `tokio::time::timeout`, a future that is ready
    /// wins over an expired timer.
    pub(crate) async fn within<F: Future>(&mut self, future: F, log: &StreamLog) -> Result<F::Output, LlmError> {
        let now = tokio::time::Instant::now();
        // A timeout too large for the clock never fires (as with `tokio::time::sleep`).
        let deadline = now.checked_add(self.timeout).unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30));
        self.sleep.as_mut().reset(deadline);
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            Poll::Ready(Err(LlmError::Timeout { phase: log.timeout_phase(), ms: millis(self.timeout) }))
        })
        .await
    }
}

/// The body of an open response.
pub(crate) type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// An open SSE response, read as frames: one network read at a time and only when the reader
/// asks for a frame and none is left (so the provider is read at the pace the run consumes — TCP
/// flow control does the rest), each read counted against the [`ResponseLimits`] before it is
/// buffered, each wait bounded by the inactivity timeout. Dropping it drops the response, which
/// closes the connection.
pub(crate) struct UpstreamSse {
    body: ByteStream,
    decoder: SseDecoder,
    /// Frames of the last read not handed out yet, the next one last.
    frames: Vec<SseFrame>,
    timer: InactivityTimer,
    meter: ResponseMeter,
}

impl UpstreamSse {
    pub(crate) fn new(response: reqwest::Response, limits: ResponseLimits, inactivity_timeout: Duration) -> Self {
        Self {
            body: Box::pin(response.bytes_stream()),
            decoder: SseDecoder::new(),
            frames: Vec::new(),
            timer: InactivityTimer::new(inactivity_timeout),
            meter: ResponseMeter::new(limits),
        }
    }

    /// The next frame, `None` when the body ended. A transport failure, a silence longer than the
    /// inactivity timeout and a broken limit are errors.
    pub(crate) async fn next_frame(&mut self, log: &StreamLog) -> Result<Option<SseFrame>, LlmError> {
        loop {
            if let Some(frame) = self.frames.pop() {
                return Ok(Some(frame));
            }
            let bytes = match self.timer.within(self.body.next(), log).await? {
                None => return Ok(None),
                Some(Err(error)) => {
                    return Err(LlmError::Connection {
                        message: format!("stream interrupted: {}", error_chain(&error)),
                    });
                }
                Some(Ok(bytes)) => bytes,
            };
            self.meter.bytes(&bytes)?;
            self.decoder.feed(&bytes, &mut self.frames);
            self.frames.reverse();
        }
    }

    /// The meter of this response, for the tool calls its frames carry.
    pub(crate) fn meter(&mut self) -> &mut ResponseMeter {
        &mut self.meter
    }

    /// Forgets the frames not handed out yet (the message is complete or failed).
    pub(crate) fn discard(&mut self) {
        self.frames.clear();
    }
}

/// An SSE `data:` payload for the interaction log (only called when the log is on): masked JSON
/// when it parses, masked text otherwise.
pub(crate) fn render_data(data: &str) -> String {
    match serde_json::from_str::<Value>(data) {
        Ok(value) => interaction::render(&value),
        Err(_) => interaction::mask_text(data),
    }
}

/// A provider's open response, turned into deltas one at a time.
pub(crate) trait DeltaSource: Send + 'static {
    /// The next delta, the terminal error, or `None` after the end.
    fn next_item(&mut self) -> impl Future<Output = Option<Result<LlmDelta, LlmError>>> + Send;
}

/// The [`DeltaStream`] of an upstream. Dropping it drops the upstream and with it the response:
/// the connection closes without waiting for another read.
pub(crate) fn delta_stream(upstream: impl DeltaSource) -> DeltaStream {
    Box::pin(futures::stream::unfold(upstream, |mut upstream| async move {
        let item = upstream.next_item().await?;
        Some((item, upstream))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(line: usize, total: u64, calls: usize) -> ResponseMeter {
        ResponseMeter::new(ResponseLimits {
            max_line_bytes: line,
            max_response_bytes: total,
            max_tool_calls: calls,
            ..ResponseLimits::default()
        })
    }

    #[test]
    fn a_line_may_span_reads_but_not_exceed_the_cap() {
        let mut m = meter(10, 1000, 1);
        m.bytes(b"data: 1234").unwrap();
        assert!(m.bytes(b"5").is_err(), "11 bytes without a line end");
        let mut m = meter(10, 1000, 1);
        m.bytes(b"data: 1234\n\ndata: 12").unwrap();
        m.bytes(b"34\r\n").unwrap();
        assert!(m.bytes(b"0123456789x\n").is_err(), "a whole long line inside one read");
    }

    #[test]
    fn answer_reasoning_and_arguments_count_against_one_output_cap() {
        let mut m = ResponseMeter::new(ResponseLimits { max_output_bytes: 10, ..ResponseLimits::default() });
        let text = |t: &str| crate::LlmDelta::Content { text: t.into() };
        let thought = |t: &str| crate::LlmDelta::Reasoning { text: t.into() };
        let args = |a: &str| {
            crate::LlmDelta::ToolCall(agw_protocol::ToolCallFragment {
                index: Some(0),
                arguments: a.into(),
                ..Default::default()
            })
        };
        let usage = crate::LlmDelta::Usage { usage: serde_json::json!({"completion_tokens": 99_999}) };
        m.deltas(&[text("abc"), thought("def"), usage]).unwrap();
        m.deltas(&[args("ghij")]).unwrap();
        let over = m.deltas(&[text("k")]);
        assert!(matches!(over, Err(LlmError::LimitExceeded { what: "output text (bytes)", limit: 10 })), "{over:?}");
    }

    #[test]
    fn the_whole_response_is_capped() {
        let mut m = meter(100, 20, 1);
        m.bytes(b"0123456789\n").unwrap();
        assert!(matches!(m.bytes(b"0123456789\n"), Err(LlmError::LimitExceeded { limit: 20, .. })));
    }

    #[test]
    fn tool_calls_are_counted_by_index_or_id() {
        let mut m = meter(100, 100, 2);
        let f = |index: Option<u32>, id: Option<&str>| agw_protocol::ToolCallFragment {
            index,
            id: id.map(str::to_owned),
            ..Default::default()
        };
        m.tool_call(&f(Some(0), Some("a"))).unwrap();
        m.tool_call(&f(Some(0), None)).unwrap();
        m.tool_call(&f(None, None)).unwrap();
        m.tool_call(&f(Some(1), Some("b"))).unwrap();
        let error = m.tool_call(&f(Some(2), Some("c"))).unwrap_err();
        assert_eq!(error.code(), "provider_error");
        assert!(error.to_string().contains("tool calls per turn"));
    }

    #[tokio::test(start_paused = true)]
    async fn one_timer_bounds_every_wait_from_its_start() {
        let log = StreamLog::new("p".into(), CallOptions::default(), Instant::now());
        let mut timer = InactivityTimer::new(Duration::from_millis(100));
        for _ in 0..3 {
            // 90 ms each, 270 ms in all: every wait gets the whole timeout again.
            timer.within(tokio::time::sleep(Duration::from_millis(90)), &log).await.expect("within the timeout");
        }
        let started = tokio::time::Instant::now();
        let error = timer.within(std::future::pending::<()>(), &log).await.expect_err("silence");
        assert!(matches!(error, LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: 100 }), "{error:?}");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_millis(110), "{waited:?}");
        assert_eq!(timer.within(async { 7 }, &log).await.expect("a ready future wins"), 7);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let e = LlmError::Connection { message: String::new() };
        assert_eq!(retry_delay(&e, 0), Duration::from_millis(100));
        assert_eq!(retry_delay(&e, 1), Duration::from_millis(200));
        assert_eq!(retry_delay(&e, 30), MAX_BACKOFF);
        let e = LlmError::Http { status: 429, retry_after: Some(Duration::from_secs(99)), body: String::new() };
        assert_eq!(retry_delay(&e, 0), MAX_RETRY_AFTER);
    }

    fn wait(headers: &[(&'static str, &str)]) -> Option<Duration> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        // Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
        retry_after(&map, SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777))
    }

    #[test]
    fn retry_after_in_seconds_as_a_date_or_in_milliseconds() {
        assert_eq!(wait(&[]), None);
        assert_eq!(wait(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(wait(&[("retry-after", " 1.5 ")]), Some(Duration::from_millis(1500)));
        assert_eq!(wait(&[("retry-after", "0")]), Some(Duration::ZERO));
        // HTTP dates: IMF-fixdate, and the obsolete RFC 850 and asctime forms.
        assert_eq!(wait(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]), Some(Duration::from_secs(30)));
        assert_eq!(wait(&[("retry-after", "Sunday, 06-Nov-94 08:49:47 GMT")]), Some(Duration::from_secs(10)));
        assert_eq!(wait(&[("retry-after", "Sun Nov  6 08:49:38 1994")]), Some(Duration::from_secs(1)));
        assert_eq!(wait(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]), Some(Duration::ZERO), "in the past");
        // retry-after-ms is the more precise and wins; an invalid one is ignored.
        assert_eq!(wait(&[("retry-after-ms", "250"), ("retry-after", "1")]), Some(Duration::from_millis(250)));
        assert_eq!(wait(&[("retry-after-ms", "12.5")]), Some(Duration::from_micros(12_500)));
        assert_eq!(wait(&[("retry-after-ms", "soon"), ("retry-after", "2")]), Some(Duration::from_secs(2)));
        for bad in ["-1", "soon", "NaN", "inf", "1e400", "Sun, 99 Nov 1994 08:49:37 GMT"] {
            assert_eq!(wait(&[("retry-after", bad)]), None, "{bad}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_the_caller_falls_back_on_is_not_retried() {
        let limited = || LlmError::Http { status: 429, retry_after: Some(Duration::from_secs(5)), body: String::new() };
        async fn run(fail_fast: crate::ReasonSet, error: impl Fn() -> LlmError) -> (bool, u32) {
            let body = serde_json::json!({});
            let options = CallOptions { fail_fast, max_retries: 2, ..CallOptions::default() };
            let site = CallSite { provider: "p", url: "http://x", options: &options };
            let mut tries = 0;
            let result: Result<(), LlmError> = open_with_retries(site, &body, || {
                tries += 1;
                std::future::ready(Err(error()))
            })
            .await;
            (result.is_err(), tries)
        }
        assert_eq!(run(crate::ReasonSet::EMPTY, limited).await, (true, 3), "retried as before");
        let rate = crate::ReasonSet::EMPTY.with(crate::FallbackReason::RateLimit);
        assert_eq!(run(rate, limited).await, (true, 1), "handed back at once");
        let reset = || LlmError::Connection { message: "reset".into() };
        assert_eq!(run(rate, reset).await, (true, 3), "other failures keep their retries");
    }

    #[test]
    fn headers_skip_blank_and_invalid_values() {
        let options = CallOptions {
            stage: "react-step-1".into(),
            run_id: "bad\nid".into(),
            headers: vec![
                ("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
                ("bad name".into(), "x".into()),
            ],
            ..Default::default()
        };
        let headers = call_headers(&options);
        assert_eq!(headers.get("traceparent").unwrap(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        assert_eq!(headers.len(), 3);
        assert_eq!(headers.get(STAGE_HEADER).unwrap(), "react-step-1");
        assert!(headers.get(RUN_ID_HEADER).is_none());
        assert_eq!(headers.get(ACCEPT).unwrap(), "text/event-stream");
    }
}
