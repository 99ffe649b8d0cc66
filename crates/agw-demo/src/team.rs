//! How the demo model leads a team (`agent_invoke`, docs/multi-agent.md): offered the tool and
//! nothing invoked yet, it gives every agent the tool's schema allows the user's question as a
//! task, all in one call; once the aggregate came back, it reports each agent's answer.

use serde_json::{Value, json};

use super::tools::{DemoToolCall, results};
use super::{DemoTurn, quote};
use agw_llm::request::ChatRequest;
use agw_modes::runtime::AGENT_INVOKE_TOOL;

/// The demo's answer to a turn that offers `agent_invoke`, or `None` when the tool is not offered.
pub(super) fn turn(request: &ChatRequest, question: &str) -> Option<DemoTurn> {
    let tool = request.tools.iter().find(|t| t.name == AGENT_INVOKE_TOOL)?;
    if let Some((_, aggregate)) = results(request).into_iter().find(|(name, _)| *name == AGENT_INVOKE_TOOL) {
        return Some(report(request, question, aggregate));
    }
    let agents: Vec<&str> = tool.parameters["properties"]["tasks"]["items"]["properties"]["subAgentKey"]["enum"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if agents.is_empty() {
        return None;
    }
    let tasks: Vec<Value> = agents
        .iter()
        .map(|agent| json!({"subAgentKey": agent, "task": question, "taskName": format!("{agent} on it")}))
        .collect();
    let reasoning = request
        .reasoning
        .enabled
        .then(|| format!("The user wrote \"{question}\". My team can work on it at once: {}.", agents.join(", ")));
    let content = format!("I will ask {} agents at the same time.", agents.len());
    let call = DemoToolCall {
        id: "call_demo_team".to_owned(),
        name: AGENT_INVOKE_TOOL.to_owned(),
        arguments: json!({ "tasks": tasks }).to_string(),
    };
    Some(DemoTurn { reasoning, content, tool_call: Some(call), finish_reason: "tool_calls" })
}

/// Each task's outcome, one bullet per agent.
fn report(request: &ChatRequest, question: &str, aggregate: &str) -> DemoTurn {
    let parsed: Value = serde_json::from_str(aggregate).unwrap_or(Value::Null);
    let mut content = format!("My team worked on \"{question}\" (offline demo model):\n");
    for task in parsed["tasks"].as_array().into_iter().flatten() {
        let agent = task["subAgentKey"].as_str().unwrap_or("?");
        let said = match task["status"].as_str() {
            Some("completed") => quote(task["answer"].as_str().unwrap_or("")),
            Some(status) => format!("{status}: {}", task["error"]["message"].as_str().unwrap_or("")),
            None => "no answer".to_owned(),
        };
        content.push_str(&format!("\n- `{agent}` → {said}"));
    }
    let reasoning = request.reasoning.enabled.then(|| "Every agent answered; I will sum up.".to_owned());
    DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" }
}
