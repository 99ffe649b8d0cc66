//! How the demo model plays PLAN_EXECUTE: it recognises the three kinds of turns from the request
//! alone and answers each so a plan runs to its summary offline.
//!
//! * plan generation (`_plan_add_tasks_` offered with `tool_choice: required`) → one
//!   `_plan_add_tasks_` call with 2–3 tasks cut from the user's message;
//! * a task round (the last user message is the task prompt with `Current task ID: <id>`) → first
//!   one backend tool that fits the task, if any, then `_plan_update_task_` marking it completed;
//! * the summary (no tools offered, last user message a task prompt) → what was planned and found.

use serde_json::{Value, json};

use super::tools::{self, DemoToolCall};
use super::{DemoTurn, quote};
use agw_llm::request::{ChatMessage, ChatRequest, ToolChoice};

use agw_modes::definition::{PLAN_ADD_TASKS_TOOL as ADD_TASKS, PLAN_TOOL_PREFIX, PLAN_UPDATE_TASK_TOOL as UPDATE_TASK};
/// The line of the task prompt (default template) that names the task.
const TASK_ID_MARKER: &str = "Current task ID:";
const TASK_DESCRIPTION_MARKER: &str = "Current task description:";

/// The demo's answer to a PLAN_EXECUTE turn, or `None` for any other request.
pub(super) fn turn(request: &ChatRequest) -> Option<DemoTurn> {
    let offered = |name: &str| request.tool_choice.is_some() && request.tools.iter().any(|t| t.name == name);
    if offered(ADD_TASKS) && request.tool_choice == Some(ToolChoice::Required) {
        return Some(plan(request));
    }
    let prompt = last_user(request)?;
    let task_id = line_value(prompt, TASK_ID_MARKER)?;
    if offered(UPDATE_TASK) {
        return Some(execute(request, prompt, task_id));
    }
    if request.tools.is_empty() || request.tool_choice.is_none() {
        return Some(summary(request));
    }
    None
}

fn plan(request: &ChatRequest) -> DemoTurn {
    let question = question(request);
    let tasks: Vec<Value> = tasks_from(&question).into_iter().map(|d| json!({"description": d})).collect();
    let content = format!("I will split this into {} tasks and run them one by one.", tasks.len());
    let reasoning = request
        .reasoning
        .enabled
        .then(|| format!("The user wrote \"{}\". I will plan small tasks first.", quote(&question)));
    let call = DemoToolCall {
        id: call_id(request),
        name: ADD_TASKS.to_owned(),
        arguments: json!({"tasks": tasks}).to_string(),
    };
    DemoTurn { reasoning, content, tool_call: Some(call), finish_reason: "tool_calls" }
}

fn execute(request: &ChatRequest, prompt: &str, task_id: &str) -> DemoTurn {
    let description = line_value(prompt, TASK_DESCRIPTION_MARKER).unwrap_or(task_id);
    let results = tools::results(request);
    let backends: Vec<_> = request.tools.iter().filter(|t| !t.name.starts_with(PLAN_TOOL_PREFIX)).cloned().collect();
    let helper = tools::pick_tool(&backends, description).filter(|t| tools::score(t, description) > 0);
    let reasoning_on = request.reasoning.enabled;
    if results.is_empty()
        && let Some(tool) = helper
    {
        let call = DemoToolCall {
            id: call_id(request),
            name: tool.name.clone(),
            arguments: tools::arguments_for(&tool.parameters, &question(request)).to_string(),
        };
        return DemoTurn {
            reasoning: reasoning_on.then(|| format!("Task {task_id}: `{}` can help with this.", tool.name)),
            content: format!("Working on \"{description}\": let me call `{}` first.", tool.name),
            tool_call: Some(call),
            finish_reason: "tool_calls",
        };
    }
    let found = results
        .iter()
        .filter(|(name, _)| !name.starts_with(PLAN_TOOL_PREFIX))
        .map(|(name, result)| format!(" `{name}` → {}", summarise(result)))
        .collect::<Vec<_>>()
        .join(";");
    let content = if found.is_empty() {
        format!("\"{description}\" is done.")
    } else {
        format!("\"{description}\" is done:{found}.")
    };
    let call = DemoToolCall {
        id: call_id(request),
        name: UPDATE_TASK.to_owned(),
        arguments: json!({"taskId": task_id, "status": "completed"}).to_string(),
    };
    DemoTurn {
        reasoning: reasoning_on.then(|| format!("Task {task_id} has what it needs; I will mark it completed.")),
        content,
        tool_call: Some(call),
        finish_reason: "tool_calls",
    }
}

