//! How the demo model uses tools: call one when tools are offered and no result is in yet,
//! then answer from the results. Arguments are built from the tool's JSON schema and the user's
//! words, so any tool an operator defines can be exercised offline.

use serde_json::{Map, Value, json};

use agw_llm::request::{ChatMessage, ChatRequest, ToolSpec};

/// A tool call the demo model decided to make.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoToolCall {
    /// `call_demo_{n}`, numbered from 1 by the tool calls already in the conversation.
    pub id: String,
    /// The name of the tool to call.
    pub name: String,
    /// Compact JSON text.
    pub arguments: String,
}

/// Messages after the last user message (this run's tool round trips).
fn since_last_user(request: &ChatRequest) -> &[ChatMessage] {
    let start = request.messages.iter().rposition(|m| matches!(m, ChatMessage::User { .. })).map_or(0, |i| i + 1);
    &request.messages[start..]
}

/// The call to make now, if any: tools offered and no tool result since the user spoke.
pub fn next_call(request: &ChatRequest, question: &str) -> Option<DemoToolCall> {
    if request.tools.is_empty() || request.tool_choice.is_none() {
        return None;
    }
    if since_last_user(request).iter().any(|m| matches!(m, ChatMessage::Tool { .. })) {
        return None;
    }
    let tool = pick_tool(&request.tools, question)?;
    let calls_so_far = request
        .messages
        .iter()
        .filter(|m| matches!(m, ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
        .count();
    Some(DemoToolCall {
        id: format!("call_demo_{}", calls_so_far + 1),
        name: tool.name.clone(),
        arguments: arguments_for(&tool.parameters, question).to_string(),
    })
}

/// The tool results of this run, `(tool name, result text)`.
pub fn results(request: &ChatRequest) -> Vec<(&str, &str)> {
    since_last_user(request)
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { name, content, .. } => Some((name.as_str(), content.as_str())),
            _ => None,
        })
        .collect()
}

/// Words too common to say anything about which tool fits.
const STOP_WORDS: [&str; 24] = [
    "the", "and", "for", "with", "what", "whats", "this", "that", "please", "tell", "about", "now", "how", "are",
    "you", "can", "could", "would", "should", "there", "from", "into", "some", "me",
];

/// The tool that shares the most words with the question — a word in the tool's name counts
/// three times one in its description; ties go to the first by name (tools arrive sorted).
/// `_skill_run_script_` is never picked here: its arguments cannot be made up from its schema
/// (`demo/skills.rs` calls it when a catalogued skill fits).
pub(super) fn pick_tool<'a>(tools: &'a [ToolSpec], question: &str) -> Option<&'a ToolSpec> {
    let candidates = || tools.iter().filter(|t| t.name != super::skills::RUN_SCRIPT);
    let best = candidates().map(|t| score(t, question)).max()?;
    candidates().find(|t| score(t, question) == best)
}

/// How many of the question's words the tool's name (×3) and description mention.
pub(super) fn score(tool: &ToolSpec, question: &str) -> usize {
    let name = tool.name.replace('_', " ").to_lowercase();
    let description = tool.description.to_lowercase();
    question
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 2 && !STOP_WORDS.contains(&w.as_str()))
        .map(|w| 3 * usize::from(name.contains(w.as_str())) + usize::from(description.contains(w.as_str())))
        .sum()
}

/// Arguments that satisfy the schema's required properties (and fill the others sensibly).
pub(super) fn arguments_for(schema: &Value, question: &str) -> Value {
    let mut args = Map::new();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(args);
    };
    for (name, prop) in props {
        args.insert(name.clone(), value_for(name, prop, question));
    }
    Value::Object(args)
}

