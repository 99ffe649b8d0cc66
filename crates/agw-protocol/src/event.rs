//! Every SSE event type of the contract (`docs/contract/sse-events.md` §3), as typed Rust.
//!
//! An [`Event`] is `seq` + `timestamp` + a typed [`EventPayload`]. On the wire it is one flat JSON
//! object whose keys are, in order, `seq`, `type`, `timestamp`, then the payload fields in the
//! order of §3 (the declaration order of the payload structs).
//!
//! agw decisions applied here: `plan.update` carries `seq` and never `rawEvent`; `scene` is an
//! object; `run.error.error` is `{code, message, retriable}` with a snake_case [`ErrorCode`].
//!
//! Parsing is lenient so that embedders can read both agw and reference streams: a missing `seq`
//! (the reference's `plan.update`) parses as 0, unknown keys such as `rawEvent` are ignored, a
//! string-encoded `scene` is decoded, unknown error codes become [`ErrorCode::Internal`].

mod types;

use serde::{Deserialize, Serialize, Serializer};

pub use types::*;

/// One protocol event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// 1..N without gaps within a stream (live and replay).
    pub seq: u64,
    /// Epoch milliseconds when the event was assembled.
    pub timestamp: i64,
    /// What happened; decides the wire `type` and the fields after `timestamp`.
    pub payload: EventPayload,
    /// agw: the child task (a sub-agent's, or a plan task running beside others) an event
    /// belongs to, for event types that have no `taskId` field of their own (`content.delta`,
    /// `tool.result`, `awaiting.ask`, …); written as `taskId` after `timestamp`. `None` for
    /// every other event: where the payload has a `taskId` field, the task is there.
    pub task_id: Option<String>,
}

impl Event {
    /// Wraps a payload struct (or an [`EventPayload`]) with its `seq` and epoch-ms `timestamp`.
    pub fn new(seq: u64, timestamp: i64, payload: impl Into<EventPayload>) -> Self {
        Self { seq, timestamp, payload: payload.into(), task_id: None }
    }

    /// Marks the event as one of child task `task`'s: in the payload's own optional `taskId`
    /// field where it has one, else on the event (`task.*` events name their task already).
    pub fn tag_task(&mut self, task: &str) {
        let on_event = self.payload.task_field() == TaskField::None;
        if let Some(slot) = self.payload.task_slot_mut() {
            *slot = Some(task.to_owned());
        }
        if on_event {
            self.task_id = Some(task.to_owned());
        }
    }

    /// The task the event belongs to: the payload's own `taskId` field, else [`Self::task_id`].
    pub fn task(&self) -> Option<&str> {
        match self.payload.task_field() {
            TaskField::Required(id) => Some(id),
            TaskField::Optional(id) => id,
            TaskField::None => self.task_id.as_deref(),
        }
    }

    /// The wire `type` (`"content.delta"`, …).
    pub fn type_name(&self) -> &'static str {
        self.payload.type_name()
    }

    /// `run.complete`, `run.error` or `run.cancel`: the last event of a stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self.payload, EventPayload::RunComplete(_) | EventPayload::RunError(_) | EventPayload::RunCancel(_))
    }

    /// Compact JSON of the event, exactly as it appears on a `data:` line.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// Declares [`EventPayload`] with one variant per event type, its `type_name`, the flat field
/// serialiser and `From` conversions from each payload struct — from one table, so the wire
/// name of a type is written exactly once.
macro_rules! event_payloads {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal ),* $(,)?) => {
        /// The typed payload of an [`Event`], one variant per wire `type`.
        ///
        /// Standalone, it (de)serialises internally tagged (`{"type":…, fields…}`); inside an
        /// [`Event`] the `type` key is placed after `seq` as the contract requires.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        pub enum EventPayload {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($variant), )*
        }

        impl EventPayload {
            /// The wire `type`.
            pub fn type_name(&self) -> &'static str {
                match self { $( Self::$variant(_) => $name, )* }
            }
        }

        /// Serialises only the payload fields (no `type`), for flattening into [`Event`].
        struct PayloadFields<'a>(&'a EventPayload);

        impl Serialize for PayloadFields<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self.0 { $( EventPayload::$variant(p) => p.serialize(s), )* }
            }
        }

        $(
            impl From<$variant> for EventPayload {
                fn from(p: $variant) -> Self { Self::$variant(p) }
            }
        )*
    };
}

