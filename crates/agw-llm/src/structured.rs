//! Structured output for providers without a native JSON-schema mode (docs/models.md): the
//! schema of [`ChatRequest::response_format`] is offered as one more tool, [`ANSWER_TOOL`], and
//! the model's call of it is read back as the answer's text, so callers see an answer like any
//! other. Anthropic always takes this route; an OpenAI-compatible server does when its provider
//! says `structured-output = tool`.

use std::collections::HashSet;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use crate::provider::DeltaStream;
use crate::{ChatRequest, LlmDelta, LlmError, ToolCallFragment, ToolChoice, ToolSpec};

/// The tool whose arguments are the answer.
pub const ANSWER_TOOL: &str = "_answer_";

/// What the model reads about [`ANSWER_TOOL`].
const ANSWER_DESCRIPTION: &str = "Give your final answer by calling this tool once: its arguments are the answer. \
     Call it when you have everything you need, instead of answering in text.";

/// How a provider takes an output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredOutput {
    /// Its own JSON-schema mode (OpenAI's `response_format`).
    #[default]
    Native,
    /// [`ANSWER_TOOL`]: a tool call whose arguments are the answer.
    Tool,
}

impl StructuredOutput {
    /// The setting's spelling: `native` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Tool => "tool",
        }
    }
}

impl std::str::FromStr for StructuredOutput {
    type Err = ();

    /// `native` or `tool`, exact.
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "native" => Ok(Self::Native),
            "tool" => Ok(Self::Tool),
            _ => Err(()),
        }
    }
}

/// `request` with its response format turned into [`ANSWER_TOOL`] (unchanged without one). A
/// turn that offers other tools keeps its tool choice, so the model may still call them; a turn
/// that offers none must call the answer tool.
pub fn answer_tool_request(mut request: ChatRequest) -> ChatRequest {
    let Some(format) = request.response_format.take() else { return request };
    if request.tools.is_empty() || request.tool_choice.is_none() {
        request.tools.clear();
        request.tool_choice = Some(ToolChoice::Required);
    }
    request.tools.push(ToolSpec {
        name: ANSWER_TOOL.to_owned(),
        description: ANSWER_DESCRIPTION.to_owned(),
        parameters: format.schema,
    });
    request
}

/// Reads [`ANSWER_TOOL`] calls of `stream` back as content: each argument fragment becomes one
/// content delta, as it arrives. Other calls pass unchanged; a turn whose only call was the
/// answer finishes with `stop` instead of the provider's tool-use reason.
pub fn answer_from_tool(stream: DeltaStream) -> DeltaStream {
    Box::pin(AnswerFromTool {
        inner: stream,
        answer_ids: HashSet::new(),
        current: false,
        answered: false,
        other: false,
    })
}

struct AnswerFromTool {
    inner: DeltaStream,
    /// Ids of answer calls seen (a fragment naming only its id belongs to that call).
    answer_ids: HashSet<String>,
    /// Whether the latest call seen is an answer call (a fragment with neither name nor id
    /// belongs to it).
    current: bool,
    answered: bool,
    other: bool,
}

impl AnswerFromTool {
    /// Whether `fragment` belongs to an answer call; keeps track of which call is current.
    fn is_answer(&mut self, fragment: &ToolCallFragment) -> bool {
        match (&fragment.name, &fragment.id) {
            (Some(name), id) => {
                self.current = name == ANSWER_TOOL;
                if let (true, Some(id)) = (self.current, id) {
                    self.answer_ids.insert(id.clone());
                }
            }
            (None, Some(id)) => self.current = self.answer_ids.contains(id),
            (None, None) => {}
        }
        if self.current {
            self.answered = true;
        } else {
            self.other = true;
        }
        self.current
    }
}

