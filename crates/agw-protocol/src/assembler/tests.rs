//! One test per rule of the block state machine (`docs/contract/sse-events.md` §5.1) and of the §6 rules the
//! assembler owns. Run id `run`, so block ids read `run_r_1`, `run_c_2`, …

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};

use super::*;
use crate::delta::{CallUsage, FrontendMeta};
use crate::event::{ContextCompact, TaskStatus};

/// Assembler with a clock that advances by 10 ms on every read and counts reads.
struct Rig {
    asm: Assembler,
    reads: Arc<AtomicI64>,
    events: Vec<Event>,
}

impl Rig {
    fn new() -> Self {
        let reads = Arc::new(AtomicI64::new(0));
        let counter = Arc::clone(&reads);
        let clock = Box::new(move || 1000 + 10 * counter.fetch_add(1, Ordering::SeqCst));
        Self { asm: Assembler::new("run", "chat", clock), reads, events: Vec::new() }
    }

    /// Pushes and returns the signatures of the events this push produced.
    fn push(&mut self, delta: AgentDelta) -> Vec<String> {
        let before = self.events.len();
        self.asm.push(delta, &mut self.events).expect("delta accepted");
        self.events[before..].iter().map(sig).collect()
    }

    fn push_err(&mut self, delta: AgentDelta) -> ProtocolError {
        let before = self.events.len();
        let err = self.asm.push(delta, &mut self.events).expect_err("delta must be rejected");
        assert_eq!(self.events.len(), before, "a rejected delta emitted events");
        err
    }

    fn complete(&mut self) -> Vec<String> {
        let before = self.events.len();
        self.asm.complete("stop", &mut self.events);
        self.events[before..].iter().map(sig).collect()
    }

    fn fail(&mut self, error: RunErrorInfo) -> Vec<String> {
        let before = self.events.len();
        self.asm.fail(error, &mut self.events);
        self.events[before..].iter().map(sig).collect()
    }

    fn json(&self, index_from_end: usize) -> Value {
        let event = &self.events[self.events.len() - 1 - index_from_end];
        serde_json::from_str(&event.to_json().expect("serialise")).expect("json")
    }

    fn reads(&self) -> i64 {
        self.reads.load(Ordering::SeqCst)
    }
}

/// `type` plus the event's main id, without the `run_` prefix: `content.start c_1`.
fn sig(event: &Event) -> String {
    let value: Value = serde_json::from_str(&event.to_json().expect("serialise")).expect("json");
    let id = ["reasoningId", "contentId", "toolId", "actionId", "taskId", "planId"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .map(|id| id.trim_start_matches("run_").to_owned());
    match id {
        Some(id) => format!("{} {}", event.type_name(), id),
        None => event.type_name().to_owned(),
    }
}

fn reasoning(s: &str) -> AgentDelta {
    AgentDelta::Reasoning(s.into())
}
fn content(s: &str) -> AgentDelta {
    AgentDelta::Content(s.into())
}
fn stage(s: &str) -> AgentDelta {
    AgentDelta::StageMarker(s.into())
}
fn meta(name: &str) -> ToolStartMeta {
    ToolStartMeta { tool_name: name.into(), tool_type: "function".into(), ..ToolStartMeta::default() }
}
fn args(id: &str, delta: &str) -> AgentDelta {
    AgentDelta::ToolArgs { tool_id: id.into(), meta: meta("f"), delta: delta.into() }
}
fn tool_end(id: &str) -> AgentDelta {
    AgentDelta::ToolEnd { tool_id: id.into() }
}
fn tool_result(id: &str) -> AgentDelta {
    AgentDelta::ToolResult { tool_id: id.into(), result: "r".into() }
}
fn action_args(id: &str, delta: &str) -> AgentDelta {
    AgentDelta::ActionArgs {
        action_id: id.into(),
        meta: ActionStartMeta { action_name: "switch_theme".into(), description: None },
        delta: delta.into(),
    }
}
fn plan() -> AgentDelta {
    AgentDelta::PlanUpdate {
        plan_id: "plan_x".into(),
        plan: vec![PlanTask { task_id: "t1".into(), description: "d".into(), status: TaskStatus::Init }],
    }
}
fn task_start(id: &str) -> AgentDelta {
    AgentDelta::TaskStart { task_id: id.into(), description: Some("d".into()) }
}

// -- §5.1 text blocks ---------------------------------------------------------------------

#[test]
fn first_reasoning_delta_opens_a_block_and_later_ones_continue_it() {
    let mut rig = Rig::new();
    assert_eq!(rig.push(reasoning("a")), ["reasoning.start r_1", "reasoning.delta r_1"]);
    assert_eq!(rig.push(reasoning("b")), ["reasoning.delta r_1"]);
}

#[test]
fn reasoning_delta_closes_open_content() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    assert_eq!(rig.push(reasoning("b")), ["content.end c_1", "reasoning.start r_1", "reasoning.delta r_1"]);
}

#[test]
fn content_delta_closes_open_reasoning() {
    let mut rig = Rig::new();
    rig.push(reasoning("a"));
    assert_eq!(rig.push(content("b")), ["reasoning.end r_1", "content.start c_1", "content.delta c_1"]);
}

#[test]
fn text_blocks_are_closed_lazily() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    // A stage marker and usage produce nothing; the end appears with the next different event.
    assert!(rig.push(stage("summary")).is_empty());
    assert!(rig.push(AgentDelta::Usage(json!({"total_tokens": 3}).into())).is_empty());
    assert_eq!(rig.complete(), ["content.end c_1", "run.complete"]);
}

#[test]
fn stage_boundary_rotates_an_open_block() {
    let mut rig = Rig::new();
    rig.push(reasoning("a"));
    rig.push(stage("react-step-2"));
    assert_eq!(rig.push(reasoning("b")), ["reasoning.end r_1", "reasoning.start r_2", "reasoning.delta r_2"]);
    rig.push(content("c"));
    rig.push(stage("summary"));
    assert_eq!(rig.push(content("d")), ["content.end c_1", "content.start c_2", "content.delta c_2"]);
}

#[test]
fn text_without_boundary_continues_the_block_across_model_turns() {
    let mut rig = Rig::new();
    rig.push(content("turn 1"));
    rig.push(AgentDelta::Usage(json!({}).into())); // end of a model turn, e.g. a repair retry
    assert_eq!(rig.push(content("turn 2")), ["content.delta c_1"]);
    assert_eq!(rig.push(content("orchestrator error text")), ["content.delta c_1"]);
}

