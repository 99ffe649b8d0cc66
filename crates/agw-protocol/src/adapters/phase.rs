//! agw events → the phase stream (issue 35, docs/protocols.md "The phase stream"): one JSON
//! object `{type, phase, data}` per line, for mobile and chat-app clients that show the phase a
//! run is in and nothing of its inner structure.
//!
//! [`PhaseMapper`] is pure: the HTTP layer feeds it a run's events and writes the lines it
//! returns. The rules:
//!
//! - **Children are not shown.** Sub-agents and parallel plan tasks run inside the parent's
//!   tool call: every event that belongs to a child task and every `task.*` event produce
//!   nothing. A sequential plan task is the run's own work and is shown. The parent's own `agent_invoke` call is an ordinary tool.
//!   The one exception is a child that waits for a person (`input_required`, below): the run
//!   cannot go on without the client, so the client is told (with the child's `taskId`).
//! - **Phases.** `run.start` enters `thinking`. Reasoning is `thinking`; answer text is
//!   `generating`; a tool call is `tool_calling` once its arguments are complete (`tool.end`:
//!   the model turn has ended and the tool is about to run). `run.complete` and `run.cancel` end
//!   in `completed`, `run.error` in `error`.
//! - **Order.** Within one model turn the phase only moves forward: `thinking` → `generating`
//!   → `tool_calling` (a turn's tool calls run after its text). Reasoning that arrives after the
//!   turn's text does not take the phase back to `thinking`. The next turn (the first model
//!   output after a tool result) starts afresh: its reasoning enters `thinking`, its text
//!   `generating`. A `phase_change` line is written exactly when the phase changes, before the
//!   line that changed it, with the phase's message ([`PhaseMessages`], in the stream's
//!   language).
//! - **Lines.** `thinking {content}` (only with `showThinking`), `text {content}`,
//!   `citation {index, messageId, content?, senderName?, senderId?, timestamp?, chatId?, url?,
//!   title?}` (only `index` and `messageId` without `detailedCitations`), `tool_start
//!   {toolName, toolDescription, params}` and `tool_end {toolName, success, summary, error?}`
//!   (only with `showToolCalls`; actions are shown the same way), `done {finishReason, stats:
//!   {totalTokens, iterations}}`, `error {code, message, recoverable}`, and agw's extension
//!   `input_required {runId, toolId, toolName, kind, …}` when the run waits for a person (a
//!   frontend tool's call: `kind: frontend`; an approval: `kind: approval`). Nothing follows
//!   `done` or `error`.
//! - **Guardrails** (issue 36): `revoke {stage, guard, rule?, reason, statusCode, offset,
//!   length}` — take back the text sent in `text` lines from `offset`, `length` UTF-16 units
//!   (the lines carry no block ids, so the place is counted in the text the stream sent);
//!   `warning {stage, guard, rule?, message, toolId?, statusCode, toolName?}` and `block {stage,
//!   guard, rule?, reason, toolId?, statusCode, toolName?}`. A guard's verdict is not a phase of
//!   the run's work: these lines carry the phase the run is in and change none (the `error` line
//!   of a blocked run moves to `error`). A tool stage's warning or block is about a call, so it
//!   is sent only with `showToolCalls`; a child's are not sent, like everything of a child.
//! - **Ignored:** `request.*`, `chat.*`, `context.compact`, `plan.*`, `agent.handoff`, steers,
//!   `awaiting.answer`/`expired`, snapshots (replay only).
//!
//! `stats.iterations` is the number of model calls: the run's usage `calls` when the provider
//! reported usage, else the model turns of the parent the mapper saw (a turn is the model
//! output between two rounds of tool results).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::event::{Event, EventPayload, TaskField};
use crate::guard::GuardStage;

