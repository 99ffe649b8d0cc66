//! Matching a whole text: every hit of one or several rule sets ([`RuleSet::check`],
//! [`check_all`]), the text with its redact matches replaced ([`RuleSet::redact`],
//! [`redact_all`]) and the same on the strings of a JSON value ([`redact_json`]).
//!
//! Each rule is searched on its own, leftmost-first, each match starting where the rule's previous
//! one ended (rules never match empty text). Redact matches that overlap — of one rule or of
//! several — are merged into one span, replaced once by the replacement of the match that starts
//! first (the earlier set, then the earlier rule, on a tie): no character of a match survives.

use std::ops::Range;
use std::sync::Arc;

use crate::rules::{Action, Rule, RuleSet};

/// One match of one rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hit {
    /// The rule set's name.
    pub set: Arc<str>,
    /// The rule's id.
    pub rule: String,
    /// The rule's action (`Block`, `Warn` or `Redact`).
    pub action: Action,
    /// The rule's message.
    pub message: String,
    /// Where the match is, in bytes of the text checked (for a stream, of everything pushed; for
    /// [`redact_json`], of the string it was found in). Always on character boundaries.
    pub range: Range<usize>,
}

/// A text with its redact matches replaced, and every hit found in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Redacted {
    /// The text, redacted.
    pub text: String,
    /// Every hit (block, warn and redact) in text order; ranges are in the original text.
    pub hits: Vec<Hit>,
}

impl AsRef<RuleSet> for RuleSet {
    fn as_ref(&self) -> &RuleSet {
        self
    }
}

/// A match before it becomes a [`Hit`]: the set and rule by position, the range absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) set: usize,
    pub(crate) rule: usize,
    pub(crate) end: usize,
}

/// A maximal run of overlapping redact matches, replaced as one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The match whose replacement the group takes.
    pub(crate) first: Found,
}

impl RuleSet {
    /// Every hit of this set in `text`, in text order.
    pub fn check(&self, text: &str) -> Vec<Hit> {
        check_all(&[self], text)
    }

    /// `text` with this set's redact matches replaced; every hit reported.
    pub fn redact(&self, text: &str) -> Redacted {
        redact_all(&[self], text)
    }
}

/// Every hit of several sets in `text`, in text order.
pub fn check_all<S: AsRef<RuleSet>>(sets: &[S], text: &str) -> Vec<Hit> {
    let found = find_all(sets, text);
    found.iter().map(|f| hit(sets, f, 0)).collect()
}

/// `text` with the redact matches of several sets replaced (overlapping ones merged, see the
/// module docs); every hit of every set reported.
pub fn redact_all<S: AsRef<RuleSet>>(sets: &[S], text: &str) -> Redacted {
    let found = find_all(sets, text);
    let hits = found.iter().map(|f| hit(sets, f, 0)).collect();
    let redact: Vec<Found> = found.into_iter().filter(|f| rule(sets, f).action() == Action::Redact).collect();
    let text = if redact.is_empty() { text.to_owned() } else { apply(sets, text, 0, &merge(redact)) };
    Redacted { text, hits }
}

/// Redacts every string value of `value` (object keys are left alone) with several sets and
/// returns every hit, in document order. A hit's range is within the string it was found in.
pub fn redact_json<S: AsRef<RuleSet>>(sets: &[S], value: &mut serde_json::Value) -> Vec<Hit> {
    use serde_json::Value;
    let mut hits = Vec::new();
    // An explicit stack: a value built in code may be nested deeper than the thread's stack.
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::String(s) => {
                let redacted = redact_all(sets, s);
                if redacted.text != *s {
                    *s = redacted.text;
                }
                hits.extend(redacted.hits);
            }
            Value::Array(items) => pending.extend(items.iter_mut().rev()),
            Value::Object(map) => {
                let values: Vec<&mut Value> = map.values_mut().collect();
                pending.extend(values.into_iter().rev());
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    hits
}

/// The rule a match belongs to.
pub(crate) fn rule<'a, S: AsRef<RuleSet>>(sets: &'a [S], found: &Found) -> &'a Rule {
    &sets[found.set].as_ref().rules()[found.rule]
}

/// Every match of every rule, sorted (start, set, rule).
fn find_all<S: AsRef<RuleSet>>(sets: &[S], text: &str) -> Vec<Found> {
    let mut found = Vec::new();
    for (s, set) in sets.iter().enumerate() {
        for (r, rule) in set.as_ref().rules().iter().enumerate() {
            found.extend(rule.matcher.regex.find_iter(text).map(|m| Found {
                start: m.start(),
                set: s,
                rule: r,
                end: m.end(),
            }));
        }
    }
    found.sort_unstable();
    found
}

/// The hit of a match; `offset` is added to its range (the stream's absolute position of `text`).
pub(crate) fn hit<S: AsRef<RuleSet>>(sets: &[S], found: &Found, offset: usize) -> Hit {
    let set = sets[found.set].as_ref();
    let rule = &set.rules()[found.rule];
    Hit {
        set: set.shared_name().clone(),
        rule: rule.id().to_owned(),
        action: rule.action(),
        message: rule.message().to_owned(),
        range: offset + found.start..offset + found.end,
    }
}

/// Merges redact matches into groups of overlapping ones, in text order.
pub(crate) fn merge(mut found: Vec<Found>) -> Vec<Group> {
    found.sort_unstable();
    let mut groups: Vec<Group> = Vec::new();
    for f in found {
        match groups.last_mut() {
            Some(group) if f.start < group.end => group.end = group.end.max(f.end),
            _ => groups.push(Group { start: f.start, end: f.end, first: f }),
        }
    }
    groups
}

