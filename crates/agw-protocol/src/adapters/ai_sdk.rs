//! agw events → the Vercel AI SDK's UI message stream, v1 (AI SDK 5 and 6: `useChat`,
//! `DefaultChatTransport`, `readUIMessageStream`). Issue 16; the table is in
//! `docs/protocols.md`.
//!
//! The stream is SSE with data-only frames (`data: <chunk json>\n\n`), answered with the header
//! [`HEADER_NAME`]`: `[`HEADER_VALUE`], and ends with [`DONE_FRAME`]. One agw event becomes zero,
//! one or two chunks; text and argument deltas map one to one, so the adapter never merges,
//! splits or holds a delta.
//!
//! Backend tools (and actions) run on the server: their parts are `dynamic` (the client does not
//! declare them) and `providerExecuted`. Frontend tools are client-side tools: their call ends
//! with `tool-input-available` and no output; the client answers with `addToolResult` in its next
//! request.
//!
//! Steps: every model turn is a step of its own (`start-step` … `finish-step`), as the AI SDK's
//! own server writes it. agw has no event for the start of a turn, but a turn's first output
//! (reasoning, text, a tool call) after tool outputs is always a new turn: the outputs go back to
//! the model before it writes again. The client relies on it: `useChat`'s
//! `lastAssistantMessageIsCompleteWithToolCalls` reads the message's last step, and a tool output
//! in the same step as the next turn's text reads as a step still waiting to be sent (issue 32).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::event::{Event, EventPayload};

/// The response header naming the protocol.
pub const HEADER_NAME: &str = "x-vercel-ai-ui-message-stream";
/// Its value for the UI message stream v1.
pub const HEADER_VALUE: &str = "v1";
/// The last frame of every stream.
pub const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";

/// One call as far as the client knows it.
#[derive(Debug, Default)]
struct Call {
    name: String,
    arguments: String,
    frontend: bool,
}

/// Where the stream is between `start-step` and `finish-step`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// No step open: the start of a continuation, or after `finish-step`.
    #[default]
    Closed,
    /// A model turn's step is open.
    Open,
    /// The open step's calls have outputs: the model's next output is a new turn.
    Answered,
}

/// Maps one run's events to UI message chunks, in order. One mapper per stream.
#[derive(Debug, Default)]
pub struct UiMessageMapper {
    calls: HashMap<String, Call>,
    started: bool,
    finished: bool,
    step: Step,
    /// Approvals requested and not answered yet (awaiting ids).
    approvals: Vec<String>,
}

/// `data: <chunk>\n\n`.
pub fn frame(chunk: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    // A `Value` always serialises.
    out.extend_from_slice(chunk.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// The text the model sees as a tool's output, as the client should see it: JSON when it is JSON.
fn output(result: &str) -> Value {
    serde_json::from_str(result).unwrap_or_else(|_| Value::String(result.to_owned()))
}

/// The error text of an agw tool error result (`{"ok":false,"error":"…"}`), if it is one.
fn tool_error(result: &str) -> Option<String> {
    let value: Value = serde_json::from_str(result).ok()?;
    (value.get("ok") == Some(&Value::Bool(false))).then(|| value.get("error")?.as_str().map(str::to_owned))?
}

fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(Map::new()),
    }
}

/// AI SDK finish reasons: `stop`, `length`, `content-filter`, `tool-calls`, `error`, `other`.
fn finish_reason(agw: &str) -> &'static str {
    match agw {
        "stop" | "end_turn" => "stop",
        "length" | "max_tokens" => "length",
        "content_filter" => "content-filter",
        "tool_calls" => "tool-calls",
        _ => "other",
    }
}

impl UiMessageMapper {
    /// A mapper at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the terminal chunk (`finish`, `abort`) was produced.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The call ids that ended as client-side (frontend) tool calls without an output: the run
    /// waits for the client's `addToolResult`.
    pub fn pending_client_calls(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.calls.iter().filter(|(_, c)| c.frontend).map(|(id, _)| id.clone()).collect();
        ids.sort();
        ids
    }

    /// Approvals the run waits for (their `approvalId`s): the stream should end here, the client
    /// answers with `addToolApprovalResponse`.
    pub fn pending_approvals(&self) -> &[String] {
        &self.approvals
    }

