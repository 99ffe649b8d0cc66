//! The seccomp-bpf filters of a sandboxed child: a deny list, not an allow list, because the
//! children are general-purpose interpreters and tools (python3, bash, git, coreutils) whose exact
//! syscall set varies with versions; an allow list would break them in ways no test predicts.
//!
//! What is denied, and why:
//! * `socket` for every family the agent does not grant: `AF_INET`/`AF_INET6` with
//!   `sandbox.network`, `AF_UNIX` with `sandbox.unixSockets`, nothing else ever. No TCP, UDP
//!   (Landlock only covers TCP), raw, packet or netlink sockets, and no unix sockets: Landlock
//!   cannot refuse `connect()` to a pathname socket, and a local database's socket that file
//!   permissions leave open (PostgreSQL's, 0777 with `trust`) runs programs for whoever logs in;
//! * `socketpair` for any family but `AF_UNIX` (the socket filter must not be sidestepped), and,
//!   without `sandbox.unixSockets`, for any type but stream and seqpacket: a datagram pair still
//!   sends to any pathname datagram socket by address (`sendto`), while a connected stream or
//!   seqpacket pair can never be pointed elsewhere (`EISCONN`). asyncio, multiprocessing and
//!   friends use stream pairs;
//! * kernel attack surface an unprivileged script never needs: `io_uring_*` (its operations bypass
//!   seccomp, sockets included), `bpf`, `perf_event_open`, `userfaultfd`, `keyctl`/`add_key`/
//!   `request_key`, namespaces (`unshare`, `setns`, `clone` with any `CLONE_NEW*` flag) and every
//!   mount call, module, kexec, swap, reboot, accounting, quota and syslog calls, file handles;
//! * reaching into other processes: `ptrace`, `process_vm_readv`/`writev`, `kcmp` (Landlock already
//!   scopes these; this is the second wall);
//! * terminal input injection: `ioctl(TIOCSTI)`/`ioctl(TIOCLINUX)`;
//! * `clone3` answers `ENOSYS`: its flags sit behind a pointer a filter cannot read, and libc falls
//!   back to `clone`, whose flags are checked;
//! * on x86-64, x32 syscall numbers and foreign architectures (i386 `int 0x80`) cannot sidestep
//!   the list: the former are refused, the latter kill the process.
//!
//! Denied calls fail with `EPERM` (`EACCES` for sockets, so Python says "Permission denied");
//! nothing is killed, so a script sees an ordinary error and its run completes.
//!
//! The programs are compiled before the fork; the child only installs them.

/// How many syscalls are denied outright (the report counts them).
#[cfg(target_os = "linux")]
pub const DENIED_COUNT: usize = DENIED.len();
#[cfg(not(target_os = "linux"))]
pub const DENIED_COUNT: usize = 0;

#[cfg(target_os = "linux")]
pub(crate) use linux::{build, install};

