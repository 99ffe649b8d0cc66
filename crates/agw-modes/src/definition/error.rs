//! Why an agent file was rejected. Every message names the offending field so an agent author can
//! fix the file from the log line alone; the catalog prefixes the file path.

use thiserror::Error;

/// A reason to skip one agent definition file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DefinitionError {
    #[error("invalid JSON: {0}")]
    Syntax(String),
    #[error("the root of an agent file must be a JSON object")]
    RootNotObject,
    #[error("field \"{field}\" must be {expected}, found {found}")]
    WrongType { field: String, expected: &'static str, found: &'static str },
    #[error("field \"{field}\" is out of range: {value}")]
    OutOfRange { field: String, value: String },
    #[error("field \"{field}\" has invalid value \"{value}\" (expected one of {expected})")]
    InvalidEnum { field: String, value: String, expected: &'static str },
    /// `location` is `at top level` or `in "<path>"`.
    #[error("rejected {kind} field \"{field}\" {location}")]
    RejectedField { kind: &'static str, field: String, location: String },
    #[error("budget legacy fields are not supported: {}", .0.join(", "))]
    BudgetLegacy(Vec<String>),
    #[error("budget contains unsupported fields: {}", .0.join(", "))]
    BudgetUnsupported(Vec<String>),
    #[error("agent has no mode (field \"mode\" is required)")]
    MissingMode,
    #[error("unknown mode \"{0}\" (expected ONESHOT, REACT or PLAN_EXECUTE)")]
    UnknownMode(String),
    #[error("agent has no modelConfig (top-level or stage-level)")]
    NoModelConfig,
    /// Carries the wording of the rule, e.g. `plain.systemPrompt is required`.
    #[error("{0}")]
    MissingPrompt(&'static str),
    #[error("field \"{0}.deepThinking\" is not allowed (only planExecute.plan may set it)")]
    DeepThinkingNotAllowed(&'static str),
    #[error("agent key is empty: no non-blank \"key\" field and file name \"{0}\" has no stem")]
    EmptyKey(String),
}
