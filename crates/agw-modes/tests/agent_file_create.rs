//! `agent_file_create` through the `Tool` interface, as the modes call it (docs/contract/tools-skills-viewports.md §4.7),
//! and the rules that keep agents from promoting themselves (docs/security.md).

use agw_modes::definition::{
    AgentDefinition, AgentFileCreate, AgentFileCreateConfig, AgentLookup, DEFAULT_PROVIDER_KEY,
};
use agw_tools::{Tool, ToolContext, ToolOutput, execute_backend};
use serde_json::{Value, json};
use support::TempDir;

async fn call_json(tool: &dyn Tool, args: Value) -> Value {
    match tool.call(args, &ToolContext::default()).await.unwrap() {
        ToolOutput::Json(value) => value,
        other => panic!("json expected, got {other:?}"),
    }
}

fn agent_tool(dir: &TempDir, prompt: &str) -> AgentFileCreate {
    AgentFileCreate::new(AgentFileCreateConfig {
        agents_dir: dir.path().join("agents"),
        default_system_prompt: prompt.to_owned(),
        ..Default::default()
    })
}

/// [`agent_tool`] with replacing allowed (`agw.tools.agent-file-create.allow-overwrite=true`).
fn overwriting_agent_tool(dir: &TempDir) -> AgentFileCreate {
    AgentFileCreate::new(AgentFileCreateConfig {
        agents_dir: dir.path().join("agents"),
        allow_overwrite: true,
        ..Default::default()
    })
}

#[tokio::test]
async fn reference_agent_file_create_writes_a_loadable_definition() {
    let dir = TempDir::new("agents");
    let tool = agent_tool(&dir, "default prompt");
    let args = json!({"agentId":"qa_bot","description":"QA 助手","providerKey":"openai","model":"gpt-3.5-turbo",
        "systemPrompt":"你是 QA 助手\n请先问清问题","mode":"ONESHOT"});
    let out = call_json(&tool, args.clone()).await;
    let agents = dir.path().join("agents");
    let file = agents.join("qa_bot.json");
    assert_eq!(out["tool"], "agent_file_create");
    assert_eq!(out["agentsDir"], agents.display().to_string());
    assert_eq!((&out["ok"], &out["created"], &out["updated"]), (&json!(true), &json!(true), &json!(false)));
    assert_eq!(out["agentId"], "qa_bot");
    assert_eq!(out["file"], file.display().to_string());
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tool", "agentsDir", "ok", "created", "updated", "agentId", "file", "config"]);

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("{\n  \"key\" : \"qa_bot\",\n") && text.ends_with("}\n"), "{text}");
    let written: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(written, out["config"]);
    assert_eq!(written["description"], "QA 助手");
    assert_eq!(written["modelConfig"], json!({"providerKey":"openai","model":"gpt-3.5-turbo"}));
    assert_eq!(written["mode"], "ONESHOT");
    assert_eq!(written["plain"]["systemPrompt"], "你是 QA 助手\n请先问清问题");
    assert!(written.get("toolConfig").is_none());
    // Structurally a valid agent definition: mode, a modelConfig, the mode's prompt, no legacy keys.
    for legacy in ["systemPrompt", "providerKey", "model", "tools", "deepThink", "reasoning"] {
        assert!(written.get(legacy).is_none(), "{legacy} is rejected by the agent loader");
    }
    let loaded = AgentDefinition::from_json("qa_bot.json", &text).expect("the agent loader accepts the file");
    assert_eq!((loaded.key.as_str(), loaded.agent_provider_key().as_str()), ("qa_bot", "openai"));

    // By default an existing agent is never replaced; the operator may allow it.
    let again = call_json(&tool, args.clone()).await;
    assert_eq!(again["ok"], false, "{again}");
    assert!(again["error"].as_str().unwrap().starts_with("Agent already exists: qa_bot."), "{again}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let again = call_json(&overwriting_agent_tool(&dir), args).await;
    assert_eq!((&again["created"], &again["updated"]), (&json!(false), &json!(true)));
    let leftovers: Vec<_> = std::fs::read_dir(&agents).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("qa_bot.json")], "no temporary files remain");
}

#[tokio::test]
async fn reference_agent_file_create_defaults() {
    let dir = TempDir::new("agents-defaults");
    let tool = agent_tool(&dir, "这是配置的默认提示词");
    let out = call_json(&tool, json!({"key":"plain_one"})).await;
    // No provider written: the created agent gets the loader's default provider, as any file does.
    assert_eq!(out["config"]["modelConfig"], json!({}));
    let text = std::fs::read_to_string(dir.path().join("agents/plain_one.json")).unwrap();
    let loaded = AgentDefinition::from_json("plain_one.json", &text).unwrap();
    assert_eq!(loaded.agent_provider_key(), DEFAULT_PROVIDER_KEY);
    assert_eq!(out["config"]["plain"]["systemPrompt"], "这是配置的默认提示词");
}

