//! The OS sandbox of every process a model can start (`_bash_` here, `_skill_run_script_` in
//! agw-skills), and the child-process helpers both tools share.
//!
//! # Confinement ([`Cell`])
//! A prompt-injected model must not be able to use a script or command to read agw's secrets
//! (its environment, other users' files), write outside a private scratch directory, reach the
//! network or agw's own API, or exhaust the machine. Each call gets a [`Cell`]: an unprivileged
//! identity of its own when agw runs as root ([`identity`]), a private scratch directory (its
//! `HOME`/`TMPDIR`), and, applied in the child between fork and exec: resource limits
//! ([`Limits`]), `no_new_privs`, a Landlock ruleset (read-only system files, interpreter and tool
//! directories, the scratch directory writable, no TCP, scoped signals and abstract sockets) and
//! seccomp filters (no sockets unless the agent grants them: IP with `sandbox.network`, unix
//! sockets with `sandbox.unixSockets`; a deny list of kernel attack surface). [`probe`] tells what
//! the kernel offers; without Landlock and seccomp code runs are refused unless the operator sets
//! `AGW_SANDBOX_ALLOW_UNCONFINED=true`.
//! `docs/security.md` states what each layer guarantees and what it does not.
//!
//! # Shared helpers
//! Each is part of a security or liveness boundary, so both tools use this one copy:
//! * [`find_program`] only looks in absolute `PATH` entries, so a file planted in the working
//!   directory can never stand in for the program;
//! * [`read_capped`] drains a pipe to its end while keeping a bounded amount, so a chatty child
//!   can neither fill the pipe and stall (deadlock) nor make us hold all it printed;
//! * [`GroupKiller`] / [`kill_group`] end the whole process group, so no grandchild is left
//!   running (orphaned) after a timeout or a cancelled call;
//! * [`resolve_physically`] follows symlinks before `..`, as the kernel will, so a containment
//!   check (`resolved.starts_with(root)`) cannot be escaped through `link/../secret`;
//!   [`normalize`] is the purely lexical clean-up for paths that are configured, not attacker-given.
//!
//! What stays with each tool: the environment passed to the child, the truncation marker, the
//! timeout handling and the error texts.

mod cell;
mod config;
mod error;
pub mod identity;
#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(unix)]
mod limits;
mod programs;
mod seccomp_rules;
mod support;

use std::path::{Component, Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt};

pub use cell::{Cell, Policy};
pub use config::{DEFAULT_UID_BASE, Limits, SLOTS, SandboxConfig};
pub use error::SandboxError;
pub use programs::{Program, describe_python, find_program_for, python};
pub use support::{SandboxSupport, probe};

/// The program to execute: a name with a `/` as given, else the first executable of that name in
/// an absolute `PATH` entry (`/usr/local/bin:/usr/bin:/bin` when `PATH` is unset).
///
/// Relative entries such as `.` or an empty one are skipped: they would be resolved against the
/// child's working directory, where the model may be able to create files, and a file planted
/// there must never stand in for an allowed program or interpreter.
pub fn find_program(name: &str) -> Option<PathBuf> {
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
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
pub(crate) fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Reads a stream to its end, keeping enough bytes for `cap_chars` characters, and renders it cut
/// to `cap_chars` characters followed by `marker` when there was more. Invalid UTF-8 is replaced.
///
/// The stream is always read to its end, even past the cap: a child blocked on a full pipe would
/// never exit, and its wait would only end at the timeout. Read errors end the stream.
pub async fn read_capped(mut stream: impl AsyncRead + Unpin, cap_chars: usize, marker: &str) -> String {
    // At most 4 bytes per character, plus room for one more to tell "exactly cap" from "more".
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
    match text.char_indices().nth(cap_chars) {
        Some((cut, _)) => format!("{}{marker}", &text[..cut]),
        None if dropped => format!("{text}{marker}"),
        None => text.into_owned(),
    }
}

/// Kills a process group when dropped, unless disarmed.
///
/// Armed right after the spawn, it makes every way out of a run (a timeout, an early return, a
/// dropped or cancelled future) end the whole group, children of the command included; only a run
/// that has been dealt with disarms it. `kill_on_drop` alone would reach the direct child only.
#[derive(Debug)]
pub struct GroupKiller(Option<u32>);

impl GroupKiller {
    /// Guards the group `pgid`: the pid of a child started with `process_group(0)`, as returned by
    /// `Child::id` (`None`, for a child already reaped, guards nothing).
    pub fn new(pgid: Option<u32>) -> GroupKiller {
        GroupKiller(pgid)
    }

    /// The group no longer needs killing on drop.
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        kill_group(self.0.take());
    }
}

