//! Writers produce the contract's bytes; readers accept the legacy and foreign spellings.

use serde_json::json;

use super::*;
use crate::event::{PlanTask, TaskStatus};

/// The three lines of the worked example (`docs/contract/memory-jsonl.md` §9), verbatim.
pub(crate) const EXAMPLE_QUERY: &str = r#"{"_type":"query","chatId":"0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01","runId":"9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d","updatedAt":1771000101216,"query":{"requestId":"9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d","chatId":"0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01","agentKey":"weatherBot","role":"user","message":"上海现在几点？","references":null,"params":null,"scene":null,"stream":null}}"#;
pub(crate) const EXAMPLE_STEP_1: &str = r#"{"_type":"step","chatId":"0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01","runId":"9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d","_stage":"react","_seq":1,"updatedAt":1771000101216,"system":{"model":"qwen3-max","messages":[{"role":"system","content":"你是天气助手。"}],"tools":[{"type":"function","name":"city_datetime","description":"根据 city 查询当前日期和时间（实时系统时钟）","parameters":{"type":"object","properties":{"city":{"type":"string","description":"城市名称，例如 Shanghai、北京、东京"}},"additionalProperties":false}}],"stream":true},"messages":[{"role":"user","content":[{"type":"text","text":"上海现在几点？"}],"ts":1771000101215},{"role":"assistant","reasoning_content":[{"type":"text","text":"需要查询上海的实时时间。"}],"ts":1771000100700,"_reasoningId":"r_eab6f9c5","_msgId":"m_4c1d9e0a","_timing":400},{"role":"assistant","content":[{"type":"text","text":"我先查询上海当前时间。"}],"ts":1771000100900,"_contentId":"c_d648f345","_msgId":"m_4c1d9e0a","_timing":200},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"city_datetime","arguments":"{\"city\":\"Shanghai\"}"}}],"ts":1771000101210,"_msgId":"m_4c1d9e0a","_toolId":"call_1","_timing":110,"_usage":{"prompt_tokens":812,"completion_tokens":46,"total_tokens":858}},{"role":"tool","content":[{"type":"text","text":"{\"city\":\"Shanghai\",\"timezone\":\"UTC+8\",\"date\":\"2026-02-13\",\"weekday\":\"星期五\",\"lunarDate\":\"乙巳年腊月廿六\",\"time\":\"10:15:30\",\"iso\":\"2026-02-13T10:15:30.123456+08:00\",\"source\":\"system-clock\"}"}],"ts":1771000101210,"name":"city_datetime","tool_call_id":"call_1","_toolId":"call_1","_timing":110}]}"#;
pub(crate) const EXAMPLE_STEP_2: &str = r#"{"_type":"step","chatId":"0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01","runId":"9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d","_stage":"react","_seq":2,"updatedAt":1771000102306,"messages":[{"role":"assistant","reasoning_content":[{"type":"text","text":"已拿到时间，直接回答。"}],"ts":1771000101900,"_reasoningId":"r_07f7aed8","_msgId":"m_b71f3a22","_timing":405},{"role":"assistant","content":[{"type":"text","text":"上海现在是 2026-02-13（星期五） 10:15:30。"}],"ts":1771000102100,"_contentId":"c_80efcabb","_msgId":"m_b71f3a22","_timing":205,"_usage":{"prompt_tokens":1020,"completion_tokens":38,"total_tokens":1058}}]}"#;

pub(crate) fn parse(text: &str) -> HistoryLine {
    HistoryLine::parse(text).expect("valid line").expect("known line type")
}

fn step(text: &str) -> StepLine {
    match parse(text) {
        HistoryLine::Step(step) => step,
        _ => panic!("expected a step line"),
    }
}

#[test]
fn worked_example_round_trips_byte_for_byte() {
    for line in [EXAMPLE_QUERY, EXAMPLE_STEP_1, EXAMPLE_STEP_2] {
        assert_eq!(parse(line).to_json().expect("serialise"), line);
    }
}

