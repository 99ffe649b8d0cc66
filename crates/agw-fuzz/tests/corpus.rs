//! The fuzz bodies on the stable toolchain (the part of the fuzzing CI runs): every target gets
//! its seeds, every saved crash regression, and a fixed stream of structure-aware mutants.
//!
//! `AGW_FUZZ_CASES` sets the number of mutants per target (default 3000); `AGW_FUZZ_SEED` moves
//! the stream (default 0). A failure names the target and the case; the mutant is written to
//! `target/fuzz-failures/<target>-<case>` so it can be replayed with the libFuzzer target or
//! kept in `fuzz/regressions/<target>/`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use agw_fuzz::mutate::{Rng, mutant, seed_of};
use agw_fuzz::{Body, TARGETS, corpus};

fn cases() -> usize {
    std::env::var("AGW_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

fn base_seed() -> u64 {
    std::env::var("AGW_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn body_of(name: &str) -> Body {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, body)| *body).expect("known target")
}

fn save_failure(target: &str, case: &str, input: &[u8]) -> String {
    let dir = corpus::workspace_root().join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{case}"));
    let _ = std::fs::write(&path, input);
    path.display().to_string()
}

fn run_target(name: &str) {
    let body = body_of(name);
    let seeds = corpus::seeds(name);
    assert!(!seeds.is_empty(), "{name} has no seeds");
    let started = Instant::now();
    for (i, seed) in seeds.iter().enumerate() {
        if catch_unwind(AssertUnwindSafe(|| body(seed))).is_err() {
            panic!("{name}: seed {i} crashed (saved to {})", save_failure(name, &format!("seed-{i}"), seed));
        }
    }
    let regressions = corpus::regressions(name);
    for (path, input) in &regressions {
        if catch_unwind(AssertUnwindSafe(|| body(input))).is_err() {
            panic!("{name}: regression {} crashes again", path.display());
        }
    }
    let mut rng = Rng::new(seed_of(name) ^ base_seed());
    let dictionary = corpus::dictionary(name);
    let n = cases();
    for case in 0..n {
        let input = mutant(&seeds, dictionary, &mut rng);
        if catch_unwind(AssertUnwindSafe(|| body(&input))).is_err() {
            let path = save_failure(name, &format!("case-{case}"), &input);
            panic!("{name}: mutant {case} (seed {}) crashed; input saved to {path}", base_seed());
        }
    }
    eprintln!(
        "{name}: {} seeds, {} regressions, {n} mutants in {:?}",
        seeds.len(),
        regressions.len(),
        started.elapsed()
    );
}

#[test]
fn agent_definition() {
    run_target("agent_definition");
}

#[test]
fn sse_chunk() {
    run_target("sse_chunk");
}

#[test]
fn query_request() {
    run_target("query_request");
}

#[test]
fn submit_request() {
    run_target("submit_request");
}

#[test]
fn skill_md() {
    run_target("skill_md");
}

#[test]
fn tool_definition() {
    run_target("tool_definition");
}

#[test]
fn history_line() {
    run_target("history_line");
}

#[test]
fn every_target_has_a_test_here() {
    let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    let source = include_str!("corpus.rs");
    for name in names {
        assert!(source.contains(&format!("fn {name}()")), "target {name} has no #[test] in tests/corpus.rs");
        assert!(
            corpus::workspace_root().join(format!("fuzz/fuzz_targets/{name}.rs")).exists(),
            "target {name} has no libFuzzer target in fuzz/fuzz_targets/"
        );
    }
}
