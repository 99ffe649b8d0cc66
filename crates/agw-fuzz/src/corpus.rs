//! Where each target's inputs live, relative to the workspace root:
//!
//! * seeds — the repository's real files of that kind (`fixtures/agents`, `fixtures/tools`,
//!   `fixtures/skills`) plus hand-written samples in `fuzz/seeds/<target>/`;
//! * regressions — inputs that once crashed a body, `fuzz/regressions/<target>/`, each kept as a
//!   test case forever.
//!
//! libFuzzer reads the same directories (`fuzz/run.sh` passes them as extra corpus dirs).

use std::path::{Path, PathBuf};

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Seed directories of `target`, relative to the workspace root.
pub fn seed_dirs(target: &str) -> Vec<String> {
    let mut dirs = vec![format!("fuzz/seeds/{target}")];
    match target {
        "agent_definition" => dirs.push("fixtures/agents".into()),
        "tool_definition" => dirs.push("fixtures/tools".into()),
        "skill_md" => dirs.push("fixtures/skills".into()),
        _ => {}
    }
    dirs
}

/// Field names and markers of `target`'s format, for the mutator.
pub fn dictionary(target: &str) -> &'static [&'static str] {
    match target {
        "agent_definition" => &[
            "key",
            "name",
            "mode",
            "ONESHOT",
            "REACT",
            "PLAN_EXECUTE",
            "modelConfig",
            "providerKey",
            "model",
            "reasoning",
            "enabled",
            "effort",
            "toolConfig",
            "backends",
            "frontends",
            "actions",
            "toolChoice",
            "budget",
            "runTimeoutMs",
            "maxCalls",
            "timeoutMs",
            "retryCount",
            "plain",
            "react",
            "planExecute",
            "plan",
            "execute",
            "summary",
            "systemPrompt",
            "deepThinking",
            "maxSteps",
            "skills",
            "skillConfig",
            "runtimePrompts",
            "\"\"\"",
            "\"systemPrompt\": \"\"\"",
            "\"\"\"\n",
            "//",
            "/*",
            "*/",
            "#",
            "stages",
            "providerType",
            "tools",
        ],
        "sse_chunk" => &[
            "data: ",
            "data:",
            "\n\n",
            "event: ",
            "id: ",
            ": keep-alive\n",
            "[DONE]",
            "choices",
            "delta",
            "content",
            "reasoning_content",
            "reasoning",
            "tool_calls",
            "index",
            "id",
            "function",
            "name",
            "arguments",
            "finish_reason",
            "usage",
            "error",
            "role",
            "type",
            "logprobs",
        ],
        "query_request" => &[
            "requestId",
            "chatId",
            "agentKey",
            "role",
            "message",
            "references",
            "params",
            "scene",
            "stream",
            "url",
            "title",
            "type",
            "id",
            "__agw_emit_chat_start",
            "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01",
        ],
        "submit_request" => &["runId", "toolId", "params", "selectedOption", "selectedIndex"],
        "skill_md" => &[
            "---",
            "\n---\n",
            "name:",
            "description:",
            "license:",
            "metadata:",
            "|",
            ">",
            "&a",
            "*a",
            "!!str",
            "? ",
            "- ",
            "# ",
            "'",
            "%YAML 1.2\n",
            "<<: *a",
        ],
        "tool_definition" => &[
            "tools",
            "type",
            "function",
            "name",
            "description",
            "parameters",
            "afterCallHint",
            "toolApi",
            "properties",
            "required",
            "object",
            "string",
        ],
        "history_line" => &[
            "_type",
            "query",
            "step",
            "chatId",
            "runId",
            "updatedAt",
            "_stage",
            "_seq",
            "taskId",
            "system",
            "plan",
            "planSnapshot",
            "tasks",
            "messages",
            "role",
            "content",
            "reasoning_content",
            "tool_calls",
            "tool_call_id",
            "_msgId",
            "_toolId",
            "_actionId",
            "_reasoningId",
            "_contentId",
            "_timing",
            "_usage",
            "ts",
            "text",
            "status",
            "in_progress",
        ],
        _ => &[],
    }
}

/// Every file under `dir` (recursively), sorted by path; nothing when it does not exist.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, bytes));
        }
    }
    out
}

/// The seed inputs of `target`.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let root = workspace_root();
    seed_dirs(target).iter().flat_map(|dir| files_under(&root.join(dir))).map(|(_, bytes)| bytes).collect()
}

/// The saved crash inputs of `target`, with their paths.
pub fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    files_under(&workspace_root().join("fuzz/regressions").join(target))
}
