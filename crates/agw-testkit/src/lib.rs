//! agw-testkit — a scripted model provider over real loopback HTTP, for agw's tests and yours.
//!
//! Owns: a fake OpenAI-compatible (or Anthropic) endpoint that speaks the real wire format — SSE
//! chunks, `tool_calls` deltas, `reasoning_content`, a usage chunk, `[DONE]` — frame by frame with
//! the delays you script, and records every request it gets; plus small helpers to drive a
//! provider in a test ([`drive`]). Take it as a dev-dependency to test an agent or your own code
//! against agw's provider streaming without a network or an API key.
//!
//! Must never: be used by the gateway's serving path (it is test support), or talk to anything
//! but loopback.
//!
//! * [`Transcript`] — one scripted HTTP response: status, headers, raw body frames with
//!   per-frame delays, and how the body ends ([`End`]: complete, stall, abort). Loadable from the
//!   JSON files in `fixtures/providers/` ([`Transcript::provider_file`]) or built in code
//!   ([`Transcript::openai_text`], [`Transcript::openai_tool_call`], …).
//! * [`FixtureServer`] — serves transcripts chosen by a responder function, stage header,
//!   user-message substring or a queue, records every request ([`RecordedRequest`]) with frame
//!   write times and whether the client hung up early ([`StreamOutcome`]).
//! * [`prompt_cache::PromptCacheSim`] — an Anthropic prompt cache, simulated: checks a request's
//!   `cache_control` breakpoints and answers with the cache reads and writes they would give.
//! * [`otlp::OtlpReceiver`] — an OTLP trace receiver (HTTP/protobuf and gRPC on one port) that
//!   decodes the exported spans, for tests of tracing.

//! ```
//! use agw_llm::{ChatProvider, LlmDelta};
//! use agw_testkit::drive::{collect, options, request};
//! use agw_testkit::{FixtureServer, Transcript};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // A model that streams "Hel" + "lo" (each chunk its own SSE frame), then finish and [DONE].
//! let server = FixtureServer::with_default(Transcript::openai_text(&["Hel", "lo"])).await.unwrap();
//! let provider = server.provider("fixture"); // an OpenAiCompatibleProvider pointed at it
//! let stream = provider.stream(request("Say hello"), options("test")).await.unwrap();
//! let (deltas, error) = collect(stream).await;
//! assert!(error.is_none());
//! assert_eq!(deltas[0], LlmDelta::Content { text: "Hel".into() });
//! // What the provider sent upstream is recorded.
//! let sent = server.request(0).unwrap();
//! assert_eq!(sent.last_user_message(), Some("Say hello"));
//! # });
//! ```

#![forbid(unsafe_code)]
pub mod drive;
mod logs;
pub mod otlp;
pub mod prompt_cache;
mod server;
mod slow_client;
mod temp;
mod transcript;

use std::path::PathBuf;

pub use logs::LogCapture;
pub use server::{
    FIXTURE_API_KEY, FIXTURE_MODEL, FixtureServer, RecordedRequest, Responder, StreamOutcome, message_text,
};
pub use slow_client::slow_client;
pub use temp::TempDir;
pub use transcript::{
    CHUNK_CREATED, CHUNK_ID, CHUNK_MODEL, End, RawFrame, Transcript, chunk_json, providers_dir, sse_data,
    usage_chunk_json,
};

/// Failure to load a transcript file.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read.
    #[error("cannot read transcript {path}: {source}")]
    Io {
        /// The transcript file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The file is not a transcript: invalid JSON, a wrong type or an unknown key.
    #[error("invalid transcript {path}: {source}")]
    Json {
        /// The transcript file.
        path: PathBuf,
        /// Where and why parsing failed.
        source: serde_json::Error,
    },
}
