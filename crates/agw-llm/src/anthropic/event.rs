//! One Messages API stream event → [`LlmDelta`]s.
//!
//! | event | deltas |
//! |---|---|
//! | `message_start` | none (its `usage` is remembered) |
//! | `content_block_start` `tool_use` | `ToolCall {index, id, name, arguments: ""}` (a non-empty `input` object is sent as the arguments) |
//! | `content_block_start` `text` / `thinking` with non-empty text | `Content` / `Reasoning` |
//! | `content_block_delta` `text_delta` / `thinking_delta` | `Content` / `Reasoning` |
//! | `content_block_delta` `input_json_delta` | `ToolCall {index, arguments: partial_json}` |
//! | `message_delta` | `Finish` for a `stop_reason` (`end_turn`→`stop`, `tool_use`→`tool_calls`, `max_tokens`→`length`, others verbatim); its `usage` is merged |
//! | `message_stop` | `Usage` (the merged usage, provider keys verbatim), then the stream ends |
//! | `error` | [`LlmError::Upstream`] |
//! | `ping`, `content_block_stop`, `signature_delta`, unknown | none |
//!
//! The `index` of a tool-call fragment is the content block index. Tolerant like the OpenAI
//! chunk parser: wrong types count as absent; only data that is not a JSON object is an error.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::{BODY_EXCERPT_CHARS, LlmError, excerpt};
use crate::{LlmDelta, ToolCallFragment};

/// State of one response stream.
///
/// Maps each Messages API stream event onto [`LlmDelta`]s: `text_delta` / `thinking_delta` become
/// content / reasoning, a `tool_use` block start and its `input_json_delta`s become tool-call
/// fragments (index = content block index), the `stop_reason` of `message_delta` the finish
/// (`end_turn`→`stop`, `tool_use`→`tool_calls`, `max_tokens`→`length`, others verbatim), and
/// `message_stop` one usage delta with the merged usage; an `error` event is
/// [`LlmError::Upstream`].
#[derive(Debug, Default)]
pub struct EventParser {
    usage: Map<String, Value>,
    saw_finish: bool,
    stopped: bool,
    /// Thinking blocks being streamed, by content block index.
    open_thinking: BTreeMap<u64, Value>,
    /// Completed thinking / redacted_thinking blocks of this message, in order.
    thinking: Vec<Value>,
    first_tool_id: Option<String>,
}

impl EventParser {
    /// Parses one SSE frame (`event:` name and `data:` text). Frames without data are ignored.
    pub fn parse(&mut self, event: &str, data: &str) -> Result<Vec<LlmDelta>, LlmError> {
        if data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(data).map_err(|_| malformed(data))?;
        let Some(object) = value.as_object() else { return Err(malformed(data)) };
        let kind = object.get("type").and_then(Value::as_str).unwrap_or(event);
        let index = object.get("index").and_then(Value::as_u64);
        let mut deltas = Vec::new();
        match kind {
            "message_start" => {
                if let Some(usage) = object.get("message").and_then(|m| m.get("usage")) {
                    self.merge_usage(usage);
                }
            }
            "content_block_start" => {
                let block = object.get("content_block").unwrap_or(&Value::Null);
                self.block_start(index, block, &mut deltas);
            }
            "content_block_delta" => {
                let delta = object.get("delta").unwrap_or(&Value::Null);
                self.block_delta(index, delta, &mut deltas);
            }
            "content_block_stop" => {
                if let Some(block) = index.and_then(|i| self.open_thinking.remove(&i)) {
                    self.thinking.push(block);
                }
            }
            "message_delta" => {
                if let Some(reason) = object.get("delta").and_then(|d| stop_reason(d.get("stop_reason"))) {
                    self.saw_finish = true;
                    deltas.push(LlmDelta::Finish { reason });
                }
                if let Some(usage) = object.get("usage") {
                    self.merge_usage(usage);
                }
            }
            "message_stop" => {
                self.stopped = true;
                deltas.extend(self.take_usage());
            }
            "error" => {
                let error = object.get("error").unwrap_or(&value);
                let message = error.get("message").and_then(Value::as_str);
                let text = match (error.get("type").and_then(Value::as_str), message) {
                    (Some(kind), Some(message)) => format!("{kind}: {message}"),
                    (None, Some(message)) => message.to_owned(),
                    _ => error.to_string(),
                };
                return Err(LlmError::Upstream { excerpt: excerpt(&text, BODY_EXCERPT_CHARS) });
            }
            _ => {} // ping and event types this version does not know
        }
        Ok(deltas)
    }

