//! Snapshot replay: the `events` of `GET /api/ap/chat`, built from history lines
//! (`docs/contract/sse-events.md` §9), plus the other two projections of a chat detail
//! (`rawMessages`, `references`; `docs/contract/http-api.md` §4).
//!
//! agw decisions applied here: the block and call ids are the stored `_reasoningId` /
//! `_contentId` / `_toolId` / `_actionId`, which agw writes equal to the ids streamed live, so a
//! replay names every block exactly as the live stream did; a user message with a `_steerId` (a
//! steer the run took) replays as `request.steer` at its position, equal to the live event but
//! for `taskId`, which no replayed event carries (other user messages produce nothing); a
//! content message a guard withdrew (`_revoked`) replays as its `content.snapshot` (and
//! citations), its `content.revoke` at the end of its step (a revoke ends the run, so it came
//! after everything the step streamed), and a step's `guard.warning` / `guard.block` records
//! replay where they happened; `seq` runs 1..N without gaps and `plan.update` carries one (no
//! `rawEvent`). The §9 fallback ids (`{runId}_r_{i}`, …) only
//! appear for files written by other implementations without stored ids.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::echoed::Reference;
use crate::event::{
    ActionResult, ActionSnapshot, ChatStart, ContentCitation, ContentRevoke, ContentSnapshot, Event, EventPayload,
    PlanUpdate, ReasoningSnapshot, RequestQuery, RequestSteer, RunComplete, RunStart, RunTotals, TaskCancel,
    TaskComplete, TaskError, TaskFail, TaskStart, TaskStatus, ToolResult, ToolSnapshot,
};
use crate::guard::{GuardStage, STATUS_BLOCK_AND_REVOKE};
use crate::history::{
    HistoryLine, PlanSnapshot, QueryLine, ROLE_USER, StepCompaction, StepGuard, StepHandoff, StepLine, StoredMessage,
    StoredToolCall,
};

/// Finish reason of every replayed run.
pub const REPLAY_FINISH_REASON: &str = "end_turn";

/// Builds the replay event array of a chat. `chat_name` is the index record's name (the chat id
/// is used when there is none); `now_ms` is the fallback start time of a run without any
/// timestamp.
///
/// ```
/// use agw_protocol::{Event, HistoryLine, replay_chat};
///
/// // A chat file of one ONESHOT run: its query line and one step line.
/// let file = concat!(
///     r#"{"_type":"query","chatId":"c1","runId":"r1","updatedAt":1771000000200,"query":{"message":"Hi"}}"#,
///     "\n",
///     r#"{"_type":"step","chatId":"c1","runId":"r1","_stage":"oneshot","_seq":1,"updatedAt":1771000000200,"#,
///     r#""messages":[{"role":"user","content":[{"type":"text","text":"Hi"}],"ts":1771000000200},"#,
///     r#"{"role":"assistant","content":[{"type":"text","text":"Hello!"}],"ts":1771000000100,"_contentId":"r1_c_1"}]}"#,
/// );
/// let lines: Vec<HistoryLine> = file.lines().filter_map(|line| HistoryLine::parse(line).ok().flatten()).collect();
///
/// let events = replay_chat("c1", Some("Hi"), &lines, 0);
/// let types: Vec<&str> = events.iter().map(Event::type_name).collect();
/// assert_eq!(types, ["request.query", "chat.start", "run.start", "content.snapshot", "run.complete"]);
/// assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
/// ```
pub fn replay_chat(chat_id: &str, chat_name: Option<&str>, lines: &[HistoryLine], now_ms: i64) -> Vec<Event> {
    let mut out = Emitter::default();
    for (index, run) in ordered_runs(lines).iter().enumerate() {
        replay_run(run, chat_id, (index == 0).then(|| chat_name.unwrap_or(chat_id)), now_ms, &mut out);
    }
    out.events
}

/// Every stored message of every run (runs in replay order), each as its stored JSON object
/// (nulls omitted) plus a `runId` member.
pub fn raw_messages(lines: &[HistoryLine]) -> Vec<Value> {
    let mut out = Vec::new();
    for run in ordered_runs(lines) {
        for message in run.messages() {
            let Ok(Value::Object(mut map)) = serde_json::to_value(message) else { continue };
            map.insert("runId".to_owned(), Value::String(run.run_id.to_owned()));
            out.push(Value::Object(map));
        }
    }
    out
}

