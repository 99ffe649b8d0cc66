//! `_bash_` settings (docs/contract/config.md §4) and their defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sandbox::{SandboxConfig, normalize};

/// Commands `_bash_` may run when none are configured.
pub const DEFAULT_ALLOWED_COMMANDS: [&str; 9] = ["ls", "pwd", "cat", "head", "tail", "top", "free", "df", "git"];
/// The working directory when none is configured, relative to the process working directory. A
/// directory of its own, never the process working directory itself: that one holds the chat
/// files of every user (`./chats`), the agents and the data directory.
pub const DEFAULT_WORKING_DIRECTORY: &str = "bash-workspace";
/// Commands whose arguments must stay inside the allowed roots when none are configured.
pub const DEFAULT_PATH_CHECKED_COMMANDS: [&str; 5] = ["ls", "cat", "head", "tail", "git"];

/// What `_bash_` may run and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashConfig {
    /// Absolute; the process working directory and the first allowed root.
    pub working_directory: PathBuf,
    /// Extra allowed roots (absolute).
    pub allowed_paths: Vec<PathBuf>,
    /// Exact program names that may be run.
    pub allowed_commands: Vec<String>,
    /// Programs whose arguments are checked against the allowed roots.
    pub path_checked_commands: Vec<String>,
    /// Wall-clock limit per command; the process group is killed after it.
    pub timeout: Duration,
    /// Characters kept of stdout and of stderr each.
    pub output_cap_chars: usize,
    /// How the command's process is confined (the roots are its read-only directories).
    pub sandbox: SandboxConfig,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig::from_lists(None, [""; 0], [""; 0], [""; 0])
    }
}

impl BashConfig {
    /// Builds the configuration from the settings' raw forms: every list entry may itself be
    /// comma-separated (`AGENT_BASH_ALLOWED_COMMANDS=ls,cat`); entries are trimmed and blanks
    /// dropped; an empty command list means the defaults. A blank or absent working directory is
    /// [`DEFAULT_WORKING_DIRECTORY`]; relative paths are resolved against the process working
    /// directory.
    pub fn from_lists<S: AsRef<str>>(
        working_directory: Option<&str>,
        allowed_paths: impl IntoIterator<Item = S>,
        allowed_commands: impl IntoIterator<Item = S>,
        path_checked_commands: impl IntoIterator<Item = S>,
    ) -> BashConfig {
        let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let dir = working_directory.map(str::trim).filter(|w| !w.is_empty()).unwrap_or(DEFAULT_WORKING_DIRECTORY);
        let working_directory = absolute(&base, Path::new(dir));
        let allowed_paths = split_list(allowed_paths).iter().map(|p| absolute(&base, Path::new(p))).collect();
        BashConfig {
            working_directory,
            allowed_paths,
            allowed_commands: or_defaults(split_list(allowed_commands), &DEFAULT_ALLOWED_COMMANDS),
            path_checked_commands: or_defaults(split_list(path_checked_commands), &DEFAULT_PATH_CHECKED_COMMANDS),
            timeout: Duration::from_secs(5),
            output_cap_chars: 2000,
            sandbox: SandboxConfig::default(),
        }
    }
}

impl BashConfig {
    /// Creates the working directory when it is missing (0755 on Unix: sandboxed commands run
    /// under their own uid and must read it; only agw writes it).
    pub fn ensure_working_directory(&self) -> std::io::Result<()> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        // Readable and searchable by others, writable by agw only: sandboxed commands run under
        // an identity of their own and must be able to read their root; nobody but agw writes it.
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
        builder.create(&self.working_directory)
    }
}

fn split_list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Vec<String> {
    items
        .into_iter()
        .flat_map(|item| item.as_ref().split(',').map(|s| s.trim().to_owned()).collect::<Vec<_>>())
        .filter(|s| !s.is_empty())
        .collect()
}

fn or_defaults(items: Vec<String>, defaults: &[&str]) -> Vec<String> {
    if items.is_empty() { defaults.iter().map(|s| (*s).to_owned()).collect() } else { items }
}

/// `path` made absolute against `base`, with `.` and `..` removed lexically.
pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() { normalize(path) } else { normalize(&base.join(path)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let config = BashConfig::default();
        assert_eq!(config.allowed_commands, DEFAULT_ALLOWED_COMMANDS);
        assert_eq!(config.path_checked_commands, DEFAULT_PATH_CHECKED_COMMANDS);
        assert!(config.working_directory.is_absolute());
        assert!(config.allowed_paths.is_empty());
        assert_eq!(config.timeout, Duration::from_secs(5));
        assert_eq!(config.output_cap_chars, 2000);
    }

    #[test]
    fn comma_separated_lists() {
        let config = BashConfig::from_lists(
            Some("/srv/work/../app"),
            ["/opt/a, /opt/b", " ", "rel"],
            ["echo, ls", "cat"],
            [" ", ","],
        );
        assert_eq!(config.working_directory, PathBuf::from("/srv/app"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            config.allowed_paths,
            [PathBuf::from("/opt/a"), PathBuf::from("/opt/b"), normalize(&cwd.join("rel"))]
        );
        assert_eq!(config.allowed_commands, ["echo", "ls", "cat"]);
        assert_eq!(config.path_checked_commands, DEFAULT_PATH_CHECKED_COMMANDS);
    }

    #[test]
    fn blank_working_directory_is_the_dedicated_workspace() {
        let cwd = std::env::current_dir().unwrap();
        for given in [None, Some("  ")] {
            let config = BashConfig::from_lists(given, [""; 0], [""; 0], [""; 0]);
            assert_eq!(config.working_directory, normalize(&cwd.join(DEFAULT_WORKING_DIRECTORY)));
            assert_ne!(config.working_directory, normalize(&cwd));
        }
    }

    #[test]
    fn lexical_normalisation() {
        assert_eq!(normalize(Path::new("/a/./b/../../../c")), PathBuf::from("/c"));
        assert_eq!(absolute(Path::new("/w"), Path::new("x/../y")), PathBuf::from("/w/y"));
    }
}
