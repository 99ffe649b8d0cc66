//! agw-fuzz — the fuzz bodies of agw's untrusted-input parsers and a deterministic mutator.
//!
//! Owns: one body per input kind ([`targets`]: agent definitions with their `"""` preprocessing,
//! provider SSE chunks, the query and submit request bodies, `SKILL.md` frontmatter, tool
//! definition files, chat history lines), each a `fn(&[u8])` that must not panic and that checks
//! the invariants its parser promises (round trips, chunking independence, no empty deltas);
//! where their seed inputs live ([`corpus`]); and a structure-aware mutator ([`mutate`]) that
//! derives thousands of hostile variants of those seeds from a fixed seed, reproducibly.
//!
//! Used twice: by the libFuzzer targets of the cargo-fuzz project in `fuzz/` (nightly, run by
//! `fuzz/run.sh`), and by this crate's stable tests, which feed every body its seeds, the saved
//! crash regressions (`fuzz/regressions/<target>/`) and a few thousand mutants — the part CI runs.
//! Results and reproduction commands: `docs/reliability.md`.
//!
//! Must never: do network I/O or write files (bodies are pure), or depend on randomness that is
//! not derived from its explicit seed.

#![forbid(unsafe_code)]
pub mod corpus;
pub mod mutate;
pub mod targets;

/// A fuzz body: feeds one input to a parser and checks its invariants (panics on a finding).
pub type Body = fn(&[u8]);

/// Every target: `(name, body)`. The name is the cargo-fuzz target and the corpus directory name.
pub const TARGETS: [(&str, Body); 7] = [
    ("agent_definition", targets::agent_definition),
    ("sse_chunk", targets::sse_chunk),
    ("query_request", targets::query_request),
    ("submit_request", targets::submit_request),
    ("skill_md", targets::skill_md),
    ("tool_definition", targets::tool_definition),
    ("history_line", targets::history_line),
];
