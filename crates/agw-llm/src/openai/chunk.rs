//! One upstream `chat.completion.chunk` → [`LlmDelta`]s (`docs/contract/agent-definitions.md` §10.2,
//! with agw's whitespace decision).
//!
//! Two ways in, one mapping. [`parse_chunk_str`] decodes an SSE `data:` payload straight into a
//! lean typed view of the chunk (`ChunkFields`) that borrows its texts from the payload where it
//! can — the direct streaming path, no `serde_json::Value` per chunk. [`parse_chunk`] reads the
//! same view out of an already parsed `Value` (the async-openai path, fuzzing, benchmarks). Both
//! end in `ChunkFields::deltas`, so they cannot diverge.
//!
//! Deliberately tolerant: unknown fields are ignored, wrong types are treated as absent (every
//! field type of the view accepts any JSON value, see `Tolerant`). Only a payload that is not a
//! JSON object, or an in-stream `error` object, is an error.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::error::{BODY_EXCERPT_CHARS, LlmError, excerpt};
use crate::{LlmDelta, ToolCallFragment};

/// The deltas of one parsed chunk, in the order reasoning, content, tool calls, finish, usage.
///
/// Empty or absent text yields nothing; any non-empty text (whitespace included) yields exactly
/// one delta.
pub fn parse_chunk(chunk: &Value) -> Result<Vec<LlmDelta>, LlmError> {
    match Object::<ChunkFields<'_>>::deserialize(chunk) {
        Ok(Object(Some(fields))) => fields.deltas(),
        // Not an object. (Every field type accepts any JSON value, so an object always decodes.)
        _ => Err(malformed(&chunk.to_string())),
    }
}

/// [`parse_chunk`] of an SSE `data:` payload, without building a `serde_json::Value`: the same
/// deltas and errors as `parse_chunk(&serde_json::from_str(data)?)`, and
/// [`LlmError::MalformedChunk`] with an excerpt of `data` when it is not JSON at all.
pub fn parse_chunk_str(data: &str) -> Result<Vec<LlmDelta>, LlmError> {
    match serde_json::from_str::<Object<ChunkFields<'_>>>(data) {
        Ok(Object(Some(fields))) => fields.deltas(),
        // Not an object, a key given twice (the typed view refuses that, a `Value` keeps the last
        // one), or not JSON: the `Value` reading decides, exactly as on the async-openai path.
        _ => match serde_json::from_str::<Value>(data) {
            Ok(value) => parse_chunk(&value),
            Err(_) => Err(malformed(data)),
        },
    }
}

fn malformed(text: &str) -> LlmError {
    LlmError::MalformedChunk { excerpt: excerpt(text, BODY_EXCERPT_CHARS) }
}

/// The fields of a chunk agw reads; everything else is skipped without being built.
#[derive(Default, serde::Deserialize)]
struct ChunkFields<'a> {
    #[serde(default, borrow)]
    choices: Choices<'a>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// The first entry of `choices` (agw asks for one choice), when `choices` is a non-empty array.
#[derive(Default)]
struct Choices<'a> {
    first: Option<Choice<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Object<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

#[derive(Default, serde::Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    reasoning_content: Text<'a>,
    /// The alias some providers (OpenRouter, vLLM) use; only when it is a string.
    #[serde(default, borrow)]
    reasoning: Text<'a>,
    #[serde(default, borrow)]
    content: Text<'a>,
    #[serde(default, borrow)]
    tool_calls: List<Object<ToolCall<'a>>>,
}

#[derive(Default, serde::Deserialize)]
struct ToolCall<'a> {
    #[serde(default, borrow)]
    id: Text<'a>,
    #[serde(default)]
    index: Index,
    #[serde(default, borrow, rename = "type")]
    kind: Text<'a>,
    #[serde(default, borrow)]
    function: Object<Function<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    arguments: Text<'a>,
}