/// The union of the runs' `query.references` (runs in replay order), de-duplicated by `id`
/// (first wins); references without an `id` are dropped.
pub fn chat_references(lines: &[HistoryLine]) -> Vec<Reference> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for run in ordered_runs(lines) {
        let references = run.query.and_then(|q| q.query.references.as_deref()).unwrap_or_default();
        for reference in references {
            let Some(id) = reference.id.as_deref().filter(|id| !id.trim().is_empty()) else { continue };
            if seen.insert(id.to_owned()) {
                out.push(reference.clone());
            }
        }
    }
    out
}

// -- runs ---------------------------------------------------------------------------------------

/// The lines of one run.
struct Run<'a> {
    run_id: &'a str,
    /// Index of the run's first line in the file (tie-breaker of the ordering).
    first_line: usize,
    query: Option<&'a QueryLine>,
    /// Sorted by `_seq` (stable: equal seqs keep file order).
    steps: Vec<&'a StepLine>,
    /// Sub-agent task steps (`_subAgent`), in file order: replayed after the call that started
    /// them.
    children: Vec<&'a StepLine>,
}

impl<'a> Run<'a> {
    fn messages(&self) -> impl Iterator<Item = &'a StoredMessage> + '_ {
        self.steps.iter().flat_map(|step| step.messages.iter())
    }

    /// The run's usage and cost, as its last step line recorded them.
    fn totals(&self) -> RunTotals {
        self.steps
            .iter()
            .rev()
            .find(|s| s.run_usage.is_some())
            .map(|s| RunTotals { usage: s.run_usage.clone(), cost: s.run_cost.clone() })
            .unwrap_or_default()
    }

    /// The run's structured answer, as its last step line recorded it.
    fn output(&self) -> Option<serde_json::Value> {
        self.steps.iter().rev().find_map(|s| s.run_output.clone())
    }

    /// Max step `updatedAt`.
    fn updated_at(&self) -> i64 {
        self.steps.iter().map(|s| s.updated_at).max().unwrap_or(0)
    }

    /// The plan of the last step (by `_seq`) that has one.
    fn plan(&self) -> Option<&'a PlanSnapshot> {
        self.steps.iter().rev().find_map(|s| s.plan.as_ref())
    }
}

