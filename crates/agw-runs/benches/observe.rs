//! The read side of a run's buffer per event: an observer reading frames (the native protocol),
//! reading typed events the run kept (the protocol façades since issue 33), and reading typed
//! events decoded from the frames (what the façades did before, and still do for a run that
//! keeps none). One publish + one read per content delta, as a streaming run does.
//!
//! `cargo bench -p agw-runs` measures; `cargo test --benches` runs each once. Figures:
//! `docs/performance.md`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use agw_protocol::Event;
use agw_protocol::event::ContentDelta;
use agw_runs::{DisconnectPolicy, Observer, RunHandle, RunTracker};

const DELTAS: u64 = 200;

fn delta(seq: u64) -> Event {
    Event::new(seq, 1_771_000_000_000, ContentDelta { content_id: "c_mn3kq0xa_1".into(), delta: " token".into() })
}

fn run(tracker: &RunTracker, keep_events: bool) -> (Arc<RunHandle>, Observer) {
    let handle =
        tracker.register("mn3kq0xa-4f7c2b1e9d8a", "chat", "agent", None, DisconnectPolicy::Continue, keep_events);
    let observer = handle.observe(0).expect("an observer");
    (handle, observer)
}

/// `DELTAS` publishes, each read at once by an observer of the kind `read` names.
fn stream(rt: &tokio::runtime::Runtime, keep_events: bool, typed: bool) {
    let tracker = RunTracker::default();
    let (handle, mut observer) = run(&tracker, keep_events);
    rt.block_on(async {
        for seq in 1..=DELTAS {
            handle.publish([delta(seq)]);
            if typed {
                black_box(observer.next_events().await);
            } else {
                black_box(observer.next_chunk().await);
            }
        }
    });
}

fn observe(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("observe");
    group.throughput(Throughput::Elements(DELTAS));
    group.bench_function("frames", |b| b.iter(|| stream(&rt, false, false)));
    group.bench_function("typed_kept", |b| b.iter(|| stream(&rt, true, true)));
    group.bench_function("typed_decoded", |b| b.iter(|| stream(&rt, false, true)));
    group.finish();
}

criterion_group!(benches, observe);
criterion_main!(benches);
