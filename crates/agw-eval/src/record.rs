//! `agw eval record` (docs/evals.md): a case from a recorded chat — its replay, as
//! `GET /api/ap/chat` gives it. The user's messages become the turns; the answers its frontend
//! tools received become the turns' answers (which tools are frontend ones, the agent's detail
//! says: a replay stores every call as a function); the last run's calls become the expected
//! trajectory (arguments by subset) and its answer the reference.

use agw_protocol::event::{Event, EventPayload};
use serde_json::{Value, json};

use crate::observed::Observed;

/// The case a chat's replayed `events` make, as evalset JSON (`{"id", "agentKey", "turns",
/// "expect"}`); `None` when the chat has no run.
pub fn case_from_chat(id: &str, events: &[Event], frontend_tools: &[String]) -> Option<Value> {
    // Each run begins with its `request.query`.
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.payload, EventPayload::RequestQuery(_)))
        .map(|(i, _)| i)
        .collect();
    let first = *starts.first()?;
    let mut turns = Vec::new();
    let mut agent = None;
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(events.len());
        let run = &events[start..end];
        let EventPayload::RequestQuery(query) = &run[0].payload else { continue };
        if n == 0 {
            agent.clone_from(&query.agent_key);
        }
        turns.push(json!({"message": query.message, "answers": frontend_answers(run, frontend_tools)}));
    }
    let last = &events[*starts.last().unwrap_or(&first)..];
    let observed = Observed::from_events(last);
    let calls: Vec<Value> =
        observed.calls.iter().map(|c| json!({"name": c.name, "args": c.args, "argsMatch": "subset"})).collect();
    let mut expect = json!({"trajectory": {"calls": calls}});
    if !observed.answer.trim().is_empty() {
        expect["answer"] = json!({"reference": observed.answer, "rouge1Threshold": 0.5});
    }
    if let Some(output) = &observed.output {
        expect["answer"]["schema"] = schema_of(output);
    }
    let mut case = json!({"id": id, "turns": turns, "expect": expect});
    if let Some(agent) = agent.filter(|a| !a.trim().is_empty()) {
        case["agentKey"] = json!(agent);
    }
    Some(case)
}

/// The answers a run's frontend tools received: each frontend call's result, in call order.
fn frontend_answers(run: &[Event], frontend_tools: &[String]) -> Vec<Value> {
    let mut frontend: Vec<(String, String)> = Vec::new();
    let mut answers = Vec::new();
    for event in run.iter().filter(|e| e.task_id.is_none()) {
        match &event.payload {
            EventPayload::ToolStart(e) if e.tool_key.is_some() => {
                frontend.push((e.tool_id.clone(), e.tool_name.clone().unwrap_or_default()));
            }
            EventPayload::ToolSnapshot(e) if frontend_tools.contains(&e.tool_name) => {
                frontend.push((e.tool_id.clone(), e.tool_name.clone()));
            }
            EventPayload::ToolResult(e) => {
                if let Some((_, name)) = frontend.iter().find(|(id, _)| *id == e.tool_id) {
                    let params = serde_json::from_str(&e.result).unwrap_or_else(|_| Value::String(e.result.clone()));
                    answers.push(json!({"tool": name, "params": params}));
                }
            }
            _ => {}
        }
    }
    answers
}

/// A schema the recorded output meets: its keys required, each with its JSON type.
fn schema_of(output: &Value) -> Value {
    let Some(object) = output.as_object() else { return json!({}) };
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let properties: serde_json::Map<String, Value> =
        object.iter().map(|(k, v)| (k.clone(), json!({"type": kind(v)}))).collect();
    json!({"type": "object", "required": object.keys().collect::<Vec<_>>(), "properties": properties})
}
