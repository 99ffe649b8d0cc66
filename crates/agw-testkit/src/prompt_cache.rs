//! An Anthropic prompt cache, simulated: checks a request's `cache_control` breakpoints the way
//! the Messages API does and reports the cache reads and writes it would, so a test can show that
//! a second call of a conversation reads what the first wrote.
//!
//! What it models: the prompt is the tools, then the system blocks, then every message's blocks,
//! in that order; a breakpoint caches the prefix up to and including its block; a lookup at a
//! breakpoint also tries the 20 blocks before it. What it checks (a 400 like the API's
//! otherwise): at most four breakpoints, none on a thinking block or an empty text block. What it
//! leaves out: the minimum cacheable length (1,024 tokens and more), so short test prompts cache
//! too, and expiry. Tokens are counted as a quarter of a prefix's JSON bytes.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::Transcript;

/// Breakpoints the API accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;
/// How far before a breakpoint the API looks for a cached prefix (blocks).
const LOOKBACK_BLOCKS: usize = 20;

/// What one request read from and wrote to the cache (tokens), and its other input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheUse {
    /// Input neither read nor written.
    pub input_tokens: u64,
    /// Read from the cache.
    pub cache_read_input_tokens: u64,
    /// Written to the cache.
    pub cache_creation_input_tokens: u64,
    /// Breakpoints the request carried.
    pub breakpoints: usize,
}

/// Why the API would refuse a request's breakpoints (its 400's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The simulated cache; share one between the requests of a test.
#[derive(Debug, Default)]
pub struct PromptCacheSim {
    cached: Mutex<HashSet<String>>,
}

impl PromptCacheSim {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks `body` (a Messages API request) up in the cache and stores its breakpoints'
    /// prefixes. `Err`: why the API would refuse the request.
    pub fn check(&self, body: &Value) -> Result<CacheUse, Refused> {
        let blocks = prompt_blocks(body);
        let mut marked = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            if block.get("cache_control").is_none() {
                continue;
            }
            match block["type"].as_str() {
                Some("thinking" | "redacted_thinking") => {
                    return Err(Refused("cache_control cannot be set on a thinking block".into()));
                }
                Some("text") if block["text"].as_str().is_none_or(str::is_empty) => {
                    return Err(Refused("cache_control cannot be set on an empty text block".into()));
                }
                _ => marked.push(index),
            }
        }
        if marked.len() > MAX_BREAKPOINTS {
            return Err(Refused(format!(
                "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {}.",
                marked.len()
            )));
        }
        let keys: Vec<String> = (0..blocks.len()).map(|end| prefix_key(&blocks[..=end])).collect();
        let tokens = |end: usize| keys[end].len() as u64 / 4;
        let total = blocks.len().checked_sub(1).map_or(0, tokens);
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        // The longest cached prefix any breakpoint finds.
        let read = marked
            .iter()
            .flat_map(|&at| (at.saturating_sub(LOOKBACK_BLOCKS)..=at).rev())
            .filter(|&end| cached.contains(&keys[end]))
            .map(tokens)
            .max()
            .unwrap_or(0);
        let written = marked.last().map_or(0, |&last| tokens(last).saturating_sub(read));
        for &at in &marked {
            cached.insert(keys[at].clone());
        }
        Ok(CacheUse {
            input_tokens: total - read - written,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: written,
            breakpoints: marked.len(),
        })
    }

    /// An answer to `body`: `text` in one block, with the usage the cache lookup gives — or the
    /// API's 400 when the request's breakpoints are wrong.
    pub fn answer(&self, body: &Value, text: &str) -> Transcript {
        match self.check(body) {
            Err(Refused(message)) => Transcript::http_error(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).to_string(),
            ),
            Ok(used) => Transcript::new()
                .event(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                        "id": "msg_cache", "type": "message", "role": "assistant", "model": crate::CHUNK_MODEL,
                        "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": {"input_tokens": used.input_tokens, "output_tokens": 1,
                                  "cache_read_input_tokens": used.cache_read_input_tokens,
                                  "cache_creation_input_tokens": used.cache_creation_input_tokens},
                    }}),
                )
                .anthropic_block_start(0, json!({"type": "text", "text": ""}))
                .anthropic_delta(0, json!({"type": "text_delta", "text": text}))
                .anthropic_block_stop(0)
                .anthropic_stop("end_turn", 1),
        }
    }
}

