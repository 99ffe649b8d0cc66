//! Hot-path micro-benchmarks of chat memory: the recorder turning a live run into history lines,
//! line encoding, and the JSONL append (`ChatStore::append`, one `O_APPEND` write, no fsync);
//! and (`new_chat_run`, in **CPU time** of the process, fsync thread included) everything
//! memory does for one run of a new chat on agw's defaults, next to the bare system calls its
//! durability contract needs (the floor).
//!
//! `cargo bench -p agw-memory` measures; `cargo nextest run` runs each benchmark once
//! (criterion's test mode). Files go to a fresh directory under the system temp dir, removed at
//! the end. Figures: `docs/performance.md`.

// getrusage for the CPU-time benchmark.
#![allow(unsafe_code)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

use agw_memory::{ChatStore, FsyncPolicy, MemoryConfig, Recorder, RecorderInit};
use agw_protocol::delta::ToolStartMeta;
use agw_protocol::history::{HistoryLine, SystemSnapshot, SystemTool};
use agw_protocol::request::QueryRequest;
use agw_protocol::{AgentDelta, Assembler};

const RUN_ID: &str = "mn3kq0xa-4f7c2b1e9d8a";
const TS: i64 = 1_771_000_000_000;
const TOKENS: usize = 50;
/// Appends per history file before the benchmark starts a new chat (keeps files small).
const APPENDS_PER_FILE: u64 = 1_000;

fn query() -> QueryRequest {
    QueryRequest { message: Some("What is the weather in Tokyo?".into()), ..QueryRequest::default() }
}

fn system() -> SystemSnapshot {
    let parameters = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Shanghai"},
            "date": {"type": "string", "description": "Date as yyyy-MM-dd, e.g. 2026-02-13"},
        },
        "required": ["city", "date"],
        "additionalProperties": false,
    });
    let tool = SystemTool {
        tool_type: "function".into(),
        name: "mock_city_weather".into(),
        description: Some("Mock weather for a city on a date".into()),
        parameters: Some(parameters),
    };
    SystemSnapshot::new(Some("fixture-model".into()), "You are a benchmark agent.", vec![tool], None)
}

/// The benchmark's REACT run (tool call → result → `TOKENS` content deltas), as deltas.
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
        AgentDelta::ToolArgs { tool_id: tool_id.clone(), meta: ToolStartMeta::default(), delta: "{\"city\":\"Tokyo\",\"date\":\"2026-02-13\"}".into() },
        AgentDelta::Usage(json!({"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}).into()),
        AgentDelta::ToolEnd { tool_id: tool_id.clone() },
        AgentDelta::ToolResult {
            tool_id,
            result: r#"{"city":"Tokyo","date":"2026-02-13","temperatureC":12,"humidity":55,"windLevel":3,"condition":"Cloudy"}"#.into(),
        },
        AgentDelta::StageMarker("react-step-2".into()),
    ];
    deltas.extend((0..TOKENS).map(|i| AgentDelta::Content(format!(" token{i}"))));
    deltas.push(AgentDelta::Usage(json!({"prompt_tokens": 180, "completion_tokens": 50, "total_tokens": 230}).into()));
    deltas
}

/// What `agw_runs::sink::RunSink` does with memory on: assembler events feed the recorder;
/// stage markers and usage go to the recorder directly. Returns every line the run appends.
fn record(chat_id: &str, deltas: Vec<AgentDelta>) -> Vec<HistoryLine> {
    let mut assembler = Assembler::new(RUN_ID, chat_id, Box::new(|| TS));
    let mut recorder = Recorder::with_clock(
        RecorderInit {
            chat_id: chat_id.into(),
            run_id: RUN_ID.into(),
            query: query(),
            system: Some(system()),
            action_tools: Vec::new(),
        },
        Box::new(|| TS),
    );
    let mut events = Vec::new();
    let mut lines = Vec::new();
    assembler.bootstrap(query().to_event(RUN_ID, chat_id), None, &mut events);
    recorder.observe_events(&events);
    for delta in deltas {
        events.clear();
        if matches!(delta, AgentDelta::StageMarker(_) | AgentDelta::Usage(_)) {
            lines.extend(recorder.observe(&delta, &[]));
        }
        assembler.push(delta, &mut events).expect("valid script");
        recorder.observe_events(&events);
    }
    lines.extend(recorder.finish(&[]));
    lines
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn memory(c: &mut Criterion) {
    let chat_id = uuid::Uuid::new_v4().to_string();
    let script = react_run();
    let lines = record(&chat_id, script.clone());
    assert_eq!(lines.len(), 3, "query line + one step line per REACT step");

    let mut group = c.benchmark_group("memory");
    group.throughput(Throughput::Elements(1));
    // Recording alone (assembler included, as on the live path): no I/O.
    group.bench_function("record_react_run", |b| {
        b.iter_batched(|| script.clone(), |deltas| record(&chat_id, deltas), criterion::BatchSize::SmallInput);
    });
    let step = lines.last().expect("a step line").clone();
    let step_bytes = step.to_json().expect("encodes").len() as u64;
    group.throughput(Throughput::Bytes(step_bytes));
    group.bench_function("encode_step_line", |b| b.iter(|| black_box(&step).to_json()));

    let dir = TempDir(std::env::temp_dir().join(format!("agw-memory-bench-{}", uuid::Uuid::new_v4())));
    let store =
        ChatStore::new(MemoryConfig { dir: dir.0.clone(), k: 20, fsync: FsyncPolicy::Never, action_tools: Vec::new() });
    // One step line per append (what a REACT step boundary writes), files rotated every
    // APPENDS_PER_FILE appends outside the timed section.
    group.bench_function("append_step_line", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let chat = uuid::Uuid::new_v4().to_string();
                let batch = (iters - done).min(APPENDS_PER_FILE);
                let start = Instant::now();
                for _ in 0..batch {
                    store.append(&chat, std::slice::from_ref(&step)).expect("append");
                }
                total += start.elapsed();
                done += batch;
                if let Some(path) = store.history_path(&chat) {
                    let _ = std::fs::remove_file(path);
                }
            }
            total
        });
    });
    // A whole run's lines with memory on: recording + encoding + the three appends.
    group.throughput(Throughput::Elements(1));
    group.bench_function("record_and_append_react_run", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let chat = uuid::Uuid::new_v4().to_string();
                let batch = (iters - done).min(APPENDS_PER_FILE);
                let start = Instant::now();
                for _ in 0..batch {
                    let lines = record(&chat, script.clone());
                    store.append(&chat, &lines[..2]).expect("append");
                    store.append_final(&chat, &lines[2..]).expect("append");
                }
                total += start.elapsed();
                done += batch;
                if let Some(path) = store.history_path(&chat) {
                    let _ = std::fs::remove_file(path);
                }
            }
            total
        });
    });
    group.finish();
}

