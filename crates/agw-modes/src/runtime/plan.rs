//! The plan of a run and the three plan tools that read and change it (contract
//! `docs/contract/tools-skills-viewports.md` §4.2–§4.4, `docs/contract/modes.md` §5.5).
//!
//! The runtime answers every plan-tool call itself: the tools change the run's plan, which the
//! registry's implementations cannot reach. The result texts are what the model reads, so they
//! are kept exactly as the contract gives them (`OK`, `失败: …`, the `_plan_get_tasks_` layout).

use agw_protocol::event::{PlanTask, TaskStatus};
use agw_protocol::history::PlanSnapshot;
use agw_protocol::{AgentDelta, ids};
use serde_json::Value;

// The names are defined once, next to the agent rules that force them into stages.
pub use crate::definition::{
    PLAN_ADD_TASKS_TOOL as PLAN_ADD_TASKS, PLAN_GET_TASKS_TOOL as PLAN_GET_TASKS,
    PLAN_UPDATE_TASK_TOOL as PLAN_UPDATE_TASK,
};

/// Result of a successful `_plan_update_task_`.
pub const RESULT_OK: &str = "OK";
/// `_plan_add_tasks_` without any task description.
pub const RESULT_MISSING_DESCRIPTION: &str = "失败: 缺少任务描述";
/// A status outside `init|completed|failed|canceled`.
pub const RESULT_INVALID_STATUS: &str = "失败: 非法状态，仅支持 init/completed/failed/canceled";
/// `_plan_update_task_` without a `taskId`.
pub const RESULT_MISSING_TASK_ID: &str = "失败: 缺少 taskId";

/// Whether `name` (trimmed, lower-cased) is one of the plan tools the runtime answers.
pub fn is_plan_tool(name: &str) -> bool {
    matches!(name, PLAN_ADD_TASKS | PLAN_UPDATE_TASK | PLAN_GET_TASKS)
}

/// A status argument of a plan tool: trimmed, lower-cased; blank means `init`. `None` for
/// anything else (including the legacy `in_progress`).
pub fn parse_status(raw: &str) -> Option<TaskStatus> {
    match raw.trim().to_lowercase().as_str() {
        "" | "init" => Some(TaskStatus::Init),
        "completed" => Some(TaskStatus::Completed),
        "failed" => Some(TaskStatus::Failed),
        "canceled" => Some(TaskStatus::Canceled),
        _ => None,
    }
}

/// Whether a task still has to run (not completed, canceled or failed).
pub fn is_open(status: TaskStatus) -> bool {
    status == TaskStatus::Init
}

/// What a plan-tool call answered and whether it changed the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanToolResult {
    /// The tool result text the model reads.
    pub text: String,
    pub changed: bool,
}

impl PlanToolResult {
    fn unchanged(text: impl Into<String>) -> Self {
        Self { text: text.into(), changed: false }
    }
}

/// The plan of one run: restored from the chat's last plan or started empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanState {
    pub plan_id: String,
    pub tasks: Vec<PlanTask>,
    /// `dependsOn` of the tasks added in this run (task id → the tasks it waits for): which
    /// tasks may run at once (`planExecute.parallel`). Not stored: a restored plan's tasks are
    /// independent.
    pub depends_on: std::collections::BTreeMap<String, Vec<String>>,
}

impl PlanState {
    /// An empty plan for this chat: `plan_` + MD5 prefix of the chat id.
    pub fn for_chat(chat_id: &str) -> Self {
        Self { plan_id: ids::plan_id_for_chat(chat_id), tasks: Vec::new(), depends_on: Default::default() }
    }

    /// A plan restored from history keeps its stored id (a blank one is replaced by the chat's).
    pub fn restored(snapshot: &PlanSnapshot, chat_id: &str) -> Self {
        let plan_id =
            if snapshot.plan_id.trim().is_empty() { ids::plan_id_for_chat(chat_id) } else { snapshot.plan_id.clone() };
        Self { plan_id, tasks: snapshot.tasks.clone(), depends_on: Default::default() }
    }

