//! The validated building blocks of an agent definition. Everything here has already passed the
//! schema rules, so the modes never re-check spelling, blanks or legacy keys.

use std::fmt;
use std::str::FromStr;

use agw_llm::{ReasoningEffort, ReasoningSetting, ToolChoice};
use serde::Serialize;

/// Name of the plan tool forced into the plan stage of PLAN_EXECUTE.
pub const PLAN_ADD_TASKS_TOOL: &str = "_plan_add_tasks_";
/// Name of the plan tool forced into the execute stage of PLAN_EXECUTE.
pub const PLAN_UPDATE_TASK_TOOL: &str = "_plan_update_task_";
/// Name of the plan tool that reads the plan.
pub const PLAN_GET_TASKS_TOOL: &str = "_plan_get_tasks_";
/// Every plan tool's name starts with this (the runtime answers them, not the tool registry).
pub const PLAN_TOOL_PREFIX: &str = "_plan_";

/// Orchestration mode, as written in `mode` and shown by `/agents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentMode {
    Oneshot,
    React,
    PlanExecute,
}

impl AgentMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            AgentMode::Oneshot => "ONESHOT",
            AgentMode::React => "REACT",
            AgentMode::PlanExecute => "PLAN_EXECUTE",
        }
    }
}

impl fmt::Display for AgentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lenient on purpose (case-insensitive, trimmed, `-` as `_`): `plan-execute` is a common spelling.
impl FromStr for AgentMode {
    type Err = ();

    fn from_str(raw: &str) -> Result<Self, ()> {
        match raw.trim().replace('-', "_").to_ascii_uppercase().as_str() {
            "ONESHOT" => Ok(AgentMode::Oneshot),
            "REACT" => Ok(AgentMode::React),
            "PLAN_EXECUTE" => Ok(AgentMode::PlanExecute),
            _ => Err(()),
        }
    }
}

/// The agent's `toolChoice`: whether tools are offered and whether a call is mandatory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolChoicePolicy {
    None,
    Auto,
    Required,
}

impl ToolChoicePolicy {
    /// The wire `tool_choice`; `None` means "offer no tools at all".
    pub const fn to_llm(self) -> Option<ToolChoice> {
        match self {
            ToolChoicePolicy::None => None,
            ToolChoicePolicy::Auto => Some(ToolChoice::Auto),
            ToolChoicePolicy::Required => Some(ToolChoice::Required),
        }
    }
}

/// `modelConfig` as written (blank strings already read as absent, `providerKey` trimmed).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelConfig {
    pub provider_key: Option<String>,
    pub model: Option<String>,
    pub reasoning: Option<ReasoningConfig>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
}

/// `modelConfig.reasoning`; `effort` defaults to MEDIUM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReasoningConfig {
    pub enabled: bool,
    pub effort: ReasoningEffort,
}

impl From<ReasoningConfig> for ReasoningSetting {
    fn from(r: ReasoningConfig) -> Self {
        ReasoningSetting { enabled: r.enabled, effort: r.effort }
    }
}

/// Tool names by kind: trimmed, lower-cased, blanks dropped, each list without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolConfig {
    pub backends: Vec<String>,
    pub frontends: Vec<String>,
    pub actions: Vec<String>,
}

impl ToolConfig {
    /// All names in schema order: backends, then frontends, then actions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.backends.iter().chain(&self.frontends).chain(&self.actions).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.backends.is_empty() && self.frontends.is_empty() && self.actions.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names().any(|n| n == name)
    }

    /// Adds a required backend tool unless some list already names it.
    pub(crate) fn require_backend(&mut self, name: &str) {
        if !self.contains(name) {
            self.backends.push(name.to_owned());
        }
    }
}

/// A stage's `toolConfig`: the three states the schema distinguishes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StageTools {
    /// Key absent: the stage uses the top-level `toolConfig`.
    #[default]
    Inherit,
    /// Explicit `null`: the stage has no tools of its own (agw follows the design document here).
    Cleared,
    Set(ToolConfig),
}

/// One stage block (`plain`, `react`, `planExecute.plan|execute|summary`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stage {
    /// Trimmed. For the summary stage a blank prompt has already been replaced by the execute
    /// prompt, as the contract asks.
    pub system_prompt: String,
    /// `Some` replaces the top-level `modelConfig` as a whole for this stage.
    pub model_config: Option<ModelConfig>,
    pub tools: StageTools,
}

/// The active mode with exactly the stages it runs.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "built once per agent and shared behind an Arc; boxing would only complicate matching"
)]
pub enum ModeDef {
    Oneshot { plain: Stage },
    React { react: Stage, max_steps: u32 },
    PlanExecute { plan: Stage, deep_thinking: bool, execute: Stage, summary: Stage, max_steps: u32 },
}

impl ModeDef {
    pub const fn kind(&self) -> AgentMode {
        match self {
            ModeDef::Oneshot { .. } => AgentMode::Oneshot,
            ModeDef::React { .. } => AgentMode::React,
            ModeDef::PlanExecute { .. } => AgentMode::PlanExecute,
        }
    }
}

/// Selects a stage of the active mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageKind {
    Plain,
    React,
    Plan,
    Execute,
    Summary,
}

/// Everything a model call needs from the definition, after stage inheritance (§5).
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    pub provider_key: String,
    pub model: String,
    pub reasoning: ReasoningSetting,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
}
