//! The unprivileged identity of a sandboxed call when agw runs as root.
//!
//! Each running call gets a uid (and the same gid) of its own from `uid_base .. uid_base + SLOTS`,
//! with no supplementary groups. One per call, not one shared `nobody`, because:
//! * `RLIMIT_NPROC` counts per uid: a shared uid would let one call's fork bomb starve every other
//!   call (and root's count is never enforced at all);
//! * when the call ends, every process of that uid can be killed at once (dropping its slot does
//!   it), which also reaches processes that left the process group (`setsid`);
//! * calls cannot signal or trace one another through a shared uid.
//!
//! As an unprivileged uid, a child also only reads what file permissions give "others": the
//! directories a tool hands it must be world-readable (the sandbox checks that first, so the
//! model gets a clear message instead of a bare `Permission denied`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::config::SLOTS;

/// A uid/gid pair a child runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// User id; unique to the call while it runs.
    pub uid: u32,
    /// Group id that goes with `uid`.
    pub gid: u32,
}

/// Slots in use, by index.
static IN_USE: Mutex<Vec<bool>> = Mutex::new(Vec::new());

/// A reserved identity. Dropping it kills every process still running as that uid, then frees
/// the slot.
#[derive(Debug)]
pub(crate) struct Slot {
    index: usize,
    identity: Identity,
}

impl Slot {
    /// Reserves a free identity; `None` when all [`SLOTS`] are running.
    pub(crate) fn acquire(uid_base: u32) -> Option<Slot> {
        let mut in_use = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        if in_use.is_empty() {
            in_use.resize(SLOTS as usize, false);
        }
        let index = in_use.iter().position(|used| !used)?;
        let uid = uid_base.checked_add(index as u32)?;
        in_use[index] = true;
        Some(Slot { index, identity: Identity { uid, gid: uid } })
    }

    pub(crate) fn identity(&self) -> Identity {
        self.identity
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        kill_all(self.identity);
        IN_USE.lock().unwrap_or_else(|e| e.into_inner())[self.index] = false;
    }
}

/// Kills every process running as `identity.uid`: a short-lived child switches to that uid and
/// sends `kill(-1, SIGKILL)`, which reaches exactly the processes that uid may signal (its own),
/// repeated until none is left. No-op unless agw is root.
#[cfg(target_os = "linux")]
fn kill_all(identity: Identity) {
    // SAFETY: the child only makes async-signal-safe syscalls and leaves with _exit; the parent
    // waits for it.
    unsafe {
        if libc::geteuid() != 0 {
            return;
        }
        let pid = libc::fork();
        if pid == 0 {
            // Raw syscalls: they change this (only) thread's credentials and nothing else.
            let gid = identity.gid as libc::c_long;
            let uid = identity.uid as libc::c_long;
            if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0
                || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
            {
                libc::_exit(1);
            }
            // Bounded: a process forking as fast as it is killed still runs out of rounds.
            for _ in 0..1000 {
                if libc::kill(-1, libc::SIGKILL) != 0 {
                    break; // ESRCH: nothing left.
                }
            }
            libc::_exit(0);
        }
        if pid > 0 {
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {}
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_all(_identity: Identity) {}

/// Can a uid that owns nothing and is in no group read (and traverse) `path`: every ancestor
/// searchable by "others", and the path itself readable (directories also searchable)? ACLs are
/// not consulted. `path` should be canonical.
#[cfg(unix)]
pub(crate) fn others_can_read(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).map(|m| (m.permissions().mode(), m.is_dir()));
    let Ok((own, is_dir)) = mode(path) else { return false };
    let needed = if is_dir { 0o005 } else { 0o004 };
    own & needed == needed && path.ancestors().skip(1).all(|dir| mode(dir).is_ok_and(|(m, _)| m & 0o001 != 0))
}

#[cfg(not(unix))]
pub(crate) fn others_can_read(_path: &Path) -> bool {
    true
}

/// A directory that a uid owning nothing and in no group cannot get into, and the directories
/// that stop it: its parents that others cannot search (`o+x` missing), and the directory itself
/// when others cannot list or enter it (`o+rx`). Rendered as one line naming them and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The directory, at its real location (symlinks followed as far as it exists).
    pub path: PathBuf,
    /// The directories that stop the identity, outermost first, with their permission bits.
    pub blockers: Vec<(PathBuf, u32)>,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named = |dir: &Path, mode: u32| format!("{} (mode {:04o})", dir.display(), mode & 0o7777);
        let parents: Vec<&(PathBuf, u32)> = self.blockers.iter().filter(|(dir, _)| *dir != self.path).collect();
        let own = self.blockers.iter().find(|(dir, _)| *dir == self.path);
        let path = self.path.display();
        write!(f, "{path} cannot be read by the sandbox identity (each call runs as a uid of its own): ")?;
        let mut problems = Vec::new();
        let mut fixes = Vec::new();
        if !parents.is_empty() {
            let names: Vec<String> = parents.iter().map(|(dir, mode)| named(dir, *mode)).collect();
            problems.push(format!("{} not searchable by others", names.join(", ")));
            let dirs: Vec<String> = parents.iter().map(|(dir, _)| dir.display().to_string()).collect();
            fixes.push(format!("chmod o+x {}", dirs.join(" ")));
        }
        if let Some((dir, mode)) = own {
            problems.push(format!("{} not readable by others", named(dir, *mode)));
            fixes.push(format!("chmod o+rx {path}"));
        }
        write!(
            f,
            "{}. Move it to a directory every user can enter, or run `{}` (its files must be readable by others too)",
            problems.join("; "),
            fixes.join(" && ")
        )
    }
}