/// User + system CPU time of the whole process (every thread: the fsync thread's work counts).
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// One run of a new chat with memory on, agw's defaults (`MEMORY_CHAT_FSYNC=run`), measured in
/// CPU time: `store` is what agw's run path calls (`upsert_chat`, `chat_context`, the step append,
/// `append_final`, then `flush` so the end-of-run fsync is inside the measurement); `floor` is
/// the same bytes with the same durability by bare `std::fs` calls — the index line appended
/// and fdatasynced, the history file created and written, its directory fsynced, the last lines
/// appended and fdatasynced, the totals line appended. Files are not removed until the end
/// (deleting inodes makes the next creations slower on ext4).
fn new_chat_run(c: &mut Criterion) {
    let dir = TempDir(std::env::temp_dir().join(format!("agw-memory-bench-{}", uuid::Uuid::new_v4())));
    let store = ChatStore::new(MemoryConfig {
        dir: dir.0.clone(),
        k: 20,
        fsync: FsyncPolicy::EveryRun,
        action_tools: Vec::new(),
    });
    let script = react_run();
    let mut group = c.benchmark_group("new_chat_run_cpu");
    group.throughput(Throughput::Elements(1));
    group.bench_function("store", |b| {
        b.iter_custom(|iters| {
            let chats: Vec<String> = (0..iters).map(|_| uuid::Uuid::new_v4().to_string()).collect();
            let start = process_cpu();
            for chat in &chats {
                store
                    .upsert_chat(chat, "What is the weather in Tokyo?", Some("bench"), Some("bench"), TS)
                    .expect("upsert");
                black_box(store.chat_context(chat).expect("context"));
                let lines = record(chat, script.clone());
                store.append(chat, &lines[..2]).expect("append");
                store.append_final(chat, &lines[2..]).expect("append");
                store.flush();
            }
            process_cpu() - start
        });
    });

    let floor_dir = dir.0.join("floor");
    std::fs::create_dir_all(&floor_dir).expect("floor dir");
    let sample = record(&uuid::Uuid::new_v4().to_string(), script.clone());
    let encode = |lines: &[HistoryLine]| {
        lines
            .iter()
            .flat_map(|l| [l.to_json().expect("encodes").into_bytes(), b"\n".to_vec()])
            .flatten()
            .collect::<Vec<u8>>()
    };
    let (first, last) = (encode(&sample[..2]), encode(&sample[2..]));
    let index_line = vec![b'x'; 220];
    group.bench_function("floor", |b| {
        use std::io::Write as _;
        let append = |path: &std::path::Path| std::fs::OpenOptions::new().create(true).append(true).open(path);
        let mut index = append(&floor_dir.join("_chats.jsonl")).expect("index");
        b.iter_custom(|iters| {
            let paths: Vec<PathBuf> =
                (0..iters).map(|_| floor_dir.join(format!("{}.json", uuid::Uuid::new_v4()))).collect();
            let start = process_cpu();
            for path in &paths {
                index.write_all(&index_line).expect("index line");
                index.sync_data().expect("index fsync");
                black_box(std::fs::read(path).is_err());
                append(path).and_then(|mut f| f.write_all(&first)).expect("first lines");
                std::fs::File::open(&floor_dir).and_then(|d| d.sync_all()).expect("dir fsync");
                let mut file = append(path).expect("reopen");
                file.write_all(&last).expect("last lines");
                file.sync_data().expect("history fsync");
                index.write_all(&index_line).expect("totals line");
            }
            process_cpu() - start
        });
    });
    group.finish();
}

criterion_group!(benches, memory, new_chat_run);
criterion_main!(benches);
