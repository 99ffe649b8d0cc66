//! `_bash_` (docs/contract/tools-skills-viewports.md §4.1): one whitelisted command, run without a shell, with
//! its path arguments confined to the allowed roots.
//!
//! This tool is a security boundary. It must never run a program outside the allow-list, hand the
//! command to a shell, or let a path argument reach outside the allowed roots, symlinks included.
//! The checks are in [`policy`], the path resolution in [`paths`], the process handling in
//! [`process`]. The command itself runs in the [`sandbox`](crate::sandbox): its roots are all it
//! can read besides system files, it writes only to a private scratch directory, and it reaches
//! the network or a unix socket only when the agent allows it — so even an allowed command cannot
//! read outside the roots, whatever its arguments.

mod command;
mod config;
mod deny;
pub(crate) mod glob;
mod paths;
mod policy;
mod process;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

pub use command::{BashCommand, BashCommandError};
pub use config::{BashConfig, DEFAULT_ALLOWED_COMMANDS, DEFAULT_PATH_CHECKED_COMMANDS, DEFAULT_WORKING_DIRECTORY};

use super::meta;
use crate::tool::{CodeGrants, Tool, ToolContext, ToolError, ToolOutput};
use command::command_text;

pub(crate) const NAME: &str = "_bash_";

/// The `_bash_` tool.
#[derive(Debug, Clone)]
pub struct BashTool {
    config: Arc<BashConfig>,
}

impl BashTool {
    /// The tool, confined and limited as `config` says.
    pub fn new(config: BashConfig) -> BashTool {
        BashTool { config: Arc::new(config) }
    }

    /// The settings the tool was built with.
    pub fn config(&self) -> &BashConfig {
        &self.config
    }

    /// Runs `command` with no grants (no sockets) and renders the result text of §4.1.
    pub async fn run_command(&self, command: &str) -> String {
        self.run(command, &CodeGrants::default()).await
    }

    /// Runs `command` as the agent whose `grants` are given, and renders the result text of §4.1.
    pub async fn run(&self, command: &str, grants: &CodeGrants) -> String {
        let config = Arc::clone(&self.config);
        let command = command.to_owned();
        // Path checks and glob expansion touch the file system; keep them off the async workers.
        let planned = tokio::task::spawn_blocking(move || {
            let roots = paths::Roots::new(&config.working_directory, &config.allowed_paths);
            let planned = policy::plan(&command, &config, &roots);
            // The dedicated workspace is created on first use (an empty one is a fine root).
            if planned.is_ok()
                && !config.working_directory.exists()
                && let Err(e) = config.ensure_working_directory()
            {
                tracing::warn!(dir = %config.working_directory.display(), error = %e, "cannot create the _bash_ working directory");
            }
            planned.map(|invocation| (invocation, roots.all().to_vec()))
        })
        .await;
        let (invocation, roots) = match planned {
            Ok(Ok(planned)) => planned,
            Ok(Err(refusal)) => return self.render(-1, "", &refusal.to_string()),
            Err(e) => return self.render(-1, "", &format!("internal error while checking the command: {e}")),
        };
        match process::run(&invocation, &self.config, &roots, grants).await {
            Ok(done) => self.render(done.exit_code, &done.stdout, &done.stderr),
            Err(process::RunError::Start(message)) => self.render(-1, "", &message),
            Err(process::RunError::TimedOut) => self.render(-1, "", "Command timed out"),
        }
    }

    fn render(&self, exit_code: i32, stdout: &str, stderr: &str) -> String {
        format!(
            "exitCode: {exit_code}\n\"workingDirectory\": \"{}\"\nstdout:\n{stdout}\nstderr:\n{stderr}",
            self.config.working_directory.display()
        )
    }
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        meta::description(NAME)
    }

    fn parameters(&self) -> Value {
        meta::parameters(NAME)
    }

    fn after_call_hint(&self) -> &str {
        meta::after_call_hint(NAME)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move { Ok(ToolOutput::Text(self.run(&command_text(&args), &ctx.grants).await)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_argument_forms() {
        assert_eq!(command_text(&json!({})), "");
        assert_eq!(command_text(&json!({"command":null})), "null");
        assert_eq!(command_text(&json!({"command":"  ls -la "})), "  ls -la ");
        assert_eq!(command_text(&json!({"command":5})), "5");
    }

    #[tokio::test]
    async fn missing_command() {
        let tool = BashTool::new(BashConfig::from_lists(Some("/app"), [""; 0], [""; 0], [""; 0]));
        assert_eq!(
            tool.run_command("").await,
            "exitCode: -1\n\"workingDirectory\": \"/app\"\nstdout:\n\nstderr:\nMissing argument: command"
        );
        assert_eq!(
            tool.run_command("rm -rf x").await,
            "exitCode: -1\n\"workingDirectory\": \"/app\"\nstdout:\n\nstderr:\nCommand not allowed: rm"
        );
    }
}
