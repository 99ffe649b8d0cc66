//! `agent_file_create` (docs/contract/tools-skills-viewports.md §4.7): writes an agent definition into the agents
//! directory, where the catalog's watcher picks it up.
//!
//! Agent definitions are operator configuration, and the model is not the operator: a created
//! agent may only be given the tools and skills on the operator's allow-lists (by default the
//! shipped harmless tools, no skills; never `_bash_`, `_skill_run_script_` or `agent_file_create`
//! unless configured), and an existing or bundled agent — the calling agent itself included — is
//! never replaced unless the operator allows it. A refusal is a result the model can read, naming
//! what was refused (docs/security.md, "Agents cannot promote themselves").
//!
//! It must never write outside the agents directory: the key is restricted to `[A-Za-z0-9_-]`, and
//! the file is written to a temporary name and renamed into place, so an existing symlink named
//! `<key>.json` is replaced rather than followed. Unlike the reference, the written definition is
//! checked to be loadable (enum values, numbers, required prompts), so a created agent does not
//! silently fail to appear.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Number, Value, json};

use super::{args, meta};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

pub(crate) const NAME: &str = "agent_file_create";

/// The system prompt written for ONESHOT/REACT agents when the call gives none.
pub const DEFAULT_AGENT_SYSTEM_PROMPT: &str = "You are a general-purpose assistant. Give clear, actionable answers.";
const DEFAULT_DESCRIPTION: &str = "Agent created by demoAgentCreator";
const DEFAULT_PROVIDER_KEY: &str = "bailian";
const DEFAULT_MODEL: &str = "qwen3-max";

/// The tools a created agent may be given when the operator configured none: the shipped tools
/// that run no program, write nothing and reach nothing outside the gateway. Not `_bash_`,
/// `_skill_run_script_` or `agent_file_create`, nor any tool added later.
pub const DEFAULT_GRANTABLE_TOOLS: [&str; 14] = [
    "_plan_add_tasks_",
    "_plan_get_tasks_",
    "_plan_update_task_",
    "city_datetime",
    "confirm_dialog",
    "launch_fireworks",
    "mock_city_weather",
    "mock_logistics_status",
    "mock_ops_runbook",
    "mock_sensitive_data_detector",
    "mock_todo_tasks",
    "mock_transport_schedule",
    "show_modal",
    "switch_theme",
];

/// Answers whether an agent with this key is loaded (ASCII case ignored), so that a new file can
/// neither replace nor shadow it.
#[derive(Clone)]
pub struct AgentLookup(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl AgentLookup {
    /// Wraps `exists`, which gets the key as the model wrote it and must ignore ASCII case.
    pub fn new(exists: impl Fn(&str) -> bool + Send + Sync + 'static) -> AgentLookup {
        AgentLookup(Arc::new(exists))
    }

    fn exists(&self, key: &str) -> bool {
        (self.0)(key)
    }
}

impl std::fmt::Debug for AgentLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentLookup")
    }
}

/// Where `agent_file_create` writes, what it writes by default, and what it may grant.
#[derive(Debug, Clone)]
pub struct AgentFileCreateConfig {
    /// The agents directory (`agent.catalog.external-dir`); created if missing.
    pub agents_dir: PathBuf,
    /// `agent.tools.agent-file-create.default-system-prompt`.
    pub default_system_prompt: String,
    /// Tool names (any kind, lower-case) a created agent may list
    /// (`agw.tools.agent-file-create.allowed-tools`).
    pub allowed_tools: Vec<String>,
    /// Skill ids (lower-case) a created agent may list (`agw.tools.agent-file-create.allowed-skills`).
    pub allowed_skills: Vec<String>,
    /// Whether an existing or bundled agent may be replaced
    /// (`agw.tools.agent-file-create.allow-overwrite`).
    pub allow_overwrite: bool,
    /// Keys that count as existing even without a file: the bundled agents.
    pub protected_keys: Vec<String>,
    /// The loaded agents (a key may live in a file of another name).
    pub existing_agents: Option<AgentLookup>,
}