/// One step's messages and recorded compactions and guardrail events in stream order: each
/// record before the message it preceded live (those recorded after the step's last message, at
/// its end); records at one place in the order they happened.
fn step_items(step: &StepLine) -> impl Iterator<Item = Item<'_>> + '_ {
    let mut records: Vec<(usize, i64, Item<'_>)> =
        step.compactions.iter().map(|c| (c.at, c.ts, Item::Compact(c))).collect();
    records.extend(step.guards.iter().map(|g| (g.at, g.ts, Item::Guard(g))));
    // Stable: two records of one kind keep the order they were recorded in.
    records.sort_by_key(|(at, ts, _)| (*at, *ts));
    let mut records = records.into_iter().peekable();
    let mut messages = step.messages.iter().enumerate().peekable();
    std::iter::from_fn(move || {
        let next_at = messages.peek().map_or(usize::MAX, |(i, _)| *i);
        if records.peek().is_some_and(|(at, _, _)| *at <= next_at) {
            return records.next().map(|(_, _, item)| item);
        }
        messages.next().map(|(_, m)| Item::Message(m))
    })
    .chain(step.handoff.iter().map(Item::Handoff))
}

/// What a replayed run is made of.
enum Item<'a> {
    Message(&'a StoredMessage),
    Compact(&'a StepCompaction),
    /// A `guard.warning` or `guard.block`.
    Guard(&'a StepGuard),
    /// Ends its step: after the step's messages and compactions.
    Handoff(&'a StepHandoff),
}

/// Groups lines by `runId`, drops runs without step lines, sorts steps by `_seq` and runs by
/// `updatedAt` ascending (≤ 0 counts as +∞), ties by first line.
fn ordered_runs(lines: &[HistoryLine]) -> Vec<Run<'_>> {
    let mut runs: Vec<Run<'_>> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (index, line) in lines.iter().enumerate() {
        // Remembered approvals are settings of the chat, waits are run state: neither is part
        // of what was said.
        // Checkpoints are memory: the compaction that made one is replayed from its step.
        if line.as_approval().is_some() || line.as_awaiting().is_some() || line.as_checkpoint().is_some() {
            continue;
        }
        let slot = *by_id.entry(line.run_id()).or_insert_with(|| {
            runs.push(Run {
                run_id: line.run_id(),
                first_line: index,
                query: None,
                steps: Vec::new(),
                children: Vec::new(),
            });
            runs.len() - 1
        });
        let run = &mut runs[slot];
        match line {
            HistoryLine::Query(query) => {
                run.query.get_or_insert(query);
            }
            HistoryLine::Step(step) if step.sub_agent.is_some() => run.children.push(step),
            HistoryLine::Step(step) => run.steps.push(step),
            HistoryLine::Approval(_) | HistoryLine::Awaiting(_) | HistoryLine::Checkpoint(_) => {}
        }
    }
    runs.retain(|run| !run.steps.is_empty());
    for run in &mut runs {
        run.steps.sort_by_key(|s| s.seq);
    }
    runs.sort_by_key(|run| {
        let updated = run.updated_at();
        (if updated <= 0 { i64::MAX } else { updated }, run.first_line)
    });
    runs
}

// -- events -------------------------------------------------------------------------------------

/// Numbers events 1..N and keeps the timestamp cursor.
#[derive(Default)]
struct Emitter {
    events: Vec<Event>,
    cursor: i64,
    /// The sub-agent task being replayed: its events carry its id, as they did live.
    task: Option<String>,
}

impl Emitter {
    /// An event at exactly `ts`; the cursor restarts there (start of a run).
    fn at(&mut self, ts: i64, payload: impl Into<EventPayload>) {
        self.cursor = ts;
        let seq = self.events.len() as u64 + 1;
        let mut event = Event::new(seq, ts, payload);
        if let Some(task) = &self.task {
            event.tag_task(task);
        }
        self.events.push(event);
    }

    /// An event at `max(candidate, previous + 1)` (a candidate ≤ 0 means previous + 1).
    fn next(&mut self, candidate: i64, payload: impl Into<EventPayload>) {
        let after = self.cursor.saturating_add(1);
        let ts = if candidate > 0 { candidate.max(after) } else { after };
        self.at(ts, payload);
    }
}

/// Whether a call is replayed as a tool or an action, and under which id.
#[derive(Clone)]
enum Binding {
    Tool(String),
    Action(String),
}

/// Per-run counters for the §9 fallback ids.
#[derive(Default)]
struct Counters {
    reasoning: usize,
    content: usize,
    tools: usize,
    actions: usize,
}

fn replay_run(run: &Run<'_>, chat_id: &str, chat_start: Option<&str>, now_ms: i64, out: &mut Emitter) {
    let run_id = run.run_id;
    let positive_ts = || run.messages().filter_map(|m| m.ts).filter(|ts| *ts > 0);
    let start = positive_ts().min().unwrap_or_else(|| {
        let updated = run.updated_at();
        if updated > 0 { updated } else { now_ms }
    });
    let end = positive_ts().max();

    out.at(start, request_query(run, chat_id));
    if let Some(chat_name) = chat_start {
        out.next(0, ChatStart { chat_id: chat_id.to_owned(), chat_name: chat_name.to_owned() });
    }
    out.next(0, RunStart { run_id: run_id.to_owned(), chat_id: chat_id.to_owned() });
    if let Some(plan) = run.plan().filter(|p| !p.is_empty()) {
        let update =
            PlanUpdate { plan_id: plan.plan_id.clone(), chat_id: chat_id.to_owned(), plan: plan.tasks.clone() };
        out.next(0, update);
    }

    let mut children: Vec<&StepLine> = run.children.clone();
    let mut state = Replaying { run_id, chat_id, counters: Counters::default(), bindings: HashMap::new() };
    let plan = run.plan();
    for step in &run.steps {
        match &step.task_id {
            // A plan task that ran beside others: framed as it streamed.
            Some(task_id) => replay_plan_task(step, task_id, plan, &mut state, &mut children, out),
            None => replay_items(step_items(step), &mut state, &mut children, out),
        }
    }
    // Children whose call is not in the history (a run that ended while they ran) go last.
    for child in std::mem::take(&mut children) {
        replay_child(child, &mut state, out);
    }

    let complete_ts = end.map_or(0, |end| end.saturating_add(1));
    out.next(
        complete_ts,
        RunComplete {
            run_id: run_id.to_owned(),
            finish_reason: REPLAY_FINISH_REASON.to_owned(),
            // What the live terminal event carried.
            output: run.output(),
            totals: run.totals(),
        },
    );
}

/// What the replay of one run keeps across its messages (and its children's).
struct Replaying<'a> {
    run_id: &'a str,
    chat_id: &'a str,
    counters: Counters,
    bindings: HashMap<&'a str, Binding>,
}

/// Replays a run's (or a child's) messages and compactions; a call's children follow its snapshot.
fn replay_items<'a>(
    items: impl Iterator<Item = Item<'a>>,
    state: &mut Replaying<'a>,
    children: &mut Vec<&'a StepLine>,
    out: &mut Emitter,
) {
    let (run_id, chat_id) = (state.run_id, state.chat_id);
    // A revoke ends its model turn, and with it the run: live it came after everything the step
    // streamed (the guard's warnings, the turn's later reasoning and calls), so it waits for the
    // step's end.
    let mut revokes: Vec<(i64, ContentRevoke)> = Vec::new();
    for item in items {
        let message = match item {
            Item::Message(message) => message,
            Item::Compact(compaction) => {
                let mut event = compaction.event.clone();
                run_id.clone_into(&mut event.run_id);
                out.next(compaction.ts, event);
                continue;
            }
            Item::Handoff(handoff) => {
                for (ts, event) in revokes.drain(..) {
                    out.next(ts, event);
                }
                let mut event = handoff.event.clone();
                run_id.clone_into(&mut event.run_id);
                out.next(handoff.ts, event);
                continue;
            }
            Item::Guard(record) => {
                out.next(record.ts, record.event.to_payload());
                continue;
            }
        };
        let ts = message.ts.unwrap_or(0);
        if message.is_assistant() {
            if let Some(text) = message.reasoning() {
                let reasoning_id =
                    stored_or(&message.reasoning_id, || format!("{run_id}_r_{}", state.counters.reasoning));
                state.counters.reasoning += 1;
                out.next(ts, ReasoningSnapshot { reasoning_id, text: text.to_owned(), task_id: None });
            }
            if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
                let content_id = stored_or(&message.content_id, || format!("{run_id}_c_{}", state.counters.content));
                state.counters.content += 1;
                out.next(ts, ContentSnapshot { content_id: content_id.clone(), text: text.to_owned(), task_id: None });
                for citation in message.citations.iter().flatten() {
                    let citation = citation.clone();
                    out.next(
                        ts,
                        ContentCitation {
                            content_id: content_id.clone(),
                            index: citation.index,
                            record: citation.record,
                            offset: citation.offset,
                            tool_id: citation.tool_id,
                        },
                    );
                }
                // The client removes the text again, as it did live.
                if let Some(revoked) = &message.revoked {
                    let event = ContentRevoke {
                        content_id: content_id.clone(),
                        stage: GuardStage::Output,
                        guard: revoked.guard.clone(),
                        rule: revoked.rule.clone(),
                        reason: revoked.reason.clone(),
                        status_code: STATUS_BLOCK_AND_REVOKE,
                    };
                    revokes.push((ts, event));
                }
            }
            for call in message.calls().iter().filter(|c| !c.function.name.trim().is_empty()) {
                let binding = bind_call(message, call, run_id, &state.counters);
                if !call.id.is_empty() {
                    state.bindings.insert(&call.id, binding.clone());
                }
                out.next(ts, call_snapshot(call, &binding, &mut state.counters));
                // What the call started, where it ran live: between its call and its result.
                let started: Vec<&StepLine> = children
                    .extract_if(.., |c| {
                        c.sub_agent.as_ref().and_then(|s| s.tool_id.as_deref()) == Some(call.id.as_str())
                    })
                    .collect();
                for child in started {
                    replay_child(child, state, out);
                }
            }
        } else if let Some(steer_id) = message.steer_id() {
            // A steer the run took: the live `request.steer` at its position (no `taskId`, like
            // every replayed leaf event).
            let request_id = message.request_id.as_deref().filter(|id| !id.trim().is_empty()).map(str::to_owned);
            let steer = RequestSteer {
                request_id,
                chat_id: chat_id.to_owned(),
                run_id: run_id.to_owned(),
                steer_id: steer_id.to_owned(),
                message: message.text().to_owned(),
                role: ROLE_USER.to_owned(),
                task_id: None,
            };
            out.next(ts, steer);
        } else if message.is_tool() {
            let call_id = message.tool_call_id.as_deref().filter(|id| !id.trim().is_empty());
            let binding = if let Some(id) = &message.action_id {
                Binding::Action(id.clone())
            } else if let Some(id) = &message.tool_id {
                Binding::Tool(id.clone())
            } else if let Some(known) = call_id.and_then(|id| state.bindings.get(id)) {
                known.clone()
            } else if let Some(id) = call_id {
                Binding::Tool(id.to_owned())
            } else if message.name.as_deref().is_some_and(|n| !n.trim().is_empty()) {
                Binding::Tool(format!("{run_id}_tool_result_{}", state.counters.tools))
            } else {
                continue;
            };
            let result = message.text().to_owned();
            match binding {
                Binding::Tool(tool_id) => out.next(ts, ToolResult { tool_id, result }),
                Binding::Action(action_id) => out.next(ts, ActionResult { action_id, result: Value::String(result) }),
            }
        }
    }
    for (ts, event) in revokes {
        out.next(ts, event);
    }
}

