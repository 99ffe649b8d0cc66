//! Test support: a scripted provider (OpenAI-compatible or Anthropic framing) over real loopback
//! HTTP.
//!
//! Used by this crate's tests, other crates' integration tests and benchmarks. Not part of the
//! gateway: nothing in the server path uses it.
//!
//! * [`Transcript`] — one scripted HTTP response: status, headers, raw body frames with
//!   per-frame delays, and how the body ends ([`End`]: complete, stall, abort). Loadable from the
//!   JSON files in `fixtures/providers/` ([`Transcript::provider_file`]) or built in code
//!   ([`Transcript::openai_text`], [`Transcript::openai_tool_call`], …).
//! * [`FixtureServer`] — serves transcripts chosen by a responder function, stage header,
//!   user-message substring or a queue, records every request ([`RecordedRequest`]) with frame
//!   write times and whether the client hung up early ([`StreamOutcome`]).

mod server;
mod transcript;

use std::path::PathBuf;

pub use server::{FIXTURE_API_KEY, FIXTURE_MODEL, FixtureServer, RecordedRequest, Responder, StreamOutcome};
pub use transcript::{
    CHUNK_CREATED, CHUNK_ID, CHUNK_MODEL, End, RawFrame, Transcript, chunk_json, providers_dir, sse_data,
    usage_chunk_json,
};

/// Failure to load a transcript file.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot read transcript {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("invalid transcript {path}: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
}
