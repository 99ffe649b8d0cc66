//! Replay rules of `docs/contract/sse-events.md` §9 with agw's id and seq decisions.

use serde_json::{Value, json};

use super::*;
use crate::history::tests::{EXAMPLE_QUERY, EXAMPLE_STEP_1, EXAMPLE_STEP_2, parse};

const CHAT: &str = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
const RUN: &str = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";

fn lines(texts: &[&str]) -> Vec<HistoryLine> {
    texts.iter().map(|t| parse(t)).collect()
}

fn json_of(events: &[Event]) -> Vec<Value> {
    events.iter().map(|e| serde_json::from_str(&e.to_json().expect("serialise")).expect("json")).collect()
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::type_name).collect()
}

#[test]
fn worked_example_replays_exactly() {
    let events = replay_chat(CHAT, Some("上海现在几点？"), &lines(&[EXAMPLE_QUERY, EXAMPLE_STEP_1, EXAMPLE_STEP_2]), 1);
    let expected = [
        json!({"seq":1,"type":"request.query","timestamp":1771000100700_i64,"requestId":RUN,"chatId":CHAT,"role":"user","message":"上海现在几点？","agentKey":"weatherBot"}),
        json!({"seq":2,"type":"chat.start","timestamp":1771000100701_i64,"chatId":CHAT,"chatName":"上海现在几点？"}),
        json!({"seq":3,"type":"run.start","timestamp":1771000100702_i64,"runId":RUN,"chatId":CHAT}),
        json!({"seq":4,"type":"reasoning.snapshot","timestamp":1771000100702_i64 + 1,"reasoningId":"r_eab6f9c5","text":"需要查询上海的实时时间。"}),
        json!({"seq":5,"type":"content.snapshot","timestamp":1771000100900_i64,"contentId":"c_d648f345","text":"我先查询上海当前时间。"}),
        json!({"seq":6,"type":"tool.snapshot","timestamp":1771000101210_i64,"toolId":"call_1","toolName":"city_datetime","arguments":"{\"city\":\"Shanghai\"}","toolType":"function","toolApi":null,"toolParams":{"city":"Shanghai"},"description":null}),
        json!({"seq":7,"type":"tool.result","timestamp":1771000101211_i64,"toolId":"call_1","result":"{\"city\":\"Shanghai\",\"timezone\":\"UTC+8\",\"date\":\"2026-02-13\",\"weekday\":\"星期五\",\"lunarDate\":\"乙巳年腊月廿六\",\"time\":\"10:15:30\",\"iso\":\"2026-02-13T10:15:30.123456+08:00\",\"source\":\"system-clock\"}"}),
        json!({"seq":8,"type":"reasoning.snapshot","timestamp":1771000101900_i64,"reasoningId":"r_07f7aed8","text":"已拿到时间，直接回答。"}),
        json!({"seq":9,"type":"content.snapshot","timestamp":1771000102100_i64,"contentId":"c_80efcabb","text":"上海现在是 2026-02-13（星期五） 10:15:30。"}),
        json!({"seq":10,"type":"run.complete","timestamp":1771000102101_i64,"runId":RUN,"finishReason":"end_turn"}),
    ];
    assert_eq!(json_of(&events), expected);
    // key order on the wire: seq, type, timestamp, payload in contract order, nulls written
    assert_eq!(
        events[5].to_json().expect("json"),
        r#"{"seq":6,"type":"tool.snapshot","timestamp":1771000101210,"toolId":"call_1","toolName":"city_datetime","arguments":"{\"city\":\"Shanghai\"}","toolType":"function","toolApi":null,"toolParams":{"city":"Shanghai"},"description":null}"#
    );
}

