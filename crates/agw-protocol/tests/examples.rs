//! Reproduces the three example streams of `docs/contract/sse-events.md` §10 byte for byte (with agw's
//! `plan.update` decision applied to §10.3) by pushing the deltas a mode would emit, with a
//! scripted clock set to the timestamps the examples show.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use agw_protocol::delta::{AgentDelta, ToolStartMeta};
use agw_protocol::event::{ChatStart, PlanTask, TaskStatus};
use agw_protocol::request::QueryRequest;
use agw_protocol::{Assembler, Event, SseDecoder, ids, write_event};
use serde_json::json;

/// A scripted run: the clock is set before every call, so each call's events carry that time.
struct Script {
    now: Arc<AtomicI64>,
    asm: Assembler,
    events: Vec<Event>,
}

impl Script {
    fn new(run_id: &str, chat_id: &str) -> Self {
        let now = Arc::new(AtomicI64::new(0));
        let clock_now = Arc::clone(&now);
        let clock = Box::new(move || clock_now.load(Ordering::SeqCst));
        Self { now, asm: Assembler::new(run_id, chat_id, clock), events: Vec::new() }
    }

    fn bootstrap(&mut self, ts: i64, request: &str, new_chat: bool) {
        self.now.store(ts, Ordering::SeqCst);
        let req = QueryRequest::from_json(request.as_bytes()).expect("request parses");
        req.validate().expect("request valid");
        let query = req.to_event(self.asm.run_id(), self.asm.chat_id());
        let chat_start = new_chat.then(|| ChatStart {
            chat_id: self.asm.chat_id().to_owned(),
            chat_name: ids::chat_name(req.message.as_deref().unwrap_or_default()),
        });
        self.asm.bootstrap(query, chat_start, &mut self.events);
    }

    /// A delta that emits nothing (stage markers, usage): the clock must not matter.
    fn silent(&mut self, delta: AgentDelta) {
        self.now.store(i64::MIN, Ordering::SeqCst);
        let before = self.events.len();
        self.asm.push(delta, &mut self.events).expect("accepted");
        assert_eq!(self.events.len(), before, "a silent delta emitted events");
    }

    fn push(&mut self, ts: i64, delta: AgentDelta) {
        self.now.store(ts, Ordering::SeqCst);
        self.asm.push(delta, &mut self.events).expect("accepted");
    }

    fn complete(&mut self, ts: i64) {
        self.now.store(ts, Ordering::SeqCst);
        self.asm.complete("stop", &mut self.events);
    }

    /// Compares line by line with the expected file, then checks the SSE framing and parsing.
    fn check(self, expected: &str) {
        let expected: Vec<&str> = expected.lines().collect();
        // The terminal event's `usage` / `cost` are agw's addition to the contract's examples.
        let actual: Vec<String> = self
            .events
            .iter()
            .map(|e| {
                let mut value: serde_json::Value = serde_json::from_str(&e.to_json().expect("serialises")).unwrap();
                if e.is_terminal() {
                    let map = value.as_object_mut().unwrap();
                    map.remove("usage");
                    map.remove("cost");
                }
                value.to_string()
            })
            .collect();
        for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
            assert_eq!(a, e, "line {}", i + 1);
        }
        assert_eq!(actual.len(), expected.len(), "number of events");

        // Same bytes through the SSE encoder and decoder, and every line parses back.
        let mut stream = Vec::new();
        for event in &self.events {
            write_event(event, &mut stream);
        }
        let mut frames = Vec::new();
        let mut decoder = SseDecoder::new();
        decoder.feed(&stream, &mut frames);
        assert!(!decoder.has_pending());
        for ((frame, line), event) in frames.iter().zip(&actual).zip(&self.events) {
            assert_eq!(frame.event, "message");
            if !event.is_terminal() {
                assert_eq!(frame.data, *line);
            }
            assert_eq!(&frame.parse_event().expect("parses"), event);
        }
        assert_eq!(frames.len(), expected.len());
    }
}

fn text(s: &str) -> AgentDelta {
    AgentDelta::Content(s.to_owned())
}

fn reasoning(s: &str) -> AgentDelta {
    AgentDelta::Reasoning(s.to_owned())
}

