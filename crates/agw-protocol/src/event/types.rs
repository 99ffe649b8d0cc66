//! Payload structs of every event type (`docs/contract/sse-events.md` §3).
//!
//! Field declaration order IS the wire key order (serde writes fields in declaration order), so
//! do not reorder fields. Optional fields (`field?` in the contract) are omitted when `None`;
//! the few fields the contract writes as `null` (replay snapshots, references) are plain
//! `Option`s without `skip_serializing_if`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::echoed::{Reference, Scene};

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
        deserialize_with = "crate::echoed::deserialize_lenient_scene"
    )]
    pub scene: Option<Scene>,
    /// The client's `stream` flag as sent; informational only (the response is always SSE).
    /// Omitted when the request had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
}

/// `request.upload` — protocol only, never emitted by agw. Shape from the design document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestUpload {
    /// Correlation id of the upload request.
    pub request_id: String,
    /// Chat the upload belongs to; omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// What was uploaded.
    pub upload: Upload,
}

/// The `upload` object of [`RequestUpload`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Upload {
    /// The upload's `type` on the wire.
    #[serde(rename = "type")]
    pub kind: String,
    /// File name as given by the client.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: i64,
    /// MIME type as given by the client.
    pub mime_type: String,
    /// Hex SHA-256 of the content; omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `request.submit` — protocol only, never emitted by agw (a submit arrives over
/// `POST /api/ap/submit`). Shape from the design document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSubmit {
    /// Correlation id of the submit request.
    pub request_id: String,
    /// Chat of the waiting run.
    pub chat_id: String,
    /// Run whose frontend tool was answered.
    pub run_id: String,
    /// The frontend tool call that was answered (the id of its `tool.start`).
    pub tool_id: String,
    /// The submitted `params`, verbatim (any JSON value).
    pub payload: Value,
    /// The design document's `viewId`; agw gives it no meaning. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_id: Option<String>,
}

/// `request.steer` — the stream's record of a steer (`POST /api/ap/steer`, successor protocol):
/// a user message the run took at a model-turn boundary. An open text block is ended first; the
/// next text opens a new block.
///
/// Key order: the successor's `requestId?, chatId, runId, steerId, message, role`, then agw's
/// `taskId?` (the active task, like leaf `*.start` events; live only — a replay never sets it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSteer {
    /// The steer request's `requestId`; omitted when it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Canonical id of the chat of the steered run.
    pub chat_id: String,
    /// The run that took the steer.
    pub run_id: String,
    /// The steer's id (the client's `steerId`, or one agw generated).
    pub steer_id: String,
    /// The steered user message, verbatim.
    pub message: String,
    /// Always `user`.
    #[serde(default = "user_role")]
    pub role: String,
    /// agw: the active task when the steer was taken; omitted outside a task and in a replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

fn user_role() -> String {
    "user".to_owned()
}

/// `awaiting.ask` (successor protocol): the run waits for a person.
///
/// `mode: "approval"`: a backend call needs a person's approval before it runs. Emitted after the
/// call's `tool.end`; `awaitingId` is the call id, so
/// `POST /api/ap/submit {runId, awaitingId|toolId, params:{decision}}` answers it.
///
/// `mode: "form"` (agw): a frontend tool call waits for its submit. A live run announces that
/// wait with the call's `tool.start`/`tool.args`/`tool.end` alone; this event is what a run that
/// waits across a restart shows when it is attached again (the tool, its arguments and its
/// viewport: what a client needs to render the form and submit `{runId, toolId, params}`).
///
/// `mode: "status"` (agw, `docs/pausing-tools.md`): a backend call answered that it cannot go
/// on without the user (code -1002, e.g. credits exhausted). `status` says why, `toolName` and
/// `arguments` name the call, `options` are `continue` (the same call runs again) and
/// `cancel`; `POST /api/ap/submit {runId, toolId, params:"continue"|"cancel"}` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingAsk {
    /// Names the wait; the call id.
    pub awaiting_id: String,
    /// The run that waits.
    pub run_id: String,
    /// `approval`, `form` or `status`.
    pub mode: String,
    /// How long the run waits, in ms (from when the event was emitted).
    pub timeout: u64,
    /// `approval`: the calls to decide on (one per ask in agw).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRequest>,
    /// `form`: the frontend tool that waits; `status`: the backend tool that paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// `form`, `status`: the call's arguments (`status`: what runs again on `continue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// `form`: the viewport type (`html`, `qlc`), as in the call's `tool.start` `toolType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport_type: Option<String>,
    /// `form`: the viewport that renders the form, as in the call's `tool.start` `viewportKey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport_key: Option<String>,
    /// `status`: why the tool cannot go on without the user. Boxed: every event is as large as
    /// the largest payload, and this one is rare (docs/performance.md, "Issue 36").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<AwaitingStatus>>,
    /// `status`: the choices (`continue`, `cancel`); each option's `action` is what the client
    /// submits.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub options: Box<[StatusOption]>,
}

