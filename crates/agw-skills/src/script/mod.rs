//! `_skill_run_script_` (docs/contract/tools-skills-viewports.md §4.5): runs a script of a skill inside the
//! skill's directory, or inline Python code, and reports exit code and output.
//!
//! This tool is a security boundary. It must never run anything through a shell, run a file that
//! is not a `.py`/`.sh` regular file inside its skill directory (symlinks are resolved before the
//! check), let the skill argument reach outside the skills root, hand the gateway's environment
//! (provider API keys) to a script, or leave a process or an inline-code file behind.
//!
//! What the calling agent allows ([`CodeGrants`]) is checked before anything touches the disk:
//! `skill` must be one of the agent's configured skills, and inline `pythonCode` runs only for an
//! agent with `skillConfig.allowInlineCode: true`. Every script then runs in the OS sandbox
//! ([`agw_tools::sandbox`]): the skill directory, the interpreter's files and the inline code are
//! read-only, a private scratch directory is `HOME`/`TMPDIR` and the only writable place, the
//! network is closed unless the agent's `sandbox.network` opens it, unix sockets (a local
//! database's) unless its `sandbox.unixSockets` does, and resource limits apply.
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

use agw_tools::sandbox::{self, Cell, Policy, SandboxConfig};
use agw_tools::{CodeGrants, Tool, ToolContext, ToolError, ToolOutput, UserStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use args::{Limits, Request, Source};

/// The tool's name.
pub const NAME: &str = "_skill_run_script_";
/// Timeout when the call gives none (docs/contract/config.md §10).
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
    /// Used when a call gives no valid `timeoutMs` (absent, not a number, below 1 ms).
    pub default_timeout: Duration,
    /// A larger `timeoutMs` is lowered to this.
    pub max_timeout: Duration,
    /// Characters kept of stdout and of stderr each; the rest is cut.
    pub output_cap_chars: usize,
    /// Longest `pythonCode` accepted, in characters.
    pub inline_max_chars: usize,
    /// How scripts are confined.
    pub sandbox: SandboxConfig,
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
            sandbox: SandboxConfig::default(),
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

/// Why a call is refused before anything runs (§4.5 steps 1–8, the agent's grants, the sandbox).
/// The display text is the `error` of the failure object.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error(transparent)]
    Args(#[from] args::ArgsError),
    /// The skill is not one of the agent's (`allowed`: the agent's skill ids).
    #[error("Skill not enabled for this agent: {skill}. {}", granted(.allowed))]
    SkillNotEnabled { skill: String, allowed: Vec<String> },
    #[error(
        "Inline pythonCode is not enabled for this agent (skillConfig.allowInlineCode is false); \
         run one of the skill's scripts instead."
    )]
    InlineNotEnabled,
    /// `skill` is not one directory name strictly inside the skills root.
    #[error("Illegal skill path: {0}")]
    IllegalSkillPath(String),
    #[error("Skill directory not found: {0}")]
    SkillNotFound(String),
    /// `script` is absolute, or resolves outside the skill directory.
    #[error("Illegal script path: {0}")]
    IllegalScriptPath(String),
    #[error("Script file not found: {0}")]
    ScriptNotFound(String),
    #[error("Unsupported script type. Only .py and .sh are allowed.")]
    UnsupportedScriptType,
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    #[error("Cannot write inline pythonCode: {0}")]
    WriteInline(#[source] std::io::Error),
}

/// The end of a [`Refusal::SkillNotEnabled`] message: the agent's skills, or that it has none.
fn granted(allowed: &[String]) -> String {
    if allowed.is_empty() {
        "This agent has no skills configured.".to_owned()
    } else {
        format!("Allowed skills: {}", allowed.join(", "))
    }
}

/// What to run once every check passed.
struct Plan {
    /// Lower-cased skill argument.
    skill: String,
    source: &'static str,
    /// The interpreter as configured (what `command` reports).
    program: String,
    /// The interpreter's real file and prefixes; `None` when no usable one was found.
    interpreter: Option<sandbox::Program>,
    /// Python gets its real path as `argv[0]`, so `sys.executable` and its prefix are right.
    is_python: bool,
    script: PathBuf,
    cwd: PathBuf,
    args: Vec<String>,
    timeout_ms: u64,
    network: bool,
    unix_sockets: bool,
    // Field order is drop order: the cell first (every process of the call is killed, the
    // scratch directory removed), then the inline code's directory.
    cell: Cell,
    /// Keeps the inline code's private directory until the plan (and the run) is over.
    inline_dir: Option<tempfile::TempDir>,
}