/// A plan task's step that ran beside others: `task.start`, its messages tagged with its id,
/// then its end as the run's plan records it.
fn replay_plan_task<'a>(
    step: &'a StepLine,
    task_id: &str,
    plan: Option<&PlanSnapshot>,
    state: &mut Replaying<'a>,
    children: &mut Vec<&'a StepLine>,
    out: &mut Emitter,
) {
    let task = plan.and_then(|p| p.tasks.iter().find(|t| t.task_id == task_id));
    let first_ts = step.messages.iter().filter_map(|m| m.ts).find(|ts| *ts > 0).unwrap_or(0);
    let start = TaskStart {
        task_id: task_id.to_owned(),
        run_id: state.run_id.to_owned(),
        task_name: Some(task_id.to_owned()),
        description: task.map(|t| t.description.clone()).filter(|d| !d.trim().is_empty()),
        sub_agent_key: None,
        tool_id: None,
    };
    out.next(first_ts, start);
    let outer = out.task.replace(task_id.to_owned());
    replay_items(step_items(step), state, children, out);
    out.task = outer;
    let last_ts = step.messages.iter().filter_map(|m| m.ts).max().unwrap_or(0);
    let task_id = task_id.to_owned();
    match task.map(|t| t.status) {
        Some(TaskStatus::Canceled) => out.next(last_ts, TaskCancel { task_id }),
        Some(TaskStatus::Failed) => out
            .next(last_ts, TaskFail { task_id, error: TaskError::new("task_failed", "Task status updated to failed") }),
        _ => out.next(last_ts, TaskComplete { task_id }),
    }
}

