//! What the benchmark reads from the kernel: CPU time and memory of a process (`/proc`), this
//! process's own CPU time (`getrusage`), machine-wide CPU time (`/proc/stat`), and the open-file
//! limit it raises for the 10,000-stream scenario.

use std::time::Duration;

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// user + system CPU time of process `pid`, all its threads (live and exited) included.
/// Resolution: one clock tick (10 ms).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    process_cpu_split(pid).map(|(user, system)| user + system)
}

/// (user, system) CPU time of process `pid`.
pub fn process_cpu_split(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let hz = clock_ticks_per_sec();
    Some((Duration::from_secs_f64(utime as f64 / hz), Duration::from_secs_f64(stime as f64 / hz)))
}

/// CPU time of every process named `name` (the `comm` of `/proc/<pid>/stat`, e.g. `postgres`,
/// `redis-server`): user + system of each, plus the user + system of its children that have
/// exited and been waited for (`cutime`, `cstime`). The latter keeps the sum monotonic when a
/// process ends between two readings as long as its parent is watched too — a PostgreSQL
/// backend whose connection closes is counted by the postmaster, a Redis `BGSAVE` child by
/// `redis-server`. Processes of other users are included (their `stat` is world-readable).
/// Resolution: one clock tick (10 ms) per process.
pub fn processes_cpu_by_name(name: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Duration::ZERO };
    let hz = clock_ticks_per_sec();
    let mut ticks = 0u64;
    for entry in dir.filter_map(Result::ok) {
        let file_name = entry.file_name();
        let Some(pid) = file_name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        if &stat[open + 1..close] != name {
            continue;
        }
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14–17.
        ticks += fields.get(11..15).map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    }
    Duration::from_secs_f64(ticks as f64 / hz)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …) in bytes; `Threads` as a count.
pub fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.strip_prefix(name).is_some_and(|r| r.starts_with(':')))?;
    let mut parts = line[name.len() + 1..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    Some(if parts.next() == Some("kB") { value * 1024 } else { value })
}

/// Number of open file descriptors of `pid`.
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// user + system CPU time of this process (every thread), microsecond resolution.
pub fn self_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Machine-wide CPU time from the first line of `/proc/stat`: (busy, total), where busy is
/// everything but idle and iowait.
pub fn machine_cpu() -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already inside user).
    let total: u64 = values.iter().take(8).sum();
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    let hz = clock_ticks_per_sec();
    Some((Duration::from_secs_f64((total - idle) as f64 / hz), Duration::from_secs_f64(total as f64 / hz)))
}

/// Raises this process's open-file limit (soft and, as root, hard) to at least `want`; children
/// inherit it. Returns the soft limit in force afterwards.
pub fn raise_nofile(want: u64) -> u64 {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur >= want {
            return limit.rlim_cur;
        }
        let raised = libc::rlimit { rlim_cur: want, rlim_max: limit.rlim_max.max(want) };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return want;
        }
        // Not root: go as high as the hard limit allows.
        let capped = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &capped) == 0 { limit.rlim_max } else { limit.rlim_cur }
    }
}

/// Restricts thread/process `pid` (0: the caller) to `cpus` (`sched_setaffinity`).
pub fn pin_to(pid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET only writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(process_cpu(pid).is_some());
        assert!(status_field(pid, "VmRSS").unwrap() > 0);
        assert!(status_field(pid, "Threads").unwrap() >= 1);
        assert!(open_fds(pid).unwrap() >= 1);
        let (busy, total) = machine_cpu().unwrap();
        assert!(busy <= total);
    }

    #[test]
    fn reads_processes_by_name() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let name = &stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()];
        // Burn a few clock ticks so the sum cannot be zero.
        let until = std::time::Instant::now() + Duration::from_millis(50);
        while std::time::Instant::now() < until {}
        assert!(processes_cpu_by_name(name) > Duration::ZERO);
        assert_eq!(processes_cpu_by_name("no-such-process-name"), Duration::ZERO);
    }
}
