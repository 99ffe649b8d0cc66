//! agw events → AG-UI events (protocol 1.0, `@ag-ui/core`), data-only SSE frames. Issue 16; the
//! table is in `docs/protocols.md`.
//!
//! The stream keeps the ordering rules AG-UI's client verifies: `RUN_STARTED` first, every
//! message and tool call closed before `RUN_FINISHED`, nothing after `RUN_ERROR`. agw's own
//! assembler already closes every block before its terminal event, so the mapping stays one
//! event to one (or, for reasoning spans, two) AG-UI events.
//!
//! Guardrails (issue 36): a guard's `content.revoke`, `guard.warning` and `guard.block` are
//! `CUSTOM` events `agw.revoke`, `agw.warning`, `agw.block` (see [`REVOKE_EVENT`]).
//!
//! A frontend tool is a client-side tool: when the run waits for it, the HTTP layer ends the
//! stream with [`AgUiMapper::suspend`] (`RUN_FINISHED`, outcome `success` with
//! `pendingToolCallIds`); the client's next `RunAgentInput` carries the `tool` message.
//!
//! A backend call that pauses for the user (`awaiting.ask` `mode: "status"`,
//! `docs/pausing-tools.md`) is an AG-UI interrupt: the stream ends with `RUN_FINISHED`, outcome
//! `interrupt`, one `Interrupt` per paused call (its id the call id, reason `agw.tool_status`,
//! the status's message, the call as `toolCallId`, code and data in `metadata.agw`); the
//! client's next `RunAgentInput` answers it with a `resume` entry (`resolved`: continue,
//! `cancelled`: cancel).

//!
//! Child tasks (sub-agents, issue 34) use AG-UI's own subagent model: `task.start` of a sub-agent
//! is `SUBAGENT_STARTED {subagentRunId: taskId, name: subAgentKey, parentToolCallId}`, every
//! event of the child carries `subagentRunId`, and its end is `SUBAGENT_FINISHED` (completed) or
//! `SUBAGENT_ERROR` (failed, cancelled). A stream that suspends while children still stream ends
//! their open messages, calls and subagents (`outcome: suspended`) so that `RUN_FINISHED` finds
//! nothing open; the continuation, primed with the events up to there, reopens them
//! ([`AgUiMapper::resume`]): the client appends to the messages it has under the same ids.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::event::{Event, EventPayload};

/// The `CUSTOM` event name of a citation (docs/protocols.md "Citations").
pub const CITATION_EVENT: &str = "agw.citation";

/// The `CUSTOM` event name of a guard's `content.revoke` (docs/protocols.md "Guardrails").
pub const REVOKE_EVENT: &str = "agw.revoke";
/// The `CUSTOM` event name of a guard's `guard.warning`.
pub const WARNING_EVENT: &str = "agw.warning";
/// The `CUSTOM` event name of a guard's `guard.block`.
pub const BLOCK_EVENT: &str = "agw.block";

/// A guard's event as a `CUSTOM` event: its value the native fields, with the text and the call
/// under AG-UI's names (`messageId`: the text message; `toolCallId`).
fn guard_event(payload: &EventPayload) -> Option<Value> {
    let name = match payload {
        EventPayload::ContentRevoke(_) => REVOKE_EVENT,
        EventPayload::GuardWarning(_) => WARNING_EVENT,
        EventPayload::GuardBlock(_) => BLOCK_EVENT,
        _ => return None,
    };
    let ids = super::GuardIds { content: Some("messageId"), tool: Some("toolCallId") };
    let value = super::guard_fields(payload, ids)?;
    Some(json!({"type": "CUSTOM", "name": name, "value": value}))
}

/// Something open in the client's view of the stream, reopened by [`AgUiMapper::resume`].
#[derive(Debug, Clone, PartialEq)]
enum Open {
    Text(String),
    Reasoning(String),
    Call { id: String, name: String, parent: Option<String> },
    Step(String),
    Subagent(String),
}

/// Maps one run's events to AG-UI events. One mapper per stream.
#[derive(Debug, Default)]
pub struct AgUiMapper {
    thread_id: String,
    run_id: String,
    /// Frontend calls whose arguments ended and that have no result yet.
    pending: Vec<String>,
    /// Paused backend calls waiting for the user, as AG-UI `Interrupt`s (by call id).
    interrupts: Vec<Value>,
    frontend: Vec<String>,
    finished: bool,
    /// What is open now, in opening order, with the child task it belongs to.
    open: Vec<(Open, Option<String>)>,
    /// What [`Self::suspend`] closed.
    suspended: Vec<(Open, Option<String>)>,
    /// Each sub-agent's `SUBAGENT_STARTED`, to repeat when a continuation reopens it.
    subagents: HashMap<String, Value>,
    /// Per lane (the parent: `None`, or a child task): the text message the lane's next tool
    /// call belongs to (an assistant message with text and tool calls), until a tool result.
    last_text: HashMap<Option<String>, String>,
}

