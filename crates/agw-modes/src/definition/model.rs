//! The validated building blocks of an agent definition. Everything here has already passed the
//! schema rules, so the modes never re-check spelling, blanks or legacy keys.

use std::fmt;
use std::str::FromStr;

use agw_llm::{ReasonSet, ReasoningEffort, ReasoningSetting, ToolChoice};
pub use agw_protocol::event::ModelRef;
use serde::{Deserialize, Serialize};

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
    /// One answer from the `plain` stage, with repair turns when a tool call is required.
    Oneshot,
    /// Reason-act loop of the `react` stage, up to `maxSteps` model turns.
    React,
    /// Plan, execute each task, then summarise.
    PlanExecute,
}

impl AgentMode {
    /// The canonical name: `ONESHOT`, `REACT` or `PLAN_EXECUTE`.
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

/// The agent's `toolChoice`: whether tools are offered and whether a call is mandatory. Its serde
/// names are the file's spelling, exact and upper-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolChoicePolicy {
    /// No tools are offered.
    None,
    /// Tools are offered; the model decides.
    Auto,
    /// The model must call a tool.
    Required,
}

/// The `toolChoice` names, for messages.
pub(crate) const TOOL_CHOICE_NAMES: &str = "NONE, AUTO, REQUIRED";

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

/// agw: `modelConfig.toolCalling`, how the model is offered tools. Its serde names are the
/// file's spelling, exact and lower-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCalling {
    /// The provider's own function calling (`tools[]`, `tool_calls`).
    #[default]
    Native,
    /// Tools described in the system prompt and calls parsed from the model's text
    /// (`agw_llm::prompted`), for models served without function calling (docs/models.md).
    Prompted,
}

/// The `toolCalling` names, for messages.
pub(crate) const TOOL_CALLING_NAMES: &str = "native, prompted";

/// `modelConfig` as written (blank strings already read as absent, `providerKey` trimmed).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelConfig {
    /// Key in the provider registry, trimmed.
    pub provider_key: Option<String>,
    /// Model name, as written.
    pub model: Option<String>,
    /// `None`: reasoning off for every stage this config applies to.
    pub reasoning: Option<ReasoningConfig>,
    /// Sampling temperature; sent when set (the reference ignores it, docs/compatibility.md).
    pub temperature: Option<f64>,
    /// Nucleus sampling cut-off; sent when set.
    pub top_p: Option<f64>,
    /// agw: `toolCalling`; `None`: native.
    pub tool_calling: Option<ToolCalling>,
    /// Cap on generated tokens; sent when set.
    pub max_tokens: Option<u32>,
    /// agw: `contextWindow`, the model's context in tokens (else the provider's configured
    /// one, else 128,000).
    pub context_window: Option<u32>,
    /// agw: `maxOutputTokens`, the model's longest answer (else the provider's, else 4,096).
    pub max_output_tokens: Option<u32>,
    /// agw: `promptCache` (docs/models.md); `None`: on.
    pub prompt_cache: Option<bool>,
    /// agw: `fallbacks`, the models tried in order when a call to this one fails before it
    /// streamed anything (docs/models.md, "Fallbacks"). Each takes every other setting of this
    /// `modelConfig`.
    pub fallbacks: Vec<FallbackEntry>,
    /// agw: `fallbackOn`, the failures that move on to the next model; `None`: all six.
    pub fallback_on: Option<ReasonSet>,
}

/// Most entries of `modelConfig.fallbacks`: each is a whole model call's wait on failure.
pub const MAX_FALLBACKS: usize = 8;

/// One entry of `modelConfig.fallbacks` as written; at least one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FallbackEntry {
    /// Trimmed; `None`: the provider of the `modelConfig` it is in.
    pub provider_key: Option<String>,
    /// As written; `None`: the provider's configured model.
    pub model: Option<String>,
}

impl ModelConfig {
    /// The fallback models after `primary` (the model this config resolved to): absent fields
    /// filled in (`provider_default` maps a provider key to its configured model), entries that
    /// name `primary` or an earlier entry again left out.
    pub fn fallback_models(
        &self,
        primary: &ModelRef,
        provider_default: impl Fn(&str) -> Option<String>,
    ) -> Vec<ModelRef> {
        let mut out: Vec<ModelRef> = Vec::new();
        for entry in &self.fallbacks {
            let provider_key = entry.provider_key.clone().unwrap_or_else(|| primary.provider_key.clone());
            let model = match &entry.model {
                Some(model) => model.clone(),
                None => provider_default(&provider_key)
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or_else(|| super::agent::DEFAULT_MODEL.to_owned()),
            };
            let candidate = ModelRef { provider_key, model };
            let same = |other: &ModelRef| {
                other.provider_key.eq_ignore_ascii_case(&candidate.provider_key) && other.model == candidate.model
            };
            if !same(primary) && !out.iter().any(same) {
                out.push(candidate);
            }
        }
        out
    }
}

