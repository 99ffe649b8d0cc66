//! Deltas: what flows *into* the event assembler.
//!
//! [`LlmDelta`] is one piece of one upstream provider chunk (provider-neutral).
//! [`AgentDelta`] is what a mode state machine tells the assembler — semantic, already attributed
//! to tool ids and decorated with registry metadata. The assembler never sees providers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{PlanTask, TaskError};

/// One piece of an upstream streaming chunk, in the order the chunk carried them
/// (reasoning, content, tool-call fragments, finish reason, usage).
///
/// Empty texts are never produced: a chunk whose `content` is `""` or absent yields no
/// [`LlmDelta::Content`]. Whitespace-only text *is* produced (agw streams it verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LlmDelta {
    /// `delta.reasoning_content` (or the `reasoning` alias some providers use).
    Reasoning { text: String },
    /// `delta.content`.
    Content { text: String },
    /// One `delta.tool_calls[]` entry.
    ToolCall(ToolCallFragment),
    /// `finish_reason` of the choice (`stop`, `tool_calls`, `length`, …).
    Finish { reason: String },
    /// The usage object, verbatim (provider keys kept, e.g. `prompt_tokens`).
    Usage { usage: Value },
}

/// One upstream `tool_calls[]` entry. Every field is optional on the wire; later fragments of a
/// call usually carry only `index` and `arguments`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFragment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `type` on the wire; absent means `function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The argument text fragment (possibly empty).
    #[serde(default)]
    pub arguments: String,
}

/// Registry decoration of a `tool.start` event, resolved by the mode from the tool registry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStartMeta {
    /// The function name as sent by the model.
    pub tool_name: String,
    /// `function` for backend/unknown tools; for frontend tools the viewport type (`html`, `qlc`).
    pub tool_type: String,
    pub tool_api: Option<String>,
    /// Omitted from the event when blank.
    pub description: Option<String>,
    /// Present only for frontend tools: appended as `toolKey`, `toolTimeout`.
    pub frontend: Option<FrontendMeta>,
}

/// Frontend-tool decoration: the viewport key and the submit timeout in ms (≥ 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontendMeta {
    pub tool_key: String,
    pub tool_timeout: u64,
}

/// Registry decoration of an `action.start` event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionStartMeta {
    pub action_name: String,
    pub description: Option<String>,
}

/// What a mode state machine emits. The assembler turns each into zero or more [`crate::Event`]s
/// following the block state machine (contract `sse-events.md` §5.1).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentDelta {
    /// A mode-internal stage boundary (`oneshot`, `react-step-2`, `plan-generate`,
    /// `execute-task-1`, `summary`). Produces no event; the next text delta opens a new block id.
    StageMarker(String),
    /// A reasoning text delta (one upstream chunk).
    Reasoning(String),
    /// A content text delta (one upstream chunk, or an orchestrator text).
    Content(String),
    /// A tool-call argument fragment. The first fragment for a `tool_id` opens the tool
    /// (`tool.start`, even when `delta` is empty); every non-empty `delta` is one `tool.args`.
    ToolArgs {
        tool_id: String,
        meta: ToolStartMeta,
        delta: String,
    },
    /// `tool.end` (emitted for every non-action call of a batch before any tool runs).
    ToolEnd {
        tool_id: String,
    },
    /// `tool.result`; closes the tool first if it is still open.
    ToolResult {
        tool_id: String,
        result: String,
    },
    /// Action-call argument fragment (same opening rule as `ToolArgs`).
    ActionArgs {
        action_id: String,
        meta: ActionStartMeta,
        delta: String,
    },
    ActionEnd {
        action_id: String,
    },
    /// `action.result`: parsed JSON when the text is valid JSON, else the string (normally `"OK"`).
    ActionResult {
        action_id: String,
        result: Value,
    },
    /// The run's plan changed (or was restored at run start).
    PlanUpdate {
        plan_id: String,
        plan: Vec<PlanTask>,
    },
    TaskStart {
        task_id: String,
        description: Option<String>,
    },
    TaskComplete {
        task_id: String,
    },
    TaskCancel {
        task_id: String,
    },
    TaskFail {
        task_id: String,
        error: TaskError,
    },
    /// Provider usage for the current model turn: no event, but recorders (chat memory) see it.
    Usage(Value),
}
