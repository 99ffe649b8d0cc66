//! Guarding a text that arrives in deltas (a model's answer): [`StreamGuard`].
//!
//! Redaction must happen before text is shown, so a tail that could still become (part of) a
//! redact match is held back until it is decided; everything before it is released at once,
//! already redacted. Whether a match of a rule could start at a position and still run past the
//! end of the text seen so far is asked of the rule's lazy DFA (see `rules::Matcher`), run
//! anchored from each candidate position; a position whose automaton dies is decided for good.
//! So the released texts, put together, are exactly [`crate::redact_all`] of the whole text —
//! as long as no held tail reaches [`MAX_HOLD`] bytes: past that, the oldest text is released
//! with what already matches redacted (the rest of a match longer than that may show).
//!
//! Block and warn rules never hold text. Each delta is searched together with a lookback (the
//! rule's longest match, at most [`MAX_HOLD`] bytes) so a match across deltas is found, and each
//! match is reported once (by rule and start), as soon as it is certain — a match that ends at
//! the end of the text and depends on what follows (`\b`, `$`) waits for the next delta.
//! [`StreamGuard::finish`] searches the whole text once more and reports what the bounded
//! windows could not see (matches longer than the lookback).

use std::ops::Range;
use std::sync::Arc;

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::{Anchored, Input};

use crate::limits::MAX_HOLD;
use crate::rules::{Action, Rule, RuleSet};
use crate::scan::{Found, Hit, apply, hit, merge};

/// What a [`StreamGuard`] lets through for one delta (or at the end).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Released {
    /// Text safe to show now, already redacted. Empty while everything new is held back.
    pub text: String,
    /// Hits found since the last call (block and warn as soon as certain, redact when their text
    /// is released), in text order. Ranges are in the original text of the whole stream.
    pub hits: Vec<Hit>,
}

/// Guards one streamed text with several rule sets: [`push`](Self::push) each delta,
/// [`finish`](Self::finish) at the end. See the module docs for what is held and when.
///
/// Memory: the text seen so far, once — all of it when a set has block or warn rules (for the
/// final whole-text check), else only the held tail and one character before it (the context
/// of `\b`). With no rule at all, or no redact rule, nothing is ever held.
#[derive(Debug)]
pub struct StreamGuard {
    sets: Vec<Arc<RuleSet>>,
    redactors: Vec<Redactor>,
    watchers: Vec<Watcher>,
    /// The text seen, from the absolute position `origin` on.
    text: String,
    origin: usize,
    /// The absolute end of what has been released.
    released: usize,
}

/// A redact rule's state in the stream.
#[derive(Debug)]
struct Redactor {
    set: usize,
    rule: usize,
    cache: Option<Cache>,
    /// Positions known dead: no match starting at a character boundary in here reaches the end.
    dead: Range<usize>,
}

/// A block or warn rule's state in the stream.
#[derive(Debug)]
struct Watcher {
    set: usize,
    rule: usize,
    cache: Option<Cache>,
    /// The end of the last settled match: the next one starts here or later.
    next: usize,
    /// The start of a match found but not settled (it may still grow, or vanish): the next
    /// search starts there again.
    resume: Option<usize>,
    /// The ranges reported, in order (the last one may have grown since).
    reported: Vec<Range<usize>>,
}

impl StreamGuard {
    /// A guard for one text, checked against every rule of `sets` (in that order: on a tie the
    /// earlier set's replacement wins, as in [`crate::redact_all`]).
    pub fn new(sets: Vec<Arc<RuleSet>>) -> StreamGuard {
        let mut redactors = Vec::new();
        let mut watchers = Vec::new();
        for (s, set) in sets.iter().enumerate() {
            for (r, rule) in set.rules().iter().enumerate() {
                if rule.action() == Action::Redact {
                    redactors.push(Redactor { set: s, rule: r, cache: None, dead: 0..0 });
                } else {
                    watchers.push(Watcher {
                        set: s,
                        rule: r,
                        cache: None,
                        next: 0,
                        resume: None,
                        reported: Vec::new(),
                    });
                }
            }
        }
        StreamGuard { sets, redactors, watchers, text: String::new(), origin: 0, released: 0 }
    }

