//! The recorder turns live runs into the contract's lines, and their replay matches the live
//! stream.

mod common;

use std::collections::BTreeMap;

use agw_memory::{UNRECORDED_RESULT, history_messages};
use agw_protocol::chat::ChatMessage;
use agw_protocol::delta::{ActionStartMeta, FrontendMeta, ToolStartMeta};
use agw_protocol::event::{ErrorCode, EventPayload, PlanTask, TaskStatus};
use agw_protocol::history::{HistoryLine, PendingStep, SystemSnapshot, SystemTool};
use agw_protocol::request::QueryRequest;
use agw_protocol::{AgentDelta, Event, RunErrorInfo, replay_chat};
use common::{Run, TempDir, query, store_in};
use serde_json::{Value, json};

const CHAT: &str = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
const RUN: &str = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";

fn tool(name: &str) -> ToolStartMeta {
    ToolStartMeta { tool_name: name.into(), tool_type: "function".into(), ..ToolStartMeta::default() }
}

fn tool_args(id: &str, name: &str, delta: &str) -> AgentDelta {
    AgentDelta::ToolArgs { tool_id: id.into(), meta: tool(name), delta: delta.into() }
}

fn tool_result(id: &str, result: &str) -> AgentDelta {
    AgentDelta::ToolResult { tool_id: id.into(), result: result.into() }
}

fn content(text: &str) -> AgentDelta {
    AgentDelta::Content(text.into())
}

fn reasoning(text: &str) -> AgentDelta {
    AgentDelta::Reasoning(text.into())
}

fn marker(name: &str) -> AgentDelta {
    AgentDelta::StageMarker(name.into())
}

fn steps(run: &Run) -> Vec<&agw_protocol::history::StepLine> {
    run.lines.iter().filter_map(HistoryLine::as_step).collect()
}

fn weather_system() -> SystemSnapshot {
    SystemSnapshot::new(
        Some("qwen3-max".into()),
        "你是天气助手。",
        vec![SystemTool {
            tool_type: "function".into(),
            name: "city_datetime".into(),
            description: Some("根据 city 查询当前日期和时间（实时系统时钟）".into()),
            parameters: Some(
                json!({"type":"object","properties":{"city":{"type":"string","description":"城市名称，例如 Shanghai、北京、东京"}},"additionalProperties":false}),
            ),
        }],
        None,
    )
}

/// The REACT run of `docs/contract/sse-events.md` §10.2 / `docs/contract/memory-jsonl.md` §9, on the example's clock.
fn weather_run() -> Run {
    let request = QueryRequest { agent_key: Some("weatherBot".into()), ..query("上海现在几点？") };
    let mut run = Run::new(CHAT, RUN, request.clone(), Some(weather_system()), &[]);
    run.bootstrap(1771000100000, &request, false);
    let description = Some("根据 city 查询当前日期和时间（实时系统时钟）".to_owned());
    let meta = ToolStartMeta { description, ..tool("city_datetime") };
    assert!(run.push(1771000100000, marker("react-step-1")).is_empty());
    run.push(1771000100700, reasoning("需要查询上海的实时时间。"));
    run.push(1771000100900, content("我先查询上海当前时间。"));
    run.push(
        1771000101100,
        AgentDelta::ToolArgs { tool_id: "call_1".into(), meta: meta.clone(), delta: "{\"city\":".into() },
    );
    run.push(1771000101150, AgentDelta::ToolArgs { tool_id: "call_1".into(), meta, delta: "\"Shanghai\"}".into() });
    run.push(
        1771000101160,
        AgentDelta::Usage(json!({"prompt_tokens":812,"completion_tokens":46,"total_tokens":858}).into()),
    );
    run.push(1771000101200, AgentDelta::ToolEnd { tool_id: "call_1".into() });
    run.push(
        1771000101210,
        tool_result(
            "call_1",
            r#"{"city":"Shanghai","timezone":"UTC+8","date":"2026-02-13","weekday":"星期五","lunarDate":"乙巳年腊月廿六","time":"10:15:30","iso":"2026-02-13T10:15:30.123456+08:00","source":"system-clock"}"#,
        ),
    );
    run.flush_times(&[1771000101215, 1771000101216]);
    let first = run.push(1771000101300, marker("react-step-2"));
    assert_eq!(first.len(), 2, "query line and step 1 are written together, when step 2 starts");
    run.push(1771000101900, reasoning("已拿到时间，直接回答。"));
    run.push(1771000102100, content("上海现在是 2026-02-13（星期五）"));
    run.push(1771000102160, content(" 10:15:30。"));
    run.push(
        1771000102200,
        AgentDelta::Usage(json!({"prompt_tokens":1020,"completion_tokens":38,"total_tokens":1058}).into()),
    );
    run.flush_times(&[1771000102305, 1771000102306]);
    assert_eq!(run.complete(1771000102300).len(), 1);
    run
}