    /// A mapper for the continuation of a run whose server-side call `id` (tool `name`) the
    /// client just approved or rejected: its output chunk must name the part the client has.
    pub fn expect_server_call(&mut self, id: &str, name: &str) {
        self.started = true;
        self.calls.insert(id.to_owned(), Call { name: name.to_owned(), arguments: String::new(), frontend: false });
    }

    /// A mapper for the continuation of a run whose client-side call `id` (tool `name`) the
    /// client just answered: its output chunk must name the part the client already has.
    pub fn expect_client_call(&mut self, id: &str, name: &str) {
        self.started = true;
        self.calls.insert(id.to_owned(), Call { name: name.to_owned(), arguments: String::new(), frontend: true });
    }

    /// Ends the stream of a run that now waits for the client's tool outputs: `finish-step`,
    /// `finish` with reason `tool-calls`.
    pub fn suspend(&mut self, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        self.finish_step(out);
        out.push(json!({"type": "finish", "finishReason": "tool-calls"}));
        self.finished = true;
    }

    /// Before a model turn's output: opens its step, closing the previous one when the
    /// previous turn's calls were answered since (a new turn).
    fn model_output(&mut self, out: &mut Vec<Value>) {
        match self.step {
            Step::Open => return,
            Step::Answered => out.push(json!({"type": "finish-step"})),
            Step::Closed => {}
        }
        out.push(json!({"type": "start-step"}));
        self.step = Step::Open;
    }

    /// A call's output arrived: the open step (if any) is answered.
    fn tool_output(&mut self) {
        if self.step == Step::Open {
            self.step = Step::Answered;
        }
    }

    /// `finish-step` when a step is open.
    fn finish_step(&mut self, out: &mut Vec<Value>) {
        if self.step != Step::Closed {
            out.push(json!({"type": "finish-step"}));
            self.step = Step::Closed;
        }
    }

    fn call_start(&mut self, id: &str, name: &str, frontend: bool, out: &mut Vec<Value>) {
        self.model_output(out);
        self.calls.insert(id.to_owned(), Call { name: name.to_owned(), arguments: String::new(), frontend });
        let mut chunk = json!({"type": "tool-input-start", "toolCallId": id, "toolName": name});
        if !frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        out.push(chunk);
    }

    fn call_args(&mut self, id: &str, delta: &str, out: &mut Vec<Value>) {
        if let Some(call) = self.calls.get_mut(id) {
            call.arguments.push_str(delta);
        }
        out.push(json!({"type": "tool-input-delta", "toolCallId": id, "inputTextDelta": delta}));
    }

    fn call_end(&mut self, id: &str, out: &mut Vec<Value>) {
        let Some(call) = self.calls.get(id) else { return };
        let mut chunk = json!({"type": "tool-input-available", "toolCallId": id, "toolName": call.name, "input": input(&call.arguments)});
        if !call.frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        out.push(chunk);
    }

    fn call_result(&mut self, id: &str, result: Value, out: &mut Vec<Value>) {
        let frontend = self.calls.get(id).is_some_and(|c| c.frontend);
        let mut chunk = json!({"type": "tool-output-available", "toolCallId": id, "output": result});
        if !frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        if let Some(call) = self.calls.get_mut(id) {
            // Answered: no longer waiting for the client.
            call.frontend = false;
        }
        self.tool_output();
        out.push(chunk);
    }

    fn call_error(&mut self, id: &str, error_text: String, out: &mut Vec<Value>) {
        let frontend = self.calls.get(id).is_some_and(|c| c.frontend);
        let mut chunk = json!({"type": "tool-output-error", "toolCallId": id, "errorText": error_text});
        if !frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        if let Some(call) = self.calls.get_mut(id) {
            call.frontend = false;
        }
        self.tool_output();
        out.push(chunk);
    }

    fn ensure_started(&mut self, run_id: &str, chat_id: &str, out: &mut Vec<Value>) {
        if !self.started {
            self.started = true;
            out.push(
                json!({"type": "start", "messageId": run_id, "messageMetadata": {"chatId": chat_id, "runId": run_id}}),
            );
            self.model_output(out);
        }
    }