#[test]
fn block_ids_rotate_after_every_non_text_event() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    assert_eq!(rig.push(args("call_1", "{}")), ["content.end c_1", "tool.start call_1", "tool.args call_1"]);
    assert_eq!(rig.push(content("b")), ["content.start c_2", "content.delta c_2"]);
    assert_eq!(rig.push(tool_end("call_1")), ["content.end c_2", "tool.end call_1"]);
    assert_eq!(rig.push(content("c")), ["content.start c_3", "content.delta c_3"]);
    assert_eq!(rig.push(tool_result("call_1")), ["content.end c_3", "tool.result call_1"]);
    assert_eq!(rig.push(content("d")), ["content.start c_4", "content.delta c_4"]);
    assert_eq!(rig.push(plan()), ["content.end c_4", "plan.update plan_x"]);
    assert_eq!(rig.push(content("e")), ["content.start c_5", "content.delta c_5"]);
    assert_eq!(rig.push(task_start("t1")), ["content.end c_5", "task.start t1"]);
    assert_eq!(rig.push(content("f")), ["content.start c_6", "content.delta c_6"]);
    assert_eq!(rig.push(action_args("call_a", "")), ["content.end c_6", "action.start call_a"]);
    assert_eq!(rig.push(reasoning("g")), ["reasoning.start r_1", "reasoning.delta r_1"]);
}

#[test]
fn a_closed_block_id_is_never_reopened() {
    let mut rig = Rig::new();
    rig.push(reasoning("a"));
    rig.push(content("b"));
    assert_eq!(rig.push(reasoning("c")), ["content.end c_1", "reasoning.start r_2", "reasoning.delta r_2"]);
    assert_eq!(rig.push(content("d")), ["reasoning.end r_2", "content.start c_2", "content.delta c_2"]);
}

#[test]
fn each_text_delta_yields_exactly_one_delta_event_verbatim() {
    let mut rig = Rig::new();
    for text in ["\n\n", " ", "x", "\t"] {
        let sigs = rig.push(content(text));
        assert_eq!(sigs.iter().filter(|s| s.starts_with("content.delta")).count(), 1);
        assert_eq!(rig.json(0)["delta"], text);
    }
    assert_eq!(rig.push(reasoning(" ")).last().map(String::as_str), Some("reasoning.delta r_1"));
    // Empty text carries nothing: no event, not even a block switch.
    assert!(rig.push(content("")).is_empty());
    assert!(rig.push(reasoning("")).is_empty());
}

// -- §5.1 / §6.2 tools ----------------------------------------------------------------------

#[test]
fn first_tool_chunk_closes_text_and_starts_the_tool_later_chunks_only_args() {
    let mut rig = Rig::new();
    rig.push(reasoning("r"));
    assert_eq!(rig.push(args("call_1", "{\"a\":")), ["reasoning.end r_1", "tool.start call_1", "tool.args call_1"]);
    assert_eq!(rig.push(args("call_1", "1}")), ["tool.args call_1"]);
}

#[test]
fn tool_params_only_when_the_first_chunk_is_complete_json() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{\"city\":"));
    assert_eq!(rig.json(1).get("toolParams"), None);
    rig.push(args("call_2", "{\"city\":\"Shanghai\"}"));
    assert_eq!(rig.json(1)["toolParams"], json!({"city": "Shanghai"}));
    rig.push(args("call_3", ""));
    assert_eq!(rig.json(0).get("toolParams"), None);
    // Arguments completed later do not add toolParams retroactively.
    rig.push(args("call_3", "{}"));
    assert_eq!(rig.events.iter().filter(|e| e.to_json().is_ok_and(|j| j.contains("toolParams"))).count(), 1);
}

#[test]
fn tool_start_is_emitted_for_empty_arguments_without_args() {
    let mut rig = Rig::new();
    assert_eq!(rig.push(args("call_1", "")), ["tool.start call_1"]);
    // ...and such a tool can be ended and get a result (the reference failed here).
    assert_eq!(rig.push(tool_end("call_1")), ["tool.end call_1"]);
    assert_eq!(rig.push(tool_result("call_1")), ["tool.result call_1"]);
}

#[test]
fn empty_fragment_of_a_started_tool_emits_nothing() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{"));
    rig.push(content("stray text"));
    assert!(rig.push(args("call_1", "")).is_empty());
}

#[test]
fn chunk_index_counts_emitted_args_per_tool() {
    let mut rig = Rig::new();
    rig.push(args("call_1", ""));
    rig.push(args("call_1", "{"));
    rig.push(args("call_2", "["));
    rig.push(args("call_1", ""));
    rig.push(args("call_1", " "));
    rig.push(args("call_2", "]"));
    rig.push(args("call_1", "}"));
    let indexes: Vec<(String, u64)> = rig
        .events
        .iter()
        .filter(|e| e.type_name() == "tool.args")
        .map(|e| {
            let v: Value = serde_json::from_str(&e.to_json().expect("ser")).expect("json");
            (v["toolId"].as_str().unwrap_or_default().to_owned(), v["chunkIndex"].as_u64().unwrap_or(99))
        })
        .collect();
    let expected = [("call_1", 0), ("call_2", 0), ("call_1", 1), ("call_2", 1), ("call_1", 2)];
    assert_eq!(indexes, expected.map(|(id, i)| (id.to_owned(), i)));
}

#[test]
fn tool_start_decoration_backend_and_blank_fields() {
    let mut rig = Rig::new();
    rig.push(AgentDelta::ToolArgs {
        tool_id: "call_1".into(),
        meta: ToolStartMeta {
            tool_name: "city_datetime".into(),
            tool_type: "function".into(),
            tool_api: Some("https://api.example/t".into()),
            description: Some("  ".into()),
            frontend: None,
        },
        delta: String::new(),
    });
    assert_eq!(
        rig.events[0].to_json().expect("ser"),
        r#"{"seq":1,"type":"tool.start","timestamp":1000,"toolId":"call_1","runId":"run","toolName":"city_datetime","toolType":"function","toolApi":"https://api.example/t"}"#
    );
}

