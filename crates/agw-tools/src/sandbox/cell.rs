//! One sandboxed call: its identity, its scratch directory, and the confinement installed on the
//! command it starts.
//!
//! Everything that allocates or looks at paths (the Landlock ruleset, the seccomp programs, the
//! scratch directory) is prepared here in the parent; the `pre_exec` hook that runs in the child
//! between fork and exec only makes async-signal-safe syscalls on that prepared state, in this
//! order: resource limits, `no_new_privs`, Landlock (plus the child's own `/proc/<pid>`),
//! seccomp last (so nothing before it is filtered). The uid/gid switch happens just before, in
//! the standard library's own child code. A re-exec of agw as a launcher would avoid the
//! post-fork constraints, but it would need a second entry point in the binary and a wire
//! format for the policy; the hook is small enough to check by reading.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::config::{SLOTS, SandboxConfig};
use super::error::SandboxError;
use super::identity::{self, Identity, Slot};
use super::programs::{self, Program};

/// What one child may touch besides the system files every program needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Directories or files to read and execute (an interpreter's prefixes, the program).
    pub read_exec: Vec<PathBuf>,
    /// Directories or files to read (a skill directory, `_bash_`'s roots, inline code).
    pub read_only: Vec<PathBuf>,
    /// IP sockets allowed (the agent's `sandbox.network`).
    pub network: bool,
    /// `AF_UNIX` sockets allowed (the agent's `sandbox.unixSockets`).
    pub unix_sockets: bool,
}

/// A prepared sandbox for one call. Dropping it kills every process still running as its
/// identity, then removes its scratch directory.
#[derive(Debug)]
pub struct Cell {
    config: SandboxConfig,
    // Field order is drop order: the ruleset, then the identity (its processes are killed), then
    // the scratch directory, which nothing writes to any more.
    ruleset: Option<OwnedFd>,
    slot: Option<Slot>,
    scratch: tempfile::TempDir,
}

impl Cell {
    /// Reserves an identity (when agw is root) and makes the private scratch directory; refuses
    /// when the kernel cannot confine code and the operator did not accept running unconfined.
    pub fn new(config: &SandboxConfig) -> Result<Cell, SandboxError> {
        if !config.runs_code() {
            return Err(SandboxError::Unsupported { missing: config.support.missing() });
        }
        let slot = if config.support.root {
            Some(Slot::acquire(config.uid_base).ok_or(SandboxError::Busy(SLOTS))?)
        } else {
            None
        };
        let scratch = tempfile::Builder::new()
            .prefix("agw-sandbox-")
            .tempdir()
            .map_err(|e| SandboxError::Setup(format!("scratch directory: {e}")))?;
        let cell = Cell { config: config.clone(), ruleset: None, slot, scratch };
        let private = |path: &Path| -> std::io::Result<()> {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
            }
            cell.give(path)
        };
        private(cell.scratch()).map_err(|e| SandboxError::Setup(format!("scratch directory: {e}")))?;
        Ok(cell)
    }

    /// The identity the child runs as; `None` when it keeps agw's.
    pub fn identity(&self) -> Option<Identity> {
        self.slot.as_ref().map(Slot::identity)
    }

    /// The child's private, writable directory: its `HOME` and `TMPDIR`; removed on drop.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// Makes a file or directory that agw created for this call (mode 0700/0600) the child's
    /// own, so its identity can read it.
    pub fn give(&self, path: &Path) -> std::io::Result<()> {
        match self.identity() {
            Some(identity) => identity::give(path, identity),
            None => Ok(()),
        }
    }

    /// Fails, naming the path, when the child's identity cannot read one of `paths` (canonical).
    pub fn check_readable(&self, paths: &[PathBuf]) -> Result<(), SandboxError> {
        let Some(identity) = self.identity() else { return Ok(()) };
        match identity::first_unreadable(paths) {
            Some(path) => Err(SandboxError::Unreadable { path: path.display().to_string(), uid: identity.uid }),
            None => Ok(()),
        }
    }

    /// `name` as this cell's child would find it in `PATH`.
    pub fn find_program(&self, name: &str) -> Option<Program> {
        programs::find_program_for(name, self.identity().is_some())
    }

    /// The Python interpreter `name` for this cell's child (real binary and prefixes).
    pub fn python(&self, name: &str) -> Option<Program> {
        programs::python(name, self.identity().is_some())
    }

    /// Confines `command`: scratch as `HOME`/`TMPDIR`, the identity, and the `pre_exec` hook that
    /// applies limits, `no_new_privs`, Landlock and seccomp in the child. Call once, right before
    /// spawning; the cell must outlive the child.
    pub fn confine(&mut self, command: &mut Command, policy: &Policy) -> Result<(), SandboxError> {
        let scratch = self.scratch().to_path_buf();
        command.env("HOME", &scratch).env("TMPDIR", &scratch);
        #[cfg(unix)]
        if let Some(identity) = self.identity() {
            command.uid(identity.uid).gid(identity.gid);
        }
        self.install(command, policy, &scratch)
    }

    #[cfg(target_os = "linux")]
    fn install(&mut self, command: &mut Command, policy: &Policy, scratch: &Path) -> Result<(), SandboxError> {
        use super::{landlock_rules, limits, seccomp_rules};

        let support = &self.config.support;
        self.ruleset = match support.landlock_abi {
            Some(abi) => {
                let paths = landlock_rules::Paths {
                    read_exec: &policy.read_exec,
                    read_only: &policy.read_only,
                    scratch,
                    network: policy.network,
                };
                Some(landlock_rules::build(abi, &paths).map_err(|e| SandboxError::Setup(e.to_string()))?)
            }
            None => None,
        };
        let ruleset = self.ruleset.as_ref().map(landlock_rules::raw);
        let filters = if support.seccomp {
            Some(
                seccomp_rules::build(policy.network, policy.unix_sockets)
                    .map_err(|e| SandboxError::Setup(e.to_string()))?,
            )
        } else {
            None
        };
        let limits = self.config.limits;
        let own_identity = self.slot.is_some();
        let hook = move || -> std::io::Result<()> {
            limits::apply(limits, own_identity)?;
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = ruleset {
                landlock_rules::restrict_child(fd)?;
            }
            if let Some(filters) = &filters {
                seccomp_rules::install(filters)?;
            }
            Ok(())
        };
        // SAFETY: the hook runs in the forked child before exec and only makes async-signal-safe
        // syscalls (setrlimit, prctl, open/close, landlock_*, seccomp) on values prepared above;
        // it neither allocates nor takes locks.
        unsafe {
            command.pre_exec(hook);
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn install(&mut self, _command: &mut Command, _policy: &Policy, _scratch: &Path) -> Result<(), SandboxError> {
        Ok(())
    }
}