/// The three lines of the worked example, with agw's ids (`_reasoningId` etc. = live ids) and
/// the run's totals on its last line (`_runUsage`, agw).
fn expected_weather_lines(msg_ids: [&str; 2]) -> Vec<String> {
    let r = |n: u32| format!("{RUN}_r_{n}");
    let c = |n: u32| format!("{RUN}_c_{n}");
    vec![
        format!(
            r#"{{"_type":"query","chatId":"{CHAT}","runId":"{RUN}","updatedAt":1771000101216,"query":{{"requestId":"{RUN}","chatId":"{CHAT}","agentKey":"weatherBot","role":"user","message":"上海现在几点？","references":null,"params":null,"scene":null,"stream":null}}}}"#
        ),
        format!(
            r#"{{"_type":"step","chatId":"{CHAT}","runId":"{RUN}","_stage":"react","_seq":1,"updatedAt":1771000101216,"system":{{"model":"qwen3-max","messages":[{{"role":"system","content":"你是天气助手。"}}],"tools":[{{"type":"function","name":"city_datetime","description":"根据 city 查询当前日期和时间（实时系统时钟）","parameters":{{"type":"object","properties":{{"city":{{"type":"string","description":"城市名称，例如 Shanghai、北京、东京"}}}},"additionalProperties":false}}}}],"stream":true}},"messages":[{{"role":"user","content":[{{"type":"text","text":"上海现在几点？"}}],"ts":1771000101215}},{{"role":"assistant","reasoning_content":[{{"type":"text","text":"需要查询上海的实时时间。"}}],"ts":1771000100700,"_reasoningId":"{r1}","_msgId":"{m1}","_timing":400}},{{"role":"assistant","content":[{{"type":"text","text":"我先查询上海当前时间。"}}],"ts":1771000100900,"_contentId":"{c1}","_msgId":"{m1}","_timing":200}},{{"role":"assistant","tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"city_datetime","arguments":"{{\"city\":\"Shanghai\"}}"}}}}],"ts":1771000101210,"_msgId":"{m1}","_toolId":"call_1","_timing":110,"_usage":{{"prompt_tokens":812,"completion_tokens":46,"total_tokens":858}}}},{{"role":"tool","content":[{{"type":"text","text":"{{\"city\":\"Shanghai\",\"timezone\":\"UTC+8\",\"date\":\"2026-02-13\",\"weekday\":\"星期五\",\"lunarDate\":\"乙巳年腊月廿六\",\"time\":\"10:15:30\",\"iso\":\"2026-02-13T10:15:30.123456+08:00\",\"source\":\"system-clock\"}}"}}],"ts":1771000101210,"name":"city_datetime","tool_call_id":"call_1","_toolId":"call_1","_timing":110}}]}}"#,
            r1 = r(1),
            c1 = c(1),
            m1 = msg_ids[0]
        ),
        format!(
            r#"{{"_type":"step","chatId":"{CHAT}","runId":"{RUN}","_stage":"react","_seq":2,"updatedAt":1771000102306,"messages":[{{"role":"assistant","reasoning_content":[{{"type":"text","text":"已拿到时间，直接回答。"}}],"ts":1771000101900,"_reasoningId":"{r2}","_msgId":"{m2}","_timing":405}},{{"role":"assistant","content":[{{"type":"text","text":"上海现在是 2026-02-13（星期五） 10:15:30。"}}],"ts":1771000102100,"_contentId":"{c2}","_msgId":"{m2}","_timing":205,"_usage":{{"prompt_tokens":1020,"completion_tokens":38,"total_tokens":1058}}}}],"_runUsage":{{"inputTokens":1832,"outputTokens":84,"totalTokens":1916,"calls":2,"byModel":[{{"provider":"","model":"","calls":2,"inputTokens":1832,"outputTokens":84}}]}}}}"#,
            r2 = r(2),
            c2 = c(2),
            m2 = msg_ids[1]
        ),
    ]
}

#[test]
fn worked_example_is_written_byte_for_byte_with_live_ids() {
    let run = weather_run();
    let steps = steps(&run);
    let m1 = steps[0].messages[1].msg_id.clone().expect("msg id");
    let m2 = steps[1].messages[0].msg_id.clone().expect("msg id");
    assert_ne!(m1, m2, "every step starts a fresh msgId");
    assert!(m1.starts_with("m_") && m1.len() == 10, "{m1}");
    assert_eq!(run.jsonl(), expected_weather_lines([&m1, &m2]));
}

#[test]
fn written_lines_go_to_disk_and_back_unchanged() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    let run = weather_run();
    store.append(CHAT, &run.lines[..2]).expect("append step 1");
    store.append_final(CHAT, &run.lines[2..]).expect("append step 2");
    let text = std::fs::read_to_string(dir.path().join(format!("{CHAT}.json"))).expect("file");
    assert_eq!(text, run.jsonl().join("\n") + "\n");
    assert_eq!(store.read_lines(CHAT).expect("read"), run.lines);

    // §9: what the next run of this chat sends to the model
    let history = store.history_for_model(CHAT).expect("history");
    let as_json: Vec<Value> = history.iter().map(|m| serde_json::to_value(m).expect("json")).collect();
    assert_eq!(as_json.len(), 5);
    assert_eq!(as_json[0], json!({"role":"user","content":"上海现在几点？"}));
    assert_eq!(as_json[1], json!({"role":"assistant","content":"我先查询上海当前时间。"}));
    let ChatMessage::Assistant { content, tool_calls } = &history[2] else { panic!("tool call message") };
    assert_eq!(
        (content.as_str(), tool_calls[0].id.as_str(), tool_calls[0].arguments.as_str()),
        ("", "call_1", r#"{"city":"Shanghai"}"#)
    );
    let ChatMessage::Tool { tool_call_id, name, .. } = &history[3] else { panic!("tool message") };
    assert_eq!((tool_call_id.as_str(), name.as_str()), ("call_1", "city_datetime"));
    assert_eq!(as_json[4], json!({"role":"assistant","content":"上海现在是 2026-02-13（星期五） 10:15:30。"}));
}

/// Concatenated live deltas per block id, in first-seen order of the ids.
fn live_texts(events: &[Event]) -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    for event in events {
        let (id, delta) = match &event.payload {
            EventPayload::ReasoningDelta(e) => (&e.reasoning_id, &e.delta),
            EventPayload::ContentDelta(e) => (&e.content_id, &e.delta),
            EventPayload::ToolArgs(e) => (&e.tool_id, &e.delta),
            EventPayload::ActionArgs(e) => (&e.action_id, &e.delta),
            EventPayload::ToolResult(e) => (&e.tool_id, &e.result),
            _ => continue,
        };
        let key = match &event.payload {
            EventPayload::ToolResult(_) => format!("result:{id}"),
            _ => id.clone(),
        };
        texts.entry(key).or_insert_with(String::new).push_str(delta);
    }
    texts
}

fn replay_texts(events: &[Event]) -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    for event in events {
        let (key, text) = match &event.payload {
            EventPayload::ReasoningSnapshot(e) => (e.reasoning_id.clone(), e.text.clone()),
            EventPayload::ContentSnapshot(e) => (e.content_id.clone(), e.text.clone()),
            EventPayload::ToolSnapshot(e) => (e.tool_id.clone(), e.arguments.clone()),
            EventPayload::ActionSnapshot(e) => (e.action_id.clone(), e.arguments.clone()),
            EventPayload::ToolResult(e) => (format!("result:{}", e.tool_id), e.result.clone()),
            _ => continue,
        };
        assert!(texts.insert(key.clone(), text).is_none(), "id {key} replayed twice");
    }
    texts
}