/// The status of an `awaiting.ask` `mode: "status"`: what the paused tool told the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwaitingStatus {
    /// The tool's status code: -1002 (the source document's "credits exhausted") unless the
    /// tool gave another.
    pub code: i64,
    /// What the user is told (at most 500 characters).
    pub message: String,
    /// What a client needs to render the status (a balance, a price, a link): a JSON object.
    #[serde(default = "empty_object")]
    pub data: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// One choice of a status wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusOption {
    /// Text for a button.
    pub label: String,
    /// `continue` or `cancel`: submitted as `params` (or `{"action": …}`).
    pub action: String,
    /// What choosing it does.
    pub description: String,
}

#[cfg(test)]
impl AwaitingAsk {
    /// A paused `mock_image_generate` call (`call_i` of run `r`, credits exhausted, one
    /// `continue` option): what the adapters' tests map.
    pub(crate) fn paused_sample() -> AwaitingAsk {
        AwaitingAsk {
            awaiting_id: "call_i".into(),
            run_id: "r".into(),
            mode: "status".into(),
            timeout: 1000,
            approvals: Vec::new(),
            tool_name: Some("mock_image_generate".into()),
            arguments: Some(serde_json::json!({"prompt": "fox"})),
            viewport_type: None,
            viewport_key: None,
            status: Some(Box::new(AwaitingStatus {
                code: -1002,
                message: "Not enough credits".into(),
                data: serde_json::json!({"price": 10}),
            })),
            options: vec![StatusOption {
                label: "Continue".into(),
                action: "continue".into(),
                description: "d".into(),
            }]
            .into(),
        }
    }
}

/// One call awaiting a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// The call id.
    pub id: String,
    /// What would run: the `_bash_` command, else the tool name.
    pub command: String,
    /// The tool's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The choices; each option's `decision` is what the client submits.
    pub options: Vec<ApprovalOption>,
    /// Always false: a decision is one of the options.
    pub allow_free_text: bool,
    /// agw: the tool.
    pub tool_name: String,
    /// agw: the exact arguments that will run if approved.
    pub arguments: Value,
    /// agw: the `toolConfig.approvals` pattern that asked; `always` remembers it for the chat,
    /// for this agent and this tool.
    pub rule: String,
    /// agw: the agent whose rule asked (a chat's runs may use several agents); empty in waits
    /// recorded before agw said it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_key: String,
}

/// One choice of an approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalOption {
    /// Text for a button.
    pub label: String,
    /// `once`, `always` or `reject`.
    pub decision: String,
    /// What choosing it does.
    pub description: String,
}

/// `awaiting.answer`: echoes the decision before the call's `tool.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingAnswer {
    /// The wait answered.
    pub awaiting_id: String,
    /// Approval: `{mode:"approval", status:"answered", approvals:[{id, decision}]}`; status:
    /// `{mode:"status", action:"continue"|"cancel"}`.
    pub answer: Value,
}

