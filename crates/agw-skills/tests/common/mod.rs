//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use agw_skills::{SkillRunScript, SkillScriptConfig};
use agw_tools::CodeGrants;
use serde_json::Value;

/// Writes `text` to `path`, creating parent directories.
pub fn write(path: impl AsRef<Path>, text: &str) {
    let path = path.as_ref();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A fresh temporary directory and its canonical path. World-readable like a real skills
/// directory: when the tests run as root, scripts run as an unprivileged sandbox identity, which
/// must be able to read them (tempfile's default mode is 0700).
pub fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

pub fn tool(root: &Path) -> SkillRunScript {
    SkillRunScript::new(SkillScriptConfig::new(root))
}

/// Runs a call as an agent that configures the skill the call names and allows inline code, so
/// these tests exercise the runner; what agents may not do is tested in `grants.rs`.
pub async fn run(tool: &SkillRunScript, args: Value) -> Value {
    tool.run(&args, &grants_for(&args)).await
}

/// Grants of an agent whose only skill is the one `args` names, with inline code allowed.
pub fn grants_for(args: &Value) -> CodeGrants {
    let skill = args.get("skill").and_then(Value::as_str).unwrap_or_default().trim().to_lowercase();
    CodeGrants { skills: vec![skill], allow_inline_code: true, ..CodeGrants::default() }
}

/// Waits up to 3 s for no process with `marker` in its command line to remain (Linux /proc);
/// `true` when none is left.
pub async fn gone(marker: &str) -> bool {
    if !Path::new("/proc/self/cmdline").exists() {
        return true;
    }
    for _ in 0..60 {
        if running(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// Pids of the processes whose command line contains `marker`.
pub fn running(marker: &str) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline).contains(marker).then_some(pid)
        })
        .filter(|pid| *pid != std::process::id())
        .collect()
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
