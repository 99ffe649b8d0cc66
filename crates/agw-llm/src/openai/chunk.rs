//! One upstream `chat.completion.chunk` → [`LlmDelta`]s (contract `agent-definitions.md` §10.2,
//! with agw's whitespace decision).
//!
//! Deliberately tolerant: every field is read from a `serde_json::Value`, unknown fields are
//! ignored, wrong types are treated as absent. Only a payload that is not a JSON object, or an
//! in-stream `error` object, is an error.

use serde_json::Value;

use crate::error::{BODY_EXCERPT_CHARS, LlmError, excerpt};
use crate::{LlmDelta, ToolCallFragment};

/// The deltas of one parsed chunk, in the order reasoning, content, tool calls, finish, usage.
///
/// Empty or absent text yields nothing; any non-empty text (whitespace included) yields exactly
/// one delta.
pub fn parse_chunk(chunk: &Value) -> Result<Vec<LlmDelta>, LlmError> {
    let Some(object) = chunk.as_object() else {
        return Err(LlmError::MalformedChunk { excerpt: excerpt(&chunk.to_string(), BODY_EXCERPT_CHARS) });
    };
    let choice = object.get("choices").and_then(Value::as_array).and_then(|choices| choices.first());
    if choice.is_none() {
        // Some providers report failures inside an otherwise healthy stream.
        if let Some(error) = object.get("error").filter(|e| !e.is_null()) {
            return Err(LlmError::Upstream { excerpt: excerpt(&error.to_string(), BODY_EXCERPT_CHARS) });
        }
    }

    let mut deltas = Vec::new();
    if let Some(choice) = choice {
        let delta = choice.get("delta");
        let reasoning = delta
            .and_then(|d| non_empty_str(d.get("reasoning_content")))
            .or_else(|| delta.and_then(|d| non_empty_str(d.get("reasoning"))));
        if let Some(text) = reasoning {
            deltas.push(LlmDelta::Reasoning { text: text.to_owned() });
        }
        if let Some(text) = delta.and_then(|d| non_empty_str(d.get("content"))) {
            deltas.push(LlmDelta::Content { text: text.to_owned() });
        }
        if let Some(calls) = delta.and_then(|d| d.get("tool_calls")).and_then(Value::as_array) {
            deltas.extend(calls.iter().filter_map(tool_call_fragment).map(LlmDelta::ToolCall));
        }
        if let Some(reason) = finish_reason(choice.get("finish_reason")) {
            deltas.push(LlmDelta::Finish { reason });
        }
    }
    if let Some(usage) = object.get("usage").filter(|u| u.is_object()) {
        deltas.push(LlmDelta::Usage { usage: usage.clone() });
    }
    Ok(deltas)
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|text| !text.is_empty())
}

/// `finish_reason`: a non-blank string, or any other non-null JSON value stringified.
fn finish_reason(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Null => None,
        Value::String(text) if text.trim().is_empty() => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// One `tool_calls[]` entry; `None` when it carries none of id/index/name/arguments.
///
/// Empty `id`/`name` strings (sent by some providers on continuation fragments) count as
/// absent, so "the fragment names a call" stays a simple `is_some()` for consumers. Arguments
/// are kept verbatim, whitespace included.
fn tool_call_fragment(entry: &Value) -> Option<ToolCallFragment> {
    let function = entry.get("function");
    let id = non_empty_str(entry.get("id")).map(str::to_owned);
    let index = entry.get("index").and_then(Value::as_u64).and_then(|i| u32::try_from(i).ok());
    let name = function.and_then(|f| non_empty_str(f.get("name"))).map(str::to_owned);
    let arguments = function.and_then(|f| f.get("arguments")).and_then(Value::as_str);
    if id.is_none() && index.is_none() && name.is_none() && arguments.is_none() {
        return None;
    }
    Some(ToolCallFragment {
        index,
        id,
        call_type: non_empty_str(entry.get("type")).map(str::to_owned),
        name,
        arguments: arguments.unwrap_or_default().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunk(delta: Value, finish: Value) -> Value {
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    #[test]
    fn empty_text_yields_nothing_whitespace_yields_one() {
        assert_eq!(parse_chunk(&chunk(json!({"role": "assistant", "content": ""}), Value::Null)).unwrap(), vec![]);
        assert_eq!(
            parse_chunk(&chunk(json!({"content": "\n\n"}), Value::Null)).unwrap(),
            vec![LlmDelta::Content { text: "\n\n".into() }]
        );
        assert_eq!(
            parse_chunk(&chunk(json!({"reasoning_content": " "}), Value::Null)).unwrap(),
            vec![LlmDelta::Reasoning { text: " ".into() }]
        );
    }

    #[test]
    fn order_within_a_chunk() {
        let mut value = chunk(
            json!({"content": "b", "reasoning_content": "a", "tool_calls": [{"index": 0, "function": {"arguments": " "}}]}),
            json!("stop"),
        );
        value["usage"] = json!({"total_tokens": 3});
        let kinds: Vec<_> = parse_chunk(&value).unwrap();
        assert_eq!(
            kinds,
            vec![
                LlmDelta::Reasoning { text: "a".into() },
                LlmDelta::Content { text: "b".into() },
                LlmDelta::ToolCall(ToolCallFragment { index: Some(0), arguments: " ".into(), ..Default::default() }),
                LlmDelta::Finish { reason: "stop".into() },
                LlmDelta::Usage { usage: json!({"total_tokens": 3}) },
            ]
        );
    }

    #[test]
    fn reasoning_alias_only_when_string() {
        assert_eq!(
            parse_chunk(&chunk(json!({"reasoning": "think"}), Value::Null)).unwrap(),
            vec![LlmDelta::Reasoning { text: "think".into() }]
        );
        assert_eq!(parse_chunk(&chunk(json!({"reasoning": {"effort": "low"}}), Value::Null)).unwrap(), vec![]);
    }

    #[test]
    fn tool_call_entries() {
        let value = chunk(
            json!({"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}},
                {"type": "function", "function": {}},
                {"id": "", "function": {"name": null, "arguments": "{\"a\""}},
            ]}),
            Value::Null,
        );
        assert_eq!(
            parse_chunk(&value).unwrap(),
            vec![
                LlmDelta::ToolCall(ToolCallFragment {
                    index: Some(0),
                    id: Some("call_1".into()),
                    call_type: Some("function".into()),
                    name: Some("f".into()),
                    arguments: String::new(),
                }),
                LlmDelta::ToolCall(ToolCallFragment { arguments: "{\"a\"".into(), ..Default::default() }),
            ]
        );
    }

    #[test]
    fn finish_reason_forms() {
        assert_eq!(parse_chunk(&chunk(json!({}), json!(7))).unwrap(), vec![LlmDelta::Finish { reason: "7".into() }]);
        assert_eq!(parse_chunk(&chunk(json!({}), json!(" "))).unwrap(), vec![]);
    }

    #[test]
    fn usage_only_chunk_and_errors() {
        let usage = json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 1, "details": {"x": [1]}}});
        assert_eq!(
            parse_chunk(&usage).unwrap(),
            vec![LlmDelta::Usage { usage: json!({"prompt_tokens": 1, "details": {"x": [1]}}) }]
        );
        assert!(matches!(parse_chunk(&json!([1, 2])), Err(LlmError::MalformedChunk { .. })));
        assert!(matches!(parse_chunk(&json!({"error": {"message": "overloaded"}})), Err(LlmError::Upstream { .. })));
    }
}