    /// The `plan.update` delta showing the plan as it is now.
    pub fn update_delta(&self) -> AgentDelta {
        AgentDelta::PlanUpdate { plan_id: self.plan_id.clone(), plan: self.tasks.clone() }
    }

    /// Index of the first task that still has to run.
    pub fn first_open(&self) -> Option<usize> {
        self.tasks.iter().position(|t| is_open(t.status))
    }

    /// Indexes of the open tasks whose `dependsOn` tasks have all ended, in plan order: what may
    /// run at once now. A task waiting on an open task is not ready; a dependency that names no
    /// task of the plan is ignored.
    pub fn ready(&self) -> Vec<usize> {
        let open = |id: &str| self.tasks.iter().any(|t| t.task_id == id && is_open(t.status));
        (0..self.tasks.len())
            .filter(|&i| is_open(self.tasks[i].status))
            .filter(|&i| self.depends_on.get(&self.tasks[i].task_id).is_none_or(|deps| !deps.iter().any(|d| open(d))))
            .collect()
    }

    pub fn status_of(&self, task_id: &str) -> Option<TaskStatus> {
        self.tasks.iter().find(|t| t.task_id == task_id).map(|t| t.status)
    }

    /// Answers one plan-tool call. `None` when `name` is not a plan tool.
    pub fn call(&mut self, name: &str, args: &Value) -> Option<PlanToolResult> {
        match name {
            PLAN_ADD_TASKS => Some(self.add_tasks(args)),
            PLAN_UPDATE_TASK => Some(self.update_task(args)),
            PLAN_GET_TASKS => Some(PlanToolResult::unchanged(self.get_tasks_text())),
            _ => None,
        }
    }

    /// `_plan_add_tasks_` (§4.2): every `tasks[]` object with a non-blank description becomes a
    /// task; only when none did, the top-level `description`/`status` pair is used. One invalid
    /// status fails the whole call. Ids proposed by the model are ignored: each task gets fresh
    /// 8 hex chars, unique within the plan. Result: `<taskId> | <status> | <description>` lines.
    pub fn add_tasks(&mut self, args: &Value) -> PlanToolResult {
        let mut drafts: Vec<(String, TaskStatus, Vec<Value>)> = Vec::new();
        let items: Vec<&Value> = match args.get("tasks") {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(single @ Value::Object(_)) => vec![single],
            _ => Vec::new(),
        };
        for item in items.into_iter().filter(|i| i.is_object()) {
            let description = text_arg(item.get("description"));
            if description.is_empty() {
                continue;
            }
            let Some(status) = parse_status(&text_arg(item.get("status"))) else {
                return PlanToolResult::unchanged(RESULT_INVALID_STATUS);
            };
            let depends_on = item.get("dependsOn").and_then(Value::as_array).cloned().unwrap_or_default();
            drafts.push((description, status, depends_on));
        }
        if drafts.is_empty() {
            let description = text_arg(args.get("description"));
            if !description.is_empty() {
                let Some(status) = parse_status(&text_arg(args.get("status"))) else {
                    return PlanToolResult::unchanged(RESULT_INVALID_STATUS);
                };
                drafts.push((description, status, Vec::new()));
            }
        }
        if drafts.is_empty() {
            return PlanToolResult::unchanged(RESULT_MISSING_DESCRIPTION);
        }
        let mut lines = Vec::with_capacity(drafts.len());
        let mut added: Vec<String> = Vec::with_capacity(drafts.len());
        for (description, status, _) in &drafts {
            let task_id = self.fresh_task_id();
            lines.push(task_line(&task_id, *status, description));
            self.tasks.push(PlanTask { task_id: task_id.clone(), description: description.clone(), status: *status });
            added.push(task_id);
        }
        // `dependsOn`: a task of the plan by id, or one of this call's tasks by its 1-based
        // position (the model cannot know the ids the gateway is about to mint).
        for ((_, _, depends_on), task_id) in drafts.iter().zip(&added) {
            let deps: Vec<String> = depends_on
                .iter()
                .filter_map(|d| match d {
                    Value::Number(n) => n.as_u64().and_then(|k| added.get((k as usize).checked_sub(1)?)).cloned(),
                    Value::String(id) => self.tasks.iter().find(|t| t.task_id == id.trim()).map(|t| t.task_id.clone()),
                    _ => None,
                })
                .filter(|d| d != task_id)
                .collect();
            if !deps.is_empty() {
                self.depends_on.insert(task_id.clone(), deps);
            }
        }
        PlanToolResult { text: lines.join("\n"), changed: true }
    }