/// `awaiting.expired`: nobody decided in time; the call is not executed (a status wait: not
/// run again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingExpired {
    /// The wait that expired.
    pub awaiting_id: String,
}

/// `context.compact` (agw): before a model call, the run shrank the conversation it sends so
/// that it fits the model's context window (`docs/context.md`). Emitted once per level applied,
/// cheapest first; an open text block is ended first. Recorded with the step it happened in,
/// so a replay shows it at the same place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompact {
    /// The run that compacted.
    pub run_id: String,
    /// `prune` (old tool outputs replaced by a marker), `summary` (older turns summarised by a
    /// model), or `truncate` (older turns dropped with a marker, when a summary was not possible).
    pub level: CompactLevel,
    /// Estimated tokens of the request before this level.
    pub tokens_before: u64,
    /// Estimated tokens after it.
    pub tokens_after: u64,
    /// The usable context (`contextWindow - min(maxOutputTokens, 8192)`), in tokens.
    pub budget: u64,
    /// How long this level took (a summary includes its model call).
    pub duration_ms: u64,
    /// `prune`: how many tool results were replaced.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pruned_results: u64,
    /// `summary` / `truncate`: how many messages were replaced.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replaced_messages: u64,
    /// `summary`: the summary the model now sees instead of the older turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `summary`: the last stored run the summary covers; the chat's next runs start from the
    /// summary and the runs after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through_run_id: Option<String>,
    /// `truncate`: why no summary was used (the summary call failed, or nothing could be
    /// summarised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `agent.handoff` (agw): the agent running the conversation handed it to another agent through
/// its `transfer_to_<agentKey>` call (docs/multi-agent.md, "Handoffs"). The agent that called ends
/// its turn; the next one continues in the same run. An open text block is ended first.
/// Recorded with the step that ended with it, so a replay shows it at the same place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentHandoff {
    /// The run the handoff happened in.
    pub run_id: String,
    /// The agent that handed the conversation over.
    pub from_agent_key: String,
    /// The agent that continues it.
    pub to_agent_key: String,
    /// The `transfer_to_<agentKey>` call that did it.
    pub tool_id: String,
}

/// `model.fallback` (agw): a model call failed before anything of it was streamed, for a reason
/// the stage's `modelConfig.fallbackOn` lists, and the same turn goes on with the next model of
/// `modelConfig.fallbacks` (docs/models.md, "Fallbacks"). The transcript sent is the same; nothing
/// is repeated. An open text block is ended first. Not kept in chat history: the usage of the
/// answer names the model that gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFallback {
    /// The run whose model call failed.
    pub run_id: String,
    /// The model that failed.
    pub from: ModelRef,
    /// The model tried next.
    pub to: ModelRef,
    /// Why: `rate_limit`, `overloaded`, `server_error`, `timeout`, `context_window` or `connection`.
    pub reason: String,
    /// The failure as the provider client reported it (status and a bounded excerpt of the
    /// provider's answer; API keys redacted).
    pub message: String,
}

/// A model by provider: `{providerKey, model}`, as agent files name one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    /// The key in the provider registry.
    pub provider_key: String,
    /// The model's name at that provider.
    pub model: String,
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider_key, self.model)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a [`ContextCompact`] shrank the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactLevel {
    /// Old tool outputs replaced by `[tool output pruned: N tokens]`; no model call.
    Prune,
    /// Older turns summarised by a model.
    Summary,
    /// Older turns dropped with a marker (the fallback when no summary could be made).
    Truncate,
}

impl CompactLevel {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prune => "prune",
            Self::Summary => "summary",
            Self::Truncate => "truncate",
        }
    }
}

/// `chat.start` — only on the first run of a chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatStart {
    /// Canonical chat id.
    pub chat_id: String,
    /// Never omitted (see [`crate::ids::chat_name`]).
    pub chat_name: String,
}

/// `chat.update` — protocol only, never emitted. The contract gives no fields; agw's choice is
/// `chatId, chatName?`, mirroring `chat.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatUpdate {
    /// Canonical chat id.
    pub chat_id: String,
    /// The chat's name; omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
}