#[test]
fn frontend_tool_start_appends_tool_key_and_timeout_last() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(AgentDelta::ToolArgs {
        tool_id: "call_f".into(),
        meta: ToolStartMeta {
            tool_name: "confirm_dialog".into(),
            tool_type: "html".into(),
            tool_api: None,
            description: Some("确认".into()),
            frontend: Some(FrontendMeta { tool_key: "confirm_dialog".into(), tool_timeout: 0 }),
        },
        delta: "{\"q\":1}".into(),
    });
    let start = rig.events[2].to_json().expect("ser");
    assert_eq!(
        start,
        r#"{"seq":3,"type":"tool.start","timestamp":1020,"toolId":"call_f","runId":"run","taskId":"t1","toolName":"confirm_dialog","toolType":"html","toolParams":{"q":1},"description":"确认","toolKey":"confirm_dialog","toolTimeout":1}"#
    );
    // tool.end before the wait, then the submitted params as a string result.
    assert_eq!(rig.push(tool_end("call_f")), ["tool.end call_f"]);
    rig.push(AgentDelta::ToolResult { tool_id: "call_f".into(), result: r#"{"selectedIndex":1}"#.into() });
    assert_eq!(rig.json(0)["result"], r#"{"selectedIndex":1}"#);
}

#[test]
fn tool_end_closes_text_blocks() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{}"));
    rig.push(content("late text"));
    assert_eq!(rig.push(tool_end("call_1")), ["content.end c_1", "tool.end call_1"]);
}

#[test]
fn tool_result_ends_a_still_open_tool_first() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{}"));
    rig.push(content("x"));
    assert_eq!(rig.push(tool_result("call_1")), ["content.end c_1", "tool.end call_1", "tool.result call_1"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 7, "type": "tool.result", "timestamp": 1020, "toolId": "call_1", "result": "r"})
    );
}

#[test]
fn tool_protocol_errors_emit_nothing() {
    let mut rig = Rig::new();
    assert_eq!(rig.push_err(tool_end("nope")), ProtocolError::NotStarted { kind: CallKind::Tool, id: "nope".into() });
    assert_eq!(
        rig.push_err(tool_result("nope")),
        ProtocolError::NotStarted { kind: CallKind::Tool, id: "nope".into() }
    );
    rig.push(args("call_1", "{}"));
    rig.push(tool_end("call_1"));
    assert_eq!(
        rig.push_err(tool_end("call_1")),
        ProtocolError::AlreadyEnded { kind: CallKind::Tool, id: "call_1".into() }
    );
    assert_eq!(
        rig.push_err(args("call_1", "x")),
        ProtocolError::ArgsAfterEnd { kind: CallKind::Tool, id: "call_1".into() }
    );
    // also an empty fragment: a reused id is a new call the mode must not send
    assert_eq!(
        rig.push_err(args("call_1", "")),
        ProtocolError::ArgsAfterEnd { kind: CallKind::Tool, id: "call_1".into() }
    );
    rig.push(tool_result("call_1"));
    assert_eq!(
        rig.push_err(tool_result("call_1")),
        ProtocolError::DuplicateResult { kind: CallKind::Tool, id: "call_1".into() }
    );
    // an action id space is separate
    assert_eq!(
        rig.push_err(AgentDelta::ActionEnd { action_id: "call_1".into() }),
        ProtocolError::NotStarted { kind: CallKind::Action, id: "call_1".into() }
    );
}

#[test]
fn rejected_delta_leaves_the_state_unchanged() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    rig.push_err(tool_end("nope"));
    assert_eq!(rig.push(content("b")), ["content.delta c_1"]);
    let seqs: Vec<u64> = rig.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

// -- §6.4 actions ---------------------------------------------------------------------------

#[test]
fn action_order_is_start_args_end_result() {
    let mut rig = Rig::new();
    rig.push(content("x"));
    assert_eq!(
        rig.push(action_args("call_a", "{\"theme\":")),
        ["content.end c_1", "action.start call_a", "action.args call_a"]
    );
    assert_eq!(rig.push(action_args("call_a", "\"dark\"}")), ["action.args call_a"]);
    assert!(rig.push(action_args("call_a", "")).is_empty());
    assert_eq!(rig.push(AgentDelta::ActionEnd { action_id: "call_a".into() }), ["action.end call_a"]);
    assert_eq!(
        rig.push(AgentDelta::ActionResult { action_id: "call_a".into(), result: json!("OK") }),
        ["action.result call_a"]
    );
    assert_eq!(rig.json(0)["result"], "OK");
    assert_eq!(
        rig.events[3].to_json().expect("ser"),
        r#"{"seq":4,"type":"action.start","timestamp":1010,"actionId":"call_a","runId":"run","actionName":"switch_theme"}"#
    );
    assert_eq!(
        rig.json(2),
        json!({"seq": 6, "type": "action.args", "timestamp": 1020, "actionId": "call_a", "delta": "\"dark\"}"})
    );
}

#[test]
fn action_result_ends_a_still_open_action_and_keeps_json_values() {
    let mut rig = Rig::new();
    rig.push(action_args("call_a", ""));
    assert_eq!(
        rig.push(AgentDelta::ActionResult { action_id: "call_a".into(), result: json!({"ok": true}) }),
        ["action.end call_a", "action.result call_a"]
    );
    assert_eq!(rig.json(0)["result"], json!({"ok": true}));
    assert_eq!(
        rig.push_err(action_args("call_a", "x")),
        ProtocolError::ArgsAfterEnd { kind: CallKind::Action, id: "call_a".into() }
    );
    assert_eq!(
        rig.push_err(AgentDelta::ActionResult { action_id: "call_a".into(), result: json!("OK") }),
        ProtocolError::DuplicateResult { kind: CallKind::Action, id: "call_a".into() }
    );
}

// -- §3.2 tasks -----------------------------------------------------------------------------

#[test]
fn task_start_requires_a_plan_update_earlier_in_the_stream() {
    let mut rig = Rig::new();
    assert_eq!(rig.push_err(task_start("t1")), ProtocolError::TaskWithoutPlan { task_id: "t1".into() });
    rig.push(plan());
    assert_eq!(rig.push(task_start("t1")), ["task.start t1"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 2, "type": "task.start", "timestamp": 1010, "taskId": "t1", "runId": "run", "taskName": "t1", "description": "d"})
    );
}

#[test]
fn at_most_one_task_is_active() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    assert_eq!(
        rig.push_err(task_start("t2")),
        ProtocolError::TaskAlreadyActive { task_id: "t2".into(), active: "t1".into() }
    );
    assert_eq!(rig.asm.active_task(), Some("t1"));
    assert_eq!(
        rig.push_err(AgentDelta::TaskComplete { task_id: "t2".into() }),
        ProtocolError::TaskNotActive { task_id: "t2".into() }
    );
    rig.push(AgentDelta::TaskComplete { task_id: "t1".into() });
    assert_eq!(rig.asm.active_task(), None);
    assert_eq!(
        rig.push_err(AgentDelta::TaskCancel { task_id: "t1".into() }),
        ProtocolError::TaskNotActive { task_id: "t1".into() }
    );
    assert_eq!(rig.push(task_start("t2")), ["task.start t2"]);
}

