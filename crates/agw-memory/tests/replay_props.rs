//! Property: replaying a recorded run gives back what was streamed live (`docs/reliability.md`).
//!
//! Any run a mode can produce — steps of reasoning and content chunks (empty, whitespace and
//! multi-byte ones included), tool and action calls with their arguments in pieces and their
//! results (actions whitelisted, so they replay as actions), usage, steers taken between model
//! turns, an optional plan with tasks — is pushed through the assembler and the
//! recorder; the history lines go through their JSON form and `replay_chat`. For every block the
//! replayed snapshot text equals the concatenation of its live deltas, blocks replay in live
//! order, every `request.steer` replays with its live fields (all but the live-only `taskId`) at
//! its live position, guards' warnings, blocks and a final revoke replay with their live fields in
//! their live order, and replay `seq` is 1..N. Completed, failed and abandoned (client gone) runs
//! alike.
//!
//! `PROPTEST_CASES` raises the number of cases (default here: 256).

use std::collections::BTreeMap;

use agw_memory::{Recorder, RecorderInit};
use agw_protocol::delta::{ActionStartMeta, ToolStartMeta};
use agw_protocol::event::{ChatStart, ErrorCode, PlanTask, TaskStatus};
use agw_protocol::history::HistoryLine;
use agw_protocol::request::QueryRequest;
use agw_protocol::{
    AgentDelta, Assembler, Event, EventPayload, GuardNotice, GuardStage, Revocation, RunErrorInfo, replay_chat,
};
use proptest::prelude::*;
use serde_json::json;

const CHAT: &str = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
const RUN: &str = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        2 => prop::sample::select(vec![" ", "\n\n", "\t", "\r\n"]).prop_map(str::to_owned),
        6 => "[a-zA-Z0-9 ,.]{1,10}",
        2 => "\\PC{1,5}",
    ]
}

#[derive(Debug, Clone)]
enum Text {
    Reasoning(String),
    Content(String),
}

#[derive(Debug, Clone)]
struct Call {
    action: bool,
    args: Vec<String>,
    result: String,
}

#[derive(Debug, Clone)]
struct Step {
    texts: Vec<Text>,
    calls: Vec<Call>,
    usage: bool,
    /// Run this step as a task of the plan.
    task: bool,
    /// A steer taken at the start of the step (before its model turn): `(message, requestId)`.
    steer: Option<(String, Option<String>)>,
    /// An output guard's warning after this text of the step (when it has one).
    warn_after: Option<usize>,
    /// A tool-input guard blocks the step's first call, once the calls ended.
    block: bool,
}

#[derive(Debug, Clone)]
enum End {
    Complete,
    Fail,
    /// The client went away: the run is persisted without a terminal event.
    Abandon,
}

fn step() -> impl Strategy<Value = Step> {
    let text = prop_oneof![piece().prop_map(Text::Reasoning), piece().prop_map(Text::Content)];
    let call = (prop::bool::weighted(0.2), prop::collection::vec(piece(), 0..4), piece())
        .prop_map(|(action, args, result)| Call { action, args, result });
    let steer = prop::option::weighted(0.3, (piece(), prop::option::of("[a-z0-9-]{1,8}")));
    (
        prop::collection::vec(text, 0..6),
        prop::collection::vec(call, 0..3),
        any::<bool>(),
        prop::bool::weighted(0.3),
        steer,
        prop::option::weighted(0.3, 0..6_usize),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(texts, calls, usage, task, steer, warn_after, block)| Step {
            texts,
            calls,
            usage,
            task,
            steer,
            warn_after,
            block,
        })
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![3 => Just(End::Complete), 2 => Just(End::Fail), 1 => Just(End::Abandon)]
}

fn notice(stage: GuardStage, tool_id: Option<&str>) -> GuardNotice {
    GuardNotice {
        stage,
        guard: "rules:demo".into(),
        rule: Some("r1".into()),
        message: "careful".into(),
        tool_id: tool_id.map(str::to_owned),
    }
}