/// `text` (which starts at absolute position `offset`) with each group replaced. Every group
/// lies inside the text.
pub(crate) fn apply<S: AsRef<RuleSet>>(sets: &[S], text: &str, offset: usize, groups: &[Group]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for group in groups {
        let (start, end) = (group.start - offset, group.end - offset);
        out.push_str(&text[at..start]);
        out.push_str(rule(sets, &group.first).replacement().unwrap_or_default());
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(json: &str) -> RuleSet {
        RuleSet::parse("t", json).expect("test rule set")
    }

    #[test]
    fn check_reports_every_hit_in_text_order() {
        let set = set(r#"{"rules":[
            {"id":"b","keywords":["bad"],"action":"block"},
            {"id":"w","regex":"\\d+","action":"warn","message":"a number"}
        ]}"#);
        let hits = set.check("1 bad 22 BAD");
        let got: Vec<(&str, Range<usize>)> = hits.iter().map(|h| (h.rule.as_str(), h.range.clone())).collect();
        assert_eq!(got, [("w", 0..1), ("b", 2..5), ("w", 6..8), ("b", 9..12)]);
        assert_eq!(hits[0].message, "a number");
        assert_eq!(hits[1].message, "blocked by guard rule b");
        assert_eq!(&*hits[0].set, "t");
    }

    #[test]
    fn redact_replaces_matches_and_reports_all_hits() {
        let set = set(r#"{"rules":[
            {"id":"mail","regex":"\\w+@\\w+\\.com","action":"redact","replacement":"[email]"},
            {"id":"w","keywords":["dosage"],"action":"warn"},
            {"id":"k","keywords":["secret"],"action":"redact"}
        ]}"#);
        let out = set.redact("Mail bob@x.com the dosage, SECRET.");
        assert_eq!(out.text, "Mail [email] the dosage, [redacted].");
        let rules: Vec<&str> = out.hits.iter().map(|h| h.rule.as_str()).collect();
        assert_eq!(rules, ["mail", "w", "k"]);
        assert_eq!(out.hits[0].range, 5..14);
    }

    #[test]
    fn overlapping_redactions_merge_and_take_the_first_replacement() {
        let a = set(r#"{"rules":[{"id":"a","keywords":["abcd"],"action":"redact","replacement":"<A>"}]}"#);
        let b =
            RuleSet::parse("u", r#"{"rules":[{"id":"b","keywords":["cdef"],"action":"redact","replacement":"<B>"}]}"#)
                .expect("set");
        let out = redact_all(&[&a, &b], "xabcdefy");
        assert_eq!(out.text, "x<A>y");
        assert_eq!(out.hits.len(), 2);
        // Adjacent matches are not merged.
        assert_eq!(redact_all(&[&a, &b], "abcdcdef").text, "<A><B>");
        // Same start: the earlier set wins.
        let c =
            RuleSet::parse("v", r#"{"rules":[{"id":"c","keywords":["abc"],"action":"redact","replacement":"<C>"}]}"#)
                .expect("set");
        assert_eq!(redact_all(&[&c, &a], "abcd!").text, "<C>!");
    }

    #[test]
    fn matching_is_unicode_safe_and_case_insensitive_by_default() {
        let set = set(r#"{"rules":[
            {"id":"k","keywords":["ÉTÉ"],"action":"redact"},
            {"id":"cs","keywords":["Exact"],"caseSensitive":true,"action":"warn"}
        ]}"#);
        let out = set.redact("漢字 été exact Exact");
        assert_eq!(out.text, "漢字 [redacted] exact Exact");
        assert_eq!(out.hits[0].range, 7..12);
        assert_eq!(out.hits.len(), 2);
        assert_eq!(out.hits[1].rule, "cs");
    }

    #[test]
    fn keywords_match_as_substrings_longest_first() {
        let set = set(r#"{"rules":[{"id":"k","keywords":["dos","dosage"],"action":"redact"}]}"#);
        assert_eq!(set.redact("overdosage").text, "over[redacted]");
        assert_eq!(set.check("overdosage")[0].range, 4..10);
    }

    #[test]
    fn redact_json_touches_string_values_only() {
        let set = set(r#"{"rules":[
            {"id":"k","keywords":["secret"],"action":"redact"},
            {"id":"w","keywords":["warn"],"action":"warn"}
        ]}"#);
        let mut value = serde_json::json!({
            "secret": "a secret",
            "list": ["no", "secret secret", 7, {"warn": "warn me"}],
            "n": null
        });
        let hits = redact_json(&[Arc::new(set)], &mut value);
        assert_eq!(
            value,
            serde_json::json!({
                "secret": "a [redacted]",
                "list": ["no", "[redacted] [redacted]", 7, {"warn": "warn me"}],
                "n": null
            })
        );
        let got: Vec<(&str, Range<usize>)> = hits.iter().map(|h| (h.rule.as_str(), h.range.clone())).collect();
        assert_eq!(got, [("k", 2..8), ("k", 0..6), ("k", 7..13), ("w", 0..4)]);
    }

    #[test]
    fn redact_json_survives_deep_nesting() {
        let set = set(r#"{"rules":[{"id":"k","keywords":["x"],"action":"redact","replacement":"y"}]}"#);
        let mut value = serde_json::Value::String("x".into());
        for _ in 0..100_000 {
            value = serde_json::Value::Array(vec![value]);
        }
        assert_eq!(redact_json(&[&set], &mut value).len(), 1);
        // Dropping a deep value recurses in serde_json; take it apart iteratively.
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            if let serde_json::Value::Array(items) = v {
                stack.extend(items);
            }
        }
    }
}
