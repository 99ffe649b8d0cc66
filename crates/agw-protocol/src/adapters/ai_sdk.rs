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
//!
//! Child tasks (sub-agents, issue 34): a child's text, reasoning and tool calls are parts of the
//! same assistant message with their own ids, tagged `providerMetadata: {agw: {taskId}}` (the
//! part's `providerMetadata` / `callProviderMetadata`), and its frame is a `data-task` part. They
//! run while the parent's `agent_invoke` call runs, so they share one step of their own after the
//! step with that call: a child's tool output is not the parent's, and its step stays apart from
//! the parent's turns, which `useChat`'s automatic sends read.
//!
//! Guardrails (issue 36): a guard's `content.revoke`, `guard.warning` and `guard.block` are data
//! parts (`data-agw-revoke`, `-warning`, `-block`) holding the native event's fields; the UI
//! message stream has no way to take back a text part, so the client hides the one a revoke
//! names. The run's `run.error` `guardrail_blocked` that follows is the ordinary `error` chunk.
//!
//! A stream that suspends (a client-side call, an approval) while other children still stream
//! closes their open text and reasoning parts; the stream that continues the run is primed with
//! the events up to that point ([`UiMessageMapper::resume`]) and reopens them.

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
    /// A client-side tool: its parts are not `providerExecuted`.
    frontend: bool,
    /// A client-side call whose arguments ended and that has no output yet.
    waiting: bool,
    /// `tool-input-available` was sent: the part no longer streams its input.
    input_done: bool,
    /// The child task the call belongs to.
    task: Option<String>,
}

/// A text or reasoning part still streaming.
#[derive(Debug, Clone)]
struct Block {
    id: String,
    reasoning: bool,
    task: Option<String>,
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
    /// The open step holds child tasks' parts.
    children_step: bool,
    /// Text and reasoning parts streaming now.
    blocks: Vec<Block>,
    /// What [`Self::suspend`] closed and [`Self::resume`] reopens.
    suspended: Vec<Block>,
    /// Each task's `data-task` data: every update repeats the whole part.
    tasks: HashMap<String, Value>,
    /// The `data-tool-status` data of each paused call's latest pause, by awaiting id.
    statuses: HashMap<String, Value>,
}

/// `providerMetadata` naming a child's task.
fn task_metadata(task: &str) -> Value {
    json!({"agw": {"taskId": task}})
}

/// A citation as a source part: `source-url` when the record links somewhere, else
/// `source-document` (a text record). `sourceId` is `{contentId}:{index}`, unique in the run and
/// the same on every replay; the citation's fields (flat, with `taskId` for a
/// child's) are in `providerMetadata.agw`, where a client finds the text part (`contentId`, the
/// text part's id) and the place in it (`offset`, UTF-16 units) the citation belongs to.
fn source_chunk(e: &crate::event::ContentCitation, task: Option<&str>) -> Value {
    let mut agw = super::citation_fields(e);
    if let Some(task) = task {
        agw.insert("taskId".into(), json!(task));
    }
    let source_id = format!("{}:{}", e.content_id, e.index);
    let title = super::citation_title(&e.record);
    match &e.record.url {
        Some(url) => json!({"type": "source-url", "sourceId": source_id, "url": url, "title": title,
            "providerMetadata": {"agw": agw}}),
        None => json!({"type": "source-document", "sourceId": source_id, "mediaType": "text/plain",
            "title": title, "providerMetadata": {"agw": agw}}),
    }
}

