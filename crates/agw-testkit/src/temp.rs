//! Temporary directories that remove themselves, for tests that read and write files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system temp dir, removed (with its contents) on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A directory named after `label`, the process, a counter and the clock.
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("agw-{label}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        // Canonical, so paths compare equal to what the tools report (e.g. /tmp behind a symlink).
        TempDir(path.canonicalize().expect("canonical temp dir"))
    }

    /// Its (canonical) path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `relative` (parents created) and returns the full path.
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.0.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Creates `relative` (parents too) and returns its full path.
    pub fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(&path).expect("create dir");
        path
    }

    /// A symlink at `relative` pointing to `target` (as given, relative or absolute).
    #[cfg(unix)]
    pub fn symlink(&self, target: impl AsRef<Path>, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::os::unix::fs::symlink(target, &path).expect("create symlink");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
