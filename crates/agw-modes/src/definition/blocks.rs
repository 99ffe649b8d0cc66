//! Reading the reusable blocks of the schema: `modelConfig`, `toolConfig` and the stage blocks,
//! and assembling the active mode from them (docs/contract/agent-definitions.md §3, §5, §6).

use agw_llm::{FallbackReason, ReasonSet, ReasoningEffort};

use super::error::DefinitionError;
use super::model::{
    AgentMode, FallbackEntry, MAX_FALLBACKS, McpSelection, ModeDef, ModelConfig, ReasoningConfig, Stage, StageTools,
    TOOL_CALLING_NAMES, ToolConfig,
};
use super::raw::{Either, Obj, named, non_blank, normalize_names};

const DEFAULT_REACT_MAX_STEPS: u32 = 6;
/// The reference's value; CLAUDE.md's example shows 10 (docs/contract/agent-definitions.md §6).
const DEFAULT_PLAN_EXECUTE_MAX_STEPS: u32 = 15;

pub fn model_config(obj: &Obj<'_>) -> Result<ModelConfig, DefinitionError> {
    let tokens = |key: &str| -> Result<Option<u32>, DefinitionError> {
        match obj.i64(key)? {
            Some(n) if n > 0 => Ok(Some(
                u32::try_from(n)
                    .map_err(|_| DefinitionError::OutOfRange { field: obj.field(key), value: n.to_string() })?,
            )),
            _ => Ok(None),
        }
    };
    Ok(ModelConfig {
        context_window: tokens("contextWindow")?,
        max_output_tokens: tokens("maxOutputTokens")?,
        provider_key: non_blank(obj.str("providerKey")?).map(|p| p.trim().to_owned()),
        // Kept as written: a model id is opaque to the gateway.
        model: non_blank(obj.str("model")?).map(str::to_owned),
        reasoning: obj.obj("reasoning")?.map(|r| reasoning(&r)).transpose()?,
        temperature: obj.f64("temperature")?,
        top_p: obj.f64("top_p")?,
        tool_calling: obj
            .str("toolCalling")?
            .map(|name| {
                named(name).ok_or_else(|| DefinitionError::InvalidEnum {
                    field: obj.field("toolCalling"),
                    value: name.to_owned(),
                    expected: TOOL_CALLING_NAMES,
                })
            })
            .transpose()?,
        // A non-positive limit cannot be sent to a provider; it reads as "not set".
        max_tokens: tokens("max_tokens")?,
        prompt_cache: obj.bool("promptCache")?,
        fallbacks: fallbacks(obj)?,
        fallback_on: fallback_on(obj)?,
    })
}

/// The `fallbackOn` names, for messages.
pub(crate) const FALLBACK_REASON_NAMES: &str =
    "rate_limit, overloaded, server_error, timeout, context_window, connection";

/// `modelConfig.fallbacks`: objects `{providerKey?, model?}`, at least one of the two set, at most
/// [`MAX_FALLBACKS`].
fn fallbacks(obj: &Obj<'_>) -> Result<Vec<FallbackEntry>, DefinitionError> {
    let entries = obj.obj_list("fallbacks")?;
    if entries.len() > MAX_FALLBACKS {
        return Err(DefinitionError::InvalidValue {
            field: obj.field("fallbacks"),
            reason: format!("lists {} models; at most {MAX_FALLBACKS} are tried", entries.len()),
        });
    }
    entries
        .iter()
        .map(|entry| {
            entry.only(&["providerKey", "model"])?;
            let provider_key = non_blank(entry.str("providerKey")?).map(|p| p.trim().to_owned());
            let model = non_blank(entry.str("model")?).map(str::to_owned);
            if provider_key.is_none() && model.is_none() {
                return Err(DefinitionError::InvalidValue {
                    field: entry.path().to_owned(),
                    reason: "must name a providerKey, a model or both".into(),
                });
            }
            Ok(FallbackEntry { provider_key, model })
        })
        .collect()
}