/// The deltas a mode would emit for these steps; with `revoke`, a guard withdraws the last
/// turn's answer at the end (a revoke ends a run).
fn deltas_of(steps: &[Step], revoke: bool) -> Vec<AgentDelta> {
    let mut out = Vec::new();
    if steps.iter().any(|s| s.task) {
        let plan = (1..=steps.len())
            .map(|i| PlanTask { task_id: format!("t{i}"), description: format!("task {i}"), status: TaskStatus::Init })
            .collect();
        out.push(AgentDelta::PlanUpdate { plan_id: "plan_1".into(), plan });
    }
    for (n, step) in steps.iter().enumerate() {
        let task_id = format!("t{}", n + 1);
        out.push(AgentDelta::StageMarker(format!("react-step-{}", n + 1)));
        if step.task {
            out.push(AgentDelta::TaskStart { task_id: task_id.clone(), description: Some("work".into()) });
        }
        if let Some((message, request_id)) = &step.steer {
            out.push(AgentDelta::Steer {
                steer_id: format!("steer_{n}"),
                message: message.clone(),
                request_id: request_id.clone(),
            });
        }
        for (i, text) in step.texts.iter().enumerate() {
            out.push(match text {
                Text::Reasoning(t) => AgentDelta::Reasoning(t.clone()),
                Text::Content(t) => AgentDelta::Content(t.clone()),
            });
            if step.warn_after == Some(i) {
                out.push(AgentDelta::GuardWarning(notice(GuardStage::Output, None)));
            }
        }
        let ids: Vec<String> = (0..step.calls.len()).map(|i| format!("call_{n}_{i}")).collect();
        for (call, id) in step.calls.iter().zip(&ids) {
            // The first fragment opens the call, even with empty arguments.
            let mut pieces = call.args.clone();
            if pieces.is_empty() {
                pieces.push(String::new());
            }
            for delta in pieces {
                out.push(if call.action {
                    AgentDelta::ActionArgs {
                        action_id: id.clone(),
                        meta: ActionStartMeta { action_name: "switch_theme".into(), description: None },
                        delta,
                    }
                } else {
                    AgentDelta::ToolArgs {
                        tool_id: id.clone(),
                        meta: ToolStartMeta {
                            tool_name: "mock_city_weather".into(),
                            tool_type: "function".into(),
                            ..ToolStartMeta::default()
                        },
                        delta,
                    }
                });
            }
        }
        if step.usage {
            out.push(AgentDelta::Usage(json!({"prompt_tokens": 10, "completion_tokens": n}).into()));
        }
        for (call, id) in step.calls.iter().zip(&ids) {
            out.push(if call.action {
                AgentDelta::ActionEnd { action_id: id.clone() }
            } else {
                AgentDelta::ToolEnd { tool_id: id.clone() }
            });
        }
        if step.block && !ids.is_empty() {
            out.push(AgentDelta::GuardBlock(notice(GuardStage::ToolInput, Some(&ids[0]))));
        }
        for (call, id) in step.calls.iter().zip(&ids) {
            out.push(if call.action {
                AgentDelta::ActionResult { action_id: id.clone(), result: json!("OK") }
            } else {
                AgentDelta::ToolResult { tool_id: id.clone(), result: call.result.clone() }
            });
        }
        if step.task {
            out.push(AgentDelta::TaskComplete { task_id });
        }
    }
    if revoke {
        out.push(AgentDelta::Revoke(Revocation { guard: "rules:pii".into(), rule: None, reason: "pii".into() }));
    }
    out
}

/// Runs the deltas through an assembler and a recorder on one scripted clock.
fn record(deltas: &[AgentDelta], end: &End) -> (Vec<Event>, Vec<HistoryLine>) {
    let mut tick = 1_000_i64;
    let mut asm = Assembler::new(
        RUN,
        CHAT,
        Box::new(move || {
            tick += 3;
            tick
        }),
    );
    let query = QueryRequest { message: Some("hi".into()), ..QueryRequest::default() };
    let mut recorder = Recorder::new(RecorderInit {
        chat_id: CHAT.into(),
        run_id: RUN.into(),
        query: query.clone(),
        system: None,
        // Whitelisted, actions are persisted and replayed as actions (by default they replay as
        // tools, as the contract says).
        action_tools: vec!["switch_theme".into()],
    });
    let mut events = Vec::new();
    let mut lines = Vec::new();
    asm.bootstrap(
        query.to_event(RUN, CHAT),
        Some(ChatStart { chat_id: CHAT.into(), chat_name: "hi".into() }),
        &mut events,
    );
    recorder.observe_events(&events);
    for delta in deltas {
        let before = events.len();
        asm.push(delta.clone(), &mut events)
            .unwrap_or_else(|e| panic!("a well-formed run was refused: {e}: {delta:?}"));
        lines.extend(recorder.observe(delta, &events[before..]));
    }
    let before = events.len();
    match end {
        End::Complete => asm.complete("stop", &mut events),
        End::Fail => asm.fail(RunErrorInfo::new(ErrorCode::ProviderError, "cut", true), &mut events),
        End::Abandon => {}
    }
    lines.extend(recorder.finish(&events[before..]));
    // Through the file format and back, as a replay reads it.
    let lines = lines
        .iter()
        .map(|l| HistoryLine::parse(&l.to_json().unwrap()).unwrap().expect("a query or step line"))
        .collect();
    (events, lines)
}

/// Live: every block that started, with the concatenation of its deltas; tool results.
fn live_texts(events: &[Event]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for event in events {
        let (key, piece) = match &event.payload {
            EventPayload::ReasoningStart(e) => (e.reasoning_id.clone(), ""),
            EventPayload::ContentStart(e) => (e.content_id.clone(), ""),
            EventPayload::ToolStart(e) => (e.tool_id.clone(), ""),
            EventPayload::ActionStart(e) => (e.action_id.clone(), ""),
            EventPayload::ReasoningDelta(e) => (e.reasoning_id.clone(), e.delta.as_str()),
            EventPayload::ContentDelta(e) => (e.content_id.clone(), e.delta.as_str()),
            EventPayload::ToolArgs(e) => (e.tool_id.clone(), e.delta.as_str()),
            EventPayload::ActionArgs(e) => (e.action_id.clone(), e.delta.as_str()),
            EventPayload::ToolResult(e) => (format!("result:{}", e.tool_id), e.result.as_str()),
            EventPayload::ActionResult(e) => (format!("result:{}", e.action_id), e.result.as_str().unwrap_or("?")),
            _ => continue,
        };
        out.entry(key).or_insert_with(String::new).push_str(piece);
    }
    out
}