impl Default for AgentFileCreateConfig {
    fn default() -> Self {
        AgentFileCreateConfig {
            agents_dir: PathBuf::from("agents"),
            default_system_prompt: DEFAULT_AGENT_SYSTEM_PROMPT.to_owned(),
            allowed_tools: DEFAULT_GRANTABLE_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            allowed_skills: Vec::new(),
            allow_overwrite: false,
            protected_keys: Vec::new(),
            existing_agents: None,
        }
    }
}

/// The `agent_file_create` tool.
#[derive(Debug, Clone, Default)]
pub struct AgentFileCreate {
    config: AgentFileCreateConfig,
}

impl AgentFileCreate {
    /// The tool, writing and granting as `config` says.
    pub fn new(config: AgentFileCreateConfig) -> AgentFileCreate {
        AgentFileCreate { config }
    }

    /// Validates, builds and writes the agent file; returns the result object (ok or not).
    fn create(config: &AgentFileCreateConfig, arguments: &Value) -> Value {
        let agents_dir = std::path::absolute(&config.agents_dir).unwrap_or_else(|_| config.agents_dir.clone());
        let (key, definition) = match build_definition(arguments, &config.default_system_prompt) {
            Ok(built) => built,
            Err(message) => return failure(&agents_dir, message, None),
        };
        let refused = refused_grants(config, &definition);
        if !refused.is_empty() {
            return failure(&agents_dir, refused.message(config), Some(refused.to_json()));
        }
        if !config.allow_overwrite && exists(config, &agents_dir, &key) {
            let message = format!(
                "Agent already exists: {key}. agent_file_create never replaces an existing or bundled agent \
                 (operator setting agw.tools.agent-file-create.allow-overwrite). Choose another key."
            );
            return failure(&agents_dir, message, Some(json!({ "overwrite": key })));
        }
        let outcome =
            write_definition(&agents_dir, &key, &definition, config.allow_overwrite).map(|w| (key, definition, w));
        match outcome {
            Ok((key, definition, written)) => json!({
                "tool": NAME,
                "agentsDir": written.dir.display().to_string(),
                "ok": true,
                "created": !written.existed,
                "updated": written.existed,
                "agentId": key,
                "file": written.file.display().to_string(),
                "config": definition,
            }),
            Err(message) => failure(&agents_dir, message, None),
        }
    }
}

/// The failure object of §4.7, plus what was refused when a rule of the operator said no.
fn failure(agents_dir: &Path, message: String, refused: Option<Value>) -> Value {
    let mut out = json!({
        "tool": NAME,
        "agentsDir": agents_dir.display().to_string(),
        "ok": false,
        "error": message,
    });
    if let Some(refused) = refused {
        out["refused"] = refused;
    }
    out
}

/// Tools and skills a definition lists that the operator does not let this tool grant.
#[derive(Debug, Default, PartialEq, Eq)]
struct Refused {
    tools: Vec<String>,
    skills: Vec<String>,
}

impl Refused {
    fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.skills.is_empty()
    }

    fn to_json(&self) -> Value {
        json!({ "tools": self.tools, "skills": self.skills })
    }

    fn message(&self, config: &AgentFileCreateConfig) -> String {
        let list = |items: &[String]| if items.is_empty() { "none".to_owned() } else { items.join(", ") };
        let mut what = Vec::new();
        if !self.tools.is_empty() {
            what.push(format!("tools {}", self.tools.join(", ")));
        }
        if !self.skills.is_empty() {
            what.push(format!("skills {}", self.skills.join(", ")));
        }
        format!(
            "Not allowed to grant {}. agent_file_create may only give an agent the tools and skills the operator \
             allows (agw.tools.agent-file-create.allowed-tools / allowed-skills). Allowed tools: {}. Allowed skills: {}. \
             Create the agent without them, or ask the operator.",
            what.join("; "),
            list(&config.allowed_tools),
            list(&config.allowed_skills),
        )
    }
}