#[test]
fn legacy_plan_snapshot_replays_as_plan_update_with_seq() {
    let events = replay_chat(
        CHAT,
        Some("计划"),
        &lines(&[
            r#"{"_type":"query","chatId":"c","runId":"run_001","updatedAt":10,"query":{"message":"规划"}}"#,
            r#"{"_type":"step","chatId":"c","runId":"run_001","_stage":"plan","_seq":1,"updatedAt":10,"planSnapshot":{"planId":"plan_chat_001","plan":[{"taskId":"task0","description":"a","status":"init"},{"taskId":"task1","description":"b","status":"in_progress"}]},"messages":[{"role":"user","content":[{"type":"text","text":"规划"}],"ts":5}]}"#,
        ]),
        1,
    );
    assert_eq!(types(&events), ["request.query", "chat.start", "run.start", "plan.update", "run.complete"]);
    let plan = &json_of(&events)[3];
    assert_eq!(
        plan,
        &json!({"seq":4,"type":"plan.update","timestamp":8,"planId":"plan_chat_001","chatId":CHAT,"plan":[
            {"taskId":"task0","description":"a","status":"init"},{"taskId":"task1","description":"b","status":"init"}]})
    );
    assert!(!events[3].to_json().expect("json").contains("rawEvent"));
}

#[test]
fn legacy_call_level_bindings_tools_and_actions() {
    let events = replay_chat(
        CHAT,
        None,
        &lines(&[
            r#"{"_type":"query","chatId":"c","runId":"run_1","updatedAt":100,"query":{"message":"hi"}}"#,
            r#"{"_type":"step","runId":"run_1","_stage":"react","_seq":1,"updatedAt":100,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"ts":10},{"role":"assistant","reasoning_content":[{"type":"text","text":"think"}],"ts":11},{"role":"assistant","tool_calls":[{"id":"call_b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"},"_toolId":"tool_b"}],"ts":12},{"role":"tool","content":[{"type":"text","text":"file.txt"}],"ts":12,"name":"bash","tool_call_id":"call_b"}]}"#,
            r#"{"_type":"step","runId":"run_1","_stage":"react","_seq":2,"updatedAt":100,"messages":[{"role":"assistant","tool_calls":[{"id":"call_t","type":"function","function":{"name":"switch_frontend_theme","arguments":"{\"theme\":\"dark\"}"},"_actionId":"a_theme"}],"ts":20},{"role":"tool","content":[{"type":"text","text":"OK"}],"ts":20,"name":"switch_frontend_theme","tool_call_id":"call_t"},{"role":"assistant","content":[{"type":"text","text":"done"}],"ts":21}]}"#,
        ]),
        1,
    );
    assert_eq!(
        types(&events),
        [
            "request.query",
            "chat.start",
            "run.start",
            "reasoning.snapshot",
            "tool.snapshot",
            "tool.result",
            "action.snapshot",
            "action.result",
            "content.snapshot",
            "run.complete"
        ]
    );
    let json = json_of(&events);
    // no stored ids: §9 fallbacks, counting from 0
    assert_eq!(json[3]["reasoningId"], "run_1_r_0");
    assert_eq!(json[8]["contentId"], "run_1_c_0");
    assert_eq!(json[4]["toolId"], "tool_b");
    assert_eq!(json[5]["toolId"], "tool_b", "result bound through its tool_call_id");
    assert_eq!(
        json[6],
        json!({"seq":7,"type":"action.snapshot","timestamp":20,"actionId":"a_theme","actionName":"switch_frontend_theme","arguments":"{\"theme\":\"dark\"}","description":null})
    );
    assert_eq!(json[7]["result"], "OK");
    assert_eq!(json[1]["chatName"], CHAT, "no index name: the chat id");
    // timestamps strictly increase where message ts collide
    assert!(events.windows(2).skip(1).all(|w| w[1].timestamp > w[0].timestamp));
    // seq 1..N
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1));
}

