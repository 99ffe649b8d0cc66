//! The bounds that keep a hostile rule file, or a long answer, from costing unbounded memory or
//! time. One place, so the rule parser and the stream guard agree (a keyword never outgrows
//! what the stream guard can hold).

/// Largest rule file read, in bytes; checked on the file's size before it is read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Most rules in one file.
pub const MAX_RULES: usize = 1000;

/// Most keywords in one rule.
pub const MAX_KEYWORDS: usize = 1000;

/// Longest keyword, in bytes: a keyword match always fits in what [`MAX_HOLD`] can hold back.
pub const MAX_KEYWORD_BYTES: usize = MAX_HOLD;

/// Most text, in bytes, the stream guard holds back for a possible redaction, and the lookback
/// it re-scans around each new delta. A redact match that could still be growing past this is
/// released with what already matches redacted; a block/warn match longer than this is found by
/// [`crate::StreamGuard::finish`]'s whole-text check.
pub const MAX_HOLD: usize = 256;

/// The compiled-program limit per rule: the `regex` crate's `size_limit`, and the limit of the
/// stream guard's NFA of the rule. Room for a thousand case-insensitive keywords of some thirty
/// characters; a counted repetition of a large class (`\w{100}`) is over it.
pub const REGEX_SIZE_LIMIT: usize = 4 * 1024 * 1024;

/// The `regex` crate's lazy-DFA cache limit per rule and searching thread (its
/// `dfa_size_limit`); a search that needs more falls back to a slower engine, not more memory.
pub const REGEX_DFA_SIZE_LIMIT: usize = 512 * 1024;

/// The compiled size allowed for all patterns of one file together (measured on the stream
/// guard's NFAs, which grow like the `regex` crate's own): many rules just under the per-rule
/// limit must not add up to gigabytes.
pub const MAX_SET_AUTOMATA_BYTES: usize = 16 * 1024 * 1024;

/// The cache of the stream guard's lazy DFA, per rule and stream; raised to the automaton's
/// minimum for a large pattern (bounded through [`MAX_SET_AUTOMATA_BYTES`]).
pub(crate) const LIVE_CACHE_BYTES: usize = 256 * 1024;