    /// A stop reason arrived (`message_delta`).
    pub fn saw_finish(&self) -> bool {
        self.saw_finish
    }

    /// `message_stop` arrived: nothing after it is read.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The merged usage as one delta, once.
    pub fn take_usage(&mut self) -> Option<LlmDelta> {
        (!self.usage.is_empty()).then(|| LlmDelta::Usage { usage: Value::Object(std::mem::take(&mut self.usage)) })
    }

    /// The id of the message's first tool call and its completed thinking blocks, when it has both.
    pub fn take_thinking(&mut self) -> Option<(String, Vec<Value>)> {
        if self.thinking.is_empty() {
            return None;
        }
        let id = self.first_tool_id.take()?;
        Some((id, std::mem::take(&mut self.thinking)))
    }

    fn block_start(&mut self, index: Option<u64>, block: &Value, deltas: &mut Vec<LlmDelta>) {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = non_empty_str(block.get("text")) {
                    deltas.push(LlmDelta::Content { text: text.to_owned() });
                }
            }
            Some("thinking") => {
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
                if !text.is_empty() {
                    deltas.push(LlmDelta::Reasoning { text: text.to_owned() });
                }
                if let Some(index) = index {
                    let signature = block.get("signature").and_then(Value::as_str).unwrap_or_default();
                    self.open_thinking
                        .insert(index, json!({"type": "thinking", "thinking": text, "signature": signature}));
                }
            }
            Some("redacted_thinking") => {
                if let Some(index) = index {
                    self.open_thinking.insert(index, block.clone());
                }
            }
            Some("tool_use") => {
                let id = non_empty_str(block.get("id")).map(str::to_owned);
                if self.first_tool_id.is_none() {
                    self.first_tool_id.clone_from(&id);
                }
                let arguments = match block.get("input") {
                    Some(Value::Object(input)) if !input.is_empty() => Value::Object(input.clone()).to_string(),
                    _ => String::new(),
                };
                deltas.push(LlmDelta::ToolCall(ToolCallFragment {
                    index: index.and_then(|i| u32::try_from(i).ok()),
                    id,
                    call_type: None,
                    name: non_empty_str(block.get("name")).map(str::to_owned),
                    arguments,
                }));
            }
            _ => {}
        }
    }

    fn block_delta(&mut self, index: Option<u64>, delta: &Value, deltas: &mut Vec<LlmDelta>) {
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = non_empty_str(delta.get("text")) {
                    deltas.push(LlmDelta::Content { text: text.to_owned() });
                }
            }
            Some("thinking_delta") => {
                if let Some(text) = non_empty_str(delta.get("thinking")) {
                    if let Some(Value::String(so_far)) =
                        index.and_then(|i| self.open_thinking.get_mut(&i)).and_then(|b| b.get_mut("thinking"))
                    {
                        so_far.push_str(text);
                    }
                    deltas.push(LlmDelta::Reasoning { text: text.to_owned() });
                }
            }
            Some("signature_delta") => {
                if let (Some(signature), Some(block)) =
                    (delta.get("signature").and_then(Value::as_str), index.and_then(|i| self.open_thinking.get_mut(&i)))
                {
                    block["signature"] = json!(signature);
                }
            }
            Some("input_json_delta") => {
                if let Some(partial) = delta.get("partial_json").and_then(Value::as_str) {
                    deltas.push(LlmDelta::ToolCall(ToolCallFragment {
                        index: index.and_then(|i| u32::try_from(i).ok()),
                        arguments: partial.to_owned(),
                        ..Default::default()
                    }));
                }
            }
            _ => {}
        }
    }

    fn merge_usage(&mut self, usage: &Value) {
        if let Some(usage) = usage.as_object() {
            for (key, value) in usage {
                if !value.is_null() {
                    self.usage.insert(key.clone(), value.clone());
                }
            }
        }
    }
}