/// `modelConfig.fallbackOn`: reason names, exact; absent means all of them.
fn fallback_on(obj: &Obj<'_>) -> Result<Option<ReasonSet>, DefinitionError> {
    if !obj.is_set("fallbackOn") {
        return Ok(None);
    }
    let field = obj.field("fallbackOn");
    let names = obj.str_list("fallbackOn")?;
    if names.is_empty() {
        return Err(DefinitionError::InvalidValue {
            field,
            reason: "must name at least one reason (leave it out to fall back on all of them)".into(),
        });
    }
    if obj.obj_list("fallbacks")?.is_empty() {
        return Err(DefinitionError::InvalidValue {
            field,
            reason: "has no effect without fallbacks in the same modelConfig".into(),
        });
    }
    names
        .iter()
        .map(|name| {
            name.parse::<FallbackReason>().map_err(|()| DefinitionError::InvalidEnum {
                field: field.clone(),
                value: (*name).to_owned(),
                expected: FALLBACK_REASON_NAMES,
            })
        })
        .collect::<Result<ReasonSet, _>>()
        .map(Some)
}

/// The `reasoning.effort` names (exact, upper-case: [`ReasoningEffort`]'s serde names), for messages.
pub(crate) const REASONING_EFFORT_NAMES: &str = "LOW, MEDIUM, HIGH";

fn reasoning(obj: &Obj<'_>) -> Result<ReasoningConfig, DefinitionError> {
    let effort = match obj.str("effort")? {
        None => ReasoningEffort::Medium,
        Some(name) => named(name).ok_or_else(|| DefinitionError::InvalidEnum {
            field: obj.field("effort"),
            value: name.to_owned(),
            expected: REASONING_EFFORT_NAMES,
        })?,
    };
    Ok(ReasoningConfig { enabled: obj.bool("enabled")?.unwrap_or(false), effort })
}

pub fn tool_config(obj: &Obj<'_>) -> Result<ToolConfig, DefinitionError> {
    // `a2aAgents` (agw, docs/a2a.md): each remote A2A agent is the backend tool `a2a__<name>`.
    let mut backends = obj.str_list("backends")?;
    let remote: Vec<String> = obj
        .str_list("a2aAgents")?
        .iter()
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(agw_tools::a2a_tool_name)
        .collect();
    backends.extend(remote.iter().map(String::as_str));
    Ok(ToolConfig {
        backends: normalize_names(backends),
        frontends: normalize_names(obj.str_list("frontends")?),
        actions: normalize_names(obj.str_list("actions")?),
        mcp_servers: mcp_servers(obj)?,
    })
}

fn mcp_servers(obj: &Obj<'_>) -> Result<Vec<McpSelection>, DefinitionError> {
    let mut out: Vec<McpSelection> = Vec::new();
    for item in obj.str_or_obj_list("mcpServers")? {
        let selection = match item {
            Either::Left(server) => McpSelection { server: server.trim().to_owned(), tools: None },
            Either::Right(entry) => {
                let server = entry.str("server")?.unwrap_or_default().trim().to_owned();
                let tools = entry.contains("tools").then(|| entry.str_list("tools")).transpose()?;
                let tools =
                    tools.map(|names| names.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect());
                McpSelection { server, tools }
            }
        };
        if !selection.server.is_empty() && !out.iter().any(|s| s.server == selection.server) {
            out.push(selection);
        }
    }
    Ok(out)
}

/// One stage block as written, before the mode decides whether it runs.
pub struct RawStage {
    pub stage: Stage,
    pub deep_thinking: Option<bool>,
}

fn stage(obj: &Obj<'_>) -> Result<RawStage, DefinitionError> {
    let tools = match obj.obj("toolConfig")? {
        Some(tools) => StageTools::Set(tool_config(&tools)?),
        None if obj.contains("toolConfig") => StageTools::Cleared,
        None => StageTools::Inherit,
    };
    Ok(RawStage {
        stage: Stage {
            system_prompt: obj.str("systemPrompt")?.unwrap_or("").trim().to_owned(),
            model_config: obj.obj("modelConfig")?.map(|m| model_config(&m)).transpose()?,
            tools,
        },
        deep_thinking: obj.bool("deepThinking")?,
    })
}

/// All five stage blocks, read whatever the mode: the reference collects tools and looks for a
/// `modelConfig` across every block, so type errors anywhere reject the file too.
pub struct StageBlocks {
    pub plain: Option<RawStage>,
    pub react: Option<RawStage>,
    pub plan: Option<RawStage>,
    pub execute: Option<RawStage>,
    pub summary: Option<RawStage>,
    react_max_steps: Option<i64>,
    plan_execute_max_steps: Option<i64>,
    plan_execute_parallel: u32,
}

