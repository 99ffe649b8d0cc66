use super::*;
use crate::definition::DEFAULT_PROVIDER_KEY;

/// The file the arguments describe, once the loader accepted it; else the message the model reads.
fn build(arguments: Value) -> Result<Value, String> {
    let file = agent_file(&arguments, "DEFAULT").map_err(|e| e.to_string())?;
    file.load().map_err(|e| CreateError::from(e).to_string())?;
    Ok(file.to_value())
}

#[test]
fn reference_suite_oneshot() {
    let def = build(json!({"agentId":"qa_bot","description":"QA 助手","providerKey":"openai","model":"gpt-3.5-turbo",
        "systemPrompt":"你是 QA 助手\n请先问清问题","mode":"ONESHOT"}))
    .unwrap();
    assert_eq!(
        def.to_string(),
        r#"{"key":"qa_bot","name":"qa_bot","description":"QA 助手","mode":"ONESHOT","modelConfig":{"providerKey":"openai","model":"gpt-3.5-turbo"},"plain":{"systemPrompt":"你是 QA 助手\n请先问清问题"}}"#
    );
}

#[test]
fn defaults() {
    let def = build(json!({"key":"a"})).unwrap();
    // No provider or model is chosen here: the loader's defaults apply to the created agent.
    assert_eq!(def["modelConfig"], json!({}));
    let loaded = AgentDefinition::from_json("a.json", &def.to_string()).unwrap();
    assert_eq!(loaded.agent_provider_key(), DEFAULT_PROVIDER_KEY);
    assert_eq!(def["plain"]["systemPrompt"], "DEFAULT");
    assert_eq!(def["description"], DEFAULT_DESCRIPTION);
    assert_eq!(def["mode"], "ONESHOT");
}

#[test]
fn keys_are_validated() {
    for bad in ["../escape", "a/b", "a.b", "a b", "ä", &"x".repeat(65), "..", "a\\b"] {
        assert_eq!(
            build(json!({ "key": bad })).unwrap_err(),
            "Invalid agentId/key. Use [A-Za-z0-9_-], max 64 chars.",
            "{bad}"
        );
    }
    assert_eq!(build(json!({"mode":"REACT"})).unwrap_err(), "Missing argument: key");
    assert!(build(json!({ "key": "x".repeat(64) })).is_ok());
    // `name` is the last fallback for the key.
    assert_eq!(build(json!({"name":"by_name"})).unwrap()["key"], "by_name");
}

#[test]
fn config_object_is_merged_under_the_top_level() {
    let def =
        build(json!({"key":"k","config":{"key":"ignored","mode":"react","maxSteps":"7","icon":"emoji:🤖"}})).unwrap();
    assert_eq!(def["key"], "k");
    assert_eq!(def["mode"], "REACT");
    assert_eq!(def["react"], json!({"systemPrompt":"DEFAULT","maxSteps":7}));
    assert_eq!(def["icon"], "emoji:🤖");
}

#[test]
fn plan_execute_needs_both_prompts() {
    // The loader's rule, in the loader's words.
    assert_eq!(
        build(json!({"key":"p","mode":"plan-execute","planSystemPrompt":"plan"})).unwrap_err(),
        "Invalid agent definition: planExecute.plan.systemPrompt and planExecute.execute.systemPrompt are required"
    );
    let def = build(json!({"key":"p","mode":"PLAN_EXECUTE","planSystemPrompt":"plan","executeSystemPrompt":"exec",
        "summarySystemPrompt":"sum","maxSteps":0}))
    .unwrap();
    assert_eq!(
        def["planExecute"],
        json!({"plan":{"systemPrompt":"plan"},"execute":{"systemPrompt":"exec"},"summary":{"systemPrompt":"sum"}})
    );
}

#[test]
fn invalid_values_are_refused() {
    let refused = |arguments: Value, expected: &str| {
        let error = build(arguments).unwrap_err();
        assert!(error.starts_with(expected), "{error}");
    };
    refused(json!({"key":"k","mode":"FAST"}), "Invalid agent definition: unknown mode \"FAST\"");
    refused(
        json!({"key":"k","toolChoice":"sometimes"}),
        "Invalid agent definition: field \"toolChoice\" has invalid value \"sometimes\" (expected one of NONE, AUTO, REQUIRED)",
    );
    refused(
        json!({"key":"k","reasoningEffort":"max"}),
        "Invalid agent definition: field \"modelConfig.reasoning.effort\" has invalid value \"max\"",
    );
    refused(json!({"key":"k","reasoningEnabled":"maybe"}), "Invalid reasoning enabled flag");
    refused(json!({"key":"k","temperature":"warm"}), "Invalid temperature");
    refused(json!({"key":"k","top_p":"NaN"}), "Invalid top_p");
    refused(json!({"key":"k","max_tokens":1.5}), "Invalid max_tokens");
}