event_payloads! {
    /// The query as received; always the first event (seq 1).
    RequestQuery = "request.query",
    /// Protocol only, never emitted.
    RequestUpload = "request.upload",
    /// Protocol only, never emitted.
    RequestSubmit = "request.submit",
    /// A steered user message taken by the run (successor protocol).
    RequestSteer = "request.steer",
    /// The run waits for a person: a tool call needs approval (successor protocol).
    AwaitingAsk = "awaiting.ask",
    /// What the person decided, before the call's `tool.result`.
    AwaitingAnswer = "awaiting.answer",
    /// Nobody decided within the submit timeout.
    AwaitingExpired = "awaiting.expired",
    /// agw: the run shrank what it sends the model before a model call (`docs/context.md`).
    ContextCompact = "context.compact",
    /// agw: one agent handed the conversation to another inside the run (docs/multi-agent.md).
    AgentHandoff = "agent.handoff",
    /// agw: a model call failed before it streamed anything and the turn goes on with a
    /// fallback model (docs/models.md).
    ModelFallback = "model.fallback",
    /// A new chat was created by this query (first run of a chat only).
    ChatStart = "chat.start",
    /// Protocol only, never emitted.
    ChatUpdate = "chat.update",
    /// The run starts; follows `request.query` (and `chat.start`).
    RunStart = "run.start",
    /// agw: the process running the run stopped and this one resumed it from its last
    /// completed step (crash recovery, `docs/run-lifecycle.md`).
    RunResume = "run.resume",
    /// Terminal: the run ended normally.
    RunComplete = "run.complete",
    /// Terminal: the run was interrupted (`POST /api/ap/interrupt`, or nobody watched it for the
    /// detach grace period).
    RunCancel = "run.cancel",
    /// Terminal: the run failed.
    RunError = "run.error",
    /// Protocol only, never emitted.
    PlanCreate = "plan.create",
    /// The chat's plan changed, or a stored plan was restored at run start.
    PlanUpdate = "plan.update",
    /// A plan task starts executing (PLAN_EXECUTE only).
    TaskStart = "task.start",
    /// The active task completed.
    TaskComplete = "task.complete",
    /// The active task was cancelled.
    TaskCancel = "task.cancel",
    /// The active task failed.
    TaskFail = "task.fail",
    /// A reasoning block opens.
    ReasoningStart = "reasoning.start",
    /// One reasoning chunk of the open block.
    ReasoningDelta = "reasoning.delta",
    /// The reasoning block closes.
    ReasoningEnd = "reasoning.end",
    /// Replay only.
    ReasoningSnapshot = "reasoning.snapshot",
    /// A content (answer text) block opens.
    ContentStart = "content.start",
    /// One content chunk of the open block.
    ContentDelta = "content.delta",
    /// The content block closes.
    ContentEnd = "content.end",
    /// Replay only.
    ContentSnapshot = "content.snapshot",
    /// agw: the model cited a record a tool returned, right after the text it belongs to
    /// (live and in replays; docs/protocols.md "Citations").
    ContentCitation = "content.citation",
    /// agw: a guard withdrew a content block the client shows (issue 36,
    /// `docs/contract/sse-events.md` §3.3a).
    ContentRevoke = "content.revoke",
    /// agw: a guard's warning; the run goes on (issue 36).
    GuardWarning = "guard.warning",
    /// agw: a guard blocked a message, an answer before any text, or a tool call (issue 36).
    GuardBlock = "guard.block",
    /// A tool call opens (first argument fragment of a new call id).
    ToolStart = "tool.start",
    /// One argument fragment of an open tool call.
    ToolArgs = "tool.args",
    /// The tool call's arguments are complete.
    ToolEnd = "tool.end",
    /// agw: text a running tool streams before its result (docs/protocols.md "Tool progress").
    ToolProgress = "tool.progress",
    /// The tool's output.
    ToolResult = "tool.result",
    /// Replay only.
    ToolSnapshot = "tool.snapshot",
    /// An action call opens (an ACTION tool: performed by the client).
    ActionStart = "action.start",
    /// One argument fragment of an open action call.
    ActionArgs = "action.args",
    /// The action call's arguments are complete.
    ActionEnd = "action.end",
    /// Protocol only, never emitted.
    ActionParam = "action.param",
    /// The action's result (in practice `OK`).
    ActionResult = "action.result",
    /// Replay only.
    ActionSnapshot = "action.snapshot",
    /// Protocol only, never emitted.
    SourceSnapshot = "source.snapshot",
}