/// Every tool and skill the definition would grant, wherever it is listed: the top-level and
/// every stage `toolConfig` (backends, frontends, actions), `skills` and `skillConfig.skills` —
/// searched through the whole object, so a grant cannot hide in a block this builder does not
/// write today.
fn refused_grants(config: &AgentFileCreateConfig, definition: &Value) -> Refused {
    fn walk(value: &Value, tools: &mut Vec<String>, skills: &mut Vec<String>) {
        let Some(object) = value.as_object() else { return };
        for (key, child) in object {
            match key.as_str() {
                "toolConfig" => {
                    for list in ["backends", "frontends", "actions"] {
                        tools.extend(name_list(child.get(list), true));
                    }
                }
                "skills" => skills.extend(name_list(Some(child), true)),
                _ => walk(child, tools, skills),
            }
        }
    }
    let (mut tools, mut skills) = (Vec::new(), Vec::new());
    walk(definition, &mut tools, &mut skills);
    let allowed = |list: &[String], name: &String| list.iter().any(|a| a.trim().eq_ignore_ascii_case(name));
    let mut refused = Refused::default();
    for tool in tools {
        if !allowed(&config.allowed_tools, &tool) && !refused.tools.contains(&tool) {
            refused.tools.push(tool);
        }
    }
    for skill in skills {
        if !allowed(&config.allowed_skills, &skill) && !refused.skills.contains(&skill) {
            refused.skills.push(skill);
        }
    }
    refused
}

/// Whether `key` names an agent already: a file of that name (ASCII case ignored: on some file
/// systems it is the same file), a loaded agent (its file may have another name), or a bundled one.
fn exists(config: &AgentFileCreateConfig, agents_dir: &Path, key: &str) -> bool {
    let file_name = format!("{key}.json");
    let same_file = std::fs::read_dir(agents_dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|entry| entry.file_name().to_str().is_some_and(|name| name.eq_ignore_ascii_case(&file_name)))
    });
    same_file
        || config.protected_keys.iter().any(|k| k.eq_ignore_ascii_case(key))
        || config.existing_agents.as_ref().is_some_and(|agents| agents.exists(key))
}

impl Tool for AgentFileCreate {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        meta::description(NAME)
    }

    fn parameters(&self) -> Value {
        meta::parameters(NAME)
    }

    fn after_call_hint(&self) -> &str {
        meta::after_call_hint(NAME)
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let config = self.config.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || ToolOutput::Json(Self::create(&config, &args)))
                .await
                .map_err(|e| ToolError::Failed(format!("agent file creation did not finish: {e}")))
        })
    }
}

/// The arguments merged over the entries of an optional `config` object (top level wins).
fn merged_arguments(arguments: &Value) -> Value {
    let mut merged = arguments.get("config").and_then(Value::as_object).cloned().unwrap_or_default();
    if let Some(top) = arguments.as_object() {
        merged.extend(top.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Value::Object(merged)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Oneshot,
    React,
    PlanExecute,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Oneshot => "ONESHOT",
            Mode::React => "REACT",
            Mode::PlanExecute => "PLAN_EXECUTE",
        }
    }
}

