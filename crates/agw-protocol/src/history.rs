//! The chat history line format "V3.1" (`docs/contract/memory-jsonl.md` §2–§4), as plain data.
//!
//! A history file is JSON Lines: one [`HistoryLine`] per line, either a [`QueryLine`] (one per
//! run, the normalised request) or a [`StepLine`] (one per executed stage step, holding the
//! [`StoredMessage`]s of that step).
//!
//! Writing produces exactly the contract's key order with `null`s omitted (struct declaration
//! order IS the key order — do not reorder fields). Reading is lenient where the reference was
//! strict: unknown keys are ignored everywhere, legacy spellings are accepted (`planSnapshot`,
//! an inner `plan` instead of `tasks`, call-level `_toolId`/`_actionId`, `in_progress` → `init`,
//! the old all-`null` `_usage` placeholder), and a malformed message, plan or system snapshot
//! is dropped on its own instead of taking the whole line with it.
//!
//! No I/O here: `agw-memory` owns the files.

mod message;
mod recovery;
mod snapshot;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::request::QueryRequest;

pub use message::{ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL, ROLE_USER, StoredFunction, StoredMessage, StoredToolCall};
pub use recovery::{
    BatchCheckpoint, RecoveredStep, RecoveredTask, RoundCheckpoint, RunMark, TaskBatch, TaskCheckpoint,
};
pub use snapshot::{PlanSnapshot, SystemMessage, SystemSnapshot, SystemTool};

/// One line of a history file, tagged by `_type`.
// Most lines are steps, read and written one at a time: boxing them would add an allocation per
// line to save bytes on the rarer variants.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "_type")]
pub enum HistoryLine {
    /// `"_type":"query"`: the run's normalised request.
    #[serde(rename = "query")]
    Query(QueryLine),
    /// `"_type":"step"`: the messages of one executed stage step.
    #[serde(rename = "step")]
    Step(StepLine),
    /// `"_type":"approval"` (agw): a tool-approval rule the user answered `always` in this chat;
    /// the chat's later runs do not ask again. Readers of the reference's format skip it.
    #[serde(rename = "approval")]
    Approval(ApprovalLine),
    /// `"_type":"awaiting"` (agw): the run waits for a person (a frontend submit, an approval,
    /// or a paused backend call's `continue`) — what a restarted server needs to show the wait again and continue the run
    /// when it is answered. Readers of the reference's format skip it.
    #[serde(rename = "awaiting")]
    Awaiting(Box<AwaitingLine>),
    /// `"_type":"checkpoint"` (agw): a summary of the chat's older runs made by context
    /// compaction; the chat's next runs send it instead of the runs it covers
    /// (`docs/context.md`). Readers of the reference's format skip it.
    #[serde(rename = "checkpoint")]
    Checkpoint(CheckpointLine),
}

/// `{"_type":"checkpoint","chatId","runId","updatedAt","throughRunId","summary","tokensBefore","tokensAfter"}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointLine {
    /// The chat.
    #[serde(default)]
    pub chat_id: String,
    /// The run that made the summary.
    #[serde(default)]
    pub run_id: String,
    /// Epoch ms when the summary was made.
    #[serde(default)]
    pub updated_at: i64,
    /// The last run (in the chat's run order) the summary covers: it and every run before it.
    pub through_run_id: String,
    /// The summary.
    pub summary: String,
    /// Estimated tokens of the request before the summary.
    #[serde(default)]
    pub tokens_before: u64,
    /// Estimated tokens after it.
    #[serde(default)]
    pub tokens_after: u64,
}

/// A `context.compact` recorded with the step it happened in (`_compactions` of a step line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCompaction {
    /// How many of the step's messages came before it: a replay emits it there.
    pub at: usize,
    /// Epoch ms of the live event.
    #[serde(default)]
    pub ts: i64,
    /// The event as streamed.
    #[serde(flatten)]
    pub event: crate::event::ContextCompact,
}