/// Whether a payload type has a `taskId` field of its own, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskField<'a> {
    /// `task.*`: the task the event is about.
    Required(&'a str),
    /// Leaf `*.start` events, text snapshots and `request.steer`: the task, if any.
    Optional(Option<&'a str>),
    /// No `taskId` field: [`Event::task_id`] says which child task the event belongs to.
    None,
}

impl EventPayload {
    /// The payload's own `taskId` field (see [`TaskField`]).
    pub fn task_field(&self) -> TaskField<'_> {
        match self {
            Self::TaskStart(e) => TaskField::Required(&e.task_id),
            Self::TaskComplete(e) => TaskField::Required(&e.task_id),
            Self::TaskCancel(e) => TaskField::Required(&e.task_id),
            Self::TaskFail(e) => TaskField::Required(&e.task_id),
            _ => match self.task_slot() {
                Some(slot) => TaskField::Optional(slot.as_deref()),
                None => TaskField::None,
            },
        }
    }

    fn task_slot(&self) -> Option<&Option<String>> {
        match self {
            Self::RequestSteer(e) => Some(&e.task_id),
            Self::ReasoningStart(e) => Some(&e.task_id),
            Self::ReasoningSnapshot(e) => Some(&e.task_id),
            Self::ContentStart(e) => Some(&e.task_id),
            Self::ContentSnapshot(e) => Some(&e.task_id),
            Self::ToolStart(e) => Some(&e.task_id),
            Self::ActionStart(e) => Some(&e.task_id),
            Self::SourceSnapshot(e) => Some(&e.task_id),
            _ => None,
        }
    }

    /// The optional `taskId` field of payload types that have one (leaf starts, text snapshots,
    /// `request.steer`); `None` for the others.
    pub fn task_slot_mut(&mut self) -> Option<&mut Option<String>> {
        match self {
            Self::RequestSteer(e) => Some(&mut e.task_id),
            Self::ReasoningStart(e) => Some(&mut e.task_id),
            Self::ReasoningSnapshot(e) => Some(&mut e.task_id),
            Self::ContentStart(e) => Some(&mut e.task_id),
            Self::ContentSnapshot(e) => Some(&mut e.task_id),
            Self::ToolStart(e) => Some(&mut e.task_id),
            Self::ActionStart(e) => Some(&mut e.task_id),
            Self::SourceSnapshot(e) => Some(&mut e.task_id),
            _ => None,
        }
    }
}

/// Wire form of an [`Event`]: the field order here is the key order on the wire. Flattening
/// makes serde_json stream the payload fields straight into the same object (no intermediate
/// `Value`).
#[derive(Serialize)]
struct WireOut<'a> {
    seq: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    timestamp: i64,
    #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
    task_id: Option<&'a str>,
    #[serde(flatten)]
    payload: PayloadFields<'a>,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireOut {
            seq: self.seq,
            kind: self.type_name(),
            timestamp: self.timestamp,
            // A payload's own field wins: `taskId` is never written twice.
            task_id: self.task_id.as_deref().filter(|_| self.payload.task_field() == TaskField::None),
            payload: PayloadFields(&self.payload),
        }
        .serialize(s)
    }
}

#[derive(Deserialize)]
struct WireIn {
    /// Absent on the reference's `plan.update`.
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    timestamp: i64,
    #[serde(flatten)]
    payload: EventPayload,
}

/// `taskId` read beside the payload (which, where it has the field, reads it too).
#[derive(Deserialize)]
struct WireTask {
    #[serde(default, rename = "taskId")]
    task_id: Option<String>,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Parsed twice from one buffered value: events are parsed by tests and embedders' clients,
        // never on a run's path.
        let value = serde_json::Value::deserialize(d)?;
        let task = WireTask::deserialize(&value).map_err(serde::de::Error::custom)?;
        let wire = WireIn::deserialize(value).map_err(serde::de::Error::custom)?;
        let task_id = match wire.payload.task_field() {
            TaskField::None => task.task_id,
            _ => None,
        };
        Ok(Self { seq: wire.seq, timestamp: wire.timestamp, payload: wire.payload, task_id })
    }
}

#[cfg(test)]
mod tests;
