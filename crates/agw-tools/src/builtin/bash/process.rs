//! Running one planned command: no shell, a clean environment, its own process group, both
//! output streams drained while waiting (a chatty command cannot fill a pipe and stall), a
//! wall-clock limit after which the whole group is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::policy::Invocation;

/// A command that ran to completion.
#[derive(Debug)]
pub(crate) struct Finished {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug)]
pub(crate) enum RunError {
    /// The program could not be found or started; the OS error text.
    Start(String),
    TimedOut,
}

/// Environment variables passed through; everything else (API keys included) stays out of reach.
const PASSED_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"];

pub(crate) async fn run(
    invocation: &Invocation,
    working_directory: &Path,
    timeout: Duration,
    cap_chars: usize,
) -> Result<Finished, RunError> {
    let program = find_program(&invocation.program)
        .ok_or_else(|| RunError::Start(format!("Command not found: {}", invocation.program)))?;
    let mut command = Command::new(program);
    command
        .args(&invocation.args)
        .current_dir(working_directory)
        .env_clear()
        .envs(PASSED_ENV.iter().filter_map(|key| std::env::var_os(key).map(|value| (key, value))))
        // No terminal: pagers and editors must not wait for one.
        .env("TERM", "dumb")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "false")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    {
        // Messages name the command as the model wrote it (`ls: …`, not `/usr/bin/ls: …`).
        command.arg0(&invocation.program);
        command.process_group(0);
    }
    let mut child = command.spawn().map_err(|e| RunError::Start(e.to_string()))?;
    // Armed until the child has been reaped: a timeout or a dropped future kills the whole group
    // (children of the command included), not just the direct child.
    let mut group = GroupKiller(child.id());
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RunError::Start("output pipes unavailable".to_owned()));
    };
    let work = async { tokio::join!(read_capped(stdout, cap_chars), read_capped(stderr, cap_chars), child.wait()) };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            group.disarm();
            let status = status.map_err(|e| RunError::Start(e.to_string()))?;
            // Killed by a signal: no exit code.
            Ok(Finished { exit_code: status.code().unwrap_or(-1), stdout, stderr })
        }
        Err(_elapsed) => Err(RunError::TimedOut),
    }
}

/// The program to execute: a name with a `/` as configured, else the first executable of that name
/// in an absolute `PATH` entry (relative entries such as `.` are skipped, so a file planted in the
/// working directory can never stand in for an allowed command).
fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Reads a stream to its end, keeping enough bytes for `cap_chars` characters, and renders it cut
/// to `cap_chars` characters plus `...(truncated)` when there was more.
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap_chars: usize) -> String {
    let keep = cap_chars.saturating_mul(4).saturating_add(4);
    let mut kept = Vec::new();
    let mut dropped = false;
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
    let text = String::from_utf8_lossy(&kept);
    let mut chars = text.char_indices();
    match chars.nth(cap_chars) {
        Some((cut, _)) => format!("{}...(truncated)", &text[..cut]),
        None if dropped => format!("{text}...(truncated)"),
        None => text.into_owned(),
    }
}

/// Kills a process group when dropped, unless disarmed.
struct GroupKiller(Option<u32>);

impl GroupKiller {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_group(pgid);
        }
    }
}

#[cfg(unix)]
fn kill_group(pgid: u32) {
    // The child was started with `process_group(0)`, so its pid is its group id. Never signal
    // group 0 or 1 (`kill(0)` is our own group, `kill(-1)` is every process).
    let Ok(pgid) = i32::try_from(pgid) else { return };
    if pgid > 1 {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
fn kill_group(_pgid: u32) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn capped_reading() {
        assert_eq!(read_capped(&b"hello"[..], 5).await, "hello");
        assert_eq!(read_capped(&b"hello!"[..], 5).await, "hello...(truncated)");
        assert_eq!(read_capped("ééé".as_bytes(), 2).await, "éé...(truncated)");
        let big = vec![b'x'; 100_000];
        let out = read_capped(&big[..], 3).await;
        assert_eq!(out, "xxx...(truncated)");
        assert_eq!(read_capped(&b""[..], 0).await, "");
    }

    #[test]
    fn program_lookup_skips_relative_path_entries() {
        assert!(find_program("sh").is_some_and(|p| p.is_absolute()));
        assert_eq!(find_program("./x"), Some(PathBuf::from("./x")));
        assert_eq!(find_program("agw-no-such-program"), None);
    }
}