/// A guardrail event recorded with the step it happened in (`_guards` of a step line, issue 36):
/// `{"at","ts","type":"guard.warning"|"guard.block", …the event's fields}`.
///
/// `at` places it among the step's messages as `_compactions` do: a replay emits it before the
/// message at that index (after the last one when it is the message count). The recorder counts
/// the messages and the text blocks streamed before the event, so a warning follows the answer
/// it warns about and a tool stage's record comes before the call it checked (a call's message
/// is written with its result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepGuard {
    /// How many of the step's messages came before it.
    pub at: usize,
    /// Epoch ms of the live event.
    #[serde(default)]
    pub ts: i64,
    /// The event as streamed, `type` included.
    #[serde(flatten)]
    pub event: GuardEvent,
}

/// The guardrail events a step keeps ([`StepGuard`]). A `content.revoke` is kept on the message
/// it withdrew instead (`_revoked`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum GuardEvent {
    /// `guard.warning`.
    #[serde(rename = "guard.warning")]
    Warning(crate::event::GuardWarning),
    /// `guard.block`.
    #[serde(rename = "guard.block")]
    Block(crate::event::GuardBlock),
}

impl GuardEvent {
    /// The event to stream (live or in a replay).
    pub fn to_payload(&self) -> crate::event::EventPayload {
        match self {
            Self::Warning(e) => e.clone().into(),
            Self::Block(e) => e.clone().into(),
        }
    }

    /// Where the guard checked.
    pub fn stage(&self) -> crate::guard::GuardStage {
        match self {
            Self::Warning(e) => e.stage,
            Self::Block(e) => e.stage,
        }
    }

    /// A block of the user's message: the run ended before any model call.
    pub fn blocks_input(&self) -> bool {
        matches!(self, Self::Block(e) if e.stage == crate::guard::GuardStage::Input)
    }
}

/// agw (`_handoff`): the step ended with its agent handing the conversation to another agent
/// (docs/multi-agent.md, "Handoffs"); a replay emits the `agent.handoff` after the step's
/// messages. The step's messages are the agent's that handed over (its transfer call last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepHandoff {
    /// Epoch ms of the live event.
    #[serde(default)]
    pub ts: i64,
    /// The event as streamed.
    #[serde(flatten)]
    pub event: crate::event::AgentHandoff,
}

/// `{"_type":"awaiting","chatId","runId","updatedAt","awaitingId","lastSeq","timeoutAt","resumeAt","calls","results","ask"}`.
///
/// Written when a wait begins, after the step so far is flushed. The run is still waiting while
/// this is the run's last line (see `docs/run-lifecycle.md`, durable waiting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingLine {
    /// The chat of the run.
    #[serde(default)]
    pub chat_id: String,
    /// The run that waits.
    #[serde(default)]
    pub run_id: String,
    /// Epoch ms when the wait began.
    #[serde(default)]
    pub updated_at: i64,
    /// The call the wait is for (`awaitingId` = `toolId` of the submit).
    pub awaiting_id: String,
    /// Seq of the last event the run streamed before it waited; a continued stream goes on
    /// from there.
    #[serde(default)]
    pub last_seq: u64,
    /// Epoch ms when the wait times out (the submit timeout holds across a restart).
    #[serde(default)]
    pub timeout_at: i64,
    /// Where the run continues: the stage marker of the step that waits (`react-step-2`,
    /// `oneshot`); empty when the mode cannot continue a run in a new process.
    #[serde(default)]
    pub resume_at: ResumeAt,
    /// The tool calls of the model turn that waits, in call order.
    #[serde(default)]
    pub calls: Vec<AwaitingCall>,
    /// Results of the calls of that turn that had already run, in call order.
    #[serde(default)]
    pub results: Vec<AwaitingResult>,
    /// The wait as `awaiting.ask` shows it.
    pub ask: crate::event::AwaitingAsk,
    /// agw (`mode: "status"`): how many times the user had already said "continue" to the
    /// waiting call before this wait; absent (lines of other kinds, or written before agw said
    /// it): 0. A "continue" runs the call with one more.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub continued: u32,
    /// The run's normalised request (its query line may not be written yet).
    pub query: QueryRequest,
    /// The system snapshot for the run's first step line, while that is not written yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemSnapshot>,
    /// Step lines of the run written before the wait.
    #[serde(default)]
    pub steps_written: i64,
    /// The step the wait interrupted, as far as it got: written as a step line once the run
    /// goes on (or ends), never before — its calls are answered after the wait.
    pub step: PendingStep,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl AwaitingLine {
    /// What the run waits for (from its ask's `mode` and [`Self::continued`]).
    pub fn kind(&self) -> WaitKind {
        WaitKind::of(&self.ask, self.continued)
    }
}

