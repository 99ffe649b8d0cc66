//! Where a path really points. Resolution is physical, one component at a time: every existing
//! prefix is canonicalised, so a symlink is followed before a later `..` is applied, exactly as the
//! kernel will when the interpreter opens the path (lexical normalisation first would let
//! `link/../secret` escape). Both the physical resolution and the lexical normalisation are
//! agw-tools' [`sandbox`](agw_tools::sandbox) helpers, shared with `_bash_`; what is left here is
//! the skills root made absolute.

use std::path::{Path, PathBuf};

use agw_tools::sandbox::normalize;

/// `path` made absolute against the process working directory, `.`/`..` removed lexically.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        normalize(path)
    } else {
        normalize(&std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(path))
    }
}

#[cfg(test)]
mod tests {
    use agw_tools::sandbox::resolve_physically;

    use super::*;

    #[test]
    fn lexical_parts_resolve_like_the_kernel() {
        assert_eq!(resolve_physically(Path::new("/"), Path::new("/no/such/../dir")).unwrap(), PathBuf::from("/no/dir"));
        assert_eq!(resolve_physically(Path::new("/"), Path::new("/../..")).unwrap(), PathBuf::from("/"));
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert!(absolute(Path::new("rel")).is_absolute());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_before_dot_dot() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("a/deep")).unwrap();
        std::os::unix::fs::symlink(base.join("a/deep"), base.join("link")).unwrap();
        // link/.. is a/, not base/.
        assert_eq!(resolve_physically(&base, Path::new("link/../x")).unwrap(), base.join("a/x"));
        std::os::unix::fs::symlink(base.join("missing"), base.join("dangling")).unwrap();
        assert_eq!(resolve_physically(&base, Path::new("dangling/x")), None);
    }
}
