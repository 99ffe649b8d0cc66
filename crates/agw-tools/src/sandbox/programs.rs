//! Finding the program a sandboxed child runs, as that child will see it.
//!
//! Two things differ from agw's own view:
//! * a child with an identity of its own can only execute what file permissions give "others",
//!   so `PATH` candidates it could not execute are skipped, as `execvp` in the child would skip
//!   them (on this project's machines `python3` is first a pyenv shim under `/root`, which is
//!   private; the next candidate is the system's);
//! * Landlock must grant the interpreter's own files, so for Python the real binary behind any
//!   shim and its prefixes (`sys.prefix`, `sys.base_prefix`, `sys.exec_prefix`,
//!   `sys.base_exec_prefix`) are asked once from the interpreter itself and cached.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::identity::{others_can_execute, others_can_read};
use super::is_executable;

/// A program resolved for a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The real (canonical) file to execute.
    pub path: PathBuf,
    /// Directories the program reads its own files from (an interpreter's prefixes), to be
    /// granted read and execute access.
    pub prefixes: Vec<PathBuf>,
}

/// The `PATH` candidates for `name`: `name` itself when it holds a `/`, else `name` in each
/// absolute `PATH` entry (`/usr/local/bin:/usr/bin:/bin` when unset), executable by agw.
fn candidates(name: &str) -> Vec<PathBuf> {
    if name.contains('/') {
        return vec![PathBuf::from(name)];
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .filter(|candidate| is_executable(candidate))
        .collect()
}

/// The program `name` for a child: the first candidate the child can execute (any, when it
/// keeps agw's identity: `other_identity` false), resolved to its real file.
pub fn find_program_for(name: &str, other_identity: bool) -> Option<Program> {
    candidates(name)
        .into_iter()
        .filter(|candidate| !other_identity || others_can_execute(candidate))
        .find_map(|candidate| candidate.canonicalize().ok())
        .map(|path| Program { path, prefixes: Vec::new() })
}

/// The Python interpreter `name` stands for, for a child: the real binary and its prefixes, of
/// the first candidate whose binary and prefixes the child can use. Asked once per name and
/// identity kind; `None` when no candidate works.
pub fn python(name: &str, other_identity: bool) -> Option<Program> {
    type Cache = Vec<((String, bool), Option<Program>)>;
    static CACHE: Mutex<Cache> = Mutex::new(Vec::new());
    let key = (name.to_owned(), other_identity);
    if let Some((_, found)) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(k, _)| *k == key) {
        return found.clone();
    }
    let found = candidates(name).iter().filter_map(|candidate| ask_python(candidate)).find(|program| {
        !other_identity
            || (others_can_execute(&program.path) && program.prefixes.iter().all(|prefix| others_can_read(prefix)))
    });
    if found.is_none() {
        tracing::warn!(python = name, other_identity, "no usable Python interpreter for sandboxed scripts");
    }
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).push((key, found.clone()));
    found
}

/// Runs `candidate` once (isolated mode, no site, cleared environment but `PATH`/`HOME` for
/// shims) to learn its real executable and prefixes.
fn ask_python(candidate: &Path) -> Option<Program> {
    const CODE: &str = "import json, sys; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, \
                        sys.exec_prefix, sys.base_exec_prefix]))";
    let mut child = Command::new(candidate)
        .args(["-I", "-S", "-c", CODE])
        .env_clear()
        .envs(["PATH", "HOME"].iter().filter_map(|key| std::env::var_os(key).map(|value| (key, value))))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // A broken interpreter must not hang the caller: 10 s, then it is not a candidate.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let paths: Vec<String> = serde_json::from_str(out.trim()).ok()?;
    let (executable, prefixes) = paths.split_first()?;
    let path = Path::new(executable).canonicalize().ok()?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for prefix in prefixes {
        if let Ok(dir) = Path::new(prefix).canonicalize()
            && !dirs.contains(&dir)
        {
            dirs.push(dir);
        }
    }
    Some(Program { path, prefixes: dirs })
}

/// `name → real binary (prefixes …)` of the interpreter children get, for reports.
pub fn describe_python(name: &str, other_identity: bool) -> String {
    match python(name, other_identity) {
        Some(program) => format!(
            "{name} → {} (prefixes {})",
            program.path.display(),
            program.prefixes.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        None => format!("{name} → none usable"),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_reports_its_real_binary_and_prefixes() {
        let Some(program) = python("python3", false) else { return };
        assert!(program.path.is_absolute() && program.path.is_file(), "{program:?}");
        assert!(!program.prefixes.is_empty() && program.prefixes.iter().all(|p| p.is_dir()), "{program:?}");
        assert_eq!(python("python3", false), Some(program), "cached");
        assert_eq!(python("agw-no-such-python", false), None);
    }

    #[test]
    fn programs_resolve_to_real_files() {
        let sh = find_program_for("sh", true).unwrap();
        assert!(sh.path.is_absolute() && sh.path == sh.path.canonicalize().unwrap());
        assert_eq!(find_program_for("agw-no-such-program", false), None);
    }
}
