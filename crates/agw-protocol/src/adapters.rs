//! Other wire protocols for agw's runs (issue 16): pure mappings from agw's [`Event`]s to the
//! frames of each protocol, one mapper per stream, tested event by event. The HTTP layer picks
//! the adapter by endpoint; the native dialect (`sse`) stays the default.
//!
//! [`Event`]: crate::Event

pub mod a2a;
pub mod ag_ui;
pub mod ai_sdk;
pub mod openai_chat;
pub mod phase;

/// What a client of another protocol needs of `run.resume`: the attempt, where the superseded
/// part began, the text blocks (AI SDK text parts, AG-UI messages) and the child tasks it drops.
pub(crate) fn resume_fields(e: &crate::event::RunResume) -> serde_json::Value {
    serde_json::json!({
        "attempt": e.attempt,
        "discardFrom": e.discard_from,
        "contentIds": e.content_ids,
        "reasoningIds": e.reasoning_ids,
        "taskIds": e.task_ids,
    })
}

/// What a `context.compact` tells a client of another protocol: the level and the numbers (the
/// summary text stays in agw's own stream and history).
pub(crate) fn compact_summary(e: &crate::event::ContextCompact) -> serde_json::Value {
    serde_json::json!({"level": e.level.as_str(), "tokensBefore": e.tokens_before, "tokensAfter": e.tokens_after, "budget": e.budget})
}

/// What a `model.fallback` tells a client of another protocol: the whole event but its `runId`
/// (`{from: {providerKey, model}, to: {…}, reason, message}`).
pub(crate) fn fallback_fields(e: &crate::event::ModelFallback) -> serde_json::Value {
    serde_json::json!({"from": e.from, "to": e.to, "reason": e.reason, "message": e.message})
}

/// A `content.citation` as one flat JSON object (`contentId, index, messageId, content?,
/// senderName?, senderId?, timestamp?, chatId?, url?, title?, offset, toolId?`): what the other
/// protocols' citations carry (docs/protocols.md "Citations"). The native event nests the record
/// so that its `timestamp` and `chatId` are not read as the event's; inside a part's metadata or a
/// custom event's value they stand alone.
pub fn citation_fields(e: &crate::event::ContentCitation) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{Value, json};
    let r = &e.record;
    let mut fields = serde_json::Map::new();
    fields.insert("contentId".into(), json!(e.content_id));
    fields.insert("index".into(), json!(e.index));
    fields.insert("messageId".into(), json!(r.message_id));
    let optional: [(&str, Option<Value>); 7] = [
        ("content", r.content.as_ref().map(|v| json!(v))),
        ("senderName", r.sender_name.as_ref().map(|v| json!(v))),
        ("senderId", r.sender_id.as_ref().map(|v| json!(v))),
        ("timestamp", r.timestamp.map(|v| json!(v))),
        ("chatId", r.chat_id.as_ref().map(|v| json!(v))),
        ("url", r.url.as_ref().map(|v| json!(v))),
        ("title", r.title.as_ref().map(|v| json!(v))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            fields.insert(key.into(), value);
        }
    }
    fields.insert("offset".into(), json!(e.offset));
    if let Some(tool_id) = &e.tool_id {
        fields.insert("toolId".into(), json!(tool_id));
    }
    fields
}

/// A guard's event (`content.revoke`, `guard.warning`, `guard.block`) as one flat JSON object:
/// the native fields in their order, with `contentId` and `toolId` under the names `ids` gives
/// them (each protocol names the text and the call its own way; a `None` name leaves the field
/// out). What the AI SDK's data parts, AG-UI's custom events, the OpenAI façade's extension field
/// and the phase stream carry (docs/protocols.md "Guardrails"). `None` for other events.
pub(crate) fn guard_fields(
    payload: &crate::event::EventPayload,
    ids: GuardIds,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    use crate::event::EventPayload;
    use serde_json::Value;
    let native = match payload {
        EventPayload::ContentRevoke(e) => serde_json::to_value(e),
        EventPayload::GuardWarning(e) => serde_json::to_value(e),
        EventPayload::GuardBlock(e) => serde_json::to_value(e),
        _ => return None,
    };
    let Ok(Value::Object(native)) = native else { return None };
    let renamed = native.into_iter().filter_map(|(key, value)| match key.as_str() {
        "contentId" => ids.content.map(|name| (name.to_owned(), value)),
        "toolId" => ids.tool.map(|name| (name.to_owned(), value)),
        _ => Some((key, value)),
    });
    Some(renamed.collect())
}

