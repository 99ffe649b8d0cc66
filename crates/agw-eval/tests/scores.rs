//! Each expectation and score of an evalset on hand-made runs (issue 42), ones that must fail
//! included; the runs are assembled the way agw streams them (agw-protocol's assembler).

use agw_eval::{
    EvalSet, EvalSetError, Observed, ObservedCall, Order, TrajectoryExpectation, rouge1_f, score, trajectory_score,
};
use agw_protocol::assembler::Assembler;
use agw_protocol::delta::{AgentDelta, CallUsage, ToolStartMeta};
use agw_protocol::event::Event;
use serde_json::{Value, json};

/// A REACT run: it calls `mock_city_weather` for Paris, then `city_datetime`, then answers.
fn react_run(answer: &str) -> Vec<Event> {
    let mut clock = 1_000i64;
    let mut asm = Assembler::new(
        "r",
        "c",
        Box::new(move || {
            clock += 10;
            clock
        }),
    );
    let mut out = Vec::new();
    let call = |id: &str, name: &str, args: &str| AgentDelta::ToolArgs {
        tool_id: id.into(),
        meta: ToolStartMeta { tool_name: name.into(), tool_type: "function".into(), ..ToolStartMeta::default() },
        delta: args.into(),
    };
    let deltas = vec![
        AgentDelta::StageMarker("react-step-1".into()),
        AgentDelta::Content("Let me check.".into()),
        call("c1", "mock_city_weather", r#"{"city":"Paris","#),
        AgentDelta::ToolArgs {
            tool_id: "c1".into(),
            meta: ToolStartMeta::default(),
            delta: r#""date":"2026-02-13"}"#.into(),
        },
        AgentDelta::ToolEnd { tool_id: "c1".into() },
        AgentDelta::ToolResult { tool_id: "c1".into(), result: r#"{"temperatureC":21}"#.into() },
        AgentDelta::StageMarker("react-step-2".into()),
        call("c2", "city_datetime", r#"{"city":"Paris"}"#),
        AgentDelta::ToolEnd { tool_id: "c2".into() },
        AgentDelta::ToolResult { tool_id: "c2".into(), result: r#"{"time":"10:00"}"#.into() },
        AgentDelta::StageMarker("react-step-3".into()),
        AgentDelta::Content(answer.into()),
        AgentDelta::Usage(CallUsage {
            provider: "p".into(),
            model: "m".into(),
            usage: json!({"prompt_tokens": 100, "completion_tokens": 20}),
        }),
        AgentDelta::Usage(CallUsage {
            provider: "p".into(),
            model: "m".into(),
            usage: json!({"prompt_tokens": 150, "completion_tokens": 30}),
        }),
    ];
    for delta in deltas {
        asm.push(delta, &mut out).expect("delta");
    }
    asm.complete("stop", &mut out);
    out
}

fn set(case_expect: Value) -> EvalSet {
    let text = json!({"version": 1, "name": "s", "agentKey": "w",
        "cases": [{"id": "c1", "turns": [{"message": "Weather and time in Paris?"}], "expect": case_expect}]});
    EvalSet::from_json(&text.to_string()).expect("a valid set")
}

fn expect_of(set: &EvalSet) -> &agw_eval::Expectations {
    &set.cases[0].expect
}

#[test]
fn a_run_reads_as_its_calls_answer_and_usage() {
    let observed = Observed::from_events(&react_run("Sunny, 21°C, and it is 10:00 in Paris."));
    let names: Vec<&str> = observed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["mock_city_weather", "city_datetime"]);
    assert_eq!(observed.calls[0].args, json!({"city": "Paris", "date": "2026-02-13"}));
    assert_eq!(observed.answer, "Sunny, 21°C, and it is 10:00 in Paris.", "only the text after the last result");
    assert_eq!((observed.model_calls, observed.tokens), (2, 300));
    assert_eq!(observed.error, None);
    assert!(observed.wall_ms > 0);
}

#[test]
fn trajectories_score_by_their_order_and_argument_rules() {
    let observed = Observed::from_events(&react_run("ok")).calls;
    let expect = |order: &str, calls: Value| -> TrajectoryExpectation {
        serde_json::from_value(json!({"order": order, "calls": calls})).expect("trajectory")
    };
    let both = json!([{"name": "mock_city_weather", "args": {"city": "Paris"}, "argsMatch": "subset"}, {"name": "city_datetime"}]);
    assert_eq!(trajectory_score(&expect("exact", both.clone()), &observed), 1.0);
    let reversed = json!([{"name": "city_datetime"}, {"name": "mock_city_weather"}]);
    assert_eq!(trajectory_score(&expect("exact", reversed.clone()), &observed), 0.0);
    assert_eq!(trajectory_score(&expect("inOrder", reversed.clone()), &observed), 0.5);
    assert_eq!(trajectory_score(&expect("anyOrder", reversed), &observed), 1.0);
    // One call dropped: an exact trajectory loses its place, an in-order one still finds it.
    let weather_only = json!([{"name": "mock_city_weather"}]);
    assert_eq!(trajectory_score(&expect("exact", weather_only.clone()), &observed), 0.5);
    assert_eq!(trajectory_score(&expect("inOrder", weather_only), &observed), 1.0);
    // Exact arguments must be equal; a schema must validate them.
    let exact = json!([{"name": "mock_city_weather", "args": {"city": "Paris"}}, {"name": "city_datetime"}]);
    assert_eq!(trajectory_score(&expect("exact", exact), &observed), 0.5);
    let schema = json!([{"name": "mock_city_weather", "argsMatch": "schema",
        "args": {"type": "object", "required": ["city", "date"], "properties": {"city": {"enum": ["Paris"]}}}}]);
    assert_eq!(trajectory_score(&expect("anyOrder", schema), &observed), 1.0);
    let wrong_city = json!([{"name": "mock_city_weather", "args": {"city": "Rome"}, "argsMatch": "subset"}]);
    assert_eq!(trajectory_score(&expect("anyOrder", wrong_city), &observed), 0.0);
    let empty = TrajectoryExpectation { calls: Vec::new(), order: Order::Exact, threshold: 1.0 };
    assert_eq!(
        trajectory_score(&empty, &[ObservedCall { name: "x".into(), args: json!({}) }]),
        0.0,
        "no calls expected"
    );
}

#[test]
fn a_dropped_tool_call_fails_the_case_and_says_so() {
    let set = set(json!({"trajectory": {"calls": [{"name": "mock_city_weather"}, {"name": "city_datetime"}]}}));
    let good = score(expect_of(&set), &Observed::from_events(&react_run("ok")));
    assert!(good.pass, "{:?}", good.failures);
    assert_eq!(good.trajectory, Some(1.0));

    let mut dropped = Observed::from_events(&react_run("ok"));
    dropped.calls.pop();
    let bad = score(expect_of(&set), &dropped);
    assert!(!bad.pass);
    assert_eq!(bad.trajectory, Some(0.5));
    assert_eq!(bad.failures, ["trajectory scored 0.50 (at least 1.00 needed); the calls were [mock_city_weather]"]);
}

#[test]
fn answers_are_checked_by_text_pattern_equality_overlap_and_schema() {
    let observed = Observed::from_events(&react_run("Sunny, 21°C, and it is 10:00 in Paris."));
    let pass = set(json!({"answer": {"contains": ["21°C", "Paris"], "regex": "\\d{2}:\\d{2}",
        "reference": "It is sunny and 21°C in Paris; the time is 10:00.", "rouge1Threshold": 0.5}}));
    let scored = score(expect_of(&pass), &observed);
    assert!(scored.pass, "{:?}", scored.failures);
    assert!(scored.answer.unwrap() > 0.5);

    let fail = set(json!({"answer": {"contains": ["Rome"], "regex": "^Cloudy", "equals": "Sunny.",
        "reference": "Heavy rain expected in Oslo tomorrow", "rouge1Threshold": 0.5}}));
    let scored = score(expect_of(&fail), &observed);
    assert!(!scored.pass);
    assert_eq!(scored.failures.len(), 4, "{:?}", scored.failures);
    assert!(scored.failures[0].contains("\"Rome\"") && scored.failures[1].contains("/^Cloudy/"));
    assert!(scored.failures[3].starts_with("ROUGE-1 F against the reference is 0."), "{:?}", scored.failures);

    let schema = set(json!({"answer": {"schema": {"type": "object", "required": ["city"]}}}));
    let json_answer = Observed::from_events(&react_run(r#"{"city":"Paris"}"#));
    assert!(score(expect_of(&schema), &json_answer).pass);
    let prose = score(expect_of(&schema), &observed);
    assert_eq!(prose.failures, ["the answer is not JSON"]);
}

#[test]
fn limits_and_an_unfinished_run_fail_with_their_figures() {
    let set = set(json!({"limits": {"steps": 1, "tokens": 1000, "wallMs": 100000}}));
    let mut observed = Observed::from_events(&react_run("ok"));
    let scored = score(expect_of(&set), &observed);
    assert_eq!(scored.failures, ["model calls: 2, at most 1"]);
    observed.error = Some("max_steps".into());
    assert!(score(expect_of(&set), &observed).failures.contains(&"the run did not complete: max_steps".to_owned()));
    let events = react_run("ok");
    let cut = Observed::from_events(&events[..events.len() - 1]);
    assert_eq!(cut.error.as_deref(), Some("unfinished"));
}

#[test]
fn rouge1_is_the_f1_of_word_overlap() {
    assert_eq!(rouge1_f("the cat sat", "the cat sat"), 1.0);
    assert_eq!(rouge1_f("", "anything"), 0.0);
    let f = rouge1_f("the cat sat on the mat", "the cat lay on a mat");
    // overlap: the, cat, on, mat = 4 of 6 each way.
    assert!((f - 4.0 / 6.0).abs() < 1e-9, "{f}");
    assert!(rouge1_f("上海天气晴", "上海晴") > 0.7, "CJK characters are words");
}

#[test]
fn a_set_that_breaks_a_rule_is_refused_naming_it() {
    let bad = |text: Value| EvalSet::from_json(&text.to_string()).unwrap_err().to_string();
    assert_eq!(
        bad(json!({"version": 2, "name": "s", "cases": []})),
        "evalset version 2 is not supported (this agw reads version 1)"
    );
    let no_agent = bad(json!({"version": 1, "name": "s", "cases": [{"id": "a", "turns": [{"message": "x"}]}]}));
    assert_eq!(no_agent, "case a: names no agent, and the set has no agentKey");
    let twice = bad(json!({"version": 1, "name": "s", "agentKey": "w",
        "cases": [{"id": "a", "turns": [{"message": "x"}]}, {"id": "a", "turns": [{"message": "y"}]}]}));
    assert_eq!(twice, "case a: another case has this id");
    let typo = bad(json!({"version": 1, "name": "s", "agentKey": "w",
        "cases": [{"id": "a", "turns": [{"message": "x"}], "expect": {"answr": {}}}]}));
    assert!(typo.starts_with("not an evalset: unknown field `answr`"), "{typo}");
    let regex = bad(json!({"version": 1, "name": "s", "agentKey": "w",
        "cases": [{"id": "a", "turns": [{"message": "x"}], "expect": {"answer": {"regex": "("}}}]}));
    assert!(regex.starts_with("case a: answer.regex does not compile"), "{regex}");
    assert!(matches!(EvalSet::from_json("[]"), Err(EvalSetError::Format(_))));
    let answers = EvalSet::from_json(&json!({"version": 1, "name": "s", "agentKey": "w",
        "cases": [{"id": "a", "turns": [{"message": "x", "answers": [{"tool": "confirm_dialog", "params": {"selectedIndex": 1}}]}]}]}).to_string()).unwrap();
    assert_eq!(answers.cases[0].turns[0].answers[0].tool, "confirm_dialog");
    assert_eq!(answers.agent_of(&answers.cases[0]), "w");
}
