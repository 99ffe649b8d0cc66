//! [`Recorder`]: turns a live run into history lines (`docs/contract/memory-jsonl.md` §5), fed as it streams.
//!
//! The recorder reads the events the assembler produced for each delta rather than the deltas
//! themselves, so exactly what was streamed is what gets persisted (text suppressed by a mode
//! never reaches it; whitespace deltas are kept verbatim), with the live ids and timestamps.
//! Deltas are only consulted for what has no event: stage markers and usage.
//!
//! agw decisions (see `docs/compatibility.md`): `_reasoningId` / `_contentId` / `_toolId` /
//! `_actionId` are the ids streamed live (the reference derived `r_`/`c_`/`a_` + MD5 ids), so
//! the replay of a chat repeats the live ids; tool arguments and results are stored verbatim
//! (not trimmed, blank results not rewritten to `null`); a call streamed with empty arguments
//! is still persisted (agw streams its `tool.start`); a steer the run took (`request.steer`) is
//! a user message at its position in the step, `ts` = its event time, with `_steerId` (and
//! `_requestId` when the steer had one), so the next run's model window and the replay see it
//! where the live run did; a content block a guard withdrew (`content.revoke`) keeps its text
//! with `_revoked` (why), and the step keeps its `guard.warning` / `guard.block` events in
//! `_guards`, placed among its messages like compactions.
//!
//! No I/O: the caller appends what [`Recorder::observe`] and [`Recorder::finish`] return.

use std::collections::{HashMap, HashSet};

use agw_protocol::event::{ContentRevoke, ContextCompact, Event, EventPayload, RunTotals};
use agw_protocol::guard::Revocation;
use agw_protocol::history::{
    ApprovalLine, CheckpointLine, GuardEvent, HistoryLine, PendingCall, PendingStep, PlanSnapshot, QueryLine,
    ROLE_ASSISTANT, ROLE_TOOL, RoundCheckpoint, Stage, StepCompaction, StepGuard, StepHandoff, StepLine, StepSegment,
    StoredMessage, StoredToolCall, SubAgentStep, SystemSnapshot,
};
use agw_protocol::request::QueryRequest;
use agw_protocol::{AgentDelta, Clock, SystemClock, ids};
use serde_json::Value;

/// Everything a recorder needs to know about its run up front.
#[derive(Debug, Clone)]
pub struct RecorderInit {
    /// The chat the run belongs to (canonical UUID).
    pub chat_id: String,
    /// The run being recorded; also the fallback `requestId`.
    pub run_id: String,
    /// The request; normalised by the recorder (`requestId` = trimmed value or runId, `chatId`
    /// = the chat, `role` defaulted to `user`, `agentKey` trimmed or `null`).
    pub query: QueryRequest,
    /// Written on the run's first step line.
    pub system: Option<SystemSnapshot>,
    /// Tool names (case-insensitive) persisted with `_actionId` instead of `_toolId`.
    pub action_tools: Vec<String>,
}

/// Records one run. Call [`Self::observe`] once per delta the run emitted, with the events the
/// assembler produced for it, then [`Self::finish`] once with the events of the terminal call
/// (`Assembler::complete` / `fail`) — also for failed or cancelled runs, so that what the client
/// saw is kept.
pub struct Recorder {
    chat_id: String,
    run_id: String,
    query: QueryRequest,
    system: Option<SystemSnapshot>,
    action_tools: HashSet<String>,
    clock: Box<dyn Clock>,
    /// Latest event timestamp seen: flush times never go below it.
    last_ts: i64,
    /// Step lines written so far (the next one gets `seq + 1`).
    seq: i64,
    step: Step,
    /// Names of every call of the run, for results arriving after their call's step.
    call_names: HashMap<String, String>,
    msg_id: String,
    /// A tool result was recorded: the next text block starts a new `_msgId`.
    renew_msg_id: bool,
    /// Approval rule, tool and agent of every `awaiting.ask` seen, by awaiting id.
    asked: HashMap<String, Asked>,
    /// Lines to append now that no step boundary produced (remembered approvals).
    pending: Vec<HistoryLine>,
    /// Usage and cost from the run's terminal event, for its last step line.
    totals: RunTotals,
    /// The run's structured answer from `run.complete`, for its last step line.
    output: Option<serde_json::Value>,
    finished: bool,
    /// Sub-agent tasks running now, each recorded as its own step line when it ends.
    children: Vec<ChildRecord>,
    /// Step lines of children that ended while a sibling still runs, with their start order.
    ended_children: Vec<(u64, HistoryLine)>,
    /// Children started so far (their start order).
    children_started: u64,
    /// Step lines of a round of parallel plan tasks, written with the run's next step.
    held: Vec<HistoryLine>,
    /// Tasks of a round resumed after a crash, with their start order and their step as far
    /// as it was recorded (`None`: nothing was): taken up when each starts again.
    restored: Vec<(String, u64, Option<Step>)>,
}

