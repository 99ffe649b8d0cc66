//! Keys from older schema versions (docs/contract/agent-definitions.md §8). They are rejected rather than
//! ignored: silently dropping e.g. a v1 top-level `model` would run the agent on another model
//! than its author asked for. Presence alone rejects, whatever the value (`null` included).

use super::error::DefinitionError;
use super::raw::Obj;

const TOP_LEVEL_LEGACY: &[&str] = &["deepThink", "systemPrompt", "providerKey", "model", "reasoning", "tools"];
const TOP_LEVEL_REMOVED: &[&str] = &["verify", "output", "toolPolicy"];
const STAGE_LEGACY: &[&str] = &["providerKey", "model", "reasoning", "tools"];
const RUNTIME_PROMPTS_REMOVED: &[&str] = &["verify", "finalAnswer", "oneshot", "react"];
const PLAN_EXECUTE_PROMPTS_REMOVED: &[&str] = &[
    "executeToolsTitle",
    "planCallableToolsTitle",
    "draftInstructionBlock",
    "generateInstructionBlockFromDraft",
    "generateInstructionBlockDirect",
    "taskRequireToolUserPrompt",
    "taskMultipleToolsUserPrompt",
    "taskUpdateNoProgressUserPrompt",
    "taskContinueUserPrompt",
    "updateRoundPromptTemplate",
    "updateRoundMultipleToolsUserPrompt",
    "allStepsCompletedUserPrompt",
];

/// Fails on the first rejected key, walking the file top-down. Blocks of the wrong type are left
/// for the parser, which reports them with their expected type.
pub fn check(root: &Obj<'_>) -> Result<(), DefinitionError> {
    reject(root, TOP_LEVEL_LEGACY, "legacy")?;
    reject(root, TOP_LEVEL_REMOVED, "removed")?;
    for stage in ["plain", "react"] {
        if let Ok(Some(block)) = root.obj(stage) {
            reject(&block, STAGE_LEGACY, "legacy")?;
        }
    }
    if let Ok(Some(plan_execute)) = root.obj("planExecute") {
        for stage in ["plan", "execute", "summary"] {
            if let Ok(Some(block)) = plan_execute.obj(stage) {
                reject(&block, STAGE_LEGACY, "legacy")?;
            }
        }
    }
    if let Ok(Some(prompts)) = root.obj("runtimePrompts") {
        reject(&prompts, RUNTIME_PROMPTS_REMOVED, "removed")?;
        if let Ok(Some(plan_execute)) = prompts.obj("planExecute") {
            reject(&plan_execute, PLAN_EXECUTE_PROMPTS_REMOVED, "removed")?;
        }
    }
    Ok(())
}

fn reject(obj: &Obj<'_>, keys: &[&str], kind: &'static str) -> Result<(), DefinitionError> {
    match keys.iter().find(|key| obj.contains(key)) {
        None => Ok(()),
        Some(key) => Err(DefinitionError::RejectedField {
            kind,
            field: (*key).to_owned(),
            location: if obj.path().is_empty() { "at top level".to_owned() } else { format!("in \"{}\"", obj.path()) },
        }),
    }
}