/// `run.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    /// The run id (UUID v4, canonical lower-case).
    pub run_id: String,
    /// Canonical id of the chat the run belongs to.
    pub chat_id: String,
}

/// `run.resume` — agw (issue 37): the process running the run stopped (it crashed, was killed,
/// or its grace period ended) and this one resumed the run from its last completed step.
///
/// What the client was shown from `discardFrom` up to this event belongs to work that is being
/// redone (a model turn that was streaming, a tool batch that was running): a client drops it
/// — the text of the blocks named here, calls started in that range — and shows what follows
/// instead. `discardFrom` equals this event's seq when nothing is superseded. Events before
/// `discardFrom` stand: the history holds them.
///
/// Key order: `runId, attempt, discardFrom, contentIds?, reasoningIds?`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResume {
    /// The run that goes on.
    pub run_id: String,
    /// How many times the run has been resumed so far, this time included (1, 2, …).
    pub attempt: u32,
    /// The first seq of what is superseded.
    pub discard_from: u64,
    /// Content blocks opened in the superseded range (their text is dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_ids: Vec<String>,
    /// Reasoning blocks opened in the superseded range.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_ids: Vec<String>,
    /// Child tasks superseded whole (the sub-agents of an `agent_invoke` call that was running):
    /// every event carrying one of these `taskId`s is dropped, wherever it was; the task may
    /// start again under the same id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_ids: Vec<String>,
}

/// `run.complete` — normal end (`stop`, `timeout`, `end_turn`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunComplete {
    /// The run that ended.
    pub run_id: String,
    /// Why the run ended: agw writes `stop` live and `end_turn` in a replay; other values come
    /// from other implementations (the reference's `timeout`). Parsed as `""` when absent.
    #[serde(default)]
    pub finish_reason: String,
    /// agw: the answer as JSON when the run had an output schema (structured output,
    /// docs/models.md) — the same text as the answer's content, parsed and validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// agw: what the run's model calls used and cost.
    #[serde(flatten)]
    pub totals: RunTotals,
}

/// agw: `usage` and `cost` of a terminal event (`run.complete`, `run.error`, `run.cancel`), each
/// omitted when unknown: no call reported usage, or some model used has no price.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    /// Summed over every model call of the run, and per provider and model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::usage::RunUsage>,
    /// What that cost with the configured prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::usage::Cost>,
}

/// `run.cancel` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCancel {
    /// The run that was cancelled.
    pub run_id: String,
    /// agw: what the run's model calls used and cost until then.
    #[serde(flatten)]
    pub totals: RunTotals,
}

/// `run.error` — `{"runId":…,"error":{"code":…,"message":…,"retriable":…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    /// Absent (parsed as `""`) only in the serialisation-fallback frame.
    #[serde(default)]
    pub run_id: String,
    /// What went wrong.
    pub error: RunErrorInfo,
    /// agw: what the run's model calls used and cost until then.
    #[serde(flatten)]
    pub totals: RunTotals,
}

/// The `error` object of `run.error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunErrorInfo {
    /// Machine-readable cause; absent and unknown codes parse as [`ErrorCode::Internal`].
    #[serde(default)]
    pub code: ErrorCode,
    /// Human-readable description; `""` when absent.
    #[serde(default)]
    pub message: String,
    /// Whether sending the same query again may succeed (e.g. after an HTTP 429 or 5xx from
    /// the provider); `false` when absent.
    #[serde(default)]
    pub retriable: bool,
}

impl RunErrorInfo {
    /// Builds the error object from its three wire fields.
    pub fn new(code: ErrorCode, message: impl Into<String>, retriable: bool) -> Self {
        Self { code, message: message.into(), retriable }
    }
}

