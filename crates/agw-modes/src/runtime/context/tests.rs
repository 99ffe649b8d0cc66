//! Compaction levels on conversations built in code; the whole path (estimate → events →
//! provider request) is tested over HTTP in `agw-http/tests/context.rs`.

use agw_llm::ToolCallMessage;
use proptest::prelude::*;

use super::*;

fn user(text: &str) -> ChatMessage {
    ChatMessage::user(text)
}

fn call(id: &str, name: &str) -> ChatMessage {
    ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCallMessage {
            id: id.into(),
            call_type: "function".into(),
            name: name.into(),
            arguments: "{}".into(),
        }],
    }
}

fn result(id: &str, name: &str, tokens: usize) -> ChatMessage {
    ChatMessage::Tool { tool_call_id: id.into(), name: name.into(), content: "abcd".repeat(tokens) }
}

fn content_of(message: &ChatMessage) -> &str {
    match message {
        ChatMessage::Tool { content, .. } | ChatMessage::User { content, .. } | ChatMessage::System { content } => {
            content
        }
        ChatMessage::Assistant { content, .. } => content,
    }
}

/// Four user turns, each one tool call with `tokens` of output.
fn four_turns(tokens: usize, tool: &str) -> Vec<ChatMessage> {
    (1..=4)
        .flat_map(|i| {
            let id = format!("c{i}");
            [user(&format!("question {i}")), call(&id, tool), result(&id, tool, tokens)]
        })
        .collect()
}

#[test]
fn prune_skips_the_kept_turns_protects_the_newest_output_and_replaces_older_results() {
    let policy = ContextPolicy::default();
    let mut messages = four_turns(30_000, "search");
    let pruned = prune(&mut messages, &policy, policy.keep_user_turns, policy.prune_minimum_tokens);
    assert_eq!(pruned, Some(1));
    // Turns 3 and 4 are kept, turn 2's 30k fit the 40k protected, turn 1's result goes.
    assert_eq!(content_of(&messages[2]), pruned_marker(30_000));
    for index in [5, 8, 11] {
        assert_eq!(content_of(&messages[index]).len(), 120_000, "message {index} kept");
    }
    // Pruning twice changes nothing more: markers are not counted again.
    assert_eq!(prune(&mut messages, &policy, policy.keep_user_turns, policy.prune_minimum_tokens), None);
}

#[test]
fn prune_needs_the_minimum_and_never_touches_protected_tools() {
    let policy = ContextPolicy::default();
    let mut small = four_turns(15_000, "search");
    // Past the kept turns there are 30k of output, all within the protected 40k.
    assert_eq!(prune(&mut small, &policy, 2, policy.prune_minimum_tokens), None);
    let mut skills = four_turns(30_000, "_skill_run_script_");
    assert_eq!(prune(&mut skills, &policy, 2, policy.prune_minimum_tokens), None);
    assert!(skills.iter().all(|m| !content_of(m).starts_with("[tool output pruned")));
}

#[test]
fn truncate_keeps_the_newest_turns_behind_a_marker_and_never_drops_only_a_summary() {
    let mut messages = four_turns(10, "t");
    assert_eq!(truncate(&mut messages, 2), Some(6));
    assert_eq!(messages.len(), 2 + 6);
    assert!(matches!(&messages[0], ChatMessage::User { content, .. } if content == SUMMARY_REQUEST));
    assert!(content_of(&messages[1]).contains("6 earlier messages"));
    assert_eq!(content_of(&messages[2]), "question 3");
    // Now only the marker is before the kept turns.
    assert_eq!(truncate(&mut messages, 2), None);
}

#[test]
fn usable_tokens_reserve_at_most_8192_for_the_answer() {
    assert_eq!(usable_tokens(128_000, 4_096), 123_904);
    assert_eq!(usable_tokens(200_000, 64_000), 191_808);
    assert_eq!(usable_tokens(1_000, 4_096), 0);
}

