//! The typed errors of the crate: a rule file's content ([`RuleError`], [`RuleProblem`]), loading
//! a directory of them ([`CatalogError`]), a webhook's verdict ([`VerdictError`]) and a
//! granularity setting ([`GranularityError`]).

use std::path::{Path, PathBuf};

/// Why one rule of a rule file is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleProblem {
    /// The rule is not an object of the known keys and types (serde names the key).
    #[error("{0}")]
    Shape(#[source] serde_json::Error),
    /// `id` is empty, too long or has characters other than `A–Z a–z 0–9 _ . -`.
    #[error("`id` must be 1–64 characters from A–Z, a–z, 0–9, `_`, `.`, `-`")]
    BadId,
    /// Another rule of the same file has this id.
    #[error("`id` is used by an earlier rule of the file")]
    DuplicateId,
    /// Both `keywords` and `regex` are given.
    #[error("has both `keywords` and `regex`; give one")]
    BothPatterns,
    /// Neither `keywords` nor `regex` is given.
    #[error("has neither `keywords` nor `regex`")]
    NoPattern,
    /// `keywords` is an empty list.
    #[error("`keywords` is empty")]
    NoKeywords,
    /// `keywords` has more entries than [`crate::limits::MAX_KEYWORDS`].
    #[error("`keywords` has {count} entries, more than {limit}")]
    TooManyKeywords {
        /// Entries given.
        count: usize,
        /// [`crate::limits::MAX_KEYWORDS`].
        limit: usize,
    },
    /// One keyword is empty (or only whitespace).
    #[error("`keywords[{index}]` is empty")]
    EmptyKeyword {
        /// Its position in the list (from 0).
        index: usize,
    },
    /// One keyword is longer than [`crate::limits::MAX_KEYWORD_BYTES`].
    #[error("`keywords[{index}]` is {len} bytes, more than {limit}")]
    LongKeyword {
        /// Its position in the list (from 0).
        index: usize,
        /// Its length in bytes.
        len: usize,
        /// [`crate::limits::MAX_KEYWORD_BYTES`].
        limit: usize,
    },
    /// `regex` is not a valid regular expression.
    #[error("`regex` is invalid: {0}")]
    Syntax(#[source] Box<regex_syntax::Error>),
    /// `regex` (or the keywords' alternation) compiles past the size limits.
    #[error("`regex` is invalid: {0}")]
    Regex(#[source] Box<regex::Error>),
    /// The stream guard's automaton of the pattern cannot be built (size limits).
    #[error("`regex` is too large for the stream guard: {0}")]
    Automaton(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The pattern matches the empty string, which would hit everywhere.
    #[error("`regex` can match empty text")]
    EmptyMatch,
    /// `action` is `allow`, which is a verdict, not a rule action.
    #[error("`action` must be \"block\", \"warn\" or \"redact\"")]
    AllowAction,
    /// `replacement` is given on a rule that does not redact.
    #[error("`replacement` is only for action \"redact\"")]
    ReplacementWithoutRedact,
}

/// Why a rule file's text is refused as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The set's name (the file stem) is not 1–64 characters from `A–Z a–z 0–9 _ -`.
    #[error("the name {0:?} is not 1–64 characters from A–Z, a–z, 0–9, `_`, `-`")]
    BadName(String),
    /// The text is larger than [`crate::limits::MAX_FILE_BYTES`].
    #[error("{size} bytes, more than the {limit}-byte limit")]
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// [`crate::limits::MAX_FILE_BYTES`].
        limit: u64,
    },
    /// Not JSON, or not an object of `description` and `rules` (serde names the key).
    #[error("{0}")]
    Syntax(#[source] serde_json::Error),
    /// More rules than [`crate::limits::MAX_RULES`].
    #[error("{count} rules, more than the limit of {limit}")]
    TooManyRules {
        /// Rules given.
        count: usize,
        /// [`crate::limits::MAX_RULES`].
        limit: usize,
    },
    /// All patterns of the file together compile past [`crate::limits::MAX_SET_AUTOMATA_BYTES`].
    #[error("the patterns compile to {size} bytes together, more than the {limit}-byte limit")]
    TooComplex {
        /// Their compiled size in bytes.
        size: usize,
        /// [`crate::limits::MAX_SET_AUTOMATA_BYTES`].
        limit: usize,
    },
    /// One rule is refused.
    #[error("rule {rule}: {problem}")]
    Rule {
        /// The rule's `id` in quotes when it has one, else `#<position from 1>`.
        rule: String,
        /// What is wrong with it.
        problem: RuleProblem,
    },
}

/// A rule file (or directory entry) that was not loaded. Loading goes on without it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The rule directory itself cannot be listed.
    #[error("{}: cannot list the guardrails directory: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `.json` entry is a symbolic link, which is never followed.
    #[error("{}: is a symbolic link; rule files must be regular files in the directory", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A `.json` entry is not a regular file (a directory, a socket, …).
    #[error("{}: is not a regular file", path.display())]
    NotAFile {
        /// The entry.
        path: PathBuf,
    },
    /// The file was replaced between the check and the read.
    #[error("{}: changed while it was read", path.display())]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The file's name or content is refused.
    #[error("{}: {source}", path.display())]
    Rules {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: RuleError,
    },
    /// Two sets given to [`crate::GuardCatalog::from_sets`] have the same name.
    #[error("two rule sets are named {name:?}")]
    Duplicate {
        /// The name.
        name: String,
    },
}

impl CatalogError {
    /// The rule file whose content could not be used (unreadable, changed while read, or with
    /// rule errors): the one a reload keeps its last good set for. `None` for the others (a
    /// link or a non-file is refused on purpose, not kept).
    pub fn path(&self) -> Option<&Path> {
        match self {
            CatalogError::Read { path, .. } | CatalogError::Changed { path } | CatalogError::Rules { path, .. } => {
                Some(path)
            }
            _ => None,
        }
    }
}

/// A webhook's answer that is not a verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerdictError {
    /// The body is not a JSON object.
    #[error("the verdict is not a JSON object")]
    NotAnObject,
    /// `action` is missing or not a string.
    #[error("the verdict has no string `action`")]
    NoAction,
    /// `action` is not `allow`, `warn` or `block`.
    #[error("`action` must be \"allow\", \"warn\" or \"block\", not {0:?}")]
    UnknownAction(String),
    /// `reason` is present but not a string.
    #[error("`reason` must be a string")]
    ReasonNotString,
}

/// A granularity setting that is neither `sentence` nor a positive number of characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("granularity must be \"sentence\" or a positive number of characters, not {0:?}")]
pub struct GranularityError(pub String);
