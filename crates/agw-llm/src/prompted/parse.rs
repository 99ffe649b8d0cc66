//! The pure core of [`super::parse_calls`]: answer text in, content and call fragments out.

use crate::{LlmDelta, ToolCallFragment};

use super::{ARGS, FUNCTION, MARKERS, NO_NAME, RESULT, RETURN};

/// The lead character of every marker.
const LEAD: char = '✿';
/// A name longer than this is not a tool name; the rest of its line is dropped.
const MAX_NAME_CHARS: usize = 256;

/// Reads a prompted model's answer, one piece of text at a time ([`Self::push`]), and tells
/// apart the answer's content and the calls it writes.
///
/// * Content is everything before the first call; it is released at once, except a tail that
///   could still grow into a marker (it starts with `✿` and is a proper prefix of one), which
///   waits for the next piece. Text after a call and between calls is dropped (Qwen-Agent does
///   the same): what the model says there cannot be shown before the call's result anyway.
/// * A call starts at `✿FUNCTION✿`; its name is the rest of that line. Its arguments start at
///   `✿ARGS✿` (or at a `{` on the name's line or the line after it); a `:`, spaces and a
///   Markdown code fence before them are skipped. Arguments that open with `{` or `[` end where
///   that bracket closes (strings and escapes respected); any other arguments end at the end of
///   their line. Argument text streams as fragments as it arrives.
/// * `✿RESULT✿` ends the answer (the model is making a result up), and so does `✿RETURN✿` once
///   a call was written; before any call `✿RETURN✿` (with its `:`) is simply dropped.
///
/// Each [`Self::push`] yields at most one content delta, first, then call fragments, so one
/// upstream delta never becomes more than one content event.
#[derive(Debug)]
pub struct CallParser {
    /// Call ids are this prefix followed by the call's number in the answer (from 1).
    id_prefix: String,
    /// A tail that may still become a marker.
    held: String,
    state: State,
    /// Calls begun so far.
    calls: u32,
    /// The current (or last) call's id and name.
    current: Option<(String, String)>,
    /// Argument text of the current call not yet given out.
    args: String,
    /// Content not yet given out.
    content: String,
    /// Fragments not yet given out.
    fragments: Vec<ToolCallFragment>,
    /// A marker ended the answer: everything after it is dropped.
    ended: bool,
    /// False in a reply that may not call tools: a call ends the answer there.
    calls_allowed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Answer text before the first call. `after_return`: a `✿RETURN✿` was just dropped, so
    /// are the `:` and spaces after it.
    Text { after_return: bool },
    /// After `✿FUNCTION✿`: the name, up to the end of its line.
    Name(String),
    /// After the name's line: `✿ARGS✿` or a `{` may follow.
    AwaitArgs,
    /// After `✿ARGS✿`, before the arguments' first character. `fenced`: a backtick was seen
    /// (a code fence's language tag is skipped too).
    ArgsStart { fenced: bool },
    /// JSON arguments: open brackets, inside a string, after a backslash in one.
    Json { depth: u32, in_string: bool, escaped: bool },
    /// Arguments that do not open a bracket: the rest of the line.
    Line,
    /// After a call: dropped until the next marker.
    AfterCall,
}

impl CallParser {
    /// A parser for one answer; its calls get the ids `<id_prefix>1`, `<id_prefix>2`, ….
    pub fn new(id_prefix: impl Into<String>) -> Self {
        Self {
            id_prefix: id_prefix.into(),
            held: String::new(),
            state: State::Text { after_return: false },
            calls: 0,
            current: None,
            args: String::new(),
            content: String::new(),
            fragments: Vec::new(),
            ended: false,
            calls_allowed: true,
        }
    }

    /// A parser for a reply that may not call tools (none were offered): a call the model
    /// writes anyway ends its answer, so nothing is shown or run that cannot get a result.
    pub fn without_calls() -> Self {
        Self { calls_allowed: false, ..Self::new("") }
    }

