//! Resource limits of a sandboxed child, set in the child between fork and exec.

use super::config::Limits;

const MIB: u64 = 1024 * 1024;

/// Lowers the child's limits to `limits` (`0` leaves a limit as inherited). `processes` only
/// when the child has an identity of its own (`RLIMIT_NPROC` counts per uid). Core dumps are
/// always off. A limit is never raised above what the child already has (it could not be, once
/// unprivileged). Async-signal-safe: getrlimit/setrlimit only.
pub(crate) fn apply(limits: Limits, processes: bool) -> std::io::Result<()> {
    if limits.cpu_seconds > 0 {
        // SIGXCPU at the soft limit (fatal unless handled), SIGKILL one second later.
        set(libc::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds.saturating_add(1))?;
    }
    if limits.memory_mib > 0 {
        let bytes = limits.memory_mib.saturating_mul(MIB);
        set(libc::RLIMIT_AS, bytes, bytes)?;
    }
    if limits.file_size_mib > 0 {
        let bytes = limits.file_size_mib.saturating_mul(MIB);
        set(libc::RLIMIT_FSIZE, bytes, bytes)?;
    }
    if processes && limits.processes > 0 {
        set(libc::RLIMIT_NPROC, limits.processes, limits.processes)?;
    }
    set(libc::RLIMIT_CORE, 0, 0)
}

#[cfg(target_os = "linux")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_os = "linux"))]
type Resource = libc::c_int;

fn set(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read or write the one struct on this stack frame.
    unsafe {
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
        let max = current.rlim_max as u64;
        let hard = hard.min(max);
        let wanted = libc::rlimit { rlim_cur: soft.min(hard) as libc::rlim_t, rlim_max: hard as libc::rlim_t };
        if libc::setrlimit(resource, &wanted) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