#[test]
fn names_are_read_in_any_case_and_written_as_the_loader_reads_them() {
    let def = build(json!({"key":"k","mode":" plan_execute ","planSystemPrompt":"p","executeSystemPrompt":"e",
        "toolChoice":"required","reasoningEffort":"High"}))
    .unwrap();
    assert_eq!((&def["mode"], &def["toolChoice"]), (&json!("PLAN_EXECUTE"), &json!("REQUIRED")));
    assert_eq!(def["modelConfig"]["reasoning"], json!({"effort":"HIGH"}));
}

#[test]
fn model_tools_skills_budget() {
    let def = build(json!({"key":"k","toolChoice":"auto","reasoningEnabled":true,"reasoningEffort":"low",
        "temperature":0.5,"max_tokens":"1000","tools":["City_Datetime"," ",""],"actions":"switch_theme, show_modal",
        "skills":["math_basic","math_basic"],
        "budget":{"runTimeoutMs":1000,"maxModelCalls":3,"model":{"maxCalls":2,"retryCount":0},"tool":{"timeoutMs":-1}}}))
    .unwrap();
    assert_eq!(
        def["modelConfig"],
        json!({"reasoning":{"enabled":true,"effort":"LOW"},"temperature":0.5,"max_tokens":1000})
    );
    assert_eq!(
        def["toolConfig"],
        json!({"backends":["city_datetime"],"frontends":[],"actions":["switch_theme","show_modal"]})
    );
    assert_eq!(def["skillConfig"], json!({"skills":["math_basic"]}));
    assert_eq!(def["toolChoice"], "AUTO");
    assert_eq!(def["budget"], json!({"runTimeoutMs":1000,"model":{"maxCalls":2}}));
    let keys: Vec<&String> = def.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "key",
            "name",
            "description",
            "mode",
            "modelConfig",
            "toolConfig",
            "skillConfig",
            "toolChoice",
            "budget",
            "plain"
        ]
    );
}

#[test]
fn code_grants_are_never_written() {
    // The sandbox grants and inline code are operator decisions: whatever the model asks,
    // the written definition has neither (they default to off when absent).
    let def = build(json!({"key":"k","sandbox":{"network":true,"unixSockets":true},
        "config":{"sandbox":{"unixSockets":true}},"skillConfig":{"skills":["a"],"allowInlineCode":true}}))
    .unwrap();
    assert!(def.get("sandbox").is_none(), "{def}");
    assert_eq!(def["skillConfig"], json!({"skills":["a"]}));
}

#[test]
fn nested_model_config_and_tool_config() {
    let def =
        build(json!({"key":"k","modelConfig":{"providerKey":"DeepSeek","model":"m","reasoning":{"enabled":false}},
        "providerKey":"ignored","toolConfig":{"backends":["_BASH_"]}}))
        .unwrap();
    assert_eq!(def["modelConfig"], json!({"providerKey":"deepseek","model":"m","reasoning":{"enabled":false}}));
    assert_eq!(def["toolConfig"], json!({"backends":["_bash_"],"frontends":[],"actions":[]}));
}

#[test]
fn grants_are_those_the_loader_reads() {
    let config = AgentFileCreateConfig::default();
    let file = agent_file(
        &json!({"key":"k","mode":"PLAN_EXECUTE","planSystemPrompt":"p","executeSystemPrompt":"e",
        "toolConfig":{"backends":["City_Datetime","_bash_"],"actions":["x"]},"skills":["s"]}),
        "DEFAULT",
    )
    .unwrap();
    let (_, definition) = file.load().unwrap();
    // The plan tools PLAN_EXECUTE adds by itself are not grants of the file.
    assert_eq!(
        Refused::of(&config, &definition),
        Refused { tools: vec!["_bash_".into(), "x".into()], skills: vec!["s".into()] }
    );
}

#[test]
fn the_tool_reports_its_bundled_metadata() {
    let tool = AgentFileCreate::default();
    assert_eq!(tool.name(), "agent_file_create");
    assert!(tool.description().contains("agent definition"), "{}", tool.description());
    assert_eq!(tool.parameters()["type"], "object");
    assert!(!tool.after_call_hint().is_empty());
}
