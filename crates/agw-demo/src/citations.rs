//! How the demo model cites (issue 35): when the system prompt asks for citations (agw adds the
//! instruction for agents with citable tools) and a tool returned message records, the answer
//! lists the messages, each followed by the marker the prompt shows, so the offline demo
//! streams citations.

use serde_json::Value;

use agw_llm::request::{ChatMessage, ChatRequest};

/// The marker of the system prompt's citation instruction: the word around `<id>` (such as
/// `[cite:<id>]`), split at `<id>`.
fn marker(request: &ChatRequest) -> Option<(String, String)> {
    let system = request.messages.iter().find_map(|m| match m {
        ChatMessage::System { content } => Some(content.as_str()),
        _ => None,
    })?;
    let at = system.find("<id>")?;
    let start = system[..at].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let rest = &system[at + "<id>".len()..];
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (open, close) = (&system[start..at], &rest[..end]);
    (!open.is_empty() && !close.is_empty()).then(|| (open.to_owned(), close.to_owned()))
}

/// The cited answer, when the prompt asks for citations and a result holds message records
/// (objects with a `messageId`, at the top or in an array field).
pub(crate) fn answer(request: &ChatRequest, results: &[(&str, &str)]) -> Option<String> {
    let (open, close) = marker(request)?;
    let mut lines = Vec::new();
    for (_, result) in results {
        let Ok(value) = serde_json::from_str::<Value>(result) else { continue };
        let arrays: Vec<&Vec<Value>> = match &value {
            Value::Array(items) => vec![items],
            Value::Object(map) => map.values().filter_map(Value::as_array).collect(),
            _ => Vec::new(),
        };
        for item in arrays.into_iter().flatten() {
            let Some(id) = item.get("messageId").map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            else {
                continue;
            };
            let sender = item.get("senderName").and_then(Value::as_str).unwrap_or("Someone");
            let content = item.get("content").and_then(Value::as_str).unwrap_or_default();
            lines.push(format!("- {sender}: {content}{open}{id}{close}"));
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "Here is what the chat says (offline demo model, citing each message I used):\n\n{}",
        lines.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_listed_with_the_prompts_marker() {
        let request = ChatRequest {
            provider_key: "demo".into(),
            model: "agw-demo".into(),
            messages: vec![ChatMessage::System { content: "Cite with 【ref:<id>】 after it.".into() }],
            tools: vec![],
            tool_choice: None,
            reasoning: Default::default(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: Default::default(),
            response_format: None,
        };
        let result = r#"{"messages":[{"messageId":"361","senderName":"Coral","content":"Bug"},{"messageId":7}]}"#;
        let answer = answer(&request, &[("mock_chat_messages", result)]).unwrap();
        assert!(answer.ends_with("- Coral: Bug【ref:361】\n- Someone: 【ref:7】"), "{answer}");
        let plain = ChatRequest { messages: vec![ChatMessage::System { content: "No".into() }], ..request };
        assert_eq!(super::answer(&plain, &[("t", result)]), None);
    }
}
