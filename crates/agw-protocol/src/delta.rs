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
    Reasoning {
        /// The chunk's reasoning text, verbatim (never empty).
        text: String,
    },
    /// `delta.content`.
    Content {
        /// The chunk's answer text, verbatim (never empty).
        text: String,
    },
    /// One `delta.tool_calls[]` entry.
    ToolCall(ToolCallFragment),
    /// `finish_reason` of the choice (`stop`, `tool_calls`, `length`, …).
    Finish {
        /// The reason as the provider named it.
        reason: String,
    },
    /// The usage object, verbatim (provider keys kept, e.g. `prompt_tokens`).
    Usage {
        /// The provider's usage JSON object.
        usage: Value,
    },
}

/// One upstream `tool_calls[]` entry. Every field is optional on the wire; later fragments of a
/// call usually carry only `index` and `arguments`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFragment {
    /// The entry's position in the provider's call list. Informational: agw attributes fragments
    /// by id, since providers stream parallel calls one after another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// The tool-call id; usually only on a call's first fragment (a fragment without one belongs
    /// to the most recently seen call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `type` on the wire; absent means `function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_type: Option<String>,
    /// The function name; usually only on a call's first fragment.
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
    /// The `toolApi` of the tool definition file, if any; omitted from the event when blank.
    pub tool_api: Option<String>,
    /// Omitted from the event when blank.
    pub description: Option<String>,
    /// Present only for frontend tools: appended as `toolKey`, `toolTimeout`.
    pub frontend: Option<FrontendMeta>,
}

/// Frontend-tool decoration: the viewport key and the submit timeout in ms (≥ 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontendMeta {
    /// The key of the tool's viewport; becomes `toolKey`.
    pub tool_key: String,
    /// How long the run waits for the submit, in milliseconds; becomes `toolTimeout` (values
    /// below 1 are written as 1).
    pub tool_timeout: u64,
}

/// Registry decoration of an `action.start` event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionStartMeta {
    /// The function name as sent by the model; omitted from the event when blank.
    pub action_name: String,
    /// The action's description from the registry; omitted from the event when blank.
    pub description: Option<String>,
}

