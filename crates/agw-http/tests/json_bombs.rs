//! Deeply nested JSON from every untrusted side (issue 14): each is refused cleanly — a 400, a
//! `run.error`, a tool result the model reads, a skipped file — and never overflows the stack
//! (which would abort this whole test process).

mod common;

use agw_testkit::Transcript;
use common::{FIXTURE_PROVIDER, Gateway, oneshot_agent};
use serde_json::{Value, json};

const DEPTH: usize = 100_000;

fn deep_array() -> String {
    format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH))
}

fn react_agent() -> (String, String) {
    let text = format!(
        r#"{{"key":"r","mode":"REACT","modelConfig":{{"providerKey":"{FIXTURE_PROVIDER}","model":"m"}},
            "toolConfig":{{"backends":["city_datetime"]}},"react":{{"systemPrompt":"Use tools.","maxSteps":3}}}}"#
    );
    ("r.json".into(), text)
}

#[tokio::test]
async fn a_deep_query_body_is_a_400() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let body = format!(r#"{{"agentKey":"a","message":"hi","params":{{"x":{}}}}}"#, deep_array());
    let resp = gw.post_raw(body).await;
    assert_eq!(resp.status(), 400);
    let envelope: Value = resp.json().await.unwrap();
    assert!(envelope["msg"].as_str().unwrap_or_default().contains("recursion limit"), "{envelope}");
    // The server is fine: the next request is served.
    gw.fixture.set_default(Transcript::openai_text(&["ok"]));
    let stream = gw.run(&json!({"agentKey":"a","message":"hi"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn a_deep_provider_chunk_ends_the_run_with_provider_error() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    gw.fixture.set_default(Transcript::new().content("partial ").raw(&format!("data: {}\n\n", deep_array())));
    let stream = gw.run(&json!({"agentKey":"a","message":"hi"})).await;
    let last = stream.last();
    assert_eq!(last["type"], "run.error", "{last}");
    assert_eq!(last["error"]["code"], "provider_error");
}

/// The contract turns arguments that are not a JSON object into `{}` (docs/contract/tools-skills-viewports.md
/// §2.2): the tool runs with none, the run goes on, nothing recurses 100,000 levels.
#[tokio::test]
async fn deep_tool_arguments_from_the_model_are_treated_as_no_arguments() {
    let gw = Gateway::start(&[react_agent()], &[]).await;
    let deep = deep_array();
    gw.fixture.push(Transcript::openai_tool_call("call_1", "city_datetime", &[&deep]));
    gw.fixture.push(Transcript::openai_text(&["Sorry, that went wrong."]));
    let stream = gw.run(&json!({"agentKey":"r","message":"time?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let result = stream.of_type("tool.result");
    assert_eq!(result.len(), 1);
    let text = result[0]["result"].as_str().unwrap_or_default();
    assert!(text.contains("Shanghai"), "city_datetime ran with its defaults: {text}");
    // The model's next request carries that result.
    let second = gw.fixture.request(1).expect("second model call");
    let last = second.body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    assert_eq!(last["role"], "tool");
}

#[tokio::test]
async fn a_deep_agent_file_is_skipped_and_the_others_load() {
    let bomb = format!(r#"{{"key":"bomb","mode":"ONESHOT","x":{}}}"#, deep_array());
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000), ("bomb.json".into(), bomb)], &[]).await;
    let (status, body) = gw.get_json("/api/ap/agents").await;
    assert_eq!(status, 200);
    let keys: Vec<&str> = body["data"].as_array().unwrap().iter().filter_map(|a| a["key"].as_str()).collect();
    assert_eq!(keys, ["a"], "the bomb is skipped, the good agent loads");
}

#[tokio::test]
async fn a_deep_tool_file_is_skipped_and_the_others_load() {
    let dir = std::env::temp_dir().join(format!("agw-json-bomb-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tool = |name: &str, parameters: &str| {
        format!(r#"{{"tools":[{{"type":"function","name":"{name}","description":"d","parameters":{parameters}}}]}}"#)
    };
    std::fs::write(dir.join("bomb.frontend"), tool("bomb", &deep_array())).unwrap();
    std::fs::write(dir.join("fine.frontend"), tool("fine", r#"{"type":"object","properties":{}}"#)).unwrap();
    let registry = agw_tools::ToolRegistry::load(Some(&dir), agw_tools::builtins(Default::default()));
    assert!(registry.get("fine").is_some());
    assert!(registry.get("bomb").is_none());
    assert!(registry.problems().iter().any(|p| p.file.contains("bomb")), "reported with its file");
    let _ = std::fs::remove_dir_all(dir);
}
