//! The outgoing request: URL rule and JSON body (`docs/contract/agent-definitions.md` §10.1).
//!
//! Key order is part of the contract: the top level follows the field order of `WireBody`,
//! messages the order of their `json!` literals. Both rely on serde_json's `preserve_order`
//! feature, which the workspace enables for every crate.

use serde::Serialize;
use serde_json::{Value, json};

use agw_protocol::attachment::data_url;

use crate::request::{
    Attachment, AttachmentKind, AttachmentSource, ChatMessage, ChatRequest, ReasoningEffort, ToolChoice, ToolSpec,
};

/// `POST` target for a configured base URL: `<base>/chat/completions` when the trimmed,
/// lower-cased base ends with `/v1` or `/v1/`, else `<base>/v1/chat/completions`.
pub fn chat_completions_url(base_url: &str) -> String {
    format!("{}/chat/completions", api_base(base_url))
}

/// The prefix async-openai puts in front of `/chat/completions` (no trailing slash).
pub(crate) fn api_base(base_url: &str) -> String {
    let trimmed = base_url.trim();
    let without_slash = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if without_slash.to_ascii_lowercase().ends_with("/v1") {
        without_slash.to_owned()
    } else {
        format!("{without_slash}/v1")
    }
}

/// The JSON body for one streaming call. `model` is the request's model, or the provider's
/// default when the request names none. `cache_key`: whether the provider takes
/// `prompt_cache_key` (sent only when the request caches and has a key).
pub fn request_body(request: &ChatRequest, default_model: &str, cache_key: bool) -> Value {
    let model = if request.model.trim().is_empty() { default_model } else { request.model.as_str() };
    let bailian = request.provider_key.eq_ignore_ascii_case("bailian");
    let tools_offered = !request.tools.is_empty() && request.tool_choice.is_some();
    let body = WireBody {
        model,
        stream: true,
        stream_options: StreamOptions { include_usage: true },
        messages: request.messages.iter().filter_map(wire_message).collect(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        top_p: request.top_p,
        enable_thinking: bailian.then_some(request.reasoning.enabled),
        reasoning: request.reasoning.enabled.then(|| WireReasoning { effort: effort_name(request.reasoning.effort) }),
        tools: tools_offered.then(|| wire_tools(&request.tools)),
        tool_choice: if tools_offered { request.tool_choice.map(choice_name) } else { None },
        parallel_tool_calls: tools_offered.then_some(false),
        response_format: request.response_format.as_ref().map(|format| WireResponseFormat {
            kind: "json_schema",
            json_schema: WireJsonSchema { name: &format.name, schema: &format.schema, strict: false },
        }),
        prompt_cache_key: if cache_key && request.prompt_cache.enabled {
            request.prompt_cache.key.as_deref()
        } else {
            None
        },
    };
    // Serialising plain structs of strings, numbers and `Value`s cannot fail.
    serde_json::to_value(&body).unwrap_or(Value::Null)
}

#[derive(Serialize)]
struct WireBody<'a> {
    model: &'a str,
    stream: bool,
    stream_options: StreamOptions,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_thinking: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<WireReasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
}

/// `{"type":"json_schema","json_schema":{"name","schema","strict":false}}`: not strict, since
/// OpenAI's strict mode refuses most schemas people write (every property required, no
/// `additionalProperties`); agw checks the answer against the schema itself.
#[derive(Serialize)]
struct WireResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: WireJsonSchema<'a>,
}

#[derive(Serialize)]
struct WireJsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireReasoning {
    effort: &'static str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: Value,
    strict: bool,
}

/// One message in its OpenAI shape; a blank system message is omitted (§10.1).
fn wire_message(message: &ChatMessage) -> Option<Value> {
    Some(match message {
        ChatMessage::System { content } if content.trim().is_empty() => return None,
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content, attachments } if attachments.is_empty() => {
            json!({"role": "user", "content": content})
        }
        ChatMessage::User { content, attachments } => {
            let mut parts: Vec<Value> = attachments.iter().map(attachment_part).collect();
            if !content.is_empty() {
                parts.push(json!({"type": "text", "text": content}));
            }
            json!({"role": "user", "content": parts})
        }
        ChatMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => {
            json!({"role": "assistant", "content": content})
        }
        ChatMessage::Assistant { content, tool_calls } => {
            // The wire type is always `function`: OpenAI-compatible APIs reject anything else.
            // (The reference leaks its registry type `action`/`frontend` here; agw does not.)
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        ChatMessage::Tool { tool_call_id, name, content } => json!({
            "role": "tool",
            "tool_call_id": tool_call_id,
            "name": name,
            "content": content,
        }),
    })
}

