//! Stored messages of a step line (`docs/contract/memory-jsonl.md` §3).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::nullable;

/// `role` of the user's message (the first message of a run's first step).
pub const ROLE_USER: &str = "user";
/// `role` of a model message: reasoning, content or one tool call.
pub const ROLE_ASSISTANT: &str = "assistant";
/// `role` of a tool result.
pub const ROLE_TOOL: &str = "tool";
/// `role` of a system message (accepted when reading history).
pub const ROLE_SYSTEM: &str = "system";

/// One stored message. An assistant message holds exactly one of reasoning, content or a
/// single tool call (parallel calls are several messages sharing a `_msgId`).
///
/// Key order on disk: `role, content, reasoning_content, tool_calls, ts, name, tool_call_id,
/// _reasoningId, _contentId, _msgId, _toolId, _actionId, _timing, _usage, _steerId, _requestId, _citations,
/// _revoked`;
/// `None`s are omitted. The last two are agw's, on steered user messages only.
/// `content` / `reasoning_content` are written as one content part
/// `[{"type":"text","text":…}]`; reading concatenates the `text` of every part (a plain string
/// is accepted too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// One of the `ROLE_*` constants; `""` when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub role: String,
    /// The text of a user message, an assistant content message or a tool result.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "write_parts",
        deserialize_with = "read_parts"
    )]
    pub content: Option<String>,
    /// The text of an assistant reasoning message.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "write_parts",
        deserialize_with = "read_parts"
    )]
    pub reasoning_content: Option<String>,
    /// The call of an assistant tool-call message (written with exactly one element).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<StoredToolCall>>,
    /// Epoch milliseconds; which moment depends on the kind of message (`docs/contract/memory-jsonl.md` §3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
    /// The tool's name, on tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The [`StoredToolCall::id`] a tool result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// agw: the live SSE `reasoningId` (`<runId>_r_<n>`), so the replay repeats the live id.
    #[serde(default, rename = "_reasoningId", skip_serializing_if = "Option::is_none")]
    pub reasoning_id: Option<String>,
    /// agw: the live SSE `contentId` (`<runId>_c_<n>`).
    #[serde(default, rename = "_contentId", skip_serializing_if = "Option::is_none")]
    pub content_id: Option<String>,
    /// `m_` + 8 hex; shared by the assistant messages of one model response.
    #[serde(default, rename = "_msgId", skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<String>,
    /// The live `toolId` (the model's tool-call id).
    #[serde(default, rename = "_toolId", skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// Written instead of `_toolId` for calls persisted as actions; the live id.
    #[serde(default, rename = "_actionId", skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// Milliseconds, omitted when ≤ 0.
    #[serde(default, rename = "_timing", skip_serializing_if = "Option::is_none")]
    pub timing: Option<i64>,
    /// Provider usage verbatim, on the last assistant message of a step. The legacy all-`null`
    /// placeholder reads as `None`.
    #[serde(default, rename = "_usage", skip_serializing_if = "Option::is_none", deserialize_with = "read_usage")]
    pub usage: Option<Value>,
    /// agw: on a user message a run took as a steer (`request.steer`), the live `steerId`.
    /// Absent on every other message (and in files written before steers existed).
    #[serde(default, rename = "_steerId", skip_serializing_if = "Option::is_none")]
    pub steer_id: Option<String>,
    /// agw: the `requestId` of the steer request, when it had one (so a replayed
    /// `request.steer` equals the live one).
    #[serde(default, rename = "_requestId", skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// agw (issue 35): on an assistant content message, the citations the model made in it, in
    /// order (each placed by its `offset` into the text). A replay gives them as
    /// `content.citation` after the message's `content.snapshot`.
    #[serde(default, rename = "_citations", skip_serializing_if = "Option::is_none")]
    pub citations: Option<Vec<crate::citation::Citation>>,
    /// agw (issue 36): on an assistant content message a guard withdrew (`content.revoke`), why.
    /// The text stays stored; a replay gives its snapshot and citations, and `content.revoke` at
    /// the end of its step (where the run stopped); the model is never sent it again.
    #[serde(default, rename = "_revoked", skip_serializing_if = "Option::is_none")]
    pub revoked: Option<crate::guard::Revocation>,
}

impl StoredMessage {
    /// `{"role":"user","content":[part],"ts":…}`.
    pub fn user(text: impl Into<String>, ts: i64) -> Self {
        Self { role: ROLE_USER.to_owned(), content: Some(text.into()), ts: Some(ts), ..Self::default() }
    }

