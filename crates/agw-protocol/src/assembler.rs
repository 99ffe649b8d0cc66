//! The event assembler: turns semantic [`AgentDelta`]s into numbered [`Event`]s following the
//! block state machine of `docs/contract/sse-events.md` §5.1 and the tool/action rules of §6.
//!
//! One assembler per run. It owns `seq` (1..N, no gaps, `plan.update` included), the open
//! reasoning/content block (at most one of them is open at a time, since each closes the
//! other), the open tools and actions, the active task, and the content block of the current
//! model turn (what a guard's revoke withdraws). It never blocks and never does I/O; the caller
//! writes the events it appends (see [`crate::sse::write_event`]).
//!
//! Timestamps: the clock is read at most once per call, lazily (calls that emit nothing do not
//! read it), and every event produced by that call shares the value. Timestamps never decrease
//! within a run even if the clock steps back.
//!
//! A [`ProtocolError`] leaves the assembler unchanged and emits nothing; the caller decides how
//! to end the run (normally [`Assembler::fail`] with [`ErrorCode::Internal`]).

mod calls;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::delta::{ActionStartMeta, AgentDelta, ChildEnd, ChildTask, ToolStartMeta};
use crate::event::RunTotals;
use crate::event::{
    ActionArgs, ActionEnd, ActionResult, ActionStart, AgentHandoff, ChatStart, ContentDelta, ContentEnd, ContentRevoke,
    ContentStart, ErrorCode, Event, EventPayload, GuardBlock, GuardWarning, PlanTask, PlanUpdate, ReasoningDelta,
    ReasoningEnd, ReasoningStart, RequestQuery, RequestSteer, RunCancel, RunComplete, RunError, RunErrorInfo,
    RunResume, RunStart, TaskCancel, TaskComplete, TaskError, TaskFail, TaskStart, ToolArgs, ToolEnd, ToolProgress,
    ToolResult, ToolStart,
};
use crate::guard::{GuardNotice, GuardStage, Revocation, STATUS_BLOCK_AND_REVOKE, STATUS_SAFETY_WARNING};
use crate::ids;
use crate::usage::{PriceTable, RunUsage};
use calls::{ArgsStep, Calls};

/// Source of event timestamps (epoch ms). Injected so tests can script time.
pub trait Clock: Send {
    /// Current time in epoch milliseconds. The assembler reads it at most once per call and never
    /// lets timestamps go backwards, so a clock that steps back is harmless.
    fn now_ms(&mut self) -> i64;
}

/// Wall-clock milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&mut self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// Any `FnMut() -> i64` is a clock (handy for scripted tests).
impl<F: FnMut() -> i64 + Send> Clock for F {
    fn now_ms(&mut self) -> i64 {
        self()
    }
}

/// Tool calls vs action calls, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A `tool.*` call (backend, frontend or unknown tool).
    Tool,
    /// An `action.*` call (an ACTION tool, performed by the client).
    Action,
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tool => "tool",
            Self::Action => "action",
        })
    }
}

/// A delta that the block state machine cannot accept (contract §6.6). Nothing was emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A delta arrived after the terminal event (`run.complete` / `run.error`).
    #[error("run already finished")]
    Finished,
    /// An argument fragment for a call that has already ended.
    #[error("{kind} {id}: arguments after the call ended")]
    ArgsAfterEnd {
        /// Tool or action.
        kind: CallKind,
        /// The call id.
        id: String,
    },
    /// An end or a result for a call id that never had an argument fragment.
    #[error("{kind} {id}: never started")]
    NotStarted {
        /// Tool or action.
        kind: CallKind,
        /// The call id.
        id: String,
    },
    /// A second end for the same call.
    #[error("{kind} {id}: already ended")]
    AlreadyEnded {
        /// Tool or action.
        kind: CallKind,
        /// The call id.
        id: String,
    },
    /// A second result for the same call.
    #[error("{kind} {id}: result already emitted")]
    DuplicateResult {
        /// Tool or action.
        kind: CallKind,
        /// The call id.
        id: String,
    },
    /// `task.start` before any `plan.update` in this stream.
    #[error("task {task_id}: task.start without an active plan in this stream")]
    TaskWithoutPlan {
        /// The task that was to start.
        task_id: String,
    },
    /// `task.start` while another task is still active (at most one task is active).
    #[error("task {task_id}: task.start while task {active} is active")]
    TaskAlreadyActive {
        /// The task that was to start.
        task_id: String,
        /// The task still active.
        active: String,
    },
    /// [`AgentDelta::Awaiting`] carrying another event type.
    #[error("{0} is not an awaiting.* event")]
    NotAwaiting(&'static str),
    /// A task end (complete, cancel, fail) for a task that is not the active one.
    #[error("task {task_id}: not the active task")]
    TaskNotActive {
        /// The task the delta named.
        task_id: String,
    },
    /// A child task's delta or end for a child that is not open.
    #[error("child task {task_id}: not open")]
    ChildNotOpen {
        /// The child task the delta named.
        task_id: String,
    },
    /// A child task started with the id of a task already open.
    #[error("child task {task_id}: already open")]
    ChildAlreadyOpen {
        /// The child task that was to start.
        task_id: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Reasoning,
    Content,
}

#[derive(Debug)]
struct OpenText {
    kind: TextKind,
    id: String,
}

/// How a task ends.
enum TaskEnd {
    Complete,
    Cancel,
    Fail(TaskError),
}

/// The result of a tool or action call that a cancelled run never answered.
pub const CANCELLED_RESULT: &str = r#"{"executed":false,"reason":"cancelled"}"#;

/// How many reasoning and content blocks a run has opened ([`Assembler::block_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCounts {
    /// Reasoning blocks (`{runId}_r_{n}`).
    pub reasoning: u32,
    /// Content blocks (`{runId}_c_{n}`).
    pub content: u32,
}

