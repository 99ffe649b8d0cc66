use serde_json::{Value, json};

use super::*;

/// An event from its wire form (`seq`/`timestamp` may be left out).
fn ev(value: Value) -> Event {
    serde_json::from_value(value).unwrap()
}

fn run(mapper: &mut PhaseMapper, events: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for event in events {
        mapper.map(&ev(event.clone()), &mut out);
    }
    out
}

fn default_mapper() -> PhaseMapper {
    PhaseMapper::new(PhaseOptions::default(), None, PhaseMessages::default())
}

fn types(out: &[Value]) -> Vec<String> {
    out.iter().map(|l| l["type"].as_str().unwrap().to_owned()).collect()
}

/// The phases of the `phase_change` lines, in order.
fn phases(out: &[Value]) -> Vec<String> {
    out.iter().filter(|l| l["type"] == "phase_change").map(|l| l["phase"].as_str().unwrap().to_owned()).collect()
}

fn tool(id: &str, name: &str, args: &str) -> Vec<Value> {
    vec![
        json!({"type": "tool.start", "toolId": id, "runId": "r", "toolName": name, "toolType": "function",
            "description": format!("{name} does things")}),
        json!({"type": "tool.args", "toolId": id, "delta": args, "chunkIndex": 0}),
        json!({"type": "tool.end", "toolId": id}),
    ]
}

fn text(id: &str, pieces: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({"type": "content.start", "contentId": id, "runId": "r"})];
    out.extend(pieces.iter().map(|p| json!({"type": "content.delta", "contentId": id, "delta": p})));
    out.push(json!({"type": "content.end", "contentId": id}));
    out
}

fn reasoning(id: &str, pieces: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({"type": "reasoning.start", "reasoningId": id, "runId": "r"})];
    out.extend(pieces.iter().map(|p| json!({"type": "reasoning.delta", "reasoningId": id, "delta": p})));
    out.push(json!({"type": "reasoning.end", "reasoningId": id}));
    out
}

fn start() -> Vec<Value> {
    vec![
        json!({"type": "request.query", "requestId": "q", "chatId": "c", "role": "user", "message": "hi"}),
        json!({"type": "run.start", "runId": "r", "chatId": "c"}),
    ]
}

fn complete(usage: Option<Value>) -> Value {
    let mut e = json!({"type": "run.complete", "runId": "r", "finishReason": "stop"});
    if let Some(usage) = usage {
        e["usage"] = usage;
    }
    e
}