#[test]
fn leaf_start_events_carry_the_active_task_id() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(reasoning("r"));
    rig.push(content("c"));
    rig.push(args("call_1", "{}"));
    rig.push(action_args("call_a", "{}"));
    for event in &rig.events[2..] {
        let v: Value = serde_json::from_str(&event.to_json().expect("ser")).expect("json");
        let expected = event.type_name().ends_with(".start").then_some("t1");
        assert_eq!(v.get("taskId").and_then(Value::as_str), expected, "{}", event.type_name());
    }
    rig.push(AgentDelta::TaskComplete { task_id: "t1".into() });
    rig.push(content("summary"));
    assert_eq!(rig.json(1).get("taskId"), None);
}

#[test]
fn task_end_events_close_all_open_blocks_first() {
    for (end, sig_end) in [
        (AgentDelta::TaskComplete { task_id: "t1".into() }, "task.complete t1"),
        (AgentDelta::TaskCancel { task_id: "t1".into() }, "task.cancel t1"),
        (AgentDelta::TaskFail { task_id: "t1".into(), error: TaskError::new("task_failed", "m") }, "task.fail t1"),
    ] {
        let mut rig = Rig::new();
        rig.push(plan());
        rig.push(task_start("t1"));
        rig.push(action_args("call_a", "{"));
        rig.push(args("call_1", "{"));
        rig.push(args("call_2", "{"));
        rig.push(reasoning("r"));
        assert_eq!(
            rig.push(end),
            ["reasoning.end r_1", "tool.end call_1", "tool.end call_2", "action.end call_a", sig_end]
        );
        assert_eq!(rig.asm.active_task(), None);
    }
}

#[test]
fn task_start_closes_blocks_opened_before_the_task() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(args("call_x", "{"));
    assert_eq!(rig.push(task_start("t1")), ["tool.end call_x", "task.start t1"]);
}

#[test]
fn task_fail_keeps_the_mode_error_object() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(AgentDelta::TaskFail { task_id: "t1".into(), error: TaskError::new("task_execution_error", "stalled") });
    assert_eq!(rig.json(0)["error"], json!({"code": "task_execution_error", "message": "stalled"}));
}

// -- §5 / §7 terminal events ----------------------------------------------------------------

#[test]
fn complete_closes_everything_completes_the_task_then_run_complete() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(args("call_1", "{"));
    rig.push(action_args("call_a", "{"));
    rig.push(content("c"));
    assert_eq!(
        rig.complete(),
        ["content.end c_1", "tool.end call_1", "action.end call_a", "task.complete t1", "run.complete"]
    );
    assert_eq!(
        rig.json(0),
        json!({"seq": 13, "type": "run.complete", "timestamp": 1050, "runId": "run", "finishReason": "stop"})
    );
    assert!(rig.asm.is_finished());
}

#[test]
fn the_last_output_before_the_end_is_run_completes_and_emits_nothing_itself() {
    let mut rig = Rig::new();
    rig.push(content("{\"a\":"));
    assert!(rig.push(AgentDelta::Output(json!({"a": 0}))).is_empty());
    assert!(rig.push(AgentDelta::Output(json!({"a": 1}))).is_empty(), "a repaired answer replaces it");
    assert_eq!(rig.asm.output(), Some(&json!({"a": 1})));
    assert_eq!(rig.complete(), ["content.end c_1", "run.complete"]);
    assert_eq!(rig.json(0)["output"], json!({"a": 1}));
}

#[test]
fn fail_closes_everything_fails_the_task_then_run_error() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(args("call_1", "{"));
    rig.push(reasoning("r"));
    let sigs = rig.fail(RunErrorInfo::new(ErrorCode::ProviderError, "HTTP 503", true));
    assert_eq!(sigs, ["reasoning.end r_1", "tool.end call_1", "task.fail t1", "run.error"]);
    assert_eq!(rig.json(1)["error"], json!({"code": "provider_error", "message": "HTTP 503"}));
    assert_eq!(
        rig.events.last().map(|e| e.to_json().expect("ser")).unwrap_or_default(),
        r#"{"seq":10,"type":"run.error","timestamp":1040,"runId":"run","error":{"code":"provider_error","message":"HTTP 503","retriable":true}}"#
    );
}

#[test]
fn fail_without_task_emits_no_task_fail() {
    let mut rig = Rig::new();
    rig.push(content("c"));
    let sigs = rig.fail(RunErrorInfo::new(ErrorCode::MaxSteps, "no answer", false));
    assert_eq!(sigs, ["content.end c_1", "run.error"]);
}

#[test]
fn nothing_after_the_terminal_event() {
    let mut rig = Rig::new();
    rig.complete();
    let count = rig.events.len();
    assert_eq!(rig.push_err(content("late")), ProtocolError::Finished);
    assert_eq!(rig.push_err(stage("late")), ProtocolError::Finished);
    rig.asm.complete("stop", &mut rig.events);
    rig.asm.fail(RunErrorInfo::new(ErrorCode::Internal, "x", false), &mut rig.events);
    rig.asm.bootstrap(
        RequestQuery {
            request_id: "r".into(),
            chat_id: "chat".into(),
            role: "user".into(),
            message: "m".into(),
            agent_key: None,
            references: None,
            params: None,
            scene: None,
            stream: None,
        },
        None,
        &mut rig.events,
    );
    assert_eq!(rig.events.len(), count);

    let mut failed = Rig::new();
    failed.asm.fail_protocol(&ProtocolError::TaskWithoutPlan { task_id: "t".into() }, &mut failed.events);
    failed.complete();
    assert_eq!(failed.events.len(), 1);
    assert_eq!(failed.json(0)["error"]["code"], "internal");
}

// -- steers (successor protocol) -----------------------------------------------------------

fn steer(id: &str, request_id: Option<&str>) -> AgentDelta {
    AgentDelta::Steer { steer_id: id.into(), message: "use Celsius".into(), request_id: request_id.map(str::to_owned) }
}

#[test]
fn steer_ends_the_open_block_then_request_steer_then_text_opens_a_new_block() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    assert_eq!(rig.push(steer("s1", Some("req-9"))), ["content.end c_1", "request.steer"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 4, "type": "request.steer", "timestamp": 1010, "requestId": "req-9", "chatId": "chat",
               "runId": "run", "steerId": "s1", "message": "use Celsius", "role": "user"})
    );
    assert_eq!(
        rig.events[3].to_json().expect("ser"),
        r#"{"seq":4,"type":"request.steer","timestamp":1010,"requestId":"req-9","chatId":"chat","runId":"run","steerId":"s1","message":"use Celsius","role":"user"}"#,
        "key order: the successor's fields, optional ones omitted"
    );
    // Even without a stage marker, the next text is a new block.
    assert_eq!(rig.push(content("b")), ["content.start c_2", "content.delta c_2"]);
    rig.push(reasoning("r"));
    assert_eq!(rig.push(steer("s2", None)), ["reasoning.end r_1", "request.steer"]);
    assert_eq!(rig.json(0).get("requestId"), None, "requestId is omitted when the steer had none");
    assert_eq!(rig.push(reasoning("r2")), ["reasoning.start r_2", "reasoning.delta r_2"]);
}

