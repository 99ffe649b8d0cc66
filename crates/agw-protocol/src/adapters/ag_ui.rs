//! agw events → AG-UI events (protocol 1.0, `@ag-ui/core`), data-only SSE frames. Issue 16; the
//! table is in `docs/protocols.md`.
//!
//! The stream keeps the ordering rules AG-UI's client verifies: `RUN_STARTED` first, every
//! message and tool call closed before `RUN_FINISHED`, nothing after `RUN_ERROR`. agw's own
//! assembler already closes every block before its terminal event, so the mapping stays one
//! event to one (or, for reasoning spans, two) AG-UI events.
//!
//! A frontend tool is a client-side tool: when the run waits for it, the HTTP layer ends the
//! stream with [`AgUiMapper::suspend`] (`RUN_FINISHED`, outcome `success` with
//! `pendingToolCallIds`); the client's next `RunAgentInput` carries the `tool` message.

use serde_json::{Value, json};

use crate::event::{Event, EventPayload};

/// Maps one run's events to AG-UI events. One mapper per stream.
#[derive(Debug, Default)]
pub struct AgUiMapper {
    thread_id: String,
    run_id: String,
    /// Frontend calls whose arguments ended and that have no result yet.
    pending: Vec<String>,
    frontend: Vec<String>,
    finished: bool,
}

/// `data: <event>\n\n`.
pub fn frame(event: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend_from_slice(event.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out
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

    /// `RUN_STARTED` for a stream that continues a run (its `run.start` was in an earlier stream).
    pub fn start(&mut self, out: &mut Vec<Value>) {
        out.push(json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}));
    }

    /// Ends the stream of a run that now waits for the client (its frontend calls): `RUN_FINISHED`
    /// with outcome `success` and the pending call ids.
    pub fn suspend(&mut self, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        self.finished = true;
        out.push(json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id,
            "outcome": {"type": "success", "pendingToolCallIds": self.pending}}));
    }

    /// Appends the AG-UI events `event` becomes.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        let ts = event.timestamp;
        let mut push = |mut value: Value| {
            value["timestamp"] = json!(ts);
            out.push(value);
        };
        match &event.payload {
            EventPayload::RunStart(e) => {
                self.thread_id.clone_from(&e.chat_id);
                self.run_id.clone_from(&e.run_id);
                push(json!({"type": "RUN_STARTED", "threadId": e.chat_id, "runId": e.run_id}));
            }
            EventPayload::ReasoningStart(e) => {
                push(json!({"type": "REASONING_START", "messageId": e.reasoning_id}));
                push(json!({"type": "REASONING_MESSAGE_START", "messageId": e.reasoning_id, "role": "reasoning"}));
            }
            EventPayload::ReasoningDelta(e) => {
                push(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": e.reasoning_id, "delta": e.delta}))
            }
            EventPayload::ReasoningEnd(e) => {
                push(json!({"type": "REASONING_MESSAGE_END", "messageId": e.reasoning_id}));
                push(json!({"type": "REASONING_END", "messageId": e.reasoning_id}));
            }
            EventPayload::ContentStart(e) => {
                push(json!({"type": "TEXT_MESSAGE_START", "messageId": e.content_id, "role": "assistant"}))
            }
            EventPayload::ContentDelta(e) => {
                push(json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": e.content_id, "delta": e.delta}))
            }
            EventPayload::ContentEnd(e) => push(json!({"type": "TEXT_MESSAGE_END", "messageId": e.content_id})),
            EventPayload::ToolStart(e) => {
                if e.tool_key.is_some() {
                    self.frontend.push(e.tool_id.clone());
                }
                let name = e.tool_name.clone().unwrap_or_default();
                push(json!({"type": "TOOL_CALL_START", "toolCallId": e.tool_id, "toolCallName": name}))
            }
            EventPayload::ToolArgs(e) => {
                push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": e.tool_id, "delta": e.delta}))
            }
            EventPayload::ToolEnd(e) => {
                if self.frontend.contains(&e.tool_id) {
                    self.pending.push(e.tool_id.clone());
                }
                push(json!({"type": "TOOL_CALL_END", "toolCallId": e.tool_id}))
            }
            EventPayload::ToolResult(e) => {
                self.pending.retain(|id| *id != e.tool_id);
                push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("{}_result", e.tool_id),
                    "toolCallId": e.tool_id, "content": e.result, "role": "tool"}))
            }
            EventPayload::ActionStart(e) => {
                let name = e.action_name.clone().unwrap_or_default();
                push(json!({"type": "TOOL_CALL_START", "toolCallId": e.action_id, "toolCallName": name}))
            }
            EventPayload::ActionArgs(e) => {
                push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": e.action_id, "delta": e.delta}))
            }
            EventPayload::ActionEnd(e) => push(json!({"type": "TOOL_CALL_END", "toolCallId": e.action_id})),
            EventPayload::ActionResult(e) => {
                let content = match &e.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("{}_result", e.action_id),
                    "toolCallId": e.action_id, "content": content, "role": "tool"}))
            }
            EventPayload::PlanUpdate(e) => {
                push(json!({"type": "STATE_SNAPSHOT", "snapshot": {"plan": {"planId": e.plan_id, "tasks": e.plan}}}))
            }
            EventPayload::TaskStart(e) => push(json!({"type": "STEP_STARTED", "stepName": e.task_id})),
            EventPayload::TaskComplete(e) => push(json!({"type": "STEP_FINISHED", "stepName": e.task_id})),
            EventPayload::TaskCancel(e) => push(json!({"type": "STEP_FINISHED", "stepName": e.task_id})),
            EventPayload::TaskFail(e) => push(json!({"type": "STEP_FINISHED", "stepName": e.task_id})),
            EventPayload::RequestSteer(e) => push(json!({"type": "CUSTOM", "name": "agw.steer",
                "value": {"steerId": e.steer_id, "message": e.message}})),
            EventPayload::ContextCompact(e) => push(json!({"type": "CUSTOM", "name": "agw.context_compact",
                "value": super::compact_summary(e)})),
            EventPayload::RunComplete(e) => {
                self.finished = true;
                let mut outcome = json!({"type": "success"});
                if !self.pending.is_empty() {
                    outcome["pendingToolCallIds"] = json!(self.pending);
                }
                push(json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": e.run_id, "outcome": outcome}))
            }
            EventPayload::RunCancel(e) => {
                self.finished = true;
                push(json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": e.run_id,
                    "outcome": {"type": "cancelled"}}))
            }
            EventPayload::RunError(e) => {
                self.finished = true;
                push(json!({"type": "RUN_ERROR", "message": e.error.message, "code": e.error.code.as_str()}))
            }
            _ => {}
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
            ev(RunComplete { run_id: "r".into(), finish_reason: "stop".into(), totals: Default::default() }),
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
}
