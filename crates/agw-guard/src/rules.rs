//! One rule set: the strict parser of a rule file's text and the compiled rules.
//!
//! ```json
//! {"description": "…", "rules": [
//!   {"id": "topic", "keywords": ["nerve agent"], "action": "block", "message": "…"},
//!   {"id": "email", "regex": "[\\w.+-]+@[\\w-]+\\.[\\w.]+", "action": "redact", "replacement": "[email]"}
//! ]}
//! ```

use std::fmt;
use std::sync::Arc;

use regex_automata::hybrid::dfa::DFA;
use regex_automata::nfa::thompson;
use regex_automata::{MatchKind, hybrid};
use regex_syntax::hir::{Hir, HirKind, Repetition};
use serde::{Deserialize, Serialize};

use crate::error::{RuleError, RuleProblem};
use crate::limits::{
    LIVE_CACHE_BYTES, MAX_FILE_BYTES, MAX_KEYWORD_BYTES, MAX_KEYWORDS, MAX_RULES, MAX_SET_AUTOMATA_BYTES,
    REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT,
};

/// What a rule does when it matches, or what a verdict decides. Ordered by severity
/// (`Allow < Warn < Redact < Block`), so the strongest of several is their `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nothing to do. Only a verdict says this; a rule never does.
    Allow,
    /// Show a warning; the text stays.
    Warn,
    /// Replace the matched text with the rule's replacement.
    Redact,
    /// Stop: the text must not be used or shown.
    Block,
}

impl Action {
    /// The lowercase word used in rule files, verdicts and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Warn => "warn",
            Action::Redact => "redact",
            Action::Block => "block",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The replacement of a redact rule that gives none.
pub const DEFAULT_REPLACEMENT: &str = "[redacted]";

/// One compiled rule of a [`RuleSet`].
#[derive(Debug)]
pub struct Rule {
    id: String,
    action: Action,
    message: String,
    replacement: Option<String>,
    pub(crate) matcher: Matcher,
}

impl Rule {
    /// The rule's `id`, unique in its set.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `Block`, `Warn` or `Redact` (never `Allow`).
    pub fn action(&self) -> Action {
        self.action
    }

    /// The rule's `message`, or one naming the rule when the file gives none.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What a redact rule puts in place of a match ([`DEFAULT_REPLACEMENT`] unless the file says);
    /// `None` for block and warn rules.
    pub fn replacement(&self) -> Option<&str> {
        self.replacement.as_deref()
    }