/// A sub-agent's task being recorded beside the run's own step (docs/multi-agent.md): one step
/// line with `taskId` and `_subAgent`, written when the task ends.
#[derive(Debug)]
struct ChildRecord {
    task_id: String,
    order: u64,
    /// `Some` for a sub-agent; `None` for a plan task run beside others.
    frame: Option<SubAgentStep>,
    started_at: i64,
    step: Step,
    msg_id: String,
    renew_msg_id: bool,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("chat_id", &self.chat_id)
            .field("run_id", &self.run_id)
            .field("seq", &self.seq)
            .field("stage", &self.step.stage)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// The step being assembled.
#[derive(Debug)]
struct Step {
    stage: String,
    messages: Vec<StoredMessage>,
    /// Text blocks not written yet, in start order. Like the reference, a block is written when
    /// the next call starts, a result arrives or the step flushes, and its `_timing` runs until
    /// then.
    text: Vec<TextBlock>,
    /// Calls of this step whose message is not written yet (written at their result, or at the
    /// flush when they never get one).
    calls: Vec<Call>,
    plan: Option<PlanSnapshot>,
    usage: Option<Value>,
    compactions: Vec<StepCompaction>,
    /// The step's `guard.warning` and `guard.block` events (`_guards`).
    guards: Vec<StepGuard>,
    /// The step ended with its agent handing the conversation over (`agent.handoff`).
    handoff: Option<StepHandoff>,
    /// A sub-agent's stages within its one step (see [`PendingStep::segments`]).
    segments: Vec<StepSegment>,
}

impl Step {
    fn new(stage: &str) -> Self {
        Self {
            stage: stage.to_owned(),
            messages: Vec::new(),
            text: Vec::new(),
            calls: Vec::new(),
            plan: None,
            usage: None,
            compactions: Vec::new(),
            guards: Vec::new(),
            handoff: None,
            segments: Vec::new(),
        }
    }
}

/// What an approval question was about: `always` remembers exactly this.
#[derive(Debug)]
struct Asked {
    rule: String,
    tool_name: String,
    agent_key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Reasoning,
    Content,
}

#[derive(Debug)]
struct TextBlock {
    kind: TextKind,
    id: String,
    text: String,
    first_ts: i64,
    msg_id: String,
    /// The citations made in a content block (`_citations`).
    citations: Vec<agw_protocol::citation::Citation>,
    /// A guard withdrew the content block (`_revoked`).
    revoked: Option<Revocation>,
}

#[derive(Debug)]
struct Call {
    id: String,
    name: Option<String>,
    call_type: &'static str,
    arguments: String,
    /// First streamed argument chunk (the start when there is none).
    first_ts: i64,
    msg_id: String,
}

impl Recorder {
    /// A recorder on the system clock.
    pub fn new(init: RecorderInit) -> Self {
        Self::with_clock(init, Box::new(SystemClock))
    }

    /// With an injected clock (flush times: user message `ts`, `updatedAt`).
    pub fn with_clock(init: RecorderInit, clock: Box<dyn Clock>) -> Self {
        let RecorderInit { chat_id, run_id, mut query, system, action_tools } = init;
        query.request_id = Some(query.effective_request_id(&run_id));
        query.chat_id = Some(chat_id.clone());
        query.role = Some(query.effective_role());
        query.agent_key = query.agent_key.as_deref().map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
        Self {
            chat_id,
            run_id,
            query,
            system,
            action_tools: action_tools.iter().map(|t| t.trim().to_lowercase()).collect(),
            clock,
            last_ts: i64::MIN,
            seq: 0,
            step: Step::new(Stage::Oneshot.as_str()),
            call_names: HashMap::new(),
            msg_id: ids::new_msg_id(),
            renew_msg_id: false,
            asked: HashMap::new(),
            pending: Vec::new(),
            totals: RunTotals::default(),
            output: None,
            finished: false,
            children: Vec::new(),
            ended_children: Vec::new(),
            children_started: 0,
            held: Vec::new(),
            restored: Vec::new(),
        }
    }

