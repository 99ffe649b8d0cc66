//! The outgoing Messages API request: URL rule and JSON body.
//!
//! Mapping decisions (also in `docs/compatibility.md`):
//! * every system message goes to the top-level `system` (joined with a blank line; omitted when
//!   blank) — the Messages API has no system role;
//! * assistant tool calls become `tool_use` blocks with the parsed `input` (arguments that are not
//!   a JSON object become `{}`); tool results become `tool_result` blocks in a `user` message;
//!   consecutive messages of one role are merged into one (the API requires alternation);
//! * empty text is never sent as a block (the API rejects empty text blocks); a message left
//!   without blocks is dropped;
//! * a message that is a single text block is sent with plain string `content`;
//! * reasoning → `thinking: {type: enabled, budget_tokens}`, with `max_tokens` raised above the
//!   budget. Thinking is left out when the call forces tool use (`tool_choice: any` is rejected
//!   with manual thinking) and when the tool-use loop in progress has an assistant turn whose
//!   signed thinking blocks are unknown (the API requires them back verbatim). With thinking on,
//!   `temperature`/`top_p` are not sent (the API only accepts their defaults then);
//! * prompt caching (on unless the agent turns it off): `cache_control` breakpoints on the last
//!   tool, the system prompt (then sent as one text block) and two in the conversation (see
//!   [`mark_conversation`]) — four, the API's maximum. Tools are always sorted by name, so the
//!   prefix does not change between calls.

use serde_json::{Map, Value, json};

use super::thinking::ThinkingCache;
use crate::request::{
    Attachment, AttachmentKind, AttachmentSource, ChatMessage, ChatRequest, ReasoningEffort, ToolChoice, ToolSpec,
};

/// `max_tokens` when the request sets none (the API requires the field).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// `POST` target for a configured base URL: `<base>/messages` when the trimmed, lower-cased base
/// ends with `/v1` or `/v1/`, else `<base>/v1/messages`.
pub fn messages_url(base_url: &str) -> String {
    let trimmed = base_url.trim();
    let without_slash = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if without_slash.to_ascii_lowercase().ends_with("/v1") {
        format!("{without_slash}/messages")
    } else {
        format!("{without_slash}/v1/messages")
    }
}

/// `budget_tokens` per reasoning effort.
pub fn thinking_budget(effort: ReasoningEffort) -> u32 {
    match effort {
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 4096,
        ReasoningEffort::High => 16384,
    }
}

/// The JSON body of one streaming call. `thinking` supplies the signed thinking blocks of
/// earlier tool-use turns (see [`ThinkingCache`]).
pub fn request_body(request: &ChatRequest, default_model: &str, thinking: &ThinkingCache) -> Value {
    let model = if request.model.trim().is_empty() { default_model } else { request.model.as_str() };
    let tools_offered = !request.tools.is_empty() && request.tool_choice.is_some();
    let forced = tools_offered && request.tool_choice == Some(ToolChoice::Required);
    let (messages, loop_without_thinking) = wire_messages(&request.messages, thinking);
    let budget = (request.reasoning.enabled && !forced && !loop_without_thinking)
        .then(|| thinking_budget(request.reasoning.effort));

    let mut max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if let Some(budget) = budget
        && max_tokens <= budget
    {
        max_tokens = budget.saturating_add(DEFAULT_MAX_TOKENS);
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::System { content } if !content.trim().is_empty() => Some(content.as_str()),
            _ => None,
        })
        .collect();
    let cache = request.prompt_cache.enabled;
    if !system.is_empty() {
        let system = system.join("\n\n");
        let system =
            if cache { json!([{"type": "text", "text": system, "cache_control": ephemeral()}]) } else { json!(system) };
        body.insert("system".into(), system);
    }
    let mut messages = messages;
    if cache {
        mark_conversation(&mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if tools_offered {
        let mut tools = wire_tools(&request.tools);
        if cache && let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), ephemeral());
        }
        body.insert("tools".into(), Value::Array(tools));
        let choice = if forced { "any" } else { "auto" };
        body.insert("tool_choice".into(), json!({"type": choice}));
    }
    if let Some(budget) = budget {
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
    } else {
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(top_p) = request.top_p {
            body.insert("top_p".into(), json!(top_p));
        }
    }
    Value::Object(body)
}