    /// How many calls the answer has begun so far.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// A marker ended the answer: nothing more will be read from it.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Bytes held back for a marker that may still come.
    #[cfg(test)]
    pub(crate) fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Reads the next piece of the answer and appends what it releases to `out`: at most one
    /// [`LlmDelta::Content`], then [`LlmDelta::ToolCall`] fragments.
    pub fn push(&mut self, text: &str, out: &mut Vec<LlmDelta>) {
        if self.ended {
            return;
        }
        let mut buffer = std::mem::take(&mut self.held);
        buffer.push_str(text);
        let mut rest = buffer.as_str();
        while !rest.is_empty() && !self.ended {
            let Some(at) = rest.find(LEAD) else {
                self.feed(rest);
                break;
            };
            self.feed(&rest[..at]);
            let tail = &rest[at..];
            if let Some(marker) = MARKERS.iter().find(|m| tail.starts_with(**m)) {
                self.marker(marker);
                rest = &tail[marker.len()..];
            } else if MARKERS.iter().any(|m| m.starts_with(tail)) {
                // Could still become a marker: wait for the next piece.
                self.held = tail.to_owned();
                break;
            } else {
                // A literal `✿`.
                self.feed(&tail[..LEAD.len_utf8()]);
                rest = &tail[LEAD.len_utf8()..];
            }
        }
        self.release(out);
    }

    /// The answer is complete: what was held back is text after all, an open call ends.
    pub fn finish(&mut self, out: &mut Vec<LlmDelta>) {
        if !self.ended {
            let held = std::mem::take(&mut self.held);
            self.feed(&held);
            if let State::Name(name) = &mut self.state {
                let name = std::mem::take(name);
                self.begin_call(&name);
            }
            if !matches!(self.state, State::Text { .. }) {
                self.flush_args();
                self.state = State::AfterCall;
            }
        }
        self.release(out);
    }

