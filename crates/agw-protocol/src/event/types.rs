//! Payload structs of every event type (contract `sse-events.md` §3).
//!
//! Field declaration order IS the wire key order (serde writes fields in declaration order), so
//! do not reorder fields. Optional fields (`field?` in the contract) are omitted when `None`;
//! the few fields the contract writes as `null` (replay snapshots, references) are plain
//! `Option`s without `skip_serializing_if`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::request::{Reference, Scene};

// ---------------------------------------------------------------------------------------------
// Request / chat / run (§3.1)

/// `request.query` — always the first event (seq 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestQuery {
    /// Trimmed client value, or the runId.
    pub request_id: String,
    /// Canonical chat id.
    pub chat_id: String,
    /// As received, defaulted to `user`.
    pub role: String,
    /// As received (never trimmed).
    pub message: String,
    /// The raw request value (not trimmed; `auto` stays `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
    /// Every item is written with all eight fields (absent ones as `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<Vec<Reference>>,
    /// Client params minus internal keys; `None` when nothing remains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
    /// agw writes the scene as a JSON object (the reference wrote a JSON-encoded string; both are
    /// accepted when parsing).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::request::deserialize_lenient_scene"
    )]
    pub scene: Option<Scene>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
}

/// `request.upload` — protocol only, never emitted by agw. Shape from the design document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestUpload {
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    pub upload: Upload,
}

/// The `upload` object of [`RequestUpload`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Upload {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub size_bytes: i64,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `request.submit` — protocol only, never emitted by agw (a submit arrives over
/// `POST /api/ap/submit`). Shape from the design document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSubmit {
    pub request_id: String,
    pub chat_id: String,
    pub run_id: String,
    pub tool_id: String,
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_id: Option<String>,
}

/// `chat.start` — only on the first run of a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatStart {
    pub chat_id: String,
    /// Never omitted (see [`crate::ids::chat_name`]).
    pub chat_name: String,
}

/// `chat.update` — protocol only, never emitted. The contract gives no fields; agw's choice is
/// `chatId, chatName?`, mirroring `chat.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatUpdate {
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
}

/// `run.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    pub run_id: String,
    pub chat_id: String,
}

/// `run.complete` — normal end (`stop`, `timeout`, `end_turn`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunComplete {
    pub run_id: String,
    #[serde(default)]
    pub finish_reason: String,
}

/// `run.cancel` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCancel {
    pub run_id: String,
}

/// `run.error` — `{"runId":…,"error":{"code":…,"message":…,"retriable":…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    /// Absent (parsed as `""`) only in the serialisation-fallback frame.
    #[serde(default)]
    pub run_id: String,
    pub error: RunErrorInfo,
}

/// The `error` object of `run.error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunErrorInfo {
    #[serde(default)]
    pub code: ErrorCode,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub retriable: bool,
}

impl RunErrorInfo {
    pub fn new(code: ErrorCode, message: impl Into<String>, retriable: bool) -> Self {
        Self { code, message: message.into(), retriable }
    }
}

/// Why a run failed (agw decision replacing the reference's single `RUN_ERROR`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    ProviderError,
    ProviderTimeout,
    BudgetExceeded,
    MaxSteps,
    PlanStalled,
    ToolRequired,
    FrontendSubmitTimeout,
    ProviderNotConfigured,
    /// Also what an absent or unknown code parses as.
    #[default]
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        Self::ProviderError,
        Self::ProviderTimeout,
        Self::BudgetExceeded,
        Self::MaxSteps,
        Self::PlanStalled,
        Self::ToolRequired,
        Self::FrontendSubmitTimeout,
        Self::ProviderNotConfigured,
        Self::Internal,
    ];

    /// The wire spelling (`provider_error`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProviderError => "provider_error",
            Self::ProviderTimeout => "provider_timeout",
            Self::BudgetExceeded => "budget_exceeded",
            Self::MaxSteps => "max_steps",
            Self::PlanStalled => "plan_stalled",
            Self::ToolRequired => "tool_required",
            Self::FrontendSubmitTimeout => "frontend_submit_timeout",
            Self::ProviderNotConfigured => "provider_not_configured",
            Self::Internal => "internal",
        }
    }

    /// Parses the wire spelling. Unknown codes (e.g. the reference's `RUN_ERROR`) map to
    /// [`ErrorCode::Internal`] so that parsing a foreign stream never fails on the code alone.
    pub fn from_wire(code: &str) -> Self {
        Self::ALL.into_iter().find(|c| c.as_str() == code).unwrap_or(Self::Internal)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = String::deserialize(d)?;
        Ok(Self::from_wire(&code))
    }
}

