//! Where a path argument really points, and whether that is inside an allowed root.
//!
//! Resolution is physical, one component at a time: every existing prefix is canonicalised, so a
//! symlink is followed before a later `..` is applied, exactly as the kernel will when the command
//! opens the path. (Lexical normalisation first would let `link/../secret` escape.) The resolution
//! itself is [`crate::sandbox::resolve_physically`], shared with `_skill_run_script_`.

use std::path::{Path, PathBuf};

use crate::sandbox::{normalize, resolve_physically};

/// The allowed roots, canonicalised when they exist.
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    working_directory: PathBuf,
    roots: Vec<PathBuf>,
}

impl Roots {
    pub(crate) fn new(working_directory: &Path, extra: &[PathBuf]) -> Roots {
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| normalize(path));
        let working_directory = canonical(working_directory);
        let mut roots = vec![working_directory.clone()];
        roots.extend(extra.iter().map(|root| canonical(root)));
        Roots { working_directory, roots }
    }

    /// The canonical working directory.
    pub(crate) fn working_directory(&self) -> &Path {
        &self.working_directory
    }

    /// The real location of `arg` (absolute, or relative to the working directory); `None` when it
    /// cannot be determined safely (a dangling symlink on the way).
    pub(crate) fn resolve(&self, arg: &str) -> Option<PathBuf> {
        resolve_physically(&self.working_directory, Path::new(arg))
    }

    /// Is `arg`, once resolved, inside one of the roots?
    pub(crate) fn allows(&self, arg: &str) -> bool {
        self.resolve(arg).is_some_and(|path| self.contains(&path))
    }

    /// Every root (canonical when it exists), the working directory first.
    pub(crate) fn all(&self) -> &[PathBuf] {
        &self.roots
    }

    pub(crate) fn contains(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|root| resolved.starts_with(root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_parts_resolve_like_the_kernel() {
        let roots = Roots::new(Path::new("/"), &[]);
        assert_eq!(roots.resolve("/no/such/../dir").unwrap(), PathBuf::from("/no/dir"));
        assert_eq!(roots.resolve("/../..").unwrap(), PathBuf::from("/"));
    }
}