/// `data: <event>\n\n`.
pub fn frame(event: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend_from_slice(event.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// The AG-UI events that end `open` (in a suspended stream).
fn close_events(open: &Open) -> Vec<Value> {
    match open {
        Open::Text(id) => vec![json!({"type": "TEXT_MESSAGE_END", "messageId": id})],
        Open::Reasoning(id) => vec![
            json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
            json!({"type": "REASONING_END", "messageId": id}),
        ],
        Open::Call { id, .. } => vec![json!({"type": "TOOL_CALL_END", "toolCallId": id})],
        Open::Step(name) => vec![json!({"type": "STEP_FINISHED", "stepName": name})],
        Open::Subagent(id) => {
            vec![json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id, "outcome": {"type": "suspended"}})]
        }
    }
}

/// The AG-UI `Interrupt` of a paused backend call (`awaiting.ask` `mode: "status"`): answered
/// by a `resume` entry whose `interruptId` is the call id.
fn interrupt(e: &crate::event::AwaitingAsk, task: Option<&str>) -> Value {
    let mut agw = json!({"toolName": e.tool_name, "arguments": e.arguments, "options": e.options});
    if let Some(status) = &e.status {
        agw["code"] = json!(status.code);
        agw["data"] = status.data.clone();
    }
    let mut interrupt = json!({
        "id": e.awaiting_id,
        "reason": "agw.tool_status",
        "message": e.status.as_ref().map(|s| s.message.as_str()).unwrap_or_default(),
        "toolCallId": e.awaiting_id,
        "responseSchema": {"type": "object", "properties": {"action": {"enum": ["continue", "cancel"]}}},
        "metadata": {"agw": agw},
    });
    if let Some(task) = task {
        interrupt["subagentRunId"] = json!(task);
    }
    interrupt
}

/// Marks an event as a child's (`subagentRunId`); subagent frames name it themselves.
fn attribute(value: &mut Value, task: Option<&str>) {
    if let Some(task) = task {
        value["subagentRunId"] = json!(task);
    }
}