/// One sub-agent task: `task.start`, its messages tagged with its id, then how it ended.
fn replay_child<'a>(child: &'a StepLine, state: &mut Replaying<'a>, out: &mut Emitter) {
    let Some(frame) = &child.sub_agent else { return };
    let task_id = child.task_id.clone().unwrap_or_default();
    let first_ts = child.messages.iter().filter_map(|m| m.ts).find(|ts| *ts > 0).unwrap_or(0);
    let start = TaskStart {
        task_id: task_id.clone(),
        run_id: state.run_id.to_owned(),
        task_name: frame.task_name.clone(),
        description: frame.description.clone(),
        sub_agent_key: Some(frame.sub_agent_key.clone()),
        tool_id: frame.tool_id.clone(),
    };
    out.next(first_ts, start);
    let outer = out.task.replace(task_id.clone());
    // A grandchild's steps are not kept apart from its parent's (one level deep by default).
    replay_items(step_items(child), state, &mut Vec::new(), out);
    out.task = outer;
    let last_ts = child.messages.iter().filter_map(|m| m.ts).max().unwrap_or(0);
    match frame.status.as_str() {
        "failed" => {
            let error = frame.error.clone().unwrap_or_else(|| TaskError::new("internal", "the task failed"));
            out.next(last_ts, TaskFail { task_id, error });
        }
        "cancelled" => out.next(last_ts, TaskCancel { task_id }),
        _ => out.next(last_ts, TaskComplete { task_id }),
    }
}