fn summary(request: &ChatRequest) -> DemoTurn {
    let question = question(request);
    let mut content = format!("Summary for \"{}\" (offline demo model):", quote(&question));
    // The planned tasks, as `_plan_add_tasks_` answered them (`id | status | description`).
    let planned: Vec<String> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { name, content, .. } if name == ADD_TASKS => Some(content.as_str()),
            _ => None,
        })
        .flat_map(str::lines)
        .filter_map(|line| line.splitn(3, " | ").nth(2).map(str::to_owned))
        .collect();
    for task in &planned {
        content.push_str(&format!("\n- done: {task}"));
    }
    let found: Vec<String> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { name, content, .. }
                if !name.starts_with(PLAN_TOOL_PREFIX) && !is_unexecuted(content) =>
            {
                Some(format!("\n- `{name}` → {}", summarise(content)))
            }
            _ => None,
        })
        .collect();
    if !found.is_empty() {
        content.push_str("\n\nFindings:");
        content.extend(found);
    }
    let reasoning = request.reasoning.enabled.then(|| "Every task is done; I will summarise.".to_owned());
    DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" }
}

fn is_unexecuted(content: &str) -> bool {
    serde_json::from_str::<Value>(content).is_ok_and(|v| v.get("executed") == Some(&Value::Bool(false)))
}

/// `k: v, …` for a JSON object result, else the text on one line.
fn summarise(result: &str) -> String {
    match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) => map
            .iter()
            .filter(|(_, v)| !v.is_object() && !v.is_array())
            .map(|(k, v)| format!("{k}: {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => quote(result),
    }
}

/// 2–3 tasks: the clauses of the message, or "gather" + "answer" when it has only one.
fn tasks_from(question: &str) -> Vec<String> {
    let mut parts: Vec<String> = vec![question.to_owned()];
    for separator in [";", "；", "。", "\n", ",", "，", " and ", " then "] {
        parts = parts.iter().flat_map(|p| p.split(separator)).map(str::to_owned).collect();
    }
    let parts: Vec<String> = parts
        .iter()
        .map(|p| p.trim().trim_end_matches(['?', '.', '!', '？', '！']).trim().to_owned())
        .filter(|p| p.chars().count() > 2)
        .take(3)
        .collect();
    if parts.len() >= 2 {
        return parts;
    }
    let q = quote(question);
    vec![format!("Gather the facts needed for: {q}"), format!("Answer: {q}")]
}

/// The user's own message: the last user message that is not a task prompt.
fn question(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::User { content, .. } if !content.contains(TASK_ID_MARKER) => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn last_user(request: &ChatRequest) -> Option<&str> {
    request.messages.iter().rev().find_map(|m| match m {
        ChatMessage::User { content, .. } => Some(content.as_str()),
        _ => None,
    })
}

/// The trimmed rest of the first line starting with `marker`.
fn line_value<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.trim().strip_prefix(marker)).map(str::trim).filter(|v| !v.is_empty())
}

