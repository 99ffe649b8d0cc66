//! Why a model call failed, in the terms a fallback decision needs: the six kinds of failure that
//! another model may not share ([`FallbackReason`]), read from an [`LlmError`].
//!
//! Providers say the same thing in different ways (a 429, a 529 or 503, Anthropic's
//! `overloaded_error` inside an otherwise healthy stream, a 400 whose body says the prompt is too
//! long), so the reading is done once, here, and callers only see the reason.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::LlmError;

/// A kind of model failure that another model may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// HTTP 429: the account or model is over its rate (or quota).
    RateLimit,
    /// HTTP 529 or 503, or an `overloaded` error in the stream: the provider is over capacity.
    Overloaded,
    /// Any other 5xx, or a server error reported in the stream.
    ServerError,
    /// The provider went silent for longer than the inactivity timeout.
    Timeout,
    /// HTTP 400 or 413 whose body says the request is longer than the model's context.
    ContextWindow,
    /// Connecting, sending or reading failed at the transport level.
    Connection,
}

impl FallbackReason {
    /// Every reason, in documentation order.
    pub const ALL: [FallbackReason; 6] = [
        FallbackReason::RateLimit,
        FallbackReason::Overloaded,
        FallbackReason::ServerError,
        FallbackReason::Timeout,
        FallbackReason::ContextWindow,
        FallbackReason::Connection,
    ];

    /// The name as written in agent files and events (`rate_limit`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            FallbackReason::RateLimit => "rate_limit",
            FallbackReason::Overloaded => "overloaded",
            FallbackReason::ServerError => "server_error",
            FallbackReason::Timeout => "timeout",
            FallbackReason::ContextWindow => "context_window",
            FallbackReason::Connection => "connection",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Exact names only: an agent file with `RateLimit` has a typo, not a synonym.
impl FromStr for FallbackReason {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, ()> {
        FallbackReason::ALL.into_iter().find(|r| r.as_str() == name).ok_or(())
    }
}

/// A set of [`FallbackReason`]s (`modelConfig.fallbackOn`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReasonSet(u8);

impl ReasonSet {
    /// No reason.
    pub const EMPTY: ReasonSet = ReasonSet(0);

    /// Every reason (the default of `fallbackOn`).
    pub const fn all() -> ReasonSet {
        let mut bits = 0;
        let mut i = 0;
        while i < FallbackReason::ALL.len() {
            bits |= FallbackReason::ALL[i].bit();
            i += 1;
        }
        ReasonSet(bits)
    }

    /// Whether `reason` is in the set.
    pub const fn contains(self, reason: FallbackReason) -> bool {
        self.0 & reason.bit() != 0
    }

    /// The set with `reason` added.
    #[must_use]
    pub const fn with(self, reason: FallbackReason) -> ReasonSet {
        ReasonSet(self.0 | reason.bit())
    }

