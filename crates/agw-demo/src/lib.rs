//! agw-demo — the embedded offline demo model (provider `demo`, model `agw-demo`) and the demo
//! agents bundled with agw: deterministic, no network.
//!
//! Owns: [`DemoProvider`], a [`ChatProvider`] that decides its reply from the request alone and
//! streams it like a model would; the bundled demo agent files ([`bundled`]). It knows the tool
//! and skill names it uses only through the crates that own them (plan tools from `agw-modes`,
//! `_skill_run_script_` from `agw-skills`).
//!
//! Must never: reach the network, read files, or be used as a silent fallback for a provider
//! that is not configured (the server registers it only under the `demo` key).
//!
//! ```
//! use agw_demo::DemoProvider;
//! use agw_llm::{ChatMessage, ChatProvider, ChatRequest, LlmDelta};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let request = ChatRequest {
//!     provider_key: "demo".into(),
//!     model: "agw-demo".into(),
//!     messages: vec![ChatMessage::user("What is carbon?")],
//!     tools: vec![],
//!     tool_choice: None,
//!     reasoning: Default::default(),
//!     temperature: None,
//!     top_p: None,
//!     max_tokens: None,
//!     prompt_cache: Default::default(),
//!     response_format: None,
//! };
//! // Same request, same reply: the whole stream is known before it is sent.
//! let deltas = agw_demo::script(&request);
//! assert!(matches!(&deltas[0], LlmDelta::Content { text } if text.starts_with("You asked")));
//! # });
//! ```
//!
//! It lets the README's first command produce a real streamed run without any provider
//! configured, and tells the user how to configure one. The reply is decided by
//! [`plan_turn`] from the request alone, then streamed in small chunks with a fixed delay so
//! the output looks and times like a model's. To teach it new behaviour (e.g. calling tools
//! when the request offers some), extend [`DemoTurn`] and [`plan_turn`]; streaming stays as is.
//! PLAN_EXECUTE turns (plan, task rounds, summary) are recognised first (`demo/plan.rs`); skill
//! scripts (`_skill_run_script_`, `demo/skills.rs`) are run before any other tool is considered.

#![forbid(unsafe_code)]
use std::collections::VecDeque;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use agw_llm::request::ChatMessage;

pub mod bundled;
mod citations;
mod images;
mod plan;
mod skills;
mod structured;
mod team;
mod tools;
use agw_llm::{CallOptions, ChatProvider, ChatRequest, DeltaStream, LlmDelta, LlmError};
pub use tools::DemoToolCall;

/// Provider key the registry uses for the demo model.
pub const DEMO_PROVIDER_KEY: &str = "demo";
/// Model name of the demo model.
pub const DEMO_MODEL: &str = "agw-demo";
/// Default pause between two streamed text chunks.
pub const DEFAULT_CHUNK_DELAY: Duration = Duration::from_millis(40);

const REASONING_WORDS_PER_CHUNK: usize = 2;
const ANSWER_WORDS_PER_CHUNK: usize = 3;
/// Longest quote of the user's question in the reply (characters).
const MAX_QUOTE_CHARS: usize = 160;

/// The embedded demo model.
#[derive(Debug, Clone)]
pub struct DemoProvider {
    chunk_delay: Duration,
}

impl Default for DemoProvider {
    fn default() -> Self {
        Self { chunk_delay: DEFAULT_CHUNK_DELAY }
    }
}

impl DemoProvider {
    /// The demo model as the server registers it: [`DEFAULT_CHUNK_DELAY`] between text chunks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Same model, another pause between text chunks (tests use zero or a few ms).
    pub fn with_chunk_delay(chunk_delay: Duration) -> Self {
        Self { chunk_delay }
    }

    /// The pause between two streamed text chunks.
    pub fn chunk_delay(&self) -> Duration {
        self.chunk_delay
    }
}

/// What the demo model answers to one request, before it is cut into chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoTurn {
    /// Streamed as reasoning first, only when the request enables reasoning.
    pub reasoning: Option<String>,
    /// The answer text, streamed a few words per chunk.
    pub content: String,
    /// Streamed after the content: a first fragment with id and name and `""` arguments, then
    /// the arguments in two pieces (the shape OpenAI streams).
    pub tool_call: Option<DemoToolCall>,
    /// `tool_calls` when the turn calls a tool, else `stop`.
    pub finish_reason: &'static str,
}

