//! Agent definition loading: the reference's AgentDefinitionLoaderTest cases (docs/contract/reference-tests.md,
//! adapted where agw decides differently) plus the schema rules of docs/contract/agent-definitions.md.

use agw_llm::{ReasoningEffort, ReasoningSetting};
use agw_modes::definition::{
    AgentCatalog, AgentDefinition, AgentMode, Budget, BudgetScope, DEFAULT_AFTER_CALL_HINT_TITLE,
    DEFAULT_SKILL_DISCLOSURE_HEADER, ModeDef, StageKind, StageTools, ToolChoicePolicy,
};
use support::{TempDir, agent, names, parse_err, resolve};

#[test]
fn loader_01_plan_execute_file_with_name_icon_and_tools() {
    let dir = TempDir::new();
    dir.write(
        "ops_daily.json",
        r#"{
          "key": "ops_daily", "name": "运维日报助手", "icon": "emoji:📅",
          "mode": "PLAN_EXECUTE",
          "modelConfig": {"providerKey": "bailian", "model": "qwen3-max"},
          "toolConfig": {"backends": ["_bash_"]},
          "planExecute": {
            "plan": {"systemPrompt": "先规划"},
            "execute": {"systemPrompt": "再执行"},
            "summary": {"systemPrompt": "最后总结"}
          }
        }"#,
    );
    let catalog = AgentCatalog::load_dir(dir.path());
    assert!(catalog.problems().is_empty(), "{:?}", catalog.problems());
    let def = catalog.get("ops_daily").expect("loaded");
    assert_eq!(def.name, "运维日报助手");
    assert_eq!(def.icon.as_deref(), Some("emoji:📅"));
    assert_eq!(def.mode_kind(), AgentMode::PlanExecute);
    assert_eq!(def.tool_names(), names(&["_bash_", "_plan_add_tasks_", "_plan_update_task_"]));
    let ModeDef::PlanExecute { plan, deep_thinking, execute, summary, max_steps, .. } = &def.mode else {
        panic!("not plan-execute: {:?}", def.mode);
    };
    assert_eq!(plan.system_prompt, "先规划");
    assert!(!deep_thinking);
    assert_eq!(execute.system_prompt, "再执行");
    assert_eq!(summary.system_prompt, "最后总结");
    assert_eq!(*max_steps, 15);
}

#[test]
fn loader_02_legacy_top_level_provider_and_model_are_rejected() {
    let err = parse_err(
        r#"{"key":"legacy","mode":"ONESHOT","providerKey":"bailian","model":"qwen3-max",
            "plain":{"systemPrompt":"x"}}"#,
    );
    assert_eq!(err, r#"rejected legacy field "providerKey" at top level"#);
}

#[test]
fn loader_03_triple_quoted_plain_prompt() {
    let def = agent(
        "{\"mode\":\"ONESHOT\",\"modelConfig\":{\"model\":\"m\"},\n\"plain\":{\"systemPrompt\":\"\"\"\n你是算命大师\n请先问出生日期\n\"\"\"}}",
    );
    assert_eq!(def.mode_kind(), AgentMode::Oneshot);
    assert_eq!(def.primary_system_prompt(), "你是算命大师\n请先问出生日期");
}

#[test]
fn loader_04_comments_and_triple_quotes_in_plan_execute() {
    let def = agent(
        r#"{
          // line comment
          "key": "commented",
          /* block
             comment */
          "mode": "PLAN_EXECUTE",
          "modelConfig": {"providerKey": "bailian", "model": "qwen3-max"},
          "planExecute": {
            "plan": {"systemPrompt": """
你是高级规划助手。
先规划任务。
"""},
            "execute": {"systemPrompt": """
你是执行助手。
根据taskId执行任务。
"""},
            "summary": {"systemPrompt": "总结"}
          }
        }"#,
    );
    assert_eq!(prompt(&def, StageKind::Plan), "你是高级规划助手。\n先规划任务。");
    assert_eq!(prompt(&def, StageKind::Execute), "你是执行助手。\n根据taskId执行任务。");
    assert_eq!(prompt(&def, StageKind::Summary), "总结");
}

