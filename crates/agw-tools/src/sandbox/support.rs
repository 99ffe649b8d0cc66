//! What the running kernel and process can do to confine a child: the Landlock ABI, seccomp
//! filters, and whether agw runs as root (and so can give each child an identity of its own).
//! Probed once; the answer does not change while the process runs.

use std::sync::OnceLock;

/// The confinement features available to model-started processes on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// Landlock ABI version reported by the kernel; `None` when Landlock is absent or disabled.
    pub landlock_abi: Option<i32>,
    /// seccomp filter mode (`SECCOMP_SET_MODE_FILTER`) is available.
    pub seccomp: bool,
    /// agw's effective uid is 0: children can be switched to an unprivileged identity, and
    /// must be (root would make the process limit meaningless and DAC permissive).
    pub root: bool,
}

impl SandboxSupport {
    /// Nothing available: what a test uses to stand for an old or non-Linux kernel.
    pub fn none() -> SandboxSupport {
        SandboxSupport { landlock_abi: None, seccomp: false, root: false }
    }

    /// Both kernel mechanisms the sandbox relies on are present: Landlock (file system, and from
    /// ABI 4 TCP) and seccomp (syscall and socket-family deny list).
    pub fn confines(&self) -> bool {
        self.landlock_abi.is_some() && self.seccomp
    }

    /// The missing mechanisms, for messages (`""` when none is missing).
    pub fn missing(&self) -> String {
        let mut missing = Vec::new();
        if self.landlock_abi.is_none() {
            missing.push("Landlock");
        }
        if !self.seccomp {
            missing.push("seccomp");
        }
        missing.join(" and ")
    }
}

/// The machine's support, probed on first use.
pub fn probe() -> SandboxSupport {
    static SUPPORT: OnceLock<SandboxSupport> = OnceLock::new();
    SUPPORT.get_or_init(probe_now).clone()
}

#[cfg(target_os = "linux")]
fn probe_now() -> SandboxSupport {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no pointer (NULL, size 0) and returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer we pass and changes nothing.
    let seccomp =
        unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) } == 0;
    // SAFETY: geteuid has no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    SandboxSupport { landlock_abi: i32::try_from(abi).ok().filter(|abi| *abi > 0), seccomp, root }
}

#[cfg(not(target_os = "linux"))]
fn probe_now() -> SandboxSupport {
    SandboxSupport::none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_parts_are_named() {
        assert_eq!(SandboxSupport::none().missing(), "Landlock and seccomp");
        assert!(!SandboxSupport::none().confines());
        let only_seccomp = SandboxSupport { seccomp: true, ..SandboxSupport::none() };
        assert_eq!(only_seccomp.missing(), "Landlock");
        let full = SandboxSupport { landlock_abi: Some(7), seccomp: true, root: true };
        assert!(full.confines());
        assert_eq!(full.missing(), "");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn probing_is_stable() {
        assert_eq!(probe(), probe());
    }
}