/// Sends `SIGKILL` to the process group `pgid` (the pid of a child started with
/// `process_group(0)`, as returned by `Child::id`; `None` does nothing). Group ids 0 and 1 are
/// refused: `kill(0)` would be our own group and `kill(-1)` every process we may signal. No-op off
/// Unix.
#[cfg(unix)]
pub fn kill_group(pgid: Option<u32>) {
    let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) else { return };
    if pgid > 1 {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Sends `SIGKILL` to a process group; no-op off Unix.
#[cfg(not(unix))]
pub fn kill_group(_pgid: Option<u32>) {}

/// The real location of `path` (absolute, or relative to `base`, which should be canonical);
/// `None` when a dangling symlink lies on the way (where it leads cannot be known, and following
/// it could create a file anywhere).
///
/// Resolution is physical, one component at a time: every existing prefix is canonicalised, so a
/// symlink is followed before a later `..` is applied, exactly as the kernel will when the child
/// opens the path. (Lexical normalisation first would let `link/../secret` escape.) The result is
/// what a containment check against a canonical root must look at.
pub fn resolve_physically(base: &Path, path: &Path) -> Option<PathBuf> {
    let joined = if path.is_absolute() { path.to_path_buf() } else { base.join(path) };
    let mut current = PathBuf::new();
    // Once a component does not exist, nothing below it can be a symlink: the rest is lexical.
    let mut exists = true;
    for component in joined.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => current.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                current.push(name);
                if exists {
                    match current.canonicalize() {
                        Ok(real) => current = real,
                        // A symlink whose target is missing: following it could create a file
                        // anywhere, so the path is refused.
                        Err(_) if current.symlink_metadata().is_ok() => return None,
                        Err(_) => exists = false,
                    }
                }
            }
        }
    }
    Some(current)
}

/// Lexical normalisation: `.` removed, `..` pops a component (at the root it stays at the root).
/// No symlink is looked at, so this is for configured paths, never for a containment check on a
/// path the model gave (use [`resolve_physically`]).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn capped_reading_uses_the_given_marker() {
        assert_eq!(read_capped(&b"hello"[..], 5, "<cut>").await, "hello");
        assert_eq!(read_capped(&b"hello!"[..], 5, "<cut>").await, "hello<cut>");
        assert_eq!(read_capped("ééé".as_bytes(), 2, "").await, "éé");
        let big = vec![b'x'; 100_000];
        assert_eq!(read_capped(&big[..], 3, "~").await, "xxx~");
        assert_eq!(read_capped(&b"\xff"[..], 5, "~").await, "\u{fffd}");
    }

    #[test]
    fn program_lookup_skips_relative_path_entries() {
        assert!(find_program("sh").is_some_and(|p| p.is_absolute()));
        assert_eq!(find_program("./x"), Some(PathBuf::from("./x")));
        assert_eq!(find_program("agw-no-such-program"), None);
    }

    #[test]
    fn paths_resolve_like_the_kernel() {
        assert_eq!(resolve_physically(Path::new("/"), Path::new("/no/such/../dir")).unwrap(), PathBuf::from("/no/dir"));
        assert_eq!(resolve_physically(Path::new("/"), Path::new("/../..")).unwrap(), PathBuf::from("/"));
        assert_eq!(normalize(Path::new("/a/./b/../../../c")), PathBuf::from("/c"));
    }
}
