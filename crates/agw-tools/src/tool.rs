//! The [`Tool`] trait every backend implementation satisfies, and the values that cross it.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::definition::default_parameters;

/// A backend tool implementation (docs/contract/tools-skills-viewports.md §4).
///
/// Object safe: the registry holds implementations as `Arc<dyn Tool>`. `call` returns a boxed
/// future; dropping it must stop the work (a tool that starts a process spawns it with
/// `kill_on_drop`), because that is how a cancelled run or a timeout stops a tool.
pub trait Tool: Send + Sync {
    /// Lower-case tool name, the key the model calls it by.
    fn name(&self) -> &str;

    /// Description used when no definition file describes the tool.
    fn description(&self) -> &str {
        ""
    }

    /// JSON schema of the arguments used when no definition file describes the tool.
    fn parameters(&self) -> Value {
        default_parameters()
    }

    /// Instruction appended to the prompt for after the call, used when the definition file has
    /// none.
    fn after_call_hint(&self) -> &str {
        ""
    }

    /// Runs the tool. `args` is always a JSON object ([`crate::execute_backend`] turns anything
    /// else into `{}`), with argument templates already resolved.
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// What a tool returns: a JSON value or plain text.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// A JSON result, sent to the model compact with its key order kept.
    Json(Value),
    /// A text result, sent as-is.
    Text(String),
}

impl ToolOutput {
    /// The text sent to the model as the tool result (§5.4): text as-is, JSON compact with its
    /// key order kept, JSON null as `null`.
    pub fn to_result_text(&self) -> String {
        match self {
            ToolOutput::Text(text) => text.clone(),
            ToolOutput::Json(value) => value.to_string(),
        }
    }
}

/// Why a tool call failed. The display text becomes the `error` of the error result object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments can never work; retrying would give the same answer, so it is never retried.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A runtime failure that may go away; retried up to the budget's `retryCount`.
    #[error("{0}")]
    Failed(String),
}

/// Facts about the run a tool is called from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolContext {
    /// The calling run's id.
    pub run_id: String,
    /// The chat the calling run belongs to.
    pub chat_id: String,
    /// What the calling agent lets model-started code do; the default grants nothing.
    pub grants: CodeGrants,
}

impl ToolContext {
    /// A context that grants nothing; add grants with [`Self::with_grants`].
    pub fn new(run_id: impl Into<String>, chat_id: impl Into<String>) -> ToolContext {
        ToolContext { run_id: run_id.into(), chat_id: chat_id.into(), grants: CodeGrants::default() }
    }

    /// The same context with the calling agent's grants.
    pub fn with_grants(mut self, grants: CodeGrants) -> ToolContext {
        self.grants = grants;
        self
    }
}

/// What an agent's definition allows the code its model starts (`_skill_run_script_`,
/// `_bash_`). The default allows nothing, so a caller that forgets to pass an agent's grants
/// fails closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeGrants {
    /// Skill ids the agent configures (trimmed, lower-case): the only skills whose scripts run.
    pub skills: Vec<String>,
    /// `skillConfig.allowInlineCode`: `_skill_run_script_` may run inline `pythonCode`.
    pub allow_inline_code: bool,
    /// `sandbox.network`: started processes may open IP sockets.
    pub network: bool,
    /// `sandbox.unixSockets`: started processes may open `AF_UNIX` sockets, and so connect to any
    /// pathname socket file permissions let them write (a local database's, D-Bus's).
    pub unix_sockets: bool,
}