/// What a run waits for from a person: read from the `mode` of its `awaiting.ask`, so every
/// `awaiting` line written before there were kinds reads as it was meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// `mode: "form"` (or any other mode this version does not know): a frontend tool's submit.
    Form,
    /// `mode: "approval"`: a call's tool approval.
    Approval,
    /// `mode: "status"`: a backend call that answered "needs the user" waits for `continue` or
    /// `cancel` (`docs/pausing-tools.md`).
    Status {
        /// How many times the user already said "continue" to the call before this wait.
        continued: u32,
    },
}

impl WaitKind {
    /// The kind of a wait shown as `ask`; `continued` counts for a status wait only.
    pub fn of(ask: &crate::event::AwaitingAsk, continued: u32) -> WaitKind {
        match ask.mode.as_str() {
            "approval" => WaitKind::Approval,
            "status" => WaitKind::Status { continued },
            _ => WaitKind::Form,
        }
    }

    /// The `continued` a line records for this kind.
    pub fn continued(self) -> u32 {
        match self {
            WaitKind::Status { continued } => continued,
            WaitKind::Form | WaitKind::Approval => 0,
        }
    }
}

/// Where a waiting run continues in another process: the `resumeAt` of an [`AwaitingLine`],
/// spelled as the stage marker of the step that waits. Written and read as that text, so old
/// history files load unchanged and a line is written exactly as it was read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResumeAt {
    /// `""`: the mode cannot go on from here in another process (PLAN_EXECUTE, REACT's forced
    /// final turn).
    #[default]
    Nowhere,
    /// `oneshot`: ONESHOT's tool round.
    Oneshot,
    /// `react-step-N`: REACT step N (counted from 1).
    ReactStep(u32),
    /// `execute-task-N`: the N-th task a PLAN_EXECUTE run executes (counted from 1; crash
    /// recovery resumes a tool batch there, durable waiting does not continue from it).
    ExecuteTask(u32),
    /// Any other text, e.g. from another version: kept as written (a line round-trips), but no
    /// mode continues from it.
    Unknown(String),
}

impl ResumeAt {
    const REACT_STEP_PREFIX: &'static str = "react-step-";
    const EXECUTE_TASK_PREFIX: &'static str = "execute-task-";

    /// Reads a written position. Never fails: text this version does not know is
    /// [`ResumeAt::Unknown`]; only the canonical spelling of a step number is a step, so every
    /// value is written back exactly as read.
    pub fn parse(text: &str) -> ResumeAt {
        // Only the canonical spelling of a number: every value is written back as read.
        let number = |prefix: &str| {
            text.strip_prefix(prefix)
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()) && (n.len() == 1 || !n.starts_with('0')))
                .and_then(|n| n.parse::<u32>().ok())
        };
        match text {
            "" => ResumeAt::Nowhere,
            "oneshot" => ResumeAt::Oneshot,
            other => number(Self::REACT_STEP_PREFIX)
                .map(ResumeAt::ReactStep)
                .or_else(|| number(Self::EXECUTE_TASK_PREFIX).map(ResumeAt::ExecuteTask))
                .unwrap_or_else(|| ResumeAt::Unknown(other.to_owned())),
        }
    }
}

/// The written spelling, which is also the stage marker of that step.
impl std::fmt::Display for ResumeAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResumeAt::Nowhere => Ok(()),
            ResumeAt::Oneshot => f.write_str("oneshot"),
            ResumeAt::ReactStep(step) => write!(f, "{}{step}", Self::REACT_STEP_PREFIX),
            ResumeAt::ExecuteTask(step) => write!(f, "{}{step}", Self::EXECUTE_TASK_PREFIX),
            ResumeAt::Unknown(text) => f.write_str(text),
        }
    }
}

impl Serialize for ResumeAt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ResumeAt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ResumeAt::parse(&String::deserialize(d)?))
    }
}