/// What a run is doing, as the phase stream tells a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The model is working out the question (its reasoning, the wait before its first words).
    Thinking,
    /// Tools run.
    ToolCalling,
    /// The answer streams.
    Generating,
    /// The run ended normally.
    Completed,
    /// The run failed.
    Error,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 5] =
        [Phase::Thinking, Phase::ToolCalling, Phase::Generating, Phase::Completed, Phase::Error];

    /// The wire name (`tool_calling`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Thinking => "thinking",
            Phase::ToolCalling => "tool_calling",
            Phase::Generating => "generating",
            Phase::Completed => "completed",
            Phase::Error => "error",
        }
    }

    /// The phase of a wire name.
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// The built-in messages: the design document's (Chinese), and English.
fn built_in(lang: &str, phase: Phase) -> Option<&'static str> {
    Some(match (lang, phase) {
        ("zh", Phase::Thinking) => "正在分析您的问题...",
        ("zh", Phase::ToolCalling) => "正在查询数据...",
        ("zh", Phase::Generating) => "正在整理答案...",
        ("zh", Phase::Completed) => "回答完成",
        ("zh", Phase::Error) => "出错了",
        ("en", Phase::Thinking) => "Analyzing your question...",
        ("en", Phase::ToolCalling) => "Looking up data...",
        ("en", Phase::Generating) => "Writing the answer...",
        ("en", Phase::Completed) => "Done",
        ("en", Phase::Error) => "Something went wrong",
        _ => return None,
    })
}

/// The language the built-in messages default to: the design document's.
pub const DEFAULT_LANGUAGE: &str = "zh";

/// The `message` of each `phase_change`, per language: an agent's own (`phaseStream.messages`
/// in its definition) over the built-in ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseMessages {
    /// Language tag (lower-case; `*` for any language) → phase → message.
    own: BTreeMap<String, BTreeMap<Phase, String>>,
}

impl PhaseMessages {
    /// An agent's messages: language tag → phase → message.
    pub fn new(own: BTreeMap<String, BTreeMap<Phase, String>>) -> Self {
        let own = own.into_iter().map(|(lang, messages)| (lang.to_ascii_lowercase(), messages)).collect();
        Self { own }
    }

    /// Whether the agent set none.
    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    /// The message for `phase` in `lang` (a tag such as `en-US`; `None`: the default language):
    /// the agent's for the tag, its primary subtag, or `*`; else the built-in one for the
    /// language, else the built-in default language's.
    pub fn message(&self, lang: Option<&str>, phase: Phase) -> String {
        let tag = lang.map(str::to_ascii_lowercase).unwrap_or_else(|| DEFAULT_LANGUAGE.to_owned());
        let primary = tag.split(['-', '_']).next().unwrap_or_default().to_owned();
        for key in [tag.as_str(), primary.as_str(), "*"] {
            if let Some(message) = self.own.get(key).and_then(|m| m.get(&phase)) {
                return message.clone();
            }
        }
        built_in(&primary, phase).or_else(|| built_in(DEFAULT_LANGUAGE, phase)).unwrap_or_default().to_owned()
    }
}

/// The three switches of a request's `options` (camelCase on the wire; absent ones take these
/// defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PhaseOptions {
    /// Send the model's reasoning as `thinking` lines (default false).
    pub show_thinking: bool,
    /// Send `tool_start` / `tool_end` lines (default true).
    pub show_tool_calls: bool,
    /// Send a citation's record fields; false: only `index` and `messageId` (default true).
    pub detailed_citations: bool,
}

impl Default for PhaseOptions {
    fn default() -> Self {
        Self { show_thinking: false, show_tool_calls: true, detailed_citations: true }
    }
}

/// How far a phase is into one model turn: the phase within a turn only moves forward.
fn rank(phase: Phase) -> u8 {
    match phase {
        Phase::Thinking => 0,
        Phase::Generating => 1,
        Phase::ToolCalling => 2,
        Phase::Completed | Phase::Error => 3,
    }
}

/// The built-in texts of `tool_end`, per language.
fn tool_text(lang: &str, what: ToolText, n: usize) -> String {
    match (lang, what) {
        ("en", ToolText::Failed) => "Tool call failed".to_owned(),
        ("en", ToolText::Items) => format!("{n} items"),
        (_, ToolText::Failed) => "工具调用失败".to_owned(),
        (_, ToolText::Items) => format!("共 {n} 条结果"),
    }
}

#[derive(Clone, Copy)]
enum ToolText {
    Failed,
    Items,
}

