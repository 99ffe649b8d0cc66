//! [`parse_calls`]: the provider's stream with the prompted calls parsed out of its text.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use crate::{DeltaStream, LlmDelta, LlmError};

use super::CallParser;

/// `upstream` (the answer of a request made by [`super::prompt_request`]) with its calls parsed
/// out of the content: content passes on without markers, calls arrive as
/// [`LlmDelta::ToolCall`] fragments (ids `<id_prefix>1`, `<id_prefix>2`, …), and the finish
/// reason is `tool_calls` when the answer made a call. Reasoning, usage and errors pass
/// unchanged.
///
/// Still one upstream delta in, its deltas out, before the next upstream delta is read: a
/// content delta becomes at most one content delta plus call fragments. When a marker ends the
/// answer (`✿RESULT✿`, or `✿RETURN✿` after a call) the upstream stream is dropped — which
/// closes the provider's connection, so a local server stops generating the result the model
/// was about to make up — and the stream ends with a finish (usage the provider would have sent
/// at the end does not arrive).
pub fn parse_calls(upstream: DeltaStream, id_prefix: impl Into<String>) -> DeltaStream {
    wrap(upstream, CallParser::new(id_prefix))
}

/// `upstream` (the answer of a request made by [`super::prompt_request`] that offered no
/// tools) with the markers kept out of its content: a call the model writes anyway ends the
/// answer, like a made-up result, so nothing reaches the client that could never be run.
pub fn strip_calls(upstream: DeltaStream) -> DeltaStream {
    wrap(upstream, CallParser::without_calls())
}

fn wrap(upstream: DeltaStream, parser: CallParser) -> DeltaStream {
    Box::pin(PromptedStream { upstream: Some(upstream), parser, ready: VecDeque::new(), finished: false })
}

struct PromptedStream {
    /// `None` once it ended or was dropped.
    upstream: Option<DeltaStream>,
    parser: CallParser,
    /// What the last upstream delta released, not yet taken.
    ready: VecDeque<LlmDelta>,
    /// The parser finished and a finish reason was given out.
    finished: bool,
}

impl PromptedStream {
    fn on_delta(&mut self, delta: LlmDelta) {
        let mut out = Vec::new();
        match delta {
            LlmDelta::Content { text } => {
                self.parser.push(&text, &mut out);
                if self.parser.ended() {
                    self.upstream = None;
                    self.finish(None, &mut out);
                }
            }
            LlmDelta::Finish { reason } => self.finish(Some(reason), &mut out),
            other => out.push(other),
        }
        self.ready.extend(out);
    }

    /// The answer is complete: the parser gives out what it held, then the finish (`reason`, or
    /// `tool_calls` when calls were made; `None` and no calls: `stop`).
    fn finish(&mut self, reason: Option<String>, out: &mut Vec<LlmDelta>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.parser.finish(out);
        let reason = match (self.parser.calls(), reason) {
            (0, Some(reason)) => reason,
            (0, None) => "stop".to_owned(),
            _ => "tool_calls".to_owned(),
        };
        out.push(LlmDelta::Finish { reason });
    }
}

impl Stream for PromptedStream {
    type Item = Result<LlmDelta, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(delta) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(delta)));
            }
            let Some(upstream) = this.upstream.as_mut() else {
                return Poll::Ready(None);
            };
            match upstream.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(delta))) => this.on_delta(delta),
                Poll::Ready(Some(Err(error))) => {
                    this.upstream = None;
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    this.upstream = None;
                    let mut out = Vec::new();
                    this.parser.finish(&mut out);
                    if !this.finished && this.parser.calls() > 0 {
                        // An upstream that ended without a finish reason: the calls still say
                        // what the answer was.
                        out.push(LlmDelta::Finish { reason: "tool_calls".to_owned() });
                    }
                    this.finished = true;
                    this.ready.extend(out);
                }
            }
        }
    }
}
