//! Hot-path micro-benchmark of agw-llm: one upstream `chat.completion.chunk` → `LlmDelta`s.
//!
//! On the live (direct) path [`agw_llm::openai::parse_chunk_str`] decodes each SSE `data:` payload
//! into a typed view and maps it (`decode_typed`). The temporary async-openai path decodes it into
//! a `serde_json::Value` and [`agw_llm::openai::parse_chunk`] reads the deltas from that; both of
//! its steps are measured too (`parse`, `decode_and_parse`). All on the chunk shapes the fixture
//! provider (and OpenAI) send. `cargo nextest run` runs each
//! benchmark once (criterion's test mode). Figures: `docs/performance.md`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

use agw_llm::openai::{parse_chunk, parse_chunk_str};
use agw_testkit::chunk_json;

fn samples() -> Vec<(&'static str, String)> {
    let content = chunk_json(json!({"content": " token"}), None);
    let tool_start = chunk_json(
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"index": 0, "id": "call_weather_1", "type": "function",
                            "function": {"name": "mock_city_weather", "arguments": ""}}],
        }),
        None,
    );
    let tool_args =
        chunk_json(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Tokyo\","}}]}), None);
    let finish = chunk_json(json!({}), Some("stop"));
    [("content", content), ("tool_call_start", tool_start), ("tool_call_args", tool_args), ("finish", finish)]
        .into_iter()
        .map(|(name, value)| (name, value.to_string()))
        .collect()
}

fn chunks(c: &mut Criterion) {
    let mut group = c.benchmark_group("chunk");
    group.throughput(Throughput::Elements(1));
    for (name, text) in samples() {
        let value: Value = serde_json::from_str(&text).expect("sample is JSON");
        assert!(parse_chunk(&value).is_ok());
        group.bench_function(format!("parse/{name}"), |b| b.iter(|| parse_chunk(black_box(&value))));
        assert_eq!(parse_chunk_str(&text).ok(), parse_chunk(&value).ok());
        group.bench_function(format!("decode_typed/{name}"), |b| b.iter(|| parse_chunk_str(black_box(&text))));
        group.bench_function(format!("decode_and_parse/{name}"), |b| {
            b.iter(|| {
                let value: Value = serde_json::from_str(black_box(&text)).expect("json");
                parse_chunk(&value)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, chunks);
criterion_main!(benches);
