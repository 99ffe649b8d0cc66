//! Chat memory end to end: runs are recorded, the next run sends the history back to the model,
//! `GET /api/ap/chats` / `GET /api/ap/chat` list and replay chats, and storage trouble (a
//! failing directory, a torn last line, concurrent runs) never breaks serving.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agw_testkit::Transcript;
use common::{Gateway, Stream, oneshot_agent, read_stream};
use serde_json::{Value, json};

// -- helpers ------------------------------------------------------------------------------------

/// A REACT agent on the fixture provider with reasoning, one backend tool and one action.
fn react_agent(key: &str) -> (String, String) {
    let text = json!({
        "key": key,
        "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "m", "reasoning": {"enabled": true, "effort": "LOW"}},
        "toolConfig": {"backends": ["mock_city_weather"], "actions": ["switch_theme"]},
        "react": {"systemPrompt": "x", "maxSteps": 3}
    });
    (format!("{key}.json"), text.to_string())
}

/// The memory directory the harness configures by default.
fn chats_dir(gw: &Gateway) -> PathBuf {
    gw.agents_dir.join("chats")
}

fn history_path(gw: &Gateway, chat_id: &str) -> PathBuf {
    chats_dir(gw).join(format!("{chat_id}.json"))
}

/// The history file split on `\n`: `(complete lines, unterminated tail)`.
fn history_file(path: &Path) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let tail = lines.pop().unwrap_or_default();
    (lines, tail)
}

/// Every complete line of the history file, each of which must be a JSON object.
fn history_file_lines(path: &Path) -> Vec<Value> {
    let (lines, tail) = history_file(path);
    assert!(tail.is_empty(), "history ends with a complete line, not {tail:?}");
    lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("invalid history line {l:?}: {e}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

/// The chat's stored history, one JSON object per line: on files every complete line of the
/// history file (which must end with a complete line, each line a JSON object); on PostgreSQL
/// the lines as the store reads them back.
async fn history_lines(gw: &Gateway, chat_id: &str) -> Vec<Value> {
    if gw.on_postgres() {
        return gw.history_json(chat_id).await;
    }
    history_file_lines(&history_path(gw, chat_id))
}

fn chat_id_of(stream: &Stream) -> String {
    stream.events()[0]["chatId"].as_str().expect("request.query carries chatId").to_owned()
}

fn run_id_of(stream: &Stream) -> String {
    stream.of_type("run.start")[0]["runId"].as_str().unwrap().to_owned()
}

fn text_of(stream: &Stream, ty: &str) -> String {
    stream.of_type(ty).iter().map(|e| e["delta"].as_str().unwrap()).collect()
}

fn assert_completed(stream: &Stream) {
    assert_eq!(stream.last()["type"], "run.complete", "run must complete: {:?}", stream.types());
}

/// `data` of `GET /api/ap/chat?chatId=…` (asserting 200 / code 0).
async fn replay(gw: &Gateway, chat_id: &str) -> Value {
    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["code"], 0, "{body}");
    body["data"].clone()
}

fn events_of(data: &Value) -> Vec<Value> {
    data["events"].as_array().expect("events array").clone()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn types_of(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap_or("?").to_owned()).collect()
}

/// Replayed events are numbered 1..N without gaps.
fn assert_gapless(events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {e}"))).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "replay seq must be 1..N");
}

/// `id → concatenation of field` over the events of these types, in stream order.
fn concat_by<'a>(
    events: impl IntoIterator<Item = &'a Value>,
    types: &[&str],
    id_keys: &[&str],
    field: &str,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for e in events {
        if !types.iter().any(|t| e["type"] == *t) {
            continue;
        }
        let id = id_keys.iter().find_map(|k| e[*k].as_str()).unwrap_or_else(|| panic!("no id in {e}"));
        let piece = match &e[field] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        out.entry(id.to_owned()).or_default().push_str(&piece);
    }
    out
}

/// `messages` of the `index`-th upstream request.
fn upstream_messages(gw: &Gateway, index: usize) -> Vec<Value> {
    let request = gw.fixture.request(index).unwrap_or_else(|| panic!("upstream request {index} missing"));
    request.body["messages"].as_array().expect("messages").clone()
}

/// A temp directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("agw-memory-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// -- 1. two-turn conversation -------------------------------------------------------------------