impl StageBlocks {
    pub fn parse(root: &Obj<'_>) -> Result<Self, DefinitionError> {
        let read = |obj: Option<Obj<'_>>| obj.map(|o| stage(&o)).transpose();
        let react = root.obj("react")?;
        let plan_execute = root.obj("planExecute")?;
        let nested = |key: &str| match &plan_execute {
            Some(pe) => pe.obj(key),
            None => Ok(None),
        };
        // Only the plan stage thinks ahead; the key elsewhere signals a misunderstanding, so
        // even `false` is refused.
        for (key, path) in [("execute", "planExecute.execute"), ("summary", "planExecute.summary")] {
            if nested(key)?.is_some_and(|block| block.contains("deepThinking")) {
                return Err(DefinitionError::DeepThinkingNotAllowed(path));
            }
        }
        Ok(StageBlocks {
            plain: read(root.obj("plain")?)?,
            react_max_steps: react.as_ref().map(|r| r.i64("maxSteps")).transpose()?.flatten(),
            react: read(react)?,
            plan: read(nested("plan")?)?,
            execute: read(nested("execute")?)?,
            summary: read(nested("summary")?)?,
            plan_execute_max_steps: plan_execute.as_ref().map(|pe| pe.i64("maxSteps")).transpose()?.flatten(),
            plan_execute_parallel: match &plan_execute {
                Some(pe) => parallel(pe)?,
                None => 1,
            },
        })
    }

    /// Written blocks in the order their tools are listed: plain, react, plan, execute, summary.
    pub fn all(&self) -> impl Iterator<Item = &Stage> {
        [&self.plain, &self.react, &self.plan, &self.execute, &self.summary].into_iter().flatten().map(|raw| &raw.stage)
    }

    /// Keeps only the blocks `mode` runs, enforcing its required prompts.
    pub fn into_mode(self, mode: AgentMode) -> Result<ModeDef, DefinitionError> {
        let prompted = |raw: Option<RawStage>| raw.filter(|r| !r.stage.system_prompt.is_empty());
        match mode {
            AgentMode::Oneshot => {
                let plain =
                    prompted(self.plain).ok_or(DefinitionError::MissingPrompt("plain.systemPrompt is required"))?;
                Ok(ModeDef::Oneshot { plain: plain.stage })
            }
            AgentMode::React => {
                let react =
                    prompted(self.react).ok_or(DefinitionError::MissingPrompt("react.systemPrompt is required"))?;
                Ok(ModeDef::React {
                    react: react.stage,
                    max_steps: max_steps(self.react_max_steps, DEFAULT_REACT_MAX_STEPS),
                })
            }
            AgentMode::PlanExecute => {
                let (Some(plan), Some(execute)) = (prompted(self.plan), prompted(self.execute)) else {
                    return Err(DefinitionError::MissingPrompt(
                        "planExecute.plan.systemPrompt and planExecute.execute.systemPrompt are required",
                    ));
                };
                let mut summary = self.summary.map(|s| s.stage).unwrap_or_default();
                if summary.system_prompt.is_empty() {
                    summary.system_prompt = execute.stage.system_prompt.clone();
                }
                Ok(ModeDef::PlanExecute {
                    deep_thinking: plan.deep_thinking.unwrap_or(false),
                    plan: plan.stage,
                    execute: execute.stage,
                    summary,
                    max_steps: max_steps(self.plan_execute_max_steps, DEFAULT_PLAN_EXECUTE_MAX_STEPS),
                    parallel: self.plan_execute_parallel,
                })
            }
        }
    }
}

/// Most tasks a plan may run at once: more would only queue on the provider's rate limits.
pub const MAX_PARALLEL_TASKS: u32 = 16;

/// `planExecute.parallel`: absent, `false`, 0 or 1 → one task at a time; `true` → 4; a number
/// → that many (at most [`MAX_PARALLEL_TASKS`]).
fn parallel(plan_execute: &Obj<'_>) -> Result<u32, DefinitionError> {
    if let Ok(Some(on)) = plan_execute.bool("parallel") {
        return Ok(if on { 4 } else { 1 });
    }
    let n = plan_execute.i64("parallel")?.unwrap_or(1);
    if n < 0 {
        return Err(DefinitionError::InvalidValue {
            field: plan_execute.field("parallel"),
            reason: format!("must be false, true or the number of tasks run at once, not {n}"),
        });
    }
    Ok(u32::try_from(n).unwrap_or(u32::MAX).clamp(1, MAX_PARALLEL_TASKS))
}

/// Absent or ≤ 0 → the mode default; values beyond `u32` saturate (no run gets that far).
fn max_steps(raw: Option<i64>, default: u32) -> u32 {
    match raw {
        Some(n) if n > 0 => u32::try_from(n).unwrap_or(u32::MAX),
        _ => default,
    }
}
