use serde_json::{Map, json};

use super::*;
use crate::echoed::{Reference, Scene};
use crate::guard::GuardStage;

fn s(v: &str) -> String {
    v.to_owned()
}

fn some(v: &str) -> Option<String> {
    Some(v.to_owned())
}

/// One event of every type with its exact wire line. Optional fields are shown both present and
/// absent across the table.
fn catalogue() -> Vec<(Event, &'static str)> {
    let plan = vec![
        PlanTask { task_id: s("a1b2c3d4"), description: s("查询"), status: TaskStatus::Init },
        PlanTask { task_id: s("e5f6a7b8"), description: s("建议"), status: TaskStatus::Canceled },
    ];
    let ev = |payload: EventPayload| Event { seq: 3, timestamp: 1_771_000_000_000, payload, task_id: None };
    vec![
        (
            ev(RequestQuery {
                request_id: s("req"),
                chat_id: s("c"),
                role: s("user"),
                message: s("你好\n"),
                agent_key: some("auto"),
                references: Some(vec![Reference { id: some("ref_001"), size_bytes: Some(12), ..Reference::default() }]),
                params: Some(Map::from_iter([(s("k"), json!([1, null]))])),
                scene: Some(Scene { url: some("https://x"), title: None }),
                stream: Some(false),
            }
            .into()),
            r#"{"seq":3,"type":"request.query","timestamp":1771000000000,"requestId":"req","chatId":"c","role":"user","message":"你好\n","agentKey":"auto","references":[{"id":"ref_001","type":null,"name":null,"mimeType":null,"sizeBytes":12,"url":null,"sha256":null,"meta":null}],"params":{"k":[1,null]},"scene":{"url":"https://x","title":null},"stream":false}"#,
        ),
        (
            ev(RequestQuery {
                request_id: s("r"),
                chat_id: s("c"),
                role: s("user"),
                message: s("m"),
                agent_key: None,
                references: None,
                params: None,
                scene: None,
                stream: None,
            }
            .into()),
            r#"{"seq":3,"type":"request.query","timestamp":1771000000000,"requestId":"r","chatId":"c","role":"user","message":"m"}"#,
        ),
        (
            ev(RequestUpload {
                request_id: s("r"),
                chat_id: None,
                upload: Upload {
                    kind: s("file"),
                    name: s("a.pdf"),
                    size_bytes: 10,
                    mime_type: s("application/pdf"),
                    sha256: None,
                },
            }
            .into()),
            r#"{"seq":3,"type":"request.upload","timestamp":1771000000000,"requestId":"r","upload":{"type":"file","name":"a.pdf","sizeBytes":10,"mimeType":"application/pdf"}}"#,
        ),
        (
            ev(RequestSubmit {
                request_id: s("r"),
                chat_id: s("c"),
                run_id: s("run"),
                tool_id: s("t"),
                payload: json!({"ok":true}),
                view_id: some("v"),
            }
            .into()),
            r#"{"seq":3,"type":"request.submit","timestamp":1771000000000,"requestId":"r","chatId":"c","runId":"run","toolId":"t","payload":{"ok":true},"viewId":"v"}"#,
        ),
        (
            ev(RequestSteer {
                request_id: some("r"),
                chat_id: s("c"),
                run_id: s("run"),
                steer_id: s("steer_1"),
                message: s("改用摄氏度\n"),
                role: s("user"),
                task_id: some("t1"),
            }
            .into()),
            r#"{"seq":3,"type":"request.steer","timestamp":1771000000000,"requestId":"r","chatId":"c","runId":"run","steerId":"steer_1","message":"改用摄氏度\n","role":"user","taskId":"t1"}"#,
        ),
        (
            ev(RequestSteer {
                request_id: None,
                chat_id: s("c"),
                run_id: s("run"),
                steer_id: s("steer_1"),
                message: s("m"),
                role: s("user"),
                task_id: None,
            }
            .into()),
            r#"{"seq":3,"type":"request.steer","timestamp":1771000000000,"chatId":"c","runId":"run","steerId":"steer_1","message":"m","role":"user"}"#,
        ),
        (
            ev(ChatStart { chat_id: s("c"), chat_name: s("新对话") }.into()),
            r#"{"seq":3,"type":"chat.start","timestamp":1771000000000,"chatId":"c","chatName":"新对话"}"#,
        ),
        (
            ev(ChatUpdate { chat_id: s("c"), chat_name: None }.into()),
            r#"{"seq":3,"type":"chat.update","timestamp":1771000000000,"chatId":"c"}"#,
        ),
        (
            ev(RunStart { run_id: s("run"), chat_id: s("c") }.into()),
            r#"{"seq":3,"type":"run.start","timestamp":1771000000000,"runId":"run","chatId":"c"}"#,
        ),
        (
            ev(RunComplete { run_id: s("run"), finish_reason: s("stop"), output: None, totals: Default::default() }
                .into()),
            r#"{"seq":3,"type":"run.complete","timestamp":1771000000000,"runId":"run","finishReason":"stop"}"#,
        ),
        (
            ev(RunCancel { run_id: s("run"), totals: Default::default() }.into()),
            r#"{"seq":3,"type":"run.cancel","timestamp":1771000000000,"runId":"run"}"#,
        ),
        (
            ev(RunError {
                run_id: s("run"),
                error: RunErrorInfo::new(ErrorCode::ProviderTimeout, "no chunk", true),
                totals: Default::default(),
            }
            .into()),
            r#"{"seq":3,"type":"run.error","timestamp":1771000000000,"runId":"run","error":{"code":"provider_timeout","message":"no chunk","retriable":true}}"#,
        ),
        (
            ev(PlanCreate { plan_id: s("plan_1"), chat_id: s("c"), plan: vec![] }.into()),
            r#"{"seq":3,"type":"plan.create","timestamp":1771000000000,"planId":"plan_1","chatId":"c","plan":[]}"#,
        ),
        (
            ev(PlanUpdate { plan_id: s("plan_1"), chat_id: s("c"), plan }.into()),
            r#"{"seq":3,"type":"plan.update","timestamp":1771000000000,"planId":"plan_1","chatId":"c","plan":[{"taskId":"a1b2c3d4","description":"查询","status":"init"},{"taskId":"e5f6a7b8","description":"建议","status":"canceled"}]}"#,
        ),
        (
            ev(TaskStart {
                task_id: s("t1"),
                run_id: s("run"),
                task_name: some("t1"),
                description: None,
                sub_agent_key: None,
                tool_id: None,
            }
            .into()),
            r#"{"seq":3,"type":"task.start","timestamp":1771000000000,"taskId":"t1","runId":"run","taskName":"t1"}"#,
        ),
        (
            ev(TaskComplete { task_id: s("t1") }.into()),
            r#"{"seq":3,"type":"task.complete","timestamp":1771000000000,"taskId":"t1"}"#,
        ),
        (
            ev(TaskCancel { task_id: s("t1") }.into()),
            r#"{"seq":3,"type":"task.cancel","timestamp":1771000000000,"taskId":"t1"}"#,
        ),
        (
            ev(TaskFail { task_id: s("t1"), error: TaskError::new("task_failed", "Task status updated to failed") }
                .into()),
            r#"{"seq":3,"type":"task.fail","timestamp":1771000000000,"taskId":"t1","error":{"code":"task_failed","message":"Task status updated to failed"}}"#,
        ),
        (
            ev(ReasoningStart { reasoning_id: s("run_r_1"), run_id: s("run"), task_id: some("t1") }.into()),
            r#"{"seq":3,"type":"reasoning.start","timestamp":1771000000000,"reasoningId":"run_r_1","runId":"run","taskId":"t1"}"#,
        ),
        (
            ev(ReasoningDelta { reasoning_id: s("run_r_1"), delta: s("\n\n") }.into()),
            r#"{"seq":3,"type":"reasoning.delta","timestamp":1771000000000,"reasoningId":"run_r_1","delta":"\n\n"}"#,
        ),
        (
            ev(ReasoningEnd { reasoning_id: s("run_r_1") }.into()),
            r#"{"seq":3,"type":"reasoning.end","timestamp":1771000000000,"reasoningId":"run_r_1"}"#,
        ),
        (
            ev(ReasoningSnapshot { reasoning_id: s("run_r_1"), text: s("t"), task_id: None }.into()),
            r#"{"seq":3,"type":"reasoning.snapshot","timestamp":1771000000000,"reasoningId":"run_r_1","text":"t"}"#,
        ),
        (
            ev(ContentStart { content_id: s("run_c_1"), run_id: s("run"), task_id: None }.into()),
            r#"{"seq":3,"type":"content.start","timestamp":1771000000000,"contentId":"run_c_1","runId":"run"}"#,
        ),
        (
            ev(ContentDelta { content_id: s("run_c_1"), delta: s("\"q\" \\ é") }.into()),
            r#"{"seq":3,"type":"content.delta","timestamp":1771000000000,"contentId":"run_c_1","delta":"\"q\" \\ é"}"#,
        ),
        (
            ev(ContentEnd { content_id: s("run_c_1") }.into()),
            r#"{"seq":3,"type":"content.end","timestamp":1771000000000,"contentId":"run_c_1"}"#,
        ),
        (
            ev(ContentSnapshot { content_id: s("run_c_1"), text: s("t"), task_id: some("t1") }.into()),
            r#"{"seq":3,"type":"content.snapshot","timestamp":1771000000000,"contentId":"run_c_1","text":"t","taskId":"t1"}"#,
        ),
        (
            ev(ToolStart {
                tool_id: s("call_1"),
                run_id: s("run"),
                task_id: some("t1"),
                tool_name: some("confirm_dialog"),
                tool_type: some("html"),
                tool_api: some("https://api"),
                tool_params: Some(json!({"a":1})),
                description: some("d"),
                tool_key: some("confirm_dialog"),
                tool_timeout: Some(300_000),
            }
            .into()),
            r#"{"seq":3,"type":"tool.start","timestamp":1771000000000,"toolId":"call_1","runId":"run","taskId":"t1","toolName":"confirm_dialog","toolType":"html","toolApi":"https://api","toolParams":{"a":1},"description":"d","toolKey":"confirm_dialog","toolTimeout":300000}"#,
        ),
        (
            ev(ToolArgs { tool_id: s("call_1"), delta: s("{\"a\":"), chunk_index: 2 }.into()),
            r#"{"seq":3,"type":"tool.args","timestamp":1771000000000,"toolId":"call_1","delta":"{\"a\":","chunkIndex":2}"#,
        ),
        (
            ev(ToolEnd { tool_id: s("call_1") }.into()),
            r#"{"seq":3,"type":"tool.end","timestamp":1771000000000,"toolId":"call_1"}"#,
        ),
        (
            ev(ToolResult { tool_id: s("call_1"), result: s("{\"ok\":true}") }.into()),
            r#"{"seq":3,"type":"tool.result","timestamp":1771000000000,"toolId":"call_1","result":"{\"ok\":true}"}"#,
        ),
        (
            ev(ToolSnapshot {
                tool_id: s("call_1"),
                tool_name: s("f"),
                arguments: s("{bad"),
                tool_type: s("function"),
                tool_api: None,
                tool_params: None,
                description: None,
                tool_key: None,
                tool_timeout: None,
            }
            .into()),
            r#"{"seq":3,"type":"tool.snapshot","timestamp":1771000000000,"toolId":"call_1","toolName":"f","arguments":"{bad","toolType":"function","toolApi":null,"toolParams":null,"description":null}"#,
        ),
        (
            ev(ActionStart {
                action_id: s("call_a"),
                run_id: s("run"),
                task_id: None,
                action_name: some("switch_theme"),
                description: some("d"),
            }
            .into()),
            r#"{"seq":3,"type":"action.start","timestamp":1771000000000,"actionId":"call_a","runId":"run","actionName":"switch_theme","description":"d"}"#,
        ),
        (
            ev(ActionArgs { action_id: s("call_a"), delta: s("{}") }.into()),
            r#"{"seq":3,"type":"action.args","timestamp":1771000000000,"actionId":"call_a","delta":"{}"}"#,
        ),
        (
            ev(ActionEnd { action_id: s("call_a") }.into()),
            r#"{"seq":3,"type":"action.end","timestamp":1771000000000,"actionId":"call_a"}"#,
        ),
        (
            ev(ActionParam { action_id: s("call_a"), param: json!({"x":1}) }.into()),
            r#"{"seq":3,"type":"action.param","timestamp":1771000000000,"actionId":"call_a","param":{"x":1}}"#,
        ),
        (
            ev(ActionResult { action_id: s("call_a"), result: json!("OK") }.into()),
            r#"{"seq":3,"type":"action.result","timestamp":1771000000000,"actionId":"call_a","result":"OK"}"#,
        ),
        (
            ev(ActionSnapshot {
                action_id: s("call_a"),
                action_name: s("switch_theme"),
                arguments: s("{}"),
                description: None,
            }
            .into()),
            r#"{"seq":3,"type":"action.snapshot","timestamp":1771000000000,"actionId":"call_a","actionName":"switch_theme","arguments":"{}","description":null}"#,
        ),
        (
            ev(ContentRevoke {
                content_id: s("run_c_2"),
                stage: GuardStage::Output,
                guard: s("rules:pii"),
                rule: some("email"),
                reason: s("personal data"),
                status_code: -1006,
            }
            .into()),
            r#"{"seq":3,"type":"content.revoke","timestamp":1771000000000,"contentId":"run_c_2","stage":"output","guard":"rules:pii","rule":"email","reason":"personal data","statusCode":-1006}"#,
        ),
        (
            ev(GuardWarning {
                stage: GuardStage::Output,
                guard: s("judge:reviewer"),
                rule: None,
                message: s("check the figures"),
                content_id: some("run_c_1"),
                tool_id: None,
                status_code: -1007,
            }
            .into()),
            r#"{"seq":3,"type":"guard.warning","timestamp":1771000000000,"stage":"output","guard":"judge:reviewer","message":"check the figures","contentId":"run_c_1","statusCode":-1007}"#,
        ),
        (
            ev(GuardBlock {
                stage: GuardStage::ToolInput,
                guard: s("rules:shell"),
                rule: some("rm"),
                reason: s("deletes files"),
                tool_id: some("call_1"),
                status_code: -1006,
            }
            .into()),
            r#"{"seq":3,"type":"guard.block","timestamp":1771000000000,"stage":"toolInput","guard":"rules:shell","rule":"rm","reason":"deletes files","toolId":"call_1","statusCode":-1006}"#,
        ),
        (
            ev(SourceSnapshot {
                source_id: s("src"),
                run_id: None,
                task_id: None,
                icon: None,
                title: some("T"),
                url: some("https://u"),
            }
            .into()),
            r#"{"seq":3,"type":"source.snapshot","timestamp":1771000000000,"sourceId":"src","title":"T","url":"https://u"}"#,
        ),
    ]
}