    /// Takes the next delta; returns what may be shown now and the new hits.
    pub fn push(&mut self, delta: &str) -> Released {
        if self.redactors.is_empty() && self.watchers.is_empty() {
            return Released { text: delta.to_owned(), hits: Vec::new() };
        }
        let before = self.end();
        self.text.push_str(delta);
        let mut found = self.watch(before);
        let text = if self.redactors.is_empty() {
            self.released = self.end();
            delta.to_owned()
        } else {
            self.release(false, &mut found)
        };
        self.trim();
        self.report(text, found)
    }

    /// Ends the text: releases everything still held (redacted) and reports the hits only the
    /// whole text shows. The guard is then ready for a new text.
    pub fn finish(&mut self) -> Released {
        let mut found = self.settle_watchers();
        let text = if self.redactors.is_empty() { String::new() } else { self.release(true, &mut found) };
        let out = self.report(text, found);
        self.reset();
        out
    }

    /// The text held back, not yet released.
    pub fn held(&self) -> &str {
        &self.text[self.released - self.origin..]
    }

    fn end(&self) -> usize {
        self.origin + self.text.len()
    }

    /// The release of `text` with the hits of `found`, in text order.
    fn report(&self, text: String, mut found: Vec<Found>) -> Released {
        found.sort_unstable();
        Released { text, hits: found.iter().map(|f| hit(&self.sets, f, 0)).collect() }
    }

    /// Searches the new text (and its lookback) for block/warn matches; returns the new ones.
    fn watch(&mut self, before: usize) -> Vec<Found> {
        let (text, origin, end) = (&self.text, self.origin, self.origin + self.text.len());
        let mut found = Vec::new();
        for w in &mut self.watchers {
            let rule = &self.sets[w.set].rules()[w.rule];
            let lookback = rule.matcher.max_len.unwrap_or(MAX_HOLD).min(MAX_HOLD);
            let window = origin + text.floor_char_boundary(before.saturating_sub(lookback).max(origin) - origin);
            let mut pos = w.resume.unwrap_or(w.next.max(window));
            loop {
                let Some(m) = rule.matcher.regex.find_at(text, pos - origin) else {
                    w.resume = None;
                    break;
                };
                let (start, stop) = (origin + m.start(), origin + m.end());
                // Too old to keep watching: take the match as it is now.
                let old = end - start > MAX_HOLD;
                if stop == end && rule.matcher.looks && !old {
                    // `\b`, `$`, … at the end may not hold once more text comes: decide later.
                    w.resume = Some(start);
                    break;
                }
                match w.reported.last_mut() {
                    Some(last) if last.start == start => last.end = last.end.max(stop),
                    _ => {
                        w.reported.push(start..stop);
                        found.push(Found { start, set: w.set, rule: w.rule, end: stop });
                    }
                }
                let cache = w.cache.get_or_insert_with(|| rule.matcher.live.create_cache());
                if !old && alive(&rule.matcher.live, cache, &text.as_bytes()[start - origin..]) {
                    // It may still grow: search from its start again next time.
                    w.resume = Some(start);
                    break;
                }
                w.next = stop;
                w.resume = None;
                pos = stop;
            }
        }
        found
    }

    /// The whole-text check of [`finish`](Self::finish): every block/warn match that overlaps
    /// nothing reported for its rule.
    fn settle_watchers(&mut self) -> Vec<Found> {
        let mut found = Vec::new();
        for w in &mut self.watchers {
            let rule = &self.sets[w.set].rules()[w.rule];
            let mut reported = w.reported.iter().peekable();
            for m in rule.matcher.regex.find_iter(&self.text) {
                let (start, stop) = (self.origin + m.start(), self.origin + m.end());
                while reported.next_if(|r| r.end <= start).is_some() {}
                if reported.peek().is_some_and(|r| r.start < stop) {
                    continue;
                }
                found.push(Found { start, set: w.set, rule: w.rule, end: stop });
            }
        }
        found
    }