/// The per-run event assembler (see the module docs).
///
/// Feed it the bootstrap once, then one [`AgentDelta`] per [`push`](Self::push), then end the run
/// with [`complete`](Self::complete) or [`fail`](Self::fail); each call appends the events it
/// produced, ready for [`crate::sse::write_event`].
///
/// ```
/// use agw_protocol::{AgentDelta, Assembler, Event, EventPayload, QueryRequest};
///
/// // A scripted clock; a server passes `Box::new(SystemClock)`.
/// let mut assembler = Assembler::new("run-1", "chat-1", Box::new(|| 1_771_000_000_000_i64));
/// let mut events = Vec::new();
///
/// let query = QueryRequest { message: Some("Hi".into()), ..QueryRequest::default() };
/// assembler.bootstrap(query.to_event("run-1", "chat-1"), None, &mut events);
/// assembler.push(AgentDelta::Content("Hello".into()), &mut events)?;
/// assembler.push(AgentDelta::Content(", world".into()), &mut events)?;
/// assembler.complete("stop", &mut events);
///
/// let types: Vec<&str> = events.iter().map(Event::type_name).collect();
/// assert_eq!(
///     types,
///     ["request.query", "run.start", "content.start", "content.delta", "content.delta", "content.end", "run.complete"]
/// );
/// assert_eq!(events[3].seq, 4);
/// let EventPayload::ContentDelta(delta) = &events[3].payload else { unreachable!() };
/// assert_eq!((delta.content_id.as_str(), delta.delta.as_str()), ("run-1_c_1", "Hello"));
/// # Ok::<(), agw_protocol::ProtocolError>(())
/// ```
pub struct Assembler {
    run_id: String,
    chat_id: String,
    clock: Box<dyn Clock>,
    next_seq: u64,
    /// Timestamp of the current call, once read.
    call_ts: Option<i64>,
    last_ts: i64,
    text: Option<OpenText>,
    /// A stage marker arrived while a text block was open: the next text delta rotates the id.
    stage_boundary: bool,
    /// The content block the current model turn opened last (open or not): what a revoke
    /// withdraws and an output warning names. `None` until the turn streams content.
    turn_content: Option<String>,
    reasoning_blocks: u32,
    content_blocks: u32,
    tools: Calls,
    actions: Calls,
    plan_seen: bool,
    active_task: Option<String>,
    finished: bool,
    /// Every model call's usage so far; on the terminal event.
    usage: RunUsage,
    /// The answer as JSON (structured output), for `run.complete`.
    output: Option<serde_json::Value>,
    /// Prices the terminal event's `cost` is computed with.
    prices: Arc<PriceTable>,
    /// Block ids are `{id_base}_c_{n}`: `None` for the run id; for a child task the parent's
    /// base and the task id (so a child's blocks never share an id with the run's).
    id_base: Option<String>,
    /// `Some(task id)`: this assembler assembles a child task's lane; every event it emits is
    /// tagged with it, and the child's own plan tasks produce no `task.*` events.
    lane: Option<String>,
    /// Open child tasks, in start order: each assembles its own blocks and calls.
    children: Vec<(String, Box<Assembler>)>,
}

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("run_id", &self.run_id)
            .field("next_seq", &self.next_seq)
            .field("text", &self.text)
            .field("active_task", &self.active_task)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Assembler {
    /// A fresh assembler for one run; the first event it emits gets seq 1. `run_id` and
    /// `chat_id` are written into the events that carry them; `clock` stamps every event.
    pub fn new(run_id: impl Into<String>, chat_id: impl Into<String>, clock: Box<dyn Clock>) -> Self {
        Self {
            id_base: None,
            run_id: run_id.into(),
            chat_id: chat_id.into(),
            clock,
            next_seq: 1,
            call_ts: None,
            last_ts: i64::MIN,
            text: None,
            stage_boundary: false,
            turn_content: None,
            reasoning_blocks: 0,
            content_blocks: 0,
            tools: Calls::new(CallKind::Tool),
            actions: Calls::new(CallKind::Action),
            plan_seen: false,
            active_task: None,
            finished: false,
            output: None,
            usage: RunUsage::default(),
            prices: Arc::default(),
            lane: None,
            children: Vec::new(),
        }
    }

    /// Prices the terminal event's `cost` is computed with (none by default: no `cost`).
    pub fn with_prices(mut self, prices: Arc<PriceTable>) -> Self {
        self.prices = prices;
        self
    }

    /// The run's usage so far: every [`AgentDelta::Usage`] pushed, summed per model.
    pub fn usage(&self) -> &RunUsage {
        &self.usage
    }

    /// `usage` and `cost` as the terminal event will carry them (default while no call reported
    /// usage).
    pub fn totals(&self) -> RunTotals {
        if self.usage.is_empty() {
            return RunTotals::default();
        }
        RunTotals { usage: Some(self.usage.clone()), cost: self.usage.cost(&self.prices) }
    }

    /// An assembler that continues a run another process started (durable waiting): its first
    /// event gets `next_seq`; `ended_tools` are the run's tool calls that were ended but not
    /// answered when it stopped, `open_actions` its actions still open — a later result (or
    /// [`Self::cancel`]) answers them. No `request.query`/`run.start` again: the run has begun.
    pub fn resumed(
        run_id: impl Into<String>,
        chat_id: impl Into<String>,
        clock: Box<dyn Clock>,
        next_seq: u64,
        ended_tools: &[String],
        open_actions: &[String],
    ) -> Self {
        let mut assembler = Self::new(run_id, chat_id, clock);
        assembler.next_seq = next_seq.max(1);
        for id in ended_tools {
            assembler.tools.start(id);
            assembler.tools.end(id);
        }
        for id in open_actions {
            assembler.actions.start(id);
        }
        assembler
    }

    /// How many reasoning and content blocks the run opened so far (their ids are numbered
    /// by these counters): what a run resumed in another process continues from
    /// ([`Self::with_block_counts`]).
    pub fn block_counts(&self) -> BlockCounts {
        BlockCounts { reasoning: self.reasoning_blocks, content: self.content_blocks }
    }

    /// Continues the block counters of a run resumed in another process, so that its new
    /// blocks never reuse an id its client was shown.
    pub fn with_block_counts(mut self, counts: BlockCounts) -> Self {
        self.reasoning_blocks = counts.reasoning;
        self.content_blocks = counts.content;
        self
    }

    /// `run.resume` (crash recovery): the run goes on in this process. `shown` is what the
    /// process that stopped had numbered: the blocks it opened after `durable` (the counters
    /// when its history was last complete) are named as superseded; `discard_from` is the
    /// first seq after that point. Call once, before the resumed run's first delta.
    pub fn resume_run(
        &mut self,
        attempt: u32,
        discard_from: u64,
        durable: BlockCounts,
        shown: BlockCounts,
        task_ids: Vec<String>,
        out: &mut Vec<Event>,
    ) {
        if self.finished {
            return;
        }
        let base = self.id_base().to_owned();
        let content_ids = (durable.content + 1..=shown.content).map(|n| ids::content_id(&base, n)).collect();
        let reasoning_ids = (durable.reasoning + 1..=shown.reasoning).map(|n| ids::reasoning_id(&base, n)).collect();
        let discard_from = discard_from.min(self.next_seq);
        let resume =
            RunResume { run_id: self.run_id.clone(), attempt, discard_from, content_ids, reasoning_ids, task_ids };
        self.emit(resume, out);
    }

    /// What block ids begin with (see `id_base`).
    fn id_base(&self) -> &str {
        self.id_base.as_deref().unwrap_or(&self.run_id)
    }

    /// The run whose events this assembler numbers.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The chat written into `run.start` and `plan.update`.
    pub fn chat_id(&self) -> &str {
        &self.chat_id
    }

    /// The run's structured answer so far ([`AgentDelta::Output`]), for `run.complete`.
    pub fn output(&self) -> Option<&serde_json::Value> {
        self.output.as_ref()
    }

    /// True once a terminal event (`run.complete` / `run.error`) was emitted: later calls emit
    /// nothing ([`Self::push`] returns [`ProtocolError::Finished`]).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The task started by the last `task.start` and not ended yet; `None` outside a task.
    /// Leaf `*.start` events carry it as `taskId`.
    pub fn active_task(&self) -> Option<&str> {
        self.active_task.as_deref()
    }

    /// The seq the next event will get (= number of events emitted + 1).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// request.query (seq 1), chat.start (only if Some), run.start. Call once, before `push`.
    pub fn bootstrap(&mut self, query: RequestQuery, chat_start: Option<ChatStart>, out: &mut Vec<Event>) {
        if self.finished {
            return;
        }
        self.call_ts = None;
        self.emit(query, out);
        if let Some(chat_start) = chat_start {
            self.emit(chat_start, out);
        }
        self.emit(RunStart { run_id: self.run_id.clone(), chat_id: self.chat_id.clone() }, out);
    }

    /// Applies one delta. On error nothing is emitted and the state is unchanged.
    pub fn push(&mut self, delta: AgentDelta, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        if self.finished {
            return Err(ProtocolError::Finished);
        }
        self.call_ts = None;
        match delta {
            AgentDelta::StageMarker(_) => {
                self.stage_boundary = true;
                self.turn_content = None;
            }
            AgentDelta::Reasoning(text) => self.text_delta(TextKind::Reasoning, text, out),
            AgentDelta::Content(text) => self.text_delta(TextKind::Content, text, out),
            AgentDelta::Citation(citation) => self.citation(citation, out),
            AgentDelta::Revoke(revocation) => self.revoke(revocation, out),
            AgentDelta::GuardWarning(notice) => self.guard_warning(notice, out),
            AgentDelta::GuardBlock(notice) => {
                self.close_text(out);
                self.emit(guard_block(notice), out);
            }
            AgentDelta::ToolArgs { tool_id, meta, delta } => self.tool_args(tool_id, meta, delta, out)?,
            AgentDelta::ToolEnd { tool_id } => {
                self.tools.check_end(&tool_id)?;
                self.close_text(out);
                self.tools.end(&tool_id);
                self.emit(ToolEnd { tool_id }, out);
            }
            AgentDelta::ToolProgress { tool_id, delta } => {
                self.tools.check_result(&tool_id)?;
                if !delta.is_empty() {
                    self.close_text(out);
                    self.emit(ToolProgress { tool_id, delta }, out);
                }
            }
            AgentDelta::ToolResult { tool_id, result } => {
                let still_open = self.tools.check_result(&tool_id)?;
                self.close_text(out);
                if still_open {
                    self.tools.end(&tool_id);
                    self.emit(ToolEnd { tool_id: tool_id.clone() }, out);
                }
                self.tools.record_result(&tool_id);
                // The model reads the result in its next turn.
                self.turn_content = None;
                self.emit(ToolResult { tool_id, result }, out);
            }
            AgentDelta::ActionArgs { action_id, meta, delta } => {
                self.action_args(action_id, meta, delta, out)?;
            }
            AgentDelta::ActionEnd { action_id } => {
                self.actions.check_end(&action_id)?;
                self.close_text(out);
                self.actions.end(&action_id);
                self.emit(ActionEnd { action_id }, out);
            }
            AgentDelta::ActionResult { action_id, result } => self.action_result(action_id, result, out)?,
            AgentDelta::PlanUpdate { plan_id, plan } => self.plan_update(plan_id, plan, out),
            AgentDelta::TaskStart { task_id, description } => self.task_start(task_id, description, out)?,
            AgentDelta::TaskComplete { task_id } => self.task_end(task_id, TaskEnd::Complete, out)?,
            AgentDelta::TaskCancel { task_id } => self.task_end(task_id, TaskEnd::Cancel, out)?,
            AgentDelta::TaskResume { task_id } => {
                // Its `task.start` (and the plan before it) streamed in the process that stopped.
                self.plan_seen = true;
                self.active_task = Some(task_id);
            }
            AgentDelta::TaskFail { task_id, error } => self.task_end(task_id, TaskEnd::Fail(error), out)?,
            AgentDelta::Usage(call) => self.usage.add(&call.provider, &call.model, &call.usage),
            AgentDelta::Steer { steer_id, message, request_id } => self.steer(steer_id, message, request_id, out),
            AgentDelta::Awaiting(payload) => match payload {
                EventPayload::AwaitingAsk(_) | EventPayload::AwaitingAnswer(_) | EventPayload::AwaitingExpired(_) => {
                    self.close_text(out);
                    self.emit(payload, out);
                }
                other => return Err(ProtocolError::NotAwaiting(other.type_name())),
            },
            AgentDelta::Compact(mut compact) => {
                self.close_text(out);
                self.turn_content = None;
                compact.run_id.clone_from(&self.run_id);
                self.emit(compact, out);
            }
            AgentDelta::Fallback(mut fallback) => {
                // A turn starts again on the next model: what follows is a new turn's text.
                self.close_text(out);
                self.turn_content = None;
                fallback.run_id.clone_from(&self.run_id);
                self.emit(fallback, out);
            }
            AgentDelta::Handoff { from_agent_key, to_agent_key, tool_id } => {
                self.close_text(out);
                self.turn_content = None;
                let run_id = self.run_id.clone();
                self.emit(AgentHandoff { run_id, from_agent_key, to_agent_key, tool_id }, out);
            }
            AgentDelta::Output(output) => self.output = Some(output),
            AgentDelta::ChildStart(child) => self.child_start(child, out)?,
            AgentDelta::Child { task_id, delta } => self.child_delta(&task_id, *delta, out)?,
            AgentDelta::ChildEnd { task_id, end } => self.child_end(&task_id, end, out)?,
        }
        Ok(())
    }

    /// Closes all open blocks (reasoning/content end, every open tool → tool.end, every open
    /// action → action.end), `task.complete` for an active task, then
    /// `run.complete{runId, finishReason}`. No-op after a terminal event.
    pub fn complete(&mut self, finish_reason: &str, out: &mut Vec<Event>) {
        if self.finished {
            return;
        }
        self.call_ts = None;
        self.end_children(&ChildEnd::Cancel, out);
        self.close_all(out);
        if let Some(task_id) = self.active_task.take() {
            self.emit(TaskComplete { task_id }, out);
        }
        let run_id = self.run_id.clone();
        let output = self.output.take();
        self.emit(RunComplete { run_id, finish_reason: finish_reason.to_owned(), output, totals: self.totals() }, out);
        self.finished = true;
    }

    /// Closes open blocks, `task.fail` for an active task (its error carries the run error's
    /// code and message), then `run.error`. No-op after a terminal event.
    pub fn fail(&mut self, error: RunErrorInfo, out: &mut Vec<Event>) {
        if self.finished {
            return;
        }
        self.call_ts = None;
        self.end_children(&ChildEnd::Fail(TaskError::new(error.code.as_str(), error.message.clone())), out);
        self.close_all(out);
        if let Some(task_id) = self.active_task.take() {
            let task_error = TaskError::new(error.code.as_str(), error.message.clone());
            self.emit(TaskFail { task_id, error: task_error }, out);
        }
        self.emit(RunError { run_id: self.run_id.clone(), error, totals: self.totals() }, out);
        self.finished = true;
    }

    /// Ends an interrupted run: closes open blocks, gives every call that has no result yet the
    /// result [`CANCELLED_RESULT`] (so the history pairs every call with a result and the next
    /// run's request to the provider stays valid), `task.cancel` for an active task, then
    /// `run.cancel{runId}`. No-op after a terminal event.
    pub fn cancel(&mut self, out: &mut Vec<Event>) {
        if self.finished {
            return;
        }
        self.call_ts = None;
        self.end_children(&ChildEnd::Cancel, out);
        self.close_all(out);
        self.answer_cancelled(out);
        if let Some(task_id) = self.active_task.take() {
            self.emit(TaskCancel { task_id }, out);
        }
        self.emit(RunCancel { run_id: self.run_id.clone(), totals: self.totals() }, out);
        self.finished = true;
    }

    /// Gives every call that has no result yet the result [`CANCELLED_RESULT`].
    fn answer_cancelled(&mut self, out: &mut Vec<Event>) {
        for tool_id in self.tools.unanswered() {
            self.tools.record_result(&tool_id);
            self.emit(ToolResult { tool_id, result: CANCELLED_RESULT.to_owned() }, out);
        }
        for action_id in self.actions.unanswered() {
            self.actions.record_result(&action_id);
            let result = serde_json::from_str(CANCELLED_RESULT).unwrap_or(Value::Null);
            self.emit(ActionResult { action_id, result }, out);
        }
    }

    /// Convenience for turning a [`ProtocolError`] into the run's `run.error`.
    pub fn fail_protocol(&mut self, error: &ProtocolError, out: &mut Vec<Event>) {
        self.fail(RunErrorInfo::new(ErrorCode::Internal, error.to_string(), false), out);
    }

    // -- text -------------------------------------------------------------------------------

    fn text_delta(&mut self, kind: TextKind, delta: String, out: &mut Vec<Event>) {
        // Empty text carries nothing (whitespace-only text does, and is streamed verbatim).
        if delta.is_empty() {
            return;
        }
        let id = self.text_block(kind, out);
        match kind {
            TextKind::Reasoning => self.emit(ReasoningDelta { reasoning_id: id, delta }, out),
            TextKind::Content => self.emit(ContentDelta { content_id: id, delta }, out),
        }
    }

    /// `content.citation` in the open content block, opening one when none is (a marker before
    /// any text).
    fn citation(&mut self, citation: crate::citation::Citation, out: &mut Vec<Event>) {
        let event = crate::event::ContentCitation {
            content_id: self.text_block(TextKind::Content, out),
            index: citation.index,
            record: citation.record,
            offset: citation.offset,
            tool_id: citation.tool_id,
        };
        self.emit(event, out);
    }

    /// `content.revoke` of the current turn's content block, after the open text block ends; a
    /// turn that streamed no content gets `guard.block` (stage `output`) instead, since nothing
    /// was shown that could be withdrawn. A second revoke in the turn finds nothing to withdraw.
    fn revoke(&mut self, revocation: Revocation, out: &mut Vec<Event>) {
        self.close_text(out);
        let Revocation { guard, rule, reason } = revocation;
        match self.turn_content.take() {
            Some(content_id) => {
                let stage = GuardStage::Output;
                let status_code = STATUS_BLOCK_AND_REVOKE;
                self.emit(ContentRevoke { content_id, stage, guard, rule, reason, status_code }, out);
            }
            None => {
                let notice = GuardNotice { stage: GuardStage::Output, guard, rule, message: reason, tool_id: None };
                self.emit(guard_block(notice), out);
            }
        }
    }

    /// `guard.warning`: it ends no text block (the answer it warns about goes on streaming in
    /// the same block); at stage `output` it names the turn's content block.
    fn guard_warning(&mut self, notice: GuardNotice, out: &mut Vec<Event>) {
        let GuardNotice { stage, guard, rule, message, tool_id } = notice;
        let content_id = if stage == GuardStage::Output { self.turn_content.clone() } else { None };
        let status_code = STATUS_SAFETY_WARNING;
        self.emit(GuardWarning { stage, guard, rule, message, content_id, tool_id, status_code }, out);
    }

    /// The id of the text block of `kind` that the next text belongs to: the open one, unless a
    /// stage boundary passed or the other kind is open (then a new one opens).
    fn text_block(&mut self, kind: TextKind, out: &mut Vec<Event>) -> String {
        let continues = !self.stage_boundary && self.text.as_ref().is_some_and(|t| t.kind == kind);
        if !continues {
            self.close_text(out);
            self.open_text(kind, out);
        }
        self.text.as_ref().map(|open| open.id.clone()).unwrap_or_default()
    }

    /// Opens a text block with a fresh id. Ids are never reused, so a block closed by the other
    /// kind of text is not reopened: the next block gets the next number.
    fn open_text(&mut self, kind: TextKind, out: &mut Vec<Event>) {
        self.stage_boundary = false;
        let run_id = self.run_id.clone();
        let task_id = self.active_task.clone();
        let id = match kind {
            TextKind::Reasoning => {
                self.reasoning_blocks += 1;
                let id = ids::reasoning_id(self.id_base(), self.reasoning_blocks);
                self.emit(ReasoningStart { reasoning_id: id.clone(), run_id, task_id }, out);
                id
            }
            TextKind::Content => {
                self.content_blocks += 1;
                let id = ids::content_id(self.id_base(), self.content_blocks);
                self.turn_content = Some(id.clone());
                self.emit(ContentStart { content_id: id.clone(), run_id, task_id }, out);
                id
            }
        };
        self.text = Some(OpenText { kind, id });
    }

    fn close_text(&mut self, out: &mut Vec<Event>) {
        match self.text.take() {
            Some(OpenText { kind: TextKind::Reasoning, id }) => {
                self.emit(ReasoningEnd { reasoning_id: id }, out);
            }
            Some(OpenText { kind: TextKind::Content, id }) => {
                self.emit(ContentEnd { content_id: id }, out);
            }
            None => {}
        }
    }

    /// Text block, then every open tool, then every open action (each in start order).
    fn close_all(&mut self, out: &mut Vec<Event>) {
        self.close_text(out);
        for tool_id in self.tools.end_all() {
            self.emit(ToolEnd { tool_id }, out);
        }
        for action_id in self.actions.end_all() {
            self.emit(ActionEnd { action_id }, out);
        }
    }

    // -- tools and actions ------------------------------------------------------------------

    fn tool_args(
        &mut self,
        tool_id: String,
        meta: ToolStartMeta,
        delta: String,
        out: &mut Vec<Event>,
    ) -> Result<(), ProtocolError> {
        match self.tools.check_args(&tool_id)? {
            ArgsStep::Start => {
                self.close_text(out);
                // Only this fragment has been seen, so it alone decides toolParams.
                let tool_params = if delta.is_empty() { None } else { serde_json::from_str::<Value>(&delta).ok() };
                let (tool_key, tool_timeout) = match meta.frontend {
                    Some(f) => (Some(f.tool_key), Some(f.tool_timeout.max(1))),
                    None => (None, None),
                };
                let start = ToolStart {
                    tool_id: tool_id.clone(),
                    run_id: self.run_id.clone(),
                    task_id: self.active_task.clone(),
                    tool_name: non_blank(meta.tool_name),
                    tool_type: non_blank(meta.tool_type),
                    tool_api: meta.tool_api.and_then(non_blank),
                    tool_params,
                    description: meta.description.and_then(non_blank),
                    tool_key,
                    tool_timeout,
                };
                self.tools.start(&tool_id);
                self.emit(start, out);
            }
            ArgsStep::Continue if delta.is_empty() => return Ok(()),
            ArgsStep::Continue => self.close_text(out),
        }
        if !delta.is_empty() {
            let chunk_index = self.tools.next_chunk(&tool_id);
            self.emit(ToolArgs { tool_id, delta, chunk_index }, out);
        }
        Ok(())
    }

    fn action_args(
        &mut self,
        action_id: String,
        meta: ActionStartMeta,
        delta: String,
        out: &mut Vec<Event>,
    ) -> Result<(), ProtocolError> {
        match self.actions.check_args(&action_id)? {
            ArgsStep::Start => {
                self.close_text(out);
                let start = ActionStart {
                    action_id: action_id.clone(),
                    run_id: self.run_id.clone(),
                    task_id: self.active_task.clone(),
                    action_name: non_blank(meta.action_name),
                    description: meta.description.and_then(non_blank),
                };
                self.actions.start(&action_id);
                self.emit(start, out);
            }
            ArgsStep::Continue if delta.is_empty() => return Ok(()),
            ArgsStep::Continue => self.close_text(out),
        }
        if !delta.is_empty() {
            // action.args has no chunkIndex, but the counter is kept for symmetry with tools.
            self.actions.next_chunk(&action_id);
            self.emit(ActionArgs { action_id, delta }, out);
        }
        Ok(())
    }

    fn action_result(&mut self, action_id: String, result: Value, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        let still_open = self.actions.check_result(&action_id)?;
        self.close_text(out);
        if still_open {
            self.actions.end(&action_id);
            self.emit(ActionEnd { action_id: action_id.clone() }, out);
        }
        self.actions.record_result(&action_id);
        self.turn_content = None;
        self.emit(ActionResult { action_id, result }, out);
        Ok(())
    }

    // -- steers ------------------------------------------------------------------------------

    /// `request.steer` (successor protocol): an open text block is ended first, and the next
    /// text opens a new one; open tools and actions are left alone (a mode only steers between
    /// model turns, when every executed call has its result).
    fn steer(&mut self, steer_id: String, message: String, request_id: Option<String>, out: &mut Vec<Event>) {
        self.close_text(out);
        self.turn_content = None;
        let steer = RequestSteer {
            request_id,
            chat_id: self.chat_id.clone(),
            run_id: self.run_id.clone(),
            steer_id,
            message,
            role: "user".to_owned(),
            task_id: self.active_task.clone(),
        };
        self.emit(steer, out);
    }

    // -- plan and tasks ---------------------------------------------------------------------

    /// `plan.update` is a non-text event: it closes an open text block (so the next text gets a
    /// new id) but leaves tools and actions open.
    fn plan_update(&mut self, plan_id: String, plan: Vec<PlanTask>, out: &mut Vec<Event>) {
        self.close_text(out);
        let chat_id = self.chat_id.clone();
        self.emit(PlanUpdate { plan_id, chat_id, plan }, out);
        self.plan_seen = true;
    }

    fn task_start(
        &mut self,
        task_id: String,
        description: Option<String>,
        out: &mut Vec<Event>,
    ) -> Result<(), ProtocolError> {
        if !self.plan_seen {
            return Err(ProtocolError::TaskWithoutPlan { task_id });
        }
        if let Some(active) = &self.active_task {
            return Err(ProtocolError::TaskAlreadyActive { task_id, active: active.clone() });
        }
        // Blocks opened before the task must not appear to belong to it.
        self.close_all(out);
        self.turn_content = None;
        if self.lane.is_none() {
            let start = TaskStart {
                task_id: task_id.clone(),
                run_id: self.run_id.clone(),
                task_name: Some(task_id.clone()),
                description: description.and_then(non_blank),
                sub_agent_key: None,
                tool_id: None,
            };
            self.emit(start, out);
        }
        // A child's own plan tasks show in its `plan.update`s; its events carry the child's id.
        self.active_task = Some(task_id);
        Ok(())
    }

    fn task_end(&mut self, task_id: String, end: TaskEnd, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        if self.active_task.as_deref() != Some(task_id.as_str()) {
            return Err(ProtocolError::TaskNotActive { task_id });
        }
        self.close_all(out);
        self.turn_content = None;
        self.active_task = None;
        if self.lane.is_some() {
            return Ok(());
        }
        match end {
            TaskEnd::Complete => self.emit(TaskComplete { task_id }, out),
            TaskEnd::Cancel => self.emit(TaskCancel { task_id }, out),
            TaskEnd::Fail(error) => self.emit(TaskFail { task_id, error }, out),
        }
        Ok(())
    }

    // -- emission ---------------------------------------------------------------------------

    fn now(&mut self) -> i64 {
        if let Some(ts) = self.call_ts {
            return ts;
        }
        let ts = self.clock.now_ms().max(self.last_ts);
        self.last_ts = ts;
        self.call_ts = Some(ts);
        ts
    }

    fn emit(&mut self, payload: impl Into<EventPayload>, out: &mut Vec<Event>) {
        let timestamp = self.now();
        let seq = self.next_seq;
        self.next_seq += 1;
        match &self.lane {
            // The run's own events (nearly all): built in place, as before child tasks existed.
            None => out.push(Event { seq, timestamp, payload: payload.into(), task_id: None }),
            // A child's lane tags every event it emits.
            Some(lane) => {
                let mut event = Event { seq, timestamp, payload: payload.into(), task_id: None };
                event.tag_task(lane);
                out.push(event);
            }
        }
    }

    // -- child tasks ------------------------------------------------------------------------

    /// `task.start` of a child task; a non-text event of this lane, so it closes an open text
    /// block and leaves tools open (the invoking call is still running).
    fn child_start(&mut self, child: ChildTask, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        if self.children.iter().any(|(id, _)| *id == child.task_id) || self.active_task.as_ref() == Some(&child.task_id)
        {
            return Err(ProtocolError::ChildAlreadyOpen { task_id: child.task_id });
        }
        self.close_text(out);
        let start = TaskStart {
            task_id: child.task_id.clone(),
            run_id: self.run_id.clone(),
            task_name: Some(child.name()),
            description: child.description.and_then(non_blank),
            sub_agent_key: child.sub_agent_key,
            tool_id: child.tool_id,
        };
        self.emit(start, out);
        // The child's clock is never read for what reaches the stream: its events are
        // renumbered and restamped here.
        let mut lane = Assembler::new(self.run_id.clone(), self.chat_id.clone(), Box::new(|| 0_i64));
        lane.id_base = Some(format!("{}_{}", self.id_base(), child.task_id));
        lane.lane = Some(child.task_id.clone());
        self.children.push((child.task_id, Box::new(lane)));
        Ok(())
    }

    fn child_index(&self, task_id: &str) -> Result<usize, ProtocolError> {
        self.children
            .iter()
            .position(|(id, _)| id == task_id)
            .ok_or_else(|| ProtocolError::ChildNotOpen { task_id: task_id.to_owned() })
    }

    fn child_delta(&mut self, task_id: &str, delta: AgentDelta, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        let index = self.child_index(task_id)?;
        if let Some(call) = delta.usage() {
            self.usage.add(&call.provider, &call.model, &call.usage);
        }
        let from = out.len();
        self.children[index].1.push(delta, out)?;
        self.renumber(from, out);
        Ok(())
    }

    fn child_end(&mut self, task_id: &str, end: ChildEnd, out: &mut Vec<Event>) -> Result<(), ProtocolError> {
        let index = self.child_index(task_id)?;
        let (task_id, lane) = self.children.remove(index);
        self.close_child(task_id, lane, end, out);
        Ok(())
    }

    /// Ends every open child the same way (the run ends while they run).
    fn end_children(&mut self, end: &ChildEnd, out: &mut Vec<Event>) {
        for (task_id, lane) in std::mem::take(&mut self.children) {
            self.close_child(task_id, lane, end.clone(), out);
        }
    }

    fn close_child(&mut self, task_id: String, mut lane: Box<Assembler>, end: ChildEnd, out: &mut Vec<Event>) {
        let from = out.len();
        lane.end_children(&end, out);
        lane.close_all(out);
        if end == ChildEnd::Cancel {
            lane.answer_cancelled(out);
        }
        self.renumber(from, out);
        match end {
            ChildEnd::Complete => self.emit(TaskComplete { task_id }, out),
            ChildEnd::Cancel => self.emit(TaskCancel { task_id }, out),
            ChildEnd::Fail(error) => self.emit(TaskFail { task_id, error }, out),
        }
    }

    /// Gives `out[from..]`, a child's events, this stream's seqs and this call's timestamp.
    fn renumber(&mut self, from: usize, out: &mut [Event]) {
        if from == out.len() {
            return;
        }
        let timestamp = self.now();
        for event in &mut out[from..] {
            event.seq = self.next_seq;
            event.timestamp = timestamp;
            self.next_seq += 1;
        }
    }
}

/// `guard.block` of a notice (its `message` is the block's `reason`).
fn guard_block(notice: GuardNotice) -> GuardBlock {
    let GuardNotice { stage, guard, rule, message, tool_id } = notice;
    GuardBlock { stage, guard, rule, reason: message, tool_id, status_code: STATUS_BLOCK_AND_REVOKE }
}

fn non_blank(s: String) -> Option<String> {
    if s.trim().is_empty() { None } else { Some(s) }
}

#[cfg(test)]
mod tests;