#[test]
fn every_type_serialises_to_its_exact_line_and_round_trips() {
    for (event, line) in catalogue() {
        assert_eq!(event.to_json().expect("serialise"), line, "{}", event.type_name());
        let parsed: Event = serde_json::from_str(line).expect(line);
        assert_eq!(parsed, event, "{line}");
    }
}

#[test]
fn catalogue_covers_every_type_once() {
    let mut names: Vec<&str> = catalogue().iter().map(|(e, _)| e.type_name()).collect();
    names.dedup();
    assert_eq!(names.len(), 39, "{names:?}");
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), 39);
}

/// Issue 36: the guard events have no `taskId` of their own, so a child's carries its task on the
/// event, right after `timestamp`; the status codes are the source document's.
#[test]
fn guard_events_name_a_childs_task_on_the_event_and_carry_their_status_codes() {
    let mut block = Event::new(
        4,
        5,
        GuardBlock {
            stage: GuardStage::Input,
            guard: s("webhook"),
            rule: None,
            reason: s("no"),
            tool_id: None,
            status_code: crate::guard::STATUS_BLOCK_AND_REVOKE,
        },
    );
    block.tag_task("t1");
    assert_eq!(block.payload.task_field(), TaskField::None);
    let line = block.to_json().expect("json");
    assert_eq!(
        line,
        r#"{"seq":4,"type":"guard.block","timestamp":5,"taskId":"t1","stage":"input","guard":"webhook","reason":"no","statusCode":-1006}"#
    );
    let parsed: Event = serde_json::from_str(&line).expect("parse");
    assert_eq!(parsed.task(), Some("t1"));
    // A stream that leaves the code out still reads with the code the event type has.
    let warning: Event = serde_json::from_str(
        r#"{"seq":1,"type":"guard.warning","timestamp":0,"stage":"toolOutput","guard":"g","message":"m","toolId":"c"}"#,
    )
    .expect("parse");
    let EventPayload::GuardWarning(warning) = warning.payload else { panic!("a warning") };
    assert_eq!((warning.status_code, warning.stage), (crate::guard::STATUS_SAFETY_WARNING, GuardStage::ToolOutput));
}