#[test]
fn runs_sorted_by_updated_at_with_one_chat_start() {
    let run = |id: &str, updated: i64, ts: i64| {
        [
            format!(
                r#"{{"_type":"query","chatId":"c","runId":"{id}","updatedAt":{updated},"query":{{"requestId":"req-{id}","message":"m-{id}","stream":true}}}}"#
            ),
            format!(
                r#"{{"_type":"step","chatId":"c","runId":"{id}","_stage":"oneshot","_seq":1,"updatedAt":{updated},"messages":[{{"role":"assistant","content":[{{"type":"text","text":"a-{id}"}}],"ts":{ts},"_contentId":"{id}_c_1"}}]}}"#
            ),
        ]
    };
    let texts: Vec<String> =
        [run("late", 300, 290), run("zero", 0, 0), run("early", 200, 190)].into_iter().flatten().collect();
    let mut texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    // a run with a query line but no step is skipped
    texts.push(r#"{"_type":"query","chatId":"c","runId":"lonely","updatedAt":1,"query":{"message":"x"}}"#);
    let events = replay_chat(CHAT, Some("n"), &lines(&texts), 5000);
    let json = json_of(&events);
    let starts: Vec<_> = json.iter().filter(|e| e["type"] == "run.start").map(|e| e["runId"].clone()).collect();
    assert_eq!(starts, ["early", "late", "zero"]);
    assert_eq!(types(&events).iter().filter(|t| **t == "chat.start").count(), 1);
    assert_eq!(types(&events).iter().filter(|t| **t == "run.complete").count(), 3);
    assert_eq!(json[0]["requestId"], "req-early");
    assert_eq!(json[0]["stream"], true);
    assert_eq!(json[0]["timestamp"], 190);
    // the run without any ts or updatedAt starts at `now`
    let zero_query = json.iter().find(|e| e["type"] == "request.query" && e["message"] == "m-zero").expect("zero run");
    assert_eq!(zero_query["timestamp"], 5000);
    // runs are not forced monotonic across each other: each restarts at its own start
    let late_query = json.iter().find(|e| e["type"] == "request.query" && e["message"] == "m-late").expect("late run");
    assert_eq!(late_query["timestamp"], 290);
    // run.complete = max(end + 1, cursor + 1)
    let complete = json.iter().find(|e| e["type"] == "run.complete" && e["runId"] == "early").expect("early end");
    // query 190, chat.start 191, run.start 192, content max(190, 193) = 193, end max(191, 194)
    assert_eq!(complete["timestamp"], 194);
}

#[test]
fn request_query_fallbacks_without_query_line() {
    let events = replay_chat(
        CHAT,
        Some("n"),
        &lines(&[
            r#"{"_type":"step","chatId":"c","runId":"r9","_stage":"oneshot","_seq":1,"updatedAt":50,"messages":[{"role":"user","content":[{"type":"text","text":"first"}]}]}"#,
        ]),
        1,
    );
    let json = json_of(&events);
    assert_eq!(
        json[0],
        json!({"seq":1,"type":"request.query","timestamp":50,"requestId":"r9","chatId":CHAT,"role":"user","message":"first"})
    );
    assert_eq!(types(&events), ["request.query", "chat.start", "run.start", "run.complete"]);
    assert_eq!(json[3]["timestamp"], 53);
}

#[test]
fn steps_are_ordered_by_seq() {
    let events = replay_chat(
        CHAT,
        None,
        &lines(&[
            r#"{"_type":"step","runId":"r","_seq":2,"updatedAt":9,"messages":[{"role":"assistant","content":[{"type":"text","text":"second"}],"ts":5}]}"#,
            r#"{"_type":"step","runId":"r","_seq":1,"updatedAt":9,"messages":[{"role":"assistant","content":[{"type":"text","text":"first"}],"ts":4}]}"#,
        ]),
        1,
    );
    let texts: Vec<_> = json_of(&events).into_iter().filter_map(|e| e.get("text").cloned()).collect();
    assert_eq!(texts, ["first", "second"]);
}

#[test]
fn a_steered_user_message_replays_as_request_steer_at_its_position() {
    let events = replay_chat(
        CHAT,
        Some("n"),
        &lines(&[
            r#"{"_type":"query","chatId":"c","runId":"r1","updatedAt":40,"query":{"requestId":"q1","message":"weather?"}}"#,
            r#"{"_type":"step","chatId":"c","runId":"r1","_stage":"react","_seq":1,"updatedAt":30,"messages":[{"role":"user","content":[{"type":"text","text":"weather?"}],"ts":30},{"role":"assistant","content":[{"type":"text","text":"Looking"}],"ts":10,"_contentId":"r1_c_1"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{}"}}],"ts":15,"_toolId":"call_1"},{"role":"tool","content":[{"type":"text","text":"20C"}],"ts":15,"name":"w","tool_call_id":"call_1","_toolId":"call_1"}]}"#,
            r#"{"_type":"step","chatId":"c","runId":"r1","_stage":"react","_seq":2,"updatedAt":40,"messages":[{"role":"user","content":[{"type":"text","text":"in Fahrenheit"}],"ts":20,"_steerId":"steer_a","_requestId":"sq1"},{"role":"assistant","content":[{"type":"text","text":"68F"}],"ts":25,"_contentId":"r1_c_2"},{"role":"user","content":[{"type":"text","text":"thanks"}],"ts":26,"_steerId":"steer_b"}]}"#,
        ]),
        1,
    );
    assert_eq!(
        types(&events),
        [
            "request.query",
            "chat.start",
            "run.start",
            "content.snapshot",
            "tool.snapshot",
            "tool.result",
            "request.steer",
            "content.snapshot",
            "request.steer",
            "run.complete"
        ]
    );
    let json = json_of(&events);
    assert_eq!(
        json[6],
        json!({"seq":7,"type":"request.steer","timestamp":20,"requestId":"sq1","chatId":CHAT,"runId":"r1","steerId":"steer_a","message":"in Fahrenheit","role":"user"})
    );
    assert_eq!(
        json[8],
        json!({"seq":9,"type":"request.steer","timestamp":26,"chatId":CHAT,"runId":"r1","steerId":"steer_b","message":"thanks","role":"user"}),
        "no stored requestId: omitted"
    );
    assert_eq!(json[0]["message"], "weather?");
}

#[test]
fn request_query_fallback_message_skips_steers() {
    let events = replay_chat(
        CHAT,
        None,
        &lines(&[
            r#"{"_type":"step","runId":"r","_seq":1,"updatedAt":9,"messages":[{"role":"user","content":[{"type":"text","text":"later"}],"ts":4,"_steerId":"s"},{"role":"user","content":[{"type":"text","text":"own"}],"ts":5}]}"#,
        ]),
        1,
    );
    assert_eq!(json_of(&events)[0]["message"], "own");
    assert_eq!(types(&events), ["request.query", "chat.start", "run.start", "request.steer", "run.complete"]);
}

#[test]
fn raw_messages_and_references() {
    let lines = lines(&[
        r#"{"_type":"query","chatId":"c","runId":"run_001","updatedAt":1,"query":{"message":"你好","references":[{"id":"ref_001","type":"url"},{"name":"no id"},{"id":"ref_001","name":"dup"}]}}"#,
        r#"{"_type":"step","runId":"run_001","_seq":1,"updatedAt":1,"messages":[{"role":"user","content":[{"type":"text","text":"你好"}],"ts":1707000000000}]}"#,
        r#"{"_type":"query","chatId":"c","runId":"run_002","updatedAt":2,"query":{"message":"again","references":[{"id":"ref_002"}]}}"#,
        r#"{"_type":"step","runId":"run_002","_seq":1,"updatedAt":2,"messages":[{"role":"user","content":[{"type":"text","text":"again"}],"ts":1707000000001}]}"#,
    ]);
    let raw = raw_messages(&lines);
    assert_eq!(
        serde_json::to_string(&raw[0]).expect("json"),
        r#"{"role":"user","content":[{"type":"text","text":"你好"}],"ts":1707000000000,"runId":"run_001"}"#
    );
    assert_eq!(raw.len(), 2);
    let references = chat_references(&lines);
    let ids: Vec<_> = references.iter().map(|r| r.id.as_deref().unwrap_or_default()).collect();
    assert_eq!(ids, ["ref_001", "ref_002"]);
    assert_eq!(references[0].kind.as_deref(), Some("url"), "first wins");
}

#[test]
fn empty_history_replays_nothing() {
    assert!(replay_chat(CHAT, None, &[], 1).is_empty());
}

#[test]
fn a_recorded_compaction_replays_as_context_compact_where_it_happened() {
    let query = r#"{"_type":"query","chatId":"c","runId":"r","updatedAt":10,"query":{"message":"q"}}"#;
    let step = r#"{"_type":"step","chatId":"c","runId":"r","_stage":"react","_seq":1,"updatedAt":10,"messages":[{"role":"user","content":[{"type":"text","text":"q"}],"ts":5},{"role":"assistant","content":[{"type":"text","text":"a"}],"ts":8,"_contentId":"c1"}],"_compactions":[{"at":1,"ts":6,"runId":"r","level":"summary","tokensBefore":100,"tokensAfter":20,"budget":90,"durationMs":3,"replacedMessages":4,"summary":"s","throughRunId":"r0"}]}"#;
    let events = replay_chat("c", None, &lines(&[query, step]), 1);
    assert_eq!(
        types(&events),
        ["request.query", "chat.start", "run.start", "context.compact", "content.snapshot", "run.complete"]
    );
    let compact = &json_of(&events)[3];
    assert_eq!(compact["runId"], "r");
    assert_eq!((compact["level"].as_str(), compact["summary"].as_str()), (Some("summary"), Some("s")));
    // Its recorded time, kept monotonic like every replayed event.
    assert_eq!(compact["timestamp"], 8);
}

/// Issue 36: a revoked message replays as its snapshot and citations, and `content.revoke` at the
/// end of its step (after the records that followed it, as live); a step's warnings and blocks
/// replay where they happened (by `at`), a sub-agent's inside its task, tagged with it.
#[test]
fn a_revoke_follows_its_snapshot_and_guard_records_replay_in_place() {
    let events = replay_chat(
        CHAT,
        None,
        &lines(&[
            r#"{"_type":"step","chatId":"c","runId":"r","_stage":"react","_seq":1,"updatedAt":10,"messages":[
                {"role":"user","content":"hi","ts":5},
                {"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"sh","arguments":"{}"}}],"ts":6,"_toolId":"call_1"},
                {"role":"tool","content":"blocked","ts":6,"name":"sh","tool_call_id":"call_1","_toolId":"call_1"},
                {"role":"assistant","content":"Mail me at","ts":7,"_contentId":"r_c_1","_citations":[{"index":0,"offset":4,"record":{"messageId":"m1"}}],"_revoked":{"guard":"rules:pii","rule":"email","reason":"personal data"}}],
              "_guards":[
                {"at":1,"ts":6,"type":"guard.block","stage":"toolInput","guard":"rules:shell","reason":"no","toolId":"call_1","statusCode":-1006},
                {"at":4,"ts":7,"type":"guard.warning","stage":"output","guard":"webhook","message":"careful","contentId":"r_c_1","statusCode":-1007}]}"#,
            r#"{"_type":"step","chatId":"c","runId":"r","_stage":"subagent","_seq":1,"taskId":"t1","updatedAt":10,"_subAgent":{"subAgentKey":"helper","toolId":"call_9","status":"failed"},"messages":[
                {"role":"user","content":"task","ts":5}],
              "_guards":[{"at":1,"ts":5,"type":"guard.block","stage":"output","guard":"webhook","reason":"no","statusCode":-1006}]}"#,
        ]),
        1,
    );
    assert_eq!(
        types(&events),
        [
            "request.query",
            "chat.start",
            "run.start",
            "guard.block",
            "tool.snapshot",
            "tool.result",
            "content.snapshot",
            "content.citation",
            "guard.warning",
            "content.revoke",
            "task.start",
            "guard.block",
            "task.fail",
            "run.complete"
        ]
    );
    let json = json_of(&events);
    assert_eq!(
        json[9],
        json!({"seq": 10, "type": "content.revoke", "timestamp": json[9]["timestamp"], "contentId": "r_c_1",
            "stage": "output", "guard": "rules:pii", "rule": "email", "reason": "personal data", "statusCode": -1006})
    );
    assert_eq!((json[3]["toolId"].as_str(), json[3]["stage"].as_str()), (Some("call_1"), Some("toolInput")));
    assert_eq!(json[8]["contentId"], "r_c_1", "the warning about the text, before it was withdrawn");
    assert_eq!((json[11]["taskId"].as_str(), json[11]["stage"].as_str()), (Some("t1"), Some("output")));
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1));
}