impl ChunkFields<'_> {
    /// The one mapping from a chunk to its deltas.
    fn deltas(self) -> Result<Vec<LlmDelta>, LlmError> {
        let Self { choices, usage, error } = self;
        if choices.first.is_none()
            && let Some(error) = error
        {
            // Some providers report failures inside an otherwise healthy stream.
            return Err(LlmError::Upstream { excerpt: excerpt(&error.to_string(), BODY_EXCERPT_CHARS) });
        }

        let mut deltas = Vec::new();
        if let Some(Choice { delta, finish_reason }) = choices.first {
            let Delta { reasoning_content, reasoning, content, tool_calls } = delta.0.unwrap_or_default();
            if let Some(text) = reasoning_content.non_empty().or_else(|| reasoning.non_empty()) {
                deltas.push(LlmDelta::Reasoning { text: text.into_owned() });
            }
            if let Some(text) = content.non_empty() {
                deltas.push(LlmDelta::Content { text: text.into_owned() });
            }
            let calls = tool_calls.0.into_iter().filter_map(|call| call.0.and_then(ToolCall::fragment));
            deltas.extend(calls.map(LlmDelta::ToolCall));
            if let Some(reason) = finish_reason.and_then(finish_text) {
                deltas.push(LlmDelta::Finish { reason });
            }
        }
        if let Some(usage) = usage.filter(Value::is_object) {
            deltas.push(LlmDelta::Usage { usage });
        }
        Ok(deltas)
    }
}

/// `finish_reason`: a non-blank string, or any other non-null JSON value stringified.
fn finish_text(value: Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) if text.trim().is_empty() => None,
        Value::String(text) => Some(text),
        other => Some(other.to_string()),
    }
}

impl ToolCall<'_> {
    /// The fragment of one `tool_calls[]` entry; `None` when it carries none of
    /// id/index/name/arguments.
    ///
    /// Empty `id`/`name` strings (sent by some providers on continuation fragments) count as
    /// absent, so "the fragment names a call" stays a simple `is_some()` for consumers. Arguments
    /// are kept verbatim, whitespace included.
    fn fragment(self) -> Option<ToolCallFragment> {
        let Function { name, arguments } = self.function.0.unwrap_or_default();
        let id = self.id.non_empty();
        let index = self.index.0;
        let name = name.non_empty();
        let arguments = arguments.0;
        if id.is_none() && index.is_none() && name.is_none() && arguments.is_none() {
            return None;
        }
        Some(ToolCallFragment {
            index,
            id: id.map(Cow::into_owned),
            call_type: self.kind.non_empty().map(Cow::into_owned),
            name: name.map(Cow::into_owned),
            arguments: arguments.map(Cow::into_owned).unwrap_or_default(),
        })
    }
}

/// A field of the typed view: accepts any JSON value, keeps the kinds it wants and is left at its
/// default for every other kind (and for `null`) — the tolerance of reading a `Value` with
/// `as_str`/`as_u64`/`get`, without building the `Value`. One visitor (`TolerantVisitor`)
/// serves every such type; skipped arrays and objects are drained, never built.
trait Tolerant<'de>: Default {
    fn borrowed_str(text: &'de str) -> Self {
        Self::transient_str(text)
    }

    fn transient_str(_text: &str) -> Self {
        Self::default()
    }

    fn owned_string(text: String) -> Self {
        Self::transient_str(&text)
    }

    fn unsigned(_number: u64) -> Self {
        Self::default()
    }

    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }

    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

struct TolerantVisitor<T>(PhantomData<T>);

impl<'de, T: Tolerant<'de>> Visitor<'de> for TolerantVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<T, E> {
        // `Value::as_u64` of a negative number is `None`.
        Ok(u64::try_from(number).map_or_else(|_| T::default(), T::unsigned))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<T, E> {
        Ok(T::unsigned(number))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        Ok(T::transient_str(text))
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<T, E> {
        Ok(T::borrowed_str(text))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<T, E> {
        Ok(T::owned_string(text))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::object(map)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::array(seq)
    }
}

/// A string field (`Value::as_str`): borrowed from the payload unless it had escapes.
#[derive(Default)]
struct Text<'a>(Option<Cow<'a, str>>);

impl<'a> Text<'a> {
    fn non_empty(self) -> Option<Cow<'a, str>> {
        self.0.filter(|text| !text.is_empty())
    }
}

