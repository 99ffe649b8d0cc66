//! `_plan_add_tasks_`, `_plan_update_task_`, `_plan_get_tasks_` (docs/contract/tools-skills-viewports.md
//! §4.2–§4.4). They read and change the plan of the run that calls them, so the PLAN_EXECUTE
//! runtime answers every call itself and never invokes these implementations. They exist so the
//! registry lists the plan tools as BACKEND tools (with the bundled metadata); invoked directly,
//! outside a run, they answer with an error object.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::meta;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

pub(crate) const ADD_TASKS: &str = "_plan_add_tasks_";
pub(crate) const GET_TASKS: &str = "_plan_get_tasks_";
pub(crate) const UPDATE_TASK: &str = "_plan_update_task_";

/// What a plan tool answers when invoked without a run's plan.
pub const PLAN_CONTEXT_UNAVAILABLE: &str = "Plan context is unavailable in direct invocation";

/// One of the plan tools, as listed by the registry.
#[derive(Debug, Clone, Copy)]
pub struct PlanTool {
    name: &'static str,
}

impl PlanTool {
    /// `_plan_add_tasks_`.
    pub fn add_tasks() -> PlanTool {
        PlanTool { name: ADD_TASKS }
    }

    /// `_plan_update_task_`.
    pub fn update_task() -> PlanTool {
        PlanTool { name: UPDATE_TASK }
    }

    /// `_plan_get_tasks_`.
    pub fn get_tasks() -> PlanTool {
        PlanTool { name: GET_TASKS }
    }
}

impl Tool for PlanTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        meta::description(self.name)
    }

    fn parameters(&self) -> Value {
        meta::parameters(self.name)
    }

    fn after_call_hint(&self) -> &str {
        meta::after_call_hint(self.name)
    }

    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok(ToolOutput::Json(json!({"ok": false, "error": PLAN_CONTEXT_UNAVAILABLE}))) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn direct_invocation_has_no_plan() {
        for tool in [PlanTool::add_tasks(), PlanTool::update_task(), PlanTool::get_tasks()] {
            let out = tool.call(json!({"tasks": [{"description": "x"}]}), &ToolContext::default()).await.unwrap();
            assert_eq!(
                out.to_result_text(),
                r#"{"ok":false,"error":"Plan context is unavailable in direct invocation"}"#,
                "{}",
                tool.name()
            );
            assert!(!tool.description().is_empty(), "{}", tool.name());
            assert_eq!(tool.parameters()["type"], "object");
        }
    }
}
