//! Turning the text of an agent file into a JSON object (docs/contract/agent-definitions.md §2).
//!
//! Two relaxations over plain JSON, applied in this order:
//! 1. `"<K>": """<text>"""` for keys ending in `systemPrompt` (ASCII case-insensitive) becomes a
//!    normal JSON string, so prompts can be written as readable multi-line blocks. The rewrite is
//!    purely textual (it even applies inside comments), exactly like the reference.
//! 2. `//`, `/* */` and `#` comments are blanked out.
//!
//! Nothing here may panic on arbitrary input: the catalog feeds it whatever is in the directory.

use std::io::Read;

use json_comments::{CommentSettings, StripComments};
use serde_json::{Map, Value};

use super::error::DefinitionError;

const TRIPLE_QUOTE: &str = "\"\"\"";
const PROMPT_SUFFIX: &[u8] = b"systemprompt";

/// Pre-processes and parses `text`; the root must be an object.
pub fn parse_object(text: &str) -> Result<Map<String, Value>, DefinitionError> {
    // Editors on Windows like to prepend a BOM; serde_json does not skip it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = expand_triple_quotes(text);
    let text = strip_comments(&text)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(DefinitionError::RootNotObject),
        Err(e) => Err(DefinitionError::Syntax(e.to_string())),
    }
}

/// Replaces every `"<K>"<ws>:<ws>"""<text>"""` (K = `[A-Za-z0-9_]*systemPrompt`) by
/// `"<K>": "<escaped text>"`. Leftmost, non-overlapping matches; `<text>` ends at the first `"""`.
pub fn expand_triple_quotes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // `copied` marks how much of `text` is already in `out`. All cut points are ASCII bytes,
    // so every slice below falls on a char boundary.
    let mut copied = 0;
    let mut pos = 0;
    while let Some(offset) = bytes[pos..].iter().position(|&b| b == b'"') {
        let start = pos + offset;
        match match_block(text, start) {
            Block::Found { key_end, body, end } => {
                out.push_str(&text[copied..key_end]);
                out.push_str(": ");
                out.push_str(&escape_block(body));
                copied = end;
                pos = end;
            }
            // No `"""` left anywhere after this point, so no later candidate can match either.
            Block::Unterminated => break,
            Block::NoMatch => pos = start + 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

enum Block<'a> {
    /// `key_end` is just past the key's closing quote; `end` just past the closing `"""`.
    Found {
        key_end: usize,
        body: &'a str,
        end: usize,
    },
    Unterminated,
    NoMatch,
}

/// Tries to match a triple-quoted prompt whose key starts at the quote at `start`.
fn match_block(text: &str, start: usize) -> Block<'_> {
    let bytes = text.as_bytes();
    let key_start = start + 1;
    let key_len = bytes[key_start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
    let key = &bytes[key_start..key_start + key_len];
    let key_close = key_start + key_len;
    let is_prompt_key =
        key.len() >= PROMPT_SUFFIX.len() && key[key.len() - PROMPT_SUFFIX.len()..].eq_ignore_ascii_case(PROMPT_SUFFIX);
    if !is_prompt_key || bytes.get(key_close) != Some(&b'"') {
        return Block::NoMatch;
    }
    let mut i = skip_ws(bytes, key_close + 1);
    if bytes.get(i) != Some(&b':') {
        return Block::NoMatch;
    }
    i = skip_ws(bytes, i + 1);
    if !text[i..].starts_with(TRIPLE_QUOTE) {
        return Block::NoMatch;
    }
    let body_start = i + TRIPLE_QUOTE.len();
    match text[body_start..].find(TRIPLE_QUOTE) {
        Some(len) => Block::Found {
            key_end: key_close + 1,
            body: &text[body_start..body_start + len],
            end: body_start + len + TRIPLE_QUOTE.len(),
        },
        None => Block::Unterminated,
    }
}

/// Java's `\s`: the reference matched the separator with it.
fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) {
        i += 1;
    }
    i
}

/// CRLF→LF, drop ONE leading and ONE trailing newline, then JSON-escape verbatim.
fn escape_block(body: &str) -> String {
    let body = body.replace("\r\n", "\n");
    let body = body.strip_prefix('\n').unwrap_or(&body);
    let body = body.strip_suffix('\n').unwrap_or(body);
    Value::String(body.to_owned()).to_string()
}

