//! The fuzz bodies: one per kind of untrusted input. Each takes raw bytes, must not panic, and
//! asserts what its parser promises beyond "no panic".

use agw_llm::LlmDelta;
use agw_llm::openai::parse_chunk;
use agw_llm::{ResponseLimits, ResponseMeter};
use agw_modes::definition::{AgentCatalog, AgentDefinition, StageKind};
use agw_modes::runtime::{FrontendSubmits, SubmitStatus};
use agw_protocol::event::Event;
use agw_protocol::history::{self, HistoryLine, QueryLine};
use agw_protocol::request::{QueryRequest, SubmitRequest};
use agw_protocol::sse::{SseDecoder, write_event};
use agw_protocol::{chat_references, ids, raw_messages, replay_chat};
use agw_tools::ToolRegistry;
use agw_tools::definition::validate_file;
use serde_json::Value;

const STAGES: [StageKind; 5] =
    [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary];

/// An agent file (`agents/*.json`): `"""` prompt blocks, comments, then the schema. Checks that
/// parsing is deterministic, that the catalog loads exactly the files `from_json` accepts, and
/// that every accessor a run uses works on what it accepted.
pub fn agent_definition(data: &[u8]) {
    // The loader reads files as UTF-8 text; other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let parsed = AgentDefinition::from_json("fuzz.json", text);
    assert_eq!(AgentDefinition::from_json("fuzz.json", text), parsed, "parsing is deterministic");
    let catalog = AgentCatalog::from_sources([("fuzz.json".to_owned(), text.to_owned())]);
    assert_eq!(catalog.len(), usize::from(parsed.is_ok()), "the catalog loads exactly what from_json accepts");
    let Ok(definition) = parsed else { return };
    assert!(!definition.key.trim().is_empty(), "an accepted agent has a key");
    assert!(catalog.get(&definition.key).is_some());
    let _ = definition.mode_kind();
    let _ = definition.agent_provider_key();
    let _ = definition.agent_model(None);
    let _ = definition.agent_model(Some("fallback-model"));
    let _ = definition.tool_names();
    let _ = definition.primary_system_prompt();
    for kind in STAGES {
        let _ = definition.stage(kind);
        let _ = definition.stage_tools(kind);
        let _ = definition.resolve_model(kind, |_| None);
    }
}

/// A provider's stream body: the SSE framing, then every `data:` payload as a
/// `chat.completion.chunk`. Also the bytes as one payload on their own. Checks that framing does
/// not depend on how the bytes are split into reads, and the chunk parser's promises: no empty
/// text deltas, no blank ids/names/finish reasons, and errors only for non-objects or in-stream
/// error objects.
pub fn sse_chunk(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        check_chunk(&value);
    }
    let mut whole = Vec::new();
    let mut decoder = SseDecoder::new();
    decoder.feed(data, &mut whole);
    let step = data.first().map_or(1, |b| usize::from(*b % 7) + 1);
    let mut split = Vec::new();
    let mut pieces = SseDecoder::new();
    for piece in data.chunks(step) {
        pieces.feed(piece, &mut split);
    }
    assert_eq!(whole, split, "SSE frames do not depend on how the bytes were split");
    assert_eq!(decoder.has_pending(), pieces.has_pending());
    check_limits(data, step);
    for frame in &whole {
        if frame.data.trim() == "[DONE]" {
            break;
        }
        if let Ok(value) = serde_json::from_str::<Value>(&frame.data) {
            check_chunk(&value);
        }
        let _ = frame.parse_event();
    }
}

/// The provider response limits (issue 14) judge the bytes, not how they arrived: the verdict of
/// one read equals the verdict of many, and it matches a direct count of lines and bytes.
fn check_limits(data: &[u8], step: usize) {
    let limits =
        ResponseLimits { max_line_bytes: 64, max_response_bytes: 4096, max_tool_calls: 4, max_output_bytes: 2048 };
    let mut whole = ResponseMeter::new(limits);
    let at_once = whole.bytes(data).map_err(|e| e.to_string());
    let mut pieces = ResponseMeter::new(limits);
    let piecewise = data.chunks(step).try_for_each(|piece| pieces.bytes(piece)).map_err(|e| e.to_string());
    assert_eq!(at_once, piecewise, "the limit verdict does not depend on how the bytes were split");
    let longest = data.split(|b| *b == b'\n' || *b == b'\r').map(<[u8]>::len).max().unwrap_or(0);
    let within = data.len() <= 4096 && longest <= 64;
    assert_eq!(
        at_once.is_ok(),
        within,
        "verdict matches a direct count ({} bytes, longest line {longest})",
        data.len()
    );
}

fn check_chunk(value: &Value) {
    match parse_chunk(value) {
        Ok(deltas) => {
            for delta in deltas {
                match delta {
                    LlmDelta::Reasoning { text } | LlmDelta::Content { text } => {
                        assert!(!text.is_empty(), "an empty text delta was produced");
                    }
                    LlmDelta::ToolCall(fragment) => {
                        assert!(fragment.id.as_deref().is_none_or(|id| !id.is_empty()), "empty call id");
                        assert!(fragment.name.as_deref().is_none_or(|n| !n.is_empty()), "empty call name");
                    }
                    LlmDelta::Finish { reason } => assert!(!reason.trim().is_empty(), "blank finish reason"),
                    LlmDelta::Usage { usage } => assert!(usage.is_object()),
                }
            }
        }
        Err(error) => {
            let in_stream_error = value.get("choices").and_then(Value::as_array).is_none_or(Vec::is_empty)
                && value.get("error").is_some_and(|e| !e.is_null());
            assert!(!value.is_object() || in_stream_error, "a JSON object chunk was refused: {error}");
            let _ = error.to_string();
        }
    }
}