#[tokio::test]
async fn second_turn_sends_the_first_exchange_without_reasoning() {
    let gw = Gateway::start(&[oneshot_agent("a", true, 5000)], &[]).await;
    gw.fixture.push(Transcript::openai_reasoning_text(&["SECRET-", "REASONING ", "steps"], &["First ", "answer."]));
    let first = gw.run(&json!({"agentKey": "a", "message": "first question"})).await;
    assert_completed(&first);
    assert_eq!(text_of(&first, "reasoning.delta"), "SECRET-REASONING steps");
    assert_eq!(first.of_type("chat.start").len(), 1);
    let chat_id = chat_id_of(&first);

    gw.fixture.push(Transcript::openai_text(&["Second ", "answer."]));
    let second = gw.run(&json!({"agentKey": "a", "message": "second question", "chatId": chat_id})).await;
    assert_completed(&second);
    assert!(second.of_type("chat.start").is_empty(), "an existing chat does not start again");
    assert_eq!(chat_id_of(&second), chat_id);

    let messages = upstream_messages(&gw, 1);
    assert_eq!(messages[0]["role"], "system", "the system prompt stays first: {messages:?}");
    let rest: Vec<(String, String)> = messages[1..]
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or_default().to_owned()))
        .collect();
    let expected: Vec<(String, String)> =
        [("user", "first question"), ("assistant", "First answer."), ("user", "second question")]
            .iter()
            .map(|(r, c)| (r.to_string(), c.to_string()))
            .collect();
    assert_eq!(rest, expected, "history goes after the system prompt, the new message last");
    let raw = gw.fixture.request(1).unwrap().raw_body;
    assert!(!raw.contains("SECRET-") && !raw.contains("REASONING"), "reasoning is never sent back: {raw}");
    assert!(!raw.contains("reasoning_content"), "no reasoning field in the history: {raw}");

    // Both runs are stored: a query line then step line(s) each.
    let lines = history_lines(&gw, &chat_id).await;
    for run in [run_id_of(&first), run_id_of(&second)] {
        let types: Vec<&str> =
            lines.iter().filter(|l| l["runId"] == run.as_str()).map(|l| l["_type"].as_str().unwrap()).collect();
        assert_eq!(types, ["query", "step"], "run {run}");
    }
}

// -- 2./3. REACT tool run + action run ----------------------------------------------------------