    /// Continues recording a run that began in another process and waited (durable waiting):
    /// `steps_written` step lines (and the query line, when > 0) are on disk; `step` is the step
    /// the wait interrupted, as [`Self::checkpoint`] captured it.
    pub fn resumed(init: RecorderInit, clock: Box<dyn Clock>, steps_written: i64, step: PendingStep) -> Self {
        let mut recorder = Self::with_clock(init, clock);
        recorder.seq = steps_written.max(0);
        let PendingStep { stage, messages, calls, plan, usage, guards, segments } = step;
        let mut resumed = Step::new(&stage);
        resumed.messages = messages;
        resumed.guards = guards;
        resumed.plan = plan;
        resumed.usage = usage;
        resumed.segments = segments;
        for call in calls {
            if let Some(name) = &call.name {
                recorder.call_names.insert(call.id.clone(), name.clone());
            }
            let call_type = if call.call_type == "action" { "action" } else { "function" };
            let msg_id = if call.msg_id.is_empty() { ids::new_msg_id() } else { call.msg_id };
            resumed.calls.push(Call {
                id: call.id,
                name: call.name,
                call_type,
                arguments: call.arguments,
                first_ts: call.ts,
                msg_id,
            });
        }
        recorder.last_ts = resumed.calls.iter().map(|c| c.first_ts).max().unwrap_or(i64::MIN);
        recorder.step = resumed;
        recorder
    }

    /// The step being recorded, as far as it got, for a run that begins to wait: what
    /// [`Self::resumed`] continues from in a new process. Nothing is written: the step's calls
    /// are still to be answered, and a step line is only written whole.
    pub fn checkpoint(&mut self) -> PendingStep {
        let now = self.now();
        self.write_text(now);
        let step = &self.step;
        PendingStep {
            stage: step.stage.clone(),
            messages: step.messages.clone(),
            calls: step
                .calls
                .iter()
                .map(|c| PendingCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    call_type: c.call_type.to_owned(),
                    arguments: c.arguments.clone(),
                    ts: c.first_ts,
                    msg_id: c.msg_id.clone(),
                })
                .collect(),
            plan: step.plan.clone(),
            usage: step.usage.clone(),
            guards: step.guards.clone(),
            segments: {
                let mut segments = step.segments.clone();
                if let Some(open) = segments.last_mut() {
                    open.plan = step.plan.clone();
                }
                segments
            },
        }
    }

    /// A child task (a plan task running beside others, a sub-agent) as far as it was recorded
    /// (see [`Self::checkpoint`]); `None` when no such task is being recorded.
    pub fn task_checkpoint(&mut self, task_id: &str) -> Option<PendingStep> {
        let index = self.children.iter().position(|c| c.task_id == task_id)?;
        self.swap_child(index);
        let step = self.checkpoint();
        self.swap_child(index);
        Some(step)
    }

    /// The step line of a child task that ended beside others, not written yet (it goes with
    /// its round, or with its last sibling).
    pub fn ended_task(&self, task_id: &str) -> Option<StepLine> {
        let ended = self.ended_children.iter().map(|(_, line)| line).chain(&self.held);
        ended.filter_map(HistoryLine::as_step).find(|s| s.task_id.as_deref() == Some(task_id)).cloned()
    }

    /// Continues recording child tasks begun in another process (crash recovery; a round of
    /// parallel plan tasks, an `agent_invoke` call's sub-agents): the ended tasks' lines are
    /// written with their siblings', as they would have been; each other task's step goes on
    /// from its checkpoint when the task starts again (the calls of its batch are streamed again
    /// then, and recorded anew).
    pub fn resume_round(&mut self, round: &RoundCheckpoint) {
        for (order, task) in (1..).zip(&round.tasks) {
            match &task.ended {
                Some(line) => self.ended_children.push((order, HistoryLine::Step((**line).clone()))),
                None => {
                    let PendingStep { stage, messages, plan, usage, guards, segments, calls: _ } = task.step.clone();
                    // Nothing recorded yet: the task starts afresh, in its place.
                    let step = (!stage.is_empty()).then(|| {
                        let mut step = Step::new(&stage);
                        step.messages = messages;
                        step.plan = plan;
                        step.usage = usage;
                        step.guards = guards;
                        step.segments = segments;
                        step
                    });
                    self.restored.push((task.task_id.clone(), order, step));
                }
            }
        }
        self.children_started = round.tasks.len() as u64;
        if self.restored.is_empty() && round.call_id.is_none() {
            self.ended_children.sort_by_key(|(order, _)| *order);
            self.held.extend(std::mem::take(&mut self.ended_children).into_iter().map(|(_, line)| line));
        }
    }

    /// The run's normalised request and, while the first step line is not written, its system
    /// snapshot: what a run that waits keeps beside [`Self::checkpoint`].
    pub fn query_and_system(&self) -> (&QueryRequest, Option<&SystemSnapshot>) {
        (&self.query, if self.seq == 0 { self.system.as_ref() } else { None })
    }

