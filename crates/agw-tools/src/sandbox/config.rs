//! The operator's sandbox settings (`agw.sandbox.*`) and the one-line report of what is in force.

use super::seccomp_rules;
use super::support::{SandboxSupport, probe};

/// First uid (and gid) of the identities children get when agw runs as root: one per running
/// call, `uid_base .. uid_base + SLOTS`. The default sits in the range systemd leaves unused
/// (between container ranges and the "foreign" range), so no account owns files with it.
pub const DEFAULT_UID_BASE: u32 = 1_900_000_000;
/// How many sandboxed processes may run at once (one identity each).
pub const SLOTS: u32 = 256;

/// Resource limits of every model-started process (`setrlimit` in the child). `0` = no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU time per process (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_seconds: u64,
    /// Address space per process (RLIMIT_AS), MiB.
    pub memory_mib: u64,
    /// Largest file a process may write (RLIMIT_FSIZE), MiB.
    pub file_size_mib: u64,
    /// Processes and threads of the call's identity (RLIMIT_NPROC); applied only when the call has
    /// an identity of its own (agw runs as root), because the kernel counts per uid.
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { cpu_seconds: 60, memory_mib: 1024, file_size_mib: 64, processes: 64 }
    }
}

/// How model-started processes are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Resource limits applied to every process.
    pub limits: Limits,
    /// Run code even when the kernel cannot confine it (`AGW_SANDBOX_ALLOW_UNCONFINED`); whatever
    /// is available is still applied. Off by default: without Landlock and seccomp, code runs are
    /// refused.
    pub allow_unconfined: bool,
    /// See [`DEFAULT_UID_BASE`].
    pub uid_base: u32,
    /// What the kernel offers: [`probe`] by default; tests put [`SandboxSupport::none`] here to
    /// stand for a kernel without Landlock.
    pub support: SandboxSupport,
}

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            limits: Limits::default(),
            allow_unconfined: false,
            uid_base: DEFAULT_UID_BASE,
            support: probe(),
        }
    }
}

impl SandboxConfig {
    /// Code runs at all: confined, or unconfined by the operator's explicit choice.
    pub fn runs_code(&self) -> bool {
        self.support.confines() || self.allow_unconfined
    }

    /// The startup report: which protections are in force for model-started processes.
    pub fn report(&self) -> String {
        let support = &self.support;
        let landlock = match support.landlock_abi {
            Some(abi) => {
                let mut parts = vec!["filesystem"];
                if abi >= 4 {
                    parts.push("TCP bind/connect");
                }
                if abi >= 6 {
                    parts.push("signal and abstract-socket scopes");
                }
                format!("landlock ABI {abi} ({})", parts.join(", "))
            }
            None => "landlock unavailable".to_owned(),
        };
        let seccomp = if support.seccomp {
            format!(
                "seccomp deny-list ({} syscalls; IP sockets refused unless the agent grants sandbox.network, \
                 AF_UNIX sockets unless it grants sandbox.unixSockets; socketpair stream/seqpacket only)",
                seccomp_rules::DENIED_COUNT
            )
        } else {
            "seccomp unavailable".to_owned()
        };
        let limit = |value: u64, unit: &str| if value == 0 { "unlimited".to_owned() } else { format!("{value}{unit}") };
        let l = &self.limits;
        let processes = if support.root { limit(l.processes, "") } else { "not applied (agw is not root)".to_owned() };
        let rlimits = format!(
            "rlimits cpu {}, memory {}, file size {}, processes {processes}",
            limit(l.cpu_seconds, " s"),
            limit(l.memory_mib, " MiB"),
            limit(l.file_size_mib, " MiB"),
        );
        let identity = if support.root {
            format!(
                "identity uid/gid {}..{} (one per call, no groups)",
                self.uid_base,
                self.uid_base.saturating_add(SLOTS - 1)
            )
        } else {
            "identity unchanged (agw is not root)".to_owned()
        };
        let verdict = if support.confines() {
            "code execution confined".to_owned()
        } else if self.allow_unconfined {
            format!(
                "code execution UNCONFINED ({} missing; accepted by AGW_SANDBOX_ALLOW_UNCONFINED)",
                support.missing()
            )
        } else {
            format!(
                "code execution refused ({} missing; AGW_SANDBOX_ALLOW_UNCONFINED=true would accept it)",
                support.missing()
            )
        };
        format!("{verdict}: {landlock}; {seccomp}; {rlimits}; {identity}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_every_protection() {
        let config = SandboxConfig {
            support: SandboxSupport { landlock_abi: Some(7), seccomp: true, root: true },
            ..SandboxConfig::default()
        };
        let report = config.report();
        assert!(
            report.starts_with("code execution confined: landlock ABI 7 (filesystem, TCP bind/connect, "),
            "{report}"
        );
        assert!(report.contains("rlimits cpu 60 s, memory 1024 MiB, file size 64 MiB, processes 64"), "{report}");
        assert!(report.contains("AF_UNIX sockets unless it grants sandbox.unixSockets"), "{report}");
        assert!(report.contains("identity uid/gid 1900000000..1900000255"), "{report}");

        let old = SandboxConfig { support: SandboxSupport::none(), ..SandboxConfig::default() };
        assert!(!old.runs_code());
        assert!(old.report().starts_with("code execution refused (Landlock and seccomp missing;"), "{}", old.report());
        let accepted = SandboxConfig { allow_unconfined: true, ..old };
        assert!(accepted.runs_code());
        assert!(accepted.report().starts_with("code execution UNCONFINED"), "{}", accepted.report());
        assert!(accepted.report().contains("processes not applied (agw is not root)"));
    }
}