/// Two recorded runs in one chat with agent `r`: a weather tool call (arguments in two chunks)
/// then an answer; a `switch_theme` action then an answer. Returns the live streams.
async fn tool_and_action_runs(gw: &Gateway) -> (String, Stream, Stream) {
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .reasoning("Need the ")
            .reasoning("weather.")
            .tool_call_start(0, "call_w1", "mock_city_weather")
            .tool_args(0, r#"{"city":"Shanghai","#)
            .tool_args(0, r#""date":"2026-02-13"}"#)
            .finish("tool_calls")
            .usage(10, 3)
            .done(),
    );
    gw.fixture.on_stage(
        "agent-react-step-2",
        Transcript::openai_reasoning_text(&["Got ", "it."], &["Shanghai ", "is ", "fine."]),
    );
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_t1", "switch_theme", &[r#"{"theme":"#, r#""dark"}"#]),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Switched ", "to dark."]));

    let first = gw.run(&json!({"agentKey": "r", "message": "weather in Shanghai?"})).await;
    assert_completed(&first);
    assert_eq!(text_of(&first, "tool.args"), r#"{"city":"Shanghai","date":"2026-02-13"}"#);
    assert_eq!(first.of_type("tool.args").len(), 2, "one tool.args per argument chunk");
    assert_eq!(first.of_type("tool.result").len(), 1);
    let chat_id = chat_id_of(&first);

    let second = gw.run(&json!({"agentKey": "r", "message": "dark mode please", "chatId": chat_id})).await;
    assert_completed(&second);
    assert_eq!(second.of_type("action.start").len(), 1, "switch_theme streams as an action: {:?}", second.types());
    assert_eq!(text_of(&second, "action.args"), r#"{"theme":"dark"}"#);
    assert_eq!(second.of_type("action.result").len(), 1);
    (chat_id, first, second)
}

#[tokio::test]
async fn tool_and_action_runs_are_recorded_replayed_and_sent_back_paired() {
    let gw = Gateway::start(&[react_agent("r")], &[]).await;
    let (chat_id, first, second) = tool_and_action_runs(&gw).await;

    // Recorded: the history holds both runs, with the calls and their results.
    let lines = history_lines(&gw, &chat_id).await;
    for (run, tool_call_id, name) in
        [(run_id_of(&first), "call_w1", "mock_city_weather"), (run_id_of(&second), "call_t1", "switch_theme")]
    {
        let of_run: Vec<&Value> = lines.iter().filter(|l| l["runId"] == run.as_str()).collect();
        assert_eq!(of_run[0]["_type"], "query");
        assert!(of_run.iter().filter(|l| l["_type"] == "step").count() >= 2, "two react steps for {run}");
        let messages: Vec<&Value> = of_run.iter().filter_map(|l| l["messages"].as_array()).flatten().collect();
        let call = messages
            .iter()
            .find(|m| m["tool_calls"][0]["id"] == tool_call_id)
            .unwrap_or_else(|| panic!("call {tool_call_id} recorded: {messages:?}"));
        assert_eq!(call["tool_calls"][0]["function"]["name"], name);
        assert!(
            messages.iter().any(|m| m["role"] == "tool" && m["tool_call_id"] == tool_call_id),
            "result of {tool_call_id} recorded"
        );
    }

    // Replayed: both calls and both answers.
    let events = events_of(&replay(&gw, &chat_id).await);
    let snapshots = of_type(&events, "tool.snapshot");
    let names: Vec<&str> = snapshots.iter().map(|e| e["toolName"].as_str().unwrap()).collect();
    assert_eq!(names, ["mock_city_weather", "switch_theme"], "{events:?}");
    assert_eq!(snapshots[0]["toolParams"], json!({"city": "Shanghai", "date": "2026-02-13"}));
    let texts: Vec<&str> = of_type(&events, "content.snapshot").iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["Shanghai is fine.", "Switched to dark."]);

    // The next run carries both call/result pairs, each result right after its call.
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_text(&["third"]));
    let before = gw.fixture.request_count();
    let third = gw.run(&json!({"agentKey": "r", "message": "and now?", "chatId": chat_id})).await;
    assert_completed(&third);
    let messages = upstream_messages(&gw, before);
    for (id, name) in [("call_w1", "mock_city_weather"), ("call_t1", "switch_theme")] {
        let at = messages
            .iter()
            .position(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == id)
            .unwrap_or_else(|| panic!("assistant tool call {id} in the history: {messages:?}"));
        let call = &messages[at]["tool_calls"][0];
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let result = &messages[at + 1];
        assert_eq!(result["role"], "tool", "{id}'s result follows its call: {messages:?}");
        assert_eq!(result["tool_call_id"], id);
        assert!(!result["content"].as_str().unwrap_or_default().is_empty(), "{result}");
    }
    let args = messages.iter().find(|m| m["tool_calls"][0]["id"] == "call_w1").unwrap()["tool_calls"][0]["function"]
        ["arguments"]
        .clone();
    assert_eq!(args, r#"{"city":"Shanghai","date":"2026-02-13"}"#, "the streamed arguments, verbatim");
    let users: Vec<&str> =
        messages.iter().filter(|m| m["role"] == "user").map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(users, ["weather in Shanghai?", "dark mode please", "and now?"]);
    assert_eq!(messages.last().unwrap()["content"], "and now?");
    let raw = gw.fixture.request(before).unwrap().raw_body;
    assert!(!raw.contains("Need the weather") && !raw.contains("Got it."), "reasoning is not sent back");
}