/// A step being recorded when its run began to wait (see [`AwaitingLine::step`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingStep {
    /// The step's stage (`react`, `oneshot`, …).
    #[serde(default)]
    pub stage: String,
    /// Messages of the step so far.
    #[serde(default)]
    pub messages: Vec<StoredMessage>,
    /// Calls of the step still waiting for their result, in start order.
    #[serde(default)]
    pub calls: Vec<PendingCall>,
    /// The step's plan, when it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSnapshot>,
    /// The step's usage, as the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The step's guardrail events so far (see [`StepLine::guards`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<StepGuard>,
    /// A sub-agent's stages within its one step (crash recovery resumes a PLAN_EXECUTE
    /// sub-agent from them); empty for any other step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<StepSegment>,
}

/// Where a stage of a sub-agent's run begins among its step's messages (see
/// [`PendingStep::segments`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepSegment {
    /// How many of the step's messages came before the stage.
    pub at: usize,
    /// `plan`, `execute`, `summary`, …
    pub stage: String,
    /// The sub-agent's plan when the stage ended (or at the checkpoint, for the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSnapshot>,
}

/// A call of a [`PendingStep`] without its result yet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The call id.
    pub id: String,
    /// The tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `function` or `action`.
    #[serde(default)]
    pub call_type: String,
    /// Arguments as streamed.
    #[serde(default)]
    pub arguments: String,
    /// When its arguments began to stream (epoch ms).
    #[serde(default)]
    pub ts: i64,
    /// The `_msgId` of the model response it belongs to.
    #[serde(default)]
    pub msg_id: String,
}

/// One tool call of the turn that waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingCall {
    /// The call id.
    pub id: String,
    /// The tool, as the model named it.
    pub name: String,
    /// The arguments as streamed (JSON text).
    #[serde(default)]
    pub arguments: String,
    /// How the client had been shown the call when the wait began; absent (lines written
    /// before agw said it): as its tool's kind says — actions as actions, the rest as tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed_as: Option<StreamedAs>,
}

/// How a call reached the client's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamedAs {
    /// `tool.start` … `tool.end`.
    Tool,
    /// `action.start` and its arguments, not ended yet.
    Action,
    /// Nothing yet: a frontend tool or action held back until its approval rule is satisfied
    /// (a client acts on their start).
    Withheld,
}

/// The result of a call that ran before the wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingResult {
    /// The call id.
    pub id: String,
    /// The result text, as the model will see it.
    pub result: String,
}

/// `{"_type":"approval","chatId","runId","updatedAt","rule","toolName","decision":"always","agentKey"}`.
///
/// Honoured only for the agent, tool and rule it names: a line without `agentKey` (written
/// before agw keyed them, when it was honoured for the rule alone) is read but remembers
/// nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalLine {
    /// The chat the rule is remembered for.
    #[serde(default)]
    pub chat_id: String,
    /// The run in which it was answered.
    #[serde(default)]
    pub run_id: String,
    /// Epoch ms of the answer.
    #[serde(default)]
    pub updated_at: i64,
    /// The `toolConfig.approvals` pattern that asked.
    #[serde(default)]
    pub rule: String,
    /// The tool of the call that was approved.
    #[serde(default)]
    pub tool_name: String,
    /// `always`.
    #[serde(default)]
    pub decision: String,
    /// The agent whose rule asked; empty in lines of the earlier format.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_key: String,
}

impl ApprovalLine {
    /// `(tool, rule)` whose calls by `agent_key` this line lets run without asking; `None` for
    /// another agent's line, or one that names no agent.
    pub fn remembered_for(&self, agent_key: &str) -> Option<(&str, &str)> {
        let honoured = !self.agent_key.is_empty() && self.agent_key == agent_key && self.decision == "always";
        honoured.then_some((self.tool_name.as_str(), self.rule.as_str()))
    }

    /// Whether this line lets `agent_key`'s calls of `tool_name` under `rule` run without asking.
    pub fn remembers(&self, agent_key: &str, tool_name: &str, rule: &str) -> bool {
        self.remembered_for(agent_key) == Some((tool_name, rule))
    }
}