/// Where an identity that owns nothing and is in no group is stopped on its way into the
/// directory `dir`; `None` when it gets in. Parts of `dir` that do not exist are not checked (a
/// missing `_bash_` working directory is created, readable, on first use), but its existing
/// parents are. ACLs are not consulted.
#[cfg(unix)]
pub fn blocked(dir: &Path) -> Option<Blocked> {
    use std::os::unix::fs::PermissionsExt;
    let path = super::resolve_physically(Path::new("/"), dir).unwrap_or_else(|| dir.to_path_buf());
    let mode = |p: &Path| std::fs::metadata(p).ok().map(|m| m.permissions().mode());
    let mut blockers: Vec<(PathBuf, u32)> = path
        .ancestors()
        .skip(1)
        .filter_map(|parent| mode(parent).filter(|m| m & 0o001 == 0).map(|m| (parent.to_path_buf(), m)))
        .collect();
    blockers.reverse();
    if let Some(own) = mode(&path).filter(|m| m & 0o005 != 0o005) {
        blockers.push((path.clone(), own));
    }
    (!blockers.is_empty()).then_some(Blocked { path, blockers })
}

/// Where a directory is blocked for the sandbox identity; never off Unix.
#[cfg(not(unix))]
pub fn blocked(_dir: &Path) -> Option<Blocked> {
    None
}

/// Can such a uid execute the file `path` (searchable ancestors, execute bit for others)?
#[cfg(unix)]
pub(crate) fn others_can_execute(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(real) = path.canonicalize() else { return false };
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode());
    mode(&real).is_ok_and(|m| m & 0o001 != 0)
        && real.ancestors().skip(1).all(|dir| mode(dir).is_ok_and(|m| m & 0o001 != 0))
}

#[cfg(not(unix))]
pub(crate) fn others_can_execute(_path: &Path) -> bool {
    true
}

/// Hands `path` (a file or directory agw just created for the call) to `identity`.
#[cfg(unix)]
pub(crate) fn give(path: &Path, identity: Identity) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, Some(identity.uid), Some(identity.gid))
}

#[cfg(not(unix))]
pub(crate) fn give(_path: &Path, _identity: Identity) -> std::io::Result<()> {
    Ok(())
}

/// The first directory of `paths` (absolute, canonical) that an unprivileged identity cannot
/// read.
pub(crate) fn first_unreadable(paths: &[PathBuf]) -> Option<&PathBuf> {
    paths.iter().find(|path| !others_can_read(path))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn slots_are_distinct_and_reused() {
        let a = Slot::acquire(3_000_000_000).unwrap();
        let b = Slot::acquire(3_000_000_000).unwrap();
        assert_ne!(a.identity(), b.identity());
        assert_eq!(a.identity().uid, a.identity().gid);
        let freed = a.identity();
        drop(a);
        let c = Slot::acquire(3_000_000_000).unwrap();
        assert_eq!(c.identity(), freed, "the lowest free slot is reused");
    }

    #[test]
    fn permissions_for_others() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = base.join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!others_can_read(&file) && !others_can_execute(&file), "the private parent hides it");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(others_can_read(&file) && others_can_execute(&file));
        assert!(others_can_read(&base));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(!others_can_read(&file) && !others_can_execute(&file));
        assert_eq!(first_unreadable(&[base.clone(), file.clone()]), Some(&file));
    }

    #[test]
    fn blocked_directories_name_what_stops_the_identity_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let set = |p: &Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        let (private, root) = (base.join("home"), base.join("home/app/skills"));
        std::fs::create_dir_all(&root).unwrap();
        set(&base, 0o755);
        set(&private, 0o700);
        set(&root, 0o750);
        let found = blocked(&root).expect("blocked");
        assert_eq!(found.blockers, [(private.clone(), 0o40700), (root.clone(), 0o40750)]);
        let text = found.to_string();
        assert!(text.starts_with(&format!("{} cannot be read by the sandbox identity", root.display())), "{text}");
        assert!(text.contains(&format!("{} (mode 0700) not searchable by others", private.display())), "{text}");
        assert!(text.contains(&format!("chmod o+x {} && chmod o+rx {}", private.display(), root.display())), "{text}");

        // A missing directory is checked up to its existing parents.
        let missing = private.join("app/work");
        assert_eq!(blocked(&missing).unwrap().blockers, [(private.clone(), 0o40700)]);
        set(&private, 0o711);
        assert_eq!(blocked(&missing), None);
        set(&root, 0o755);
        assert_eq!(blocked(&root), None);
    }
}
