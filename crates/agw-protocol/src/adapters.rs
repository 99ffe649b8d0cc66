//! Other wire protocols for agw's runs (issue 16): pure mappings from agw's [`Event`]s to the
//! frames of each protocol, one mapper per stream, tested event by event. The HTTP layer picks
//! the adapter by endpoint; the native dialect (`sse`) stays the default.
//!
//! [`Event`]: crate::Event

pub mod ag_ui;
pub mod ai_sdk;
pub mod openai_chat;

/// What a `context.compact` tells a client of another protocol: the level and the numbers (the
/// summary text stays in agw's own stream and history).
pub(crate) fn compact_summary(e: &crate::event::ContextCompact) -> serde_json::Value {
    serde_json::json!({"level": e.level.as_str(), "tokensBefore": e.tokens_before, "tokensAfter": e.tokens_after, "budget": e.budget})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Event;
    use crate::event::{CompactLevel, ContextCompact};

    #[test]
    fn a_compaction_reaches_ai_sdk_as_a_data_part_and_ag_ui_as_a_custom_event() {
        let compact = ContextCompact {
            run_id: "r".into(),
            level: CompactLevel::Summary,
            tokens_before: 900,
            tokens_after: 200,
            budget: 1000,
            duration_ms: 3,
            pruned_results: 0,
            replaced_messages: 4,
            summary: Some("long summary text".into()),
            through_run_id: Some("r0".into()),
            reason: None,
        };
        let event = Event::new(5, 7, compact);
        let numbers = json!({"level": "summary", "tokensBefore": 900, "tokensAfter": 200, "budget": 1000});
        let mut out = Vec::new();
        super::ai_sdk::UiMessageMapper::new().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "data-context-compact", "data": numbers})]);
        let mut out = Vec::new();
        super::ag_ui::AgUiMapper::default().map(&event, &mut out);
        assert_eq!(out, [json!({"type": "CUSTOM", "name": "agw.context_compact", "value": numbers, "timestamp": 7})]);
        let mut out = Vec::new();
        super::openai_chat::ChunkMapper::new("r", "m", 7).map(&event, &mut out);
        assert!(out.is_empty(), "the OpenAI façade carries only text");
    }
}