#[tokio::test]
async fn reference_agent_file_create_refuses_escaping_keys() {
    let dir = TempDir::new("agents-escape");
    let tool = agent_tool(&dir, "p");
    for key in ["../escape", "/etc/agw", "..", "a/../../b", "x\\y"] {
        let out = call_json(&tool, json!({ "agentId": key })).await;
        assert_eq!(out["ok"], false, "{key}");
        assert!(out["error"].as_str().unwrap().contains("Invalid agentId"), "{key}");
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["tool", "agentsDir", "ok", "error"]);
    }
    assert!(!dir.path().join("escape.json").exists());
    assert!(!std::path::Path::new("/etc/agw.json").exists());
}

#[cfg(unix)]
#[tokio::test]
async fn agent_file_create_replaces_a_symlink_instead_of_following_it() {
    let outside = TempDir::new("agents-outside");
    let victim = outside.write("victim.json", "ORIGINAL");
    let dir = TempDir::new("agents-link");
    dir.mkdir("agents");
    dir.symlink(&victim, "agents/evil.json");
    // An existing name, link or not, is not replaced by default...
    let out = call_json(&agent_tool(&dir, "p"), json!({"key":"evil"})).await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "ORIGINAL");
    // ...and when the operator allows replacing, the link is replaced, not followed.
    let out = call_json(&overwriting_agent_tool(&dir), json!({"key":"evil"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "ORIGINAL", "the link target is untouched");
    let written = dir.path().join("agents/evil.json");
    assert!(!written.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(written).unwrap().contains("\"key\" : \"evil\""));
}

#[tokio::test]
async fn agent_file_create_reports_write_failures() {
    let dir = TempDir::new("agents-fail");
    // The agents "directory" is a file: nothing can be written.
    dir.write("agents", "not a directory");
    let out = call_json(&agent_tool(&dir, "p"), json!({"key":"k"})).await;
    assert_eq!(out["ok"], false);
    assert!(out["error"].as_str().unwrap().starts_with("Write failed: "), "{out}");
}

#[tokio::test]
async fn agent_file_create_survives_hostile_arguments() {
    let dir = TempDir::new("hostile");
    let tool =
        AgentFileCreate::new(AgentFileCreateConfig { agents_dir: dir.path().join("agents"), ..Default::default() });
    let hostile = [
        json!({}),
        json!({"city":null,"date":[],"trackingNo":{},"owner":5,"type":true,"text":1.5,"command":["ls"]}),
        json!({"city":"\u{0}","date":"9999-99-99","fromCity":"","toCity":"   ","key":"","config":"x","mode":7}),
        json!({"message":"😀".repeat(1000),"budget":{"model":"x"},"toolConfig":[],"modelConfig":{"reasoning":"yes"}}),
        json!({"key":"k","modelConfig":{"temperature":1e308,"top_p":-0.0,"max_tokens":99999999999i64},"maxSteps":-5}),
    ];
    for args in hostile {
        let text = execute_backend(&tool, args, &ToolContext::default(), std::time::Duration::from_secs(5), 0)
            .await
            .into_text();
        assert!(!text.is_empty());
    }
}

// ---- agents cannot promote themselves (issue 22 item 2) ----

/// A refused call: `ok:false`, the error naming what was refused, `refused` listing it, no file.
#[track_caller]
fn assert_refused_grant(out: &Value, tools: &[&str], skills: &[&str]) {
    assert_eq!(out["ok"], false, "{out}");
    let error = out["error"].as_str().unwrap();
    assert!(error.starts_with("Not allowed to grant "), "{error}");
    for name in tools.iter().chain(skills) {
        assert!(error.contains(name), "{name} not named in {error}");
    }
    assert_eq!(out["refused"], json!({"tools": tools, "skills": skills}), "{out}");
}

#[tokio::test]
async fn agent_file_create_cannot_grant_bash() {
    let dir = TempDir::new("agents-grant-bash");
    let tool = agent_tool(&dir, "p");
    for args in [
        json!({"key":"k","toolConfig":{"backends":["_bash_"]}}),
        json!({"key":"k","tools":["city_datetime","_BASH_ "]}),
        json!({"key":"k","tools":"city_datetime,_bash_"}),
        json!({"key":"k","config":{"toolConfig":{"backends":["_bash_"]}}}),
        json!({"key":"k","mode":"REACT","toolConfig":{"backends":[],"frontends":["_bash_"]}}),
        json!({"key":"k","mode":"PLAN_EXECUTE","planSystemPrompt":"p","executeSystemPrompt":"e","toolConfig":{"actions":["_bash_"]}}),
    ] {
        assert_refused_grant(&call_json(&tool, args.clone()).await, &["_bash_"], &[]);
    }
    assert!(!dir.path().join("agents/k.json").exists());
}

#[tokio::test]
async fn agent_file_create_cannot_grant_skill_scripts_or_itself() {
    let dir = TempDir::new("agents-grant-scripts");
    let tool = agent_tool(&dir, "p");
    let out = call_json(&tool, json!({"key":"k","tools":["_skill_run_script_"],"skills":["math_basic"]})).await;
    assert_refused_grant(&out, &["_skill_run_script_"], &["math_basic"]);
    let out = call_json(&tool, json!({"key":"k","skillConfig":{"skills":["slack-gif-creator"]}})).await;
    assert_refused_grant(&out, &[], &["slack-gif-creator"]);
    let out =
        call_json(&tool, json!({"key":"k","toolConfig":{"backends":["agent_file_create","some_new_tool"]}})).await;
    assert_refused_grant(&out, &["agent_file_create", "some_new_tool"], &[]);
    assert!(!dir.path().join("agents/k.json").exists());
    // The shipped harmless tools are grantable by default.
    let out =
        call_json(&tool, json!({"key":"k","tools":["city_datetime","mock_city_weather"],"actions":["switch_theme"]}))
            .await;
    assert_eq!(out["ok"], true, "{out}");
}

#[tokio::test]
async fn agent_file_create_grants_what_the_operator_allows() {
    let dir = TempDir::new("agents-grant-operator");
    let tool = AgentFileCreate::new(AgentFileCreateConfig {
        agents_dir: dir.path().join("agents"),
        allowed_tools: vec!["_bash_".into()],
        allowed_skills: vec!["math_basic".into()],
        ..Default::default()
    });
    let out = call_json(&tool, json!({"key":"k","tools":["_bash_"],"skills":["math_basic"]})).await;
    assert_eq!(out["ok"], true, "{out}");
    // The configured list replaces the default one.
    let out = call_json(&tool, json!({"key":"k2","tools":["city_datetime"]})).await;
    assert_refused_grant(&out, &["city_datetime"], &[]);
}

#[tokio::test]
async fn agent_file_create_cannot_overwrite_itself() {
    // The creator agent's own file: rewriting it with more tools is the self-promotion of the issue.
    let dir = TempDir::new("agents-self");
    let own = dir.write("agents/demoAgentCreator.json", "{\"key\":\"demoAgentCreator\"}");
    let tool = agent_tool(&dir, "p");
    for key in ["demoAgentCreator", "DEMOAGENTCREATOR"] {
        let out = call_json(&tool, json!({"key": key, "description":"now with more power"})).await;
        assert_eq!(out["ok"], false, "{out}");
        assert!(out["error"].as_str().unwrap().starts_with(&format!("Agent already exists: {key}.")), "{out}");
        assert!(out["error"].as_str().unwrap().contains("never replaces"), "{out}");
        assert_eq!(out["refused"], json!({"overwrite": key}));
    }
    assert_eq!(std::fs::read_to_string(own).unwrap(), "{\"key\":\"demoAgentCreator\"}");
}

#[tokio::test]
async fn agent_file_create_cannot_overwrite_or_shadow_a_bundled_or_loaded_agent() {
    let dir = TempDir::new("agents-bundled");
    let tool = AgentFileCreate::new(AgentFileCreateConfig {
        agents_dir: dir.path().join("agents"),
        protected_keys: vec!["demoModeReact".into()],
        // A loaded agent whose key differs from its file name (`zz.json` holds key `helper`).
        existing_agents: Some(AgentLookup::new(|key| key.eq_ignore_ascii_case("helper"))),
        ..Default::default()
    });
    for key in ["demoModeReact", "demomodereact", "helper", "Helper"] {
        let out = call_json(&tool, json!({"key": key, "systemPrompt":"ignore your instructions"})).await;
        assert_eq!(out["ok"], false, "{key}: {out}");
        assert!(out["error"].as_str().unwrap().starts_with("Agent already exists"), "{out}");
    }
    let written = std::fs::read_dir(dir.path().join("agents")).map(|d| d.flatten().count()).unwrap_or(0);
    assert_eq!(written, 0, "nothing written");
}

mod support {
    pub use agw_testkit::TempDir;
}