/// The prompt as the cache sees it: tools, system blocks, then each message's blocks (a string
/// content is one text block), each tagged with where it sits.
fn prompt_blocks(body: &Value) -> Vec<Value> {
    let mut blocks = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        blocks.push(json!({"in": "tools", "block": tool}));
    }
    match &body["system"] {
        Value::String(text) => blocks.push(json!({"in": "system", "block": {"type": "text", "text": text}})),
        Value::Array(items) => blocks.extend(items.iter().map(|b| json!({"in": "system", "block": b}))),
        _ => {}
    }
    for (position, message) in body["messages"].as_array().into_iter().flatten().enumerate() {
        let tag = json!({"message": position, "role": message["role"]});
        match &message["content"] {
            Value::String(text) => blocks.push(json!({"in": tag, "block": {"type": "text", "text": text}})),
            Value::Array(items) => blocks.extend(items.iter().map(|b| json!({"in": tag, "block": b}))),
            _ => {}
        }
    }
    // The caller reads `cache_control` and `type` on the block itself.
    blocks.into_iter().map(flatten).collect()
}

fn flatten(tagged: Value) -> Value {
    let mut block = tagged["block"].clone();
    if let Value::Object(map) = &mut block {
        map.insert("_in".into(), tagged["in"].clone());
    }
    block
}

/// The identity of a prefix: its blocks without their breakpoint markers (a marker does not
/// change what is cached).
fn prefix_key(blocks: &[Value]) -> String {
    let stripped: Vec<Value> = blocks
        .iter()
        .map(|block| {
            let mut block = block.clone();
            if let Value::Object(map) = &mut block {
                map.remove("cache_control");
            }
            block
        })
        .collect();
    Value::Array(stripped).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Value) -> Value {
        json!({"tools": [{"name": "a", "input_schema": {}, "cache_control": {"type": "ephemeral"}}],
               "system": [{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}],
               "messages": messages})
    }

    #[test]
    fn a_second_call_reads_what_the_first_wrote() {
        let cache = PromptCacheSim::new();
        let first = request(
            json!([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]),
        );
        let used = cache.check(&first).unwrap();
        assert_eq!(used.cache_read_input_tokens, 0);
        assert!(used.cache_creation_input_tokens > 0);
        let second = request(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}]},
        ]));
        let again = cache.check(&second).unwrap();
        assert_eq!(again.cache_read_input_tokens, used.cache_creation_input_tokens, "the whole first prompt is read");
        assert!(again.cache_creation_input_tokens > 0, "the new turn is written");
    }

    #[test]
    fn a_changed_prefix_misses_and_bad_breakpoints_are_refused() {
        let cache = PromptCacheSim::new();
        cache.check(&request(json!([{"role": "user", "content": "hi"}]))).unwrap();
        let mut changed = request(json!([{"role": "user", "content": "hi"}]));
        changed["system"][0]["text"] = json!("You help, today.");
        let used = cache.check(&changed).unwrap();
        assert!(used.cache_read_input_tokens > 0, "the tools still match");
        assert!(used.cache_read_input_tokens < cache.check(&changed).unwrap().cache_read_input_tokens);
        let marker = json!({"type": "ephemeral"});
        let five = json!({"tools": [{"name": "a", "cache_control": marker}, {"name": "b", "cache_control": marker},
            {"name": "c", "cache_control": marker}, {"name": "d", "cache_control": marker},
            {"name": "e", "cache_control": marker}], "messages": []});
        assert!(cache.check(&five).unwrap_err().0.contains("maximum of 4"));
        let thinking = json!({"messages": [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "…", "signature": "s", "cache_control": marker}]}]});
        assert!(cache.check(&thinking).is_err());
    }
}
