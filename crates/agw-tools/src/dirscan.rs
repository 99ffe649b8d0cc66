//! Listing the files directly inside a definition directory (tools, viewports).

use std::path::{Path, PathBuf};

/// One candidate file: its bare name, where it came from (for messages) and its text, or why it
/// could not be read.
#[derive(Debug)]
pub(crate) struct SourceFile {
    pub file_name: String,
    pub origin: String,
    pub text: Result<String, String>,
}

/// Regular files directly in `dir` whose name passes `wanted`, in ascending name order.
///
/// Hidden files (name starting with `.`) are skipped: editors and sync tools leave swap and lock
/// files there. A symlink counts when it resolves to a regular file inside `dir`; one pointing out
/// of the directory is skipped, so a definition directory can never be used to read other files.
/// A missing or unreadable directory yields nothing (logged).
pub(crate) fn scan(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<SourceFile> {
    let canonical_dir = match dir.canonicalize() {
        Ok(canonical) => canonical,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "directory not readable; nothing loaded from it");
            return Vec::new();
        }
    };
    let entries = match std::fs::read_dir(&canonical_dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "directory not readable; nothing loaded from it");
            return Vec::new();
        }
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            // Names that are not UTF-8 cannot be tool names or viewport keys.
            let file_name = entry.file_name().to_str()?.to_owned();
            (!file_name.starts_with('.') && wanted(&file_name)).then(|| (file_name, entry.path()))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|(file_name, path)| {
            let resolved = path.canonicalize().ok()?;
            if !resolved.starts_with(&canonical_dir) {
                tracing::warn!(file = %path.display(), "skipping a symlink that leads out of its directory");
                return None;
            }
            if !resolved.is_file() {
                return None;
            }
            let text = std::fs::read_to_string(&resolved).map_err(|e| format!("cannot read file: {e}"));
            Some(SourceFile { file_name, origin: path.display().to_string(), text })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_directory_is_empty() {
        assert!(scan(Path::new("/definitely/not/here/agw"), |_| true).is_empty());
    }
}
