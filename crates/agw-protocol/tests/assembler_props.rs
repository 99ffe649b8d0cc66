//! Property tests of the event assembler (`docs/reliability.md`): for any sequence of deltas —
//! including ones the state machine must refuse — `seq` is 1..N, every block that starts ends
//! exactly once, every accepted text/argument delta is exactly one delta event carrying exactly
//! its text, a revoke withdraws a content block that has ended, and the terminal event is last
//! and unique.
//!
//! `PROPTEST_CASES` raises the number of cases (default here: 512 per property).

use std::collections::{BTreeMap, HashMap};

use agw_protocol::delta::{ActionStartMeta, FrontendMeta, ToolStartMeta};
use agw_protocol::event::{ChatStart, ErrorCode, PlanTask, RequestQuery, TaskError, TaskStatus};
use agw_protocol::{AgentDelta, Assembler, Event, EventPayload, GuardNotice, GuardStage, Revocation, RunErrorInfo};
use proptest::prelude::*;
use serde_json::json;

const TOOL_IDS: [&str; 3] = ["call_1", "call_2", "call_native_1"];
const ACTION_IDS: [&str; 2] = ["act_1", "act_2"];
const TASK_IDS: [&str; 2] = ["t1", "t2"];

/// Text of one upstream chunk: often empty or whitespace, sometimes multi-byte.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just(String::new()),
        2 => prop::sample::select(vec![" ", "\n\n", "\t", "  \n"]).prop_map(str::to_owned),
        6 => "[a-z ]{1,12}",
        2 => "\\PC{1,6}",
    ]
}

fn tool_meta() -> impl Strategy<Value = ToolStartMeta> {
    (prop::sample::select(vec!["mock_city_weather", "confirm_dialog", " ", ""]), any::<bool>()).prop_map(
        |(name, frontend)| ToolStartMeta {
            tool_name: name.to_owned(),
            tool_type: if frontend { "html".into() } else { "function".into() },
            tool_api: None,
            description: Some("d".into()),
            frontend: frontend.then(|| FrontendMeta { tool_key: "confirm_dialog".into(), tool_timeout: 0 }),
        },
    )
}

fn plan() -> impl Strategy<Value = Vec<PlanTask>> {
    prop::collection::vec(
        (prop::sample::select(TASK_IDS.to_vec()), prop::sample::select(vec![TaskStatus::Init, TaskStatus::Completed]))
            .prop_map(|(id, status)| PlanTask { task_id: id.to_owned(), description: "task".into(), status }),
        0..3,
    )
}

