//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use agw_skills::{SkillRunScript, SkillScriptConfig};
use serde_json::Value;

/// Writes `text` to `path`, creating parent directories.
pub fn write(path: impl AsRef<Path>, text: &str) {
    let path = path.as_ref();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A fresh temporary directory and its canonical path.
pub fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

pub fn tool(root: &Path) -> SkillRunScript {
    SkillRunScript::new(SkillScriptConfig::new(root))
}

pub async fn run(tool: &SkillRunScript, args: Value) -> Value {
    tool.run(&args).await
}

/// The keys of a result object, in order.
pub fn keys(value: &Value) -> Vec<&str> {
    value.as_object().unwrap().keys().map(String::as_str).collect()
}

pub const SUCCESS_KEYS: [&str; 12] = [
    "tool",
    "skillsRoot",
    "skill",
    "scriptSource",
    "script",
    "timeoutMs",
    "command",
    "ok",
    "timedOut",
    "exitCode",
    "stdout",
    "stderr",
];
