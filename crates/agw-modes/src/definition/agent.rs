//! [`AgentDefinition`] and the values derived from it (docs/contract/agent-definitions.md §4–§5).

use agw_llm::{ReasonSet, ReasoningSetting};

use super::budget::Budget;
use super::model::{
    AgentMode, ModeDef, ModelConfig, ModelRef, PLAN_ADD_TASKS_TOOL, PLAN_UPDATE_TASK_TOOL, ResolvedModel, Stage,
    StageKind, StageTools, ToolChoicePolicy, ToolConfig,
};
use super::prompts::RuntimePrompts;

/// Provider used when the top-level `modelConfig` names none.
pub const DEFAULT_PROVIDER_KEY: &str = "bailian";
/// Model used when neither the agent nor its provider names one.
pub const DEFAULT_MODEL: &str = "qwen3-max";

/// One validated agent file. Built only by parsing (`AgentDefinition::from_json`), which is why
/// the tool union below stays private: it covers stage blocks that are not part of `mode`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefinition {
    /// Unique catalog key: `key` as written when non-blank, else the trimmed file stem.
    pub key: String,
    /// Display name; defaults to the key.
    pub name: String,
    /// Trimmed; blank → `None`.
    pub icon: Option<String>,
    /// Defaults to `external agent from <file name>`.
    pub description: String,
    /// The active mode with its stage blocks.
    pub mode: ModeDef,
    /// Top-level `modelConfig`; stages without their own use it. `None` only when every stage
    /// of the active mode has one.
    pub model_config: Option<ModelConfig>,
    /// Top-level `toolConfig`; `None` when absent or `null`.
    pub tool_config: Option<ToolConfig>,
    /// Top-level `toolConfig.approvals`: backend calls that need a person's approval.
    pub approvals: super::Approvals,
    /// `toolConfig.subAgents` (agw extension, docs/multi-agent.md): the agents this one may run
    /// as sub-agents through `agent_invoke`, by key; empty: no `agent_invoke`.
    pub sub_agents: Vec<String>,
    /// `toolConfig.handoffs` (agw extension, docs/multi-agent.md "Handoffs"): the agents this one
    /// may hand the conversation to, one `transfer_to_<agentKey>` tool each; tool names distinct.
    pub handoffs: Vec<super::Handoff>,
    /// `skills[]` then `skillConfig.skills[]`: trimmed, lower-cased, distinct.
    pub skills: Vec<String>,
    /// `skillConfig.allowInlineCode` (agw extension, default false): `_skill_run_script_` may run
    /// inline `pythonCode` for this agent.
    pub allow_inline_code: bool,
    /// `sandbox.network` (agw extension, default false): processes the model starts (`_bash_`,
    /// `_skill_run_script_`) may open IP sockets.
    pub sandbox_network: bool,
    /// `sandbox.unixSockets` (agw extension, default false): processes the model starts may open
    /// `AF_UNIX` sockets (and so reach a local database's or D-Bus's socket).
    pub sandbox_unix_sockets: bool,
    /// `toolChoice`, or the mode's default (docs/contract/agent-definitions.md §6).
    pub tool_choice: ToolChoicePolicy,
    /// `budget`, or the mode's preset.
    pub budget: Budget,
    /// `contextConfig` (agw extension), defaults filled in.
    pub context: super::ContextPolicy,
    /// `citations` (agw extension, docs/protocols.md "Citations"): how the model cites what its
    /// citable tools return.
    pub citations: super::CitationPolicy,
    /// `guardrails` (agw extension, docs/guardrails.md): this agent's guards, added to the
    /// server's defaults at run time.
    pub guardrails: super::GuardrailPolicy,
    /// `a2a.enabled` (agw extension, default `true`): the agent is served over A2A.
    pub a2a_enabled: bool,
    /// `outputSchema` (agw extension, docs/models.md "Structured output"): the JSON the run's
    /// answer must be; a request may bring its own.
    pub output_schema: Option<super::OutputSchema>,
    /// `phaseStream.messages` (agw extension): what this agent's `phase_change` events say.
    pub phase_messages: agw_protocol::adapters::phase::PhaseMessages,
    /// `runtimePrompts` with agw's defaults filled in.
    pub runtime_prompts: RuntimePrompts,
    /// Where the definition came from (path for directory loads, name for embedded sources).
    pub source_file: String,
    /// Union of the top-level and every stage `toolConfig` in the file, in first-seen order.
    /// The reference lists tools of all stage blocks, including those of other modes.
    pub(crate) declared_tools: Vec<String>,
}

impl AgentDefinition {
    /// The mode without its stages.
    pub fn mode_kind(&self) -> AgentMode {
        self.mode.kind()
    }

    /// What this agent lets the code its model starts do (handed to tools with each call).
    pub fn code_grants(&self) -> agw_tools::CodeGrants {
        agw_tools::CodeGrants {
            skills: self.skills.clone(),
            allow_inline_code: self.allow_inline_code,
            network: self.sandbox_network,
            unix_sockets: self.sandbox_unix_sockets,
        }
    }

