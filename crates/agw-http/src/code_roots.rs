//! The directories model-started processes must read — the skills directory and `_bash_`'s
//! roots — checked against the sandbox identity at startup and by `agw check`.
//!
//! When agw runs as root each call runs as an unprivileged uid of its own, which reads only what
//! file permissions give "others". A root under a private parent (a home directory, 0700) would
//! make every call of that tool fail; the tool says so when called, but the operator should
//! learn it when starting the server, with the fix, not from a model's failed call.

use std::path::PathBuf;

use agw_tools::sandbox::identity::{self, Blocked};

use crate::config::Settings;
use crate::config::table::{AGENT_BASH_ALLOWED_PATHS, AGENT_BASH_WORKING_DIRECTORY, AGENT_SKILL_EXTERNAL_DIR};

/// A directory a code tool needs that the sandbox identity cannot get into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRoot {
    /// What the directory is for: `skills directory`, `_bash_ working directory`, …
    pub role: &'static str,
    /// The setting that names it (its dotted property).
    pub setting: &'static str,
    /// Where the identity is stopped, and the fix.
    pub blocked: Blocked,
}

impl std::fmt::Display for UnreadableRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the {} {}", self.role, self.blocked)
    }
}

/// The code tools' directories the sandbox identity cannot read; empty unless agw runs as root
/// (otherwise children keep agw's own identity). `_bash_` allowed paths that do not exist are
/// skipped, as the tool skips them; a missing working directory is checked up to its parents
/// (agw creates it, readable, on first use).
pub fn unreadable(settings: &Settings) -> Vec<UnreadableRoot> {
    if !settings.sandbox.support.root {
        return Vec::new();
    }
    let bash = crate::bash_config(settings);
    let roots = std::iter::once(("skills directory", AGENT_SKILL_EXTERNAL_DIR.property, crate::skills_dir(settings)))
        .chain(std::iter::once((
            "_bash_ working directory",
            AGENT_BASH_WORKING_DIRECTORY.property,
            bash.working_directory.clone(),
        )))
        .chain(
            bash.allowed_paths
                .iter()
                .filter(|path| path.exists())
                .map(|path| ("_bash_ allowed path", AGENT_BASH_ALLOWED_PATHS.property, path.clone())),
        );
    roots
        .filter_map(|(role, setting, path): (&'static str, &'static str, PathBuf)| {
            identity::blocked(&path).map(|blocked| UnreadableRoot { role, setting, blocked })
        })
        .collect()
}

/// One WARN line per unreadable root (see [`unreadable`]).
pub(crate) fn warn_unreadable(settings: &Settings) {
    for root in unreadable(settings) {
        tracing::warn!(path = %root.blocked.path.display(), setting = root.setting, "sandbox: {root}");
    }
}
