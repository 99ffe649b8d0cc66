//! `_skill_run_script_` (tools-skills-viewports.md §4.5): runs a script of a skill inside the
//! skill's directory, or inline Python code, and reports exit code and output.
//!
//! This tool is a security boundary. It must never run anything through a shell, run a file that
//! is not a `.py`/`.sh` regular file inside its skill directory (symlinks are resolved before the
//! check), let the skill argument reach outside the skills root, hand the gateway's environment
//! (provider API keys) to a script, or leave a process or an inline-code file behind.
//!
//! Deliberate differences from the reference:
//! * inline code goes to a private directory made for the call (mode 0700, unique name, under the
//!   system temp dir) and removed with everything in it afterwards — also after a timeout or a
//!   cancelled call — instead of the shared fixed `/tmp/agent-platform-skill-inline/<skill>/`;
//! * `skill` must be one directory name (no `/`, `.`, `..`) whose real location is inside the skills
//!   root; `script` must resolve, after symlinks, to a regular file inside the skill directory, and
//!   that resolved file is what runs and what `script` reports;
//! * the environment is cleared except `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ` (plus
//!   `PYTHONDONTWRITEBYTECODE=1`, `PYTHONUNBUFFERED=1`, `PYTHONIOENCODING=utf-8`); stdin is empty;
//! * on timeout the script's whole process group is killed, and anything a finished script left
//!   running in its group is killed as well.

mod args;
pub(crate) mod paths;
mod process;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agw_tools::sandbox;
use agw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use args::{Limits, Request, Source};

/// The tool's name.
pub const NAME: &str = "_skill_run_script_";
/// Timeout when the call gives none (config.md §10).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(10_000);
/// Largest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(120_000);
/// Characters kept of stdout and of stderr each.
pub const OUTPUT_CAP_CHARS: usize = 8000;
/// Longest `pythonCode`, in characters.
pub const INLINE_MAX_CHARS: usize = 65_536;

/// Where scripts live and how they are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillScriptConfig {
    /// The skills directory (`agent.skill.external-dir`); made absolute by [`SkillRunScript::new`].
    pub skills_root: PathBuf,
    /// Interpreter of `.py` files and inline code (a name looked up in absolute `PATH` entries, or
    /// a path).
    pub python: String,
    /// Interpreter of `.sh` files.
    pub bash: String,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub output_cap_chars: usize,
    pub inline_max_chars: usize,
}

impl SkillScriptConfig {
    /// The contract's defaults: `python3`, `bash`, 10 s / 120 s, 8000 chars, 65536 chars.
    pub fn new(skills_root: impl Into<PathBuf>) -> SkillScriptConfig {
        SkillScriptConfig {
            skills_root: skills_root.into(),
            python: "python3".to_owned(),
            bash: "bash".to_owned(),
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            output_cap_chars: OUTPUT_CAP_CHARS,
            inline_max_chars: INLINE_MAX_CHARS,
        }
    }
}

/// The `_skill_run_script_` tool. Its result is always a JSON object (validation failures
/// included), never a [`ToolError`].
#[derive(Debug, Clone)]
pub struct SkillRunScript {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: SkillScriptConfig,
    description: String,
}

/// What to run once every check passed.
struct Plan {
    /// Lower-cased skill argument.
    skill: String,
    source: &'static str,
    program: String,
    script: PathBuf,
    cwd: PathBuf,
    args: Vec<String>,
    timeout_ms: u64,
    /// Keeps the inline code's private directory until the plan (and the run) is over.
    _inline_dir: Option<tempfile::TempDir>,
}

impl SkillRunScript {
    pub fn new(mut config: SkillScriptConfig) -> SkillRunScript {
        config.skills_root = paths::absolute(&config.skills_root);
        let description = format!(
            "Run a script of a skill inside its skill directory (a .py file with python3, a .sh file with \
             bash), or short inline Python code (pythonCode) with the skill directory as working directory. \
             Give exactly one of script and pythonCode. Arguments are passed as separate strings, never \
             through a shell. Timeout {} ms by default, at most {} ms. The result has ok, exitCode, timedOut, \
             stdout and stderr (each cut at {} characters).",
            millis(config.default_timeout),
            millis(config.max_timeout),
            config.output_cap_chars
        );
        SkillRunScript { inner: Arc::new(Inner { config, description }) }
    }