/// Block ids in the order their blocks appear.
fn live_block_order(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ReasoningStart(s) => Some(s.reasoning_id.clone()),
            EventPayload::ContentStart(s) => Some(s.content_id.clone()),
            EventPayload::ToolStart(s) => Some(s.tool_id.clone()),
            _ => None,
        })
        .collect()
}

fn replay_block_order(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ReasoningSnapshot(s) => Some(s.reasoning_id.clone()),
            EventPayload::ContentSnapshot(s) => Some(s.content_id.clone()),
            EventPayload::ToolSnapshot(s) => Some(s.tool_id.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn replay_of_a_recorded_run_equals_the_live_stream() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    let request = query("find the file");
    let mut run = Run::new(CHAT, RUN, request.clone(), None, &[]);
    run.bootstrap(10_000, &request, true);
    run.push(10_000, marker("react-step-1"));
    run.push(10_100, reasoning("Let me "));
    run.push(10_110, reasoning("\n\n"));
    run.push(10_120, reasoning("look."));
    run.push(10_200, content("Checking"));
    run.push(10_210, content(" "));
    run.push(10_220, content("…"));
    run.push(10_300, tool_args("call_ls", "_bash_", ""));
    run.push(10_310, tool_args("call_ls", "_bash_", "{\"command\":"));
    run.push(10_320, tool_args("call_ls", "_bash_", " \"ls\"}"));
    run.push(10_330, AgentDelta::Usage(json!({"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":3}}).into()));
    run.push(10_400, AgentDelta::ToolEnd { tool_id: "call_ls".into() });
    run.push(10_500, tool_result("call_ls", "file.txt\n"));
    let first = run.push(10_600, marker("react-step-2"));
    store.append(CHAT, &first).expect("append");
    run.push(10_700, reasoning("Found it."));
    run.push(10_800, content("found "));
    run.push(10_810, content("file.txt"));
    run.push(10_820, content("\n"));
    run.push(10_900, AgentDelta::Usage(json!({"prompt_tokens":30,"completion_tokens":6,"total_tokens":36}).into()));
    let last = run.complete(11_000);
    store.append_final(CHAT, &last).expect("append");

    let lines = store.read_lines(CHAT).expect("read");
    let replay = replay_chat(CHAT, Some("chat"), &lines, 99_999);
    assert_eq!(live_texts(&run.events), replay_texts(&replay));
    assert_eq!(live_block_order(&run.events), replay_block_order(&replay));
    assert!(replay.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1), "replay seq is 1..N");
    // the whitespace deltas are part of the stored text
    assert_eq!(replay_texts(&replay)[&format!("{RUN}_r_1")], "Let me \n\nlook.");
    let recorded = steps(&run);
    let usage_holder = recorded[0].messages.iter().rev().find(|m| m.role == "assistant").expect("assistant");
    assert_eq!(
        usage_holder.usage.as_ref().and_then(|u| u.pointer("/completion_tokens_details/reasoning_tokens")),
        Some(&json!(3))
    );
    // timestamps of replayed blocks are the live block start times
    let live_start = run.events.iter().find(|e| e.type_name() == "content.start").map(|e| e.timestamp);
    let replay_start = replay.iter().find(|e| e.type_name() == "content.snapshot").map(|e| e.timestamp);
    assert_eq!(live_start, replay_start);
}

#[test]
fn action_whitelist_writes_action_ids_and_history_drops_reasoning() {
    // ChatWindowMemoryStoreTest 1, with agw's ids: `_actionId` is the live action id.
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &["Switch_Frontend_Theme"]);
    let request = QueryRequest { request_id: Some("req".into()), ..query("切换主题") };
    let system = SystemSnapshot::new(Some("gpt-5.2".into()), "prompt", Vec::new(), Some(true));
    let mut run = Run::new(CHAT, "run_001", request, Some(system), &["Switch_Frontend_Theme"]);
    run.push(100, marker("oneshot"));
    run.push(110, reasoning("用户要深色"));
    let meta = ActionStartMeta { action_name: "switch_frontend_theme".into(), description: None };
    run.push(
        120,
        AgentDelta::ActionArgs { action_id: "call_tool_1".into(), meta, delta: r#"{"theme":"dark"}"#.into() },
    );
    run.push(130, AgentDelta::ActionEnd { action_id: "call_tool_1".into() });
    run.push(131, AgentDelta::ActionResult { action_id: "call_tool_1".into(), result: json!("OK") });
    run.push(140, content("已切换"));
    store.append_final(CHAT, &run.complete(150)).expect("append");

    let lines = store.read_lines(CHAT).expect("read");
    assert_eq!(lines.len(), 2);
    let HistoryLine::Query(q) = &lines[0] else { panic!("query first") };
    assert_eq!((q.run_id.as_str(), q.query.message.as_deref()), ("run_001", Some("切换主题")));
    assert_eq!(
        (q.query.request_id.as_deref(), q.query.chat_id.as_deref(), q.query.role.as_deref()),
        (Some("req"), Some(CHAT), Some("user"))
    );
    let step = lines[1].as_step().expect("step");
    assert_eq!((step.stage.as_str(), step.seq), ("oneshot", 1));
    assert_eq!(step.system.as_ref().and_then(|s| s.model.as_deref()), Some("gpt-5.2"));
    let m = &step.messages;
    assert_eq!(m.len(), 5);
    assert!(m[1].reasoning().is_some() && m[1].content.is_none());
    assert_eq!(m[1].reasoning_id.as_deref(), Some("run_001_r_1"));
    assert_eq!(m[2].calls().len(), 1);
    assert_eq!((m[2].action_id.as_deref(), m[2].tool_id.as_deref()), (Some("call_tool_1"), None));
    assert_eq!((m[3].role.as_str(), m[3].action_id.as_deref(), m[3].text()), ("tool", Some("call_tool_1"), "OK"));
    assert_eq!(m[4].text(), "已切换");

    let history = store.history_for_model(CHAT).expect("history");
    let roles: Vec<&str> = history
        .iter()
        .map(|m| match m {
            ChatMessage::User { .. } => "user",
            ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty() => "assistant(tool call)",
            ChatMessage::Assistant { .. } => "assistant",
            ChatMessage::Tool { .. } => "tool",
            ChatMessage::System { .. } => "system",
        })
        .collect();
    assert_eq!(roles, ["user", "assistant(tool call)", "tool", "assistant"]);

    // whitelisted → replayed as an action, like it streamed
    let replay = replay_chat(CHAT, None, &lines, 1);
    let types: Vec<_> = replay.iter().map(Event::type_name).collect();
    assert!(types.contains(&"action.snapshot") && types.contains(&"action.result"), "{types:?}");
}

