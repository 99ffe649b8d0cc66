//! Loading tool definition files and merging them with built-ins (docs/contract/tools-skills-viewports.md §2).

use std::sync::Arc;

use agw_testkit::TempDir;
use agw_tools::bundled::TOOL_FILES;
use agw_tools::{BuiltinsConfig, Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry, builtins, default_parameters};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A built-in stand-in with fixed metadata.
struct Fake {
    name: &'static str,
    hint: &'static str,
}

impl Tool for Fake {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "built-in description"
    }
    fn parameters(&self) -> Value {
        json!({"type":"object","properties":{"x":{"type":"string"}}})
    }
    fn after_call_hint(&self) -> &str {
        self.hint
    }
    fn call<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, agw_tools::ToolError>> {
        Box::pin(async { Ok(ToolOutput::Text("fake".into())) })
    }
}

fn fake(name: &'static str, hint: &'static str) -> Arc<dyn Tool> {
    Arc::new(Fake { name, hint })
}

fn tools(names: &[&str]) -> String {
    let entries: Vec<String> =
        names.iter().map(|n| format!(r#"{{"type":"function","name":"{n}","description":"{n} from file"}}"#)).collect();
    format!(r#"{{"tools":[{}]}}"#, entries.join(","))
}

#[test]
fn reference_capability_registry_case_1() {
    let dir = TempDir::new("reg1");
    dir.write("bash.backend", r#"{"tools":[{"type":"function","name":"bash","afterCallHint":"bash prompt"}]}"#);
    dir.write("switch_theme.action", &tools(&["switch_theme"]));
    dir.write("launch_fireworks.action", &tools(&["launch_fireworks"]));
    dir.write("show_modal.action", &tools(&["show_modal"]));
    let registry = ToolRegistry::load(Some(dir.path()), vec![fake("bash", "")]);
    let bash = registry.get("bash").unwrap();
    assert_eq!(
        (bash.kind, bash.kind.call_type(), bash.after_call_hint.as_str()),
        (ToolKind::Backend, "function", "bash prompt")
    );
    assert!(registry.get("show_weather_card").is_none());
    for action in ["switch_theme", "launch_fireworks", "show_modal"] {
        assert_eq!(registry.get(action).unwrap().kind, ToolKind::Action);
        assert_eq!(registry.kind_of(action).call_type(), "action");
    }
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());
}

#[test]
fn duplicate_names_drop_every_definition() {
    let dir = TempDir::new("dup");
    dir.write("a.backend", &tools(&["dup_name", "keep_a"]));
    dir.write("b.action", &tools(&["dup_name", "keep_b"]));
    dir.write("c.frontend", &tools(&["DUP_NAME"]));
    let registry = ToolRegistry::load(Some(dir.path()), vec![fake("keep_a", "")]);
    assert!(registry.get("dup_name").is_none());
    assert_eq!(registry.kind_of("dup_name"), ToolKind::Backend, "unknown names are backend");
    assert!(registry.get("keep_a").is_some());
    assert_eq!(registry.get("keep_b").unwrap().kind, ToolKind::Action);
    let conflicts: Vec<_> = registry.problems().iter().filter(|p| p.message.contains("more than once")).collect();
    assert_eq!(conflicts.len(), 3, "{:?}", registry.problems());
    assert!(conflicts.iter().all(|p| p.message.contains("a.backend") && p.message.contains("c.frontend")));
}

#[test]
fn a_name_repeated_inside_one_file_is_a_conflict_too() {
    let registry = ToolRegistry::from_sources([("x.action", tools(&["twice", "twice", "once"]))], vec![]);
    assert!(registry.get("twice").is_none());
    assert!(registry.get("once").is_some());
}

#[test]
fn frontend_viewport_key_comes_from_the_file_name() {
    let dir = TempDir::new("fe");
    dir.write("Show_Form.FRONTEND", &tools(&["show_form_frontend"]));
    dir.write("legacy_html.html", &tools(&["legacy_html_frontend"]));
    let registry = ToolRegistry::load(Some(dir.path()), vec![]);
    let form = registry.get("show_form_frontend").unwrap();
    assert_eq!(form.kind, ToolKind::Frontend);
    assert_eq!(form.kind.call_type(), "frontend");
    assert_eq!(form.viewport_key.as_deref(), Some("show_form"));
    assert!(registry.get("legacy_html_frontend").is_none(), ".html files are not tool files");
}

#[test]
fn bad_files_are_reported_with_their_path_and_the_rest_loads() {
    let dir = TempDir::new("bad");
    let broken = dir.write("broken.backend", "{ not json");
    let no_tools = dir.write("no_tools.action", r#"{"tool":[]}"#);
    dir.write("good.action", &tools(&["good"]));
    dir.write("entries.action", r#"{"tools":[{"type":"tool","name":"wrong_type"},{"type":"function"},7]}"#);
    let registry = ToolRegistry::load(Some(dir.path()), vec![]);
    assert!(registry.get("good").is_some());
    let problem = |path: &std::path::Path| registry.problems().iter().find(|p| p.file == path.display().to_string());
    assert!(problem(&broken).unwrap().message.contains("invalid JSON"));
    assert!(problem(&no_tools).unwrap().message.contains("no \"tools\" array"));
    let entry_problems = registry.problems().iter().filter(|p| p.file.ends_with("entries.action")).count();
    assert_eq!(entry_problems, 3);
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "",
        "null",
        "[]",
        "{\"tools\":null}",
        "{\"tools\":[null,1,\"x\",[],{}]}",
        "\u{0}\u{1}",
        "{\"tools\":[{\"type\":\"function\",\"name\":5}]}",
    ];
    for (i, text) in inputs.iter().enumerate() {
        let registry = ToolRegistry::from_sources([(format!("f{i}.action"), (*text).to_owned())], vec![]);
        assert!(registry.list().is_empty(), "{text}");
    }
    // Invalid UTF-8 on disk.
    let dir = TempDir::new("bin");
    std::fs::write(dir.path().join("bin.backend"), [0xff, 0xfe, 0x00]).unwrap();
    let registry = ToolRegistry::load(Some(dir.path()), vec![]);
    assert_eq!(registry.problems().len(), 1);
    assert!(registry.problems()[0].message.contains("cannot read file"));
}

#[test]
fn suffixes_are_case_insensitive_and_other_files_ignored() {
    let dir = TempDir::new("suffix");
    dir.write("a.BACKEND", &tools(&["a"]));
    dir.write("b.Action", &tools(&["b"]));
    dir.write("c.json", &tools(&["c"]));
    dir.write("d.action.bak", &tools(&["d"]));
    dir.write(".hidden.action", &tools(&["hidden"]));
    dir.mkdir("sub.action");
    dir.write("nested/e.action", &tools(&["e"]));
    let registry = ToolRegistry::load(Some(dir.path()), vec![fake("a", "")]);
    let names: Vec<&str> = registry.list().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_directory_are_not_followed() {
    let outside = TempDir::new("outside");
    let target = outside.write("secret.action", &tools(&["smuggled"]));
    let dir = TempDir::new("links");
    dir.symlink(&target, "link.action");
    let inside = dir.write("real.txt", &tools(&["inside_link"]));
    dir.symlink(&inside, "inside.action");
    let registry = ToolRegistry::load(Some(dir.path()), vec![]);
    assert!(registry.get("smuggled").is_none());
    assert!(registry.get("inside_link").is_some(), "a link to a file inside the directory is fine");
}

#[test]
fn merge_rules_with_builtins() {
    let sources = [
        (
            "impl_with_file.backend",
            r#"{"tools":[{"type":"function","name":"impl_with_file","description":" file desc "}]}"#,
        ),
        (
            "impl_with_hint.backend",
            r#"{"tools":[{"type":"function","name":"impl_with_hint","afterCallHint":"file hint","parameters":{"type":"object","required":["q"]}}]}"#,
        ),
        ("no_impl.backend", r#"{"tools":[{"type":"function","name":"no_impl"}]}"#),
        ("shadow.action", r#"{"tools":[{"type":"function","name":"shadowed"}]}"#),
        ("z.frontend", r#"{"tools":[{"type":"function","name":"a_frontend","toolApi":"/x"}]}"#),
    ];
    let builtins = vec![
        fake("impl_with_file", "impl hint"),
        fake("impl_with_hint", "impl hint"),
        fake("shadowed", ""),
        fake("plain_builtin", "plain hint"),
    ];
    let registry = ToolRegistry::from_sources(sources, builtins);

    let merged = registry.get("impl_with_file").unwrap();
    assert_eq!(merged.description, "file desc", "description from the file");
    assert_eq!(merged.parameters, default_parameters(), "schema from the file, even when default");
    assert_eq!(merged.after_call_hint, "impl hint", "blank file hint falls back to the implementation");
    assert_eq!(registry.get("impl_with_hint").unwrap().after_call_hint, "file hint");
    assert_eq!(registry.get("impl_with_hint").unwrap().parameters, json!({"type":"object","required":["q"]}));

    assert!(registry.get("no_impl").is_none());
    assert!(registry.problems().iter().any(|p| p.file == "no_impl.backend" && p.message.contains("no built-in")));

    let shadowed = registry.get("shadowed").unwrap();
    assert_eq!(shadowed.kind, ToolKind::Backend, "the built-in stays in the listing");
    assert_eq!(shadowed.description, "built-in description");
    assert_eq!(registry.kind_of("shadowed"), ToolKind::Action, "type lookups see the definition");

    let plain = registry.get("plain_builtin").unwrap();
    assert_eq!((plain.description.as_str(), plain.after_call_hint.as_str()), ("built-in description", "plain hint"));
    assert_eq!(plain.parameters["properties"]["x"]["type"], "string");

    assert_eq!(registry.get("a_frontend").unwrap().tool_api.as_deref(), Some("/x"));
    assert_eq!(registry.kind_of(" A_Frontend "), ToolKind::Frontend);
    assert_eq!(registry.kind_of("plain_builtin"), ToolKind::Backend);
    assert_eq!(registry.kind_of("never_heard_of"), ToolKind::Backend);
    assert!(registry.implementation("PLAIN_BUILTIN").is_some());
    assert!(registry.implementation("a_frontend").is_none());

    let order: Vec<&str> = registry.list().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(order, ["impl_with_file", "impl_with_hint", "plain_builtin", "shadowed", "a_frontend"]);
}

#[test]
fn no_directory_means_builtins_only() {
    let registry = ToolRegistry::load(None, vec![fake("only", "")]);
    assert_eq!(registry.list().len(), 1);
    let missing = ToolRegistry::load(Some(std::path::Path::new("/no/such/agw/dir")), vec![fake("only", "")]);
    assert_eq!(missing.list().len(), 1);
    assert!(missing.problems().is_empty());
}

#[test]
fn bundled_files_load_cleanly_with_the_builtins() {
    let registry = ToolRegistry::from_sources(TOOL_FILES.iter().copied(), builtins(BuiltinsConfig::default()));
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());
    let names: Vec<&str> = registry.list().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "_bash_",
            "_plan_add_tasks_",
            "_plan_get_tasks_",
            "_plan_update_task_",
            "city_datetime",
            "mock_chat_messages",
            "mock_city_weather",
            "mock_image_generate",
            "mock_logistics_status",
            "mock_ops_runbook",
            "mock_sensitive_data_detector",
            "mock_todo_tasks",
            "mock_transport_schedule",
            "confirm_dialog",
            "launch_fireworks",
            "show_modal",
            "switch_theme",
        ]
    );
    for tool in registry.list() {
        assert!(!tool.description.is_empty(), "{}", tool.name);
        assert_eq!(tool.parameters["type"], "object", "{}", tool.name);
    }
    let hint = |name: &str| registry.get(name).unwrap().after_call_hint.clone();
    assert!(hint("mock_city_weather").contains("type=html, key=show_weather_card"));
    assert!(hint("mock_logistics_status").contains("key=show_logistics_status"));
    assert!(hint("mock_todo_tasks").contains("key=show_todo_card"));
    assert!(hint("mock_transport_schedule").contains("key=show_transport_card"));
    let dialog = registry.get("confirm_dialog").unwrap();
    assert_eq!((dialog.kind, dialog.viewport_key.as_deref()), (ToolKind::Frontend, Some("confirm_dialog")));
    assert_eq!(dialog.parameters["required"], json!(["question"]));
    assert_eq!(
        registry.get("switch_theme").unwrap().parameters["properties"]["theme"]["enum"],
        json!(["light", "dark"])
    );
    assert_eq!(registry.get("launch_fireworks").unwrap().parameters["properties"]["durationMs"]["maximum"], 30000);
    assert_eq!(registry.get("show_modal").unwrap().parameters["required"], json!(["title", "content"]));
}

#[tokio::test]
async fn reference_city_datetime_file_overrides_metadata_not_execution() {
    let file = r#"{"tools":[{"type":"function","name":"city_datetime","description":"city datetime from backend",
        "afterCallHint":"use the date","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}"#;
    let registry = ToolRegistry::from_sources([("city_datetime.backend", file)], builtins(BuiltinsConfig::default()));
    let def = registry.get("city_datetime").unwrap();
    assert_eq!(def.description, "city datetime from backend");
    assert_eq!(def.after_call_hint, "use the date");
    assert_eq!(def.parameters["required"], json!(["city"]));
    let ctx = ToolContext::default();
    let text = registry
        .execute("city_datetime", json!({"city":"Shanghai"}), &ctx, std::time::Duration::from_secs(5), 0)
        .await
        .into_text();
    let out: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(out["timezone"], "UTC+8");
}

#[tokio::test]
async fn unknown_implementation() {
    let registry = ToolRegistry::from_sources([("x.action", tools(&["x"]))], vec![]);
    let text = registry
        .execute("nope", json!({}), &ToolContext::default(), std::time::Duration::from_secs(1), 2)
        .await
        .into_text();
    assert_eq!(text, r#"{"tool":"nope","ok":false,"error":"Unknown tool: nope"}"#);
}

#[test]
fn client_tools_are_added_as_frontend_tools_without_shadowing_registered_ones() {
    let base = ToolRegistry::from_sources(Vec::<(String, String)>::new(), builtins(BuiltinsConfig::default()));
    let def = |name: &str| agw_tools::ToolDef {
        name: name.into(),
        description: "d".into(),
        after_call_hint: String::new(),
        parameters: serde_json::json!({"type": "object"}),
        kind: ToolKind::Backend,
        tool_api: None,
        viewport_key: None,
        citations: None,
        idempotent: false,
    };
    let (with, added) = base.with_client_tools(vec![def(" Pick_Color "), def("_bash_"), def("bad name!")]);
    assert_eq!(added, ["pick_color"]);
    assert_eq!(with.kind_of("pick_color"), ToolKind::Frontend, "always frontend, whatever the client said");
    assert_eq!(with.kind_of("_bash_"), ToolKind::Backend, "a registered tool is never replaced");
    assert!(with.get("bad name!").is_none());
    assert!(base.get("pick_color").is_none(), "the shared registry is untouched");
}

#[test]
fn a_definition_or_the_built_in_says_whether_a_call_may_run_twice() {
    let text = r#"{"tools":[
        {"type":"function","name":"a","idempotent":true},
        {"type":"function","name":"b"}
    ]}"#;
    let registry =
        agw_tools::ToolRegistry::from_sources([("a.frontend", text)], agw_tools::builtins(Default::default()));
    assert!(registry.is_idempotent("a") && !registry.is_idempotent("b"));
    assert!(registry.is_idempotent("mock_city_weather") && registry.is_idempotent("city_datetime"));
    assert!(!registry.is_idempotent("_bash_") && !registry.is_idempotent("mock_image_generate"));
}
