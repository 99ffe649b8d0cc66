//! ONESHOT against the fixture provider over loopback, observed through a collecting sink.

use std::sync::Arc;

use agw_llm::{ChatMessage, ProviderRegistry};
use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{CollectingSink, RunContext, RunOutcome, RunServices, execute};
use agw_protocol::{AgentDelta, ErrorCode, PlanSnapshot, PlanTask, TaskStatus};
use agw_testkit::{End, FixtureServer, Transcript};
use agw_tools::ToolRegistry;
use serde_json::json;

fn agent(budget: &str) -> Arc<AgentDefinition> {
    let text = format!(
        r#"{{"key":"t","mode":"ONESHOT","modelConfig":{{"providerKey":"fx","model":"m1","reasoning":{{"enabled":true,"effort":"LOW"}},"temperature":0.3}},
            {budget}
            "plain":{{"systemPrompt":"  Be brief.  "}}}}"#
    );
    Arc::new(AgentDefinition::from_json("t.json", &text).expect("valid agent"))
}

fn ctx(fixture: &FixtureServer, agent: Arc<AgentDefinition>, history: Vec<ChatMessage>) -> RunContext {
    let services = RunServices {
        frontend_timeout: std::time::Duration::from_secs(1),
        ..RunServices::new(
            Arc::new(ProviderRegistry::new(vec![fixture.provider_config("fx")])),
            Arc::new(ToolRegistry::default()),
        )
    };
    RunContext { history, ..RunContext::new("run-1", "chat-1", agent, "what now?", Arc::new(services)) }
}

#[tokio::test]
async fn streams_reasoning_and_content_and_captures_usage() {
    let fixture =
        FixtureServer::with_default(Transcript::openai_reasoning_text(&["think"], &["an", "swer"])).await.unwrap();
    let history = vec![
        ChatMessage::user("earlier question"),
        ChatMessage::Assistant { content: "earlier answer".into(), tool_calls: vec![] },
    ];
    let mut sink = CollectingSink::default();
    let outcome = execute(ctx(&fixture, agent(""), history), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let usage = sink.deltas.iter().find_map(|d| match d {
        AgentDelta::Usage(u) => Some(u.clone()),
        _ => None,
    });
    let call = usage.expect("usage is forwarded for recorders");
    assert_eq!(call.usage["prompt_tokens"], 10);
    assert!(call.usage["total_tokens"].is_number());
    // Attributed to the call's provider and model, for the run's totals.
    assert_eq!((call.provider.as_str(), call.model.as_str()), ("fx", "m1"));
    let texts: Vec<&AgentDelta> = sink.deltas.iter().filter(|d| !matches!(d, AgentDelta::Usage(_))).collect();
    assert_eq!(
        texts,
        [
            &AgentDelta::StageMarker("oneshot".into()),
            &AgentDelta::Reasoning("think".into()),
            &AgentDelta::Content("an".into()),
            &AgentDelta::Content("swer".into()),
        ]
    );

    let body = &fixture.request(0).unwrap().body;
    assert_eq!(body["model"], "m1");
    assert_eq!(body["temperature"], 0.3, "temperature is sent when set");
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": "what now?"}
        ]),
        "history sits between the system prompt and the new message"
    );
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[tokio::test]
async fn run_timeout_is_enforced_even_while_the_provider_trickles() {
    let fixture = FixtureServer::with_default(
        Transcript::openai_text(&["a", "b", "c", "d", "e", "f"]).with_chunk_delay_ms(150).with_end(End::Stall),
    )
    .await
    .unwrap();
    let mut sink = CollectingSink::default();
    let started = std::time::Instant::now();
    let outcome = execute(
        ctx(&fixture, agent(r#""budget":{"runTimeoutMs":400,"model":{"maxCalls":2,"timeoutMs":5000}},"#), vec![]),
        &mut sink,
    )
    .await;
    match outcome {
        RunOutcome::Failed(e) => {
            assert_eq!(e.code, ErrorCode::BudgetExceeded);
            assert!(e.message.contains("runTimeoutMs=400"), "{}", e.message);
        }
        other => panic!("expected budget failure, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(sink.deltas.iter().any(|d| matches!(d, AgentDelta::Content(_))), "output before the deadline was streamed");
}

#[tokio::test]
async fn plan_execute_without_its_plan_tool_fails_before_any_model_call() {
    // The run's tool registry here is empty: `_plan_add_tasks_` does not exist.
    let fixture = FixtureServer::start().await.unwrap();
    let plan = AgentDefinition::from_json(
        "r.json",
        r#"{"key":"p","mode":"PLAN_EXECUTE","modelConfig":{"providerKey":"fx"},"planExecute":{"plan":{"systemPrompt":"p"},"execute":{"systemPrompt":"e"}}}"#,
    )
    .unwrap();
    let mut sink = CollectingSink::default();
    match execute(ctx(&fixture, Arc::new(plan), vec![]), &mut sink).await {
        RunOutcome::Failed(e) => {
            assert_eq!(e.code, ErrorCode::Internal);
            assert!(e.message.contains("_plan_add_tasks_"), "{}", e.message);
        }
        other => panic!("expected explicit failure, got {other:?}"),
    }
    assert_eq!(fixture.request_count(), 0);
}

#[tokio::test]
async fn a_stored_plan_is_shown_first_in_any_mode() {
    let fixture = FixtureServer::with_default(Transcript::openai_text(&["ok"])).await.unwrap();
    let task = |id: &str, status: TaskStatus| PlanTask { task_id: id.into(), description: format!("do {id}"), status };
    let stored =
        PlanSnapshot::new("plan_stored", vec![task("t1", TaskStatus::Completed), task("t2", TaskStatus::Init)]);
    let mut run = ctx(&fixture, agent(""), vec![]);
    run.initial_plan = Some(stored.clone());
    let mut sink = CollectingSink::default();
    assert_eq!(execute(run, &mut sink).await, RunOutcome::Completed { finish_reason: "stop".into() });
    assert_eq!(sink.deltas[0], AgentDelta::PlanUpdate { plan_id: "plan_stored".into(), plan: stored.tasks });
    assert_eq!(sink.deltas[1], AgentDelta::StageMarker("oneshot".into()));

    // An empty stored plan is not shown.
    let mut run = ctx(&fixture, agent(""), vec![]);
    run.initial_plan = Some(PlanSnapshot::new("plan_empty", vec![]));
    let mut sink = CollectingSink::default();
    execute(run, &mut sink).await;
    assert!(!sink.deltas.iter().any(|d| matches!(d, AgentDelta::PlanUpdate { .. })));
}