/// A guard's event as a data part: `data-agw-revoke`, `data-agw-warning` or `data-agw-block`,
/// its `data` the event's fields (`taskId` added for a child's). Not transient: `useChat` keeps
/// it among the message's parts, so a client hides the withdrawn text part (`data.contentId`, the
/// text part's id) while the answer streams and whenever it renders the message again. A
/// revoke's part takes the text part's id, so a later stream of the same run replaces it rather
/// than adding a second one; warnings and blocks have none (each is a part of its own).
fn guard_chunk(payload: &EventPayload, task: Option<&str>) -> Option<Value> {
    let kind = match payload {
        EventPayload::ContentRevoke(_) => "data-agw-revoke",
        EventPayload::GuardWarning(_) => "data-agw-warning",
        EventPayload::GuardBlock(_) => "data-agw-block",
        _ => return None,
    };
    let mut data = super::guard_fields(payload, super::GuardIds::NATIVE)?;
    if let Some(task) = task {
        data.insert("taskId".into(), json!(task));
    }
    let mut chunk = json!({"type": kind});
    if let EventPayload::ContentRevoke(e) = payload {
        chunk["id"] = json!(e.content_id);
    }
    chunk["data"] = Value::Object(data);
    Some(chunk)
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
        let mut ids: Vec<String> = self.calls.iter().filter(|(_, c)| c.waiting).map(|(id, _)| id.clone()).collect();
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
        self.client_answered(id, name, false);
    }

    /// A mapper for the continuation of a run whose client-side call `id` (tool `name`) the
    /// client just answered: its output chunk must name the part the client already has.
    pub fn expect_client_call(&mut self, id: &str, name: &str) {
        self.client_answered(id, name, true);
    }

    /// The client answered call `id`: it no longer waits. A call the mapper saw (primed) keeps
    /// what it knows (its task).
    fn client_answered(&mut self, id: &str, name: &str, frontend: bool) {
        self.started = true;
        let call = self.calls.entry(id.to_owned()).or_insert_with(|| Call {
            name: name.to_owned(),
            frontend,
            input_done: true,
            ..Call::default()
        });
        call.waiting = false;
        self.approvals.retain(|a| a != id);
    }

    /// Ends the stream of a run that now waits for the client's tool outputs: open text and
    /// reasoning parts (of children still streaming) end, then `finish-step`, `finish` with
    /// reason `tool-calls`.
    pub fn suspend(&mut self, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        for block in std::mem::take(&mut self.blocks) {
            let kind = if block.reasoning { "reasoning-end" } else { "text-end" };
            out.push(json!({"type": kind, "id": block.id}));
            self.suspended.push(block);
        }
        self.finish_step(out);
        out.push(json!({"type": "finish", "finishReason": "tool-calls"}));
        self.finished = true;
    }

    /// Continues, in a new stream, a run this mapper was primed with up to where its previous
    /// stream suspended (the events mapped, then [`Self::suspend`]): reopens the parts the
    /// suspension closed (as new parts with the same ids: the client's stream state is new) and
    /// restarts the input of calls still streaming it.
    pub fn resume(&mut self, out: &mut Vec<Value>) {
        self.finished = false;
        for block in std::mem::take(&mut self.suspended) {
            self.open_block(block, out);
        }
        let mut streaming: Vec<(&String, &Call)> = self.calls.iter().filter(|(_, c)| !c.input_done).collect();
        streaming.sort_by(|a, b| a.0.cmp(b.0));
        let restarts: Vec<(String, String, bool, Option<String>)> =
            streaming.into_iter().map(|(id, c)| (id.clone(), c.name.clone(), c.frontend, c.task.clone())).collect();
        for (id, name, frontend, task) in restarts {
            self.output_turn(task.as_deref(), out);
            out.push(self.input_start_chunk(&id, &name, frontend, task.as_deref()));
        }
    }

    /// Before a model turn's output: opens its step, closing the previous one when the
    /// previous turn's calls were answered since (a new turn).
    fn model_output(&mut self, out: &mut Vec<Value>) {
        match self.step {
            Step::Open if !self.children_step => return,
            Step::Open | Step::Answered => out.push(json!({"type": "finish-step"})),
            Step::Closed => {}
        }
        out.push(json!({"type": "start-step"}));
        self.step = Step::Open;
        self.children_step = false;
    }

    /// Before a child task's output: the children's step, opened after the parent's step (the
    /// one with the invoking call) when it is not open yet.
    fn child_output(&mut self, out: &mut Vec<Value>) {
        if self.children_step && self.step != Step::Closed {
            return;
        }
        if self.step != Step::Closed {
            out.push(json!({"type": "finish-step"}));
        }
        out.push(json!({"type": "start-step"}));
        self.step = Step::Open;
        self.children_step = true;
    }

    fn output_turn(&mut self, task: Option<&str>, out: &mut Vec<Value>) {
        match task {
            Some(_) => self.child_output(out),
            None => self.model_output(out),
        }
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
        self.children_step = false;
    }

    fn open_block(&mut self, block: Block, out: &mut Vec<Value>) {
        self.output_turn(block.task.as_deref(), out);
        let (kind, key) =
            if block.reasoning { ("reasoning-start", "reasoningId") } else { ("text-start", "contentId") };
        // The part's id is not kept in a UIMessage's parts: its metadata names the block, so a
        // client can find the part a revoke or a resume names (and a child's, its task).
        let mut agw = json!({key: block.id});
        if let Some(task) = &block.task {
            agw["taskId"] = json!(task);
        }
        out.push(json!({"type": kind, "id": block.id, "providerMetadata": {"agw": agw}}));
        self.blocks.push(block);
    }

    fn close_block(&mut self, id: &str, reasoning: bool, out: &mut Vec<Value>) {
        self.blocks.retain(|b| b.id != id);
        out.push(json!({"type": if reasoning { "reasoning-end" } else { "text-end" }, "id": id}));
    }

    fn input_start_chunk(&self, id: &str, name: &str, frontend: bool, task: Option<&str>) -> Value {
        let mut chunk = json!({"type": "tool-input-start", "toolCallId": id, "toolName": name});
        if !frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        if let Some(task) = task {
            chunk["providerMetadata"] = task_metadata(task);
        }
        chunk
    }

    fn call_start(&mut self, id: &str, name: &str, frontend: bool, task: Option<&str>, out: &mut Vec<Value>) {
        self.output_turn(task, out);
        let call = Call { name: name.to_owned(), frontend, task: task.map(str::to_owned), ..Call::default() };
        self.calls.insert(id.to_owned(), call);
        out.push(self.input_start_chunk(id, name, frontend, task));
    }

    fn call_args(&mut self, id: &str, delta: &str, out: &mut Vec<Value>) {
        if let Some(call) = self.calls.get_mut(id) {
            call.arguments.push_str(delta);
        }
        out.push(json!({"type": "tool-input-delta", "toolCallId": id, "inputTextDelta": delta}));
    }

    fn call_end(&mut self, id: &str, out: &mut Vec<Value>) {
        let Some(call) = self.calls.get_mut(id) else { return };
        call.input_done = true;
        call.waiting = call.frontend;
        let mut chunk = json!({"type": "tool-input-available", "toolCallId": id, "toolName": call.name, "input": input(&call.arguments)});
        if !call.frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        if let Some(task) = &call.task {
            chunk["providerMetadata"] = task_metadata(task);
        }
        out.push(chunk);
    }

    /// `tool-output-available` or `tool-output-error` of call `id`.
    fn call_output(&mut self, id: &str, mut chunk: Value, out: &mut Vec<Value>) {
        let (frontend, child) = self.calls.get(id).map_or((false, false), |c| (c.frontend, c.task.is_some()));
        if !frontend {
            chunk["providerExecuted"] = json!(true);
            chunk["dynamic"] = json!(true);
        }
        if let Some(call) = self.calls.get_mut(id) {
            // Answered: no longer waiting for the client.
            call.waiting = false;
        }
        // A child's output is not the parent's: the parent's next turn is not due.
        if !child {
            self.tool_output();
        }
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

    /// A backend call paused for the user (`awaiting.ask` `mode: "status"`): its status as a
    /// `data-tool-status` part (`state: "waiting"`), then a tool approval request for the call,
    /// so the stream ends and the client answers with `addToolApprovalResponse` (approved:
    /// continue, else cancel). A call the stream has not shown (a continuation after a restart)
    /// gets its part first.
    fn status_ask(&mut self, e: &crate::event::AwaitingAsk, task: Option<&str>, out: &mut Vec<Value>) {
        let id = &e.awaiting_id;
        if !self.calls.contains_key(id) {
            self.output_turn(task, out);
            let arguments = e.arguments.as_ref().map(Value::to_string).unwrap_or_default();
            let name = e.tool_name.clone().unwrap_or_default();
            let call = Call { name, arguments, task: task.map(str::to_owned), ..Call::default() };
            self.calls.insert(id.clone(), call);
            self.call_end(id, out);
        }
        let mut data = json!({"toolCallId": id, "state": "waiting"});
        if let Some(status) = &e.status {
            data["code"] = json!(status.code);
            data["message"] = json!(status.message);
            data["data"] = status.data.clone();
        }
        data["options"] = json!(e.options);
        if let Some(task) = task {
            data["taskId"] = json!(task);
        }
        out.push(json!({"type": "data-tool-status", "id": id, "data": data}));
        self.statuses.insert(id.clone(), data);
        if !self.approvals.contains(id) {
            self.approvals.push(id.clone());
        }
        out.push(json!({"type": "tool-approval-request", "approvalId": id, "toolCallId": id}));
    }

    /// A paused call's wait ended (`continued`, `cancelled`, `expired`): its status part says so.
    fn status_settled(&mut self, awaiting_id: &str, state: &str, out: &mut Vec<Value>) {
        if let Some(mut data) = self.statuses.remove(awaiting_id) {
            data["state"] = json!(state);
            out.push(json!({"type": "data-tool-status", "id": awaiting_id, "data": data}));
        }
    }

    /// The `data-task` part of task `task_id` with `status` (and more fields), whole.
    fn task_part(&mut self, task_id: &str, status: &str, extra: Option<(&str, Value)>, out: &mut Vec<Value>) {
        let data = self.tasks.entry(task_id.to_owned()).or_insert_with(|| json!({"taskId": task_id}));
        data["status"] = json!(status);
        if let Some((key, value)) = extra {
            data[key] = value;
        }
        out.push(json!({"type": "data-task", "id": task_id, "data": data}));
    }

    /// Appends the chunks `event` becomes (none for events the protocol has no place for).
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.finished {
            return;
        }
        let task = event.task().map(str::to_owned);
        match &event.payload {
            EventPayload::RunStart(e) => self.ensure_started(&e.run_id, &e.chat_id, out),
            EventPayload::ReasoningStart(e) => {
                self.open_block(Block { id: e.reasoning_id.clone(), reasoning: true, task }, out)
            }
            EventPayload::ReasoningDelta(e) => {
                out.push(json!({"type": "reasoning-delta", "id": e.reasoning_id, "delta": e.delta}))
            }
            EventPayload::ReasoningEnd(e) => self.close_block(&e.reasoning_id, true, out),
            EventPayload::ContentStart(e) => {
                self.open_block(Block { id: e.content_id.clone(), reasoning: false, task }, out)
            }
            EventPayload::ContentDelta(e) => {
                out.push(json!({"type": "text-delta", "id": e.content_id, "delta": e.delta}))
            }
            EventPayload::ContentEnd(e) => self.close_block(&e.content_id, false, out),
            EventPayload::ContentCitation(e) => {
                self.output_turn(task.as_deref(), out);
                out.push(source_chunk(e, task.as_deref()));
            }
            EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_) => {
                out.extend(guard_chunk(&event.payload, task.as_deref()));
            }
            EventPayload::ToolStart(e) => {
                let name = e.tool_name.clone().unwrap_or_default();
                // A frontend tool carries its viewport key; the client renders and answers it.
                self.call_start(&e.tool_id, &name, e.tool_key.is_some(), task.as_deref(), out)
            }
            EventPayload::ToolArgs(e) => self.call_args(&e.tool_id, &e.delta, out),
            EventPayload::ToolEnd(e) => self.call_end(&e.tool_id, out),
            EventPayload::ToolResult(e) => {
                let chunk = match tool_error(&e.result) {
                    // agw's tool errors (`{"ok":false,"error":…}`: unknown tool, failure, timeout).
                    Some(error_text) => {
                        json!({"type": "tool-output-error", "toolCallId": e.tool_id, "errorText": error_text})
                    }
                    None => {
                        json!({"type": "tool-output-available", "toolCallId": e.tool_id, "output": output(&e.result)})
                    }
                };
                self.call_output(&e.tool_id, chunk, out)
            }
            EventPayload::ActionStart(e) => {
                let name = e.action_name.clone().unwrap_or_default();
                self.call_start(&e.action_id, &name, false, task.as_deref(), out)
            }
            EventPayload::ActionArgs(e) => self.call_args(&e.action_id, &e.delta, out),
            EventPayload::ActionEnd(e) => self.call_end(&e.action_id, out),
            EventPayload::ActionResult(e) => {
                let chunk = json!({"type": "tool-output-available", "toolCallId": e.action_id, "output": e.result});
                self.call_output(&e.action_id, chunk, out)
            }
            EventPayload::PlanUpdate(e) => {
                out.push(json!({"type": "data-plan", "id": e.plan_id, "data": {"planId": e.plan_id, "plan": e.plan}}))
            }
            EventPayload::TaskStart(e) => {
                let mut data = json!({"taskId": e.task_id, "description": e.description});
                // A sub-agent's task names its agent, its name and the invoking call.
                for (key, value) in
                    [("subAgentKey", &e.sub_agent_key), ("taskName", &e.task_name), ("toolId", &e.tool_id)]
                {
                    if let Some(value) = value {
                        data[key] = json!(value);
                    }
                }
                self.tasks.insert(e.task_id.clone(), data);
                self.task_part(&e.task_id, "running", None, out)
            }
            EventPayload::TaskComplete(e) => self.task_part(&e.task_id, "completed", None, out),
            EventPayload::TaskCancel(e) => self.task_part(&e.task_id, "cancelled", None, out),
            EventPayload::TaskFail(e) => {
                let error = json!({"code": e.error.code, "message": e.error.message});
                self.task_part(&e.task_id, "failed", Some(("error", error)), out)
            }
            EventPayload::AwaitingAsk(e) if e.mode == "status" => self.status_ask(e, task.as_deref(), out),
            EventPayload::AwaitingAsk(e) => {
                for approval in &e.approvals {
                    if !self.calls.contains_key(&approval.id) {
                        // A frontend tool or action is not streamed before its approval: the
                        // request needs a part to be about, inside the turn's step.
                        self.output_turn(task.as_deref(), out);
                        let arguments = approval.arguments.to_string();
                        let call =
                            Call { name: approval.tool_name.clone(), arguments, task: task.clone(), ..Call::default() };
                        self.calls.insert(approval.id.clone(), call);
                        self.call_end(&approval.id, out);
                    }
                    self.approvals.push(e.awaiting_id.clone());
                    out.push(json!({"type": "tool-approval-request", "approvalId": e.awaiting_id, "toolCallId": approval.id}));
                }
            }
            EventPayload::AwaitingAnswer(e) => {
                self.approvals.retain(|id| *id != e.awaiting_id);
                let state = match e.answer["action"].as_str() {
                    Some("continue") => "continued",
                    _ => "cancelled",
                };
                self.status_settled(&e.awaiting_id, state, out);
            }
            EventPayload::AwaitingExpired(e) => {
                self.approvals.retain(|id| *id != e.awaiting_id);
                self.status_settled(&e.awaiting_id, "expired", out);
            }
            EventPayload::RequestSteer(e) => out.push(
                json!({"type": "data-steer", "id": e.steer_id, "data": {"steerId": e.steer_id, "message": e.message}}),
            ),
            EventPayload::ContextCompact(e) => {
                out.push(json!({"type": "data-context-compact", "data": super::compact_summary(e)}));
            }
            // Live only, like the native event: transient, so not kept in the message.
            EventPayload::ToolProgress(e) => out.push(json!({"type": "data-tool-progress", "transient": true,
                "data": {"toolCallId": e.tool_id, "delta": e.delta}})),
            EventPayload::AgentHandoff(e) => out.push(json!({"type": "data-handoff", "id": e.tool_id,
                "data": {"fromAgentKey": e.from_agent_key, "toAgentKey": e.to_agent_key, "toolCallId": e.tool_id}})),
            // A run resumed after a crash (issue 37): the text parts named are superseded.
            EventPayload::RunResume(e) => out.push(json!({"type": "data-agw-resume", "data": super::resume_fields(e)})),
            EventPayload::ModelFallback(e) => {
                out.push(json!({"type": "data-agw-fallback", "data": super::fallback_fields(e)}));
            }
            EventPayload::RunComplete(e) => {
                // Structured output: the answer as JSON, kept in the message beside its text.
                if let Some(output) = &e.output {
                    out.push(json!({"type": "data-output", "data": output}));
                }
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
            ev(
                7,
                RunComplete {
                    run_id: "r".into(),
                    finish_reason: "stop".into(),
                    output: None,
                    totals: Default::default(),
                },
            ),
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

    #[test]
    fn a_structured_answer_is_a_data_output_part_before_the_step_ends() {
        let (_, out) = map_all(vec![
            ev(2, RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(3, ContentStart { content_id: "r_c_1".into(), run_id: "r".into(), task_id: None }),
            ev(4, ContentDelta { content_id: "r_c_1".into(), delta: "{\"a\":1}".into() }),
            ev(5, ContentEnd { content_id: "r_c_1".into() }),
            ev(
                6,
                RunComplete {
                    run_id: "r".into(),
                    finish_reason: "stop".into(),
                    output: Some(json!({"a": 1})),
                    totals: Default::default(),
                },
            ),
        ]);
        let types: Vec<&str> = out.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types[types.len() - 3..], ["data-output", "finish-step", "finish"]);
        assert_eq!(out[out.len() - 3]["data"], json!({"a": 1}));
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
        ev(
            seq,
            RunComplete { run_id: "r".into(), finish_reason: "stop".into(), output: None, totals: Default::default() },
        )
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
            ev(
                2,
                RunComplete {
                    run_id: "r".into(),
                    finish_reason: "stop".into(),
                    output: None,
                    totals: Default::default(),
                },
            ),
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
            status: None,
            options: Box::default(),
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

    #[test]
    fn a_paused_tool_shows_its_status_and_asks_for_an_approval_of_its_call() {
        use crate::event::{AwaitingAnswer, AwaitingAsk};
        let ask = AwaitingAsk::paused_sample();
        let (mut mapper, out) = map_all(vec![
            ev(1, tool_start("call_i", "mock_image_generate", false)),
            ev(2, ToolEnd { tool_id: "call_i".into() }),
            ev(3, ask.clone()),
        ]);
        assert_eq!(
            types(&out),
            ["start-step", "tool-input-start", "tool-input-available", "data-tool-status", "tool-approval-request"]
        );
        assert_eq!(
            out[3],
            json!({"type": "data-tool-status", "id": "call_i", "data": {"toolCallId": "call_i", "state": "waiting",
                "code": -1002, "message": "Not enough credits", "data": {"price": 10},
                "options": [{"label": "Continue", "action": "continue", "description": "d"}]}})
        );
        assert_eq!(out[4], json!({"type": "tool-approval-request", "approvalId": "call_i", "toolCallId": "call_i"}));
        assert_eq!(mapper.pending_approvals(), ["call_i"]);

        // Answered: the status part says so, and the wait is over.
        let mut more = Vec::new();
        let answer =
            AwaitingAnswer { awaiting_id: "call_i".into(), answer: json!({"mode": "status", "action": "continue"}) };
        mapper.map(&ev(4, answer), &mut more);
        assert_eq!(more.len(), 1);
        assert_eq!(
            (more[0]["type"].as_str(), more[0]["data"]["state"].as_str()),
            (Some("data-tool-status"), Some("continued"))
        );
        assert!(mapper.pending_approvals().is_empty());

        // Shown after a restart, to a stream that never saw the call: its part first.
        let (_, out) = map_all(vec![ev(1, ask)]);
        assert_eq!(types(&out), ["start-step", "tool-input-available", "data-tool-status", "tool-approval-request"]);
        assert_eq!(
            (out[1]["providerExecuted"].as_bool(), out[1]["input"].clone()),
            (Some(true), json!({"prompt": "fox"}))
        );
    }

    /// The text of each text part, as the client assembles it (by id, in start order).
    fn texts(out: &[Value]) -> Vec<(String, Option<String>, String)> {
        let mut parts: Vec<(String, Option<String>, String)> = Vec::new();
        for chunk in out {
            let id = chunk["id"].as_str().unwrap_or_default().to_owned();
            match chunk["type"].as_str() {
                Some("text-start") => {
                    let task = chunk["providerMetadata"]["agw"]["taskId"].as_str().map(str::to_owned);
                    parts.push((id, task, String::new()));
                }
                Some("text-delta") => {
                    let part = parts.iter_mut().rev().find(|p| p.0 == id).expect("a delta of an open part");
                    part.2.push_str(chunk["delta"].as_str().unwrap());
                }
                _ => {}
            }
        }
        parts
    }

    #[test]
    fn children_are_tagged_parts_in_a_step_of_their_own_and_the_parent_answers() {
        let (_, out) = map_all(crate::adapters::children_run());
        // The parent's step with its call, the children's step (their outputs do not split it),
        // then the parent's answer in a new step.
        let steps: Vec<usize> = (0..out.len()).filter(|i| out[*i]["type"] == "start-step").collect();
        assert_eq!(steps.len(), 3, "{:?}", types(&out));
        let in_step = |i: usize| steps.iter().rposition(|s| *s < i).unwrap();
        let position = |pred: &dyn Fn(&Value) -> bool| out.iter().position(pred).unwrap();
        let invoke = position(&|c| c["type"] == "tool-input-available" && c["toolCallId"] == "call_team");
        let first_child = position(&|c| c["type"] == "text-start" && c["id"] == "r_t1_c_1");
        let last_child = position(&|c| c["toolCallId"] == "t2_call_x" && c["type"] == "tool-output-error");
        let answer = position(&|c| c["type"] == "text-start" && c["id"] == "r_c_2");
        assert_eq!((in_step(invoke), in_step(first_child), in_step(last_child), in_step(answer)), (0, 1, 1, 2));

        // Each child's text is its own part, tagged with its task; the parent's is untagged.
        let parts = texts(&out);
        assert_eq!(
            parts,
            [
                ("r_t1_c_1".into(), Some("t1".into()), "Paris ".into()),
                ("r_t2_c_1".into(), Some("t2".into()), "Soft rain".into()),
                ("r_c_2".into(), None, "Team done.".into()),
            ]
        );
        let call = out.iter().find(|c| c["type"] == "tool-input-start" && c["toolCallId"] == "t1_call_w").unwrap();
        assert_eq!(
            (call["providerMetadata"]["agw"]["taskId"].as_str(), call["dynamic"].as_bool()),
            (Some("t1"), Some(true))
        );
        let parent_call =
            out.iter().find(|c| c["type"] == "tool-input-start" && c["toolCallId"] == "call_team").unwrap();
        assert!(parent_call.get("providerMetadata").is_none());

        // The task frames: one data part per task, replaced whole by its updates.
        let tasks: Vec<&Value> = out.iter().filter(|c| c["type"] == "data-task").collect();
        assert_eq!(tasks.len(), 4);
        assert_eq!(
            tasks[0]["data"],
            json!({"taskId": "t1", "status": "running", "description": "task for researcher",
                "subAgentKey": "researcher", "taskName": "research", "toolId": "call_team"})
        );
        let failed = tasks.iter().find(|t| t["id"] == "t2" && t["data"]["status"] == "failed").unwrap();
        assert_eq!(failed["data"]["subAgentKey"], "writer", "an update keeps the whole part");
        assert_eq!(failed["data"]["error"], json!({"code": "provider_error", "message": "boom"}));
        assert_eq!(out.last().unwrap()["type"], "finish");
    }

    /// Issue 35: a citation is a source part right after the text delta it follows; a record
    /// with a link is `source-url`, a text record `source-document`; a child's names its task.
    #[test]
    fn citations_are_source_parts_after_their_text() {
        let (_, out) = map_all(crate::adapters::cited_run());
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "source-document",
                "text-delta",
                "source-url",
                "text-end",
                "finish-step",
                "start-step",
                "text-start",
                "text-delta",
                "source-document",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        assert_eq!(
            out[4],
            json!({"type": "source-document", "sourceId": "r_c_1:0", "mediaType": "text/plain", "title": "Coral",
                "providerMetadata": {"agw": {"contentId": "r_c_1", "index": 0, "messageId": "361",
                    "content": "The translation cannot be turned off", "senderName": "Coral", "senderId": "u361",
                    "timestamp": 1_736_985_600_000_i64, "chatId": "11200463399", "offset": 22,
                    "toolId": "call_msgs"}}})
        );
        assert_eq!(
            out[6],
            json!({"type": "source-url", "sourceId": "r_c_1:1", "url": "https://example.com/notes/7",
                "title": "Release notes", "providerMetadata": {"agw": {"contentId": "r_c_1", "index": 1,
                    "messageId": "doc7", "url": "https://example.com/notes/7", "title": "Release notes",
                    "offset": 27, "toolId": "call_msgs"}}})
        );
        let child = &out[12];
        assert_eq!((child["sourceId"].as_str(), child["title"].as_str()), (Some("r_t1_c_1:2"), Some("Mason")));
        assert_eq!(child["providerMetadata"]["agw"]["taskId"], "t1");
        assert_eq!(child["providerMetadata"]["agw"]["messageId"], "432");
        // The keys keep the native order, the task last.
        let keys: Vec<&String> = child["providerMetadata"]["agw"].as_object().unwrap().keys().collect();
        assert_eq!(keys.first().map(|k| k.as_str()), Some("contentId"));
        assert_eq!(keys.last().map(|k| k.as_str()), Some("taskId"));
    }

    /// A child asks for an approval while the other child still writes: the stream ends with the
    /// open part closed; the continuation (primed with the same events) reopens it and goes on.
    #[test]
    fn a_suspension_closes_open_child_parts_and_the_continuation_reopens_them() {
        use crate::event::{ApprovalRequest, AwaitingAsk};
        let events = crate::adapters::children_run();
        // Up to t1's call end (seq 14), while t2's text r_t2_c_1 is open.
        let mut ask = Event::new(
            15,
            0,
            AwaitingAsk {
                awaiting_id: "t1_call_w".into(),
                run_id: "r".into(),
                mode: "approval".into(),
                timeout: 1000,
                approvals: vec![ApprovalRequest {
                    id: "t1_call_w".into(),
                    command: "weather".into(),
                    description: None,
                    options: Vec::new(),
                    allow_free_text: false,
                    tool_name: "weather".into(),
                    arguments: json!({}),
                    rule: "weather".into(),
                    agent_key: "researcher".into(),
                }],
                tool_name: None,
                arguments: None,
                viewport_type: None,
                viewport_key: None,
                status: None,
                options: Box::default(),
            },
        );
        ask.tag_task("t1");
        let mut before: Vec<Event> = events[..14].to_vec();
        before.push(ask);
        let (mut first, mut out) = map_all(before.clone());
        assert_eq!(first.pending_approvals(), ["t1_call_w"]);
        first.suspend(&mut out);
        let tail = types(&out[out.len() - 4..]);
        assert_eq!(tail, ["tool-approval-request", "text-end", "finish-step", "finish"]);

        // The continuation: primed silently, the client's answer, then what follows the ask.
        let (mut next, _) = map_all(before);
        next.suspend(&mut Vec::new());
        next.expect_server_call("t1_call_w", "weather");
        let mut out = Vec::new();
        next.resume(&mut out);
        for event in &events[14..] {
            next.map(event, &mut out);
        }
        assert_eq!(types(&out[..3]), ["start-step", "text-start", "text-end"], "{out:?}");
        assert_eq!(out[1]["providerMetadata"]["agw"]["taskId"], "t2");
        assert_eq!(out[1]["providerMetadata"]["agw"]["contentId"], out[1]["id"], "the part names its block");
        assert!(next.pending_approvals().is_empty());
        assert_eq!(texts(&out).last().unwrap().2, "Team done.");
        assert_eq!(out.last().unwrap()["type"], "finish");
    }

    /// Issue 36: a guard's events are data parts holding the native fields (a child's with its
    /// task); the revoke follows the text part it names and takes its id; the run's error ends
    /// the stream as any error does.
    #[test]
    fn guard_events_are_data_parts_and_a_revoke_names_its_text_part() {
        let (_, out) = map_all(crate::adapters::guarded_run());
        let data: Vec<String> = out
            .iter()
            .filter(|c| c["type"].as_str().is_some_and(|t| t.starts_with("data-agw-")))
            .map(Value::to_string)
            .collect();
        assert_eq!(
            data,
            [
                r#"{"type":"data-agw-warning","data":{"stage":"toolInput","guard":"rules:demo","rule":"r1","message":"careful","toolId":"t1","statusCode":-1007}}"#,
                r#"{"type":"data-agw-block","data":{"stage":"toolInput","guard":"webhook","reason":"not allowed","toolId":"t9_call","statusCode":-1006,"taskId":"t9"}}"#,
                r#"{"type":"data-agw-warning","data":{"stage":"output","guard":"rules:demo","rule":"r1","message":"careful","contentId":"r_c_2","statusCode":-1007}}"#,
                r#"{"type":"data-agw-revoke","id":"r_c_2","data":{"contentId":"r_c_2","stage":"output","guard":"rules:pii","rule":"email","reason":"personal data","statusCode":-1006}}"#,
            ]
        );
        assert_eq!(types(&out[out.len() - 4..]), ["text-end", "data-agw-revoke", "error", "finish"]);
        assert_eq!(out[out.len() - 2], json!({"type": "error", "errorText": "the answer was withdrawn"}));
    }
}