/// Decides the reply from the request (deterministic: same request, same reply).
pub fn plan_turn(request: &ChatRequest) -> DemoTurn {
    if let Some(turn) = plan::turn(request) {
        return turn;
    }
    let question = last_user_message(request).map(quote).unwrap_or_else(|| "(an empty message)".to_owned());
    // Skill scripts first: their arguments come from the question, not from the tool's schema.
    if let Some(call) = last_user_message(request).and_then(|message| skills::next_call(request, message)) {
        let reasoning = request.reasoning.enabled.then(|| {
            format!("The user wrote \"{question}\". A skill in my catalog can work this out; I will run its script.")
        });
        let content = format!("Let me run a skill script with `{}` first.", call.name);
        return DemoTurn { reasoning, content, tool_call: Some(call), finish_reason: "tool_calls" };
    }
    if let Some(turn) = skills::answer(request, &question) {
        return turn;
    }
    if let Some(turn) = team::turn(request, &question) {
        return turn;
    }
    if let Some(call) = tools::next_call(request, &question) {
        let reasoning = request.reasoning.enabled.then(|| {
            format!("The user wrote \"{question}\". The `{}` tool can help; I will call it first.", call.name)
        });
        let content = format!("Let me call `{}` first.", call.name);
        return DemoTurn { reasoning, content, tool_call: Some(call), finish_reason: "tool_calls" };
    }
    let results = tools::results(request);
    // Structured output: the answer is JSON of the requested schema.
    if let Some(content) = structured::answer(request, &results) {
        let reasoning = request.reasoning.enabled.then(|| "The answer must be JSON of the given schema.".to_owned());
        return DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" };
    }
    if !results.is_empty() {
        return answer_from_results(request, &question, &results);
    }
    let reasoning = request.reasoning.enabled.then(|| {
        format!(
            "The user wrote \"{question}\". I am the offline demo model, so I cannot really answer; \
             I will echo the question and explain how to connect a real model."
        )
    });
    let content = format!(
        "You asked: \"{question}\"\n\n\
         This reply comes from agw's offline demo model (`{DEMO_MODEL}`): no real model was called, \
         so I can only echo your question. To get real answers, configure an OpenAI-compatible \
         provider with the environment variables `AGENT_PROVIDERS_<KEY>_BASE_URL`, \
         `AGENT_PROVIDERS_<KEY>_API_KEY` and `AGENT_PROVIDERS_<KEY>_MODEL` (for example \
         `<KEY>` = `OPENAI`), then set the agent's `modelConfig.providerKey` to that key."
    );
    DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" }
}

/// The answer after tool results came back: what each tool said, plus a ```viewport block when
/// the tool's after-call hint asks for one.
fn answer_from_results(request: &ChatRequest, question: &str, results: &[(&str, &str)]) -> DemoTurn {
    let reasoning = request
        .reasoning
        .enabled
        .then(|| format!("I have {} tool result(s) for \"{question}\"; I will summarise them.", results.len()));
    if let Some(content) = citations::answer(request, results) {
        return DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" };
    }
    if let Some(content) = images::answer(results) {
        return DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" };
    }
    let mut content = String::from("Here is what I found (offline demo model, answering from the tool results):\n");
    for (name, result) in results {
        let summary = match serde_json::from_str::<serde_json::Value>(result) {
            Ok(serde_json::Value::Object(map)) => map
                .iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .map(|(k, v)| format!("{k}: {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                .collect::<Vec<_>>()
                .join(", "),
            _ => quote(result),
        };
        content.push_str(&format!("\n- `{name}` → {summary}"));
        if let Some((kind, key)) = tools::viewport_hint(request, name) {
            content.push_str(&format!("\n\n```viewport\ntype={kind}, key={key}\n{result}\n```"));
        }
    }
    DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" }
}

/// Every delta the demo model streams for `request`, in order.
pub fn script(request: &ChatRequest) -> Vec<LlmDelta> {
    let turn = plan_turn(request);
    let mut deltas = Vec::new();
    if let Some(reasoning) = &turn.reasoning {
        deltas.extend(
            chunk_words(reasoning, REASONING_WORDS_PER_CHUNK).into_iter().map(|text| LlmDelta::Reasoning { text }),
        );
    }
    deltas
        .extend(chunk_words(&turn.content, ANSWER_WORDS_PER_CHUNK).into_iter().map(|text| LlmDelta::Content { text }));
    if let Some(call) = &turn.tool_call {
        let split = call.arguments.len() / 2;
        let split = (split..=call.arguments.len()).find(|i| call.arguments.is_char_boundary(*i)).unwrap_or(0);
        let fragment = |id: Option<&str>, name: Option<&str>, arguments: &str| {
            LlmDelta::ToolCall(agw_llm::ToolCallFragment {
                index: Some(0),
                id: id.map(str::to_owned),
                call_type: id.map(|_| "function".to_owned()),
                name: name.map(str::to_owned),
                arguments: arguments.to_owned(),
            })
        };
        deltas.push(fragment(Some(&call.id), Some(&call.name), ""));
        deltas.push(fragment(None, None, &call.arguments[..split]));
        deltas.push(fragment(None, None, &call.arguments[split..]));
    }
    deltas.push(LlmDelta::Finish { reason: turn.finish_reason.to_owned() });
    let prompt_tokens: usize = request.messages.iter().map(|m| estimate_tokens(message_text(m)) + 4).sum();
    let completion_tokens =
        estimate_tokens(&turn.content) + turn.reasoning.as_deref().map(estimate_tokens).unwrap_or(0);
    deltas.push(LlmDelta::Usage {
        usage: json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }),
    });
    deltas
}