#[test]
fn actions_are_persisted_as_tools_by_default() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    let meta = ActionStartMeta { action_name: "switch_theme".into(), description: None };
    run.push(1, AgentDelta::ActionArgs { action_id: "a1".into(), meta, delta: "{}".into() });
    run.push(2, AgentDelta::ActionResult { action_id: "a1".into(), result: json!("OK") });
    run.complete(3);
    let step = steps(&run)[0];
    assert_eq!((step.messages[1].tool_id.as_deref(), step.messages[1].action_id.as_deref()), (Some("a1"), None));
    assert_eq!(step.messages[1].calls()[0].call_type, "function");
    assert_eq!(step.messages[2].tool_id.as_deref(), Some("a1"));
}

#[test]
fn plan_stages_merge_and_plans_attach_to_their_step() {
    let mut run = Run::new(CHAT, "run", query("plan it"), None, &[]);
    let task = |id: &str, status| PlanTask { task_id: id.into(), description: format!("do {id}"), status };
    // a plan restored at run start, before any marker: its implicit step has no message
    run.push(1, AgentDelta::PlanUpdate { plan_id: "plan_old".into(), plan: vec![task("t0", TaskStatus::Init)] });
    assert!(run.push(2, marker("plan-draft")).is_empty());
    run.push(3, content("drafting"));
    assert!(run.push(4, marker("plan-generate")).is_empty(), "draft and generate are one step");
    run.push(5, tool_args("call_p", "_plan_add_tasks_", r#"{"tasks":[]}"#));
    run.push(6, tool_result("call_p", "ok"));
    run.push(6, AgentDelta::PlanUpdate { plan_id: "plan_1".into(), plan: vec![task("t1", TaskStatus::Init)] });
    assert_eq!(run.push(7, marker("execute-task-1")).len(), 2);
    run.push(8, AgentDelta::TaskStart { task_id: "t1".into(), description: None });
    run.push(9, content("working"));
    run.push(10, AgentDelta::PlanUpdate { plan_id: "plan_1".into(), plan: vec![task("t1", TaskStatus::Completed)] });
    run.push(11, AgentDelta::TaskComplete { task_id: "t1".into() });
    assert_eq!(run.push(12, marker("summary")).len(), 1);
    run.push(13, content("summary text"));
    run.complete(14);

    let steps = steps(&run);
    let shape: Vec<_> =
        steps.iter().map(|s| (s.stage.as_str(), s.seq, s.plan.as_ref().map(|p| p.tasks[0].status))).collect();
    assert_eq!(
        shape,
        [("plan", 1, Some(TaskStatus::Init)), ("execute", 2, Some(TaskStatus::Completed)), ("summary", 3, None)]
    );
    assert_eq!(steps[0].plan.as_ref().map(|p| p.plan_id.as_str()), Some("plan_1"), "last update of the step wins");
    assert_eq!(steps[0].messages[1].text(), "drafting");
    assert!(steps.iter().all(|s| s.task_id.is_none()), "taskId is never written");
    assert!(steps[1..].iter().all(|s| s.system.is_none()));
}

#[test]
fn msg_ids_follow_model_responses() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    run.push(1, marker("react-step-1"));
    run.push(2, content("a"));
    run.push(3, tool_args("c1", "t", "{}"));
    run.push(4, tool_args("c2", "t", "{}"));
    run.push(5, tool_result("c1", "r1"));
    run.push(6, tool_result("c2", "r2"));
    // a turn with only a tool call reuses the previous msgId (the reference's lazy rule)
    run.push(7, tool_args("c3", "t", "{}"));
    run.push(8, tool_result("c3", "r3"));
    run.push(9, content("b"));
    run.complete(10);
    let messages = &steps(&run)[0].messages;
    let summary: Vec<String> = messages[1..]
        .iter()
        .map(|m| {
            let what = m.calls().first().map_or_else(|| m.text().to_owned(), |c| format!("call {}", c.id));
            format!("{} {what} {}", m.role, m.msg_id.as_deref().unwrap_or("-"))
        })
        .collect();
    let first = messages[1].msg_id.clone().expect("msg id");
    let last = messages.last().and_then(|m| m.msg_id.clone()).expect("msg id");
    assert_ne!(first, last);
    assert_eq!(
        summary,
        [
            format!("assistant a {first}"),
            format!("assistant call c1 {first}"),
            "tool r1 -".to_owned(),
            format!("assistant call c2 {first}"),
            "tool r2 -".to_owned(),
            format!("assistant call c3 {first}"),
            "tool r3 -".to_owned(),
            format!("assistant b {last}"),
        ]
    );
}

#[test]
fn calls_without_result_are_written_at_flush_and_answered_in_the_window() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    run.push(1, marker("execute-task-1"));
    run.push(2, tool_args("c1", "t", r#"{"a":1}"#));
    run.push(3, tool_args("c2", "t", r#"{"b":2}"#));
    run.push(4, tool_result("c1", "done"));
    run.complete(10);
    let messages = &steps(&run)[0].messages;
    let calls: Vec<_> = messages.iter().filter_map(|m| m.calls().first().map(|c| (c.id.clone(), m.ts))).collect();
    assert_eq!(calls, [("c1".to_owned(), Some(4)), ("c2".to_owned(), Some(10))]);
    let history = history_messages(&run.lines, 5);
    let ChatMessage::Tool { tool_call_id, content, .. } = history.last().expect("messages") else { panic!("tool") };
    assert_eq!((tool_call_id.as_str(), content.as_str()), ("c2", UNRECORDED_RESULT));
}

#[test]
fn frontend_tools_are_stored_as_function_calls() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    let meta = ToolStartMeta {
        tool_name: "confirm_dialog".into(),
        tool_type: "html".into(),
        frontend: Some(FrontendMeta { tool_key: "confirm_dialog".into(), tool_timeout: 1000 }),
        ..ToolStartMeta::default()
    };
    run.push(1, AgentDelta::ToolArgs { tool_id: "f1".into(), meta, delta: "{}".into() });
    run.push(2, AgentDelta::ToolEnd { tool_id: "f1".into() });
    run.push(3, tool_result("f1", r#"{"confirmed":true}"#));
    run.complete(4);
    let step = steps(&run)[0];
    assert_eq!(step.stage, "oneshot", "deltas before any marker open an implicit oneshot step");
    assert_eq!(step.messages[1].calls()[0].call_type, "function");
}

#[test]
fn error_texts_before_run_error_are_recorded() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    run.push(1, marker("oneshot"));
    run.push(2, content("partial"));
    run.push(3, AgentDelta::Content(" The model provider failed.".into()));
    let lines = run.fail(4, RunErrorInfo::new(ErrorCode::ProviderError, "boom", true));
    assert_eq!(lines.len(), 2);
    assert_eq!(steps(&run)[0].messages[1].text(), "partial The model provider failed.");
    assert!(run.recorder.finish(&[]).is_empty(), "finish is idempotent");
}

#[test]
fn a_run_without_output_writes_nothing() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    run.push(1, marker("oneshot"));
    run.push(2, AgentDelta::Usage(json!({"total_tokens":1}).into()));
    assert!(run.complete(3).is_empty());
    assert_eq!(run.recorder.steps_written(), 0);
}

#[test]
fn the_first_written_step_carries_the_user_message_even_after_an_empty_step() {
    let mut run = Run::new(CHAT, "run", query("hello"), None, &[]);
    run.push(1, marker("react-step-1"));
    run.push(2, marker("react-step-2"));
    run.push(3, content("hi"));
    let lines = run.complete(4);
    assert_eq!(lines.len(), 2);
    let step = lines[1].as_step().expect("step");
    assert_eq!(step.seq, 1);
    assert_eq!(step.messages[0].text(), "hello");
    assert_eq!(step.messages[0].ts, Some(4), "user ts = flush time");
}

fn steer(id: &str, message: &str, request_id: Option<&str>) -> AgentDelta {
    AgentDelta::Steer { steer_id: id.into(), message: message.into(), request_id: request_id.map(str::to_owned) }
}

#[test]
fn a_steer_is_a_user_message_at_its_position_in_the_step() {
    let mut run = Run::new(CHAT, RUN, query("weather?"), None, &[]);
    run.push(100, marker("react-step-1"));
    run.push(200, content("Looking it up."));
    run.push(300, tool_args("call_1", "w", "{}"));
    run.push(400, tool_result("call_1", "20C"));
    run.flush_times(&[500, 500]);
    run.push(500, marker("react-step-2"));
    run.push(600, steer("steer_1", "in Fahrenheit, please", Some("req_7")));
    run.push(700, content("68F"));
    run.complete(900);

    let lines = run.jsonl();
    let msg_id = |i: usize| steps(&run)[i].messages.iter().rev().find_map(|m| m.msg_id.clone()).expect("msg id");
    let (m1, m2) = (msg_id(0), msg_id(1));
    assert_ne!(m1, m2, "the response after a steer is a new model response");
    assert_eq!(
        lines[2],
        format!(
            r#"{{"_type":"step","chatId":"{CHAT}","runId":"{RUN}","_stage":"react","_seq":2,"updatedAt":900,"messages":[{{"role":"user","content":[{{"type":"text","text":"in Fahrenheit, please"}}],"ts":600,"_steerId":"steer_1","_requestId":"req_7"}},{{"role":"assistant","content":[{{"type":"text","text":"68F"}}],"ts":700,"_contentId":"{RUN}_c_2","_msgId":"{m2}","_timing":200}}]}}"#
        )
    );

    // The next run's model window: the steer is a user message, in order.
    let window = history_messages(&run.lines, 5);
    assert_eq!(
        window,
        [
            ChatMessage::user("weather?"),
            ChatMessage::Assistant { content: "Looking it up.".into(), tool_calls: vec![] },
            window[2].clone(),
            ChatMessage::Tool { tool_call_id: "call_1".into(), name: "w".into(), content: "20C".into() },
            ChatMessage::user("in Fahrenheit, please"),
            ChatMessage::Assistant { content: "68F".into(), tool_calls: vec![] },
        ]
    );

    // The replay shows the live request.steer (same ids, fields and time) at its position.
    let live: Vec<Value> = run
        .events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::RequestSteer(_)))
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    let replay = replay_chat(CHAT, Some("chat"), &run.lines, 0);
    let replayed: Vec<Value> = replay
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::RequestSteer(_)))
        .map(|e| {
            let mut v = serde_json::to_value(e).expect("json");
            v["seq"] = live[0]["seq"].clone();
            v
        })
        .collect();
    assert_eq!(replayed, live);
    let order: Vec<&str> = replay.iter().map(Event::type_name).collect();
    assert_eq!(
        order,
        [
            "request.query",
            "chat.start",
            "run.start",
            "content.snapshot",
            "tool.snapshot",
            "tool.result",
            "request.steer",
            "content.snapshot",
            "run.complete"
        ]
    );
}

