//! `runtimePrompts` (docs/contract/agent-definitions.md §7): texts the gateway adds around the agent's own
//! prompts. agw's defaults are English (README decision table); every one stays overridable.

use super::error::DefinitionError;
use super::raw::Obj;

/// Per-task user message of PLAN_EXECUTE (docs/contract/modes.md §5.3); ends with a newline, verbatim.
pub const DEFAULT_TASK_EXECUTION_PROMPT_TEMPLATE: &str = "Task list:
{{task_list}}
Current task ID: {{task_id}}
Current task description: {{task_description}}
Execution rules:
1) Call at most one tool per round.
2) You may call any available tool as needed.
3) Before finishing this task, you MUST call _plan_update_task_ to update its status.
";
/// Heads the skill catalog in the system prompt.
pub const DEFAULT_SKILL_CATALOG_HEADER: &str = "Available skills (catalog summary; use them as needed \
and do not invent skills or scripts that do not exist):";
/// Heads the full instructions of the skills the model just used.
pub const DEFAULT_SKILL_DISCLOSURE_HEADER: &str = "Full instructions of the skills you just called \
(supplement for this turn only; do not ignore them):";
/// Precedes one skill's instructions in the disclosure.
pub const DEFAULT_SKILL_INSTRUCTIONS_LABEL: &str = "instructions:";
/// Heads the tool descriptions of the prompt's tool appendix.
pub const DEFAULT_TOOL_DESCRIPTION_TITLE: &str = "Tool descriptions:";
/// Heads the tools' after-call hints in the tool appendix.
pub const DEFAULT_AFTER_CALL_HINT_TITLE: &str = "Recommended instructions after tool calls:";

/// The runtime prompts of one agent, defaults already applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePrompts {
    /// Placeholders `{{task_list}}`, `{{task_id}}`, `{{task_description}}`.
    pub task_execution_prompt_template: String,
    /// `skill.catalogHeader`; see [`DEFAULT_SKILL_CATALOG_HEADER`].
    pub skill_catalog_header: String,
    /// `skill.disclosureHeader`; see [`DEFAULT_SKILL_DISCLOSURE_HEADER`].
    pub skill_disclosure_header: String,
    /// Always ends with `:` (the contract appends one when missing), so it is used as-is.
    pub skill_instructions_label: String,
    /// `toolAppendix.toolDescriptionTitle`; see [`DEFAULT_TOOL_DESCRIPTION_TITLE`].
    pub tool_description_title: String,
    /// `toolAppendix.afterCallHintTitle`; see [`DEFAULT_AFTER_CALL_HINT_TITLE`].
    pub after_call_hint_title: String,
}

impl Default for RuntimePrompts {
    fn default() -> Self {
        RuntimePrompts {
            task_execution_prompt_template: DEFAULT_TASK_EXECUTION_PROMPT_TEMPLATE.to_owned(),
            skill_catalog_header: DEFAULT_SKILL_CATALOG_HEADER.to_owned(),
            skill_disclosure_header: DEFAULT_SKILL_DISCLOSURE_HEADER.to_owned(),
            skill_instructions_label: DEFAULT_SKILL_INSTRUCTIONS_LABEL.to_owned(),
            tool_description_title: DEFAULT_TOOL_DESCRIPTION_TITLE.to_owned(),
            after_call_hint_title: DEFAULT_AFTER_CALL_HINT_TITLE.to_owned(),
        }
    }
}

type Slot = fn(&mut RuntimePrompts) -> &mut String;

/// `(section, key, field)` for every overridable prompt.
const FIELDS: [(&str, &str, Slot); 6] = [
    ("planExecute", "taskExecutionPromptTemplate", |p| &mut p.task_execution_prompt_template),
    ("skill", "catalogHeader", |p| &mut p.skill_catalog_header),
    ("skill", "disclosureHeader", |p| &mut p.skill_disclosure_header),
    ("skill", "instructionsLabel", |p| &mut p.skill_instructions_label),
    ("toolAppendix", "toolDescriptionTitle", |p| &mut p.tool_description_title),
    ("toolAppendix", "afterCallHintTitle", |p| &mut p.after_call_hint_title),
];

/// Reads `runtimePrompts` (absent → all defaults). Values are trimmed; blank → default.
pub fn parse(prompts: Option<&Obj<'_>>) -> Result<RuntimePrompts, DefinitionError> {
    let mut out = RuntimePrompts::default();
    let Some(prompts) = prompts else {
        return Ok(out);
    };
    for (section, key, slot) in FIELDS {
        let Some(block) = prompts.obj(section)? else {
            continue;
        };
        if let Some(value) = block.str(key)?.map(str::trim).filter(|v| !v.is_empty()) {
            *slot(&mut out) = value.to_owned();
        }
    }
    if !out.skill_instructions_label.ends_with(':') {
        out.skill_instructions_label.push(':');
    }
    Ok(out)
}
