//! Signed thinking blocks of tool-calling turns, kept for the next request.
//!
//! With thinking enabled, the Messages API requires the assistant turn of a tool-use loop to be
//! sent back with its `thinking` / `redacted_thinking` blocks verbatim, signature included.
//! agw's provider-neutral conversation ([`crate::ChatMessage`]) carries no such blocks, so the
//! provider remembers them itself, keyed by the id of the turn's first `tool_use` block, and
//! [`super::body`] puts them back in front of that assistant message. Bounded: the oldest
//! entries are forgotten first (a miss only means thinking is left out of that call).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

/// Entries kept (one per tool-calling turn with thinking).
const CAPACITY: usize = 1024;

/// `(first tool_use id, thinking blocks)`, oldest first.
type Entries = VecDeque<(String, Vec<Value>)>;

/// Shared between a provider and the streams it opened.
#[derive(Debug, Clone, Default)]
pub struct ThinkingCache {
    entries: Arc<Mutex<Entries>>,
}

impl ThinkingCache {
    /// Remembers the thinking `blocks` of the turn whose first tool call is `tool_use_id`.
    pub fn insert(&self, tool_use_id: &str, blocks: Vec<Value>) {
        if tool_use_id.is_empty() || blocks.is_empty() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(id, _)| id != tool_use_id);
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back((tool_use_id.to_owned(), blocks));
    }

    /// The thinking blocks remembered for `tool_use_id`.
    pub fn get(&self, tool_use_id: &str) -> Option<Vec<Value>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.iter().rev().find(|(id, _)| id == tool_use_id).map(|(_, blocks)| blocks.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounded_and_keyed() {
        let cache = ThinkingCache::default();
        cache.insert("", vec![json!(1)]);
        cache.insert("a", vec![]);
        assert!(cache.get("a").is_none() && cache.get("").is_none());
        for i in 0..=CAPACITY {
            cache.insert(&format!("t{i}"), vec![json!(i)]);
        }
        assert!(cache.get("t0").is_none(), "oldest evicted");
        assert_eq!(cache.get(&format!("t{CAPACITY}")), Some(vec![json!(CAPACITY)]));
    }
}