/// Why a run failed (agw decision replacing the reference's single `RUN_ERROR`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `provider_error`: the provider answered with an error status, the connection failed, a
    /// chunk was malformed or the stream ended without a finish reason.
    ProviderError,
    /// `provider_timeout`: no chunk arrived within the model timeout (before the first chunk
    /// or between chunks).
    ProviderTimeout,
    /// `budget_exceeded`: the run used up its model-call or tool-call budget.
    BudgetExceeded,
    /// `max_steps`: REACT used every step without producing an answer.
    MaxSteps,
    /// `plan_stalled`: PLAN_EXECUTE cannot go on (no plan was created, a task was never
    /// updated or was marked failed, or the summary came back empty).
    PlanStalled,
    /// `tool_required`: the agent requires a tool call and the model never made one.
    ToolRequired,
    /// `frontend_submit_timeout`: a frontend tool waited for `POST /api/ap/submit` past its
    /// timeout.
    FrontendSubmitTimeout,
    /// `provider_not_configured`: the agent names a provider that is not configured.
    ProviderNotConfigured,
    /// `doom_loop` (agw): the model kept calling the same tool with the same arguments after it
    /// was told it repeats itself (`docs/context.md`).
    DoomLoop,
    /// `node_lost` (agw): the replica running the run stopped renewing its lease (it was killed
    /// or cut off); the history holds the run up to its last flushed step (`docs/deployment.md`).
    NodeLost,
    /// `quota_exceeded` (agw): a daily token or cost quota of the run's user or agent was
    /// reached before one of its model calls; the call was not made (`docs/observability.md`).
    QuotaExceeded,
    /// `guardrail_blocked` (agw): a guard blocked the user's message or the model's answer
    /// (`guard.block` or `content.revoke` came before; `docs/contract/sse-events.md` §3.3a).
    GuardrailBlocked,
    /// `output_invalid` (agw): the run has an output schema and its answer did not match it,
    /// even after the one repair turn in which the model saw what was wrong (docs/models.md).
    OutputInvalid,
    /// `recovery_exhausted` (agw): the process running the run stopped more often than
    /// `agw.recovery.max-attempts` allows (each time it was resumed from its last completed
    /// step), or the run was older than `agw.recovery.max-age` when it could be resumed
    /// (`docs/run-lifecycle.md`, crash recovery).
    RecoveryExhausted,
    /// Also what an absent or unknown code parses as.
    #[default]
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 15] = [
        Self::ProviderError,
        Self::ProviderTimeout,
        Self::BudgetExceeded,
        Self::MaxSteps,
        Self::PlanStalled,
        Self::ToolRequired,
        Self::FrontendSubmitTimeout,
        Self::ProviderNotConfigured,
        Self::DoomLoop,
        Self::NodeLost,
        Self::QuotaExceeded,
        Self::GuardrailBlocked,
        Self::OutputInvalid,
        Self::RecoveryExhausted,
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
            Self::DoomLoop => "doom_loop",
            Self::NodeLost => "node_lost",
            Self::QuotaExceeded => "quota_exceeded",
            Self::GuardrailBlocked => "guardrail_blocked",
            Self::OutputInvalid => "output_invalid",
            Self::RecoveryExhausted => "recovery_exhausted",
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
    /// 8 lower-case hex chars, minted by `_plan_add_tasks_` (see [`crate::ids::new_task_id`]).
    pub task_id: String,
    /// What the task is about; `""` when absent.
    #[serde(default)]
    pub description: String,
    /// Current status, parsed leniently (see [`TaskStatus`]).
    #[serde(default)]
    pub status: TaskStatus,
}

/// Task status. Parsing is lenient: the legacy `in_progress`, unknown values and `null` all
/// become [`TaskStatus::Init`] (the replay normalises statuses the same way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// `init`: not finished yet; also what legacy, unknown and `null` statuses parse as.
    #[default]
    Init,
    /// `completed`.
    Completed,
    /// `failed`.
    Failed,
    /// `canceled`.
    Canceled,
}

impl TaskStatus {
    /// The wire spelling (`init`, `completed`, `failed`, `canceled`).
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
    /// `plan_` + 12 hex chars (see [`crate::ids::plan_id_for_chat`]).
    pub plan_id: String,
    /// Canonical chat id.
    pub chat_id: String,
    /// The tasks, in plan order.
    pub plan: Vec<PlanTask>,
}