    /// Feeds one delta and the events it produced. Returns the lines to append now: the query
    /// line plus the first step line when the first step is flushed, later step lines alone.
    pub fn observe(&mut self, delta: &AgentDelta, events: &[Event]) -> Vec<HistoryLine> {
        if self.finished {
            return Vec::new();
        }
        let mut lines = Vec::new();
        match delta {
            AgentDelta::StageMarker(marker) => lines = self.stage_marker(marker),
            AgentDelta::Usage(call) if !call.usage.is_null() => self.step.usage = Some(call.usage.clone()),
            // Its `task.start` does not tell a child (run beside others) from the run's plan task.
            AgentDelta::ChildStart(child) => self.open_child(child),
            AgentDelta::Child { task_id, delta } => {
                if let AgentDelta::StageMarker(marker) = delta.as_ref() {
                    self.child_stage(task_id, marker);
                }
            }
            _ => {}
        }
        for event in events {
            self.apply(event);
        }
        lines
    }

    /// Feeds events whose delta carried nothing else the recorder needs (every delta but stage
    /// markers and usage). Lets the caller hand the delta itself to the assembler without a copy.
    pub fn observe_events(&mut self, events: &[Event]) {
        if self.finished {
            return;
        }
        for event in events {
            self.apply(event);
        }
    }

    /// The run's usage and cost, for its last step line, when they are known before its
    /// terminal event (which is sent only once the last step is written).
    pub fn set_totals(&mut self, totals: RunTotals) {
        self.totals = totals;
    }

    /// The run's structured answer, for its last step line (see [`Self::set_totals`]).
    pub fn set_output(&mut self, output: Option<serde_json::Value>) {
        self.output = output;
    }

    /// Feeds the events of the run's terminal call and flushes the last step.
    pub fn finish(&mut self, events: &[Event]) -> Vec<HistoryLine> {
        if self.finished {
            return Vec::new();
        }
        for event in events {
            self.apply(event);
        }
        self.finished = true;
        // Children the run's end closed are written before its last step.
        let mut lines: Vec<HistoryLine> =
            self.pending.extract_if(.., |line| matches!(line, HistoryLine::Step(_))).collect();
        lines.extend(self.flush());
        lines
    }

    /// Lines to append now that no step boundary produced: an approval answered `always` is
    /// remembered for the chat at once, not at the end of its step.
    pub fn take_pending(&mut self) -> Vec<HistoryLine> {
        std::mem::take(&mut self.pending)
    }

    /// Step lines written so far.
    pub fn steps_written(&self) -> i64 {
        self.seq
    }

    // -- steps ------------------------------------------------------------------------------

    fn stage_marker(&mut self, marker: &str) -> Vec<HistoryLine> {
        let stage = Stage::from_marker(marker).map_or_else(|| marker.to_owned(), |s| s.as_str().to_owned());
        // plan-draft then plan-generate: one `plan` step.
        if stage == Stage::Plan.as_str() && self.step.stage == stage {
            return Vec::new();
        }
        let lines = self.flush();
        self.step = Step::new(&stage);
        lines
    }

    /// Writes the current step (if it has any message) and resets it, keeping its stage.
    fn flush(&mut self) -> Vec<HistoryLine> {
        let flushed_at = self.now();
        self.write_text(flushed_at);
        for call in std::mem::take(&mut self.step.calls) {
            // Never got a result (crash, cancellation, or an unexecuted extra call).
            if let Some(message) = self.call_message(&call, flushed_at) {
                self.step.messages.push(message);
            }
        }
        let next = Step::new(&self.step.stage);
        let mut step = std::mem::replace(&mut self.step, next);
        self.msg_id = ids::new_msg_id();
        self.renew_msg_id = false;
        let mut held = std::mem::take(&mut self.held);
        for line in &mut held {
            if let HistoryLine::Step(task) = line {
                self.seq += 1;
                task.seq = self.seq;
            }
        }
        // A step that only blocked (an answer stopped before its first word) is kept for its
        // record of the block.
        if step.messages.is_empty() && step.guards.is_empty() {
            // The plan merged after a round of parallel tasks goes with their last line.
            if let (Some(HistoryLine::Step(last)), Some(plan)) = (held.last_mut(), step.plan.take()) {
                last.plan = Some(plan).filter(|p| !p.is_empty());
            }
            return held;
        }

        let mut messages = step.messages;
        if let Some(usage) = step.usage
            && let Some(last) = messages.iter_mut().rev().find(|m| m.role == ROLE_ASSISTANT)
        {
            last.usage = Some(usage);
        }
        self.seq += 1;
        let first = self.seq == 1;
        let mut compactions = step.compactions;
        let mut guards = step.guards;
        if first {
            let text = self.query.message.clone().unwrap_or_default();
            messages.insert(0, StoredMessage::user(text, flushed_at));
            shift_records(&mut compactions, &mut guards);
        }
        let updated_at = self.now();
        let step_line = StepLine {
            chat_id: self.chat_id.clone(),
            run_id: self.run_id.clone(),
            stage: step.stage,
            seq: self.seq,
            task_id: None,
            updated_at,
            system: if first { self.system.clone() } else { None },
            plan: step.plan.filter(|p| !p.is_empty()),
            messages,
            compactions,
            guards,
            // The run's last line carries what the whole run used.
            run_usage: if self.finished { self.totals.usage.take() } else { None },
            run_cost: if self.finished { self.totals.cost.take() } else { None },
            run_output: if self.finished { self.output.take() } else { None },
            sub_agent: None,
            handoff: step.handoff,
        };
        let mut lines = held;
        if first {
            lines.push(HistoryLine::Query(QueryLine {
                chat_id: self.chat_id.clone(),
                run_id: self.run_id.clone(),
                updated_at,
                query: self.query.clone(),
            }));
        }
        lines.push(HistoryLine::Step(step_line));
        lines
    }