impl<'de: 'a, 'a> Tolerant<'de> for Text<'a> {
    fn borrowed_str(text: &'de str) -> Self {
        Self(Some(Cow::Borrowed(text)))
    }

    fn transient_str(text: &str) -> Self {
        Self(Some(Cow::Owned(text.to_owned())))
    }

    fn owned_string(text: String) -> Self {
        Self(Some(Cow::Owned(text)))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TolerantVisitor(PhantomData))
    }
}

/// A `tool_calls[].index` (`Value::as_u64`, then `u32`).
#[derive(Default)]
struct Index(Option<u32>);

impl Tolerant<'_> for Index {
    fn unsigned(number: u64) -> Self {
        Self(u32::try_from(number).ok())
    }
}

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TolerantVisitor(PhantomData))
    }
}

/// An object field (`Value::get` on it finds nothing when it is not an object).
struct Object<T>(Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Tolerant<'de> for Object<T> {
    fn object<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|fields| Self(Some(fields)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TolerantVisitor(PhantomData))
    }
}

/// An array field (`Value::as_array`).
struct List<T>(Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Tolerant<'de> for List<T> {
    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Self(items))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TolerantVisitor(PhantomData))
    }
}

impl<'de: 'a, 'a> Tolerant<'de> for Choices<'a> {
    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        // A first entry that is not an object still counts as a choice, one with nothing in it.
        let first = seq.next_element::<Object<Choice<'a>>>()?.map(|choice| choice.0.unwrap_or_default());
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self { first })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TolerantVisitor(PhantomData))
    }
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

/// The typed view against the `Value`-walking parser it replaced (kept here as the oracle), on
/// every chunk shape the fixtures and tests use and on every kind of JSON value in every field.
#[cfg(test)]
mod equivalence {
    use agw_protocol::sse::SseDecoder;
    use agw_testkit::{Transcript, chunk_json, providers_dir, usage_chunk_json};
    use serde_json::json;

    use super::*;

    /// The parser before the typed view, verbatim.
    mod oracle {
        use super::*;

