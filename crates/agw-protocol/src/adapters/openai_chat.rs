//! agw events → the OpenAI Chat Completions API (`chat.completion.chunk` stream and the
//! non-streaming `chat.completion`), for clients using the OpenAI SDKs against agw's agents.
//! Issue 16; the table is in `docs/protocols.md`.
//!
//! The agent's tools run inside agw: only reasoning (`reasoning_content`) and answer text reach
//! the client; `finish_reason` is `stop` or `length`. Each content or reasoning delta is one
//! chunk.
//!
//! Child tasks (sub-agents) are work the agent's tools do, like any tool's: their text and
//! reasoning are not the assistant message's (they interleave with each other and would garble
//! it), so only the parent's deltas reach `content` / `reasoning_content`, and the answer is the
//! parent's. The native stream and the AI SDK / AG-UI endpoints show the children.
//!
//! Citations (issue 35) are an agw extension field: a chunk whose delta is
//! `{"citations": [citation]}` right after the content delta the citation follows, and
//! `message.citations` in a completion (absent without citations). A citation has the event's
//! fields flat (the record's beside `index` and `offset`) without `contentId` (the message is one text), and its `offset` counts UTF-16
//! units into the message's whole `content`, not into one block of it. A child's citations
//! belong to the child's text and are skipped with it.
//!
//! Guardrails (issue 36) are an agw extension field too, `agw`: a guard's event is a chunk whose
//! delta is `{"agw": {"revoke" | "warning" | "block": {…}}}` (the event's fields; instead of a
//! `contentId`, a revoke gives `offset` and `length` of the withdrawn text in UTF-16 units of the
//! whole `content`). A revoke, and a block of the answer before its first word, end the answer
//! with OpenAI's own signal for filtered output, `finish_reason: "content_filter"`, on that chunk;
//! the run's `run.error` `guardrail_blocked` then adds nothing. A non-streaming completion leaves
//! the withdrawn text (and its citations) out of `message.content` and collects the events in
//! `message.agw` (`revoke`, `warnings`, `blocks`). A blocked question is an error like any failed
//! run, with code `guardrail_blocked`.
//!
//! A backend call that pauses for the user (`awaiting.ask` `mode: "status"`,
//! `docs/pausing-tools.md`) is an agw extension field too: a chunk whose delta is
//! `{"awaiting": {mode, runId, toolId, toolName, arguments, code, message, data, options,
//! timeout}}`, so a streaming client can show the status and answer it through
//! `POST /api/ap/submit` (the run id is the completion id after `chatcmpl-`). A non-streaming
//! completion cannot show it; its request waits like the run.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::event::{Event, EventPayload};

/// The last frame of a stream.
pub const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";