fn replay_texts(events: &[Event]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for event in events {
        let (key, text) = match &event.payload {
            EventPayload::ReasoningSnapshot(e) => (e.reasoning_id.clone(), e.text.clone()),
            EventPayload::ContentSnapshot(e) => (e.content_id.clone(), e.text.clone()),
            EventPayload::ToolSnapshot(e) => (e.tool_id.clone(), e.arguments.clone()),
            EventPayload::ActionSnapshot(e) => (e.action_id.clone(), e.arguments.clone()),
            EventPayload::ToolResult(e) => (format!("result:{}", e.tool_id), e.result.clone()),
            EventPayload::ActionResult(e) => {
                (format!("result:{}", e.action_id), e.result.as_str().unwrap_or("?").to_owned())
            }
            _ => continue,
        };
        assert!(out.insert(key.clone(), text).is_none(), "{key} replayed twice");
    }
    out
}

fn live_order(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ReasoningStart(s) => Some(s.reasoning_id.clone()),
            EventPayload::ContentStart(s) => Some(s.content_id.clone()),
            EventPayload::ToolStart(s) => Some(s.tool_id.clone()),
            EventPayload::ActionStart(s) => Some(s.action_id.clone()),
            _ => None,
        })
        .collect()
}

fn replay_order(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ReasoningSnapshot(s) => Some(s.reasoning_id.clone()),
            EventPayload::ContentSnapshot(s) => Some(s.content_id.clone()),
            EventPayload::ToolSnapshot(s) => Some(s.tool_id.clone()),
            EventPayload::ActionSnapshot(s) => Some(s.action_id.clone()),
            _ => None,
        })
        .collect()
}

/// Every `request.steer` as JSON without `seq`, `timestamp` and the live-only `taskId`.
fn steers(events: &[Event]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::RequestSteer(_)))
        .map(|e| {
            let mut value = serde_json::to_value(e).expect("json");
            let map = value.as_object_mut().expect("object");
            for key in ["seq", "timestamp", "taskId"] {
                map.remove(key);
            }
            value
        })
        .collect()
}

/// Every guard event (`content.revoke`, `guard.warning`, `guard.block`) as JSON without `seq`
/// and `timestamp`, in order.
fn guard_events(events: &[Event]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e.payload,
                EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_)
            )
        })
        .map(|e| {
            let mut value = serde_json::to_value(e).expect("json");
            let map = value.as_object_mut().expect("object");
            for key in ["seq", "timestamp"] {
                map.remove(key);
            }
            value
        })
        .collect()
}

/// Block ids and steer ids in stream order (live) / replay order.
fn positions(events: &[Event], replay: bool) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::RequestSteer(s) => Some(s.steer_id.clone()),
            EventPayload::ReasoningStart(s) if !replay => Some(s.reasoning_id.clone()),
            EventPayload::ContentStart(s) if !replay => Some(s.content_id.clone()),
            EventPayload::ToolStart(s) if !replay => Some(s.tool_id.clone()),
            EventPayload::ActionStart(s) if !replay => Some(s.action_id.clone()),
            EventPayload::ReasoningSnapshot(s) if replay => Some(s.reasoning_id.clone()),
            EventPayload::ContentSnapshot(s) if replay => Some(s.content_id.clone()),
            EventPayload::ToolSnapshot(s) if replay => Some(s.tool_id.clone()),
            EventPayload::ActionSnapshot(s) if replay => Some(s.action_id.clone()),
            _ => None,
        })
        .collect()
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn replay_of_a_recorded_run_equals_the_live_stream(
        steps in prop::collection::vec(step(), 1..6),
        end in end(),
        revoke in prop::bool::weighted(0.3),
    ) {
        let deltas = deltas_of(&steps, revoke);
        let (live, lines) = record(&deltas, &end);
        let replay = replay_chat(CHAT, Some("hi"), &lines, 99_999);
        for (i, event) in replay.iter().enumerate() {
            prop_assert_eq!(event.seq, i as u64 + 1, "replay seq is 1..N");
        }
        prop_assert_eq!(replay_texts(&replay), live_texts(&live), "snapshot texts = concatenated live deltas");
        prop_assert_eq!(replay_order(&replay), live_order(&live), "blocks replay in live order");
        prop_assert_eq!(steers(&replay), steers(&live), "request.steer replays with its live fields");
        prop_assert_eq!(positions(&replay, true), positions(&live, false), "steers replay at their live position");
        prop_assert_eq!(guard_events(&replay), guard_events(&live), "guard events replay as live, in live order");
    }
}