/// The key and the definition object, in the key order of §4.7.
fn build_definition(arguments: &Value, default_prompt: &str) -> Result<(String, Value), String> {
    let a = merged_arguments(arguments);
    let key = args::first_non_blank(&a, &["key", "agentId", "id", "name"]).ok_or("Missing argument: key")?;
    let key_ok =
        (1..=64).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !key_ok {
        return Err("Invalid agentId/key. Use [A-Za-z0-9_-], max 64 chars.".to_owned());
    }
    let mode = match args::non_blank(&a, "mode") {
        None => Mode::Oneshot,
        Some(raw) => match raw.to_uppercase().replace('-', "_").as_str() {
            "ONESHOT" => Mode::Oneshot,
            "REACT" => Mode::React,
            "PLAN_EXECUTE" => Mode::PlanExecute,
            _ => return Err("Invalid mode. Use one of ONESHOT/REACT/PLAN_EXECUTE".to_owned()),
        },
    };

    let mut out = Map::new();
    out.insert("key".into(), json!(key));
    out.insert("name".into(), json!(args::non_blank(&a, "name").unwrap_or_else(|| key.clone())));
    if let Some(icon) = args::non_blank(&a, "icon") {
        out.insert("icon".into(), json!(icon));
    }
    out.insert("description".into(), json!(args::non_blank(&a, "description").unwrap_or(DEFAULT_DESCRIPTION.into())));
    out.insert("mode".into(), json!(mode.as_str()));
    out.insert("modelConfig".into(), model_config(&a)?);
    if let Some(tool_config) = tool_config(&a) {
        out.insert("toolConfig".into(), tool_config);
    }
    let skills = a.get("skillConfig").and_then(|s| s.get("skills")).or_else(|| a.get("skills"));
    let skills = name_list(skills, false);
    if !skills.is_empty() {
        out.insert("skillConfig".into(), json!({ "skills": skills }));
    }
    if let Some(choice) = args::non_blank(&a, "toolChoice") {
        let choice = choice.to_uppercase();
        if !["NONE", "AUTO", "REQUIRED"].contains(&choice.as_str()) {
            return Err("Invalid toolChoice. Use one of NONE/AUTO/REQUIRED".to_owned());
        }
        out.insert("toolChoice".into(), json!(choice));
    }
    if let Some(budget) = budget(a.get("budget")) {
        out.insert("budget".into(), budget);
    }
    let prompt = |keys: &[&str]| args::first_non_blank(&a, keys);
    let max_steps = positive_integer(a.get("maxSteps"));
    match mode {
        Mode::Oneshot => {
            let system_prompt = prompt(&["systemPrompt", "plainSystemPrompt"]).unwrap_or(default_prompt.to_owned());
            out.insert("plain".into(), json!({ "systemPrompt": system_prompt }));
        }
        Mode::React => {
            let system_prompt = prompt(&["systemPrompt", "reactSystemPrompt"]).unwrap_or(default_prompt.to_owned());
            let mut react = Map::new();
            react.insert("systemPrompt".into(), json!(system_prompt));
            if let Some(steps) = max_steps {
                react.insert("maxSteps".into(), json!(steps));
            }
            out.insert("react".into(), Value::Object(react));
        }
        Mode::PlanExecute => {
            let (Some(plan), Some(execute)) = (prompt(&["planSystemPrompt"]), prompt(&["executeSystemPrompt"])) else {
                return Err("Missing required mode prompt fields".to_owned());
            };
            let mut block = Map::new();
            block.insert("plan".into(), json!({ "systemPrompt": plan }));
            block.insert("execute".into(), json!({ "systemPrompt": execute }));
            if let Some(summary) = prompt(&["summarySystemPrompt"]) {
                block.insert("summary".into(), json!({ "systemPrompt": summary }));
            }
            if let Some(steps) = max_steps {
                block.insert("maxSteps".into(), json!(steps));
            }
            out.insert("planExecute".into(), Value::Object(block));
        }
    }
    Ok((key, Value::Object(out)))
}

/// From a `modelConfig` object when given, else from the flat arguments.
fn model_config(a: &Value) -> Result<Value, String> {
    let nested = a.get("modelConfig").filter(|m| m.is_object());
    let source = nested.unwrap_or(a);
    let (enabled, effort) = match nested {
        Some(m) => {
            (m.get("reasoning").and_then(|r| r.get("enabled")), m.get("reasoning").and_then(|r| r.get("effort")))
        }
        None => (a.get("reasoningEnabled"), a.get("reasoningEffort")),
    };
    let mut out = Map::new();
    let provider = args::non_blank(source, "providerKey").map_or(DEFAULT_PROVIDER_KEY.to_owned(), |p| p.to_lowercase());
    out.insert("providerKey".into(), json!(provider));
    out.insert("model".into(), json!(args::non_blank(source, "model").unwrap_or(DEFAULT_MODEL.into())));
    let mut reasoning = Map::new();
    if let Some(enabled) = enabled.filter(|v| !v.is_null()) {
        let enabled = match enabled {
            Value::Bool(b) => *b,
            Value::String(s) if s.trim().eq_ignore_ascii_case("true") => true,
            Value::String(s) if s.trim().eq_ignore_ascii_case("false") => false,
            _ => return Err("Invalid reasoning enabled flag. Use true or false".to_owned()),
        };
        reasoning.insert("enabled".into(), json!(enabled));
    }
    if let Some(effort) = effort.and_then(|e| e.as_str()).map(|e| e.trim().to_uppercase()).filter(|e| !e.is_empty()) {
        if !["LOW", "MEDIUM", "HIGH"].contains(&effort.as_str()) {
            return Err("Invalid reasoning effort. Use one of LOW/MEDIUM/HIGH".to_owned());
        }
        reasoning.insert("effort".into(), json!(effort));
    }
    if !reasoning.is_empty() {
        out.insert("reasoning".into(), Value::Object(reasoning));
    }
    for (name, integer) in [("temperature", false), ("top_p", false), ("max_tokens", true)] {
        if let Some(value) = source.get(name).filter(|v| !v.is_null()) {
            let number = number_of(value, integer).ok_or_else(|| format!("Invalid {name}: expected a number"))?;
            out.insert(name.into(), Value::Number(number));
        }
    }
    Ok(Value::Object(out))
}