fn value_for(name: &str, prop: &Value, question: &str) -> Value {
    if let Some(first) = prop.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    let lname = name.to_lowercase();
    match prop.get("type").and_then(Value::as_str).unwrap_or("string") {
        "integer" | "number" => prop.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(true),
        "array" => {
            if lname.contains("option") {
                json!(["Yes", "No"])
            } else {
                json!([])
            }
        }
        "object" => json!({}),
        _ if lname.contains("city") => json!(city_in(question).unwrap_or("Shanghai")),
        _ if lname.contains("date") => json!("2026-02-13"),
        _ if lname == "command" => json!("ls"),
        _ => json!(question),
    }
}

/// A capitalised word of the question that looks like a place ("weather in Paris" → Paris).
fn city_in(question: &str) -> Option<&str> {
    const CITIES: [&str; 12] = [
        "Shanghai",
        "Beijing",
        "Tokyo",
        "Singapore",
        "Paris",
        "London",
        "Berlin",
        "Hangzhou",
        "Shenzhen",
        "Sydney",
        "Seoul",
        "Dubai",
    ];
    let lower = question.to_lowercase();
    CITIES.iter().copied().find(|c| lower.contains(&c.to_lowercase()))
}

/// `(type, key)` of the viewport a tool's after-call hint asks for, read from the system prompt's
/// hint line `- <tool>: … type=html, key=show_weather_card …`.
pub fn viewport_hint(request: &ChatRequest, tool: &str) -> Option<(String, String)> {
    let system = request.messages.iter().find_map(|m| match m {
        ChatMessage::System { content } => Some(content.as_str()),
        _ => None,
    })?;
    let prefix = format!("- {tool}:");
    let line = system.lines().find(|l| l.trim_start().starts_with(&prefix) && l.contains("key="))?;
    let after = |marker: &str| {
        line.split(marker)
            .nth(1)
            .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-').collect::<String>())
    };
    let key = after("key=").filter(|k| !k.is_empty())?;
    Some((after("type=").filter(|t| !t.is_empty()).unwrap_or_else(|| "html".into()), key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_llm::request::{ReasoningSetting, ToolChoice};

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            provider_key: "demo".into(),
            model: "agw-demo".into(),
            messages,
            tools: vec![
                ToolSpec {
                    name: "city_datetime".into(),
                    description: "current date and time of a city".into(),
                    parameters: json!({"type":"object","properties":{"city":{"type":"string"}}}),
                },
                ToolSpec {
                    name: "mock_city_weather".into(),
                    description: "weather of a city on a date".into(),
                    parameters: json!({"type":"object","properties":{"city":{"type":"string"},"date":{"type":"string"}},"required":["city","date"]}),
                },
            ],
            tool_choice: Some(ToolChoice::Auto),
            reasoning: ReasoningSetting::default(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: Default::default(),
            response_format: None,
        }
    }

    #[test]
    fn picks_the_matching_tool_and_builds_arguments_from_the_schema() {
        let req = request(vec![ChatMessage::user("What's the weather in Tokyo?")]);
        let call = next_call(&req, "What's the weather in Tokyo?").unwrap();
        assert_eq!(call.name, "mock_city_weather");
        assert_eq!(call.id, "call_demo_1");
        assert_eq!(
            serde_json::from_str::<Value>(&call.arguments).unwrap(),
            json!({"city":"Tokyo","date":"2026-02-13"})
        );
    }

    #[test]
    fn no_second_call_once_a_result_is_in() {
        let req = request(vec![
            ChatMessage::user("time?"),
            ChatMessage::Tool { tool_call_id: "c".into(), name: "city_datetime".into(), content: "{}".into() },
        ]);
        assert!(next_call(&req, "time?").is_none());
        assert_eq!(results(&req), [("city_datetime", "{}")]);
    }

    #[test]
    fn reads_the_viewport_hint_from_the_system_prompt() {
        let req = request(vec![ChatMessage::System {
            content: "hints:\n- mock_city_weather: answer with a ```viewport block type=html, key=show_weather_card"
                .into(),
        }]);
        assert_eq!(viewport_hint(&req, "mock_city_weather"), Some(("html".into(), "show_weather_card".into())));
        assert_eq!(viewport_hint(&req, "city_datetime"), None);
    }
}
