//! Citations (issue 35, docs/protocols.md "Citations"): the records a citable tool returned, the
//! `[cite:<id>]` markers a model writes into its answer, and the streaming filter that takes the
//! markers out of the text as it streams.
//!
//! The filter holds back only what could still become a marker: a tail that is a prefix of the
//! marker's opening (`[`, `[ci`, …), or an opened marker whose closing has not arrived and that
//! is still short enough and made of id characters. Anything else is released at once, so text
//! waits at most one marker's length. A complete marker becomes [`Piece::Cite`] with its ids
//! (`[cite:431]`, `[cite:431, 432]`) at its offset; what is not a marker stays text, byte for
//! byte.

use serde::{Deserialize, Serialize};

/// The longest id list a marker may hold (bytes between its opening and closing): a run of
/// text longer than this after `[cite:` is not a marker, and is released as text.
pub const MAX_MARKER_IDS_LEN: usize = 256;

/// The marker format when an agent names none.
pub const DEFAULT_MARKER: &str = "[cite:{id}]";

/// One record a citable tool returned: what a citation of its id shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationRecord {
    /// The id the model cites (`messageId` on the wire).
    pub message_id: String,
    /// The record's text: a client finds where to place the citation by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Who wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_name: Option<String>,
    /// The writer's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// When it was written, epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// The chat (conversation of the source system) it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// A link to the record, when the tool gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A title for the record (a document's name), when the tool gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A citation the model made: the cited record, numbered in the run, placed in the text. Stored
/// on the content message it belongs to (`_citations` in history) as
/// `{index, offset, toolId?, record}`, the shape of `content.citation` without `contentId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    /// 0, 1, … in the order the run's citations streamed.
    pub index: u32,
    /// Where the marker stood in the content block's text, in UTF-16 code units (JavaScript's
    /// `string.length`): the citation belongs to the text before it.
    pub offset: u64,
    /// The tool call whose result held the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// The record.
    pub record: CitationRecord,
}

/// An invalid marker format ([`CiteMarker::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The format has no `{id}`, or more than one.
    #[error("a citation marker must contain {{id}} exactly once (got {0:?})")]
    NoIdSlot(String),
    /// Nothing before `{id}`: every text would be a marker's beginning.
    #[error("a citation marker needs text before {{id}} (got {0:?})")]
    NoOpening(String),
    /// Nothing after `{id}`: a marker could never end.
    #[error("a citation marker needs text after {{id}} (got {0:?})")]
    NoClosing(String),
}

/// A marker format such as `[cite:{id}]`: the text before `{id}` opens a marker, the text after
/// closes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiteMarker {
    open: String,
    close: String,
}

impl Default for CiteMarker {
    fn default() -> Self {
        Self { open: "[cite:".into(), close: "]".into() }
    }
}

impl CiteMarker {
    /// Reads a format with exactly one `{id}`, text before it and text after it.
    pub fn parse(format: &str) -> Result<Self, MarkerError> {
        let (open, close) = format.split_once("{id}").ok_or_else(|| MarkerError::NoIdSlot(format.into()))?;
        if close.contains("{id}") {
            return Err(MarkerError::NoIdSlot(format.into()));
        }
        if open.is_empty() {
            return Err(MarkerError::NoOpening(format.into()));
        }
        if close.is_empty() {
            return Err(MarkerError::NoClosing(format.into()));
        }
        Ok(Self { open: open.into(), close: close.into() })
    }

    /// The first character of the opening.
    fn first(&self) -> char {
        self.open.chars().next().unwrap_or('[')
    }

    /// The marker for `id` (`[cite:431]`), as a prompt shows it.
    pub fn of(&self, id: &str) -> String {
        format!("{}{id}{}", self.open, self.close)
    }

    /// The most text the filter ever holds back.
    pub fn max_held(&self) -> usize {
        self.open.len() + MAX_MARKER_IDS_LEN + self.close.len()
    }
}

/// What the filter releases: text to stream, or the ids of one marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text without markers.
    Text(String),
    /// One marker (a marker without ids is dropped).
    Cite(Marker),
}

/// A marker found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Its ids, in the order written, trimmed, none empty.
    pub ids: Vec<String>,
    /// UTF-16 length of the text released before it ([`CiteFilter::offset`] then).
    pub offset: u64,
}

/// Takes markers out of a streamed text. One filter per stream of text (a model turn).
#[derive(Debug, Clone, Default)]
pub struct CiteFilter {
    marker: CiteMarker,
    held: String,
    /// UTF-16 length of the text released so far.
    released: u64,
}

/// Whether `c` may appear between a marker's opening and closing: anything but line breaks and
/// the characters that would make a bracketed aside of it.
fn id_char(c: char) -> bool {
    !matches!(c, '\n' | '\r' | '[' | '{' | '}')
}