/// Any delta a mode could emit, right or wrong for the current state.
fn delta() -> impl Strategy<Value = AgentDelta> {
    let tool_id = || prop::sample::select(TOOL_IDS.to_vec()).prop_map(str::to_owned);
    let action_id = || prop::sample::select(ACTION_IDS.to_vec()).prop_map(str::to_owned);
    let task_id = || prop::sample::select(TASK_IDS.to_vec()).prop_map(str::to_owned);
    prop_oneof![
        8 => text().prop_map(AgentDelta::Reasoning),
        10 => text().prop_map(AgentDelta::Content),
        2 => prop::sample::select(vec!["react-step-1", "react-step-2", "plan-generate", "summary"])
            .prop_map(|m| AgentDelta::StageMarker(m.to_owned())),
        6 => (tool_id(), tool_meta(), text()).prop_map(|(tool_id, meta, delta)| AgentDelta::ToolArgs { tool_id, meta, delta }),
        2 => tool_id().prop_map(|tool_id| AgentDelta::ToolEnd { tool_id }),
        2 => (tool_id(), text()).prop_map(|(tool_id, result)| AgentDelta::ToolResult { tool_id, result }),
        3 => (action_id(), text()).prop_map(|(action_id, delta)| AgentDelta::ActionArgs {
            action_id,
            meta: ActionStartMeta { action_name: "switch_theme".into(), description: None },
            delta,
        }),
        1 => action_id().prop_map(|action_id| AgentDelta::ActionEnd { action_id }),
        1 => action_id().prop_map(|action_id| AgentDelta::ActionResult { action_id, result: json!("OK") }),
        1 => plan().prop_map(|plan| AgentDelta::PlanUpdate { plan_id: "plan_1".into(), plan }),
        1 => task_id().prop_map(|task_id| AgentDelta::TaskStart { task_id, description: Some("do it".into()) }),
        1 => task_id().prop_map(|task_id| AgentDelta::TaskComplete { task_id }),
        1 => task_id().prop_map(|task_id| AgentDelta::TaskCancel { task_id }),
        1 => task_id().prop_map(|task_id| AgentDelta::TaskFail { task_id, error: TaskError::new("x", "y") }),
        1 => Just(AgentDelta::Usage(json!({"prompt_tokens": 1}).into())),
        1 => (text(), prop::option::of("[a-z]{1,4}")).prop_map(|(message, request_id)| AgentDelta::Steer {
            steer_id: "steer_1".into(),
            message,
            request_id,
        }),
        1 => Just(AgentDelta::Revoke(Revocation { guard: "rules:x".into(), rule: None, reason: "no".into() })),
        2 => (prop::sample::select(GuardStage::ALL.to_vec()), any::<bool>(), prop::option::of(tool_id())).prop_map(
            |(stage, warn, tool_id)| {
                let notice = GuardNotice { stage, guard: "webhook".into(), rule: None, message: "m".into(), tool_id };
                if warn { AgentDelta::GuardWarning(notice) } else { AgentDelta::GuardBlock(notice) }
            }
        ),
    ]
}

#[derive(Debug, Clone)]
enum Terminal {
    Complete,
    Fail,
    /// The run ends without a terminal call (the client went away): blocks may stay open.
    None,
}

fn terminal() -> impl Strategy<Value = Terminal> {
    prop_oneof![4 => Just(Terminal::Complete), 3 => Just(Terminal::Fail), 1 => Just(Terminal::None)]
}

/// What a delta must produce as its delta event, if it is accepted.
fn expected_delta_event(delta: &AgentDelta) -> Option<(&'static str, &str)> {
    match delta {
        AgentDelta::Reasoning(t) if !t.is_empty() => Some(("reasoning.delta", t)),
        AgentDelta::Content(t) if !t.is_empty() => Some(("content.delta", t)),
        AgentDelta::ToolArgs { delta, .. } if !delta.is_empty() => Some(("tool.args", delta)),
        AgentDelta::ActionArgs { delta, .. } if !delta.is_empty() => Some(("action.args", delta)),
        _ => None,
    }
}

fn delta_text(event: &Event) -> Option<&str> {
    match &event.payload {
        EventPayload::ReasoningDelta(e) => Some(&e.delta),
        EventPayload::ContentDelta(e) => Some(&e.delta),
        EventPayload::ToolArgs(e) => Some(&e.delta),
        EventPayload::ActionArgs(e) => Some(&e.delta),
        _ => None,
    }
}

/// `(block kind, id)` of a start/end/delta event.
fn block_of(event: &Event) -> Option<(&'static str, String)> {
    Some(match &event.payload {
        EventPayload::ReasoningStart(e) => ("reasoning", e.reasoning_id.clone()),
        EventPayload::ReasoningDelta(e) => ("reasoning", e.reasoning_id.clone()),
        EventPayload::ReasoningEnd(e) => ("reasoning", e.reasoning_id.clone()),
        EventPayload::ContentStart(e) => ("content", e.content_id.clone()),
        EventPayload::ContentDelta(e) => ("content", e.content_id.clone()),
        EventPayload::ContentEnd(e) => ("content", e.content_id.clone()),
        EventPayload::ToolStart(e) => ("tool", e.tool_id.clone()),
        EventPayload::ToolArgs(e) => ("tool", e.tool_id.clone()),
        EventPayload::ToolEnd(e) => ("tool", e.tool_id.clone()),
        EventPayload::ActionStart(e) => ("action", e.action_id.clone()),
        EventPayload::ActionArgs(e) => ("action", e.action_id.clone()),
        EventPayload::ActionEnd(e) => ("action", e.action_id.clone()),
        EventPayload::TaskStart(e) => ("task", e.task_id.clone()),
        EventPayload::TaskComplete(e) => ("task", e.task_id.clone()),
        EventPayload::TaskCancel(e) => ("task", e.task_id.clone()),
        EventPayload::TaskFail(e) => ("task", e.task_id.clone()),
        _ => return None,
    })
}

