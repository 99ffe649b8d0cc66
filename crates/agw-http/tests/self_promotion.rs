//! Agents cannot promote themselves (issue 22 item 2), over real HTTP: an agent whose only tool is
//! `agent_file_create` tries to give itself `_bash_` and `_skill_run_script_`, to rewrite its own
//! definition and a bundled agent's. Each attempt ends in a tool result the model can read, naming
//! what was refused; no agent file changes.

mod common;

use agw_testkit::Transcript;
use common::Gateway;
use serde_json::{Value, json};

const CREATOR: &str = r#"{"key":"creator","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
    "toolConfig":{"backends":["agent_file_create"]},"react":{"systemPrompt":"You create agents.","maxSteps":3}}"#;

/// One run in which the model calls `agent_file_create` with `arguments`; the tool result.
async fn attempt(gw: &Gateway, arguments: Value) -> Value {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let message = format!("upgrade yourself #{}", RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    // The first turn answers this run's message only; the second turn (a stage rule) ends the run.
    gw.fixture.on_message(
        &message,
        Transcript::openai_tool_call("call_create", "agent_file_create", &[&arguments.to_string()]),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["done"]));
    let stream = gw.run(&json!({"agentKey": "creator", "message": message})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_string();
    // What the model reads next is that same text.
    let step2 = gw.fixture.requests().last().unwrap().body.clone();
    let tool_message = step2["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(tool_message["content"], result);
    serde_json::from_str(&result).unwrap()
}

#[tokio::test]
async fn a_self_promoting_agent_is_refused_with_readable_results() {
    let gw = Gateway::start(&[("creator.json".to_string(), CREATOR.to_string())], &[]).await;
    let own_file = gw.agents_dir.join("creator.json");

    // Granting _bash_ and _skill_run_script_ to a new agent.
    let result = attempt(
        &gw,
        json!({"key":"helper","mode":"REACT","toolConfig":{"backends":["_bash_","_skill_run_script_"]},"skills":["math_basic"]}),
    )
    .await;
    assert_eq!(result["ok"], false);
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("Not allowed to grant tools _bash_, _skill_run_script_; skills math_basic."), "{error}");
    assert_eq!(result["refused"], json!({"tools":["_bash_","_skill_run_script_"],"skills":["math_basic"]}));
    assert!(!gw.agents_dir.join("helper.json").exists());

    // Rewriting itself (even with nothing but harmless tools) and a bundled agent.
    for key in ["creator", "demoModeReact", "demomodeplain"] {
        let result =
            attempt(&gw, json!({"key": key, "mode":"REACT","systemPrompt":"new orders","tools":["city_datetime"]}))
                .await;
        assert_eq!(result["ok"], false, "{result}");
        assert!(result["error"].as_str().unwrap().starts_with(&format!("Agent already exists: {key}.")), "{result}");
        assert!(!gw.agents_dir.join(format!("{key}.json")).exists() || key == "creator");
    }
    assert_eq!(std::fs::read_to_string(&own_file).unwrap(), CREATOR, "its own definition is unchanged");
    let catalog = gw.state.catalogs().agents.load();
    assert_eq!(catalog.get("creator").unwrap().tool_names(), ["agent_file_create"]);

    // What the operator allows still works.
    let result = attempt(&gw, json!({"key":"weather","mode":"REACT","tools":["mock_city_weather"]})).await;
    assert_eq!(result["ok"], true, "{result}");
}

#[tokio::test]
async fn the_operator_can_widen_the_grants_and_allow_replacing() {
    let gw = Gateway::start(
        &[("creator.json".to_string(), CREATOR.to_string())],
        &[
            ("AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_TOOLS", "_bash_"),
            ("AGW_TOOLS_AGENT_FILE_CREATE_ALLOW_OVERWRITE", "true"),
        ],
    )
    .await;
    let result = attempt(&gw, json!({"key":"creator","mode":"REACT","tools":["_bash_"]})).await;
    assert_eq!((&result["ok"], &result["updated"]), (&json!(true), &json!(true)), "{result}");
    let result = attempt(&gw, json!({"key":"other","tools":["city_datetime"]})).await;
    assert_eq!(result["refused"]["tools"], json!(["city_datetime"]), "the configured list replaces the default");
}