impl CiteFilter {
    /// A filter for `marker`.
    pub fn new(marker: CiteMarker) -> Self {
        Self { marker, held: String::new(), released: 0 }
    }

    /// UTF-16 length of the text released so far: the offset of a marker found now.
    pub fn offset(&self) -> u64 {
        self.released
    }

    /// Bytes held back now, waiting to see whether they start a marker.
    pub fn pending(&self) -> usize {
        self.held.len()
    }

    /// Feeds one chunk; appends what can be released now.
    pub fn push(&mut self, chunk: &str, out: &mut Vec<Piece>) {
        if self.held.is_empty() && !chunk.contains(self.marker.first()) {
            // The common case: nothing held and nothing that could open a marker.
            self.release(chunk.to_owned(), out);
            return;
        }
        let mut text = std::mem::take(&mut self.held);
        text.push_str(chunk);
        self.scan(text, false, out);
    }

    /// [`Self::push`] for a chunk the caller owns: in the common case it is released as it is,
    /// without a copy.
    pub fn push_owned(&mut self, chunk: String, out: &mut Vec<Piece>) {
        if self.held.is_empty() && !chunk.contains(self.marker.first()) {
            self.release(chunk, out);
        } else {
            self.push(&chunk, out);
        }
    }

    /// The stream ended: releases what is held (an unfinished marker is text after all).
    pub fn finish(&mut self, out: &mut Vec<Piece>) {
        let text = std::mem::take(&mut self.held);
        self.scan(text, true, out);
    }

    fn release(&mut self, text: String, out: &mut Vec<Piece>) {
        release(&mut self.released, text, out);
    }

    fn scan(&mut self, text: String, at_end: bool, out: &mut Vec<Piece>) {
        let Self { marker, held, released } = self;
        let (open, close) = (marker.open.as_str(), marker.close.as_str());
        let mut plain = 0; // start of the text not yet released
        let mut from = 0; // where to look for the next opening
        while let Some(found) = text[from..].find(open) {
            let start = from + found;
            let ids_start = start + open.len();
            let rest = &text[ids_start..];
            let window = &rest[..floor_char(rest, MAX_MARKER_IDS_LEN + close.len()).min(rest.len())];
            match marker_end(window, close) {
                MarkerScan::Closed(ids_len) => {
                    release(released, text[plain..start].to_owned(), out);
                    let ids: Vec<String> = rest[..ids_len]
                        .split(',')
                        .map(str::trim)
                        .filter(|id| !id.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if !ids.is_empty() {
                        out.push(Piece::Cite(Marker { ids, offset: *released }));
                    }
                    plain = ids_start + ids_len + close.len();
                    from = plain;
                }
                MarkerScan::Open if !at_end && window.len() == rest.len() => {
                    // Could still close: hold from the opening on.
                    release(released, text[plain..start].to_owned(), out);
                    *held = text[start..].to_owned();
                    return;
                }
                _ => from = start + marker.first().len_utf8(),
            }
        }
        // A tail that may be the start of an opening (`[`, `[ci`) waits for the next chunk.
        let keep = if at_end { 0 } else { opening_prefix_len(&text[from.max(plain)..], open) };
        let cut = text.len() - keep;
        release(released, text[plain..cut].to_owned(), out);
        *held = text[cut..].to_owned();
    }
}

/// Appends released text to `out` (joining a text piece before it) and counts it.
fn release(released: &mut u64, text: String, out: &mut Vec<Piece>) {
    if text.is_empty() {
        return;
    }
    *released += text.encode_utf16().count() as u64;
    match out.last_mut() {
        Some(Piece::Text(last)) => last.push_str(&text),
        _ => out.push(Piece::Text(text)),
    }
}

enum MarkerScan {
    /// The ids end at this byte, where the closing starts.
    Closed(usize),
    /// No closing yet, and everything so far may be ids.
    Open,
    /// Not a marker.
    Broken,
}

/// Looks for the closing in `window` (the text after an opening, cut at the longest marker).
fn marker_end(window: &str, close: &str) -> MarkerScan {
    for (i, c) in window.char_indices() {
        if window[i..].starts_with(close) {
            return if i <= MAX_MARKER_IDS_LEN { MarkerScan::Closed(i) } else { MarkerScan::Broken };
        }
        if !id_char(c) || i >= MAX_MARKER_IDS_LEN {
            return MarkerScan::Broken;
        }
    }
    // A closing cut off by the window's end would still arrive.
    MarkerScan::Open
}

/// The largest char boundary of `s` at or below `at`.
fn floor_char(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The length of the longest suffix of `text` that is a proper prefix of `open`.
fn opening_prefix_len(text: &str, open: &str) -> usize {
    (1..open.len().min(text.len() + 1))
        .rev()
        .find(|&n| open.is_char_boundary(n) && text.is_char_boundary(text.len() - n) && text.ends_with(&open[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
