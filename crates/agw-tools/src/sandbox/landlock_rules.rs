//! The Landlock ruleset of one sandboxed child. Built in the parent (allocation, path lookups),
//! handed to the child as a file descriptor; the child only adds a rule for its own `/proc/<pid>`
//! and restricts itself, with raw syscalls.
//!
//! Every access right of the kernel's ABI is handled, so whatever no rule grants is denied:
//! * read + execute: the system directories (`/usr`, and `/bin`, `/sbin`, `/lib*` where they are
//!   real directories), a few harmless `/etc` files (loader cache, time zone, MIME types, git's
//!   system config; resolver and CA files only with network), the interpreter's prefixes, the
//!   program itself and the skill directory (skills may ship helper programs);
//! * read only: `_bash_`'s roots and the inline code's directory;
//! * read + write (no execute): the call's scratch directory; `/dev/null` read/write,
//!   `/dev/zero`, `/dev/urandom`, `/dev/random` read;
//! * `/proc`: only a few system-wide counters (`meminfo`, `stat`, `uptime`, `loadavg`,
//!   `cpuinfo`) and the child's own `/proc/<pid>`, added in the child itself so it never names
//!   agw's; other processes' `/proc` entries (agw's environment!) are not reachable;
//! * TCP bind and connect (ABI ≥ 4): denied unless the agent allows network;
//! * signals and abstract unix sockets (ABI ≥ 6): scoped to the sandbox, so nothing outside it
//!   (agw included) can be signalled or reached.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

/// System directories every interpreter and tool needs, read and execute.
const SYSTEM_DIRS: [&str; 7] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
/// Configuration files that hold nothing secret and that common programs fail without.
const SYSTEM_FILES: [&str; 7] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/gitconfig",
];
/// Name resolution and TLS trust, only for agents allowed on the network.
const NETWORK_FILES: [&str; 10] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/nsswitch.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
];
const PROC_FILES: [&str; 5] = ["/proc/meminfo", "/proc/stat", "/proc/uptime", "/proc/loadavg", "/proc/cpuinfo"];

/// Where a child may go.
pub(crate) struct Paths<'a> {
    pub read_exec: &'a [PathBuf],
    pub read_only: &'a [PathBuf],
    pub scratch: &'a Path,
    pub network: bool,
}

/// Why the ruleset of a call could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LandlockError {
    /// The kernel or the crate refused the ruleset or one of its rules.
    #[error("landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// A path the child must reach (a root, the program, the scratch directory) cannot be opened.
    #[error("landlock rule for {}: {source}", path.display())]
    Rule { path: PathBuf, source: landlock::PathFdError },
    /// The ruleset was built but no file descriptor came out of it.
    #[error("landlock ruleset: not created")]
    NotCreated,
}

/// Builds the ruleset for `abi` and returns its file descriptor (close-on-exec).
pub(crate) fn build(abi: i32, paths: &Paths<'_>) -> Result<OwnedFd, LandlockError> {
    let abi = ABI::from(abi);
    let read = AccessFs::from_read(abi);
    let read_only = read & !AccessFs::Execute;
    let write_no_exec = AccessFs::from_all(abi) & !AccessFs::Execute;
    let mut ruleset =
        Ruleset::default().set_compatibility(CompatLevel::BestEffort).handle_access(AccessFs::from_all(abi))?;
    // Handled with no rule = denied; an agent allowed on the network leaves TCP unhandled.
    if abi >= ABI::V4 && !paths.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut created = ruleset.create()?;

    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, bool)> = Vec::new();
    let optional = |path: &str, access| (PathBuf::from(path), access, false);
    rules.extend(SYSTEM_DIRS.iter().map(|p| optional(p, read)));
    rules.extend(SYSTEM_FILES.iter().map(|p| optional(p, read_only)));
    if paths.network {
        rules.extend(NETWORK_FILES.iter().map(|p| optional(p, read_only)));
    }
    rules.extend(PROC_FILES.iter().map(|p| optional(p, read_only)));
    rules.push(optional("/dev/null", AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate));
    rules.extend(["/dev/zero", "/dev/urandom", "/dev/random"].iter().map(|p| optional(p, AccessFs::ReadFile.into())));
    rules.extend(paths.read_exec.iter().map(|p| (p.clone(), read, true)));
    rules.extend(paths.read_only.iter().map(|p| (p.clone(), read_only, true)));
    rules.push((paths.scratch.to_path_buf(), write_no_exec, true));

    for (path, access, required) in rules {
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            Err(_) if !required => continue,
            Err(source) => return Err(LandlockError::Rule { path, source }),
        };
        // A rule on a file may only carry file rights (the crate drops the rest in best-effort
        // mode); directories get the whole set.
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(LandlockError::NotCreated)
}

/// `struct landlock_path_beneath_attr`: packed, as in the kernel's UAPI.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
const LANDLOCK_ACCESS_FS_READ_FILE: u64 = 1 << 2;
const LANDLOCK_ACCESS_FS_READ_DIR: u64 = 1 << 3;

/// In the child, after the fork: lets the child read its own `/proc/<pid>` (which `/proc/self`
/// names from here on, through exec), then enforces the ruleset on itself. `no_new_privs` must
/// be set. Async-signal-safe: raw syscalls on memory of our own stack.
pub(crate) fn restrict_child(ruleset: RawFd) -> std::io::Result<()> {
    let own = c"/proc/self";
    // SAFETY: a NUL-terminated path and plain flags; the fd is closed below.
    let proc_self = unsafe { libc::open(own.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if proc_self >= 0 {
        let attr = PathBeneathAttr {
            allowed_access: LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
            parent_fd: proc_self,
        };
        // SAFETY: `attr` lives on this stack frame for the duration of the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0,
            )
        };
        // SAFETY: closing the fd opened above.
        unsafe { libc::close(proc_self) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: a ruleset fd and no flags.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The raw fd of an owned ruleset, for the child.
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ruleset_builds_when_the_kernel_has_landlock() {
        let Some(abi) = crate::sandbox::probe().landlock_abi else { return };
        let scratch = std::env::temp_dir();
        let paths =
            Paths { read_exec: &[], read_only: &[PathBuf::from("/no/such/dir")], scratch: &scratch, network: false };
        let err = build(abi, &paths).unwrap_err().to_string();
        assert!(err.contains("/no/such/dir"), "{err}");
        let paths = Paths { read_exec: &[], read_only: &[], scratch: &scratch, network: true };
        assert!(build(abi, &paths).is_ok());
    }
}