#[test]
fn steer_without_open_text_emits_only_request_steer_and_leaves_calls_open() {
    let mut rig = Rig::new();
    assert_eq!(rig.push(steer("s0", None)), ["request.steer"]);
    rig.push(args("call_1", "{"));
    assert_eq!(rig.push(steer("s1", None)), ["request.steer"]);
    assert_eq!(rig.push(args("call_1", "}")), ["tool.args call_1"], "the call is still open");
    assert_eq!(rig.complete(), ["tool.end call_1", "run.complete"]);
}

#[test]
fn steer_inside_a_task_carries_its_task_id_last() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(content("c"));
    assert_eq!(rig.push(steer("s1", None)), ["content.end c_1", "request.steer t1"]);
    assert_eq!(
        rig.events.last().expect("steer").to_json().expect("ser"),
        r#"{"seq":6,"type":"request.steer","timestamp":1030,"chatId":"chat","runId":"run","steerId":"s1","message":"use Celsius","role":"user","taskId":"t1"}"#
    );
    rig.push(AgentDelta::TaskComplete { task_id: "t1".into() });
    rig.push(steer("s2", None));
    assert_eq!(rig.json(0).get("taskId"), None);
}

#[test]
fn steer_after_the_terminal_event_is_refused() {
    let mut rig = Rig::new();
    rig.complete();
    assert_eq!(rig.push_err(steer("s1", None)), ProtocolError::Finished);
}

// -- seq and timestamps ---------------------------------------------------------------------

fn query() -> RequestQuery {
    RequestQuery {
        request_id: "run".into(),
        chat_id: "chat".into(),
        role: "user".into(),
        message: "m".into(),
        agent_key: None,
        references: None,
        params: None,
        scene: None,
        stream: None,
    }
}

#[test]
fn bootstrap_emits_query_optional_chat_start_and_run_start() {
    let mut rig = Rig::new();
    rig.asm.bootstrap(query(), None, &mut rig.events);
    let sigs: Vec<String> = rig.events.iter().map(sig).collect();
    assert_eq!(sigs, ["request.query", "run.start"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 2, "type": "run.start", "timestamp": 1000, "runId": "run", "chatId": "chat"})
    );

    let mut rig = Rig::new();
    let chat_start = ChatStart { chat_id: "chat".into(), chat_name: "m".into() };
    rig.asm.bootstrap(query(), Some(chat_start), &mut rig.events);
    let sigs: Vec<String> = rig.events.iter().map(sig).collect();
    assert_eq!(sigs, ["request.query", "chat.start", "run.start"]);
    assert_eq!(rig.events[0].seq, 1);
    assert_eq!(rig.reads(), 1);
}

#[test]
fn seq_is_gapless_from_one_including_plan_update() {
    let mut rig = Rig::new();
    rig.asm.bootstrap(query(), None, &mut rig.events);
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(content("c"));
    rig.push(args("call_1", "{}"));
    rig.push(tool_result("call_1"));
    rig.push(plan());
    rig.complete();
    let seqs: Vec<u64> = rig.events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=rig.events.len() as u64).collect();
    assert_eq!(seqs, expected);
    assert_eq!(rig.asm.next_seq(), rig.events.len() as u64 + 1);
    let plan_update = rig.events.iter().find(|e| e.type_name() == "plan.update").expect("plan.update");
    assert_eq!(
        plan_update.to_json().expect("ser"),
        r#"{"seq":3,"type":"plan.update","timestamp":1010,"planId":"plan_x","chatId":"chat","plan":[{"taskId":"t1","description":"d","status":"init"}]}"#
    );
}

#[test]
fn clock_is_read_once_per_emitting_call_and_never_for_silent_ones() {
    let mut rig = Rig::new();
    rig.push(reasoning("a")); // 2 events
    assert_eq!(rig.reads(), 1);
    rig.push(stage("x"));
    rig.push(AgentDelta::Usage(json!({}).into()));
    rig.push(content(""));
    assert_eq!(rig.reads(), 1);
    rig.push(args("call_1", "{}")); // reasoning.end, tool.start, tool.args
    assert_eq!(rig.reads(), 2);
    let ts: Vec<i64> = rig.events.iter().map(|e| e.timestamp).collect();
    assert_eq!(ts, [1000, 1000, 1010, 1010, 1010]);
    rig.complete();
    assert_eq!(rig.reads(), 3);
}

#[test]
fn timestamps_never_decrease_even_if_the_clock_steps_back() {
    let mut times = vec![500, 100, 700].into_iter();
    let clock = Box::new(move || times.next().unwrap_or(0));
    let mut asm = Assembler::new("run", "chat", clock);
    let mut out = Vec::new();
    asm.push(content("a"), &mut out).expect("ok");
    asm.push(content("b"), &mut out).expect("ok");
    asm.push(content("c"), &mut out).expect("ok");
    let ts: Vec<i64> = out.iter().map(|e| e.timestamp).collect();
    assert_eq!(ts, [500, 500, 500, 700]);
}

#[test]
fn system_clock_is_epoch_millis() {
    let now = SystemClock.now_ms();
    assert!(now > 1_700_000_000_000, "{now}");
}

// -- cancel (run lifecycle) ------------------------------------------------------------------

#[test]
fn cancel_closes_blocks_answers_every_unanswered_call_and_ends_with_run_cancel() {
    let mut rig = Rig::new();
    rig.push(plan());
    rig.push(task_start("t1"));
    rig.push(args("answered", "{}"));
    rig.push(tool_end("answered"));
    rig.push(tool_result("answered"));
    rig.push(args("waiting", "{}"));
    rig.push(tool_end("waiting"));
    rig.push(args("streaming", "{\"a\":"));
    rig.push(action_args("act", "{}"));
    rig.push(content("partial"));
    let before = rig.events.len();
    rig.asm.cancel(&mut rig.events);
    let sigs: Vec<String> = rig.events[before..].iter().map(sig).collect();
    assert_eq!(
        sigs,
        [
            "content.end c_1",
            "tool.end streaming",
            "action.end act",
            "tool.result waiting",
            "tool.result streaming",
            "action.result act",
            "task.cancel t1",
            "run.cancel",
        ]
    );
    let results: Vec<Value> = rig.events[before..]
        .iter()
        .filter(|e| matches!(e.type_name(), "tool.result" | "action.result"))
        .map(|e| serde_json::from_str::<Value>(&e.to_json().unwrap()).unwrap())
        .collect();
    assert_eq!(results[0]["result"], CANCELLED_RESULT, "tool results are strings");
    assert_eq!(results[2]["result"], json!({"executed": false, "reason": "cancelled"}), "action results are parsed");
    assert!(rig.events.last().unwrap().is_terminal());
    assert_eq!(
        rig.json(0),
        json!({"seq": rig.events.len(), "type": "run.cancel", "timestamp": rig.json(0)["timestamp"], "runId": "run"})
    );
    assert!(rig.asm.is_finished());
    assert_eq!(rig.push_err(content("late")), ProtocolError::Finished);
    let after = rig.events.len();
    rig.asm.cancel(&mut rig.events);
    rig.complete();
    assert_eq!(rig.events.len(), after, "nothing after the terminal event");
}