/// A REACT run: reasoning, a tool call, its result, then reasoning and the answer.
fn react_run() -> Vec<Value> {
    let mut events = start();
    events.extend(reasoning("r_r_1", &["Let me look."]));
    let mut call = tool("call_1", "mock_city_weather", r#"{"city":"#);
    call.insert(2, json!({"type": "tool.args", "toolId": "call_1", "delta": "\"Paris\"}", "chunkIndex": 1}));
    events.extend(call);
    events.push(json!({"type": "tool.result", "toolId": "call_1", "result": r#"{"city":"Paris","temp":21}"#}));
    events.extend(reasoning("r_r_2", &["Now answer."]));
    events.extend(text("r_c_2", &["It is ", "21°C."]));
    events.push(complete(None));
    events
}

#[test]
fn options_default_to_the_documents_switches_and_read_camel_case() {
    assert_eq!(
        PhaseOptions::default(),
        PhaseOptions { show_thinking: false, show_tool_calls: true, detailed_citations: true }
    );
    let parsed: PhaseOptions = serde_json::from_value(json!({"showThinking": true})).unwrap();
    assert_eq!(parsed, PhaseOptions { show_thinking: true, ..PhaseOptions::default() });
    let parsed: PhaseOptions =
        serde_json::from_value(json!({"showToolCalls": false, "detailedCitations": false})).unwrap();
    assert_eq!(parsed, PhaseOptions { show_thinking: false, show_tool_calls: false, detailed_citations: false });
}

#[test]
fn a_react_run_goes_thinking_tool_calling_thinking_generating_completed() {
    let out = run(&mut default_mapper(), &react_run());
    assert_eq!(phases(&out), ["thinking", "tool_calling", "thinking", "generating", "completed"]);
    assert_eq!(
        types(&out),
        [
            "phase_change",
            "phase_change",
            "tool_start",
            "tool_end",
            "phase_change",
            "phase_change",
            "text",
            "text",
            "phase_change",
            "done"
        ]
    );
    assert_eq!(
        out[0],
        json!({"type": "phase_change", "phase": "thinking", "data": {"message": "正在分析您的问题..."}})
    );
    assert_eq!(
        out[2],
        json!({"type": "tool_start", "phase": "tool_calling", "data": {"toolName": "mock_city_weather",
            "toolDescription": "mock_city_weather does things", "params": {"city": "Paris"}}})
    );
    assert_eq!(
        out[3]["data"],
        json!({"toolName": "mock_city_weather", "success": true, "summary": r#"{"city":"Paris","temp":21}"#})
    );
    assert_eq!(out[6], json!({"type": "text", "phase": "generating", "data": {"content": "It is "}}));
    assert_eq!(
        out[9],
        json!({"type": "done", "phase": "completed", "data": {"finishReason": "stop",
            "stats": {"totalTokens": 0, "iterations": 2}}})
    );
}

#[test]
fn show_thinking_sends_the_reasoning_and_show_tool_calls_off_hides_the_calls() {
    let options = PhaseOptions { show_thinking: true, show_tool_calls: false, detailed_citations: true };
    let out = run(&mut PhaseMapper::new(options, None, PhaseMessages::default()), &react_run());
    assert_eq!(phases(&out), ["thinking", "tool_calling", "thinking", "generating", "completed"]);
    let thinking: Vec<&Value> = out.iter().filter(|l| l["type"] == "thinking").collect();
    assert_eq!(thinking.len(), 2);
    assert_eq!(thinking[0], &json!({"type": "thinking", "phase": "thinking", "data": {"content": "Let me look."}}));
    assert!(!types(&out).iter().any(|t| t.starts_with("tool_")), "{out:?}");
    // Off by default.
    let out = run(&mut default_mapper(), &react_run());
    assert!(!types(&out).contains(&"thinking".to_owned()));
}

#[test]
fn a_phase_never_goes_back_within_a_turn_and_text_before_a_call_comes_first() {
    let mut events = start();
    events.extend(text("r_c_1", &["Checking. "]));
    // Reasoning after the turn's text does not take it back to thinking.
    events.extend(reasoning("r_r_1", &["hm"]));
    events.extend(text("r_c_1b", &["More."]));
    events.extend(tool("call_1", "lookup", "{}"));
    events.extend(tool("call_2", "lookup", "{}"));
    events.push(json!({"type": "tool.result", "toolId": "call_1", "result": "[1,2,3]"}));
    events.push(json!({"type": "tool.result", "toolId": "call_2", "result": r#"{"rows":[1,2]}"#}));
    events.extend(text("r_c_2", &["Done."]));
    events.push(complete(None));
    let options = PhaseOptions { show_thinking: true, ..PhaseOptions::default() };
    let out = run(&mut PhaseMapper::new(options, Some("en".into()), PhaseMessages::default()), &events);
    assert_eq!(phases(&out), ["thinking", "generating", "tool_calling", "generating", "completed"]);
    let thinking = out.iter().find(|l| l["type"] == "thinking").unwrap();
    assert_eq!(thinking["phase"], "generating", "shown in the phase the turn is in");
    let ends: Vec<&Value> = out.iter().filter(|l| l["type"] == "tool_end").collect();
    assert_eq!(ends[0]["data"]["summary"], "3 items");
    assert_eq!(ends[1]["data"]["summary"], "2 items");
    assert_eq!(out.last().unwrap()["data"]["stats"]["iterations"], 2);
    // Every phase_change really changes the phase.
    let mut last = None;
    for line in &out {
        if line["type"] == "phase_change" {
            assert_ne!(Some(&line["phase"]), last.as_ref());
        }
        last = Some(line["phase"].clone());
    }
}

#[test]
fn failed_tools_say_so_in_the_streams_language() {
    let mut events = start();
    events.extend(tool("call_1", "mock_city_weather", "not json"));
    events.push(json!({"type": "tool.result", "toolId": "call_1",
        "result": r#"{"tool":"mock_city_weather","ok":false,"error":"city not found"}"#}));
    events.extend(tool("call_2", "other", ""));
    events.push(json!({"type": "tool.result", "toolId": "call_2", "result": r#"{"error":{"kind":"x"}}"#}));
    let out = run(&mut default_mapper(), &events);
    let start = out.iter().find(|l| l["type"] == "tool_start").unwrap();
    assert_eq!(start["data"]["params"], json!({}), "unparsable arguments");
    let ends: Vec<&Value> = out.iter().filter(|l| l["type"] == "tool_end").collect();
    assert_eq!(
        ends[0]["data"],
        json!({"toolName": "mock_city_weather", "success": false, "summary": "工具调用失败", "error": "city not found"})
    );
    assert_eq!(ends[1]["data"]["error"], r#"{"kind":"x"}"#);
    let start2 = out.iter().filter(|l| l["type"] == "tool_start").nth(1).unwrap();
    assert_eq!(start2["data"]["params"], json!({}), "empty arguments");
    let out =
        run(&mut PhaseMapper::new(PhaseOptions::default(), Some("en-US".into()), PhaseMessages::default()), &events);
    let end = out.iter().find(|l| l["type"] == "tool_end").unwrap();
    assert_eq!(end["data"]["summary"], "Tool call failed");
    assert_eq!(out[0]["data"]["message"], "Analyzing your question...");
}

#[test]
fn a_long_result_is_cut_for_the_summary_and_a_description_defaults_to_the_name() {
    let long = "é".repeat(300);
    let mut events = start();
    events.push(json!({"type": "tool.start", "toolId": "c", "runId": "r", "toolName": "t"}));
    events.push(json!({"type": "tool.end", "toolId": "c"}));
    events.push(json!({"type": "tool.result", "toolId": "c", "result": long}));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(out[2]["data"]["toolDescription"], "t");
    let summary = out[3]["data"]["summary"].as_str().unwrap();
    assert_eq!(summary.chars().count(), SUMMARY_CHARS + 1);
    assert!(summary.ends_with('…'));
}

#[test]
fn citations_follow_their_text_with_or_without_details() {
    let mut events = start();
    events.push(json!({"type": "content.start", "contentId": "r_c_1", "runId": "r"}));
    events.push(json!({"type": "content.delta", "contentId": "r_c_1", "delta": "Alice said so."}));
    // A citation as the engine emits it, after the text it belongs to.
    let citation = crate::event::ContentCitation {
        content_id: "r_c_1".into(),
        index: 0,
        record: crate::citation::CitationRecord {
            message_id: "361".into(),
            content: Some("ship it".into()),
            sender_name: Some("Alice".into()),
            timestamp: Some(1_700_000_000_000),
            chat_id: Some("g1".into()),
            ..Default::default()
        },
        offset: 14,
        tool_id: Some("call_1".into()),
    };
    let citation = Event::new(9, 0, citation);
    let mut mapper = default_mapper();
    let mut out = run(&mut mapper, &events);
    assert_eq!(out.last().unwrap()["type"], "text");
    mapper.map(&citation, &mut out);
    assert_eq!(
        out.last().unwrap(),
        &json!({"type": "citation", "phase": "generating", "data": {"index": 0, "messageId": "361",
            "content": "ship it", "senderName": "Alice", "timestamp": 1700000000000_i64, "chatId": "g1"}})
    );
    let options = PhaseOptions { detailed_citations: false, ..PhaseOptions::default() };
    let mut mapper = PhaseMapper::new(options, None, PhaseMessages::default());
    run(&mut mapper, &events);
    out.clear();
    mapper.map(&citation, &mut out);
    assert_eq!(out.last().unwrap()["data"], json!({"index": 0, "messageId": "361"}));
}

#[test]
fn children_show_nothing_and_the_parents_agent_invoke_is_an_ordinary_tool() {
    let mut mapper = default_mapper();
    let mut out = Vec::new();
    for event in crate::adapters::children_run() {
        mapper.map(&event, &mut out);
    }
    let starts: Vec<&Value> = out.iter().filter(|l| l["type"] == "tool_start").collect();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["data"]["toolName"], "agent_invoke");
    let text: String =
        out.iter().filter(|l| l["type"] == "text").map(|l| l["data"]["content"].as_str().unwrap()).collect();
    assert_eq!(text, "Team done.", "no child text");
    assert_eq!(types(&out).iter().filter(|t| *t == "tool_end").count(), 1);
    assert_eq!(phases(&out), ["thinking", "tool_calling", "generating", "completed"]);
}

#[test]
fn a_frontend_call_and_an_approval_ask_for_input() {
    let mut events = start();
    events.push(json!({"type": "tool.start", "toolId": "f1", "runId": "r", "toolName": "confirm_dialog",
        "toolType": "html", "toolKey": "confirm_dialog", "toolTimeout": 1000}));
    events.push(json!({"type": "tool.args", "toolId": "f1", "delta": "{\"q\":1}", "chunkIndex": 0}));
    events.push(json!({"type": "tool.end", "toolId": "f1"}));
    // After a restart the same wait is announced again as a form: not twice.
    events.push(json!({"type": "awaiting.ask", "awaitingId": "f1", "runId": "r", "mode": "form", "timeout": 1000,
        "toolName": "confirm_dialog"}));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(types(&out), ["phase_change", "phase_change", "tool_start", "input_required"]);
    assert_eq!(
        out[3],
        json!({"type": "input_required", "phase": "tool_calling", "data": {"runId": "r", "toolId": "f1",
            "toolName": "confirm_dialog", "kind": "frontend", "params": {"q": 1}, "toolKey": "confirm_dialog",
            "toolType": "html"}})
    );

    let mut events = start();
    events.extend(tool("call_b", "_bash_", r#"{"command":"ls"}"#));
    events.push(json!({"type": "awaiting.ask", "awaitingId": "call_b", "runId": "r", "mode": "approval",
        "timeout": 60000, "approvals": [{"id": "call_b", "command": "ls", "options": [
            {"label": "Allow once", "decision": "once", "description": "run it"},
            {"label": "Reject", "decision": "reject", "description": "do not"}],
        "allowFreeText": false, "toolName": "_bash_", "arguments": {"command": "ls"}, "rule": "_bash_"}]}));
    let out = run(&mut default_mapper(), &events);
    let ask = out.last().unwrap();
    assert_eq!((ask["type"].as_str(), ask["phase"].as_str()), (Some("input_required"), Some("tool_calling")));
    assert_eq!(ask["data"]["kind"], "approval");
    assert_eq!(ask["data"]["toolId"], "call_b");
    assert_eq!(ask["data"]["toolName"], "_bash_");
    assert_eq!(ask["data"]["options"][0]["decision"], "once");
    assert_eq!(ask["data"]["params"], json!({"command": "ls"}));
}

#[test]
fn a_paused_tool_asks_for_input_with_its_status_once_per_pause() {
    let mut events = start();
    events.extend(tool("call_i", "mock_image_generate", r#"{"prompt":"fox"}"#));
    let ask = json!({"type": "awaiting.ask", "awaitingId": "call_i", "runId": "r", "mode": "status", "timeout": 60000,
        "toolName": "mock_image_generate", "arguments": {"prompt": "fox"},
        "status": {"code": -1002, "message": "Not enough credits to generate an image", "data": {"balance": 0, "price": 10}},
        "options": [{"label": "Continue", "action": "continue", "description": "again"},
            {"label": "Cancel", "action": "cancel", "description": "no"}]});
    events.push(ask.clone());
    // Attached again after a restart: the same pause, not shown twice.
    events.push(ask.clone());
    let mut mapper = default_mapper();
    let out = run(&mut mapper, &events);
    assert_eq!(types(&out), ["phase_change", "phase_change", "tool_start", "input_required"]);
    assert_eq!(
        out[3],
        json!({"type": "input_required", "phase": "tool_calling", "data": {"runId": "r", "toolId": "call_i",
            "toolName": "mock_image_generate", "kind": "status", "timeout": 60000, "params": {"prompt": "fox"},
            "code": -1002, "message": "Not enough credits to generate an image", "data": {"balance": 0, "price": 10},
            "options": [{"label": "Continue", "action": "continue", "description": "again"},
                {"label": "Cancel", "action": "cancel", "description": "no"}]}})
    );
    // Continued, and paused again: asked again.
    let again = run(
        &mut mapper,
        &[
            json!({"type": "awaiting.answer", "awaitingId": "call_i", "answer": {"mode": "status", "action": "continue"}}),
            ask,
        ],
    );
    assert_eq!(types(&again), ["input_required"]);
}

#[test]
fn a_childs_wait_for_a_person_is_announced_with_its_task() {
    let mut events = start();
    events.push(json!({"type": "tool.start", "toolId": "t1_f", "runId": "r", "taskId": "t1",
        "toolName": "confirm_dialog", "toolKey": "confirm_dialog"}));
    events.push(json!({"type": "tool.end", "toolId": "t1_f", "taskId": "t1"}));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(types(&out), ["phase_change", "input_required"]);
    assert_eq!(out[1]["data"]["taskId"], "t1");
}

#[test]
fn errors_and_cancels_end_the_stream() {
    let mut events = start();
    events.extend(text("r_c_1", &["par"]));
    events.push(json!({"type": "run.error", "runId": "r",
        "error": {"code": "provider_timeout", "message": "slow", "retriable": true}}));
    events.extend(text("r_c_2", &["late"]));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(phases(&out), ["thinking", "generating", "error"]);
    assert_eq!(
        out.last().unwrap(),
        &json!({"type": "error", "phase": "error", "data": {"code": "provider_timeout", "message": "slow",
            "recoverable": true}})
    );
    assert_eq!(out[out.len() - 2]["data"]["message"], "出错了");

    let mut events = start();
    events.push(json!({"type": "run.cancel", "runId": "r"}));
    events.push(complete(None));
    let mut mapper = default_mapper();
    let out = run(&mut mapper, &events);
    assert!(mapper.is_finished());
    assert_eq!(types(&out), ["phase_change", "phase_change", "done"]);
    assert_eq!(out[2]["data"]["finishReason"], "cancelled");
}

#[test]
fn stats_come_from_the_runs_usage() {
    let mut events = start();
    events.extend(text("r_c_1", &["hi"]));
    events.push(complete(Some(json!({"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, "calls": 3,
        "byModel": []}))));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(out.last().unwrap()["data"]["stats"], json!({"totalTokens": 15, "iterations": 3}));
}

#[test]
fn agent_messages_override_the_built_in_ones() {
    let own = BTreeMap::from([("en".to_owned(), BTreeMap::from([(Phase::Thinking, "Hmm".to_owned())]))]);
    let mut mapper = PhaseMapper::new(PhaseOptions::default(), Some("en-GB".into()), PhaseMessages::new(own));
    let out = run(&mut mapper, &start());
    assert_eq!(out[0]["data"]["message"], "Hmm");
}

#[test]
fn what_the_stream_does_not_show_produces_nothing() {
    let mut events = start();
    events.push(json!({"type": "chat.start", "chatId": "c", "chatName": "x"}));
    events.push(json!({"type": "plan.update", "planId": "p", "chatId": "c", "plan": []}));
    events.push(json!({"type": "request.steer", "chatId": "c", "runId": "r", "steerId": "s", "message": "m",
        "role": "user"}));
    events.push(json!({"type": "context.compact", "runId": "r", "level": "prune", "tokensBefore": 1,
        "tokensAfter": 1, "budget": 1, "durationMs": 1}));
    events.push(json!({"type": "task.start", "taskId": "t", "runId": "r"}));
    events.push(json!({"type": "task.complete", "taskId": "t"}));
    let out = run(&mut default_mapper(), &events);
    assert_eq!(types(&out), ["phase_change"]);
}

/// A sequential PLAN_EXECUTE task names itself in its leaf starts (`tool.start.taskId`), but it
/// is the run's own work: its tool calls and text are shown. Plan tasks that run beside each
/// other are children and are not.
#[test]
fn a_sequential_plan_tasks_work_is_shown_and_a_parallel_rounds_is_not() {
    let mut mapper = default_mapper();
    let mut events = vec![
        json!({"type": "run.start", "runId": "r", "chatId": "c"}),
        json!({"type": "task.start", "taskId": "t1", "runId": "r"}),
    ];
    let mut call = tool("call_1", "mock_city_weather", "{\"city\":\"Rome\"}");
    call[0]["taskId"] = json!("t1");
    events.extend(call);
    events.push(json!({"type": "tool.result", "toolId": "call_1", "result": "{\"temp\":21}"}));
    events.push(json!({"type": "task.complete", "taskId": "t1"}));
    let out = run(&mut mapper, &events);
    let starts: Vec<&Value> = out.iter().filter(|l| l["type"] == "tool_start").collect();
    assert_eq!(starts.len(), 1, "{out:?}");
    assert_eq!(starts[0]["data"]["toolName"], "mock_city_weather");
    assert_eq!(starts[0]["data"]["params"], json!({"city": "Rome"}));
    assert_eq!(out.iter().filter(|l| l["type"] == "tool_end").count(), 1);

    // A parallel round: the second task.start while the first is open makes both children.
    let mut mapper = default_mapper();
    let mut events = vec![
        json!({"type": "run.start", "runId": "r", "chatId": "c"}),
        json!({"type": "task.start", "taskId": "t1", "runId": "r"}),
        json!({"type": "task.start", "taskId": "t2", "runId": "r"}),
    ];
    let mut call = tool("t1_call_1", "mock_city_weather", "{}");
    call[0]["taskId"] = json!("t1");
    call[1]["taskId"] = json!("t1");
    call[2]["taskId"] = json!("t1");
    events.extend(call);
    events.push(json!({"type": "content.start", "contentId": "r_t2_c_1", "runId": "r", "taskId": "t2"}));
    events.push(json!({"type": "content.delta", "contentId": "r_t2_c_1", "delta": "child text", "taskId": "t2"}));
    let out = run(&mut mapper, &events);
    assert_eq!(types(&out), ["phase_change"], "{out:?}");
}

/// Issue 36: a guard's lines carry the phase the run is in; a revoke says which text to take back
/// (offset and length into the text sent); a tool stage's line names the call, and is sent only
/// with `showToolCalls`; a child's is not sent; the run's error ends the stream.
#[test]
fn guard_lines_say_what_to_take_back_and_keep_the_phase() {
    let mut mapper = default_mapper();
    let mut out = Vec::new();
    for event in crate::adapters::guarded_run() {
        mapper.map(&event, &mut out);
    }
    let guarded: Vec<String> = out
        .iter()
        .filter(|l| ["revoke", "warning", "block"].contains(&l["type"].as_str().unwrap()))
        .map(Value::to_string)
        .collect();
    assert_eq!(
        guarded,
        [
            r#"{"type":"warning","phase":"tool_calling","data":{"stage":"toolInput","guard":"rules:demo","rule":"r1","message":"careful","toolId":"t1","statusCode":-1007,"toolName":"lookup"}}"#,
            r#"{"type":"warning","phase":"generating","data":{"stage":"output","guard":"rules:demo","rule":"r1","message":"careful","statusCode":-1007}}"#,
            r#"{"type":"revoke","phase":"generating","data":{"stage":"output","guard":"rules:pii","rule":"email","reason":"personal data","statusCode":-1006,"offset":13,"length":18}}"#,
        ]
    );
    assert_eq!(types(&out[out.len() - 3..]), ["revoke", "phase_change", "error"]);
    assert_eq!(out.last().unwrap()["data"]["code"], "guardrail_blocked");

    let options = PhaseOptions { show_tool_calls: false, ..PhaseOptions::default() };
    let mut quiet = PhaseMapper::new(options, None, PhaseMessages::default());
    let mut out = Vec::new();
    for event in crate::adapters::guarded_run() {
        quiet.map(&event, &mut out);
    }
    let kinds = types(&out);
    assert_eq!(kinds.iter().filter(|k| *k == "warning").count(), 1, "only the answer's: {kinds:?}");
}

#[test]
fn a_structured_answer_is_the_designs_structured_line_before_done() {
    let mut events = start();
    events.extend(text("r_c_1", &["{\"n\":", "3}"]));
    let mut done = complete(None);
    done["output"] = json!({"n": 3});
    events.push(done);
    let out = run(&mut default_mapper(), &events);
    let n = out.len();
    assert_eq!(types(&out)[n - 3..], ["structured", "phase_change", "done"]);
    assert_eq!(
        out[n - 3],
        json!({"type": "structured", "phase": "generating", "data": {"dataType": "output", "output": {"n": 3}}})
    );
}