fn request_query(run: &Run<'_>, chat_id: &str) -> RequestQuery {
    let query = run.query.map(|line| &line.query);
    let non_blank = |v: Option<&String>| v.filter(|s| !s.trim().is_empty()).cloned();
    let message = query.and_then(|q| q.message.clone()).unwrap_or_else(|| {
        // The run's own message, not a steer it took later.
        let mut users = run.messages().filter(|m| m.is_user());
        users.find(|m| m.steer_id().is_none()).map(|m| m.text().to_owned()).unwrap_or_default()
    });
    RequestQuery {
        request_id: non_blank(query.and_then(|q| q.request_id.as_ref())).unwrap_or_else(|| run.run_id.to_owned()),
        chat_id: non_blank(query.and_then(|q| q.chat_id.as_ref())).unwrap_or_else(|| chat_id.to_owned()),
        role: non_blank(query.and_then(|q| q.role.as_ref())).unwrap_or_else(|| "user".to_owned()),
        message,
        agent_key: query.and_then(|q| q.agent_key.clone()),
        references: query.and_then(|q| q.references.clone()),
        params: query.and_then(|q| q.params.clone()),
        scene: query.and_then(|q| q.scene.clone()),
        stream: query.and_then(|q| q.stream),
    }
}

fn stored_or(stored: &Option<String>, fallback: impl FnOnce() -> String) -> String {
    stored.as_deref().filter(|id| !id.trim().is_empty()).map_or_else(fallback, str::to_owned)
}

/// §9 binding: message-level `_actionId`, message-level `_toolId`, call-level (legacy V3)
/// `_actionId` / `_toolId`, call type `action`, else a tool with the call id; fallback ids for
/// calls without one.
fn bind_call(message: &StoredMessage, call: &StoredToolCall, run_id: &str, counters: &Counters) -> Binding {
    let non_blank = |v: &Option<String>| v.as_deref().filter(|s| !s.trim().is_empty()).map(str::to_owned);
    if let Some(id) = non_blank(&message.action_id) {
        return Binding::Action(id);
    }
    if let Some(id) = non_blank(&message.tool_id) {
        return Binding::Tool(id);
    }
    if let Some(id) = non_blank(&call.legacy_action_id) {
        return Binding::Action(id);
    }
    if let Some(id) = non_blank(&call.legacy_tool_id) {
        return Binding::Tool(id);
    }
    let call_id = (!call.id.trim().is_empty()).then(|| call.id.clone());
    if call.call_type == "action" {
        Binding::Action(call_id.unwrap_or_else(|| format!("{run_id}_action_{}", counters.actions)))
    } else {
        Binding::Tool(call_id.unwrap_or_else(|| format!("{run_id}_tool_{}", counters.tools)))
    }
}

fn call_snapshot(call: &StoredToolCall, binding: &Binding, counters: &mut Counters) -> EventPayload {
    let arguments = call.function.arguments.clone();
    match binding {
        Binding::Tool(tool_id) => {
            counters.tools += 1;
            EventPayload::ToolSnapshot(ToolSnapshot {
                tool_id: tool_id.clone(),
                tool_name: call.function.name.clone(),
                tool_params: serde_json::from_str(&arguments).ok(),
                arguments,
                tool_type: if call.call_type.trim().is_empty() {
                    "function".to_owned()
                } else {
                    call.call_type.clone()
                },
                tool_api: None,
                description: None,
                tool_key: None,
                tool_timeout: None,
            })
        }
        Binding::Action(action_id) => {
            counters.actions += 1;
            EventPayload::ActionSnapshot(ActionSnapshot {
                action_id: action_id.clone(),
                action_name: call.function.name.clone(),
                arguments,
                description: None,
            })
        }
    }
}

#[cfg(test)]
mod tests;