impl HistoryLine {
    /// Parses one line of a history file.
    ///
    /// `Ok(None)`: a line the contract says to ignore — blank, valid JSON that is not an object,
    /// or an object whose `_type` is none of `query`, `step`, `approval`, `awaiting`, `checkpoint`. `Err`: not JSON at all (e.g. a
    /// line torn by a crash mid-write) or a known line whose fields have impossible types.
    pub fn parse(text: &str) -> Result<Option<Self>, serde_json::Error> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let Value::Object(map) = serde_json::from_str::<Value>(text)? else {
            return Ok(None);
        };
        let kind = map.get("_type").and_then(Value::as_str).map(str::to_owned);
        let value = Value::Object(map);
        match kind.as_deref() {
            Some("query") => QueryLine::deserialize(value).map(|line| Some(Self::Query(line))),
            Some("step") => StepLine::deserialize(value).map(|line| Some(Self::Step(line))),
            Some("approval") => ApprovalLine::deserialize(value).map(|line| Some(Self::Approval(line))),
            Some("awaiting") => AwaitingLine::deserialize(value).map(|line| Some(Self::Awaiting(Box::new(line)))),
            Some("checkpoint") => CheckpointLine::deserialize(value).map(|line| Some(Self::Checkpoint(line))),
            _ => Ok(None),
        }
    }

    /// Compact JSON of the line, without the trailing newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// The run the line belongs to; `""` when the line named none.
    pub fn run_id(&self) -> &str {
        match self {
            Self::Query(line) => &line.run_id,
            Self::Step(line) => &line.run_id,
            Self::Approval(line) => &line.run_id,
            Self::Awaiting(line) => &line.run_id,
            Self::Checkpoint(line) => &line.run_id,
        }
    }

    /// The chat the line belongs to; `""` when the line named none.
    pub fn chat_id(&self) -> &str {
        match self {
            Self::Query(line) => &line.chat_id,
            Self::Step(line) => &line.chat_id,
            Self::Approval(line) => &line.chat_id,
            Self::Awaiting(line) => &line.chat_id,
            Self::Checkpoint(line) => &line.chat_id,
        }
    }

    /// `Some` for a step line, `None` for a query line.
    pub fn as_step(&self) -> Option<&StepLine> {
        match self {
            Self::Step(step) => Some(step),
            _ => None,
        }
    }

    /// `Some` for an approval line.
    pub fn as_approval(&self) -> Option<&ApprovalLine> {
        match self {
            Self::Approval(line) => Some(line),
            _ => None,
        }
    }

    /// `Some` for an awaiting line.
    pub fn as_awaiting(&self) -> Option<&AwaitingLine> {
        match self {
            Self::Awaiting(line) => Some(line),
            _ => None,
        }
    }

    /// `Some` for a checkpoint line.
    pub fn as_checkpoint(&self) -> Option<&CheckpointLine> {
        match self {
            Self::Checkpoint(line) => Some(line),
            _ => None,
        }
    }

    /// `Some` for a query line, `None` for a step line.
    pub fn as_query(&self) -> Option<&QueryLine> {
        match self {
            Self::Query(query) => Some(query),
            _ => None,
        }
    }
}

/// `{"_type":"query","chatId","runId","updatedAt","query":{…9 keys…}}` — one per run, written
/// together with the run's first step line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryLine {
    /// Canonical chat id; `""` when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub chat_id: String,
    /// The run's id; `""` when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub run_id: String,
    /// Epoch milliseconds when the line was written; 0 when absent.
    #[serde(default, deserialize_with = "nullable")]
    pub updated_at: i64,
    /// The normalised request: `requestId`, `chatId`, `role` filled in; serialises all nine keys.
    #[serde(default, deserialize_with = "nullable")]
    pub query: QueryRequest,
}