fn malformed(data: &str) -> LlmError {
    LlmError::MalformedChunk { excerpt: excerpt(data, BODY_EXCERPT_CHARS) }
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|text| !text.is_empty())
}

/// `stop_reason` in agw's (OpenAI's) vocabulary; `None` for null or blank.
fn stop_reason(value: Option<&Value>) -> Option<String> {
    let reason = value?.as_str()?.trim();
    Some(
        match reason {
            "" => return None,
            "end_turn" => "stop",
            "tool_use" => "tool_calls",
            "max_tokens" => "length",
            other => other,
        }
        .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(parser: &mut EventParser, value: Value) -> Vec<LlmDelta> {
        let kind = value["type"].as_str().unwrap_or("message").to_owned();
        parser.parse(&kind, &value.to_string()).unwrap()
    }

    #[test]
    fn stop_reasons_are_mapped() {
        let reason = |r: &str| stop_reason(Some(&json!(r)));
        assert_eq!(reason("end_turn").as_deref(), Some("stop"));
        assert_eq!(reason("tool_use").as_deref(), Some("tool_calls"));
        assert_eq!(reason("max_tokens").as_deref(), Some("length"));
        assert_eq!(reason("refusal").as_deref(), Some("refusal"));
        assert_eq!(reason(" "), None);
        assert_eq!(stop_reason(Some(&Value::Null)), None);
    }

    #[test]
    fn usage_is_merged_and_emitted_once_at_stop() {
        let mut parser = EventParser::default();
        parse(&mut parser, json!({"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}));
        let finish = parse(
            &mut parser,
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}),
        );
        assert_eq!(finish, vec![LlmDelta::Finish { reason: "stop".into() }]);
        let stop = parse(&mut parser, json!({"type":"message_stop"}));
        assert_eq!(stop, vec![LlmDelta::Usage { usage: json!({"input_tokens":9,"output_tokens":7}) }]);
        assert!(parser.stopped() && parser.take_usage().is_none());
    }

    #[test]
    fn thinking_with_signature_is_captured_for_the_tool_turn() {
        let mut parser = EventParser::default();
        parse(
            &mut parser,
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
        );
        let r = parse(
            &mut parser,
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}),
        );
        assert_eq!(r, vec![LlmDelta::Reasoning { text: "a".into() }]);
        parse(
            &mut parser,
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"b"}}),
        );
        parse(
            &mut parser,
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"S"}}),
        );
        parse(&mut parser, json!({"type":"content_block_stop","index":0}));
        let start = parse(
            &mut parser,
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}),
        );
        assert_eq!(
            start,
            vec![LlmDelta::ToolCall(ToolCallFragment {
                index: Some(1),
                id: Some("toolu_1".into()),
                name: Some("f".into()),
                ..Default::default()
            })]
        );
        assert_eq!(
            parser.take_thinking(),
            Some(("toolu_1".into(), vec![json!({"type":"thinking","thinking":"ab","signature":"S"})]))
        );
    }

    #[test]
    fn errors_and_malformed_data() {
        let mut parser = EventParser::default();
        let error = parser
            .parse("error", r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
            .unwrap_err();
        assert!(matches!(&error, LlmError::Upstream { excerpt } if excerpt == "overloaded_error: Overloaded"));
        assert!(matches!(parser.parse("message", "{oops"), Err(LlmError::MalformedChunk { .. })));
        assert!(matches!(parser.parse("message", "[1]"), Err(LlmError::MalformedChunk { .. })));
        assert_eq!(parser.parse("ping", "").unwrap(), vec![]);
        assert_eq!(parser.parse("ping", r#"{"type": "ping"}"#).unwrap(), vec![]);
    }
}