        pub(super) fn parse_chunk(chunk: &Value) -> Result<Vec<LlmDelta>, LlmError> {
            let Some(object) = chunk.as_object() else {
                return Err(LlmError::MalformedChunk { excerpt: excerpt(&chunk.to_string(), BODY_EXCERPT_CHARS) });
            };
            let choice = object.get("choices").and_then(Value::as_array).and_then(|choices| choices.first());
            if choice.is_none()
                && let Some(error) = object.get("error").filter(|e| !e.is_null())
            {
                return Err(LlmError::Upstream { excerpt: excerpt(&error.to_string(), BODY_EXCERPT_CHARS) });
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

        fn finish_reason(value: Option<&Value>) -> Option<String> {
            match value? {
                Value::Null => None,
                Value::String(text) if text.trim().is_empty() => None,
                Value::String(text) => Some(text.clone()),
                other => Some(other.to_string()),
            }
        }

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
    }

    fn outcome(result: Result<Vec<LlmDelta>, LlmError>) -> Result<Vec<LlmDelta>, String> {
        result.map_err(|error| format!("{error:?}"))
    }

    /// Asserts that the direct path (typed view of the text), the `Value` path and the oracle
    /// agree on `data`, and returns their answer.
    fn agree(data: &str) -> Result<Vec<LlmDelta>, String> {
        let typed = outcome(parse_chunk_str(data));
        let (via_value, expected) = match serde_json::from_str::<Value>(data) {
            Ok(value) => (outcome(parse_chunk(&value)), outcome(oracle::parse_chunk(&value))),
            // async-openai reports a payload that is not JSON with an excerpt of the payload.
            Err(_) => (typed.clone(), outcome(Err(malformed(data)))),
        };
        assert_eq!(via_value, expected, "Value path vs oracle on {data}");
        assert_eq!(typed, expected, "typed path vs oracle on {data}");
        typed
    }

    /// The `data:` payloads of a transcript's body, as the SSE reader sees them.
    fn payloads(transcript: &Transcript) -> Vec<String> {
        let mut decoder = SseDecoder::new();
        let mut frames = Vec::new();
        for frame in &transcript.frames {
            decoder.feed(frame.raw.as_bytes(), &mut frames);
        }
        frames.into_iter().map(|f| f.data).filter(|d| !d.trim().is_empty() && d.trim() != "[DONE]").collect()
    }

    #[test]
    fn every_fixture_chunk_parses_the_same_both_ways() {
        let mut transcripts = Vec::new();
        for entry in std::fs::read_dir(providers_dir()).expect("transcripts dir") {
            let path = entry.expect("entry").path();
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
            if path.extension().is_some_and(|e| e == "json") && !name.starts_with("anthropic-") {
                let transcript = Transcript::load(&path).expect("transcript loads");
                if transcript.status == 200 {
                    transcripts.push(transcript);
                }
            }
        }
        assert!(transcripts.len() >= 5, "the provider transcripts were found");
        transcripts.extend([
            Transcript::openai_text(&["Hi", " ", "\n\n", "", "中文 \"quoted\" \\ \u{1F600}"]),
            Transcript::openai_reasoning_text(&["think", " "], &["answer"]),
            Transcript::openai_tool_call("call_1", "mock_city_weather", &["{\"city\":", "\"Tokyo\"}", " "]),
            Transcript::new().tool_call_start(0, "call_0", "a").tool_args(0, "{}").tool_call_start(1, "call_1", "b"),
            Transcript::new().content("a").raw("data: {\"error\":{\"message\":\"overloaded\"}}\n\n"),
            Transcript::new()
                .data(&json!({"choices": [{"index": 0, "delta": {"reasoning_content": "r", "content": "c"}, "finish_reason": "stop"}], "usage": {"total_tokens": 5}})),
            Transcript::new().data(&usage_chunk_json(3, 4)).data(&chunk_json(json!({}), Some("length"))),
        ]);
        let mut seen = 0;
        for transcript in &transcripts {
            for data in payloads(transcript) {
                let _ = agree(&data);
                seen += 1;
            }
        }
        assert!(seen > 50, "{seen} chunks compared");
    }

    #[test]
    fn every_kind_of_value_in_every_field_parses_the_same_both_ways() {
        let base = json!({
            "id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {
                "role": "assistant", "content": "c", "reasoning_content": "r", "reasoning": "s",
                "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            }, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens_details": {"reasoning_tokens": 0}},
            "error": {"message": "in-band"},
        });
        let fields = [
            "/choices",
            "/choices/0",
            "/choices/0/delta",
            "/choices/0/delta/content",
            "/choices/0/delta/reasoning_content",
            "/choices/0/delta/reasoning",
            "/choices/0/delta/tool_calls",
            "/choices/0/delta/tool_calls/0",
            "/choices/0/delta/tool_calls/0/id",
            "/choices/0/delta/tool_calls/0/index",
            "/choices/0/delta/tool_calls/0/type",
            "/choices/0/delta/tool_calls/0/function",
            "/choices/0/delta/tool_calls/0/function/name",
            "/choices/0/delta/tool_calls/0/function/arguments",
            "/choices/0/finish_reason",
            "/usage",
            "/error",
        ];
        let kinds = [
            json!(null),
            json!(true),
            json!(0),
            json!(7),
            json!(-1),
            json!(1.5),
            json!(4_294_967_296_u64),
            json!(u64::MAX),
            json!(""),
            json!(" "),
            json!("x"),
            json!("a\"b\\c\nd \u{e9}"),
            json!([]),
            json!([1, "two", {"three": 3}]),
            json!([{"index": 2, "function": {"arguments": "x"}}]),
            json!({}),
            json!({"content": "nested", "k": [1]}),
        ];
        let mut compared = 0;
        for field in fields {
            for kind in &kinds {
                let mut chunk = base.clone();
                *chunk.pointer_mut(field).expect("field exists") = kind.clone();
                let _ = agree(&chunk.to_string());
                // Without the choice the in-stream error decides; without both, only usage.
                if let Some(object) = chunk.as_object_mut() {
                    object.insert("choices".into(), json!([]));
                }
                let _ = agree(&chunk.to_string());
                compared += 2;
            }
            // The field absent altogether.
            let mut chunk = base.clone();
            let (parent, key) = field.rsplit_once('/').expect("pointer");
            match chunk.pointer_mut(if parent.is_empty() { "" } else { parent }) {
                Some(Value::Object(object)) => {
                    object.remove(key);
                }
                Some(Value::Array(array)) => {
                    array.clear();
                }
                _ => unreachable!("parent of {field}"),
            }
            let _ = agree(&chunk.to_string());
        }
        assert!(compared > 500);
    }