/// `plan.update` — agw writes `seq` like every event and never writes `rawEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanUpdate {
    /// `plan_` + 12 hex chars (see [`crate::ids::plan_id_for_chat`]); a plan restored from
    /// history keeps its stored id.
    pub plan_id: String,
    /// Canonical chat id.
    pub chat_id: String,
    /// The whole plan after the change (not a diff), in plan order.
    pub plan: Vec<PlanTask>,
}

/// `task.start`: a plan task, or a concurrent child task (a sub-agent, a parallel plan task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStart {
    /// The task that starts; leaf `*.start` events carry it until the task ends.
    pub task_id: String,
    /// The run executing the task.
    pub run_id: String,
    /// Equal to the taskId.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_name: Option<String>,
    /// The task's description; omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// agw: the agent a sub-agent task runs (`agent_invoke`, docs/multi-agent.md); omitted for
    /// plan tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_agent_key: Option<String>,
    /// agw: the tool call that started the task (`agent_invoke`'s `toolId`); omitted for plan
    /// tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
}

/// `task.complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskComplete {
    /// The task that completed.
    pub task_id: String,
}

/// `task.cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCancel {
    /// The task that was cancelled.
    pub task_id: String,
}

/// `task.fail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFail {
    /// The task that failed.
    pub task_id: String,
    /// Why it failed.
    pub error: TaskError,
}

/// The `error` object of `task.fail` (`task_failed`, `task_execution_error`, or a run error code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// `task_failed` (the model set the task to failed), `task_execution_error` (the task
    /// stalled), or the [`ErrorCode`] spelling of the run error that ended the task.
    pub code: String,
    /// Human-readable reason.
    pub message: String,
}

impl TaskError {
    /// Builds the error object from its two wire fields.
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
    /// `{runId}_r_{n}` (see [`crate::ids::reasoning_id`]).
    pub reasoning_id: String,
    /// The run the block belongs to.
    pub run_id: String,
    /// The active task; omitted outside a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `reasoning.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningDelta {
    /// The open reasoning block.
    pub reasoning_id: String,
    /// One upstream reasoning chunk, verbatim (never empty).
    pub delta: String,
}

/// `reasoning.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEnd {
    /// The reasoning block that closed.
    pub reasoning_id: String,
}

/// `reasoning.snapshot` (replay only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSnapshot {
    /// The id streamed live (stored `_reasoningId`), else `{runId}_r_{i}` with i from 0.
    pub reasoning_id: String,
    /// The whole reasoning text of the block.
    pub text: String,
    /// Omitted: the replay never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `content.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentStart {
    /// `{runId}_c_{n}` (see [`crate::ids::content_id`]).
    pub content_id: String,
    /// The run the block belongs to.
    pub run_id: String,
    /// The active task; omitted outside a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

/// `content.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentDelta {
    /// The open content block.
    pub content_id: String,
    /// One upstream content chunk or one orchestrator text, verbatim (never empty).
    pub delta: String,
}

/// `content.citation` — agw (issue 35): a `[cite:<id>]` marker the model wrote, taken out of
/// the text, with the record of that id that one of the run's citable tools returned. It follows
/// the `content.delta` that ends with the text it belongs to; a replay gives it after the block's
/// `content.snapshot`, and `offset` places it in either.
///
/// Key order: `contentId, index, offset, toolId?, record` (`record`: `messageId, content?,
/// senderName?, senderId?, timestamp?, chatId?, url?, title?` — nested, so that the record's
/// `timestamp` and `chatId` are never taken for the event's or the run's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentCitation {
    /// The content block the citation belongs to.
    pub content_id: String,
    /// 0, 1, … in the order the run's citations streamed.
    pub index: u32,
    /// Where the marker stood in the block's text, in UTF-16 code units.
    pub offset: u64,
    /// The tool call whose result held the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// The cited record (its id is `messageId`).
    pub record: crate::citation::CitationRecord,
}