impl Stream for AnswerFromTool {
    type Item = Result<LlmDelta, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let item = match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(item))) => item,
                other => return other,
            };
            let item = match item {
                LlmDelta::ToolCall(fragment) if self.is_answer(&fragment) => {
                    if fragment.arguments.is_empty() {
                        continue;
                    }
                    LlmDelta::Content { text: fragment.arguments }
                }
                LlmDelta::Finish { .. } if self.answered && !self.other => LlmDelta::Finish { reason: "stop".into() },
                item => item,
            };
            return Poll::Ready(Some(Ok(item)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ResponseFormat;
    use futures::StreamExt;
    use serde_json::json;

    fn request(tools: Vec<ToolSpec>, choice: Option<ToolChoice>) -> ChatRequest {
        ChatRequest {
            provider_key: "p".into(),
            model: "m".into(),
            messages: Vec::new(),
            tools,
            tool_choice: choice,
            response_format: Some(ResponseFormat { name: "city".into(), schema: json!({"type": "object"}) }),
            ..ChatRequest::default()
        }
    }

    fn tool(name: &str) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), parameters: json!({"type": "object"}) }
    }

    #[test]
    fn a_turn_without_tools_must_call_the_answer_tool_and_one_with_tools_may() {
        let only = answer_tool_request(request(Vec::new(), None));
        assert_eq!(only.response_format, None);
        assert_eq!(only.tool_choice, Some(ToolChoice::Required));
        assert_eq!(only.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), [ANSWER_TOOL]);
        assert_eq!(only.tools[0].parameters, json!({"type": "object"}));

        let with = answer_tool_request(request(vec![tool("search")], Some(ToolChoice::Auto)));
        assert_eq!(with.tool_choice, Some(ToolChoice::Auto));
        assert_eq!(with.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["search", ANSWER_TOOL]);

        // Tools listed but not offered (`tool_choice` none) are not offered now either.
        let listed = answer_tool_request(request(vec![tool("search")], None));
        assert_eq!(listed.tools.len(), 1);
        assert_eq!(listed.tool_choice, Some(ToolChoice::Required));

        let mut plain = request(Vec::new(), None);
        plain.response_format = None;
        assert_eq!(answer_tool_request(plain.clone()), plain, "nothing to do without a format");
    }

    fn fragment(id: Option<&str>, name: Option<&str>, arguments: &str) -> Result<LlmDelta, LlmError> {
        Ok(LlmDelta::ToolCall(ToolCallFragment {
            index: None,
            id: id.map(Into::into),
            call_type: None,
            name: name.map(Into::into),
            arguments: arguments.into(),
        }))
    }

    async fn collect(items: Vec<Result<LlmDelta, LlmError>>) -> Vec<LlmDelta> {
        let stream: DeltaStream = Box::pin(futures::stream::iter(items));
        answer_from_tool(stream).map(|item| item.expect("ok")).collect().await
    }

    #[tokio::test]
    async fn the_answer_calls_arguments_stream_as_content_one_delta_per_fragment() {
        let out = collect(vec![
            fragment(Some("toolu_1"), Some(ANSWER_TOOL), ""),
            fragment(None, None, "{\"city\":"),
            fragment(Some("toolu_1"), None, "\"Paris\"}"),
            Ok(LlmDelta::Finish { reason: "tool_use".into() }),
        ])
        .await;
        assert_eq!(
            out,
            [
                LlmDelta::Content { text: "{\"city\":".into() },
                LlmDelta::Content { text: "\"Paris\"}".into() },
                LlmDelta::Finish { reason: "stop".into() },
            ]
        );
    }

    #[tokio::test]
    async fn other_calls_pass_unchanged_and_keep_the_finish_reason() {
        let out = collect(vec![
            Ok(LlmDelta::Content { text: "Looking.".into() }),
            fragment(Some("c1"), Some("search"), "{\"q\":"),
            fragment(None, None, "1}"),
            Ok(LlmDelta::Finish { reason: "tool_calls".into() }),
        ])
        .await;
        assert_eq!(out.len(), 4);
        assert!(matches!(&out[1], LlmDelta::ToolCall(f) if f.name.as_deref() == Some("search")));
        assert!(matches!(&out[2], LlmDelta::ToolCall(f) if f.arguments == "1}"));
        assert_eq!(out[3], LlmDelta::Finish { reason: "tool_calls".into() });
    }

    #[test]
    fn the_setting_is_spelled_native_or_tool() {
        for mode in [StructuredOutput::Native, StructuredOutput::Tool] {
            assert_eq!(mode.as_str().parse::<StructuredOutput>(), Ok(mode));
        }
        assert!("Tool".parse::<StructuredOutput>().is_err());
    }
}