/// How a protocol names the text block and the call a guard's event refers to
/// ([`guard_fields`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardIds {
    /// The key of `contentId`; `None`: left out.
    pub content: Option<&'static str>,
    /// The key of `toolId`; `None`: left out.
    pub tool: Option<&'static str>,
}

impl GuardIds {
    /// agw's own names.
    pub const NATIVE: GuardIds = GuardIds { content: Some("contentId"), tool: Some("toolId") };
}

/// What a client shows as a citation's name: the record's title, else who wrote it, else its id.
pub(crate) fn citation_title(record: &crate::citation::CitationRecord) -> &str {
    record.title.as_deref().or(record.sender_name.as_deref()).unwrap_or(&record.message_id)
}

/// A run that cites: a text with a record cited in the middle (from call `call_msgs`) and one
/// with a link at the end, then a child task's text that cites too.
#[cfg(test)]
pub(crate) fn cited_run() -> Vec<crate::Event> {
    use crate::citation::CitationRecord;
    use crate::event::*;
    let record = |id: &str, sender: &str, content: &str| CitationRecord {
        message_id: id.into(),
        content: Some(content.into()),
        sender_name: Some(sender.into()),
        sender_id: Some(format!("u{id}")),
        timestamp: Some(1_736_985_600_000),
        chat_id: Some("11200463399".into()),
        url: None,
        title: None,
    };
    let cite = |content_id: &str, index: u32, record: CitationRecord, offset: u64| ContentCitation {
        content_id: content_id.into(),
        index,
        record,
        offset,
        tool_id: Some("call_msgs".into()),
    };
    let linked = CitationRecord {
        url: Some("https://example.com/notes/7".into()),
        title: Some("Release notes".into()),
        ..CitationRecord { message_id: "doc7".into(), ..CitationRecord::default() }
    };
    let text = |id: &str| ContentStart { content_id: id.into(), run_id: "r".into(), task_id: None };
    let delta = |id: &str, d: &str| ContentDelta { content_id: id.into(), delta: d.into() };
    let mut child_cite = crate::Event::new(0, 0, cite("r_t1_c_1", 2, record("432", "Mason", "Icons"), 6));
    child_cite.tag_task("t1");
    let mut child_text = crate::Event::new(0, 0, text("r_t1_c_1"));
    child_text.tag_task("t1");
    let mut child_delta = crate::Event::new(0, 0, delta("r_t1_c_1", "Icons."));
    child_delta.tag_task("t1");
    let mut child_end = crate::Event::new(0, 0, ContentEnd { content_id: "r_t1_c_1".into() });
    child_end.tag_task("t1");
    let payloads: Vec<EventPayload> = vec![
        RunStart { run_id: "r".into(), chat_id: "c".into() }.into(),
        text("r_c_1").into(),
        // "Coral reported the bug [cite:361]. Ünï [cite:doc7]"
        delta("r_c_1", "Coral reported the bug").into(),
        cite("r_c_1", 0, record("361", "Coral", "The translation cannot be turned off"), 22).into(),
        delta("r_c_1", ". Ünï").into(),
        cite("r_c_1", 1, linked, 27).into(),
        ContentEnd { content_id: "r_c_1".into() }.into(),
    ];
    let mut events: Vec<crate::Event> = payloads.into_iter().map(|p| crate::Event::new(0, 0, p)).collect();
    events.extend([child_text, child_delta, child_cite, child_end]);
    events.push(crate::Event::new(
        0,
        0,
        RunComplete { run_id: "r".into(), finish_reason: "stop".into(), output: None, totals: Default::default() },
    ));
    for (seq, event) in events.iter_mut().enumerate() {
        event.seq = seq as u64 + 1;
    }
    events
}

