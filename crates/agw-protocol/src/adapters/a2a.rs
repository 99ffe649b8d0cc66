//! A2A 1.0 (the Agent2Agent protocol, issue 38; `docs/protocols.md` "A2A"): a run seen as an
//! A2A task. The mapper turns a run's events into the protocol's `StreamResponse` objects
//! (ProtoJSON, camelCase, enums by name) and keeps the task as it stands, for the answer of a
//! blocking `SendMessage` and for `GetTask`.
//!
//! The mapping: the task id is the run id, the `contextId` the chat id; the run's answer is one
//! artifact per content block (its `artifactId` is the block's id), streamed as artifact updates
//! — the first delta of a block with `append: false`, the next ones with `append: true`, one
//! update per delta; tool calls and results are `TASK_STATE_WORKING` status updates whose
//! message carries a data part, reasoning deltas `TASK_STATE_WORKING` status updates whose
//! message carries the text (metadata `agw.event: "reasoning.delta"`); a run that waits for a
//! person (a frontend tool's form, a tool approval, a paused tool's continue) is
//! `TASK_STATE_INPUT_REQUIRED`, its status message saying what is asked (a data part with
//! `kind`, `awaitingId`, the tool and its arguments or the approval options), and `WORKING`
//! again once answered; the end is a status update `TASK_STATE_COMPLETED`,
//! `TASK_STATE_FAILED` (its message says why) or `TASK_STATE_CANCELED`. A stream of new events
//! ends at the end or at a wait ([`A2aMapper::stops`]).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::{Event, EventPayload};

/// The protocol version this adapter speaks (`A2A-Version`, `protocolVersion`).
pub const PROTOCOL_VERSION: &str = "1.0";

/// A task's state, as A2A names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Accepted, not started.
    Submitted,
    /// In progress.
    Working,
    /// Ended with an answer.
    Completed,
    /// Ended with an error.
    Failed,
    /// Cancelled (`CancelTask`, an interrupt).
    Canceled,
    /// Waits for the client's next message.
    InputRequired,
    /// Refused before it ran (quota, …).
    Rejected,
}

impl TaskState {
    /// The enum's ProtoJSON name (`TASK_STATE_WORKING`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "TASK_STATE_SUBMITTED",
            Self::Working => "TASK_STATE_WORKING",
            Self::Completed => "TASK_STATE_COMPLETED",
            Self::Failed => "TASK_STATE_FAILED",
            Self::Canceled => "TASK_STATE_CANCELED",
            Self::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            Self::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// Whether the task can change no more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled | Self::Rejected)
    }
}

/// One artifact as it stands: a content block's text so far.
#[derive(Debug, Clone, PartialEq)]
struct Artifact {
    id: String,
    text: String,
}

/// Maps one run's events to A2A stream responses and keeps the task (see the module docs).
#[derive(Debug, Clone)]
pub struct A2aMapper {
    task_id: String,
    context_id: String,
    state: TaskState,
    /// The status message of a failed task.
    status_message: Option<String>,
    artifacts: Vec<Artifact>,
    /// Epoch ms of the last status change.
    updated: i64,
    /// Calls of the run's own so far (frontend ones wait for their submit at their end).
    calls: HashMap<String, Call>,
    /// What the run waits for now (`INPUT_REQUIRED`): the wait's id and what is asked.
    waiting: Option<(String, Value)>,
    /// Seq of the last event mapped.
    last_seq: u64,
}

/// A call of the run as far as it streamed.
#[derive(Debug, Clone, Default)]
struct Call {
    name: String,
    args: String,
    /// The viewport of a frontend tool.
    tool_key: Option<String>,
}

/// An RFC 3339 UTC timestamp of epoch milliseconds (ProtoJSON's `Timestamp`).
fn timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

