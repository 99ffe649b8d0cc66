//! Hot-path micro-benchmarks of agw-protocol: the event assembler and SSE frame encoding.
//!
//! `cargo bench -p agw-protocol` measures; `cargo nextest run` / `cargo test --benches` run every
//! benchmark once as a smoke test (criterion's test mode). Figures: `docs/performance.md`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

use agw_protocol::citation::{CiteFilter, CiteMarker};
use agw_protocol::delta::ToolStartMeta;
use agw_protocol::event::{ContentDelta, ToolStart};
use agw_protocol::request::QueryRequest;
use agw_protocol::sse::write_event;
use agw_protocol::{AgentDelta, Assembler, Event};

const RUN_ID: &str = "mn3kq0xa-4f7c2b1e9d8a";
const CHAT_ID: &str = "5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f";
const TS: i64 = 1_771_000_000_000;
const TOKENS: usize = 50;

/// The deltas of the benchmark's REACT run: a tool call (start + two argument pieces), its
/// result, then an answer of `TOKENS` content deltas — what the load benchmark's scenario 1 streams.
fn react_run() -> Vec<AgentDelta> {
    let tool_id = "call_weather_1".to_string();
    let meta = ToolStartMeta {
        tool_name: "mock_city_weather".into(),
        tool_type: "function".into(),
        tool_api: None,
        description: Some("Mock weather for a city on a date".into()),
        frontend: None,
    };
    let mut deltas = vec![
        AgentDelta::StageMarker("react-step-1".into()),
        AgentDelta::ToolArgs { tool_id: tool_id.clone(), meta, delta: String::new() },
        AgentDelta::ToolArgs { tool_id: tool_id.clone(), meta: ToolStartMeta::default(), delta: "{\"city\":\"Tokyo\",".into() },
        AgentDelta::ToolArgs { tool_id: tool_id.clone(), meta: ToolStartMeta::default(), delta: "\"date\":\"2026-02-13\"}".into() },
        AgentDelta::ToolEnd { tool_id: tool_id.clone() },
        AgentDelta::ToolResult {
            tool_id,
            result: r#"{"city":"Tokyo","date":"2026-02-13","temperatureC":12,"humidity":55,"windLevel":3,"condition":"Cloudy"}"#.into(),
        },
        AgentDelta::StageMarker("react-step-2".into()),
    ];
    deltas.extend((0..TOKENS).map(|i| AgentDelta::Content(format!(" token{i}"))));
    deltas
}

fn assemble(deltas: Vec<AgentDelta>, out: &mut Vec<Event>) {
    let mut assembler = Assembler::new(RUN_ID, CHAT_ID, Box::new(|| TS));
    let query = QueryRequest { message: Some("What is the weather in Tokyo?".into()), ..QueryRequest::default() };
    assembler.bootstrap(query.to_event(RUN_ID, CHAT_ID), None, out);
    for delta in deltas {
        assembler.push(delta, out).expect("valid script");
    }
    assembler.complete("stop", out);
}

fn assembler(c: &mut Criterion) {
    let script = react_run();
    let mut events = Vec::new();
    assemble(script.clone(), &mut events);
    let mut group = c.benchmark_group("assembler");

    // A whole REACT run (bootstrap → tool call → 50-token answer → run.complete).
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("react_run_50_tokens", |b| {
        b.iter_batched(
            || (script.clone(), Vec::with_capacity(events.len())),
            |(deltas, mut out)| {
                assemble(deltas, &mut out);
                out
            },
            BatchSize::SmallInput,
        );
    });

    // Steady state: one content delta into an open content block = one event.
    group.throughput(Throughput::Elements(1));
    group.bench_function("content_delta", |b| {
        let mut assembler = Assembler::new(RUN_ID, CHAT_ID, Box::new(|| TS));
        let mut out = Vec::with_capacity(4);
        assembler.push(AgentDelta::Content("first".into()), &mut out).expect("open block");
        b.iter(|| {
            out.clear();
            assembler.push(AgentDelta::Content(black_box(" token").to_owned()), &mut out).expect("delta");
            black_box(&out);
        });
    });
    group.finish();
}

fn sse(c: &mut Criterion) {
    let delta = Event::new(42, TS, ContentDelta { content_id: format!("{RUN_ID}_c_1"), delta: " token".into() });
    let start = Event::new(
        9,
        TS,
        ToolStart {
            tool_id: "call_weather_1".into(),
            run_id: RUN_ID.into(),
            task_id: None,
            tool_name: Some("mock_city_weather".into()),
            tool_type: Some("function".into()),
            tool_api: None,
            tool_params: None,
            description: Some("Mock weather for a city on a date".into()),
            tool_key: None,
            tool_timeout: None,
        },
    );
    let mut events = Vec::new();
    assemble(react_run(), &mut events);

    let mut group = c.benchmark_group("sse");
    for (name, event) in [("content_delta_frame", &delta), ("tool_start_frame", &start)] {
        let mut buf = Vec::with_capacity(512);
        write_event(event, &mut buf);
        group.throughput(Throughput::Bytes(buf.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                write_event(black_box(event), &mut buf);
                black_box(&buf);
            });
        });
    }
    // Every frame of the whole run (what one run writes to the socket, minus heartbeats).
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("react_run_frames", |b| {
        let mut buf = Vec::with_capacity(16 * 1024);
        b.iter(|| {
            buf.clear();
            for event in &events {
                write_event(event, &mut buf);
            }
            black_box(&buf);
        });
    });
    group.finish();
}

/// The citation filter a citing agent's content deltas pass through (issue 35): an answer of
/// `TOKENS` word deltas without markers, and the same answer with a marker after every tenth word,
/// one of them split across two deltas.
fn citations(c: &mut Criterion) {
    let plain: Vec<String> = (0..TOKENS).map(|i| format!("word{i} ")).collect();
    let cited: Vec<String> = (0..TOKENS)
        .map(|i| match i % 10 {
            8 => format!("word{i} [ci"),
            9 => format!("te:{i}] word{i} "),
            4 => format!("word{i}[cite:{i}] "),
            _ => format!("word{i} "),
        })
        .collect();
    let mut group = c.benchmark_group("citations");
    group.throughput(Throughput::Elements(TOKENS as u64));
    for (name, deltas) in [("plain_answer_50_deltas", &plain), ("cited_answer_50_deltas", &cited)] {
        group.bench_function(name, |b| {
            let mut out = Vec::with_capacity(8);
            b.iter(|| {
                let mut filter = CiteFilter::new(CiteMarker::default());
                // The run owns each delta it passes on (`push_owned`, as `turn.rs` does).
                for delta in deltas {
                    filter.push_owned(black_box(delta.clone()), &mut out);
                    out.clear();
                }
                filter.finish(&mut out);
                black_box(&out);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, assembler, sse, citations);
criterion_main!(benches);