#[test]
fn loader_05_three_modes_with_null_tool_config() {
    let dir = TempDir::new();
    let model = r#""modelConfig":{"model":"m"},"toolConfig":null"#;
    dir.write("a_oneshot.json", &format!(r#"{{"mode":"ONESHOT",{model},"plain":{{"systemPrompt":"p"}}}}"#));
    dir.write("b_react.json", &format!(r#"{{"mode":"REACT",{model},"react":{{"systemPrompt":"r","maxSteps":5}}}}"#));
    dir.write(
        "c_plan.json",
        &format!(
            r#"{{"mode":"PLAN_EXECUTE",{model},"planExecute":{{"plan":{{"systemPrompt":"p"}},"execute":{{"systemPrompt":"e"}}}}}}"#
        ),
    );
    let catalog = AgentCatalog::load_dir(dir.path());
    assert_eq!(catalog.keys().collect::<Vec<_>>(), ["a_oneshot", "b_react", "c_plan"]);
    let mode = |key: &str| catalog.get(key).unwrap().mode_kind();
    assert_eq!(mode("a_oneshot"), AgentMode::Oneshot);
    assert_eq!(mode("b_react"), AgentMode::React);
    assert_eq!(mode("c_plan"), AgentMode::PlanExecute);
    assert!(matches!(catalog.get("b_react").unwrap().mode, ModeDef::React { max_steps: 5, .. }));
}

#[test]
fn loader_06_skill_config_skills_are_lower_cased_and_distinct() {
    let def = agent(&oneshot(r#""skillConfig":{"skills":["screenshot","Doc","screenshot"]}"#));
    assert_eq!(def.skills, names(&["screenshot", "doc"]));
}

#[test]
fn loader_07_skills_alias_comes_first_then_skill_config() {
    let def = agent(&oneshot(r#""skills":["pdf","doc"],"skillConfig":{"skills":["screenshot","PDF"," ",null]}"#));
    assert_eq!(def.skills, names(&["pdf", "doc", "screenshot"]));
}

#[test]
fn code_grants_default_to_nothing_and_are_opt_in() {
    let def = agent(&oneshot(r#""skills":["math_basic"]"#));
    assert_eq!((def.allow_inline_code, def.sandbox_network, def.sandbox_unix_sockets), (false, false, false));
    let grants = def.code_grants();
    assert_eq!(
        (grants.skills, grants.allow_inline_code, grants.network, grants.unix_sockets),
        (names(&["math_basic"]), false, false, false)
    );

    let def = agent(&oneshot(
        r#""skillConfig":{"skills":["a"],"allowInlineCode":true},"sandbox":{"network":true,"unixSockets":true}"#,
    ));
    let grants = def.code_grants();
    assert_eq!(
        (grants.skills, grants.allow_inline_code, grants.network, grants.unix_sockets),
        (names(&["a"]), true, true, true)
    );
    // Each grant on its own.
    let grants = agent(&oneshot(r#""sandbox":{"unixSockets":true}"#)).code_grants();
    assert_eq!((grants.network, grants.unix_sockets), (false, true));
    let def = agent(&oneshot(r#""skillConfig":{"allowInlineCode":false},"sandbox":{}"#));
    assert_eq!((def.allow_inline_code, def.sandbox_network, def.sandbox_unix_sockets), (false, false, false));

    // A security switch of the wrong type is an error, not a silent "off" (or "on").
    let err = parse_err(&oneshot(r#""skillConfig":{"allowInlineCode":"yes"}"#));
    assert_eq!(err, r#"field "skillConfig.allowInlineCode" must be a boolean, found a string"#);
    let err = parse_err(&oneshot(r#""sandbox":{"network":1}"#));
    assert_eq!(err, r#"field "sandbox.network" must be a boolean, found an integer"#);
    let err = parse_err(&oneshot(r#""sandbox":{"unixSockets":"true"}"#));
    assert_eq!(err, r#"field "sandbox.unixSockets" must be a boolean, found a string"#);
    let err = parse_err(&oneshot(r#""sandbox":true"#));
    assert!(err.contains("\"sandbox\" must be an object"), "{err}");
}

#[test]
fn loader_08_key_field_and_tools_exactly_as_declared() {
    let catalog = AgentCatalog::from_sources([(
        "demo_mode_plain_skill_math.json".to_owned(),
        oneshot(
            r#""key":"demoModePlainSkillMath","toolConfig":{"backends":["_skill_run_script_"]},
               "skills":["math_basic","math_stats","text_utils"]"#,
        ),
    )]);
    let def = catalog.get("demoModePlainSkillMath").expect("loaded under its key");
    assert_eq!(def.tool_names(), names(&["_skill_run_script_"]));
    assert_eq!(def.skills, names(&["math_basic", "math_stats", "text_utils"]));
    assert_eq!(def.tool_choice, ToolChoicePolicy::Auto);
}

#[test]
fn loader_09_stage_only_model_config() {
    let def = agent(
        r#"{"mode":"ONESHOT","plain":{"systemPrompt":"p",
            "modelConfig":{"providerKey":"siliconflow","model":"deepseek-ai/DeepSeek-V3.2"}}}"#,
    );
    assert_eq!(def.agent_provider_key(), "bailian");
    assert_eq!(def.agent_model(None), "qwen3-max");
    let plain = resolve(&def, StageKind::Plain, &[]);
    assert_eq!(plain.provider_key, "siliconflow");
    assert_eq!(plain.model, "deepseek-ai/DeepSeek-V3.2");
}

#[test]
fn loader_10_no_model_config_anywhere_is_rejected() {
    let err = parse_err(r#"{"mode":"ONESHOT","plain":{"systemPrompt":"p"}}"#);
    assert_eq!(err, "agent has no modelConfig (top-level or stage-level)");
}

/// Adapted: agw clears the execute stage's tools on `toolConfig: null` (README decision table).
#[test]
fn loader_11_stage_tool_inheritance_and_null_clears() {
    let def = agent(
        r#"{"mode":"PLAN_EXECUTE",
            "modelConfig":{"providerKey":"bailian","model":"qwen3-max","reasoning":{"enabled":true,"effort":"HIGH"}},
            "toolConfig":{"backends":["_bash_","city_datetime"]},
            "planExecute":{"plan":{"systemPrompt":"p"},
                           "execute":{"systemPrompt":"e","toolConfig":null},
                           "summary":{"systemPrompt":"s"}}}"#,
    );
    let plan = resolve(&def, StageKind::Plan, &[]);
    assert_eq!((plan.provider_key.as_str(), plan.model.as_str()), ("bailian", "qwen3-max"));
    assert_eq!(plan.reasoning, ReasoningSetting { enabled: true, effort: ReasoningEffort::High });
    assert!(matches!(def.mode, ModeDef::PlanExecute { deep_thinking: false, .. }));
    let plan_tools: Vec<String> = def.stage_tools(StageKind::Plan).names().map(Into::into).collect();
    assert_eq!(plan_tools, names(&["_bash_", "city_datetime", "_plan_add_tasks_"]));
    let execute_tools: Vec<String> = def.stage_tools(StageKind::Execute).names().map(Into::into).collect();
    assert_eq!(execute_tools, names(&["_plan_update_task_"]));
    let summary_tools: Vec<String> = def.stage_tools(StageKind::Summary).names().map(Into::into).collect();
    assert_eq!(summary_tools, names(&["_bash_", "city_datetime"]));
    let all = def.tool_names();
    assert!(all.contains(&"_plan_add_tasks_".to_owned()));
    assert!(all.contains(&"_plan_update_task_".to_owned()));
}

#[test]
fn loader_12_plan_deep_thinking() {
    let def = agent(&plan_execute(r#""plan":{"systemPrompt":"p","deepThinking":true}"#, "", ""));
    assert!(matches!(def.mode, ModeDef::PlanExecute { deep_thinking: true, .. }));
}

#[test]
fn loader_13_to_16_deep_thinking_outside_plan_is_rejected_even_false() {
    for value in ["true", "false"] {
        let execute = format!(r#","deepThinking":{value}"#);
        let err = parse_err(&plan_execute(r#""plan":{"systemPrompt":"p"}"#, &execute, ""));
        assert!(err.contains("planExecute.execute.deepThinking"), "{err}");
        let summary = format!(r#","summary":{{"systemPrompt":"s","deepThinking":{value}}}"#);
        let err = parse_err(&plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", &summary));
        assert!(err.contains("planExecute.summary.deepThinking"), "{err}");
    }
}

#[test]
fn loader_17_runtime_prompt_overrides_and_defaults() {
    let def = agent(&oneshot(
        r#""runtimePrompts":{
            "planExecute":{"taskExecutionPromptTemplate":"  custom {{task_id}}\n"},
            "skill":{"catalogHeader":"skills-header-override","disclosureHeader":"  "},
            "toolAppendix":{"toolDescriptionTitle":"tool-desc-title-override"}}"#,
    ));
    let prompts = &def.runtime_prompts;
    assert_eq!(prompts.task_execution_prompt_template, "custom {{task_id}}");
    assert_eq!(prompts.skill_catalog_header, "skills-header-override");
    assert_eq!(prompts.tool_description_title, "tool-desc-title-override");
    assert_eq!(prompts.skill_disclosure_header, DEFAULT_SKILL_DISCLOSURE_HEADER);
    assert_eq!(prompts.after_call_hint_title, DEFAULT_AFTER_CALL_HINT_TITLE);
    assert_eq!(prompts.skill_instructions_label, "instructions:");
}

#[test]
fn loader_18_verify_is_rejected_at_top_level_and_in_runtime_prompts() {
    let err = parse_err(&oneshot(r#""verify":{}"#));
    assert_eq!(err, r#"rejected removed field "verify" at top level"#);
    let err = parse_err(&oneshot(r#""runtimePrompts":{"verify":null}"#));
    assert_eq!(err, r#"rejected removed field "verify" in "runtimePrompts""#);
}

#[test]
fn loader_19_budget_v2_values_are_taken_as_written() {
    let def = agent(&oneshot(
        r#""budget":{"runTimeoutMs":180000,
             "model":{"maxCalls":18,"timeoutMs":45000,"retryCount":2},
             "tool":{"maxCalls":36,"timeoutMs":90000,"retryCount":3}}"#,
    ));
    assert_eq!(
        def.budget,
        Budget {
            run_timeout_ms: 180_000,
            model: BudgetScope { max_calls: 18, timeout_ms: 45_000, retry_count: 2 },
            tool: BudgetScope { max_calls: 36, timeout_ms: 90_000, retry_count: 3 },
            max_tokens: None,
            max_cost: None,
        }
    );
}

#[test]
fn loader_20_budget_legacy_fields_are_rejected() {
    let err = parse_err(&oneshot(r#""budget":{"timeoutMs":1,"maxModelCalls":1,"retryCount":1,"maxToolCalls":1}"#));
    assert_eq!(err, "budget legacy fields are not supported: maxModelCalls, maxToolCalls, retryCount, timeoutMs");
}

#[test]
fn loader_21_two_plan_execute_files_with_distinct_keys() {
    let catalog = AgentCatalog::from_sources([
        ("one.json".to_owned(), plan_execute(r#""plan":{"systemPrompt":"p","deepThinking":true}"#, "", "")),
        ("two.json".to_owned(), plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", "")),
    ]);
    assert_eq!(catalog.keys().collect::<Vec<_>>(), ["one", "two"]);
    assert!(catalog.problems().is_empty());
}

fn prompt(def: &AgentDefinition, kind: StageKind) -> &str {
    &def.stage(kind).expect("stage of the active mode").system_prompt
}

/// A valid ONESHOT file with `extra` top-level members.
fn oneshot(extra: &str) -> String {
    let sep = if extra.is_empty() { "" } else { "," };
    format!(r#"{{"mode":"ONESHOT","modelConfig":{{"model":"m"}},"plain":{{"systemPrompt":"p"}}{sep}{extra}}}"#)
}

/// A valid PLAN_EXECUTE file: `plan` is the whole plan member, `execute_extra` extends the execute
/// block, `rest` is appended inside `planExecute`.
fn plan_execute(plan: &str, execute_extra: &str, rest: &str) -> String {
    format!(
        r#"{{"mode":"PLAN_EXECUTE","modelConfig":{{"model":"m"}},
            "planExecute":{{{plan},"execute":{{"systemPrompt":"e"{execute_extra}}}{rest}}}}}"#
    )
}

#[test]
fn stage_tools_states() {
    let def = agent(
        r#"{"mode":"REACT","modelConfig":{"model":"m"},"toolConfig":{"backends":["a"]},
            "react":{"systemPrompt":"r","toolConfig":null}}"#,
    );
    assert_eq!(def.stage(StageKind::React).unwrap().tools, StageTools::Cleared);
    assert!(def.stage_tools(StageKind::React).is_empty(), "null clears, never means all tools");
    assert!(def.stage_tools(StageKind::Plain).is_empty(), "inactive stage has no tools");
    assert_eq!(def.tool_names(), names(&["a"]));

    let def = agent(
        r#"{"mode":"REACT","modelConfig":{"model":"m"},"toolConfig":{"backends":["a"]},
            "react":{"systemPrompt":"r","toolConfig":{"frontends":[" Confirm_Dialog ","confirm_dialog"]}}}"#,
    );
    let tools = def.stage_tools(StageKind::React);
    assert!(tools.backends.is_empty() && tools.actions.is_empty());
    assert_eq!(tools.frontends, names(&["confirm_dialog"]));
    assert_eq!(def.tool_names(), names(&["a", "confirm_dialog"]));
}

#[test]
fn tool_union_covers_blocks_of_other_modes_and_plan_tools_are_not_duplicated() {
    let def = agent(
        r#"{"mode":"PLAN_EXECUTE","modelConfig":{"model":"m"},
            "toolConfig":{"actions":["Switch_Theme"],"backends":["x"]},
            "react":{"toolConfig":{"backends":["from_react"]}},
            "planExecute":{"plan":{"systemPrompt":"p","toolConfig":{"backends":["_plan_add_tasks_","x"]}},
                           "execute":{"systemPrompt":"e","toolConfig":{"frontends":["f"]}}}}"#,
    );
    assert_eq!(
        def.tool_names(),
        names(&["x", "switch_theme", "from_react", "_plan_add_tasks_", "f", "_plan_update_task_"])
    );
    let plan = def.stage_tools(StageKind::Plan);
    assert_eq!(plan.backends, names(&["_plan_add_tasks_", "x"]), "no second plan tool");
    let execute = def.stage_tools(StageKind::Execute);
    assert_eq!(execute.backends, names(&["_plan_update_task_"]));
    assert_eq!(execute.frontends, names(&["f"]));
}

#[test]
fn default_tool_choice_per_mode() {
    assert_eq!(agent(&oneshot("")).tool_choice, ToolChoicePolicy::None);
    let with_tools = agent(&oneshot(r#""toolConfig":{"backends":["t"]}"#));
    assert_eq!(with_tools.tool_choice, ToolChoicePolicy::Auto);
    let cleared = agent(
        r#"{"mode":"ONESHOT","modelConfig":{"model":"m"},"toolConfig":{"backends":["t"]},
            "plain":{"systemPrompt":"p","toolConfig":null}}"#,
    );
    assert_eq!(cleared.tool_choice, ToolChoicePolicy::None);
    let explicit = agent(&oneshot(r#""toolChoice":"REQUIRED""#));
    assert_eq!(explicit.tool_choice, ToolChoicePolicy::Required);
    let react = agent(r#"{"mode":"REACT","modelConfig":{"model":"m"},"react":{"systemPrompt":"r"}}"#);
    assert_eq!(react.tool_choice, ToolChoicePolicy::Auto);
    assert!(matches!(react.mode, ModeDef::React { max_steps: 6, .. }));
    let pe = agent(&plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", ""));
    assert_eq!(pe.tool_choice, ToolChoicePolicy::Auto);
}

#[test]
fn enum_spellings() {
    for mode in ["plan-execute", " Plan_Execute ", "PLAN-EXECUTE"] {
        let text = plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", "").replace("PLAN_EXECUTE", mode);
        assert_eq!(agent(&text).mode_kind(), AgentMode::PlanExecute, "{mode}");
    }
    assert_eq!(agent(&oneshot("").replace("ONESHOT", "oneshot")).mode_kind(), AgentMode::Oneshot);
    let err = parse_err(&oneshot("").replace("ONESHOT", "ONE_SHOT"));
    assert!(err.contains("unknown mode \"ONE_SHOT\""), "{err}");
    let err = parse_err(&oneshot("").replace(r#""mode":"ONESHOT","#, ""));
    assert!(err.contains("no mode"), "{err}");
    let err = parse_err(&oneshot("").replace("ONESHOT", "  "));
    assert!(err.contains("no mode"), "{err}");

    let err = parse_err(&oneshot(r#""toolChoice":"auto""#));
    assert!(err.contains("\"toolChoice\"") && err.contains("\"auto\""), "{err}");
    let err = parse_err(
        r#"{"mode":"ONESHOT","modelConfig":{"reasoning":{"enabled":true,"effort":"high"}},"plain":{"systemPrompt":"p"}}"#,
    );
    assert!(err.contains("modelConfig.reasoning.effort"), "{err}");
}

#[test]
fn missing_required_prompts() {
    let err = parse_err(r#"{"mode":"ONESHOT","modelConfig":{},"plain":{"systemPrompt":"  "}}"#);
    assert_eq!(err, "plain.systemPrompt is required");
    let err = parse_err(r#"{"mode":"REACT","modelConfig":{},"plain":{"systemPrompt":"p"}}"#);
    assert_eq!(err, "react.systemPrompt is required");
    let err = parse_err(r#"{"mode":"PLAN_EXECUTE","modelConfig":{},"planExecute":{"plan":{"systemPrompt":"p"}}}"#);
    assert!(err.starts_with("planExecute.plan.systemPrompt and planExecute.execute"), "{err}");
}

#[test]
fn summary_without_prompt_uses_execute_prompt_but_keeps_its_own_model() {
    let def = agent(&plan_execute(
        r#""plan":{"systemPrompt":"p"}"#,
        "",
        r#","summary":{"systemPrompt":" ","modelConfig":{"model":"small","reasoning":{"effort":"LOW"}}}"#,
    ));
    assert_eq!(prompt(&def, StageKind::Summary), "e");
    assert_eq!(def.primary_system_prompt(), "e");
    let summary = resolve(&def, StageKind::Summary, &[]);
    assert_eq!(summary.model, "small");
    assert_eq!(summary.reasoning, ReasoningSetting { enabled: false, effort: ReasoningEffort::Low });
    let absent = agent(&plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", ""));
    assert_eq!(prompt(&absent, StageKind::Summary), "e");
}

#[test]
fn prompts_are_trimmed_but_inner_indentation_kept() {
    let def = agent(
        "{\"mode\":\"REACT\",\"modelConfig\":{},\"react\":{\"systemPrompt\": \"\"\"\r\n  你是A。\r\n  第二行\r\n\"\"\"}}",
    );
    assert_eq!(def.primary_system_prompt(), "你是A。\n  第二行");
}

#[test]
fn triple_quotes_only_for_keys_ending_in_system_prompt() {
    let def = agent(
        "{\"mode\":\"ONESHOT\",\"modelConfig\":{},\"plain\":{\"systemPrompt\":\"p\"},\n\"x_SystemPROMPT\": \"\"\"a \"quoted\" \\\\ text\"\"\"}",
    );
    assert_eq!(def.primary_system_prompt(), "p");
    let err = parse_err(&oneshot("\"systemPromptNote\": \"\"\"x\"\"\""));
    assert!(err.starts_with("invalid JSON"), "{err}");
}

#[test]
fn hash_comments_and_comment_markers_inside_strings() {
    let def = agent(
        "# agent file\n{\"mode\":\"ONESHOT\", # mode\n\"modelConfig\":{},\"plain\":{\"systemPrompt\":\"see http://x/#a /* b */\"}}\n# end",
    );
    assert_eq!(def.primary_system_prompt(), "see http://x/#a /* b */");
}

#[test]
fn syntax_errors_and_non_object_roots() {
    assert!(parse_err("[]").contains("JSON object"));
    assert!(parse_err("").starts_with("invalid JSON"));
    assert!(parse_err(&oneshot("").replace('}', ",}")).starts_with("invalid JSON"), "no trailing commas");
    assert!(parse_err("{'mode':'ONESHOT'}").starts_with("invalid JSON"), "no single quotes");
}

#[test]
fn type_errors_name_the_field_path() {
    let err = parse_err(&oneshot("").replace(r#"{"model":"m"}"#, r#"{"model":3}"#));
    assert_eq!(err, r#"field "modelConfig.model" must be a string, found an integer"#);
    let err = parse_err(
        r#"{"mode":"PLAN_EXECUTE","modelConfig":{},"planExecute":{"plan":{"systemPrompt":"p","toolConfig":{"backends":"x"}},"execute":{"systemPrompt":"e"}}}"#,
    );
    assert!(err.contains("planExecute.plan.toolConfig.backends"), "{err}");
    let err = parse_err(&oneshot(r#""react":{"maxSteps":"5"}"#));
    assert!(err.contains("react.maxSteps"), "type errors in inactive blocks also count: {err}");
    let err = parse_err(&oneshot(r#""budget":[]"#));
    assert!(err.contains("\"budget\" must be an object"), "{err}");
}

#[test]
fn every_rejected_field_is_named() {
    for key in ["deepThink", "systemPrompt", "providerKey", "model", "reasoning", "tools"] {
        let err = parse_err(&oneshot(&format!(r#""{key}":null"#)));
        assert_eq!(err, format!(r#"rejected legacy field "{key}" at top level"#));
    }
    for key in ["verify", "output", "toolPolicy"] {
        let err = parse_err(&oneshot(&format!(r#""{key}":1"#)));
        assert_eq!(err, format!(r#"rejected removed field "{key}" at top level"#));
    }
    for key in ["providerKey", "model", "reasoning", "tools"] {
        let member = format!(r#""{key}":"x""#);
        let cases = [
            ("plain", oneshot("").replace(r#""systemPrompt":"p""#, &format!(r#""systemPrompt":"p",{member}"#))),
            ("react", oneshot(&format!(r#""react":{{{member}}}"#))),
            ("planExecute.plan", plan_execute(&format!(r#""plan":{{"systemPrompt":"p",{member}}}"#), "", "")),
            ("planExecute.execute", plan_execute(r#""plan":{"systemPrompt":"p"}"#, &format!(",{member}"), "")),
            (
                "planExecute.summary",
                plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", &format!(r#","summary":{{{member}}}"#)),
            ),
        ];
        for (path, text) in cases {
            assert_eq!(parse_err(&text), format!(r#"rejected legacy field "{key}" in "{path}""#));
        }
    }
    for key in ["verify", "finalAnswer", "oneshot", "react"] {
        let err = parse_err(&oneshot(&format!(r#""runtimePrompts":{{"{key}":{{}}}}"#)));
        assert_eq!(err, format!(r#"rejected removed field "{key}" in "runtimePrompts""#));
    }
    for key in [
        "executeToolsTitle",
        "planCallableToolsTitle",
        "draftInstructionBlock",
        "generateInstructionBlockFromDraft",
        "generateInstructionBlockDirect",
        "taskRequireToolUserPrompt",
        "taskMultipleToolsUserPrompt",
        "taskUpdateNoProgressUserPrompt",
        "taskContinueUserPrompt",
        "updateRoundPromptTemplate",
        "updateRoundMultipleToolsUserPrompt",
        "allStepsCompletedUserPrompt",
    ] {
        let err = parse_err(&oneshot(&format!(r#""runtimePrompts":{{"planExecute":{{"{key}":""}}}}"#)));
        assert_eq!(err, format!(r#"rejected removed field "{key}" in "runtimePrompts.planExecute""#));
    }
    let err = parse_err(&oneshot(r#""budget":{"maxSteps":3,"zeta":1,"alpha":2}"#));
    assert_eq!(err, "budget contains unsupported fields: alpha, maxSteps, zeta");
}

#[test]
fn budget_presets_and_replacement_rules() {
    assert_eq!(agent(&oneshot("")).budget, Budget::LIGHT);
    let react = agent(r#"{"mode":"REACT","modelConfig":{},"react":{"systemPrompt":"r"}}"#);
    assert_eq!(react.budget, Budget::DEFAULT);
    assert_eq!(agent(&plan_execute(r#""plan":{"systemPrompt":"p"}"#, "", "")).budget, Budget::HEAVY);
    assert_eq!(Budget::HEAVY.tool, BudgetScope { max_calls: 50, timeout_ms: 300_000, retry_count: 0 });

    // A configured budget replaces the preset: gaps come from DEFAULT, not from LIGHT.
    assert_eq!(agent(&oneshot(r#""budget":{}"#)).budget, Budget::DEFAULT);
    assert_eq!(agent(&oneshot(r#""budget":null"#)).budget, Budget::LIGHT);
    let def = agent(&oneshot(
        r#""budget":{"runTimeoutMs":0,"model":{"maxCalls":-1,"timeoutMs":5,"retryCount":-3,"extra":1},
                     "tool":{"retryCount":4}}"#,
    ));
    assert_eq!(
        def.budget,
        Budget {
            run_timeout_ms: 120_000,
            model: BudgetScope { max_calls: 15, timeout_ms: 5, retry_count: 0 },
            tool: BudgetScope { max_calls: 20, timeout_ms: 120_000, retry_count: 4 },
            max_tokens: None,
            max_cost: None,
        }
    );
    let err = parse_err(&oneshot(r#""budget":{"model":{"maxCalls":99999999999}}"#));
    assert!(err.contains("budget.model.maxCalls"), "{err}");
}

#[test]
fn key_name_icon_and_description_defaults() {
    let catalog = AgentCatalog::from_sources([
        ("  spaced .json".to_owned(), oneshot(r#""key":"  ","icon":"   ","description":"""#)),
        ("named.json".to_owned(), oneshot(r#""key":"Custom Key","name":"N","icon":" emoji:🤖 ""#)),
        (" .json".to_owned(), oneshot("")),
    ]);
    let spaced = catalog.get("spaced").expect("file stem, trimmed");
    assert_eq!(spaced.name, "spaced");
    assert_eq!(spaced.icon, None);
    assert_eq!(spaced.description, "external agent from   spaced .json");
    let named = catalog.get("Custom Key").expect("key used as written");
    assert_eq!((named.name.as_str(), named.icon.as_deref()), ("N", Some("emoji:🤖")));
    assert!(catalog.get("custom key").is_none(), "lookup is case-sensitive");
    assert_eq!(catalog.problems().len(), 1);
    assert!(catalog.problems()[0].message.contains("agent key is empty"));
    assert_eq!(catalog.problems()[0].file, " .json");
}

#[test]
fn resolve_model_inheritance() {
    let def = agent(
        r#"{"mode":"PLAN_EXECUTE",
            "modelConfig":{"providerKey":" OpenAI ","reasoning":{"enabled":true},"temperature":0.3,"top_p":0.9,"max_tokens":1000},
            "planExecute":{
              "plan":{"systemPrompt":"p","modelConfig":{"providerKey":" SiliconFlow ","model":" ","max_tokens":0}},
              "execute":{"systemPrompt":"e","modelConfig":null},
              "summary":{"modelConfig":{"model":"tiny","reasoning":{"enabled":true,"effort":"LOW"}}}}}"#,
    );
    let defaults = [("openai", "gpt-x"), ("SiliconFlow", "sf-default")];
    assert_eq!(def.agent_provider_key(), "openai");
    assert_eq!(def.agent_model(Some("gpt-x")), "gpt-x");
    assert_eq!(def.agent_model(Some(" ")), "qwen3-max");

    // Stage modelConfig replaces the top-level as a whole; blank model → agent-level model.
    let plan = resolve(&def, StageKind::Plan, &defaults);
    assert_eq!(plan.provider_key, "SiliconFlow", "stage provider is trimmed, not lower-cased");
    assert_eq!(plan.model, "gpt-x");
    assert_eq!(plan.reasoning, ReasoningSetting::default(), "no reasoning in the stage config");
    assert_eq!((plan.temperature, plan.top_p, plan.max_tokens), (None, None, None));

    // `modelConfig: null` inherits the top-level config.
    let execute = resolve(&def, StageKind::Execute, &defaults);
    assert_eq!(execute.provider_key, "OpenAI");
    assert_eq!(execute.model, "gpt-x");
    assert_eq!(execute.reasoning, ReasoningSetting { enabled: true, effort: ReasoningEffort::Medium });
    assert_eq!((execute.temperature, execute.top_p, execute.max_tokens), (Some(0.3), Some(0.9), Some(1000)));

    // No providerKey in the stage config → agent-level provider (lower-cased).
    let summary = resolve(&def, StageKind::Summary, &defaults);
    assert_eq!((summary.provider_key.as_str(), summary.model.as_str()), ("openai", "tiny"));
    assert_eq!(summary.reasoning, ReasoningSetting { enabled: true, effort: ReasoningEffort::Low });
    assert!(def.stage(StageKind::React).is_none());
}

#[test]
fn catalog_skips_broken_files_and_keeps_the_first_duplicate() {
    let dir = TempDir::new();
    dir.write("a.json", &oneshot(r#""key":"dup","name":"first""#));
    dir.write("b.json", &oneshot(r#""key":"dup","name":"second""#));
    dir.write("c.json", "{ not json");
    dir.write("d.json", &oneshot(""));
    dir.write("e.json", "\u{0}\u{ffff}garbage");
    dir.write_bytes("f.json", &[0xff, 0xfe, b'{', b'}']);
    dir.write("notes.txt", "ignored");
    dir.write("upper.JSON", &oneshot(""));
    dir.mkdir("sub.json");
    dir.mkdir("nested");
    dir.write("nested/inner.json", &oneshot(""));

    let catalog = AgentCatalog::load_dir(dir.path());
    assert_eq!(catalog.keys().collect::<Vec<_>>(), ["d", "dup"]);
    assert_eq!(catalog.get("dup").unwrap().name, "first");
    assert!(catalog.get("dup").unwrap().source_file.ends_with("a.json"));
    let problem_files: Vec<&str> =
        catalog.problems().iter().map(|p| p.file.rsplit(['/', '\\']).next().unwrap()).collect();
    assert_eq!(problem_files, ["b.json", "c.json", "e.json", "f.json"]);
    assert!(catalog.problems()[0].message.contains("duplicate agent key \"dup\""));
    assert!(catalog.problems()[1].message.starts_with("invalid JSON"));
    assert_eq!(catalog.iter().map(|d| d.key.as_str()).collect::<Vec<_>>(), ["d", "dup"]);
}

#[test]
fn missing_directory_gives_an_empty_catalog() {
    let dir = TempDir::new();
    let catalog = AgentCatalog::load_dir(&dir.path().join("does-not-exist"));
    assert!(catalog.is_empty());
    assert!(catalog.problems().is_empty());
    let file = dir.path().join("file.json");
    std::fs::write(&file, "{}").unwrap();
    assert!(AgentCatalog::load_dir(&file).is_empty(), "a file is not a directory");
}

#[test]
fn from_sources_sorts_by_file_name_and_ignores_non_json_names() {
    let catalog = AgentCatalog::from_sources([
        ("z.json".to_owned(), oneshot(r#""key":"same","name":"z""#)),
        ("a.json".to_owned(), oneshot(r#""key":"same","name":"a""#)),
        ("readme.md".to_owned(), "{".to_owned()),
    ]);
    assert_eq!(catalog.len(), 1);
    assert_eq!(catalog.get("same").unwrap().name, "a");
    assert_eq!(catalog.problems().len(), 1);
    assert_eq!(catalog.problems()[0].file, "z.json");
}

#[test]
fn context_config_and_model_limits_default_and_override() {
    let plain = r#"{"mode":"REACT","modelConfig":{"providerKey":"p","model":"m"},"react":{"systemPrompt":"s"}}"#;
    let def = agent(plain);
    assert_eq!(def.context, agw_modes::definition::ContextPolicy::default());
    assert_eq!((def.context.compact_at, def.context.doom_loop_threshold), (0.8, 3));
    assert_eq!(def.context.protected_tools, names(&["_skill_run_script_"]));
    let model = resolve(&def, StageKind::React, &[]);
    assert_eq!((model.context_window, model.max_output_tokens), (None, None));

    let tuned = agent(
        r#"{"mode":"REACT","modelConfig":{"providerKey":"p","model":"m","contextWindow":32000,"maxOutputTokens":2000},
            "react":{"systemPrompt":"s"},
            "contextConfig":{"compactAt":0.5,"keepUserTurns":1,"pruneProtectTokens":100,"pruneMinimumTokens":0,
              "protectedTools":["Lookup"],"summaryModel":{"providerKey":"cheap","model":"mini"},"summaryMaxTokens":300,
              "doomLoopThreshold":0,"enabled":true}}"#,
    );
    let model = resolve(&tuned, StageKind::React, &[]);
    assert_eq!((model.context_window, model.max_output_tokens), (Some(32_000), Some(2_000)));
    let context = &tuned.context;
    assert_eq!((context.compact_at, context.keep_user_turns, context.prune_protect_tokens), (0.5, 1, 100));
    assert_eq!((context.summary_max_tokens, context.doom_loop_threshold), (300, 0));
    assert_eq!(context.protected_tools, names(&["lookup"]));
    assert_eq!(context.summary_model.as_ref().and_then(|m| m.model.as_deref()), Some("mini"));

    let typo = parse_err(&plain.replace(r#""react""#, r#""contextConfig":{"compactAT":0.5},"react""#));
    assert!(typo.contains("contextConfig.compactAT") && typo.contains("compactAt"), "{typo}");
    let wrong = parse_err(&plain.replace(r#""react""#, r#""contextConfig":{"compactAt":1.5},"react""#));
    assert!(wrong.contains("contextConfig.compactAt"), "{wrong}");
}

#[test]
fn fallbacks_resolve_with_the_settings_of_their_model_config() {
    use agw_llm::{FallbackReason, ReasonSet};
    use agw_modes::definition::ModelRef;
    let model = |p: &str, m: &str| ModelRef { provider_key: p.into(), model: m.into() };
    let def = agent(
        r#"{"mode":"PLAN_EXECUTE","modelConfig":{"providerKey":"main","model":"big","temperature":0.2,
              "fallbacks":[{"providerKey":"spare","model":"small"},{"model":"big-2"},{"providerKey":"other"},
                           {"providerKey":"MAIN","model":"big"},{"providerKey":"spare","model":"small"}],
              "fallbackOn":["rate_limit","overloaded"]},
            "planExecute":{"plan":{"systemPrompt":"p"},
              "execute":{"systemPrompt":"e","modelConfig":{"providerKey":"solo","model":"one"}}}}"#,
    );
    let plan = resolve(&def, StageKind::Plan, &[("other", "other-default")]);
    // No repeat of the primary or of an earlier entry; a missing provider is the config's own,
    // a missing model the provider's configured one.
    assert_eq!(plan.fallbacks, [model("spare", "small"), model("main", "big-2"), model("other", "other-default")]);
    assert_eq!(plan.fallback_on, [FallbackReason::RateLimit, FallbackReason::Overloaded].into_iter().collect());
    assert_eq!(plan.temperature, Some(0.2), "the other settings are the config's, for every model in it");
    // A stage's own modelConfig replaces the top-level one, fallbacks included.
    let execute = resolve(&def, StageKind::Execute, &[]);
    assert!(execute.fallbacks.is_empty());
    assert_eq!(execute.fallback_on, ReasonSet::all(), "the default: every reason");
}

#[test]
fn fallbacks_that_cannot_work_are_refused_with_the_field_named() {
    let with = |model_config: &str| {
        parse_err(&format!(
            r#"{{"mode":"ONESHOT","modelConfig":{{"providerKey":"p","model":"m",{model_config}}},"plain":{{"systemPrompt":"s"}}}}"#
        ))
    };
    let cases = [
        (
            r#""fallbacks":{"model":"x"}"#,
            "field \"modelConfig.fallbacks\" must be an array of objects, found an object",
        ),
        (r#""fallbacks":["gpt-4o"]"#, "field \"modelConfig.fallbacks\" must be an array of objects, found a string"),
        (r#""fallbacks":[{}]"#, "field \"modelConfig.fallbacks[0]\" must name a providerKey, a model or both"),
        (
            r#""fallbacks":[{"model":"a"},{"providerKey":" "}]"#,
            "field \"modelConfig.fallbacks[1]\" must name a providerKey, a model or both",
        ),
        (
            r#""fallbacks":[{"provider":"x"}]"#,
            "field \"modelConfig.fallbacks[0].provider\" is not supported (expected one of providerKey, model)",
        ),
        (r#""fallbacks":[{"model":5}]"#, "field \"modelConfig.fallbacks[0].model\" must be a string, found an integer"),
        (
            r#""fallbacks":[{"model":"x"}],"fallbackOn":["rate_limit","RateLimit"]"#,
            "field \"modelConfig.fallbackOn\" has invalid value \"RateLimit\" (expected one of rate_limit, overloaded, server_error, timeout, context_window, connection)",
        ),
        (
            r#""fallbacks":[{"model":"x"}],"fallbackOn":[]"#,
            "field \"modelConfig.fallbackOn\" must name at least one reason (leave it out to fall back on all of them)",
        ),
        (
            r#""fallbacks":[{"model":"x"}],"fallbackOn":"timeout""#,
            "field \"modelConfig.fallbackOn\" must be an array of strings, found a string",
        ),
        (
            r#""fallbackOn":["timeout"]"#,
            "field \"modelConfig.fallbackOn\" has no effect without fallbacks in the same modelConfig",
        ),
    ];
    for (config, expected) in cases {
        assert_eq!(with(config), expected, "{config}");
    }
    let many = [r#"{"model":"x"}"#; 9].join(",");
    assert_eq!(
        with(&format!(r#""fallbacks":[{many}]"#)),
        "field \"modelConfig.fallbacks\" lists 9 models; at most 8 are tried"
    );
    // Null reads as absent, like every optional field.
    agent(
        r#"{"mode":"ONESHOT","modelConfig":{"model":"m","fallbacks":null,"fallbackOn":null},"plain":{"systemPrompt":"s"}}"#,
    );
}

#[test]
fn tool_calling_is_native_unless_the_effective_model_config_says_prompted() {
    use agw_modes::definition::ToolCalling;
    let plain = r#"{"mode":"REACT","modelConfig":{"providerKey":"p","model":"m"},"react":{"systemPrompt":"s"}}"#;
    assert_eq!(resolve(&agent(plain), StageKind::React, &[]).tool_calling, ToolCalling::Native);
    let prompted = plain.replace(r#""model":"m""#, r#""model":"m","toolCalling":"prompted""#);
    assert_eq!(resolve(&agent(&prompted), StageKind::React, &[]).tool_calling, ToolCalling::Prompted);
    let native = plain.replace(r#""model":"m""#, r#""model":"m","toolCalling":"native""#);
    assert_eq!(resolve(&agent(&native), StageKind::React, &[]).tool_calling, ToolCalling::Native);

    // A stage's modelConfig replaces the top-level one as a whole, toolCalling included.
    let staged = plan_execute(
        r#""plan":{"systemPrompt":"p","modelConfig":{"providerKey":"local","model":"qwen","toolCalling":"prompted"}}"#,
        "",
        "",
    );
    let def = agent(&staged);
    assert_eq!(resolve(&def, StageKind::Plan, &[]).tool_calling, ToolCalling::Prompted);
    assert_eq!(resolve(&def, StageKind::Execute, &[]).tool_calling, ToolCalling::Native);

    for bad in ["Prompted", "text", ""] {
        let file = plain.replace(r#""model":"m""#, &format!(r#""model":"m","toolCalling":"{bad}""#));
        let error = parse_err(&file);
        assert!(
            error.contains("modelConfig.toolCalling") && error.contains("native, prompted") && error.contains(bad),
            "{error}"
        );
    }
    let error = parse_err(&plain.replace(r#""model":"m""#, r#""model":"m","toolCalling":true"#));
    assert!(error.contains("modelConfig.toolCalling") && error.contains("string"), "{error}");
    let staged = plan_execute(r#""plan":{"systemPrompt":"p","modelConfig":{"toolCalling":"xml"}}"#, "", "");
    assert!(parse_err(&staged).contains("planExecute.plan.modelConfig.toolCalling"), "{}", parse_err(&staged));
}

#[test]
fn arbitrary_input_never_panics() {
    let pieces = [
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\"\"\"",
        ":",
        ",",
        "//",
        "/*",
        "*/",
        "#",
        "\n",
        "\r\n",
        "\\",
        "\"systemPrompt\"",
        "\"mode\"",
        "\"ONESHOT\"",
        "\"plain\"",
        "\"planExecute\"",
        "null",
        "1",
        "-1",
        "1e400",
        "\"budget\"",
        "\"toolConfig\"",
        "é",
        "你",
        "\u{feff}",
        " ",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..5000 {
        let mut text = String::new();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 40) as usize;
        let mut s = seed;
        for _ in 0..len {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            text.push_str(pieces[(s >> 33) as usize % pieces.len()]);
        }
        let _ = AgentDefinition::from_json("fuzz.json", &text);
    }
    let deep = "[".repeat(100_000);
    assert!(AgentDefinition::from_json("deep.json", &deep).is_err());
}

mod support {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    use agw_modes::definition::{AgentDefinition, ResolvedModel, StageKind};

    /// Parses a file that must be valid.
    pub fn agent(text: &str) -> AgentDefinition {
        AgentDefinition::from_json("test.json", text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// The rejection message of a file that must be invalid.
    pub fn parse_err(text: &str) -> String {
        match AgentDefinition::from_json("test.json", text) {
            Ok(def) => panic!("unexpectedly loaded {def:?}\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    pub fn names(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// `resolve_model` with a fixed table of provider default models.
    pub fn resolve(def: &AgentDefinition, kind: StageKind, defaults: &[(&str, &str)]) -> ResolvedModel {
        def.resolve_model(kind, |provider| {
            defaults.iter().find(|(key, _)| *key == provider).map(|(_, model)| (*model).to_owned())
        })
    }

    /// A fresh directory under the system temp dir, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let name =
                format!("agw-definition-{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
            let path = std::env::temp_dir().join(name);
            std::fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }

        pub fn write(&self, name: &str, text: &str) {
            self.write_bytes(name, text.as_bytes());
        }

        pub fn write_bytes(&self, name: &str, bytes: &[u8]) {
            std::fs::write(self.0.join(name), bytes).expect("write temp file");
        }

        pub fn mkdir(&self, name: &str) {
            std::fs::create_dir_all(self.0.join(name)).expect("create temp subdir");
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