/// The cache breakpoint marker (five minutes, the API's default lifetime).
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Puts the conversation's two cache breakpoints: on the last message (this call's whole prompt,
/// read back by the next call of the conversation) and on the message before the last assistant
/// turn — where the previous call's prompt ended — so that call's cache entry is found however
/// many blocks the last turn added (the API looks back only 20 blocks from a breakpoint). With
/// the tools' and the system prompt's, that makes four, the API's maximum.
fn mark_conversation(messages: &mut [Value]) {
    let last = messages.len().checked_sub(1);
    let previous = messages.iter().rposition(|m| m["role"] == "assistant").and_then(|i| i.checked_sub(1));
    for index in [previous, last].into_iter().flatten() {
        if Some(index) == previous && previous == last {
            continue;
        }
        mark_message(&mut messages[index]);
    }
}

/// Marks a message's last block that may carry a breakpoint (not a thinking block), turning
/// plain string content into one text block first.
fn mark_message(message: &mut Value) {
    let Some(content) = message.get_mut("content") else { return };
    if let Value::String(text) = content {
        *content = json!([{"type": "text", "text": std::mem::take(text)}]);
    }
    let Value::Array(blocks) = content else { return };
    let markable =
        blocks.iter_mut().rev().find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
    if let Some(Value::Object(block)) = markable {
        block.insert("cache_control".into(), ephemeral());
    }
}

/// The `messages` array, and whether the tool-use loop in progress (the assistant turns after
/// the last user message) contains a tool-calling turn whose thinking blocks are unknown.
fn wire_messages(messages: &[ChatMessage], thinking: &ThinkingCache) -> (Vec<Value>, bool) {
    let last_user = messages.iter().rposition(|m| matches!(m, ChatMessage::User { .. }));
    let mut loop_without_thinking = false;
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (position, message) in messages.iter().enumerate() {
        let (role, blocks) = match message {
            ChatMessage::System { .. } => continue,
            ChatMessage::User { content, attachments } => {
                // Images and documents before the text, as Anthropic recommends.
                let mut blocks: Vec<Value> = attachments.iter().map(attachment_block).collect();
                blocks.extend(text_block(content));
                ("user", blocks)
            }
            ChatMessage::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(first) = tool_calls.first() {
                    match thinking.get(&first.id) {
                        Some(signed) => blocks.extend(signed),
                        None => loop_without_thinking |= last_user.is_none_or(|user| position > user),
                    }
                }
                blocks.extend(text_block(content));
                blocks.extend(tool_calls.iter().map(|call| {
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(&call.arguments)})
                }));
                ("assistant", blocks)
            }
            ChatMessage::Tool { tool_call_id, content, .. } => {
                ("user", vec![json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content})])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => {
                // Tool results go before any text of the same user turn (the API wants them first).
                if role == "user" && blocks.iter().all(is_tool_result) {
                    let at = last_blocks.iter().take_while(|b| is_tool_result(b)).count();
                    last_blocks.splice(at..at, blocks);
                } else {
                    last_blocks.extend(blocks);
                }
            }
            _ => out.push((role, blocks)),
        }
    }
    let messages = out
        .into_iter()
        .map(|(role, mut blocks)| {
            let content = match blocks.as_slice() {
                [single] if single["type"] == "text" => single["text"].clone(),
                _ => Value::Array(std::mem::take(&mut blocks)),
            };
            json!({"role": role, "content": content})
        })
        .collect();
    (messages, loop_without_thinking)
}

fn is_tool_result(block: &Value) -> bool {
    block["type"] == "tool_result"
}