/// `data: <chunk>\n\n`.
pub fn frame(chunk: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend_from_slice(chunk.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// OpenAI's finish reason of an answer a guard filtered.
pub const CONTENT_FILTER: &str = "content_filter";

/// OpenAI's finish reasons for agw's.
fn finish_reason(agw: &str) -> &'static str {
    match agw {
        "length" | "max_tokens" => "length",
        _ => "stop",
    }
}

/// An OpenAI-shaped error body: `{"error":{"message","type","code"}}`.
pub fn error_body(message: &str, kind: &str, code: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The error `type` of a failed run: a blocked question is the request's fault, as OpenAI's own
/// refused prompts are; everything else the server's.
fn error_type(code: crate::ErrorCode) -> &'static str {
    match code {
        crate::ErrorCode::GuardrailBlocked => "invalid_request_error",
        _ => "server_error",
    }
}

/// How a run ended, for the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// `finish_reason` of the last chunk / the choice.
    Finished(&'static str),
    /// The run failed (`run.error`) or was cancelled: an error body.
    Error(Value),
}

/// Maps one run's events to `chat.completion.chunk`s.
#[derive(Debug)]
pub struct ChunkMapper {
    id: String,
    model: String,
    created: i64,
    role_sent: bool,
    ending: Option<Ending>,
    /// UTF-16 length of the answer text streamed so far.
    streamed: u64,
    /// Where each content block of the answer starts and ends in it (UTF-16 units).
    blocks: HashMap<String, (u64, u64)>,
}

impl ChunkMapper {
    /// A mapper for a completion `chatcmpl-<run_id>` of `model` (the agent key), created at
    /// `created` (epoch seconds).
    pub fn new(run_id: &str, model: &str, created: i64) -> Self {
        Self {
            id: format!("chatcmpl-{run_id}"),
            model: model.to_owned(),
            created,
            role_sent: false,
            ending: None,
            streamed: 0,
            blocks: HashMap::new(),
        }
    }

    /// The completion id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How the run ended, once it did.
    pub fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    /// The first chunk (the assistant role), once.
    fn role(&mut self, out: &mut Vec<Value>) {
        if !self.role_sent {
            self.role_sent = true;
            out.push(self.chunk(json!({"role": "assistant", "content": ""}), None));
        }
    }

    /// The usage chunk of `stream_options.include_usage` (empty `choices`).
    pub fn usage_chunk(&self, prompt_tokens: u64, completion_tokens: u64) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}})
    }

    /// A citation of the answer, as `delta.citations` and `message.citations` carry it: the
    /// flat fields without `contentId`, `offset` into the whole answer.
    fn citation(&self, e: &crate::event::ContentCitation) -> Value {
        let start = self.blocks.get(&e.content_id).map_or(self.streamed, |(start, _)| *start);
        let fields: Map<String, Value> = super::citation_fields(e)
            .into_iter()
            .filter(|(key, _)| key != "contentId")
            .map(|(key, value)| if key == "offset" { (key, json!(start + e.offset)) } else { (key, value) })
            .collect();
        Value::Object(fields)
    }

    /// A guard's event as the `agw` extension carries it: `("revoke" | "warning" | "block",
    /// fields)`. The message is one text, so no `contentId`: a revoke says where the withdrawn
    /// block is in `content` (`offset`, `length`, UTF-16 units).
    fn guard(&self, payload: &EventPayload) -> Option<(&'static str, Value)> {
        let key = match payload {
            EventPayload::ContentRevoke(_) => "revoke",
            EventPayload::GuardWarning(_) => "warning",
            EventPayload::GuardBlock(_) => "block",
            _ => return None,
        };
        let mut fields = super::guard_fields(payload, super::GuardIds { content: None, tool: Some("toolId") })?;
        if let EventPayload::ContentRevoke(e) = payload {
            let (start, end) = self.blocks.get(&e.content_id).copied().unwrap_or((self.streamed, self.streamed));
            fields.insert("offset".into(), json!(start));
            fields.insert("length".into(), json!(end - start));
        }
        Some((key, Value::Object(fields)))
    }

    /// Appends the chunks `event` becomes.
    pub fn map(&mut self, event: &Event, out: &mut Vec<Value>) {
        if self.ending.is_some() || is_child_part(event) {
            return;
        }
        match &event.payload {
            EventPayload::RunStart(_) => self.role(out),
            EventPayload::ContentStart(e) => {
                self.blocks.insert(e.content_id.clone(), (self.streamed, self.streamed));
            }
            EventPayload::ReasoningDelta(e) => {
                self.role(out);
                out.push(self.chunk(json!({"reasoning_content": e.delta}), None));
            }
            EventPayload::ContentDelta(e) => {
                self.role(out);
                let block = self.blocks.entry(e.content_id.clone()).or_insert((self.streamed, self.streamed));
                self.streamed += e.delta.encode_utf16().count() as u64;
                block.1 = self.streamed;
                out.push(self.chunk(json!({"content": e.delta}), None));
            }
            EventPayload::ContentCitation(e) => {
                self.role(out);
                out.push(self.chunk(json!({"citations": [self.citation(e)]}), None));
            }
            EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_) => {
                self.role(out);
                let Some((key, detail)) = self.guard(&event.payload) else { return };
                let filtered = ends_answer(&event.payload);
                let finish = filtered.then_some(CONTENT_FILTER);
                out.push(self.chunk(json!({"agw": {key: detail}}), finish));
                if filtered {
                    self.ending = Some(Ending::Finished(CONTENT_FILTER));
                }
            }
            // The `agw` extension, like a guard's event: clients that do not know it ignore it.
            EventPayload::ModelFallback(e) => {
                self.role(out);
                out.push(self.chunk(json!({"agw": {"fallback": super::fallback_fields(e)}}), None));
            }
            EventPayload::AwaitingAsk(e) if e.mode == "status" => {
                self.role(out);
                let mut awaiting = json!({"mode": "status", "runId": e.run_id, "toolId": e.awaiting_id,
                    "toolName": e.tool_name, "arguments": e.arguments});
                if let Some(status) = &e.status {
                    awaiting["code"] = json!(status.code);
                    awaiting["message"] = json!(status.message);
                    awaiting["data"] = status.data.clone();
                }
                awaiting["options"] = json!(e.options);
                awaiting["timeout"] = json!(e.timeout);
                if let Some(task) = event.task() {
                    awaiting["taskId"] = json!(task);
                }
                out.push(self.chunk(json!({"awaiting": awaiting}), None));
            }
            EventPayload::RunComplete(e) => {
                self.role(out);
                let reason = finish_reason(&e.finish_reason);
                out.push(self.chunk(json!({}), Some(reason)));
                self.ending = Some(Ending::Finished(reason));
            }
            EventPayload::RunError(e) => {
                let body = error_body(&e.error.message, error_type(e.error.code), e.error.code.as_str());
                out.push(body.clone());
                self.ending = Some(Ending::Error(body));
            }
            EventPayload::RunCancel(_) => {
                let body = error_body("the run was cancelled", "server_error", "cancelled");
                out.push(body.clone());
                self.ending = Some(Ending::Error(body));
            }
            _ => {}
        }
    }
}