#[tokio::test]
async fn replay_repeats_the_live_ids_and_texts() {
    let gw = Gateway::start(&[react_agent("r")], &[]).await;
    let (chat_id, first, second) = tool_and_action_runs(&gw).await;
    let live: Vec<&Value> = first.events().into_iter().chain(second.events()).collect();
    let events = events_of(&replay(&gw, &chat_id).await);
    assert_gapless(&events);

    let pairs = [
        // (live types, live id keys, live field, replay types, replay id keys, replay field)
        (&["content.delta"][..], &["contentId"][..], "delta", &["content.snapshot"][..], &["contentId"][..], "text"),
        (&["reasoning.delta"], &["reasoningId"], "delta", &["reasoning.snapshot"], &["reasoningId"], "text"),
        (
            &["tool.args", "action.args"],
            &["toolId", "actionId"],
            "delta",
            &["tool.snapshot", "action.snapshot"],
            &["toolId", "actionId"],
            "arguments",
        ),
        (
            &["tool.result", "action.result"],
            &["toolId", "actionId"],
            "result",
            &["tool.result", "action.result"],
            &["toolId", "actionId"],
            "result",
        ),
    ];
    for (live_types, live_ids, live_field, replay_types, replay_ids, replay_field) in pairs {
        let streamed = concat_by(live.iter().copied(), live_types, live_ids, live_field);
        let replayed = concat_by(&events, replay_types, replay_ids, replay_field);
        assert!(!streamed.is_empty(), "the scenario streams {live_types:?}");
        assert_eq!(replayed, streamed, "replayed {replay_types:?} equal the live {live_types:?} (same ids)");
        let count = events.iter().filter(|e| replay_types.iter().any(|t| e["type"] == *t)).count();
        assert_eq!(count, replayed.len(), "one {replay_types:?} event per live block");
    }
    // Calls keep their name: the action is replayed under its live id with its name.
    let snapshot_names: BTreeMap<String, String> = of_type(&events, "tool.snapshot")
        .iter()
        .chain(of_type(&events, "action.snapshot").iter())
        .map(|e| {
            let id = e["toolId"].as_str().or(e["actionId"].as_str()).unwrap().to_owned();
            (id, e["toolName"].as_str().or(e["actionName"].as_str()).unwrap().to_owned())
        })
        .collect();
    let live_names: BTreeMap<String, String> = live
        .iter()
        .filter(|e| e["type"] == "tool.start" || e["type"] == "action.start")
        .map(|e| {
            let id = e["toolId"].as_str().or(e["actionId"].as_str()).unwrap().to_owned();
            (id, e["toolName"].as_str().or(e["actionName"].as_str()).unwrap().to_owned())
        })
        .collect();
    assert_eq!(snapshot_names, live_names);

    let types = types_of(&events);
    assert_eq!(types.iter().filter(|t| *t == "chat.start").count(), 1, "{types:?}");
    assert_eq!(types.iter().filter(|t| *t == "request.query").count(), 2);
    assert_eq!(types.iter().filter(|t| *t == "run.complete").count(), 2);
    assert!(!types.iter().any(|t| t == "chat.update"));
    let runs: Vec<&str> = of_type(&events, "run.start").iter().map(|e| e["runId"].as_str().unwrap()).collect();
    assert_eq!(runs, [run_id_of(&first), run_id_of(&second)], "one run.start per run, in order");
    assert_eq!(types[..3], ["request.query", "chat.start", "run.start"]);
    assert_eq!(types.last().unwrap(), "run.complete");
    for e in &events {
        assert_eq!(e["chatId"].as_str().unwrap_or(&chat_id), chat_id);
    }
}

// -- 4. reference controller cases --------------------------------------------------------------