#[test]
fn calibration_scales_later_estimates_by_what_the_provider_counted() {
    let mut state = ContextState::default();
    assert_eq!(state.scaled(1_000), 1_000);
    state.calibrate(1_000, &serde_json::json!({"prompt_tokens": 1_500}));
    assert_eq!(state.scaled(1_000), 1_500);
    state.calibrate(1_000, &serde_json::json!({"completion_tokens": 9}));
    assert_eq!(state.scaled(1_000), 1_500, "usage without input tokens changes nothing");
}

#[test]
fn a_transcript_keeps_its_newest_part_when_it_must_be_cut() {
    let messages = four_turns(1_000, "search");
    let all = transcript(&messages, u64::MAX);
    assert!(all.starts_with("User: question 1") && all.contains("Assistant called search({})"));
    let cut = transcript(&messages, 2_500);
    assert!(cut.starts_with("[older turns omitted]") && cut.ends_with(&"abcd".repeat(1_000)));
    assert!(!cut.contains("question 1"));
}

/// A conversation: turns of a user message, then rounds of calls each followed by their results,
/// then maybe an answer.
fn conversation() -> impl Strategy<Value = Vec<ChatMessage>> {
    let round = (1usize..3, 0usize..4_000);
    let turn = (prop::collection::vec(round, 0..3), any::<bool>());
    prop::collection::vec(turn, 1..7).prop_map(|turns| {
        let mut out = Vec::new();
        let mut id = 0;
        for (index, (rounds, answer)) in turns.into_iter().enumerate() {
            out.push(user(&format!("turn {index}")));
            for (calls, tokens) in rounds {
                let ids: Vec<String> = (0..calls)
                    .map(|_| {
                        id += 1;
                        format!("c{id}")
                    })
                    .collect();
                let tool_calls = ids
                    .iter()
                    .map(|i| ToolCallMessage {
                        id: i.clone(),
                        call_type: "function".into(),
                        name: "t".into(),
                        arguments: "{}".into(),
                    })
                    .collect();
                out.push(ChatMessage::Assistant { content: String::new(), tool_calls });
                out.extend(ids.iter().map(|i| result(i, "t", tokens)));
            }
            if answer {
                out.push(ChatMessage::Assistant { content: "answer".into(), tool_calls: Vec::new() });
            }
        }
        out
    })
}

/// Every assistant call is followed, before anything else, by exactly its results.
fn calls_are_paired(messages: &[ChatMessage]) -> bool {
    let mut open: Vec<&str> = Vec::new();
    for message in messages {
        match message {
            ChatMessage::Tool { tool_call_id, .. } => {
                let Some(pos) = open.iter().position(|id| id == tool_call_id) else { return false };
                open.remove(pos);
            }
            _ if !open.is_empty() => return false,
            ChatMessage::Assistant { tool_calls, .. } => open = tool_calls.iter().map(|c| c.id.as_str()).collect(),
            _ => {}
        }
    }
    open.is_empty()
}

proptest! {
    #[test]
    fn compaction_never_splits_a_call_from_its_result_nor_drops_the_newest_user_message(
        messages in conversation(),
        keep in 0usize..4,
        protect in 0u64..6_000,
        minimum in 0u64..3_000,
    ) {
        prop_assume!(calls_are_paired(&messages));
        let newest_user = messages.iter().rev().find(|m| matches!(m, ChatMessage::User { .. })).cloned();
        let policy = ContextPolicy { prune_protect_tokens: protect, ..ContextPolicy::default() };
        let mut compacted = messages.clone();
        prune(&mut compacted, &policy, keep, minimum);
        prop_assert!(calls_are_paired(&compacted));
        prop_assert_eq!(compacted.len(), messages.len());
        truncate(&mut compacted, keep);
        prop_assert!(calls_are_paired(&compacted));
        let still = compacted.iter().rev().find(|m| matches!(m, ChatMessage::User { .. })).cloned();
        prop_assert_eq!(still, newest_user);
        // Whatever follows the newest user message is untouched by truncation.
        let tail = |m: &[ChatMessage]| m.iter().rev().take_while(|m| !matches!(m, ChatMessage::User { .. })).count();
        prop_assert_eq!(tail(&compacted), tail(&messages));
    }
}