/// A child task's text, reasoning, citation, guard or fallback event: not part of the assistant
/// message.
fn is_child_part(event: &Event) -> bool {
    matches!(
        event.payload,
        EventPayload::ContentStart(_)
            | EventPayload::ContentDelta(_)
            | EventPayload::ContentCitation(_)
            | EventPayload::ReasoningDelta(_)
            | EventPayload::ContentRevoke(_)
            | EventPayload::GuardWarning(_)
            | EventPayload::GuardBlock(_)
            | EventPayload::ModelFallback(_)
    ) && event.task().is_some()
}

/// A guard's event that ends the answer as filtered: a revoke, or a block of the answer before
/// it showed anything (the run fails right after either). An answer withdrawn for its output
/// schema is not filtered: the repaired one follows.
fn ends_answer(payload: &EventPayload) -> bool {
    match payload {
        EventPayload::ContentRevoke(e) => e.guard != crate::guard::OUTPUT_SCHEMA_GUARD,
        EventPayload::GuardBlock(e) => e.stage == crate::guard::GuardStage::Output,
        _ => false,
    }
}

/// Collects a run into one non-streaming `chat.completion`.
#[derive(Debug)]
pub struct CompletionAggregate {
    mapper: ChunkMapper,
    /// The answer's text, per content block in stream order: a revoked block is left out.
    content: Vec<(String, String)>,
    reasoning: String,
    /// Each citation with the block it belongs to.
    citations: Vec<(String, Value)>,
    /// The block a guard withdrew.
    revoked: Option<String>,
    /// `message.agw`: the guards' events.
    agw: Map<String, Value>,
}

impl CompletionAggregate {
    /// See [`ChunkMapper::new`].
    pub fn new(run_id: &str, model: &str, created: i64) -> Self {
        Self {
            mapper: ChunkMapper::new(run_id, model, created),
            content: Vec::new(),
            reasoning: String::new(),
            citations: Vec::new(),
            revoked: None,
            agw: Map::new(),
        }
    }

