//! How to test your own agent definition with agw-testkit: script the model, run the agent with
//! agw-modes, assert on what it streamed and on what it sent to the model.
//!
//! This file is a test (`test = true` in Cargo.toml): `cargo test -p agw-testkit --example
//! agent_test` runs it. Copy it into your crate's `tests/` with agw-testkit as a dev-dependency.

// Built as a plain example too (`cargo build --examples`), where only `main` is used.
#![cfg_attr(not(test), allow(dead_code, unused_imports))]

use std::sync::Arc;
use std::time::Duration;

use agw_llm::ProviderRegistry;
use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{CollectingSink, RunContext, RunOutcome, RunServices, execute};
use agw_protocol::AgentDelta;
use agw_testkit::{FixtureServer, Transcript};
use agw_tools::ToolRegistry;

/// The agent under test, as an operator would write it (JSON with comments and """ prompts).
const AGENT: &str = r#"{
  // Answers about a city's time with the built-in clock tool.
  "key": "clock",
  "mode": "REACT",
  "modelConfig": { "providerKey": "model", "model": "gpt-test" },
  "toolConfig": { "backends": ["city_datetime"] },
  "react": { "systemPrompt": """
      Use city_datetime for any question about time.
  """ }
}"#;

/// Runs the agent once against `model` and returns its outcome and deltas.
async fn run(model: &FixtureServer, message: &str) -> (RunOutcome, Vec<AgentDelta>) {
    let agent = AgentDefinition::from_json("clock.json", AGENT).expect("the agent file is valid");
    let tools = ToolRegistry::from_sources(
        agw_tools::bundled::TOOL_FILES.iter().copied(),
        agw_tools::builtins(Default::default()),
    );
    let services = RunServices {
        frontend_timeout: Duration::from_secs(5),
        ..RunServices::new(Arc::new(ProviderRegistry::new([model.provider_config("model")])), Arc::new(tools))
    };
    let ctx = RunContext::new("run-1", "chat-1", Arc::new(agent), message, Arc::new(services));
    let mut sink = CollectingSink::default();
    let outcome = execute(ctx, &mut sink).await;
    (outcome, sink.deltas)
}

#[tokio::test]
async fn the_agent_calls_its_clock_and_answers_from_it() {
    let model = FixtureServer::start().await.expect("fixture model");
    model.push(Transcript::openai_tool_call("call_1", "city_datetime", &[r#"{"city":"Tokyo"}"#]));
    model.push(Transcript::openai_text(&["It is ", "morning in Tokyo."]));

    let (outcome, deltas) = run(&model, "What time is it in Tokyo?").await;

    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });
    // The tool ran for real and its result was streamed.
    let result = deltas.iter().find_map(|d| match d {
        AgentDelta::ToolResult { result, .. } => Some(result.clone()),
        _ => None,
    });
    assert!(result.expect("a tool result").contains("Tokyo"));
    // The system prompt reached the model, and the second turn carried the result back.
    let first = model.request(0).expect("first model call");
    assert!(first.body["messages"][0]["content"].as_str().unwrap_or_default().contains("city_datetime"));
    let second = model.request(1).expect("second model call");
    let last = second.body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
}

#[tokio::test]
async fn a_provider_error_ends_the_run_with_a_clear_code() {
    let model = FixtureServer::with_default(Transcript::http_error(401, r#"{"error":"bad key"}"#)).await.unwrap();
    let (outcome, _) = run(&model, "What time is it?").await;
    let RunOutcome::Failed(error) = outcome else { panic!("expected a failure, got {outcome:?}") };
    assert_eq!(error.code.as_str(), "provider_error");
}

#[cfg(not(test))]
fn main() {
    eprintln!("this example is a test: cargo test -p agw-testkit --example agent_test");
}
