//! The built-in backend tools (docs/contract/tools-skills-viewports.md §4) and [`builtins`], which builds them
//! all from configuration.

pub mod args;
pub(crate) mod bash;
mod city_datetime;
mod java_random;
mod lunar;
mod meta;
mod mock;
mod plan;

use std::sync::Arc;

pub use bash::{
    BashCommand, BashCommandError, BashConfig, BashTool, DEFAULT_ALLOWED_COMMANDS, DEFAULT_PATH_CHECKED_COMMANDS,
    DEFAULT_WORKING_DIRECTORY,
};
pub use city_datetime::CityDatetime;
pub use plan::{PLAN_CONTEXT_UNAVAILABLE, PlanTool};

use crate::tool::Tool;
use meta::PureTool;

/// Settings of the configurable built-ins.
#[derive(Debug, Clone, Default)]
pub struct BuiltinsConfig {
    /// Settings of `_bash_`.
    pub bash: BashConfig,
}

/// Names of every built-in [`builtins`] returns, sorted.
pub const BUILTIN_NAMES: [&str; 13] = [
    bash::NAME,
    plan::ADD_TASKS,
    plan::GET_TASKS,
    plan::UPDATE_TASK,
    city_datetime::NAME,
    mock::messages::NAME,
    mock::weather::NAME,
    mock::image::NAME,
    mock::logistics::NAME,
    mock::ops_runbook::NAME,
    mock::sensitive::NAME,
    mock::todo::NAME,
    mock::transport::NAME,
];

/// Every built-in tool: `_bash_`, the plan tools, `city_datetime` and the `mock_*` tools (one of
/// which, `mock_image_generate`, pauses for the user before it answers)
/// (`agent_file_create` is agw-modes', next to the agent file format). Their metadata (description, schema, hint) is that of the bundled definition files.
pub fn builtins(config: BuiltinsConfig) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(BashTool::new(config.bash)),
        Arc::new(PlanTool::add_tasks()),
        Arc::new(PlanTool::get_tasks()),
        Arc::new(PlanTool::update_task()),
        Arc::new(CityDatetime::new()),
        Arc::new(PureTool { name: mock::messages::NAME, run: mock::messages::run }),
        Arc::new(PureTool { name: mock::weather::NAME, run: mock::weather::run }),
        Arc::new(mock::image::ImageGenerate),
        Arc::new(PureTool { name: mock::logistics::NAME, run: mock::logistics::run }),
        Arc::new(PureTool { name: mock::ops_runbook::NAME, run: mock::ops_runbook::run }),
        Arc::new(PureTool { name: mock::sensitive::NAME, run: mock::sensitive::run }),
        Arc::new(PureTool { name: mock::todo::NAME, run: mock::todo::run }),
        Arc::new(PureTool { name: mock::transport::NAME, run: mock::transport::run }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_implementations() {
        let tools = builtins(BuiltinsConfig::default());
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, BUILTIN_NAMES);
        let mut sorted = BUILTIN_NAMES;
        sorted.sort_unstable();
        assert_eq!(sorted, BUILTIN_NAMES);
    }

    #[test]
    fn every_builtin_has_bundled_metadata() {
        for tool in builtins(BuiltinsConfig::default()) {
            let name = tool.name();
            assert!(meta::bundled(name).is_some(), "{name} has no bundled definition");
            assert!(!tool.description().is_empty(), "{name}");
            assert_eq!(tool.parameters()["type"], "object", "{name}");
        }
    }
}