impl A2aMapper {
    /// A mapper for the run `task_id` of chat `context_id`; the task starts `SUBMITTED`.
    pub fn new(task_id: impl Into<String>, context_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            context_id: context_id.into(),
            state: TaskState::Submitted,
            status_message: None,
            artifacts: Vec::new(),
            updated: 0,
            calls: HashMap::new(),
            waiting: None,
            last_seq: 0,
        }
    }

    /// Whether a stream of the task's new events ends here: at its end, or when it waits for
    /// the client's next message (A2A's interrupted state).
    pub fn stops(&self) -> bool {
        self.is_finished() || self.state == TaskState::InputRequired
    }

    /// The wait the task is in (`INPUT_REQUIRED`): its id, what the next message answers.
    pub fn awaiting_id(&self) -> Option<&str> {
        self.waiting.as_ref().map(|(id, _)| id.as_str()).filter(|_| self.state == TaskState::InputRequired)
    }

    /// Seq of the last event mapped (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The task's state now.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Whether the task reached a terminal state (its stream ends there).
    pub fn is_finished(&self) -> bool {
        self.state.is_terminal()
    }

    /// The task as it stands: `Task {id, contextId, status, artifacts}`.
    pub fn task(&self) -> Value {
        let mut task = json!({"id": self.task_id, "contextId": self.context_id, "status": self.status()});
        if !self.artifacts.is_empty() {
            task["artifacts"] = self.artifacts.iter().map(|a| artifact(&a.id, &a.text)).collect();
        }
        task
    }

    fn status(&self) -> Value {
        let mut status = json!({"state": self.state.as_str()});
        if self.updated > 0 {
            status["timestamp"] = json!(timestamp(self.updated));
        }
        if let Some(text) = &self.status_message {
            status["message"] = self.agent_message(vec![json!({"text": text})], None);
        } else if let (TaskState::InputRequired, Some((_, asked))) = (self.state, &self.waiting) {
            status["message"] = self.input_message(asked);
        }
        status
    }

    /// The status message of a wait: a text part for people, a data part for clients.
    fn input_message(&self, asked: &Value) -> Value {
        let tool = asked.get("toolName").and_then(Value::as_str).unwrap_or("a tool");
        let text = match asked.get("kind").and_then(Value::as_str) {
            Some("approval") => format!("Approve the call of {tool}? Answer once, always or reject."),
            Some("status") => format!("{tool} needs you to go on. Answer continue or cancel."),
            _ => format!("{tool} asks for input: answer with a data part holding its form's values."),
        };
        self.agent_message(
            vec![json!({"text": text}), json!({"data": asked})],
            Some(json!({"agw": {"event": "input_required"}})),
        )
    }

    fn wait(&mut self, id: &str, asked: Value, at: i64, out: &mut Vec<Value>) {
        self.waiting = Some((id.to_owned(), asked));
        self.set_state(TaskState::InputRequired, at);
        out.push(self.status_update(None));
    }

    /// The wait `id` was answered (or expired): the task works again.
    fn answered(&mut self, id: &str, at: i64, out: &mut Vec<Value>) {
        if self.waiting.as_ref().is_some_and(|(w, _)| w == id) {
            self.waiting = None;
            if self.state == TaskState::InputRequired {
                self.set_state(TaskState::Working, at);
                out.push(self.status_update(None));
            }
        }
    }

    fn agent_message(&self, parts: Vec<Value>, metadata: Option<Value>) -> Value {
        let mut message = json!({
            "messageId": crate::ids::new_run_id(),
            "contextId": self.context_id,
            "taskId": self.task_id,
            "role": "ROLE_AGENT",
            "parts": parts,
        });
        if let Some(metadata) = metadata {
            message["metadata"] = metadata;
        }
        message
    }

    fn status_update(&self, message: Option<Value>) -> Value {
        let mut status = self.status();
        if let Some(message) = message {
            status["message"] = message;
        }
        json!({"statusUpdate": {"taskId": self.task_id, "contextId": self.context_id, "status": status}})
    }

    fn set_state(&mut self, state: TaskState, at: i64) {
        self.state = state;
        self.updated = at;
    }

    /// A mapper made for a task id alone (a subscriber's, another replica's run) takes the
    /// run's chat as its context (`run.start` does this too).
    pub fn adopt_context(&mut self, chat_id: &str) {
        if self.context_id.is_empty() {
            self.context_id = chat_id.to_owned();
        }
    }

    /// The client answered the wait: the task works again.
    pub fn input_given(&mut self, at: i64) {
        self.waiting = None;
        self.set_state(TaskState::Working, at);
    }

    /// A task refused before it ran (a quota): `REJECTED`, its message saying why.
    pub fn rejected(task_id: impl Into<String>, context_id: impl Into<String>, reason: &str, at: i64) -> Self {
        let mut mapper = Self::new(task_id, context_id);
        mapper.status_message = Some(reason.to_owned());
        mapper.set_state(TaskState::Rejected, at);
        mapper
    }

    /// The first stream response: the task as it stands (`SUBMITTED` for a new one, which takes
    /// `at` as its status time).
    pub fn start(&mut self, at: i64, out: &mut Vec<Value>) {
        if self.updated == 0 {
            self.updated = at;
        }
        out.push(json!({"task": self.task()}));
    }

    /// Maps one event to the stream responses it produces (none for most bookkeeping events).
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.is_finished() {
            return;
        }
        // A sub-agent's activity stays inside the run (its answer reaches the parent as a tool
        // result): only the run's own blocks are artifacts.
        let own = event.task().is_none();
        let at = event.timestamp;
        self.last_seq = self.last_seq.max(event.seq);
        match &event.payload {
            EventPayload::RunStart(e) => {
                self.adopt_context(&e.chat_id);
                self.set_state(TaskState::Working, at);
                out.push(self.status_update(None));
            }
            EventPayload::ContentDelta(e) if own => {
                let append = match self.artifacts.iter_mut().find(|a| a.id == e.content_id) {
                    Some(a) => {
                        a.text.push_str(&e.delta);
                        true
                    }
                    None => {
                        self.artifacts.push(Artifact { id: e.content_id.clone(), text: e.delta.clone() });
                        false
                    }
                };
                out.push(json!({"artifactUpdate": {
                    "taskId": self.task_id, "contextId": self.context_id,
                    "artifact": artifact(&e.content_id, &e.delta),
                    "append": append, "lastChunk": false,
                }}));
            }
            // A withdrawn block (a guard's revoke, an answer that broke the output schema) is
            // not among the task's artifacts; its streamed updates cannot be taken back.
            EventPayload::ContentRevoke(e) if own => self.artifacts.retain(|a| a.id != e.content_id),
            EventPayload::ContentEnd(e) if own => {
                if let Some(a) = self.artifacts.iter().find(|a| a.id == e.content_id) {
                    let mut last = artifact(&a.id, "");
                    last["parts"] = json!([]);
                    out.push(json!({"artifactUpdate": {
                        "taskId": self.task_id, "contextId": self.context_id,
                        "artifact": last, "append": true, "lastChunk": true,
                    }}));
                }
            }
            EventPayload::ReasoningDelta(e) if own => {
                let metadata = json!({"agw": {"event": "reasoning.delta", "reasoningId": e.reasoning_id}});
                let message = self.agent_message(vec![json!({"text": e.delta})], Some(metadata));
                out.push(self.status_update(Some(message)));
            }
            EventPayload::ToolArgs(e) if own => {
                self.calls.entry(e.tool_id.clone()).or_default().args.push_str(&e.delta);
            }
            EventPayload::ToolEnd(e) if own => {
                // A frontend tool's call waits for its form from here.
                if let Some(call) = self.calls.get(&e.tool_id).filter(|c| c.tool_key.is_some()) {
                    let arguments = serde_json::from_str::<Value>(&call.args).unwrap_or(Value::Null);
                    let asked = json!({"kind": "form", "awaitingId": e.tool_id, "toolName": call.name,
                        "arguments": arguments, "viewportKey": call.tool_key});
                    self.wait(&e.tool_id.clone(), asked, at, out);
                }
            }
            EventPayload::AwaitingAsk(e) if own => {
                let mut asked = json!({"kind": e.mode, "awaitingId": e.awaiting_id});
                if let Some(name) = e.tool_name.as_ref().or_else(|| e.approvals.first().map(|a| &a.tool_name)) {
                    asked["toolName"] = json!(name);
                }
                if let Some(arguments) = &e.arguments {
                    asked["arguments"] = arguments.clone();
                }
                if !e.approvals.is_empty() {
                    asked["approvals"] = json!(e.approvals);
                }
                if let Some(status) = &e.status {
                    asked["status"] = json!(status);
                }
                if !e.options.is_empty() {
                    asked["options"] = json!(e.options);
                }
                if let Some(key) = &e.viewport_key {
                    asked["viewportKey"] = json!(key);
                }
                self.wait(&e.awaiting_id, asked, at, out);
            }
            EventPayload::AwaitingAnswer(e) if own => self.answered(&e.awaiting_id, at, out),
            EventPayload::AwaitingExpired(e) if own => self.answered(&e.awaiting_id, at, out),
            EventPayload::ToolStart(e) if own => {
                let call = Call {
                    name: e.tool_name.clone().unwrap_or_default(),
                    args: String::new(),
                    tool_key: e.tool_key.clone(),
                };
                self.calls.insert(e.tool_id.clone(), call);
                let data = json!({"kind": "tool_call", "toolCallId": e.tool_id, "toolName": e.tool_name});
                let message =
                    self.agent_message(vec![json!({"data": data})], Some(json!({"agw": {"event": "tool.start"}})));
                out.push(self.status_update(Some(message)));
            }
            EventPayload::ToolProgress(e) if own => {
                let data = json!({"kind": "tool_progress", "toolCallId": e.tool_id, "delta": e.delta});
                let message =
                    self.agent_message(vec![json!({"data": data})], Some(json!({"agw": {"event": "tool.progress"}})));
                out.push(self.status_update(Some(message)));
            }
            EventPayload::ToolResult(e) if own => {
                // A frontend call's result is its submit.
                self.answered(&e.tool_id, at, out);
                let data = json!({"kind": "tool_result", "toolCallId": e.tool_id, "result": e.result});
                let message =
                    self.agent_message(vec![json!({"data": data})], Some(json!({"agw": {"event": "tool.result"}})));
                out.push(self.status_update(Some(message)));
            }
            EventPayload::RunComplete(_) => {
                self.set_state(TaskState::Completed, at);
                out.push(self.status_update(None));
            }
            EventPayload::RunError(e) => {
                self.status_message = Some(format!("{}: {}", e.error.code.as_str(), e.error.message));
                self.set_state(TaskState::Failed, at);
                out.push(self.status_update(None));
            }
            EventPayload::RunCancel(_) => {
                self.set_state(TaskState::Canceled, at);
                out.push(self.status_update(None));
            }
            _ => {}
        }
    }
}