    fn now(&mut self) -> i64 {
        let now = self.clock.now_ms().max(self.last_ts);
        self.last_ts = now;
        now
    }

    // -- events -----------------------------------------------------------------------------

    /// Opens the record of a child task (its `task.start` follows as its frame).
    fn open_child(&mut self, child: &agw_protocol::ChildTask) {
        let frame = child.sub_agent_key.as_ref().map(|key| SubAgentStep {
            sub_agent_key: key.clone(),
            task_name: Some(child.name()),
            description: child.description.clone(),
            tool_id: child.tool_id.clone(),
            status: String::new(),
            error: None,
        });
        let stage = if frame.is_some() { SUB_AGENT_STAGE } else { Stage::Execute.as_str() };
        let at = self.restored.iter().position(|(id, _, _)| *id == child.task_id);
        let (order, step) = match at.map(|at| self.restored.remove(at)) {
            Some((_, order, step)) => (order, step.unwrap_or_else(|| Step::new(stage))),
            None => {
                self.children_started += 1;
                (self.children_started, Step::new(stage))
            }
        };
        self.children.push(ChildRecord {
            task_id: child.task_id.clone(),
            order,
            frame,
            started_at: self.last_ts,
            step,
            msg_id: ids::new_msg_id(),
            renew_msg_id: false,
        });
    }

    /// A sub-agent's mode began a stage: where it begins among the sub-agent's messages, and the
    /// plan the stage before ended with (plan-draft then plan-generate: one stage).
    fn child_stage(&mut self, task_id: &str, marker: &str) {
        let Some(index) = self.children.iter().position(|c| c.task_id == task_id && c.frame.is_some()) else { return };
        let stage = Stage::from_marker(marker).map_or_else(|| marker.to_owned(), |s| s.as_str().to_owned());
        self.swap_child(index);
        let now = self.now();
        self.write_text(now);
        let (at, plan) = (self.step.messages.len(), self.step.plan.clone());
        let same = stage == Stage::Plan.as_str() && self.step.segments.last().is_some_and(|s| s.stage == stage);
        if let Some(last) = self.step.segments.last_mut() {
            last.plan = plan;
        }
        if !same {
            self.step.segments.push(StepSegment { at, stage, plan: None });
        }
        self.swap_child(index);
    }

    /// Routes a child task's events to its own record; the rest are the run's.
    fn apply(&mut self, event: &Event) {
        // Nearly every run has no children: its events skip the lookup.
        let child = if self.children.is_empty() {
            None
        } else {
            event.task().and_then(|task| self.children.iter().position(|c| c.task_id == task))
        };
        let Some(index) = child else {
            return self.apply_own(event);
        };
        let ended = match &event.payload {
            // The child's frame: its record is open already.
            EventPayload::TaskStart(_) => return,
            EventPayload::TaskComplete(_) => Some(("completed", None)),
            EventPayload::TaskCancel(_) => Some(("cancelled", None)),
            EventPayload::TaskFail(fail) => Some(("failed", Some(fail.error.clone()))),
            _ => None,
        };
        self.swap_child(index);
        match ended {
            None => self.apply_own(event),
            Some((status, error)) => {
                let flushed_at = event.timestamp;
                self.settle(flushed_at);
                self.swap_child(index);
                let child = self.children.remove(index);
                let order = child.order;
                let line = self.child_line(child, status, error, flushed_at);
                self.ended_children.push((order, line));
                // Written once the last sibling ended, in the order they started (as replayed):
                // sub-agents' lines at once, plan tasks' with the run's next step (they are its
                // steps, and the merged plan comes after them).
                if self.children.is_empty() {
                    self.ended_children.sort_by_key(|(order, _)| *order);
                    for (_, line) in std::mem::take(&mut self.ended_children) {
                        match &line {
                            HistoryLine::Step(step) if step.sub_agent.is_none() => self.held.push(line),
                            _ => self.pending.push(line),
                        }
                    }
                }
                return;
            }
        }
        self.swap_child(index);
    }

