//! `agent.tools.*` and `agw.tools.*`: frontend waits, result size, the `_bash_` sandbox and
//! `agent_file_create`.

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use super::source::Source;
use super::table::{
    AGENT_BASH_ALLOWED_COMMANDS, AGENT_BASH_ALLOWED_PATHS, AGENT_BASH_PATH_CHECKED_COMMANDS,
    AGENT_BASH_WORKING_DIRECTORY, AGENT_TOOLS_AGENT_FILE_CREATE_DEFAULT_SYSTEM_PROMPT,
    AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS, AGW_SUB_AGENTS_MAX_DEPTH, AGW_SUB_AGENTS_MAX_TASKS,
    AGW_TOOLS_AGENT_FILE_CREATE_ALLOW_OVERWRITE, AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_SKILLS,
    AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_TOOLS, AGW_TOOLS_MAX_OUTPUT_BYTES,
};
use super::{ConfigError, value};

/// `agent.tools.*` and `agw.tools.*`: settings of the built-in tools.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    /// How long a frontend tool waits for its submit (at least 1 ms, docs/contract/config.md §4).
    pub frontend_submit_timeout: Duration,
    /// Tool results longer than this are cut on a UTF-8 boundary.
    pub max_output_bytes: usize,
    /// `agent.tools.bash.*`: what `_bash_` may run and touch.
    pub bash: BashSettings,
    /// The system prompt `agent_file_create` writes when none is given; `None`: its default.
    pub agent_file_default_prompt: Option<String>,
    /// `agw.tools.agent-file-create.allowed-tools`; `None` = the built-in default list.
    pub agent_file_allowed_tools: Option<Vec<String>>,
    /// Skills `agent_file_create` may grant (lower-cased); empty = none.
    pub agent_file_allowed_skills: Vec<String>,
    /// Whether `agent_file_create` may replace an existing or bundled agent.
    pub agent_file_allow_overwrite: bool,
    /// `agw.sub-agents.*`: how many tasks one `agent_invoke` starts, how deep sub-agents nest.
    pub sub_agents: agw_modes::runtime::SubAgentLimits,
}

/// `agent.tools.bash.*`, as configured (the tool applies its defaults to empty lists).
#[derive(Debug, Clone)]
pub struct BashSettings {
    /// The first allowed root and the directory commands run in (default `bash-workspace`).
    pub working_directory: Option<PathBuf>,
    /// Further roots `_bash_` may touch.
    pub allowed_paths: Vec<String>,
    /// Commands `_bash_` may run; empty: the tool's default list.
    pub allowed_commands: Vec<String>,
    /// Commands whose path arguments must stay inside the roots; empty: the tool's default list.
    pub path_checked_commands: Vec<String>,
}

pub(super) fn load(src: &Source) -> Result<ToolSettings, ConfigError> {
    Ok(ToolSettings {
        frontend_submit_timeout: src
            .parse(&AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS, value::millis)?
            .max(Duration::from_millis(1)),
        max_output_bytes: src.parse(&AGW_TOOLS_MAX_OUTPUT_BYTES, value::whole)?,
        bash: BashSettings {
            working_directory: src.parse_opt(&AGENT_BASH_WORKING_DIRECTORY, value::path)?,
            allowed_paths: src.parse_opt(&AGENT_BASH_ALLOWED_PATHS, value::list)?.unwrap_or_default(),
            allowed_commands: src.parse_opt(&AGENT_BASH_ALLOWED_COMMANDS, value::list)?.unwrap_or_default(),
            path_checked_commands: src.parse_opt(&AGENT_BASH_PATH_CHECKED_COMMANDS, value::list)?.unwrap_or_default(),
        },
        agent_file_default_prompt: src.parse_opt(&AGENT_TOOLS_AGENT_FILE_CREATE_DEFAULT_SYSTEM_PROMPT, value::text)?,
        agent_file_allowed_tools: src.parse_opt(&AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_TOOLS, names)?,
        agent_file_allowed_skills: src
            .parse_opt(&AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_SKILLS, names)?
            .unwrap_or_default(),
        agent_file_allow_overwrite: src.parse(&AGW_TOOLS_AGENT_FILE_CREATE_ALLOW_OVERWRITE, value::bool)?,
        sub_agents: agw_modes::runtime::SubAgentLimits {
            max_tasks: src.parse::<usize, _>(&AGW_SUB_AGENTS_MAX_TASKS, value::whole)?.max(1),
            // Deeper than the hard cap is the cap (the run core enforces it too).
            max_depth: src
                .parse::<u32, _>(&AGW_SUB_AGENTS_MAX_DEPTH, value::whole)?
                .min(agw_modes::runtime::MAX_DEPTH_CAP),
        },
    })
}

/// A list of tool or skill names, lower-cased; the single word `none` is the empty list (an
/// empty value means "unset", i.e. the default).
fn names(s: &str) -> Result<Vec<String>, Infallible> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let Ok(names) = value::list(s);
    Ok(names.into_iter().map(|n| n.to_lowercase()).collect())
}
