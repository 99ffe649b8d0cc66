//! agw-guard — the guardrail rule engine: which text to block, warn about or redact, decided by
//! rule files, and the verdicts of the guards that are not rules (a judge model, a webhook).
//!
//! Owns:
//! * rule files, `<dir>/<name>.json`: an optional `description` and `rules`, each with an `id`,
//!   `keywords` (a list) or a `regex`, an optional `caseSensitive` (default false), an `action`
//!   (`block`, `warn` or `redact`), an optional `replacement` (redact only, default
//!   [`DEFAULT_REPLACEMENT`]) and `message`; parsed strictly into a [`RuleSet`] with typed
//!   errors naming the file, rule and key ([`RuleError`], [`CatalogError`]), within the bounds of
//!   [`limits`] (file size checked before reading, rules, keywords, compiled pattern size);
//! * the [`GuardCatalog`] of named sets: loaded from a directory (a broken file is skipped and
//!   reported, never stops the others; symbolic links are refused), the bundled `demo` set
//!   ([`GuardCatalog::bundled`]), or built from sets;
//! * matching a whole text ([`RuleSet::check`], [`RuleSet::redact`], [`check_all`],
//!   [`redact_all`], [`redact_json`]): keywords are one case-insensitive (unless `caseSensitive`)
//!   alternation per rule, matched as substrings — "dosage" hits inside "overdosage"; a `regex`
//!   rule uses the `regex` crate's syntax, also case-insensitive by default. Ranges are bytes on
//!   character boundaries;
//! * guarding a streamed text ([`StreamGuard`]): redacted before it is released, holding back
//!   only a tail that could still become a redact match (at most [`MAX_HOLD`] bytes), with
//!   block/warn hits reported once each, in bounded work per delta;
//! * [`Verdict`]s of a judge model's answer or a webhook's body, and the judging points of a
//!   stream ([`Granularity`], [`Boundaries`]).
//!
//! What a hit, a verdict or a revoked text means for a run (events, revoking shown text, ending
//! the run), which sets apply to which agent and stage, and calling a judge or webhook are the
//! caller's (agw-modes).
//!
//! Must never: do I/O other than listing and reading its rule directory (no network, no HTTP, no
//! writing), start or need an async runtime, depend on another agw crate, follow a symbolic
//! link out of the rule directory, let one bad rule file stop the others from loading, or let a
//! rule file or a stream make it use unbounded memory or time per delta.

#![forbid(unsafe_code)]
mod catalog;
mod error;
mod granularity;
pub mod limits;
mod rules;
mod scan;
mod stream;
mod verdict;

pub use catalog::GuardCatalog;
pub use error::{CatalogError, GranularityError, RuleError, RuleProblem, VerdictError};
pub use granularity::{Boundaries, Granularity};
pub use limits::{MAX_FILE_BYTES, MAX_HOLD};
pub use rules::{Action, DEFAULT_REPLACEMENT, Rule, RuleSet, is_valid_name};
pub use scan::{Hit, Redacted, check_all, redact_all, redact_json};
pub use stream::{Released, StreamGuard};
pub use verdict::Verdict;
