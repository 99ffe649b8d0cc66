//! One agent file → [`AgentDefinition`] (docs/contract/agent-definitions.md §1–§8).

use super::agent::AgentDefinition;
use super::blocks::{StageBlocks, model_config, tool_config};
use super::budget::{self, Budget};
use super::error::DefinitionError;
use super::model::{AgentMode, StageKind, StageTools, TOOL_CHOICE_NAMES, ToolChoicePolicy};
use super::preprocess;
use super::prompts;
use super::raw::{Obj, named, non_blank, normalize_names};
use super::rejected;

impl AgentDefinition {
    /// Parses one agent file. `file_name` (e.g. `ops_daily.json`) supplies the key when the file
    /// has none and appears in the default description; it is also recorded as `source_file`.
    ///
    /// # Errors
    /// The first rule the file breaks; the message names the offending field.
    pub fn from_json(file_name: &str, text: &str) -> Result<AgentDefinition, DefinitionError> {
        let map = preprocess::parse_object(text)?;
        build(&Obj::root(&map), file_name)
    }
}

fn build(root: &Obj<'_>, file_name: &str) -> Result<AgentDefinition, DefinitionError> {
    rejected::check(root)?;
    let custom_budget = root.obj("budget")?.map(|b| budget::parse(&b)).transpose()?;
    let key = agent_key(root, file_name)?;
    let mode = agent_mode(root)?;
    let model_config = root.obj("modelConfig")?.map(|m| model_config(&m)).transpose()?;
    let tool_config = root.obj("toolConfig")?.map(|t| tool_config(&t)).transpose()?;
    let (approvals, sub_agents, handoffs) = match root.obj("toolConfig")? {
        Some(tools) => {
            let sub_agents =
                distinct(tools.str_list("subAgents")?.into_iter().map(str::trim).filter(|k| !k.is_empty()));
            let handoffs = super::handoffs::parse(&tools, &key)?;
            (super::Approvals::parse(tools.obj("approvals")?)?, sub_agents, handoffs)
        }
        None => (super::Approvals::default(), Vec::new(), Vec::new()),
    };
    let blocks = StageBlocks::parse(root)?;
    if model_config.is_none() && blocks.all().all(|stage| stage.model_config.is_none()) {
        return Err(DefinitionError::NoModelConfig);
    }
    let declared_tools = normalize_names(
        tool_config
            .iter()
            .chain(blocks.all().filter_map(|stage| match &stage.tools {
                StageTools::Set(tools) => Some(tools),
                _ => None,
            }))
            .flat_map(|tools| tools.names()),
    );
    let skill_config = root.obj("skillConfig")?;
    let skill_config_skills = match &skill_config {
        Some(config) => config.str_list("skills")?,
        None => Vec::new(),
    };
    let skills = normalize_names(root.str_list("skills")?.into_iter().chain(skill_config_skills));
    let allow_inline_code = match &skill_config {
        Some(config) => config.bool("allowInlineCode")?.unwrap_or(false),
        None => false,
    };
    let (sandbox_network, sandbox_unix_sockets) = match root.obj("sandbox")? {
        Some(sandbox) => (sandbox.bool("network")?.unwrap_or(false), sandbox.bool("unixSockets")?.unwrap_or(false)),
        None => (false, false),
    };
    let explicit_tool_choice = tool_choice(root)?;
    let mut definition = AgentDefinition {
        name: non_blank(root.str("name")?).map_or_else(|| key.clone(), str::to_owned),
        key,
        icon: non_blank(root.str("icon")?).map(|i| i.trim().to_owned()),
        description: non_blank(root.str("description")?)
            .map_or_else(|| format!("external agent from {file_name}"), str::to_owned),
        mode: blocks.into_mode(mode)?,
        model_config,
        tool_config,
        approvals,
        sub_agents,
        handoffs,
        skills,
        allow_inline_code,
        sandbox_network,
        sandbox_unix_sockets,
        tool_choice: ToolChoicePolicy::Auto,
        budget: custom_budget.unwrap_or(Budget::preset_for(mode)),
        context: root.obj("contextConfig")?.map(|c| super::context::parse(&c)).transpose()?.unwrap_or_default(),
        citations: super::citations::parse(root.obj("citations")?.as_ref())?,
        guardrails: super::guardrails::parse(root.obj("guardrails")?.as_ref())?,
        a2a_enabled: match root.obj("a2a")? {
            Some(a2a) => a2a.bool("enabled")?.unwrap_or(true),
            None => true,
        },
        output_schema: output_schema(root)?,
        phase_messages: super::phase_stream::parse(root.obj("phaseStream")?.as_ref())?,
        runtime_prompts: prompts::parse(root.obj("runtimePrompts")?.as_ref())?,
        source_file: file_name.to_owned(),
        declared_tools,
    };
    definition.tool_choice = explicit_tool_choice.unwrap_or_else(|| default_tool_choice(&definition));
    Ok(definition)
}

/// `outputSchema`: absent or `null` → none.
fn output_schema(root: &Obj<'_>) -> Result<Option<super::OutputSchema>, DefinitionError> {
    let Some(schema) = root.value("outputSchema") else { return Ok(None) };
    super::OutputSchema::compile(schema.clone())
        .map(Some)
        .map_err(|e| DefinitionError::InvalidValue { field: root.field("outputSchema"), reason: e.to_string() })
}

/// `key` as written when non-blank (not trimmed, like the reference), else the trimmed file stem.
fn agent_key(root: &Obj<'_>, file_name: &str) -> Result<String, DefinitionError> {
    if let Some(key) = non_blank(root.str("key")?) {
        return Ok(key.to_owned());
    }
    let stem = file_name.strip_suffix(".json").unwrap_or(file_name).trim();
    if stem.is_empty() {
        return Err(DefinitionError::EmptyKey(file_name.to_owned()));
    }
    Ok(stem.to_owned())
}

fn agent_mode(root: &Obj<'_>) -> Result<AgentMode, DefinitionError> {
    let raw = non_blank(root.str("mode")?).ok_or(DefinitionError::MissingMode)?;
    raw.parse().map_err(|()| DefinitionError::UnknownMode(raw.to_owned()))
}

/// Exact upper-case names only, unlike `mode` (the reference binds it to an enum directly).
fn tool_choice(root: &Obj<'_>) -> Result<Option<ToolChoicePolicy>, DefinitionError> {
    let Some(name) = root.str("toolChoice")? else { return Ok(None) };
    named(name).map(Some).ok_or_else(|| DefinitionError::InvalidEnum {
        field: root.field("toolChoice"),
        value: name.to_owned(),
        expected: TOOL_CHOICE_NAMES,
    })
}

/// §6: ONESHOT offers tools only when its stage has some; the other modes always may.
fn default_tool_choice(definition: &AgentDefinition) -> ToolChoicePolicy {
    match definition.mode_kind() {
        AgentMode::Oneshot
            if definition.stage_tools(StageKind::Plain).is_empty()
                && definition.sub_agents.is_empty()
                && definition.handoffs.is_empty() =>
        {
            ToolChoicePolicy::None
        }
        _ => ToolChoicePolicy::Auto,
    }
}

/// Agent keys as written (keys are case-sensitive), first occurrence kept.
fn distinct<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in keys {
        if !out.iter().any(|k| k == key) {
            out.push(key.to_owned());
        }
    }
    out
}