/// How many characters of a result a success summary shows.
pub const SUMMARY_CHARS: usize = 120;

/// A tool (or action) call the stream has seen start.
#[derive(Debug, Default)]
struct Call {
    name: String,
    description: Option<String>,
    args: String,
    /// A frontend tool (`toolKey`): the run waits for the client's submit.
    frontend: bool,
    tool_type: Option<String>,
    tool_key: Option<String>,
}

/// Maps one run's events to phase-stream lines. One mapper per stream.
#[derive(Debug, Default)]
pub struct PhaseMapper {
    options: PhaseOptions,
    language: Option<String>,
    messages: PhaseMessages,
    run_id: String,
    phase: Option<Phase>,
    /// The phase the current model turn has reached (`None`: no turn output yet).
    turn_phase: Option<Phase>,
    /// A model turn is producing output (cleared by a tool result).
    turn_open: bool,
    turns: u64,
    calls: HashMap<String, Call>,
    /// Waits already announced (`input_required`), by call id.
    asked: HashSet<String>,
    /// Status waits (paused backend calls) asked and not answered yet.
    status_waits: HashSet<String>,
    /// Child tasks (sub-agents, plan tasks run beside others).
    children: HashSet<String>,
    /// Plan tasks started and not ended.
    open_tasks: Vec<String>,
    /// UTF-16 length of the text the `text` lines sent so far.
    streamed: u64,
    /// Where each content block's text starts and ends in it (a revoke takes it back).
    blocks: HashMap<String, (u64, u64)>,
    finished: bool,
}

impl PhaseMapper {
    /// A mapper with these switches, for a client of `language` (a tag such as `en-US`;
    /// `None`: the default language), with the agent's messages.
    pub fn new(options: PhaseOptions, language: Option<String>, messages: PhaseMessages) -> Self {
        Self { options, language, messages, ..Self::default() }
    }

    /// Sets the agent's messages (known only once the run's `request.query` is read).
    pub fn set_messages(&mut self, messages: PhaseMessages) {
        self.messages = messages;
    }

    /// Whether the terminal line (`done` or `error`) was produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The phase the stream is in (`None` before the first event).
    pub fn phase(&self) -> Option<Phase> {
        self.phase
    }

    /// The primary language subtag of the stream (`zh`, `en`, …).
    fn primary_language(&self) -> String {
        let tag = self.language.as_deref().unwrap_or(DEFAULT_LANGUAGE).to_ascii_lowercase();
        tag.split(['-', '_']).next().unwrap_or_default().to_owned()
    }

    fn line(&self, kind: &str, data: Value) -> Value {
        let phase = self.phase.unwrap_or(Phase::Thinking);
        json!({"type": kind, "phase": phase.as_str(), "data": data})
    }

    /// Sets the phase, with its `phase_change` line when it changes.
    fn set_phase(&mut self, phase: Phase, out: &mut Vec<Value>) {
        if self.phase == Some(phase) {
            return;
        }
        self.phase = Some(phase);
        let message = self.messages.message(self.language.as_deref(), phase);
        out.push(self.line("phase_change", json!({"message": message})));
    }

    /// Moves the current turn to `phase`, unless the turn is already further.
    fn enter(&mut self, phase: Phase, out: &mut Vec<Value>) {
        if self.turn_phase.is_some_and(|reached| rank(reached) > rank(phase)) {
            return;
        }
        self.turn_phase = Some(phase);
        self.set_phase(phase, out);
    }

    /// Model output: opens a new turn after a tool result (or at the first output).
    fn model_output(&mut self) {
        if !self.turn_open {
            self.turn_open = true;
            self.turns += 1;
            self.turn_phase = None;
        }
    }