/// `modelConfig.reasoning`; `effort` defaults to MEDIUM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReasoningConfig {
    /// `reasoning.enabled == true`.
    pub enabled: bool,
    /// How hard the model should think when enabled.
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
    /// Tools agw executes itself.
    pub backends: Vec<String>,
    /// Tools answered by the user through `POST /api/ap/submit`.
    pub frontends: Vec<String>,
    /// Tools the client performs; their result is always `OK`.
    pub actions: Vec<String>,
    /// agw: `mcpServers`, the MCP servers whose tools the stage offers (backend tools named
    /// `mcp__<server>__<tool>`, docs/mcp.md).
    pub mcp_servers: Vec<McpSelection>,
}

/// One entry of `toolConfig.mcpServers`: `"github"` (every tool of the server) or
/// `{"server": "github", "tools": ["create_issue"]}` (only those, by their MCP names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSelection {
    /// The server's name, as in its declaration file.
    pub server: String,
    /// `None`: every tool of the server.
    pub tools: Option<Vec<String>>,
}

impl ToolConfig {
    /// All names in schema order: backends, then frontends, then actions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.backends.iter().chain(&self.frontends).chain(&self.actions).map(String::as_str)
    }

    /// All lists are empty.
    pub fn is_empty(&self) -> bool {
        self.backends.is_empty() && self.frontends.is_empty() && self.actions.is_empty() && self.mcp_servers.is_empty()
    }

    /// Some list names `name` (compared exactly; names are stored lower-case).
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
    /// An object: the stage's own lists (missing lists empty).
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
    /// The stage's `toolConfig`, before the required plan tools are added.
    pub tools: StageTools,
}

/// The active mode with exactly the stages it runs.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "built once per agent and shared behind an Arc; boxing would only complicate matching"
)]
pub enum ModeDef {
    /// ONESHOT.
    Oneshot {
        /// The only stage.
        plain: Stage,
    },
    /// REACT.
    React {
        /// The only stage.
        react: Stage,
        /// Most steps of the loop before the final no-tools turn (`react.maxSteps`; absent or
        /// ≤ 0 → 6).
        max_steps: u32,
    },
    /// PLAN_EXECUTE.
    PlanExecute {
        /// Creates the plan through `_plan_add_tasks_`.
        plan: Stage,
        /// `planExecute.plan.deepThinking`: a draft turn with reasoning on and no tools precedes
        /// plan generation.
        deep_thinking: bool,
        /// Runs each task; must call `_plan_update_task_`.
        execute: Stage,
        /// Writes the final answer; its prompt falls back to the execute prompt.
        summary: Stage,
        /// Most task executions (`planExecute.maxSteps`; absent or ≤ 0 → 15).
        max_steps: u32,
        /// `planExecute.parallel` (agw extension, docs/multi-agent.md): how many independent
        /// tasks run at once; 1 (absent, `false`, 0 or 1) runs them one by one as the contract
        /// describes.
        parallel: u32,
    },
}

impl ModeDef {
    /// The mode without its stages.
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
    /// ONESHOT's `plain`.
    Plain,
    /// REACT's `react`.
    React,
    /// PLAN_EXECUTE's `planExecute.plan`.
    Plan,
    /// PLAN_EXECUTE's `planExecute.execute`.
    Execute,
    /// PLAN_EXECUTE's `planExecute.summary`.
    Summary,
}

/// Everything a model call needs from the definition, after stage inheritance (§5).
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    /// The effective `modelConfig`'s `providerKey`, else
    /// [`AgentDefinition::agent_provider_key`](super::AgentDefinition::agent_provider_key).
    pub provider_key: String,
    /// The effective `modelConfig`'s `model`, else the agent-level default.
    pub model: String,
    /// From the effective `modelConfig` only; off when it has no `reasoning`.
    pub reasoning: ReasoningSetting,
    /// From the effective `modelConfig`; `None`: not sent.
    pub temperature: Option<f64>,
    /// From the effective `modelConfig`; `None`: not sent.
    pub top_p: Option<f64>,
    /// From the effective `modelConfig`; native when it has none.
    pub tool_calling: ToolCalling,
    /// From the effective `modelConfig`; `None`: the provider's default.
    pub max_tokens: Option<u32>,
    /// From the effective `modelConfig`; `None`: the provider's configured limit or the default.
    pub context_window: Option<u32>,
    /// From the effective `modelConfig`; `None`: the provider's configured limit or the default.
    pub max_output_tokens: Option<u32>,
    /// From the effective `modelConfig`; on unless it says `"promptCache": false`.
    pub prompt_cache: bool,
    /// The effective `modelConfig`'s `fallbacks`, resolved; empty: none.
    pub fallbacks: Vec<ModelRef>,
    /// The effective `modelConfig`'s `fallbackOn` (all six reasons when it has none).
    pub fallback_on: ReasonSet,
}

impl ResolvedModel {
    /// This model's provider and name.
    pub fn model_ref(&self) -> ModelRef {
        ModelRef { provider_key: self.provider_key.clone(), model: self.model.clone() }
    }
}
