//! Errors of a model call, with the `run.error` code each one maps to.
//!
//! Messages are English and user-presentable (they end up in `run.error.message`). They never
//! contain the provider API key: HTTP error bodies are redacted before they are stored here.

use std::time::Duration;

use thiserror::Error;

/// Longest provider error body kept in [`LlmError::Http`] (characters).
pub const BODY_EXCERPT_CHARS: usize = 512;

/// Where an inactivity timeout hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Waiting for the response headers or the first chunk.
    BeforeFirstChunk,
    /// The stream had started and then stalled.
    BetweenChunks,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::BeforeFirstChunk => "before the first chunk",
            TimeoutPhase::BetweenChunks => "between chunks",
        })
    }
}

/// A failed model call (or a failed stream item; an `Err` item ends a [`crate::DeltaStream`]).
#[derive(Debug, Clone, Error)]
pub enum LlmError {
    /// The provider answered with a non-2xx status.
    #[error("provider answered HTTP {status}: {body}")]
    Http {
        /// The HTTP status code (outside 200..=299).
        status: u16,
        /// How long the provider asked to wait (`retry-after-ms`, or `Retry-After` in seconds or
        /// as an HTTP date), when it said.
        retry_after: Option<Duration>,
        /// At most [`BODY_EXCERPT_CHARS`] characters of the response body, API key redacted.
        body: String,
    },
    /// Connecting, sending, or reading the response failed at the transport level
    /// (refused, reset, closed mid-stream, …).
    #[error("connection to provider failed: {message}")]
    Connection {
        /// The transport error's description.
        message: String,
    },
    /// The provider went silent for longer than the inactivity timeout.
    #[error("provider sent nothing for {ms} ms ({phase})")]
    Timeout {
        /// Whether the stream had started.
        phase: TimeoutPhase,
        /// The inactivity timeout that elapsed, in milliseconds.
        ms: u64,
    },
    /// A `data:` payload that is not a JSON object.
    #[error("provider sent a malformed chunk: {excerpt}")]
    MalformedChunk {
        /// At most [`BODY_EXCERPT_CHARS`] characters of the offending payload.
        excerpt: String,
    },
    /// The provider reported an error inside the stream (`data: {"error": …}`).
    #[error("provider reported an error in the stream: {excerpt}")]
    Upstream {
        /// At most [`BODY_EXCERPT_CHARS`] characters of the provider's error object.
        excerpt: String,
    },
    /// The stream ended (`[DONE]` or EOF) without any `finish_reason`.
    #[error("provider stream ended without a finish_reason")]
    EndedWithoutFinish,
    /// No usable provider under this key.
    #[error("no provider configured for key: {key}")]
    NotConfigured {
        /// The `providerKey` that was asked for.
        key: String,
    },
    /// The request could not even be built (bad base URL, unserialisable body, …).
    #[error("invalid provider request: {message}")]
    InvalidRequest {
        /// What was wrong with it.
        message: String,
    },
    /// The response broke a [`crate::ResponseLimits`] cap (a hostile or broken provider, or a
    /// proxy in front of it): reading stopped there, nothing more was buffered.
    #[error("provider response exceeded the {what} limit of {limit}")]
    LimitExceeded {
        /// Which cap: `line length (bytes)`, `response size (bytes)`, `tool calls per turn` or
        /// `output text (bytes)`.
        what: &'static str,
        /// The configured cap.
        limit: u64,
    },
}

impl LlmError {
    /// The `run.error.code` for this failure (docs/contract/README.md, "run.error codes for provider faults").
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::Timeout { .. } => "provider_timeout",
            LlmError::NotConfigured { .. } => "provider_not_configured",
            LlmError::Http { .. }
            | LlmError::Connection { .. }
            | LlmError::MalformedChunk { .. }
            | LlmError::Upstream { .. }
            | LlmError::EndedWithoutFinish
            | LlmError::InvalidRequest { .. }
            | LlmError::LimitExceeded { .. } => "provider_error",
        }
    }

    /// Whether trying the same call again later may succeed (`run.error.retriable`):
    /// 429, 5xx, connection failures and timeouts.
    pub fn retriable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 429 || (500..=599).contains(status),
            LlmError::Connection { .. } | LlmError::Timeout { .. } => true,
            _ => false,
        }
    }

    /// The HTTP status of an [`LlmError::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the OpenAI-compatible client retries this by itself (only ever before the body
    /// started). Timeouts are deliberately not retried automatically: each attempt already
    /// waited a full inactivity timeout, retrying would multiply the user's wait.
    pub(crate) fn auto_retry(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 429 || (500..=599).contains(status),
            LlmError::Connection { .. } => true,
            _ => false,
        }
    }

    /// How long the provider asked to wait, for an HTTP error that said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The first `max` characters of `text` (an ellipsis marks a cut; the result stays ≤ `max`).
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Replaces every occurrence of `secret` in `text` (no-op for blank secrets).
pub(crate) fn redact(text: &str, secret: &str) -> String {
    if secret.trim().is_empty() {
        return text.to_owned();
    }
    text.replace(secret, "***")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_contract() {
        let http = |status| LlmError::Http { status, retry_after: None, body: String::new() };
        assert_eq!(http(429).code(), "provider_error");
        assert!(http(429).retriable());
        assert!(http(503).retriable());
        assert!(!http(400).retriable());
        assert_eq!(http(500).status(), Some(500));
        let timeout = LlmError::Timeout { phase: TimeoutPhase::BetweenChunks, ms: 5 };
        assert_eq!(timeout.code(), "provider_timeout");
        assert!(timeout.retriable());
        assert!(!timeout.auto_retry());
        assert_eq!(LlmError::EndedWithoutFinish.code(), "provider_error");
        assert!(!LlmError::MalformedChunk { excerpt: "x".into() }.retriable());
        assert_eq!(LlmError::NotConfigured { key: "k".into() }.code(), "provider_not_configured");
        assert_eq!(LlmError::Connection { message: "reset".into() }.code(), "provider_error");
        assert!(LlmError::Connection { message: "reset".into() }.retriable());
    }

    #[test]
    fn excerpt_is_bounded_and_char_safe() {
        assert_eq!(excerpt("short", 10), "short");
        let long = "é".repeat(600);
        let cut = excerpt(&long, BODY_EXCERPT_CHARS);
        assert_eq!(cut.chars().count(), BODY_EXCERPT_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn redact_hides_the_secret() {
        assert_eq!(redact("bad key sk-123 given", "sk-123"), "bad key *** given");
        assert_eq!(redact("nothing", ""), "nothing");
    }
}
