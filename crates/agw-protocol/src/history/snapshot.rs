//! The system snapshot (`docs/contract/memory-jsonl.md` §5.3) and the plan snapshot (§5.4) of a step line.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::nullable;
use crate::event::{PlanTask, TaskStatus};

/// What the agent was configured with when the run started:
/// `{"model","messages":[{"role":"system","content"}],"tools":[…],"stream"}`.
///
/// Equality is JSON equality (key order of `parameters` does not matter: `serde_json::Map`
/// compares by key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemSnapshot {
    /// The agent-level model (not a stage model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// One system message with the primary prompt; empty (omitted) when the prompt is blank.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub messages: Vec<SystemMessage>,
    /// Every tool enabled for the agent, sorted by name; omitted when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub tools: Vec<SystemTool>,
    /// The request's `stream`, `true` when absent.
    #[serde(default = "default_stream", deserialize_with = "stream_flag")]
    pub stream: bool,
}

impl SystemSnapshot {
    /// Applies the §5.3 rules: a blank prompt gives no message, tools are sorted by name,
    /// blank descriptions are dropped, `stream` defaults to `true`.
    pub fn new(model: Option<String>, system_prompt: &str, mut tools: Vec<SystemTool>, stream: Option<bool>) -> Self {
        let messages = if system_prompt.trim().is_empty() {
            Vec::new()
        } else {
            vec![SystemMessage { role: "system".to_owned(), content: system_prompt.to_owned() }]
        };
        for tool in &mut tools {
            tool.description = tool.description.take().filter(|d| !d.trim().is_empty());
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Self { model, messages, tools, stream: stream.unwrap_or(true) }
    }
}

fn default_stream() -> bool {
    true
}

fn stream_flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(true))
}

/// `{"role":"system","content":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// Always `system` when written by agw.
    #[serde(default, deserialize_with = "nullable")]
    pub role: String,
    /// The agent's primary system prompt, raw (no skill catalog or tool appendix).
    #[serde(default, deserialize_with = "nullable")]
    pub content: String,
}

/// `{"type":"function|action|frontend","name","description"?,"parameters"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemTool {
    /// The registry type: `function`, `action` or `frontend`.
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub tool_type: String,
    /// The tool name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The tool's JSON schema; omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// `{"planId","tasks":[{"taskId","description","status"}]}`.
///
/// Reading accepts the legacy inner key `plan` instead of `tasks`, normalises statuses
/// (`in_progress` / unknown → `init`) and drops tasks without a `taskId`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSnapshot {
    /// `plan_` + 12 hex chars (see [`crate::ids::plan_id_for_chat`]); `""` when absent.
    pub plan_id: String,
    /// The tasks in plan order.
    pub tasks: Vec<PlanTask>,
}

impl PlanSnapshot {
    /// A snapshot of the plan `plan_id` holding `tasks`.
    pub fn new(plan_id: impl Into<String>, tasks: Vec<PlanTask>) -> Self {
        Self { plan_id: plan_id.into(), tasks }
    }

    /// No valid task: such a plan is neither written nor restored nor replayed.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl<'de> Deserialize<'de> for PlanSnapshot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            #[serde(default, deserialize_with = "nullable")]
            plan_id: String,
            #[serde(default)]
            tasks: Option<Vec<Value>>,
            /// Legacy inner key.
            #[serde(default)]
            plan: Option<Vec<Value>>,
        }

        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct LenientTask {
            #[serde(default)]
            task_id: Option<String>,
            #[serde(default)]
            description: Option<String>,
            #[serde(default)]
            status: TaskStatus,
        }

        let wire = Wire::deserialize(d)?;
        let tasks = wire
            .tasks
            .or(wire.plan)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| LenientTask::deserialize(v).ok())
            .filter_map(|t| {
                let task_id = t.task_id.filter(|id| !id.trim().is_empty())?;
                Some(PlanTask { task_id, description: t.description.unwrap_or_default(), status: t.status })
            })
            .collect();
        Ok(Self { plan_id: wire.plan_id, tasks })
    }
}
