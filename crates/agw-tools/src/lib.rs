//! agw-tools — the tools a model can call, and the viewports that render them.
//!
//! Owns:
//! * tool definition files (`*.backend` / `*.frontend` / `*.action`) and their rules
//!   ([`ToolDef`], [`ToolKind`]), merged with the built-in implementations into a [`ToolRegistry`]
//!   (conflicts, skipped files and entries are reported as [`LoadProblem`]s, never panics);
//! * the [`Tool`] trait of backend implementations, [`execute_backend`] (per-attempt timeout,
//!   retries, error result objects; a tool that needs the user first answers
//!   [`ToolOutput::NeedsUser`], surfaced as [`BackendOutcome::NeedsUser`]) and [`truncate_output`];
//! * argument templates `{{tool.field±Nd}}` ([`resolve`]);
//! * the built-in tools ([`builtins`]): `_bash_`, `city_datetime`, the deterministic `mock_*` tools,
//!   and the plan tools (listed only: the PLAN_EXECUTE runtime answers them); the lenient reading
//!   of tool arguments ([`builtin::args`]) shared with tools implemented elsewhere;
//! * the one reading of a `_bash_` command text into program and arguments ([`BashCommand`]),
//!   which agw-modes' approval rules match, so a rule and `_bash_` never disagree on a command;
//! * the [`ViewportRegistry`] (`.html`, `.qlc`, `.dqlc`, `.json_schema`, `.custom`);
//! * the bundled definition files and viewports ([`bundled`]);
//! * the OS sandbox (Landlock, seccomp, resource limits, an unprivileged identity) and the
//!   child-process and path-confinement helpers shared by `_bash_` and agw-skills'
//!   `_skill_run_script_` ([`sandbox`]).
//!
//! Contract: docs/contract/tools-skills-viewports.md §1–§8, §10–§11 and docs/contract/config.md §4 of the shared spec.
//!
//! Must never: talk to a model provider, write SSE, know about HTTP or agents' modes or agent
//! files (`agent_file_create`, which writes them, is agw-modes'), or block a run beyond the timeout
//! it was given. `_bash_` must never start a shell, run a program outside its allow-list or
//! outside the [`sandbox`], or let a path argument reach outside its allowed roots (symlinks are
//! followed before the check); reading a definition or viewport directory never follows a symlink
//! out of it.

pub mod builtin;
pub mod bundled;
mod dates;
pub mod definition;
mod dirscan;
pub mod exec;
pub mod registry;
// The only unsafe of the crate: rlimits, setuid/setgid and no_new_privs between fork and exec,
// each with its SAFETY comment.
#[allow(unsafe_code)]
pub mod sandbox;
pub mod templates;
pub mod tool;
pub mod viewport;

pub use builtin::{
    BUILTIN_NAMES, BashCommand, BashCommandError, BashConfig, BashTool, BuiltinsConfig, CityDatetime,
    PLAN_CONTEXT_UNAVAILABLE, PlanTool, builtins,
};
pub use definition::{
    A2A_NAMESPACE, CitationFields, DefinitionFileError, ToolDef, ToolKind, a2a_tool_name, default_parameters,
};

/// Shell-style wildcard match of a whole string (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`; an unclosed
/// `[` is literal) — the matcher `_bash_` uses for file names, shared with the modes' tool-approval
/// rules so both read patterns the same way.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    builtin::bash::glob::matches(pattern, text)
}
pub use exec::{
    BackendOutcome, DEFAULT_RESULT_LIMIT_BYTES, error_result, execute_backend, execute_backend_streaming,
    truncate_output,
};
pub use registry::{LoadProblem, ToolRegistry};
pub use templates::{RecordedCall, resolve};
pub use tool::{
    CONTINUE_CODE, CodeGrants, NEEDS_USER_CODE, Tool, ToolContext, ToolError, ToolOutput, USER_STATUS_DATA_MAX_BYTES,
    USER_STATUS_MESSAGE_MAX_CHARS, UserReply, UserStatus,
};
pub use viewport::{Viewport, ViewportFileError, ViewportKind, ViewportPayload, ViewportRegistry};