    /// Plain text (no marker in it) in the current state.
    fn feed(&mut self, mut text: &str) {
        while !text.is_empty() {
            match &mut self.state {
                State::Text { after_return } => {
                    if *after_return {
                        text = text.trim_start_matches([':', ' ', '\t', '\r', '\n']);
                        if text.is_empty() {
                            return;
                        }
                        *after_return = false;
                    }
                    self.content.push_str(text);
                    return;
                }
                State::Name(name) => {
                    let end = text.find(['\n', '{']);
                    let room = MAX_NAME_CHARS.saturating_sub(name.chars().count());
                    name.extend(text[..end.unwrap_or(text.len())].chars().take(room));
                    let Some(end) = end else { return };
                    let name = std::mem::take(name);
                    self.begin_call(&name);
                    if text[end..].starts_with('{') {
                        self.state = State::Json { depth: 0, in_string: false, escaped: false };
                        text = &text[end..];
                    } else {
                        self.state = State::AwaitArgs;
                        text = &text[end + 1..];
                    }
                }
                State::AwaitArgs => {
                    let trimmed = text.trim_start();
                    if trimmed.is_empty() {
                        return;
                    }
                    if trimmed.starts_with('{') {
                        self.state = State::Json { depth: 0, in_string: false, escaped: false };
                    } else {
                        // No arguments: what follows is text after the call.
                        self.flush_args();
                        self.state = State::AfterCall;
                    }
                    text = trimmed;
                }
                State::ArgsStart { fenced } => {
                    let mut skip = 0;
                    for c in text.chars() {
                        match c {
                            ':' => {}
                            '`' => *fenced = true,
                            c if c.is_whitespace() => {}
                            // A code fence's language tag (```json).
                            c if *fenced && c.is_ascii_alphanumeric() => {}
                            _ => break,
                        }
                        skip += c.len_utf8();
                    }
                    text = &text[skip..];
                    if text.is_empty() {
                        return;
                    }
                    self.state = if text.starts_with(['{', '[']) {
                        State::Json { depth: 0, in_string: false, escaped: false }
                    } else {
                        State::Line
                    };
                }
                State::Json { depth, in_string, escaped } => {
                    let mut closed = None;
                    for (at, c) in text.char_indices() {
                        if *in_string {
                            if *escaped {
                                *escaped = false;
                            } else if c == '\\' {
                                *escaped = true;
                            } else if c == '"' {
                                *in_string = false;
                            }
                            continue;
                        }
                        match c {
                            '"' => *in_string = true,
                            '{' | '[' => *depth += 1,
                            '}' | ']' => {
                                *depth = depth.saturating_sub(1);
                                if *depth == 0 {
                                    closed = Some(at + c.len_utf8());
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    match self.take_args(text, closed) {
                        None => return,
                        Some(rest) => text = rest,
                    }
                }
                State::Line => match self.take_args(text, text.find('\n')) {
                    None => return,
                    Some(rest) => text = rest,
                },
                State::AfterCall => return,
            }
        }
    }

    /// Argument text up to `end` (all of it when `None`: they go on), where the call ends.
    /// Returns the text after the arguments.
    fn take_args<'t>(&mut self, text: &'t str, end: Option<usize>) -> Option<&'t str> {
        let Some(end) = end else {
            self.args.push_str(text);
            return None;
        };
        self.args.push_str(&text[..end]);
        self.flush_args();
        self.state = State::AfterCall;
        Some(&text[end..])
    }

    fn marker(&mut self, marker: &str) {
        if !self.calls_allowed && (marker == FUNCTION || marker == ARGS) {
            self.end_answer();
            return;
        }
        match marker {
            FUNCTION => {
                self.flush_args();
                self.state = State::Name(String::new());
            }
            ARGS => match std::mem::replace(&mut self.state, State::ArgsStart { fenced: false }) {
                State::Name(name) => self.begin_call(&name),
                State::AwaitArgs => {}
                State::Text { .. } => self.begin_call(""),
                // Another `✿ARGS✿` without a new name: Qwen-Agent reads it as another call of
                // the same tool.
                State::ArgsStart { .. } | State::Json { .. } | State::Line | State::AfterCall => {
                    let name = self.current.as_ref().map(|(_, name)| name.clone()).unwrap_or_default();
                    self.begin_call(&name);
                }
            },
            RESULT => self.end_answer(),
            RETURN => match self.state {
                State::Text { .. } => self.state = State::Text { after_return: true },
                _ => self.end_answer(),
            },
            _ => {}
        }
    }

    fn end_answer(&mut self) {
        self.flush_args();
        self.held.clear();
        self.ended = true;
    }

    /// A new call named `name` (trimmed of `:`, spaces, quotes and backticks).
    fn begin_call(&mut self, name: &str) {
        self.flush_args();
        let name = name.trim().trim_start_matches(':').trim().trim_matches(['"', '\'', '`']).trim();
        let name = if name.is_empty() { NO_NAME } else { name };
        self.calls += 1;
        let id = format!("{}{}", self.id_prefix, self.calls);
        self.fragments.push(ToolCallFragment {
            index: Some(self.calls - 1),
            id: Some(id.clone()),
            call_type: None,
            name: Some(name.to_owned()),
            arguments: String::new(),
        });
        self.current = Some((id, name.to_owned()));
    }

    /// Gives out the current call's pending argument text (the call stays `current`: its name
    /// serves another `✿ARGS✿`).
    fn flush_args(&mut self) {
        if self.args.is_empty() {
            return;
        }
        let Some((id, _)) = &self.current else {
            self.args.clear();
            return;
        };
        self.fragments.push(ToolCallFragment {
            index: Some(self.calls.saturating_sub(1)),
            id: Some(id.clone()),
            call_type: None,
            name: None,
            arguments: std::mem::take(&mut self.args),
        });
    }

    fn release(&mut self, out: &mut Vec<LlmDelta>) {
        self.flush_args();
        if !self.content.is_empty() {
            out.push(LlmDelta::Content { text: std::mem::take(&mut self.content) });
        }
        out.extend(self.fragments.drain(..).map(LlmDelta::ToolCall));
    }
}