/// What a mode state machine emits. The assembler turns each into zero or more [`crate::Event`]s
/// following the block state machine (`docs/contract/sse-events.md` §5.1).
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
        /// The run-unique call id (becomes `toolId`).
        tool_id: String,
        /// Registry decoration for `tool.start`; only read on the first fragment of the call.
        meta: ToolStartMeta,
        /// The argument text fragment, verbatim; may be empty.
        delta: String,
    },
    /// `tool.end` (emitted for every non-action call of a batch before any tool runs).
    ToolEnd {
        /// The call whose arguments are complete.
        tool_id: String,
    },
    /// `tool.progress` (agw): text a running tool streams before its result (a remote A2A
    /// agent's answer as it arrives). Needs a started call without a result.
    ToolProgress {
        /// The running call.
        tool_id: String,
        /// One piece of text, as the tool sent it (never empty).
        delta: String,
    },
    /// `tool.result`; closes the tool first if it is still open.
    ToolResult {
        /// The call answered.
        tool_id: String,
        /// The tool's output as text.
        result: String,
    },
    /// Action-call argument fragment (same opening rule as `ToolArgs`).
    ActionArgs {
        /// The run-unique call id (becomes `actionId`).
        action_id: String,
        /// Registry decoration for `action.start`; only read on the first fragment of the call.
        meta: ActionStartMeta,
        /// The argument text fragment, verbatim; may be empty.
        delta: String,
    },
    /// `action.end`.
    ActionEnd {
        /// The action call whose arguments are complete.
        action_id: String,
    },
    /// `action.result`: parsed JSON when the text is valid JSON, else the string (normally `"OK"`).
    ActionResult {
        /// The action call answered.
        action_id: String,
        /// The result, already parsed as described above.
        result: Value,
    },
    /// The run's plan changed (or was restored at run start).
    PlanUpdate {
        /// `plan_` + 12 hex chars; a restored plan keeps its stored id.
        plan_id: String,
        /// The whole plan after the change, in plan order.
        plan: Vec<PlanTask>,
    },
    /// `task.start`: a plan task starts executing. Needs an earlier `PlanUpdate` in the run and
    /// no other active task.
    TaskStart {
        /// The task's id from the plan.
        task_id: String,
        /// The task's description; omitted from the event when blank.
        description: Option<String>,
    },
    /// A run resumed in another process (crash recovery) goes on inside the plan task its
    /// client was shown starting there: the task is active again, nothing is emitted.
    TaskResume {
        /// The task's id from the plan.
        task_id: String,
    },
    /// `task.complete` for the active task.
    TaskComplete {
        /// Must name the active task.
        task_id: String,
    },
    /// `task.cancel` for the active task.
    TaskCancel {
        /// Must name the active task.
        task_id: String,
    },
    /// `task.fail` for the active task.
    TaskFail {
        /// Must name the active task.
        task_id: String,
        /// Why the task failed.
        error: TaskError,
    },
    /// Provider usage of one model call: no event of its own, but the assembler adds it to the
    /// run's usage (on the terminal event) and recorders (chat memory) keep it.
    Usage(CallUsage),
    /// A steered user message the run takes now, at a model-turn boundary (never mid-tool):
    /// ends an open text block, then `request.steer` (chat, run and active task from the
    /// assembler); the next text opens a new block. Tools and actions stay as they are.
    Steer {
        /// The steer's id; becomes `steerId` (and `_steerId` in history).
        steer_id: String,
        /// The user message, verbatim.
        message: String,
        /// The steer request's `requestId`, if it had one.
        request_id: Option<String>,
    },
    /// `awaiting.ask`, `awaiting.answer` or `awaiting.expired` (tool approvals): emitted as is,
    /// after closing an open text block.
    Awaiting(crate::event::EventPayload),
    /// `context.compact`: the run shrank its conversation before a model call; emitted as is
    /// (with the assembler's run id) after closing an open text block.
    Compact(crate::event::ContextCompact),
    /// `agent.handoff`: the conversation passes from one agent to another inside the run (after
    /// the transfer call's result); emitted with the assembler's run id after closing an open
    /// text block. The next agent's deltas follow.
    Handoff {
        /// The agent that handed over.
        from_agent_key: String,
        /// The agent that continues.
        to_agent_key: String,
        /// The transfer call.
        tool_id: String,
    },
    /// `model.fallback`: the turn's model call failed before it streamed anything and the turn
    /// goes on with another model; emitted with the assembler's run id after closing an open text
    /// block.
    Fallback(crate::event::ModelFallback),
    /// A citation the model made (issue 35): the text before it was streamed as `Content`;
    /// becomes `content.citation` in the open content block (one opens if none is).
    Citation(crate::citation::Citation),
    /// A guard withdraws the answer the current model turn is writing (issue 36): the open text
    /// block ends, then `content.revoke` names the turn's content block (the open one, else the
    /// last one it opened). A turn begins at a stage marker, a tool or action result, a steer, a
    /// compaction, a handoff or a task boundary. A turn that streamed no content gets
    /// `guard.block` (stage `output`) instead: nothing shown, nothing to withdraw.
    Revoke(crate::guard::Revocation),
    /// `guard.warning`: the run goes on, and so does an open text block. At stage `output` the
    /// assembler names the turn's content block (`contentId`, as [`AgentDelta::Revoke`] finds
    /// it; none when the turn streamed none); at the tool stages the notice names the call.
    GuardWarning(crate::guard::GuardNotice),
    /// `guard.block` (its `reason` is the notice's `message`): ends an open text block.
    GuardBlock(crate::guard::GuardNotice),
    /// The run's answer matched its output schema (structured output, docs/models.md): this is
    /// the answer as JSON. No event of its own; the last one before the end is `run.complete`'s
    /// `output`. A child's is the child's own and never the run's.
    Output(Value),
    /// A child task opens beside the run's own work (a sub-agent of `agent_invoke`, a plan task
    /// run in parallel): `task.start` with the child's fields. Its deltas follow as
    /// [`AgentDelta::Child`], interleaved with other children's, until [`AgentDelta::ChildEnd`].
    ChildStart(ChildTask),
    /// One delta of an open child task: assembled in the child's own blocks and calls (a text
    /// block of one child never closes another's), numbered into the run's stream, every
    /// resulting event tagged with the child's `taskId`.
    Child {
        /// The child task the delta belongs to.
        task_id: String,
        /// The delta, as the child's mode emitted it (a grandchild's is nested again).
        delta: Box<AgentDelta>,
    },
    /// A child task ends: its open blocks close (a cancelled child's unanswered calls get the
    /// cancelled result), then `task.complete`, `task.cancel` or `task.fail`.
    ChildEnd {
        /// The child task that ends.
        task_id: String,
        /// How it ended.
        end: ChildEnd,
    },
}

/// What `task.start` says of a child task ([`AgentDelta::ChildStart`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChildTask {
    /// Unique in the run: every event of the child carries it.
    pub task_id: String,
    /// A name for people (the `taskName` the model gave, else the task id).
    pub task_name: Option<String>,
    /// What the child was asked to do; omitted from the event when blank.
    pub description: Option<String>,
    /// The agent a sub-agent task runs; `None` for a plan task.
    pub sub_agent_key: Option<String>,
    /// The call that started the child (`agent_invoke`'s id); `None` for a plan task.
    pub tool_id: Option<String>,
}

impl ChildTask {
    /// `task.start`'s `taskName`: the name given when it is not blank, else the task id.
    pub fn name(&self) -> String {
        self.task_name.as_deref().map(str::trim).filter(|n| !n.is_empty()).unwrap_or(&self.task_id).to_owned()
    }
}

/// How a child task ended ([`AgentDelta::ChildEnd`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEnd {
    /// `task.complete`.
    Complete,
    /// `task.cancel`; its unanswered calls get the cancelled result.
    Cancel,
    /// `task.fail` with this error.
    Fail(TaskError),
}

impl AgentDelta {
    /// The usage this delta reports, a child's included (children's usage is the run's).
    pub fn usage(&self) -> Option<&CallUsage> {
        match self {
            Self::Usage(call) => Some(call),
            Self::Child { delta, .. } => delta.usage(),
            _ => None,
        }
    }
}

/// The usage object of one model call, and where the call went.
#[derive(Debug, Clone, PartialEq)]
pub struct CallUsage {
    /// Provider key; `""` when unknown.
    pub provider: String,
    /// Model name; `""` when unknown.
    pub model: String,
    /// The provider's usage object, verbatim.
    pub usage: Value,
}

impl From<Value> for CallUsage {
    /// A usage object of a call whose provider and model are not known.
    fn from(usage: Value) -> Self {
        Self { provider: String::new(), model: String::new(), usage }
    }
}