#[test]
fn a_steer_in_a_task_writes_unanswered_calls_before_it_and_is_recorded_from_events_alone() {
    let mut run = Run::new(CHAT, "run", query("q"), None, &[]);
    run.push(1, marker("execute-task-1"));
    run.push(2, content("working"));
    run.push(3, tool_args("c1", "t", r#"{"a":1}"#));
    run.push(4, tool_args("c2", "t", r#"{"b":2}"#));
    run.push(5, tool_result("c1", "done"));
    // The HTTP sink feeds the recorder only the events of a steer (the delta is not needed).
    let mut events = Vec::new();
    let steer_event = agw_protocol::event::RequestSteer {
        request_id: None,
        chat_id: CHAT.into(),
        run_id: "run".into(),
        steer_id: "s1".into(),
        message: "skip b".into(),
        role: "user".into(),
        task_id: Some("t1".into()),
    };
    events.push(Event::new(99, 6, steer_event));
    run.recorder.observe_events(&events);
    run.push(7, content("ok"));
    run.complete(10);
    let summary: Vec<String> = steps(&run)[0]
        .messages
        .iter()
        .map(|m| {
            let what = m.calls().first().map_or_else(|| m.text().to_owned(), |c| format!("call {}", c.id));
            format!("{} {what} {}", m.role, m.ts.unwrap_or_default())
        })
        .collect();
    assert_eq!(
        summary,
        [
            "user q 10",
            "assistant working 2",
            "assistant call c1 5",
            "tool done 5",
            "assistant call c2 6",
            "user skip b 6",
            "assistant ok 7"
        ]
    );
    assert_eq!(steps(&run)[0].messages[5].steer_id(), Some("s1"));
    let history = history_messages(&run.lines, 5);
    let kinds: Vec<String> = history
        .iter()
        .map(|m| match m {
            ChatMessage::User { content, .. } => format!("user:{content}"),
            ChatMessage::Assistant { tool_calls, content } => {
                tool_calls.first().map_or_else(|| format!("assistant:{content}"), |c| format!("call:{}", c.id))
            }
            ChatMessage::Tool { tool_call_id, content, .. } => format!("result:{tool_call_id}:{content}"),
            ChatMessage::System { content } => format!("system:{content}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user:q".to_owned(),
            "assistant:working".to_owned(),
            "call:c1".to_owned(),
            "result:c1:done".to_owned(),
            "call:c2".to_owned(),
            format!("result:c2:{UNRECORDED_RESULT}"),
            "user:skip b".to_owned(),
            "assistant:ok".to_owned(),
        ]
    );
}

/// A batch of a backend call and a frontend call; the run waits for the frontend submit.
fn waiting_batch(run: &mut Run) {
    run.push(1, marker("react-step-1"));
    run.push(2, content("checking"));
    run.push(3, tool_args("b1", "lookup", r#"{"q":1}"#));
    let meta = ToolStartMeta {
        tool_name: "confirm_dialog".into(),
        tool_type: "html".into(),
        frontend: Some(FrontendMeta { tool_key: "confirm_dialog".into(), tool_timeout: 1000 }),
        ..ToolStartMeta::default()
    };
    run.push(4, AgentDelta::ToolArgs { tool_id: "f1".into(), meta, delta: "{}".into() });
    run.push(5, AgentDelta::ToolEnd { tool_id: "b1".into() });
    run.push(6, AgentDelta::ToolEnd { tool_id: "f1".into() });
}

fn after_the_wait(run: &mut Run) {
    run.push(20, tool_result("b1", "found"));
    run.push(21, tool_result("f1", r#"{"confirmed":true}"#));
    run.push(22, marker("react-step-2"));
    run.push(23, content("done"));
    run.complete(24);
}

#[test]
fn a_run_continued_from_a_checkpoint_writes_what_an_uninterrupted_run_writes() {
    let mut whole = Run::new(CHAT, RUN, query("q"), Some(weather_system()), &[]);
    waiting_batch(&mut whole);
    after_the_wait(&mut whole);

    let mut split = Run::new(CHAT, RUN, query("q"), Some(weather_system()), &[]);
    waiting_batch(&mut split);
    let step = split.recorder.checkpoint();
    assert!(split.lines.is_empty(), "nothing is written at the wait: {:?}", split.jsonl());
    let (_, system) = split.recorder.query_and_system();
    assert!(system.is_some(), "the first step line is not written yet, so the snapshot is kept");
    // Through JSON, as the awaiting line stores it.
    let step: PendingStep = serde_json::from_value(serde_json::to_value(&step).expect("json")).expect("back");
    assert_eq!(step.calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["b1", "f1"]);
    split.resume_recorder(split.recorder.steps_written(), step);
    after_the_wait(&mut split);

    // `_msgId`s are random per recorder; the first one of the step is kept across the wait.
    let msg_ids = |run: &Run| -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        run.jsonl()
            .iter()
            .map(|line| {
                let mut value: Value = serde_json::from_str(line).expect("json");
                for message in value["messages"].as_array_mut().into_iter().flatten() {
                    if let Some(id) = message.get("_msgId").and_then(Value::as_str).map(str::to_owned) {
                        let n = ids.iter().position(|seen| *seen == id).unwrap_or_else(|| {
                            ids.push(id);
                            ids.len() - 1
                        });
                        message["_msgId"] = json!(format!("m{n}"));
                    }
                }
                value.to_string()
            })
            .collect()
    };
    assert_eq!(msg_ids(&split), msg_ids(&whole));
    let history = history_messages(&split.lines, 5);
    assert!(history.iter().all(|m| !matches!(m, ChatMessage::Tool { content, .. } if content == UNRECORDED_RESULT)));
}

fn compaction(level: agw_protocol::event::CompactLevel, summary: Option<&str>) -> AgentDelta {
    AgentDelta::Compact(agw_protocol::event::ContextCompact {
        run_id: String::new(),
        level,
        tokens_before: 900,
        tokens_after: 300,
        budget: 1000,
        duration_ms: 4,
        pruned_results: 0,
        replaced_messages: 2,
        summary: summary.map(str::to_owned),
        through_run_id: summary.map(|_| "run_a".to_owned()),
        reason: None,
    })
}

/// One finished ONESHOT run answering `answer`.
fn plain_run(run_id: &str, message: &str, answer: &str) -> Vec<HistoryLine> {
    let mut run = Run::new(CHAT, run_id, query(message), None, &[]);
    run.push(100, marker("oneshot"));
    run.push(200, content(answer));
    run.complete(300);
    run.lines
}

#[test]
fn a_summary_is_kept_with_its_step_becomes_the_checkpoint_and_the_next_window_starts_from_it() {
    use agw_protocol::event::CompactLevel;
    let mut lines = plain_run("run_a", "first", "one");
    lines.extend(plain_run("run_b", "second", "two"));

    let mut run = Run::new(CHAT, "run_c", query("third"), None, &[]);
    run.push(400, marker("react-step-1"));
    run.push(410, compaction(CompactLevel::Prune, None));
    assert!(run.recorder.take_pending().is_empty(), "a prune is no checkpoint");
    run.push(420, compaction(CompactLevel::Summary, Some("They said one.")));
    let pending = run.recorder.take_pending();
    let [HistoryLine::Checkpoint(checkpoint)] = pending.as_slice() else { panic!("one checkpoint: {pending:?}") };
    assert_eq!((checkpoint.through_run_id.as_str(), checkpoint.summary.as_str()), ("run_a", "They said one."));
    assert_eq!((checkpoint.run_id.as_str(), checkpoint.updated_at), ("run_c", 420));
    run.push(500, content("three"));
    run.complete(600);
    let step = steps(&run)[0].clone();
    // After the run's user message, before its answer.
    assert_eq!(step.compactions.iter().map(|c| c.at).collect::<Vec<_>>(), [1, 1]);
    lines.extend(pending);
    lines.extend(run.lines.iter().cloned());

    let window = agw_memory::window(&lines, 5);
    assert_eq!(
        window.messages,
        [
            ChatMessage::user(agw_protocol::chat::SUMMARY_REQUEST),
            ChatMessage::Assistant { content: "They said one.".into(), tool_calls: vec![] },
            ChatMessage::user("second"),
            ChatMessage::Assistant { content: "two".into(), tool_calls: vec![] },
            ChatMessage::user("third"),
            ChatMessage::Assistant { content: "three".into(), tool_calls: vec![] },
        ]
    );
    let runs: Vec<(&str, usize)> = window.runs.iter().map(|r| (r.run_id.as_str(), r.start)).collect();
    assert_eq!(runs, [("run_a", 0), ("run_b", 2), ("run_c", 4)]);
    // k counts the runs after the checkpoint; the summary always comes first.
    assert_eq!(agw_memory::window(&lines, 1).messages.len(), 4);

    // The replay shows both compactions where they happened, and the full history.
    let replay = replay_chat(CHAT, Some("chat"), &lines, 0);
    let order: Vec<&str> = replay.iter().map(Event::type_name).skip_while(|t| *t != "run.start").collect();
    assert_eq!(order[..3], ["run.start", "content.snapshot", "run.complete"], "run_a is still there");
    let compacts: Vec<&Event> = replay.iter().filter(|e| e.type_name() == "context.compact").collect();
    assert_eq!(compacts.len(), 2);
    let live: Vec<&Event> = run.events.iter().filter(|e| e.type_name() == "context.compact").collect();
    assert_eq!(
        compacts.iter().map(|e| &e.payload).collect::<Vec<_>>(),
        live.iter().map(|e| &e.payload).collect::<Vec<_>>()
    );
}

#[test]
fn the_runs_usage_is_kept_on_its_last_step_and_replayed_on_run_complete() {
    let mut run = Run::new(CHAT, RUN, query("q"), None, &[]);
    let call = |model: &str, usage: Value| {
        AgentDelta::Usage(agw_protocol::CallUsage { provider: "p".into(), model: model.into(), usage })
    };
    run.push(100, marker("react-step-1"));
    run.push(110, tool_args("call_1", "w", "{}"));
    run.push(120, call("big", json!({"prompt_tokens": 100, "completion_tokens": 10})));
    run.push(130, tool_result("call_1", "20C"));
    run.push(200, marker("react-step-2"));
    run.push(210, content("done"));
    run.push(220, call("big", json!({"prompt_tokens": 150, "completion_tokens": 5})));
    run.complete(300);
    let live = serde_json::to_value(run.events.last().unwrap()).unwrap();
    assert_eq!((live["usage"]["inputTokens"].as_u64(), live["usage"]["calls"].as_u64()), (Some(250), Some(2)));
    let steps = steps(&run);
    assert!(steps[0].run_usage.is_none(), "only the run's last line carries its totals");
    assert_eq!(steps[1].run_usage.as_ref().map(|u| u.total_tokens), Some(265));
    assert!(run.jsonl()[2].contains(r#""_runUsage":{"inputTokens":250,"outputTokens":15,"totalTokens":265,"calls":2"#));
    let replay = replay_chat(CHAT, None, &run.lines, 0);
    let done = serde_json::to_value(replay.last().unwrap()).unwrap();
    assert_eq!(done["type"], "run.complete");
    assert_eq!(done["usage"], live["usage"]);
}

fn guard_notice(stage: agw_protocol::GuardStage, tool_id: Option<&str>) -> agw_protocol::GuardNotice {
    agw_protocol::GuardNotice {
        stage,
        guard: "rules:demo".into(),
        rule: None,
        message: "careful".into(),
        tool_id: tool_id.map(str::to_owned),
    }
}

/// Issue 36: a guard record of the step a run waits in is kept across the wait (the awaiting
/// line's step) and written where an uninterrupted run writes it.
#[test]
fn a_waiting_steps_guard_records_survive_the_wait() {
    let warn = || AgentDelta::GuardWarning(guard_notice(agw_protocol::GuardStage::ToolInput, Some("b1")));
    let mut whole = Run::new(CHAT, RUN, query("q"), None, &[]);
    waiting_batch(&mut whole);
    whole.push(7, warn());
    after_the_wait(&mut whole);

    let mut split = Run::new(CHAT, RUN, query("q"), None, &[]);
    waiting_batch(&mut split);
    split.push(7, warn());
    let step = split.recorder.checkpoint();
    let step: PendingStep = serde_json::from_value(serde_json::to_value(&step).expect("json")).expect("back");
    assert_eq!(step.guards.len(), 1);
    split.resume_recorder(split.recorder.steps_written(), step);
    after_the_wait(&mut split);
    let guards = |run: &Run| steps(run)[0].guards.clone();
    assert_eq!(guards(&split), guards(&whole));
    // After the user message and the text, before the calls it checked.
    assert_eq!(guards(&whole)[0].at, 2);
    assert!(steps(&whole)[0].messages[2].calls().first().is_some_and(|c| c.id == "b1"));
}

/// Issue 36: a sub-agent's withdrawn answer and its warning are on the child's own step line,
/// after its task message, and replay inside its task, tagged with it.
#[test]
fn a_childs_revoke_and_warning_are_recorded_with_the_child() {
    use agw_protocol::{ChildEnd, ChildTask, GuardStage, Revocation, TaskError};
    let mut run = Run::new(CHAT, RUN, query("q"), None, &[]);
    run.push(1, marker("react-step-1"));
    run.push(2, tool_args("call_team", "agent_invoke", "{}"));
    run.push(3, AgentDelta::ToolEnd { tool_id: "call_team".into() });
    let child = ChildTask {
        task_id: "t1".into(),
        task_name: None,
        description: Some("find it".into()),
        sub_agent_key: Some("helper".into()),
        tool_id: Some("call_team".into()),
    };
    run.push(4, AgentDelta::ChildStart(child));
    let in_child = |delta: AgentDelta| AgentDelta::Child { task_id: "t1".into(), delta: Box::new(delta) };
    run.push(5, in_child(content("secret")));
    run.push(6, in_child(AgentDelta::GuardWarning(guard_notice(GuardStage::Output, None))));
    let revocation = Revocation { guard: "webhook".into(), rule: None, reason: "no".into() };
    run.push(7, in_child(AgentDelta::Revoke(revocation.clone())));
    let end = ChildEnd::Fail(TaskError::new("guardrail_blocked", "no"));
    run.push(8, AgentDelta::ChildEnd { task_id: "t1".into(), end });
    run.push(9, tool_result("call_team", "{}"));
    run.complete(10);

    let child_line = steps(&run).into_iter().find(|s| s.sub_agent.is_some()).expect("the child's line").clone();
    assert_eq!(child_line.messages[0].text(), "find it");
    assert_eq!(child_line.messages[1].revoked, Some(revocation));
    assert_eq!(child_line.guards.iter().map(|g| g.at).collect::<Vec<_>>(), [2]);
    let replay = replay_chat(CHAT, None, &run.lines, 0);
    let tail: Vec<String> = replay
        .iter()
        .skip_while(|e| e.type_name() != "task.start")
        .take(5)
        .map(|e| format!("{} {}", e.type_name(), e.task().unwrap_or("-")))
        .collect();
    assert_eq!(
        tail,
        ["task.start t1", "content.snapshot t1", "guard.warning t1", "content.revoke t1", "task.fail t1"],
        "in the live order"
    );
}

/// Issue 37: a round of parallel plan tasks cut by a crash and resumed from its checkpoint
/// (one task ended, the other inside a tool call) is recorded as the uncut round is: each task
/// once, in plan order, with everything it did on both sides of the crash.
#[test]
fn a_round_resumed_from_its_checkpoint_is_recorded_as_if_never_cut() {
    use agw_protocol::history::{RoundCheckpoint, TaskCheckpoint};
    use agw_protocol::{ChildEnd, ChildTask};
    let task = |id: &str| ChildTask {
        task_id: id.into(),
        task_name: None,
        description: Some(format!("do {id}")),
        sub_agent_key: None,
        tool_id: None,
    };
    let of = |id: &str, delta: AgentDelta| AgentDelta::Child { task_id: id.into(), delta: Box::new(delta) };
    let end = |id: &str| AgentDelta::ChildEnd { task_id: id.into(), end: ChildEnd::Complete };
    let plan = AgentDelta::PlanUpdate {
        plan_id: "plan_1".into(),
        plan: ["t1", "t2"]
            .iter()
            .map(|id| PlanTask {
                task_id: (*id).into(),
                description: format!("do {id}"),
                status: TaskStatus::Completed,
            })
            .collect(),
    };
    // Up to the crash: t1 ran a call and ended; t2 wrote, then started a call.
    let before = |run: &mut Run| {
        run.push(1, marker("plan-generate"));
        run.push(2, content("Planned."));
        run.push(3, marker("execute-task-1"));
        run.push(4, AgentDelta::ChildStart(task("t1")));
        run.push(5, AgentDelta::ChildStart(task("t2")));
        run.push(6, of("t1", tool_args("a1", "read", "{}")));
        run.push(7, of("t1", AgentDelta::ToolEnd { tool_id: "a1".into() }));
        run.push(8, of("t2", content("Working on t2.")));
        run.push(9, of("t1", tool_result("a1", "read it")));
        run.push(10, end("t1"));
        run.push(11, of("t2", tool_args("b1", "write", "{}")));
        run.push(12, of("t2", AgentDelta::ToolEnd { tool_id: "b1".into() }));
    };
    let after = |run: &mut Run| {
        run.push(13, of("t2", tool_result("b1", "interrupted")));
        run.push(14, end("t2"));
        run.push(15, plan.clone());
        run.push(16, marker("plan-replan-1"));
        run.push(17, content("Nothing to change."));
        run.complete(18);
    };
    let mut whole = Run::new(CHAT, RUN, query("q"), None, &[]);
    before(&mut whole);
    after(&mut whole);

    let mut cut = Run::new(CHAT, RUN, query("q"), None, &[]);
    before(&mut cut);
    let steps_written = cut.recorder.steps_written();
    assert_eq!(steps_written, 1, "only the plan's line is on record");
    let ended = cut.recorder.ended_task("t1").expect("t1's line, held for the round");
    let step = cut.recorder.task_checkpoint("t2").expect("t2's step so far");
    assert_eq!(step.calls.len(), 1, "b1 has no result yet");
    let round = RoundCheckpoint {
        steps_written,
        call_id: None,
        tasks: vec![
            TaskCheckpoint { task_id: "t1".into(), ended: Some(Box::new(ended)), ..TaskCheckpoint::default() },
            TaskCheckpoint { task_id: "t2".into(), step, ..TaskCheckpoint::default() },
        ],
    };
    // A new process: a fresh stream, a recorder that goes on from the checkpoint; t2 starts
    // again in the stream and its call is shown again.
    let mut resumed = Run::new(CHAT, RUN, query("q"), None, &[]);
    resumed.resume_recorder(steps_written, PendingStep::default());
    resumed.recorder.resume_round(&round);
    resumed.push(12, AgentDelta::ChildStart(task("t2")));
    resumed.push(12, of("t2", tool_args("b1", "write", "{}")));
    resumed.push(12, of("t2", AgentDelta::ToolEnd { tool_id: "b1".into() }));
    after(&mut resumed);

    let shape = |lines: &[HistoryLine]| -> Vec<(String, Option<String>, i64, Vec<String>)> {
        lines
            .iter()
            .filter_map(HistoryLine::as_step)
            .map(|s| {
                let messages = s
                    .messages
                    .iter()
                    .map(|m| {
                        let calls: Vec<&str> = m.calls().iter().map(|c| c.id.as_str()).collect();
                        format!("{} {} {:?}", m.role, m.text(), calls)
                    })
                    .collect();
                (s.stage.clone(), s.task_id.clone(), s.seq, messages)
            })
            .collect()
    };
    let split: Vec<HistoryLine> = cut.lines.iter().chain(&resumed.lines).cloned().collect();
    assert_eq!(shape(&split), shape(&whole.lines));
    let tasks: Vec<_> = shape(&whole.lines).into_iter().filter_map(|(_, task, _, _)| task).collect();
    assert_eq!(tasks, ["t1", "t2"]);
    let last_task = split.iter().filter_map(HistoryLine::as_step).find(|s| s.task_id.as_deref() == Some("t2")).unwrap();
    assert!(last_task.plan.is_some(), "the merged plan rides the round's last line");
}