#[test]
fn standalone_payload_is_internally_tagged() {
    let payload = EventPayload::from(RunCancel { run_id: s("r"), totals: Default::default() });
    let text = serde_json::to_string(&payload).expect("serialise");
    assert_eq!(text, r#"{"type":"run.cancel","runId":"r"}"#);
    assert_eq!(serde_json::from_str::<EventPayload>(&text).expect("parse"), payload);
}

#[test]
fn terminal_events() {
    let done = Event::new(
        1,
        0,
        RunComplete { run_id: s("r"), finish_reason: s("stop"), output: None, totals: Default::default() },
    );
    let err = Event::new(
        1,
        0,
        RunError {
            run_id: s("r"),
            error: RunErrorInfo::new(ErrorCode::Internal, "x", false),
            totals: Default::default(),
        },
    );
    let other = Event::new(1, 0, RunStart { run_id: s("r"), chat_id: s("c") });
    assert!(done.is_terminal() && err.is_terminal() && !other.is_terminal());
}

#[test]
fn error_codes_are_snake_case_and_unknown_codes_parse_as_internal() {
    let expected = [
        "provider_error",
        "provider_timeout",
        "budget_exceeded",
        "max_steps",
        "plan_stalled",
        "tool_required",
        "frontend_submit_timeout",
        "provider_not_configured",
        "doom_loop",
        "node_lost",
        "quota_exceeded",
        "guardrail_blocked",
        "output_invalid",
        "recovery_exhausted",
        "internal",
    ];
    for (code, text) in ErrorCode::ALL.into_iter().zip(expected) {
        assert_eq!(serde_json::to_string(&code).expect("ser"), format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<ErrorCode>(&format!("\"{text}\"")).expect("de"), code);
    }
    assert_eq!(serde_json::from_str::<ErrorCode>("\"RUN_ERROR\"").expect("de"), ErrorCode::Internal);
}

#[test]
fn task_status_parsing_is_lenient() {
    let parse = |v: &str| serde_json::from_str::<TaskStatus>(v).expect(v);
    assert_eq!(parse("\"completed\""), TaskStatus::Completed);
    assert_eq!(parse("\"failed\""), TaskStatus::Failed);
    assert_eq!(parse("\"canceled\""), TaskStatus::Canceled);
    assert_eq!(parse("\"init\""), TaskStatus::Init);
    assert_eq!(parse("\"in_progress\""), TaskStatus::Init);
    assert_eq!(parse("\"whatever\""), TaskStatus::Init);
    assert_eq!(parse("null"), TaskStatus::Init);
    let task: PlanTask = serde_json::from_str(r#"{"taskId":"t"}"#).expect("defaults");
    assert_eq!(task.status, TaskStatus::Init);
}

#[test]
fn reference_stream_lines_parse() {
    // The reference's seq-less plan.update with rawEvent, its RUN_ERROR and its string scene.
    let plan = r#"{"type":"plan.update","planId":"p","chatId":"c","plan":[{"taskId":"t","description":"d","status":"in_progress"}],"timestamp":5,"rawEvent":null}"#;
    let event: Event = serde_json::from_str(plan).expect("plan.update");
    assert_eq!(event.seq, 0);
    assert_eq!(event.timestamp, 5);
    let EventPayload::PlanUpdate(update) = &event.payload else { panic!("{event:?}") };
    assert_eq!(update.plan[0].status, TaskStatus::Init);
    assert_eq!(
        event.to_json().expect("ser"),
        r#"{"seq":0,"type":"plan.update","timestamp":5,"planId":"p","chatId":"c","plan":[{"taskId":"t","description":"d","status":"init"}]}"#
    );

    let error = r#"{"seq":9,"type":"run.error","timestamp":1,"runId":"r","error":{"code":"RUN_ERROR","message":"boom","retriable":false}}"#;
    let event: Event = serde_json::from_str(error).expect("run.error");
    let EventPayload::RunError(run_error) = event.payload else { panic!("not run.error") };
    assert_eq!(run_error.error.code, ErrorCode::Internal);

    let query = r#"{"seq":1,"type":"request.query","timestamp":1,"requestId":"r","chatId":"c","role":"user","message":"m","scene":"{\"url\":\"https://x\",\"title\":\"t\"}"}"#;
    let event: Event = serde_json::from_str(query).expect("request.query");
    let EventPayload::RequestQuery(q) = event.payload else { panic!("not request.query") };
    assert_eq!(q.scene, Some(Scene { url: some("https://x"), title: some("t") }));
}

#[test]
fn successor_request_steer_parses_without_role() {
    // A role-less line (other implementations) reads as a user steer.
    let line = r#"{"seq":7,"type":"request.steer","timestamp":1,"chatId":"c","runId":"r","steerId":"s","message":"m"}"#;
    let event: Event = serde_json::from_str(line).expect("request.steer");
    let EventPayload::RequestSteer(steer) = event.payload else { panic!("not request.steer") };
    assert_eq!((steer.role.as_str(), steer.request_id, steer.task_id), ("user", None, None));
}

#[test]
fn unknown_type_is_an_error() {
    let err = serde_json::from_str::<Event>(r#"{"seq":1,"type":"nope","timestamp":1}"#);
    assert!(err.is_err());
}

#[test]
fn a_status_ask_carries_the_status_and_its_options_and_old_asks_read_without_them() {
    let ask = AwaitingAsk {
        awaiting_id: s("call_i"),
        run_id: s("r"),
        mode: s("status"),
        timeout: 1000,
        approvals: Vec::new(),
        tool_name: some("mock_image_generate"),
        arguments: Some(json!({"prompt": "fox"})),
        viewport_type: None,
        viewport_key: None,
        status: Some(Box::new(AwaitingStatus {
            code: -1002,
            message: s("Not enough credits"),
            data: json!({"balance": 0}),
        })),
        options: vec![StatusOption { label: s("Continue"), action: s("continue"), description: s("again") }].into(),
    };
    let event = Event { seq: 3, timestamp: 7, payload: ask.clone().into(), task_id: None };
    let line = serde_json::to_string(&event).unwrap();
    assert_eq!(
        line,
        r#"{"seq":3,"type":"awaiting.ask","timestamp":7,"awaitingId":"call_i","runId":"r","mode":"status","timeout":1000,"toolName":"mock_image_generate","arguments":{"prompt":"fox"},"status":{"code":-1002,"message":"Not enough credits","data":{"balance":0}},"options":[{"label":"Continue","action":"continue","description":"again"}]}"#
    );
    let back: Event = serde_json::from_str(&line).unwrap();
    assert_eq!(back.payload, EventPayload::AwaitingAsk(ask));

    let form = r#"{"awaitingId":"f","runId":"r","mode":"form","timeout":5,"toolName":"confirm_dialog"}"#;
    let form: AwaitingAsk = serde_json::from_str(form).unwrap();
    assert_eq!((form.status, form.options.len()), (None, 0));
    let no_data: AwaitingStatus = serde_json::from_str(r#"{"code":-1002,"message":"m"}"#).unwrap();
    assert_eq!(no_data.data, json!({}));
}

/// Every event is as large as its largest payload type, and a run keeps and moves many of them:
/// a rare payload that grows (the pause's status, issue 36) must not make all of them larger
/// (docs/performance.md, "Issue 36"). `tool.start` sets the size.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_rare_payload_does_not_make_every_event_larger() {
    assert_eq!(std::mem::size_of::<ToolStart>(), 280);
    assert!(std::mem::size_of::<AwaitingAsk>() <= 280, "{}", std::mem::size_of::<AwaitingAsk>());
    assert_eq!(std::mem::size_of::<Event>(), 320);
    assert_eq!(std::mem::size_of::<crate::AgentDelta>(), 280);
}
