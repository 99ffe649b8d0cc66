//! Startup sync of the bundled demo resources into configured directories.
//!
//! When an operator points agw at their own directories, the bundled demo agents, tools and
//! viewports are copied in so the demos keep working next to the operator's files. A file that
//! already exists is left alone (the reference overwrote it, losing the operator's edits on every
//! restart); nothing is ever deleted.

use std::io;
use std::path::Path;

/// What a sync did in one directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Relative paths written because they were missing.
    pub written: Vec<String>,
    /// Relative paths left alone because a file was already there.
    pub kept: Vec<String>,
}

/// Writes each `(relative path, contents)` under `dir` unless a file is already there.
pub fn sync_files(dir: &Path, files: &[(&str, &str)]) -> io::Result<SyncReport> {
    std::fs::create_dir_all(dir)?;
    let mut report = SyncReport::default();
    for (relative, contents) in files {
        // Bundled paths are ours, but never let one escape the directory.
        if relative.split(['/', '\\']).any(|part| part == ".." || part.is_empty()) {
            continue;
        }
        let target = dir.join(relative);
        if std::fs::symlink_metadata(&target).is_ok() {
            report.kept.push((*relative).to_string());
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, contents)?;
        report.written.push((*relative).to_string());
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_missing_files_and_keeps_the_operators() {
        let dir = std::env::temp_dir().join(format!("agw-sync-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mine.json"), "operator's own").unwrap();
        std::fs::write(dir.join("demo.json"), "operator's edit of a demo").unwrap();
        let report = sync_files(
            &dir,
            &[("demo.json", "bundled"), ("new.json", "bundled new"), ("sub/x.md", "nested"), ("../escape", "no")],
        )
        .unwrap();
        assert_eq!(report.written, ["new.json", "sub/x.md"]);
        assert_eq!(report.kept, ["demo.json"]);
        assert_eq!(std::fs::read_to_string(dir.join("mine.json")).unwrap(), "operator's own");
        assert_eq!(std::fs::read_to_string(dir.join("demo.json")).unwrap(), "operator's edit of a demo");
        assert_eq!(std::fs::read_to_string(dir.join("sub/x.md")).unwrap(), "nested");
        assert!(!dir.parent().unwrap().join("escape").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