    /// Appends the chunks `event` becomes (none for events the protocol has no place for).
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        match &event.payload {
            EventPayload::RunStart(e) => self.ensure_started(&e.run_id, &e.chat_id, out),
            EventPayload::ReasoningStart(e) => {
                self.model_output(out);
                out.push(json!({"type": "reasoning-start", "id": e.reasoning_id}))
            }
            EventPayload::ReasoningDelta(e) => {
                out.push(json!({"type": "reasoning-delta", "id": e.reasoning_id, "delta": e.delta}))
            }
            EventPayload::ReasoningEnd(e) => out.push(json!({"type": "reasoning-end", "id": e.reasoning_id})),
            EventPayload::ContentStart(e) => {
                self.model_output(out);
                out.push(json!({"type": "text-start", "id": e.content_id}))
            }
            EventPayload::ContentDelta(e) => {
                out.push(json!({"type": "text-delta", "id": e.content_id, "delta": e.delta}))
            }
            EventPayload::ContentEnd(e) => out.push(json!({"type": "text-end", "id": e.content_id})),
            EventPayload::ToolStart(e) => {
                let name = e.tool_name.clone().unwrap_or_default();
                // A frontend tool carries its viewport key; the client renders and answers it.
                self.call_start(&e.tool_id, &name, e.tool_key.is_some(), out)
            }
            EventPayload::ToolArgs(e) => self.call_args(&e.tool_id, &e.delta, out),
            EventPayload::ToolEnd(e) => self.call_end(&e.tool_id, out),
            EventPayload::ToolResult(e) => match tool_error(&e.result) {
                // agw's tool errors (`{"ok":false,"error":…}`: unknown tool, failure, timeout).
                Some(error_text) => self.call_error(&e.tool_id, error_text, out),
                None => self.call_result(&e.tool_id, output(&e.result), out),
            },
            EventPayload::ActionStart(e) => {
                let name = e.action_name.clone().unwrap_or_default();
                self.call_start(&e.action_id, &name, false, out)
            }
            EventPayload::ActionArgs(e) => self.call_args(&e.action_id, &e.delta, out),
            EventPayload::ActionEnd(e) => self.call_end(&e.action_id, out),
            EventPayload::ActionResult(e) => self.call_result(&e.action_id, e.result.clone(), out),
            EventPayload::PlanUpdate(e) => {
                out.push(json!({"type": "data-plan", "id": e.plan_id, "data": {"planId": e.plan_id, "plan": e.plan}}))
            }
            EventPayload::TaskStart(e) => out.push(json!({"type": "data-task", "id": e.task_id,
                "data": {"taskId": e.task_id, "status": "running", "description": e.description}})),
            EventPayload::TaskComplete(e) => out.push(
                json!({"type": "data-task", "id": e.task_id, "data": {"taskId": e.task_id, "status": "completed"}}),
            ),
            EventPayload::TaskCancel(e) => out.push(
                json!({"type": "data-task", "id": e.task_id, "data": {"taskId": e.task_id, "status": "cancelled"}}),
            ),
            EventPayload::TaskFail(e) => out.push(json!({"type": "data-task", "id": e.task_id,
                "data": {"taskId": e.task_id, "status": "failed", "error": {"code": e.error.code, "message": e.error.message}}})),
            EventPayload::AwaitingAsk(e) => {
                for approval in &e.approvals {
                    if !self.calls.contains_key(&approval.id) {
                        // A frontend tool or action is not streamed before its approval: the
                        // request needs a part to be about, inside the turn's step.
                        self.model_output(out);
                        let arguments = approval.arguments.to_string();
                        let call = Call { name: approval.tool_name.clone(), arguments, frontend: false };
                        self.calls.insert(approval.id.clone(), call);
                        self.call_end(&approval.id, out);
                    }
                    self.approvals.push(e.awaiting_id.clone());
                    out.push(json!({"type": "tool-approval-request", "approvalId": e.awaiting_id, "toolCallId": approval.id}));
                }
            }
            EventPayload::AwaitingAnswer(e) => self.approvals.retain(|id| *id != e.awaiting_id),
            EventPayload::RequestSteer(e) => out.push(
                json!({"type": "data-steer", "id": e.steer_id, "data": {"steerId": e.steer_id, "message": e.message}}),
            ),
            EventPayload::ContextCompact(e) => {
                out.push(json!({"type": "data-context-compact", "data": super::compact_summary(e)}));
            }
            EventPayload::RunComplete(e) => {
                self.finish_step(out);
                out.push(json!({"type": "finish", "finishReason": finish_reason(&e.finish_reason)}));
                self.finished = true;
            }
            EventPayload::RunError(e) => {
                out.push(json!({"type": "error", "errorText": e.error.message}));
                out.push(json!({"type": "finish", "finishReason": "error"}));
                self.finished = true;
            }
            EventPayload::RunCancel(_) => {
                out.push(json!({"type": "abort", "reason": "cancelled"}));
                self.finished = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        ContentDelta, ContentEnd, ContentStart, PlanTask, PlanUpdate, RunComplete, RunStart, TaskStatus, ToolArgs,
        ToolEnd, ToolResult, ToolStart,
    };

    fn map_all(events: Vec<Event>) -> (UiMessageMapper, Vec<Value>) {
        let mut mapper = UiMessageMapper::new();
        let mut out = Vec::new();
        for event in &events {
            mapper.map(event, &mut out);
        }
        (mapper, out)
    }

    fn ev(seq: u64, payload: impl Into<EventPayload>) -> Event {
        Event::new(seq, 0, payload)
    }

    fn tool_start(id: &str, name: &str, frontend: bool) -> ToolStart {
        ToolStart {
            tool_id: id.into(),
            run_id: "r".into(),
            task_id: None,
            tool_name: Some(name.into()),
            tool_type: Some(if frontend { "html" } else { "function" }.into()),
            tool_api: None,
            tool_params: None,
            description: None,
            tool_key: frontend.then(|| name.to_owned()),
            tool_timeout: frontend.then_some(1000),
        }
    }

    #[test]
    fn text_run_maps_one_delta_to_one_chunk() {
        let (mapper, out) = map_all(vec![
            ev(2, RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(3, ContentStart { content_id: "r_c_1".into(), run_id: "r".into(), task_id: None }),
            ev(4, ContentDelta { content_id: "r_c_1".into(), delta: "Hel".into() }),
            ev(5, ContentDelta { content_id: "r_c_1".into(), delta: "lo".into() }),
            ev(6, ContentEnd { content_id: "r_c_1".into() }),
            ev(7, RunComplete { run_id: "r".into(), finish_reason: "stop".into(), totals: Default::default() }),
        ]);
        let types: Vec<&str> = out.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            ["start", "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step", "finish"]
        );
        assert_eq!(out[0]["messageId"], "r");
        assert_eq!(out[3], json!({"type": "text-delta", "id": "r_c_1", "delta": "Hel"}));
        assert_eq!(out[7]["finishReason"], "stop");
        assert!(mapper.is_finished());
        assert_eq!(frame(&out[3]), b"data: {\"type\":\"text-delta\",\"id\":\"r_c_1\",\"delta\":\"Hel\"}\n\n".to_vec());
    }

    /// The chunks without the step boundaries (tested on their own).
    fn without_steps(out: Vec<Value>) -> Vec<Value> {
        out.into_iter().filter(|c| c["type"] != "start-step" && c["type"] != "finish-step").collect()
    }

    fn types(out: &[Value]) -> Vec<&str> {
        out.iter().map(|c| c["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn backend_calls_are_provider_executed_and_frontend_calls_wait_for_the_client() {
        let (mapper, out) = map_all(vec![
            ev(1, tool_start("b1", "weather", false)),
            ev(2, ToolArgs { tool_id: "b1".into(), delta: "{\"city\":".into(), chunk_index: 0 }),
            ev(3, ToolArgs { tool_id: "b1".into(), delta: "\"Paris\"}".into(), chunk_index: 1 }),
            ev(4, ToolEnd { tool_id: "b1".into() }),
            ev(5, ToolResult { tool_id: "b1".into(), result: "{\"temp\":21}".into() }),
            ev(6, tool_start("f1", "confirm_dialog", true)),
            ev(7, ToolEnd { tool_id: "f1".into() }),
        ]);
        let out = without_steps(out);
        assert_eq!(out[0]["providerExecuted"], true);
        assert_eq!(out[1]["inputTextDelta"], "{\"city\":");
        assert_eq!(out[3]["input"], json!({"city": "Paris"}));
        assert_eq!(
            out[4],
            json!({"type": "tool-output-available", "toolCallId": "b1", "output": {"temp": 21},
            "providerExecuted": true, "dynamic": true})
        );
        assert_eq!(out[5], json!({"type": "tool-input-start", "toolCallId": "f1", "toolName": "confirm_dialog"}));
        assert_eq!(out[6]["input"], json!({}), "no arguments: an empty object, never invalid JSON");
        assert_eq!(mapper.pending_client_calls(), ["f1"]);
    }

    #[test]
    fn a_tool_error_is_tool_output_error() {
        let (_, out) = map_all(vec![
            ev(1, tool_start("b1", "weather", false)),
            ev(
                2,
                ToolResult {
                    tool_id: "b1".into(),
                    result: r#"{"tool":"weather","ok":false,"error":"timed out"}"#.into(),
                },
            ),
        ]);
        let out = without_steps(out);
        assert_eq!(out[1]["type"], "tool-output-error");
        assert_eq!(out[1]["errorText"], "timed out");
        let (_, out) = map_all(vec![
            ev(1, tool_start("b2", "w", false)),
            ev(2, ToolResult { tool_id: "b2".into(), result: r#"{"ok":true}"#.into() }),
        ]);
        assert_eq!(without_steps(out)[1]["type"], "tool-output-available");
    }

    fn content(seq: u64, id: &str, text: &str) -> Vec<Event> {
        vec![
            ev(seq, ContentStart { content_id: id.into(), run_id: "r".into(), task_id: None }),
            ev(seq + 1, ContentDelta { content_id: id.into(), delta: text.into() }),
            ev(seq + 2, ContentEnd { content_id: id.into() }),
        ]
    }

    fn complete(seq: u64) -> Event {
        ev(seq, RunComplete { run_id: "r".into(), finish_reason: "stop".into(), totals: Default::default() })
    }

    /// Issue 32: a model turn after tool outputs is a step of its own.
    #[test]
    fn every_model_turn_is_a_step_of_its_own() {
        let mut events = vec![
            ev(1, RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(2, tool_start("b1", "weather", false)),
            ev(3, ToolEnd { tool_id: "b1".into() }),
            ev(4, ToolResult { tool_id: "b1".into(), result: "{}".into() }),
        ];
        events.extend(content(5, "r_c_1", "Sunny."));
        events.push(complete(8));
        let (_, out) = map_all(events);
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-available",
                "tool-output-available",
                "finish-step",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
    }

    /// The stream that continues a run after the client's tool output: the output names the
    /// part the client has, then the next turn opens a step.
    #[test]
    fn a_continuation_opens_a_step_for_the_next_turn() {
        let mut mapper = UiMessageMapper::new();
        mapper.expect_client_call("f1", "confirm_dialog");
        let mut out = Vec::new();
        let mut events = vec![ev(9, ToolResult { tool_id: "f1".into(), result: "{\"ok\":1}".into() })];
        events.extend(content(10, "r_c_2", "You chose."));
        events.push(complete(13));
        for event in &events {
            mapper.map(event, &mut out);
        }
        assert_eq!(
            types(&out),
            ["tool-output-available", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]
        );
        assert!(out[0].get("providerExecuted").is_none(), "the client's own call");

        // Reasoning first, or another call, opens the step just the same.
        let mut mapper = UiMessageMapper::new();
        mapper.expect_server_call("b1", "weather");
        let mut out = Vec::new();
        for event in [
            ev(9, ToolResult { tool_id: "b1".into(), result: "{}".into() }),
            ev(10, crate::event::ReasoningStart { reasoning_id: "r_r_1".into(), run_id: "r".into(), task_id: None }),
            ev(11, crate::event::ReasoningEnd { reasoning_id: "r_r_1".into() }),
            ev(12, tool_start("b2", "weather", false)),
        ] {
            mapper.map(&event, &mut out);
        }
        assert_eq!(
            types(&out),
            ["tool-output-available", "start-step", "reasoning-start", "reasoning-end", "tool-input-start"]
        );
    }

    #[test]
    fn a_suspended_stream_closes_its_step_once() {
        let mut mapper = UiMessageMapper::new();
        let mut out = Vec::new();
        for event in [
            ev(1, RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(2, tool_start("f1", "confirm_dialog", true)),
            ev(3, ToolEnd { tool_id: "f1".into() }),
        ] {
            mapper.map(&event, &mut out);
        }
        mapper.suspend(&mut out);
        assert_eq!(
            types(&out),
            ["start", "start-step", "tool-input-start", "tool-input-available", "finish-step", "finish"]
        );
        // A run that ends right after the client's output, with no further turn: no empty step.
        let mut mapper = UiMessageMapper::new();
        mapper.expect_client_call("f1", "confirm_dialog");
        let mut out = Vec::new();
        mapper.map(&ev(9, ToolResult { tool_id: "f1".into(), result: "1".into() }), &mut out);
        mapper.map(&complete(10), &mut out);
        assert_eq!(types(&out), ["tool-output-available", "finish"]);
    }

    #[test]
    fn the_plan_is_one_data_part_updated_in_place() {
        let plan = vec![PlanTask { task_id: "t1".into(), description: "d".into(), status: TaskStatus::Init }];
        let (_, out) = map_all(vec![ev(1, PlanUpdate { plan_id: "plan_1".into(), chat_id: "c".into(), plan })]);
        assert_eq!(out[0]["type"], "data-plan");
        assert_eq!(out[0]["id"], "plan_1", "the same id replaces the part");
        assert_eq!(out[0]["data"]["plan"][0]["taskId"], "t1");
    }

    #[test]
    fn errors_and_cancels_end_the_stream() {
        let error = crate::event::RunError {
            run_id: "r".into(),
            error: crate::RunErrorInfo::new(crate::ErrorCode::ProviderError, "boom", true),
            totals: Default::default(),
        };
        let (mapper, out) = map_all(vec![
            ev(1, error),
            ev(2, RunComplete { run_id: "r".into(), finish_reason: "stop".into(), totals: Default::default() }),
        ]);
        assert_eq!(
            out,
            [json!({"type": "error", "errorText": "boom"}), json!({"type": "finish", "finishReason": "error"})]
        );
        assert!(mapper.is_finished(), "nothing after the terminal chunk");
        let (_, out) = map_all(vec![ev(1, crate::event::RunCancel { run_id: "r".into(), totals: Default::default() })]);
        assert_eq!(out, [json!({"type": "abort", "reason": "cancelled"})]);
    }

    #[test]
    fn an_approval_for_a_call_not_streamed_yet_gets_its_part_first() {
        use crate::event::{ApprovalRequest, AwaitingAsk};
        let ask = |id: &str, tool: &str| AwaitingAsk {
            awaiting_id: id.into(),
            run_id: "r".into(),
            mode: "approval".into(),
            timeout: 1000,
            approvals: vec![ApprovalRequest {
                id: id.into(),
                command: tool.into(),
                description: None,
                options: Vec::new(),
                allow_free_text: false,
                tool_name: tool.into(),
                arguments: json!({"theme": "dark"}),
                rule: tool.into(),
                agent_key: "a".into(),
            }],
            tool_name: None,
            arguments: None,
            viewport_type: None,
            viewport_key: None,
        };
        // An action held back until it is approved: the request needs a part.
        let (mapper, out) = map_all(vec![ev(1, ask("a1", "switch_theme"))]);
        let types: Vec<&str> = out.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["start-step", "tool-input-available", "tool-approval-request"]);
        assert_eq!((out[1]["toolName"].as_str(), out[1]["dynamic"].as_bool()), (Some("switch_theme"), Some(true)));
        assert_eq!(out[1]["input"], json!({"theme": "dark"}));
        assert_eq!(mapper.pending_approvals(), ["a1"]);
        // A backend call streamed before its question: only the request.
        let (_, out) = map_all(vec![
            ev(1, tool_start("b1", "w", false)),
            ev(2, ToolEnd { tool_id: "b1".into() }),
            ev(3, ask("b1", "w")),
        ]);
        let types: Vec<&str> = out.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["start-step", "tool-input-start", "tool-input-available", "tool-approval-request"]);
    }
}