/// `{"_type":"step","chatId","runId","_stage","_seq","taskId"?,"updatedAt","system"?,"plan"?,
/// "messages"}` plus agw's `_…` keys — one per executed stage step; never written with zero
/// messages, unless it records a guardrail event (`_guards`: a block before any text of a
/// later step).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepLine {
    /// Canonical chat id; `""` when absent.
    #[serde(rename = "chatId")]
    pub chat_id: String,
    /// The run's id; `""` when absent.
    #[serde(rename = "runId")]
    pub run_id: String,
    /// `oneshot`, `react`, `plan`, `execute` or `summary` (see [`Stage`]); kept as text so that
    /// files with other stage names still load.
    #[serde(rename = "_stage")]
    pub stage: String,
    /// 1, 2, 3 … per run, in flush order.
    #[serde(rename = "_seq")]
    pub seq: i64,
    /// The child task the step belongs to: written by agw for a sub-agent's step (with
    /// [`Self::sub_agent`]); the reference never writes it, readers accept it.
    #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Epoch milliseconds when the line was appended; 0 when absent.
    #[serde(rename = "updatedAt")]
    pub updated_at: i64,
    /// Present on the first step line of every run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemSnapshot>,
    /// The plan after the last plan update of this step, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSnapshot>,
    /// The step's messages in order; a message that does not parse is dropped on read.
    pub messages: Vec<StoredMessage>,
    /// agw (`_compactions`): the context compactions of this step, in order; omitted when none.
    #[serde(rename = "_compactions", skip_serializing_if = "Vec::is_empty")]
    pub compactions: Vec<StepCompaction>,
    /// agw (`_guards`, issue 36): the step's `guard.warning` and `guard.block` events, in order;
    /// omitted when none.
    #[serde(rename = "_guards", skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<StepGuard>,
    /// agw (`_runUsage`, on a run's last step line): the run's usage, as its terminal event
    /// carried it.
    #[serde(rename = "_runUsage", skip_serializing_if = "Option::is_none")]
    pub run_usage: Option<crate::usage::RunUsage>,
    /// agw (`_runCost`, next to `_runUsage`): what the run cost, when prices were configured.
    #[serde(rename = "_runCost", skip_serializing_if = "Option::is_none")]
    pub run_cost: Option<crate::usage::Cost>,
    /// agw (`_runOutput`, on a run's last step line): the answer as JSON when the run had an
    /// output schema, as `run.complete` carried it.
    #[serde(rename = "_runOutput", skip_serializing_if = "Option::is_none")]
    pub run_output: Option<Value>,
    /// agw (`_subAgent`): this step is a sub-agent's whole task (docs/multi-agent.md), not a
    /// step of the run's own conversation: replayed inside its `task.start`/`task.*` frame,
    /// never sent to the run's model.
    #[serde(rename = "_subAgent", skip_serializing_if = "Option::is_none")]
    pub sub_agent: Option<Box<SubAgentStep>>,
    /// agw (`_handoff`): the step ended with a handoff to another agent.
    #[serde(rename = "_handoff", skip_serializing_if = "Option::is_none")]
    pub handoff: Option<StepHandoff>,
}

/// What a sub-agent step line keeps of its task's frame (`_subAgent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubAgentStep {
    /// The agent that ran the task.
    pub sub_agent_key: String,
    /// `task.start`'s `taskName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_name: Option<String>,
    /// The task text (`task.start`'s `description`; the step's first message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The `agent_invoke` call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// `completed`, `failed` or `cancelled`.
    pub status: String,
    /// Why it failed (`task.fail`'s error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::event::TaskError>,
}

