//! Running one interpreter: in the call's sandbox cell, no shell, a cleared environment, its own
//! process group, both output streams drained while waiting (a chatty script cannot fill a pipe
//! and stall), a wall-clock limit after which the whole group is killed. No process of the group
//! outlives the call: when the script exits, whatever it left running in its group is killed too,
//! and a dropped (cancelled) call kills the group; the cell, dropped with the call, kills whatever
//! else still runs as the call's identity.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agw_tools::sandbox::{self, Cell, GroupKiller, Policy, kill_group};
use tokio::io::AsyncRead;
use tokio::process::Command;

/// Environment variables passed through from the gateway; everything else (provider API keys
/// included) stays out of reach of scripts.
pub(crate) const PASSED_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"];

/// Fixed settings for Python: no `__pycache__` written into skill directories, unbuffered UTF-8
/// output (so what a script printed before a timeout is still seen).
const PYTHON_ENV: [(&str, &str); 3] =
    [("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1"), ("PYTHONIOENCODING", "utf-8")];

/// After the timeout kill, how long the output pipes may take to close.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Marker appended to a stream cut at the character cap.
const TRUNCATED: &str = "\n[TRUNCATED]";

/// How a started process ended.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Exit status, `-1` when killed by a signal or timed out.
    pub exit_code: i32,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// What to start.
pub(crate) struct Start<'a> {
    /// The interpreter as configured, for messages.
    pub program: &'a str,
    /// Its real file.
    pub executable: &'a Path,
    pub arg0: OsString,
    pub args: &'a [OsString],
    /// How many times the user continued this call after it paused for them
    /// (`AGW_TOOL_CONTINUED`, `docs/pausing-tools.md`).
    pub continued: u32,
}

/// The variable that tells a script how many times the user continued its call.
pub(crate) const CONTINUED_ENV: &str = "AGW_TOOL_CONTINUED";

/// A process that could not be started. The display text names the program and is what the
/// script's `stderr` reports.
#[derive(Debug, thiserror::Error)]
#[error("Cannot run program \"{program}\": {reason}")]
pub(crate) struct CannotRun {
    /// The interpreter as configured.
    pub program: String,
    pub reason: StartFailure,
}

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartFailure {
    /// No usable interpreter of that name.
    #[error("not found in PATH")]
    NotFound,
    /// The sandbox could not confine it.
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    /// The OS refused to start it.
    #[error(transparent)]
    Spawn(#[from] std::io::Error),
    /// Started without its output pipes.
    #[error("output pipes unavailable")]
    NoPipes,
}

/// Runs `start` in `cwd`, confined by `cell` to `policy`.
pub(crate) async fn run(
    start: Start<'_>,
    cwd: &Path,
    timeout: Duration,
    cap_chars: usize,
    cell: &mut Cell,
    policy: &Policy,
) -> Result<Outcome, CannotRun> {
    let cannot_run = |reason: StartFailure| CannotRun { program: start.program.to_owned(), reason };
    let mut command = Command::new(start.executable);
    command
        .args(start.args)
        .current_dir(cwd)
        .env_clear()
        .envs(PASSED_ENV.iter().filter_map(|key| std::env::var_os(key).map(|value| (key, value))))
        .envs(PYTHON_ENV)
        .env(CONTINUED_ENV, start.continued.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    {
        command.arg0(&start.arg0);
        command.process_group(0);
    }
    cell.confine(&mut command, policy).map_err(|e| cannot_run(e.into()))?;
    let mut child = command.spawn().map_err(|e| cannot_run(e.into()))?;
    // Armed for the whole call: a dropped future (cancelled run, outer timeout) kills the group.
    let mut group = GroupKiller::new(child.id());
    let pgid = child.id();
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(cannot_run(StartFailure::NoPipes));
    };
    let waiter = async {
        let status = child.wait().await;
        // The script is done: end anything it left behind in its group. That also closes pipes a
        // background child kept open, so the readers below reach their end.
        kill_group(pgid);
        status
    };
    let work = async { tokio::join!(read_capped(stdout, cap_chars), read_capped(stderr, cap_chars), waiter) };
    tokio::pin!(work);
    let outcome = match tokio::time::timeout(timeout, &mut work).await {
        Ok((stdout, stderr, status)) => {
            let exit_code = status.ok().and_then(|s| s.code()).unwrap_or(-1);
            Outcome { exit_code, timed_out: false, stdout, stderr }
        }
        Err(_elapsed) => {
            kill_group(pgid);
            // The killed group closes its pipes; keep what was printed before the limit. A process
            // that left the group (setsid) and still holds a pipe only costs the grace period.
            let (stdout, stderr) = match tokio::time::timeout(DRAIN_GRACE, &mut work).await {
                Ok((stdout, stderr, _)) => (stdout, stderr),
                Err(_) => (String::new(), String::new()),
            };
            Outcome { exit_code: -1, timed_out: true, stdout, stderr }
        }
    };
    group.disarm();
    Ok(outcome)
}

/// [`sandbox::read_capped`] with `_skill_run_script_`'s marker.
async fn read_capped(stream: impl AsyncRead + Unpin, cap_chars: usize) -> String {
    sandbox::read_capped(stream, cap_chars, TRUNCATED).await
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[tokio::test]
    async fn capped_reading() {
        assert_eq!(read_capped(&b"hello"[..], 5).await, "hello");
        assert_eq!(read_capped(&b"hello!"[..], 5).await, "hello\n[TRUNCATED]");
        assert_eq!(read_capped("ééé".as_bytes(), 2).await, "éé\n[TRUNCATED]");
        let big = vec![b'x'; 100_000];
        assert_eq!(read_capped(&big[..], 3).await, "xxx\n[TRUNCATED]");
        assert_eq!(read_capped(&b""[..], 0).await, "");
        assert_eq!(read_capped(&b"\xff"[..], 5).await, "\u{fffd}");
    }

    #[test]
    fn program_lookup_skips_relative_path_entries() {
        use agw_tools::sandbox::find_program;
        assert!(find_program("sh").is_some_and(|p| p.is_absolute()));
        assert_eq!(find_program("./x"), Some(PathBuf::from("./x")));
        assert_eq!(find_program("agw-no-such-program"), None);
    }

    #[tokio::test]
    async fn a_missing_executable_names_the_program() {
        let config = agw_tools::sandbox::SandboxConfig { allow_unconfined: true, ..Default::default() };
        let mut cell = Cell::new(&config).unwrap();
        let start = Start {
            program: "python3",
            executable: Path::new("/no/such/python3"),
            arg0: "python3".into(),
            args: &[],
            continued: 0,
        };
        let err = run(start, Path::new("/"), Duration::from_secs(1), 10, &mut cell, &Policy::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Cannot run program \"python3\": "), "{err}");
    }
}