/// A run a guard stops (issue 36): its first turn writes text and calls a tool a guard warns
/// about; a child's call is blocked; its second turn's text is warned about, then withdrawn, and
/// the run fails with `guardrail_blocked`. The answer's text is "Let me check." (13 UTF-16
/// units), then "Write to bob@x.com" (18), withdrawn.
#[cfg(test)]
pub(crate) fn guarded_run() -> Vec<crate::Event> {
    use crate::event::*;
    use crate::guard::GuardStage;
    let text = |id: &str| ContentStart { content_id: id.into(), run_id: "r".into(), task_id: None };
    let delta = |id: &str, d: &str| ContentDelta { content_id: id.into(), delta: d.into() };
    let warning = |stage, content_id: Option<&str>, tool_id: Option<&str>| GuardWarning {
        stage,
        guard: "rules:demo".into(),
        rule: Some("r1".into()),
        message: "careful".into(),
        content_id: content_id.map(str::to_owned),
        tool_id: tool_id.map(str::to_owned),
        status_code: -1007,
    };
    let call = ToolStart {
        tool_id: "t1".into(),
        run_id: "r".into(),
        task_id: None,
        tool_name: Some("lookup".into()),
        tool_type: Some("function".into()),
        tool_api: None,
        tool_params: None,
        description: None,
        tool_key: None,
        tool_timeout: None,
    };
    let child_block = GuardBlock {
        stage: GuardStage::ToolInput,
        guard: "webhook".into(),
        rule: None,
        reason: "not allowed".into(),
        tool_id: Some("t9_call".into()),
        status_code: -1006,
    };
    let revoke = ContentRevoke {
        content_id: "r_c_2".into(),
        stage: GuardStage::Output,
        guard: "rules:pii".into(),
        rule: Some("email".into()),
        reason: "personal data".into(),
        status_code: -1006,
    };
    let error = RunError {
        run_id: "r".into(),
        error: RunErrorInfo::new(ErrorCode::GuardrailBlocked, "the answer was withdrawn", false),
        totals: Default::default(),
    };
    let mut child = crate::Event::new(0, 0, child_block);
    child.tag_task("t9");
    let before: Vec<EventPayload> = vec![
        RunStart { run_id: "r".into(), chat_id: "c".into() }.into(),
        text("r_c_1").into(),
        delta("r_c_1", "Let me check.").into(),
        ContentEnd { content_id: "r_c_1".into() }.into(),
        call.into(),
        ToolEnd { tool_id: "t1".into() }.into(),
        warning(GuardStage::ToolInput, None, Some("t1")).into(),
        ToolResult { tool_id: "t1".into(), result: "{}".into() }.into(),
    ];
    let after: Vec<EventPayload> = vec![
        text("r_c_2").into(),
        delta("r_c_2", "Write to bob@").into(),
        warning(GuardStage::Output, Some("r_c_2"), None).into(),
        delta("r_c_2", "x.com").into(),
        ContentEnd { content_id: "r_c_2".into() }.into(),
        revoke.into(),
        error.into(),
    ];
    let mut events: Vec<crate::Event> = before.into_iter().map(|p| crate::Event::new(0, 0, p)).collect();
    events.push(child);
    events.extend(after.into_iter().map(|p| crate::Event::new(0, 0, p)));
    for (seq, event) in events.iter_mut().enumerate() {
        event.seq = seq as u64 + 1;
    }
    events
}