/// An artifact of one text part.
fn artifact(id: &str, text: &str) -> Value {
    json!({"artifactId": id, "name": "answer", "parts": [{"text": text}]})
}

/// `id: <seq>\ndata: {"jsonrpc":"2.0","id":…,"result":…}\n\n`: one stream response as an SSE
/// frame of the JSON-RPC binding; `seq` (the run event it came from) is its SSE id.
pub fn sse_frame(request_id: &Value, result: &Value, seq: Option<u64>) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": request_id, "result": result});
    match seq {
        Some(seq) => format!("id: {seq}\ndata: {body}\n\n").into_bytes(),
        None => format!("data: {body}\n\n").into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ContentDelta, ContentEnd, ContentStart, RunComplete, RunError, RunStart};
    use crate::{ErrorCode, RunErrorInfo};

    const AT: i64 = 1_771_000_000_000;

    fn events(payloads: Vec<EventPayload>) -> Vec<Event> {
        payloads.into_iter().enumerate().map(|(i, p)| Event::new(i as u64 + 1, AT, p)).collect()
    }

    fn answer(deltas: &[&str]) -> Vec<EventPayload> {
        let mut run: Vec<EventPayload> = vec![
            RunStart { run_id: "run-1".into(), chat_id: "chat-1".into() }.into(),
            ContentStart { content_id: "run-1_c_1".into(), run_id: "run-1".into(), task_id: None }.into(),
        ];
        for d in deltas {
            run.push(ContentDelta { content_id: "run-1_c_1".into(), delta: (*d).into() }.into());
        }
        run
    }

    #[test]
    fn a_run_is_a_task_whose_answer_streams_as_one_artifact_update_per_delta() {
        let mut run = answer(&["Hello", " there."]);
        run.push(ContentEnd { content_id: "run-1_c_1".into() }.into());
        run.push(
            RunComplete {
                run_id: "run-1".into(),
                finish_reason: "stop".into(),
                output: None,
                totals: Default::default(),
            }
            .into(),
        );
        let mut mapper = A2aMapper::new("run-1", "chat-1");
        let mut out = Vec::new();
        mapper.start(AT, &mut out);
        for e in &events(run) {
            mapper.map(e, &mut out);
        }
        assert_eq!(out[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
        assert_eq!(out[1]["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING");
        let updates: Vec<&Value> = out.iter().filter(|v| v.get("artifactUpdate").is_some()).collect();
        assert_eq!(updates.len(), 3, "two deltas and the block's end: {out:#?}");
        assert_eq!(updates[0]["artifactUpdate"]["artifact"]["parts"][0]["text"], "Hello");
        assert_eq!(updates[0]["artifactUpdate"]["append"], false);
        assert_eq!(updates[1]["artifactUpdate"]["append"], true);
        assert_eq!(updates[2]["artifactUpdate"]["lastChunk"], true);
        let last = out.last().unwrap();
        assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert!(mapper.is_finished());
        let task = mapper.task();
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello there.");
        assert_eq!(task["contextId"], "chat-1");
        assert_eq!(task["status"]["timestamp"], "2026-02-13T16:26:40.000Z");
    }

    #[test]
    fn a_withdrawn_block_is_not_among_the_tasks_artifacts() {
        let mut run = answer(&["Sunny"]);
        run.push(ContentEnd { content_id: "run-1_c_1".into() }.into());
        run.push(
            crate::event::ContentRevoke {
                content_id: "run-1_c_1".into(),
                stage: crate::guard::GuardStage::Output,
                guard: crate::guard::OUTPUT_SCHEMA_GUARD.into(),
                rule: None,
                reason: "the answer is not JSON".into(),
                status_code: -1006,
            }
            .into(),
        );
        run.push(ContentStart { content_id: "run-1_c_2".into(), run_id: "run-1".into(), task_id: None }.into());
        run.push(ContentDelta { content_id: "run-1_c_2".into(), delta: "{}".into() }.into());
        let mut mapper = A2aMapper::new("run-1", "chat-1");
        let mut out = Vec::new();
        for e in &events(run) {
            mapper.map(e, &mut out);
        }
        let task = mapper.task();
        assert_eq!(task["artifacts"].as_array().map(Vec::len), Some(1), "{task}");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "{}");
    }

    #[test]
    fn a_failure_is_a_failed_task_saying_why() {
        let mut run = answer(&["Hal"]);
        let error = RunErrorInfo::new(ErrorCode::ProviderError, "upstream 500", true);
        run.push(RunError { run_id: "run-1".into(), error, totals: Default::default() }.into());
        let mut mapper = A2aMapper::new("run-1", "chat-1");
        let mut out = Vec::new();
        for e in &events(run) {
            mapper.map(e, &mut out);
        }
        let status = &out.last().unwrap()["statusUpdate"]["status"];
        assert_eq!(status["state"], "TASK_STATE_FAILED");
        assert_eq!(status["message"]["role"], "ROLE_AGENT");
        assert_eq!(status["message"]["parts"][0]["text"], "provider_error: upstream 500");
        assert_eq!(mapper.task()["artifacts"][0]["parts"][0]["text"], "Hal", "what streamed stays");
    }

    #[test]
    fn reasoning_streams_as_working_updates_and_a_frontend_call_waits_for_input() {
        use crate::event::{ReasoningDelta, ToolArgs, ToolEnd, ToolResult, ToolStart};
        let start = ToolStart {
            tool_id: "call_1".into(),
            run_id: "run-1".into(),
            task_id: None,
            tool_name: Some("confirm_dialog".into()),
            tool_type: Some("html".into()),
            tool_api: None,
            tool_params: None,
            description: None,
            tool_key: Some("confirm_dialog".into()),
            tool_timeout: Some(1000),
        };
        let run: Vec<EventPayload> = vec![
            RunStart { run_id: "run-1".into(), chat_id: "chat-1".into() }.into(),
            ReasoningDelta { reasoning_id: "run-1_r_1".into(), delta: "Hmm.".into() }.into(),
            start.into(),
            ToolArgs { tool_id: "call_1".into(), delta: r#"{"question":"Go?"}"#.into(), chunk_index: 0 }.into(),
            ToolEnd { tool_id: "call_1".into() }.into(),
        ];
        let mut mapper = A2aMapper::new("run-1", "chat-1");
        let mut out = Vec::new();
        for e in &events(run) {
            mapper.map(e, &mut out);
        }
        let reasoning = &out[1]["statusUpdate"]["status"];
        assert_eq!(reasoning["state"], "TASK_STATE_WORKING");
        assert_eq!(reasoning["message"]["parts"][0]["text"], "Hmm.");
        assert_eq!(reasoning["message"]["metadata"]["agw"]["event"], "reasoning.delta");
        let waiting = &out.last().unwrap()["statusUpdate"]["status"];
        assert_eq!(waiting["state"], "TASK_STATE_INPUT_REQUIRED", "{out:#?}");
        assert_eq!(waiting["message"]["parts"][1]["data"]["arguments"]["question"], "Go?");
        assert!(mapper.stops() && !mapper.is_finished());
        assert_eq!(mapper.awaiting_id(), Some("call_1"));
        assert_eq!(mapper.last_seq(), 5);
        // The submit's result: working again.
        let result = Event::new(6, AT, ToolResult { tool_id: "call_1".into(), result: "{}".into() });
        out.clear();
        mapper.map(&result, &mut out);
        assert_eq!(out[0]["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING");
        assert!(!mapper.stops() && mapper.awaiting_id().is_none());
    }

    #[test]
    fn timestamps_are_rfc_3339_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(timestamp(1_795_967_423_513), "2026-11-29T15:50:23.513Z");
    }
}