    /// The reasons in both sets.
    #[must_use]
    pub const fn intersect(self, other: ReasonSet) -> ReasonSet {
        ReasonSet(self.0 & other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The reasons in the set, in [`FallbackReason::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = FallbackReason> {
        FallbackReason::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl fmt::Debug for ReasonSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(FallbackReason::as_str)).finish()
    }
}

impl FromIterator<FallbackReason> for ReasonSet {
    fn from_iter<I: IntoIterator<Item = FallbackReason>>(iter: I) -> Self {
        iter.into_iter().fold(ReasonSet::EMPTY, ReasonSet::with)
    }
}

/// What providers write when a request is longer than the model's context (lower case). OpenAI
/// and its compatibles: `context_length_exceeded` / "maximum context length"; Anthropic: "prompt
/// is too long"; others (vLLM, Ollama, Gemini's OpenAI endpoint, Mistral): the rest.
const CONTEXT_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "reduce the length",
];

impl LlmError {
    /// The reason another model might succeed where this call failed; `None` for failures another
    /// model would meet too (a malformed request, a bad key, a broken stream format, a limit of
    /// agw's own) or that are not the model's (no provider under the key).
    pub fn fallback_reason(&self) -> Option<FallbackReason> {
        match self {
            LlmError::Http { status, body, .. } => {
                let body = body.to_ascii_lowercase();
                match *status {
                    _ if body.contains("overloaded_error") => Some(FallbackReason::Overloaded),
                    429 => Some(FallbackReason::RateLimit),
                    503 | 529 => Some(FallbackReason::Overloaded),
                    500..=599 => Some(FallbackReason::ServerError),
                    400 | 413 if CONTEXT_MARKERS.iter().any(|m| body.contains(m)) => {
                        Some(FallbackReason::ContextWindow)
                    }
                    _ => None,
                }
            }
            LlmError::Upstream { excerpt } => {
                let text = excerpt.to_ascii_lowercase();
                if text.contains("overloaded") {
                    Some(FallbackReason::Overloaded)
                } else if text.contains("rate_limit") || text.contains("rate limit") {
                    Some(FallbackReason::RateLimit)
                } else if CONTEXT_MARKERS.iter().any(|m| text.contains(m)) {
                    Some(FallbackReason::ContextWindow)
                } else if ["api_error", "server_error", "internal server error", "internal error"]
                    .iter()
                    .any(|m| text.contains(m))
                {
                    Some(FallbackReason::ServerError)
                } else {
                    None
                }
            }
            LlmError::Timeout { .. } => Some(FallbackReason::Timeout),
            LlmError::Connection { .. } => Some(FallbackReason::Connection),
            LlmError::MalformedChunk { .. }
            | LlmError::EndedWithoutFinish
            | LlmError::NotConfigured { .. }
            | LlmError::InvalidRequest { .. }
            | LlmError::LimitExceeded { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimeoutPhase;

    fn http(status: u16, body: &str) -> LlmError {
        LlmError::Http { status, retry_after: None, body: body.into() }
    }

    fn reason(error: LlmError) -> Option<&'static str> {
        error.fallback_reason().map(FallbackReason::as_str)
    }

    #[test]
    fn statuses_map_to_reasons() {
        assert_eq!(reason(http(429, "")), Some("rate_limit"));
        assert_eq!(reason(http(503, "busy")), Some("overloaded"));
        assert_eq!(reason(http(529, "")), Some("overloaded"));
        assert_eq!(reason(http(500, "")), Some("server_error"));
        assert_eq!(reason(http(502, "")), Some("server_error"));
        assert_eq!(
            reason(http(500, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)),
            Some("overloaded")
        );
        assert_eq!(reason(http(400, "bad request")), None);
        assert_eq!(reason(http(401, "invalid api key")), None);
        assert_eq!(reason(http(404, "model not found")), None);
    }

    #[test]
    fn a_too_long_prompt_is_a_context_window_failure() {
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            "Input is too long for requested model.",
        ] {
            assert_eq!(reason(http(400, body)), Some("context_window"), "{body}");
        }
        assert_eq!(reason(http(413, "request exceeds the context window")), Some("context_window"));
        // A 429 about tokens per minute is a rate limit, not the context.
        assert_eq!(reason(http(429, "too many tokens per minute")), Some("rate_limit"));
        assert_eq!(reason(http(422, "maximum context length")), None);
    }

    #[test]
    fn stream_errors_and_transport_failures() {
        let upstream = |t: &str| LlmError::Upstream { excerpt: t.into() };
        assert_eq!(reason(upstream("overloaded_error: Overloaded")), Some("overloaded"));
        assert_eq!(reason(upstream(r#"{"message":"overloaded"}"#)), Some("overloaded"));
        assert_eq!(reason(upstream("rate_limit_error: slow down")), Some("rate_limit"));
        assert_eq!(reason(upstream("api_error: Internal server error")), Some("server_error"));
        assert_eq!(reason(upstream("invalid_request_error: bad tool schema")), None);
        assert_eq!(reason(LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: 1 }), Some("timeout"));
        assert_eq!(reason(LlmError::Connection { message: "reset".into() }), Some("connection"));
        assert_eq!(reason(LlmError::NotConfigured { key: "x".into() }), None);
        assert_eq!(reason(LlmError::EndedWithoutFinish), None);
        assert_eq!(reason(LlmError::LimitExceeded { what: "line length (bytes)", limit: 1 }), None);
    }

    #[test]
    fn reason_sets() {
        let all = ReasonSet::all();
        assert!(FallbackReason::ALL.iter().all(|r| all.contains(*r)));
        let some: ReasonSet = [FallbackReason::RateLimit, FallbackReason::Timeout].into_iter().collect();
        assert!(some.contains(FallbackReason::Timeout) && !some.contains(FallbackReason::Connection));
        assert_eq!(format!("{some:?}"), r#"{"rate_limit", "timeout"}"#);
        assert!(ReasonSet::EMPTY.is_empty());
        assert_eq!(some.intersect(ReasonSet::EMPTY.with(FallbackReason::Timeout)).iter().count(), 1);
        assert_eq!("server_error".parse(), Ok(FallbackReason::ServerError));
        assert!("ServerError".parse::<FallbackReason>().is_err());
        for r in FallbackReason::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }
}
