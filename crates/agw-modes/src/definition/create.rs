//! `agent_file_create` (docs/contract/tools-skills-viewports.md §4.7): writes an agent definition into the agents
//! directory, where the catalog's watcher picks it up. It lives next to the agent file format
//! because it writes that format: the arguments become a typed [`AgentFile`], and the text
//! written is first read back by [`AgentDefinition::from_json`] — the parser that loads agent
//! files — so a created agent is loadable, and no second set of rules judges it.
//!
//! Agent definitions are operator configuration, and the model is not the operator: a created
//! agent may only be given the tools and skills on the operator's allow-lists (by default the
//! shipped harmless tools, no skills; never `_bash_`, `_skill_run_script_` or `agent_file_create`
//! unless configured), and an existing or bundled agent — the calling agent itself included — is
//! never replaced unless the operator allows it. The grants checked are those of the definition
//! the loader reads from the text about to be written, so none can hide in a block. A refusal is
//! a result the model can read, naming what was refused (docs/security.md, "Agents cannot
//! promote themselves").
//!
//! It must never write outside the agents directory: the key is restricted to `[A-Za-z0-9_-]`, and
//! the file is written to a temporary name and renamed into place, so an existing symlink named
//! `<key>.json` is replaced rather than followed.
//!
//! No provider or model is chosen here: a call that names none writes none, and the loader's
//! defaults apply to the created agent as to any other file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use agw_llm::ReasoningEffort;
use agw_tools::builtin::args;
use agw_tools::{Tool, ToolContext, ToolDef, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::agent::AgentDefinition;
use super::blocks::REASONING_EFFORT_NAMES;
use super::error::DefinitionError;
use super::file::{
    AgentFile, BudgetFile, BudgetScopeFile, ModelConfigFile, PlanExecuteFile, ReactFile, ReasoningFile,
    SkillConfigFile, StageFile, ToolConfigFile,
};
use super::model::{AgentMode, PLAN_ADD_TASKS_TOOL, PLAN_GET_TASKS_TOOL, PLAN_UPDATE_TASK_TOOL, TOOL_CHOICE_NAMES};
use super::raw::named;

const NAME: &str = "agent_file_create";

/// The system prompt written for ONESHOT/REACT agents when the call gives none.
pub const DEFAULT_AGENT_SYSTEM_PROMPT: &str = "You are a general-purpose assistant. Give clear, actionable answers.";
const DEFAULT_DESCRIPTION: &str = "Agent created by demoAgentCreator";

/// The tools a created agent may be given when the operator configured none: the shipped tools
/// that run no program, write nothing and reach nothing outside the gateway. Not `_bash_`,
/// `_skill_run_script_` or `agent_file_create`, nor any tool added later.
pub const DEFAULT_GRANTABLE_TOOLS: [&str; 14] = [
    PLAN_ADD_TASKS_TOOL,
    PLAN_GET_TASKS_TOOL,
    PLAN_UPDATE_TASK_TOOL,
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

/// Why no file was written. Each message tells the model what to change; the result object
/// carries it as `error` (plus `refused` where an operator rule said no).
#[derive(Debug, thiserror::Error)]
enum CreateError {
    #[error("Missing argument: key")]
    MissingKey,
    #[error("Invalid agentId/key. Use [A-Za-z0-9_-], max 64 chars.")]
    InvalidKey,
    /// An argument that cannot become the number its field holds.
    #[error("Invalid {0}: expected a number")]
    NotANumber(&'static str),
    #[error("Invalid reasoning enabled flag. Use true or false")]
    NotAFlag,
    /// What the agent loader says about the definition (or would say about the value given).
    #[error("Invalid agent definition: {0}")]
    Invalid(#[from] DefinitionError),
    #[error("{}", not_allowed(.refused, .allowed_tools, .allowed_skills))]
    NotAllowed { refused: Refused, allowed_tools: Vec<String>, allowed_skills: Vec<String> },
    #[error(
        "Agent already exists: {0}. agent_file_create never replaces an existing or bundled agent \
         (operator setting agw.tools.agent-file-create.allow-overwrite). Choose another key."
    )]
    Exists(String),
    /// The file appeared between the check and the write.
    #[error(
        "Agent already exists: {0}. agent_file_create never replaces an existing agent \
         (operator setting agw.tools.agent-file-create.allow-overwrite). Choose another key."
    )]
    AppearedMeanwhile(String),
    #[error("Resolved path escapes agents directory")]
    Escapes,
    #[error("Write failed: {0}")]
    Write(#[from] std::io::Error),
}

impl CreateError {
    /// The result's `refused` member: what an operator rule did not allow.
    fn refused(&self) -> Option<Value> {
        match self {
            CreateError::NotAllowed { refused, .. } => {
                Some(json!({ "tools": refused.tools, "skills": refused.skills }))
            }
            CreateError::Exists(key) => Some(json!({ "overwrite": key })),
            _ => None,
        }
    }
}

fn not_allowed(refused: &Refused, allowed_tools: &[String], allowed_skills: &[String]) -> String {
    let list = |items: &[String]| if items.is_empty() { "none".to_owned() } else { items.join(", ") };
    let mut what = Vec::new();
    if !refused.tools.is_empty() {
        what.push(format!("tools {}", refused.tools.join(", ")));
    }
    if !refused.skills.is_empty() {
        what.push(format!("skills {}", refused.skills.join(", ")));
    }
    format!(
        "Not allowed to grant {}. agent_file_create may only give an agent the tools and skills the operator \
         allows (agw.tools.agent-file-create.allowed-tools / allowed-skills). Allowed tools: {}. Allowed skills: {}. \
         Create the agent without them, or ask the operator.",
        what.join("; "),
        list(allowed_tools),
        list(allowed_skills),
    )
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

    /// Builds, checks and writes the agent file; returns the result object (ok or not).
    fn create(config: &AgentFileCreateConfig, arguments: &Value) -> Value {
        let agents_dir = std::path::absolute(&config.agents_dir).unwrap_or_else(|_| config.agents_dir.clone());
        match Self::try_create(config, &agents_dir, arguments) {
            Ok((file, written)) => json!({
                "tool": NAME,
                "agentsDir": written.dir.display().to_string(),
                "ok": true,
                "created": !written.existed,
                "updated": written.existed,
                "agentId": file.key,
                "file": written.file.display().to_string(),
                "config": file.to_value(),
            }),
            Err(error) => {
                let mut out = json!({
                    "tool": NAME,
                    "agentsDir": agents_dir.display().to_string(),
                    "ok": false,
                    "error": error.to_string(),
                });
                if let Some(refused) = error.refused() {
                    out["refused"] = refused;
                }
                out
            }
        }
    }

    fn try_create(
        config: &AgentFileCreateConfig,
        agents_dir: &Path,
        arguments: &Value,
    ) -> Result<(AgentFile, Written), CreateError> {
        let file = agent_file(arguments, &config.default_system_prompt)?;
        let (text, definition) = file.load()?;
        let refused = Refused::of(config, &definition);
        if !refused.is_empty() {
            return Err(CreateError::NotAllowed {
                refused,
                allowed_tools: config.allowed_tools.clone(),
                allowed_skills: config.allowed_skills.clone(),
            });
        }
        if !config.allow_overwrite && exists(config, agents_dir, &file.key) {
            return Err(CreateError::Exists(file.key));
        }
        let written = write_file(agents_dir, &file.key, &text, config.allow_overwrite)?;
        Ok((file, written))
    }
}

/// Tools and skills a definition grants that the operator does not let this tool grant.
#[derive(Debug, Default, PartialEq, Eq)]
struct Refused {
    tools: Vec<String>,
    skills: Vec<String>,
}

impl Refused {
    /// Every tool and skill of `definition` as the loader reads it — the top-level and every
    /// stage `toolConfig` (backends, frontends, actions), `skills` and `skillConfig.skills` — not
    /// on the allow-lists.
    fn of(config: &AgentFileCreateConfig, definition: &AgentDefinition) -> Refused {
        let allowed = |list: &[String], name: &String| list.iter().any(|a| a.trim().eq_ignore_ascii_case(name));
        Refused {
            tools: definition.declared_tools.iter().filter(|t| !allowed(&config.allowed_tools, t)).cloned().collect(),
            skills: definition.skills.iter().filter(|s| !allowed(&config.allowed_skills, s)).cloned().collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.skills.is_empty()
    }
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

/// The tool's metadata, from its bundled definition file (the one place it is written).
static DEFINITION: LazyLock<Option<ToolDef>> = LazyLock::new(|| {
    crate::bundled::TOOL_FILES
        .iter()
        .flat_map(|(name, text)| agw_tools::definition::definitions_in(name, text))
        .find(|def| def.name == NAME)
});

impl Tool for AgentFileCreate {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DEFINITION.as_ref().map_or("", |def| def.description.as_str())
    }

    fn parameters(&self) -> Value {
        DEFINITION.as_ref().map_or_else(agw_tools::default_parameters, |def| def.parameters.clone())
    }

    fn after_call_hint(&self) -> &str {
        DEFINITION.as_ref().map_or("", |def| def.after_call_hint.as_str())
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

/// The agent file the arguments describe (§4.7). Models write loosely — any case for names,
/// numbers as strings, flat or nested blocks — so the arguments are read leniently into the
/// file's types; whether the result is a valid agent is the loader's call ([`AgentFile::load`]).
fn agent_file(arguments: &Value, default_prompt: &str) -> Result<AgentFile, CreateError> {
    let a = merged_arguments(arguments);
    let key = args::first_non_blank(&a, &["key", "agentId", "id", "name"]).ok_or(CreateError::MissingKey)?;
    let key_ok =
        (1..=64).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !key_ok {
        return Err(CreateError::InvalidKey);
    }
    let mode = match args::non_blank(&a, "mode") {
        None => AgentMode::Oneshot,
        Some(raw) => raw.parse().map_err(|()| DefinitionError::UnknownMode(raw))?,
    };
    let tool_choice = args::non_blank(&a, "toolChoice")
        .map(|raw| {
            named(&raw.to_uppercase()).ok_or_else(|| DefinitionError::InvalidEnum {
                field: "toolChoice".to_owned(),
                value: raw,
                expected: TOOL_CHOICE_NAMES,
            })
        })
        .transpose()?;
    let skills = name_list(a.get("skillConfig").and_then(|s| s.get("skills")).or_else(|| a.get("skills")), false);
    let prompt = |keys: &[&str]| args::first_non_blank(&a, keys);
    let max_steps = positive_integer(a.get("maxSteps"));
    let mut file = AgentFile {
        name: args::non_blank(&a, "name").unwrap_or_else(|| key.clone()),
        key,
        icon: args::non_blank(&a, "icon"),
        description: args::non_blank(&a, "description").unwrap_or_else(|| DEFAULT_DESCRIPTION.to_owned()),
        mode,
        model_config: model_config(&a)?,
        tool_config: tool_config(&a),
        skill_config: (!skills.is_empty()).then_some(SkillConfigFile { skills }),
        tool_choice,
        budget: budget(a.get("budget")),
        plain: None,
        react: None,
        plan_execute: None,
    };
    match mode {
        AgentMode::Oneshot => {
            let system_prompt =
                prompt(&["systemPrompt", "plainSystemPrompt"]).unwrap_or_else(|| default_prompt.to_owned());
            file.plain = Some(StageFile { system_prompt });
        }
        AgentMode::React => {
            let system_prompt =
                prompt(&["systemPrompt", "reactSystemPrompt"]).unwrap_or_else(|| default_prompt.to_owned());
            file.react = Some(ReactFile { system_prompt, max_steps });
        }
        AgentMode::PlanExecute => {
            // Missing prompts are written blank: the loader names what PLAN_EXECUTE requires.
            let stage = |keys: &[&str]| StageFile { system_prompt: prompt(keys).unwrap_or_default() };
            file.plan_execute = Some(PlanExecuteFile {
                plan: stage(&["planSystemPrompt"]),
                execute: stage(&["executeSystemPrompt"]),
                summary: prompt(&["summarySystemPrompt"]).map(|system_prompt| StageFile { system_prompt }),
                max_steps,
            });
        }
    }
    Ok(file)
}

/// From a `modelConfig` object when given, else from the flat arguments. Provider and model are
/// written only when named.
fn model_config(a: &Value) -> Result<ModelConfigFile, CreateError> {
    let nested = a.get("modelConfig").filter(|m| m.is_object());
    let source = nested.unwrap_or(a);
    let (enabled, effort) = match nested {
        Some(m) => {
            (m.get("reasoning").and_then(|r| r.get("enabled")), m.get("reasoning").and_then(|r| r.get("effort")))
        }
        None => (a.get("reasoningEnabled"), a.get("reasoningEffort")),
    };
    let enabled = match enabled.filter(|v| !v.is_null()) {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        Some(_) => return Err(CreateError::NotAFlag),
    };
    let effort = effort
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|raw| {
            named::<ReasoningEffort>(&raw.to_uppercase()).ok_or_else(|| DefinitionError::InvalidEnum {
                field: "modelConfig.reasoning.effort".to_owned(),
                value: raw.to_owned(),
                expected: REASONING_EFFORT_NAMES,
            })
        })
        .transpose()?;
    let reasoning = (enabled.is_some() || effort.is_some()).then_some(ReasoningFile { enabled, effort });
    let number = |name: &'static str| -> Result<Option<f64>, CreateError> {
        match source.get(name).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(value) => number_of(value).map(Some).ok_or(CreateError::NotANumber(name)),
        }
    };
    let max_tokens = match source.get("max_tokens").filter(|v| !v.is_null()) {
        None => None,
        Some(value) => Some(integer_of(value).ok_or(CreateError::NotANumber("max_tokens"))?),
    };
    Ok(ModelConfigFile {
        provider_key: args::non_blank(source, "providerKey").map(|p| p.to_lowercase()),
        model: args::non_blank(source, "model"),
        reasoning,
        temperature: number("temperature")?,
        top_p: number("top_p")?,
        max_tokens,
    })
}

/// A JSON number, or a string holding one, that a file can hold (finite).
fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|n| n.is_finite())
}