    /// `_plan_update_task_` (§4.3): `OK` once `taskId` and `status` are valid, whether or not the
    /// id names a task of the plan; a known task takes the status and, when given, the trimmed
    /// description.
    pub fn update_task(&mut self, args: &Value) -> PlanToolResult {
        let task_id = text_arg(args.get("taskId"));
        if task_id.is_empty() {
            return PlanToolResult::unchanged(RESULT_MISSING_TASK_ID);
        }
        let Some(status) = parse_status(&text_arg(args.get("status"))) else {
            return PlanToolResult::unchanged(RESULT_INVALID_STATUS);
        };
        let description = text_arg(args.get("description"));
        let mut changed = false;
        if let Some(task) = self.tasks.iter_mut().find(|t| t.task_id == task_id) {
            if task.status != status {
                task.status = status;
                changed = true;
            }
            if !description.is_empty() && task.description != description {
                task.description = description;
                changed = true;
            }
        }
        PlanToolResult { text: RESULT_OK.to_owned(), changed }
    }

    /// `_plan_get_tasks_` (§4.4): the plan id, the task lines and the task to run now.
    pub fn get_tasks_text(&self) -> String {
        let mut out = format!("计划ID: {}\n任务列表:\n", self.plan_id);
        if self.tasks.is_empty() {
            out.push_str("- (空)\n");
        }
        for task in &self.tasks {
            out.push_str(&format!("- {}\n", task_line(&task.task_id, task.status, &task.description)));
        }
        let current = self.first_open().map_or("none", |i| self.tasks[i].task_id.as_str());
        out.push_str(&format!("当前应执行 taskId: {current}"));
        out
    }