    /// Takes one event.
    pub fn push(&mut self, event: &Event) {
        match &event.payload {
            _ if is_child_part(event) || self.mapper.ending.is_some() => {}
            EventPayload::ContentDelta(e) => match self.content.last_mut() {
                Some((id, text)) if *id == e.content_id => text.push_str(&e.delta),
                _ => self.content.push((e.content_id.clone(), e.delta.clone())),
            },
            EventPayload::ReasoningDelta(e) => self.reasoning.push_str(&e.delta),
            EventPayload::ContentCitation(e) => self.citations.push((e.content_id.clone(), self.mapper.citation(e))),
            EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_) => {
                self.guard(&event.payload)
            }
            _ => {}
        }
        let mut ignored = Vec::new();
        self.mapper.map(event, &mut ignored);
    }

    /// A guard's event: into `message.agw`; a revoke also takes its block out of the answer.
    fn guard(&mut self, payload: &EventPayload) {
        let Some((key, detail)) = self.mapper.guard(payload) else { return };
        match payload {
            EventPayload::ContentRevoke(e) => {
                self.revoked = Some(e.content_id.clone());
                self.agw.insert(key.into(), detail);
            }
            _ => {
                let list = self.agw.entry(format!("{key}s")).or_insert_with(|| json!([]));
                if let Value::Array(items) = list {
                    items.push(detail);
                }
            }
        }
    }

    /// The `chat.completion` body, or the error body when the run failed; `None` before the run
    /// ended.
    pub fn finish(&self, prompt_tokens: u64, completion_tokens: u64) -> Option<Result<Value, Value>> {
        match self.mapper.ending()? {
            Ending::Error(body) => Some(Err(body.clone())),
            Ending::Finished(reason) => {
                let kept = |id: &String| self.revoked.as_ref() != Some(id);
                let content: String =
                    self.content.iter().filter(|(id, _)| kept(id)).map(|(_, text)| text.as_str()).collect();
                let citations: Vec<&Value> =
                    self.citations.iter().filter(|(id, _)| kept(id)).map(|(_, citation)| citation).collect();
                let mut message = json!({"role": "assistant", "content": content});
                if !self.reasoning.is_empty() {
                    message["reasoning_content"] = json!(self.reasoning);
                }
                if !citations.is_empty() {
                    message["citations"] = json!(citations);
                }
                if !self.agw.is_empty() {
                    message["agw"] = Value::Object(self.agw.clone());
                }
                Some(Ok(json!({"id": self.mapper.id, "object": "chat.completion", "created": self.mapper.created,
                    "model": self.mapper.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": reason, "logprobs": null}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens}})))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ContentDelta, ReasoningDelta, RunComplete, RunStart, ToolStart};

    fn ev(payload: impl Into<EventPayload>) -> Event {
        Event::new(1, 0, payload)
    }

    fn run() -> Vec<Event> {
        vec![
            ev(RunStart { run_id: "r".into(), chat_id: "c".into() }),
            ev(ReasoningDelta { reasoning_id: "r_r_1".into(), delta: "think".into() }),
            ev(ToolStart {
                tool_id: "t".into(),
                run_id: "r".into(),
                task_id: None,
                tool_name: Some("weather".into()),
                tool_type: Some("function".into()),
                tool_api: None,
                tool_params: None,
                description: None,
                tool_key: None,
                tool_timeout: None,
            }),
            ev(ContentDelta { content_id: "r_c_1".into(), delta: "Sun".into() }),
            ev(ContentDelta { content_id: "r_c_1".into(), delta: "ny".into() }),
            ev(RunComplete {
                run_id: "r".into(),
                finish_reason: "stop".into(),
                output: None,
                totals: Default::default(),
            }),
        ]
    }

    #[test]
    fn streaming_chunks_carry_only_reasoning_and_text_one_delta_each() {
        let mut mapper = ChunkMapper::new("r", "weatherBot", 1_700_000_000);
        let mut out = Vec::new();
        for event in run() {
            mapper.map(&event, &mut out);
        }
        let deltas: Vec<&Value> = out.iter().map(|c| &c["choices"][0]["delta"]).collect();
        assert_eq!(
            deltas,
            [
                &json!({"role": "assistant", "content": ""}),
                &json!({"reasoning_content": "think"}),
                &json!({"content": "Sun"}),
                &json!({"content": "ny"}),
                &json!({}),
            ]
        );
        assert_eq!(out[4]["choices"][0]["finish_reason"], "stop");
        assert_eq!(out[0]["id"], "chatcmpl-r");
        assert_eq!(out[0]["object"], "chat.completion.chunk");
        assert_eq!(out[0]["model"], "weatherBot");
        assert_eq!(mapper.usage_chunk(3, 4)["usage"]["total_tokens"], 7);
    }

    #[test]
    fn a_paused_tool_is_an_awaiting_chunk_of_its_own() {
        use crate::event::AwaitingAsk;
        let mut mapper = ChunkMapper::new("r", "demoCredits", 1_700_000_000);
        let mut out = Vec::new();
        let ask = AwaitingAsk::paused_sample();
        mapper.map(&ev(RunStart { run_id: "r".into(), chat_id: "c".into() }), &mut out);
        mapper.map(&ev(ask.clone()), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[1]["choices"][0]["delta"],
            json!({"awaiting": {"mode": "status", "runId": "r", "toolId": "call_i", "toolName": "mock_image_generate",
                "arguments": {"prompt": "fox"}, "code": -1002, "message": "Not enough credits", "data": {"price": 10},
                "options": [{"label": "Continue", "action": "continue", "description": "d"}], "timeout": 1000}})
        );
        // An approval is not mapped (it waits for /api/ap/submit, as before).
        let approval = AwaitingAsk { mode: "approval".into(), status: None, ..ask };
        mapper.map(&ev(approval), &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn the_non_streaming_completion_collects_the_answer() {
        let mut aggregate = CompletionAggregate::new("r", "weatherBot", 1);
        let events = run();
        assert!(aggregate.finish(0, 0).is_none());
        for event in &events {
            aggregate.push(event);
        }
        let body = aggregate.finish(10, 2).unwrap().unwrap();
        assert_eq!(
            body["choices"][0]["message"],
            json!({"role": "assistant", "content": "Sunny", "reasoning_content": "think"})
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["total_tokens"], 12);
    }

    #[test]
    fn a_failed_run_becomes_an_openai_error_body() {
        let mut aggregate = CompletionAggregate::new("r", "m", 1);
        let error = crate::event::RunError {
            run_id: "r".into(),
            error: crate::RunErrorInfo::new(crate::ErrorCode::ProviderError, "upstream 503", true),
            totals: Default::default(),
        };
        aggregate.push(&ev(error));
        let body = aggregate.finish(0, 0).unwrap().unwrap_err();
        assert_eq!(body["error"]["message"], "upstream 503");
        assert_eq!(body["error"]["code"], "provider_error");
    }

    #[test]
    fn children_never_reach_the_assistant_message() {
        let mut mapper = ChunkMapper::new("r", "lead", 1);
        let mut aggregate = CompletionAggregate::new("r", "lead", 1);
        let mut out = Vec::new();
        for event in crate::adapters::children_run() {
            mapper.map(&event, &mut out);
            aggregate.push(&event);
        }
        let content: String = out.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
        assert_eq!(content, "Team done.", "the children's interleaved text stays out");
        let body = aggregate.finish(0, 0).unwrap().unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "Team done.");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
    }

    /// Issue 35: a citation is a chunk of its own with `delta.citations` after the text it
    /// follows, its offset counted in the whole answer; the completion collects them; a child's
    /// never shows.
    #[test]
    fn citations_follow_their_text_and_children_s_are_skipped() {
        use crate::event::{ContentCitation, ContentEnd, ContentStart};
        let mut events = crate::adapters::cited_run();
        let complete = events.pop().unwrap();
        // A second block of the answer (a later turn) citing at its start and after its text.
        let cite = |index: u32, offset: u64| ContentCitation {
            content_id: "r_c_2".into(),
            index,
            record: crate::citation::CitationRecord { message_id: "401".into(), ..Default::default() },
            offset,
            tool_id: None,
        };
        events.extend([
            ev(ContentStart { content_id: "r_c_2".into(), run_id: "r".into(), task_id: None }),
            ev(cite(3, 0)),
            ev(ContentDelta { content_id: "r_c_2".into(), delta: " Mandy 🎤".into() }),
            ev(cite(4, 9)),
            ev(ContentEnd { content_id: "r_c_2".into() }),
            complete,
        ]);
        let mut mapper = ChunkMapper::new("r", "cited", 1);
        let mut aggregate = CompletionAggregate::new("r", "cited", 1);
        let mut out = Vec::new();
        for event in &events {
            mapper.map(event, &mut out);
            aggregate.push(event);
        }
        let deltas: Vec<&Value> = out.iter().map(|c| &c["choices"][0]["delta"]).collect();
        assert_eq!(deltas[1], &json!({"content": "Coral reported the bug"}));
        assert_eq!(
            deltas[2],
            &json!({"citations": [{"index": 0, "messageId": "361", "content": "The translation cannot be turned off",
                "senderName": "Coral", "senderId": "u361", "timestamp": 1_736_985_600_000_i64,
                "chatId": "11200463399", "offset": 22, "toolId": "call_msgs"}]})
        );
        assert_eq!(deltas[3], &json!({"content": ". Ünï"}));
        assert_eq!(deltas[4]["citations"][0]["url"], "https://example.com/notes/7");
        let offsets: Vec<(u64, u64)> = deltas
            .iter()
            .filter_map(|d| d["citations"][0].as_object())
            .map(|c| (c["index"].as_u64().unwrap(), c["offset"].as_u64().unwrap()))
            .collect();
        // The second block starts at 27 (UTF-16: the emoji counts two).
        assert_eq!(offsets, [(0, 22), (1, 27), (3, 27), (4, 36)], "the child's (index 2) is skipped");
        let answer: String = deltas.iter().filter_map(|d| d["content"].as_str()).collect();
        assert_eq!(answer.encode_utf16().count(), 36);

        let body = aggregate.finish(0, 0).unwrap().unwrap();
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], answer.as_str());
        let collected: Vec<Value> = deltas.iter().filter_map(|d| d["citations"].get(0).cloned()).collect();
        assert_eq!(message["citations"], json!(collected));
        // No citations: no field.
        let mut plain = CompletionAggregate::new("r", "m", 1);
        for event in run() {
            plain.push(&event);
        }
        assert!(plain.finish(0, 0).unwrap().unwrap()["choices"][0]["message"].get("citations").is_none());
    }

    /// Issue 36: a guard's events are `delta.agw` chunks; a revoke ends the answer with
    /// `content_filter` on its chunk and says where the withdrawn text is; the run's error adds
    /// nothing after it; a child's are skipped. The completion leaves the withdrawn text out.
    #[test]
    fn a_revoke_ends_the_answer_as_filtered_and_the_completion_leaves_it_out() {
        let events = crate::adapters::guarded_run();
        let mut mapper = ChunkMapper::new("r", "guarded", 1);
        let mut aggregate = CompletionAggregate::new("r", "guarded", 1);
        let mut out = Vec::new();
        for event in &events {
            mapper.map(event, &mut out);
            aggregate.push(event);
        }
        let choices: Vec<String> = out.iter().map(|c| c["choices"][0].to_string()).collect();
        assert_eq!(
            choices,
            [
                r#"{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"content":"Let me check."},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"agw":{"warning":{"stage":"toolInput","guard":"rules:demo","rule":"r1","message":"careful","toolId":"t1","statusCode":-1007}}},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"content":"Write to bob@"},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"agw":{"warning":{"stage":"output","guard":"rules:demo","rule":"r1","message":"careful","statusCode":-1007}}},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"content":"x.com"},"finish_reason":null}"#,
                r#"{"index":0,"delta":{"agw":{"revoke":{"stage":"output","guard":"rules:pii","rule":"email","reason":"personal data","statusCode":-1006,"offset":13,"length":18}}},"finish_reason":"content_filter"}"#,
            ]
        );
        assert_eq!(mapper.ending(), Some(&Ending::Finished(CONTENT_FILTER)));

        let body = aggregate.finish(0, 0).unwrap().unwrap();
        assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], "Let me check.");
        assert_eq!(message["agw"]["revoke"]["offset"], 13);
        assert_eq!(message["agw"]["warnings"].as_array().map(Vec::len), Some(2));
        assert!(message["agw"].get("blocks").is_none(), "the child's block is not the answer's");
    }

    /// Structured output: an answer withdrawn for its schema does not end the answer (its repair
    /// follows); the completion keeps only the repaired text.
    #[test]
    fn an_answer_withdrawn_for_its_schema_is_followed_by_its_repair() {
        use crate::event::{ContentEnd, ContentRevoke, ContentStart};
        let start = |id: &str| ev(ContentStart { content_id: id.into(), run_id: "r".into(), task_id: None });
        let revoke = ContentRevoke {
            content_id: "r_c_1".into(),
            stage: crate::guard::GuardStage::Output,
            guard: crate::guard::OUTPUT_SCHEMA_GUARD.into(),
            rule: None,
            reason: "the answer is not JSON".into(),
            status_code: -1006,
        };
        let events = [
            ev(RunStart { run_id: "r".into(), chat_id: "c".into() }),
            start("r_c_1"),
            ev(ContentDelta { content_id: "r_c_1".into(), delta: "Sunny".into() }),
            ev(ContentEnd { content_id: "r_c_1".into() }),
            ev(revoke),
            start("r_c_2"),
            ev(ContentDelta { content_id: "r_c_2".into(), delta: "{\"a\":1}".into() }),
            ev(ContentEnd { content_id: "r_c_2".into() }),
            ev(RunComplete {
                run_id: "r".into(),
                finish_reason: "stop".into(),
                output: Some(json!({"a": 1})),
                totals: Default::default(),
            }),
        ];
        let mut mapper = ChunkMapper::new("r", "m", 1);
        let mut aggregate = CompletionAggregate::new("r", "m", 1);
        let mut out = Vec::new();
        for event in &events {
            mapper.map(event, &mut out);
            aggregate.push(event);
        }
        let revoked = &out[2]["choices"][0];
        assert_eq!(revoked["delta"]["agw"]["revoke"]["length"], 5);
        assert_eq!(revoked["finish_reason"], Value::Null, "not filtered: {revoked}");
        assert_eq!(out[3]["choices"][0]["delta"]["content"], "{\"a\":1}");
        assert_eq!(out.last().unwrap()["choices"][0]["finish_reason"], "stop");
        let body = aggregate.finish(0, 0).unwrap().unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "{\"a\":1}");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
    }

    /// Issue 36: an answer blocked before its first word is filtered too; a blocked question is
    /// the request's error.
    #[test]
    fn a_blocked_answer_is_filtered_and_a_blocked_question_an_invalid_request() {
        use crate::event::{GuardBlock, RunError};
        use crate::guard::GuardStage;
        let block = |stage| GuardBlock {
            stage,
            guard: "webhook".into(),
            rule: None,
            reason: "no".into(),
            tool_id: None,
            status_code: -1006,
        };
        let error = || RunError {
            run_id: "r".into(),
            error: crate::RunErrorInfo::new(crate::ErrorCode::GuardrailBlocked, "blocked", false),
            totals: Default::default(),
        };
        let mut answer = CompletionAggregate::new("r", "m", 1);
        for event in
            [ev(RunStart { run_id: "r".into(), chat_id: "c".into() }), ev(block(GuardStage::Output)), ev(error())]
        {
            answer.push(&event);
        }
        let body = answer.finish(0, 0).unwrap().unwrap();
        assert_eq!(
            (body["choices"][0]["finish_reason"].as_str(), body["choices"][0]["message"]["content"].as_str()),
            (Some("content_filter"), Some(""))
        );
        assert_eq!(body["choices"][0]["message"]["agw"]["blocks"][0]["stage"], "output");

        let mut question = CompletionAggregate::new("r", "m", 1);
        for event in [ev(block(GuardStage::Input)), ev(error())] {
            question.push(&event);
        }
        let body = question.finish(0, 0).unwrap().unwrap_err();
        assert_eq!(
            (body["error"]["type"].as_str(), body["error"]["code"].as_str()),
            (Some("invalid_request_error"), Some("guardrail_blocked"))
        );
    }
}