/// A JSON integer, or a string holding one.
fn integer_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.to_string().parse().ok(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn positive_integer(value: Option<&Value>) -> Option<i64> {
    value.and_then(integer_of).filter(|n| *n > 0)
}

/// From a `toolConfig` object (all three lists written) or the flat `tools` / `frontends` /
/// `actions` (written only when one is non-empty). Names trimmed and lower-cased.
fn tool_config(a: &Value) -> Option<ToolConfigFile> {
    let lists = |source: &Value, [backends, frontends, actions]: [&str; 3]| ToolConfigFile {
        backends: name_list(source.get(backends), true),
        frontends: name_list(source.get(frontends), true),
        actions: name_list(source.get(actions), true),
    };
    match a.get("toolConfig").filter(|t| t.is_object()) {
        Some(object) => Some(lists(object, ["backends", "frontends", "actions"])),
        None => Some(lists(a, ["tools", "frontends", "actions"]))
            .filter(|t| !(t.backends.is_empty() && t.frontends.is_empty() && t.actions.is_empty())),
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
fn budget(value: Option<&Value>) -> Option<BudgetFile> {
    let source = value?.as_object()?;
    let scope = |name: &str| {
        let scope_source = source.get(name).filter(|s| s.is_object())?;
        let scope = BudgetScopeFile {
            max_calls: positive_integer(scope_source.get("maxCalls")),
            timeout_ms: positive_integer(scope_source.get("timeoutMs")),
            retry_count: positive_integer(scope_source.get("retryCount")),
        };
        (scope != BudgetScopeFile::default()).then_some(scope)
    };
    let budget = BudgetFile {
        run_timeout_ms: positive_integer(source.get("runTimeoutMs")),
        model: scope("model"),
        tool: scope("tool"),
    };
    (budget != BudgetFile::default()).then_some(budget)
}

struct Written {
    dir: PathBuf,
    file: PathBuf,
    existed: bool,
}

/// Writes `<key>.json` through a temporary sibling: renamed over the target when replacing is
/// allowed, else hard-linked into place, which fails atomically when the name exists meanwhile.
fn write_file(agents_dir: &Path, key: &str, text: &str, replace: bool) -> Result<Written, CreateError> {
    std::fs::create_dir_all(agents_dir)?;
    let dir = agents_dir.canonicalize()?;
    let file = dir.join(format!("{key}.json"));
    if file.parent() != Some(dir.as_path()) {
        return Err(CreateError::Escapes);
    }
    let existed = file.symlink_metadata().is_ok();
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
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(CreateError::AppearedMeanwhile(key.to_owned())),
        Err(e) => Err(CreateError::Write(e)),
        Ok(()) => Ok(Written { dir, file, existed }),
    }
}

#[cfg(test)]
mod tests;