#[test]
fn worked_example_parses_into_the_expected_fields() {
    let HistoryLine::Query(query) = parse(EXAMPLE_QUERY) else { panic!("query line") };
    assert_eq!(query.updated_at, 1771000101216);
    assert_eq!(query.query.message.as_deref(), Some("上海现在几点？"));
    assert_eq!(query.query.agent_key.as_deref(), Some("weatherBot"));

    let step = step(EXAMPLE_STEP_1);
    assert_eq!((step.stage.as_str(), step.seq), ("react", 1));
    let system = step.system.as_ref().expect("system");
    assert_eq!(system.model.as_deref(), Some("qwen3-max"));
    assert!(system.stream);
    assert_eq!(step.messages.len(), 5);
    assert_eq!(step.messages[1].reasoning(), Some("需要查询上海的实时时间。"));
    let call = &step.messages[3].calls()[0];
    assert_eq!(
        (call.id.as_str(), call.call_type.as_str(), call.function.name.as_str()),
        ("call_1", "function", "city_datetime")
    );
    assert_eq!(step.messages[3].usage, Some(json!({"prompt_tokens":812,"completion_tokens":46,"total_tokens":858})));
    assert_eq!(step.messages[4].tool_call_id.as_deref(), Some("call_1"));
}

#[test]
fn built_lines_use_the_contract_key_order_and_omit_nulls() {
    let line = HistoryLine::Step(StepLine {
        chat_id: "c".into(),
        run_id: "r".into(),
        stage: Stage::Execute.to_string(),
        seq: 2,
        task_id: Some("task0".into()),
        updated_at: 5,
        system: None,
        plan: Some(PlanSnapshot::new(
            "plan_1",
            vec![PlanTask { task_id: "t1".into(), description: "d".into(), status: TaskStatus::Completed }],
        )),
        messages: vec![
            StoredMessage::user("hi", 4),
            StoredMessage {
                role: ROLE_TOOL.into(),
                content: Some(String::new()),
                ts: Some(3),
                name: Some("n".into()),
                tool_call_id: Some("call".into()),
                action_id: Some("call".into()),
                ..StoredMessage::default()
            },
        ],
        compactions: Vec::new(),
        guards: Vec::new(),
        run_usage: None,
        run_cost: None,
        run_output: None,
        sub_agent: None,
        handoff: None,
    });
    assert_eq!(
        line.to_json().expect("serialise"),
        r#"{"_type":"step","chatId":"c","runId":"r","_stage":"execute","_seq":2,"taskId":"task0","updatedAt":5,"plan":{"planId":"plan_1","tasks":[{"taskId":"t1","description":"d","status":"completed"}]},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"ts":4},{"role":"tool","content":[{"type":"text","text":""}],"ts":3,"name":"n","tool_call_id":"call","_actionId":"call"}]}"#
    );
}