    pub fn config(&self) -> &SkillScriptConfig {
        &self.inner.config
    }

    /// Runs one call and returns the result object of §4.5.
    pub async fn run(&self, args: &Value) -> Value {
        let root = self.root_for_display();
        let plan = match self.plan(args) {
            Ok(plan) => plan,
            Err(message) => return failure(&root, &message),
        };
        let mut command = vec![plan.program.clone(), plan.script.display().to_string()];
        command.extend(plan.args.iter().cloned());
        let mut argv: Vec<OsString> = vec![plan.script.clone().into_os_string()];
        argv.extend(plan.args.iter().map(OsString::from));
        let config = &self.inner.config;
        let timeout = Duration::from_millis(plan.timeout_ms);
        let outcome = process::run(&plan.program, &argv, &plan.cwd, timeout, config.output_cap_chars).await;
        let (ok, timed_out, exit_code, stdout, stderr) = match outcome {
            Ok(o) => (o.exit_code == 0 && !o.timed_out, o.timed_out, o.exit_code, o.stdout, o.stderr),
            Err(message) => (false, false, -1, String::new(), message),
        };
        if timed_out {
            tracing::info!(skill = %plan.skill, script = %plan.script.display(), timeout_ms = plan.timeout_ms, "skill script timed out; process group killed");
        }
        let result = json!({
            "tool": NAME,
            "skillsRoot": root.display().to_string(),
            "skill": plan.skill,
            "scriptSource": plan.source,
            "script": plan.script.display().to_string(),
            "timeoutMs": plan.timeout_ms,
            "command": command.join(" "),
            "ok": ok,
            "timedOut": timed_out,
            "exitCode": exit_code,
            "stdout": stdout,
            "stderr": stderr,
        });
        // The inline directory goes only now, after the process group is gone.
        drop(plan);
        result
    }

    /// The skills root as reported: its real location when it exists.
    fn root_for_display(&self) -> PathBuf {
        let root = &self.inner.config.skills_root;
        root.canonicalize().unwrap_or_else(|_| root.clone())
    }

    /// §4.5 steps 1–8.
    fn plan(&self, input: &Value) -> Result<Plan, String> {
        let config = &self.inner.config;
        let limits = Limits {
            default_timeout: config.default_timeout,
            max_timeout: config.max_timeout,
            inline_max_chars: config.inline_max_chars,
        };
        let Request { skill, source, args, timeout_ms } = args::parse(input, &limits)?;
        let skill_dir = self.skill_dir(&skill)?;
        let skill_id = skill.to_lowercase();
        match source {
            Source::File(script) => {
                let path = script_path(&skill_dir, &script)?;
                let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
                let program = match extension.as_deref() {
                    Some("py") => config.python.clone(),
                    Some("sh") => config.bash.clone(),
                    _ => return Err("Unsupported script type. Only .py and .sh are allowed.".to_owned()),
                };
                Ok(Plan {
                    skill: skill_id,
                    source: "file",
                    program,
                    script: path,
                    cwd: skill_dir,
                    args,
                    timeout_ms,
                    _inline_dir: None,
                })
            }
            Source::Inline(code) => {
                let (dir, file) = write_inline(&code).map_err(|e| format!("Cannot write inline pythonCode: {e}"))?;
                Ok(Plan {
                    skill: skill_id,
                    source: "inline",
                    program: config.python.clone(),
                    script: file,
                    cwd: skill_dir,
                    args,
                    timeout_ms,
                    _inline_dir: Some(dir),
                })
            }
        }
    }

    /// §4.5 step 6: one directory name whose real location is a directory strictly inside the real
    /// skills root.
    fn skill_dir(&self, skill: &str) -> Result<PathBuf, String> {
        let illegal = || format!("Illegal skill path: {skill}");
        let not_found = || format!("Skill directory not found: {skill}");
        let mut components = Path::new(skill).components();
        let single_name = matches!((components.next(), components.next()), (Some(Component::Normal(_)), None));
        if !single_name || skill.contains(['/', '\\']) {
            return Err(illegal());
        }
        let root = self.inner.config.skills_root.canonicalize().map_err(|_| not_found())?;
        let dir = root.join(skill).canonicalize().map_err(|_| not_found())?;
        if !dir.starts_with(&root) || dir == root {
            return Err(illegal());
        }
        if !dir.is_dir() {
            return Err(not_found());
        }
        Ok(dir)
    }
}