    /// Exchanges the run's step (and message id state) with child `index`'s: what is applied in
    /// between is recorded for the child.
    fn swap_child(&mut self, index: usize) {
        let child = &mut self.children[index];
        std::mem::swap(&mut self.step, &mut child.step);
        std::mem::swap(&mut self.msg_id, &mut child.msg_id);
        std::mem::swap(&mut self.renew_msg_id, &mut child.renew_msg_id);
    }

    /// A finished child's step line: a sub-agent's with its task as the user message and its
    /// frame; a plan task's as the `execute` step it is (`taskId` set, no plan: the run's merged
    /// plan follows).
    fn child_line(
        &mut self,
        child: ChildRecord,
        status: &str,
        error: Option<agw_protocol::TaskError>,
        ts: i64,
    ) -> HistoryLine {
        let mut messages = child.step.messages;
        let mut compactions = child.step.compactions;
        let mut guards = child.step.guards;
        let sub_agent = child.frame.map(|mut frame| {
            frame.status = status.to_owned();
            frame.error = error;
            messages.insert(0, StoredMessage::user(frame.description.clone().unwrap_or_default(), child.started_at));
            shift_records(&mut compactions, &mut guards);
            Box::new(frame)
        });
        let updated_at = self.now().max(ts);
        HistoryLine::Step(StepLine {
            chat_id: self.chat_id.clone(),
            run_id: self.run_id.clone(),
            stage: child.step.stage,
            // Sub-agents do not count among the run's own steps (the first of those carries the
            // query); a plan task's line is numbered when it is written.
            seq: self.seq,
            task_id: Some(child.task_id),
            updated_at,
            system: None,
            plan: if sub_agent.is_some() { child.step.plan.filter(|p| !p.is_empty()) } else { None },
            messages,
            compactions,
            guards,
            run_usage: None,
            run_cost: None,
            run_output: None,
            sub_agent,
            handoff: None,
        })
    }

