//! The context-budget check of a model call (`docs/context.md`): agw estimates the whole request
//! before every call. Measured on a 20-turn and a 500-turn chat — a user question, a tool call with a ~2 KB
//! JSON result, and a ~1 KB answer per turn, Latin and CJK — to show what the check costs next to
//! a model call. `cargo test --benches` runs it once (criterion's test mode). Figures:
//! `docs/performance.md`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use agw_llm::tokens::estimate_messages;
use agw_llm::{ChatMessage, ToolCallMessage};

fn chat(turns: usize) -> Vec<ChatMessage> {
    let result = serde_json::json!({
        "city": "Shanghai", "forecast": (0..20).map(|d| serde_json::json!({"day": d, "high": 12, "low": 4,
            "condition": "cloudy with light rain in the afternoon"})).collect::<Vec<_>>(),
    })
    .to_string();
    let answer = "The forecast for the coming days is mild, with rain on some afternoons. ".repeat(10)
        + &"上海未来几天天气温和，部分下午有小雨。".repeat(8);
    let mut messages = Vec::with_capacity(turns * 4);
    for turn in 0..turns {
        let id = format!("call_{turn}");
        messages.push(ChatMessage::user(format!("What is the weather in Shanghai on day {turn}?")));
        messages.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: id.clone(),
                call_type: "function".into(),
                name: "mock_city_weather".into(),
                arguments: format!(r#"{{"city":"Shanghai","day":{turn}}}"#),
            }],
        });
        messages.push(ChatMessage::Tool {
            tool_call_id: id,
            name: "mock_city_weather".into(),
            content: result.clone(),
        });
        messages.push(ChatMessage::Assistant { content: answer.clone(), tool_calls: Vec::new() });
    }
    messages
}

fn budget_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("context");
    // 20 turns: the default window (MEMORY_CHAT_K); 500: a chat sent whole.
    for turns in [20, 500] {
        let messages = chat(turns);
        group.throughput(Throughput::Bytes(text_bytes(&messages) as u64));
        group.bench_function(format!("estimate/{turns}_turns"), |b| b.iter(|| estimate_messages(black_box(&messages))));
    }
    group.finish();
}

fn text_bytes(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| match m {
            ChatMessage::Tool { content, .. } | ChatMessage::User { content, .. } | ChatMessage::System { content } => {
                content.len()
            }
            ChatMessage::Assistant { content, tool_calls } => {
                content.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>()
            }
        })
        .sum()
}

criterion_group!(benches, budget_check);
criterion_main!(benches);