/// `content.revoke` — agw (issue 36): a guard withdrew a content block the client already
/// shows; the client removes its text. Comes after the block's `content.end` (live), or at the
/// end of the block's step (replay, after its `content.snapshot`). The run then ends with
/// `run.error` `guardrail_blocked`.
///
/// Key order: `contentId, stage, guard, rule?, reason, statusCode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentRevoke {
    /// The content block withdrawn.
    pub content_id: String,
    /// Always `output`: only an answer is revoked.
    pub stage: crate::guard::GuardStage,
    /// The guard that decided: `rules:<set>`, `webhook` or `judge:<agentKey>`.
    pub guard: String,
    /// The rule that matched (rule guards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What a person is told.
    pub reason: String,
    /// [`crate::guard::STATUS_BLOCK_AND_REVOKE`].
    #[serde(default = "block_and_revoke")]
    pub status_code: i64,
}

/// `guard.warning` — agw (issue 36): a guard found a mild risk; the client shows the warning and
/// the run goes on. Like `content.citation` it ends no text block: an answer keeps streaming in
/// the block it warned about.
///
/// Key order: `stage, guard, rule?, message, contentId?, toolId?, statusCode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardWarning {
    /// Where the guard checked.
    pub stage: crate::guard::GuardStage,
    /// The guard that decided.
    pub guard: String,
    /// The rule that matched (rule guards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What a person is told.
    pub message: String,
    /// Stage `output`: the content block warned about (the one streaming, else the last of the
    /// current model turn); omitted when the turn streamed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_id: Option<String>,
    /// Tool stages: the call checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// [`crate::guard::STATUS_SAFETY_WARNING`].
    #[serde(default = "safety_warning")]
    pub status_code: i64,
}

/// `guard.block` — agw (issue 36): a guard stopped something the client was not shown. Stage
/// `input`: the run ends (`run.error` `guardrail_blocked`) before any model call; `output`: the
/// model's turn streamed no text before the block, the run ends the same way; `toolInput`: the
/// call does not run; `toolOutput`: its result is withheld — at the tool stages the model is
/// told, and the run goes on.
///
/// Key order: `stage, guard, rule?, reason, toolId?, statusCode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardBlock {
    /// Where the guard checked.
    pub stage: crate::guard::GuardStage,
    /// The guard that decided.
    pub guard: String,
    /// The rule that matched (rule guards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What a person is told.
    pub reason: String,
    /// Tool stages: the call checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// [`crate::guard::STATUS_BLOCK_AND_REVOKE`].
    #[serde(default = "block_and_revoke")]
    pub status_code: i64,
}

fn block_and_revoke() -> i64 {
    crate::guard::STATUS_BLOCK_AND_REVOKE
}

fn safety_warning() -> i64 {
    crate::guard::STATUS_SAFETY_WARNING
}

/// `content.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentEnd {
    /// The content block that closed.
    pub content_id: String,
}

/// `content.snapshot` (replay only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentSnapshot {
    /// The id streamed live (stored `_contentId`), else `{runId}_c_{i}` with i from 0.
    pub content_id: String,
    /// The whole content text of the block.
    pub text: String,
    /// Omitted: the replay never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Tools and actions (§3.4)

/// `tool.start`. Frontend tools append `toolKey`, `toolTimeout` (§6.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStart {
    /// The model's tool-call id (made unique within the run), or `call_native_{k}` when the
    /// provider sent none.
    pub tool_id: String,
    /// The run making the call.
    pub run_id: String,
    /// The active task; omitted outside a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The function name as sent by the model; omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// `function` for backend and unknown tools; for frontend tools the viewport type
    /// (`html`, `qlc`, …). Omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_type: Option<String>,
    /// The `toolApi` of the tool definition file; omitted when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_api: Option<String>,
    /// The arguments seen so far, only when they already form complete JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_params: Option<Value>,
    /// The tool's description from the registry; omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Frontend tools only: the key of the tool's viewport (what
    /// `GET /api/ap/viewport?viewportKey=` serves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_key: Option<String>,
    /// Frontend tools only: how long the run waits for the submit, in milliseconds (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout: Option<u64>,
}