/// §4.5 step 7: a relative path whose real location is a regular file inside the (canonical) skill
/// directory. Returns that real location.
fn script_path(skill_dir: &Path, script: &str) -> Result<PathBuf, String> {
    let illegal = || format!("Illegal script path: {script}");
    let relative = Path::new(script);
    if relative.has_root() || relative.components().any(|c| matches!(c, Component::Prefix(_) | Component::RootDir)) {
        return Err(illegal());
    }
    let resolved = sandbox::resolve_physically(skill_dir, relative).ok_or_else(illegal)?;
    if !resolved.starts_with(skill_dir) {
        return Err(illegal());
    }
    if !std::fs::metadata(&resolved).is_ok_and(|m| m.is_file()) {
        return Err(format!("Script file not found: {script}"));
    }
    Ok(resolved)
}

/// Writes inline code into a fresh private directory as `inline_<uuid>.py`. The directory (mode
/// 0700, random name) is removed, with its contents, when the returned guard drops.
fn write_inline(code: &str) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::Builder::new().prefix("agw-skill-inline-").tempdir()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    }
    let file = dir.path().join(format!("inline_{}.py", uuid::Uuid::new_v4()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(&file)?.write_all(code.as_bytes())?;
    Ok((dir, file))
}

/// The validation failure object.
fn failure(root: &Path, message: &str) -> Value {
    json!({
        "tool": NAME,
        "skillsRoot": root.display().to_string(),
        "ok": false,
        "timedOut": false,
        "exitCode": -1,
        "stdout": "",
        "stderr": "",
        "error": message,
    })
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

impl Tool for SkillRunScript {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn parameters(&self) -> Value {
        let config = &self.inner.config;
        json!({
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": "Skill id: the skill's directory name, e.g. \"math_basic\"."
                },
                "script": {
                    "type": "string",
                    "description": "Script path relative to the skill directory, e.g. \"scripts/calc.py\". Only .py and .sh files. Not together with pythonCode."
                },
                "pythonCode": {
                    "type": "string",
                    "description": format!("Short Python 3 program to run instead of a script (at most {} characters), with the skill directory as working directory. Not together with script.", config.inline_max_chars)
                },
                "args": {
                    "type": "array",
                    "items": { "type": "string" },
                    "description": "Command-line arguments, one string per argument, e.g. [\"--op\", \"add\", \"--a\", \"1\", \"--b\", \"2\"]."
                },
                "timeoutMs": {
                    "type": "integer",
                    "description": format!("Time limit in milliseconds (default {}, at most {}).", millis(config.default_timeout), millis(config.max_timeout))
                }
            },
            "required": ["skill"],
            "additionalProperties": false
        })
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move { Ok(ToolOutput::Json(self.run(&args).await)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults() {
        let config = SkillScriptConfig::new("skills");
        assert_eq!(config.python, "python3");
        assert_eq!(config.bash, "bash");
        assert_eq!(config.default_timeout, Duration::from_secs(10));
        assert_eq!(config.max_timeout, Duration::from_secs(120));
        assert_eq!(config.output_cap_chars, 8000);
        assert_eq!(config.inline_max_chars, 65_536);
        let tool = SkillRunScript::new(config);
        assert!(tool.config().skills_root.is_absolute());
        assert_eq!(tool.name(), NAME);
        assert!(tool.description().contains("10000 ms"));
        assert_eq!(tool.parameters()["required"], json!(["skill"]));
    }

    #[cfg(unix)]
    #[test]
    fn inline_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, file) = write_inline("print(1)").unwrap();
        let path = dir.path().to_path_buf();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("inline_") && name.ends_with(".py") && name.len() == "inline_.py".len() + 36);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "print(1)");
        drop(dir);
        assert!(!path.exists());
    }
}
