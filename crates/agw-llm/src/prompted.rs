//! Tool calling for models without native function calling ("prompted" tool calling).
//!
//! Small local models served without a tool-call template (llama.cpp's `llama-server`, Ollama)
//! ignore `tools[]` and have no `tool` role. For them the tools travel as text, in the marker
//! family of Qwen-Agent's function-calling prompt (which Qwen models were trained on):
//!
//! ```text
//! ✿FUNCTION✿: get_weather
//! ✿ARGS✿: {"city": "Tokyo"}
//! ```
//!
//! is a call the model writes; the result comes back in the next user message as
//!
//! ```text
//! ✿RESULT✿: {"temperature": 21}
//! ```
//!
//! Two halves, both provider-neutral:
//!
//! * [`prompt_request`] rewrites a [`ChatRequest`]: the tool definitions (and a required tool
//!   choice, as an instruction) go into the system prompt, `tools` / `tool_choice` are cleared,
//!   earlier assistant calls become assistant text in the same format and tool results become
//!   user text, consecutive messages of one role are joined (chat templates of small models
//!   often insist on alternating roles).
//! * [`parse_calls`] wraps the provider's [`DeltaStream`](crate::DeltaStream): answer text
//!   passes on as content, the markers never do; calls become
//!   [`LlmDelta::ToolCall`](crate::LlmDelta::ToolCall) fragments as they stream. A marker split
//!   across chunks is handled by holding back only a tail that could still become one (at most
//!   11 bytes, and only when it starts with `✿`). [`CallParser`] is the pure core.
//!   [`strip_calls`] does the same for a reply that offered no tools: a call written anyway
//!   ends the answer.
//!
//! A call the model got wrong (no name, arguments that are not a JSON object) still becomes a
//! call; [`check_call`] says what is wrong with it, in words meant for the model, so the caller
//! can answer it with an error the model can correct.
//!
//! The exact format, and what is held back or dropped, is documented in `docs/models.md`
//! ("Tool calling for models without native function calling").

mod parse;
mod stream;

use serde_json::Value;

use crate::{ChatMessage, ChatRequest, ToolCallMessage, ToolChoice, ToolSpec};

pub use parse::CallParser;
pub use stream::{parse_calls, strip_calls};

/// Starts a call: `✿FUNCTION✿: <tool name>`.
pub const FUNCTION: &str = "✿FUNCTION✿";
/// Starts a call's arguments: `✿ARGS✿: <JSON object>`.
pub const ARGS: &str = "✿ARGS✿";
/// Starts a tool result (agw writes it; a model that writes it is making a result up, so its
/// answer ends there).
pub const RESULT: &str = "✿RESULT✿";
/// Qwen-Agent's "reply based on the results" marker: dropped at the start of an answer, and
/// the end of the answer after a call.
pub const RETURN: &str = "✿RETURN✿";

/// Every marker; each starts with `✿`, which nothing else needs to hold back.
pub(crate) const MARKERS: [&str; 4] = [FUNCTION, ARGS, RESULT, RETURN];

/// The name given to a call the model wrote without one (`✿ARGS✿` with no `✿FUNCTION✿` line,
/// or an empty name), so that it still gets a result telling the model what went wrong. No
/// registered tool can have it: tool names have no spaces or parentheses.
pub const NO_NAME: &str = "(no name)";

/// What is wrong with a call the model wrote ([`check_call`]). The messages are written for the
/// model, which reads them in the call's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallProblem {
    /// The call named no tool.
    #[error("the call names no tool. Write `✿FUNCTION✿: <tool name>` on the line before `✿ARGS✿`.")]
    NoName,
    /// The arguments are not JSON.
    #[error(
        "the arguments are not valid JSON ({reason}). Call the tool again with its arguments as one JSON object on the `✿ARGS✿:` line, e.g. ✿ARGS✿: {{\"name\": \"value\"}}."
    )]
    NotJson {
        /// The JSON parser's message.
        reason: String,
    },
    /// The arguments are JSON, but not an object.
    #[error(
        "the arguments are {found}, not a JSON object. Call the tool again with its arguments as one JSON object on the `✿ARGS✿:` line, e.g. ✿ARGS✿: {{\"name\": \"value\"}}."
    )]
    NotObject {
        /// What they are instead (`an array`, `a string`, …).
        found: &'static str,
    },
}