    /// `{{task_list}}` of the task prompt: `- <taskId> | <status> | <description>` lines, or
    /// `- (empty)`.
    pub fn task_list_text(&self) -> String {
        if self.tasks.is_empty() {
            return "- (empty)".to_owned();
        }
        self.tasks
            .iter()
            .map(|t| format!("- {}", task_line(&t.task_id, t.status, &t.description)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn fresh_task_id(&self) -> String {
        loop {
            let id = ids::new_task_id();
            if !self.tasks.iter().any(|t| t.task_id == id) {
                return id;
            }
        }
    }
}

fn task_line(task_id: &str, status: TaskStatus, description: &str) -> String {
    format!("{task_id} | {} | {}", status.as_str(), description.trim())
}

/// An argument as trimmed text: strings as they are, absent or null as `""`, anything else as
/// its JSON text.
fn text_arg(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(other) => other.to_string(),
    }
}

/// Renders a runtime prompt template: `{{ name }}` (inner whitespace allowed, name
/// `[a-z0-9_]+`) is replaced by the value of `name` in `vars`; unknown names and anything that is
/// not a placeholder are left as written.
pub fn render_template(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match placeholder(after).and_then(|(name, len)| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (v, len))) {
            Some((value, len)) => {
                out.push_str(value);
                rest = &after[len..];
            }
            None => {
                // Not a placeholder here; one may still start at the next brace (`{{{x}}}`).
                out.push('{');
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parses `  name  }}` at the start of `s`: the name and the length consumed (through `}}`).
fn placeholder(s: &str) -> Option<(&str, usize)> {
    let body = s.trim_start();
    let lead = s.len() - body.len();
    let name_len = body.find(|c: char| !matches!(c, 'a'..='z' | '0'..='9' | '_')).unwrap_or(body.len());
    if name_len == 0 {
        return None;
    }
    let name = &body[..name_len];
    let tail = &body[name_len..];
    let trimmed = tail.trim_start();
    let gap = tail.len() - trimmed.len();
    trimmed.starts_with("}}").then_some((name, lead + name_len + gap + 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hex8(id: &str) -> bool {
        id.len() == 8 && id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
    }

    fn plan(tasks: &[(&str, &str, TaskStatus)]) -> PlanState {
        PlanState {
            plan_id: "plan_chat_1".into(),
            tasks: tasks
                .iter()
                .map(|(id, d, s)| PlanTask { task_id: (*id).into(), description: (*d).into(), status: *s })
                .collect(),
            depends_on: Default::default(),
        }
    }

    #[test]
    fn depends_on_names_tasks_of_the_call_by_position_or_of_the_plan_by_id_and_decides_what_is_ready() {
        let mut plan = plan(&[("aaaaaaaa", "earlier", TaskStatus::Init)]);
        let args = serde_json::json!({"tasks": [
            {"description": "fetch A"},
            {"description": "fetch B", "dependsOn": ["aaaaaaaa"]},
            {"description": "compare", "dependsOn": [1, 2, 3, 9, "nope"]}
        ]});
        assert!(plan.add_tasks(&args).changed);
        let ids: Vec<String> = plan.tasks.iter().map(|t| t.task_id.clone()).collect();
        assert_eq!(plan.depends_on.get(&ids[2]), Some(&vec!["aaaaaaaa".to_owned()]));
        // Itself (3), a position past the call (9) and an unknown id are dropped.
        assert_eq!(plan.depends_on.get(&ids[3]), Some(&vec![ids[1].clone(), ids[2].clone()]));
        assert_eq!(plan.ready(), [0, 1], "the earlier task and fetch A run first");
        plan.update_task(&serde_json::json!({"taskId": "aaaaaaaa", "status": "completed"}));
        assert_eq!(plan.ready(), [1, 2]);
        plan.update_task(&serde_json::json!({"taskId": ids[1], "status": "completed"}));
        plan.update_task(&serde_json::json!({"taskId": ids[2], "status": "canceled"}));
        assert_eq!(plan.ready(), [3], "a cancelled dependency has ended too");
    }

    #[test]
    fn template_placeholders() {
        let vars = [("task_id", "t1"), ("task_description", "check"), ("task_list", "- t1 | init | check")];
        assert_eq!(
            render_template("{{task_list}}\nID: {{ task_id }} / {{\ttask_description  }}", &vars),
            "- t1 | init | check\nID: t1 / check"
        );
        assert_eq!(
            render_template("{{unknown}} {{ Task_ID }} {{task_id", &vars),
            "{{unknown}} {{ Task_ID }} {{task_id"
        );
        assert_eq!(render_template("{{{task_id}}}", &vars), "{t1}");
        assert_eq!(render_template("{{}} {{ }} }} {{task_id}}{{task_id}}", &vars), "{{}} {{ }} }} t1t1");
        assert_eq!(render_template("值: {{task_description}}。", &vars), "值: check。");
        assert_eq!(
            render_template(
                "RUNTIME_TASK_PROMPT\n当前要执行的 taskId: {{task_id}}\n当前任务描述: {{task_description}}",
                &[("task_id", "a1"), ("task_description", "任务A")]
            ),
            "RUNTIME_TASK_PROMPT\n当前要执行的 taskId: a1\n当前任务描述: 任务A"
        );
    }

    #[test]
    fn default_template_renders_the_contract_text() {
        let state = plan(&[("a1b2c3d4", "查询天气", TaskStatus::Completed), ("e5f6a7b8", "汇总", TaskStatus::Init)]);
        let list = state.task_list_text();
        let text = render_template(
            crate::definition::DEFAULT_TASK_EXECUTION_PROMPT_TEMPLATE,
            &[("task_list", &list), ("task_id", "e5f6a7b8"), ("task_description", "汇总")],
        );
        assert_eq!(
            text,
            "Task list:\n- a1b2c3d4 | completed | 查询天气\n- e5f6a7b8 | init | 汇总\nCurrent task ID: e5f6a7b8\n\
             Current task description: 汇总\nExecution rules:\n1) Call at most one tool per round.\n\
             2) You may call any available tool as needed.\n\
             3) Before finishing this task, you MUST call _plan_update_task_ to update its status.\n"
        );
        assert_eq!(PlanState::for_chat("c").task_list_text(), "- (empty)");
    }

    #[test]
    fn status_normalisation() {
        assert_eq!(parse_status(""), Some(TaskStatus::Init));
        assert_eq!(parse_status("  "), Some(TaskStatus::Init));
        assert_eq!(parse_status(" Completed "), Some(TaskStatus::Completed));
        assert_eq!(parse_status("FAILED"), Some(TaskStatus::Failed));
        assert_eq!(parse_status("canceled"), Some(TaskStatus::Canceled));
        assert_eq!(parse_status("init"), Some(TaskStatus::Init));
        for bad in ["in_progress", "done", "cancelled", "null"] {
            assert_eq!(parse_status(bad), None, "{bad}");
        }
        // Restored plans are read leniently: legacy and unknown statuses are `init`.
        let snapshot: PlanSnapshot = serde_json::from_value(json!({"planId":"p","tasks":[
            {"taskId":"t1","description":"a","status":"in_progress"},{"taskId":"t2","description":"b","status":"weird"},
            {"taskId":"t3","description":"c","status":"completed"}]}))
        .unwrap();
        let restored = PlanState::restored(&snapshot, "chat");
        let statuses: Vec<TaskStatus> = restored.tasks.iter().map(|t| t.status).collect();
        assert_eq!(statuses, [TaskStatus::Init, TaskStatus::Init, TaskStatus::Completed]);
        assert_eq!(restored.plan_id, "p", "a restored plan keeps its id");
        assert_eq!(
            PlanState::restored(&PlanSnapshot::new(" ", vec![]), "123e4567-e89b-12d3-a456-426614174000").plan_id,
            "plan_3b32b2dc26c4"
        );
    }

    #[test]
    fn add_tasks_appends_with_fresh_ids() {
        let mut state = PlanState::for_chat("123e4567-e89b-12d3-a456-426614174000");
        assert_eq!(state.plan_id, "plan_3b32b2dc26c4");
        let result = state.add_tasks(&json!({"tasks":[
            {"taskId":"mine","description":"  任务一 ","status":"init"},
            {"description":"任务二","status":" COMPLETED "},
            {"description":"   "},
            "not an object"
        ]}));
        assert!(result.changed);
        let lines: Vec<&str> = result.text.lines().collect();
        assert_eq!(lines.len(), 2, "{}", result.text);
        let (id1, rest1) = lines[0].split_once(" | ").unwrap();
        let (id2, rest2) = lines[1].split_once(" | ").unwrap();
        assert!(hex8(id1) && hex8(id2) && id1 != id2 && id1 != "mine");
        assert_eq!((rest1, rest2), ("init | 任务一", "completed | 任务二"));
        assert_eq!(state.tasks.len(), 2);
        assert_eq!(state.tasks[0].description, "任务一");
        assert_eq!(state.tasks[1].status, TaskStatus::Completed);

        // Append mode: a second call adds behind the existing tasks.
        let again = state.add_tasks(&json!({"tasks":[{"description":"任务三"}]}));
        assert!(again.text.ends_with(" | init | 任务三"));
        assert_eq!(state.tasks.len(), 3);
        let ids: std::collections::HashSet<&str> = state.tasks.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn add_tasks_failures_change_nothing() {
        let mut state = PlanState::for_chat("c");
        let invalid = state.add_tasks(&json!({"tasks":[{"description":"a"},{"description":"b","status":"done"}]}));
        assert_eq!(invalid, PlanToolResult { text: RESULT_INVALID_STATUS.into(), changed: false });
        assert_eq!(invalid.text, "失败: 非法状态，仅支持 init/completed/failed/canceled");
        let progress = state.add_tasks(&json!({"tasks":[{"description":"a","status":"in_progress"}]}));
        assert_eq!(progress.text, RESULT_INVALID_STATUS);
        for args in [json!({}), json!({"tasks":[]}), json!({"tasks":[{"description":" "}]}), json!({"description":""})]
        {
            let r = state.add_tasks(&args);
            assert_eq!(r.text, "失败: 缺少任务描述", "{args}");
            assert!(!r.changed);
        }
        assert!(state.tasks.is_empty());
    }

    #[test]
    fn add_tasks_top_level_pair_only_without_tasks() {
        let mut state = PlanState::for_chat("c");
        let r = state.add_tasks(&json!({"description":"单个任务","status":"canceled","taskId":"x"}));
        assert!(r.text.ends_with(" | canceled | 单个任务"), "{}", r.text);
        let bad = state.add_tasks(&json!({"description":"单个任务","status":"nope"}));
        assert_eq!(bad.text, RESULT_INVALID_STATUS);
        // With valid tasks[] the top-level pair is ignored.
        let r = state.add_tasks(&json!({"tasks":[{"description":"t"}],"description":"ignored","status":"bogus"}));
        assert_eq!(r.text.lines().count(), 1);
        assert!(r.text.ends_with(" | init | t"));
        assert_eq!(state.tasks.len(), 2);
    }

    #[test]
    fn update_task_results_and_effects() {
        let mut state = plan(&[("abc12345", "检查环境", TaskStatus::Init)]);
        assert_eq!(state.update_task(&json!({"status":"completed"})).text, "失败: 缺少 taskId");
        assert_eq!(state.update_task(&json!({"taskId":"  ","status":"completed"})).text, RESULT_MISSING_TASK_ID);
        assert_eq!(state.update_task(&json!({"taskId":"abc12345","status":"done"})).text, RESULT_INVALID_STATUS);
        assert_eq!(state.update_task(&json!({"taskId":"abc12345","status":"in_progress"})).text, RESULT_INVALID_STATUS);
        assert_eq!(state.tasks[0].status, TaskStatus::Init);

        let unknown = state.update_task(&json!({"taskId":"nope0000","status":"completed"}));
        assert_eq!(unknown, PlanToolResult { text: "OK".into(), changed: false }, "unknown ids still answer OK");

        let same = state.update_task(&json!({"taskId":"abc12345"}));
        assert_eq!(same, PlanToolResult { text: "OK".into(), changed: false }, "blank status is init");

        let done = state.update_task(&json!({"taskId":" abc12345 ","status":"Completed","description":"  已检查 "}));
        assert_eq!(done, PlanToolResult { text: "OK".into(), changed: true });
        assert_eq!((state.tasks[0].status, state.tasks[0].description.as_str()), (TaskStatus::Completed, "已检查"));

        let describe_only = state.update_task(&json!({"taskId":"abc12345","status":"completed","description":"新"}));
        assert!(describe_only.changed);
        assert_eq!(state.tasks[0].description, "新");
    }

    #[test]
    fn get_tasks_text() {
        // ToolExecutionServiceTest 1 (the in_progress task was normalised when it was read).
        let state = plan(&[("task1", "检查环境", TaskStatus::Init), ("task2", "执行迁移", TaskStatus::Init)]);
        assert_eq!(
            state.get_tasks_text(),
            "计划ID: plan_chat_1\n任务列表:\n- task1 | init | 检查环境\n- task2 | init | 执行迁移\n当前应执行 taskId: task1"
        );
        let done = plan(&[("t1", "a", TaskStatus::Completed), ("t2", "b", TaskStatus::Failed)]);
        assert!(done.get_tasks_text().ends_with("- t2 | failed | b\n当前应执行 taskId: none"));
        let empty = PlanState { plan_id: "p".into(), tasks: vec![], depends_on: Default::default() };
        assert_eq!(empty.get_tasks_text(), "计划ID: p\n任务列表:\n- (空)\n当前应执行 taskId: none");
    }

    #[test]
    fn dispatch_by_name() {
        let mut state = PlanState::for_chat("c");
        assert!(state.call("_plan_get_tasks_", &json!({})).unwrap().text.contains("当前应执行 taskId: none"));
        assert!(state.call("_plan_add_tasks_", &json!({"tasks":[{"description":"x"}]})).unwrap().changed);
        assert!(state.call("mock_city_weather", &json!({})).is_none());
        assert!(is_plan_tool("_plan_update_task_") && !is_plan_tool("_bash_"));
        assert_eq!(state.first_open(), Some(0));
        match state.update_delta() {
            AgentDelta::PlanUpdate { plan_id, plan } => {
                assert_eq!(plan_id, ids::plan_id_for_chat("c"));
                assert_eq!(plan.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }
}