/// The outcome of driving one assembler through a case.
struct Driven {
    events: Vec<Event>,
    /// Accepted deltas that had to produce a delta event: `(type, text)` in push order.
    expected_deltas: Vec<(&'static str, String)>,
}

fn drive(deltas: &[AgentDelta], end: &Terminal, after: &[AgentDelta]) -> Driven {
    let mut clock = 1_000_i64;
    let mut asm = Assembler::new(
        "run",
        "chat",
        Box::new(move || {
            clock += 7;
            clock
        }),
    );
    let mut events = Vec::new();
    let query = RequestQuery {
        request_id: "run".into(),
        chat_id: "chat".into(),
        role: "user".into(),
        message: "hi".into(),
        agent_key: None,
        references: None,
        params: None,
        scene: None,
        stream: None,
    };
    asm.bootstrap(query, Some(ChatStart { chat_id: "chat".into(), chat_name: "hi".into() }), &mut events);
    let mut expected_deltas = Vec::new();
    for delta in deltas {
        let before = events.len();
        match asm.push(delta.clone(), &mut events) {
            Ok(()) => {
                let produced: Vec<&Event> = events[before..].iter().filter(|e| delta_text(e).is_some()).collect();
                match expected_delta_event(delta) {
                    Some((ty, text)) => {
                        assert_eq!(produced.len(), 1, "{delta:?} must give exactly one delta event");
                        assert_eq!(produced[0].type_name(), ty);
                        assert_eq!(delta_text(produced[0]), Some(text), "the delta event carries the chunk verbatim");
                        expected_deltas.push((ty, text.to_owned()));
                    }
                    None => assert!(produced.is_empty(), "{delta:?} carries no text but produced {produced:?}"),
                }
            }
            Err(_) => assert_eq!(events.len(), before, "a refused delta emits nothing"),
        }
    }
    match end {
        Terminal::Complete => asm.complete("stop", &mut events),
        Terminal::Fail => asm.fail(RunErrorInfo::new(ErrorCode::ProviderError, "boom", true), &mut events),
        Terminal::None => {}
    }
    if !matches!(end, Terminal::None) {
        for delta in after {
            let before = events.len();
            assert!(asm.push(delta.clone(), &mut events).is_err(), "nothing is accepted after the terminal event");
            assert_eq!(events.len(), before);
        }
        let before = events.len();
        asm.complete("stop", &mut events);
        asm.fail(RunErrorInfo::new(ErrorCode::Internal, "again", false), &mut events);
        assert_eq!(events.len(), before, "a second terminal call is a no-op");
    }
    Driven { events, expected_deltas }
}

fn config() -> ProptestConfig {
    // PROPTEST_CASES (read by proptest) overrides this default.
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn seq_is_gapless_and_timestamps_never_decrease(deltas in prop::collection::vec(delta(), 0..60), end in terminal()) {
        let driven = drive(&deltas, &end, &[]);
        for (i, event) in driven.events.iter().enumerate() {
            prop_assert_eq!(event.seq, i as u64 + 1);
        }
        for pair in driven.events.windows(2) {
            prop_assert!(pair[0].timestamp <= pair[1].timestamp);
        }
    }

    #[test]
    fn every_start_has_exactly_one_end_and_deltas_fall_inside_their_block(
        deltas in prop::collection::vec(delta(), 0..60),
        end in terminal(),
    ) {
        let driven = drive(&deltas, &end, &[]);
        let mut open: HashMap<(&'static str, String), usize> = HashMap::new();
        let mut closed: HashMap<(&'static str, String), usize> = HashMap::new();
        for event in &driven.events {
            if event.type_name() == "request.steer" {
                let texts_open = open.keys().filter(|(kind, _)| *kind == "reasoning" || *kind == "content").count();
                prop_assert_eq!(texts_open, 0, "a steer ends the open text block first");
            }
            match &event.payload {
                EventPayload::ContentRevoke(e) => {
                    let texts_open = open.keys().filter(|(kind, _)| *kind == "reasoning" || *kind == "content").count();
                    prop_assert_eq!(texts_open, 0, "a revoke ends the open text block first");
                    prop_assert!(closed.contains_key(&("content", e.content_id.clone())), "{} never streamed", e.content_id);
                }
                EventPayload::GuardWarning(e) => {
                    if let Some(id) = &e.content_id {
                        let block = ("content", id.clone());
                        prop_assert!(open.contains_key(&block) || closed.contains_key(&block), "{} never streamed", id);
                    }
                }
                _ => {}
            }
            let Some(block) = block_of(event) else { continue };
            let ty = event.type_name();
            if ty.ends_with(".start") {
                prop_assert!(!open.contains_key(&block), "{:?} started while open", block);
                // Block and call ids are never reused; a task may run again once it ended.
                prop_assert!(block.0 == "task" || !closed.contains_key(&block), "{:?} reused", block);
                open.insert(block, event.seq as usize);
            } else if ty.ends_with(".end") || ty == "task.complete" || ty == "task.cancel" || ty == "task.fail" {
                prop_assert!(open.remove(&block).is_some(), "{} without an open {:?}", ty, block);
                *closed.entry(block).or_default() += 1;
            } else {
                prop_assert!(open.contains_key(&block), "{} outside its block {:?}", ty, block);
            }
            let texts_open = open.keys().filter(|(kind, _)| *kind == "reasoning" || *kind == "content").count();
            prop_assert!(texts_open <= 1, "at most one reasoning/content block is open at a time");
        }
        if !matches!(end, Terminal::None) {
            prop_assert!(open.is_empty(), "the terminal event closes every block: {:?}", open);
        }
        prop_assert!(closed.iter().all(|((kind, _), n)| *kind == "task" || *n == 1), "one end per start");
    }

    #[test]
    fn each_accepted_upstream_delta_is_exactly_one_delta_event(
        deltas in prop::collection::vec(delta(), 0..60),
        end in terminal(),
    ) {
        let driven = drive(&deltas, &end, &[]);
        let emitted: Vec<(&str, String)> = driven
            .events
            .iter()
            .filter_map(|e| delta_text(e).map(|t| (e.type_name(), t.to_owned())))
            .collect();
        let expected: Vec<(&str, String)> = driven.expected_deltas.iter().map(|(t, s)| (*t, s.clone())).collect();
        prop_assert_eq!(emitted, expected, "nothing merged, split, dropped or invented");
        // And the concatenation per block equals the concatenated upstream text of that block.
        let mut per_block: BTreeMap<String, String> = BTreeMap::new();
        for event in &driven.events {
            if let (Some(text), Some((_, id))) = (delta_text(event), block_of(event)) {
                per_block.entry(id).or_default().push_str(text);
            }
        }
        let total: usize = per_block.values().map(String::len).sum();
        prop_assert_eq!(total, driven.expected_deltas.iter().map(|(_, s)| s.len()).sum::<usize>());
    }

    #[test]
    fn the_terminal_event_is_last_and_unique(
        deltas in prop::collection::vec(delta(), 0..40),
        end in terminal(),
        after in prop::collection::vec(delta(), 0..5),
    ) {
        let driven = drive(&deltas, &end, &after);
        let terminals: Vec<usize> =
            driven.events.iter().enumerate().filter(|(_, e)| e.is_terminal()).map(|(i, _)| i).collect();
        match end {
            Terminal::None => prop_assert!(terminals.is_empty()),
            _ => prop_assert_eq!(terminals, vec![driven.events.len() - 1]),
        }
        prop_assert_eq!(driven.events[0].type_name(), "request.query");
    }
}