    /// Appends the lines `event` becomes.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        if let Some(task) = self.child_of(event) {
            self.map_child(&task, event, out);
            return;
        }
        match &event.payload {
            EventPayload::RunStart(e) => {
                self.run_id.clone_from(&e.run_id);
                self.set_phase(Phase::Thinking, out);
            }
            EventPayload::ReasoningStart(_) => {
                self.model_output();
                self.enter(Phase::Thinking, out);
            }
            EventPayload::ReasoningDelta(e) => {
                self.model_output();
                self.enter(Phase::Thinking, out);
                if self.options.show_thinking && !e.delta.is_empty() {
                    out.push(self.line("thinking", json!({"content": e.delta})));
                }
            }
            EventPayload::ContentStart(_) => self.model_output(),
            EventPayload::ContentDelta(e) => {
                self.model_output();
                if e.delta.is_empty() {
                    return;
                }
                self.enter(Phase::Generating, out);
                let block = self.blocks.entry(e.content_id.clone()).or_insert((self.streamed, self.streamed));
                self.streamed += e.delta.encode_utf16().count() as u64;
                block.1 = self.streamed;
                out.push(self.line("text", json!({"content": e.delta})));
            }
            EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_) => {
                self.guard(&event.payload, out);
            }
            // Resumed after agw stopped (issue 37): the answer being written then is superseded.
            EventPayload::RunResume(e) => {
                self.run_id.clone_from(&e.run_id);
                out.push(self.line("resume", json!({"attempt": e.attempt})));
            }
            EventPayload::ContentCitation(e) => {
                let record = &e.record;
                let mut data = Map::new();
                data.insert("index".into(), json!(e.index));
                data.insert("messageId".into(), json!(record.message_id));
                if self.options.detailed_citations {
                    let fields = [
                        ("content", record.content.as_ref().map(|v| json!(v))),
                        ("senderName", record.sender_name.as_ref().map(|v| json!(v))),
                        ("senderId", record.sender_id.as_ref().map(|v| json!(v))),
                        ("timestamp", record.timestamp.map(|v| json!(v))),
                        ("chatId", record.chat_id.as_ref().map(|v| json!(v))),
                        ("url", record.url.as_ref().map(|v| json!(v))),
                        ("title", record.title.as_ref().map(|v| json!(v))),
                    ];
                    for (key, value) in fields {
                        if let Some(value) = value {
                            data.insert(key.into(), value);
                        }
                    }
                }
                out.push(self.line("citation", Value::Object(data)));
            }
            EventPayload::ToolStart(e) => {
                self.model_output();
                let call = Call {
                    name: e.tool_name.clone().unwrap_or_default(),
                    description: e.description.clone().filter(|d| !d.trim().is_empty()),
                    frontend: e.tool_key.is_some(),
                    tool_type: e.tool_type.clone(),
                    tool_key: e.tool_key.clone(),
                    ..Call::default()
                };
                self.calls.insert(e.tool_id.clone(), call);
            }
            EventPayload::ToolArgs(e) => {
                self.calls.entry(e.tool_id.clone()).or_default().args.push_str(&e.delta);
            }
            EventPayload::ToolEnd(e) => self.call_end(&e.tool_id, out),
            EventPayload::ToolResult(e) => self.call_result(&e.tool_id, &e.result, out),
            EventPayload::ActionStart(e) => {
                self.model_output();
                let call = Call {
                    name: e.action_name.clone().unwrap_or_default(),
                    description: e.description.clone().filter(|d| !d.trim().is_empty()),
                    ..Call::default()
                };
                self.calls.insert(e.action_id.clone(), call);
            }
            EventPayload::ActionArgs(e) => {
                self.calls.entry(e.action_id.clone()).or_default().args.push_str(&e.delta);
            }
            EventPayload::ActionEnd(e) => self.call_end(&e.action_id, out),
            EventPayload::ActionResult(e) => {
                let text = match &e.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.call_result(&e.action_id, &text, out);
            }
            EventPayload::AwaitingAsk(e) => self.awaiting(e, None, out),
            EventPayload::AwaitingAnswer(e) => self.answered(&e.awaiting_id),
            EventPayload::AwaitingExpired(e) => self.answered(&e.awaiting_id),
            EventPayload::RunComplete(e) => {
                // Structured output: the design's `structured` line, in the phase the answer
                // streamed in.
                if let Some(output) = &e.output {
                    out.push(self.line("structured", json!({"dataType": "output", "output": output})));
                }
                self.set_phase(Phase::Completed, out);
                let stats = self.stats(&e.totals);
                out.push(self.line("done", json!({"finishReason": e.finish_reason, "stats": stats})));
                self.finished = true;
            }
            EventPayload::RunCancel(e) => {
                self.set_phase(Phase::Completed, out);
                let stats = self.stats(&e.totals);
                out.push(self.line("done", json!({"finishReason": "cancelled", "stats": stats})));
                self.finished = true;
            }
            EventPayload::RunError(e) => {
                self.set_phase(Phase::Error, out);
                out.push(self.line(
                    "error",
                    json!({"code": e.error.code.as_str(), "message": e.error.message,
                        "recoverable": e.error.retriable}),
                ));
                self.finished = true;
            }
            _ => {}
        }
    }

    /// The child task `event` belongs to, if any. A sequential plan task's leaf `*.start`
    /// events name it in their own `taskId` field, but the task is the run's own work and is
    /// shown; a child is a sub-agent, a plan task started while another is open (a parallel
    /// round), or any task an event is tagged with on the event itself (only children are).
    /// `task.*` events are never shown.
    fn child_of(&mut self, event: &Event) -> Option<String> {
        if let Some(task) = &event.task_id {
            self.children.insert(task.clone());
            return Some(task.clone());
        }
        match event.payload.task_field() {
            TaskField::None | TaskField::Optional(None) => None,
            TaskField::Optional(Some(task)) => self.children.contains(task).then(|| task.to_owned()),
            TaskField::Required(task) => {
                match &event.payload {
                    EventPayload::TaskStart(start) if start.sub_agent_key.is_some() => {
                        self.children.insert(task.to_owned());
                    }
                    EventPayload::TaskStart(_) => {
                        // Plan tasks never overlap unless they run beside each other.
                        if !self.open_tasks.is_empty() {
                            self.children.insert(task.to_owned());
                            self.children.extend(self.open_tasks.iter().cloned());
                        }
                        self.open_tasks.push(task.to_owned());
                    }
                    _ => self.open_tasks.retain(|t| t != task),
                }
                Some(task.to_owned())
            }
        }
    }

    /// A child task's event: nothing, except what makes the run wait for a person.
    fn map_child(&mut self, task: &str, event: &Event, out: &mut Vec<Value>) {
        match &event.payload {
            EventPayload::ToolStart(e) if e.tool_key.is_some() => {
                let call = Call {
                    name: e.tool_name.clone().unwrap_or_default(),
                    frontend: true,
                    tool_type: e.tool_type.clone(),
                    tool_key: e.tool_key.clone(),
                    ..Call::default()
                };
                self.calls.insert(e.tool_id.clone(), call);
            }
            EventPayload::ToolArgs(e) => {
                if let Some(call) = self.calls.get_mut(&e.tool_id) {
                    call.args.push_str(&e.delta);
                }
            }
            EventPayload::ToolEnd(e) if self.calls.get(&e.tool_id).is_some_and(|c| c.frontend) => {
                self.frontend_wait(&e.tool_id, Some(task), out);
            }
            EventPayload::ToolResult(e) => {
                self.calls.remove(&e.tool_id);
            }
            EventPayload::AwaitingAsk(e) => self.awaiting(e, Some(task), out),
            EventPayload::AwaitingAnswer(e) => self.answered(&e.awaiting_id),
            EventPayload::AwaitingExpired(e) => self.answered(&e.awaiting_id),
            _ => {}
        }
    }

    /// A guard's `revoke`, `warning` or `block` line, in the phase the run is in.
    fn guard(&mut self, payload: &EventPayload, out: &mut Vec<Value>) {
        let (kind, stage, tool_id) = match payload {
            EventPayload::ContentRevoke(e) => ("revoke", e.stage, None),
            EventPayload::GuardWarning(e) => ("warning", e.stage, e.tool_id.as_ref()),
            EventPayload::GuardBlock(e) => ("block", e.stage, e.tool_id.as_ref()),
            _ => return,
        };
        let tool_stage = matches!(stage, GuardStage::ToolInput | GuardStage::ToolOutput);
        if tool_stage && !self.options.show_tool_calls {
            return;
        }
        let ids = super::GuardIds { content: None, tool: Some("toolId") };
        let Some(mut data) = super::guard_fields(payload, ids) else { return };
        if let Some(call) = tool_id.and_then(|id| self.calls.get(id)) {
            data.insert("toolName".into(), json!(call.name));
        }
        if let EventPayload::ContentRevoke(e) = payload {
            let (start, end) = self.blocks.get(&e.content_id).copied().unwrap_or((self.streamed, self.streamed));
            data.insert("offset".into(), json!(start));
            data.insert("length".into(), json!(end - start));
        }
        out.push(self.line(kind, Value::Object(data)));
    }

    /// A wait was answered (or expired): a paused call that pauses again asks again.
    fn answered(&mut self, awaiting_id: &str) {
        if self.status_waits.remove(awaiting_id) {
            self.asked.remove(awaiting_id);
        }
    }

    /// A call's arguments are complete: it runs now.
    fn call_end(&mut self, id: &str, out: &mut Vec<Value>) {
        self.enter(Phase::ToolCalling, out);
        let Some(call) = self.calls.get(id) else { return };
        if self.options.show_tool_calls {
            let params = parse_args(&call.args);
            let description = call.description.clone().unwrap_or_else(|| call.name.clone());
            out.push(
                self.line(
                    "tool_start",
                    json!({"toolName": call.name, "toolDescription": description, "params": params}),
                ),
            );
        }
        if call.frontend {
            self.frontend_wait(id, None, out);
        }
    }

    /// `input_required` for a frontend call (once per call).
    fn frontend_wait(&mut self, id: &str, task: Option<&str>, out: &mut Vec<Value>) {
        if !self.asked.insert(id.to_owned()) {
            return;
        }
        let Some(call) = self.calls.get(id) else { return };
        let mut data = json!({"runId": self.run_id, "toolId": id, "toolName": call.name, "kind": "frontend",
            "params": parse_args(&call.args)});
        if let Some(key) = &call.tool_key {
            data["toolKey"] = json!(key);
        }
        if let Some(kind) = &call.tool_type {
            data["toolType"] = json!(kind);
        }
        if let Some(task) = task {
            data["taskId"] = json!(task);
        }
        let line = json!({"type": "input_required", "phase": Phase::ToolCalling.as_str(), "data": data});
        out.push(line);
    }

    /// `awaiting.ask`: an approval, a paused backend call's status (`kind: "status"`), or (after
    /// a restart) a frontend call's form.
    fn awaiting(&mut self, e: &crate::event::AwaitingAsk, task: Option<&str>, out: &mut Vec<Value>) {
        if e.mode == "status" {
            // Shown once per pause (attached again after a restart, the same pause is not
            // repeated); a call that pauses again after `continue` asks again.
            if !self.asked.insert(e.awaiting_id.clone()) {
                return;
            }
            self.status_waits.insert(e.awaiting_id.clone());
            if task.is_none() {
                self.enter(Phase::ToolCalling, out);
            }
            let mut data = json!({"runId": self.run_id, "toolId": e.awaiting_id,
                "toolName": e.tool_name.clone().unwrap_or_default(), "kind": "status", "timeout": e.timeout,
                "params": e.arguments.clone().unwrap_or_else(|| json!({}))});
            if let Some(status) = &e.status {
                data["code"] = json!(status.code);
                data["message"] = json!(status.message);
                data["data"] = status.data.clone();
            }
            data["options"] = json!(
                e.options
                    .iter()
                    .map(|o| json!({"label": o.label, "action": o.action, "description": o.description}))
                    .collect::<Vec<_>>()
            );
            if let Some(task) = task {
                data["taskId"] = json!(task);
            }
            out.push(json!({"type": "input_required", "phase": Phase::ToolCalling.as_str(), "data": data}));
            return;
        }
        if e.mode != "approval" {
            if self.asked.contains(&e.awaiting_id) {
                return;
            }
            let call = self.calls.entry(e.awaiting_id.clone()).or_default();
            call.frontend = true;
            if let Some(name) = &e.tool_name {
                call.name.clone_from(name);
            }
            if call.args.is_empty()
                && let Some(args) = &e.arguments
            {
                call.args = args.to_string();
            }
            if call.tool_key.is_none() {
                call.tool_key.clone_from(&e.viewport_key);
            }
            if call.tool_type.is_none() {
                call.tool_type.clone_from(&e.viewport_type);
            }
            if task.is_none() {
                self.enter(Phase::ToolCalling, out);
            }
            self.frontend_wait(&e.awaiting_id, task, out);
            return;
        }
        if !self.asked.insert(e.awaiting_id.clone()) {
            return;
        }
        if task.is_none() {
            self.enter(Phase::ToolCalling, out);
        }
        let approval = e.approvals.first();
        let tool_name = approval.map(|a| a.tool_name.clone()).or_else(|| e.tool_name.clone()).unwrap_or_default();
        let mut data = json!({"runId": self.run_id, "toolId": e.awaiting_id, "toolName": tool_name,
            "kind": "approval", "timeout": e.timeout});
        if let Some(a) = approval {
            data["command"] = json!(a.command);
            data["params"] = a.arguments.clone();
            if let Some(description) = &a.description {
                data["description"] = json!(description);
            }
            data["options"] = json!(
                a.options
                    .iter()
                    .map(|o| json!({"label": o.label, "decision": o.decision, "description": o.description}))
                    .collect::<Vec<_>>()
            );
        }
        if let Some(task) = task {
            data["taskId"] = json!(task);
        }
        out.push(json!({"type": "input_required", "phase": Phase::ToolCalling.as_str(), "data": data}));
    }

    /// A call's result: `tool_end`; the model's next output is a new turn.
    fn call_result(&mut self, id: &str, result: &str, out: &mut Vec<Value>) {
        self.turn_open = false;
        let call = self.calls.remove(id).unwrap_or_default();
        if !self.options.show_tool_calls {
            return;
        }
        // A result without its call (a stream attached late) still runs in tool_calling.
        self.enter(Phase::ToolCalling, out);
        let lang = self.primary_language();
        let mut data = match failure(result) {
            Some(error) => json!({"toolName": call.name, "success": false,
                "summary": tool_text(&lang, ToolText::Failed, 0), "error": error}),
            None => json!({"toolName": call.name, "success": true, "summary": summary(&lang, result)}),
        };
        if data["error"] == "" {
            data.as_object_mut().map(|d| d.remove("error"));
        }
        out.push(self.line("tool_end", data));
    }

    /// `done`'s `stats`.
    fn stats(&self, totals: &crate::event::RunTotals) -> Value {
        let usage = totals.usage.as_ref().filter(|u| !u.is_empty());
        let total_tokens = usage.map_or(0, |u| u.total_tokens);
        let iterations = usage.map_or(self.turns, |u| u.calls);
        json!({"totalTokens": total_tokens, "iterations": iterations})
    }
}

/// A call's arguments as JSON: `{}` when empty or not JSON.
fn parse_args(args: &str) -> Value {
    if args.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(args).unwrap_or_else(|_| json!({}))
}

/// The error text of a failed result (agw's `{"ok":false,"error":…}`, or any object with an
/// `error` field); `None` for a success.
fn failure(result: &str) -> Option<String> {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(result) else { return None };
    let failed = object.get("ok") == Some(&Value::Bool(false)) || object.get("error").is_some_and(|e| !e.is_null());
    if !failed {
        return None;
    }
    Some(match object.get("error") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => object.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
        Some(other) => other.to_string(),
    })
}

/// A success's summary: "N items" when the result is an array or an object with an array field,
/// else the result's first [`SUMMARY_CHARS`] characters.
fn summary(lang: &str, result: &str) -> String {
    let items = match serde_json::from_str::<Value>(result) {
        Ok(Value::Array(items)) => Some(items.len()),
        Ok(Value::Object(object)) => object.values().find_map(|v| v.as_array().map(Vec::len)),
        _ => None,
    };
    if let Some(n) = items {
        return tool_text(lang, ToolText::Items, n);
    }
    let text = result.trim();
    let mut cut: String = text.chars().take(SUMMARY_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests;