impl<'de> Deserialize<'de> for StepLine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Everything optional and the nested objects as raw values: a bad plan, system
        /// snapshot or message is dropped alone, the rest of the step survives.
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default, rename = "chatId", deserialize_with = "nullable")]
            chat_id: String,
            #[serde(default, rename = "runId", deserialize_with = "nullable")]
            run_id: String,
            #[serde(default, rename = "_stage", deserialize_with = "nullable")]
            stage: String,
            #[serde(default, rename = "_seq", deserialize_with = "nullable")]
            seq: i64,
            #[serde(default, rename = "taskId")]
            task_id: Option<String>,
            #[serde(default, rename = "updatedAt", deserialize_with = "nullable")]
            updated_at: i64,
            #[serde(default)]
            system: Option<Value>,
            #[serde(default)]
            plan: Option<Value>,
            #[serde(default, rename = "planSnapshot")]
            plan_snapshot: Option<Value>,
            #[serde(default, deserialize_with = "nullable")]
            messages: Vec<Value>,
            #[serde(default, rename = "_compactions", deserialize_with = "nullable")]
            compactions: Vec<Value>,
            #[serde(default, rename = "_guards", deserialize_with = "nullable")]
            guards: Vec<Value>,
            #[serde(default, rename = "_runUsage")]
            run_usage: Option<Value>,
            #[serde(default, rename = "_runCost")]
            run_cost: Option<Value>,
            #[serde(default, rename = "_runOutput")]
            run_output: Option<Value>,
            #[serde(default, rename = "_subAgent")]
            sub_agent: Option<Value>,
            #[serde(default, rename = "_handoff")]
            handoff: Option<Value>,
        }

        let wire = Wire::deserialize(d)?;
        let plan = [wire.plan, wire.plan_snapshot]
            .into_iter()
            .flatten()
            .filter_map(|v| PlanSnapshot::deserialize(v).ok())
            .find(|p| !p.tasks.is_empty());
        Ok(Self {
            chat_id: wire.chat_id,
            run_id: wire.run_id,
            stage: wire.stage,
            seq: wire.seq,
            task_id: wire.task_id,
            updated_at: wire.updated_at,
            system: wire.system.and_then(|v| SystemSnapshot::deserialize(v).ok()),
            plan,
            messages: wire.messages.into_iter().filter_map(|v| StoredMessage::deserialize(v).ok()).collect(),
            compactions: wire.compactions.into_iter().filter_map(|v| StepCompaction::deserialize(v).ok()).collect(),
            guards: wire.guards.into_iter().filter_map(|v| StepGuard::deserialize(v).ok()).collect(),
            run_usage: wire.run_usage.and_then(|v| crate::usage::RunUsage::deserialize(v).ok()),
            run_cost: wire.run_cost.and_then(|v| crate::usage::Cost::deserialize(v).ok()),
            run_output: wire.run_output,
            sub_agent: wire.sub_agent.and_then(|v| SubAgentStep::deserialize(v).ok()).map(Box::new),
            handoff: wire.handoff.and_then(|v| StepHandoff::deserialize(v).ok()),
        })
    }
}

/// The `_stage` of a step line, from the mode's stage markers (`docs/contract/memory-jsonl.md` §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `oneshot`: the single step of a ONESHOT run.
    Oneshot,
    /// `react`: one REACT step, the forced final step included.
    React,
    /// plan-draft and plan-generate, merged into one step.
    Plan,
    /// `execute`: one executed PLAN_EXECUTE task.
    Execute,
    /// `summary`: the PLAN_EXECUTE summary.
    Summary,
}

impl Stage {
    /// The `_stage` spelling (`oneshot`, `react`, `plan`, `execute`, `summary`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oneshot => "oneshot",
            Self::React => "react",
            Self::Plan => "plan",
            Self::Execute => "execute",
            Self::Summary => "summary",
        }
    }

    /// `oneshot`, `react-step-N`, `plan-draft`, `plan-generate`, `execute-task-N`, `summary`.
    pub fn from_marker(marker: &str) -> Option<Self> {
        match marker {
            "oneshot" => Some(Self::Oneshot),
            "plan-draft" | "plan-generate" => Some(Self::Plan),
            // Parallel plans: the planner's look at a round's results.
            m if m.starts_with("plan-replan") => Some(Self::Plan),
            "summary" => Some(Self::Summary),
            m if m.starts_with("react-step") => Some(Self::React),
            m if m.starts_with("execute-task") => Some(Self::Execute),
            _ => None,
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The plan of the last step line (in file order) that has a non-empty plan — what a new run
/// restores (`docs/contract/memory-jsonl.md` §8.2). Statuses are already normalised by parsing.
pub fn latest_plan(lines: &[HistoryLine]) -> Option<&PlanSnapshot> {
    lines.iter().rev().filter_map(HistoryLine::as_step).find_map(|step| step.plan.as_ref().filter(|p| !p.is_empty()))
}

/// The last checkpoint line in the file: what the chat's next run starts from.
pub fn latest_checkpoint(lines: &[HistoryLine]) -> Option<&CheckpointLine> {
    lines.iter().rev().find_map(HistoryLine::as_checkpoint)
}

/// The last system snapshot written in the file (read, but it changes nothing a run sends).
pub fn latest_system(lines: &[HistoryLine]) -> Option<&SystemSnapshot> {
    lines.iter().rev().filter_map(HistoryLine::as_step).find_map(|step| step.system.as_ref())
}

/// Treats an explicit `null` like an absent key (the derive would reject it for non-`Option`s).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
pub(crate) mod tests;