/// Blanks out `//`, `/* */` and `#` comments, leaving string contents untouched.
fn strip_comments(text: &str) -> Result<String, DefinitionError> {
    let mut stripped = Vec::with_capacity(text.len());
    StripComments::with_settings(CommentSettings::all(), text.as_bytes())
        .read_to_end(&mut stripped)
        .map_err(|_| DefinitionError::Syntax("unterminated string or comment, or a stray '/'".into()))?;
    // json_comments also blanks the newlines inside block comments; put them back so the line
    // numbers in serde_json's errors match the file. Outside strings a newline is whitespace like
    // the blank it replaced, and the stripper never touches string contents.
    for (out, original) in stripped.iter_mut().zip(text.bytes()) {
        if original == b'\n' {
            *out = b'\n';
        }
    }
    // Only ASCII bytes are ever replaced (whole multi-byte chars become several blanks), so the
    // result stays UTF-8; the fallback merely avoids a panic path.
    String::from_utf8(stripped).map_err(|e| DefinitionError::Syntax(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triple_quotes_become_json_strings() {
        let text = "{\"systemPrompt\": \"\"\"\nline \"one\"\\n\n  two\n\"\"\"}";
        assert_eq!(expand_triple_quotes(text), "{\"systemPrompt\": \"line \\\"one\\\"\\\\n\\n  two\"}");
    }

    #[test]
    fn key_must_end_with_system_prompt() {
        let ends = "{\"planSYSTEMprompt\" :\n \"\"\"x\"\"\"}";
        assert_eq!(expand_triple_quotes(ends), "{\"planSYSTEMprompt\": \"x\"}");
        let contains = "{\"systemPromptX\": \"\"\"x\"\"\"}";
        assert_eq!(expand_triple_quotes(contains), contains);
        let other = "{\"a b systemPrompt\": \"\"\"x\"\"\"}";
        assert_eq!(expand_triple_quotes(other), other);
    }

    #[test]
    fn only_one_newline_is_removed_at_each_end_and_crlf_is_normalised() {
        let text = "{\"systemPrompt\":\"\"\"\r\n\r\n  a\r\n  b\r\n\r\n\"\"\"}";
        assert_eq!(expand_triple_quotes(text), "{\"systemPrompt\": \"\\n  a\\n  b\\n\"}");
    }

    #[test]
    fn unterminated_block_is_left_alone() {
        let text = "{\"systemPrompt\": \"\"\"abc";
        assert_eq!(expand_triple_quotes(text), text);
        assert!(parse_object(text).is_err());
    }

    #[test]
    fn several_blocks_and_multibyte_text() {
        let text = "{\"a_systemPrompt\":\"\"\"你好\"\"\", \"b\": \"é\", \"systemPrompt\": \"\"\"再见\"\"\"}";
        let map = parse_object(text).unwrap();
        assert_eq!(map["a_systemPrompt"], "你好");
        assert_eq!(map["b"], "é");
        assert_eq!(map["systemPrompt"], "再见");
    }

    #[test]
    fn comments_are_removed_but_strings_kept() {
        let text = "# head\n{ // c1\n \"a\": \"x // not # a /* comment */\", /* 注释\n */ \"b\": 1 # tail\n}";
        let map = parse_object(text).unwrap();
        assert_eq!(map["a"], "x // not # a /* comment */");
        assert_eq!(map["b"], 1);
    }

    #[test]
    fn line_numbers_survive_block_comments() {
        let err = parse_object("{\n/*\n\n*/\n\"a\": ,\n}").unwrap_err();
        assert!(err.to_string().contains("line 5"), "{err}");
    }

    #[test]
    fn root_must_be_an_object() {
        assert_eq!(parse_object("[1]"), Err(DefinitionError::RootNotObject));
        assert!(matches!(parse_object("{"), Err(DefinitionError::Syntax(_))));
        assert!(matches!(parse_object("{} /"), Err(DefinitionError::Syntax(_))));
        assert!(parse_object("\u{feff}{}").is_ok());
    }
}
