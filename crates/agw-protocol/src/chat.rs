//! The provider-neutral chat request a mode builds for one model turn: the conversation
//! ([`ChatMessage`]), offered tools ([`ToolSpec`]) and call options. Providers turn it into their
//! wire body; the chat store rebuilds [`ChatMessage`]s from history. Plain data, no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation sent to the model (OpenAI chat shapes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// Instructions for the model; a blank one is not sent.
    System {
        /// The prompt text.
        content: String,
    },
    /// A user turn.
    User {
        /// The user's message text.
        content: String,
        /// Images and files sent with it, in order (docs/models.md "Images and files"); omitted
        /// when none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
    /// `content` is `""` when the turn only called tools.
    Assistant {
        /// The answer text of the turn.
        content: String,
        /// The calls the turn made, in order; omitted when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallMessage>,
    },
    /// The result of one tool call.
    Tool {
        /// The [`ToolCallMessage::id`] this answers.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// The tool's output as text.
        content: String,
    },
}

impl ChatMessage {
    /// A user turn of text alone.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage::User { content: content.into(), attachments: Vec::new() }
    }
}

/// An image or file a user turn carries, checked (`crate::attachment`) before it gets here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// What it is: `image/png`, `image/jpeg`, `image/gif`, `image/webp`, `application/pdf`, or
    /// text (`text/plain`, …).
    pub media_type: String,
    /// The file name the client gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The content itself, or where the provider fetches it.
    pub source: AttachmentSource,
}

impl Attachment {
    /// What kind of input it is for a provider.
    pub fn kind(&self) -> AttachmentKind {
        AttachmentKind::of(&self.media_type)
    }
}

/// Where an attachment's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttachmentSource {
    /// Standard base64 of the bytes (no `data:` prefix).
    Base64(String),
    /// An `https` URL the provider fetches (agw never does).
    Url(String),
    /// The text of a text file, decoded (UTF-8).
    Text(String),
}

/// The three kinds of input providers tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentKind {
    /// `image/*` (PNG, JPEG, GIF, WebP).
    Image,
    /// A PDF document.
    Pdf,
    /// A text file: every provider takes it, as text.
    Text,
}

impl AttachmentKind {
    /// The kind of `media_type` (anything not an image or a PDF is text).
    pub fn of(media_type: &str) -> Self {
        if media_type.starts_with("image/") {
            Self::Image
        } else if media_type == "application/pdf" {
            Self::Pdf
        } else {
            Self::Text
        }
    }

    /// `image`, `pdf` or `text`: how settings and errors spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Pdf => "pdf",
            Self::Text => "text",
        }
    }
}

/// Where one stored run begins in a run's history (the chat's earlier turns, as sent to the
/// model): context compaction summarises whole runs, so it needs their boundaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRun {
    /// The stored run; for the summary of a checkpoint, the last run it covers.
    pub run_id: String,
    /// Index of the run's first message in the history.
    pub start: usize,
}

/// The user turn that precedes a summary of older turns (context compaction): the summary
/// itself is the assistant's answer to it, so user and assistant turns keep alternating.
pub const SUMMARY_REQUEST: &str = "[Context compaction] The earlier part of this conversation was summarised to fit the context window. \
     Summarise it.";

/// The two messages that stand for older turns once they were summarised (or dropped):
/// [`SUMMARY_REQUEST`] and the summary.
pub fn summary_turn(summary: &str) -> [ChatMessage; 2] {
    [ChatMessage::user(SUMMARY_REQUEST), ChatMessage::Assistant { content: summary.to_owned(), tool_calls: Vec::new() }]
}

/// `{"id","type","function":{"name","arguments"}}` inside an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallMessage {
    /// The call id, unique within the run (the id a [`ChatMessage::Tool`] answers).
    pub id: String,
    /// The registry type (`function`, `action`, `frontend`); informational only — the
    /// OpenAI-compatible wire always says `function` (the reference's leak is a quirk).
    pub call_type: String,
    /// The function name.
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

/// A tool offered to the model (`tools[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The function name the model calls.
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
    /// The model may answer without calling a tool.
    Auto,
    /// The model must call at least one tool.
    Required,
}

/// How hard the model should think when reasoning is enabled (agent files spell it `LOW`,
/// `MEDIUM`, `HIGH`). Providers map it: OpenAI-compatible `reasoning.effort`, Anthropic a
/// thinking token budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum ReasoningEffort {
    /// Least reasoning.
    Low,
    /// The default.
    #[default]
    Medium,
    /// Most reasoning.
    High,
}

/// Reasoning switch for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ReasoningSetting {
    /// Whether the model is asked to reason in this call.
    pub enabled: bool,
    /// Only sent when `enabled`.
    pub effort: ReasoningEffort,
}

/// Everything one model turn needs; the provider turns it into its wire body
/// (`docs/contract/agent-definitions.md` §10.1). The default is an empty request to the
/// provider's default model with no options set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider key the agent named (used for per-provider switches such as
    /// `enable_thinking` for `bailian`).
    pub provider_key: String,
    /// The model name; blank means the provider's default model.
    pub model: String,
    /// Full message list including the system message (if any) first.
    pub messages: Vec<ChatMessage>,
    /// The tools offered in this call; none are sent when empty.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// `None` means NONE: `tools`, `tool_choice` and `parallel_tool_calls` are then not sent at
    /// all (§10.1). Ignored when `tools` is empty.
    pub tool_choice: Option<ToolChoice>,
    /// Reasoning switch and effort for this call.
    pub reasoning: ReasoningSetting,
    /// Sampling temperature; sent only when set (Anthropic drops it while thinking).
    pub temperature: Option<f64>,
    /// Nucleus-sampling `top_p`; sent only when set (Anthropic drops it while thinking).
    pub top_p: Option<f64>,
    /// Sent only when set (agw does not force the reference's 4096).
    pub max_tokens: Option<u32>,
    /// Prompt caching for this call (docs/models.md): off unless asked for.
    #[serde(default)]
    pub prompt_cache: PromptCache,
    /// The answer must be JSON of this shape (structured output, docs/models.md).
    /// OpenAI-compatible providers send it as `response_format` (`json_schema`); providers
    /// without a native mode never see it: the caller offers the schema as a tool instead
    /// (`agw_llm::structured`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
}

/// The JSON an answer must be: a named JSON Schema (structured output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A name for the shape: 1–64 of `A-Z a-z 0-9 _ -` (what OpenAI accepts).
    pub name: String,
    /// A JSON Schema whose root describes an object.
    pub schema: Value,
}

/// Prompt caching of one call. Providers that cache by prefix need a prefix that does not change
/// between calls: agw always sends tools sorted by name and the system prompt first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PromptCache {
    /// Anthropic: `cache_control` breakpoints on the tools, the system prompt and the
    /// conversation. OpenAI-compatible: the cache key below, where the provider takes one.
    pub enabled: bool,
    /// Routes calls of one conversation to the same cache (OpenAI's `prompt_cache_key`): a
    /// digest of the chat, never the chat id itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