#[tokio::test]
async fn chat_list_and_detail_follow_the_reference_controller() {
    let agent = json!({
        "key": "refAgent",
        "name": "Reference Agent",
        "mode": "ONESHOT",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "plain": {"systemPrompt": "x"}
    });
    let gw = Gateway::start(&[("refAgent.json".into(), agent.to_string())], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["Reference ", "answer."]));
    let (status, body) = gw.get_json("/api/ap/chats").await;
    assert_eq!((status, &body["data"]), (200, &json!([])), "no chats yet");

    let message = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let reference = json!({"id": "ref_001", "type": "url", "name": "doc", "url": "https://example.com/ref"});
    let stream = gw.run(&json!({"agentKey": "refAgent", "message": message, "references": [reference]})).await;
    assert_completed(&stream);
    let chat_id = chat_id_of(&stream);

    // 13: the list.
    let (status, body) = gw.get_json("/api/ap/chats").await;
    assert_eq!((status, body["code"].as_i64()), (200, Some(0)));
    let chat = &body["data"][0];
    assert_eq!(chat["chatId"], chat_id.as_str());
    assert_eq!(chat["chatName"], "0123456789ABCDEFGHIJKLMNOPQRST", "first 30 code points");
    assert_eq!(chat["firstAgentKey"], "refAgent");
    assert_eq!(chat["firstAgentName"], "Reference Agent");
    assert!(chat["createdAt"].as_i64().unwrap() > 0 && chat["updatedAt"].as_i64().unwrap() > 0, "{chat}");

    // 13: the detail.
    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!((status, body["code"].as_i64(), body["msg"].as_str()), (200, Some(0), Some("success")));
    let data = &body["data"];
    assert_eq!(data["chatId"], chat_id.as_str());
    assert_eq!(data["chatName"], "0123456789ABCDEFGHIJKLMNOPQRST");
    assert!(data.get("rawMessages").is_none(), "no rawMessages unless asked: {data}");
    let types = types_of(&events_of(data));
    for ty in ["request.query", "run.start", "content.snapshot", "run.complete"] {
        assert!(types.iter().any(|t| t == ty), "{ty} in {types:?}");
    }
    let refs = data["references"].as_array().expect("references present");
    assert_eq!(refs.len(), 1);
    let keys: Vec<&str> = refs[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 8, "all eight reference keys: {keys:?}");
    for key in ["id", "type", "name", "mimeType", "sizeBytes", "url", "sha256", "meta"] {
        assert!(keys.contains(&key), "{key} in {keys:?}");
    }
    assert_eq!(refs[0]["id"], "ref_001");
    assert_eq!(refs[0]["url"], "https://example.com/ref");
    assert_eq!(refs[0]["mimeType"], Value::Null);
    let replayed = events_of(data);
    let query = of_type(&replayed, "request.query")[0];
    assert_eq!(query["message"], message);
    assert_eq!(query["references"][0]["id"], "ref_001");

    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}&includeRawMessages=true")).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["rawMessages"][0]["role"], "user", "{body}");
    assert_eq!(body["data"]["rawMessages"][0]["runId"], run_id_of(&stream).as_str());
    assert!(types_of(&events_of(&body["data"])).iter().any(|t| t == "request.query"));

    // 14–16: bad ids, the deprecated parameter, unknown chats.
    let (status, body) = gw.get_json("/api/ap/chat?chatId=not-a-uuid").await;
    assert_eq!((status, body["code"].as_i64()), (400, Some(400)), "{body}");
    for value in ["true", "false"] {
        let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}&includeEvents={value}")).await;
        assert_eq!(status, 400, "includeEvents={value}");
        assert!(body["msg"].as_str().unwrap().contains("includeEvents is deprecated"), "{body}");
    }
    let (status, body) = gw.get_json("/api/ap/chat?chatId=123e4567-e89b-12d3-a456-426614174099").await;
    assert_eq!((status, body["code"].as_i64()), (404, Some(404)), "{body}");

    // 17: a second query in the chat → chat.start once, run.start twice, never chat.update.
    let again = gw.run(&json!({"agentKey": "refAgent", "message": "more", "chatId": chat_id})).await;
    assert_completed(&again);
    let (_, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    let text = body["data"]["events"].to_string();
    assert_eq!(text.matches(r#""type":"chat.start""#).count(), 1);
    assert_eq!(text.matches(r#""type":"run.start""#).count(), 2);
    assert!(!text.contains("chat.update"));
    assert_eq!(body["data"]["chatName"], "0123456789ABCDEFGHIJKLMNOPQRST", "the name stays the first message's");
    let (_, body) = gw.get_json("/api/ap/chats").await;
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "still one chat");
}

// -- 5. pre-seeded chat with a legacy plan -------------------------------------------------------

#[tokio::test]
async fn legacy_plan_snapshot_is_replayed_and_restored_at_the_next_run() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let chat_id = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b";
    // The chat as an older version left it in the chat directory. PostgreSQL gets it the way
    // such a chat reaches a database: `agw migrate-chats` (`agw_memory::migrate_chats`) from
    // that directory, lines and index record verbatim.
    let seed = TempDir::new("legacy-plan");
    let dir = if gw.on_postgres() { seed.0.clone() } else { chats_dir(&gw) };
    std::fs::create_dir_all(&dir).unwrap();
    let index = json!({"chatId": chat_id, "chatName": "seeded chat", "firstAgentKey": "a", "firstAgentName": "a",
        "createdAt": 1_771_000_000_000_i64, "updatedAt": 1_771_000_000_200_i64});
    std::fs::write(dir.join("_chats.jsonl"), format!("{index}\n")).unwrap();
    let query = json!({"_type": "query", "chatId": chat_id, "runId": "run_seed_001", "updatedAt": 1_771_000_000_100_i64,
        "query": {"requestId": "req_seed", "chatId": chat_id, "agentKey": "a", "role": "user", "message": "make a plan",
            "references": null, "params": null, "scene": null, "stream": null}});
    let step = json!({"_type": "step", "chatId": chat_id, "runId": "run_seed_001", "_stage": "plan", "_seq": 1,
        "updatedAt": 1_771_000_000_100_i64,
        "planSnapshot": {"planId": "plan_chat_001", "plan": [
            {"taskId": "task0", "description": "a", "status": "init"},
            {"taskId": "task1", "description": "b", "status": "in_progress"}]},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "make a plan"}], "ts": 1_771_000_000_050_i64},
            {"role": "assistant", "content": [{"type": "text", "text": "Planned."}], "ts": 1_771_000_000_060_i64}]});
    std::fs::write(dir.join(format!("{chat_id}.json")), format!("{query}\n{step}\n")).unwrap();
    if gw.on_postgres() {
        let store = gw.state.runs.chat_store().clone();
        let source = agw_memory::MemoryConfig { dir: dir.clone(), ..agw_memory::MemoryConfig::default() };
        let report = tokio::task::spawn_blocking(move || agw_memory::migrate_chats(&source, &store, None))
            .await
            .unwrap()
            .expect("migrate the seeded chat");
        assert_eq!((report.chats_copied, report.lines_copied), (1, 2), "{report:?}");
        assert!(report.mismatches.is_empty(), "{report:?}");
    }

    // 18: the replay shows the plan with agw's numbering and no rawEvent.
    let data = replay(&gw, chat_id).await;
    assert_eq!(data["chatName"], "seeded chat");
    let events = events_of(&data);
    assert_gapless(&events);
    assert_eq!(types_of(&events)[..4], ["request.query", "chat.start", "run.start", "plan.update"]);
    let plan = of_type(&events, "plan.update")[0].clone();
    assert_eq!(plan["planId"], "plan_chat_001");
    assert_eq!(plan["chatId"], chat_id);
    let statuses: Vec<&str> = plan["plan"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["init", "init"], "in_progress is normalised");
    assert!(plan["seq"].is_u64() && plan["timestamp"].as_i64().is_some(), "{plan}");
    assert!(plan.get("rawEvent").is_none(), "{plan}");
    assert_eq!(of_type(&events, "content.snapshot")[0]["text"], "Planned.");
    assert_eq!(of_type(&events, "request.query")[0]["requestId"], "req_seed");

    // 19: a new run in that chat starts by showing the restored plan.
    gw.fixture.set_default(Transcript::openai_text(&["Continuing."]));
    let resp = gw.post_query(&json!({"agentKey": "a", "message": "go on", "chatId": chat_id})).await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    let plan_frame = body.lines().find(|l| l.contains(r#""type":"plan.update""#)).expect("plan.update frame");
    let plan_json = plan_frame.strip_prefix("data:").unwrap().trim();
    // agw numbers plan.update like every event (`seq`, `type`, `timestamp` first), never `rawEvent`.
    assert!(plan_json.starts_with(r#"{"seq":"#), "{plan_json}");
    assert!(plan_json.contains(r#","type":"plan.update","timestamp":"#), "{plan_json}");
    assert!(!plan_json.contains("rawEvent"), "{plan_json}");
    let mut decoder = agw_protocol::sse::SseDecoder::default();
    let mut frames = Vec::new();
    decoder.feed(body.as_bytes(), &mut frames);
    let live: Vec<Value> =
        frames.iter().filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data).unwrap()).collect();
    let types = types_of(&live);
    assert_eq!(types[..3], ["request.query", "run.start", "plan.update"], "no chat.start for a known chat");
    assert_eq!(types.last().unwrap(), "run.complete");
    let plan = &live[2];
    assert_eq!(plan["planId"], "plan_chat_001");
    let statuses: Vec<&str> = plan["plan"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["init", "init"]);
    let seqs: Vec<u64> = live.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=live.len() as u64).collect::<Vec<_>>(), "live seq has no gap around plan.update");

    // The seeded exchange went to the model, and the new run is replayable after the seeded one.
    let messages = upstream_messages(&gw, 0);
    let texts: Vec<&str> = messages.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(texts.contains(&"make a plan") && texts.contains(&"Planned."), "{messages:?}");
    let events = events_of(&replay(&gw, chat_id).await);
    assert_gapless(&events);
    assert_eq!(of_type(&events, "run.start").len(), 2);
    assert_eq!(of_type(&events, "content.snapshot").last().unwrap()["text"], "Continuing.");
}

// -- 6. concurrent runs of one chat --------------------------------------------------------------

/// Two queries into one chat at once, with `agw.runs.chat-concurrency=queue` (the default,
/// `reject`, answers the second with 409 — tests/lifecycle.rs): the second run waits for the
/// first, and both are recorded whole, one after the other.
#[tokio::test]
async fn concurrent_queries_of_one_chat_queue_and_are_both_recorded_whole() {
    let gw = Gateway::start(&[oneshot_agent("a", true, 5000)], &[("AGW_RUNS_CHAT_CONCURRENCY", "queue")]).await;
    let pieces = |tag: &str| -> Vec<String> { (0..8).map(|i| format!("{tag}{i} ")).collect() };
    for tag in ["alpha", "beta"] {
        let reasoning = pieces(&format!("{tag}-think"));
        let content = pieces(tag);
        let r: Vec<&str> = reasoning.iter().map(String::as_str).collect();
        let c: Vec<&str> = content.iter().map(String::as_str).collect();
        gw.fixture.on_message(tag, Transcript::openai_reasoning_text(&r, &c).with_chunk_delay_ms(25));
    }
    let chat_id = agw_protocol::ids::new_chat_id();
    let alpha = json!({"agentKey": "a", "message": "alpha question", "chatId": chat_id});
    let beta = json!({"agentKey": "a", "message": "beta question", "chatId": chat_id});
    let (a, b) = tokio::join!(gw.post_query(&alpha), gw.post_query(&beta));
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let (a, b) = tokio::join!(read_stream(a), read_stream(b));
    assert_completed(&a);
    assert_completed(&b);

    // Queued: the later run started (request.query) after the earlier one ended.
    assert_eq!(gw.fixture.requests().len(), 2);
    let (earlier, later) =
        if a.events()[0]["timestamp"].as_i64() <= b.events()[0]["timestamp"].as_i64() { (&a, &b) } else { (&b, &a) };
    assert!(
        later.events()[0]["timestamp"].as_i64() >= earlier.last()["timestamp"].as_i64(),
        "the runs did not overlap"
    );
    let chat_starts = a.of_type("chat.start").len() + b.of_type("chat.start").len();
    assert_eq!(chat_starts, 1, "exactly one of two concurrent first queries starts the chat");

    let lines = history_lines(&gw, &chat_id).await;
    for (stream, tag) in [(&a, "alpha"), (&b, "beta")] {
        let run = run_id_of(stream);
        let of_run: Vec<&Value> = lines.iter().filter(|l| l["runId"] == run.as_str()).collect();
        assert_eq!(of_run.iter().filter(|l| l["_type"] == "query").count(), 1, "{tag}: one query line");
        assert!(of_run.iter().filter(|l| l["_type"] == "step").count() >= 1, "{tag}: step lines");
        let stored: String = of_run
            .iter()
            .filter_map(|l| l["messages"].as_array())
            .flatten()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"][0]["text"].as_str())
            .collect();
        assert_eq!(stored, text_of(stream, "content.delta"), "{tag}: whole answer recorded");
        assert!(stored.starts_with(tag), "{tag}: no interleaving with the other run: {stored}");
    }
    assert_eq!(lines.len(), 4, "two query + two step lines: {lines:?}");

    let events = events_of(&replay(&gw, &chat_id).await);
    assert_gapless(&events);
    let runs: Vec<&str> = of_type(&events, "run.start").iter().map(|e| e["runId"].as_str().unwrap()).collect();
    assert_eq!(runs.len(), 2);
    assert!(runs.contains(&run_id_of(&a).as_str()) && runs.contains(&run_id_of(&b).as_str()));
    let live: Vec<&Value> = a.events().into_iter().chain(b.events()).collect();
    assert_eq!(
        concat_by(&events, &["content.snapshot"], &["contentId"], "text"),
        concat_by(live.iter().copied(), &["content.delta"], &["contentId"], "delta")
    );
    assert_eq!(of_type(&events, "chat.start").len(), 1);
}

// -- 7. memory directory unusable ---------------------------------------------------------------

#[tokio::test]
async fn unusable_memory_dir_fails_the_run_but_not_the_server() {
    if common::postgres_requested() {
        eprintln!("skipped on PostgreSQL: the store there keeps no chat directory to make unusable");
        return;
    }
    let scratch = TempDir::new("enotdir");
    let file = scratch.0.join("plain-file");
    std::fs::write(&file, "not a directory").unwrap();
    let memory = file.join("chats");
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("MEMORY_CHAT_DIR", memory.to_str().unwrap())]).await;
    gw.fixture.set_default(Transcript::openai_text(&["never"]));

    let resp = gw.post_query(&json!({"agentKey": "a", "message": "hello"})).await;
    assert_eq!(resp.status(), 200, "the query is accepted and answers as a stream");
    let stream = read_stream(resp).await;
    let last = stream.last();
    assert_eq!(last["type"], "run.error", "{:?}", stream.types());
    assert_eq!(last["error"]["code"], "internal");
    let message = last["error"]["message"].as_str().unwrap();
    assert!(message.contains("chat memory"), "the message names chat memory: {message}");
    assert_eq!(stream.of_type("run.error").len(), 1);
    assert_eq!(stream.types()[0], "request.query");
    assert!(!memory.exists() && file.is_file(), "nothing was created below a regular file");

    // Still serving.
    let resp = gw.client.get(format!("{}/healthz", gw.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let (status, body) = gw.get_json("/api/ap/agents").await;
    assert_eq!((status, body["code"].as_i64()), (200, Some(0)));
    let (status, body) = gw.get_json("/api/ap/chats").await;
    assert!(status == 200 || status == 500, "the chat list answers with an envelope: {status} {body}");
    assert_eq!(body["code"].as_i64(), Some(if status == 200 { 0 } else { 500 }), "{body}");
    let again = gw.run(&json!({"agentKey": "a", "message": "again"})).await;
    assert_eq!(again.last()["error"]["code"], "internal", "each run reports it, none hangs");
}

// -- 8. torn last line --------------------------------------------------------------------------

#[tokio::test]
async fn torn_last_line_is_skipped_and_isolated() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["one"]));
    gw.fixture.push(Transcript::openai_text(&["two"]));
    gw.fixture.push(Transcript::openai_text(&["three"]));
    let first = gw.run(&json!({"agentKey": "a", "message": "q1"})).await;
    let chat_id = chat_id_of(&first);
    let second = gw.run(&json!({"agentKey": "a", "message": "q2", "chatId": chat_id})).await;
    assert_completed(&first);
    assert_completed(&second);

    let path = history_path(&gw, &chat_id);
    let fragment =
        format!(r#"{{"_type":"step","chatId":"{chat_id}","runId":"torn-run","_stage":"oneshot","_seq":1,"mess"#);
    if gw.on_postgres() {
        // A row commits whole, so agw never tears one; but `agw migrate-chats` copies a file's
        // torn last line verbatim, as a row of its own. Readers skip it the same way.
        let literal = fragment.replace('\'', "''");
        gw.pg_query(&format!("INSERT INTO {{schema}}.history (chat_id, line) VALUES ('{chat_id}', '{literal}')"));
    } else {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(fragment.as_bytes()).unwrap();
    }

    let events = events_of(&replay(&gw, &chat_id).await);
    assert_gapless(&events);
    let texts: Vec<&str> = of_type(&events, "content.snapshot").iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["one", "two"], "earlier runs replay despite the torn line");
    assert_eq!(of_type(&events, "run.complete").len(), 2);

    let third = gw.run(&json!({"agentKey": "a", "message": "q3", "chatId": chat_id})).await;
    assert_completed(&third);
    let users: Vec<String> = upstream_messages(&gw, 2)
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, ["q1", "one", "q2", "two", "q3"], "history intact for the model");

    let events = events_of(&replay(&gw, &chat_id).await);
    assert_gapless(&events);
    let texts: Vec<&str> = of_type(&events, "content.snapshot").iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["one", "two", "three"], "the new run is replayable");
    let runs: Vec<&str> = of_type(&events, "run.start").iter().map(|e| e["runId"].as_str().unwrap()).collect();
    assert_eq!(runs, [run_id_of(&first), run_id_of(&second), run_id_of(&third)]);

    // The fragment sits alone on its own line; every other line is valid JSON.
    let lines: Vec<String> = if gw.on_postgres() {
        let rows = gw.pg_query(&format!("SELECT line FROM {{schema}}.history WHERE chat_id = '{chat_id}' ORDER BY id"));
        rows.iter().map(|row| row.get(0)).collect()
    } else {
        let (lines, tail) = history_file(&path);
        assert!(tail.is_empty(), "the file ends with a complete line");
        lines
    };
    let invalid: Vec<&String> = lines.iter().filter(|l| serde_json::from_str::<Value>(l).is_err()).collect();
    assert_eq!(invalid, [&fragment], "only the torn fragment is invalid, on a line of its own");
    assert_eq!(lines.len(), 7, "3 × (query + step) + the fragment");
    let third_run = run_id_of(&third);
    assert!(
        lines.iter().skip_while(|l| **l != fragment).skip(1).all(|l| l.contains(&third_run)),
        "the third run is appended after the fragment"
    );
}

