//! What an output guard costs per streamed delta: the bundled `demo` rule set (block and warn
//! keywords, two redact regexes) over a 50-delta answer, with and without a match, and the
//! same answer through a set of block and warn rules only (nothing is ever held back).
//!
//! `cargo bench -p agw-guard` measures; `cargo test --benches` runs each once. Figures:
//! `docs/performance.md` ("Issue 36").

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};

use agw_guard::{GuardCatalog, RuleSet, StreamGuard};

/// A 50-delta answer of a few words per delta, as a model streams it.
fn answer(with_match: bool) -> Vec<String> {
    let words = "the weather in Tokyo is mild today with light wind from the east and a chance of rain later";
    let mut deltas: Vec<String> =
        (0..50).map(|i| format!("{} ", words.split(' ').nth(i % 18).unwrap_or("word"))).collect();
    if with_match {
        deltas[20] = "write to ann.lee@exa".into();
        deltas[21] = "mple.org today ".into();
    }
    deltas
}

fn run(sets: &[Arc<RuleSet>], deltas: &[String]) -> usize {
    let mut guard = StreamGuard::new(sets.to_vec());
    let mut shown = 0;
    for delta in deltas {
        shown += guard.push(black_box(delta)).text.len();
    }
    shown + guard.finish().text.len()
}

fn bench(c: &mut Criterion) {
    let demo = GuardCatalog::bundled().get("demo").map(|set| vec![set]).unwrap_or_default();
    let no_redact = vec![Arc::new(
        RuleSet::parse(
            "plain",
            r#"{"rules": [{"id": "b", "keywords": ["forbidden recipe", "nerve agent"], "action": "block"},
                {"id": "w", "keywords": ["diagnosis", "dosage"], "action": "warn"}]}"#,
        )
        .expect("a valid set"),
    )];
    let (plain, matching) = (answer(false), answer(true));
    let mut group = c.benchmark_group("guard");
    group.bench_function("demo_rules_50_deltas", |b| b.iter(|| run(&demo, &plain)));
    group.bench_function("demo_rules_50_deltas_one_redaction", |b| b.iter(|| run(&demo, &matching)));
    group.bench_function("block_warn_rules_50_deltas", |b| b.iter(|| run(&no_redact, &plain)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