/// `tool.args` — the field is `delta`, never `args`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolArgs {
    /// The open tool call.
    pub tool_id: String,
    /// One upstream argument fragment, verbatim (never empty).
    pub delta: String,
    /// 0, 1, 2, … per toolId.
    #[serde(default)]
    pub chunk_index: u32,
}

/// `tool.progress` (agw): text a running tool streams before its result, in order; the result
/// still carries the whole output. Live only: neither stored nor replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolProgress {
    /// The running call.
    pub tool_id: String,
    /// One piece of text, as the tool sent it (never empty).
    pub delta: String,
}

/// `tool.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEnd {
    /// The tool call whose arguments are complete.
    pub tool_id: String,
}

/// `tool.result` — `result` is always a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The tool call answered.
    pub tool_id: String,
    /// The tool's output as text (a JSON result is its JSON text); for a frontend tool the
    /// submitted `params` as compact JSON.
    pub result: String,
}

/// `tool.snapshot` (replay only). `toolApi`, `toolParams` and `description` are written even
/// when `null` (§9); `toolKey`/`toolTimeout` only for frontend decoration (replay never sets
/// them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSnapshot {
    /// The id streamed live (stored `_toolId`), else the call id or a fallback id (`docs/contract/sse-events.md` §9).
    pub tool_id: String,
    /// The function name.
    pub tool_name: String,
    /// The raw argument text.
    pub arguments: String,
    /// The stored call type; `function` when absent.
    pub tool_type: String,
    /// Always `null` in a replay.
    #[serde(default)]
    pub tool_api: Option<String>,
    /// `arguments` parsed as JSON, or `null`.
    #[serde(default)]
    pub tool_params: Option<Value>,
    /// Always `null` in a replay.
    #[serde(default)]
    pub description: Option<String>,
    /// Frontend decoration (see [`ToolStart::tool_key`]); the replay never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_key: Option<String>,
    /// Frontend decoration in milliseconds (see [`ToolStart::tool_timeout`]); the replay
    /// never sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout: Option<u64>,
}

/// `action.start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionStart {
    /// The model's tool-call id of the action call.
    pub action_id: String,
    /// The run making the call.
    pub run_id: String,
    /// The active task; omitted outside a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The function name as sent by the model; omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_name: Option<String>,
    /// The action's description from the registry; omitted when blank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `action.args` (no chunkIndex).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionArgs {
    /// The open action call.
    pub action_id: String,
    /// One upstream argument fragment, verbatim (never empty).
    pub delta: String,
}

/// `action.end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionEnd {
    /// The action call whose arguments are complete.
    pub action_id: String,
}

/// `action.param` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionParam {
    /// The action call the parameter belongs to.
    pub action_id: String,
    /// The parameter value.
    pub param: Value,
}

/// `action.result` — live: the parsed JSON value when the result text is JSON, else the string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    /// The action call answered.
    pub action_id: String,
    /// In practice the string `OK`: the client performs the action, agw answers at once.
    pub result: Value,
}

/// `action.snapshot` (replay only); `description` is written even when `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionSnapshot {
    /// The id streamed live (stored `_actionId`), else the call id or a fallback id (`docs/contract/sse-events.md` §9).
    pub action_id: String,
    /// The function name.
    pub action_name: String,
    /// The raw argument text.
    pub arguments: String,
    /// Always `null` in a replay.
    #[serde(default)]
    pub description: Option<String>,
}

/// `source.snapshot` — protocol only, never emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSnapshot {
    /// Id of the cited source.
    pub source_id: String,
    /// The run that cited it; omitted when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The active task; omitted outside a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Icon to show with the source; omitted when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// Title of the source; omitted when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Address of the source; omitted when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