impl SkillRunScript {
    /// The tool over `config`, its description stating the configured limits.
    pub fn new(mut config: SkillScriptConfig) -> SkillRunScript {
        config.skills_root = paths::absolute(&config.skills_root);
        let description = format!(
            "Run a script of a skill inside its skill directory (a .py file with python3, a .sh file with \
             bash), or short inline Python code (pythonCode) with the skill directory as working directory. \
             Give exactly one of script and pythonCode. Arguments are passed as separate strings, never \
             through a shell. Only this agent's skills can be used, and pythonCode only if the agent enables \
             it. Scripts run sandboxed: the skill directory is read-only, HOME and TMPDIR are a private \
             writable directory (the only one), the network and unix sockets are closed unless the agent \
             enables them, and CPU, memory, file size and process count are limited. Timeout {} ms by \
             default, at most {} ms. The result has ok, exitCode, timedOut, stdout and stderr (each cut at {} \
             characters).",
            millis(config.default_timeout),
            millis(config.max_timeout),
            config.output_cap_chars
        );
        SkillRunScript { inner: Arc::new(Inner { config, description }) }
    }

    /// The settings in effect, `skills_root` absolute.
    pub fn config(&self) -> &SkillScriptConfig {
        &self.inner.config
    }

    /// Runs one call for an agent with `grants` and returns the result object of §4.5.
    pub async fn run(&self, args: &Value, grants: &CodeGrants) -> Value {
        self.run_continued(args, grants, 0).await
    }

    /// [`Self::run`] for a call the user continued `continued` times after it paused for them:
    /// the script finds the count in `AGW_TOOL_CONTINUED`.
    pub async fn run_continued(&self, args: &Value, grants: &CodeGrants, continued: u32) -> Value {
        let root = self.root_for_display();
        let mut plan = match self.plan(args, grants) {
            Ok(plan) => plan,
            Err(refusal) => return failure(&root, &refusal.to_string()),
        };
        let mut command = vec![plan.program.clone(), plan.script.display().to_string()];
        command.extend(plan.args.iter().cloned());
        let mut argv: Vec<OsString> = vec![plan.script.clone().into_os_string()];
        argv.extend(plan.args.iter().map(OsString::from));
        let config = &self.inner.config;
        let timeout = Duration::from_millis(plan.timeout_ms);
        let outcome = match &plan.interpreter {
            None => Err(process::CannotRun { program: plan.program.clone(), reason: process::StartFailure::NotFound }),
            Some(interpreter) => {
                let mut policy = Policy { network: plan.network, unix_sockets: plan.unix_sockets, ..Policy::default() };
                policy.read_exec.push(plan.cwd.clone());
                policy.read_exec.push(interpreter.path.clone());
                policy.read_exec.extend(interpreter.prefixes.iter().cloned());
                policy.read_only.extend(plan.inline_dir.as_ref().map(|dir| dir.path().to_path_buf()));
                let arg0 =
                    if plan.is_python { interpreter.path.as_os_str().to_owned() } else { plan.program.clone().into() };
                let start = process::Start {
                    program: &plan.program,
                    executable: &interpreter.path,
                    arg0,
                    args: &argv,
                    continued,
                };
                process::run(start, &plan.cwd, timeout, config.output_cap_chars, &mut plan.cell, &policy).await
            }
        };
        let (ok, timed_out, exit_code, stdout, stderr) = match outcome {
            Ok(o) => (o.exit_code == 0 && !o.timed_out, o.timed_out, o.exit_code, o.stdout, o.stderr),
            Err(cannot_run) => (false, false, -1, String::new(), cannot_run.to_string()),
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

    /// §4.5 steps 1–8, with the agent's grants checked after step 5 and the sandbox prepared
    /// before anything is written.
    fn plan(&self, input: &Value, grants: &CodeGrants) -> Result<Plan, Refusal> {
        let config = &self.inner.config;
        let limits = Limits {
            default_timeout: config.default_timeout,
            max_timeout: config.max_timeout,
            inline_max_chars: config.inline_max_chars,
        };
        let Request { skill, source, args, timeout_ms } = args::parse(input, &limits)?;
        let skill_id = skill.to_lowercase();
        check_grants(&skill_id, &source, grants)?;
        let skill_dir = self.skill_dir(&skill)?;
        let (source_name, script, is_python, inline_code) = match source {
            Source::File(script) => {
                let path = script_path(&skill_dir, &script)?;
                let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
                match extension.as_deref() {
                    Some("py") => ("file", path, true, None),
                    Some("sh") => ("file", path, false, None),
                    _ => return Err(Refusal::UnsupportedScriptType),
                }
            }
            Source::Inline(code) => ("inline", PathBuf::new(), true, Some(code)),
        };
        let cell = Cell::new(&config.sandbox)?;
        cell.check_readable(std::slice::from_ref(&skill_dir))?;
        let (script, inline_dir) = match inline_code {
            Some(code) => {
                let (dir, file) = write_inline(&code, &cell).map_err(Refusal::WriteInline)?;
                (file, Some(dir))
            }
            None => (script, None),
        };
        let (program, interpreter) = if is_python {
            (config.python.clone(), cell.python(&config.python))
        } else {
            (config.bash.clone(), cell.find_program(&config.bash))
        };
        Ok(Plan {
            skill: skill_id,
            source: source_name,
            program,
            interpreter,
            is_python,
            script,
            cwd: skill_dir,
            args,
            timeout_ms,
            network: grants.network,
            unix_sockets: grants.unix_sockets,
            cell,
            inline_dir,
        })
    }

    /// §4.5 step 6: one directory name whose real location is a directory strictly inside the real
    /// skills root.
    fn skill_dir(&self, skill: &str) -> Result<PathBuf, Refusal> {
        let illegal = || Refusal::IllegalSkillPath(skill.to_owned());
        let not_found = || Refusal::SkillNotFound(skill.to_owned());
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

/// The agent's grants: its configured skills only, and inline code only when it enables it.
fn check_grants(skill_id: &str, source: &Source, grants: &CodeGrants) -> Result<(), Refusal> {
    if !grants.skills.iter().any(|allowed| allowed == skill_id) {
        return Err(Refusal::SkillNotEnabled { skill: skill_id.to_owned(), allowed: grants.skills.clone() });
    }
    if matches!(source, Source::Inline(_)) && !grants.allow_inline_code {
        return Err(Refusal::InlineNotEnabled);
    }
    Ok(())
}

/// §4.5 step 7: a relative path whose real location is a regular file inside the (canonical) skill
/// directory. Returns that real location.
fn script_path(skill_dir: &Path, script: &str) -> Result<PathBuf, Refusal> {
    let illegal = || Refusal::IllegalScriptPath(script.to_owned());
    let relative = Path::new(script);
    if relative.has_root() || relative.components().any(|c| matches!(c, Component::Prefix(_) | Component::RootDir)) {
        return Err(illegal());
    }
    let resolved = sandbox::resolve_physically(skill_dir, relative).ok_or_else(illegal)?;
    if !resolved.starts_with(skill_dir) {
        return Err(illegal());
    }
    if !std::fs::metadata(&resolved).is_ok_and(|m| m.is_file()) {
        return Err(Refusal::ScriptNotFound(script.to_owned()));
    }
    Ok(resolved)
}

/// Writes inline code into a fresh private directory as `inline_<uuid>.py`. The directory (mode
/// 0700, random name, owned by the cell's identity so the script can read it; the sandbox keeps
/// it read-only) is removed, with its contents, when the returned guard drops.
fn write_inline(code: &str, cell: &Cell) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
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
    cell.give(dir.path())?;
    cell.give(&file)?;
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

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let result = self.run_continued(&args, &ctx.grants, ctx.continued).await;
            Ok(match needs_user(&result) {
                Some(status) => ToolOutput::NeedsUser(status),
                None => ToolOutput::Json(result),
            })
        })
    }
}