    /// A steered user message: `{"role":"user","content":[part],"ts":…,"_steerId":…}` plus
    /// `_requestId` when the steer request had one. `ts` is the time of its `request.steer`.
    pub fn steer(text: impl Into<String>, ts: i64, steer_id: impl Into<String>, request_id: Option<String>) -> Self {
        Self { steer_id: Some(steer_id.into()), request_id, ..Self::user(text, ts) }
    }

    /// The live `steerId` of a user message the run took as a steer; `None` for the run's own
    /// query message and every non-user message.
    pub fn steer_id(&self) -> Option<&str> {
        if self.is_user() { self.steer_id.as_deref().filter(|id| !id.trim().is_empty()) } else { None }
    }

    /// Whether `role` is [`ROLE_USER`].
    pub fn is_user(&self) -> bool {
        self.role == ROLE_USER
    }

    /// Whether `role` is [`ROLE_ASSISTANT`].
    pub fn is_assistant(&self) -> bool {
        self.role == ROLE_ASSISTANT
    }

    /// Whether `role` is [`ROLE_TOOL`].
    pub fn is_tool(&self) -> bool {
        self.role == ROLE_TOOL
    }

    /// The content text, `""` when absent.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or_default()
    }

    /// Whether a guard withdrew this message's text (`_revoked`).
    pub fn is_revoked(&self) -> bool {
        self.revoked.is_some()
    }

    /// Non-empty reasoning text, if any.
    pub fn reasoning(&self) -> Option<&str> {
        self.reasoning_content.as_deref().filter(|t| !t.is_empty())
    }

    /// The tool calls, empty when absent.
    pub fn calls(&self) -> &[StoredToolCall] {
        self.tool_calls.as_deref().unwrap_or_default()
    }
}

/// `{"id","type","function":{"name","arguments"}}` inside `tool_calls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredToolCall {
    /// The call id as streamed (`toolId` / `actionId`); `""` when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    /// `function` in practice (absent reads as `function`).
    #[serde(default = "function_type", rename = "type", deserialize_with = "call_type")]
    pub call_type: String,
    /// The called function and its arguments.
    #[serde(default, deserialize_with = "nullable")]
    pub function: StoredFunction,
    /// Legacy V3: the binding id inside the call object. Never written by agw.
    #[serde(default, rename = "_toolId", skip_serializing_if = "Option::is_none")]
    pub legacy_tool_id: Option<String>,
    /// Legacy V3: the binding id inside the call object. Never written by agw.
    #[serde(default, rename = "_actionId", skip_serializing_if = "Option::is_none")]
    pub legacy_action_id: Option<String>,
}

impl StoredToolCall {
    /// A call as agw writes it: no legacy call-level ids.
    pub fn new(
        id: impl Into<String>,
        call_type: impl Into<String>,
        name: impl Into<String>,
        arguments: String,
    ) -> Self {
        Self {
            id: id.into(),
            call_type: call_type.into(),
            function: StoredFunction { name: name.into(), arguments },
            legacy_tool_id: None,
            legacy_action_id: None,
        }
    }
}

/// `{"name","arguments"}`; `arguments` is the raw JSON text the model streamed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredFunction {
    /// The function name; `""` when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The raw argument text; `""` when absent.
    #[serde(default, deserialize_with = "lenient_text")]
    pub arguments: String,
}

fn function_type() -> String {
    "function".to_owned()
}

fn call_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|t| !t.trim().is_empty()).unwrap_or_else(function_type))
}

/// Argument text; a non-string JSON value (not written by anyone, but cheap to accept) is kept
/// as its compact JSON text.
fn lenient_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => String::new(),
        Value::String(s) => s,
        other => other.to_string(),
    })
}

#[derive(Serialize)]
struct Part<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

fn write_parts<S: Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    let text = text.as_deref().unwrap_or_default();
    [Part { kind: "text", text }].serialize(s)
}

/// Parts array (every part's `text` concatenated; parts without text skipped), plain string, or
/// `null`.
fn read_parts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Array(parts) if !parts.is_empty() => Some(
            parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.as_str()),
                    other => other.get("text").and_then(Value::as_str),
                })
                .collect(),
        ),
        _ => None,
    })
}

/// `null` and the legacy `{"input_tokens":null,"output_tokens":null,"total_tokens":null}`
/// placeholder (every value `null`) mean "no usage".
fn read_usage<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => None,
        Value::Object(map) if map.values().all(Value::is_null) => None,
        other => Some(other),
    })
}
