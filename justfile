# Task shortcuts (optional; every recipe is a plain cargo command you can run yourself).

# Start the server with the bundled demo agents and the offline demo model.
serve:
    cargo run -p agw -- serve

# Run every test (the README's command; CI runs exactly this).
test:
    cargo test --workspace

# The same suite under cargo-nextest (one process per test), if you have it installed.
nextest:
    cargo nextest run --workspace --all-targets --no-fail-fast

# Everything CI runs (lints, tests, docs, examples, bench smoke, cargo-deny, scripted suites).
ci:
    bash .ci/run

# Lints CI enforces.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Benchmarks (see docs/performance.md): criterion micro-benchmarks of the hot path, then the
# end-to-end load benchmark (release build of agw + agw-load; ~5 minutes on 2 cores).
# Pass flags through, e.g. `just bench --scenarios overhead --memory off`.
bench *ARGS:
    cargo bench -p agw-protocol -p agw-llm -p agw-memory --bench '*'
    cargo build --release -p agw -p agw-bench
    ./target/release/agw-load {{ARGS}}

# Only the load benchmark, e.g. `just load --scenarios hold --hold-streams 1000`.
load *ARGS:
    cargo build --release -p agw -p agw-bench
    ./target/release/agw-load {{ARGS}}

# Reliability (see docs/reliability.md): the long soak (default 180 s of mixed runs with faults).
soak SECS="180":
    AGW_SOAK_SECS={{SECS}} cargo test -p agw-http --test soak -- --nocapture

# Reliability: every libFuzzer target for SECS seconds (needs nightly and `cargo install cargo-fuzz`).
fuzz SECS="90" *TARGETS:
    fuzz/run.sh {{SECS}} {{TARGETS}}

# Reliability: the stable fuzz bodies over 100,000 mutants per target and 20,000 property cases.
fuzz-stable:
    AGW_FUZZ_CASES=100000 cargo test -p agw-fuzz -- --nocapture
    PROPTEST_CASES=20000 cargo test -p agw-protocol --test assembler_props -p agw-memory --test replay_props