/// A run whose `agent_invoke` call runs two children that interleave (text and a tool call
/// each; the second child's call errs and the child fails), then the parent answers.
#[cfg(test)]
pub(crate) fn children_run() -> Vec<crate::Event> {
    use crate::event::*;
    let child = |task: &str, payload: EventPayload| {
        let mut event = crate::Event::new(0, 0, payload);
        event.tag_task(task);
        event
    };
    let parent = |payload: EventPayload| crate::Event::new(0, 0, payload);
    let tool = |id: &str, name: &str| ToolStart {
        tool_id: id.into(),
        run_id: "r".into(),
        task_id: None,
        tool_name: Some(name.into()),
        tool_type: Some("function".into()),
        tool_api: None,
        tool_params: None,
        description: None,
        tool_key: None,
        tool_timeout: None,
    };
    let text = |id: &str| ContentStart { content_id: id.into(), run_id: "r".into(), task_id: None };
    let delta = |id: &str, d: &str| ContentDelta { content_id: id.into(), delta: d.into() };
    let task = |id: &str, agent: &str, name: Option<&str>| TaskStart {
        task_id: id.into(),
        run_id: "r".into(),
        task_name: name.map(str::to_owned),
        description: Some(format!("task for {agent}")),
        sub_agent_key: Some(agent.into()),
        tool_id: Some("call_team".into()),
    };
    let mut events = vec![
        parent(RunStart { run_id: "r".into(), chat_id: "c".into() }.into()),
        parent(tool("call_team", "agent_invoke").into()),
        parent(ToolArgs { tool_id: "call_team".into(), delta: "{\"tasks\":[]}".into(), chunk_index: 0 }.into()),
        parent(ToolEnd { tool_id: "call_team".into() }.into()),
        parent(task("t1", "researcher", Some("research")).into()),
        parent(task("t2", "writer", None).into()),
        child("t1", text("r_t1_c_1").into()),
        child("t2", text("r_t2_c_1").into()),
        child("t1", delta("r_t1_c_1", "Paris ").into()),
        child("t2", delta("r_t2_c_1", "Soft ").into()),
        child("t1", ContentEnd { content_id: "r_t1_c_1".into() }.into()),
        child("t1", tool("t1_call_w", "weather").into()),
        child("t2", delta("r_t2_c_1", "rain").into()),
        child("t1", ToolEnd { tool_id: "t1_call_w".into() }.into()),
        child("t2", ContentEnd { content_id: "r_t2_c_1".into() }.into()),
        child("t2", tool("t2_call_x", "weather").into()),
        child("t2", ToolEnd { tool_id: "t2_call_x".into() }.into()),
        child("t1", ToolResult { tool_id: "t1_call_w".into(), result: "{\"temp\":21}".into() }.into()),
        child("t2", ToolResult { tool_id: "t2_call_x".into(), result: r#"{"ok":false,"error":"down"}"#.into() }.into()),
        parent(TaskComplete { task_id: "t1".into() }.into()),
        parent(TaskFail { task_id: "t2".into(), error: TaskError::new("provider_error", "boom") }.into()),
        parent(ToolResult { tool_id: "call_team".into(), result: "{\"tasks\":[]}".into() }.into()),
        parent(text("r_c_2").into()),
        parent(delta("r_c_2", "Team done.").into()),
        parent(ContentEnd { content_id: "r_c_2".into() }.into()),
        parent(
            RunComplete { run_id: "r".into(), finish_reason: "stop".into(), output: None, totals: Default::default() }
                .into(),
        ),
    ];
    for (seq, event) in events.iter_mut().enumerate() {
        event.seq = seq as u64 + 1;
    }
    events
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Event;
    use crate::event::{CompactLevel, ContextCompact};

    #[test]
    fn a_compaction_reaches_ai_sdk_as_a_data_part_and_ag_ui_as_a_custom_event() {
        let compact = ContextCompact {
            run_id: "r".into(),
            level: CompactLevel::Summary,
            tokens_before: 900,
            tokens_after: 200,
            budget: 1000,
            duration_ms: 3,
            pruned_results: 0,
            replaced_messages: 4,
            summary: Some("long summary text".into()),
            through_run_id: Some("r0".into()),
            reason: None,
        };
        let event = Event::new(5, 7, compact);
        let numbers = json!({"level": "summary", "tokensBefore": 900, "tokensAfter": 200, "budget": 1000});
        let mut out = Vec::new();
        super::ai_sdk::UiMessageMapper::new().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "data-context-compact", "data": numbers})]);
        let mut out = Vec::new();
        super::ag_ui::AgUiMapper::default().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "CUSTOM", "name": "agw.context_compact", "value": numbers, "timestamp": 7})]);
        let mut out = Vec::new();
        super::openai_chat::ChunkMapper::new("r", "m", 7).map(&event, &mut out);
        assert!(out.is_empty(), "the OpenAI façade carries only text");
    }

    #[test]
    fn a_fallback_reaches_every_protocol_with_a_place_for_custom_data() {
        use crate::event::{ModelFallback, ModelRef};
        let model = |p: &str, m: &str| ModelRef { provider_key: p.into(), model: m.into() };
        let fallback = ModelFallback {
            run_id: "r".into(),
            from: model("main", "big"),
            to: model("spare", "small"),
            reason: "overloaded".into(),
            message: "provider answered HTTP 529: Overloaded".into(),
        };
        let event = Event::new(9, 7, fallback);
        let fields = json!({"from": {"providerKey": "main", "model": "big"}, "to": {"providerKey": "spare",
            "model": "small"}, "reason": "overloaded", "message": "provider answered HTTP 529: Overloaded"});
        let mut out = Vec::new();
        super::ai_sdk::UiMessageMapper::new().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "data-agw-fallback", "data": fields})]);
        let mut out = Vec::new();
        super::ag_ui::AgUiMapper::default().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "CUSTOM", "name": "agw.model_fallback", "value": fields, "timestamp": 7})]);
        let mut out = Vec::new();
        super::openai_chat::ChunkMapper::new("r", "m", 7).map(&event, &mut out);
        assert_eq!(out.last().unwrap()["choices"][0]["delta"]["agw"]["fallback"], fields, "{out:?}");
    }

    #[test]
    fn a_resumed_run_reaches_ai_sdk_and_ag_ui_naming_the_superseded_blocks() {
        let resume = crate::event::RunResume {
            run_id: "r".into(),
            attempt: 1,
            discard_from: 8,
            content_ids: vec!["r_c_1".into()],
            reasoning_ids: Vec::new(),
            task_ids: vec!["t1".into()],
        };
        let event = Event::new(12, 7, resume);
        let fields =
            json!({"attempt": 1, "discardFrom": 8, "contentIds": ["r_c_1"], "reasoningIds": [], "taskIds": ["t1"]});
        let mut out = Vec::new();
        super::ai_sdk::UiMessageMapper::new().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "data-agw-resume", "data": fields})]);
        let mut out = Vec::new();
        super::ag_ui::AgUiMapper::default().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "CUSTOM", "name": "agw.resume", "value": fields, "timestamp": 7})]);
        let mut out = Vec::new();
        super::phase::PhaseMapper::new(Default::default(), None, Default::default()).map(&event, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((&out[0]["type"], &out[0]["data"]), (&json!("resume"), &json!({"attempt": 1})));
        let mut out = Vec::new();
        super::openai_chat::ChunkMapper::new("r", "m", 7).map(&event, &mut out);
        assert!(out.is_empty(), "the OpenAI façade carries only text");
        // The wire form of the event itself.
        let wire = serde_json::to_value(&event).unwrap();
        assert_eq!(
            wire,
            json!({"seq": 12, "type": "run.resume", "timestamp": 7, "runId": "r", "attempt": 1, "discardFrom": 8,
                "contentIds": ["r_c_1"], "taskIds": ["t1"]})
        );
    }
}