#[test]
fn a_resumed_assembler_continues_the_seq_and_answers_the_calls_it_adopted() {
    let mut asm = Assembler::resumed("run", "chat", Box::new(|| 5), 42, &["waiting".into()], &["act".into()]);
    let mut events = Vec::new();
    asm.push(tool_result("waiting"), &mut events).expect("an adopted call takes its result");
    let err = asm.push(tool_result("waiting"), &mut events).expect_err("and only one");
    assert!(matches!(err, ProtocolError::DuplicateResult { .. }), "{err:?}");
    assert!(asm.push(tool_end("waiting"), &mut events).is_err(), "the adopted call was ended already");
    asm.cancel(&mut events);
    let sigs: Vec<String> = events.iter().map(sig).collect();
    assert_eq!(sigs, ["tool.result waiting", "action.end act", "action.result act", "run.cancel"]);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [42, 43, 44, 45], "no request.query / run.start again; numbering goes on");
}

#[test]
fn a_compaction_closes_the_open_text_block_and_carries_the_run_id() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    let compact = ContextCompact {
        run_id: "whatever the mode said".into(),
        level: crate::event::CompactLevel::Prune,
        tokens_before: 10,
        tokens_after: 5,
        budget: 8,
        duration_ms: 0,
        pruned_results: 1,
        replaced_messages: 0,
        summary: None,
        through_run_id: None,
        reason: None,
    };
    assert_eq!(rig.push(AgentDelta::Compact(compact)), ["content.end c_1", "context.compact"]);
    let EventPayload::ContextCompact(event) = &rig.events.last().unwrap().payload else { panic!("context.compact") };
    assert_eq!(event.run_id, "run");
    assert_eq!(rig.push(content("b")), ["content.start c_2", "content.delta c_2"]);
}

#[test]
fn a_handoff_closes_the_open_text_block_and_names_both_agents() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    let handoff =
        AgentDelta::Handoff { from_agent_key: "triage".into(), to_agent_key: "billing".into(), tool_id: "t1".into() };
    assert_eq!(rig.push(handoff), ["content.end c_1", "agent.handoff t1"]);
    let EventPayload::AgentHandoff(event) = &rig.events.last().unwrap().payload else { panic!("agent.handoff") };
    assert_eq!(
        (event.run_id.as_str(), event.from_agent_key.as_str(), event.to_agent_key.as_str()),
        ("run", "triage", "billing")
    );
    let json = rig.events.last().unwrap().to_json().unwrap();
    assert!(json.contains(r#""type":"agent.handoff""#) && json.contains(r#""toolId":"t1""#), "{json}");
    // The next agent's text is a new block.
    assert_eq!(rig.push(content("b")), ["content.start c_2", "content.delta c_2"]);
}

#[test]
fn tool_progress_needs_a_running_call_and_streams_each_piece() {
    let mut rig = Rig::new();
    let progress = |id: &str, text: &str| AgentDelta::ToolProgress { tool_id: id.into(), delta: text.into() };
    assert!(matches!(rig.push_err(progress("t1", "x")), ProtocolError::NotStarted { .. }));
    rig.push(args("t1", "{}"));
    rig.push(AgentDelta::ToolEnd { tool_id: "t1".into() });
    assert_eq!(rig.push(progress("t1", "Sunny ")), ["tool.progress t1"]);
    assert_eq!(rig.json(0)["delta"], "Sunny ");
    assert!(rig.push(progress("t1", "")).is_empty(), "an empty piece is nothing");
    rig.push(AgentDelta::ToolResult { tool_id: "t1".into(), result: "Sunny today.".into() });
    assert!(matches!(rig.push_err(progress("t1", "late")), ProtocolError::DuplicateResult { .. }));
}

#[test]
fn a_fallback_closes_the_open_text_block_and_names_both_models() {
    use crate::event::{ModelFallback, ModelRef};
    let mut rig = Rig::new();
    rig.push(content("a"));
    let model = |p: &str, m: &str| ModelRef { provider_key: p.into(), model: m.into() };
    let fallback = ModelFallback {
        run_id: "whatever the mode said".into(),
        from: model("main", "big"),
        to: model("spare", "small"),
        reason: "rate_limit".into(),
        message: "provider answered HTTP 429: slow down".into(),
    };
    assert_eq!(rig.push(AgentDelta::Fallback(fallback)), ["content.end c_1", "model.fallback"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 4, "type": "model.fallback", "timestamp": rig.events[3].timestamp, "runId": "run",
            "from": {"providerKey": "main", "model": "big"}, "to": {"providerKey": "spare", "model": "small"},
            "reason": "rate_limit", "message": "provider answered HTTP 429: slow down"})
    );
    // The fallback model's text is a new block.
    assert_eq!(rig.push(content("b")), ["content.start c_2", "content.delta c_2"]);
}

// -- child tasks (sub-agents, parallel plan tasks) ------------------------------------------

fn child_start(task: &str) -> AgentDelta {
    AgentDelta::ChildStart(ChildTask {
        task_id: task.into(),
        task_name: Some(format!("{task} name")),
        description: Some("look it up".into()),
        sub_agent_key: Some("researcher".into()),
        tool_id: Some("call_1".into()),
    })
}
fn child(task: &str, delta: AgentDelta) -> AgentDelta {
    AgentDelta::Child { task_id: task.into(), delta: Box::new(delta) }
}
fn child_end(task: &str, end: ChildEnd) -> AgentDelta {
    AgentDelta::ChildEnd { task_id: task.into(), end }
}

