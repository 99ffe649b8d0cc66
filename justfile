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