// ---------------------------------------------------------------------------------------------
// Plan / task (§3.2)

/// One task of a plan: `{taskId, description, status}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanTask {
    pub task_id: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub status: TaskStatus,
}

/// Task status. Parsing is lenient: the legacy `in_progress`, unknown values and `null` all
/// become [`TaskStatus::Init`] (the replay normalises statuses the same way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    #[default]
    Init,
    Completed,
    Failed,
    Canceled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Init => "init",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
        }
    }

    /// Lenient parse (see the type docs). Case-sensitive like the wire format.
    pub fn from_wire(status: &str) -> Self {
        match status {
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "canceled" => Self::Canceled,
            _ => Self::Init,
        }
    }
}

impl Serialize for TaskStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let status = Option::<String>::deserialize(d)?;
        Ok(status.as_deref().map_or(Self::Init, Self::from_wire))
    }
}

/// `plan.create` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanCreate {
    pub plan_id: String,
    pub chat_id: String,
    pub plan: Vec<PlanTask>,
}

/// `plan.update` — agw writes `seq` like every event and never writes `rawEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanUpdate {
    pub plan_id: String,
    pub chat_id: String,
    pub plan: Vec<PlanTask>,
}

/// `task.start` (PLAN_EXECUTE only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStart {
    pub task_id: String,
    pub run_id: String,
    /// Equal to the taskId.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `task.complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskComplete {
    pub task_id: String,
}

/// `task.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCancel {
    pub task_id: String,
}

/// `task.fail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFail {
    pub task_id: String,
    pub error: TaskError,
}

/// The `error` object of `task.fail` (`task_failed`, `task_execution_error`, or a run error code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    pub code: String,
    pub message: String,
}

impl TaskError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into() }
    }
}

// ---------------------------------------------------------------------------------------------
// Text blocks (§3.3)

/// `reasoning.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningStart {
    pub reasoning_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `reasoning.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningDelta {
    pub reasoning_id: String,
    pub delta: String,
}

/// `reasoning.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEnd {
    pub reasoning_id: String,
}

/// `reasoning.snapshot` (replay only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSnapshot {
    pub reasoning_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `content.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentStart {
    pub content_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `content.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentDelta {
    pub content_id: String,
    pub delta: String,
}

/// `content.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentEnd {
    pub content_id: String,
}

/// `content.snapshot` (replay only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentSnapshot {
    pub content_id: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Tools and actions (§3.4)

/// `tool.start`. Frontend tools append `toolKey`, `toolTimeout` (§6.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStart {
    pub tool_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_api: Option<String>,
    /// The arguments seen so far, only when they already form complete JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout: Option<u64>,
}

/// `tool.args` — the field is `delta`, never `args`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolArgs {
    pub tool_id: String,
    pub delta: String,
    /// 0, 1, 2, … per toolId.
    #[serde(default)]
    pub chunk_index: u32,
}

/// `tool.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEnd {
    pub tool_id: String,
}

/// `tool.result` — `result` is always a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_id: String,
    pub result: String,
}

/// `tool.snapshot` (replay only). `toolApi`, `toolParams` and `description` are written even
/// when `null` (§9); `toolKey`/`toolTimeout` only for frontend decoration (replay never sets
/// them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSnapshot {
    pub tool_id: String,
    pub tool_name: String,
    /// The raw argument text.
    pub arguments: String,
    pub tool_type: String,
    #[serde(default)]
    pub tool_api: Option<String>,
    /// `arguments` parsed as JSON, or `null`.
    #[serde(default)]
    pub tool_params: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout: Option<u64>,
}

/// `action.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionStart {
    pub action_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `action.args` (no chunkIndex).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionArgs {
    pub action_id: String,
    pub delta: String,
}

/// `action.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionEnd {
    pub action_id: String,
}

/// `action.param` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionParam {
    pub action_id: String,
    pub param: Value,
}

/// `action.result` — live: the parsed JSON value when the result text is JSON, else the string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    pub action_id: String,
    pub result: Value,
}

/// `action.snapshot` (replay only); `description` is written even when `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionSnapshot {
    pub action_id: String,
    pub action_name: String,
    pub arguments: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// `source.snapshot` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSnapshot {
    pub source_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