/// `sig` plus the task the event belongs to, as a client reads it from the wire.
fn lane_sig(event: &Event) -> String {
    let value: Value = serde_json::from_str(&event.to_json().expect("serialise")).expect("json");
    if event.type_name().starts_with("task.") || event.type_name().starts_with("run.") {
        return match value.get("taskId").and_then(Value::as_str) {
            Some(task) => format!("{} {task}", event.type_name()),
            None => event.type_name().to_owned(),
        };
    }
    let id = ["reasoningId", "contentId", "toolId", "actionId", "planId"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .map(|id| id.trim_start_matches("run_").to_owned());
    let mut sig = event.type_name().to_owned();
    if let Some(id) = id {
        sig = format!("{sig} {id}");
    }
    match value.get("taskId").and_then(Value::as_str) {
        Some(task) => format!("{sig} @{task}"),
        None => sig,
    }
}

impl Rig {
    fn lane_push(&mut self, delta: AgentDelta) -> Vec<String> {
        let before = self.events.len();
        self.asm.push(delta, &mut self.events).expect("delta accepted");
        self.events[before..].iter().map(lane_sig).collect()
    }
}

#[test]
fn children_interleave_each_in_its_own_blocks_and_every_child_event_names_its_task() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{}"));
    rig.push(tool_end("call_1"));
    assert_eq!(rig.lane_push(child_start("a")), ["task.start a"]);
    assert_eq!(rig.lane_push(child_start("b")), ["task.start b"]);
    // Text of one child never closes the other's.
    assert_eq!(rig.lane_push(child("a", content("x"))), ["content.start a_c_1 @a", "content.delta a_c_1 @a"]);
    assert_eq!(rig.lane_push(child("b", reasoning("y"))), ["reasoning.start b_r_1 @b", "reasoning.delta b_r_1 @b"]);
    assert_eq!(rig.lane_push(child("a", content("z"))), ["content.delta a_c_1 @a"]);
    assert_eq!(
        rig.lane_push(child("b", args("t_b_1", r#"{"q":1}"#))),
        ["reasoning.end b_r_1 @b", "tool.start t_b_1 @b", "tool.args t_b_1 @b"]
    );
    assert_eq!(rig.lane_push(child("b", tool_result("t_b_1"))), ["tool.end t_b_1 @b", "tool.result t_b_1 @b"]);
    assert_eq!(rig.lane_push(child_end("a", ChildEnd::Complete)), ["content.end a_c_1 @a", "task.complete a"]);
    let error = TaskError::new("provider_error", "boom");
    assert_eq!(rig.lane_push(child_end("b", ChildEnd::Fail(error))), ["task.fail b"]);
    // The run's own call is answered once the children ended; seqs run on without gaps.
    assert_eq!(rig.lane_push(tool_result("call_1")), ["tool.result call_1"]);
    let seqs: Vec<u64> = rig.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    let start = rig.events.iter().find(|e| e.type_name() == "task.start").expect("task.start");
    let json: Value = serde_json::from_str(&start.to_json().expect("json")).expect("json");
    assert_eq!(json["subAgentKey"], "researcher");
    assert_eq!(json["toolId"], "call_1");
    assert_eq!(json["taskName"], "a name");
    assert_eq!(json["description"], "look it up");
}

#[test]
fn every_child_event_survives_a_round_trip_through_its_json() {
    let mut rig = Rig::new();
    rig.push(child_start("a"));
    rig.push(child("a", content("x")));
    rig.push(child("a", args("t1", "{}")));
    rig.push(child("a", tool_result("t1")));
    rig.push(child_end("a", ChildEnd::Complete));
    for event in &rig.events {
        let parsed: Event = serde_json::from_str(&event.to_json().expect("json")).expect("parses");
        assert_eq!(&parsed, event);
        if event.type_name() != "task.start" && event.type_name() != "task.complete" {
            assert_eq!(parsed.task(), Some("a"), "{}", event.type_name());
        }
    }
    // `taskId` is written once, whether the payload or the event holds it.
    let start = rig.events.iter().find(|e| e.type_name() == "content.start").expect("content.start");
    assert_eq!(start.to_json().expect("json").matches("taskId").count(), 1);
    assert_eq!(start.task_id, None, "content.start carries its task in its own field");
}

#[test]
fn a_childs_usage_is_the_runs_and_a_run_that_ends_closes_its_children() {
    let mut rig = Rig::new();
    rig.push(child_start("a"));
    rig.push(child_start("b"));
    rig.push(child("a", AgentDelta::Usage(CallUsage::from(json!({"prompt_tokens": 3, "completion_tokens": 4})))));
    rig.push(child("b", args("t1", "{}")));
    rig.push(child("a", content("x")));
    let types = rig.fail(RunErrorInfo::new(ErrorCode::BudgetExceeded, "too much", false));
    assert_eq!(types, ["content.end a_c_1", "task.fail a", "tool.end t1", "task.fail b", "run.error"]);
    let usage = rig.json(0)["usage"].clone();
    assert_eq!(usage["inputTokens"], 3, "{usage}");
}

#[test]
fn cancelling_a_run_cancels_its_children_and_answers_their_calls() {
    let mut rig = Rig::new();
    rig.push(child_start("a"));
    rig.push(child("a", args("t1", "{}")));
    rig.push(child("a", tool_end("t1")));
    let before = rig.events.len();
    rig.asm.cancel(&mut rig.events);
    let types: Vec<String> = rig.events[before..].iter().map(lane_sig).collect();
    assert_eq!(types, ["tool.result t1 @a", "task.cancel a", "run.cancel"]);
}

#[test]
fn child_deltas_are_refused_for_a_child_not_open_and_a_child_id_is_used_once() {
    let mut rig = Rig::new();
    assert_eq!(rig.push_err(child("a", content("x"))), ProtocolError::ChildNotOpen { task_id: "a".into() });
    rig.push(child_start("a"));
    assert_eq!(rig.push_err(child_start("a")), ProtocolError::ChildAlreadyOpen { task_id: "a".into() });
    rig.push(child_end("a", ChildEnd::Complete));
    assert_eq!(rig.push_err(child_end("a", ChildEnd::Complete)), ProtocolError::ChildNotOpen { task_id: "a".into() });
}

#[test]
fn a_child_running_a_plan_shows_it_by_plan_updates_without_task_events_of_its_own() {
    let mut rig = Rig::new();
    rig.push(child_start("a"));
    assert_eq!(rig.lane_push(child("a", plan())), ["plan.update plan_x @a"]);
    assert_eq!(rig.lane_push(child("a", task_start("t1"))), Vec::<String>::new());
    assert_eq!(rig.lane_push(child("a", content("x"))), ["content.start a_c_1 @a", "content.delta a_c_1 @a"]);
    assert_eq!(rig.lane_push(child("a", AgentDelta::TaskComplete { task_id: "t1".into() })), ["content.end a_c_1 @a"]);
}

// -- guardrails (issue 36) ----------------------------------------------------------------------

fn revoke() -> AgentDelta {
    AgentDelta::Revoke(Revocation { guard: "rules:pii".into(), rule: Some("email".into()), reason: "pii".into() })
}
fn notice(stage: GuardStage, tool_id: Option<&str>) -> GuardNotice {
    GuardNotice {
        stage,
        guard: "webhook".into(),
        rule: None,
        message: "careful".into(),
        tool_id: tool_id.map(str::to_owned),
    }
}
fn warning(stage: GuardStage, tool_id: Option<&str>) -> AgentDelta {
    AgentDelta::GuardWarning(notice(stage, tool_id))
}

#[test]
fn a_revoke_ends_the_open_block_and_withdraws_it() {
    let mut rig = Rig::new();
    rig.push(content("a"));
    rig.push(content("b"));
    assert_eq!(rig.push(revoke()), ["content.end c_1", "content.revoke c_1"]);
    assert_eq!(
        rig.json(0),
        json!({"seq": 5, "type": "content.revoke", "timestamp": rig.events[4].timestamp, "contentId": "run_c_1",
            "stage": "output", "guard": "rules:pii", "rule": "email", "reason": "pii", "statusCode": -1006})
    );
    // The turn has nothing left to withdraw.
    assert_eq!(rig.push(revoke()), ["guard.block"]);
}

#[test]
fn a_revoke_withdraws_the_turns_last_content_block_after_it_ended() {
    let mut rig = Rig::new();
    rig.push(stage("react-step-1"));
    rig.push(content("a"));
    rig.push(reasoning("r"));
    rig.push(content("b"));
    rig.push(args("call_1", "{}"));
    assert_eq!(rig.push(revoke()), ["content.revoke c_2"]);
}

#[test]
fn a_turn_that_streamed_no_content_gets_a_block_instead_of_a_revoke() {
    // A stage marker begins a turn: the previous turn's block is not this turn's.
    let mut rig = Rig::new();
    rig.push(content("a"));
    rig.push(stage("react-step-2"));
    rig.push(reasoning("r"));
    assert_eq!(rig.push(revoke()), ["reasoning.end r_1", "guard.block"]);
    let block = rig.json(0);
    assert_eq!(
        (block["stage"].as_str(), block["reason"].as_str(), block["statusCode"].as_i64()),
        (Some("output"), Some("pii"), Some(-1006))
    );
    assert!(block.get("toolId").is_none());
    // So does a tool result: the model's next output is a new turn.
    let mut rig = Rig::new();
    rig.push(content("a"));
    rig.push(args("call_1", "{}"));
    rig.push(tool_result("call_1"));
    assert_eq!(rig.push(revoke()), ["guard.block"]);
}

#[test]
fn a_warning_names_the_turns_block_and_the_answer_goes_on_in_it() {
    let mut rig = Rig::new();
    assert_eq!(rig.push(warning(GuardStage::Output, None)), ["guard.warning"], "no content yet");
    rig.push(content("a"));
    assert_eq!(rig.push(warning(GuardStage::Output, None)), ["guard.warning c_1"]);
    assert_eq!(rig.push(content("b")), ["content.delta c_1"], "the block stays open");
    assert_eq!(
        rig.json(1),
        json!({"seq": 4, "type": "guard.warning", "timestamp": rig.events[3].timestamp, "stage": "output",
            "guard": "webhook", "message": "careful", "contentId": "run_c_1", "statusCode": -1007})
    );
    // A tool stage's warning names the call, not the text.
    rig.push(args("call_1", "{}"));
    assert_eq!(rig.push(warning(GuardStage::ToolInput, Some("call_1"))), ["guard.warning call_1"]);
    assert!(rig.json(0).get("contentId").is_none());
}

#[test]
fn a_block_ends_the_open_text_block() {
    let mut rig = Rig::new();
    rig.push(reasoning("r"));
    let block = AgentDelta::GuardBlock(notice(GuardStage::ToolOutput, Some("call_1")));
    assert_eq!(rig.push(block), ["reasoning.end r_1", "guard.block call_1"]);
    let json = rig.json(0);
    assert_eq!((json["stage"].as_str(), json["reason"].as_str()), (Some("toolOutput"), Some("careful")));
    assert_eq!(json["statusCode"], -1006);
}

#[test]
fn a_childs_revoke_and_warning_stay_in_its_lane() {
    let mut rig = Rig::new();
    rig.push(args("call_1", "{}"));
    rig.push(tool_end("call_1"));
    rig.push(child_start("a"));
    rig.push(child_start("b"));
    rig.push(child("b", content("y")));
    rig.push(child("a", content("x")));
    assert_eq!(rig.lane_push(child("a", warning(GuardStage::Output, None))), ["guard.warning a_c_1 @a"]);
    assert_eq!(rig.lane_push(child("a", revoke())), ["content.end a_c_1 @a", "content.revoke a_c_1 @a"]);
    // The other child's block is not touched, and has its own turn.
    assert_eq!(rig.lane_push(child("b", content("z"))), ["content.delta b_c_1 @b"]);
    assert_eq!(rig.lane_push(child("b", revoke())), ["content.end b_c_1 @b", "content.revoke b_c_1 @b"]);
    let seqs: Vec<u64> = rig.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_resumed_run_numbers_on_names_the_superseded_blocks_and_never_reuses_an_id() {
    let clock = Box::new(|| 5);
    let shown = BlockCounts { reasoning: 2, content: 3 };
    let mut asm = Assembler::resumed("run", "chat", clock, 41, &[], &[]).with_block_counts(shown);
    let mut out = Vec::new();
    asm.resume_run(1, 30, BlockCounts { reasoning: 1, content: 1 }, shown, vec!["t1".into()], &mut out);
    let EventPayload::RunResume(resume) = &out[0].payload else { panic!("{out:?}") };
    assert_eq!(out[0].seq, 41);
    assert_eq!((resume.attempt, resume.discard_from), (1, 30));
    assert_eq!(resume.content_ids, ["run_c_2", "run_c_3"]);
    assert_eq!(resume.reasoning_ids, ["run_r_2"]);
    assert_eq!(resume.task_ids, ["t1"]);
    asm.push(AgentDelta::Content("again".into()), &mut out).unwrap();
    let EventPayload::ContentStart(start) = &out[1].payload else { panic!("{out:?}") };
    assert_eq!((out[1].seq, start.content_id.as_str()), (42, "run_c_4"));
    // Nothing superseded: `discardFrom` is the event's own seq.
    let mut asm = Assembler::resumed("run", "chat", Box::new(|| 5), 10, &[], &[]);
    let mut out = Vec::new();
    asm.resume_run(2, 99, BlockCounts::default(), BlockCounts::default(), Vec::new(), &mut out);
    let EventPayload::RunResume(resume) = &out[0].payload else { panic!("{out:?}") };
    assert_eq!(resume.discard_from, 10);
    assert!(resume.content_ids.is_empty() && resume.reasoning_ids.is_empty());
}