/// An image (`image_url`), a PDF (`file`) or a text file (a `text` part holding it).
fn attachment_part(attachment: &Attachment) -> Value {
    let media_type = attachment.media_type.as_str();
    match &attachment.source {
        AttachmentSource::Url(url) => json!({"type": "image_url", "image_url": {"url": url}}),
        AttachmentSource::Base64(data) if attachment.kind() == AttachmentKind::Image => {
            json!({"type": "image_url", "image_url": {"url": data_url(media_type, data)}})
        }
        AttachmentSource::Base64(data) => {
            let filename = attachment.name.as_deref().unwrap_or("document.pdf");
            json!({"type": "file", "file": {"filename": filename, "file_data": data_url(media_type, data)}})
        }
        AttachmentSource::Text(text) => {
            let name = attachment.name.as_deref().unwrap_or("file");
            json!({"type": "text", "text": format!("<file name=\"{name}\" type=\"{media_type}\">\n{text}\n</file>")})
        }
    }
}

fn wire_tools(tools: &[ToolSpec]) -> Vec<WireTool<'_>> {
    let mut sorted: Vec<&ToolSpec> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    sorted
        .into_iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: (!tool.description.trim().is_empty()).then_some(tool.description.as_str()),
                parameters: if tool.parameters.is_null() {
                    json!({"type": "object", "properties": {}, "additionalProperties": true})
                } else {
                    tool.parameters.clone()
                },
                strict: false,
            },
        })
        .collect()
}

fn effort_name(effort: ReasoningEffort) -> &'static str {
    match effort {
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    }
}

fn choice_name(choice: ToolChoice) -> &'static str {
    match choice {
        ToolChoice::Auto => "auto",
        ToolChoice::Required => "required",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ReasoningSetting, ToolCallMessage};

    fn request() -> ChatRequest {
        ChatRequest {
            provider_key: "openai".into(),
            model: "gpt-x".into(),
            messages: vec![ChatMessage::System { content: "  ".into() }, ChatMessage::user("hi")],
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

    #[test]
    fn url_rule() {
        assert_eq!(chat_completions_url("https://a.b"), "https://a.b/v1/chat/completions");
        assert_eq!(chat_completions_url("https://a.b/"), "https://a.b/v1/chat/completions");
        assert_eq!(chat_completions_url(" https://a.b/V1/ "), "https://a.b/V1/chat/completions");
        assert_eq!(
            chat_completions_url("https://dashscope.aliyuncs.com/compatible-mode/v1"),
            "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"
        );
        assert_eq!(chat_completions_url("https://x/v10"), "https://x/v10/v1/chat/completions");
    }

    #[test]
    fn minimal_body_has_only_required_keys_and_drops_blank_system() {
        let body = request_body(&request(), "default", false);
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#
        );
    }

    #[test]
    fn blank_model_falls_back_to_provider_default() {
        let mut req = request();
        req.model = " ".into();
        assert_eq!(request_body(&req, "qwen3-max", false)["model"], "qwen3-max");
    }

    #[test]
    fn tools_need_a_tool_choice() {
        let mut req = request();
        req.tools = vec![ToolSpec { name: "b".into(), description: String::new(), parameters: Value::Null }];
        let body = request_body(&req, "m", false);
        assert!(body.get("tools").is_none() && body.get("parallel_tool_calls").is_none());
        req.tool_choice = Some(ToolChoice::Auto);
        let body = request_body(&req, "m", false);
        assert_eq!(body["tools"][0]["function"]["parameters"]["additionalProperties"], true);
        assert!(body["tools"][0]["function"].get("description").is_none());
        assert_eq!(body["parallel_tool_calls"], false);
    }

    #[test]
    fn an_output_schema_is_sent_as_a_json_schema_response_format_after_the_tools() {
        let mut req = request();
        req.tools = vec![ToolSpec { name: "b".into(), description: String::new(), parameters: Value::Null }];
        req.tool_choice = Some(ToolChoice::Auto);
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        req.response_format = Some(crate::request::ResponseFormat { name: "weather".into(), schema: schema.clone() });
        let body = request_body(&req, "m", false);
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "weather", "schema": schema, "strict": false}})
        );
        let keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys[keys.len() - 1], "response_format", "after the tools: {keys:?}");
    }

    #[test]
    fn assistant_tool_calls_always_say_function() {
        let mut req = request();
        req.messages.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: "call_1".into(),
                call_type: "action".into(),
                name: "switch_theme".into(),
                arguments: "{}".into(),
            }],
        });
        let body = request_body(&req, "m", false);
        assert_eq!(
            body["messages"][1].to_string(),
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"switch_theme","arguments":"{}"}}]}"#
        );
    }

    #[test]
    fn the_cache_key_goes_only_to_providers_that_take_it() {
        let mut req = request();
        req.prompt_cache = crate::request::PromptCache { enabled: true, key: Some("agw-k1".into()) };
        assert_eq!(request_body(&req, "m", true)["prompt_cache_key"], "agw-k1");
        assert!(request_body(&req, "m", false).get("prompt_cache_key").is_none(), "a provider that may reject it");
        req.prompt_cache.enabled = false;
        assert!(request_body(&req, "m", true).get("prompt_cache_key").is_none(), "caching off for this agent");
    }
}
