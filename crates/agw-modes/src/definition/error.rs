//! Why an agent file was rejected. Every message names the offending field so an agent author can
//! fix the file from the log line alone; the catalog prefixes the file path.

use thiserror::Error;

/// A reason to skip one agent definition file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DefinitionError {
    /// The file is not valid JSON; carries the parser's message.
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// The file is JSON but not an object.
    #[error("the root of an agent file must be a JSON object")]
    RootNotObject,
    /// A field has the wrong JSON type.
    #[error("field \"{field}\" must be {expected}, found {found}")]
    WrongType {
        /// Dotted path of the field, e.g. `budget.model.maxCalls`.
        field: String,
        /// The type the schema wants, e.g. `a string`.
        expected: &'static str,
        /// The type found, e.g. `an integer`.
        found: &'static str,
    },
    /// A number does not fit the field's integer type.
    #[error("field \"{field}\" is out of range: {value}")]
    OutOfRange {
        /// Dotted path of the field.
        field: String,
        /// The number as written.
        value: String,
    },
    /// A string is not one of the field's enum names (which are exact, upper-case).
    #[error("field \"{field}\" has invalid value \"{value}\" (expected one of {expected})")]
    InvalidEnum {
        /// Dotted path of the field.
        field: String,
        /// The value as written.
        value: String,
        /// The accepted names, e.g. `NONE, AUTO, REQUIRED`.
        expected: &'static str,
    },
    /// A legacy or removed key is present (docs/contract/agent-definitions.md §8).
    /// `location` is `at top level` or `in "<path>"`.
    #[error("rejected {kind} field \"{field}\" {location}")]
    RejectedField {
        /// `legacy` or `removed`.
        kind: &'static str,
        /// The key as written.
        field: String,
        /// Where the key is.
        location: String,
    },
    /// `budget` uses pre-scope keys (`maxModelCalls`, …); carries their sorted names.
    #[error("budget legacy fields are not supported: {}", .0.join(", "))]
    BudgetLegacy(Vec<String>),
    /// `budget` has other unknown keys; carries their sorted names.
    #[error("budget contains unsupported fields: {}", .0.join(", "))]
    BudgetUnsupported(Vec<String>),
    /// A block that lists its keys (agw's `contextConfig`) has one it does not know.
    #[error("field \"{field}\" is not supported (expected one of {expected})")]
    UnknownField {
        /// Dotted path of the field.
        field: String,
        /// The keys the block accepts.
        expected: String,
    },
    /// `mode` is missing or blank.
    #[error("agent has no mode (field \"mode\" is required)")]
    MissingMode,
    /// `mode` names no known mode; carries the value as written.
    #[error("unknown mode \"{0}\" (expected ONESHOT, REACT or PLAN_EXECUTE)")]
    UnknownMode(String),
    /// Neither the top level nor any stage block has a `modelConfig`.
    #[error("agent has no modelConfig (top-level or stage-level)")]
    NoModelConfig,
    /// A system prompt the active mode requires is blank.
    /// Carries the wording of the rule, e.g. `plain.systemPrompt is required`.
    #[error("{0}")]
    MissingPrompt(&'static str),
    /// A stage other than `planExecute.plan` has a `deepThinking` key; carries the stage path.
    #[error("field \"{0}.deepThinking\" is not allowed (only planExecute.plan may set it)")]
    DeepThinkingNotAllowed(&'static str),
    /// A `toolConfig.approvals` key that can never match what it names.
    #[error("field \"{field}\" is not a usable approval rule: {reason}")]
    InvalidRule {
        /// Dotted path of the field, e.g. `toolConfig.approvals.mock_*:x`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A field of the right type whose value is out of range.
    #[error("field \"{field}\" {reason}")]
    InvalidValue {
        /// Dotted path of the field, e.g. `planExecute.parallel`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `toolConfig.handoffs` entry that cannot be offered as a `transfer_to_<agentKey>` tool.
    #[error("field \"{field}\" is not a usable handoff: {reason}")]
    InvalidHandoff {
        /// Dotted path of the entry, e.g. `toolConfig.handoffs[1]`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No usable key: `key` is blank and the file name has no stem; carries the file name.
    #[error("agent key is empty: no non-blank \"key\" field and file name \"{0}\" has no stem")]
    EmptyKey(String),
}