    /// The regular expression matched: the file's `regex`, or the alternation built from
    /// `keywords` (escaped, longest first). Case-insensitive unless the rule says
    /// `caseSensitive: true`.
    pub fn pattern(&self) -> &str {
        self.matcher.regex.as_str()
    }
}

/// A rule's pattern, compiled twice: the `regex` crate finds the matches; a lazy DFA of the same
/// pattern without its look-around assertions tells the stream guard whether a match starting at
/// some position could still run past the end of the text seen so far.
#[derive(Debug)]
pub(crate) struct Matcher {
    /// Finds matches (leftmost-first, like every search in this crate).
    pub(crate) regex: regex::Regex,
    /// Liveness only: anchored, `MatchKind::All` (no branch is pruned by an earlier match), and
    /// without look-around, so it accepts a superset of the regex's matches. "Dead" from a
    /// position therefore proves no match of the real pattern starting there can reach the end;
    /// a Unicode `\b` would make a DFA give up on non-ASCII text, a superset never does.
    pub(crate) live: DFA,
    /// The longest match in bytes, when bounded (keywords always are): the block/warn lookback.
    pub(crate) max_len: Option<usize>,
    /// Whether the pattern has look-around (`\b`, `$`, …): a match ending at the end of the text
    /// seen so far may then vanish when more text comes.
    pub(crate) looks: bool,
}

/// A named set of rules: one rule file, compiled. Immutable; share it as `Arc<RuleSet>`.
#[derive(Debug)]
pub struct RuleSet {
    name: Arc<str>,
    description: Option<String>,
    rules: Vec<Rule>,
}

/// The rule file as written; the rules are decoded one at a time so an error can name its rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    description: Option<String>,
    rules: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRule {
    id: String,
    #[serde(default)]
    keywords: Option<Vec<String>>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    case_sensitive: bool,
    action: Action,
    #[serde(default)]
    replacement: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Whether `name` is a valid set name: 1–64 characters from `A–Z a–z 0–9 _ -`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl RuleSet {
    /// Parses and compiles one rule file's text under the set name `name` (a file's stem).
    ///
    /// Strict: unknown keys, a rule with both or neither of `keywords` and `regex`, an empty
    /// keyword, an invalid regex or one that can match empty text, `replacement` on a rule that
    /// does not redact, a duplicate id and every limit of [`crate::limits`] are errors naming
    /// the rule and the key.
    pub fn parse(name: &str, text: &str) -> Result<RuleSet, RuleError> {
        if !is_valid_name(name) {
            return Err(RuleError::BadName(name.to_owned()));
        }
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(RuleError::TooLarge { size: text.len() as u64, limit: MAX_FILE_BYTES });
        }
        let file: RawFile = serde_json::from_str(text).map_err(RuleError::Syntax)?;
        if file.rules.len() > MAX_RULES {
            return Err(RuleError::TooManyRules { count: file.rules.len(), limit: MAX_RULES });
        }
        let mut rules: Vec<Rule> = Vec::with_capacity(file.rules.len());
        let mut automata = 0usize;
        for (index, value) in file.rules.into_iter().enumerate() {
            let label = match value.get("id").and_then(serde_json::Value::as_str) {
                Some(id) => format!("{id:?}"),
                None => format!("#{}", index + 1),
            };
            let rule = parse_rule(value, &rules).map_err(|problem| RuleError::Rule { rule: label, problem })?;
            automata = automata.saturating_add(rule.matcher.live.get_nfa().memory_usage());
            if automata > MAX_SET_AUTOMATA_BYTES {
                return Err(RuleError::TooComplex { size: automata, limit: MAX_SET_AUTOMATA_BYTES });
            }
            rules.push(rule);
        }
        Ok(RuleSet { name: Arc::from(name), description: file.description, rules })
    }

    /// The set's name (its file's stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as shared by every [`crate::Hit`] of this set.
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The file's `description`.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether any rule redacts (only then does a stream guard ever hold text back).
    pub fn redacts(&self) -> bool {
        self.rules.iter().any(|r| r.action == Action::Redact)
    }
}

fn parse_rule(value: serde_json::Value, earlier: &[Rule]) -> Result<Rule, RuleProblem> {
    let raw: RawRule = serde_json::from_value(value).map_err(RuleProblem::Shape)?;
    if !is_valid_id(&raw.id) {
        return Err(RuleProblem::BadId);
    }
    if earlier.iter().any(|r| r.id == raw.id) {
        return Err(RuleProblem::DuplicateId);
    }
    if raw.action == Action::Allow {
        return Err(RuleProblem::AllowAction);
    }
    if raw.replacement.is_some() && raw.action != Action::Redact {
        return Err(RuleProblem::ReplacementWithoutRedact);
    }
    let pattern = match (raw.keywords, raw.regex) {
        (Some(_), Some(_)) => return Err(RuleProblem::BothPatterns),
        (None, None) => return Err(RuleProblem::NoPattern),
        (Some(keywords), None) => keyword_pattern(&keywords)?,
        (None, Some(regex)) => regex,
    };
    let matcher = compile(&pattern, !raw.case_sensitive)?;
    let message = raw.message.unwrap_or_else(|| match raw.action {
        Action::Block => format!("blocked by guard rule {}", raw.id),
        Action::Redact => format!("redacted by guard rule {}", raw.id),
        Action::Warn | Action::Allow => format!("guard rule {} matched", raw.id),
    });
    let replacement =
        (raw.action == Action::Redact).then(|| raw.replacement.unwrap_or_else(|| DEFAULT_REPLACEMENT.to_owned()));
    Ok(Rule { id: raw.id, action: raw.action, message, replacement, matcher })
}

/// One alternation of the escaped keywords, longest first: at one position the longest keyword
/// wins (leftmost-first picks the first alternative that matches). Matching is substring
/// matching: "dosage" also hits inside "overdosage".
fn keyword_pattern(keywords: &[String]) -> Result<String, RuleProblem> {
    if keywords.is_empty() {
        return Err(RuleProblem::NoKeywords);
    }
    if keywords.len() > MAX_KEYWORDS {
        return Err(RuleProblem::TooManyKeywords { count: keywords.len(), limit: MAX_KEYWORDS });
    }
    for (index, keyword) in keywords.iter().enumerate() {
        if keyword.trim().is_empty() {
            return Err(RuleProblem::EmptyKeyword { index });
        }
        if keyword.len() > MAX_KEYWORD_BYTES {
            return Err(RuleProblem::LongKeyword { index, len: keyword.len(), limit: MAX_KEYWORD_BYTES });
        }
    }
    let mut sorted: Vec<&str> = keywords.iter().map(String::as_str).collect();
    sorted.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    sorted.dedup();
    Ok(sorted.iter().map(|k| regex::escape(k)).collect::<Vec<_>>().join("|"))
}

/// Compiles a pattern for searching and for the stream guard's liveness check.
pub(crate) fn compile(pattern: &str, case_insensitive: bool) -> Result<Matcher, RuleProblem> {
    // Parsed first for its properties; the same defaults as `regex::RegexBuilder`.
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .build()
        .parse(pattern)
        .map_err(|e| RuleProblem::Syntax(Box::new(e)))?;
    let props = hir.properties();
    if props.minimum_len() == Some(0) {
        return Err(RuleProblem::EmptyMatch);
    }
    let regex = regex::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map_err(|e| RuleProblem::Regex(Box::new(e)))?;
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .nfa_size_limit(Some(REGEX_SIZE_LIMIT))
                .which_captures(thompson::WhichCaptures::None),
        )
        .build_from_hir(&relax(&hir))
        .map_err(|e| RuleProblem::Automaton(Box::new(e)))?;
    let live = hybrid::dfa::Builder::new()
        .configure(
            DFA::config().match_kind(MatchKind::All).cache_capacity(LIVE_CACHE_BYTES).skip_cache_capacity_check(true),
        )
        .build_from_nfa(nfa)
        .map_err(|e| RuleProblem::Automaton(Box::new(e)))?;
    Ok(Matcher { regex, live, max_len: props.maximum_len(), looks: !props.look_set().is_empty() })
}

/// The pattern without look-around assertions (each becomes "match empty") or capture groups:
/// every match of the original is a match of this one. Recursion is bounded by the parser's nest
/// limit.
fn relax(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
        HirKind::Capture(capture) => relax(&capture.sub),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            min: rep.min,
            max: rep.max,
            greedy: rep.greedy,
            sub: Box::new(relax(&rep.sub)),
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(relax).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(relax).collect()),
    }
}

#[cfg(test)]
mod tests;