/// `call_demo_<n>`, n = tool calls in the conversation so far + 1.
fn call_id(request: &ChatRequest) -> String {
    let calls: usize = request
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        })
        .sum();
    format!("call_demo_{}", calls + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_llm::request::{ReasoningSetting, ToolCallMessage, ToolSpec};

    fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
        ToolSpec { name: name.into(), description: description.into(), parameters }
    }

    fn request(messages: Vec<ChatMessage>, tools: Vec<ToolSpec>, choice: Option<ToolChoice>) -> ChatRequest {
        ChatRequest {
            provider_key: "demo".into(),
            model: "agw-demo".into(),
            messages,
            tools,
            tool_choice: choice,
            reasoning: ReasoningSetting::default(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: Default::default(),
            response_format: None,
        }
    }

    fn weather() -> ToolSpec {
        spec(
            "mock_city_weather",
            "Mock weather for a city on a date",
            json!({"type":"object","properties":{"city":{"type":"string"},"date":{"type":"string"}}}),
        )
    }

    fn task_prompt(id: &str, description: &str) -> ChatMessage {
        ChatMessage::user(format!(
            "Task list:\n- {id} | init | {description}\n{TASK_ID_MARKER} {id}\n{TASK_DESCRIPTION_MARKER} {description}\n"
        ))
    }

    #[test]
    fn plans_two_or_three_tasks_from_the_message() {
        assert_eq!(
            tasks_from("What's the weather in Tokyo and what time is it there?"),
            ["What's the weather in Tokyo", "what time is it there"]
        );
        assert_eq!(tasks_from("a, bbb; ccc, ddd, eee").len(), 3);
        assert_eq!(
            tasks_from("What is carbon?"),
            ["Gather the facts needed for: What is carbon?", "Answer: What is carbon?"]
        );

        let req = request(
            vec![ChatMessage::user("Check Tokyo weather, then plan the trip")],
            vec![spec(ADD_TASKS, "create tasks", json!({}))],
            Some(ToolChoice::Required),
        );
        let turn = turn(&req).expect("plan turn");
        let call = turn.tool_call.unwrap();
        assert_eq!(call.name, ADD_TASKS);
        let args: Value = serde_json::from_str(&call.arguments).unwrap();
        assert_eq!(args["tasks"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_task_calls_a_fitting_tool_then_completes() {
        let tools = vec![spec(UPDATE_TASK, "update", json!({})), weather()];
        let mut messages =
            vec![ChatMessage::user("Weather in Tokyo and a packing list"), task_prompt("a1b2c3d4", "Weather in Tokyo")];
        let first = turn(&request(messages.clone(), tools.clone(), Some(ToolChoice::Auto))).unwrap();
        let call = first.tool_call.unwrap();
        assert_eq!(call.name, "mock_city_weather");
        assert_eq!(serde_json::from_str::<Value>(&call.arguments).unwrap()["city"], "Tokyo");

        messages.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: call.id.clone(),
                call_type: "function".into(),
                name: call.name.clone(),
                arguments: call.arguments,
            }],
        });
        messages.push(ChatMessage::Tool {
            tool_call_id: call.id,
            name: "mock_city_weather".into(),
            content: r#"{"city":"东京","condition":"晴"}"#.into(),
        });
        let second = turn(&request(messages.clone(), tools.clone(), Some(ToolChoice::Auto))).unwrap();
        let update = second.tool_call.unwrap();
        assert_eq!(update.name, UPDATE_TASK);
        assert_eq!(update.id, "call_demo_2");
        assert_eq!(
            serde_json::from_str::<Value>(&update.arguments).unwrap(),
            json!({"taskId":"a1b2c3d4","status":"completed"})
        );
        assert!(second.content.contains("city: 东京"), "{}", second.content);

        // A task no tool fits goes straight to the update.
        messages.push(task_prompt("e5f6a7b8", "a packing list"));
        let direct = turn(&request(messages.clone(), tools, Some(ToolChoice::Required))).unwrap();
        assert_eq!(direct.tool_call.unwrap().name, UPDATE_TASK);

        // The summary: no tools, the last user message is a task prompt.
        messages.insert(
            1,
            ChatMessage::Tool {
                tool_call_id: "p".into(),
                name: ADD_TASKS.into(),
                content: "a1b2c3d4 | init | Weather in Tokyo\ne5f6a7b8 | init | a packing list".into(),
            },
        );
        let summary = turn(&request(messages, vec![], None)).unwrap();
        assert!(summary.tool_call.is_none());
        assert!(summary.content.contains("- done: Weather in Tokyo\n- done: a packing list"), "{}", summary.content);
        assert!(summary.content.contains("`mock_city_weather` → city: 东京"), "{}", summary.content);
    }

    #[test]
    fn other_requests_are_not_plan_turns() {
        let plain = request(vec![ChatMessage::user("hi")], vec![weather()], Some(ToolChoice::Auto));
        assert!(turn(&plain).is_none());
        let none = request(vec![ChatMessage::user("hi")], vec![], None);
        assert!(turn(&none).is_none());
    }
}