/// A script that cannot go on without the user says so on stdout: exit code 0 and, as its whole
/// output, a JSON object whose only key is `needsUser` (`{"needsUser":{"code","message","data"}}`,
/// `docs/pausing-tools.md`). Output cut at the cap is not JSON, so it is a result.
fn needs_user(result: &Value) -> Option<UserStatus> {
    if result["ok"] != Value::Bool(true) {
        return None;
    }
    let stdout = result["stdout"].as_str()?.trim();
    if !stdout.starts_with('{') {
        return None;
    }
    UserStatus::from_signal(&serde_json::from_str(stdout).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_needs_the_user_only_with_a_clean_exit_and_the_signal_alone() {
        let result = |ok: bool, stdout: &str| json!({"tool": NAME, "ok": ok, "stdout": stdout, "stderr": ""});
        let signal = r#"{"needsUser":{"code":-1002,"message":"Top up","data":{"balance":0}}}"#;
        let status = needs_user(&result(true, &format!("{signal}\n"))).expect("a pause");
        assert_eq!((status.code, status.message.as_str()), (-1002, "Top up"));
        assert_eq!(status.data, json!({"balance": 0}));
        assert_eq!(needs_user(&result(false, signal)), None, "a failed script's output is not obeyed");
        assert_eq!(needs_user(&result(true, &format!("log line\n{signal}"))), None);
        assert_eq!(needs_user(&result(true, r#"{"needsUser":{},"ok":1}"#)), None);
        assert_eq!(needs_user(&result(true, "{\"needsUser\":{\n[TRUNCATED]")), None);
    }

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
        let config = SandboxConfig { allow_unconfined: true, ..SandboxConfig::default() };
        let cell = Cell::new(&config).unwrap();
        let (dir, file) = write_inline("print(1)", &cell).unwrap();
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