/// An image (`image`) or a file (`document`) block.
fn attachment_block(attachment: &Attachment) -> Value {
    let media_type = attachment.media_type.as_str();
    let mut block = match (&attachment.source, attachment.kind()) {
        (AttachmentSource::Url(url), AttachmentKind::Image) => {
            json!({"type": "image", "source": {"type": "url", "url": url}})
        }
        (AttachmentSource::Url(url), _) => json!({"type": "document", "source": {"type": "url", "url": url}}),
        (AttachmentSource::Base64(data), AttachmentKind::Image) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        (AttachmentSource::Base64(data), _) => {
            json!({"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        // Plain-text documents are `text/plain` whatever the file's text type.
        (AttachmentSource::Text(text), _) => {
            json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}})
        }
    };
    if let (Some(name), false) = (&attachment.name, attachment.kind() == AttachmentKind::Image) {
        block["title"] = json!(name);
    }
    block
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// The arguments text as the `input` object (`{}` when blank, not JSON, or not an object).
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<Value> {
    let mut sorted: Vec<&ToolSpec> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted
        .into_iter()
        .map(|tool| {
            let mut wire = Map::new();
            wire.insert("name".into(), json!(tool.name));
            if !tool.description.trim().is_empty() {
                wire.insert("description".into(), json!(tool.description));
            }
            let schema = if tool.parameters.is_object() {
                tool.parameters.clone()
            } else {
                json!({"type": "object", "properties": {}})
            };
            wire.insert("input_schema".into(), schema);
            Value::Object(wire)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ReasoningSetting, ToolCallMessage};

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            provider_key: "claude".into(),
            model: "claude-x".into(),
            messages,
            tools: vec![],
            tool_choice: None,
            reasoning: ReasoningSetting::default(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: Default::default(),
            response_format: None,
        }
    }

    fn call(id: &str) -> ToolCallMessage {
        ToolCallMessage { id: id.into(), call_type: "function".into(), name: "f".into(), arguments: "{\"a\":1}".into() }
    }

    #[test]
    fn url_rule() {
        assert_eq!(messages_url("https://api.anthropic.com"), "https://api.anthropic.com/v1/messages");
        assert_eq!(messages_url("https://api.anthropic.com/"), "https://api.anthropic.com/v1/messages");
        assert_eq!(messages_url(" https://proxy/anthropic/V1/ "), "https://proxy/anthropic/V1/messages");
    }

    #[test]
    fn minimal_body() {
        let body = request_body(
            &request(vec![ChatMessage::System { content: " ".into() }, ChatMessage::user("hi")]),
            "d",
            &ThinkingCache::default(),
        );
        assert_eq!(
            body.to_string(),
            r#"{"model":"claude-x","max_tokens":4096,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#
        );
    }

    /// Where a body's breakpoints are: `tools[i]`, `system`, `messages[i]` (its last marked block).
    fn breakpoints(body: &Value) -> Vec<String> {
        let marked = |v: &Value| v.get("cache_control").is_some();
        let mut out = Vec::new();
        for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
            if marked(tool) {
                out.push(format!("tools[{i}]"));
            }
        }
        if body["system"].as_array().is_some_and(|blocks| blocks.iter().any(marked)) {
            out.push("system".into());
        }
        for (i, message) in body["messages"].as_array().into_iter().flatten().enumerate() {
            if message["content"].as_array().is_some_and(|blocks| blocks.iter().any(marked)) {
                out.push(format!("messages[{i}]"));
            }
        }
        out
    }

    fn tool(name: &str) -> ToolSpec {
        ToolSpec { name: name.into(), description: String::new(), parameters: json!({"type": "object"}) }
    }

    #[test]
    fn prompt_caching_marks_tools_system_and_the_conversation() {
        let mut req = request(vec![
            ChatMessage::System { content: "You help.".into() },
            ChatMessage::user("q"),
            ChatMessage::Assistant { content: "Looking.".into(), tool_calls: vec![call("t1")] },
            ChatMessage::Tool { tool_call_id: "t1".into(), name: "f".into(), content: "r1".into() },
        ]);
        req.tools = vec![tool("zeta"), tool("alpha")];
        req.tool_choice = Some(ToolChoice::Auto);
        let plain = request_body(&req, "d", &ThinkingCache::default());
        assert!(breakpoints(&plain).is_empty(), "off unless asked for");
        assert_eq!(plain["system"], "You help.");

        req.prompt_cache = crate::request::PromptCache { enabled: true, key: None };
        let body = request_body(&req, "d", &ThinkingCache::default());
        // The last tool in name order, the system prompt, the message before the last assistant
        // turn (where the previous call ended) and the last message: four, the API's maximum.
        assert_eq!(breakpoints(&body), ["tools[1]", "system", "messages[0]", "messages[2]"]);
        assert_eq!(body["tools"][1]["name"], "zeta");
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            body["messages"][0]["content"],
            json!([{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
        assert!(body["messages"][2]["content"][0].get("cache_control").is_some());

        // A first call: one user message, no tools, no system: one breakpoint.
        let mut first = request(vec![ChatMessage::user("hi")]);
        first.prompt_cache.enabled = true;
        let body = request_body(&first, "d", &ThinkingCache::default());
        assert_eq!(breakpoints(&body), ["messages[0]"]);
        // Nothing to mark: no breakpoint, no empty block.
        let mut empty = request(vec![]);
        empty.prompt_cache.enabled = true;
        assert!(breakpoints(&request_body(&empty, "d", &ThinkingCache::default())).is_empty());
    }

    #[test]
    fn a_breakpoint_never_lands_on_a_thinking_block() {
        let mut message = json!({"role": "assistant", "content": [
            {"type": "text", "text": "a"}, {"type": "thinking", "thinking": "…", "signature": "s"}]});
        mark_message(&mut message);
        assert!(message["content"][0].get("cache_control").is_some());
        assert!(message["content"][1].get("cache_control").is_none());
        let mut only_thinking = json!({"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]});
        mark_message(&mut only_thinking);
        assert!(only_thinking["content"][0].get("cache_control").is_none());
    }

    #[test]
    fn tool_results_merge_and_go_first() {
        let body = request_body(
            &request(vec![
                ChatMessage::user("q"),
                ChatMessage::Assistant { content: String::new(), tool_calls: vec![call("t1"), call("t2")] },
                ChatMessage::Tool { tool_call_id: "t1".into(), name: "f".into(), content: "r1".into() },
                ChatMessage::Tool { tool_call_id: "t2".into(), name: "f".into(), content: "r2".into() },
                ChatMessage::user("more"),
            ]),
            "d",
            &ThinkingCache::default(),
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][0], json!({"type":"tool_use","id":"t1","name":"f","input":{"a":1}}));
        let user = &messages[2]["content"];
        assert_eq!(user[0]["tool_use_id"], "t1");
        assert_eq!(user[1]["tool_use_id"], "t2");
        assert_eq!(user[2], json!({"type":"text","text":"more"}));
    }

    #[test]
    fn thinking_budget_raises_max_tokens_and_drops_sampling() {
        let mut req = request(vec![ChatMessage::user("q")]);
        req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::High };
        req.temperature = Some(0.2);
        let body = request_body(&req, "d", &ThinkingCache::default());
        assert_eq!(body["thinking"], json!({"type":"enabled","budget_tokens":16384}));
        assert_eq!(body["max_tokens"], 16384 + 4096);
        assert!(body.get("temperature").is_none());
        req.max_tokens = Some(30000);
        assert_eq!(request_body(&req, "d", &ThinkingCache::default())["max_tokens"], 30000);
    }

    #[test]
    fn thinking_is_dropped_for_forced_tools_and_unknown_loop_thinking() {
        let mut req = request(vec![ChatMessage::user("q")]);
        req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::Low };
        req.tools = vec![ToolSpec { name: "f".into(), description: String::new(), parameters: Value::Null }];
        req.tool_choice = Some(ToolChoice::Required);
        let body = request_body(&req, "d", &ThinkingCache::default());
        assert_eq!(body["tool_choice"], json!({"type":"any"}));
        assert!(body.get("thinking").is_none());
        assert_eq!(body["tools"][0], json!({"name":"f","input_schema":{"type":"object","properties":{}}}));

        req.tool_choice = Some(ToolChoice::Auto);
        req.messages.push(ChatMessage::Assistant { content: String::new(), tool_calls: vec![call("t1")] });
        req.messages.push(ChatMessage::Tool { tool_call_id: "t1".into(), name: "f".into(), content: "r".into() });
        assert!(request_body(&req, "d", &ThinkingCache::default()).get("thinking").is_none());

        let cache = ThinkingCache::default();
        let signed = json!({"type":"thinking","thinking":"hm","signature":"sig"});
        cache.insert("t1", vec![signed.clone()]);
        let body = request_body(&req, "d", &cache);
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(body["messages"][1]["content"][0], signed);
    }
}