/// A JSON number, or a string holding one; integers only when asked.
fn number_of(value: &Value, integer: bool) -> Option<Number> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.trim().to_owned(),
        _ => return None,
    };
    if integer {
        text.parse::<i64>().ok().map(Number::from)
    } else {
        text.parse::<f64>().ok().and_then(Number::from_f64)
    }
}

fn positive_integer(value: Option<&Value>) -> Option<i64> {
    value.and_then(|v| number_of(v, true)).and_then(|n| n.as_i64()).filter(|n| *n > 0)
}

/// From a `toolConfig` object (all three lists written) or the flat `tools` / `frontends` /
/// `actions` (written only when one is non-empty). Names trimmed and lower-cased.
fn tool_config(a: &Value) -> Option<Value> {
    let lists = |source: &Value, keys: [&str; 3]| keys.map(|key| name_list(source.get(key), true));
    match a.get("toolConfig").filter(|t| t.is_object()) {
        Some(object) => {
            let [backends, frontends, actions] = lists(object, ["backends", "frontends", "actions"]);
            Some(json!({"backends": backends, "frontends": frontends, "actions": actions}))
        }
        None => {
            let [backends, frontends, actions] = lists(a, ["tools", "frontends", "actions"]);
            let any = !(backends.is_empty() && frontends.is_empty() && actions.is_empty());
            any.then(|| json!({"backends": backends, "frontends": frontends, "actions": actions}))
        }
    }
}