    /// Releases what no redact rule can still claim (everything when `finishing`), redacted;
    /// adds the released redact matches to `found`.
    fn release(&mut self, finishing: bool, found: &mut Vec<Found>) -> String {
        let (base, end) = (self.released, self.end());
        // Past MAX_HOLD, positions before `force` are released whatever may still come.
        let force = if finishing {
            end
        } else if end - base > MAX_HOLD {
            self.origin + self.text.floor_char_boundary(end - MAX_HOLD - self.origin)
        } else {
            base
        };
        let mut matches = Vec::new();
        let mut hold = end;
        for r in &mut self.redactors {
            let rule = &self.sets[r.set].rules()[r.rule];
            hold = hold.min(scan(rule, r, &self.text, self.origin, base, force, &mut matches));
        }
        let mut cut = hold.max(force);
        let groups = merge(matches.clone());
        if let Some(group) = groups.iter().find(|g| g.start < cut && cut < g.end) {
            // Never cut a match: hold all of it, or release all of it when holding it would
            // keep text from before `force`.
            cut = if group.start >= force { group.start } else { group.end };
        }
        let groups: Vec<_> = groups.into_iter().filter(|g| g.end <= cut).collect();
        found.extend(matches.into_iter().filter(|m| m.end <= cut));
        let text = apply(&self.sets, &self.text[base - self.origin..cut - self.origin], base, &groups);
        self.released = cut;
        text
    }

    /// Drops the text no one needs any more: with block/warn rules the whole text stays (for
    /// `finish`), else only the held tail and the character before it (look-behind context).
    fn trim(&mut self) {
        if !self.watchers.is_empty() {
            return;
        }
        let keep = self.text.floor_char_boundary((self.released - self.origin).saturating_sub(1));
        self.text.drain(..keep);
        self.origin += keep;
    }

    fn reset(&mut self) {
        self.text.clear();
        self.origin = 0;
        self.released = 0;
        for r in &mut self.redactors {
            r.dead = 0..0;
        }
        for w in &mut self.watchers {
            w.next = 0;
            w.resume = None;
            w.reported.clear();
        }
    }
}

/// One redact rule's matches from `base` (absolute) on: pushes those that are decided (or
/// start before `force`, which is released whatever comes) to `out` and returns the position,
/// at or after `force`, from which text must be held for this rule (`end` when none).
fn scan(
    rule: &Rule,
    r: &mut Redactor,
    text: &str,
    origin: usize,
    base: usize,
    force: usize,
    out: &mut Vec<Found>,
) -> usize {
    let end = origin + text.len();
    let mut pos = base;
    loop {
        // Positions before `force` go out anyway: no need to ask whether they are decided.
        let hold = if force >= end { end } else { first_alive(rule, r, text, origin, pos.max(force)) };
        match rule.matcher.regex.find_at(text, pos - origin) {
            Some(m) if origin + m.start() < hold => {
                out.push(Found { start: origin + m.start(), set: r.set, rule: r.rule, end: origin + m.end() });
                pos = origin + m.end();
            }
            _ => return hold,
        }
    }
}

/// The first character boundary at or after `from` (absolute) where a match of the rule could
/// start and still reach the end of the text; the end when there is none.
fn first_alive(rule: &Rule, r: &mut Redactor, text: &str, origin: usize, from: usize) -> usize {
    let end = origin + text.len();
    let known = r.dead.contains(&from);
    let mut at = if known { r.dead.end } else { from };
    let cache = r.cache.get_or_insert_with(|| rule.matcher.live.create_cache());
    while at < end {
        if alive(&rule.matcher.live, cache, &text.as_bytes()[at - origin..]) {
            break;
        }
        at = origin + text.ceil_char_boundary(at - origin + 1);
    }
    // Dying is for good: these positions never need running again.
    r.dead = if known { r.dead.start..at } else { from..at };
    at
}

/// Whether the automaton, anchored at the start of `rest`, is still alive after its last byte:
/// some match starting there could end at or after the end. A match state every byte leads out
/// of to death is a match that already ended: dead too. When the automaton gives up (it may not,
/// but cannot prove it) the answer is "alive" — holding is the safe side.
fn alive(dfa: &DFA, cache: &mut Cache, rest: &[u8]) -> bool {
    let input = Input::new(rest).anchored(Anchored::Yes);
    let Ok(mut state) = dfa.start_state_forward(cache, &input) else {
        return true;
    };
    for &byte in rest {
        match dfa.next_state(cache, state, byte) {
            Ok(next) => state = next,
            Err(_) => return true,
        }
        if state.is_dead() {
            return false;
        }
        if state.is_quit() {
            return true;
        }
    }
    if state.is_match() {
        for unit in dfa.byte_classes().representatives(..) {
            let Some(byte) = unit.as_u8() else { continue };
            match dfa.next_state(cache, state, byte) {
                Ok(next) if next.is_dead() => {}
                _ => return true,
            }
        }
        return false;
    }
    true
}

#[cfg(test)]
mod tests;
