//! Where a path really points. Resolution is physical, one component at a time: every existing
//! prefix is canonicalised, so a symlink is followed before a later `..` is applied, exactly as the
//! kernel will when the interpreter opens the path (lexical normalisation first would let
//! `link/../secret` escape).

use std::path::{Component, Path, PathBuf};

/// The real location of `path` (absolute, or relative to `base`, which should be canonical);
/// `None` when a dangling symlink lies on the way (where it leads cannot be known).
pub(crate) fn resolve_physically(base: &Path, path: &Path) -> Option<PathBuf> {
    let joined = if path.is_absolute() { path.to_path_buf() } else { base.join(path) };
    let mut current = PathBuf::new();
    // Once a component does not exist, nothing below it can be a symlink: the rest is lexical.
    let mut exists = true;
    for component in joined.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => current.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                current.push(name);
                if exists {
                    match current.canonicalize() {
                        Ok(real) => current = real,
                        Err(_) if current.symlink_metadata().is_ok() => return None,
                        Err(_) => exists = false,
                    }
                }
            }
        }
    }
    Some(current)
}

/// `path` made absolute against the process working directory, `.`/`..` removed lexically.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