#[cfg(target_os = "linux")]
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    libc::SYS_fanotify_init,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
        TargetArch,
    };

    use super::DENIED;

    /// A filter that seccompiler refused to compile.
    #[derive(Debug, thiserror::Error)]
    #[error("seccomp filter: {0}")]
    pub(crate) struct SeccompError(#[from] seccompiler::BackendError);

    const NAMESPACE_FLAGS: [libc::c_int; 8] = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
        0x80, // CLONE_NEWTIME (shares its bit with CSIGNAL; clone never takes it as a signal number)
    ];

    #[cfg(target_arch = "x86_64")]
    const ARCH: TargetArch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    const ARCH: TargetArch = TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    const ARCH: TargetArch = TargetArch::riscv64;

    /// The child's filters, in installation order. `network`: the agent grants IP sockets;
    /// `unix_sockets`: it grants `AF_UNIX` sockets.
    pub(crate) fn build(network: bool, unix_sockets: bool) -> Result<Vec<BpfProgram>, SeccompError> {
        let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(SeccompError)
        };
        let rule = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(SeccompError);

        // 1. Syscalls denied outright, clone with namespace flags, terminal injection: EPERM.
        let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
        let clone_rules = NAMESPACE_FLAGS
            .iter()
            .map(|flag| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*flag as u64), *flag as u64)?]))
            .collect::<Result<Vec<_>, _>>()?;
        denied.insert(libc::SYS_clone, clone_rules);
        // The request is an int to the kernel: compare 32 bits, so set high bits cannot slip by.
        // (`libc::Ioctl` is u64 here and i32 elsewhere, hence the plain cast.)
        #[allow(clippy::unnecessary_cast)]
        let (tiocsti, tioclinux) = (libc::TIOCSTI as u64, libc::TIOCLINUX as u64);
        denied.insert(
            libc::SYS_ioctl,
            vec![rule(vec![cond(1, SeccompCmpOp::Eq, tiocsti)?])?, rule(vec![cond(1, SeccompCmpOp::Eq, tioclinux)?])?],
        );
        let denied = program(denied, libc::EPERM)?;

        // 2. clone3 → ENOSYS, so libc falls back to clone (checked above).
        let clone3 = program(BTreeMap::from([(libc::SYS_clone3, Vec::new())]), libc::ENOSYS)?;

        // 3. socket(domain, …) outside the granted families, socketpair outside AF_UNIX (and
        // outside stream/seqpacket without the unix grant) → EACCES.
        let mut granted_families = Vec::new();
        if unix_sockets {
            granted_families.push(libc::AF_UNIX);
        }
        if network {
            granted_families.extend([libc::AF_INET, libc::AF_INET6]);
        }
        // No conditions: every socket() is refused (a rule needs at least one condition, an
        // empty rule list matches the syscall outright).
        let socket_rules = if granted_families.is_empty() {
            Vec::new()
        } else {
            let other_family = granted_families
                .iter()
                .map(|family| cond(0, SeccompCmpOp::Ne, *family as u64))
                .collect::<Result<Vec<_>, _>>()?;
            vec![rule(other_family)?]
        };
        let mut socketpair_rules = vec![rule(vec![cond(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])?];
        if !unix_sockets {
            // The type argument is the type plus at most SOCK_NONBLOCK and SOCK_CLOEXEC (anything
            // else is EINVAL), so listing the allowed values exactly covers every valid call.
            let flags = [0, libc::SOCK_NONBLOCK, libc::SOCK_CLOEXEC, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC];
            let other_type = [libc::SOCK_STREAM, libc::SOCK_SEQPACKET]
                .into_iter()
                .flat_map(|kind| flags.map(|flag| kind | flag))
                .map(|value| cond(1, SeccompCmpOp::Ne, value as u64))
                .collect::<Result<Vec<_>, _>>()?;
            socketpair_rules.push(rule(other_type)?);
        }
        let sockets = program(
            BTreeMap::from([(libc::SYS_socket, socket_rules), (libc::SYS_socketpair, socketpair_rules)]),
            libc::EACCES,
        )?;

        let mut first = x32_guard();
        first.extend(denied);
        Ok(vec![first, clone3, sockets])
    }

    fn program(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: libc::c_int) -> Result<BpfProgram, SeccompError> {
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno as u32), ARCH)?;
        Ok(BpfProgram::try_from(filter)?)
    }

    /// x32 syscall numbers (bit 30 set) share the x86-64 audit arch, so the lists keyed by x86-64
    /// numbers would not see them: refuse them all before anything else.
    #[cfg(target_arch = "x86_64")]
    fn x32_guard() -> BpfProgram {
        use seccompiler::sock_filter;
        const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS
        const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
        const BPF_RET_K: u16 = 0x06;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        vec![
            // seccomp_data.nr is at offset 0.
            sock_filter { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: 0 },
            sock_filter { code: BPF_JMP_JGE_K, jt: 0, jf: 1, k: X32_SYSCALL_BIT },
            sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32 },
        ]
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn x32_guard() -> BpfProgram {
        Vec::new()
    }

    /// Installs the filters in the calling (child) process. Async-signal-safe: two syscalls per
    /// filter on memory prepared before the fork; `no_new_privs` must already be set.
    pub(crate) fn install(programs: &[BpfProgram]) -> std::io::Result<()> {
        for program in programs {
            let prog = libc::sock_fprog {
                len: program.len() as libc::c_ushort,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: `prog` points at a live, well-formed BPF program; the kernel copies it.
            let rc = unsafe {
                libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog)
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_every_grant() {
        for (network, unix_sockets) in [(false, false), (true, false), (false, true), (true, true)] {
            let programs = build(network, unix_sockets).unwrap();
            assert_eq!(programs.len(), 3);
            assert!(programs.iter().all(|p| !p.is_empty() && p.len() < 4096));
        }
        const { assert!(DENIED_COUNT >= 40) };
    }
}