/// The body of `POST /api/ap/query`. Checks, for what it accepts: the canonical chat id is a
/// fixed point, the chat name rule, the `request.query` event survives SSE framing unchanged,
/// and the request survives its own JSON and the history query line (the form the chat file
/// stores) unchanged.
pub fn query_request(data: &[u8]) {
    let Ok(request) = QueryRequest::from_json(data) else { return };
    let _ = request.validate();
    let chat_id = match request.canonical_chat_id() {
        Ok(Some(id)) => {
            assert_eq!(ids::canonical_uuid(&id).as_deref(), Some(id.as_str()), "canonical form is a fixed point");
            id
        }
        _ => "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01".to_owned(),
    };
    let name = ids::chat_name(request.message.as_deref().unwrap_or_default());
    assert!(!name.is_empty() && name.chars().count() <= 30, "chat name rule: {name:?}");
    let event = Event::new(1, 1_771_000_000_000, request.to_event("run-1", &chat_id));
    let json = event.to_json().expect("a request.query event serialises");
    let mut frame = Vec::new();
    write_event(&event, &mut frame);
    let mut frames = Vec::new();
    SseDecoder::new().feed(&frame, &mut frames);
    assert_eq!(frames.len(), 1, "one event, one frame");
    assert_eq!(frames[0].data, json, "the frame carries the event unchanged");

    let again = QueryRequest::from_json(&serde_json::to_vec(&request).expect("serialises")).expect("own JSON parses");
    assert_eq!(again, request, "JSON round trip");
    let line = HistoryLine::Query(QueryLine {
        chat_id: chat_id.clone(),
        run_id: "run-1".into(),
        updated_at: 1,
        query: request.clone(),
    });
    let stored = line.to_json().expect("query line serialises");
    let read = HistoryLine::parse(&stored).expect("query line parses").expect("is a line");
    assert_eq!(read, line, "the stored query reads back unchanged");
}

/// The body of `POST /api/ap/submit`. Checks the JSON round trip and that, with no run waiting,
/// any submit is unmatched and leaves nothing behind.
pub fn submit_request(data: &[u8]) {
    let Ok(request) = SubmitRequest::from_json(data) else { return };
    let valid = request.validate().is_ok();
    let key = request.waiter_key();
    assert!(key.contains('#'));
    let again = SubmitRequest::from_json(&serde_json::to_vec(&request).expect("serialises")).expect("own JSON parses");
    assert_eq!(again, request, "JSON round trip");
    if valid {
        let submits = FrontendSubmits::default();
        assert_eq!(submits.submit(&request.run_id, &request.tool_id, request.params.clone()), SubmitStatus::Unmatched);
        assert_eq!(submits.pending(), 0);
    }
}

/// A `SKILL.md`: YAML frontmatter between `---` lines, then the body. Checks determinism and
/// that what is accepted is trimmed and non-blank as documented.
pub fn skill_md(data: &[u8]) {
    // Non-UTF-8 skills are reported and skipped before parsing.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let parsed = agw_skills::parse_skill_md(text);
    assert_eq!(agw_skills::parse_skill_md(text), parsed, "parsing is deterministic");
    if let Ok(skill) = parsed {
        for field in [&skill.name, &skill.description].into_iter().flatten() {
            assert!(!field.is_empty() && field.trim() == field, "name/description are trimmed and non-blank");
        }
        assert_eq!(skill.body.trim(), skill.body, "the body is trimmed");
    }
}

/// A tool definition file, read as each of the three kinds (`.backend`, `.frontend`,
/// `.action`). Checks that the registry and the reload validator agree on whether the file is
/// usable and that every loaded tool is reachable under its normalised name.
pub fn tool_definition(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for suffix in ["backend", "frontend", "action"] {
        let file = format!("fuzz.{suffix}");
        let valid = validate_file(&file, text);
        let registry = ToolRegistry::from_sources([(file.clone(), text.to_owned())], Vec::new());
        if valid.is_err() {
            assert!(registry.list().is_empty(), "{file}: the validator refused a file the registry used");
        }
        for tool in registry.list() {
            assert!(!tool.name.is_empty(), "{file}: a tool without a name was loaded");
            assert_eq!(tool.name, tool.name.trim().to_lowercase(), "{file}: names are normalised");
            assert!(registry.get(&tool.name).is_some(), "{file}: {} is not reachable", tool.name);
            assert!(tool.parameters.is_object(), "{file}: parameters are an object schema");
            let _ = registry.kind_of(&tool.name);
        }
    }
}

/// A chat history file (JSONL). Checks that every line that parses writes back to a line that
/// parses to the same value, and that the replay, the raw messages, the references and the model
/// window can be built from whatever was accepted (replay `seq` 1..N).
pub fn history_line(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        let Ok(Some(line)) = HistoryLine::parse(raw) else { continue };
        let json = line.to_json().expect("a parsed line serialises");
        let again = HistoryLine::parse(&json).expect("a written line parses").expect("and is a line");
        assert_eq!(again, line, "history line round trip");
        lines.push(line);
    }
    let events = replay_chat("0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01", None, &lines, 1);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1, "replay seq is 1..N");
        event.to_json().expect("a replay event serialises");
    }
    let _ = raw_messages(&lines);
    let _ = chat_references(&lines);
    let _ = history::latest_plan(&lines);
    let _ = history::latest_system(&lines);
    let _ = agw_memory::history_messages(&lines, 3);
}