    fn apply_own(&mut self, event: &Event) {
        let ts = event.timestamp;
        self.last_ts = self.last_ts.max(ts);
        match &event.payload {
            EventPayload::AwaitingAsk(e) => {
                for approval in &e.approvals {
                    let asked = Asked {
                        rule: approval.rule.clone(),
                        tool_name: approval.tool_name.clone(),
                        agent_key: approval.agent_key.clone(),
                    };
                    self.asked.insert(e.awaiting_id.clone(), asked);
                }
            }
            EventPayload::AwaitingAnswer(e) => {
                let always =
                    e.answer["approvals"].as_array().is_some_and(|a| a.iter().any(|d| d["decision"] == "always"));
                if always && let Some(asked) = self.asked.get(&e.awaiting_id) {
                    self.pending.push(HistoryLine::Approval(ApprovalLine {
                        chat_id: self.chat_id.clone(),
                        run_id: self.run_id.clone(),
                        updated_at: ts,
                        rule: asked.rule.clone(),
                        tool_name: asked.tool_name.clone(),
                        decision: "always".into(),
                        agent_key: asked.agent_key.clone(),
                    }));
                }
            }
            EventPayload::ReasoningStart(e) => self.text_delta(TextKind::Reasoning, &e.reasoning_id, "", ts),
            EventPayload::ReasoningDelta(e) => self.text_delta(TextKind::Reasoning, &e.reasoning_id, &e.delta, ts),
            EventPayload::ContentStart(e) => self.text_delta(TextKind::Content, &e.content_id, "", ts),
            EventPayload::ContentDelta(e) => self.text_delta(TextKind::Content, &e.content_id, &e.delta, ts),
            EventPayload::ContentCitation(e) => {
                self.text_delta(TextKind::Content, &e.content_id, "", ts);
                if let Some(block) = self.step.text.iter_mut().rev().find(|b| b.id == e.content_id) {
                    block.citations.push(agw_protocol::citation::Citation {
                        index: e.index,
                        offset: e.offset,
                        tool_id: e.tool_id.clone(),
                        record: e.record.clone(),
                    });
                }
            }
            EventPayload::ContentRevoke(e) => self.revoke(e),
            EventPayload::GuardWarning(e) => self.guard(GuardEvent::Warning(e.clone()), ts),
            EventPayload::GuardBlock(e) => self.guard(GuardEvent::Block(e.clone()), ts),
            EventPayload::ToolStart(e) => {
                let call_type = match e.tool_type.as_deref() {
                    Some("action") => "action",
                    // `function`, or a frontend tool's viewport type (`html`, `qlc`, …): the model
                    // called a function either way.
                    _ => "function",
                };
                self.call_start(&e.tool_id, e.tool_name.clone(), call_type, ts);
            }
            EventPayload::ActionStart(e) => self.call_start(&e.action_id, e.action_name.clone(), "function", ts),
            EventPayload::ToolArgs(e) => self.call_args(&e.tool_id, &e.delta, ts),
            EventPayload::ActionArgs(e) => self.call_args(&e.action_id, &e.delta, ts),
            EventPayload::ToolResult(e) => self.call_result(&e.tool_id, e.result.clone(), ts),
            EventPayload::ActionResult(e) => {
                let text = match &e.result {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                self.call_result(&e.action_id, text, ts);
            }
            EventPayload::PlanUpdate(e) => {
                self.step.plan = Some(PlanSnapshot::new(e.plan_id.clone(), e.plan.clone()));
            }
            EventPayload::ContextCompact(e) => self.compaction(e, ts),
            EventPayload::AgentHandoff(e) => {
                // After everything the handing agent streamed (its transfer call and result);
                // the next agent's first stage marker ends the step.
                self.settle(ts);
                self.step.handoff = Some(StepHandoff { ts, event: e.clone() });
            }
            EventPayload::RunComplete(e) => {
                self.totals = e.totals.clone();
                self.output.clone_from(&e.output);
            }
            EventPayload::RunError(e) => self.totals = e.totals.clone(),
            EventPayload::RunCancel(e) => self.totals = e.totals.clone(),
            EventPayload::RequestSteer(e) => {
                self.steer(StoredMessage::steer(e.message.clone(), ts, e.steer_id.clone(), e.request_id.clone()));
            }
            _ => {}
        }
    }

    /// A steer the run took: it follows everything streamed before it, so pending text blocks and
    /// calls still waiting for a result (a PLAN_EXECUTE round's unexecuted extra calls) are
    /// written first, then the user message; the next model response gets a new `_msgId`.
    fn steer(&mut self, message: StoredMessage) {
        let ts = message.ts.unwrap_or(self.last_ts);
        self.settle(ts);
        self.step.messages.push(message);
        self.renew_msg_id = true;
    }

    /// Writes what the step streamed so far (text blocks, calls) as messages: something that
    /// happens between model turns is recorded after them.
    fn settle(&mut self, ts: i64) {
        self.write_text(ts);
        for call in std::mem::take(&mut self.step.calls) {
            if let Some(written) = self.call_message(&call, ts) {
                self.step.messages.push(written);
            }
        }
    }

    /// A `context.compact`: kept with the step at its position; a summary that covers stored
    /// runs also becomes the chat's checkpoint at once (what its next run starts from).
    fn compaction(&mut self, event: &ContextCompact, ts: i64) {
        self.settle(ts);
        self.step.compactions.push(StepCompaction { at: self.step.messages.len(), ts, event: event.clone() });
        if let (Some(summary), Some(through)) = (&event.summary, &event.through_run_id) {
            self.pending.push(HistoryLine::Checkpoint(CheckpointLine {
                chat_id: self.chat_id.clone(),
                run_id: self.run_id.clone(),
                updated_at: ts,
                through_run_id: through.clone(),
                summary: summary.clone(),
                tokens_before: event.tokens_before,
                tokens_after: event.tokens_after,
            }));
        }
    }

    /// A guard withdrew content block `id`: its message keeps the text and says why, whether it
    /// is still pending or already written (a call the turn started after it wrote it).
    fn revoke(&mut self, event: &ContentRevoke) {
        let revocation =
            Revocation { guard: event.guard.clone(), rule: event.rule.clone(), reason: event.reason.clone() };
        if let Some(block) = self.step.text.iter_mut().rev().find(|b| b.id == event.content_id) {
            block.revoked = Some(revocation);
        } else if let Some(message) =
            self.step.messages.iter_mut().rev().find(|m| m.content_id.as_deref() == Some(event.content_id.as_str()))
        {
            message.revoked = Some(revocation);
        }
    }

    /// A `guard.warning` or `guard.block`, placed after what streamed before it: the messages
    /// written and the text blocks still pending (written before any later call). Nothing is
    /// settled here: a warning leaves the answer streaming in the block it warned about.
    fn guard(&mut self, event: GuardEvent, ts: i64) {
        let pending = self.step.text.iter().filter(|b| !b.text.is_empty() || !b.citations.is_empty()).count();
        let at = self.step.messages.len() + pending;
        self.step.guards.push(StepGuard { at, ts, event });
    }

    /// Appends to the block `id`, opening it on its first event.
    fn text_delta(&mut self, kind: TextKind, id: &str, delta: &str, ts: i64) {
        if let Some(block) = self.step.text.iter_mut().rev().find(|b| b.id == id) {
            block.text.push_str(delta);
            return;
        }
        if self.renew_msg_id {
            self.msg_id = ids::new_msg_id();
            self.renew_msg_id = false;
        }
        let msg_id = self.msg_id.clone();
        self.step.text.push(TextBlock {
            kind,
            id: id.to_owned(),
            text: delta.to_owned(),
            first_ts: ts,
            msg_id,
            citations: Vec::new(),
            revoked: None,
        });
    }

    /// Writes the pending text blocks as messages, timed up to `now`.
    fn write_text(&mut self, now: i64) {
        for block in std::mem::take(&mut self.step.text) {
            if block.text.is_empty() && block.citations.is_empty() {
                continue;
            }
            let mut message = StoredMessage {
                role: ROLE_ASSISTANT.to_owned(),
                ts: Some(block.first_ts),
                msg_id: Some(block.msg_id),
                timing: timing(block.first_ts, now),
                ..StoredMessage::default()
            };
            match block.kind {
                TextKind::Reasoning => {
                    message.reasoning_content = Some(block.text);
                    message.reasoning_id = Some(block.id);
                }
                TextKind::Content => {
                    message.content = Some(block.text);
                    message.content_id = Some(block.id);
                    message.citations = (!block.citations.is_empty()).then_some(block.citations);
                    message.revoked = block.revoked;
                }
            }
            self.step.messages.push(message);
        }
    }

    fn call_start(&mut self, id: &str, name: Option<String>, call_type: &'static str, ts: i64) {
        self.write_text(ts);
        if let Some(name) = &name {
            self.call_names.insert(id.to_owned(), name.clone());
        }
        self.step.calls.push(Call {
            id: id.to_owned(),
            name,
            call_type,
            arguments: String::new(),
            first_ts: ts,
            msg_id: self.msg_id.clone(),
        });
    }

    fn call_args(&mut self, id: &str, delta: &str, ts: i64) {
        let Some(call) = self.step.calls.iter_mut().find(|c| c.id == id) else { return };
        if call.arguments.is_empty() {
            call.first_ts = ts;
        }
        call.arguments.push_str(delta);
    }

    /// Writes the call's message (if still pending in this step), then the result message.
    fn call_result(&mut self, id: &str, result: String, ts: i64) {
        self.write_text(ts);
        let mut call_timing = None;
        if let Some(pos) = self.step.calls.iter().position(|c| c.id == id) {
            let call = self.step.calls.remove(pos);
            call_timing = timing(call.first_ts, ts);
            if let Some(message) = self.call_message(&call, ts) {
                self.step.messages.push(message);
            }
        }
        let name = self.call_names.get(id).cloned();
        let (tool_id, action_id) = self.binding(id, name.as_deref());
        self.step.messages.push(StoredMessage {
            role: ROLE_TOOL.to_owned(),
            content: Some(result),
            ts: Some(ts),
            name,
            tool_call_id: Some(id.to_owned()),
            tool_id,
            action_id,
            timing: call_timing,
            ..StoredMessage::default()
        });
        self.renew_msg_id = true;
    }

    /// The assistant message of one call, at `ts` (its result time, or the flush); `None` for a
    /// call without a name (nothing a model or a replay could use).
    fn call_message(&self, call: &Call, ts: i64) -> Option<StoredMessage> {
        let name = call.name.as_deref().filter(|n| !n.trim().is_empty())?;
        let (tool_id, action_id) = self.binding(&call.id, Some(name));
        Some(StoredMessage {
            role: ROLE_ASSISTANT.to_owned(),
            tool_calls: Some(vec![StoredToolCall::new(&call.id, call.call_type, name, call.arguments.clone())]),
            ts: Some(ts),
            msg_id: Some(call.msg_id.clone()),
            tool_id,
            action_id,
            timing: timing(call.first_ts, ts),
            ..StoredMessage::default()
        })
    }

    /// `(_toolId, _actionId)`: the live id under `_actionId` when the tool name is in the
    /// action list, else under `_toolId`.
    fn binding(&self, id: &str, name: Option<&str>) -> (Option<String>, Option<String>) {
        let is_action = name.is_some_and(|n| self.action_tools.contains(&n.trim().to_lowercase()));
        if is_action { (None, Some(id.to_owned())) } else { (Some(id.to_owned()), None) }
    }
}

/// `_stage` of a sub-agent's step line.
pub const SUB_AGENT_STAGE: &str = "subagent";

/// A user message was put first in a step: what was recorded at a message index moves with it.
fn shift_records(compactions: &mut [StepCompaction], guards: &mut [StepGuard]) {
    for compaction in compactions {
        compaction.at += 1;
    }
    for guard in guards {
        guard.at += 1;
    }
}

/// `_timing`: omitted when ≤ 0.
fn timing(from: i64, to: i64) -> Option<i64> {
    let elapsed = to.saturating_sub(from);
    (elapsed > 0).then_some(elapsed)
}
