//! Agent definitions: the JSON files in the agents directory, validated into types the modes can
//! run without re-checking anything (contract: docs/contract/agent-definitions.md).
//!
//! * [`AgentDefinition::from_json`] parses one file: triple-quoted prompts and comments
//!   (`preprocess`), legacy-key rejection (`rejected`), then the schema (`parse`, `blocks`,
//!   `budget`, `prompts`).
//! * [`AgentCatalog`] loads a directory (or embedded sources) into an immutable snapshot,
//!   skipping and reporting broken files.
//! * [`AgentFileCreate`] (`agent_file_create`) writes one: the model's arguments become a typed
//!   file (`file`), which is checked by [`AgentDefinition::from_json`] before it is written.
//!
//! Deliberate deviation from the reference: a stage `toolConfig: null` means "no tools" and an
//! empty stage tool list is never widened to "all agent tools" (README decision table).

mod agent;
mod approvals;
mod blocks;
mod budget;
mod catalog;
mod citations;
mod context;
mod create;
mod error;
mod file;
mod guardrails;
mod handoffs;
mod model;
mod output;
mod parse;
mod phase_stream;
mod preprocess;
mod prompts;
mod raw;
mod rejected;

pub use agent::{AgentDefinition, DEFAULT_MODEL, DEFAULT_PROVIDER_KEY};
pub use approvals::{ApprovalDecision, ApprovalRule, Approvals};
pub use budget::{Budget, BudgetScope};
pub use catalog::{AgentCatalog, LoadProblem};
pub use citations::CitationPolicy;
pub use context::{ContextPolicy, DEFAULT_PROTECTED_TOOLS};
pub use create::{
    AgentFileCreate, AgentFileCreateConfig, AgentLookup, DEFAULT_AGENT_SYSTEM_PROMPT, DEFAULT_GRANTABLE_TOOLS,
};
pub use error::DefinitionError;
pub use guardrails::{BadGuardRef, GuardLists, GuardRef, GuardrailPolicy};
pub use handoffs::{Handoff, INPUT_FILTER_NAMES, InputFilter, TRANSFER_TOOL_PREFIX, transfer_tool_name};
pub use model::{
    AgentMode, FallbackEntry, MAX_FALLBACKS, McpSelection, ModeDef, ModelConfig, ModelRef, PLAN_ADD_TASKS_TOOL,
    PLAN_GET_TASKS_TOOL, PLAN_TOOL_PREFIX, PLAN_UPDATE_TASK_TOOL, ReasoningConfig, ResolvedModel, Stage, StageKind,
    StageTools, ToolCalling, ToolChoicePolicy, ToolConfig,
};
pub use output::{AnswerMismatch, MAX_OUTPUT_SCHEMA_BYTES, OutputSchema, OutputSchemaError};
pub use prompts::{
    DEFAULT_AFTER_CALL_HINT_TITLE, DEFAULT_SKILL_CATALOG_HEADER, DEFAULT_SKILL_DISCLOSURE_HEADER,
    DEFAULT_SKILL_INSTRUCTIONS_LABEL, DEFAULT_TASK_EXECUTION_PROMPT_TEMPLATE, DEFAULT_TOOL_DESCRIPTION_TITLE,
    RuntimePrompts,
};