/// A run whose client hangs up mid-stream leaves only valid lines; the chat still replays.
#[tokio::test]
async fn abandoned_run_leaves_only_valid_lines() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["done"]));
    let first = gw.run(&json!({"agentKey": "a", "message": "q1"})).await;
    let chat_id = chat_id_of(&first);
    let pieces: Vec<String> = (0..40).map(|i| format!("p{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    gw.fixture.push(Transcript::openai_text(&refs).with_chunk_delay_ms(50));
    let body = json!({"agentKey": "a", "message": "q2", "chatId": chat_id, "onDisconnect": "cancel"});
    let mut resp = gw.post_query(&body).await;
    // Read until some content arrived, then hang up.
    let mut seen = String::new();
    while !seen.contains("content.delta") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk()).await.unwrap().unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(resp);
    let request = gw.fixture.request(1).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), request.wait_outcome()).await.unwrap();
    assert_eq!(outcome, agw_testkit::StreamOutcome::ClientClosed);
    // The abandoned run's partial answer is persisted (what the client saw) or not at all —
    // either way every line is valid and the chat still replays its completed run.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = history_lines(&gw, &chat_id).await;
    assert!(lines.len() >= 2);
    let events = events_of(&replay(&gw, &chat_id).await);
    assert_gapless(&events);
    assert_eq!(of_type(&events, "content.snapshot")[0]["text"], "done");
}