/// An array of names (or one comma-separated string), trimmed, blanks and repeats dropped.
fn name_list(value: Option<&Value>, lower: bool) -> Vec<String> {
    let raw: Vec<String> = match value {
        Some(Value::Array(items)) => items.iter().filter_map(|item| item.as_str().map(str::to_owned)).collect(),
        Some(Value::String(s)) => s.split(',').map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let mut names = Vec::new();
    for name in raw {
        let name = if lower { name.trim().to_lowercase() } else { name.trim().to_owned() };
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Only the v2 keys with positive numbers; `None` when nothing remains.
fn budget(value: Option<&Value>) -> Option<Value> {
    let source = value?.as_object()?;
    let mut out = Map::new();
    if let Some(ms) = positive_integer(source.get("runTimeoutMs")) {
        out.insert("runTimeoutMs".into(), json!(ms));
    }
    for scope in ["model", "tool"] {
        let Some(scope_source) = source.get(scope).filter(|s| s.is_object()) else { continue };
        let mut scope_out = Map::new();
        for key in ["maxCalls", "timeoutMs", "retryCount"] {
            if let Some(n) = positive_integer(scope_source.get(key)) {
                scope_out.insert(key.into(), json!(n));
            }
        }
        if !scope_out.is_empty() {
            out.insert(scope.into(), Value::Object(scope_out));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

struct Written {
    dir: PathBuf,
    file: PathBuf,
    existed: bool,
}

/// Writes `<key>.json` through a temporary sibling: renamed over the target when replacing is
/// allowed, else hard-linked into place, which fails atomically when the name exists meanwhile.
fn write_definition(agents_dir: &Path, key: &str, definition: &Value, replace: bool) -> Result<Written, String> {
    std::fs::create_dir_all(agents_dir).map_err(|e| format!("Write failed: {e}"))?;
    let dir = agents_dir.canonicalize().map_err(|e| format!("Write failed: {e}"))?;
    let file = dir.join(format!("{key}.json"));
    if file.parent() != Some(dir.as_path()) {
        return Err("Resolved path escapes agents directory".to_owned());
    }
    let existed = file.symlink_metadata().is_ok();
    let text = pretty_json(definition).map_err(|e| format!("Write failed: {e}"))?;
    // A temporary sibling renamed over the target: readers never see half a file, and a symlink
    // at the target is replaced, not followed.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let temp = dir.join(format!(".{key}.json.{}.{}.tmp", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| if replace { std::fs::rename(&temp, &file) } else { std::fs::hard_link(&temp, &file) });
    if !replace || result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(format!(
            "Agent already exists: {key}. agent_file_create never replaces an existing agent \
             (operator setting agw.tools.agent-file-create.allow-overwrite). Choose another key."
        )),
        Err(e) => Err(format!("Write failed: {e}")),
        Ok(()) => Ok(Written { dir, file, existed }),
    }
}

/// Two-space indentation with `"key" : value`, as the reference writes it, plus a final newline.
fn pretty_json(value: &Value) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, SpacedColonFormatter::default());
    value.serialize(&mut serializer)?;
    out.push(b'\n');
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// serde_json's pretty formatter with a space before the colon.
#[derive(Default)]
struct SpacedColonFormatter<'a>(serde_json::ser::PrettyFormatter<'a>);

impl serde_json::ser::Formatter for SpacedColonFormatter<'_> {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b" : ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(arguments: Value) -> Result<Value, String> {
        build_definition(&arguments, "DEFAULT").map(|(_, d)| d)
    }

    #[test]
    fn reference_suite_oneshot() {
        let def =
            build(json!({"agentId":"qa_bot","description":"QA 助手","providerKey":"openai","model":"gpt-3.5-turbo",
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
        assert_eq!(def["modelConfig"], json!({"providerKey":"bailian","model":"qwen3-max"}));
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
        let def = build(json!({"key":"k","config":{"key":"ignored","mode":"react","maxSteps":"7","icon":"emoji:🤖"}}))
            .unwrap();
        assert_eq!(def["key"], "k");
        assert_eq!(def["mode"], "REACT");
        assert_eq!(def["react"], json!({"systemPrompt":"DEFAULT","maxSteps":7}));
        assert_eq!(def["icon"], "emoji:🤖");
    }

    #[test]
    fn plan_execute_needs_both_prompts() {
        assert_eq!(
            build(json!({"key":"p","mode":"plan-execute","planSystemPrompt":"plan"})).unwrap_err(),
            "Missing required mode prompt fields"
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
        assert!(build(json!({"key":"k","mode":"FAST"})).unwrap_err().starts_with("Invalid mode"));
        assert!(build(json!({"key":"k","toolChoice":"sometimes"})).unwrap_err().starts_with("Invalid toolChoice"));
        assert!(build(json!({"key":"k","reasoningEffort":"max"})).unwrap_err().starts_with("Invalid reasoning effort"));
        assert!(build(json!({"key":"k","temperature":"warm"})).unwrap_err().starts_with("Invalid temperature"));
        assert!(build(json!({"key":"k","max_tokens":1.5})).unwrap_err().starts_with("Invalid max_tokens"));
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
            json!({"providerKey":"bailian","model":"qwen3-max","reasoning":{"enabled":true,"effort":"LOW"},"temperature":0.5,"max_tokens":1000})
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
    fn pretty_printing() {
        let text = pretty_json(&json!({"a":1,"b":{"c":[1,2]}})).unwrap();
        assert_eq!(text, "{\n  \"a\" : 1,\n  \"b\" : {\n    \"c\" : [\n      1,\n      2\n    ]\n  }\n}\n");
    }
}
