//! A case's expectations against what its run did: a trajectory score, the answer's checks, the
//! limits — each failure said in words.

use serde_json::Value;

use crate::evalset::{AnswerExpectation, ArgsMatch, Expectations, ExpectedCall, Limits, Order, TrajectoryExpectation};
use crate::observed::{Observed, ObservedCall};

/// How one case did.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseScore {
    /// Every expectation met.
    pub pass: bool,
    /// 0..=1; `None` without a trajectory expectation.
    pub trajectory: Option<f64>,
    /// The ROUGE-1 F of the answer against the reference; `None` without one.
    pub answer: Option<f64>,
    /// Why it failed, one line per failed check.
    pub failures: Vec<String>,
}

/// Scores `observed` against `expect`.
pub fn score(expect: &Expectations, observed: &Observed) -> CaseScore {
    let mut failures = Vec::new();
    if let Some(error) = &observed.error {
        failures.push(format!("the run did not complete: {error}"));
    }
    let trajectory = expect.trajectory.as_ref().map(|t| {
        let score = trajectory_score(t, &observed.calls);
        if score < t.threshold {
            let seen: Vec<&str> = observed.calls.iter().map(|c| c.name.as_str()).collect();
            failures.push(format!(
                "trajectory scored {score:.2} (at least {:.2} needed); the calls were [{}]",
                t.threshold,
                seen.join(", ")
            ));
        }
        score
    });
    let answer = expect.answer.as_ref().and_then(|a| answer_checks(a, observed, &mut failures));
    if let Some(limits) = &expect.limits {
        limit_checks(limits, observed, &mut failures);
    }
    CaseScore { pass: failures.is_empty(), trajectory, answer, failures }
}

/// The share of the expected calls the observed ones meet, by the expectation's order:
/// `exact` — position by position over the longer of the two lists (an extra or a missing call
/// costs its place); `inOrder` — the longest run of expected calls found in order; `anyOrder` —
/// expected calls each matched by a different observed call.
pub fn trajectory_score(expect: &TrajectoryExpectation, observed: &[ObservedCall]) -> f64 {
    let expected = &expect.calls;
    if expected.is_empty() {
        return if observed.is_empty() || expect.order != Order::Exact { 1.0 } else { 0.0 };
    }
    let matched = match expect.order {
        Order::Exact => {
            let hits = expected.iter().zip(observed).filter(|(e, o)| call_matches(e, o)).count();
            return hits as f64 / expected.len().max(observed.len()) as f64;
        }
        Order::InOrder => {
            let mut next = 0;
            for call in observed {
                if next < expected.len() && call_matches(&expected[next], call) {
                    next += 1;
                }
            }
            next
        }
        Order::AnyOrder => {
            let mut used = vec![false; observed.len()];
            expected
                .iter()
                .filter(|e| {
                    let found = observed.iter().enumerate().find(|(i, o)| !used[*i] && call_matches(e, o));
                    found.map(|(i, _)| used[i] = true).is_some()
                })
                .count()
        }
    };
    matched as f64 / expected.len() as f64
}

fn call_matches(expected: &ExpectedCall, observed: &ObservedCall) -> bool {
    if expected.name != observed.name {
        return false;
    }
    let Some(args) = &expected.args else { return true };
    match expected.args_match {
        ArgsMatch::Exact => *args == observed.args,
        ArgsMatch::Subset => subset(args, &observed.args),
        ArgsMatch::Schema => jsonschema::is_valid(args, &observed.args),
    }
}

/// Whether every key of `expected` is in `actual` with a matching value (objects recursively;
/// anything else equal).
fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().all(|(key, value)| have.get(key).is_some_and(|got| subset(value, got)))
        }
        _ => expected == actual,
    }
}

/// The answer's checks; returns the ROUGE-1 F when a reference is given.
fn answer_checks(expect: &AnswerExpectation, observed: &Observed, failures: &mut Vec<String>) -> Option<f64> {
    let answer = observed.answer.as_str();
    for text in &expect.contains {
        if !answer.contains(text.as_str()) {
            failures.push(format!("the answer does not contain {text:?}"));
        }
    }
    if let Some(pattern) = &expect.regex {
        // Checked when the set was read; a pattern that does not compile fails the case.
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(answer) => {}
            Ok(_) => failures.push(format!("the answer does not match /{pattern}/")),
            Err(e) => failures.push(format!("answer.regex does not compile: {e}")),
        }
    }
    if let Some(equals) = &expect.equals
        && equals.trim() != answer.trim()
    {
        failures.push(format!("the answer is not {equals:?}"));
    }
    if let Some(schema) = &expect.schema {
        let value = observed.output.clone().or_else(|| serde_json::from_str(answer.trim()).ok());
        match value {
            Some(value) if jsonschema::is_valid(schema, &value) => {}
            Some(_) => failures.push("the answer does not match the expected schema".into()),
            None => failures.push("the answer is not JSON".into()),
        }
    }
    let reference = expect.reference.as_ref()?;
    let f = rouge1_f(answer, reference);
    if f < expect.rouge1_threshold {
        failures.push(format!(
            "ROUGE-1 F against the reference is {f:.2} (at least {:.2} needed)",
            expect.rouge1_threshold
        ));
    }
    Some(f)
}

fn limit_checks(limits: &Limits, observed: &Observed, failures: &mut Vec<String>) {
    let mut over = |what: &str, used: String, most: String| failures.push(format!("{what}: {used}, at most {most}"));
    if let Some(most) = limits.steps
        && observed.model_calls > most
    {
        over("model calls", observed.model_calls.to_string(), most.to_string());
    }
    if let Some(most) = limits.tokens
        && observed.tokens > most
    {
        over("tokens", observed.tokens.to_string(), most.to_string());
    }
    if let (Some(most), Some(cost)) = (limits.cost, observed.cost)
        && cost > most
    {
        over("cost", cost.to_string(), most.to_string());
    }
    if let Some(most) = limits.wall_ms
        && observed.wall_ms > most
    {
        over("wall time (ms)", observed.wall_ms.to_string(), most.to_string());
    }
}

/// ROUGE-1 F1 of `candidate` against `reference`: unigram overlap (clipped counts) of their
/// lower-cased words (letters and digits; each CJK character a word of its own).
pub fn rouge1_f(candidate: &str, reference: &str) -> f64 {
    use std::collections::HashMap;
    let counts = |text: &str| {
        let mut map: HashMap<String, usize> = HashMap::new();
        for token in tokens(text) {
            *map.entry(token).or_default() += 1;
        }
        map
    };
    let (c, r) = (counts(candidate), counts(reference));
    let (c_total, r_total): (usize, usize) = (c.values().sum(), r.values().sum());
    if c_total == 0 || r_total == 0 {
        return 0.0;
    }
    let overlap: usize = c.iter().map(|(token, n)| (*n).min(r.get(token).copied().unwrap_or(0))).sum();
    if overlap == 0 {
        return 0.0;
    }
    let (precision, recall) = (overlap as f64 / c_total as f64, overlap as f64 / r_total as f64);
    2.0 * precision * recall / (precision + recall)
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in text.chars().flat_map(char::to_lowercase) {
        let cjk = matches!(ch as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF);
        if cjk || !ch.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if cjk {
                out.push(ch.to_string());
            }
        } else {
            word.push(ch);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}