impl ChatProvider for DemoProvider {
    fn stream(&self, request: ChatRequest, options: CallOptions) -> BoxFuture<'static, Result<DeltaStream, LlmError>> {
        let deltas: VecDeque<LlmDelta> = script(&request).into();
        let delay = self.chunk_delay;
        tracing::debug!(stage = %options.stage, run_id = %options.run_id, deltas = deltas.len(), "demo model streaming");
        Box::pin(async move {
            // Pause before every text chunk but the first; finish and usage follow the last
            // text chunk at once, as a real provider's final chunks do. Dropping the stream
            // drops the pending sleep, so cancellation is immediate.
            let stream = futures::stream::unfold((deltas, true), move |(mut deltas, first)| async move {
                let delta = deltas.pop_front()?;
                let is_text = matches!(delta, LlmDelta::Reasoning { .. } | LlmDelta::Content { .. });
                if is_text && !first && !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Some((Ok(delta), (deltas, false)))
            });
            Ok(Box::pin(stream) as DeltaStream)
        })
    }
}

fn last_user_message(request: &ChatRequest) -> Option<&str> {
    request.messages.iter().rev().find_map(|m| match m {
        ChatMessage::User { content, .. } if !content.trim().is_empty() => Some(content.as_str()),
        _ => None,
    })
}

/// The question on one line, shortened for quoting.
fn quote(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MAX_QUOTE_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(MAX_QUOTE_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn message_text(message: &ChatMessage) -> &str {
    match message {
        ChatMessage::System { content }
        | ChatMessage::User { content, .. }
        | ChatMessage::Assistant { content, .. }
        | ChatMessage::Tool { content, .. } => content,
    }
}

/// Roughly four characters per token, like the usual rule of thumb for English.
fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Cuts `text` into pieces of `words` words; each piece keeps the whitespace that follows its
/// words, so the pieces concatenate back to `text` exactly.
fn chunk_words(text: &str, words: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut words_in_current = 0;
    let mut previous_was_space = true;
    for ch in text.chars() {
        let is_space = ch.is_whitespace();
        if !is_space && previous_was_space {
            // A new word starts: close the piece if it is full.
            if words_in_current == words.max(1) {
                pieces.push(std::mem::take(&mut current));
                words_in_current = 0;
            }
            words_in_current += 1;
        }
        current.push(ch);
        previous_was_space = is_space;
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_concatenate_back() {
        let text = "You asked: \"hi there\"\n\nThis is  a test.";
        let pieces = chunk_words(text, 3);
        assert_eq!(pieces.concat(), text);
        assert_eq!(pieces[0], "You asked: \"hi ");
        assert!(pieces.iter().all(|p| !p.is_empty()));
        assert_eq!(chunk_words("", 3), Vec::<String>::new());
    }

    #[test]
    fn quote_is_one_line_and_bounded() {
        assert_eq!(quote("a\n b"), "a b");
        assert_eq!(quote(&"x ".repeat(200)).chars().count(), MAX_QUOTE_CHARS);
    }
}
