//! A chat's stored history lines, handled the same way by every backend: a history's bytes
//! parsed into lines ([`parse_history`]) and the lines [`crate::ChatStore::trim`] keeps
//! ([`trim_selection`]).

use std::collections::HashSet;
use std::fmt::Display;

use agw_protocol::history::HistoryLine;
use serde_json::Value;

/// Splits a history — a file's bytes, or the stored lines each followed by `\n` — into lines
/// and parses each; see [`crate::ChatStore::read_lines`]. `source` names it in warnings.
pub(crate) fn parse_history(bytes: &[u8], source: &dyn Display) -> Vec<HistoryLine> {
    let mut segments: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // `split` yields an empty tail after a final `\n`; a non-empty tail is an unterminated line.
    let unterminated = segments.pop().filter(|tail| !tail.is_empty());
    let mut out = Vec::new();
    let numbered = segments.into_iter().map(|s| (s, false)).chain(unterminated.map(|s| (s, true)));
    for (number, (segment, last)) in numbered.enumerate() {
        let parsed = std::str::from_utf8(segment)
            .map_err(|e| e.to_string())
            .and_then(|text| HistoryLine::parse(text).map_err(|e| e.to_string()));
        match parsed {
            Ok(Some(line)) => out.push(line),
            Ok(None) => {}
            Err(error) if last => {
                tracing::warn!(path = %source, line = number + 1, %error, "skipping a torn last history line");
            }
            Err(error) => {
                tracing::warn!(path = %source, line = number + 1, %error, "skipping an unreadable history line");
            }
        }
    }
    out
}

/// What [`crate::ChatStore::trim`] does with one stored line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trim {
    /// A line of the last k runs, a line without a `runId`, or one that does not parse.
    Keep,
    /// A line of an older run: removed, and counted.
    Remove,
    /// A blank line: removed silently.
    Blank,
}

/// Trim's selection over a chat's stored lines, in order (every backend uses it).
pub(crate) fn trim_selection(lines: &[&[u8]], k: usize) -> Vec<Trim> {
    let run_ids: Vec<Option<String>> = lines
        .iter()
        .map(|line| {
            serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|v| v.get("runId").and_then(Value::as_str).map(str::to_owned))
        })
        .collect();
    let mut order: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    for run_id in run_ids.iter().filter_map(Option::as_deref) {
        if seen.insert(run_id) {
            order.push(run_id);
        }
    }
    let keep: HashSet<&str> = order.iter().rev().take(k).copied().collect();
    lines
        .iter()
        .zip(&run_ids)
        .map(|(line, run_id)| match run_id.as_deref() {
            _ if line.trim_ascii().is_empty() => Trim::Blank,
            Some(id) if !keep.contains(id) => Trim::Remove,
            _ => Trim::Keep,
        })
        .collect()
}
