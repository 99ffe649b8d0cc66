# Task shortcuts (optional; every recipe is a plain cargo command you can run yourself).

# Start the server with the bundled demo agents and the offline demo model.
serve:
    cargo run -p agw -- serve

# Run every test (the same command CI runs).
test:
    cargo nextest run --workspace --all-targets --no-fail-fast

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