    /// Top-level `modelConfig.providerKey`, lower-cased; default `bailian`.
    pub fn agent_provider_key(&self) -> String {
        self.model_config
            .as_ref()
            .and_then(|c| c.provider_key.as_deref())
            .map_or_else(|| DEFAULT_PROVIDER_KEY.to_owned(), str::to_lowercase)
    }

    /// Top-level `modelConfig.model`, else the agent provider's configured model, else
    /// `qwen3-max`. `provider_default` is the model configured for [`Self::agent_provider_key`].
    pub fn agent_model(&self, provider_default: Option<&str>) -> String {
        self.model_config
            .as_ref()
            .and_then(|c| c.model.as_deref())
            .or(provider_default.filter(|m| !m.trim().is_empty()))
            .unwrap_or(DEFAULT_MODEL)
            .to_owned()
    }

    /// Every tool the agent names (shown by `/agents`, resolved when the agent is built);
    /// PLAN_EXECUTE always includes both plan tools.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names = self.declared_tools.clone();
        if self.mode_kind() == AgentMode::PlanExecute {
            for tool in [PLAN_ADD_TASKS_TOOL, PLAN_UPDATE_TASK_TOOL] {
                if !names.iter().any(|n| n == tool) {
                    names.push(tool.to_owned());
                }
            }
        }
        names
    }

    /// A stage of the active mode; `None` for stages the mode does not run.
    pub fn stage(&self, kind: StageKind) -> Option<&Stage> {
        match (&self.mode, kind) {
            (ModeDef::Oneshot { plain }, StageKind::Plain) => Some(plain),
            (ModeDef::React { react, .. }, StageKind::React) => Some(react),
            (ModeDef::PlanExecute { plan, .. }, StageKind::Plan) => Some(plan),
            (ModeDef::PlanExecute { execute, .. }, StageKind::Execute) => Some(execute),
            (ModeDef::PlanExecute { summary, .. }, StageKind::Summary) => Some(summary),
            _ => None,
        }
    }

    /// The tools a stage may offer: its own `toolConfig`, the top-level one when the key is
    /// absent, nothing when it is `null`; the plan tools are then forced into the plan and
    /// execute stages. An empty result means no tools (agw does not copy the reference's
    /// "empty means all agent tools"). Stages outside the active mode have no tools.
    pub fn stage_tools(&self, kind: StageKind) -> ToolConfig {
        let Some(stage) = self.stage(kind) else {
            return ToolConfig::default();
        };
        let mut tools = match &stage.tools {
            StageTools::Inherit => self.tool_config.clone().unwrap_or_default(),
            StageTools::Cleared => ToolConfig::default(),
            StageTools::Set(tools) => tools.clone(),
        };
        match kind {
            StageKind::Plan => tools.require_backend(PLAN_ADD_TASKS_TOOL),
            StageKind::Execute => tools.require_backend(PLAN_UPDATE_TASK_TOOL),
            StageKind::Plain | StageKind::React | StageKind::Summary => {}
        }
        tools
    }

    /// Provider, model and sampling settings of one stage's model calls (§5): a stage
    /// `modelConfig` replaces the top-level one as a whole; blank provider/model fall back to the
    /// agent-level values. `provider_default` maps a provider key to its configured model.
    pub fn resolve_model(&self, kind: StageKind, provider_default: impl Fn(&str) -> Option<String>) -> ResolvedModel {
        let effective = self.stage(kind).and_then(|s| s.model_config.as_ref()).or(self.model_config.as_ref());
        let agent_provider = self.agent_provider_key();
        let model = match effective.and_then(|c| c.model.clone()) {
            Some(model) => model,
            None => self.agent_model(provider_default(&agent_provider).as_deref()),
        };
        let provider_key = effective.and_then(|c| c.provider_key.clone()).unwrap_or(agent_provider);
        let primary = ModelRef { provider_key, model };
        let fallbacks = effective.map(|c| c.fallback_models(&primary, &provider_default)).unwrap_or_default();
        let ModelRef { provider_key, model } = primary;
        ResolvedModel {
            provider_key,
            model,
            fallbacks,
            fallback_on: effective.and_then(|c| c.fallback_on).unwrap_or(ReasonSet::all()),
            reasoning: effective.and_then(|c| c.reasoning).map(ReasoningSetting::from).unwrap_or_default(),
            temperature: effective.and_then(|c| c.temperature),
            top_p: effective.and_then(|c| c.top_p),
            tool_calling: effective.and_then(|c| c.tool_calling).unwrap_or_default(),
            max_tokens: effective.and_then(|c| c.max_tokens),
            context_window: effective.and_then(|c| c.context_window),
            max_output_tokens: effective.and_then(|c| c.max_output_tokens),
            prompt_cache: effective.and_then(|c| c.prompt_cache).unwrap_or(true),
        }
    }

    /// The prompt that stands for the agent (§4): plain, react, or execute for PLAN_EXECUTE.
    pub fn primary_system_prompt(&self) -> &str {
        match &self.mode {
            ModeDef::Oneshot { plain } => &plain.system_prompt,
            ModeDef::React { react, .. } => &react.system_prompt,
            // The execute prompt is required non-blank, so the reference's "first non-blank of
            // execute, summary, plan" always ends at execute.
            ModeDef::PlanExecute { execute, .. } => &execute.system_prompt,
        }
    }
}
