//! Running one planned command: in the sandbox (its roots read-only, a private scratch
//! directory as `HOME`/`TMPDIR`), no shell, a clean environment, its own process group, both
//! output streams drained while waiting (a chatty command cannot fill a pipe and stall), a
//! wall-clock limit after which the whole group is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncRead;
use tokio::process::Command;

use super::config::BashConfig;
use super::policy::Invocation;
use crate::sandbox::{self, Cell, GroupKiller, Policy};
use crate::tool::CodeGrants;

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

/// Runs `invocation` in `config`'s working directory; `roots` (canonical) are what it may read,
/// `grants` which sockets the agent lets it open.
pub(crate) async fn run(
    invocation: &Invocation,
    config: &BashConfig,
    roots: &[PathBuf],
    grants: &CodeGrants,
) -> Result<Finished, RunError> {
    let start = |e: sandbox::SandboxError| RunError::Start(e.to_string());
    // Dropped when the call ends, however it ends: every process of the call's identity is
    // killed and the scratch directory removed.
    let mut cell = Cell::new(&config.sandbox).map_err(start)?;
    let program = cell
        .find_program(&invocation.program)
        .ok_or_else(|| RunError::Start(format!("Command not found: {}", invocation.program)))?;
    let roots: Vec<PathBuf> = roots.iter().filter(|root| root.exists()).cloned().collect();
    cell.check_readable(&roots).map_err(start)?;
    let policy = Policy {
        read_exec: vec![program.path.clone()],
        read_only: roots,
        network: grants.network,
        unix_sockets: grants.unix_sockets,
    };
    let mut command = Command::new(&program.path);
    command
        .args(&invocation.args)
        .current_dir(&config.working_directory)
        .env_clear()
        .envs(PASSED_ENV.iter().filter_map(|key| std::env::var_os(key).map(|value| (key, value))))
        // No terminal: pagers and editors must not wait for one.
        .env("TERM", "dumb")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "false")
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs(git_confinement(&config.working_directory))
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
    cell.confine(&mut command, &policy).map_err(start)?;
    let mut child = command.spawn().map_err(|e| RunError::Start(e.to_string()))?;
    // Armed until the child has been reaped: a timeout or a dropped future kills the whole group
    // (children of the command included), not just the direct child.
    let mut group = GroupKiller::new(child.id());
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RunError::Start("output pipes unavailable".to_owned()));
    };
    let cap_chars = config.output_cap_chars;
    let work = async { tokio::join!(read_capped(stdout, cap_chars), read_capped(stderr, cap_chars), child.wait()) };
    match tokio::time::timeout(config.timeout, work).await {
        Ok((stdout, stderr, status)) => {
            group.disarm();
            let status = status.map_err(|e| RunError::Start(e.to_string()))?;
            // Killed by a signal: no exit code.
            Ok(Finished { exit_code: status.code().unwrap_or(-1), stdout, stderr })
        }
        Err(_elapsed) => Err(RunError::TimedOut),
    }
}

/// Keeps `git` on the working directory's own repository and away from programs a repository or
/// user configuration could name: discovery stops at the working directory (its parent is a
/// ceiling), no system or global configuration is read, and the configuration keys that run
/// commands are overridden with the precedence of `-c` (which the model may not use itself).
fn git_confinement(working_directory: &Path) -> Vec<(String, std::ffi::OsString)> {
    // Git compares real paths: the parent of the real working directory, not of a link to it.
    let real = working_directory.canonicalize().unwrap_or_else(|_| working_directory.to_path_buf());
    let ceiling = real.parent().unwrap_or(&real).to_path_buf();
    let mut env: Vec<(String, std::ffi::OsString)> = vec![
        ("GIT_CEILING_DIRECTORIES".into(), ceiling.as_os_str().to_owned()),
        ("GIT_DISCOVERY_ACROSS_FILESYSTEM".into(), "0".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("GIT_ATTR_NOSYSTEM".into(), "1".into()),
        ("GIT_NO_REPLACE_OBJECTS".into(), "1".into()),
        // Reading commands must not refresh and rewrite the index either.
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
        ("GIT_PROTOCOL_FROM_USER".into(), "0".into()),
        ("GIT_ALLOW_PROTOCOL".into(), "".into()),
    ];
    const OVERRIDES: [(&str, &str); 11] = [
        // Under the sandbox's own identity the command does not own the operator's repositories,
        // and git refuses those ("dubious ownership") unless told otherwise. That check guards
        // against a repository's config running programs; those are switched off below, and
        // anything left would run inside the same sandbox, read-only and offline.
        ("safe.directory", "*"),
        ("core.fsmonitor", "false"),
        ("core.pager", "cat"),
        ("core.editor", "false"),
        ("core.sshCommand", "false"),
        ("core.hooksPath", "/dev/null"),
        ("protocol.allow", "never"),
        ("credential.helper", ""),
        ("gpg.program", "false"),
        ("gpg.ssh.program", "false"),
        ("gpg.x509.program", "false"),
    ];
    env.push(("GIT_CONFIG_COUNT".into(), OVERRIDES.len().to_string().into()));
    for (i, (key, value)) in OVERRIDES.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), (*key).into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), (*value).into()));
    }
    env
}

/// Marker appended to a stream cut at the character cap.
const TRUNCATED: &str = "...(truncated)";

/// [`sandbox::read_capped`] with `_bash_`'s marker.
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
        assert_eq!(read_capped(&b"hello!"[..], 5).await, "hello...(truncated)");
        assert_eq!(read_capped("ééé".as_bytes(), 2).await, "éé...(truncated)");
        let big = vec![b'x'; 100_000];
        let out = read_capped(&big[..], 3).await;
        assert_eq!(out, "xxx...(truncated)");
        assert_eq!(read_capped(&b""[..], 0).await, "");
    }

    #[test]
    fn program_lookup_skips_relative_path_entries() {
        use crate::sandbox::find_program;
        assert!(find_program("sh").is_some_and(|p| p.is_absolute()));
        assert_eq!(find_program("./x"), Some(PathBuf::from("./x")));
        assert_eq!(find_program("agw-no-such-program"), None);
    }
}