impl AgUiMapper {
    /// A mapper for the run `run_id` of the thread (chat) `thread_id`.
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self { thread_id: thread_id.into(), run_id: run_id.into(), ..Self::default() }
    }

    /// Whether `RUN_FINISHED` or `RUN_ERROR` was produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Frontend calls waiting for the client's result.
    pub fn pending_tool_calls(&self) -> &[String] {
        &self.pending
    }

    /// Interrupts the run waits for (paused backend calls): the stream should end here, the
    /// client answers with `resume` entries.
    pub fn pending_interrupts(&self) -> Vec<&str> {
        self.interrupts.iter().filter_map(|i| i["id"].as_str()).collect()
    }

    /// The client answered frontend call or interrupt `id` (in the input that continues the run).
    pub fn answered(&mut self, id: &str) {
        self.pending.retain(|p| p != id);
        self.interrupts.retain(|i| i["id"] != id);
    }

    /// `RUN_STARTED` for a stream that continues a run (its `run.start` was in an earlier stream).
    pub fn start(&mut self, out: &mut Vec<Value>) {
        out.push(json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}));
    }

    /// Ends the stream of a run that now waits for the client (its frontend calls, or paused
    /// calls' interrupts): what children still have open ends, then `RUN_FINISHED` with outcome
    /// `interrupt` and the interrupts, or else `success` and the pending call ids.
    pub fn suspend(&mut self, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        self.finished = true;
        // Innermost first: a child's message before its subagent.
        while let Some((open, task)) = self.open.pop() {
            for mut value in close_events(&open) {
                if !matches!(open, Open::Subagent(_)) {
                    attribute(&mut value, task.as_deref());
                }
                out.push(value);
            }
            self.suspended.insert(0, (open, task));
        }
        let outcome = if self.interrupts.is_empty() {
            json!({"type": "success", "pendingToolCallIds": self.pending})
        } else {
            json!({"type": "interrupt", "interrupts": self.interrupts})
        };
        out.push(json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": outcome}));
    }

    /// Continues, in a new stream, a run this mapper was primed with up to where its previous
    /// stream suspended (the events mapped, then [`Self::suspend`]): `RUN_STARTED`, then what
    /// the suspension closed opens again under the same ids.
    pub fn resume(&mut self, out: &mut Vec<Value>) {
        self.finished = false;
        self.start(out);
        for (open, task) in std::mem::take(&mut self.suspended) {
            let mut values = match &open {
                Open::Text(id) => vec![json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})],
                Open::Reasoning(id) => vec![
                    json!({"type": "REASONING_START", "messageId": id}),
                    json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"}),
                ],
                Open::Call { id, name, parent } => {
                    let mut start = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name});
                    if let Some(parent) = parent {
                        start["parentMessageId"] = json!(parent);
                    }
                    vec![start]
                }
                Open::Step(name) => vec![json!({"type": "STEP_STARTED", "stepName": name})],
                Open::Subagent(id) => self.subagents.get(id).cloned().into_iter().collect(),
            };
            if !matches!(open, Open::Subagent(_)) {
                for value in &mut values {
                    attribute(value, task.as_deref());
                }
            }
            out.extend(values);
            self.open.push((open, task));
        }
    }

    fn close(&mut self, open: &Open) {
        self.open.retain(|(o, _)| o != open);
    }

    fn close_call(&mut self, id: &str) {
        self.open.retain(|(o, _)| !matches!(o, Open::Call { id: open, .. } if open == id));
    }

    /// Appends the AG-UI events `event` becomes.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        let ts = event.timestamp;
        let task = event.task().map(str::to_owned);
        let mut values = Vec::new();
        match &event.payload {
            EventPayload::RunStart(e) => {
                self.thread_id.clone_from(&e.chat_id);
                self.run_id.clone_from(&e.run_id);
                values.push(json!({"type": "RUN_STARTED", "threadId": e.chat_id, "runId": e.run_id}));
            }
            EventPayload::ReasoningStart(e) => {
                self.open.push((Open::Reasoning(e.reasoning_id.clone()), task.clone()));
                values.push(json!({"type": "REASONING_START", "messageId": e.reasoning_id}));
                values
                    .push(json!({"type": "REASONING_MESSAGE_START", "messageId": e.reasoning_id, "role": "reasoning"}));
            }
            EventPayload::ReasoningDelta(e) => {
                values.push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": e.reasoning_id, "delta": e.delta}))
            }
            EventPayload::ReasoningEnd(e) => {
                self.close(&Open::Reasoning(e.reasoning_id.clone()));
                values.push(json!({"type": "REASONING_MESSAGE_END", "messageId": e.reasoning_id}));
                values.push(json!({"type": "REASONING_END", "messageId": e.reasoning_id}));
            }
            EventPayload::ContentStart(e) => {
                self.open.push((Open::Text(e.content_id.clone()), task.clone()));
                self.last_text.insert(task.clone(), e.content_id.clone());
                values.push(json!({"type": "TEXT_MESSAGE_START", "messageId": e.content_id, "role": "assistant"}))
            }
            EventPayload::ContentDelta(e) => {
                values.push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": e.content_id, "delta": e.delta}))
            }
            EventPayload::ContentEnd(e) => {
                self.close(&Open::Text(e.content_id.clone()));
                values.push(json!({"type": "TEXT_MESSAGE_END", "messageId": e.content_id}))
            }
            // AG-UI 1.0 has no citation or source event, and an assistant message has no field
            // for one: a custom event, right after the TEXT_MESSAGE_CONTENT it follows. The
            // value's `contentId` is the text message's `messageId`; its own `messageId` is the
            // cited record's id, as in every protocol.
            EventPayload::ContentCitation(e) => {
                values.push(json!({"type": "CUSTOM", "name": CITATION_EVENT, "value": super::citation_fields(e)}))
            }
            // AG-UI 1.0 cannot take back a message, warn or refuse: custom events the client's
            // `onCustomEvent` handles (it hides the text message a revoke names). A revoke comes
            // after the message's TEXT_MESSAGE_END; the RUN_ERROR that ends the run follows.
            EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_) => {
                values.extend(guard_event(&event.payload))
            }
            EventPayload::ToolStart(e) => {
                if e.tool_key.is_some() {
                    self.frontend.push(e.tool_id.clone());
                }
                let name = e.tool_name.clone().unwrap_or_default();
                values.push(self.call_start(&e.tool_id, &name, task.as_deref()));
            }
            EventPayload::ToolArgs(e) => {
                values.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": e.tool_id, "delta": e.delta}))
            }
            EventPayload::ToolEnd(e) => {
                if self.frontend.contains(&e.tool_id) {
                    self.pending.push(e.tool_id.clone());
                }
                self.close_call(&e.tool_id);
                values.push(json!({"type": "TOOL_CALL_END", "toolCallId": e.tool_id}))
            }
            EventPayload::ToolResult(e) => {
                self.pending.retain(|id| *id != e.tool_id);
                // The lane's next text is a new assistant message: the model read the result.
                self.last_text.remove(&task);
                values.push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("{}_result", e.tool_id),
                    "toolCallId": e.tool_id, "content": e.result, "role": "tool"}))
            }
            EventPayload::ActionStart(e) => {
                let name = e.action_name.clone().unwrap_or_default();
                values.push(self.call_start(&e.action_id, &name, task.as_deref()));
            }
            EventPayload::ActionArgs(e) => {
                values.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": e.action_id, "delta": e.delta}))
            }
            EventPayload::ActionEnd(e) => {
                self.close_call(&e.action_id);
                values.push(json!({"type": "TOOL_CALL_END", "toolCallId": e.action_id}))
            }
            EventPayload::ActionResult(e) => {
                let content = match &e.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.last_text.remove(&task);
                values.push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("{}_result", e.action_id),
                    "toolCallId": e.action_id, "content": content, "role": "tool"}))
            }
            EventPayload::PlanUpdate(e) => values
                .push(json!({"type": "STATE_SNAPSHOT", "snapshot": {"plan": {"planId": e.plan_id, "tasks": e.plan}}})),
            EventPayload::TaskStart(e) => match &e.sub_agent_key {
                Some(key) => {
                    let mut start = json!({"type": "SUBAGENT_STARTED", "subagentRunId": e.task_id, "name": key});
                    if let Some(description) = &e.description {
                        start["description"] = json!(description);
                    }
                    if let Some(tool_id) = &e.tool_id {
                        start["parentToolCallId"] = json!(tool_id);
                    }
                    if let Some(name) = &e.task_name {
                        start["metadata"] = json!({"agw": {"taskName": name}});
                    }
                    self.subagents.insert(e.task_id.clone(), start.clone());
                    self.open.push((Open::Subagent(e.task_id.clone()), None));
                    values.push(start);
                }
                None => {
                    self.open.push((Open::Step(e.task_id.clone()), None));
                    values.push(json!({"type": "STEP_STARTED", "stepName": e.task_id}));
                }
            },
            EventPayload::TaskComplete(e) => values.push(self.task_end(
                &e.task_id,
                json!({"type": "SUBAGENT_FINISHED", "subagentRunId": e.task_id,
                    "outcome": {"type": "success"}}),
            )),
            EventPayload::TaskCancel(e) => values.push(self.task_end(
                &e.task_id,
                json!({"type": "SUBAGENT_ERROR", "subagentRunId": e.task_id,
                    "message": "the task was cancelled", "code": "cancelled"}),
            )),
            EventPayload::TaskFail(e) => values.push(self.task_end(
                &e.task_id,
                json!({"type": "SUBAGENT_ERROR", "subagentRunId": e.task_id,
                    "message": e.error.message, "code": e.error.code}),
            )),
            EventPayload::RequestSteer(e) => values.push(json!({"type": "CUSTOM", "name": "agw.steer",
                "value": {"steerId": e.steer_id, "message": e.message}})),
            EventPayload::ContextCompact(e) => values.push(json!({"type": "CUSTOM", "name": "agw.context_compact",
                "value": super::compact_summary(e)})),
            EventPayload::ToolProgress(e) => values.push(json!({"type": "CUSTOM", "name": "agw.tool_progress",
                "value": {"toolCallId": e.tool_id, "delta": e.delta}})),
            EventPayload::AgentHandoff(e) => values.push(json!({"type": "CUSTOM", "name": "agw.handoff",
                "value": {"fromAgentKey": e.from_agent_key, "toAgentKey": e.to_agent_key, "toolCallId": e.tool_id}})),
            // A run resumed after a crash (issue 37): the messages named are superseded.
            EventPayload::RunResume(e) => values.push(json!({"type": "CUSTOM", "name": "agw.resume",
                "value": super::resume_fields(e)})),
            EventPayload::ModelFallback(e) => values.push(json!({"type": "CUSTOM", "name": "agw.model_fallback",
                "value": super::fallback_fields(e)})),
            EventPayload::AwaitingAsk(e) if e.mode == "status" => {
                self.interrupts.retain(|i| i["id"] != e.awaiting_id.as_str());
                self.interrupts.push(interrupt(e, task.as_deref()));
            }
            EventPayload::AwaitingAnswer(e) => self.interrupts.retain(|i| i["id"] != e.awaiting_id.as_str()),
            EventPayload::AwaitingExpired(e) => self.interrupts.retain(|i| i["id"] != e.awaiting_id.as_str()),
            EventPayload::RunComplete(e) => {
                self.finished = true;
                let mut outcome = json!({"type": "success"});
                if !self.pending.is_empty() {
                    outcome["pendingToolCallIds"] = json!(self.pending);
                }
                let mut finished =
                    json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": e.run_id, "outcome": outcome});
                // Structured output: AG-UI's own field for a run's result.
                if let Some(output) = &e.output {
                    finished["result"] = output.clone();
                }
                values.push(finished)
            }
            EventPayload::RunCancel(e) => {
                self.finished = true;
                values.push(json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": e.run_id,
                    "outcome": {"type": "cancelled"}}))
            }
            EventPayload::RunError(e) => {
                self.finished = true;
                values.push(json!({"type": "RUN_ERROR", "message": e.error.message, "code": e.error.code.as_str()}))
            }
            _ => {}
        }
        let subagent_frame = matches!(
            event.payload,
            EventPayload::TaskStart(_)
                | EventPayload::TaskComplete(_)
                | EventPayload::TaskCancel(_)
                | EventPayload::TaskFail(_)
        );
        for mut value in values {
            value["timestamp"] = json!(ts);
            if !subagent_frame {
                attribute(&mut value, task.as_deref());
            }
            out.push(value);
        }
    }

    /// `TOOL_CALL_START`, inside the lane's current assistant message when it wrote text.
    fn call_start(&mut self, id: &str, name: &str, task: Option<&str>) -> Value {
        let lane = task.map(str::to_owned);
        let parent = self.last_text.get(&lane).cloned();
        let mut start = json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name});
        if let Some(parent) = &parent {
            start["parentMessageId"] = json!(parent);
        }
        self.open.push((Open::Call { id: id.to_owned(), name: name.to_owned(), parent }, lane));
        start
    }

    /// The end of task `task_id`: its subagent frame, or `STEP_FINISHED` for a plan task.
    fn task_end(&mut self, task_id: &str, subagent_end: Value) -> Value {
        if self.subagents.contains_key(task_id) {
            self.close(&Open::Subagent(task_id.to_owned()));
            subagent_end
        } else {
            self.close(&Open::Step(task_id.to_owned()));
            json!({"type": "STEP_FINISHED", "stepName": task_id})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        ContentDelta, ContentEnd, ContentStart, ReasoningDelta, ReasoningEnd, ReasoningStart, RunComplete, RunStart,
        ToolEnd, ToolStart,
    };

    fn ev(payload: impl Into<EventPayload>) -> Event {
        Event::new(1, 7, payload)
    }

    #[test]
    fn a_run_opens_with_run_started_and_closes_every_message_before_run_finished() {
        let mut mapper = AgUiMapper::default();
        let mut out = Vec::new();
        for event in [
            ev(RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(ReasoningStart { reasoning_id: "r_r_1".into(), run_id: "r".into(), task_id: None }),
            ev(ReasoningDelta { reasoning_id: "r_r_1".into(), delta: "hm".into() }),
            ev(ReasoningEnd { reasoning_id: "r_r_1".into() }),
            ev(ContentStart { content_id: "r_c_1".into(), run_id: "r".into(), task_id: None }),
            ev(ContentDelta { content_id: "r_c_1".into(), delta: "Hi".into() }),
            ev(ContentEnd { content_id: "r_c_1".into() }),
            ev(RunComplete {
                run_id: "r".into(),
                finish_reason: "stop".into(),
                output: None,
                totals: Default::default(),
            }),
            ev(ContentDelta { content_id: "r_c_1".into(), delta: "late".into() }),
        ] {
            mapper.map(&event, &mut out);
        }
        let types: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED",
            ]
        );
        assert_eq!(out[0], json!({"type": "RUN_STARTED", "threadId": "c", "runId": "r", "timestamp": 7}));
        assert_eq!(out[9]["outcome"], json!({"type": "success"}));
        assert!(out[9].get("result").is_none(), "no output schema, no result");
    }

    #[test]
    fn a_structured_answer_is_the_runs_result() {
        let mut mapper = AgUiMapper::default();
        let mut out = Vec::new();
        let output = Some(json!({"city": "Paris"}));
        mapper.map(&ev(RunStart { run_id: "r".into(), chat_id: "c".into() }), &mut out);
        mapper.map(
            &ev(RunComplete { run_id: "r".into(), finish_reason: "stop".into(), output, totals: Default::default() }),
            &mut out,
        );
        assert_eq!(out[1]["type"], "RUN_FINISHED");
        assert_eq!(out[1]["result"], json!({"city": "Paris"}));
    }

    #[test]
    fn a_frontend_call_suspends_the_run_with_its_pending_id() {
        let mut mapper = AgUiMapper::new("c", "r");
        let mut out = Vec::new();
        let start = ToolStart {
            tool_id: "f1".into(),
            run_id: "r".into(),
            task_id: None,
            tool_name: Some("confirm_dialog".into()),
            tool_type: Some("html".into()),
            tool_api: None,
            tool_params: None,
            description: None,
            tool_key: Some("confirm_dialog".into()),
            tool_timeout: Some(1000),
        };
        mapper.map(&ev(start), &mut out);
        mapper.map(&ev(ToolEnd { tool_id: "f1".into() }), &mut out);
        assert_eq!(mapper.pending_tool_calls(), ["f1"]);
        mapper.suspend(&mut out);
        assert_eq!(out.last().unwrap()["outcome"], json!({"type": "success", "pendingToolCallIds": ["f1"]}));
        assert!(mapper.is_finished());
    }

    #[test]
    fn a_paused_backend_call_ends_the_stream_with_an_interrupt() {
        use crate::event::{AwaitingAnswer, AwaitingAsk};
        let mut mapper = AgUiMapper::new("c", "r");
        let mut out = Vec::new();
        let ask = AwaitingAsk::paused_sample();
        mapper.map(&ev(ask.clone()), &mut out);
        assert!(out.is_empty(), "the interrupt is the run's outcome");
        assert_eq!(mapper.pending_interrupts(), ["call_i"]);
        mapper.suspend(&mut out);
        assert_eq!(
            out.last().unwrap()["outcome"],
            json!({"type": "interrupt", "interrupts": [{"id": "call_i", "reason": "agw.tool_status",
                "message": "Not enough credits", "toolCallId": "call_i",
                "responseSchema": {"type": "object", "properties": {"action": {"enum": ["continue", "cancel"]}}},
                "metadata": {"agw": {"toolName": "mock_image_generate", "arguments": {"prompt": "fox"},
                    "options": [{"label": "Continue", "action": "continue", "description": "d"}],
                    "code": -1002, "data": {"price": 10}}}}]})
        );

        // The continuation: the client resumed it; the run answers it and goes on.
        let mut next = AgUiMapper::new("c", "r");
        next.map(&ev(ask), &mut Vec::new());
        next.suspend(&mut Vec::new());
        next.answered("call_i");
        assert!(next.pending_interrupts().is_empty());
        let mut again = Vec::new();
        next.resume(&mut again);
        next.map(
            &ev(AwaitingAnswer {
                awaiting_id: "call_i".into(),
                answer: json!({"mode": "status", "action": "continue"}),
            }),
            &mut again,
        );
        assert_eq!(again.len(), 1, "RUN_STARTED only: {again:?}");
    }

    #[test]
    fn an_error_is_the_last_event() {
        let mut mapper = AgUiMapper::new("c", "r");
        let mut out = Vec::new();
        let error = crate::event::RunError {
            run_id: "r".into(),
            error: crate::RunErrorInfo::new(crate::ErrorCode::ProviderTimeout, "slow", true),
            totals: Default::default(),
        };
        mapper.map(&ev(error), &mut out);
        mapper.suspend(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0]["type"].as_str(), out[0]["code"].as_str()), (Some("RUN_ERROR"), Some("provider_timeout")));
    }

    /// AG-UI's `verifyEvents` rules this mapping relies on: openers before content, the same
    /// `subagentRunId` on every event of a message or call as on its opener, subagents started
    /// and finished once, nothing open at `RUN_FINISHED`.
    fn verify(out: &[Value]) {
        let mut open: HashMap<String, Option<String>> = HashMap::new();
        let mut subagents: Vec<String> = Vec::new();
        let owner = |e: &Value| e["subagentRunId"].as_str().map(str::to_owned);
        for e in out {
            let key = |field: &str| format!("{field}:{}", e[field].as_str().unwrap_or_default());
            match e["type"].as_str().unwrap() {
                "TEXT_MESSAGE_START" | "REASONING_MESSAGE_START" => {
                    assert!(open.insert(key("messageId"), owner(e)).is_none(), "{e}")
                }
                "TOOL_CALL_START" => assert!(open.insert(key("toolCallId"), owner(e)).is_none(), "{e}"),
                "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                    assert_eq!(open.get(&key("messageId")), Some(&owner(e)), "{e}")
                }
                "TEXT_MESSAGE_END" | "REASONING_MESSAGE_END" => {
                    assert_eq!(open.remove(&key("messageId")), Some(owner(e)), "{e}")
                }
                "TOOL_CALL_ARGS" => assert_eq!(open.get(&key("toolCallId")), Some(&owner(e)), "{e}"),
                "TOOL_CALL_END" => assert_eq!(open.remove(&key("toolCallId")), Some(owner(e)), "{e}"),
                "SUBAGENT_STARTED" => subagents.push(owner(e).unwrap()),
                "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                    let id = owner(e).unwrap();
                    assert!(subagents.contains(&id), "{e}");
                    subagents.retain(|s| *s != id);
                }
                "RUN_FINISHED" => {
                    assert!(open.is_empty() && subagents.is_empty(), "open at the end: {open:?} {subagents:?}")
                }
                _ => {}
            }
        }
    }

    #[test]
    fn children_are_subagents_and_every_child_event_names_its_subagent() {
        let mut mapper = AgUiMapper::default();
        let mut out = Vec::new();
        for event in crate::adapters::children_run() {
            mapper.map(&event, &mut out);
        }
        verify(&out);
        let started: Vec<&Value> = out.iter().filter(|e| e["type"] == "SUBAGENT_STARTED").collect();
        assert_eq!(
            (
                started[0]["subagentRunId"].as_str(),
                started[0]["name"].as_str(),
                started[0]["parentToolCallId"].as_str()
            ),
            (Some("t1"), Some("researcher"), Some("call_team"))
        );
        assert_eq!(started[0]["metadata"], json!({"agw": {"taskName": "research"}}));
        assert_eq!(started[1]["name"], "writer");
        let of = |id: &str| out.iter().filter(|e| e["messageId"] == id || e["toolCallId"] == id).collect::<Vec<_>>();
        assert!(of("r_t2_c_1").iter().all(|e| e["subagentRunId"] == "t2"));
        assert!(of("t1_call_w").iter().all(|e| e["subagentRunId"] == "t1"));
        assert!(of("call_team").iter().all(|e| e.get("subagentRunId").is_none()), "the parent's own call");
        assert!(of("r_c_2").iter().all(|e| e.get("subagentRunId").is_none()));
        // A child's call after its text in the same turn belongs to that assistant message.
        let call = of("t1_call_w")[0];
        assert_eq!(call["parentMessageId"], "r_t1_c_1");
        let ends: Vec<&Value> =
            out.iter().filter(|e| e["type"] == "SUBAGENT_FINISHED" || e["type"] == "SUBAGENT_ERROR").collect();
        assert_eq!(
            ends[0],
            &json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "t1", "outcome": {"type": "success"}, "timestamp": 0})
        );
        assert_eq!(
            (ends[1]["type"].as_str(), ends[1]["message"].as_str(), ends[1]["code"].as_str()),
            (Some("SUBAGENT_ERROR"), Some("boom"), Some("provider_error"))
        );
        assert_eq!(out.last().unwrap()["type"], "RUN_FINISHED");
    }

    /// A child's frontend call suspends the stream while the other child still writes: what is
    /// open ends (subagents `suspended`), and the continuation reopens it under the same ids.
    #[test]
    fn a_suspension_ends_open_children_and_the_continuation_reopens_them() {
        let mut events = crate::adapters::children_run();
        // t1's call (seq 12) becomes a frontend call; the stream suspends at its end (seq 14).
        if let EventPayload::ToolStart(start) = &mut events[11].payload {
            start.tool_key = Some("confirm_dialog".into());
        }
        let mut first = AgUiMapper::default();
        let mut out = Vec::new();
        for event in &events[..14] {
            first.map(event, &mut out);
        }
        assert_eq!(first.pending_tool_calls(), ["t1_call_w"]);
        first.suspend(&mut out);
        verify(&out);
        let tail: Vec<&str> = out[out.len() - 4..].iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(tail, ["TEXT_MESSAGE_END", "SUBAGENT_FINISHED", "SUBAGENT_FINISHED", "RUN_FINISHED"]);
        assert_eq!(out[out.len() - 2]["outcome"], json!({"type": "suspended"}));

        let mut next = AgUiMapper::default();
        let mut scratch = Vec::new();
        for event in &events[..14] {
            next.map(event, &mut scratch);
        }
        next.suspend(&mut scratch);
        next.answered("t1_call_w");
        let mut out = Vec::new();
        next.resume(&mut out);
        for event in &events[14..] {
            next.map(event, &mut out);
        }
        verify(&out);
        let head: Vec<&str> = out[..4].iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(head, ["RUN_STARTED", "SUBAGENT_STARTED", "SUBAGENT_STARTED", "TEXT_MESSAGE_START"]);
        assert_eq!((out[3]["messageId"].as_str(), out[3]["subagentRunId"].as_str()), (Some("r_t2_c_1"), Some("t2")));
        assert_eq!(
            out.last().unwrap()["outcome"],
            json!({"type": "success"}),
            "the answered call is no longer pending"
        );
    }

    /// Issue 35: a citation is `CUSTOM agw.citation` after the text it follows, its value the
    /// citation's fields, flat; a child's carries its `subagentRunId` like the child's text.
    #[test]
    fn citations_are_custom_events_after_their_text() {
        let mut mapper = AgUiMapper::default();
        let mut out = Vec::new();
        for event in crate::adapters::cited_run() {
            mapper.map(&event, &mut out);
        }
        let types: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "CUSTOM",
                "TEXT_MESSAGE_CONTENT",
                "CUSTOM",
                "TEXT_MESSAGE_END",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "CUSTOM",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED",
            ]
        );
        assert_eq!(
            out[3],
            json!({"type": "CUSTOM", "name": "agw.citation", "value": {"contentId": "r_c_1", "index": 0,
                "messageId": "361", "content": "The translation cannot be turned off", "senderName": "Coral",
                "senderId": "u361", "timestamp": 1_736_985_600_000_i64, "chatId": "11200463399", "offset": 22,
                "toolId": "call_msgs"}, "timestamp": 0})
        );
        assert_eq!(out[5]["value"]["url"], "https://example.com/notes/7");
        assert!(out[3].get("subagentRunId").is_none());
        assert_eq!(out[9]["subagentRunId"], "t1");
        assert_eq!(
            (out[9]["value"]["contentId"].as_str(), out[9]["value"]["index"].as_u64()),
            (Some("r_t1_c_1"), Some(2))
        );
    }

    /// Issue 36: a guard's events are custom events whose value is the native fields with AG-UI's
    /// names for the text message and the call; a child's names its subagent; the revoke comes
    /// after the message's end, and RUN_ERROR with the code ends the run.
    #[test]
    fn guard_events_are_custom_events_and_a_revoke_names_its_message() {
        let mut mapper = AgUiMapper::default();
        let mut out = Vec::new();
        for event in crate::adapters::guarded_run() {
            mapper.map(&event, &mut out);
        }
        verify(&out);
        let custom: Vec<String> = out
            .iter()
            .filter(|e| e["type"] == "CUSTOM")
            .map(|e| {
                let mut e = e.clone();
                e.as_object_mut().map(|o| o.remove("timestamp"));
                e.to_string()
            })
            .collect();
        assert_eq!(
            custom,
            [
                r#"{"type":"CUSTOM","name":"agw.warning","value":{"stage":"toolInput","guard":"rules:demo","rule":"r1","message":"careful","toolCallId":"t1","statusCode":-1007}}"#,
                r#"{"type":"CUSTOM","name":"agw.block","value":{"stage":"toolInput","guard":"webhook","reason":"not allowed","toolCallId":"t9_call","statusCode":-1006},"subagentRunId":"t9"}"#,
                r#"{"type":"CUSTOM","name":"agw.warning","value":{"stage":"output","guard":"rules:demo","rule":"r1","message":"careful","messageId":"r_c_2","statusCode":-1007}}"#,
                r#"{"type":"CUSTOM","name":"agw.revoke","value":{"messageId":"r_c_2","stage":"output","guard":"rules:pii","rule":"email","reason":"personal data","statusCode":-1006}}"#,
            ]
        );
        let tail: Vec<&str> = out[out.len() - 3..].iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(tail, ["TEXT_MESSAGE_END", "CUSTOM", "RUN_ERROR"]);
        assert_eq!(out.last().unwrap()["code"], "guardrail_blocked");
    }
}