/// Issue 36: a revoked content message keeps its text and says why (`_revoked`, last); a step
/// keeps its warnings and blocks in `_guards` (`type` and the event's fields after `at` and
/// `ts`), and both read back; a record that does not parse is dropped alone.
#[test]
fn revoked_messages_and_guard_records_are_written_and_read_back() {
    use crate::event::{GuardBlock, GuardWarning};
    use crate::guard::{GuardStage, Revocation};
    let revoked = StoredMessage {
        role: "assistant".into(),
        content: Some("call me at".into()),
        ts: Some(3),
        content_id: Some("r_c_1".into()),
        revoked: Some(Revocation { guard: "rules:pii".into(), rule: Some("phone".into()), reason: "pii".into() }),
        ..StoredMessage::default()
    };
    let warning = GuardWarning {
        stage: GuardStage::Output,
        guard: "webhook".into(),
        rule: None,
        message: "m".into(),
        content_id: Some("r_c_1".into()),
        tool_id: None,
        status_code: -1007,
    };
    let block = GuardBlock {
        stage: GuardStage::ToolInput,
        guard: "rules:shell".into(),
        rule: Some("rm".into()),
        reason: "no".into(),
        tool_id: Some("call_1".into()),
        status_code: -1006,
    };
    let line = HistoryLine::Step(StepLine {
        chat_id: "c".into(),
        run_id: "r".into(),
        stage: "react".into(),
        seq: 1,
        updated_at: 9,
        messages: vec![StoredMessage::user("hi", 4), revoked],
        guards: vec![
            StepGuard { at: 2, ts: 5, event: GuardEvent::Warning(warning) },
            StepGuard { at: 2, ts: 6, event: GuardEvent::Block(block) },
        ],
        ..StepLine::default()
    });
    let text = line.to_json().expect("serialise");
    assert_eq!(
        text,
        r#"{"_type":"step","chatId":"c","runId":"r","_stage":"react","_seq":1,"updatedAt":9,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"ts":4},{"role":"assistant","content":[{"type":"text","text":"call me at"}],"ts":3,"_contentId":"r_c_1","_revoked":{"guard":"rules:pii","rule":"phone","reason":"pii"}}],"_guards":[{"at":2,"ts":5,"type":"guard.warning","stage":"output","guard":"webhook","message":"m","contentId":"r_c_1","statusCode":-1007},{"at":2,"ts":6,"type":"guard.block","stage":"toolInput","guard":"rules:shell","rule":"rm","reason":"no","toolId":"call_1","statusCode":-1006}]}"#
    );
    assert_eq!(HistoryLine::parse(&text).expect("parse"), Some(line.clone()));
    assert!(line.as_step().expect("step").messages[1].is_revoked());
    // An unknown record type or a broken record is dropped; the rest of the line survives.
    let odd = text.replace(r#""type":"guard.block""#, r#""type":"guard.other""#);
    let step = HistoryLine::parse(&odd).expect("parse").expect("known");
    assert_eq!(step.as_step().expect("step").guards.len(), 1);
}

#[test]
fn steered_user_messages_write_their_ids_last_and_read_back() {
    let steer = StoredMessage::steer("改用华氏度", 7, "steer_1", Some("req_2".into()));
    let text = serde_json::to_string(&steer).expect("serialise");
    assert_eq!(
        text,
        r#"{"role":"user","content":[{"type":"text","text":"改用华氏度"}],"ts":7,"_steerId":"steer_1","_requestId":"req_2"}"#
    );
    assert_eq!(serde_json::from_str::<StoredMessage>(&text).expect("parse"), steer);
    assert_eq!(steer.steer_id(), Some("steer_1"));
    let plain = StoredMessage::steer("m", 7, "steer_1", None);
    assert_eq!(
        serde_json::to_string(&plain).expect("serialise"),
        r#"{"role":"user","content":[{"type":"text","text":"m"}],"ts":7,"_steerId":"steer_1"}"#
    );
    // A user message without the key (every file written before steers) is not a steer; the key
    // means nothing on other roles or when blank.
    let old: StoredMessage =
        serde_json::from_str(r#"{"role":"user","content":[{"type":"text","text":"m"}],"ts":7}"#).expect("parse");
    assert_eq!((old.steer_id(), old.steer_id.as_deref(), old.request_id.as_deref()), (None, None, None));
    let odd: StoredMessage =
        serde_json::from_str(r#"{"role":"assistant","content":"x","_steerId":"s"}"#).expect("parse");
    assert_eq!(odd.steer_id(), None);
    let blank: StoredMessage = serde_json::from_str(r#"{"role":"user","content":"x","_steerId":" "}"#).expect("parse");
    assert_eq!(blank.steer_id(), None);
}

#[test]
fn ignored_and_invalid_lines() {
    for ignored in ["", "   ", "5", "[1,2]", "\"text\"", r#"{"_type":"other","runId":"r"}"#, r#"{"runId":"r"}"#] {
        assert_eq!(HistoryLine::parse(ignored).expect("not an error"), None, "{ignored:?}");
    }
    for invalid in [r#"{"_type":"step","chatId":"c","#, "{", "not json", r#"{"_type":"step","_seq":"one"}"#] {
        assert!(HistoryLine::parse(invalid).is_err(), "{invalid:?}");
    }
}

#[test]
fn legacy_plan_snapshot_key_inner_plan_key_and_statuses() {
    let step = step(
        r#"{"_type":"step","chatId":"c","runId":"r","_stage":"plan","_seq":1,"updatedAt":1,
        "planSnapshot":{"planId":"plan_chat_001","plan":[{"taskId":"task0","description":"a","status":"init"},
        {"taskId":"task1","description":"b","status":"in_progress"},{"description":"no id"},
        {"taskId":"task2","status":"weird"}]},"messages":[]}"#,
    );
    let plan = step.plan.expect("legacy plan read");
    assert_eq!(plan.plan_id, "plan_chat_001");
    let statuses: Vec<_> = plan.tasks.iter().map(|t| (t.task_id.as_str(), t.status)).collect();
    assert_eq!(statuses, [("task0", TaskStatus::Init), ("task1", TaskStatus::Init), ("task2", TaskStatus::Init)]);
    // re-written with the current keys
    let text = HistoryLine::Step(StepLine { plan: Some(plan), ..StepLine::default() }).to_json().expect("json");
    assert!(
        text.contains(
            r#""plan":{"planId":"plan_chat_001","tasks":[{"taskId":"task0","description":"a","status":"init"}"#
        ),
        "{text}"
    );
}

#[test]
fn empty_or_malformed_plan_and_system_are_dropped_alone() {
    let step = step(
        r#"{"_type":"step","runId":"r","_seq":1,"plan":{"planId":"p","tasks":[]},"planSnapshot":"bad",
        "system":{"stream":"yes"},"messages":[{"role":"user","content":"plain string"},{"role":"assistant","ts":"bad"},
        7,{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}]}"#,
    );
    assert_eq!(step.plan, None);
    assert_eq!(step.system, None);
    let texts: Vec<_> = step.messages.iter().map(StoredMessage::text).collect();
    assert_eq!(texts, ["plain string", "ab"]);
}

#[test]
fn unknown_keys_are_ignored_everywhere() {
    let step = step(
        r#"{"_type":"step","chatId":"c","runId":"r","_stage":"oneshot","_seq":1,"updatedAt":1,"extra":{"x":1},
        "system":{"model":"m","stream":true,"future":1,"tools":[{"type":"function","name":"t","x":1}]},
        "plan":{"planId":"p","tasks":[{"taskId":"t","description":"d","status":"completed","extra":true}],"y":2},
        "messages":[{"role":"assistant","tool_calls":[{"id":"call","type":"function","function":{"name":"n","arguments":"{}","z":1},"w":2}],"_future":3}]}"#,
    );
    assert_eq!(step.system.as_ref().map(|s| s.tools.len()), Some(1));
    assert_eq!(step.plan.as_ref().map(|p| p.tasks[0].status), Some(TaskStatus::Completed));
    assert_eq!(step.messages[0].calls()[0].function.arguments, "{}");
}

#[test]
fn legacy_call_level_ids_and_usage_placeholder() {
    let step = step(
        r#"{"_type":"step","runId":"r","_seq":1,"messages":[{"role":"assistant","tool_calls":[{"id":"call_a",
        "function":{"name":"switch_frontend_theme","arguments":{"theme":"dark"}},"_actionId":"a_1234abcd"}],
        "_usage":{"input_tokens":null,"output_tokens":null,"total_tokens":null}}]}"#,
    );
    let message = &step.messages[0];
    assert_eq!(message.usage, None);
    let call = &message.calls()[0];
    assert_eq!(call.call_type, "function");
    assert_eq!(call.legacy_action_id.as_deref(), Some("a_1234abcd"));
    assert_eq!(call.function.arguments, r#"{"theme":"dark"}"#);
}