    #[test]
    fn text_quirks_parse_the_same_both_ways() {
        for data in [
            // A key given twice: the last one counts, as in a `Value`.
            r#"{"choices":[{"delta":{"content":"first","content":"second"}}]}"#,
            r#"{"choices":[],"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}"#,
            // Escapes, surrogate pairs, whitespace around the payload.
            "  {\"choices\":[{\"delta\":{\"content\":\"\\u00e9\\ud83d\\ude00\\t\"}}]}  ",
            // Other choices are ignored; unknown fields of any shape are skipped.
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}],"x":{"y":[[[]]]}}"#,
            r#"{"choices":[7],"error":{"message":"ignored, there is a choice"}}"#,
            r#"{"choices":{"0":{"delta":{"content":"not an array"}}},"error":"boom"}"#,
            r#"{"choices":null,"error":null,"usage":null}"#,
            r#"{}"#,
        ] {
            let _ = agree(data);
        }
        assert_eq!(
            agree(r#"{"choices":[{"delta":{"content":"first","content":"second"}}]}"#),
            Ok(vec![LlmDelta::Content { text: "second".into() }])
        );
    }

    #[test]
    fn not_an_object_or_not_json_is_a_malformed_chunk_with_an_excerpt() {
        for (data, wanted) in [
            (r#"{"choices": [oops"#, r#"{"choices": [oops"#),
            ("not json at all", "not json at all"),
            ("[1, 2]", "[1,2]"),
            ("\"text\"", "\"text\""),
            ("42", "42"),
            ("null", "null"),
            ("{\"a\":1} trailing", "{\"a\":1} trailing"),
            // A lone surrogate escape in a text agw reads.
            (r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#, r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#),
        ] {
            let error = agree(data).expect_err(data);
            assert_eq!(error, format!("{:?}", LlmError::MalformedChunk { excerpt: wanted.into() }), "{data}");
        }
        let long = format!("{{\"choices\": [{}", "x".repeat(2000));
        let Err(LlmError::MalformedChunk { excerpt }) = parse_chunk_str(&long) else { panic!("malformed") };
        assert_eq!(excerpt.chars().count(), BODY_EXCERPT_CHARS, "the excerpt is bounded");
    }

    #[test]
    fn a_lone_surrogate_in_a_skipped_field_is_tolerated() {
        // The one known difference: fields agw never reads are skipped, not decoded, and skipping
        // does not check that `\uD800`-style escapes come in pairs; a `Value` refuses the payload.
        let data = r#"{"id":"\ud800","choices":[{"delta":{"content":"a"}}]}"#;
        assert!(serde_json::from_str::<Value>(data).is_err());
        assert_eq!(parse_chunk_str(data).expect("tolerated"), vec![LlmDelta::Content { text: "a".into() }]);
    }

    #[test]
    fn texts_without_escapes_are_borrowed_from_the_payload() {
        let data =
            r#"{"choices":[{"delta":{"content":"plain","tool_calls":[{"function":{"arguments":"{\"a\":1}"}}]}}]}"#;
        let Ok(Object(Some(fields))) = serde_json::from_str::<Object<ChunkFields<'_>>>(data) else { panic!("decodes") };
        let delta = fields.choices.first.and_then(|c| c.delta.0).expect("delta");
        assert!(matches!(delta.content.0, Some(Cow::Borrowed("plain"))));
        let call = delta.tool_calls.0.into_iter().next().and_then(|c| c.0).expect("call");
        let arguments = call.function.0.and_then(|f| f.arguments.0).expect("arguments");
        assert!(matches!(arguments, Cow::Owned(ref text) if text == "{\"a\":1}"), "escapes need a copy");
    }
}