fn tool_args(id: &str, name: &str, description: &str, delta: &str) -> AgentDelta {
    AgentDelta::ToolArgs {
        tool_id: id.to_owned(),
        meta: ToolStartMeta {
            tool_name: name.to_owned(),
            tool_type: "function".to_owned(),
            tool_api: None,
            description: Some(description.to_owned()),
            frontend: None,
        },
        delta: delta.to_owned(),
    }
}

fn tool_end(id: &str) -> AgentDelta {
    AgentDelta::ToolEnd { tool_id: id.to_owned() }
}

fn tool_result(id: &str, result: &str) -> AgentDelta {
    AgentDelta::ToolResult { tool_id: id.to_owned(), result: result.to_owned() }
}

#[test]
fn example_10_1_oneshot_with_reasoning() {
    let mut s = Script::new("6f1c2a9e-3b4d-4e5f-8a7b-1c2d3e4f5a6b", "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01");
    s.bootstrap(1771000000100, r#"{"message":"碳的简介，50字","agentKey":"demoModeThinking"}"#, true);
    s.silent(AgentDelta::StageMarker("oneshot".into()));
    s.push(1771000000900, reasoning("用户需要一段"));
    s.push(1771000000950, reasoning("50字左右的简介。"));
    s.push(1771000001200, text("碳是第6号元素，"));
    s.push(1771000001260, text("以石墨、金刚石等形态存在，是有机物的骨架。"));
    s.silent(AgentDelta::Usage(json!({"prompt_tokens":10,"completion_tokens":20}).into()));
    s.complete(1771000001400);
    let done = serde_json::to_value(s.events.last().unwrap()).unwrap();
    assert_eq!((done["usage"]["inputTokens"].as_u64(), done["usage"]["outputTokens"].as_u64()), (Some(10), Some(20)));
    assert!(done.get("cost").is_none(), "no prices, no cost");
    s.check(include_str!("data/10_1_oneshot.jsonl"));
}

#[test]
fn example_10_2_react_with_backend_tool() {
    let mut s = Script::new("9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01");
    s.bootstrap(
        1771000100000,
        r#"{"chatId":"0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01","requestId":"req-42","message":"上海现在几点？","agentKey":"demoModeReact"}"#,
        false,
    );
    let desc = "根据 city 查询当前日期和时间（实时系统时钟）";
    s.silent(AgentDelta::StageMarker("react-step-1".into()));
    s.push(1771000100700, reasoning("需要查询上海的实时时间。"));
    s.push(1771000100900, text("我先查询上海当前时间。"));
    // agw: the id+name fragment with empty arguments already opens the tool (no tool.args).
    s.push(1771000101100, tool_args("call_1", "city_datetime", desc, ""));
    s.push(1771000101100, tool_args("call_1", "city_datetime", desc, "{\"city\":"));
    s.push(1771000101150, tool_args("call_1", "city_datetime", desc, "\"Shanghai\"}"));
    s.push(1771000101200, tool_end("call_1"));
    s.push(
        1771000101210,
        tool_result(
            "call_1",
            r#"{"city":"Shanghai","timezone":"UTC+8","date":"2026-02-13","weekday":"星期五","lunarDate":"乙巳年腊月廿六","time":"10:15:30","iso":"2026-02-13T10:15:30.123456+08:00","source":"system-clock"}"#,
        ),
    );
    s.silent(AgentDelta::StageMarker("react-step-2".into()));
    s.push(1771000101900, reasoning("已拿到时间，直接回答。"));
    s.push(1771000102100, text("上海现在是 2026-02-13（星期五）"));
    s.push(1771000102160, text(" 10:15:30。"));
    s.complete(1771000102300);
    s.check(include_str!("data/10_2_react_tool.jsonl"));
}

fn plan(first: TaskStatus, second: TaskStatus) -> AgentDelta {
    AgentDelta::PlanUpdate {
        plan_id: ids::plan_id_for_chat("5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f"),
        plan: vec![
            PlanTask { task_id: "a1b2c3d4".into(), description: "查询上海明天天气".into(), status: first },
            PlanTask { task_id: "e5f6a7b8".into(), description: "给出搬迁建议".into(), status: second },
        ],
    }
}

#[test]
fn example_10_3_plan_execute_two_tasks() {
    use TaskStatus::{Completed, Init};
    let mut s = Script::new("c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f", "5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f");
    s.bootstrap(
        1771000200000,
        r#"{"chatId":"5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f","message":"明天上海机房搬迁，关注天气","agentKey":"demoModePlanExecute"}"#,
        true,
    );
    let add_desc =
        "创建计划任务（追加模式），支持一次添加一个或多个任务。成功返回多行文本：taskId | status | description。";
    let weather_desc = "[MOCK] 根据 city 和 date 查询天气（伪造数据）。";
    let update_desc =
        "更新计划中的任务状态。status 仅支持 init/completed/failed/canceled；成功返回 OK，失败返回 失败: 原因。";

    // plan-generate
    s.silent(AgentDelta::StageMarker("plan-generate".into()));
    s.push(1771000200800, text("我将规划两个任务。"));
    s.push(
        1771000201000,
        tool_args("call_p1", "_plan_add_tasks_", add_desc, "{\"tasks\":[{\"description\":\"查询上海明天天气\"},"),
    );
    s.push(1771000201050, tool_args("call_p1", "_plan_add_tasks_", add_desc, "{\"description\":\"给出搬迁建议\"}]}"));
    s.push(1771000201100, tool_end("call_p1"));
    s.push(1771000201105, tool_result("call_p1", "a1b2c3d4 | init | 查询上海明天天气\ne5f6a7b8 | init | 给出搬迁建议"));
    s.push(1771000201105, plan(Init, Init));

    // task 1, round 1 and round 2
    s.push(
        1771000201110,
        AgentDelta::TaskStart { task_id: "a1b2c3d4".into(), description: Some("查询上海明天天气".into()) },
    );
    s.silent(AgentDelta::StageMarker("execute-task-1".into()));
    s.push(1771000201900, text("先查询天气。"));
    s.push(
        1771000202100,
        tool_args("call_w1", "mock_city_weather", weather_desc, "{\"city\":\"Shanghai\",\"date\":\"2026-02-13\"}"),
    );
    s.push(1771000202150, tool_end("call_w1"));
    s.push(
        1771000202152,
        tool_result(
            "call_w1",
            r#"{"city":"上海","date":"2026-02-13","temperatureC":23,"humidity":66,"windLevel":2,"condition":"雾","mockTag":"幂等随机数据"}"#,
        ),
    );
    s.push(
        1771000202900,
        tool_args("call_u1", "_plan_update_task_", update_desc, "{\"taskId\":\"a1b2c3d4\",\"status\":\"completed\"}"),
    );
    s.push(1771000202950, tool_end("call_u1"));
    s.push(1771000202951, tool_result("call_u1", "OK"));
    s.push(1771000202951, plan(Completed, Init));
    s.push(1771000202955, AgentDelta::TaskComplete { task_id: "a1b2c3d4".into() });

    // task 2, round 1
    s.push(
        1771000202956,
        AgentDelta::TaskStart { task_id: "e5f6a7b8".into(), description: Some("给出搬迁建议".into()) },
    );
    s.silent(AgentDelta::StageMarker("execute-task-2".into()));
    s.push(1771000203700, text("明天有雾，建议上午晚些时候再运输。"));
    s.push(
        1771000203900,
        tool_args("call_u2", "_plan_update_task_", update_desc, "{\"taskId\":\"e5f6a7b8\",\"status\":\"completed\"}"),
    );
    s.push(1771000203950, tool_end("call_u2"));
    s.push(1771000203951, tool_result("call_u2", "OK"));
    s.push(1771000203951, plan(Completed, Completed));
    s.push(1771000203955, AgentDelta::TaskComplete { task_id: "e5f6a7b8".into() });

    // summary
    s.silent(AgentDelta::StageMarker("summary".into()));
    s.push(1771000204800, text("最终结论\n- 明天上海有雾，"));
    s.push(1771000204860, text("可按计划搬迁但需推迟出发。"));
    s.complete(1771000205000);
    s.check(include_str!("data/10_3_plan_execute.jsonl"));
}