/// Whether a call parsed from a prompted answer can run: it names a tool, and its arguments are
/// a JSON object or absent (a tool without parameters is called with `✿ARGS✿: {}` or no
/// `✿ARGS✿` line at all).
pub fn check_call(name: &str, arguments: &str) -> Result<(), CallProblem> {
    if name.trim().is_empty() || name == NO_NAME {
        return Err(CallProblem::NoName);
    }
    if arguments.trim().is_empty() {
        return Ok(());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(_)) => Ok(()),
        Ok(other) => Err(CallProblem::NotObject { found: kind_of(&other) }),
        Err(e) => Err(CallProblem::NotJson { reason: e.to_string() }),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Told when the conversation holds calls but this reply may not make any (the forced final
/// answer of REACT, a summary): small models otherwise imitate the calls they see.
const NO_TOOLS_NOW: &str = "# Tools\n\nYou cannot call tools in this reply. The ✿FUNCTION✿ / ✿ARGS✿ / ✿RESULT✿ lines above are earlier tool calls and their results: answer in plain text, without these markers.";

/// `request` for a model without native function calling: its tools in the system prompt, its
/// transcript in text. See the module documentation.
pub fn prompt_request(mut request: ChatRequest) -> ChatRequest {
    let offered = request.tool_choice.is_some() && !request.tools.is_empty();
    let has_calls = request.messages.iter().any(|m| {
        matches!(m, ChatMessage::Tool { .. })
            || matches!(m, ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty())
    });
    let section = if offered {
        Some(tools_section(&request.tools, request.tool_choice))
    } else {
        has_calls.then(|| NO_TOOLS_NOW.to_owned())
    };
    let mut messages = text_transcript(std::mem::take(&mut request.messages));
    if let Some(section) = section {
        match messages.first_mut() {
            Some(ChatMessage::System { content }) if content.trim().is_empty() => *content = section,
            Some(ChatMessage::System { content }) => {
                content.push_str("\n\n");
                content.push_str(&section);
            }
            _ => messages.insert(0, ChatMessage::System { content: section }),
        }
    }
    request.messages = messages;
    request.tools = Vec::new();
    request.tool_choice = None;
    request
}

/// The system prompt's section for `tools` (sorted by name, so the prompt prefix is stable).
fn tools_section(tools: &[ToolSpec], choice: Option<ToolChoice>) -> String {
    let mut sorted: Vec<&ToolSpec> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::from(
        "# Tools\n\nYou can call the tools below. Each has a name, what it does, and the JSON Schema of its arguments.\n",
    );
    for tool in &sorted {
        text.push_str("\n## ");
        text.push_str(&tool.name);
        text.push('\n');
        let description = tool.description.trim();
        if !description.is_empty() {
            text.push_str(description);
            text.push('\n');
        }
        let parameters = if tool.parameters.is_null() {
            serde_json::json!({"type": "object", "properties": {}})
        } else {
            tool.parameters.clone()
        };
        text.push_str("Arguments: ");
        text.push_str(&parameters.to_string());
        text.push('\n');
    }
    let names: Vec<&str> = sorted.iter().map(|t| t.name.as_str()).collect();
    text.push_str(&format!(
        "\n## How to call a tool\n\n\
         To call a tool, write these two lines:\n\n\
         {FUNCTION}: the tool's name, one of [{names}]\n\
         {ARGS}: its arguments, as one JSON object on one line\n\n\
         To call several tools, write one such pair for each call. Write nothing after your calls: \
         stop there. The results come back in the next message, one line for each call in the same order:\n\n\
         {RESULT}: what the tool returned\n\n\
         Never write {RESULT} yourself. When you have what you need, answer in plain text without these markers.",
        names = names.join(", ")
    ));
    if choice == Some(ToolChoice::Required) {
        match names.as_slice() {
            [only] => text.push_str(&format!("\n\nIn this reply you must call the tool {only}.")),
            _ => text.push_str("\n\nIn this reply you must call at least one tool."),
        }
    }
    text
}

/// The transcript without tool roles: an assistant's calls become its text, each tool result a
/// user message, and consecutive messages of one role (other than system) are joined.
fn text_transcript(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    for message in messages {
        let message = match message {
            ChatMessage::Assistant { content, tool_calls } if !tool_calls.is_empty() => {
                let mut text = content;
                for call in &tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&call_text(call));
                }
                ChatMessage::Assistant { content: text, tool_calls: Vec::new() }
            }
            ChatMessage::Tool { content, .. } => ChatMessage::user(format!("{RESULT}: {content}")),
            other => other,
        };
        match (out.last_mut(), message) {
            (
                Some(ChatMessage::User { content: last, attachments: kept }),
                ChatMessage::User { content, attachments },
            ) => {
                join(last, &content);
                kept.extend(attachments);
            }
            (Some(ChatMessage::Assistant { content: last, .. }), ChatMessage::Assistant { content, .. }) => {
                join(last, &content)
            }
            (_, message) => out.push(message),
        }
    }
    out
}

/// One call as the model writes it (the arguments as they were sent).
pub fn call_text(call: &ToolCallMessage) -> String {
    format!("{FUNCTION}: {}\n{ARGS}: {}", call.name, call.arguments)
}

/// `next` after `last`; result and call lines follow each other on the next line, other text
/// after a blank line.
fn join(last: &mut String, next: &str) {
    if next.is_empty() {
        return;
    }
    if !last.is_empty() {
        last.push_str(if next.starts_with('✿') { "\n" } else { "\n\n" });
    }
    last.push_str(next);
}

#[cfg(test)]
mod tests;
