//! The provider-neutral chat request a mode builds for one model turn: the conversation
//! ([`ChatMessage`]), offered tools ([`ToolSpec`]) and call options. Providers turn it into their
//! wire body; the chat store rebuilds [`ChatMessage`]s from history. Plain data, no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation sent to the model (OpenAI chat shapes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    /// `content` is `""` when the turn only called tools.
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallMessage>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
    },
}

/// `{"id","type","function":{"name","arguments"}}` inside an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallMessage {
    pub id: String,
    /// The registry type (`function`, `action`, `frontend`); informational only — the
    /// OpenAI-compatible wire always says `function` (the reference's leak is a quirk).
    pub call_type: String,
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

/// A tool offered to the model (`tools[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    /// Omitted from the request when blank.
    pub description: String,
    /// JSON schema object.
    pub parameters: Value,
}

/// `tool_choice` as sent: only meaningful when `tools` is non-empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    Auto,
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum ReasoningEffort {
    Low,
    #[default]
    Medium,
    High,
}

/// Reasoning switch for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ReasoningSetting {
    pub enabled: bool,
    pub effort: ReasoningEffort,
}

/// Everything one model turn needs; the provider turns it into its wire body
/// (contract `agent-definitions.md` §10.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider key the agent named (used for per-provider switches such as
    /// `enable_thinking` for `bailian`).
    pub provider_key: String,
    pub model: String,
    /// Full message list including the system message (if any) first.
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// `None` means NONE: `tools`, `tool_choice` and `parallel_tool_calls` are then not sent at
    /// all (§10.1). Ignored when `tools` is empty.
    pub tool_choice: Option<ToolChoice>,
    pub reasoning: ReasoningSetting,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// Sent only when set (agw does not force the reference's 4096).
    pub max_tokens: Option<u32>,
}