#[test]
fn null_values_read_as_absent() {
    let HistoryLine::Query(query) =
        parse(r#"{"_type":"query","chatId":null,"runId":"r","updatedAt":null,"query":null}"#)
    else {
        panic!("query line")
    };
    assert_eq!((query.chat_id.as_str(), query.updated_at, query.query.message.clone()), ("", 0, None));
    let step = step(r#"{"_type":"step","runId":"r","_seq":null,"messages":null,"system":null}"#);
    assert!(step.messages.is_empty());
}

#[test]
fn latest_plan_and_latest_system() {
    let plan_step = |seq: i64, status: &str| {
        parse(&format!(
            r#"{{"_type":"step","runId":"r","_seq":{seq},"plan":{{"planId":"plan_chat_001","tasks":[{{"taskId":"task0","status":"completed"}},{{"taskId":"task1","status":"{status}"}}]}},"system":{{"model":"m{seq}"}},"messages":[]}}"#
        ))
    };
    let lines = vec![
        plan_step(1, "init"),
        plan_step(2, "in_progress"),
        parse(r#"{"_type":"step","runId":"r","_seq":3,"messages":[]}"#),
    ];
    let plan = latest_plan(&lines).expect("a plan");
    assert_eq!(plan.tasks.iter().map(|t| t.status).collect::<Vec<_>>(), [TaskStatus::Completed, TaskStatus::Init]);
    assert_eq!(latest_system(&lines).and_then(|s| s.model.as_deref()), Some("m2"));
    assert_eq!(latest_plan(&lines[2..]), None);
}

#[test]
fn system_snapshot_rules_and_json_equality() {
    let tool = |name: &str, description: &str, params: serde_json::Value| SystemTool {
        tool_type: "function".into(),
        name: name.into(),
        description: Some(description.into()),
        parameters: Some(params),
    };
    let a = SystemSnapshot::new(
        Some("gpt-5.2".into()),
        "prompt",
        vec![tool("b", " ", json!({"type":"object","properties":{}})), tool("a", "A", json!({}))],
        None,
    );
    assert_eq!(a.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(a.tools[1].description, None);
    assert!(a.stream);
    // key order inside parameters does not matter
    let same = SystemSnapshot::new(
        Some("gpt-5.2".into()),
        "prompt",
        vec![tool("a", "A", json!({})), tool("b", "", json!({"properties":{},"type":"object"}))],
        Some(true),
    );
    assert_eq!(a, same);
    let other_prompt = SystemSnapshot::new(Some("gpt-5.2".into()), "other", Vec::new(), None);
    assert_ne!(a, other_prompt);
    assert_ne!(Some(&a), None);
    // blank prompt: no messages key at all
    let blank = SystemSnapshot::new(Some("m".into()), "  ", Vec::new(), Some(false));
    assert_eq!(serde_json::to_string(&blank).expect("json"), r#"{"model":"m","stream":false}"#);
}

#[test]
fn stage_markers() {
    let cases = [
        ("oneshot", Some(Stage::Oneshot)),
        ("react-step-3", Some(Stage::React)),
        ("plan-draft", Some(Stage::Plan)),
        ("plan-generate", Some(Stage::Plan)),
        ("execute-task-2", Some(Stage::Execute)),
        ("summary", Some(Stage::Summary)),
        ("whatever", None),
    ];
    for (marker, stage) in cases {
        assert_eq!(Stage::from_marker(marker), stage, "{marker}");
    }
}

#[test]
fn approval_lines_parse_and_round_trip_and_replay_skips_them() {
    let text = r#"{"_type":"approval","chatId":"c","runId":"r","updatedAt":5,"rule":"_bash_:git push*","toolName":"_bash_","decision":"always"}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    let approval = line.as_approval().expect("an approval line");
    assert_eq!((approval.rule.as_str(), line.chat_id(), line.run_id()), ("_bash_:git push*", "c", "r"));
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");
    assert!(line.as_step().is_none() && line.as_query().is_none());
    assert!(!approval.remembers("a", "_bash_", "_bash_:git push*"), "a line of the earlier format names no agent");
    assert!(crate::replay_chat("c", None, &[line], 1).is_empty(), "not part of what was said");

    let text = r#"{"_type":"approval","chatId":"c","runId":"r","updatedAt":5,"rule":"*","toolName":"mock_w","decision":"always","agentKey":"a"}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");
    let approval = line.as_approval().unwrap();
    assert!(approval.remembers("a", "mock_w", "*"));
    assert!(!approval.remembers("b", "mock_w", "*"), "another agent");
    assert!(!approval.remembers("a", "_bash_", "*"), "another tool under the same rule");
    assert!(!approval.remembers("a", "mock_w", "mock_*"), "another rule");
}

#[test]
fn awaiting_lines_parse_and_round_trip_and_replay_skips_them() {
    let text = r#"{"_type":"awaiting","chatId":"c","runId":"r","updatedAt":5,"awaitingId":"call_1","lastSeq":9,"timeoutAt":300005,"resumeAt":"react-step-1","calls":[{"id":"call_1","name":"confirm_dialog","arguments":"{}"}],"results":[],"ask":{"awaitingId":"call_1","runId":"r","mode":"form","timeout":300000,"toolName":"confirm_dialog","arguments":{},"viewportType":"html","viewportKey":"confirm_dialog"},"query":{"requestId":"r","chatId":"c","agentKey":null,"role":"user","message":"q","references":null,"params":null,"scene":null,"stream":null},"stepsWritten":0,"step":{"stage":"react","messages":[],"calls":[{"id":"call_1","name":"confirm_dialog","callType":"function","arguments":"{}","ts":4,"msgId":"m_1"}]}}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    let awaiting = line.as_awaiting().expect("an awaiting line");
    assert_eq!((awaiting.awaiting_id.as_str(), awaiting.last_seq, line.run_id()), ("call_1", 9, "r"));
    assert_eq!(awaiting.step.calls[0].name.as_deref(), Some("confirm_dialog"));
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");
    assert!(crate::replay_chat("c", None, &[line], 1).is_empty(), "run state, not part of what was said");
}

#[test]
fn a_status_wait_records_its_kind_and_how_often_the_call_was_continued() {
    let text = r#"{"_type":"awaiting","chatId":"c","runId":"r","updatedAt":5,"awaitingId":"call_i","lastSeq":9,"timeoutAt":300005,"resumeAt":"react-step-1","calls":[{"id":"call_i","name":"mock_image_generate","arguments":"{\"prompt\":\"fox\"}","streamedAs":"tool"}],"results":[],"ask":{"awaitingId":"call_i","runId":"r","mode":"status","timeout":300000,"toolName":"mock_image_generate","arguments":{"prompt":"fox"},"status":{"code":-1002,"message":"Not enough credits to generate an image","data":{"balance":0,"price":10}},"options":[{"label":"Continue","action":"continue","description":"d"},{"label":"Cancel","action":"cancel","description":"e"}]},"continued":1,"query":{"requestId":"r","chatId":"c","agentKey":null,"role":"user","message":"q","references":null,"params":null,"scene":null,"stream":null},"stepsWritten":0,"step":{"stage":"react","messages":[],"calls":[]}}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    let awaiting = line.as_awaiting().expect("an awaiting line");
    assert_eq!(awaiting.kind(), WaitKind::Status { continued: 1 });
    let status = awaiting.ask.status.as_ref().expect("the status");
    assert_eq!((status.code, status.data["price"].as_u64()), (-1002, Some(10)));
    assert_eq!(awaiting.ask.options[0].action, "continue");
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");

    // Lines of before: no `continued`, kinds from the mode.
    let mut first = awaiting.clone();
    first.continued = 0;
    let written = HistoryLine::Awaiting(Box::new(first.clone())).to_json().unwrap();
    assert!(!written.contains("\"continued\""), "0 is not written");
    assert_eq!(first.kind(), WaitKind::Status { continued: 0 });
    for (mode, kind) in [("form", WaitKind::Form), ("approval", WaitKind::Approval), ("later", WaitKind::Form)] {
        first.ask.mode = mode.into();
        assert_eq!(first.kind(), kind, "{mode}");
        assert_eq!(kind.continued(), 0);
    }
}

#[test]
fn resume_positions_are_typed_and_written_as_read() {
    let cases = [
        ("react-step-1", ResumeAt::ReactStep(1)),
        ("react-step-12", ResumeAt::ReactStep(12)),
        ("oneshot", ResumeAt::Oneshot),
        ("", ResumeAt::Nowhere),
        ("execute-task-2", ResumeAt::ExecuteTask(2)),
        // Not this version's spelling of a position: kept as written, continued nowhere.
        ("execute-task-02", ResumeAt::Unknown("execute-task-02".into())),
        ("react-step-", ResumeAt::Unknown("react-step-".into())),
        ("react-step-01", ResumeAt::Unknown("react-step-01".into())),
        ("react-step-+1", ResumeAt::Unknown("react-step-+1".into())),
        ("react-step-99999999999", ResumeAt::Unknown("react-step-99999999999".into())),
    ];
    for (text, position) in cases {
        assert_eq!(ResumeAt::parse(text), position, "{text:?}");
        assert_eq!(position.to_string(), text);
    }
    // In an awaiting line (old files): each value loads, and the line is written exactly as read.
    let line = |resume_at: &str| {
        format!(
            r#"{{"_type":"awaiting","chatId":"c","runId":"r","updatedAt":5,"awaitingId":"call_1","lastSeq":9,"timeoutAt":300005,"resumeAt":"{resume_at}","calls":[],"results":[],"ask":{{"awaitingId":"call_1","runId":"r","mode":"form","timeout":300000,"toolName":"confirm_dialog","arguments":{{}},"viewportType":"html","viewportKey":"confirm_dialog"}},"query":{{"requestId":"r","chatId":"c","agentKey":null,"role":"user","message":"q","references":null,"params":null,"scene":null,"stream":null}},"stepsWritten":0,"step":{{"stage":"react","messages":[],"calls":[]}}}}"#
        )
    };
    for (text, position) in [
        ("react-step-1", ResumeAt::ReactStep(1)),
        ("", ResumeAt::Nowhere),
        ("plan-9", ResumeAt::Unknown("plan-9".into())),
    ] {
        let parsed = HistoryLine::parse(&line(text)).unwrap().unwrap();
        assert_eq!(parsed.as_awaiting().unwrap().resume_at, position, "{text:?}");
        assert_eq!(parsed.to_json().unwrap(), line(text), "{text:?} written exactly as read");
    }
    // A line without the key (the field's default) continues nowhere.
    let without = line("").replace(r#""resumeAt":"","#, "");
    let parsed = HistoryLine::parse(&without).unwrap().unwrap();
    assert_eq!(parsed.as_awaiting().unwrap().resume_at, ResumeAt::Nowhere);
}

#[test]
fn checkpoint_lines_parse_and_round_trip_and_replay_skips_them() {
    let text = r#"{"_type":"checkpoint","chatId":"c","runId":"r3","updatedAt":5,"throughRunId":"r1","summary":"Goals: …","tokensBefore":90000,"tokensAfter":12000}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    let checkpoint = line.as_checkpoint().expect("a checkpoint line");
    assert_eq!((checkpoint.through_run_id.as_str(), checkpoint.tokens_after, line.run_id()), ("r1", 12000, "r3"));
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");
    assert_eq!(crate::history::latest_checkpoint(std::slice::from_ref(&line)), Some(checkpoint));
    assert!(crate::replay_chat("c", None, &[line], 1).is_empty(), "memory, not part of what was said");
}

#[test]
fn step_compactions_round_trip_and_a_bad_one_is_dropped_alone() {
    let text = r#"{"_type":"step","chatId":"c","runId":"r","_stage":"react","_seq":1,"updatedAt":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"ts":4}],"_compactions":[{"at":1,"ts":4,"runId":"r","level":"prune","tokensBefore":100,"tokensAfter":60,"budget":120,"durationMs":0,"prunedResults":2}]}"#;
    let line = HistoryLine::parse(text).unwrap().unwrap();
    let step = line.as_step().expect("a step");
    assert_eq!(step.compactions.len(), 1);
    assert_eq!(step.compactions[0].event.level, crate::event::CompactLevel::Prune);
    assert_eq!(line.to_json().unwrap(), text, "written exactly as read");
    let broken = text.replace(r#""level":"prune""#, r#""level":"shrink""#);
    let line = HistoryLine::parse(&broken).unwrap().unwrap();
    let step = line.as_step().expect("still a step");
    assert!(step.compactions.is_empty() && step.messages.len() == 1, "the bad record goes, the step stays");
}
